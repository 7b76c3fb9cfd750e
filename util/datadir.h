/* datadir: the layout of serve's data directory, in one place. Every path under it is built
 * here, into buffers of DATADIR_PATH_MAX bytes, and a path that would not fit is -ENAMETOOLONG,
 * never a cut-off name.
 *
 *   DATA-DIR/
 *     trainyard.db (-wal, -shm)       SQLite                               DATADIR_DB
 *     admin.token                     the first admin token, mode 0600     DATADIR_ADMIN_TOKEN
 *     credentials.key                 seals dataset credentials            DATADIR_CREDENTIALS_KEY
 *     artifacts/<job id>/<name>       a job's uploaded artifacts           datadir_job_file
 *     artifacts/<job id>/.checkpoint  its newest checkpoint                datadir_job_checkpoint
 *     code/<sha256>.tar.gz            code uploaded for script jobs        datadir_code_file
 *     tmp/                            uploads in flight                    DATADIR_TMP
 *     work/worker-N/                  local worker N's job folders         datadir_worker_dir
 *     server-cert.pem                 with TLS: the pinned certificate     DATADIR_SERVER_CERT
 *     serve.lock                      the running serve's lock             DATADIR_SERVE_LOCK
 *     slurm/<job id>-<Slurm id>.out   a Slurm job's output (sbatch --output) datadir_slurm_output
 *
 * datadir_layout() gives the same as (pattern, description) rows, in the order of the table in
 * docs/OPERATIONS.md, "The data directory"; a unit test holds the two together.
 *
 * Roots: functions about one job take the artifacts folder (DATA-DIR/artifacts, which the
 * scheduler is handed), the worker folders take DATA-DIR/work; the rest take DATA-DIR. */
#ifndef TRAINYARD_UTIL_DATADIR_H
#define TRAINYARD_UTIL_DATADIR_H

#include <stddef.h>

/* Room for any path this module builds, NUL included (PATH_MAX on Linux). */
#define DATADIR_PATH_MAX 4096

/* The file name of a job's checkpoint in its artifacts folder: a dot name, so that it can
 * never be an artifact's (artifact names do not start with '.'). */
#define DATADIR_CHECKPOINT_NAME ".checkpoint"

/* What lies directly under the data directory. */
typedef enum datadir_entry {
    DATADIR_DB,              /* trainyard.db */
    DATADIR_ADMIN_TOKEN,     /* admin.token */
    DATADIR_CREDENTIALS_KEY, /* credentials.key */
    DATADIR_ARTIFACTS,       /* artifacts */
    DATADIR_CODE,            /* code */
    DATADIR_TMP,             /* tmp */
    DATADIR_WORK,            /* work */
    DATADIR_SERVER_CERT,     /* server-cert.pem */
    DATADIR_SERVE_LOCK,      /* serve.lock */
    DATADIR_SLURM,           /* slurm: the Slurm executor's batch job output */
} datadir_entry;

/* DATA-DIR/<entry> into out; 0, -EINVAL for an unknown entry, -ENAMETOOLONG. */
int datadir_path(const char *data_dir, datadir_entry e, char out[DATADIR_PATH_MAX]);
/* <artifacts_dir>/<job_id>, a job's folder, into out; 0 or -ENAMETOOLONG. */
int datadir_job_dir(const char *artifacts_dir, const char *job_id, char out[DATADIR_PATH_MAX]);
/* <artifacts_dir>/<job_id>/<name> into out; 0 or -ENAMETOOLONG. */
int datadir_job_file(const char *artifacts_dir, const char *job_id, const char *name,
                     char out[DATADIR_PATH_MAX]);
/* <artifacts_dir>/<job_id>/.checkpoint into out; 0 or -ENAMETOOLONG. */
int datadir_job_checkpoint(const char *artifacts_dir, const char *job_id,
                           char out[DATADIR_PATH_MAX]);
/* <data_dir>/code/<hex>.tar.gz, the code bundle whose SHA-256 is hex, into out; 0 or
 * -ENAMETOOLONG. */
int datadir_code_file(const char *data_dir, const char *hex, char out[DATADIR_PATH_MAX]);
/* <work_dir>/worker-<slot>, local worker slot's folder, into out; 0 or -ENAMETOOLONG. */
int datadir_worker_dir(const char *work_dir, int slot, char out[DATADIR_PATH_MAX]);
/* <data_dir>/slurm/<job_id>-%j.out, sbatch's --output for a job (Slurm puts its job id for
 * %j), into out; 0 or -ENAMETOOLONG. */
int datadir_slurm_output(const char *data_dir, const char *job_id, char out[DATADIR_PATH_MAX]);
/* path followed by suffix (".tmp", ".part": a file written beside path, then renamed over it)
 * into out; 0 or -ENAMETOOLONG. */
int datadir_beside(const char *path, const char *suffix, char out[DATADIR_PATH_MAX]);

/* One row of the layout: pattern as docs/OPERATIONS.md writes it ("artifacts/<job id>/"). */
typedef struct datadir_row {
    const char *pattern;
    const char *what;
} datadir_row;
/* The layout's rows (static; n gets their count). */
const datadir_row *datadir_layout(size_t *n);

#endif
