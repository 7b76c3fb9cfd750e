/* submit: (new) → queued, the one transition that makes a job (lifecycle.h has the state
 * machine). Concurrent submits share one transaction and one fsync (group commit): each still
 * gets its own job, its own event row and its own result. */
#ifndef TRAINYARD_SCHEDULER_SUBMIT_H
#define TRAINYARD_SCHEDULER_SUBMIT_H

#include <stdint.h>

#include "db/db.h"
#include "db/jobs.h"

/* What a submit stores; the strings are borrowed. */
typedef struct sched_new_job {
    const char *name;
    const char *document; /* the resolved job document, JSON text */
    int device_kind;      /* enum job_device */
    int max_attempts, max_runtime_seconds, priority;
    const char *idem_key;    /* Idempotency-Key, or NULL */
    const char *body_hash;   /* hex SHA-256 of document; used with idem_key */
    const char *owner;       /* id of the submitting token, or NULL */
    int max_queued;          /* > 0: refuse (-EUSERS) when owner already has this many queued */
    int token_max_queued;    /* > 0: the owner token's own cap (tokens.max_queued): refuse
                                (-EUSERS) when it has this many queued or running */
    const char *credentials; /* the dataset URL's userinfo, sealed (util/secret.h), or NULL */
    int script;              /* 1: a script job (jobs.script): leased to script workers only */
    int replicas;            /* distribution.replicas: leased to workers with as many slots */
    int64_t sweep_seq;       /* > 0: a trial of this running sweep (db_sweep_trial_added, in
                                the same transaction; -ECANCELED once the sweep has ended) */
    int keep;                /* the document's keep: serve --retain-days never removes it */
} sched_new_job;

/* Stores a new queued job and fills *out. With idem_key of an earlier job, *out is that job
 * and *created 0 when body_hash matches, and -EEXIST when it does not; else *created is 1. */
int sched_job_submit(db *d, const sched_new_job *nj, int64_t now, db_job *out, int *created,
                     char *err);
#endif
