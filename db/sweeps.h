/* db/sweeps: the sweeps table (schema v8) and the reads a sweep needs of its trials.
 *
 * A sweep is one row (its document as submitted, its status, how many trials it made, the best
 * trial once it ended); its trials are ordinary jobs with jobs.sweep_seq set. The controller
 * (scheduler/sweep.h) keeps no state of its own: everything it decides follows from these rows
 * and the trials' metrics, so a restarted serve carries on where the last one stopped.
 *
 * Status writes name the status they expect (running) and return the rows changed, like
 * db/jobs.h: a finished sweep never changes again. A db_sweep owns `document` and `error`
 * (db_sweep_clear frees them). Times are ms since the epoch, 0 for "not yet". */
#ifndef TRAINYARD_DB_SWEEPS_H
#define TRAINYARD_DB_SWEEPS_H

#include <stdint.h>

#include "db/db.h"
#include "db/jobs.h"

enum db_sweep_status {
    DB_SWEEP_RUNNING,
    DB_SWEEP_SUCCEEDED,
    DB_SWEEP_FAILED,
    DB_SWEEP_CANCELLED,
    DB_SWEEP_N_STATUS
};

typedef struct db_sweep {
    int64_t seq; /* 0 before insertion */
    char id[DB_ID_LEN + 1];
    char name[DB_NAME_MAX + 1];
    char owner[DB_ID_LEN + 1]; /* the submitting token's id; "" for none */
    int status;                /* enum db_sweep_status */
    char *document;            /* the sweep document as stored (JSON text) */
    int trials_created;
    int64_t best_job_seq;            /* 0: none (yet) */
    char best_job_id[DB_ID_LEN + 1]; /* "" for none */
    char *error;                     /* NULL when none */
    int64_t created_at, finished_at;
} db_sweep;

/* One trial of a sweep as the controller and the leaderboard read it; strings are valid during
 * the callback only. */
typedef struct db_sweep_trial {
    int64_t seq;
    const char *id;
    const char *name;
    int status; /* enum db_status */
    const char *document;
    const char *stop_reason; /* NULL when it ran all its epochs (or has not ended) */
    int stop_requested;      /* 1: a stop was asked of it */
    int cancel_requested;    /* 1: a cancel was asked of it */
    int epochs;              /* epochs it reported (rows in metrics) */
    int64_t created_at;
} db_sweep_trial;

/* One epoch of one trial: the sweep metric's value (NAN when the epoch did not report it) and
 * when the epoch was stored. */
typedef struct db_sweep_point {
    int64_t job_seq;
    int epoch;
    int64_t at;
    double value;
} db_sweep_point;

typedef int (*db_sweep_fn)(void *ctx, const db_sweep *s);
typedef int (*db_sweep_trial_fn)(void *ctx, const db_sweep_trial *t);
typedef int (*db_sweep_point_fn)(void *ctx, const db_sweep_point *p);

/* "running", "succeeded", "failed", "cancelled"; NULL out of range. */
const char *db_sweep_status_name(int status);
/* Frees document and error and zeroes the row; accepts NULL. */
void db_sweep_clear(db_sweep *s);

/* Inserts s (all but seq, which it sets; id must be set). -EEXIST when the id exists. */
int db_sweep_insert(db *d, db_sweep *s, char *err);
/* The sweep with public id; -ENOENT when none. */
int db_sweep_get(db *d, const char *id, db_sweep *out, char *err);
/* The sweep with internal seq; -ENOENT when none. */
int db_sweep_get_seq(db *d, int64_t seq, db_sweep *out, char *err);
/* Sweeps newest first with seq < before_seq (0: from the newest), of owner (NULL: anyone's),
 * at most limit. */
int db_sweep_list(db *d, const char *owner, int64_t before_seq, int limit, db_sweep_fn fn,
                  void *ctx, char *err);
/* The seqs of the running sweeps, oldest first, at most cap, into seqs; returns how many. */
int db_sweep_running(db *d, int64_t *seqs, int cap, char *err);
/* Inside a submit's transaction: job_seq becomes a trial of running sweep sweep_seq, whose
 * trials_created grows by one. -ECANCELED (nothing changed) when the sweep is not running. */
int db_sweep_trial_added(db *d, int64_t sweep_seq, int64_t job_seq, char *err);
/* running → status (succeeded, failed or cancelled) at now, with the best trial (0: none) and
 * an error (NULL: none). Returns rows changed (0: it was not running). */
int db_sweep_set_finished(db *d, int64_t seq, int status, int64_t best_job_seq, const char *error,
                          int64_t now, char *err);
/* The trials of sweep seq, oldest first. */
int db_sweep_trials(db *d, int64_t seq, db_sweep_trial_fn fn, void *ctx, char *err);
/* Every stored epoch of the trials of sweep seq with the value of metric (a built-in column's
 * name, or a name among a script's own metrics), in the order they were stored (at, then id). */
int db_sweep_points(db *d, int64_t seq, const char *metric, db_sweep_point_fn fn, void *ctx,
                    char *err);

#endif
