/* sweep: the sweep controller — makes a running sweep's trials, stops weak ones (ASHA), and
 * ends the sweep when its trials have ended; and the leaderboard every reader shares.
 *
 *              submit (api/sweeps.c)          every trial made and ended
 *     (new) ───────────────────────▶ running ─────────────────────────▶ succeeded | failed
 *                                      │ cancel (its queued trials cancelled, running ones
 *                                      └──────▶ cancelled       asked to cancel)
 *
 * A pass (sched_sweeps_tick), per running sweep, oldest first:
 * 1. ASHA (scheduler/asha.h), when the sweep has asha: every trial's rung decisions are
 *    replayed from the metrics stored so far; a running trial that fell out of the top 1/η at
 *    a rung and has not been asked yet is asked to stop gracefully (jobs.stop_requested: it
 *    finishes the epoch it is in, saves its model and succeeds, its stop_reason saying why).
 * 2. Trials: while fewer than max_concurrent trials are queued or running and fewer than the
 *    sweep's trials were made, the next one is submitted through sched_job_submit like a
 *    POST /train: trial n's document (sweep_spec.h), named "<sweep>-<n>", owned by the sweep's
 *    owner, linked to the sweep in the same transaction that counts it (trials_created), so
 *    a crash makes it whole or not at all.
 * 3. End: once every trial was made and none is queued or running, the sweep succeeds when a
 *    trial succeeded (its best is the best of those), else fails.
 * Nothing is kept between passes but the database, so a restarted serve picks up where the
 * last one left off; a decision already acted on (a stop asked) is not asked again.
 *
 * A trial's value is its best value of the metric over the epochs it reported (the direction
 * is metric.mode), with the epoch it was reached at; the leaderboard sorts by it, best first,
 * ties and trials without a value by age. A trial cancelled alone is one trial that ended; the
 * sweep goes on.
 *
 * Threads: sweep_ctl runs passes on a thread of its own with its own connection every
 * SWEEP_CTL_INTERVAL_MS (a rung decision must reach a trial while it is still near that
 * epoch), and tells serve what it changed through a callback; like the rest of the scheduler
 * it links db, job and util only. */
#ifndef TRAINYARD_SCHEDULER_SWEEP_H
#define TRAINYARD_SCHEDULER_SWEEP_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "db/db.h"
#include "db/sweeps.h"
#include "scheduler/sweep_spec.h"

#define SWEEP_CTL_INTERVAL_MS 100
#define SWEEP_TICK_MAX        64 /* running sweeps one pass looks at */

/* What a pass changed. */
typedef struct sweep_tick_stats {
    int trials_created;  /* jobs queued */
    int stops_requested; /* running trials asked to stop */
    int sweeps_finished;
} sweep_tick_stats;

/* One trial on the leaderboard. */
typedef struct sweep_entry {
    int64_t seq;
    char id[DB_ID_LEN + 1];
    char name[DB_NAME_MAX + 1];
    int status;         /* enum db_status */
    double value;       /* NAN: none yet */
    int epoch;          /* of value; 0 with none */
    int epochs_run;     /* epochs it reported */
    char *stop_reason;  /* NULL: none */
    int stop_requested; /* 1: asked to stop (ASHA, or anyone) */
    json_t *parameters; /* {"PATH": value}, owned */
} sweep_entry;

typedef struct sweep_board {
    sweep_entry *entries; /* best first */
    size_t n;
    int queued, running, succeeded, failed, cancelled, stopped_early;
    int64_t epochs_total; /* epochs reported by every trial */
    int best;             /* index of the best succeeded trial; -1: none */
} sweep_board;

/* The leaderboard of sweep s (spec parsed from its document); free with sweep_board_free. */
int sweep_board_read(db *d, const db_sweep *s, const sweep_spec *spec, sweep_board *out, char *err);
/* Frees a board's entries; accepts one zeroed or freed before. */
void sweep_board_free(sweep_board *b);
/* The spec of a stored sweep document (its trials were all checked at submit: only the first
 * is parsed again). */
int sweep_spec_stored(const char *document, sweep_spec **out, char *err);

/* One pass over the running sweeps (see above); *st counts what changed. artifacts_dir is for
 * the checkpoint settle of a trial cancelled with its sweep (may be NULL). */
int sched_sweeps_tick(db *d, const char *artifacts_dir, int64_t now, sweep_tick_stats *st,
                      char *err);
/* Cancels running sweep seq: the sweep is cancelled first (no trial is made after that), then
 * its queued trials are cancelled and its running ones asked to cancel. *changed counts the
 * trials changed. -EBUSY when the sweep has ended. */
int sched_sweep_cancel(db *d, int64_t seq, const char *artifacts_dir, int64_t now, int *changed,
                       char *err);

typedef struct sweep_ctl sweep_ctl;

typedef struct sweep_ctl_opts {
    const char *db_path;       /* copied */
    const char *artifacts_dir; /* copied; may be NULL */
    /* Called after a pass that changed something (on the controller's thread). */
    void (*changed)(void *user, const sweep_tick_stats *st);
    /* A line for serve's log (a failed pass says why, once until one succeeds); may be NULL. */
    void (*log)(void *user, const char *line);
    void *user;
} sweep_ctl_opts;

/* Starts the controller's thread with its own connection to o->db_path. */
int sweep_ctl_start(const sweep_ctl_opts *o, sweep_ctl **out, char *err);
/* Stops and joins the thread and frees it; accepts NULL. */
void sweep_ctl_stop(sweep_ctl *c);

#endif
