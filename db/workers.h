/* db/workers: the workers table — registered worker processes, their devices, when each was
 * last heard from and which job it holds.
 *
 * `devices` is the JSON array the worker registered with (text, as given after validation);
 * `kinds` is the set of DB_KIND_* bits of those devices, which is what leasing matches a job's
 * resources.device against. `last_seen_at` moves on every request a worker makes; lease expiry
 * sets `gone` on workers silent for too long, and any later request clears it. */
#ifndef TRAINYARD_DB_WORKERS_H
#define TRAINYARD_DB_WORKERS_H

#include <stdint.h>

#include "db/db.h"
#include "db/jobs.h"

/* DB_KIND_SCRIPTS_ONLY: no device of the worker has OpenCL (GPUs found by NVML or nvidia-smi):
 * it is leased script jobs only, since a built-in job trains with OpenCL kernels. */
enum { DB_KIND_GPU = 1, DB_KIND_CPU = 2, DB_KIND_OTHER = 4, DB_KIND_SCRIPTS_ONLY = 8 };

typedef struct db_worker {
    char id[DB_ID_LEN + 1];
    char name[DB_NAME_MAX + 1];
    char *devices; /* JSON array text, owned */
    unsigned kinds;
    int64_t registered_at, last_seen_at;
    int gone;
    char job_id[DB_ID_LEN + 1];   /* "" when idle */
    char token_id[DB_ID_LEN + 1]; /* the token that registered it; "" for none */
    int scripts;                  /* 1: started with --allow-scripts (runs script jobs) */
    int slots;                    /* the most replicas of a data-parallel job it starts (>= 1) */
    int bound;                    /* 1: made for one Slurm job; leases only jobs bound to it */
} db_worker;

/* Called per worker; w is valid during the call only. A negative return stops the walk. */
typedef int (*db_worker_fn)(void *ctx, const db_worker *w);

/* Frees devices and zeroes w; accepts NULL. */
void db_worker_clear(db_worker *w);
/* Adds a worker (every field of w). */
int db_worker_insert(db *d, const db_worker *w, char *err);
/* The worker with id; -ENOENT when none. */
int db_worker_get(db *d, const char *id, db_worker *out, char *err);
/* Every worker, oldest registration first. */
int db_worker_list(db *d, db_worker_fn fn, void *ctx, char *err);
/* Workers not gone and seen at or after since. */
int db_worker_list_live(db *d, int64_t since, db_worker_fn fn, void *ctx, char *err);
/* How many workers are not gone and were seen at or after since. */
int db_worker_count_live(db *d, int64_t since, int64_t *out, char *err);
/* The worker made a request at now: last_seen_at = now, gone = 0. Returns rows changed. */
int db_worker_seen(db *d, const char *id, int64_t now, char *err);
/* Sets the job a worker holds (job_id NULL: none). Returns rows changed. */
int db_worker_set_job(db *d, const char *id, const char *job_id, char *err);
/* Clears the worker's job if it is still job_id. Returns rows changed. */
int db_worker_release(db *d, const char *id, const char *job_id, char *err);
/* Marks worker id gone at once (its process is known dead). Returns rows changed. */
int db_worker_set_gone(db *d, const char *id, char *err);
/* The workers not gone that token_id registered under name, oldest first. */
int db_worker_list_named(db *d, const char *token_id, const char *name, db_worker_fn fn, void *ctx,
                         char *err);
/* Marks gone every worker last seen before `before`. Returns how many changed. */
int db_worker_mark_gone(db *d, int64_t before, char *err);
/* Deletes gone workers holding no job and last seen before `before`. Returns how many. */
int db_worker_forget(db *d, int64_t before, char *err);

#endif
