/* db/events: appending and reading job_events rows (see events.h). Statuses and phases are
 * stored by name, as in the jobs table, so the history reads well in the sqlite3 shell. */
#include "db/events.h"

#include <string.h>

#include "db/jobs.h"

static const char SQL_EVENT_APPEND[] =
    "INSERT INTO job_events (job_seq, at, from_status, to_status, phase, attempt, reason)"
    " VALUES (?, ?, ?, ?, ?, ?, ?)";

static db_event_hook_fn db_event_hook;
static void *db_event_hook_ctx;

void db_event_set_hook(db_event_hook_fn fn, void *ctx)
{
    db_event_hook = fn;
    db_event_hook_ctx = ctx;
}

int db_event_append(db *d, int64_t job_seq, int64_t at, int from, int to, int phase, int attempt,
                    const char *reason, char *err)
{
    sqlite3_stmt *st = NULL;
    int rc = db_stmt(d, SQL_EVENT_APPEND, &st, err);
    if (rc < 0)
        return rc;
    sqlite3_bind_int64(st, 1, job_seq);
    sqlite3_bind_int64(st, 2, at);
    db_bind_opt_text(st, 3, db_status_name(from));
    sqlite3_bind_text(st, 4, db_status_name(to), -1, SQLITE_STATIC);
    db_bind_opt_text(st, 5, db_phase_name(phase));
    sqlite3_bind_int(st, 6, attempt);
    db_bind_opt_text(st, 7, reason);
    rc = db_write(d, st, err);
    if (rc >= 0 && db_event_hook)
        rc = db_event_hook(db_event_hook_ctx, d, job_seq, from, to, at, err);
    return rc < 0 ? rc : 0;
}

static const char SQL_EVENT_LIST[] =
    "SELECT id, at, from_status, to_status, phase, attempt, reason FROM job_events"
    " WHERE job_seq = ? ORDER BY id";

/* The user's callback and context for db_event_row. */
typedef struct db_event_walk {
    db_event_fn fn;
    void *ctx;
} db_event_walk;

/* db_rows() adapter: reads one event row and hands it to the user's callback. */
static int db_event_row(void *ctx, sqlite3_stmt *st)
{
    db_event_walk *w = ctx;
    db_event e;
    memset(&e, 0, sizeof e);
    e.id = db_col_int(st, 0);
    e.at = db_col_int(st, 1);
    e.from = db_status_parse((const char *)sqlite3_column_text(st, 2));
    e.to = db_status_parse((const char *)sqlite3_column_text(st, 3));
    e.phase = db_phase_parse((const char *)sqlite3_column_text(st, 4));
    if (e.phase < 0)
        e.phase = DB_PHASE_NONE;
    e.attempt = sqlite3_column_int(st, 5);
    db_col_copy(st, 6, e.reason, sizeof e.reason);
    return w->fn(w->ctx, &e);
}

int db_event_list(db *d, int64_t job_seq, db_event_fn fn, void *ctx, char *err)
{
    sqlite3_stmt *st = NULL;
    int rc = db_stmt(d, SQL_EVENT_LIST, &st, err);
    if (rc < 0)
        return rc;
    sqlite3_bind_int64(st, 1, job_seq);
    db_event_walk w = {fn, ctx};
    return db_rows(d, st, db_event_row, &w, err);
}

static const char SQL_EVENT_COUNT_RELEASED[] =
    "SELECT count(*) FROM job_events WHERE job_seq = ? AND from_status = 'running'"
    " AND to_status = 'queued' AND substr(reason, 1, ?) = ?";

int db_event_count_released(db *d, int64_t job_seq, int *out, char *err)
{
    sqlite3_stmt *st = NULL;
    int rc = db_stmt(d, SQL_EVENT_COUNT_RELEASED, &st, err);
    if (rc < 0)
        return rc;
    sqlite3_bind_int64(st, 1, job_seq);
    sqlite3_bind_int(st, 2, (int)strlen(DB_EVENT_RELEASED));
    sqlite3_bind_text(st, 3, DB_EVENT_RELEASED, -1, SQLITE_STATIC);
    int n = 0;
    rc = db_rows(d, st, db_row_int, &n, err);
    if (rc < 0)
        return rc;
    *out = n;
    return 0;
}
