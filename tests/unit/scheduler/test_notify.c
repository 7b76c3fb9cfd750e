/* Unit tests of scheduler/notify and scheduler/retention on a real SQLite file: the submit-time
 * URL rules (schemes, allow lists, private and loopback literals, localhost), the enqueue hook
 * inside the transitions' transactions (only the events an entry asks for, a job without
 * "notify" enqueues nothing, a rolled-back transition leaves no delivery), sweeps' enqueue,
 * the attempt bookkeeping of db/deliveries (a row moved on once per attempt, a deleted job's
 * delivery records nothing), the server secret file, and a retention pass (old, unkept,
 * finished jobs only, with their deliveries). Sending over HTTP is tests/e2e/test_notify.py's. */
#include "scheduler/notify.h"

#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "db/deliveries.h"
#include "db/events.h"
#include "db/workers.h"
#include "scheduler/lifecycle.h"
#include "scheduler/retention.h"
#include "tests/unit/check.h"
#include "tests/unit/db/db_query.h"

#define T0 1700000000000LL

static char tmp_dir[] = "/tmp/trainyard-test-notify-XXXXXX";

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    return remove(path);
}

static void check_urls(void)
{
    char err[ERR_LEN];
    allow_list none = {0}, lo = {0}, some = {0};
    CHECK_INT(allow_list_parse("127.0.0.1", &lo, err), 0);
    CHECK_INT(allow_list_parse("*.example.com, 10.0.0.0/8", &some, err), 0);

    CHECK_INT(notify_check_url(&none, "https://hooks.example.com/x", err), 0);
    CHECK_INT(notify_check_url(&none, "http://93.184.216.34:8080/x", err), 0);
    CHECK_INT(notify_check_url(&none, "http://10.0.0.1/x", err), -EINVAL);
    CHECK(strstr(err, "private") != NULL);
    CHECK_INT(notify_check_url(&none, "http://127.0.0.1:9/x", err), -EINVAL);
    CHECK_INT(notify_check_url(&none, "http://[::1]:9/x", err), -EINVAL);
    CHECK_INT(notify_check_url(&none, "http://[::ffff:192.168.1.1]/x", err), -EINVAL);
    CHECK_INT(notify_check_url(&none, "http://localhost:9/x", err), -EINVAL);
    CHECK_INT(notify_check_url(&none, "http://a.localhost/x", err), -EINVAL);
    CHECK_INT(notify_check_url(&none, "ftp://hooks.example.com/x", err), -EINVAL);
    CHECK(strstr(err, "http") != NULL);
    CHECK_INT(notify_check_url(&none, "not a url", err), -EINVAL);

    CHECK_INT(notify_check_url(&lo, "http://127.0.0.1:9/x", err), 0);
    CHECK_INT(notify_check_url(&lo, "https://hooks.example.com/x", err), -EINVAL);
    CHECK(strstr(err, "--dataset-allow") != NULL);
    CHECK_INT(notify_check_url(&some, "https://a.example.com/x", err), 0);
    CHECK_INT(notify_check_url(&some, "http://10.9.8.7/x", err), 0);
    CHECK_INT(notify_check_url(&some, "http://example.com/x", err), -EINVAL);
    allow_list_free(&lo);
    allow_list_free(&some);
}

static void submit(db *d, const char *document, int64_t now, char id[DB_ID_LEN + 1])
{
    char err[ERR_LEN];
    sched_new_job nj = {.name = "n",
                        .document = document,
                        .max_attempts = 1,
                        .max_runtime_seconds = 3600,
                        .owner = NULL};
    db_job j;
    int created = 0;
    CHECK_INT(sched_job_submit(d, &nj, now, &j, &created, err), 0);
    memcpy(id, j.id, DB_ID_LEN + 1);
    db_job_clear(&j);
}

static void add_worker(db *d, char id[DB_ID_LEN + 1])
{
    char err[ERR_LEN];
    db_worker w;
    memset(&w, 0, sizeof w);
    CHECK_INT(db_id_new(w.id, err), 0);
    snprintf(w.name, sizeof w.name, "w");
    w.devices = "[{\"index\":0,\"name\":\"cpu-0\",\"type\":\"cpu\"}]";
    w.kinds = DB_KIND_CPU;
    w.registered_at = w.last_seen_at = T0;
    CHECK_INT(db_worker_insert(d, &w, err), 0);
    memcpy(id, w.id, DB_ID_LEN + 1);
}

static long long count(db *d, const char *sql)
{
    return db_query_int(d, sql);
}

typedef struct due {
    int n;
    int64_t id[8];
    int attempts[8];
} due;

static int take(void *ctx, const db_delivery *dl)
{
    due *u = ctx;
    u->id[u->n] = dl->id;
    u->attempts[u->n++] = dl->attempts;
    return 0;
}

static void check_hook(db *d)
{
    char err[ERR_LEN], job[DB_ID_LEN + 1], plain[DB_ID_LEN + 1], worker[DB_ID_LEN + 1];
    db_job j;
    const char *doc = "{\"name\":\"n\",\"notify\":["
                      "{\"url\":\"http://a.example.com/h\",\"events\":[\"running\",\"succeeded\"]},"
                      "{\"url\":\"http://b.example.com/h\",\"events\":[\"failed\"]},"
                      "{\"url\":\"http://c.example.com/h\"}]}";
    static const char *const base = "http://srv:1";
    db_event_set_hook(notify_job_transition, (void *)&base);
    add_worker(d, worker);
    submit(d, "{\"name\":\"plain\"}", T0, plain);
    submit(d, doc, T0 + 1, job);
    CHECK_INT(count(d, "SELECT count(*) FROM deliveries"), 0); /* the submit is no event */

    /* the plain job first (FIFO): leased and completed, nothing enqueued */
    CHECK_INT(sched_job_lease(d, worker, T0 + 2, 30, &j, err), 1);
    CHECK_STR(j.id, plain);
    db_job_clear(&j);
    CHECK_INT(sched_job_complete(d, plain, worker, DB_SUCCEEDED, NULL, NULL, T0 + 3, &j, err), 0);
    db_job_clear(&j);
    CHECK_INT(count(d, "SELECT count(*) FROM deliveries"), 0);

    CHECK_INT(sched_job_lease(d, worker, T0 + 4, 30, &j, err), 1);
    db_job_clear(&j);
    CHECK_INT(count(d, "SELECT count(*) FROM deliveries WHERE event = 'running'"), 1);
    CHECK_INT(sched_job_complete(d, job, worker, DB_SUCCEEDED, NULL, NULL, T0 + 5, &j, err), 0);
    db_job_clear(&j);
    /* succeeded: a (asked for it) and c (the default events), not b */
    CHECK_INT(count(d, "SELECT count(*) FROM deliveries WHERE event = 'succeeded'"), 2);
    CHECK_INT(count(d, "SELECT count(*) FROM deliveries WHERE url LIKE 'http://b.%'"), 0);
    CHECK_INT(count(d, "SELECT count(*) FROM deliveries WHERE body LIKE "
                       "'{\"event\":\"job.succeeded\"%\"links\":{\"job\":\"http://srv:1/jobs/%'"),
              2);
    CHECK_INT(count(d, "SELECT count(*) FROM deliveries WHERE status = 'pending' AND next_at = "
                       "1700000000005 AND attempts = 0"),
              2);

    /* attempts: each moves the row on once; a stale attempt number changes nothing */
    due u = {0};
    CHECK_INT(db_delivery_due(d, T0 + 5, 8, take, &u, err), 0);
    CHECK_INT(u.n, 3);
    db_delivery_attempt a = {.attempt = 1, .at = T0 + 6, .http_status = 500, .ms = 3};
    CHECK_INT(db_delivery_record(d, u.id[0], &a, DB_DELIVERY_PENDING, T0 + 1006, err), 1);
    CHECK_INT(db_delivery_record(d, u.id[0], &a, DB_DELIVERY_PENDING, T0 + 1006, err), 0);
    a = (db_delivery_attempt){.attempt = 2, .at = T0 + 1006, .http_status = 204, .ms = 2};
    CHECK_INT(db_delivery_record(d, u.id[0], &a, DB_DELIVERY_DELIVERED, 0, err), 1);
    CHECK_INT(count(d, "SELECT count(*) FROM delivery_attempts"), 2);
    CHECK_INT(count(d, "SELECT count(*) FROM deliveries WHERE status = 'delivered' AND "
                       "finished_at = 1700000001006 AND attempts = 2"),
              1);
    memset(&u, 0, sizeof u);
    CHECK_INT(db_delivery_due(d, T0 + 5, 8, take, &u, err), 0);
    CHECK_INT(u.n, 2);

    /* a job deleted meanwhile: its deliveries went with it, an attempt records nothing */
    CHECK_INT(sched_job_delete(d, job, NULL, T0 + 7, err), 0);
    CHECK_INT(count(d, "SELECT count(*) FROM deliveries"), 0);
    a = (db_delivery_attempt){.attempt = 1, .at = T0 + 8, .error = "refused", .ms = 1};
    CHECK_INT(db_delivery_record(d, u.id[0], &a, DB_DELIVERY_PENDING, T0 + 9, err), 0);
    CHECK_INT(count(d, "SELECT count(*) FROM delivery_attempts"), 0);

    /* a cancel while queued is the cancelled event (c only: its default) */
    submit(d, doc, T0 + 10, job);
    CHECK_INT(sched_job_cancel(d, job, NULL, T0 + 11, &j, err), 0);
    db_job_clear(&j);
    CHECK_INT(count(d, "SELECT count(*) FROM deliveries WHERE event = 'cancelled' AND url = "
                       "'http://c.example.com/h'"),
              1);
    CHECK_INT(count(d, "SELECT count(*) FROM deliveries"), 1);
    db_event_set_hook(NULL, NULL);
}

static void check_sweep(db *d)
{
    char err[ERR_LEN];
    CHECK_INT(db_exec(d,
                      "INSERT INTO sweeps (seq, id, name, status, document, created_at) VALUES "
                      "(7, 's7', 's', 'running', '{}', 1)",
                      err),
              0);
    json_t *notify = json_loads("[{\"url\":\"http://a.example.com/s\",\"events\":[\"succeeded\"]},"
                                "{\"url\":\"http://b.example.com/s\",\"events\":[\"failed\"]}]",
                                0, NULL);
    json_t *body = json_pack("{s:s}", "id", "s7");
    CHECK_INT(notify_enqueue_sweep(d, 7, NULL, "succeeded", body, notify, T0, err), 1);
    CHECK_INT(notify_enqueue_sweep(d, 7, NULL, "succeeded", body, NULL, T0, err), 0);
    CHECK_INT(count(d, "SELECT count(*) FROM deliveries WHERE sweep_seq = 7 AND body = "
                       "'{\"event\":\"sweep.succeeded\",\"at\":\"2023-11-14T22:13:20.000Z\","
                       "\"sweep\":{\"id\":\"s7\"}}'"),
              1);
    json_decref(notify);
    json_decref(body);
}

static void check_retention(db *d)
{
    char err[ERR_LEN], ids[4][DB_ID_LEN + 1];
    db_job j;
    for (int i = 0; i < 4; i++) {
        submit(d, "{\"name\":\"r\"}", T0 + 100 + i, ids[i]);
        CHECK_INT(sched_job_cancel(d, ids[i], NULL, T0 + 100 + i, &j, err), 0);
        db_job_clear(&j);
    }
    CHECK_INT(sched_job_set_keep(d, ids[1], 1, err), 0);
    CHECK_INT(sched_job_set_keep(d, "nope", 1, err), -ENOENT);
    int removed = -1;
    /* cutoff between the third and the fourth: the first and third go, the kept one stays,
     * and so do check_hook's two finished jobs (with the cancelled one's delivery) */
    CHECK_INT(sched_retain(d, NULL, T0 + 103, 100, T0 + 200, &removed, err), 0);
    CHECK_INT(removed, 4);
    CHECK_INT(count(d, "SELECT count(*) FROM deliveries WHERE job_seq IS NOT NULL"), 0);
    CHECK_INT(db_job_get(d, ids[0], &j, err), -ENOENT);
    CHECK_INT(db_job_get(d, ids[2], &j, err), -ENOENT);
    CHECK_INT(db_job_get(d, ids[1], &j, err), 0);
    db_job_clear(&j);
    /* a job marked keep after a pass read its id is spared: the delete reads keep again */
    CHECK_INT(sched_job_delete_unkept(d, ids[1], NULL, T0 + 200, err), -EBUSY);
    CHECK_INT(db_job_get(d, ids[1], &j, err), 0);
    db_job_clear(&j);
    CHECK_INT(db_job_get(d, ids[3], &j, err), 0);
    db_job_clear(&j);
    CHECK_INT(count(d, "SELECT count(*) FROM jobs WHERE finished_at < 1700000000103 AND keep = 0"),
              0);
}

int main(void)
{
    char err[ERR_LEN], path[256];
    if (!mkdtemp(tmp_dir))
        return 1;
    check_urls();

    db *d = NULL;
    snprintf(path, sizeof path, "%s/t.db", tmp_dir);
    CHECK_INT(db_open(path, &d, err), 0);
    check_hook(d);
    check_sweep(d);
    check_retention(d);
    db_close(d);

    /* the server secret: made once, read back the same */
    char s1[NOTIFY_SECRET_LEN + 1], s2[NOTIFY_SECRET_LEN + 1];
    CHECK_INT(notify_server_secret(tmp_dir, s1, err), 0);
    CHECK_INT(notify_server_secret(tmp_dir, s2, err), 0);
    CHECK_STR(s1, s2);
    CHECK_INT((int)strlen(s1), NOTIFY_SECRET_LEN);
    CHECK(strncmp(s1, "whsec_", 6) == 0);
    struct stat st;
    snprintf(path, sizeof path, "%s/%s", tmp_dir, NOTIFY_SERVER_SECRET);
    CHECK_INT(stat(path, &st), 0);
    CHECK_INT((int)(st.st_mode & 0777), 0600);

    nftw(tmp_dir, rm_entry, 8, FTW_DEPTH | FTW_PHYS);
    return check_exit();
}
