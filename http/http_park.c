/* http_park: signals, parked requests and pulled streams — answering later without a thread.
 *
 * A parked request or a waiting stream is a suspended libmicrohttpd connection on a signal's
 * list. Requests are suspended from the access handler (http_park_commit, right after the
 * handler returns), streams from their content reader callback (stream_read, when the pull
 * says WAIT, returning 0 bytes: libmicrohttpd's documented way to wait in a reader without
 * busy-looping). Both come back through MHD_resume_connection():
 *   - http_signal_raise() resumes everything on the signal's list;
 *   - the timer thread resumes what passed its deadline (a park's timeout, a stream's
 *     heartbeat) with timed_out set; it sleeps until the earliest deadline;
 *   - http_stop() resumes everything, with timed_out set, and refuses new parks.
 * A resumed request is handed to its handler again; a resumed stream is pulled again.
 *
 * Lost wakeups. A handler looks at its state (say, SQLite) and then parks; a raise may fall
 * between the two. So every raise takes a new number from the server's counter (s->seq) and
 * stamps the signal with it; each handler call or pull remembers s->seq from before it looked;
 * parking checks, under s->lock, whether the signal was stamped since — if so it does not
 * suspend but runs the handler (or pull) again at once. Suspension and insertion happen under
 * the same lock as the check, so a raise either precedes the check (seen) or finds the entry
 * on the list (resumed). Locking and the suspend/resume invariant: http_priv.h.
 *
 * Disconnects. A suspended connection does not notice its client leaving. A stream checks its
 * socket (a non-blocking MSG_PEEK) each time it is about to wait, so a gone client is found at
 * the next heartbeat at the latest and its state freed; a parked request finds out when it is
 * woken: libmicrohttpd's poll() loop usually reads the end first and ends the request
 * unanswered (its state freed), else the handler runs and may ask http_client_gone(). */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "http/http.h"
#include "http/http_priv.h"

/* ---- lists and the timer (s->lock held) ----------------------------------------------------- */

static void entry_insert(http_server *s, http_park_entry *e)
{
    e->prev = NULL;
    e->next = e->sig->parked;
    if (e->next)
        e->next->prev = e;
    e->sig->parked = e;
    if (s->next_deadline == 0 || e->deadline < s->next_deadline) {
        s->next_deadline = e->deadline;
        pthread_cond_signal(&s->tick);
    }
}

static void entry_resume(http_park_entry *e, int timed_out)
{
    if (e->prev)
        e->prev->next = e->next;
    else
        e->sig->parked = e->next;
    if (e->next)
        e->next->prev = e->prev;
    e->prev = e->next = NULL;
    e->timed_out = timed_out;
    MHD_resume_connection(e->conn);
}

/* Resumes entries past their deadline; returns the earliest deadline left (0: none). */
static double sig_expire(http_signal *sig, double now)
{
    double next = 0;
    http_park_entry *e = sig->parked;

    while (e) {
        http_park_entry *n = e->next;
        if (e->deadline <= now)
            entry_resume(e, 1);
        else if (next == 0 || e->deadline < next)
            next = e->deadline;
        e = n;
    }
    return next;
}

static void *timer_main(void *arg)
{
    http_server *s = arg;

    pthread_mutex_lock(&s->lock);
    while (!s->timer_quit) {
        double now = http_now(), next = sig_expire(&s->nosig, now);
        for (http_signal *sig = s->signals; sig; sig = sig->next) {
            double d = sig_expire(sig, now);
            if (d != 0 && (next == 0 || d < next))
                next = d;
        }
        s->next_deadline = next;
        if (next == 0) {
            pthread_cond_wait(&s->tick, &s->lock);
        } else {
            struct timespec ts;
            ts.tv_sec = (time_t)next;
            ts.tv_nsec = (long)((next - (double)ts.tv_sec) * 1e9);
            pthread_cond_timedwait(&s->tick, &s->lock, &ts);
        }
    }
    pthread_mutex_unlock(&s->lock);
    return NULL;
}

int http_park_start(http_server *s)
{
    pthread_condattr_t attr;
    int rc;

    s->nosig.s = s;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    rc = pthread_cond_init(&s->tick, &attr);
    pthread_condattr_destroy(&attr);
    if (rc != 0)
        return -rc;
    rc = pthread_create(&s->timer, NULL, timer_main, s);
    if (rc != 0) {
        pthread_cond_destroy(&s->tick);
        return -rc;
    }
    s->timer_started = 1;
    return 0;
}

void http_park_resume_all(http_server *s)
{
    pthread_mutex_lock(&s->lock);
    s->stopping = 1;
    while (s->nosig.parked)
        entry_resume(s->nosig.parked, 1);
    for (http_signal *sig = s->signals; sig; sig = sig->next)
        while (sig->parked)
            entry_resume(sig->parked, 1);
    pthread_mutex_unlock(&s->lock);
}

void http_park_stop(http_server *s)
{
    if (s->timer_started) {
        pthread_mutex_lock(&s->lock);
        s->timer_quit = 1;
        pthread_cond_signal(&s->tick);
        pthread_mutex_unlock(&s->lock);
        pthread_join(s->timer, NULL);
        pthread_cond_destroy(&s->tick);
        s->timer_started = 0;
    }
    while (s->signals) {
        http_signal *next = s->signals->next;
        free(s->signals);
        s->signals = next;
    }
}

uint64_t http_park_seq(http_server *s)
{
    /* Read on every request: an atomic load, not the server lock. Raises still bump s->seq
     * under the lock, and a park compares stamps under it, so the acquire here is enough to
     * see every raise that completed before this request looked at its state. */
    return __atomic_load_n(&s->seq, __ATOMIC_ACQUIRE);
}

/* ---- signals -------------------------------------------------------------------------------- */

http_signal *http_signal_new(http_server *s)
{
    http_signal *sig;

    if (!s)
        return NULL;
    sig = calloc(1, sizeof(*sig));
    if (!sig)
        return NULL;
    sig->s = s;
    pthread_mutex_lock(&s->lock);
    sig->next = s->signals;
    s->signals = sig;
    pthread_mutex_unlock(&s->lock);
    return sig;
}

uint64_t http_signal_generation(http_server *s)
{
    return http_park_seq(s);
}

void http_signal_raise(http_signal *sig)
{
    http_server *s;

    if (!sig)
        return;
    s = sig->s;
    pthread_mutex_lock(&s->lock);
    sig->raised = __atomic_add_fetch(&s->seq, 1, __ATOMIC_RELEASE);
    while (sig->parked)
        entry_resume(sig->parked, 0);
    pthread_mutex_unlock(&s->lock);
}

/* ---- parked requests ------------------------------------------------------------------------ */

int http_park(http_req *r, http_signal *sig, int timeout_ms)
{
    if (!r || r->phase != HTTP_PHASE_RUN || r->answered || (sig && sig->s != r->s))
        return -EINVAL;
    if (timeout_ms < 1)
        timeout_ms = 1;
    if (timeout_ms > HTTP_MAX_PARK_MS)
        timeout_ms = HTTP_MAX_PARK_MS;
    r->park_asked = 1;
    r->park_sig = sig ? sig : &r->s->nosig;
    r->park_ms = timeout_ms;
    return 0;
}

int http_park_commit(http_req *r)
{
    http_server *s = r->s;
    http_park_entry *e = &r->park;
    int rc = 1;

    pthread_mutex_lock(&s->lock);
    if (s->stopping) {
        rc = -ESHUTDOWN;
    } else if (r->park_sig->raised > r->seq0) {
        rc = 0; /* raised while the handler looked: look again instead of sleeping */
    } else {
        MHD_suspend_connection(r->conn);
        e->sig = r->park_sig;
        e->conn = r->conn;
        e->timed_out = 0;
        e->deadline = http_now() + r->park_ms / 1e3;
        entry_insert(s, e);
    }
    pthread_mutex_unlock(&s->lock);
    return rc;
}

/* ---- streams -------------------------------------------------------------------------------- */

typedef struct http_stream {
    http_server *s;
    http_req *r; /* valid whenever libmicrohttpd calls stream_read */
    struct MHD_Connection *conn;
    http_pull pull;
    void *state;
    void (*free_fn)(void *);
    http_signal *sig;
    int heartbeat_ms;
    http_park_entry park;
} http_stream;

/* Whether the client has closed or reset the connection (nothing is consumed). Over TLS a
 * leaving client sends a close_notify record before its FIN, so the peek sees bytes, not the
 * end: there the socket's read-hangup flag (POLLRDHUP, set once the FIN is in even with bytes
 * unread) decides. Plain HTTP keeps the peek, so that a request pipelined before a half-close
 * still counts as a client waiting. */
static int peer_gone(const http_server *s, struct MHD_Connection *conn)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    char c;
    ssize_t n;

    if (!ci)
        return 0;
    if (s->tls_cert) {
        struct pollfd p = {.fd = ci->connect_fd, .events = POLLRDHUP};
        return poll(&p, 1, 0) == 1 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR));
    }
    n = recv(ci->connect_fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
    return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

int http_client_gone(const http_req *r)
{
    return peer_gone(r->s, r->conn);
}

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
    http_stream *st = cls;
    http_server *s = st->s;

    (void)pos;
    for (;;) {
        uint64_t seq0 = http_park_seq(s);
        ssize_t n = st->pull(st->state, buf, max);
        int park = 0;

        if (n > 0 && (size_t)n <= max) {
            st->r->bytes_out += (uint64_t)n;
            return n;
        }
        if (n == HTTP_PULL_END)
            return MHD_CONTENT_READER_END_OF_STREAM;
        if (n != HTTP_PULL_WAIT && n != 0)
            return MHD_CONTENT_READER_END_WITH_ERROR; /* HTTP_PULL_ERROR, or more than max */
        if (peer_gone(s, st->conn))
            return MHD_CONTENT_READER_END_WITH_ERROR;
        pthread_mutex_lock(&s->lock);
        if (!s->stopping && st->sig->raised <= seq0) {
            MHD_suspend_connection(st->conn);
            st->park.sig = st->sig;
            st->park.conn = st->conn;
            st->park.deadline = http_now() + st->heartbeat_ms / 1e3;
            entry_insert(s, &st->park);
            park = 1;
        } else if (s->stopping) {
            park = -1;
        }
        pthread_mutex_unlock(&s->lock);
        if (park == 1)
            return 0; /* suspended: called again when resumed */
        if (park < 0)
            return MHD_CONTENT_READER_END_WITH_ERROR; /* stopping: the client may reconnect */
        /* raised while pulling: pull again */
    }
}

static void stream_free(void *cls)
{
    http_stream *st = cls;

    if (st->free_fn)
        st->free_fn(st->state);
    free(st);
}

int http_reply_stream(http_req *r, int status, const char *content_type, http_pull pull,
                      void *state, void (*free_fn)(void *), http_signal *sig, int heartbeat_ms)
{
    struct MHD_Response *resp;
    http_stream *st = NULL;
    int rc = -EINVAL;

    if (r->answered || r->phase != HTTP_PHASE_RUN || !pull || status < 200 || status > 599 ||
        (sig && sig->s != r->s))
        goto fail;
    rc = -ENOMEM;
    st = calloc(1, sizeof(*st));
    if (!st)
        goto fail;
    st->s = r->s;
    st->r = r;
    st->conn = r->conn;
    st->pull = pull;
    st->state = state;
    st->free_fn = free_fn;
    st->sig = sig ? sig : &r->s->nosig;
    st->heartbeat_ms = heartbeat_ms > 0 ? heartbeat_ms : HTTP_HEARTBEAT_MS;
    if (st->heartbeat_ms < 10)
        st->heartbeat_ms = 10;
    if (st->heartbeat_ms > HTTP_MAX_PARK_MS)
        st->heartbeat_ms = HTTP_MAX_PARK_MS;
    resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, stream_read, st, stream_free);
    if (!resp)
        goto fail;
    /* from here resp owns st and state */
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE,
                            content_type ? content_type : "application/octet-stream");
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
    MHD_add_response_header(resp, "X-Accel-Buffering", "no"); /* proxies: do not buffer */
    return http_queue(r, status, resp, 0);
fail:
    free(st);
    if (free_fn)
        free_fn(state);
    return rc;
}
