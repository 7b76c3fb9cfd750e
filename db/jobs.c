/* db/jobs: reading and writing rows of the jobs table (see jobs.h).
 *
 * Every SELECT names the columns in DB_JOB_COLS order so that one reader, db_job_read(), fills
 * a db_job from any of them. Listings use one statement per combination of filters, each able
 * to walk an index in seq order (jobs_status_seq, jobs_name_seq, or the rowid itself), rather
 * than one statement with "? IS NULL OR ..." clauses that SQLite cannot plan on an index. */
#include "db/jobs.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "db/workers.h"
#include "job/job.h"

#define DB_JOB_COLS                                                                                         \
    "seq, id, name, status, phase, attempt, max_attempts, priority, device_kind, "                          \
    "max_runtime_seconds, document, created_at, started_at, finished_at, attempt_started_at, "              \
    "runtime_ms, error, device, worker_id, lease_expires_at, cancel_requested, log_lines, "                 \
    "owner, script, replicas, slurm_job_id, for_worker, stop_requested, stop_reason, "                      \
    "stopped_epoch, best_epoch, keep, sweep_seq, "                                                          \
    "(SELECT id FROM sweeps WHERE sweeps.seq = jobs.sweep_seq), retry_at, slurm_reason" /* body_hash        \
                                                                                           follows          \
                                                                                           it in            \
                                                                                           SQL_JOB_GET_KEY: \
                                                                                           column           \
                                                                                           36 */

/* Leasing's two holds on a queued job of the outer query, besides what the worker offers: its
 * retry back-off lasts until retry_at (?now: the parameter of the current time), and its
 * token's running cap (tokens.max_running, 0: none) is reached when as many of the token's
 * jobs as the cap count as running (`running`: a condition on the token's job r). The tokens at
 * their cap are one list made once per statement (the partial index tokens_capped walks only
 * capped tokens), not a subquery per queued job: with 20,000 queued jobs of a token at its
 * cap ahead of the job a lease finds, about 5 ms a lease instead of 15 to 24 ms (measured on
 * the development machine; the walk of those rows is what is left). */
#define DB_JOB_NOT_BACKING_OFF(now) "(retry_at IS NULL OR retry_at <= " now ")"
#define DB_JOB_UNDER_CAP(running)                                                                  \
    "(owner IS NULL OR owner NOT IN (SELECT t.id FROM tokens t WHERE t.max_running > 0"            \
    " AND t.max_running <= (SELECT count(*) FROM jobs r WHERE r.owner = t.id AND " running ")))"
#define DB_JOB_RUNNING_R "r.status = 'running'"

static const char *const db_status_names[DB_N_STATUS] = {"queued", "running", "succeeded", "failed",
                                                         "cancelled"};
static const char *const db_phase_names[] = {NULL, "downloading", "training", "uploading"};
static const char *const db_kind_names[] = {"any", "gpu", "cpu"};

const char *db_status_name(int status)
{
    return status >= 0 && status < DB_N_STATUS ? db_status_names[status] : NULL;
}

int db_status_parse(const char *s)
{
    for (int i = 0; s && i < DB_N_STATUS; i++) {
        if (strcmp(s, db_status_names[i]) == 0)
            return i;
    }
    return -1;
}

int db_status_terminal(int status)
{
    return status == DB_SUCCEEDED || status == DB_FAILED || status == DB_CANCELLED;
}

const char *db_phase_name(int phase)
{
    return phase > DB_PHASE_NONE && phase <= DB_PHASE_UPLOADING ? db_phase_names[phase] : NULL;
}

int db_phase_parse(const char *s)
{
    for (int i = DB_PHASE_DOWNLOADING; s && i <= DB_PHASE_UPLOADING; i++) {
        if (strcmp(s, db_phase_names[i]) == 0)
            return i;
    }
    return -1;
}

const char *db_device_kind_name(int kind)
{
    return kind >= JOB_DEVICE_ANY && kind <= JOB_DEVICE_CPU ? db_kind_names[kind] : NULL;
}

static int db_device_kind_parse(const char *s)
{
    for (int i = JOB_DEVICE_ANY; s && i <= JOB_DEVICE_CPU; i++) {
        if (strcmp(s, db_kind_names[i]) == 0)
            return i;
    }
    return JOB_DEVICE_ANY;
}

void db_job_clear(db_job *j)
{
    if (!j)
        return;
    free(j->document);
    free(j->error);
    memset(j, 0, sizeof *j);
}

int db_job_copy(const db_job *src, db_job *out, char *err)
{
    db_job c = *src;
    c.document = strdup(src->document ? src->document : "{}");
    c.error = src->error ? strdup(src->error) : NULL;
    if (!c.document || (src->error && !c.error)) {
        free(c.document);
        free(c.error);
        return err_set(err, -ENOMEM, "out of memory");
    }
    *out = c;
    return 0;
}

/* Fills *out from a row in DB_JOB_COLS order. */
static int db_job_read(sqlite3_stmt *st, db_job *out, char *err)
{
    db_job j;
    memset(&j, 0, sizeof j);
    j.seq = db_col_int(st, 0);
    db_col_copy(st, 1, j.id, sizeof j.id);
    db_col_copy(st, 2, j.name, sizeof j.name);
    j.status = db_status_parse((const char *)sqlite3_column_text(st, 3));
    j.phase = db_phase_parse((const char *)sqlite3_column_text(st, 4));
    if (j.phase < 0)
        j.phase = DB_PHASE_NONE;
    j.attempt = sqlite3_column_int(st, 5);
    j.max_attempts = sqlite3_column_int(st, 6);
    j.priority = sqlite3_column_int(st, 7);
    j.device_kind = db_device_kind_parse((const char *)sqlite3_column_text(st, 8));
    j.max_runtime_seconds = sqlite3_column_int(st, 9);
    j.created_at = db_col_int(st, 11);
    j.started_at = db_col_int(st, 12);
    j.finished_at = db_col_int(st, 13);
    j.attempt_started_at = db_col_int(st, 14);
    j.runtime_ms = db_col_int(st, 15);
    db_col_copy(st, 17, j.device, sizeof j.device);
    db_col_copy(st, 18, j.worker_id, sizeof j.worker_id);
    j.lease_expires_at = db_col_int(st, 19);
    j.cancel_requested = sqlite3_column_int(st, 20);
    j.log_lines = sqlite3_column_int(st, 21);
    db_col_copy(st, 22, j.owner, sizeof j.owner);
    j.script = sqlite3_column_int(st, 23);
    j.replicas = sqlite3_column_int(st, 24);
    db_col_copy(st, 25, j.slurm_job_id, sizeof j.slurm_job_id);
    db_col_copy(st, 26, j.for_worker, sizeof j.for_worker);
    db_col_copy(st, 27, j.stop_requested, sizeof j.stop_requested);
    db_col_copy(st, 28, j.stop_reason, sizeof j.stop_reason);
    j.stopped_epoch = sqlite3_column_int(st, 29);
    j.best_epoch = sqlite3_column_int(st, 30);
    j.keep = sqlite3_column_int(st, 31);
    j.sweep_seq = db_col_int(st, 32);
    db_col_copy(st, 33, j.sweep_id, sizeof j.sweep_id);
    j.retry_at = db_col_int(st, 34);
    db_col_copy(st, 35, j.slurm_reason, sizeof j.slurm_reason);
    if (db_col_dup(st, 10, &j.document) < 0 || db_col_dup(st, 16, &j.error) < 0) {
        db_job_clear(&j);
        return err_set(err, -ENOMEM, "out of memory");
    }
    if (!j.document)
        j.document = strdup("{}");
    if (!j.document) {
        db_job_clear(&j);
        return err_set(err, -ENOMEM, "out of memory");
    }
    *out = j;
    return 0;
}

/* Steps st expecting at most one row; -ENOENT when none. */
static int db_job_one(db *d, sqlite3_stmt *st, db_job *out, char *err)
{
    int src = sqlite3_step(st);
    if (src == SQLITE_DONE)
        return err_set(err, -ENOENT, "no such job");
    if (src != SQLITE_ROW)
        return db_fail(d, src, err);
    return db_job_read(st, out, err);
}

static const char SQL_JOB_INSERT[] =
    "INSERT INTO jobs (id, name, status, attempt, max_attempts, priority, device_kind,"
    " max_runtime_seconds, document, idempotency_key, body_hash, created_at, owner, script,"
    " replicas, keep, sweep_seq)"
    " VALUES (?, ?, 'queued', 0, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)";

int db_job_insert(db *d, db_job *j, const char *idem_key, const char *body_hash, char *err)
{
    sqlite3_stmt *st = NULL;
    int rc = db_stmt(d, SQL_JOB_INSERT, &st, err);
    if (rc < 0)
        return rc;
    sqlite3_bind_text(st, 1, j->id, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, j->name, -1, SQLITE_STATIC);
    sqlite3_bind_int(st, 3, j->max_attempts);
    sqlite3_bind_int(st, 4, j->priority);
    sqlite3_bind_text(st, 5, db_device_kind_name(j->device_kind), -1, SQLITE_STATIC);
    sqlite3_bind_int(st, 6, j->max_runtime_seconds);
    sqlite3_bind_text(st, 7, j->document, -1, SQLITE_STATIC);
    db_bind_opt_text(st, 8, idem_key);
    db_bind_opt_text(st, 9, body_hash);
    sqlite3_bind_int64(st, 10, j->created_at);
    db_bind_opt_text(st, 11, j->owner);
    sqlite3_bind_int(st, 12, j->script != 0);
    sqlite3_bind_int(st, 13, j->replicas > 1 ? j->replicas : 1);
    sqlite3_bind_int(st, 14, j->keep != 0);
    if (j->sweep_seq > 0)
        sqlite3_bind_int64(st, 15, j->sweep_seq);
    else
        sqlite3_bind_null(st, 15);
    int src = sqlite3_step(st);
    if (src != SQLITE_DONE)
        rc = db_fail(d, src, err);
    else
        j->seq = sqlite3_last_insert_rowid(db_sqlite(d));
    db_stmt_done(st);
    return rc;
}

static const char SQL_JOB_GET[] = "SELECT " DB_JOB_COLS " FROM jobs WHERE id = ?";
static const char SQL_JOB_GET_SEQ[] = "SELECT " DB_JOB_COLS " FROM jobs WHERE seq = ?";
static const char SQL_JOB_GET_KEY[] =
    "SELECT " DB_JOB_COLS ", body_hash FROM jobs WHERE idempotency_key = ?";

int db_job_get(db *d, const char *id, db_job *out, char *err)
{
    sqlite3_stmt *st = NULL;
    int rc = db_stmt(d, SQL_JOB_GET, &st, err);
    if (rc < 0)
        return rc;
    sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
    rc = db_job_one(d, st, out, err);
    db_stmt_done(st);
    return rc;
}

int db_job_get_seq(db *d, int64_t seq, db_job *out, char *err)
{
    sqlite3_stmt *st = NULL;
    int rc = db_stmt(d, SQL_JOB_GET_SEQ, &st, err);
    if (rc < 0)
        return rc;
    sqlite3_bind_int64(st, 1, seq);
    rc = db_job_one(d, st, out, err);
    db_stmt_done(st);
    return rc;
}

int db_job_get_by_key(db *d, const char *idem_key, db_job *out, char body_hash[65], char *err)
{
    sqlite3_stmt *st = NULL;
    int rc = db_stmt(d, SQL_JOB_GET_KEY, &st, err);
    if (rc < 0)
        return rc;
    sqlite3_bind_text(st, 1, idem_key, -1, SQLITE_STATIC);
    rc = db_job_one(d, st, out, err);
    if (rc == 0)
        db_col_copy(st, 36, body_hash, 65);
    db_stmt_done(st);
    return rc;
}

/* The user's callback, its context and the error buffer for db_job_row. */
typedef struct db_job_walk {
    db_job_fn fn;
    void *ctx;
    char *err;
} db_job_walk;

/* db_rows() adapter: reads one job row, hands it to the user's callback, frees it. */
static int db_job_row(void *ctx, sqlite3_stmt *st)
{
    db_job_walk *w = ctx;
    db_job j;
    int rc = db_job_read(st, &j, w->err);
    if (rc < 0)
        return rc;
    rc = w->fn(w->ctx, &j);
    db_job_clear(&j);
    return rc;
}

/* ?1 before_seq (a huge number when 0), ?2 limit, ?3 status, ?4 name. */
/* One statement per combination of filters (bit 0: status, 1: name, 2: owner), so that each
 * can walk an index in seq order. */
#define SQL_JOB_LIST_(where)                                                                       \
    "SELECT " DB_JOB_COLS " FROM jobs WHERE " where "seq < ?1 ORDER BY seq DESC LIMIT ?2"
static const char *const SQL_JOB_LIST[8] = {
    SQL_JOB_LIST_(""),
    SQL_JOB_LIST_("status = ?3 AND "),
    SQL_JOB_LIST_("name = ?4 AND "),
    SQL_JOB_LIST_("name = ?4 AND status = ?3 AND "),
    SQL_JOB_LIST_("owner = ?5 AND "),
    SQL_JOB_LIST_("owner = ?5 AND status = ?3 AND "),
    SQL_JOB_LIST_("owner = ?5 AND name = ?4 AND "),
    SQL_JOB_LIST_("owner = ?5 AND name = ?4 AND status = ?3 AND "),
};

/* A sweep's trials: the index jobs_sweep holds them alone, so the other filters may be
 * optional clauses here. */
static const char SQL_JOB_LIST_SWEEP[] =
    "SELECT " DB_JOB_COLS " FROM jobs WHERE sweep_seq = (SELECT seq FROM sweeps WHERE id = ?6)"
    " AND (?3 IS NULL OR status = ?3) AND (?4 IS NULL OR name = ?4)"
    " AND (?5 IS NULL OR owner = ?5) AND seq < ?1 ORDER BY seq DESC LIMIT ?2";

int db_job_list(db *d, const db_job_filter *f, db_job_fn fn, void *ctx, char *err)
{
    const char *sql = f->sweep
                          ? SQL_JOB_LIST_SWEEP
                          : SQL_JOB_LIST[(f->status >= 0) | (f->name ? 2 : 0) | (f->owner ? 4 : 0)];
    sqlite3_stmt *st = NULL;
    int rc = db_stmt(d, sql, &st, err);
    if (rc < 0)
        return rc;
    sqlite3_bind_int64(st, 1, f->before_seq > 0 ? f->before_seq : INT64_MAX);
    sqlite3_bind_int(st, 2, f->limit);
    if (f->status >= 0)
        sqlite3_bind_text(st, 3, db_status_name(f->status), -1, SQLITE_STATIC);
    if (f->name)
        sqlite3_bind_text(st, 4, f->name, -1, SQLITE_STATIC);
    if (f->owner)
        sqlite3_bind_text(st, 5, f->owner, -1, SQLITE_STATIC);
    if (f->sweep)
        sqlite3_bind_text(st, 6, f->sweep, -1, SQLITE_STATIC);
    db_job_walk w = {fn, ctx, err};
    return db_rows(d, st, db_job_row, &w, err);
}

static const char SQL_JOB_RUNNING[] =
    "SELECT " DB_JOB_COLS " FROM jobs WHERE status = 'running' ORDER BY seq";

int db_job_list_running(db *d, db_job_fn fn, void *ctx, char *err)
{
    sqlite3_stmt *st = NULL;
    int rc = db_stmt(d, SQL_JOB_RUNNING, &st, err);
    if (rc < 0)
        return rc;
    db_job_walk w = {fn, ctx, err};
    return db_rows(d, st, db_job_row, &w, err);
}

/* The Slurm executor's two walks: queued jobs that no worker is bound to (script jobs only when
 * ?3 says so) and that leasing would not hold back (what it submits, in leasing order; a job
 * bound to a Slurm job counts against its token's running cap, as it will run), and every job
 * bound to a worker (what it polls and settles). */
static const char SQL_JOB_UNBOUND[] =
    "SELECT " DB_JOB_COLS " FROM jobs WHERE status = 'queued' AND (script = 0 OR ?3)"
    " AND for_worker IS NULL AND " DB_JOB_NOT_BACKING_OFF("?2") " AND " DB_JOB_UNDER_CAP(
        "(r.status = 'running' OR (r.status = 'queued' AND "
        "r.for_worker IS NOT NULL))") " ORDER BY priority DESC, seq "
                                      "LIMIT ?1";
static const char SQL_JOB_BOUND[] = "SELECT " DB_JOB_COLS " FROM jobs WHERE for_worker IS NOT NULL"
                                    " AND seq > ?2 ORDER BY seq LIMIT ?1";

/* Runs sql with ?1 limit, ?2 arg (SQL_JOB_UNBOUND's now, SQL_JOB_BOUND's after_seq) and, for
 * SQL_JOB_UNBOUND, ?3 scripts. */
static int db_job_list_limited(db *d, const char *sql, int limit, int64_t arg, int scripts,
                               db_job_fn fn, void *ctx, char *err)
{
    sqlite3_stmt *st = NULL;
    int rc = db_stmt(d, sql, &st, err);
    if (rc < 0)
        return rc;
    sqlite3_bind_int(st, 1, limit);
    sqlite3_bind_int64(st, 2, arg);
    if (sql == SQL_JOB_UNBOUND)
        sqlite3_bind_int(st, 3, scripts != 0);
    db_job_walk w = {fn, ctx, err};
    return db_rows(d, st, db_job_row, &w, err);
}

int db_job_list_unbound(db *d, int64_t now, int limit, int scripts, db_job_fn fn, void *ctx,
                        char *err)
{
    return db_job_list_limited(d, SQL_JOB_UNBOUND, limit, now, scripts, fn, ctx, err);
}

int db_job_list_bound(db *d, int64_t after_seq, int limit, db_job_fn fn, void *ctx, char *err)
{
    return db_job_list_limited(d, SQL_JOB_BOUND, limit, after_seq, 0, fn, ctx, err);
}

/* Walks jobs_queue (status, priority DESC, seq) and skips jobs whose kind does not fit, script
 * jobs unless the worker runs scripts, built-in jobs when it has no OpenCL device
 * (DB_KIND_SCRIPTS_ONLY), jobs of more replicas than its slots, jobs bound to another worker (a
 * bound worker takes only its own), jobs in a retry's back-off and jobs whose token is at its
 * running cap (scheduler/waiting.c says the same in C: sched_worker_takes, sched_job_held). */
static const char SQL_JOB_NEXT[] =
    "SELECT " DB_JOB_COLS " FROM jobs WHERE status = 'queued'"
    " AND (device_kind = 'any' OR (device_kind = 'gpu' AND ?1) OR (device_kind = 'cpu' AND ?2))"
    " AND (script = 0 OR ?3) AND (script = 1 OR NOT ?7) AND replicas <= ?4"
    " AND (for_worker = ?5 OR (for_worker IS NULL AND NOT ?6))"
    " AND " DB_JOB_NOT_BACKING_OFF("?8") " AND " DB_JOB_UNDER_CAP(
        DB_JOB_RUNNING_R) " ORDER BY priority DESC, seq LIMIT 1";

int db_job_next_queued(db *d, const db_worker *w, int64_t now, db_job *out, char *err)
{
    if (w->kinds == 0)
        return 0; /* a worker without devices runs nothing */
    sqlite3_stmt *st = NULL;
    int rc = db_stmt(d, SQL_JOB_NEXT, &st, err);
    if (rc < 0)
        return rc;
    sqlite3_bind_int(st, 1, (w->kinds & DB_KIND_GPU) != 0);
    sqlite3_bind_int(st, 2, (w->kinds & DB_KIND_CPU) != 0);
    sqlite3_bind_int(st, 3, w->scripts != 0);
    sqlite3_bind_int(st, 4, w->slots > 1 ? w->slots : 1);
    sqlite3_bind_text(st, 5, w->id, -1, SQLITE_STATIC);
    sqlite3_bind_int(st, 6, w->bound != 0);
    sqlite3_bind_int(st, 7, (w->kinds & DB_KIND_SCRIPTS_ONLY) != 0);
    sqlite3_bind_int64(st, 8, now);
    rc = db_job_one(d, st, out, err);
    db_stmt_done(st);
    if (rc == -ENOENT)
        return 0;
    return rc < 0 ? rc : 1;
}

static const char SQL_JOB_SET_SLURM[] =
    "UPDATE jobs SET slurm_job_id = ?2, for_worker = ?3, slurm_reason = NULL WHERE seq = ?1";

int db_job_set_slurm(db *d, int64_t seq, const char *slurm_job_id, const char *worker_id, char *err)
{
    sqlite3_stmt *st = NULL;
    int rc = db_stmt(d, SQL_JOB_SET_SLURM, &st, err);
    if (rc < 0)
        return rc;
    sqlite3_bind_int64(st, 1, seq);
    db_bind_opt_text(st, 2, slurm_job_id);
    db_bind_opt_text(st, 3, worker_id);
    return db_write(d, st, err);
}

static const char SQL_JOB_SET_SLURM_REASON[] =
    "UPDATE jobs SET slurm_reason = ?2 WHERE seq = ?1 AND status = 'queued'";

int db_job_set_slurm_reason(db *d, int64_t seq, const char *reason, char *err)
{
    sqlite3_stmt *st = NULL;
    int rc = db_stmt(d, SQL_JOB_SET_SLURM_REASON, &st, err);
    if (rc < 0)
        return rc;
    sqlite3_bind_int64(st, 1, seq);
    db_bind_opt_text(st, 2, reason);
    return db_write(d, st, err);
}

static const char SQL_JOB_COUNT[] = "SELECT count(*) FROM jobs WHERE status = ?";

int db_job_count(db *d, int status, int64_t *out, char *err)
{
    sqlite3_stmt *st = NULL;
    int rc = db_stmt(d, SQL_JOB_COUNT, &st, err);
    if (rc < 0)
        return rc;
    sqlite3_bind_text(st, 1, db_status_name(status), -1, SQLITE_STATIC);
    return db_count(d, st, out, err);
}

static const char SQL_JOB_BACKOFF_OVER[] = "SELECT count(*) FROM jobs WHERE retry_at > ?1"
                                           " AND retry_at <= ?2 AND status = 'queued'";

int db_job_count_backoff_over(db *d, int64_t after, int64_t upto, int64_t *out, char *err)
{
    sqlite3_stmt *st = NULL;
    int rc = db_stmt(d, SQL_JOB_BACKOFF_OVER, &st, err);
    if (rc < 0)
        return rc;
    sqlite3_bind_int64(st, 1, after);
    sqlite3_bind_int64(st, 2, upto);
    return db_count(d, st, out, err);
}

static const char SQL_JOB_COUNT_OWNER[] =
    "SELECT count(*) FROM jobs WHERE owner = ? AND status = ?";

int db_job_count_owned(db *d, const char *owner, int status, int64_t *out, char *err)
{
    sqlite3_stmt *st = NULL;
    int rc = db_stmt(d, SQL_JOB_COUNT_OWNER, &st, err);
    if (rc < 0)
        return rc;
    sqlite3_bind_text(st, 1, owner, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, db_status_name(status), -1, SQLITE_STATIC);
    return db_count(d, st, out, err);
}

/* Queued jobs that a worker of can's kinds, scripts and slots would lease before j (a higher
 * priority, or the same and older), walked along jobs_queue in leasing's order and cut at ?8
 * rows, so a deep queue costs no more than the cap; of those, the ones of a higher priority
 * (they come first in that order, so up to the cap they are all counted). The kind, script,
 * slot, back-off and cap tests are SQL_JOB_NEXT's. */
static const char SQL_JOB_AHEAD[] =
    "SELECT count(*), coalesce(sum(priority > ?1), 0) FROM (SELECT priority FROM jobs"
    " WHERE status = 'queued' AND (priority > ?1 OR (priority = ?1 AND seq < ?2))"
    " AND (device_kind = 'any' OR (device_kind = 'gpu' AND ?3) OR (device_kind = 'cpu' AND ?4))"
    " AND (script = 0 OR ?5) AND (script = 1 OR NOT ?7) AND replicas <= ?6 AND for_worker IS NULL"
    " AND " DB_JOB_NOT_BACKING_OFF("?9") " AND " DB_JOB_UNDER_CAP(
        DB_JOB_RUNNING_R) " ORDER BY priority DESC, seq LIMIT ?8)";

int db_job_count_ahead(db *d, const db_job *j, const db_worker *can, int64_t now, int limit,
                       int64_t *ahead, int64_t *higher, char *err)
{
    sqlite3_stmt *st = NULL;
    int rc = db_stmt(d, SQL_JOB_AHEAD, &st, err);
    if (rc < 0)
        return rc;
    sqlite3_bind_int(st, 1, j->priority);
    sqlite3_bind_int64(st, 2, j->seq);
    sqlite3_bind_int(st, 3, (can->kinds & DB_KIND_GPU) != 0);
    sqlite3_bind_int(st, 4, (can->kinds & DB_KIND_CPU) != 0);
    sqlite3_bind_int(st, 5, can->scripts != 0);
    sqlite3_bind_int(st, 6, can->slots > 1 ? can->slots : 1);
    sqlite3_bind_int(st, 7, (can->kinds & DB_KIND_SCRIPTS_ONLY) != 0);
    sqlite3_bind_int(st, 8, limit);
    sqlite3_bind_int64(st, 9, now);
    rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        *ahead = sqlite3_column_int64(st, 0);
        *higher = sqlite3_column_int64(st, 1);
        rc = 0;
    } else {
        rc = db_fail(d, rc, err);
    }
    db_stmt_done(st);
    return rc;
}

static const char SQL_JOB_OWNER_CAP[] =
    "SELECT t.max_running, CASE WHEN t.max_running > 0 THEN (SELECT count(*) FROM jobs r"
    " WHERE r.owner = t.id AND " DB_JOB_RUNNING_R ") ELSE 0 END FROM tokens t WHERE t.id = ?1";

int db_job_owner_cap(db *d, const db_job *j, int *max_running, int64_t *running, char *err)
{
    int cap = 0;
    int64_t n = 0;
    if (j->owner[0]) {
        sqlite3_stmt *st = NULL;
        int rc = db_stmt(d, SQL_JOB_OWNER_CAP, &st, err);
        if (rc < 0)
            return rc;
        sqlite3_bind_text(st, 1, j->owner, -1, SQLITE_STATIC);
        rc = sqlite3_step(st);
        if (rc == SQLITE_ROW) {
            cap = sqlite3_column_int(st, 0);
            n = sqlite3_column_int64(st, 1);
        } else if (rc != SQLITE_DONE) {
            rc = db_fail(d, rc, err);
            db_stmt_done(st);
            return rc;
        }
        db_stmt_done(st);
    }
    *max_running = cap > 0 ? cap : 0;
    *running = n;
    return 0;
}

/* ---- state writes ---------------------------------------------------------------------- */

static const char SQL_JOB_RUN[] =
    "UPDATE jobs SET status = 'running', attempt = attempt + 1, phase = NULL,"
    " started_at = coalesce(started_at, ?3), attempt_started_at = ?3, worker_id = ?2,"
    " device = ?4, lease_expires_at = ?5, retry_at = NULL, slurm_reason = NULL"
    " WHERE seq = ?1 AND status = 'queued'";

int db_job_set_running(db *d, int64_t seq, const char *worker_id, const char *device, int64_t now,
                       int64_t lease_until, char *err)
{
    sqlite3_stmt *st = NULL;
    int rc = db_stmt(d, SQL_JOB_RUN, &st, err);
    if (rc < 0)
        return rc;
    sqlite3_bind_int64(st, 1, seq);
    sqlite3_bind_text(st, 2, worker_id, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 3, now);
    db_bind_opt_text(st, 4, device);
    sqlite3_bind_int64(st, 5, lease_until);
    return db_write(d, st, err);
}

static const char SQL_JOB_LEASE[] =
    "UPDATE jobs SET lease_expires_at = ?3, phase = coalesce(?4, phase), log_lines = ?5"
    " WHERE seq = ?1 AND status = 'running' AND worker_id = ?2";

int db_job_set_lease(db *d, int64_t seq, const char *worker_id, int phase, int64_t lease_until,
                     int log_lines, char *err)
{
    sqlite3_stmt *st = NULL;
    int rc = db_stmt(d, SQL_JOB_LEASE, &st, err);
    if (rc < 0)
        return rc;
    sqlite3_bind_int64(st, 1, seq);
    sqlite3_bind_text(st, 2, worker_id, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 3, lease_until);
    db_bind_opt_text(st, 4, db_phase_name(phase));
    sqlite3_bind_int(st, 5, log_lines);
    return db_write(d, st, err);
}

static const char SQL_JOB_REQUEUE[] =
    "UPDATE jobs SET status = 'queued', phase = NULL, lease_expires_at = NULL,"
    " runtime_ms = runtime_ms + max(0, ?2 - coalesce(attempt_started_at, ?2)),"
    " attempt_started_at = NULL, retry_at = ?3 WHERE seq = ?1 AND status = 'running'";

int db_job_set_requeued(db *d, int64_t seq, int64_t now, int64_t retry_at, char *err)
{
    sqlite3_stmt *st = NULL;
    int rc = db_stmt(d, SQL_JOB_REQUEUE, &st, err);
    if (rc < 0)
        return rc;
    sqlite3_bind_int64(st, 1, seq);
    sqlite3_bind_int64(st, 2, now);
    db_bind_opt_time(st, 3, retry_at > now ? retry_at : 0);
    return db_write(d, st, err);
}

static const char SQL_JOB_FINISH[] =
    "UPDATE jobs SET status = ?3, error = ?4, finished_at = ?5, phase = NULL,"
    " lease_expires_at = NULL,"
    " runtime_ms = runtime_ms + max(0, ?5 - coalesce(attempt_started_at, ?5)),"
    " attempt_started_at = NULL, dataset_credentials = NULL"
    " WHERE seq = ?1 AND status = 'running' AND (?2 IS NULL OR worker_id = ?2)";

int db_job_set_finished(db *d, int64_t seq, const char *worker_id, int status, const char *error,
                        int64_t now, char *err)
{
    if (!db_status_terminal(status))
        return err_set(err, -EINVAL, "a job can finish only as succeeded, failed or cancelled");
    sqlite3_stmt *st = NULL;
    int rc = db_stmt(d, SQL_JOB_FINISH, &st, err);
    if (rc < 0)
        return rc;
    sqlite3_bind_int64(st, 1, seq);
    db_bind_opt_text(st, 2, worker_id);
    sqlite3_bind_text(st, 3, db_status_name(status), -1, SQLITE_STATIC);
    db_bind_opt_text(st, 4, error);
    sqlite3_bind_int64(st, 5, now);
    return db_write(d, st, err);
}

static const char SQL_JOB_CANCEL[] = "UPDATE jobs SET status = 'cancelled', finished_at = ?2,"
                                     " dataset_credentials = NULL"
                                     " WHERE seq = ?1 AND status = 'queued'";

int db_job_set_cancelled(db *d, int64_t seq, int64_t now, char *err)
{
    sqlite3_stmt *st = NULL;
    int rc = db_stmt(d, SQL_JOB_CANCEL, &st, err);
    if (rc < 0)
        return rc;
    sqlite3_bind_int64(st, 1, seq);
    sqlite3_bind_int64(st, 2, now);
    return db_write(d, st, err);
}

static const char SQL_JOB_CANCEL_REQ[] =
    "UPDATE jobs SET cancel_requested = 1 WHERE seq = ?1 AND status = 'running'";

int db_job_set_cancel_requested(db *d, int64_t seq, char *err)
{
    sqlite3_stmt *st = NULL;
    int rc = db_stmt(d, SQL_JOB_CANCEL_REQ, &st, err);
    if (rc < 0)
        return rc;
    sqlite3_bind_int64(st, 1, seq);
    return db_write(d, st, err);
}

static const char SQL_JOB_STOP_REQ[] =
    "UPDATE jobs SET stop_requested = ?2 WHERE seq = ?1 AND status = 'running'"
    " AND stop_requested IS NULL";

int db_job_set_stop_requested(db *d, int64_t seq, const char *reason, char *err)
{
    sqlite3_stmt *st = NULL;
    int rc = db_stmt(d, SQL_JOB_STOP_REQ, &st, err);
    if (rc < 0)
        return rc;
    sqlite3_bind_int64(st, 1, seq);
    sqlite3_bind_text(st, 2, reason, -1, SQLITE_STATIC);
    return db_write(d, st, err);
}

static const char SQL_JOB_STOP_RESULT[] =
    "UPDATE jobs SET stop_reason = ?2, stopped_epoch = ?3, best_epoch = ?4 WHERE seq = ?1";

int db_job_set_stop_result(db *d, int64_t seq, const char *reason, int stopped_epoch,
                           int best_epoch, char *err)
{
    sqlite3_stmt *st = NULL;
    int rc = db_stmt(d, SQL_JOB_STOP_RESULT, &st, err);
    if (rc < 0)
        return rc;
    sqlite3_bind_int64(st, 1, seq);
    db_bind_opt_text(st, 2, reason && *reason ? reason : NULL);
    if (stopped_epoch > 0)
        sqlite3_bind_int(st, 3, stopped_epoch);
    else
        sqlite3_bind_null(st, 3);
    if (best_epoch > 0)
        sqlite3_bind_int(st, 4, best_epoch);
    else
        sqlite3_bind_null(st, 4);
    return db_write(d, st, err);
}

static const char SQL_JOB_DELETE[] =
    "DELETE FROM jobs WHERE seq = ?1 AND status IN ('succeeded', 'failed', 'cancelled')";

int db_job_delete(db *d, int64_t seq, char *err)
{
    sqlite3_stmt *st = NULL;
    int rc = db_stmt(d, SQL_JOB_DELETE, &st, err);
    if (rc < 0)
        return rc;
    sqlite3_bind_int64(st, 1, seq);
    return db_write(d, st, err);
}

/* ---- checkpoints ------------------------------------------------------------------------- */

static const char SQL_JOB_CKPT_GET[] = "SELECT checkpoint_epoch FROM jobs WHERE seq = ?";

int db_job_checkpoint_epoch(db *d, int64_t seq, int *out, char *err)
{
    sqlite3_stmt *st = NULL;
    int rc = db_stmt(d, SQL_JOB_CKPT_GET, &st, err);
    if (rc < 0)
        return rc;
    sqlite3_bind_int64(st, 1, seq);
    int epoch = -1;
    rc = db_rows(d, st, db_row_int, &epoch, err);
    if (rc < 0)
        return rc;
    if (epoch < 0)
        return err_set(err, -ENOENT, "no such job");
    *out = epoch;
    return 0;
}

static const char SQL_JOB_CKPT_SET[] = "UPDATE jobs SET checkpoint_epoch = ?2 WHERE seq = ?1";

int db_job_set_checkpoint_epoch(db *d, int64_t seq, int epoch, char *err)
{
    sqlite3_stmt *st = NULL;
    int rc = db_stmt(d, SQL_JOB_CKPT_SET, &st, err);
    if (rc < 0)
        return rc;
    sqlite3_bind_int64(st, 1, seq);
    sqlite3_bind_int(st, 2, epoch);
    rc = db_write(d, st, err);
    return rc < 0 ? rc : 0;
}

/* ---- dataset credentials --------------------------------------------------------------- */

static const char SQL_JOB_CRED_GET[] = "SELECT dataset_credentials FROM jobs WHERE seq = ?";

/* A db_rows() row callback: a malloc'd copy of text column 0 (NULL stays NULL) in *ctx. */
static int db_row_text_dup(void *ctx, sqlite3_stmt *st)
{
    const char *text = (const char *)sqlite3_column_text(st, 0);
    char **out = ctx;
    free(*out);
    *out = text ? strdup(text) : NULL;
    return text && !*out ? -ENOMEM : 0;
}

int db_job_credentials(db *d, int64_t seq, char **out, char *err)
{
    sqlite3_stmt *st = NULL;
    char *text = NULL;
    int rc = db_stmt(d, SQL_JOB_CRED_GET, &st, err);
    if (rc < 0)
        return rc;
    sqlite3_bind_int64(st, 1, seq);
    rc = db_rows(d, st, db_row_text_dup, &text, err);
    if (rc < 0) {
        free(text);
        return rc == -ENOMEM ? err_set(err, rc, "out of memory") : rc;
    }
    *out = text;
    return 0;
}

static const char SQL_JOB_CRED_SET[] = "UPDATE jobs SET dataset_credentials = ?2 WHERE seq = ?1";

int db_job_set_credentials(db *d, int64_t seq, const char *sealed, char *err)
{
    sqlite3_stmt *st = NULL;
    int rc = db_stmt(d, SQL_JOB_CRED_SET, &st, err);
    if (rc < 0)
        return rc;
    sqlite3_bind_int64(st, 1, seq);
    sqlite3_bind_text(st, 2, sealed, -1, SQLITE_STATIC);
    rc = db_write(d, st, err);
    return rc < 0 ? rc : 0;
}

static const char SQL_JOB_LOG_LINES[] = "UPDATE jobs SET log_lines = ?2 WHERE seq = ?1";

int db_job_set_log_lines(db *d, int64_t seq, int log_lines, char *err)
{
    sqlite3_stmt *st = NULL;
    int rc = db_stmt(d, SQL_JOB_LOG_LINES, &st, err);
    if (rc < 0)
        return rc;
    sqlite3_bind_int64(st, 1, seq);
    sqlite3_bind_int(st, 2, log_lines);
    rc = db_write(d, st, err);
    return rc < 0 ? rc : 0;
}
