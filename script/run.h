/* run: one run of a user's training script (a script job's attempt), in a bubblewrap sandbox
 * or directly, with its logs, metrics and checkpoint snapshots handed to the caller as they come.
 *
 * Threading: script_run blocks until the script has ended and calls the hooks on the calling
 * thread. The child's PR_SET_PDEATHSIG fires when the *thread* that started it ends, which is
 * this one, and it does not return before the script is gone. */
#ifndef TRAINYARD_SCRIPT_RUN_H
#define TRAINYARD_SCRIPT_RUN_H

#include <stdint.h>

#include <jansson.h>

typedef struct script_opts {
    const char *job_dir;      /* the job folder (exists); run.c makes code/ data/ output/
                                 checkpoint/ tmp/ home/ under it if missing. The caller has already
                                 unpacked the code into job_dir/code, put the dataset (if any) in
                                 job_dir/data, and a resumed checkpoint into job_dir/checkpoint. */
    const char *script;       /* training_script, relative to code/ */
    const char *python;       /* interpreter for .py: a path or a name looked up on PATH outside the
                                 sandbox (default "python3") */
    const char *const *env;   /* extra NAME=VALUE strings, NULL-terminated (job id, hyperparameters,
                                 device); run.c adds the path variables, PATH, HOME, TMPDIR,
                                 LANG=C.UTF-8, PYTHONUNBUFFERED=1 and nothing else from the
                                 worker's environment (its token stays out) */
    int sandbox;              /* 1: bubblewrap; 0: run directly (the worker's --no-sandbox) */
    int network;              /* 1: the sandbox keeps the network (worker --script-network) */
    uint64_t memory_bytes;    /* RLIMIT_DATA of the script (0: none) */
    const char *ro_binds;     /* comma-separated extra read-only paths (worker --script-ro-bind) */
    double grace_s;           /* SIGTERM → SIGKILL; 0: 10 s */
    double checkpoint_poll_s; /* how often checkpoint/ is looked at; 0: 2 s */
    int netns_holder;         /* > 0: the sandbox joins this holder's network namespace
                                 (script/netns.h: the ranks of one job reach each other and
                                 nothing else) instead of making its own; needs sandbox */
} script_opts;

typedef struct script_hooks {
    void *user;
    void (*on_log)(void *user, const char *line);  /* each line of stdout/stderr, live */
    void (*on_metrics)(void *user, json_t *epoch); /* each valid metrics line, borrowed */
    /* A snapshot of checkpoint/ changed and then stayed the same for one poll: packed to
     * tar_gz (a file in job_dir the callee may rename away; else run.c removes it) with
     * the largest metrics epoch seen so far (>= 1). */
    void (*on_checkpoint)(void *user, const char *tar_gz, int epoch);
    int (*should_stop)(void *user); /* polled every <= 200 ms: nonzero → stop (see below) */
} script_hooks;

typedef struct script_result {
    int exit_code;   /* the script's exit status, or -1 */
    int signal;      /* the signal that ended it, or 0 */
    int stopped;     /* should_stop asked for the end */
    char tail[2048]; /* the last log lines (up to 20), for a failed job's error */
} script_result;

/* Runs the script to its end and returns 0 (whatever its exit status: see res), or -errno when
 * it could not be started (bwrap missing, the script file missing: a sentence in err). */
int script_run(const script_opts *o, const script_hooks *h, script_result *res, char *err);
/* 1 when bubblewrap can run a sandbox here (tried once: `bwrap ... true`), else 0 with why. */
int script_sandbox_available(char *err);

#endif
