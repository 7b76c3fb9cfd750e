/* Unit tests of scheduler/event_file: the event file of a job that ended, through the real
 * transitions. A job whose lease lapsed past its last attempt (failed) gets its artifact, named
 * after its submit time and listed with the right size and SHA-256; its records are the
 * file_version, one per metrics epoch and one per histogram of an epoch with metrics (the
 * histogram of an epoch without a metrics row is skipped); a job without metrics gets none; a
 * job whose artifact cannot be written still completes; delete removes the file with the job.
 * The records' content is read by TensorBoard's own reader in tests/e2e/test_tensorboard.py. */
#include "scheduler/event_file.h"

#include <errno.h>
#include <ftw.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "db/artifacts.h"
#include "db/workers.h"
#include "job/job.h"
#include "scheduler/lifecycle.h"
#include "tests/unit/check.h"
#include "util/crc32c.h"
#include "util/datadir.h"
#include "util/sha256.h"

#define T0 1700000000123LL

static char tmp_dir[] = "/tmp/trainyard-test-tfevents-XXXXXX";
static char arts[512];

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    return remove(path);
}

/* A running job of one attempt leased to a new worker: its id and the worker's. */
static void running_job(db *d, char id[DB_ID_LEN + 1], char worker[DB_ID_LEN + 1])
{
    char err[ERR_LEN];
    db_worker w;
    memset(&w, 0, sizeof w);
    CHECK_INT(db_id_new(w.id, err), 0);
    snprintf(w.name, sizeof w.name, "w");
    w.devices = "[{\"index\":0,\"name\":\"cpu\",\"type\":\"cpu\"}]";
    w.kinds = DB_KIND_CPU;
    w.registered_at = w.last_seen_at = T0;
    CHECK_INT(db_worker_insert(d, &w, err), 0);
    memcpy(worker, w.id, sizeof w.id);
    sched_new_job nj = {.name = "tb",
                        .document = "{\"name\":\"tb\"}",
                        .device_kind = JOB_DEVICE_ANY,
                        .max_attempts = 1,
                        .max_runtime_seconds = 3600};
    db_job j;
    int created = 0;
    CHECK_INT(sched_job_submit(d, &nj, T0, &j, &created, err), 0);
    memcpy(id, j.id, sizeof j.id);
    db_job_clear(&j);
    CHECK_INT(sched_job_lease(d, worker, T0 + 1000, 30, &j, err), 1);
    db_job_clear(&j);
}

/* How many TFRecord records the file at path holds, each CRC checked; -1 when malformed. */
static int records(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return -1;
    static unsigned char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf, f), off = 0;
    fclose(f);
    int count = 0;
    while (off < n) {
        uint64_t len = 0;
        uint32_t c1 = 0, c2 = 0;
        if (n - off < 12)
            return -1;
        memcpy(&len, buf + off, 8); /* little-endian hosts only, like the writer's readers */
        memcpy(&c1, buf + off + 8, 4);
        if (c1 != crc32c_masked(buf + off, 8) || n - off - 12 < len + 4)
            return -1;
        memcpy(&c2, buf + off + 12 + len, 4);
        if (c2 != crc32c_masked(buf + off + 12, len))
            return -1;
        off += 12 + len + 4;
        count++;
    }
    return count;
}

static void test_failed_job_gets_its_file(db *d)
{
    char err[ERR_LEN], id[DB_ID_LEN + 1], w[DB_ID_LEN + 1], name[DB_ARTIFACT_NAME_MAX + 1];
    running_job(d, id, w);
    db_metric m[2];
    memset(m, 0, sizeof m);
    for (int i = 0; i < 2; i++) {
        m[i].epoch = i + 1;
        m[i].loss = 1.0 / (i + 1);
        m[i].val_loss = m[i].accuracy = m[i].val_accuracy = NAN;
        m[i].seconds = 0.5;
        m[i].samples_per_second = NAN;
    }
    m[1].extra = "{\"grad_norm\":2.5,\"skipped\":null}";
    const char *data = "{\"min\":-1,\"max\":1,\"num\":3,\"sum\":0,\"sum_squares\":2,"
                       "\"limits\":[0,1],\"counts\":[1,2]}";
    db_histogram h[3] = {{1, "0.weight", data}, {2, "0.weight", data}, {3, "0.weight", data}};
    sched_progress p = {
        .phase = DB_PHASE_NONE, .epochs = m, .n_epochs = 2, .histograms = h, .n_histograms = 3};
    sched_beat beat;
    CHECK_INT(sched_job_heartbeat(d, id, w, &p, T0 + 2000, 30, &beat, err), 0);
    db_job j;
    CHECK_INT(db_job_get(d, id, &j, err), 0);
    int to = -1;
    CHECK_INT(sched_job_expire(d, j.seq, arts, T0 + 60000, &to, err), 0);
    CHECK_INT(to, DB_FAILED);
    sched_tfevents_name(&j, name);
    CHECK_STR(name, "events.out.tfevents.1700000000.trainyard");
    db_artifact a;
    CHECK_INT(db_artifact_get(d, j.seq, name, &a, err), 0);
    char path[DATADIR_PATH_MAX], hex[65];
    uint64_t size = 0;
    CHECK_INT(datadir_job_file(arts, id, name, path), 0);
    CHECK_INT(sha256_file(path, hex, &size, err), 0);
    CHECK_STR(a.sha256, hex);
    CHECK_INT(a.size, (int64_t)size);
    CHECK_INT(a.created_at, T0 + 60000);
    /* file_version, epochs 1 and 2, the histograms of epochs 1 and 2 (3 has no metrics) */
    CHECK_INT(records(path), 5);
    CHECK_INT(datadir_job_file(arts, id, ".tfevents.part", path), 0);
    CHECK(access(path, F_OK) != 0);

    /* Delete takes the file with the job. */
    CHECK_INT(sched_job_delete(d, id, arts, T0 + 70000, err), 0);
    CHECK_INT(datadir_job_dir(arts, id, path), 0);
    CHECK(access(path, F_OK) != 0);
    db_job_clear(&j);
}

static void test_no_metrics_no_file(db *d)
{
    char err[ERR_LEN], id[DB_ID_LEN + 1], w[DB_ID_LEN + 1];
    running_job(d, id, w);
    db_job j;
    CHECK_INT(sched_job_complete(d, id, w, DB_SUCCEEDED, NULL, arts, T0 + 5000, &j, err), 0);
    int64_t n = -1;
    CHECK_INT(db_artifact_count(d, j.seq, &n, err), 0);
    CHECK_INT(n, 0);
    db_job_clear(&j);
}

static void test_unwritable_does_not_fail_the_job(db *d)
{
    char err[ERR_LEN], id[DB_ID_LEN + 1], w[DB_ID_LEN + 1], bad[600];
    running_job(d, id, w);
    db_metric m;
    memset(&m, 0, sizeof m);
    m.epoch = 1;
    m.loss = 0.5;
    m.val_loss = m.accuracy = m.val_accuracy = m.seconds = m.samples_per_second = NAN;
    sched_progress p = {.phase = DB_PHASE_NONE, .epochs = &m, .n_epochs = 1};
    sched_beat beat;
    CHECK_INT(sched_job_heartbeat(d, id, w, &p, T0 + 2000, 30, &beat, err), 0);
    /* a regular file where the artifacts folder should be: nothing can be created under it */
    snprintf(bad, sizeof bad, "%s/not-a-folder", tmp_dir);
    FILE *f = fopen(bad, "w");
    CHECK(f != NULL);
    if (f)
        fclose(f);
    db_job j;
    CHECK_INT(sched_job_complete(d, id, w, DB_SUCCEEDED, NULL, bad, T0 + 5000, &j, err), 0);
    CHECK_INT(j.status, DB_SUCCEEDED);
    int64_t n = -1;
    CHECK_INT(db_artifact_count(d, j.seq, &n, err), 0);
    CHECK_INT(n, 0);
    char placed[DATADIR_PATH_MAX];
    CHECK(sched_tfevents_write(d, bad, &j, T0 + 6000, placed, err) < 0);
    CHECK(placed[0] == '\0');
    db_job_clear(&j);
}

int main(void)
{
    if (!mkdtemp(tmp_dir)) {
        perror("mkdtemp");
        return 1;
    }
    snprintf(arts, sizeof arts, "%s/artifacts", tmp_dir);
    CHECK_INT(mkdir(arts, 0755), 0);
    char path[600], err[ERR_LEN];
    snprintf(path, sizeof path, "%s/t.db", tmp_dir);
    db *d = NULL;
    if (db_open(path, &d, err) < 0) {
        fprintf(stderr, "db_open: %s\n", err);
        return 1;
    }
    test_failed_job_gets_its_file(d);
    test_no_metrics_no_file(d);
    test_unwritable_does_not_fail_the_job(d);
    db_close(d);
    nftw(tmp_dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    return check_exit();
}
