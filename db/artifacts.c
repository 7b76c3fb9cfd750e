/* db/artifacts: artifact rows (see artifacts.h). */
#include "db/artifacts.h"

#include <errno.h>
#include <string.h>

static const char SQL_ARTIFACT_PUT[] =
    "INSERT OR REPLACE INTO artifacts (job_seq, name, size, sha256, created_at)"
    " VALUES (?, ?, ?, ?, ?)";
static const char SQL_ARTIFACT_GET[] =
    "SELECT name, size, sha256, created_at FROM artifacts WHERE job_seq = ? AND name = ?";
static const char SQL_ARTIFACT_COUNT[] = "SELECT count(*) FROM artifacts WHERE job_seq = ?";
static const char SQL_ARTIFACT_LIST[] =
    "SELECT name, size, sha256, created_at FROM artifacts WHERE job_seq = ? ORDER BY name";

int db_artifact_put(db *d, int64_t job_seq, const db_artifact *a, char *err)
{
    sqlite3_stmt *st = NULL;
    int rc = db_stmt(d, SQL_ARTIFACT_PUT, &st, err);
    if (rc < 0)
        return rc;
    sqlite3_bind_int64(st, 1, job_seq);
    sqlite3_bind_text(st, 2, a->name, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 3, a->size);
    sqlite3_bind_text(st, 4, a->sha256, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 5, a->created_at);
    rc = db_write(d, st, err);
    return rc < 0 ? rc : 0;
}

static void db_artifact_read(sqlite3_stmt *st, db_artifact *a)
{
    db_col_copy(st, 0, a->name, sizeof a->name);
    a->size = db_col_int(st, 1);
    db_col_copy(st, 2, a->sha256, sizeof a->sha256);
    a->created_at = db_col_int(st, 3);
}

int db_artifact_get(db *d, int64_t job_seq, const char *name, db_artifact *out, char *err)
{
    sqlite3_stmt *st = NULL;
    int rc = db_stmt(d, SQL_ARTIFACT_GET, &st, err);
    if (rc < 0)
        return rc;
    sqlite3_bind_int64(st, 1, job_seq);
    sqlite3_bind_text(st, 2, name, -1, SQLITE_STATIC);
    int src = sqlite3_step(st);
    if (src == SQLITE_ROW)
        db_artifact_read(st, out);
    else if (src == SQLITE_DONE)
        rc = err_set(err, -ENOENT, "the job has no artifact named %s", name);
    else
        rc = db_fail(d, src, err);
    db_stmt_done(st);
    return rc;
}

/* The user's callback and context for db_artifact_row. */
typedef struct db_artifact_walk {
    db_artifact_fn fn;
    void *ctx;
} db_artifact_walk;

/* db_rows() adapter: reads one artifact row and hands it to the user's callback. */
static int db_artifact_row(void *ctx, sqlite3_stmt *st)
{
    db_artifact_walk *w = ctx;
    db_artifact a;
    db_artifact_read(st, &a);
    return w->fn(w->ctx, &a);
}

int db_artifact_list(db *d, int64_t job_seq, db_artifact_fn fn, void *ctx, char *err)
{
    sqlite3_stmt *st = NULL;
    int rc = db_stmt(d, SQL_ARTIFACT_LIST, &st, err);
    if (rc < 0)
        return rc;
    sqlite3_bind_int64(st, 1, job_seq);
    db_artifact_walk w = {fn, ctx};
    return db_rows(d, st, db_artifact_row, &w, err);
}

int db_artifact_count(db *d, int64_t job_seq, int64_t *out, char *err)
{
    sqlite3_stmt *st = NULL;
    int rc = db_stmt(d, SQL_ARTIFACT_COUNT, &st, err);
    if (rc < 0)
        return rc;
    sqlite3_bind_int64(st, 1, job_seq);
    return db_count(d, st, out, err);
}
