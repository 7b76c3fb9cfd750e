/* agent_priv: what the worker loop (agent.c) shares with the script-job path (script_job.c).
 *
 * One job has one heartbeat thread, whatever runs it: the trainer on this worker's device, or
 * a user's script (script/run.h) in a sandbox. Both feed the same queues (log lines, epochs,
 * the pending checkpoint) and read the same flags (cancel, lease lost). */
#ifndef TRAINYARD_WORKER_AGENT_PRIV_H
#define TRAINYARD_WORKER_AGENT_PRIV_H

#include <pthread.h>
#include <stdint.h>

#include <jansson.h>

#include "client/client.h"
#include "job/job.h"
#include "worker/agent.h"
#include "train/trainer.h"

#define AGENT_CKPT_PENDING "checkpoint.pending" /* the newest copy not yet sent */
#define AGENT_CKPT_SENDING "checkpoint.sending" /* the copy the heartbeat thread uploads */
/* A script job's folder for the worker's own files (its artifacts, pending checkpoints): the
 * sandbox covers it with an empty tmpfs (script/run.c), so a script can neither see them nor
 * plant links where the worker writes or reads. */
#define AGENT_SCRIPT_PRIVATE ".trainyard"

typedef struct beat {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    client *c; /* its own connection */
    char path[1024];
    char ckpt_path[1024];  /* PUT here (a script job's adds ?epoch=ckpt_epoch) */
    const char *dir;       /* the job folder */
    int ckpt_pending;      /* dir/checkpoint.pending waits to be sent */
    int script;            /* a script job: its checkpoints are .tar.gz snapshots */
    int ckpt_epoch;        /* the pending snapshot's epoch (script jobs) */
    json_t *logs, *epochs; /* queued for the next heartbeat */
    char phase[16];
    uint64_t dataset_bytes; /* fetched, not yet reported (GET /metrics counts them) */
    int urgent, done;
    volatile int cancel, lost; /* read by the job's thread without the lock: flags only */
    volatile int stop_asked;   /* the server asked for a graceful stop (heartbeat "stop") */
    char stop_words[512];      /* its words, under mu */
    const agent_opts *o;
    pthread_t thread;
    int have_thread;
} beat;

/* Fills b and starts its heartbeat thread for the lease at prefix ("/workers/W/jobs/J"), on a
 * connection of its own; dir holds its checkpoint copies. 0, or -errno with a sentence in err
 * (b is filled either way: agent_beat_free it). */
int agent_beat_start(beat *b, const agent_opts *o, const char *prefix, const char *dir, int script,
                     char *err);
/* Ends the thread after it has sent what is queued (a heartbeat that fails ends the flush). */
void agent_beat_stop(beat *b);
/* agent_beat_stop, then frees b's connection and queues. */
void agent_beat_free(beat *b);

/* worker/agent_group.c: a job of several replicas leased by this worker runs as `mpirun -np N
 * trainyard-replica --lease FILE`; this waits for it (a stop is passed on as SIGTERM). Returns
 * 0 when the ranks ended well (rank 0 reported the job), or a negative code with the reason in
 * err (then the job is not reported yet). */
int agent_group_launch(const agent_opts *o, const char *worker_id, const json_t *lease,
                       const job_spec *job, const char *dir, char *err);
/* The slots this worker registers: o->replicas when it can start ranks (Open MPI's launcher
 * and trainyard-replica found), else 1. */
int agent_group_slots(const agent_opts *o);

/* A JSON string of text that may hold any bytes (a dataset's, a header's): made valid UTF-8,
 * at most cap bytes. */
json_t *agent_json_text(const char *text, size_t cap);
/* "worker: ..." on stderr. */
void agent_say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Queues a log line for the next heartbeat (and echoes it to stderr). */
void agent_hook_log(void *user, const char *line);
/* Sets the phase (enum trainer_phase) reported with the next heartbeat, sent at once. */
void agent_hook_phase(void *user, int phase);
/* Adds fetched dataset bytes to what the next heartbeat reports. */
void agent_hook_dataset(void *user, uint64_t bytes);
/* Queues one epoch's metrics (a new reference is taken) and wakes the heartbeat thread. */
void agent_queue_epoch(beat *b, json_t *epoch);
/* Takes a graceful stop the server asked for: 1 with its words in why[cap], else 0. */
int agent_stop_asked(beat *b, char *why, size_t cap);
/* Completes the attempt at prefix ("/workers/W/jobs/J") as status_word ("succeeded", "failed",
 * "cancelled", or "lost": queued again while attempts are left) with error, retried while the
 * server is away. */
void agent_complete(const agent_opts *o, client *c, const char *prefix, const char *status_word,
                    const char *error);
/* Uploads file as the artifact name, retried while the server is away; a refusal is -EIO, or
 * -ENOSPC for 507 (the server's disk is full), with a sentence in err. */
int agent_upload(const agent_opts *o, client *c, const char *prefix, const char *name,
                 const char *file, char *err);

/* A script job (script_job.c): fetches its code, dataset and checkpoint into dir, runs the
 * script under the worker's sandbox and reports through b. Returns 0 when the script ran to an
 * end (*exit_code, *stopped: the run was ended by cancel, a lost lease or the worker's stop), or
 * -errno when the job could not start (err says why: code, dataset, venv, sandbox). A graceful
 * end (early stopping on its metrics, the server's stop) fills end's stop_reason and
 * stopped_epoch and counts as an exit 0. */
int agent_script_run(const agent_opts *o, client *c, beat *b, const json_t *lease,
                     const job_spec *job, const char *dir, int *exit_code, int *stopped,
                     trainer_result *end, char *tail, size_t tail_cap, char *err);
/* How a script ended badly (exit_code > 0: its status; < 0: the signal), with its last lines:
 * the sentence a failed or lost attempt gives, into out[cap]. */
void agent_script_ended(const job_spec *job, int exit_code, const char *tail, char *out,
                        size_t cap);
/* After a script that exited 0: uploads every file of dir/output (a folder as NAME.tar.gz),
 * then job.json, metrics.csv (every epoch the server holds, all attempts) and train.log. */
int agent_script_upload(const agent_opts *o, client *c, const char *prefix, const job_spec *job,
                        const char *dir, char *err);
/* The folder script jobs cache in (code bundles by address, venvs): --script-cache, else
 * $TRAINYARD_SCRIPT_CACHE, else $XDG_CACHE_HOME/trainyard/scripts, else
 * ~/.cache/trainyard/scripts. -ENOENT when none is set, -ENAMETOOLONG. */
int agent_script_cache_dir(const agent_opts *o, char *out, size_t cap);
/* Removes a script job's folder and everything in it. */
void agent_script_cleanup(const char *dir);

#endif
