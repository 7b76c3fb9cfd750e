/* http_conn: which connections the server takes, and how long one may take to send a request.
 *
 * One slow or hostile client must not hold the server. libmicrohttpd's own timeout restarts on
 * every byte, so a client sending a header line every few seconds (slowloris) would keep its
 * connection for ever, and enough of them fill the connection limit. So this file keeps a
 * table of the open connections (libmicrohttpd's STARTED and CLOSED notifications) and:
 *
 *   - Head deadline. A connection must deliver a complete request head (request line and
 *     headers; for TLS the handshake too) within HTTP_HEAD_TIMEOUT_S of opening, or of its last
 *     answer going out (an idle keep-alive connection is held no longer either). A connection
 *     is *waiting* from then until on_access() first sees its request, and waiting again once
 *     the request completes (both told by http_conn_waiting). The watcher thread cuts one
 *     past its deadline with shutdown(2): libmicrohttpd's next read sees the end and closes it.
 *     A busy connection (a body arriving, a handler, an answer going out, a parked long poll or
 *     a stream) is never cut here: libmicrohttpd's idle timeout bounds a stalled body or a
 *     client that stopped reading, and suspended connections are exempt from it.
 *   - Admission (http_conn_admit, libmicrohttpd's accept policy, before a connection counts).
 *     An address may hold at most max_per_client connections (0: no limit). The last
 *     `reserve` slots of the limit (an eighth, at least 16) go only to light clients, addresses
 *     with fewer than HTTP_LIGHT_CONNS connections open: when heavy addresses have filled the
 *     rest, a worker, the CLI or a browser still gets in, and connections already open go on
 *     being served. A refused connection is closed at once (the client sees a reset or an
 *     empty answer, not a timeout).
 *
 * Invariants. Every table entry is an open connection whose socket libmicrohttpd has not yet
 * closed: CLOSED is notified before close(fd) (daemon.c, MHD_cleanup_connections), and it takes
 * conn_lock, under which the watcher calls shutdown(); so a descriptor number reused by a newer
 * connection is never touched. A waiting entry is on the waiting list, which is in deadline
 * order because every deadline is "now + the same timeout" when appended. Per-address counts
 * equal the number of entries with that address. All of it is guarded by s->conn_lock, taken
 * for list and table work only, never around I/O but the non-blocking shutdown().
 *
 * Admission reads the counts before libmicrohttpd notifies STARTED, so the pool's threads
 * accepting at once may overshoot a limit by at most one connection each. */
#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "http/http_priv.h"

#define HTTP_HEAD_TIMEOUT_S 10 /* from opening, or the last answer, to a complete request head */
#define HTTP_LIGHT_CONNS    8  /* an address with fewer open connections may use the reserve */
#define HTTP_REFUSED_LOG_S  10 /* refusals and cuts are logged as counts at most this often */

struct http_conn {
    struct http_conn *prev, *next; /* on s->waiting while waiting for a request head */
    int fd;
    int waiting, cut;
    double deadline; /* monotonic seconds; while waiting */
    unsigned char key[16];
};

/* ---- per-address counts: open addressing, linear probing, deletion by backward shift -------- */

/* An IPv4 address becomes its IPv4-mapped IPv6 form, so both families share one key. */
static int addr_key(const struct sockaddr *sa, unsigned char key[16])
{
    static const unsigned char mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

    if (sa && sa->sa_family == AF_INET) {
        memcpy(key, mapped, sizeof(mapped));
        memcpy(key + 12, &((const struct sockaddr_in *)(const void *)sa)->sin_addr, 4);
        return 0;
    }
    if (sa && sa->sa_family == AF_INET6) {
        memcpy(key, &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr, 16);
        return 0;
    }
    return -EAFNOSUPPORT;
}

static size_t addr_home(const http_server *s, const unsigned char key[16])
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (int i = 0; i < 16; i++)
        h = (h ^ key[i]) * 1099511628211ull;
    return (size_t)h & (s->n_addr_slots - 1);
}

/* The slot holding key, or the empty slot where it would go; SIZE_MAX when the table is full. */
static size_t addr_find(const http_server *s, const unsigned char key[16])
{
    size_t i = addr_home(s, key);
    for (size_t n = 0; n < s->n_addr_slots; n++, i = (i + 1) & (s->n_addr_slots - 1))
        if (!s->addr_slots[i].count || !memcmp(s->addr_slots[i].key, key, 16))
            return i;
    return SIZE_MAX;
}

static unsigned addr_count(const http_server *s, const unsigned char key[16])
{
    size_t i = addr_find(s, key);
    return i == SIZE_MAX ? 0 : s->addr_slots[i].count;
}

static void addr_add(http_server *s, const unsigned char key[16])
{
    size_t i = addr_find(s, key);
    if (i == SIZE_MAX)
        return; /* cannot happen: the table has twice the slots of the connection limit */
    memcpy(s->addr_slots[i].key, key, 16);
    s->addr_slots[i].count++;
}

static void addr_remove(http_server *s, const unsigned char key[16])
{
    size_t mask = s->n_addr_slots - 1, i = addr_find(s, key);

    if (i == SIZE_MAX || !s->addr_slots[i].count || --s->addr_slots[i].count)
        return;
    /* Emptied: pull later entries of the probe run back so that none is cut off from home. */
    for (size_t j = (i + 1) & mask; s->addr_slots[j].count; j = (j + 1) & mask) {
        size_t home = addr_home(s, s->addr_slots[j].key);
        if (((j - home) & mask) >= ((j - i) & mask)) {
            s->addr_slots[i] = s->addr_slots[j];
            s->addr_slots[j].count = 0;
            i = j;
        }
    }
}

/* ---- the waiting list (conn_lock held) ------------------------------------------------------ */

static void wait_remove(http_server *s, http_conn *c)
{
    if (!c->waiting)
        return;
    if (c->prev)
        c->prev->next = c->next;
    else
        s->waiting = c->next;
    if (c->next)
        c->next->prev = c->prev;
    else
        s->waiting_tail = c->prev;
    c->prev = c->next = NULL;
    c->waiting = 0;
}

static void wait_append(http_server *s, http_conn *c)
{
    wait_remove(s, c);
    if (c->cut)
        return;
    c->deadline = http_now() + HTTP_HEAD_TIMEOUT_S;
    c->waiting = 1;
    c->prev = s->waiting_tail;
    if (s->waiting_tail)
        s->waiting_tail->next = c;
    else
        s->waiting = c;
    s->waiting_tail = c;
    if (s->waiting == c)
        pthread_cond_signal(&s->conn_tick);
}

/* Refusals and cuts are counted and logged as counts at most every HTTP_REFUSED_LOG_S, not one
 * line per connection; returns 1 when the caller should log now (conn_lock held). */
static int note_due(http_server *s)
{
    double now = http_now();
    if (now - s->conn_logged < HTTP_REFUSED_LOG_S)
        return 0;
    s->conn_logged = now;
    return 1;
}

/* Logs the counts taken under conn_lock by note_take (the lock released). */
static void note_log(http_server *s, const unsigned long n[2], unsigned open)
{
    if (n[0] || n[1])
        http_log_line(s,
                      "http: refused %lu connection(s) (too many from one address, or a heavy "
                      "address asking for the reserve); cut %lu that sent no request head in "
                      "%d s; %u open of %u",
                      n[0], n[1], HTTP_HEAD_TIMEOUT_S, open, s->max_conns);
}

static void note_take(http_server *s, unsigned long n[2])
{
    n[0] = s->conn_refused;
    n[1] = s->conn_cut;
    s->conn_refused = s->conn_cut = 0;
}

static void *watcher_main(void *arg)
{
    http_server *s = arg;

    pthread_mutex_lock(&s->conn_lock);
    while (!s->conn_quit) {
        double now = http_now();
        unsigned long n[2] = {0, 0};
        while (s->waiting && s->waiting->deadline <= now) {
            http_conn *c = s->waiting;
            wait_remove(s, c);
            c->cut = 1;
            (void)shutdown(c->fd, SHUT_RDWR); /* never blocks; c->fd is still c's (above) */
            s->conn_cut++;
        }
        if ((s->conn_refused || s->conn_cut) && note_due(s)) {
            unsigned open = s->n_conns;
            note_take(s, n);
            pthread_mutex_unlock(&s->conn_lock);
            note_log(s, n, open);
            pthread_mutex_lock(&s->conn_lock);
            continue;
        }
        if (!s->waiting && !s->conn_refused && !s->conn_cut) {
            pthread_cond_wait(&s->conn_tick, &s->conn_lock);
        } else {
            /* the next deadline, or the next time the counts may be logged */
            double next = s->conn_logged + HTTP_REFUSED_LOG_S;
            struct timespec ts;
            if (s->waiting && (!(s->conn_refused || s->conn_cut) || s->waiting->deadline < next))
                next = s->waiting->deadline;
            ts.tv_sec = (time_t)next;
            ts.tv_nsec = (long)((next - (double)ts.tv_sec) * 1e9);
            pthread_cond_timedwait(&s->conn_tick, &s->conn_lock, &ts);
        }
    }
    pthread_mutex_unlock(&s->conn_lock);
    return NULL;
}

/* ---- libmicrohttpd's callbacks -------------------------------------------------------------- */

enum MHD_Result http_conn_admit(void *cls, const struct sockaddr *addr, socklen_t len)
{
    http_server *s = cls;
    unsigned char key[16];
    unsigned mine, open;
    unsigned long n[2] = {0, 0};
    enum MHD_Result ok = MHD_YES;

    (void)len;
    if (addr_key(addr, key) < 0)
        return MHD_YES; /* not an IP client: nothing to count it by */
    pthread_mutex_lock(&s->conn_lock);
    mine = addr_count(s, key);
    open = s->n_conns;
    if ((s->cfg.max_per_client && mine >= s->cfg.max_per_client) ||
        (open + s->reserve >= s->max_conns && mine >= HTTP_LIGHT_CONNS)) {
        s->conn_refused++;
        pthread_cond_signal(&s->conn_tick); /* the watcher logs the count in time */
        ok = MHD_NO;
    }
    if ((s->conn_refused || s->conn_cut) && note_due(s))
        note_take(s, n);
    pthread_mutex_unlock(&s->conn_lock);
    note_log(s, n, open);
    return ok;
}

void http_conn_notify(void *cls, struct MHD_Connection *conn, void **socket_context,
                      enum MHD_ConnectionNotificationCode code)
{
    http_server *s = cls;
    http_conn *c = *socket_context;

    if (code == MHD_CONNECTION_NOTIFY_CLOSED) {
        if (!c)
            return;
        pthread_mutex_lock(&s->conn_lock);
        wait_remove(s, c);
        addr_remove(s, c->key);
        s->n_conns--;
        pthread_mutex_unlock(&s->conn_lock);
        *socket_context = NULL;
        free(c);
        return;
    }
    const union MHD_ConnectionInfo *fd =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    const union MHD_ConnectionInfo *ad =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    c = calloc(1, sizeof(*c));
    if (!c || !fd || !ad || addr_key(ad->client_addr, c->key) < 0) {
        free(c); /* untracked: no head deadline, not counted; libmicrohttpd's timeout holds */
        return;
    }
    c->fd = fd->connect_fd;
    pthread_mutex_lock(&s->conn_lock);
    addr_add(s, c->key);
    s->n_conns++;
    wait_append(s, c);
    pthread_mutex_unlock(&s->conn_lock);
    *socket_context = c;
}

/* The entry of conn, NULL when untracked. */
static http_conn *conn_of(struct MHD_Connection *conn)
{
    const union MHD_ConnectionInfo *info =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return info ? info->socket_context : NULL;
}

void http_conn_waiting(http_server *s, struct MHD_Connection *conn, int waiting)
{
    http_conn *c = conn_of(conn);
    if (!c)
        return;
    pthread_mutex_lock(&s->conn_lock);
    if (waiting)
        wait_append(s, c);
    else
        wait_remove(s, c);
    pthread_mutex_unlock(&s->conn_lock);
}

/* ---- start and stop ------------------------------------------------------------------------- */

int http_conn_start(http_server *s, unsigned max_conns)
{
    pthread_condattr_t attr;
    size_t slots = 16;
    int rc;

    while (slots < 2 * (size_t)max_conns + 64)
        slots *= 2;
    s->addr_slots = calloc(slots, sizeof(*s->addr_slots));
    if (!s->addr_slots)
        return -ENOMEM;
    s->n_addr_slots = slots;
    s->max_conns = max_conns;
    s->reserve = max_conns / 8 > 16 ? max_conns / 8 : 16;
    if (s->reserve > max_conns / 2)
        s->reserve = max_conns / 2;
    pthread_mutex_init(&s->conn_lock, NULL);
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    rc = pthread_cond_init(&s->conn_tick, &attr);
    pthread_condattr_destroy(&attr);
    if (rc != 0)
        goto fail;
    rc = pthread_create(&s->watcher, NULL, watcher_main, s);
    if (rc != 0) {
        pthread_cond_destroy(&s->conn_tick);
        goto fail;
    }
    s->watcher_started = 1;
    return 0;
fail:
    pthread_mutex_destroy(&s->conn_lock);
    free(s->addr_slots);
    s->addr_slots = NULL;
    return -rc;
}

void http_conn_stop(http_server *s)
{
    if (!s->watcher_started)
        return;
    pthread_mutex_lock(&s->conn_lock);
    s->conn_quit = 1;
    pthread_cond_signal(&s->conn_tick);
    pthread_mutex_unlock(&s->conn_lock);
    pthread_join(s->watcher, NULL);
    pthread_cond_destroy(&s->conn_tick);
    pthread_mutex_destroy(&s->conn_lock);
    free(s->addr_slots);
    s->addr_slots = NULL;
    s->watcher_started = 0;
}
