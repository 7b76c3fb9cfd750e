/* db/models: model version rows (see models.h). */
#include "db/models.h"

#include <errno.h>
#include <string.h>

/* The next version is computed inside the INSERT, under the caller's write transaction, so two
 * publishes of one name cannot take the same number (and UNIQUE (name, version) says so). */
static const char SQL_MODEL_PUBLISH[] =
    "INSERT INTO models (name, version, job_seq, job_id, owner, state, created_at)"
    " SELECT j.name,"
    "  (SELECT coalesce(max(m.version), 0) + 1 FROM models m WHERE m.name = j.name),"
    "  j.seq, j.id, j.owner, 'available', ?2 FROM jobs j"
    " WHERE j.seq = ?1 AND j.status = 'succeeded' AND (j.script = 0 OR EXISTS"
    "  (SELECT 1 FROM artifacts a WHERE a.job_seq = j.seq"
    "   AND a.name IN ('model.onnx', 'model.safetensors')))";
static const char SQL_MODEL_RETIRE[] =
    "UPDATE models SET state = 'retired', retired_at = ?2 WHERE job_seq = ?1"
    " AND state = 'available'";
static const char SQL_MODEL_OF_JOB[] =
    "SELECT name, version, job_id, state, created_at, retired_at FROM models WHERE job_seq = ?";
static const char SQL_MODEL_LIST[] =
    "SELECT name, version, job_id, state, created_at, retired_at FROM models"
    " WHERE (?1 IS NULL OR name = ?1) AND (?2 IS NULL OR owner = ?2)"
    " AND (?3 IS NULL OR name > ?3) AND (?4 = 0 OR version = ?4)"
    " ORDER BY name, version DESC";

const char *db_model_state_name(int state)
{
    switch (state) {
    case DB_MODEL_AVAILABLE:
        return "available";
    case DB_MODEL_RETIRED:
        return "retired";
    default:
        return NULL;
    }
}

int db_model_publish(db *d, int64_t job_seq, int64_t now, int64_t *version, char *err)
{
    sqlite3_stmt *st = NULL;
    int rc = db_stmt(d, SQL_MODEL_PUBLISH, &st, err);
    if (rc < 0)
        return rc;
    sqlite3_bind_int64(st, 1, job_seq);
    sqlite3_bind_int64(st, 2, now);
    rc = db_write(d, st, err);
    if (rc < 0)
        return rc;
    if (rc == 0 || !version) {
        if (version)
            *version = 0;
        return 0;
    }
    db_model m;
    rc = db_model_of_job(d, job_seq, &m, err);
    if (rc < 0)
        return rc;
    *version = m.version;
    return 0;
}

int db_model_retire(db *d, int64_t job_seq, int64_t now, char *err)
{
    sqlite3_stmt *st = NULL;
    int rc = db_stmt(d, SQL_MODEL_RETIRE, &st, err);
    if (rc < 0)
        return rc;
    sqlite3_bind_int64(st, 1, job_seq);
    sqlite3_bind_int64(st, 2, now);
    rc = db_write(d, st, err);
    return rc < 0 ? rc : 0;
}

static void db_model_read(sqlite3_stmt *st, db_model *m)
{
    memset(m, 0, sizeof *m);
    db_col_copy(st, 0, m->name, sizeof m->name);
    m->version = db_col_int(st, 1);
    db_col_copy(st, 2, m->job_id, sizeof m->job_id);
    const unsigned char *state = sqlite3_column_text(st, 3);
    m->state = state && strcmp((const char *)state, "retired") == 0 ? DB_MODEL_RETIRED
                                                                    : DB_MODEL_AVAILABLE;
    m->created_at = db_col_int(st, 4);
    m->retired_at = db_col_int(st, 5);
}

int db_model_of_job(db *d, int64_t job_seq, db_model *out, char *err)
{
    sqlite3_stmt *st = NULL;
    int rc = db_stmt(d, SQL_MODEL_OF_JOB, &st, err);
    if (rc < 0)
        return rc;
    sqlite3_bind_int64(st, 1, job_seq);
    int src = sqlite3_step(st);
    if (src == SQLITE_ROW)
        db_model_read(st, out);
    else if (src == SQLITE_DONE)
        rc = err_set(err, -ENOENT, "the job published no model");
    else
        rc = db_fail(d, src, err);
    db_stmt_done(st);
    return rc;
}

/* The user's callback and context for db_model_row. */
typedef struct db_model_walk {
    db_model_fn fn;
    void *ctx;
} db_model_walk;

/* db_rows() adapter: reads one model row and hands it to the user's callback. */
static int db_model_row(void *ctx, sqlite3_stmt *st)
{
    db_model_walk *w = ctx;
    db_model m;
    db_model_read(st, &m);
    return w->fn(w->ctx, &m);
}

int db_model_list(db *d, const db_model_filter *f, db_model_fn fn, void *ctx, char *err)
{
    sqlite3_stmt *st = NULL;
    int rc = db_stmt(d, SQL_MODEL_LIST, &st, err);
    if (rc < 0)
        return rc;
    db_bind_opt_text(st, 1, f->name);
    if (f->owner) /* "" matches no row, never every row */
        sqlite3_bind_text(st, 2, f->owner, -1, SQLITE_STATIC);
    else
        sqlite3_bind_null(st, 2);
    db_bind_opt_text(st, 3, f->after);
    sqlite3_bind_int64(st, 4, f->version);
    db_model_walk w = {fn, ctx};
    return db_rows(d, st, db_model_row, &w, err);
}
