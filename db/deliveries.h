/* db/deliveries: the deliveries and delivery_attempts tables (schema v8) — the webhooks to send
 * and every try of each (scheduler/notify.h says when rows are made and how they are sent).
 *
 * A row is pending until a 2xx answer makes it delivered or its last attempt makes it failed;
 * next_at is when the next attempt is due. Rows go with their job or sweep (ON DELETE
 * CASCADE). Strings handed to callbacks are valid during the call only. */
#ifndef TRAINYARD_DB_DELIVERIES_H
#define TRAINYARD_DB_DELIVERIES_H

#include <stdint.h>

#include "db/db.h"

enum db_delivery_status { DB_DELIVERY_PENDING, DB_DELIVERY_DELIVERED, DB_DELIVERY_FAILED };

typedef struct db_delivery {
    int64_t id;
    int64_t job_seq, sweep_seq; /* 0: none */
    const char *owner;          /* token id whose secret signs it, or NULL */
    const char *url, *event, *body;
    int status; /* enum db_delivery_status */
    int attempts;
    int64_t next_at, created_at, finished_at; /* finished_at 0: not yet */
} db_delivery;

typedef struct db_delivery_attempt {
    int attempt;
    int64_t at;
    int http_status;   /* 0: no answer */
    const char *error; /* NULL when none */
    int64_t ms;
} db_delivery_attempt;

typedef int (*db_delivery_fn)(void *ctx, const db_delivery *dl);
typedef int (*db_delivery_attempt_fn)(void *ctx, const db_delivery_attempt *at);

/* "pending", "delivered", "failed"; NULL out of range. */
const char *db_delivery_status_name(int status);

/* Inserts a pending delivery due at dl->next_at (id, status, attempts and finished_at are
 * ignored); its id into *id (may be NULL). */
int db_delivery_insert(db *d, const db_delivery *dl, int64_t *id, char *err);
/* Pending deliveries due at or before now, soonest first, at most limit. */
int db_delivery_due(db *d, int64_t now, int limit, db_delivery_fn fn, void *ctx, char *err);
/* Records attempt number `attempt` of delivery id (its result in a) and moves the row on: status
 * (enum db_delivery_status), next_at for a pending one, finished_at = a->at otherwise. Only a
 * row still pending with attempts = attempt - 1 changes; returns 1 when it did, 0 when the row
 * is gone or moved meanwhile (nothing is written then). One transaction. */
int db_delivery_record(db *d, int64_t id, const db_delivery_attempt *a, int status, int64_t next_at,
                       char *err);
/* The deliveries of job_seq, oldest first. */
int db_delivery_list_job(db *d, int64_t job_seq, db_delivery_fn fn, void *ctx, char *err);
/* The attempts of delivery id, first first. */
int db_delivery_attempts(db *d, int64_t id, db_delivery_attempt_fn fn, void *ctx, char *err);

#endif
