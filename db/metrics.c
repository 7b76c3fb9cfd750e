/* db/metrics: storing and reading per-epoch metrics (see metrics.h). SQLite stores a bound NaN
 * as NULL, and db_col_real() reads NULL back as NAN, so "null" needs no flag of its own. */
#include "db/metrics.h"

#include <string.h>

static const char SQL_METRIC_PUT[] =
    "INSERT OR REPLACE INTO metrics (job_seq, attempt, epoch, loss, val_loss, accuracy,"
    " val_accuracy, seconds, samples_per_second, at, extra)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)";

int db_metric_put(db *d, int64_t job_seq, const db_metric *m, char *err)
{
    sqlite3_stmt *st = NULL;
    int rc = db_stmt(d, SQL_METRIC_PUT, &st, err);
    if (rc < 0)
        return rc;
    sqlite3_bind_int64(st, 1, job_seq);
    sqlite3_bind_int(st, 2, m->attempt);
    sqlite3_bind_int(st, 3, m->epoch);
    sqlite3_bind_double(st, 4, m->loss);
    sqlite3_bind_double(st, 5, m->val_loss);
    sqlite3_bind_double(st, 6, m->accuracy);
    sqlite3_bind_double(st, 7, m->val_accuracy);
    sqlite3_bind_double(st, 8, m->seconds);
    sqlite3_bind_double(st, 9, m->samples_per_second);
    sqlite3_bind_int64(st, 10, m->at);
    db_bind_opt_text(st, 11, m->extra);
    rc = db_write(d, st, err);
    return rc < 0 ? rc : 0;
}

static const char SQL_METRIC_DROP_AFTER[] = "DELETE FROM metrics WHERE job_seq = ? AND epoch > ?";

int db_metric_drop_after(db *d, int64_t job_seq, int epoch, char *err)
{
    sqlite3_stmt *st = NULL;
    int rc = db_stmt(d, SQL_METRIC_DROP_AFTER, &st, err);
    if (rc < 0)
        return rc;
    sqlite3_bind_int64(st, 1, job_seq);
    sqlite3_bind_int(st, 2, epoch);
    rc = db_write(d, st, err);
    return rc < 0 ? rc : 0;
}

#define DB_METRIC_COLS                                                                             \
    "id, attempt, epoch, loss, val_loss, accuracy, val_accuracy, "                                 \
    "seconds, samples_per_second, at, extra"

static const char SQL_METRIC_LIST[] =
    "SELECT " DB_METRIC_COLS " FROM metrics WHERE job_seq = ? ORDER BY epoch";
static const char SQL_METRIC_SINCE[] = "SELECT " DB_METRIC_COLS " FROM metrics"
                                       " WHERE job_seq = ? AND id > ? ORDER BY id LIMIT ?";

/* The user's callback and context for db_metric_row. */
typedef struct db_metric_walk {
    db_metric_fn fn;
    void *ctx;
} db_metric_walk;

/* db_rows() adapter: reads one metric row and hands it to the user's callback. */
static int db_metric_row(void *ctx, sqlite3_stmt *st)
{
    db_metric_walk *w = ctx;
    db_metric m;
    m.id = db_col_int(st, 0);
    m.attempt = sqlite3_column_int(st, 1);
    m.epoch = sqlite3_column_int(st, 2);
    m.loss = db_col_real(st, 3);
    m.val_loss = db_col_real(st, 4);
    m.accuracy = db_col_real(st, 5);
    m.val_accuracy = db_col_real(st, 6);
    m.seconds = db_col_real(st, 7);
    m.samples_per_second = db_col_real(st, 8);
    m.at = db_col_int(st, 9);
    m.extra = (const char *)sqlite3_column_text(st, 10);
    return w->fn(w->ctx, &m);
}

int db_metric_list(db *d, int64_t job_seq, db_metric_fn fn, void *ctx, char *err)
{
    sqlite3_stmt *st = NULL;
    int rc = db_stmt(d, SQL_METRIC_LIST, &st, err);
    if (rc < 0)
        return rc;
    sqlite3_bind_int64(st, 1, job_seq);
    db_metric_walk w = {fn, ctx};
    return db_rows(d, st, db_metric_row, &w, err);
}

int db_metric_since(db *d, int64_t job_seq, int64_t after_id, int limit, db_metric_fn fn, void *ctx,
                    char *err)
{
    sqlite3_stmt *st = NULL;
    int rc = db_stmt(d, SQL_METRIC_SINCE, &st, err);
    if (rc < 0)
        return rc;
    sqlite3_bind_int64(st, 1, job_seq);
    sqlite3_bind_int64(st, 2, after_id);
    sqlite3_bind_int(st, 3, limit);
    db_metric_walk w = {fn, ctx};
    return db_rows(d, st, db_metric_row, &w, err);
}
