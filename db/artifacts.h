/* db/artifacts: the artifacts table — name, size and SHA-256 of each file a job uploaded.
 *
 * The files live in <artifacts_dir>/<job id>/<name>; this table is what says they are
 * complete: a row is written in the same transaction that renames the upload into place
 * (scheduler/lifecycle.h, sched_artifact_add), and an upload of an existing name replaces it. */
#ifndef TRAINYARD_DB_ARTIFACTS_H
#define TRAINYARD_DB_ARTIFACTS_H

#include <stdint.h>

#include "db/db.h"

#define DB_ARTIFACT_NAME_MAX 128

typedef struct db_artifact {
    char name[DB_ARTIFACT_NAME_MAX + 1];
    int64_t size;
    char sha256[65]; /* lowercase hex */
    int64_t created_at;
} db_artifact;

/* Called per artifact; a is valid during the call only. A negative return stops the walk. */
typedef int (*db_artifact_fn)(void *ctx, const db_artifact *a);

/* Records an artifact of job_seq, replacing one of the same name. */
int db_artifact_put(db *d, int64_t job_seq, const db_artifact *a, char *err);
/* The artifact name of job_seq; -ENOENT when none. */
int db_artifact_get(db *d, int64_t job_seq, const char *name, db_artifact *out, char *err);
/* How many artifacts job_seq has. */
int db_artifact_count(db *d, int64_t job_seq, int64_t *out, char *err);
/* The artifacts of job_seq by name. */
int db_artifact_list(db *d, int64_t job_seq, db_artifact_fn fn, void *ctx, char *err);

#endif
