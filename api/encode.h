/* encode: the JSON the API answers with, built from database rows exactly as openapi.yaml
 * describes it (Job, Attempt, EpochMetrics, Artifact, Worker, Lease), and the small text
 * encodings the handlers share (RFC 3339 times, base64, the list cursor).
 *
 * Rules the builders keep: every required property is present; a value that is unknown is
 * JSON null where the schema allows null and absent where it is optional and not nullable
 * (samples_per_second); times are RFC 3339 UTC with milliseconds ("2024-05-01T12:34:56.789Z");
 * no property outside the schema appears (the schemas say additionalProperties: false).
 *
 * This file needs jansson and the db row types only, not the HTTP framework, so it is unit
 * tested on its own (tests/unit/api/test_encode.c). Every json_t returned is a new reference
 * the caller owns; NULL means out of memory, or for api_encode_job a stored document that is not
 * a JSON object. */
#ifndef TRAINYARD_API_ENCODE_H
#define TRAINYARD_API_ENCODE_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "scheduler/waiting.h"
#include "db/artifacts.h"
#include "db/events.h"
#include "db/jobs.h"
#include "db/metrics.h"
#include "db/tokens.h"
#include "db/workers.h"

#define API_TIME_LEN   32 /* bytes for an RFC 3339 time and its NUL */
#define API_CURSOR_MAX 64 /* buffer size for a cursor (it is API_CURSOR_LEN long) */
#define API_CURSOR_LEN 16 /* a cursor: 16 lowercase hex digits (openapi: its pattern) */

/* Writes ms since the epoch as RFC 3339 UTC with milliseconds. */
void api_encode_time_format(int64_t ms, char buf[API_TIME_LEN]);
/* The time as a JSON string, or JSON null when ms is 0 ("not yet"). */
json_t *api_encode_time(int64_t ms);
/* A JSON number, or JSON null for NAN or an infinity. */
json_t *api_encode_real(double v);

/* The object with keys[i] = vals[i] for i < n, stealing every value; NULL when any value is
 * NULL or the object cannot be built (every value is released either way). */
json_t *api_encode_object(const char *const *keys, json_t **vals, size_t n);
/* The Job object of GET /jobs/{id}. */
json_t *api_encode_job(const db_job *j);
/* The same Job as JSON text (malloc'd, *len bytes, NUL-terminated), the stored document copied
 * in as it is rather than parsed and printed again; NULL when out of memory or the stored
 * document is not an object. */
char *api_encode_job_text(const db_job *j, size_t *len);
/* The same with an `attempts` array and the members of `extra` (the published `model`
 * {name, version}, `waiting`) added (both stolen, NULL: none), as GET /jobs/{id} answers. */
char *api_encode_job_text_with(const db_job *j, json_t *attempts, json_t *extra, size_t *len);
/* The Waiting object of a queued job (sched_job_wait's answer). */
json_t *api_encode_wait(const sched_wait *w);
/* Folds one event of a job's history (oldest first) into `attempts`, an array of openapi's
 * Attempt objects: a lease starts one, the end of a running attempt (requeue, release, finish)
 * closes the last. Other events change nothing. 0, or -ENOMEM. */
int api_encode_attempts_add(json_t *attempts, const db_event *e);
/* One EpochMetrics object. */
json_t *api_encode_metric(const db_metric *m);
/* One Artifact object. */
json_t *api_encode_artifact(const db_artifact *a);
/* One Token object (never the secret, which the table does not hold). */
json_t *api_encode_token(const db_token *t);
/* One Worker object: status is gone when marked so or unseen since gone_before (ms), busy
 * when it holds a job, else idle. */
json_t *api_encode_worker(const db_worker *w, int64_t gone_before, int lease_seconds);
/* The Lease object answering POST /workers/{worker}/lease. */
json_t *api_encode_lease(const db_job *j);

/* Standard (url = 0, padded) or base64url (url = 1, unpadded) of len bytes into out; returns
 * the length written, or -ENOSPC when cap is too small for it and a NUL. */
int api_encode_base64(const void *data, size_t len, int url, char *out, size_t cap);
/* The list cursor naming the position before seq (opaque to clients: 16 hex digits). */
void api_encode_cursor(int64_t seq, char out[API_CURSOR_MAX + 1]);
/* The seq a cursor names; -EINVAL for anything not of the cursor's form. */
int api_encode_cursor_seq(const char *cursor, int64_t *seq);

#endif
