/* db/sweeps: sweep rows and the reads of their trials (see sweeps.h).
 *
 * The trials' reads go through the partial index jobs_sweep (sweep_seq, seq), so they cost the
 * sweep's own jobs, not the table's. */
#include "db/sweeps.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define DB_SWEEP_COLS                                                                              \
    "s.seq, s.id, s.name, s.owner, s.status, s.document, s.trials_created, s.best_job_seq,"        \
    " (SELECT j.id FROM jobs j WHERE j.seq = s.best_job_seq), s.error, s.created_at,"              \
    " s.finished_at"

static const char *const db_sweep_status_names[DB_SWEEP_N_STATUS] = {"running", "succeeded",
                                                                     "failed", "cancelled"};

static const char SQL_SWEEP_INSERT[] =
    "INSERT INTO sweeps (id, name, owner, status, document, trials_created, created_at)"
    " VALUES (?1, ?2, ?3, 'running', ?4, 0, ?5)";
static const char SQL_SWEEP_GET[] = "SELECT " DB_SWEEP_COLS " FROM sweeps s WHERE s.id = ?";
static const char SQL_SWEEP_GET_SEQ[] = "SELECT " DB_SWEEP_COLS " FROM sweeps s WHERE s.seq = ?";
static const char SQL_SWEEP_LIST[] =
    "SELECT " DB_SWEEP_COLS " FROM sweeps s WHERE s.seq < ?1 AND (?3 IS NULL OR s.owner = ?3)"
    " ORDER BY s.seq DESC LIMIT ?2";
static const char SQL_SWEEP_RUNNING[] =
    "SELECT seq FROM sweeps WHERE status = 'running' ORDER BY seq LIMIT ?";
static const char SQL_SWEEP_COUNT_UP[] = "UPDATE sweeps SET trials_created = trials_created + 1"
                                         " WHERE seq = ? AND status = 'running'";
static const char SQL_SWEEP_LINK[] = "UPDATE jobs SET sweep_seq = ?1 WHERE seq = ?2";
static const char SQL_SWEEP_FINISH[] =
    "UPDATE sweeps SET status = ?2, best_job_seq = ?3, error = ?4, finished_at = ?5"
    " WHERE seq = ?1 AND status = 'running'";
static const char SQL_SWEEP_TRIALS[] =
    "SELECT j.seq, j.id, j.name, j.status, j.document, j.stop_reason,"
    " j.stop_requested IS NOT NULL, j.cancel_requested,"
    " (SELECT count(*) FROM metrics m WHERE m.job_seq = j.seq), j.created_at"
    " FROM jobs j WHERE j.sweep_seq = ? ORDER BY j.seq";
/* The metric's value per epoch: a built-in column by name, else a member of a script's own
 * metrics (extra). The name is bound, never spliced in: json_extract takes the path as a
 * value, and the API allows no quote or backslash in a sweep's metric name. */
static const char SQL_SWEEP_POINTS[] =
    "SELECT m.job_seq, m.epoch, m.at,"
    " CASE ?2 WHEN 'loss' THEN m.loss WHEN 'val_loss' THEN m.val_loss"
    "  WHEN 'accuracy' THEN m.accuracy WHEN 'val_accuracy' THEN m.val_accuracy"
    "  ELSE json_extract(m.extra, '$.\"' || ?2 || '\"') END"
    " FROM jobs j JOIN metrics m ON m.job_seq = j.seq WHERE j.sweep_seq = ?1"
    " ORDER BY m.at, m.id";

const char *db_sweep_status_name(int status)
{
    return status >= 0 && status < DB_SWEEP_N_STATUS ? db_sweep_status_names[status] : NULL;
}

static int db_sweep_status_parse(const char *s)
{
    for (int i = 0; s && i < DB_SWEEP_N_STATUS; i++)
        if (!strcmp(s, db_sweep_status_names[i]))
            return i;
    return DB_SWEEP_FAILED;
}

void db_sweep_clear(db_sweep *s)
{
    if (!s)
        return;
    free(s->document);
    free(s->error);
    memset(s, 0, sizeof *s);
}

/* Fills *out from a row in DB_SWEEP_COLS order. */
static int db_sweep_read(sqlite3_stmt *st, db_sweep *out, char *err)
{
    db_sweep s;
    memset(&s, 0, sizeof s);
    s.seq = db_col_int(st, 0);
    db_col_copy(st, 1, s.id, sizeof s.id);
    db_col_copy(st, 2, s.name, sizeof s.name);
    db_col_copy(st, 3, s.owner, sizeof s.owner);
    s.status = db_sweep_status_parse((const char *)sqlite3_column_text(st, 4));
    s.trials_created = (int)db_col_int(st, 6);
    s.best_job_seq = db_col_int(st, 7);
    db_col_copy(st, 8, s.best_job_id, sizeof s.best_job_id);
    s.created_at = db_col_int(st, 10);
    s.finished_at = db_col_int(st, 11);
    if (db_col_dup(st, 5, &s.document) < 0 || db_col_dup(st, 9, &s.error) < 0 || !s.document) {
        db_sweep_clear(&s);
        return err_set(err, -ENOMEM, "out of memory");
    }
    *out = s;
    return 0;
}

int db_sweep_insert(db *d, db_sweep *s, char *err)
{
    sqlite3_stmt *st = NULL;
    int rc = db_stmt(d, SQL_SWEEP_INSERT, &st, err);
    if (rc < 0)
        return rc;
    sqlite3_bind_text(st, 1, s->id, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, s->name, -1, SQLITE_STATIC);
    db_bind_opt_text(st, 3, s->owner);
    sqlite3_bind_text(st, 4, s->document, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 5, s->created_at);
    rc = db_write(d, st, err);
    if (rc < 0)
        return rc;
    s->seq = sqlite3_last_insert_rowid(db_sqlite(d));
    s->status = DB_SWEEP_RUNNING;
    return 0;
}

typedef struct db_sweep_one {
    db_sweep *out;
    int found;
    char *err;
} db_sweep_one;

static int db_sweep_one_row(void *ctx, sqlite3_stmt *st)
{
    db_sweep_one *o = ctx;
    int rc = db_sweep_read(st, o->out, o->err);
    if (rc == 0)
        o->found = 1;
    return rc;
}

static int db_sweep_get_by(db *d, const char *sql, const char *id, int64_t seq, db_sweep *out,
                           char *err)
{
    sqlite3_stmt *st = NULL;
    int rc = db_stmt(d, sql, &st, err);
    if (rc < 0)
        return rc;
    if (id)
        sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
    else
        sqlite3_bind_int64(st, 1, seq);
    db_sweep_one o = {out, 0, err};
    rc = db_rows(d, st, db_sweep_one_row, &o, err);
    if (rc < 0)
        return rc;
    if (!o.found)
        return err_set(err, -ENOENT, "no such sweep");
    return 0;
}

int db_sweep_get(db *d, const char *id, db_sweep *out, char *err)
{
    return db_sweep_get_by(d, SQL_SWEEP_GET, id, 0, out, err);
}

int db_sweep_get_seq(db *d, int64_t seq, db_sweep *out, char *err)
{
    return db_sweep_get_by(d, SQL_SWEEP_GET_SEQ, NULL, seq, out, err);
}

typedef struct db_sweep_walk {
    db_sweep_fn fn;
    void *ctx;
    char *err;
} db_sweep_walk;

static int db_sweep_walk_row(void *ctx, sqlite3_stmt *st)
{
    db_sweep_walk *w = ctx;
    db_sweep s;
    int rc = db_sweep_read(st, &s, w->err);
    if (rc < 0)
        return rc;
    rc = w->fn(w->ctx, &s);
    db_sweep_clear(&s);
    return rc;
}

int db_sweep_list(db *d, const char *owner, int64_t before_seq, int limit, db_sweep_fn fn,
                  void *ctx, char *err)
{
    sqlite3_stmt *st = NULL;
    int rc = db_stmt(d, SQL_SWEEP_LIST, &st, err);
    if (rc < 0)
        return rc;
    sqlite3_bind_int64(st, 1, before_seq > 0 ? before_seq : INT64_MAX);
    sqlite3_bind_int(st, 2, limit);
    if (owner)
        sqlite3_bind_text(st, 3, owner, -1, SQLITE_STATIC);
    db_sweep_walk w = {fn, ctx, err};
    return db_rows(d, st, db_sweep_walk_row, &w, err);
}

typedef struct db_seq_list {
    int64_t *seqs;
    int n, cap;
} db_seq_list;

static int db_seq_row(void *ctx, sqlite3_stmt *st)
{
    db_seq_list *l = ctx;
    if (l->n < l->cap)
        l->seqs[l->n++] = sqlite3_column_int64(st, 0);
    return 0;
}

int db_sweep_running(db *d, int64_t *seqs, int cap, char *err)
{
    sqlite3_stmt *st = NULL;
    int rc = db_stmt(d, SQL_SWEEP_RUNNING, &st, err);
    if (rc < 0)
        return rc;
    sqlite3_bind_int(st, 1, cap);
    db_seq_list l = {seqs, 0, cap};
    rc = db_rows(d, st, db_seq_row, &l, err);
    return rc < 0 ? rc : l.n;
}

int db_sweep_trial_added(db *d, int64_t sweep_seq, int64_t job_seq, char *err)
{
    sqlite3_stmt *st = NULL;
    int rc = db_stmt(d, SQL_SWEEP_COUNT_UP, &st, err);
    if (rc < 0)
        return rc;
    sqlite3_bind_int64(st, 1, sweep_seq);
    rc = db_write(d, st, err);
    if (rc < 0)
        return rc;
    if (rc == 0)
        return err_set(err, -ECANCELED, "the sweep has ended: it makes no more trials");
    rc = db_stmt(d, SQL_SWEEP_LINK, &st, err);
    if (rc < 0)
        return rc;
    sqlite3_bind_int64(st, 1, sweep_seq);
    sqlite3_bind_int64(st, 2, job_seq);
    rc = db_write(d, st, err);
    return rc < 0 ? rc : 0;
}

int db_sweep_set_finished(db *d, int64_t seq, int status, int64_t best_job_seq, const char *error,
                          int64_t now, char *err)
{
    sqlite3_stmt *st = NULL;
    int rc = db_stmt(d, SQL_SWEEP_FINISH, &st, err);
    if (rc < 0)
        return rc;
    sqlite3_bind_int64(st, 1, seq);
    sqlite3_bind_text(st, 2, db_sweep_status_name(status), -1, SQLITE_STATIC);
    if (best_job_seq > 0)
        sqlite3_bind_int64(st, 3, best_job_seq);
    db_bind_opt_text(st, 4, error);
    sqlite3_bind_int64(st, 5, now);
    return db_write(d, st, err);
}

typedef struct db_trial_walk {
    db_sweep_trial_fn fn;
    void *ctx;
} db_trial_walk;

static int db_trial_row(void *ctx, sqlite3_stmt *st)
{
    db_trial_walk *w = ctx;
    db_sweep_trial t = {
        .seq = sqlite3_column_int64(st, 0),
        .id = (const char *)sqlite3_column_text(st, 1),
        .name = (const char *)sqlite3_column_text(st, 2),
        .status = db_status_parse((const char *)sqlite3_column_text(st, 3)),
        .document = (const char *)sqlite3_column_text(st, 4),
        .stop_reason = (const char *)sqlite3_column_text(st, 5),
        .stop_requested = sqlite3_column_int(st, 6),
        .cancel_requested = sqlite3_column_int(st, 7),
        .epochs = sqlite3_column_int(st, 8),
        .created_at = sqlite3_column_int64(st, 9),
    };
    if (!t.id || !t.name || !t.document)
        return -ENOMEM; /* a NOT NULL column read back as NULL: SQLite ran out of memory */
    return w->fn(w->ctx, &t);
}

int db_sweep_trials(db *d, int64_t seq, db_sweep_trial_fn fn, void *ctx, char *err)
{
    sqlite3_stmt *st = NULL;
    int rc = db_stmt(d, SQL_SWEEP_TRIALS, &st, err);
    if (rc < 0)
        return rc;
    sqlite3_bind_int64(st, 1, seq);
    db_trial_walk w = {fn, ctx};
    rc = db_rows(d, st, db_trial_row, &w, err);
    if (rc == -ENOMEM)
        err_set(err, rc, "out of memory");
    return rc;
}

typedef struct db_point_walk {
    db_sweep_point_fn fn;
    void *ctx;
} db_point_walk;

static int db_point_row(void *ctx, sqlite3_stmt *st)
{
    db_point_walk *w = ctx;
    db_sweep_point p = {.job_seq = sqlite3_column_int64(st, 0),
                        .epoch = sqlite3_column_int(st, 1),
                        .at = sqlite3_column_int64(st, 2),
                        .value = db_col_real(st, 3)};
    if (sqlite3_column_type(st, 3) != SQLITE_INTEGER && sqlite3_column_type(st, 3) != SQLITE_FLOAT)
        p.value = NAN; /* a script may report a string or null under that name */
    return w->fn(w->ctx, &p);
}

int db_sweep_points(db *d, int64_t seq, const char *metric, db_sweep_point_fn fn, void *ctx,
                    char *err)
{
    sqlite3_stmt *st = NULL;
    int rc = db_stmt(d, SQL_SWEEP_POINTS, &st, err);
    if (rc < 0)
        return rc;
    sqlite3_bind_int64(st, 1, seq);
    sqlite3_bind_text(st, 2, metric, -1, SQLITE_STATIC);
    db_point_walk w = {fn, ctx};
    return db_rows(d, st, db_point_row, &w, err);
}
