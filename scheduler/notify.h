/* notify: webhooks — a job's (or a sweep's) "notify" entries become HTTP POSTs when it reaches
 * an event they asked for, delivered by one thread of serve, retried, signed and recorded.
 *
 * Enqueue. A delivery is a row of `deliveries` (db/schema.c v8) written in the SAME transaction
 * as the state change it reports, so a crash loses neither: every job transition appends a
 * job_events row (db_event_append), and serve registers notify_job_transition as that
 * function's hook (db/events.h). It enqueues one row per notify entry whose events contain
 * the transition's: queued -> running is "running" (each attempt's start), entering succeeded,
 * failed or cancelled is that event. The row holds the body, built then (the job as it is in
 * that transaction, its last epoch's metrics), the URL and the owner whose secret signs it.
 * Sweeps enqueue theirs with notify_enqueue_sweep (below), also inside their transaction.
 *
 * Delivery. notifier_start runs one thread with its own connection. About every
 * NOTIFY_POLL_MS it takes the pending rows whose next_at has come (oldest first, a few at a
 * time) and POSTs each: Content-Type application/json, the stored body as it is, and
 *   X-Trainyard-Event: job.succeeded          (sweep.<event> for a sweep's)
 *   X-Trainyard-Delivery: <deliveries.id>     (the same on every attempt: receivers dedupe)
 *   X-Trainyard-Timestamp: <unix seconds of this attempt>
 *   X-Trainyard-Signature: sha256=<hex HMAC-SHA256(secret, "<timestamp>.<body>")>
 * i.e. the key is the secret's text as bytes, the message the timestamp header's digits, one
 * '.', then the body's bytes exactly as sent. Receivers recompute it, compare in constant time,
 * and refuse old timestamps (replays).
 * A 2xx answer delivers it. Anything else (another status, a refused or timed-out connection,
 * a disallowed address) is a failed attempt: retried after backoff_ms × 2^(attempt − 1)
 * (1 s, 2 s, 4 s, ... by default) until max_attempts (default 8), then the row is failed.
 * Every attempt is a delivery_attempts row (http_status or NULL, error or NULL, ms taken).
 * Redirects are not followed. Pending rows outlive serve: the next serve picks them up.
 *
 * The secret: the owner token's webhook secret (POST /tokens/{id}/webhook-secret; sealed in
 * tokens.webhook_secret under the data directory's credentials key), else the server's
 * (NOTIFY_SERVER_SECRET in the data directory, made on first use, mode 0600, shown by
 * `trainyard token webhook-secret --server --data-dir DIR`): every delivery is signed.
 *
 * Addresses: the rules of dataset URLs (util/allow.h, serve's --dataset-allow). A URL must be
 * http or https; with a non-empty allow list its host must match a pattern; a private,
 * loopback or link-local address is refused unless the list allows it (the address, its block
 * or the host name). notify_check_url applies what can be told without DNS at submit; the
 * thread applies all of it again at each connect (libcurl's open-socket callback sees the
 * resolved address, so a name that later resolves somewhere private is still refused).
 *
 * Layer: scheduler; it knows nothing of HTTP serving. Times are ms since the epoch. */
#ifndef TRAINYARD_SCHEDULER_NOTIFY_H
#define TRAINYARD_SCHEDULER_NOTIFY_H

#include <stdint.h>

#include <jansson.h>

#include "db/db.h"
#include "util/allow.h"

#define NOTIFY_POLL_MS           250
#define NOTIFY_DEFAULT_BACKOFF   1000 /* ms before the first retry; doubles each time */
#define NOTIFY_DEFAULT_ATTEMPTS  8
#define NOTIFY_DEFAULT_TIMEOUT_S 10               /* per attempt, connecting included */
#define NOTIFY_SERVER_SECRET     "webhook.secret" /* in the data directory */
#define NOTIFY_SECRET_LEN        70 /* "whsec_" + 64 hex digits: the secrets this makes */

typedef struct notify_opts {
    const char *db_path;           /* the database the thread opens */
    const char *data_dir;          /* where NOTIFY_SERVER_SECRET is */
    const uint8_t *key;            /* the credentials key (SECRET_KEY_LEN bytes) token secrets are
                                      sealed under */
    const allow_list *allow;       /* --dataset-allow, parsed (borrowed; may be empty) */
    int backoff_ms, max_attempts;  /* 0: the defaults above */
    int timeout_s;                 /* 0: NOTIFY_DEFAULT_TIMEOUT_S */
    void (*log)(const char *line); /* one line per delivery given up; may be NULL */
} notify_opts;

typedef struct notifier notifier;

/* Starts the delivery thread (o and what it points to must outlive it). */
int notifier_start(const notify_opts *o, notifier **out, char *err);
/* Stops it: an attempt in flight is cut short and not recorded (the row stays pending as it
 * was), and the rest wait for the next serve. Accepts NULL. */
void notifier_stop(notifier *n);

/* The db_event_append hook (db/events.h): enqueues the webhooks of job_seq's transition from
 * -> to at `at`, in the caller's transaction. ctx points to a `const char *_Atomic` holding the
 * server's base URL for the body's links (serve sets it once it knows its port; NULL, or a
 * NULL ctx: links are paths). Jobs without "notify" cost one strstr. */
int notify_job_transition(void *ctx, db *d, int64_t job_seq, int from, int to, int64_t at,
                          char *err);

/* For sweeps (call inside the transaction that changes the sweep): enqueues one delivery per
 * entry of notify_array (the sweep document's "notify": [{"url", "events": [...]}], borrowed;
 * NULL or empty enqueues nothing) whose events contain event ("succeeded", "failed",
 * "cancelled", ...; an entry without "events" takes succeeded, failed and cancelled). The body
 * sent is {"event": "sweep.<event>", "at": RFC 3339, "sweep": body} (body borrowed: typically
 * the Sweep object); owner is the sweep owner's token id (its secret signs; NULL: the server's).
 * Returns the number enqueued, or a negative code with err filled. */
int notify_enqueue_sweep(db *d, int64_t sweep_seq, const char *owner, const char *event,
                         const json_t *body, const json_t *notify_array, int64_t now, char *err);

/* Submit-time check of one notify URL against the rules above (no DNS): 0, or -EINVAL with a
 * sentence in err naming what is wrong with it. */
int notify_check_url(const allow_list *allow, const char *url, char *err);

/* A new random webhook secret ("whsec_" + 64 hex digits) into out[NOTIFY_SECRET_LEN + 1]. */
int notify_secret_new(char out[NOTIFY_SECRET_LEN + 1], char *err);
/* Gives token id a new webhook secret (into out, shown once), sealed under key in
 * tokens.webhook_secret; -ENOENT when no active token has that id. */
int notify_token_secret_set(db *d, const uint8_t *key, const char *id,
                            char out[NOTIFY_SECRET_LEN + 1], char *err);
/* The server-wide secret in data_dir (made when missing) into out[NOTIFY_SECRET_LEN + 1]. */
int notify_server_secret(const char *data_dir, char out[NOTIFY_SECRET_LEN + 1], char *err);

#endif
