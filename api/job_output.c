/* job_output: what a job puts out, as people watch it — GET /jobs/{id}/metrics,
 * GET /jobs/{id}/logs (?follow=true) and GET /jobs/{id}/events (Server-Sent Events).
 *
 * Logs and events are pulled streams (http_reply_stream): each pull reads what is new from
 * SQLite with the pool thread's own connection, formats it into a pending buffer, and hands the
 * buffer out in pieces the size the framework asks for. With nothing new the pull returns
 * HTTP_PULL_WAIT and the stream parks on app->changed (raised by every heartbeat, completion,
 * cancel, ...); no thread waits.
 *
 * Ending without losing the tail: a pull reads the job's status BEFORE the new rows. When the
 * status is terminal, every row was committed before that status was, so the rows read next are
 * the last ones; the stream ends once they are out. A job deleted meanwhile ends its streams.
 *
 * Events: `event: status` carries the Job (as GET /jobs/{id}) whenever status, phase, attempt
 * or cancel_requested changed; `event: metrics` one EpochMetrics per new (or replaced) epoch,
 * tracked by the metrics row id. The first pull sends the current status, then every epoch so
 * far; later pulls send new epochs before the status, so the final epoch precedes the final
 * status. A pull that finds nothing after API_SSE_KEEPALIVE_MS of silence sends a
 * ": keep-alive" comment, which also lets the framework notice a client that went away. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api_priv.h"
#include "api/encode.h"
#include "db/jobs.h"
#include "db/logs.h"
#include "db/metrics.h"
#include "scheduler/lifecycle.h"
#include "util/dynbuf.h"
#include "util/json_out.h"
#include "util/timeutil.h"

#define API_LOG_BATCH        64  /* lines read per pull (at most 64 × 4 KiB pending) */
#define API_METRIC_BATCH     256 /* epochs read per pull */
#define API_SSE_KEEPALIVE_MS 15000
#define API_STREAM_PULSE_MS  15000 /* the framework re-pulls at least this often */

/* ---- what a stream has yet to send -------------------------------------------------------- */

/* One pull's batch: API_LOG_BATCH lines of at most DB_LOG_LINE_MAX bytes, or a status event
 * (the job with its document, at most HTTP_JSON_MAX_BODY) and API_METRIC_BATCH epochs. Past
 * this the stream is cut rather than grown. */
#define API_STREAM_MAX_PENDING (8u << 20)

typedef struct api_buf {
    dynbuf pending; /* capped at API_STREAM_MAX_PENDING */
    size_t off;     /* bytes of pending already handed out */
} api_buf;

static void api_buf_init(api_buf *b)
{
    dynbuf_init(&b->pending, API_STREAM_MAX_PENDING);
    b->off = 0;
}

static int api_buf_add(api_buf *b, const char *s, size_t n)
{
    return dynbuf_add(&b->pending, s, n);
}

/* Bytes queued and not yet handed out. */
static size_t api_buf_left(const api_buf *b)
{
    return dynbuf_len(&b->pending) - b->off;
}

/* Hands out up to cap pending bytes; 0 when none are pending (and the buffer is reset). */
static size_t api_buf_take(api_buf *b, char *out, size_t cap)
{
    size_t n = api_buf_left(b);
    if (n > cap)
        n = cap;
    memcpy(out, dynbuf_str(&b->pending) + b->off, n);
    b->off += n;
    if (b->off == dynbuf_len(&b->pending)) {
        b->off = 0;
        dynbuf_reset(&b->pending);
    }
    return n;
}

/* ---- GET /jobs/{id}/metrics -------------------------------------------------------------- */

static int api_metric_add(void *ctx, const db_metric *m)
{
    json_t *o = api_encode_metric(m);
    if (!o || json_array_append_new(ctx, o) < 0)
        return -ENOMEM;
    return 0;
}

/* Every epoch of the job named in the path; leased: only for the worker holding its lease. */
static int api_metrics_reply(http_req *r, app *a, int leased)
{
    db *d = NULL;
    db_job j;
    int rc = api_job_find(r, a, &d, &j);
    if (rc < 0)
        return rc;
    if (leased)
        rc = sched_lease_check(&j, http_param(r, "worker"), http_errbuf(r));
    json_t *epochs = rc == 0 ? json_array() : NULL;
    if (rc == 0)
        rc = epochs ? db_metric_list(d, j.seq, api_metric_add, epochs, http_errbuf(r)) : -ENOMEM;
    db_job_clear(&j);
    return api_reply_list(r, "epochs", epochs, rc);
}

int api_jobs_metrics(http_req *r, void *ctx)
{
    return api_metrics_reply(r, ctx, 0);
}

/* GET /workers/{worker}/jobs/{id}/metrics: the same list for the worker holding the job's lease
 * (a script job's metrics.csv is written from it, with every attempt's epochs). */
int api_jobs_metrics_leased(http_req *r, void *ctx)
{
    return api_metrics_reply(r, ctx, 1);
}

/* ---- GET /jobs/{id}/logs ----------------------------------------------------------------- */

typedef struct api_log_stream {
    app *a;
    int64_t seq;
    int last_line;
    int follow;
    api_buf buf;
} api_log_stream;

static void api_log_stream_free(void *p)
{
    api_log_stream *s = p;
    if (s)
        dynbuf_free(&s->buf.pending);
    free(s);
}

static int api_log_line(void *ctx, int line, int64_t at, const char *text, size_t len)
{
    api_log_stream *s = ctx;
    (void)at;
    int rc = api_buf_add(&s->buf, text, len);
    if (rc == 0)
        rc = api_buf_add(&s->buf, "\n", 1);
    if (rc < 0)
        return rc;
    s->last_line = line;
    return 0;
}

static ssize_t api_log_pull(void *state, char *out, size_t cap)
{
    api_log_stream *s = state;
    if (api_buf_left(&s->buf) == 0) {
        db *d = app_db(s->a);
        if (!d)
            return HTTP_PULL_ERROR;
        int ended = !s->follow;
        if (s->follow) {
            db_job j;
            int rc = db_job_get_seq(d, s->seq, &j, NULL);
            if (rc < 0 && rc != -ENOENT)
                return HTTP_PULL_ERROR;
            ended = rc == -ENOENT || db_status_terminal(j.status);
            if (rc == 0)
                db_job_clear(&j);
        }
        if (db_log_list(d, s->seq, s->last_line, API_LOG_BATCH, api_log_line, s, NULL) < 0)
            return HTTP_PULL_ERROR;
        if (api_buf_left(&s->buf) == 0)
            return ended ? HTTP_PULL_END : HTTP_PULL_WAIT;
    }
    return (ssize_t)api_buf_take(&s->buf, out, cap);
}

int api_jobs_logs(http_req *r, void *ctx)
{
    app *a = ctx;
    int follow = 0;
    if (api_parse_bool(http_query(r, "follow"), 0, &follow) < 0)
        return api_reply_bad_param(r, "follow", "must be true or false");
    db *d = NULL;
    db_job j;
    int rc = api_job_find(r, a, &d, &j);
    if (rc < 0)
        return rc;
    api_log_stream *s = calloc(1, sizeof *s);
    if (!s) {
        db_job_clear(&j);
        return err_set(http_errbuf(r), -ENOMEM, "out of memory");
    }
    s->a = a;
    s->seq = j.seq;
    s->follow = follow;
    api_buf_init(&s->buf);
    db_job_clear(&j);
    http_header_add(r, "Cache-Control", "no-store");
    return http_reply_stream(r, 200, "text/plain; charset=utf-8", api_log_pull, s,
                             api_log_stream_free, a->changed, API_STREAM_PULSE_MS);
}

/* ---- GET /jobs/{id}/events --------------------------------------------------------------- */

typedef struct api_sse_stream {
    app *a;
    int64_t seq;
    int started;
    int ended;
    int status, phase, attempt, cancel_requested; /* as last sent */
    int64_t last_metric_id;
    int batch_rows;    /* epochs read by the current fill */
    double last_write; /* time_mono() of the last bytes queued */
    api_buf buf;
} api_sse_stream;

static void api_sse_stream_free(void *p)
{
    api_sse_stream *s = p;
    if (s)
        dynbuf_free(&s->buf.pending);
    free(s);
}

/* Queues "event: <name>\ndata: <json>\n\n", stealing v. */
static int api_sse_event(api_sse_stream *s, const char *name, json_t *v)
{
    char *text = v ? json_out_dumps(v, JSON_COMPACT) : NULL;
    json_decref(v);
    if (!text)
        return -ENOMEM;
    char head[64];
    int n = snprintf(head, sizeof head, "event: %s\ndata: ", name);
    int rc = api_buf_add(&s->buf, head, (size_t)n);
    if (rc == 0)
        rc = api_buf_add(&s->buf, text, strlen(text));
    if (rc == 0)
        rc = api_buf_add(&s->buf, "\n\n", 2);
    free(text);
    return rc;
}

static int api_sse_metric(void *ctx, const db_metric *m)
{
    api_sse_stream *s = ctx;
    s->last_metric_id = m->id;
    s->batch_rows++;
    return api_sse_event(s, "metrics", api_encode_metric(m));
}

static int api_sse_status(api_sse_stream *s, const db_job *j)
{
    int same = s->started && s->status == j->status && s->phase == j->phase &&
               s->attempt == j->attempt && s->cancel_requested == j->cancel_requested;
    if (same)
        return 0;
    s->status = j->status;
    s->phase = j->phase;
    s->attempt = j->attempt;
    s->cancel_requested = j->cancel_requested;
    return api_sse_event(s, "status", api_encode_job(j));
}

/* Reads what changed since the last pull into the buffer. */
static int api_sse_fill(api_sse_stream *s, db *d)
{
    db_job j;
    int rc = db_job_get_seq(d, s->seq, &j, NULL);
    if (rc == -ENOENT) {
        s->ended = 1; /* deleted */
        return 0;
    }
    if (rc < 0)
        return rc;
    if (!s->started)
        rc = api_sse_status(s, &j); /* the current state first */
    s->started = 1;
    s->batch_rows = 0;
    if (rc == 0)
        rc = db_metric_since(d, s->seq, s->last_metric_id, API_METRIC_BATCH, api_sse_metric, s,
                             NULL);
    if (rc == 0)
        rc = api_sse_status(s, &j); /* a no-op when nothing changed */
    /* Over, and every epoch read (a full batch may have more behind it): end after these. */
    if (rc == 0 && db_status_terminal(j.status) && s->batch_rows < API_METRIC_BATCH)
        s->ended = 1;
    db_job_clear(&j);
    return rc;
}

static ssize_t api_sse_pull(void *state, char *out, size_t cap)
{
    api_sse_stream *s = state;
    if (api_buf_left(&s->buf) == 0) {
        if (s->ended)
            return HTTP_PULL_END;
        db *d = app_db(s->a);
        if (!d || api_sse_fill(s, d) < 0)
            return HTTP_PULL_ERROR;
        double now = time_mono();
        if (api_buf_left(&s->buf) == 0) {
            if (s->ended)
                return HTTP_PULL_END;
            if ((now - s->last_write) * 1000 < API_SSE_KEEPALIVE_MS - 500)
                return HTTP_PULL_WAIT;
            if (api_buf_add(&s->buf, ": keep-alive\n\n", 14) < 0)
                return HTTP_PULL_ERROR;
        }
        s->last_write = now;
    }
    return (ssize_t)api_buf_take(&s->buf, out, cap);
}

int api_jobs_events(http_req *r, void *ctx)
{
    app *a = ctx;
    db *d = NULL;
    db_job j;
    int rc = api_job_find(r, a, &d, &j);
    if (rc < 0)
        return rc;
    api_sse_stream *s = calloc(1, sizeof *s);
    if (!s) {
        db_job_clear(&j);
        return err_set(http_errbuf(r), -ENOMEM, "out of memory");
    }
    s->a = a;
    s->seq = j.seq;
    s->last_write = time_mono();
    api_buf_init(&s->buf);
    db_job_clear(&j);
    http_header_add(r, "Cache-Control", "no-store");
    return http_reply_stream(r, 200, "text/event-stream", api_sse_pull, s, api_sse_stream_free,
                             a->changed, API_SSE_KEEPALIVE_MS);
}
