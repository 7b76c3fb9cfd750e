/* http_priv: what the HTTP layer's files (http.c, http_route.c, http_reply.c, http_file.c,
 * http_park.c) share. Not for handlers.
 *
 * Locking. One mutex per server, s->lock, guards every signal's `raised` counter and parked
 * list, s->seq, s->stopping and s->next_deadline, and every park entry while it is on a list.
 * It is held only for list work and for the MHD_suspend_connection()/MHD_resume_connection()
 * calls themselves, never around a handler, a pull or any I/O. Lock order: s->lock, then
 * libmicrohttpd's internal connection mutex (taken inside suspend/resume); libmicrohttpd never
 * calls back into us while holding that one, so the order cannot invert.
 *
 * Invariant: a park entry is on a signal's list exactly while its connection is suspended by
 * us and not yet resumed. Suspend happens under s->lock together with the insertion; whoever
 * removes the entry (a raise, the timer, http_stop) resumes the connection under the same lock.
 * So every resume follows its suspend, and no connection is resumed twice. */
#ifndef TRAINYARD_HTTP_HTTP_PRIV_H
#define TRAINYARD_HTTP_HTTP_PRIV_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include <microhttpd.h>

#include "http/http.h"
#include "util/dynbuf.h"
#include "util/sha256.h"

#define HTTP_MAX_HEADERS   32        /* headers a handler may add to one answer */
#define HTTP_MAX_QUERY     64        /* query arguments kept per request */
#define HTTP_MAX_PARK_MS   600000    /* a park lasts at most 10 minutes */
#define HTTP_HEARTBEAT_MS  15000     /* a stream's default re-pull period */
#define HTTP_STOP_GRACE_MS 1000      /* http_stop waits this long for woken requests to answer */
#define HTTP_FILE_BLOCK    (1 << 16) /* block size of streamed and file answers */

typedef struct http_conn http_conn;

typedef struct http_addr_slot {
    unsigned count; /* open connections from key; 0: the slot is empty */
    unsigned char key[16];
} http_addr_slot;

typedef struct http_park_entry {
    struct http_park_entry *prev, *next; /* on sig->parked while suspended */
    http_signal *sig;
    struct MHD_Connection *conn;
    double deadline; /* monotonic seconds */
    int timed_out;   /* set by whoever resumed: 1 the timer or http_stop, 0 a raise */
} http_park_entry;

struct http_signal {
    http_server *s;
    http_signal *next;       /* s->signals */
    uint64_t raised;         /* s->seq at the last raise; 0: never raised */
    http_park_entry *parked; /* connections parked on this signal */
};

struct http_server {
    struct MHD_Daemon *d;
    http_config cfg; /* routes and app are borrowed; tmp_dir points at tmp_dir below */
    char *tmp_dir;
    int port;
    int listen_fd;            /* returned by MHD_quiesce_daemon(); closed after MHD_stop_daemon() */
    char *tls_cert, *tls_key; /* copies of the PEM texts (NULL: plain HTTP) */
    char start_msg[512];      /* libmicrohttpd's first complaint while starting (under lock) */
    int starting;

    pthread_mutex_t lock;
    pthread_cond_t tick; /* wakes the timer thread (CLOCK_MONOTONIC) */
    pthread_t timer;
    int timer_started, timer_quit;
    int stopping;         /* http_stop began: parks are refused, streams end */
    uint64_t seq;         /* raises so far, over all signals; written under the lock, read
                             atomically without it (http_park_seq) */
    double next_deadline; /* what the timer thread sleeps until; 0: nothing parked */
    http_signal *signals; /* every signal of this server, freed by http_stop */
    http_signal nosig;    /* what parks with a NULL signal wait on: never raised */
    atomic_int live;      /* requests between their first callback and their completion */
    /* per route (and one more row for requests that matched none): answers by status
     * (http_stat_codes, the last column every other status) and bytes sent; see http_stats */
    _Atomic uint64_t (*stat_count)[HTTP_STAT_CODES + 1];
    _Atomic uint64_t *stat_bytes;

    /* connections (http_conn.c), all under conn_lock but the fields set at start */
    pthread_mutex_t conn_lock;
    pthread_cond_t conn_tick; /* wakes the watcher (CLOCK_MONOTONIC) */
    pthread_t watcher;
    int watcher_started, conn_quit;
    unsigned max_conns, reserve;          /* the limit; its last slots are for light clients */
    unsigned n_conns;                     /* open (notified STARTED, not yet CLOSED) */
    http_conn *waiting, *waiting_tail;    /* waiting for a request head, earliest deadline first */
    http_addr_slot *addr_slots;           /* open connections per client address */
    size_t n_addr_slots;                  /* a power of two, at least twice max_conns */
    unsigned long conn_refused, conn_cut; /* since they were last logged */
    double conn_logged;
};

typedef struct http_header_pair {
    char *name, *value;
} http_header_pair;

enum { HTTP_PHASE_READ = 0, HTTP_PHASE_RUN, HTTP_PHASE_PARKED, HTTP_PHASE_DONE };

struct http_req {
    http_server *s;
    struct MHD_Connection *conn;
    const char *method; /* libmicrohttpd's copies, valid for the request */
    const char *path;   /* raw, still percent-encoded */
    const http_route *route;
    int phase;
    double t0;

    /* path parameters: names borrowed from route->pattern (length-bounded), values decoded */
    int n_params;
    const char *param_name[HTTP_MAX_PARAMS];
    size_t param_name_len[HTTP_MAX_PARAMS];
    char *param_value[HTTP_MAX_PARAMS];
    /* query arguments, decoded on first use */
    int query_done, n_query;
    char query_nul[64]; /* the first query argument holding an encoded NUL, refused with 400 */
    http_header_pair query[HTTP_MAX_QUERY];

    /* the body */
    uint64_t body_seen;   /* bytes received so far */
    dynbuf body;          /* in memory, capped at the route's max_body; NUL-terminated */
    int body_fd;          /* body_to_file while receiving; -1 otherwise */
    char *body_path;      /* body_to_file: removed when the request ends */
    sha256_ctx body_hash; /* body_to_file: every byte written so far */
    char body_sha256[65]; /* body_to_file: its hex digest once complete; "" before */
    int reject_status;    /* nonzero: answer this problem instead of calling the handler */
    _Alignas(max_align_t) unsigned char auth[HTTP_AUTH_BYTES]; /* http_auth() */
    char reject_detail[160];

    /* the handler's call */
    char errbuf[ERR_LEN];
    void *state;
    void (*state_free)(void *);
    int n_headers;
    http_header_pair headers[HTTP_MAX_HEADERS];
    int answered, status, queue_failed;
    uint64_t bytes_out;
    int wakeups, timed_out;
    uint64_t seq0; /* s->seq when this handler call began: a raise after it must not be lost */
    int park_asked;
    http_signal *park_sig;
    int park_ms;
    http_park_entry park;
};

/* http_route.c: finds r's route, or records the 404/405 to answer */
void http_route_find(http_req *r);

/* http.c */
int http_queue(http_req *r, int status, struct MHD_Response *resp, uint64_t body_len);
void http_log_line(http_server *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
double http_now(void);

/* http_park.c */
int http_park_start(http_server *s);
void http_park_stop(http_server *s);
void http_park_resume_all(http_server *s);
/* After a handler call that asked to park: suspends and queues the request (1), or returns 0
 * when its signal was raised since the call began (call the handler again), or -ESHUTDOWN. */
int http_park_commit(http_req *r);
uint64_t http_park_seq(http_server *s);

/* http_conn.c: admission and the request-head deadline */
int http_conn_start(http_server *s, unsigned max_conns);
void http_conn_stop(http_server *s);
/* libmicrohttpd's accept policy: MHD_NO refuses the connection (per-address limit, reserve) */
enum MHD_Result http_conn_admit(void *cls, const struct sockaddr *addr, socklen_t len);
/* libmicrohttpd's MHD_OPTION_NOTIFY_CONNECTION: tracks the connection from open to close */
void http_conn_notify(void *cls, struct MHD_Connection *conn, void **socket_context,
                      enum MHD_ConnectionNotificationCode code);
/* waiting 0: conn's request head is in (its first on_access call), no deadline until the
 * request ends; 1: it has ended, and the next head is due within the head timeout */
void http_conn_waiting(http_server *s, struct MHD_Connection *conn, int waiting);

/* http_route.c: decodes the query string; a request with an encoded NUL in any argument is
 * answered 400 here (returns nonzero having answered), so no handler sees a value cut short. */
int http_query_check(http_req *r);

#endif
