/* bodies: validation of the worker protocol's request bodies (openapi.yaml's
 * WorkerRegistration, Heartbeat and Completion) and of TokenRequest, reporting every problem as
 * {field, message} like job_parse() does for job documents, so a 400 names each bad field.
 *
 * Like encode.c this needs only jansson and the db row types, not the HTTP framework.
 * Parsed values borrow from the JSON body they came from (which must outlive them), except
 * api_heartbeat's arrays, which api_heartbeat_free() releases. */
#ifndef TRAINYARD_API_BODIES_H
#define TRAINYARD_API_BODIES_H

#include <stddef.h>

#include <jansson.h>

#include "db/histograms.h"
#include "db/metrics.h"
#include "db/tokens.h"
#include "util/field_errors.h"

#define API_MAX_DEVICES    64
#define API_MAX_EPOCHS     1000 /* EpochMetrics per heartbeat */
#define API_MAX_LOG_LINES  1000 /* log lines per heartbeat */
#define API_LOG_LINE_CHARS 1000
#define API_ERROR_CHARS    4096 /* Completion.error */
#define API_MAX_METRICS    64   /* keys of one EpochMetrics, epoch and the known ones included */

typedef struct api_registration {
    const char *name;      /* borrowed */
    const json_t *devices; /* borrowed: the validated array */
    unsigned kinds;        /* DB_KIND_* bits of the devices' types (+ SCRIPTS_ONLY) */
    int scripts;           /* the worker runs script jobs (--allow-scripts); default 0 */
    int slots;             /* the most replicas of a data-parallel job it starts; default 1 */
} api_registration;

typedef struct api_heartbeat {
    int phase;         /* enum db_phase; DB_PHASE_NONE when absent */
    db_metric *epochs; /* owned; each extra is owned too (JSON text of the other metrics, or
                          NULL) */
    size_t n_epochs;
    const char **logs; /* owned array of borrowed strings */
    size_t n_logs;
    uint64_t dataset_bytes;   /* dataset bytes fetched since the last heartbeat (0: none) */
    db_histogram *histograms; /* owned, of every epoch; each data is owned (checked JSON text),
                                 each tensor borrowed */
    size_t n_histograms, histograms_cap;
} api_heartbeat;

/* Checks a WorkerRegistration; -EINVAL with errs filled when invalid. */
int api_registration_parse(const json_t *body, api_registration *out, field_errors *errs);
/* Checks a Heartbeat; -EINVAL with errs filled when invalid, -ENOMEM. */
int api_heartbeat_parse(const json_t *body, api_heartbeat *out, field_errors *errs);
/* Releases a heartbeat's arrays; accepts NULL. */
void api_heartbeat_free(api_heartbeat *hb);
/* Checks a Completion: *status is DB_SUCCEEDED, DB_FAILED or DB_CANCELLED, *error borrowed or
 * NULL; -EINVAL with errs filled when invalid. */
int api_completion_parse(const json_t *body, int *status, const char **error, field_errors *errs);
/* A Completion's account of a job that ended before its last epoch (early stopping, a stop
 * request): reason borrowed from the body or NULL, epochs 0 when absent. */
typedef struct api_completion_stop {
    const char *reason;
    int stopped_epoch, best_epoch;
} api_completion_stop;
#define API_STOP_REASON_CHARS 500 /* characters of a Completion's stop_reason */
/* Checks the stop members of a Completion (stop_reason, stopped_epoch, best_epoch); -EINVAL with
 * errs filled when invalid. */
int api_completion_stop_parse(const json_t *body, api_completion_stop *out, field_errors *errs);
/* Checks a StopRequest ({"reason"}, optional): *reason borrowed when given, else left as it
 * is; -EINVAL with errs filled when invalid. */
int api_stop_request_parse(const json_t *body, const char **reason, field_errors *errs);
/* The status of a completion that says the attempt was lost where it ran (a data-parallel job's
 * ranks died): the job is retried as after a lapsed lease (sched_job_lose), error the reason. */
#define API_COMPLETION_LOST (-2)

/* Checks a TokenRequest into *out (name copied, role an enum db_role, scripts 0 when absent, the
 * caps 0 when absent or null: none; the rest zeroed); -EINVAL with errs filled when invalid. */
int api_token_request_parse(const json_t *body, db_token *out, field_errors *errs);

#endif
