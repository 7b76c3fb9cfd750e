/* Unit tests of train/checkpoint and the trainer's resume: a job with dropout and Adam trained
 * for N epochs straight must equal, bit for bit, the same job stopped by its on_epoch hook after
 * K epochs and resumed from the checkpoint (weights, optimizer state, step, metrics rows), both
 * for a dense job on CSV and for a small CNN on CIFAR-format images (batchnorm's moving
 * statistics, augmentation and per-channel standardisation in the state); a
 * checkpoint from another job, of another dataset, or a corrupt one is refused; the checkpoint
 * interval is honoured. Runs on the default OpenCL device, or skips. */
#include "train/checkpoint.h"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/unit/check.h"
#include "tests/unit/kernels/cltest.h"
#include "tests/unit/train/train_fixtures.h"
#include "model/safetensors.h"
#include "train/trainer.h"

#define EPOCHS  6
#define STOP_AT 3

static char dir[256];

typedef struct counter {
    int calls, first, stop_at;
} counter;

static int on_epoch(void *user, const trainer_epoch *e)
{
    counter *c = user;
    if (!c->calls++)
        c->first = e->epoch;
    return e->epoch == c->stop_at;
}

static void write_dataset(const char *path)
{
    tf_write_three_class_csv(path, 99, 600);
}

/* CIFAR-10 binary records: 200 images whose colour says their class (0..3). */
static void write_images(const char *path)
{
    tf_write_colour_cifar(path, 200);
}

static job_spec *make_cnn_job(int seed)
{
    char text[1024];
    snprintf(text, sizeof text,
             "{\"dataset_url\": \"file://%s/images.bin\", \"dataset\": {\"format\": \"cifar10\","
             "\"resize\": [8, 8], \"scale\": \"standardize\","
             "\"augment\": {\"flip\": true, \"crop_padding\": 1}},"
             "\"model\": {\"input_shape\": [8, 8, 3], \"layers\": ["
             "{\"type\": \"conv2d\", \"filters\": 4, \"kernel_size\": 3, \"activation\": \"relu\"},"
             "{\"type\": \"batchnorm\"}, {\"type\": \"maxpool2d\"}, {\"type\": \"flatten\"},"
             "{\"type\": \"dropout\", \"rate\": 0.25}]},"
             "\"hyperparameters\": {\"epochs\": %d, \"batch_size\": 32, \"learning_rate\": 0.01,"
             "\"validation_split\": 0.2, \"seed\": %d}}",
             dir, EPOCHS, seed);
    return tf_parse_job(text);
}

static job_spec *make_job(int seed)
{
    char text[1024];
    snprintf(text, sizeof text,
             "{\"dataset_url\": \"file://%s/data.csv\", \"model\": {\"layers\": ["
             "{\"type\": \"dense\", \"units\": 16, \"activation\": \"relu\"},"
             "{\"type\": \"dropout\", \"rate\": 0.25}]},"
             "\"hyperparameters\": {\"epochs\": %d, \"batch_size\": 32, \"optimizer\": \"adam\","
             "\"learning_rate\": 0.01, \"validation_split\": 0.2, \"seed\": %d}}",
             dir, EPOCHS, seed);
    return tf_parse_job(text);
}

static int train(cltest *t, const job_spec *job, const char *out, const char *resume, double every,
                 counter *cnt, trainer_result *res, char *err)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, out);
    trainer_opts o = {
        .out_dir = path, .dataset_root = dir, .resume_from = resume, .checkpoint_seconds = every};
    trainer_hooks h = {.user = cnt, .on_epoch = on_epoch};
    return trainer_run(job, t->c, t->k, &o, &h, res, err);
}

static char *slurp(const char *rel, size_t *len)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, rel);
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char *buf = calloc(1, 1 << 20);
    *len = fread(buf, 1, (1 << 20) - 1, f);
    fclose(f);
    return buf;
}

static void spill(const char *rel, const char *buf, size_t len)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, rel);
    FILE *f = fopen(path, "wb");
    fwrite(buf, 1, len, f);
    fclose(f);
}

/* metrics.csv without its seconds column (the last): the numbers that must repeat exactly. */
static void strip_seconds(char *csv)
{
    char *w = csv;
    for (char *line = csv; *line;) {
        char *nl = strchr(line, '\n'), *comma = NULL;
        size_t n = nl ? (size_t)(nl - line) : strlen(line);
        for (size_t i = 0; i < n; i++)
            if (line[i] == ',')
                comma = line + i;
        size_t keep = comma ? (size_t)(comma - line) : n;
        memmove(w, line, keep);
        w += keep;
        *w++ = '\n';
        line += n + (nl ? 1 : 0);
    }
    *w = '\0';
}

static int count_lines(const char *s)
{
    int n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

static void check_same_tensors(const char *a, const char *b)
{
    char pa[512], pb[512], err[ERR_LEN];
    snprintf(pa, sizeof pa, "%s/%s", dir, a);
    snprintf(pb, sizeof pb, "%s/%s", dir, b);
    safetensors_file *fa = NULL, *fb = NULL;
    CHECK(safetensors_open(pa, &fa, err) == 0);
    CHECK(safetensors_open(pb, &fb, err) == 0);
    if (!fa || !fb)
        return;
    CHECK_INT(safetensors_count(fa), safetensors_count(fb));
    for (size_t i = 0; i < safetensors_count(fa); i++) {
        const safetensors_tensor *ta = safetensors_at(fa, i);
        const safetensors_tensor *tb = safetensors_find(fb, ta->name);
        CHECK(tb != NULL);
        if (!tb)
            continue;
        size_t n = 1;
        for (int d = 0; d < ta->ndim; d++)
            n *= (size_t)ta->shape[d];
        CHECK_INT(tb->shape[0], ta->shape[0]);
        if (memcmp(ta->data, tb->data, n * sizeof(float)) != 0) {
            fprintf(stderr, "tensor %s of %s differs from %s\n", ta->name, a, b);
            check_failures++;
        }
    }
    safetensors_close(fa);
    safetensors_close(fb);
}

/* Two files of the same bytes. */
static void check_same_bytes(const char *a, const char *b)
{
    size_t la = 0, lb = 0;
    char *ba = slurp(a, &la), *bb = slurp(b, &lb);
    CHECK(ba && bb && la > 0 && la == lb && memcmp(ba, bb, la) == 0);
    free(ba);
    free(bb);
}

static void test_resume_is_bit_identical(cltest *t, job_spec *job, const char *full,
                                         const char *part, int with_stats)
{
    char err[ERR_LEN] = "", ck[512], a[256], b[256];
    counter ca = {0}, cb = {.stop_at = STOP_AT}, cc = {0};
    trainer_result ra, rb, rc;

    int r = train(t, job, full, NULL, 0, &ca, &ra, err);
    if (r < 0)
        fprintf(stderr, "%s: %s\n", full, err);
    CHECK(r == 0);
    CHECK_INT(ra.epochs_done, EPOCHS);
    CHECK_INT(ra.checkpoints, EPOCHS); /* interval 0: every epoch */

    CHECK(train(t, job, part, NULL, 0, &cb, &rb, err) == 0);
    CHECK(rb.stopped);
    CHECK_INT(rb.epochs_done, STOP_AT);

    snprintf(ck, sizeof ck, "%s/%s/%s", dir, part, CHECKPOINT_FILE);
    checkpoint *c = NULL;
    CHECK(checkpoint_read(ck, &c, err) == 0);
    if (c) {
        const checkpoint_state *s = checkpoint_state_of(c);
        CHECK_INT(s->epoch, STOP_AT);
        CHECK(s->step > 0 && s->mean && s->std);
        CHECK(with_stats ? s->n_stats >= 8 && s->stats : s->n_stats == 0); /* 2 × 4 channels */
        CHECK_INT(json_array_size(s->metrics), STOP_AT);
        checkpoint_free(c);
    }

    /* Resumed into the same folder, as a worker would after fetching the checkpoint. */
    r = train(t, job, part, ck, 0, &cc, &rc, err);
    if (r < 0)
        fprintf(stderr, "resume: %s\n", err);
    CHECK(r == 0);
    CHECK_INT(rc.resumed_after, STOP_AT);
    CHECK_INT(rc.epochs_done, EPOCHS);
    CHECK_INT(cc.calls, EPOCHS - STOP_AT); /* on_epoch only for the epochs trained now */
    CHECK_INT(cc.first, STOP_AT + 1);
    CHECK(rc.last.loss == ra.last.loss && rc.last.val_loss == ra.last.val_loss);

    snprintf(a, sizeof a, "%s/model.safetensors", full);
    snprintf(b, sizeof b, "%s/model.safetensors", part);
    check_same_bytes(a, b);
    snprintf(a, sizeof a, "%s/%s", full, CHECKPOINT_FILE);
    snprintf(b, sizeof b, "%s/%s", part, CHECKPOINT_FILE);
    check_same_tensors(a, b);

    size_t la = 0, lb = 0;
    snprintf(a, sizeof a, "%s/metrics.csv", full);
    snprintf(b, sizeof b, "%s/metrics.csv", part);
    char *ma = slurp(a, &la), *mb = slurp(b, &lb);
    CHECK(ma && mb);
    if (ma && mb) {
        CHECK_INT(count_lines(mb), EPOCHS + 1);
        strip_seconds(ma);
        strip_seconds(mb);
        CHECK_STR(mb, ma);
    }
    free(ma);
    free(mb);
    size_t ll = 0;
    snprintf(b, sizeof b, "%s/train.log", part);
    char *log = slurp(b, &ll);
    CHECK(log && strstr(log, "resuming after epoch 3 of 6"));
    free(log);
    job_free(job);
}

static void test_refuses_foreign_and_corrupt(cltest *t)
{
    char err[ERR_LEN] = "", ck[512];
    counter cnt = {0};
    trainer_result res;
    snprintf(ck, sizeof ck, "%s/part/%s", dir, CHECKPOINT_FILE);

    job_spec *other = make_job(8); /* another seed: another job */
    CHECK(train(t, other, "other", ck, 0, &cnt, &res, err) == -EINVAL);
    CHECK(strstr(err, "another job") && strstr(err, "hyperparameters.seed"));
    job_free(other);

    job_spec *job = make_job(7);
    CHECK(train(t, job, "nope", "/nonexistent/ck.safetensors", 0, &cnt, &res, err) == -ENOENT);

    size_t len = 0;
    char *bytes = slurp("part/" CHECKPOINT_FILE, &len);
    CHECK(bytes && len > 64);
    char bad[512];
    snprintf(bad, sizeof bad, "%s/bad.safetensors", dir);
    spill("bad.safetensors", bytes, len / 2); /* truncated */
    CHECK(train(t, job, "bad1", bad, 0, &cnt, &res, err) == -EINVAL);
    CHECK(strstr(err, "unusable") || strstr(err, "cannot read"));

    spill("bad.safetensors", bytes, 16); /* garbage header */
    CHECK(train(t, job, "bad2", bad, 0, &cnt, &res, err) == -EINVAL);

    /* A model file is a safetensors file but not a checkpoint. */
    snprintf(bad, sizeof bad, "%s/full/model.safetensors", dir);
    CHECK(train(t, job, "bad3", bad, 0, &cnt, &res, err) == -EINVAL);
    CHECK(strstr(err, "not a trainyard checkpoint") != NULL);

    /* The data changed under the job: the checkpoint is refused after the fetch. */
    char data[512], saved[512];
    snprintf(data, sizeof data, "%s/data.csv", dir);
    snprintf(saved, sizeof saved, "%s/data.saved", dir);
    CHECK(rename(data, saved) == 0);
    FILE *f = fopen(data, "w");
    fprintf(f, "a,b,c,label\n1,2,3,c0\n2,3,4,c1\n3,4,5,c2\n4,5,6,c0\n5,6,7,c1\n");
    fclose(f);
    CHECK(train(t, job, "bad4", ck, 0, &cnt, &res, err) == -EINVAL);
    CHECK(strstr(err, "another dataset") != NULL);
    CHECK(rename(saved, data) == 0);
    free(bytes);
    job_free(job);
}

/* Early stopping with restore_best survives a resume: a run interrupted after the best epoch and
 * before the stop, resumed from its checkpoint, stops after the same epoch with the same reason
 * and saves the same (best) model as the run that was never interrupted. */
static void test_early_stopping_resumes(cltest *t)
{
    char text[1024], err[ERR_LEN] = "", ck[512];
    snprintf(text, sizeof text,
             "{\"dataset_url\": \"file://%s/data.csv\", \"model\": {\"layers\": ["
             "{\"type\": \"dense\", \"units\": 16, \"activation\": \"relu\"}]},"
             "\"hyperparameters\": {\"epochs\": 200, \"batch_size\": 32, \"optimizer\": "
             "\"adam\", \"learning_rate\": 0.05, \"validation_split\": 0.2, \"seed\": 3},"
             "\"early_stopping\": {\"monitor\": \"val_loss\", \"patience\": 3, "
             "\"min_delta\": 0.001, \"restore_best\": true}}",
             dir);
    job_spec *job = tf_parse_job(text);
    counter ca = {0}, cb = {0}, cc = {0};
    trainer_result ra, rb, rc;
    int r = train(t, job, "es-full", NULL, 0, &ca, &ra, err);
    if (r < 0)
        fprintf(stderr, "es-full: %s\n", err);
    CHECK(r == 0 && !ra.stopped);
    printf("early stopping: stopped after %d, best %d: %s\n", ra.stopped_epoch, ra.best_epoch,
           ra.stop_reason);
    CHECK(ra.stopped_epoch > 1 && ra.stopped_epoch < 200);
    CHECK_INT(ra.epochs_done, ra.stopped_epoch);
    CHECK_INT(ra.best_epoch, ra.stopped_epoch - 3);
    CHECK(strstr(ra.stop_reason, "early stopping: val_loss did not improve by more than 0.001 "
                                 "for 3 epochs (best ") != NULL);

    cb.stop_at = ra.stopped_epoch - 1; /* after the best epoch, before the stop */
    CHECK(train(t, job, "es-part", NULL, 0, &cb, &rb, err) == 0);
    CHECK(rb.stopped && rb.epochs_done == ra.stopped_epoch - 1);
    snprintf(ck, sizeof ck, "%s/es-part/%s", dir, CHECKPOINT_FILE);
    checkpoint *c = NULL;
    CHECK(checkpoint_read(ck, &c, err) == 0);
    if (c) {
        const checkpoint_state *s = checkpoint_state_of(c);
        CHECK(s->early_stopping && s->best_params);
        CHECK_INT(json_integer_value(json_object_get(s->early_stopping, "best_epoch")),
                  ra.best_epoch);
        CHECK_INT(json_integer_value(json_object_get(s->early_stopping, "wait")), 2);
        checkpoint_free(c);
    }
    r = train(t, job, "es-part", ck, 0, &cc, &rc, err);
    if (r < 0)
        fprintf(stderr, "es resume: %s\n", err);
    CHECK(r == 0);
    CHECK_INT(cc.calls, 1); /* the one epoch left */
    CHECK_INT(rc.stopped_epoch, ra.stopped_epoch);
    CHECK_INT(rc.best_epoch, ra.best_epoch);
    CHECK_STR(rc.stop_reason, ra.stop_reason);
    check_same_bytes("es-full/model.safetensors", "es-part/model.safetensors");
    job_free(job);
}

static void test_interval(cltest *t)
{
    char err[ERR_LEN] = "";
    job_spec *job = make_job(7);
    counter cnt = {0};
    trainer_result res;
    CHECK(train(t, job, "rare", NULL, 1e9, &cnt, &res, err) == 0);
    CHECK_INT(res.checkpoints, 1); /* the last epoch only */
    printf("checkpoint: %.3f ms each\n", 1000 * res.checkpoint_s / res.checkpoints);
    CHECK(train(t, job, "never", NULL, -1, &cnt, &res, err) == 0);
    CHECK_INT(res.checkpoints, 0);
    char path[512];
    snprintf(path, sizeof path, "%s/never/%s", dir, CHECKPOINT_FILE);
    CHECK(access(path, F_OK) != 0);
    job_free(job);
}

int main(void)
{
    cltest t;
    cltest_open(&t);
    snprintf(dir, sizeof dir, "/tmp/trainyard-ckpt-XXXXXX");
    if (!mkdtemp(dir))
        cltest_die("mkdtemp", strerror(errno));
    char data[512];
    snprintf(data, sizeof data, "%s/data.csv", dir);
    write_dataset(data);
    snprintf(data, sizeof data, "%s/images.bin", dir);
    write_images(data);
    test_resume_is_bit_identical(&t, make_job(7), "full", "part", 0);
    test_resume_is_bit_identical(&t, make_cnn_job(7), "cnn-full", "cnn-part", 1);
    test_refuses_foreign_and_corrupt(&t);
    test_early_stopping_resumes(&t);
    test_interval(&t);
    cltest_close(&t);
    return check_exit_removing(dir);
}
