/* db/events: the job_events table — the history of every job's transitions.
 *
 * The scheduler appends one row inside the transaction of each transition, so the history and
 * the job's state never disagree. Rows are read back oldest first. */
#ifndef TRAINYARD_DB_EVENTS_H
#define TRAINYARD_DB_EVENTS_H

#include <stdint.h>

#include "db/db.h"

#define DB_REASON_MAX 512 /* bytes of a reason kept in a db_event read back */

typedef struct db_event {
    int64_t id, at;
    int from;  /* enum db_status; -1 for the submit */
    int to;    /* enum db_status */
    int phase; /* enum db_phase at the time */
    int attempt;
    char reason[DB_REASON_MAX + 1]; /* "" when none */
} db_event;

/* Called per event; e is valid during the call only. A negative return stops the walk. */
typedef int (*db_event_fn)(void *ctx, const db_event *e);

/* Appends one transition of job_seq (from -1: none; reason may be NULL). */
int db_event_append(db *d, int64_t job_seq, int64_t at, int from, int to, int phase, int attempt,
                    const char *reason, char *err);
/* The events of job_seq, oldest first. */
int db_event_list(db *d, int64_t job_seq, db_event_fn fn, void *ctx, char *err);
/* How many attempts of job_seq ended by a hand-back (running -> queued with a reason starting
 * with DB_EVENT_RELEASED): they do not count against max_attempts. */
int db_event_count_released(db *d, int64_t job_seq, int *out, char *err);

/* A function called inside every db_event_append after its row is written, in the caller's
 * transaction, with the transition (from -1: the submit); a negative return fails the append,
 * so the transition rolls back with it. serve sets notify_job_transition (scheduler/notify.h)
 * once before any thread starts; NULL (the default) calls nothing. */
typedef int (*db_event_hook_fn)(void *ctx, db *d, int64_t job_seq, int from, int to, int64_t at,
                                char *err);
void db_event_set_hook(db_event_hook_fn fn, void *ctx);

/* The reason of a hand-back starts with this (sched_job_release). */
#define DB_EVENT_RELEASED "released by worker"

#endif
