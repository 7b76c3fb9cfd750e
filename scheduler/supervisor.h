/* supervisor: keeps `serve`'s local worker processes running.
 *
 * It starts one `trainyard worker` process per slot (each with its own --device), watches them
 * from one thread, and restarts one that exits, after a delay that doubles from 0.5 s up to
 * 30 s while a worker keeps dying young and resets once it has run for a minute. Workers talk
 * to the server only over HTTP, as remote ones do; the supervisor starts and stops them and
 * says when one ended.
 * They inherit the server's environment, which is how serve hands them their worker token
 * (TRAINYARD_TOKEN) without putting it on a command line.
 * Each worker is tied to this process (`--parent`): when serve dies, even by kill -9, they die
 * too, and their jobs resume from their checkpoints once the restarted serve lapses the leases.
 *
 * It tells its owner when a worker process ends (opts.exited), so that serve can hand the
 * dead worker's job back at once instead of waiting out the lease.
 *
 * Ownership: supervisor_stop() ends the processes and frees everything; accepts NULL. */
#ifndef TRAINYARD_SCHEDULER_SUPERVISOR_H
#define TRAINYARD_SCHEDULER_SUPERVISOR_H

#include <sys/types.h>

#define SUPERVISOR_MAX_WORKERS 64
#define SUPERVISOR_NAME_FMT    "local-%d" /* each worker's --name, by slot */

typedef struct supervisor supervisor;

typedef struct supervisor_opts {
    const char *exe;                 /* the trainyard binary */
    const char *server_url;          /* what the workers connect to */
    const char *pin_cert;            /* passed on as --pin-cert (an https server's own), or NULL */
    const char *dataset_ca;          /* passed on as --dataset-ca, or NULL */
    const char *dataset_root;        /* passed on as --dataset-root, or NULL */
    const char *dataset_allow;       /* passed on as --dataset-allow, or NULL */
    const char *max_dataset_bytes;   /* passed on as --max-dataset-bytes, or NULL */
    const char *dataset_cache;       /* passed on as --dataset-cache, or NULL */
    const char *dataset_cache_bytes; /* passed on as --dataset-cache-bytes, or NULL */
    const char *work_dir;            /* parent of each worker's --work-dir */
    const char *const *extra_args;   /* more words for each worker's command line (copied),
                                        NULL-terminated, or NULL */
    long dataset_stall_s;            /* passed on as --dataset-stall-seconds when > 0 */
    long checkpoint_s;               /* passed on as --checkpoint-seconds when >= 0 */
    int count;                       /* workers to run, 1..SUPERVISOR_MAX_WORKERS */
    const int *devices;              /* OpenCL device index per worker */
    void (*log)(const char *line);   /* NULL: stderr */
    /* Called on the watching thread after a worker process ended and was reaped, before its
     * slot's next process starts: name is the --name it ran under (SUPERVISOR_NAME_FMT), how
     * the end ("was killed by signal 9"). NULL: nothing. */
    void (*exited)(void *user, const char *name, pid_t pid, const char *how);
    void *user;
} supervisor_opts;

/* Starts the workers and the watching thread. */
int supervisor_start(const supervisor_opts *o, supervisor **out, char *err);
/* The pid of worker slot i now (0 while it is being restarted). */
pid_t supervisor_pid(supervisor *s, int i);
/* Sends SIGTERM to every worker (each checkpoints its job and hands it back to the queue),
 * waits up to grace_ms for them, then SIGKILLs the rest, and frees the supervisor. The HTTP
 * server must still answer meanwhile. Accepts NULL. */
void supervisor_stop(supervisor *s, int grace_ms);

#endif
