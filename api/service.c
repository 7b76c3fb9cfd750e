/* service: GET /healthz, GET /devices and GET /openapi.yaml.
 *
 * /healthz answers 200 only after a query went through the database (counts of queued and
 * running jobs and of live workers), so a monitor that gets a 200 knows storage works; a
 * database that cannot be read is a 503. /devices lists every device of every live worker
 * (not gone, seen within worker_gone_seconds), each with the worker's id. /openapi.yaml is the
 * contract embedded at build time (api/embed_text.py), byte for byte. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "api/api_priv.h"
#include "api/encode.h"
#include "db/jobs.h"
#include "db/workers.h"
#include "util/timeutil.h"

#define API_GONE_SECONDS 60 /* when the app leaves worker_gone_seconds at 0 */

int64_t api_live_since(const app *a)
{
    int s = a->worker_gone_seconds > 0 ? a->worker_gone_seconds : API_GONE_SECONDS;
    return time_wall_ms() - (int64_t)s * 1000;
}

int api_service_health(http_req *r, void *ctx)
{
    app *a = ctx;
    char *err = http_errbuf(r);
    db *d = app_db(a);
    int64_t queued = 0, running = 0, workers = 0;
    int rc = d ? 0 : -EIO;
    if (rc == 0)
        rc = db_job_count(d, DB_QUEUED, &queued, err);
    if (rc == 0)
        rc = db_job_count(d, DB_RUNNING, &running, err);
    if (rc == 0)
        rc = db_worker_count_live(d, api_live_since(a), &workers, err);
    if (rc < 0) {
        char detail[ERR_LEN + 32];
        snprintf(detail, sizeof detail, "%s", d ? err : "the database cannot be opened");
        return http_reply_problem(r, 503, "Database unavailable", detail, NULL, 0);
    }
    static const char *const keys[] = {"status", "version", "workers", "queued", "running"};
    json_t *vals[] = {json_string("ok"), json_string(a->version ? a->version : TRAINYARD_VERSION),
                      json_integer(workers), json_integer(queued), json_integer(running)};
    json_t *body = api_encode_object(keys, vals, 5);
    if (!body)
        return err_set(err, -ENOMEM, "out of memory");
    return http_reply_json(r, 200, body);
}

/* Appends each device of a live worker, with "worker" added. */
static int api_device_add(void *ctx, const db_worker *w)
{
    json_t *out = ctx;
    json_t *devices = json_loads(w->devices ? w->devices : "[]", 0, NULL);
    size_t i;
    json_t *dev;
    int rc = 0;
    json_array_foreach (devices, i, dev) {
        if (!json_is_object(dev))
            continue;
        json_t *copy = json_copy(dev);
        if (!copy || json_object_set_new(copy, "worker", json_string(w->id)) < 0 ||
            json_array_append_new(out, copy) < 0) {
            rc = -ENOMEM;
            break;
        }
    }
    json_decref(devices);
    return rc;
}

int api_service_devices(http_req *r, void *ctx)
{
    app *a = ctx;
    db *d = api_db(r, a);
    if (!d)
        return -EIO;
    json_t *list = json_array();
    int rc = list ? db_worker_list_live(d, api_live_since(a), api_device_add, list, http_errbuf(r))
                  : -ENOMEM;
    if (rc < 0) {
        json_decref(list);
        if (rc == -ENOMEM)
            err_set(http_errbuf(r), rc, "out of memory");
        return rc;
    }
    static const char *const keys[] = {"devices"};
    json_t *body = api_encode_object(keys, &list, 1);
    if (!body)
        return err_set(http_errbuf(r), -ENOMEM, "out of memory");
    return http_reply_json(r, 200, body);
}

int api_service_openapi(http_req *r, void *ctx)
{
    (void)ctx;
    return http_reply_bytes(r, 200, "application/yaml", api_openapi_yaml, api_openapi_yaml_len);
}
