/* db/models: the models table — each succeeded job that produced a model is one version of the
 * model named after the job (scheduler/lifecycle.h publishes it and retires it).
 *
 * Versions count from 1 per name and are never reused: a retired version keeps its row (state
 * retired, retired_at set), so the next publish of that name still takes max + 1. A row keeps
 * the job's public id and owner, so who may see it survives the job's deletion (job_seq becomes
 * NULL then: ON DELETE SET NULL). */
#ifndef TRAINYARD_DB_MODELS_H
#define TRAINYARD_DB_MODELS_H

#include <stdint.h>

#include "db/db.h"
#include "db/jobs.h"

enum db_model_state { DB_MODEL_AVAILABLE, DB_MODEL_RETIRED };

typedef struct db_model {
    char name[DB_NAME_MAX + 1];
    int64_t version;
    char job_id[DB_ID_LEN + 1];
    int state; /* enum db_model_state */
    int64_t created_at;
    int64_t retired_at; /* 0 while available */
} db_model;

/* Filters of db_model_list; NULL matches every value; after: only names > after. */
typedef struct db_model_filter {
    const char *name;
    const char *owner; /* a token id */
    const char *after;
    int64_t version; /* 0: every version */
} db_model_filter;

/* Called per row, names ascending then versions newest first; m is valid during the call only.
 * A negative return stops the walk and is returned. */
typedef int (*db_model_fn)(void *ctx, const db_model *m);

/* "available" or "retired"; NULL out of range. */
const char *db_model_state_name(int state);
/* Publishes job seq as the next version of its name when it produced a model: a built-in job
 * always, a script job only with an artifact model.onnx or model.safetensors. *version is the
 * version (version may be NULL), 0 when nothing was published. Run inside the transaction that
 * records success. */
int db_model_publish(db *d, int64_t job_seq, int64_t now, int64_t *version, char *err);
/* Retires job seq's version (state retired, retired_at now); none is not an error. */
int db_model_retire(db *d, int64_t job_seq, int64_t now, char *err);
/* The version published from job seq into *out; -ENOENT when none. */
int db_model_of_job(db *d, int64_t job_seq, db_model *out, char *err);
/* Walks the rows matching f. */
int db_model_list(db *d, const db_model_filter *f, db_model_fn fn, void *ctx, char *err);

#endif
