/* serve/tokens: see tokens.h. Each call opens the data directory's database, does its one thing
 * and closes it, as a command line run does once. */
#include "serve/tokens.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#include "api/encode.h"
#include "db/db.h"
#include "db/tokens.h"
#include "scheduler/notify.h"
#include "util/datadir.h"
#include "util/err.h"
#include "util/secret.h"
#include "util/timeutil.h"

_Static_assert(DB_TOKEN_SECRET_LEN < SERVE_TOKEN_SECRET_MAX, "a token's secret fits");
_Static_assert(NOTIFY_SECRET_LEN < SERVE_TOKEN_SECRET_MAX, "a webhook secret fits");
_Static_assert(SERVE_TOKEN_CAP_MAX == DB_TOKEN_CAP_MAX, "the command line's caps are the API's");

int serve_token_role_valid(const char *role)
{
    return role && db_role_parse(role) >= 0;
}

/* The database of data_dir, opened, into *out. */
static int open_db(const char *data_dir, db **out, char *err)
{
    char path[DATADIR_PATH_MAX];
    struct stat st;
    if (datadir_path(data_dir, DATADIR_DB, path) < 0)
        return err_set(err, -ENAMETOOLONG, "%s: path too long", data_dir);
    if (stat(data_dir, &st) != 0 || !S_ISDIR(st.st_mode))
        return err_set(err, -ENOENT, "%s is not a data directory", data_dir);
    return db_open(path, out, err);
}

int serve_token_create(const char *data_dir, const char *name, const char *role, int scripts,
                       int max_running, int max_queued, json_t **out,
                       char secret[SERVE_TOKEN_SECRET_MAX], char *err)
{
    if (!serve_token_role_valid(role))
        return err_set(err, -EINVAL, "the role is admin, user, worker or metrics, not '%s'",
                       role ? role : "");
    db *d = NULL;
    int rc = open_db(data_dir, &d, err);
    if (rc < 0)
        return rc;
    db_token spec, t;
    char s[DB_TOKEN_SECRET_LEN + 1];
    memset(&spec, 0, sizeof spec);
    snprintf(spec.name, sizeof spec.name, "%s", name);
    spec.role = db_role_parse(role);
    spec.scripts = scripts;
    spec.max_running = max_running;
    spec.max_queued = max_queued;
    rc = db_token_create_capped(d, &spec, time_wall_ms(), &t, s, err);
    if (rc == 0) {
        json_t *j = api_encode_token(&t);
        if (!j) {
            rc = err_set(err, -ENOMEM, "out of memory");
        } else {
            *out = j;
            memcpy(secret, s, sizeof s);
        }
    }
    explicit_bzero(s, sizeof s);
    db_close(d);
    return rc;
}

static int collect(void *ctx, const db_token *t)
{
    json_t *o = api_encode_token(t);
    return o && json_array_append_new(ctx, o) == 0 ? 0 : -ENOMEM;
}

int serve_token_list(const char *data_dir, int revoked, json_t **out, char *err)
{
    db *d = NULL;
    int rc = open_db(data_dir, &d, err);
    if (rc < 0)
        return rc;
    json_t *list = json_array();
    rc = list ? db_token_list(d, revoked, collect, list, err)
              : err_set(err, -ENOMEM, "out of memory");
    db_close(d);
    if (rc < 0) {
        json_decref(list);
        return rc;
    }
    *out = list;
    return 0;
}

int serve_token_revoke(const char *data_dir, const char *id, char *err)
{
    db *d = NULL;
    int rc = open_db(data_dir, &d, err);
    if (rc < 0)
        return rc;
    rc = db_token_revoke(d, id, time_wall_ms(), err);
    db_close(d);
    return rc;
}

int serve_token_webhook_secret(const char *data_dir, const char *id,
                               char secret[SERVE_TOKEN_SECRET_MAX], char *err)
{
    char s[NOTIFY_SECRET_LEN + 1];
    int rc;
    if (!id) {
        rc = notify_server_secret(data_dir, s, err);
    } else {
        db *d = NULL;
        rc = open_db(data_dir, &d, err);
        if (rc < 0)
            return rc;
        char key_path[DATADIR_PATH_MAX];
        uint8_t key[SECRET_KEY_LEN];
        datadir_path(data_dir, DATADIR_CREDENTIALS_KEY, key_path); /* fits: DATADIR_DB did */
        rc = secret_key_load(key_path, key, err);
        if (rc == 0)
            rc = notify_token_secret_set(d, key, id, s, err);
        explicit_bzero(key, sizeof key);
        db_close(d);
    }
    if (rc == 0)
        memcpy(secret, s, sizeof s);
    explicit_bzero(s, sizeof s);
    return rc;
}
