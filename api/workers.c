/* workers: the worker protocol — POST /workers (register), GET /workers, and for a registered
 * worker POST .../lease (long poll), POST .../jobs/{id}/heartbeat, POST .../jobs/{id}/complete,
 * POST .../jobs/{id}/release (a stopping worker hands its job back: queued again at once).
 * (Artifact uploads are in artifacts.c, checkpoints in checkpoints.c; a lease of a job whose
 * earlier attempt stored a checkpoint names it in "checkpoint".)
 *
 * Lease long poll: the handler tries to lease at once; with nothing for this worker it parks
 * on app->queued until the `wait` deadline (0..60 s, default 30; kept in the request's state
 * across wake-ups) and answers 204 when it passes. A submit raises app->queued after its
 * commit, so an idle worker's lease is answered within one transaction of the submit. A woken
 * request that loses the job to another worker parks again. (A submit that commits between
 * this handler's look and its park is not missed: http_park resumes at once on a raise it has
 * not yet seen.) Parks last at most API_LEASE_RECHECK_MS so that sched_job_lease notes the
 * parked worker's visit every so often (it writes at most once a second for that): without it
 * an idle worker waiting out a 30 s poll would be listed as gone once worker_gone_seconds (2 ×
 * the lease) passed with a short lease. Each re-check costs one indexed read. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api_priv.h"
#include "api/bodies.h"
#include "api/encode.h"
#include "db/workers.h"
#include "scheduler/lifecycle.h"
#include "util/json_out.h"
#include "util/timeutil.h"

#define API_LEASE_WAIT_DEFAULT 30
#define API_LEASE_WAIT_MAX     60
#define API_LEASE_RECHECK_MS   2000
#define API_LEASE_SECONDS      30 /* when the app leaves lease_seconds at 0 */
#define API_GONE_SECONDS       60 /* when the app leaves worker_gone_seconds at 0 */

static int api_lease_seconds(const app *a)
{
    return a->lease_seconds > 0 ? a->lease_seconds : API_LEASE_SECONDS;
}

/* Workers last seen before this are gone. */
static int64_t api_gone_before(const app *a, int64_t now)
{
    int s = a->worker_gone_seconds > 0 ? a->worker_gone_seconds : API_GONE_SECONDS;
    return now - (int64_t)s * 1000;
}

/* Names the job or worker in a 404's sentence. */
static int api_not_found(http_req *r, int rc)
{
    if (rc == -ENOENT)
        err_set(http_errbuf(r), rc, "no job %s leased to worker %s", http_param(r, "id"),
                http_param(r, "worker"));
    return rc;
}

int api_workers_register(http_req *r, void *ctx)
{
    app *a = ctx;
    char *err = http_errbuf(r);
    json_t *body = NULL;
    int rc = http_body_json(r, &body);
    if (rc < 0)
        return rc; /* answered */
    api_registration reg;
    field_errors errs;
    db_worker w;
    memset(&w, 0, sizeof w);
    rc = api_registration_parse(body, &reg, &errs);
    if (rc == -EINVAL) {
        rc = api_reply_invalid(r, "Invalid worker registration", &errs);
        goto out;
    }
    db *d = api_db(r, a);
    if (!d) {
        rc = -EIO;
        goto out;
    }
    rc = db_id_new(w.id, err);
    if (rc < 0)
        goto out;
    snprintf(w.name, sizeof w.name, "%s", reg.name);
    w.devices = json_out_dumps(reg.devices, JSON_COMPACT);
    if (!w.devices) {
        rc = err_set(err, -ENOMEM, "out of memory");
        goto out;
    }
    w.kinds = reg.kinds;
    w.scripts = reg.scripts;
    w.slots = reg.slots;
    memcpy(w.token_id, api_caller_of(r)->token_id, sizeof w.token_id);
    w.registered_at = w.last_seen_at = time_wall_ms();
    rc = db_worker_insert(d, &w, err);
    if (rc < 0)
        goto out;
    api_raise(a->changed); /* what the queued jobs wait for may have changed (their `waiting`) */
    json_t *answer =
        api_encode_worker(&w, api_gone_before(a, w.last_seen_at), api_lease_seconds(a));
    rc = answer ? http_reply_json(r, 201, answer) : err_set(err, -ENOMEM, "out of memory");
out:
    db_worker_clear(&w);
    json_decref(body);
    return rc;
}

typedef struct api_worker_list {
    json_t *arr;
    int64_t gone_before;
    int lease_seconds;
} api_worker_list;

static int api_worker_add(void *ctx, const db_worker *w)
{
    api_worker_list *l = ctx;
    json_t *o = api_encode_worker(w, l->gone_before, l->lease_seconds);
    if (!o || json_array_append_new(l->arr, o) < 0)
        return -ENOMEM;
    return 0;
}

int api_workers_list(http_req *r, void *ctx)
{
    app *a = ctx;
    db *d = api_db(r, a);
    if (!d)
        return -EIO;
    api_worker_list l = {json_array(), api_gone_before(a, time_wall_ms()), api_lease_seconds(a)};
    int rc = l.arr ? db_worker_list(d, api_worker_add, &l, http_errbuf(r)) : -ENOMEM;
    return api_reply_list(r, "workers", l.arr, rc);
}

/* Adds the job's dataset credentials, unsealed, to a lease answer: only the worker holding
 * the lease ever sees them. One that cannot be unsealed (the data directory's key was
 * replaced) is left out with a log line; the fetch then fails on the dataset server's 401. */
static void api_lease_add_credentials(app *a, db *d, const db_job *j, json_t *body)
{
    char *sealed = NULL, *plain = NULL, err[ERR_LEN];
    if (db_job_credentials(d, j->seq, &sealed, err) < 0 || !sealed) {
        free(sealed);
        return;
    }
    if (secret_text_open(a->credentials_key, sealed, &plain, err) < 0)
        app_log(a, "job %s: its dataset credentials cannot be used: %s", j->id, err);
    else
        json_object_set_new(body, "dataset_credentials", json_string(plain));
    if (plain)
        explicit_bzero(plain, strlen(plain));
    free(plain);
    free(sealed);
}

int api_workers_lease(http_req *r, void *ctx)
{
    app *a = ctx;
    char *err = http_errbuf(r);
    const char *worker = http_param(r, "worker");
    long wait = API_LEASE_WAIT_DEFAULT;
    const char *wait_text = http_query(r, "wait");
    if (wait_text && api_parse_int(wait_text, 0, API_LEASE_WAIT_MAX, &wait) < 0)
        return api_reply_bad_param(r, "wait", "must be an integer from 0 to 60");
    /* A worker that died while its long poll was parked must not be handed a job it can never
     * receive (the job would sit out a whole lease): a woken poll checks its client first. */
    if (http_wakeups(r) > 0 && http_client_gone(r))
        return http_reply_empty(r, 204);
    /* A stopping server hands out nothing: a job released by one of its workers would go to
     * another that is stopping too, and wait out a lease. Workers back off and ask again. */
    if (a->stopping)
        return err_set(err, -ESHUTDOWN, "the service is stopping: ask again once it is back");
    db *d = api_db(r, a);
    if (!d)
        return -EIO;
    db_job j;
    int rc = sched_job_lease(d, worker, time_wall_ms(), api_lease_seconds(a), &j, err);
    if (rc == -ENOENT)
        return err_set(err, rc, "no worker has the id %s: register again (POST /workers)", worker);
    if (rc < 0)
        return rc;
    if (rc == 1) {
        app_log(a, "job %s running on worker %s (%s), attempt %d", j.id, worker, j.device,
                j.attempt);
        if (j.attempt == 1)
            telemetry_observe(&a->stats.submit_to_running,
                              (double)(j.started_at - j.created_at) / 1000.0);
        api_raise(a->changed);
        json_t *body = api_encode_lease(&j);
        int epoch = 0;
        if (body && db_job_checkpoint_epoch(d, j.seq, &epoch, err) == 0 && epoch > 0) {
            char path[512];
            snprintf(path, sizeof path, "/workers/%s/jobs/%s/checkpoint", worker, j.id);
            json_object_set_new(body, "checkpoint", json_string(path));
        }
        /* A warm start (init_from): where the worker fetches the model it starts from. */
        if (body &&
            json_is_string(json_object_get(json_object_get(body, "document"), "init_from"))) {
            char path[512];
            snprintf(path, sizeof path, "/workers/%s/jobs/%s/init_model", worker, j.id);
            json_object_set_new(body, "init_model", json_string(path));
        }
        if (body)
            api_lease_add_credentials(a, d, &j, body);
        db_job_clear(&j);
        if (!body)
            return err_set(err, -ENOMEM, "out of memory");
        return http_reply_json(r, 200, body);
    }

    double *deadline = http_state(r);
    if (!deadline) {
        deadline = malloc(sizeof *deadline);
        if (!deadline)
            return err_set(err, -ENOMEM, "out of memory");
        *deadline = time_mono() + (double)wait;
        http_state_set(r, deadline, free);
    }
    double left_ms = (*deadline - time_mono()) * 1000.0;
    if (left_ms < 1.0 || !a->queued)
        return http_reply_empty(r, 204);
    int park_ms = left_ms < API_LEASE_RECHECK_MS ? (int)left_ms : API_LEASE_RECHECK_MS;
    return http_park(r, a->queued, park_ms);
}

int api_workers_heartbeat(http_req *r, void *ctx)
{
    app *a = ctx;
    char *err = http_errbuf(r);
    json_t *body = NULL;
    int rc = http_body_json(r, &body);
    if (rc < 0)
        return rc; /* answered */
    api_heartbeat hb;
    field_errors errs;
    rc = api_heartbeat_parse(body, &hb, &errs);
    if (rc == -EINVAL) {
        rc = api_reply_invalid(r, "Invalid heartbeat", &errs);
        json_decref(body);
        return rc;
    }
    if (rc < 0) {
        json_decref(body);
        return err_set(err, rc, "out of memory");
    }
    db *d = api_db(r, a);
    sched_progress p = {.phase = hb.phase,
                        .epochs = hb.epochs,
                        .n_epochs = hb.n_epochs,
                        .logs = hb.logs,
                        .n_logs = hb.n_logs,
                        .histograms = hb.histograms,
                        .n_histograms = hb.n_histograms};
    sched_beat beat;
    rc = d ? sched_job_heartbeat(d, http_param(r, "id"), http_param(r, "worker"), &p,
                                 time_wall_ms(), api_lease_seconds(a), &beat, err)
           : -EIO;
    int progressed = hb.phase != DB_PHASE_NONE || hb.n_epochs || hb.n_logs;
    if (rc >= 0) {
        for (size_t i = 0; i < hb.n_epochs; i++)
            telemetry_observe(&a->stats.epoch_seconds, hb.epochs[i].seconds);
        atomic_fetch_add_explicit(&a->stats.dataset_bytes, hb.dataset_bytes, memory_order_relaxed);
    }
    api_heartbeat_free(&hb);
    json_decref(body); /* after hb: its log lines pointed into body */
    if (rc < 0)
        return api_not_found(r, rc);
    if (progressed)
        api_raise(a->changed);
    static const char *const keys[] = {"cancel", "lease_expires_at", "stop"};
    json_t *vals[] = {json_boolean(beat.cancel), api_encode_time(beat.lease_expires_at),
                      beat.stop[0] ? json_string(beat.stop) : NULL};
    json_t *answer = api_encode_object(keys, vals, beat.stop[0] ? 3 : 2);
    if (!answer)
        return err_set(err, -ENOMEM, "out of memory");
    return http_reply_json(r, 200, answer);
}

/* Answers 200 with job j as a Job, and clears j. */
static int api_workers_reply_job(http_req *r, db_job *j)
{
    json_t *answer = api_encode_job(j);
    db_job_clear(j);
    if (!answer)
        return err_set(http_errbuf(r), -ENOMEM, "cannot build the job's JSON");
    return http_reply_json(r, 200, answer);
}

int api_workers_complete(http_req *r, void *ctx)
{
    app *a = ctx;
    char *err = http_errbuf(r);
    json_t *body = NULL;
    int rc = http_body_json(r, &body);
    if (rc < 0)
        return rc; /* answered */
    int status = 0;
    const char *error = NULL;
    field_errors errs;
    api_completion_stop stop = {0};
    rc = api_completion_parse(body, &status, &error, &errs);
    if (rc == 0)
        rc = api_completion_stop_parse(body, &stop, &errs);
    if (rc == -EINVAL) {
        rc = api_reply_invalid(r, "Invalid completion", &errs);
        json_decref(body);
        return rc;
    }
    db *d = api_db(r, a);
    db_job j;
    int to = -1;
    if (!d)
        rc = -EIO;
    else if (status == API_COMPLETION_LOST)
        rc = sched_job_lose(d, http_param(r, "id"), http_param(r, "worker"),
                            error ? error : "the attempt was lost where it ran", a->artifacts_dir,
                            time_wall_ms(), &to, err);
    else
        rc = sched_job_complete_stopped(
            d, http_param(r, "id"), http_param(r, "worker"), status, error,
            &(sched_stop_result){stop.reason, stop.stopped_epoch, stop.best_epoch},
            a->artifacts_dir, time_wall_ms(), &j, err);
    if (rc == 0 && status == API_COMPLETION_LOST) {
        rc = db_job_get(d, http_param(r, "id"), &j, err);
        if (to == DB_QUEUED)
            api_raise(a->queued);
    }
    json_decref(body);
    if (rc < 0)
        return api_not_found(r, rc);
    if (j.error)
        app_log(a, "job %s %s: %s", j.id, db_status_name(j.status), j.error);
    else
        app_log(a, "job %s %s", j.id, db_status_name(j.status));
    api_raise(a->changed);
    return api_workers_reply_job(r, &j);
}

int api_workers_release(http_req *r, void *ctx)
{
    app *a = ctx;
    char *err = http_errbuf(r);
    db *d = api_db(r, a);
    db_job j;
    int rc = d ? sched_job_release(d, http_param(r, "id"), http_param(r, "worker"), time_wall_ms(),
                                   &j, err)
               : -EIO;
    if (rc < 0)
        return api_not_found(r, rc);
    app_log(a, "job %s released by worker %s: queued again", j.id, http_param(r, "worker"));
    api_raise(a->queued);
    api_raise(a->changed);
    return api_workers_reply_job(r, &j);
}
