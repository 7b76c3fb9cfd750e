/* retention: removing old finished jobs (see retention.h). */
#include "scheduler/retention.h"

#include <errno.h>
#include <string.h>

#include "db/jobs.h"
#include "scheduler/lifecycle.h"

/* finished_at is set exactly when a job enters a terminal state, so it needs no status test; one
 * (status IN (...)) made SQLite, which has no statistics here, walk jobs_status_seq and sort:
 * 860 ms a pass at 1,000,000 jobs instead of 0.35 ms through jobs_finished. */
static const char SQL_RETAIN_CANDIDATES[] =
    "SELECT id FROM jobs WHERE finished_at IS NOT NULL AND finished_at < ? AND keep = 0"
    " ORDER BY finished_at LIMIT ?";
static const char SQL_JOB_SET_KEEP[] = "UPDATE jobs SET keep = ? WHERE id = ?";

/* The ids of one pass, read before any is removed (the statement is done by then). */
typedef struct retain_ids {
    char (*id)[DB_ID_LEN + 1];
    int n, cap;
} retain_ids;

static int retain_take(void *ctx, sqlite3_stmt *st)
{
    retain_ids *r = ctx;
    if (r->n < r->cap)
        db_col_copy(st, 0, r->id[r->n++], DB_ID_LEN + 1);
    return 0;
}

int sched_retain(db *d, const char *artifacts_dir, int64_t cutoff, int max_jobs, int64_t now,
                 int *removed, char *err)
{
    char ids[SCHED_RETAIN_BATCH][DB_ID_LEN + 1];
    retain_ids r = {ids, 0, max_jobs < SCHED_RETAIN_BATCH ? max_jobs : SCHED_RETAIN_BATCH};
    sqlite3_stmt *st = NULL;
    *removed = 0;
    int rc = db_stmt(d, SQL_RETAIN_CANDIDATES, &st, err);
    if (rc < 0)
        return rc;
    sqlite3_bind_int64(st, 1, cutoff);
    sqlite3_bind_int(st, 2, r.cap);
    rc = db_rows(d, st, retain_take, &r, err);
    if (rc < 0)
        return rc;
    for (int i = 0; i < r.n; i++) {
        rc = sched_job_delete_unkept(d, r.id[i], artifacts_dir, now, err);
        if (rc == -ENOENT || rc == -EBUSY)
            continue; /* deleted or marked keep meanwhile */
        if (rc < 0)
            return rc;
        (*removed)++;
    }
    return 0;
}

int sched_job_set_keep(db *d, const char *id, int keep, char *err)
{
    sqlite3_stmt *st = NULL;
    int rc = db_stmt(d, SQL_JOB_SET_KEEP, &st, err);
    if (rc < 0)
        return rc;
    sqlite3_bind_int(st, 1, keep ? 1 : 0);
    sqlite3_bind_text(st, 2, id, -1, SQLITE_STATIC);
    rc = db_write(d, st, err);
    if (rc == 0)
        return err_set(err, -ENOENT, "no job %s", id);
    return rc < 0 ? rc : 0;
}
