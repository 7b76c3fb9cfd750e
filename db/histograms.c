/* db/histograms: storing and reading weight histograms (see histograms.h). */
#include "db/histograms.h"

static const char SQL_HISTOGRAM_PUT[] =
    "INSERT OR REPLACE INTO histograms (job_seq, epoch, tensor, data) VALUES (?, ?, ?, ?)";
static const char SQL_HISTOGRAM_DROP_AFTER[] =
    "DELETE FROM histograms WHERE job_seq = ? AND epoch > ?";
static const char SQL_HISTOGRAM_LIST[] =
    "SELECT epoch, tensor, data FROM histograms WHERE job_seq = ? ORDER BY epoch, tensor";

int db_histogram_put(db *d, int64_t job_seq, const db_histogram *h, char *err)
{
    sqlite3_stmt *st = NULL;
    int rc = db_stmt(d, SQL_HISTOGRAM_PUT, &st, err);
    if (rc < 0)
        return rc;
    sqlite3_bind_int64(st, 1, job_seq);
    sqlite3_bind_int(st, 2, h->epoch);
    sqlite3_bind_text(st, 3, h->tensor, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 4, h->data, -1, SQLITE_STATIC);
    rc = db_write(d, st, err);
    return rc < 0 ? rc : 0;
}

int db_histogram_drop_after(db *d, int64_t job_seq, int epoch, char *err)
{
    sqlite3_stmt *st = NULL;
    int rc = db_stmt(d, SQL_HISTOGRAM_DROP_AFTER, &st, err);
    if (rc < 0)
        return rc;
    sqlite3_bind_int64(st, 1, job_seq);
    sqlite3_bind_int(st, 2, epoch);
    rc = db_write(d, st, err);
    return rc < 0 ? rc : 0;
}

/* The user's callback and context for db_histogram_row. */
typedef struct db_histogram_walk {
    db_histogram_fn fn;
    void *ctx;
} db_histogram_walk;

static int db_histogram_row(void *ctx, sqlite3_stmt *st)
{
    db_histogram_walk *w = ctx;
    db_histogram h;
    h.epoch = sqlite3_column_int(st, 0);
    h.tensor = (const char *)sqlite3_column_text(st, 1);
    h.data = (const char *)sqlite3_column_text(st, 2);
    if (!h.tensor || !h.data)
        return 0; /* NOT NULL columns: cannot happen, but never hand out NULL */
    return w->fn(w->ctx, &h);
}

int db_histogram_list(db *d, int64_t job_seq, db_histogram_fn fn, void *ctx, char *err)
{
    sqlite3_stmt *st = NULL;
    int rc = db_stmt(d, SQL_HISTOGRAM_LIST, &st, err);
    if (rc < 0)
        return rc;
    sqlite3_bind_int64(st, 1, job_seq);
    db_histogram_walk w = {fn, ctx};
    return db_rows(d, st, db_histogram_row, &w, err);
}
