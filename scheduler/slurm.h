/* slurm: the Slurm executor — `trainyard serve --executor slurm` hands each queued built-in job
 * to Slurm (sbatch) instead of waiting for a worker to lease it.
 *
 * For every queued job not yet bound (script jobs only when serve runs them, --allow-scripts:
 * else they stay for ordinary workers), one pass of the executor (slurm_executor_tick, once a
 * second on its own thread):
 *   1. in one transaction: a worker token (role worker, named slurm-<job id>), a worker row made
 *      for this job alone (bound = 1, slots = replicas, every device kind, devices "[]", scripts
 *      when it is a script job) and the
 *      job bound to it (jobs.for_worker), so no other worker can lease it;
 *   2. `sbatch --parsable` with the job's shape (slurm_sbatch_argv) and a batch script on its
 *      stdin that starts the ranks with `srun --mpi=pmix trainyard-replica --server URL
 *      --worker WID ...` (slurm_script_build); the token reaches the ranks only through
 *      sbatch's environment (TRAINYARD_TOKEN, which sbatch exports), never a file or argv;
 *   3. the Slurm job id recorded (jobs.slurm_job_id) and "submitted to Slurm as job N" logged
 *      in the job's log. When sbatch fails, step 1 is undone and the job waits, queued and
 *      unbound, SLURM_BACKOFF_MIN_MS doubling to SLURM_BACKOFF_MAX_MS before the next try.
 * Rank 0 leases the job with that token like any worker (running), reports through the worker
 * protocol and completes it.
 *
 * Then the bound jobs' Slurm jobs are polled (`squeue -h -t all -o "%i %T %r" -j IDS`;
 * accounting is not needed) and each bound job is settled by its Slurm state (slurm_state_class):
 *   waiting (PENDING, CONFIGURING, ...) or alive (RUNNING, COMPLETING, ...): nothing; the job
 *     is queued until rank 0 leases it; a queued job keeps squeue's reason (%r: Resources,
 *     Priority, ...) in jobs.slurm_reason, written when it changes, for its `waiting`;
 *   ended (COMPLETED, FAILED, NODE_FAIL, TIMEOUT, CANCELLED, ...) or no longer listed, while
 *     the job is queued or running: the worker is lost (sched_worker_lost: the attempt counts
 *     as after a lapsed lease, the job is queued again resuming from its checkpoint, or fails
 *     once max_attempts are used), its token revoked, the job unbound; the next pass submits
 *     it again as a new Slurm job;
 *   the job ended (any way) while its Slurm job still waits or runs: scancel at once for a
 *     cancelled job, after SLURM_END_GRACE_MS for one that succeeded or failed (rank 0 is
 *     exiting by itself); once Slurm has let it go, the token is revoked, the worker marked
 *     gone and the job's for_worker cleared (its slurm_job_id stays, shown in the job).
 * A squeue that fails (controller down) changes nothing: no job is requeued on a guess.
 *
 * Invariants: a job with for_worker set and its Slurm job not yet settled is "live"; only this
 * module binds jobs (jobs.for_worker) and it runs on one thread, so a bound job without a
 * slurm_job_id exists only after serve died during an sbatch: the next serve's first pass
 * treats it as lost (the stray Slurm job's rank 0 then finds its token revoked and exits).
 *
 * Layer: links db and util only; the caller (serve) is told what changed through a callback
 * and raises its own signals. Processes are started with posix_spawnp and argv arrays; nothing
 * from a job document reaches a shell (the script holds serve's settings, quoted). */
#ifndef TRAINYARD_SCHEDULER_SLURM_H
#define TRAINYARD_SCHEDULER_SLURM_H

#include <stddef.h>
#include <stdint.h>

#include "db/db.h"
#include "scheduler/expiry.h"
#include "util/datadir.h"

#define SLURM_BACKOFF_MIN_MS 5000            /* after a failed sbatch, the first wait */
#define SLURM_BACKOFF_MAX_MS (5 * 60 * 1000) /* and the longest */
#define SLURM_END_GRACE_MS   10000           /* a finished job's Slurm job may exit by itself */
#define SLURM_MAX_JOBS       128             /* jobs submitted or polled per pass */
#define SLURM_CMD_TIMEOUT_MS 30000           /* an sbatch, squeue or scancel that hangs */
#define SLURM_TIME_MARGIN_S  120             /* --time beyond the job's own runtime limit */
#define SLURM_SCRIPT_MAX     8192            /* bytes of a batch script */
#define SLURM_ID_MAX         32              /* bytes of a Slurm job id, NUL included */

/* What the executor needs from serve; strings are borrowed for the executor's life. */
typedef struct slurm_opts {
    const char *db_path;       /* the database (the executor opens its own connection) */
    const char *data_dir;      /* for the batch jobs' output files (datadir_slurm_output) */
    const char *artifacts_dir; /* checkpoints settled when a job ends */
    const char *replica_exe;   /* trainyard-replica, as the compute nodes see it */
    const char *server_url;    /* what the ranks connect to (--advertise-url) */
    const char *pin_cert;      /* passed as --pin-cert, or NULL */
    const char *partition;     /* sbatch --partition, or NULL */
    const char *dataset_root, *dataset_allow, *dataset_ca, *max_dataset_bytes, *dataset_cache;
    int scripts; /* serve --allow-scripts: script jobs go to Slurm too, their ranks run the script
                  */
    const char *const *script_args; /* NULL-terminated: serve's script flags (cli_script.c), for
                                       the ranks; NULL: none */
    long checkpoint_s;              /* --checkpoint-seconds for rank 0; < 0: its default */
    long dataset_stall_s;           /* --dataset-stall-seconds for rank 0; <= 0: its default */
    /* The commands (a name is looked up in PATH): sbatch, squeue, scancel when NULL. */
    const char *sbatch, *squeue, *scancel;
    void (*log)(const char *line); /* one line per submit, loss, cancel; NULL: none */
    /* Called after a pass that changed jobs (st counts them; st->requeued: jobs queued again,
     * which a local worker's parked lease may want to know; logs: job log lines added), or a
     * pending job's squeue reason. */
    void (*changed)(void *user, const sched_expiry_stats *st);
    void *user;
} slurm_opts;

/* One job's shape, for sbatch. */
typedef struct slurm_submit {
    const char *job_id;            /* trainyard's */
    const char *worker_id;         /* the worker row made for it */
    int replicas;                  /* --ntasks */
    int nodes;                     /* --nodes; 0: Slurm places the tasks */
    int gpu;                       /* resources.device is "gpu" */
    int64_t time_limit_s;          /* --time; 0: none given */
    char output[DATADIR_PATH_MAX]; /* --output */
} slurm_submit;

/* An argv for sbatch and the storage its words point into. */
typedef struct slurm_argv {
    const char *v[24];
    char words[10][96];
} slurm_argv;

/* What a Slurm state means for trainyard. */
enum slurm_class { SLURM_WAITING, SLURM_ALIVE, SLURM_ENDED };

typedef struct slurm_executor slurm_executor;

/* Starts the executor's thread (a pass now, then once a second); *out is stopped and freed by
 * slurm_executor_stop. -ENOENT (err says which) when sbatch or replica_exe cannot be run. */
int slurm_executor_start(const slurm_opts *o, slurm_executor **out, char *err);
/* Stops the thread after its pass and frees x; Slurm jobs keep running (a restarted serve
 * polls them again); accepts NULL. */
void slurm_executor_stop(slurm_executor *x);

/* Makes an executor without a thread, on connection d (borrowed), for slurm_executor_tick:
 * for tests. Free it with slurm_executor_stop. */
int slurm_executor_new(const slurm_opts *o, db *d, slurm_executor **out, char *err);
/* One pass at now (ms): submit the unbound queued jobs, settle the bound ones. *st counts the
 * jobs whose state changed. */
int slurm_executor_tick(slurm_executor *x, int64_t now, sched_expiry_stats *st, char *err);

/* The sbatch command line for s into *a (a->v is NULL-terminated). */
int slurm_sbatch_argv(const slurm_opts *o, const slurm_submit *s, slurm_argv *a, char *err);
/* The batch script that starts the ranks of worker worker_id's job, into out (cap bytes). */
int slurm_script_build(const slurm_opts *o, const char *worker_id, char *out, size_t cap,
                       char *err);
/* The enum slurm_class of a squeue state name (%T); an unknown name is SLURM_ALIVE. */
int slurm_state_class(const char *state);
/* Runs argv (argv[0] looked up in PATH) with environment envp (NULL: serve's), stdin from in
 * (NULL: nothing), stdout into out and stderr into errout (each cap bytes, cut, NUL-ended),
 * for at most timeout_ms (then killed). Returns its exit status (>= 0, 128 + N when killed by
 * signal N), -ETIMEDOUT, or a negative code when it could not start (err says why). */
int slurm_cmd_run(const char *const *argv, char *const *envp, const char *in, char *out,
                  char *errout, size_t cap, int timeout_ms, char *err);

#endif
