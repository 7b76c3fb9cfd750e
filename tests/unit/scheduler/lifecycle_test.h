/* lifecycle_test: what the scheduler/ lifecycle tests share (test_lifecycle_states.c,
 * test_lifecycle_leases.c, test_lifecycle_ending.c): a temporary folder, a fresh database per
 * test, workers, submits, leases, a job's event history and lease expiry, each call checked.
 * Header-only: each test executable includes it once.
 *
 * The clock is the test's: every call gets `now` explicitly (T0 and on). */
#ifndef TRAINYARD_TESTS_UNIT_SCHEDULER_LIFECYCLE_TEST_H
#define TRAINYARD_TESTS_UNIT_SCHEDULER_LIFECYCLE_TEST_H

#include "scheduler/lifecycle.h"

#include <errno.h>
#include <ftw.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api/app.h"
#include "db/artifacts.h"
#include "db/events.h"
#include "db/models.h"
#include "db/workers.h"
#include "scheduler/expiry.h"
#include "tests/unit/check.h"
#include "tests/unit/db/db_query.h"
#include "job/job.h"
#include "util/datadir.h"

#define T0    1700000000000LL /* the test's epoch, ms */
#define LEASE 30              /* lease seconds */

static char tmp_dir[] = "/tmp/trainyard-test-sched-XXXXXX";

/* ---- helpers ------------------------------------------------------------------------------ */

static inline int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    return remove(path);
}

static inline db *fresh_db(const char *name)
{
    char path[256], err[ERR_LEN];
    snprintf(path, sizeof path, "%s/%s.db", tmp_dir, name);
    db *d = NULL;
    if (db_open(path, &d, err) < 0) {
        fprintf(stderr, "db_open: %s\n", err);
        exit(1);
    }
    return d;
}

/* Registers a worker with devices of the given types ("gpu", "cpu", ...), returns its id. */
static inline void add_worker(db *d, const char *types, char id[DB_ID_LEN + 1])
{
    char err[ERR_LEN], devices[512] = "[";
    db_worker w;
    memset(&w, 0, sizeof w);
    CHECK_INT(db_id_new(w.id, err), 0);
    snprintf(w.name, sizeof w.name, "worker-%s", types);
    char copy[64];
    snprintf(copy, sizeof copy, "%s", types);
    int i = 0;
    for (char *t = strtok(copy, ","); t; t = strtok(NULL, ","), i++) {
        char one[128];
        snprintf(one, sizeof one, "%s{\"index\":%d,\"name\":\"%s-%d\",\"type\":\"%s\"}",
                 i ? "," : "", i, t, i, t);
        strcat(devices, one);
        w.kinds |= !strcmp(t, "gpu")   ? DB_KIND_GPU
                   : !strcmp(t, "cpu") ? DB_KIND_CPU
                                       : DB_KIND_OTHER;
    }
    strcat(devices, "]");
    w.devices = devices;
    w.registered_at = w.last_seen_at = T0;
    CHECK_INT(db_worker_insert(d, &w, err), 0);
    memcpy(id, w.id, sizeof w.id);
}

/* Submits a job with document text; returns its id in id. */
static inline void submit_doc(db *d, const char *name, const char *document, int priority, int kind,
                              int max_attempts, int max_runtime, int64_t now,
                              char id[DB_ID_LEN + 1])
{
    char err[ERR_LEN];
    sched_new_job nj = {.name = name,
                        .document = document,
                        .device_kind = kind,
                        .max_attempts = max_attempts,
                        .max_runtime_seconds = max_runtime,
                        .priority = priority};
    db_job j;
    int created = -1;
    CHECK_INT(sched_job_submit(d, &nj, now, &j, &created, err), 0);
    CHECK_INT(created, 1);
    memcpy(id, j.id, sizeof j.id);
    db_job_clear(&j);
}

/* Submits a job; returns its id in id. */
static inline void submit(db *d, const char *name, int priority, int kind, int max_attempts,
                          int max_runtime, int64_t now, char id[DB_ID_LEN + 1])
{
    submit_doc(d, name, "{\"name\":\"doc\"}", priority, kind, max_attempts, max_runtime, now, id);
}

/* Leases for worker and returns 1 with the job's id in id, or 0 when nothing fits. */
static inline int lease(db *d, const char *worker, int64_t now, char id[DB_ID_LEN + 1])
{
    char err[ERR_LEN];
    db_job j;
    int rc = sched_job_lease(d, worker, now, LEASE, &j, err);
    CHECK(rc == 0 || rc == 1);
    if (rc == 1) {
        memcpy(id, j.id, sizeof j.id);
        db_job_clear(&j);
    }
    return rc;
}

static inline db_job get(db *d, const char *id)
{
    char err[ERR_LEN];
    db_job j;
    memset(&j, 0, sizeof j);
    CHECK_INT(db_job_get(d, id, &j, err), 0);
    return j;
}

static inline int job_status(db *d, const char *id)
{
    db_job j = get(d, id);
    int s = j.status;
    db_job_clear(&j);
    return s;
}

typedef struct history {
    int n;
    char text[1024];
} history;

static inline int history_add(void *ctx, const db_event *e)
{
    history *h = ctx;
    char one[128];
    snprintf(one, sizeof one, "%s%s>%s", h->n ? " " : "",
             e->from < 0 ? "-" : db_status_name(e->from), db_status_name(e->to));
    strncat(h->text, one, sizeof h->text - strlen(h->text) - 1);
    h->n++;
    return 0;
}

/* The job's events as "from>to ..." ("-" for none). */
static inline const char *events_of(db *d, const char *id)
{
    static history h;
    char err[ERR_LEN];
    memset(&h, 0, sizeof h);
    db_job j = get(d, id);
    CHECK_INT(db_event_list(d, j.seq, history_add, &h, err), 0);
    db_job_clear(&j);
    return h.text;
}

static inline int sweep(db *d, int64_t now)
{
    char err[ERR_LEN];
    sched_expiry_stats st;
    CHECK_INT(sched_expire_db(d, NULL, now, 60, &st, err), 0);
    return st.requeued + st.failed + st.cancelled;
}

/* Makes tmp_dir (every database and artifact folder of the test lives in it). */
static inline void lifecycle_test_begin(void)
{
    if (!mkdtemp(tmp_dir)) {
        perror("mkdtemp");
        exit(1);
    }
}

/* Removes tmp_dir and what the test left in it. */
static inline void lifecycle_test_end(void)
{
    nftw(tmp_dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

#endif
