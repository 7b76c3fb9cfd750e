/* db/deliveries: webhook delivery rows (see deliveries.h). */
#include "db/deliveries.h"

#include <errno.h>
#include <string.h>

static const char *const db_delivery_names[] = {"pending", "delivered", "failed"};

const char *db_delivery_status_name(int status)
{
    return status >= 0 && status <= DB_DELIVERY_FAILED ? db_delivery_names[status] : NULL;
}

static int db_delivery_status_parse(const char *s)
{
    for (int i = 0; s && i <= DB_DELIVERY_FAILED; i++)
        if (!strcmp(s, db_delivery_names[i]))
            return i;
    return -1;
}

static const char SQL_DELIVERY_INSERT[] =
    "INSERT INTO deliveries (job_seq, sweep_seq, owner, url, event, body, status, attempts,"
    " next_at, created_at) VALUES (?, ?, ?, ?, ?, ?, 'pending', 0, ?, ?)";
static const char SQL_DELIVERY_DUE[] =
    "SELECT id, job_seq, sweep_seq, owner, url, event, body, status, attempts, next_at,"
    " created_at, finished_at FROM deliveries WHERE status = 'pending' AND next_at <= ?"
    " ORDER BY next_at LIMIT ?";
static const char SQL_DELIVERY_LIST_JOB[] =
    "SELECT id, job_seq, sweep_seq, owner, url, event, body, status, attempts, next_at,"
    " created_at, finished_at FROM deliveries WHERE job_seq = ? ORDER BY id";
static const char SQL_DELIVERY_MOVE[] =
    "UPDATE deliveries SET attempts = ?, status = ?, next_at = ?, finished_at = ?"
    " WHERE id = ? AND status = 'pending' AND attempts = ?";
static const char SQL_ATTEMPT_INSERT[] =
    "INSERT INTO delivery_attempts (delivery_id, attempt, at, http_status, error, ms)"
    " VALUES (?, ?, ?, ?, ?, ?)";
static const char SQL_ATTEMPT_LIST[] =
    "SELECT attempt, at, http_status, error, ms FROM delivery_attempts WHERE delivery_id = ?"
    " ORDER BY attempt";

int db_delivery_insert(db *d, const db_delivery *dl, int64_t *id, char *err)
{
    sqlite3_stmt *st = NULL;
    int rc = db_stmt(d, SQL_DELIVERY_INSERT, &st, err);
    if (rc < 0)
        return rc;
    db_bind_opt_time(st, 1, dl->job_seq);
    db_bind_opt_time(st, 2, dl->sweep_seq);
    db_bind_opt_text(st, 3, dl->owner);
    sqlite3_bind_text(st, 4, dl->url, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 5, dl->event, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 6, dl->body, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 7, dl->next_at);
    sqlite3_bind_int64(st, 8, dl->created_at);
    rc = db_write(d, st, err);
    if (rc < 0)
        return rc;
    if (id)
        *id = sqlite3_last_insert_rowid(db_sqlite(d));
    return 0;
}

/* The user's callback for db_delivery_row. */
typedef struct db_delivery_walk {
    db_delivery_fn fn;
    void *ctx;
} db_delivery_walk;

static int db_delivery_row(void *ctx, sqlite3_stmt *st)
{
    db_delivery_walk *w = ctx;
    db_delivery dl = {
        .id = db_col_int(st, 0),
        .job_seq = db_col_int(st, 1),
        .sweep_seq = db_col_int(st, 2),
        .owner = (const char *)sqlite3_column_text(st, 3),
        .url = (const char *)sqlite3_column_text(st, 4),
        .event = (const char *)sqlite3_column_text(st, 5),
        .body = (const char *)sqlite3_column_text(st, 6),
        .status = db_delivery_status_parse((const char *)sqlite3_column_text(st, 7)),
        .attempts = (int)db_col_int(st, 8),
        .next_at = db_col_int(st, 9),
        .created_at = db_col_int(st, 10),
        .finished_at = db_col_int(st, 11),
    };
    return w->fn(w->ctx, &dl);
}

int db_delivery_due(db *d, int64_t now, int limit, db_delivery_fn fn, void *ctx, char *err)
{
    sqlite3_stmt *st = NULL;
    int rc = db_stmt(d, SQL_DELIVERY_DUE, &st, err);
    if (rc < 0)
        return rc;
    sqlite3_bind_int64(st, 1, now);
    sqlite3_bind_int(st, 2, limit);
    db_delivery_walk w = {fn, ctx};
    return db_rows(d, st, db_delivery_row, &w, err);
}

int db_delivery_list_job(db *d, int64_t job_seq, db_delivery_fn fn, void *ctx, char *err)
{
    sqlite3_stmt *st = NULL;
    int rc = db_stmt(d, SQL_DELIVERY_LIST_JOB, &st, err);
    if (rc < 0)
        return rc;
    sqlite3_bind_int64(st, 1, job_seq);
    db_delivery_walk w = {fn, ctx};
    return db_rows(d, st, db_delivery_row, &w, err);
}

int db_delivery_record(db *d, int64_t id, const db_delivery_attempt *a, int status, int64_t next_at,
                       char *err)
{
    sqlite3_stmt *st = NULL;
    int rc = db_begin(d, err);
    if (rc < 0)
        return rc;
    rc = db_stmt(d, SQL_DELIVERY_MOVE, &st, err);
    if (rc < 0)
        goto out;
    sqlite3_bind_int(st, 1, a->attempt);
    sqlite3_bind_text(st, 2, db_delivery_status_name(status), -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 3, next_at);
    db_bind_opt_time(st, 4, status == DB_DELIVERY_PENDING ? 0 : a->at);
    sqlite3_bind_int64(st, 5, id);
    sqlite3_bind_int(st, 6, a->attempt - 1);
    rc = db_write(d, st, err);
    if (rc <= 0) /* gone (its job was deleted) or moved by another: nothing to record */
        goto out;
    rc = db_stmt(d, SQL_ATTEMPT_INSERT, &st, err);
    if (rc < 0)
        goto out;
    sqlite3_bind_int64(st, 1, id);
    sqlite3_bind_int(st, 2, a->attempt);
    sqlite3_bind_int64(st, 3, a->at);
    if (a->http_status > 0)
        sqlite3_bind_int(st, 4, a->http_status);
    else
        sqlite3_bind_null(st, 4);
    db_bind_opt_text(st, 5, a->error);
    sqlite3_bind_int64(st, 6, a->ms);
    rc = db_write(d, st, err);
    if (rc < 0)
        goto out;
    rc = db_commit(d, err);
    return rc < 0 ? rc : 1;
out:
    db_rollback(d);
    return rc;
}

/* The user's callback for db_attempt_row. */
typedef struct db_attempt_walk {
    db_delivery_attempt_fn fn;
    void *ctx;
} db_attempt_walk;

static int db_attempt_row(void *ctx, sqlite3_stmt *st)
{
    db_attempt_walk *w = ctx;
    db_delivery_attempt a = {
        .attempt = (int)db_col_int(st, 0),
        .at = db_col_int(st, 1),
        .http_status = (int)db_col_int(st, 2),
        .error = (const char *)sqlite3_column_text(st, 3),
        .ms = db_col_int(st, 4),
    };
    return w->fn(w->ctx, &a);
}

int db_delivery_attempts(db *d, int64_t id, db_delivery_attempt_fn fn, void *ctx, char *err)
{
    sqlite3_stmt *st = NULL;
    int rc = db_stmt(d, SQL_ATTEMPT_LIST, &st, err);
    if (rc < 0)
        return rc;
    sqlite3_bind_int64(st, 1, id);
    db_attempt_walk w = {fn, ctx};
    return db_rows(d, st, db_attempt_row, &w, err);
}
