/* app: each thread's database connection, and the helpers every handler shares.
 *
 * app_db() keeps one connection per thread in a pthread key whose destructor closes it when the
 * thread exits, so libmicrohttpd's pool threads and serve's housekeeping thread each open
 * theirs on first use and never share one (a db is single-threaded, db/db.h). One process
 * serves one app: the key holds a connection to the first app's database a thread asked for. */
#include "api/app.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "api/api_priv.h"
#include "api/encode.h"
#include "db/db.h"
#include "scheduler/lifecycle.h"

static pthread_key_t app_db_key;
static pthread_once_t app_db_once = PTHREAD_ONCE_INIT;

static void app_db_close(void *d)
{
    db_close(d);
}

static void app_db_key_init(void)
{
    pthread_key_create(&app_db_key, app_db_close);
}

struct db *app_db(app *a)
{
    pthread_once(&app_db_once, app_db_key_init);
    db *d = pthread_getspecific(app_db_key);
    if (d)
        return d;
    char err[ERR_LEN];
    if (db_open(a->db_path, &d, err) < 0) {
        fprintf(stderr, "trainyard: %s\n", err);
        return NULL;
    }
    if (pthread_setspecific(app_db_key, d) != 0) {
        db_close(d);
        return NULL;
    }
    return d;
}

/* ---- handler helpers -------------------------------------------------------------------- */

db *api_db(http_req *r, app *a)
{
    db *d = app_db(a);
    if (!d)
        err_set(http_errbuf(r), -EIO, "the database cannot be opened; the server log says why");
    return d;
}

void api_raise(http_signal *sig)
{
    if (sig)
        http_signal_raise(sig);
}

int api_reply_invalid(http_req *r, const char *title, const field_errors *errs)
{
    http_field_error list[FIELD_ERRORS_MAX];
    size_t n = errs->count < FIELD_ERRORS_MAX ? errs->count : FIELD_ERRORS_MAX;
    char detail[96];

    for (size_t i = 0; i < n; i++)
        list[i] = (http_field_error){errs->items[i].field, errs->items[i].message};
    snprintf(detail, sizeof detail, "%zu problem%s; `errors` names each field", errs->count,
             errs->count == 1 ? "" : "s");
    return http_reply_problem(r, 400, title, detail, list, n);
}

int api_reply_bad_param(http_req *r, const char *field, const char *message)
{
    http_field_error e = {field, message};
    char detail[256];
    snprintf(detail, sizeof detail, "%s %s", field, message);
    return http_reply_problem(r, 400, "Invalid parameter", detail, &e, 1);
}

int api_reply_page(http_req *r, const char *key, json_t *list, int more, int64_t last_seq)
{
    json_t *next = json_null();
    if (more) {
        char c[API_CURSOR_MAX + 1];
        api_encode_cursor(last_seq, c);
        next = json_string(c);
    }
    const char *const keys[] = {key, "next_cursor"};
    json_t *vals[] = {list, next};
    json_t *body = api_encode_object(keys, vals, 2);
    if (!body)
        return err_set(http_errbuf(r), -ENOMEM, "out of memory");
    return http_reply_json(r, 200, body);
}

int api_no_job(http_req *r, int rc, const char *id)
{
    if (rc == -ENOENT)
        err_set(http_errbuf(r), rc, "no job has the id %s", id);
    return rc;
}

int api_job_find(http_req *r, app *a, db **d, db_job *out)
{
    db *conn = api_db(r, a);
    if (!conn)
        return -EIO;
    const char *id = http_param(r, "id");
    int rc = db_job_get(conn, id, out, http_errbuf(r));
    if (rc == 0 && !api_may_see(r, out->owner)) {
        db_job_clear(out);
        rc = -ENOENT;
    }
    if (rc < 0)
        return api_no_job(r, rc, id);
    *d = conn;
    return 0;
}

int api_job_mine(http_req *r, app *a, db **d)
{
    db_job j;
    int rc = api_job_find(r, a, d, &j);
    if (rc == 0)
        db_job_clear(&j);
    return rc;
}

int api_reply_list(http_req *r, const char *key, json_t *list, int rc)
{
    if (rc < 0) {
        json_decref(list);
        if (rc == -ENOMEM)
            err_set(http_errbuf(r), rc, "out of memory");
        return rc;
    }
    json_t *body = api_encode_object(&key, &list, 1);
    if (!body)
        return err_set(http_errbuf(r), -ENOMEM, "out of memory");
    return http_reply_json(r, 200, body);
}

int api_parse_int(const char *text, long min, long max, long *out)
{
    if (!text || !*text || strlen(text) > 18)
        return -EINVAL;
    const char *p = text;
    int neg = *p == '-';
    if (neg)
        p++;
    if (!*p)
        return -EINVAL;
    long v = 0;
    for (; *p; p++) {
        if (*p < '0' || *p > '9')
            return -EINVAL;
        v = v * 10 + (*p - '0');
    }
    v = neg ? -v : v;
    if (v < min || v > max)
        return -EINVAL;
    *out = v;
    return 0;
}

int api_parse_bool(const char *text, int def, int *out)
{
    if (!text) {
        *out = def;
        return 0;
    }
    /* Any case: clients write booleans as true, True or TRUE. */
    if (strcasecmp(text, "true") == 0 || strcmp(text, "1") == 0) {
        *out = 1;
        return 0;
    }
    if (strcasecmp(text, "false") == 0 || strcmp(text, "0") == 0) {
        *out = 0;
        return 0;
    }
    return -EINVAL;
}

void app_log(app *a, const char *fmt, ...)
{
    if (!a->log)
        return;
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    a->log(line);
}

int api_upload_begin(http_req *r, app *a, const char *what, const char **tmp, uint64_t *len, db **d)
{
    char *err = http_errbuf(r);
    const char *file = http_body_file(r, len);
    if (!file)
        return err_set(err, -EINVAL, "the upload has no body");
    if (a->max_artifact_bytes && *len > a->max_artifact_bytes)
        return err_set(err, -EFBIG, "the %s is %llu bytes; this server takes at most %llu", what,
                       (unsigned long long)*len, (unsigned long long)a->max_artifact_bytes);
    db_job j;
    int rc = api_job_find(r, a, d, &j);
    if (rc < 0)
        return rc;
    rc = sched_lease_check(&j, http_param(r, "worker"), err); /* the transaction checks again */
    db_job_clear(&j);
    if (rc == 0)
        *tmp = file;
    return rc;
}
