/* db/workers: worker rows (see workers.h). */
#include "db/workers.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define DB_WORKER_COLS                                                                             \
    "id, name, devices, kinds, registered_at, last_seen_at, gone, job_id, token_id, scripts, "     \
    "slots, "                                                                                      \
    "bound"

static const char SQL_WORKER_INSERT[] = "INSERT INTO workers (" DB_WORKER_COLS ")"
                                        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)";
static const char SQL_WORKER_GET[] = "SELECT " DB_WORKER_COLS " FROM workers WHERE id = ?";
static const char SQL_WORKER_LIST[] =
    "SELECT " DB_WORKER_COLS " FROM workers ORDER BY registered_at, id";
static const char SQL_WORKER_LIVE[] = "SELECT " DB_WORKER_COLS " FROM workers"
                                      " WHERE gone = 0 AND last_seen_at >= ?"
                                      " ORDER BY registered_at, id";
static const char SQL_WORKER_COUNT[] =
    "SELECT count(*) FROM workers WHERE gone = 0 AND last_seen_at >= ?";
static const char SQL_WORKER_SEEN[] =
    "UPDATE workers SET last_seen_at = max(last_seen_at, ?2), gone = 0 WHERE id = ?1";
static const char SQL_WORKER_JOB[] = "UPDATE workers SET job_id = ?2 WHERE id = ?1";
static const char SQL_WORKER_RELEASE[] =
    "UPDATE workers SET job_id = NULL WHERE id = ?1 AND job_id = ?2";
static const char SQL_WORKER_NAMED[] = "SELECT " DB_WORKER_COLS " FROM workers"
                                       " WHERE token_id = ? AND name = ? AND gone = 0"
                                       " ORDER BY registered_at, id";
static const char SQL_WORKER_SET_GONE[] = "UPDATE workers SET gone = 1 WHERE id = ?";
static const char SQL_WORKER_GONE[] =
    "UPDATE workers SET gone = 1 WHERE gone = 0 AND last_seen_at < ?";
static const char SQL_WORKER_FORGET[] =
    "DELETE FROM workers WHERE gone = 1 AND job_id IS NULL AND last_seen_at < ?";

void db_worker_clear(db_worker *w)
{
    if (!w)
        return;
    free(w->devices);
    memset(w, 0, sizeof *w);
}

int db_worker_insert(db *d, const db_worker *w, char *err)
{
    sqlite3_stmt *st = NULL;
    int rc = db_stmt(d, SQL_WORKER_INSERT, &st, err);
    if (rc < 0)
        return rc;
    sqlite3_bind_text(st, 1, w->id, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, w->name, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 3, w->devices ? w->devices : "[]", -1, SQLITE_STATIC);
    sqlite3_bind_int(st, 4, (int)w->kinds);
    sqlite3_bind_int64(st, 5, w->registered_at);
    sqlite3_bind_int64(st, 6, w->last_seen_at);
    sqlite3_bind_int(st, 7, w->gone);
    db_bind_opt_text(st, 8, w->job_id);
    db_bind_opt_text(st, 9, w->token_id);
    sqlite3_bind_int(st, 10, w->scripts != 0);
    sqlite3_bind_int(st, 11, w->slots > 1 ? w->slots : 1);
    sqlite3_bind_int(st, 12, w->bound != 0);
    rc = db_write(d, st, err);
    return rc < 0 ? rc : 0;
}

static int db_worker_read(sqlite3_stmt *st, db_worker *out, char *err)
{
    db_worker w;
    memset(&w, 0, sizeof w);
    db_col_copy(st, 0, w.id, sizeof w.id);
    db_col_copy(st, 1, w.name, sizeof w.name);
    if (db_col_dup(st, 2, &w.devices) < 0)
        return err_set(err, -ENOMEM, "out of memory");
    w.kinds = (unsigned)sqlite3_column_int(st, 3);
    w.registered_at = db_col_int(st, 4);
    w.last_seen_at = db_col_int(st, 5);
    w.gone = sqlite3_column_int(st, 6);
    db_col_copy(st, 7, w.job_id, sizeof w.job_id);
    db_col_copy(st, 8, w.token_id, sizeof w.token_id);
    w.scripts = sqlite3_column_int(st, 9);
    w.slots = sqlite3_column_int(st, 10);
    w.bound = sqlite3_column_int(st, 11);
    *out = w;
    return 0;
}

int db_worker_get(db *d, const char *id, db_worker *out, char *err)
{
    sqlite3_stmt *st = NULL;
    int rc = db_stmt(d, SQL_WORKER_GET, &st, err);
    if (rc < 0)
        return rc;
    sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
    int src = sqlite3_step(st);
    if (src == SQLITE_ROW)
        rc = db_worker_read(st, out, err);
    else if (src == SQLITE_DONE)
        rc = err_set(err, -ENOENT, "no such worker: register again (POST /workers)");
    else
        rc = db_fail(d, src, err);
    db_stmt_done(st);
    return rc;
}

/* The user's callback, its context and the error buffer for db_worker_row. */
typedef struct db_worker_walk {
    db_worker_fn fn;
    void *ctx;
    char *err;
} db_worker_walk;

/* db_rows() adapter: reads one worker row, hands it to the user's callback, frees it. */
static int db_worker_row(void *ctx, sqlite3_stmt *st)
{
    db_worker_walk *wk = ctx;
    db_worker w;
    int rc = db_worker_read(st, &w, wk->err);
    if (rc < 0)
        return rc;
    rc = wk->fn(wk->ctx, &w);
    db_worker_clear(&w);
    return rc;
}

int db_worker_list(db *d, db_worker_fn fn, void *ctx, char *err)
{
    sqlite3_stmt *st = NULL;
    int rc = db_stmt(d, SQL_WORKER_LIST, &st, err);
    if (rc < 0)
        return rc;
    db_worker_walk wk = {fn, ctx, err};
    return db_rows(d, st, db_worker_row, &wk, err);
}

int db_worker_list_live(db *d, int64_t since, db_worker_fn fn, void *ctx, char *err)
{
    sqlite3_stmt *st = NULL;
    int rc = db_stmt(d, SQL_WORKER_LIVE, &st, err);
    if (rc < 0)
        return rc;
    sqlite3_bind_int64(st, 1, since);
    db_worker_walk wk = {fn, ctx, err};
    return db_rows(d, st, db_worker_row, &wk, err);
}

int db_worker_count_live(db *d, int64_t since, int64_t *out, char *err)
{
    sqlite3_stmt *st = NULL;
    int rc = db_stmt(d, SQL_WORKER_COUNT, &st, err);
    if (rc < 0)
        return rc;
    sqlite3_bind_int64(st, 1, since);
    return db_count(d, st, out, err);
}

int db_worker_seen(db *d, const char *id, int64_t now, char *err)
{
    sqlite3_stmt *st = NULL;
    int rc = db_stmt(d, SQL_WORKER_SEEN, &st, err);
    if (rc < 0)
        return rc;
    sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 2, now);
    return db_write(d, st, err);
}

int db_worker_set_job(db *d, const char *id, const char *job_id, char *err)
{
    sqlite3_stmt *st = NULL;
    int rc = db_stmt(d, SQL_WORKER_JOB, &st, err);
    if (rc < 0)
        return rc;
    sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
    db_bind_opt_text(st, 2, job_id);
    return db_write(d, st, err);
}

int db_worker_release(db *d, const char *id, const char *job_id, char *err)
{
    sqlite3_stmt *st = NULL;
    int rc = db_stmt(d, SQL_WORKER_RELEASE, &st, err);
    if (rc < 0)
        return rc;
    sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, job_id, -1, SQLITE_STATIC);
    return db_write(d, st, err);
}

int db_worker_list_named(db *d, const char *token_id, const char *name, db_worker_fn fn, void *ctx,
                         char *err)
{
    sqlite3_stmt *st = NULL;
    int rc = db_stmt(d, SQL_WORKER_NAMED, &st, err);
    if (rc < 0)
        return rc;
    sqlite3_bind_text(st, 1, token_id, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, name, -1, SQLITE_STATIC);
    db_worker_walk wk = {fn, ctx, err};
    return db_rows(d, st, db_worker_row, &wk, err);
}

int db_worker_set_gone(db *d, const char *id, char *err)
{
    sqlite3_stmt *st = NULL;
    int rc = db_stmt(d, SQL_WORKER_SET_GONE, &st, err);
    if (rc < 0)
        return rc;
    sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
    return db_write(d, st, err);
}

int db_worker_mark_gone(db *d, int64_t before, char *err)
{
    sqlite3_stmt *st = NULL;
    int rc = db_stmt(d, SQL_WORKER_GONE, &st, err);
    if (rc < 0)
        return rc;
    sqlite3_bind_int64(st, 1, before);
    return db_write(d, st, err);
}

int db_worker_forget(db *d, int64_t before, char *err)
{
    sqlite3_stmt *st = NULL;
    int rc = db_stmt(d, SQL_WORKER_FORGET, &st, err);
    if (rc < 0)
        return rc;
    sqlite3_bind_int64(st, 1, before);
    return db_write(d, st, err);
}
