/* datadir: paths under serve's data directory (see datadir.h for the layout). Each builder is
 * one snprintf checked for truncation; the names of the entries live in one table, which
 * datadir_path reads, so a renamed file changes here and nowhere else. */
#include "util/datadir.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>

_Static_assert(DATADIR_PATH_MAX >= PATH_MAX, "realpath() writes up to PATH_MAX bytes");

/* The names, once: both tables below and the builders use them, so the layout that
 * datadir_layout() shows is the one the builders make. */
#define NAME_DB          "trainyard.db"
#define NAME_ADMIN_TOKEN "admin.token"
#define NAME_CREDENTIALS "credentials.key"
#define NAME_ARTIFACTS   "artifacts"
#define NAME_CODE        "code"
#define NAME_TMP         "tmp"
#define NAME_WORK        "work"
#define NAME_WORKER      "worker-"
#define NAME_SERVER_CERT "server-cert.pem"
#define NAME_SERVE_LOCK  "serve.lock"
#define NAME_SLURM       "slurm"

/* By datadir_entry. */
static const char *const entry_names[] = {
    [DATADIR_DB] = NAME_DB,
    [DATADIR_ADMIN_TOKEN] = NAME_ADMIN_TOKEN,
    [DATADIR_CREDENTIALS_KEY] = NAME_CREDENTIALS,
    [DATADIR_ARTIFACTS] = NAME_ARTIFACTS,
    [DATADIR_CODE] = NAME_CODE,
    [DATADIR_TMP] = NAME_TMP,
    [DATADIR_WORK] = NAME_WORK,
    [DATADIR_SERVER_CERT] = NAME_SERVER_CERT,
    [DATADIR_SERVE_LOCK] = NAME_SERVE_LOCK,
    [DATADIR_SLURM] = NAME_SLURM,
};

/* In docs/OPERATIONS.md's order; its first column is each pattern in backquotes. */
static const datadir_row layout[] = {
    {NAME_DB, "SQLite in WAL mode (with its -wal and -shm files)"},
    {NAME_ADMIN_TOKEN, "the first admin token, written once at first start, mode 0600"},
    {NAME_CREDENTIALS, "32 random bytes, mode 0600: seals the dataset credentials of jobs"},
    {NAME_ARTIFACTS "/<job id>/", "each job's artifacts"},
    {NAME_ARTIFACTS "/<job id>/" DATADIR_CHECKPOINT_NAME,
     "the job's newest checkpoint (and its digest in .checkpoint.sha256)"},
    {NAME_CODE "/<sha256>.tar.gz", "code uploaded for script jobs, by the SHA-256 of its bytes"},
    {NAME_TMP "/", "uploads in flight"},
    {NAME_WORK "/" NAME_WORKER "N/", "local worker N's job folders while it trains"},
    {NAME_SERVER_CERT, "with TLS: the certificate local workers pin"},
    {NAME_SERVE_LOCK, "locked by the running serve: its pid and address"},
    {NAME_SLURM "/<job id>-<Slurm job id>.out", "with --executor slurm: each Slurm job's output"},
};

__attribute__((format(printf, 2, 3))) static int path_format(char out[DATADIR_PATH_MAX],
                                                             const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(out, DATADIR_PATH_MAX, fmt, ap);
    va_end(ap);
    if (n < 0 || n >= DATADIR_PATH_MAX) {
        out[0] = '\0';
        return -ENAMETOOLONG;
    }
    return 0;
}

int datadir_path(const char *data_dir, datadir_entry e, char out[DATADIR_PATH_MAX])
{
    if ((unsigned)e >= sizeof entry_names / sizeof entry_names[0])
        return -EINVAL;
    return path_format(out, "%s/%s", data_dir, entry_names[e]);
}

int datadir_job_dir(const char *artifacts_dir, const char *job_id, char out[DATADIR_PATH_MAX])
{
    return path_format(out, "%s/%s", artifacts_dir, job_id);
}

int datadir_job_file(const char *artifacts_dir, const char *job_id, const char *name,
                     char out[DATADIR_PATH_MAX])
{
    return path_format(out, "%s/%s/%s", artifacts_dir, job_id, name);
}

int datadir_job_checkpoint(const char *artifacts_dir, const char *job_id,
                           char out[DATADIR_PATH_MAX])
{
    return datadir_job_file(artifacts_dir, job_id, DATADIR_CHECKPOINT_NAME, out);
}

int datadir_code_file(const char *data_dir, const char *hex, char out[DATADIR_PATH_MAX])
{
    return path_format(out, "%s/" NAME_CODE "/%s.tar.gz", data_dir, hex);
}

int datadir_worker_dir(const char *work_dir, int slot, char out[DATADIR_PATH_MAX])
{
    return path_format(out, "%s/" NAME_WORKER "%d", work_dir, slot);
}

int datadir_slurm_output(const char *data_dir, const char *job_id, char out[DATADIR_PATH_MAX])
{
    return path_format(out, "%s/" NAME_SLURM "/%s-%%j.out", data_dir, job_id);
}

int datadir_beside(const char *path, const char *suffix, char out[DATADIR_PATH_MAX])
{
    return path_format(out, "%s%s", path, suffix);
}

const datadir_row *datadir_layout(size_t *n)
{
    *n = sizeof layout / sizeof layout[0];
    return layout;
}
