/* notify: webhooks — enqueued in the transition's transaction, delivered by one thread with
 * libcurl, signed with HMAC-SHA256, retried with exponential backoff (see notify.h). */
#include "scheduler/notify.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>

#include "db/deliveries.h"
#include "db/jobs.h"
#include "util/path.h"
#include "util/err.h"
#include "util/hmac.h"
#include "util/json_out.h"
#include "util/secret.h"
#include "util/sha256.h"
#include "util/timeutil.h"

#define NOTIFY_BATCH      8   /* due rows taken per pass */
#define NOTIFY_MAX_SHIFT  20  /* backoff doubles at most this often (2^20 × backoff) */
#define NOTIFY_ERR_MAX    800 /* bytes of an attempt's error kept */
#define NOTIFY_EVENTS_ALL 0x7 /* succeeded | failed | cancelled: an entry without "events" */

/* ---- events and bodies ------------------------------------------------------------------ */

static const char *const notify_event_names[] = {"succeeded", "failed", "cancelled", "running"};

/* The bit of an event name (job/job.h's enum job_event_bit order), 0 when unknown. */
static int notify_event_bit(const char *name)
{
    for (int i = 0; name && i < 4; i++)
        if (!strcmp(name, notify_event_names[i]))
            return 1 << i;
    return 0;
}

/* The event bits a notify entry asks for: its "events" names, or succeeded, failed and
 * cancelled when it has none. */
static int notify_entry_events(const json_t *entry)
{
    const json_t *ev = json_object_get(entry, "events");
    if (!json_is_array(ev))
        return NOTIFY_EVENTS_ALL;
    int bits = 0;
    size_t i;
    const json_t *v;
    json_array_foreach (ev, i, v)
        bits |= notify_event_bit(json_string_value(v));
    return bits;
}

/* RFC 3339 UTC with milliseconds, as the API writes times; JSON null for 0. */
static json_t *notify_time(int64_t ms)
{
    if (ms <= 0)
        return json_null();
    time_t s = (time_t)(ms / 1000);
    struct tm tm;
    char buf[64];
    gmtime_r(&s, &tm);
    snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
             tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (int)(ms % 1000));
    return json_string(buf);
}

/* Inserts one delivery per entry of notify (an array) that asks for event; body_text is sent
 * as it is. Returns the number inserted. */
static int notify_enqueue(db *d, int64_t job_seq, int64_t sweep_seq, const char *owner,
                          const char *event, const char *body_text, const json_t *notify,
                          int64_t now, char *err)
{
    int bit = notify_event_bit(event), n = 0;
    size_t i;
    const json_t *entry;
    json_array_foreach (notify, i, entry) {
        const char *url = json_string_value(json_object_get(entry, "url"));
        if (!url || !(notify_entry_events(entry) & bit))
            continue;
        db_delivery dl = {.job_seq = job_seq,
                          .sweep_seq = sweep_seq,
                          .owner = owner,
                          .url = url,
                          .event = event,
                          .body = body_text,
                          .next_at = now,
                          .created_at = now};
        int rc = db_delivery_insert(d, &dl, NULL, err);
        if (rc < 0)
            return rc;
        n++;
    }
    return n;
}

static const char SQL_NOTIFY_JOB[] =
    "SELECT id, name, status, document, owner, attempt, created_at, started_at, finished_at,"
    " runtime_ms, error, stop_reason, stopped_epoch, best_epoch FROM jobs WHERE seq = ?";
static const char SQL_NOTIFY_LAST_EPOCH[] =
    "SELECT epoch, loss, val_loss, accuracy, val_accuracy, extra, seconds FROM metrics"
    " WHERE job_seq = ? ORDER BY epoch DESC LIMIT 1";

/* A REAL column as a JSON number, or null. */
static json_t *notify_real(sqlite3_stmt *st, int col)
{
    return sqlite3_column_type(st, col) == SQLITE_NULL ? json_null()
                                                       : json_real(sqlite3_column_double(st, col));
}

/* The last epoch's metrics of job_seq as {"epoch", "loss", ..., extra names}, or null. */
static json_t *notify_last_epoch(db *d, int64_t job_seq, char *err)
{
    sqlite3_stmt *st = NULL;
    if (db_stmt(d, SQL_NOTIFY_LAST_EPOCH, &st, err) < 0)
        return NULL;
    sqlite3_bind_int64(st, 1, job_seq);
    json_t *m = NULL;
    int src = sqlite3_step(st);
    if (src == SQLITE_ROW) {
        static const char *const keys[] = {"loss", "val_loss", "accuracy", "val_accuracy"};
        m = json_object();
        json_object_set_new(m, "epoch", json_integer(sqlite3_column_int(st, 0)));
        for (int k = 0; k < 4; k++)
            if (sqlite3_column_type(st, k + 1) != SQLITE_NULL)
                json_object_set_new(m, keys[k], notify_real(st, k + 1));
        const char *extra = (const char *)sqlite3_column_text(st, 5);
        json_t *x = extra ? json_loads(extra, 0, NULL) : NULL;
        if (json_is_object(x))
            json_object_update_missing(m, x); /* a script's own names, beside the built-ins */
        json_decref(x);
    } else if (src == SQLITE_DONE) {
        m = json_null();
    } else {
        db_fail(d, src, err);
    }
    db_stmt_done(st);
    return m;
}

/* Adds the column col (text) to o under key, or null. */
static void notify_set_text(json_t *o, const char *key, sqlite3_stmt *st, int col)
{
    const char *s = (const char *)sqlite3_column_text(st, col);
    json_object_set_new(o, key, s ? json_string(s) : json_null());
}

static void notify_set_int(json_t *o, const char *key, sqlite3_stmt *st, int col)
{
    json_object_set_new(o, key,
                        sqlite3_column_type(st, col) == SQLITE_NULL
                            ? json_null()
                            : json_integer(sqlite3_column_int64(st, col)));
}

/* The body of a job event from the row st (SQL_NOTIFY_JOB) and its last epoch. */
static json_t *notify_job_body(db *d, int64_t job_seq, sqlite3_stmt *st, const char *event,
                               const char *base_url, int64_t at, char *err)
{
    const char *id = (const char *)sqlite3_column_text(st, 0);
    json_t *metrics = notify_last_epoch(d, job_seq, err);
    if (!metrics)
        return NULL;
    json_t *job = json_object();
    json_object_set_new(job, "id", json_string(id));
    notify_set_text(job, "name", st, 1);
    notify_set_text(job, "status", st, 2);
    json_object_set_new(job, "attempt", json_integer(sqlite3_column_int(st, 5)));
    json_object_set_new(job, "created_at", notify_time(sqlite3_column_int64(st, 6)));
    json_object_set_new(job, "started_at", notify_time(sqlite3_column_int64(st, 7)));
    json_object_set_new(job, "finished_at", notify_time(sqlite3_column_int64(st, 8)));
    json_object_set_new(job, "runtime_seconds",
                        json_real((double)sqlite3_column_int64(st, 9) / 1000.0));
    notify_set_text(job, "error", st, 10);
    notify_set_text(job, "stop_reason", st, 11);
    notify_set_int(job, "stopped_epoch", st, 12);
    notify_set_int(job, "best_epoch", st, 13);
    json_object_set_new(job, "metrics", metrics);

    /* Links: absolute when serve knows its URL, else paths on the server. */
    char buf[1024];
    const char *b = base_url ? base_url : "";
    json_t *links = json_object();
    snprintf(buf, sizeof buf, "%s/jobs/%s", b, id);
    json_object_set_new(links, "job", json_string(buf));
    snprintf(buf, sizeof buf, "%s/jobs/%s/metrics", b, id);
    json_object_set_new(links, "metrics", json_string(buf));
    snprintf(buf, sizeof buf, "%s/jobs/%s/artifacts", b, id);
    json_object_set_new(links, "artifacts", json_string(buf));
    snprintf(buf, sizeof buf, "%s/#/jobs/%s", b, id);
    json_object_set_new(links, "dashboard", json_string(buf));
    json_object_set_new(job, "links", links);

    char ev[32];
    snprintf(ev, sizeof ev, "job.%s", event);
    json_t *body = json_object();
    json_object_set_new(body, "event", json_string(ev));
    json_object_set_new(body, "at", notify_time(at));
    json_object_set_new(body, "job", job);
    return body;
}

int notify_job_transition(void *ctx, db *d, int64_t job_seq, int from, int to, int64_t at,
                          char *err)
{
    const char *event = NULL;
    if (db_status_terminal(to) && from != to)
        event = db_status_name(to);
    else if (from == DB_QUEUED && to == DB_RUNNING)
        event = "running";
    if (!event)
        return 0;

    sqlite3_stmt *st = NULL;
    int rc = db_stmt(d, SQL_NOTIFY_JOB, &st, err);
    if (rc < 0)
        return rc;
    sqlite3_bind_int64(st, 1, job_seq);
    int src = sqlite3_step(st);
    if (src != SQLITE_ROW) {
        rc = src == SQLITE_DONE ? 0 : db_fail(d, src, err);
        db_stmt_done(st);
        return rc;
    }
    const char *document = (const char *)sqlite3_column_text(st, 3);
    if (!document || !strstr(document, "\"notify\"")) { /* most jobs: no parse */
        db_stmt_done(st);
        return 0;
    }
    json_t *doc = json_loads(document, 0, NULL);
    json_t *list = json_object_get(doc, "notify");
    if (!json_is_array(list) || json_array_size(list) == 0) {
        json_decref(doc);
        db_stmt_done(st);
        return 0;
    }
    char owner[DB_ID_LEN + 1];
    db_col_copy(st, 4, owner, sizeof owner);
    const char *base = ctx ? atomic_load((const char *_Atomic *)ctx) : NULL;
    json_t *body = notify_job_body(d, job_seq, st, event, base, at, err);
    db_stmt_done(st);
    char *text = body ? json_out_dumps(body, JSON_COMPACT) : NULL;
    json_decref(body);
    if (!text) {
        json_decref(doc);
        return err[0] ? -EIO : err_set(err, -ENOMEM, "out of memory");
    }
    rc = notify_enqueue(d, job_seq, 0, owner[0] ? owner : NULL, event, text, list, at, err);
    free(text);
    json_decref(doc);
    return rc < 0 ? rc : 0;
}

int notify_enqueue_sweep(db *d, int64_t sweep_seq, const char *owner, const char *event,
                         const json_t *body, const json_t *notify_array, int64_t now, char *err)
{
    if (!json_is_array(notify_array) || json_array_size(notify_array) == 0)
        return 0;
    char ev[64];
    snprintf(ev, sizeof ev, "sweep.%s", event);
    json_t *b = json_object();
    json_object_set_new(b, "event", json_string(ev));
    json_object_set_new(b, "at", notify_time(now));
    json_object_set(b, "sweep", (json_t *)body);
    char *text = json_out_dumps(b, JSON_COMPACT);
    json_decref(b);
    if (!text)
        return err_set(err, -ENOMEM, "out of memory");
    int rc = notify_enqueue(d, 0, sweep_seq, owner, event, text, notify_array, now, err);
    free(text);
    return rc;
}

/* ---- URLs and addresses ----------------------------------------------------------------- */

/* The scheme and host (brackets of an IPv6 literal removed) of url into host[256]; -EINVAL
 * with a sentence otherwise. */
static int notify_url_host(const char *url, char host[256], char *err)
{
    char *scheme = NULL, *h = NULL;
    int rc = 0;
    CURLU *u = curl_url();
    if (!u)
        return err_set(err, -ENOMEM, "out of memory");
    if (curl_url_set(u, CURLUPART_URL, url, 0) != CURLUE_OK ||
        curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) != CURLUE_OK) {
        rc = err_set(err, -EINVAL, "is not a URL");
    } else if (strcasecmp(scheme, "http") != 0 && strcasecmp(scheme, "https") != 0) {
        rc = err_set(err, -EINVAL, "must be an http:// or https:// URL");
    } else if (curl_url_get(u, CURLUPART_HOST, &h, 0) != CURLUE_OK || !h[0]) {
        rc = err_set(err, -EINVAL, "has no host");
    } else {
        size_t n = strlen(h);
        if (n >= 2 && h[0] == '[' && h[n - 1] == ']')
            snprintf(host, 256, "%.*s", (int)(n - 2), h + 1);
        else
            snprintf(host, 256, "%s", h);
    }
    curl_free(scheme);
    curl_free(h);
    curl_url_cleanup(u);
    return rc;
}

/* Whether address sa (of a URL's host `host`) may be connected to: public, or allowed. */
static int notify_addr_ok(const allow_list *allow, const struct sockaddr *sa, const char *host)
{
    return !allow_addr_is_private(sa) || allow_list_match_addr(allow, sa) ||
           allow_list_match_host(allow, host);
}

int notify_check_url(const allow_list *allow, const char *url, char *err)
{
    char host[256];
    int rc = notify_url_host(url, host, err);
    if (rc < 0)
        return rc;
    if (allow->n > 0 && !allow_list_match_host(allow, host))
        return err_set(err, -EINVAL,
                       "host %s is not allowed: the server's --dataset-allow list does not "
                       "name it",
                       host);
    struct sockaddr_in6 a6 = {.sin6_family = AF_INET6};
    struct sockaddr_in a4 = {.sin_family = AF_INET};
    const struct sockaddr *sa = NULL;
    if (inet_pton(AF_INET, host, &a4.sin_addr) == 1)
        sa = (const struct sockaddr *)&a4;
    else if (inet_pton(AF_INET6, host, &a6.sin6_addr) == 1)
        sa = (const struct sockaddr *)&a6;
    size_t n = strlen(host);
    int local_name =
        !strcasecmp(host, "localhost") || (n > 10 && !strcasecmp(host + n - 10, ".localhost"));
    if ((sa && !notify_addr_ok(allow, sa, host)) ||
        (local_name && !allow_list_match_host(allow, host)))
        return err_set(err, -EINVAL,
                       "host %s is a private or loopback address, which is refused unless the "
                       "server's --dataset-allow names it",
                       host);
    return 0;
}

/* ---- secrets ---------------------------------------------------------------------------- */

int notify_secret_new(char out[NOTIFY_SECRET_LEN + 1], char *err)
{
    uint8_t raw[32];
    int rc = secret_random(raw, sizeof raw, err);
    if (rc < 0)
        return rc;
    char hex[65];
    sha256_hex(raw, hex); /* (just the hex writer: raw is random, not a digest) */
    snprintf(out, NOTIFY_SECRET_LEN + 1, "whsec_%s", hex);
    explicit_bzero(raw, sizeof raw);
    explicit_bzero(hex, sizeof hex);
    return 0;
}

/* Whether s looks like a secret notify_secret_new made. */
static int notify_secret_ok(const char *s)
{
    if (strlen(s) != NOTIFY_SECRET_LEN || strncmp(s, "whsec_", 6) != 0)
        return 0;
    for (const char *p = s + 6; *p; p++)
        if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
            return 0;
    return 1;
}

int notify_server_secret(const char *data_dir, char out[NOTIFY_SECRET_LEN + 1], char *err)
{
    char path[4096];
    int rc = path_join(path, sizeof path, data_dir, NOTIFY_SERVER_SECRET, err);
    if (rc < 0)
        return rc;
    for (int tries = 0; tries < 2; tries++) {
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd >= 0) {
            char buf[NOTIFY_SECRET_LEN + 2];
            ssize_t n = read(fd, buf, sizeof buf - 1);
            close(fd);
            if (n < 0)
                return err_set(err, -errno, "cannot read %s: %s", path, strerror(errno));
            buf[n] = '\0';
            buf[strcspn(buf, "\r\n")] = '\0';
            if (!notify_secret_ok(buf))
                return err_set(err, -EINVAL,
                               "%s does not hold a webhook secret (whsec_ and 64 "
                               "hex digits); remove it to have a new one made",
                               path);
            memcpy(out, buf, NOTIFY_SECRET_LEN + 1);
            explicit_bzero(buf, sizeof buf);
            return 0;
        }
        if (errno != ENOENT)
            return err_set(err, -errno, "cannot open %s: %s", path, strerror(errno));
        /* first use: made exclusively, so two makers agree on one (the loser reads it) */
        char fresh[NOTIFY_SECRET_LEN + 2];
        rc = notify_secret_new(fresh, err);
        if (rc < 0)
            return rc;
        fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (fd < 0 && errno == EEXIST)
            continue;
        if (fd < 0)
            return err_set(err, -errno, "cannot create %s: %s", path, strerror(errno));
        strcat(fresh, "\n");
        ssize_t w = write(fd, fresh, strlen(fresh));
        int bad = w != (ssize_t)strlen(fresh) || fsync(fd) != 0;
        close(fd);
        explicit_bzero(fresh, sizeof fresh);
        if (bad) {
            unlink(path);
            return err_set(err, -EIO, "cannot write %s", path);
        }
    }
    return notify_server_secret(data_dir, out, err);
}

static const char SQL_TOKEN_SET_WEBHOOK[] =
    "UPDATE tokens SET webhook_secret = ? WHERE id = ? AND revoked_at IS NULL";

int notify_token_secret_set(db *d, const uint8_t *key, const char *id,
                            char out[NOTIFY_SECRET_LEN + 1], char *err)
{
    char *sealed = NULL;
    sqlite3_stmt *st = NULL;
    int rc = notify_secret_new(out, err);
    if (rc == 0)
        rc = secret_text_seal(key, out, &sealed, err);
    if (rc == 0)
        rc = db_stmt(d, SQL_TOKEN_SET_WEBHOOK, &st, err);
    if (rc == 0) {
        sqlite3_bind_text(st, 1, sealed, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 2, id, -1, SQLITE_STATIC);
        rc = db_write(d, st, err);
        if (rc == 0)
            rc = err_set(err, -ENOENT, "no active token has the id %s", id);
    }
    free(sealed);
    if (rc < 0)
        explicit_bzero(out, NOTIFY_SECRET_LEN + 1);
    return rc < 0 ? rc : 0;
}

/* ---- the delivery thread ---------------------------------------------------------------- */

struct notifier {
    notify_opts o;
    db *d;
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    int stop;
    atomic_int stopping; /* the same, for the transfer's progress callback (no lock there) */
    char server_secret[NOTIFY_SECRET_LEN + 1]; /* "" until first needed */
};

/* One due delivery, copied out of the row. */
typedef struct notify_job {
    int64_t id;
    int attempts;
    char *owner, *url, *event, *body;
    int sweep; /* 1: a sweep's */
} notify_job;

typedef struct notify_batch {
    notify_job j[NOTIFY_BATCH];
    int n;
} notify_batch;

static int notify_take(void *ctx, const db_delivery *dl)
{
    notify_batch *b = ctx;
    if (b->n >= NOTIFY_BATCH)
        return 0;
    notify_job *j = &b->j[b->n];
    j->id = dl->id;
    j->attempts = dl->attempts;
    j->owner = dl->owner ? strdup(dl->owner) : NULL;
    j->url = strdup(dl->url ? dl->url : "");
    j->event = strdup(dl->event ? dl->event : "");
    j->body = strdup(dl->body ? dl->body : "");
    j->sweep = dl->sweep_seq != 0;
    b->n++;
    if (!j->url || !j->event || !j->body || (dl->owner && !j->owner))
        return -ENOMEM;
    return 0;
}

static void notify_job_free(notify_job *j)
{
    free(j->owner);
    free(j->url);
    free(j->event);
    free(j->body);
    memset(j, 0, sizeof *j);
}

static const char SQL_NOTIFY_TOKEN_SECRET[] = "SELECT webhook_secret FROM tokens WHERE id = ?";

/* The secret that signs a delivery of owner: the token's own, else the server's. */
static int notify_secret_for(notifier *n, const char *owner, char out[NOTIFY_SECRET_LEN + 1],
                             char *err)
{
    if (owner) {
        sqlite3_stmt *st = NULL;
        int rc = db_stmt(n->d, SQL_NOTIFY_TOKEN_SECRET, &st, err);
        if (rc < 0)
            return rc;
        sqlite3_bind_text(st, 1, owner, -1, SQLITE_STATIC);
        char *sealed = NULL;
        if (sqlite3_step(st) == SQLITE_ROW)
            db_col_dup(st, 0, &sealed);
        db_stmt_done(st);
        if (sealed) {
            char *plain = NULL;
            rc = secret_text_open(n->o.key, sealed, &plain, err);
            free(sealed);
            if (rc < 0)
                return rc;
            snprintf(out, NOTIFY_SECRET_LEN + 1, "%s", plain);
            explicit_bzero(plain, strlen(plain));
            free(plain);
            return 0;
        }
    }
    if (!n->server_secret[0]) {
        int rc = notify_server_secret(n->o.data_dir, n->server_secret, err);
        if (rc < 0)
            return rc;
    }
    memcpy(out, n->server_secret, NOTIFY_SECRET_LEN + 1);
    return 0;
}

/* What the open-socket callback needs. */
typedef struct notify_guard {
    const allow_list *allow;
    const char *host;
    int refused;
    char addr[ALLOW_ADDR_LEN];
} notify_guard;

/* Runs for every address curl is about to connect to, after DNS: a private one not allowed is
 * skipped (CURL_SOCKET_BAD), so a name re-pointed at a private address since submit fails. */
static curl_socket_t notify_open_socket(void *user, curlsocktype purpose, struct curl_sockaddr *a)
{
    notify_guard *g = user;
    (void)purpose;
    if (!notify_addr_ok(g->allow, &a->addr, g->host)) {
        g->refused = 1;
        allow_addr_str(&a->addr, g->addr);
        return CURL_SOCKET_BAD;
    }
    return socket(a->family, a->socktype, a->protocol);
}

/* Discards the answer's body (receivers' answers are not kept). */
static size_t notify_discard(char *data, size_t size, size_t nmemb, void *user)
{
    (void)data;
    (void)user;
    return size * nmemb;
}

/* libcurl's progress callback: a nonzero return aborts the transfer, so serve's stop does not
 * wait out a receiver that hangs (the attempt is recorded as failed; the row stays pending). */
static int notify_progress(void *user, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
                           curl_off_t ulnow)
{
    notifier *n = user;
    (void)dltotal, (void)dlnow, (void)ultotal, (void)ulnow;
    return atomic_load(&n->stopping);
}

/* One attempt of j: fills a (http_status or error, ms) and returns 1 when delivered (2xx). */
static int notify_send(notifier *n, const notify_job *j, db_delivery_attempt *a, char *errbuf)
{
    char host[256], err[ERR_LEN] = "", secret[NOTIFY_SECRET_LEN + 1];
    double t0 = time_mono();
    int ok = 0;
    a->error = NULL;
    a->http_status = 0;

    int rc = notify_url_host(j->url, host, err);
    if (rc == 0 && n->o.allow->n > 0 && !allow_list_match_host(n->o.allow, host))
        rc = err_set(err, -EACCES, "host %s is not in --dataset-allow", host);
    if (rc == 0)
        rc = notify_secret_for(n, j->owner, secret, err);
    if (rc < 0) {
        snprintf(errbuf, NOTIFY_ERR_MAX, "%s", err);
        a->error = errbuf;
        a->ms = (int64_t)((time_mono() - t0) * 1000);
        return 0;
    }

    char ts[32], hdr[160], sig_hex[65];
    uint8_t mac[32];
    snprintf(ts, sizeof ts, "%lld", (long long)(time_wall_ms() / 1000));
    char *prefix = NULL;
    size_t plen = strlen(ts) + 1;
    prefix = malloc(plen + 1);
    if (prefix) {
        memcpy(prefix, ts, plen - 1);
        prefix[plen - 1] = '.';
        prefix[plen] = '\0';
    }
    hmac_sha256_2(secret, strlen(secret), prefix ? prefix : "", prefix ? plen : 0, j->body,
                  strlen(j->body), mac);
    free(prefix);
    explicit_bzero(secret, sizeof secret);
    sha256_hex(mac, sig_hex);

    struct curl_slist *hs = NULL;
    hs = curl_slist_append(hs, "Content-Type: application/json");
    snprintf(hdr, sizeof hdr, "X-Trainyard-Event: %s.%s", j->sweep ? "sweep" : "job", j->event);
    hs = curl_slist_append(hs, hdr);
    snprintf(hdr, sizeof hdr, "X-Trainyard-Delivery: %lld", (long long)j->id);
    hs = curl_slist_append(hs, hdr);
    snprintf(hdr, sizeof hdr, "X-Trainyard-Timestamp: %s", ts);
    hs = curl_slist_append(hs, hdr);
    snprintf(hdr, sizeof hdr, "X-Trainyard-Signature: sha256=%s", sig_hex);
    hs = curl_slist_append(hs, hdr);
    hs = curl_slist_append(hs, "Expect:"); /* no 100-continue round trip */

    notify_guard g = {.allow = n->o.allow, .host = host};
    char cerr[CURL_ERROR_SIZE] = "";
    CURL *h = curl_easy_init();
    if (!h || !hs) {
        snprintf(errbuf, NOTIFY_ERR_MAX, "out of memory");
        a->error = errbuf;
        curl_slist_free_all(hs);
        curl_easy_cleanup(h);
        return 0;
    }
    long timeout = n->o.timeout_s > 0 ? n->o.timeout_s : NOTIFY_DEFAULT_TIMEOUT_S;
    curl_easy_setopt(h, CURLOPT_URL, j->url);
#if LIBCURL_VERSION_NUM >= 0x075500
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
#else
    curl_easy_setopt(h, CURLOPT_PROTOCOLS, (long)(CURLPROTO_HTTP | CURLPROTO_HTTPS));
#endif
    curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, j->body);
    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(j->body));
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hs);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, timeout);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, timeout);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_USERAGENT, "trainyard-webhook/" TRAINYARD_VERSION);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, notify_discard);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, cerr);
    curl_easy_setopt(h, CURLOPT_OPENSOCKETFUNCTION, notify_open_socket);
    curl_easy_setopt(h, CURLOPT_OPENSOCKETDATA, &g);
    curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, notify_progress);
    curl_easy_setopt(h, CURLOPT_XFERINFODATA, n);
    CURLcode c = curl_easy_perform(h);
    if (c == CURLE_OK) {
        long status = 0;
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
        a->http_status = (int)status;
        ok = status >= 200 && status < 300;
    } else if (g.refused) {
        snprintf(errbuf, NOTIFY_ERR_MAX,
                 "host %s resolves to a private address %s, which is refused unless "
                 "--dataset-allow names it",
                 host, g.addr);
        a->error = errbuf;
    } else {
        snprintf(errbuf, NOTIFY_ERR_MAX, "%s", cerr[0] ? cerr : curl_easy_strerror(c));
        a->error = errbuf;
    }
    curl_easy_cleanup(h);
    curl_slist_free_all(hs);
    a->ms = (int64_t)((time_mono() - t0) * 1000);
    return ok;
}

/* Sends j once and records the attempt and where the row goes next. */
static void notify_deliver(notifier *n, notify_job *j)
{
    char errbuf[NOTIFY_ERR_MAX + 512], err[ERR_LEN];
    db_delivery_attempt a = {.attempt = j->attempts + 1, .at = time_wall_ms()};
    int ok = notify_send(n, j, &a, errbuf);
    if (!ok && atomic_load(&n->stopping))
        return; /* cut short by serve's stop: not the receiver's doing, the next serve retries */
    int max = n->o.max_attempts > 0 ? n->o.max_attempts : NOTIFY_DEFAULT_ATTEMPTS;
    int64_t backoff = n->o.backoff_ms > 0 ? n->o.backoff_ms : NOTIFY_DEFAULT_BACKOFF;
    int shift = a.attempt - 1 < NOTIFY_MAX_SHIFT ? a.attempt - 1 : NOTIFY_MAX_SHIFT;
    int status = ok                 ? DB_DELIVERY_DELIVERED
                 : a.attempt >= max ? DB_DELIVERY_FAILED
                                    : DB_DELIVERY_PENDING;
    int64_t now = time_wall_ms();
    int64_t next = status == DB_DELIVERY_PENDING ? now + (backoff << shift) : now;
    if (db_delivery_record(n->d, j->id, &a, status, next, err) < 0 && n->o.log) {
        char line[ERR_LEN + 64];
        snprintf(line, sizeof line, "webhook %lld: %s", (long long)j->id, err);
        n->o.log(line);
    } else if (status == DB_DELIVERY_FAILED && n->o.log) {
        char line[NOTIFY_ERR_MAX + 2200];
        snprintf(line, sizeof line, "webhook %lld to %s failed %d times; giving up (last: %s)",
                 (long long)j->id, j->url, a.attempt,
                 a.error         ? a.error
                 : a.http_status ? "a non-2xx answer"
                                 : "?");
        n->o.log(line);
    }
}

static void *notify_main(void *arg)
{
    notifier *n = arg;
    char err[ERR_LEN];
    for (;;) {
        pthread_mutex_lock(&n->lock);
        int stop = n->stop;
        pthread_mutex_unlock(&n->lock);
        if (stop)
            break;
        notify_batch b = {.n = 0};
        int rc = db_delivery_due(n->d, time_wall_ms(), NOTIFY_BATCH, notify_take, &b, err);
        if (rc < 0 && n->o.log) {
            char line[ERR_LEN + 32];
            snprintf(line, sizeof line, "webhooks: %s", err);
            n->o.log(line);
        }
        for (int i = 0; i < b.n; i++) {
            if (rc >= 0 && !atomic_load(&n->stopping))
                notify_deliver(n, &b.j[i]);
            notify_job_free(&b.j[i]);
        }
        if (b.n == NOTIFY_BATCH && rc >= 0)
            continue; /* more may be due */
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_nsec += NOTIFY_POLL_MS * 1000000L;
        until.tv_sec += until.tv_nsec / 1000000000L;
        until.tv_nsec %= 1000000000L;
        pthread_mutex_lock(&n->lock);
        if (!n->stop)
            pthread_cond_timedwait(&n->wake, &n->lock, &until);
        pthread_mutex_unlock(&n->lock);
    }
    return NULL;
}

int notifier_start(const notify_opts *o, notifier **out, char *err)
{
    static int curl_ready;
    if (!curl_ready) {
        if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
            return err_set(err, -EIO, "libcurl failed to initialise");
        curl_ready = 1;
    }
    notifier *n = calloc(1, sizeof *n);
    if (!n)
        return err_set(err, -ENOMEM, "out of memory");
    n->o = *o;
    int rc = db_open(o->db_path, &n->d, err);
    if (rc < 0) {
        free(n);
        return rc;
    }
    pthread_mutex_init(&n->lock, NULL);
    pthread_cond_init(&n->wake, NULL);
    if (pthread_create(&n->thread, NULL, notify_main, n) != 0) {
        db_close(n->d);
        free(n);
        return err_set(err, -EAGAIN, "cannot start the webhook thread");
    }
    *out = n;
    return 0;
}

void notifier_stop(notifier *n)
{
    if (!n)
        return;
    atomic_store(&n->stopping, 1);
    pthread_mutex_lock(&n->lock);
    n->stop = 1;
    pthread_cond_signal(&n->wake);
    pthread_mutex_unlock(&n->lock);
    pthread_join(n->thread, NULL);
    db_close(n->d);
    pthread_mutex_destroy(&n->lock);
    pthread_cond_destroy(&n->wake);
    explicit_bzero(n->server_secret, sizeof n->server_secret);
    free(n);
}
