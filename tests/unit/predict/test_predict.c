/* Unit tests of predict/: small models trained here with trainer_run (a CSV classifier, a binary
 * one, a regression, and a CNN with conv2d, batchnorm, maxpool, flatten, batchnorm (1-D, on
 * the flattened features) and dense on CIFAR-format
 * images resized 32×32 → 8×8), then served by the engine from their model.safetensors: the
 * answers on the raw validation rows (predict_prepare standardises and resizes) equal the
 * trainer's --val-outputs within 1e-5; a row's answer is the same bits alone and in batches of
 * other rows at other positions; a file without trainyard.job is -ENOTSUP, a missing one
 * -ENOENT; a model over the cap is -E2BIG; a cap that fits one model serves two in turns
 * (evictions, the same bits after reloads); an idle engine gathers rows that come within its
 * window into one forward; models take turns; requests queued at free are -ECANCELED;
 * predict_prepare refuses shapes that do not fit.
 * Also prints the forward time of a 784-128-10 MLP at 32 rows. Runs on the default OpenCL
 * device, or skips. */
#include "predict/predict.h"

#include <semaphore.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "tests/unit/check.h"
#include "tests/unit/kernels/cltest.h"
#include "tests/unit/train/train_fixtures.h"
#include "util/timeutil.h"
#include "data/dataset.h"
#include "train/imagedata.h"
#include "model/safetensors.h"
#include "train/trainer.h"

static char dir[256];

static uint64_t lcg(uint64_t *s)
{
    *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
    return *s >> 40;
}

/* 300 rows of a, b, c and a label as the task wants it (enum predict_task): classes c0..c2,
 * no/yes, or a value. */
static void write_csv(const char *name, int task)
{
    int regression = task == PREDICT_REGRESS;
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    uint64_t s = regression ? 5 : 99;
    fprintf(f, "a,b,c,label\n");
    for (int i = 0; i < 300; i++) {
        double v[3];
        for (int j = 0; j < 3; j++)
            v[j] = (double)(lcg(&s) & 0xffff) / 65536.0 * 40 + 10 * j;
        if (regression)
            fprintf(f, "%.4f,%.4f,%.4f,%.4f\n", v[0], v[1], v[2], v[0] * 0.5 - v[2] + 3);
        else if (task == PREDICT_BINARY)
            fprintf(f, "%.4f,%.4f,%.4f,%s\n", v[0], v[1], v[2], v[0] + v[1] > 35 ? "yes" : "no");
        else
            fprintf(f, "%.4f,%.4f,%.4f,c%d\n", v[0], v[1], v[2], v[0] > 20 ? 0 : v[1] > 30 ? 1 : 2);
    }
    fclose(f);
}

/* 784 features, 64 rows, 10 classes: for the timing of a 784-128-10 MLP. */
static void write_wide_csv(void)
{
    char path[512];
    snprintf(path, sizeof path, "%s/wide.csv", dir);
    FILE *f = fopen(path, "w");
    uint64_t s = 3;
    for (int i = 0; i < 64; i++) {
        for (int j = 0; j < 784; j++)
            fprintf(f, "%d,", (int)(lcg(&s) % 256));
        fprintf(f, "%d\n", i % 10);
    }
    fclose(f);
}

/* The CIFAR-10 records of the image model's data set. */
static void write_images(void)
{
    char path[512];
    snprintf(path, sizeof path, "%s/images.bin", dir);
    tf_write_colour_cifar(path, 160);
}

static job_spec *csv_job(const char *file, const char *extra)
{
    char text[1024];
    snprintf(text, sizeof text,
             "{\"dataset_url\": \"file://%s/%s\", %s \"model\": {\"layers\": ["
             "{\"type\": \"dense\", \"units\": 16, \"activation\": \"relu\"}]},"
             "\"hyperparameters\": {\"epochs\": 4, \"batch_size\": 32, \"learning_rate\": 0.01,"
             "\"validation_split\": 0.25, \"seed\": 3}}",
             dir, file, extra);
    return tf_parse_job(text);
}

static job_spec *cnn_job(void)
{
    char text[1024];
    snprintf(text, sizeof text,
             "{\"dataset_url\": \"file://%s/images.bin\", \"dataset\": {\"format\": \"cifar10\","
             "\"resize\": [8, 8], \"scale\": \"standardize\"},"
             "\"model\": {\"input_shape\": [8, 8, 3], \"layers\": ["
             "{\"type\": \"conv2d\", \"filters\": 4, \"kernel_size\": 3, \"activation\": \"relu\"},"
             "{\"type\": \"batchnorm\"}, {\"type\": \"maxpool2d\"}, {\"type\": \"flatten\"},"
             "{\"type\": \"batchnorm\"},"
             "{\"type\": \"dense\", \"units\": 8, \"activation\": \"relu\"}]},"
             "\"hyperparameters\": {\"epochs\": 3, \"batch_size\": 32, \"learning_rate\": 0.01,"
             "\"validation_split\": 0.25, \"seed\": 5}}",
             dir);
    return tf_parse_job(text);
}

/* Trains job into dir/out with --val-outputs dir/out/val.npy. */
static void train(cltest *t, const job_spec *job, const char *out)
{
    char path[512], npy[600], err[ERR_LEN] = "";
    snprintf(path, sizeof path, "%s/%s", dir, out);
    snprintf(npy, sizeof npy, "%s/val.npy", path);
    trainer_opts o = {
        .out_dir = path, .dataset_root = dir, .checkpoint_seconds = -1, .val_outputs = npy};
    trainer_result res;
    if (trainer_run(job, t->c, t->k, &o, NULL, &res, err) < 0)
        cltest_die("trainer_run", err);
}

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        cltest_die("cannot read", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    *len = fread(buf, 1, (size_t)n, f);
    buf[*len] = '\0';
    fclose(f);
    return buf;
}

/* The floats of a .npy written by the trainer (*n of them). */
static float *read_npy(const char *out, size_t *n)
{
    char path[512];
    size_t len;
    snprintf(path, sizeof path, "%s/%s/val.npy", dir, out);
    char *buf = slurp(path, &len);
    size_t head = 10 + (size_t)(unsigned char)buf[8] + 256 * (size_t)(unsigned char)buf[9];
    *n = (len - head) / 4;
    float *v = malloc(*n * sizeof *v + 4);
    memcpy(v, buf + head, *n * sizeof *v);
    free(buf);
    return v;
}

static void wait_done(predict_req *q)
{
    double t0 = time_mono();
    while (!predict_req_done(q)) {
        if (time_mono() - t0 > 60)
            cltest_die("wait_done", "a request did not finish in 60 s");
        struct timespec ts = {0, 50000};
        nanosleep(&ts, NULL);
    }
}

static void post(void *arg)
{
    sem_post(arg);
}

/* Runs n prepared rows through the engine; the answers are copied into a new array. */
static float *predict_rows(predict_engine *e, predict_model *m, const float *rows, size_t n)
{
    char err[ERR_LEN] = "";
    predict_req *q;
    sem_t done;
    sem_init(&done, 0, 0);
    if (predict_submit(e, m, rows, n, post, &done, &q, err) < 0)
        cltest_die("predict_submit", err);
    while (sem_wait(&done) != 0)
        ; /* EINTR */
    sem_destroy(&done);
    CHECK(predict_req_done(q));
    const float *out;
    if (predict_req_result(q, &out, err) < 0)
        cltest_die("predict_req_result", err);
    size_t k = (size_t)predict_model_info(m)->outputs;
    float *v = malloc(n * k * sizeof *v);
    memcpy(v, out, n * k * sizeof *v);
    predict_req_release(q);
    return v;
}

static predict_engine *engine(uint64_t cap, int max_batch)
{
    char err[ERR_LEN] = "";
    predict_engine *e;
    predict_opts o = {.memory_cap = cap, .max_batch = max_batch, .window_us = 200};
    if (predict_engine_new(&o, &e, err) < 0)
        cltest_die("predict_engine_new", err);
    return e;
}

static predict_model *model_get(predict_engine *e, const char *out)
{
    char path[512], err[ERR_LEN] = "";
    predict_model *m;
    snprintf(path, sizeof path, "%s/%s/model.safetensors", dir, out);
    if (predict_model_get(e, out, path, &m, err) < 0)
        cltest_die("predict_model_get", err);
    return m;
}

/* The raw (unstandardised) validation rows of a CSV job, as the trainer split them. */
static dataset *csv_val(const job_spec *job, const char *file, int classification)
{
    char path[512], err[ERR_LEN] = "";
    size_t len;
    snprintf(path, sizeof path, "%s/%s", dir, file);
    char *text = slurp(path, &len);
    dataset_csv_opts co = {.header = job->header,
                           .label_name = job->label_name,
                           .label_index = job->label_index,
                           .classification = classification};
    dataset *all = NULL, *tr = NULL, *va = NULL;
    if (dataset_from_csv(text, len, &co, &all, err) < 0 ||
        dataset_split(all, job->validation_split, job->shuffle, job->seed, &tr, &va, err) < 0)
        cltest_die("csv_val", err);
    free(text);
    dataset_free(all);
    dataset_free(tr);
    return va;
}

static void check_close(const float *got, const float *want, size_t n, const char *what)
{
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - (double)want[i]);
        worst = d > worst || isnan(d) ? d : worst;
    }
    printf("%s: %zu values, largest difference from --val-outputs %.3g\n", what, n, worst);
    CHECK(worst <= 1e-5);
}

/* A CSV model's answers on its validation rows equal the trainer's; then bit-identity. */
static void test_csv(predict_engine *e, const job_spec *job, const char *file, const char *out,
                     int task)
{
    int classification = task != PREDICT_REGRESS;
    predict_model *m = model_get(e, out);
    const predict_info *in = predict_model_info(m);
    CHECK_INT(in->image, 0);
    CHECK_INT(in->inputs, 3);
    CHECK_INT(in->n_features, 3);
    CHECK_STR(in->features[2], "c");
    CHECK_STR(in->label, "label");
    CHECK(in->mean && in->std);
    CHECK_INT(in->task, task);
    CHECK_INT(in->outputs, task == PREDICT_CLASSIFY ? 3 : 1);
    CHECK_INT(in->n_classes, task == PREDICT_CLASSIFY ? 3 : task == PREDICT_BINARY ? 2 : 0);
    if (task == PREDICT_CLASSIFY)
        CHECK_STR(in->classes[1], "c1");
    if (task == PREDICT_BINARY)
        CHECK_STR(in->classes[1], "yes");
    dataset *va = csv_val(job, file, classification);
    size_t n = va->rows, k = (size_t)in->outputs, nw;
    float *want = read_npy(out, &nw);
    CHECK_INT(nw, n * k);
    float *rows = malloc(n * 3 * sizeof *rows);
    char err[ERR_LEN] = "";
    int64_t dims[1] = {3};
    CHECK_INT(predict_prepare(in, va->x, n, dims, 1, rows, err), 0);
    float *got = predict_rows(e, m, rows, n); /* n > max_batch: several forwards */
    check_close(got, want, n * k, out);

    /* Row 0 alone, then at positions 5 and 29 among other rows: the same bits. */
    float *alone = predict_rows(e, m, rows, 1);
    CHECK(memcmp(alone, got, k * sizeof *got) == 0);
    float batch[30 * 3];
    for (size_t pos = 5; pos < 30; pos += 24) {
        for (size_t i = 0; i < 30; i++)
            memcpy(batch + i * 3, rows + ((i == pos ? 0 : i + 7) % n) * 3, 3 * sizeof *batch);
        float *b = predict_rows(e, m, batch, pos + 1);
        CHECK(memcmp(b + pos * k, alone, k * sizeof *b) == 0);
        free(b);
    }
    free(alone);
    free(got);
    free(rows);
    free(want);
    dataset_free(va);
    predict_model_put(m);
}

/* The CNN: raw uint8 validation images → predict_prepare (resize, scale, standardise). */
static void test_images(predict_engine *e, const job_spec *job)
{
    predict_model *m = model_get(e, "cnn");
    const predict_info *in = predict_model_info(m);
    CHECK_INT(in->image, 1);
    CHECK_INT(in->in_h, 8);
    CHECK_INT(in->in_c, 3);
    CHECK_INT(in->outputs, 10); /* CIFAR-10's classes, whichever the images use */
    CHECK(fabs(in->pixel_scale - 1.0f / 255.0f) < 1e-12);
    char path[512], err[ERR_LEN] = "";
    size_t len;
    snprintf(path, sizeof path, "%s/images.bin", dir);
    char *bytes = slurp(path, &len);
    imagedata *d;
    if (imagedata_load(bytes, len, job, &d, err) < 0)
        cltest_die("imagedata_load", err);
    free(bytes);
    size_t n = d->n_val, px = 32 * 32 * 3, k = (size_t)in->outputs, nw;
    float *raw = malloc(n * px * sizeof *raw), *rows = malloc(n * 8 * 8 * 3 * sizeof *rows);
    const unsigned char *src = d->train->pixels;
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < px; j++)
            raw[i * px + j] = src[(size_t)d->val_ids[i] * px + j];
    int64_t dims[3] = {32, 32, 3};
    CHECK_INT(predict_prepare(in, raw, n, dims, 3, rows, err), 0);
    float *want = read_npy("cnn", &nw);
    CHECK_INT(nw, n * k);
    float *got = predict_rows(e, m, rows, n);
    check_close(got, want, n * k, "cnn");
    float *alone = predict_rows(e, m, rows + 3 * 192, 1);
    CHECK(memcmp(alone, got + 3 * k, k * sizeof *got) == 0);
    free(alone);
    free(got);
    free(want);
    free(raw);
    free(rows);
    imagedata_free(d);
    predict_model_put(m);
}

static void test_errors(predict_engine *e)
{
    char path[512], err[ERR_LEN] = "";
    predict_model *m = NULL;
    snprintf(path, sizeof path, "%s/plain.safetensors", dir);
    float w[2] = {1, 2};
    safetensors_tensor t = {.name = "0.weight", .ndim = 1, .shape = {2}, .data = w};
    if (safetensors_write(path, &t, 1, NULL, 0, err) < 0)
        cltest_die("safetensors_write", err);
    CHECK_INT(predict_model_get(e, "plain", path, &m, err), -ENOTSUP);
    CHECK(strstr(err, "trainyard.job") != NULL);
    /* Half of a real model file: damaged. */
    size_t len;
    char real[512];
    snprintf(real, sizeof real, "%s/cls/model.safetensors", dir);
    char *bytes = slurp(real, &len);
    snprintf(path, sizeof path, "%s/half.safetensors", dir);
    FILE *f = fopen(path, "wb");
    fwrite(bytes, 1, len / 2, f);
    fclose(f);
    free(bytes);
    CHECK_INT(predict_model_get(e, "half", path, &m, err), -EINVAL);
    snprintf(path, sizeof path, "%s/none.safetensors", dir);
    CHECK_INT(predict_model_get(e, "none", path, &m, err), -ENOENT);
    CHECK(m == NULL);

    /* predict_prepare's shapes, on the CSV classifier and the CNN. */
    predict_model *csv = model_get(e, "cls"), *cnn = model_get(e, "cnn");
    float vals[64 * 64 * 3] = {0}, rows[64 * 3];
    int64_t three[1] = {3}, four[1] = {4}, two_d[2] = {1, 3};
    CHECK_INT(predict_prepare(predict_model_info(csv), vals, 1, four, 1, rows, err), -EINVAL);
    CHECK(strstr(err, "3 feature values") != NULL);
    CHECK_INT(predict_prepare(predict_model_info(csv), vals, 1, two_d, 2, rows, err), -EINVAL);
    CHECK_INT(predict_prepare(predict_model_info(csv), vals, 1, three, 1, rows, err), 0);
    vals[4] = NAN; /* instance 1 */
    CHECK_INT(predict_prepare(predict_model_info(csv), vals, 2, three, 1, rows, err), -EINVAL);
    CHECK(strstr(err, "instance 1") && strstr(err, "finite"));
    vals[4] = 0;
    int64_t gray[2] = {8, 8}, rgba[3] = {8, 8, 4}, zero[3] = {0, 8, 3}, big[3] = {5000, 1, 3};
    int64_t ok[3] = {64, 64, 3};
    float img[8 * 8 * 3];
    const predict_info *ci = predict_model_info(cnn);
    CHECK_INT(predict_prepare(ci, vals, 1, gray, 2, img, err), -EINVAL);
    CHECK(strstr(err, "[height, width, 3]") != NULL);
    CHECK_INT(predict_prepare(ci, vals, 1, rgba, 3, img, err), -EINVAL);
    CHECK_INT(predict_prepare(ci, vals, 1, zero, 3, img, err), -EINVAL);
    CHECK_INT(predict_prepare(ci, vals, 1, big, 3, img, err), -EINVAL);
    CHECK_INT(predict_prepare(ci, vals, 1, ok, 3, img, err), 0);
    predict_model_put(csv);
    predict_model_put(cnn);
}

static void test_too_big(void)
{
    predict_engine *e = engine(1024, 32);
    char path[512], err[ERR_LEN] = "";
    predict_model *m = NULL;
    snprintf(path, sizeof path, "%s/cls/model.safetensors", dir);
    CHECK_INT(predict_model_get(e, "cls", path, &m, err), -E2BIG);
    CHECK(m == NULL);
    predict_engine_free(e);
}

/* A cap that fits one model: two alternate, each reload gives the same bits. */
static void test_lru(uint64_t cls_bytes, uint64_t reg_bytes)
{
    uint64_t cap = (cls_bytes > reg_bytes ? cls_bytes : reg_bytes) + 16;
    CHECK(cap < cls_bytes + reg_bytes);
    predict_engine *e = engine(cap, 32);
    predict_model *a = model_get(e, "cls"), *b = model_get(e, "reg");
    float rows[2 * 3] = {0.5f, -1, 2, 1, 0, -0.25f};
    float *first_a = predict_rows(e, a, rows, 2), *first_b = predict_rows(e, b, rows, 2);
    for (int i = 0; i < 3; i++) {
        float *again_a = predict_rows(e, a, rows, 2), *again_b = predict_rows(e, b, rows, 2);
        CHECK(memcmp(again_a, first_a, 2 * 3 * sizeof(float)) == 0);
        CHECK(memcmp(again_b, first_b, 2 * sizeof(float)) == 0);
        free(again_a);
        free(again_b);
    }
    predict_stats st;
    predict_engine_stats(e, &st);
    printf("lru: %llu loads, %llu evictions, %zu loaded\n", (unsigned long long)st.loads,
           (unsigned long long)st.evictions, st.loaded);
    CHECK(st.evictions >= 7);
    CHECK_INT(st.loaded, 1);
    CHECK(st.loaded_bytes <= cap);
    /* b let go, then evicted by a: the table drops it; a new get reads the file again. */
    predict_model_put(b);
    free(predict_rows(e, a, rows, 2));
    b = model_get(e, "reg");
    float *reread = predict_rows(e, b, rows, 2);
    CHECK(memcmp(reread, first_b, 2 * sizeof(float)) == 0);
    free(reread);
    free(first_a);
    free(first_b);
    predict_model_put(a);
    predict_model_put(b);
    predict_engine_free(e);
}

typedef struct counted {
    atomic_int calls;
} counted;

static void count_notify(void *arg)
{
    atomic_fetch_add(&((counted *)arg)->calls, 1);
}

/* An idle engine waits up to window_us for more rows: two 1-row requests, one forward. */
static void test_window(void)
{
    char err[ERR_LEN] = "";
    predict_engine *e;
    predict_opts o = {.max_batch = 32, .window_us = 100000};
    if (predict_engine_new(&o, &e, err) < 0)
        cltest_die("predict_engine_new", err);
    predict_model *m = model_get(e, "cls");
    float rows[2 * 3] = {1, 2, 3, 4, 5, 6};
    free(predict_rows(e, m, rows, 1)); /* device open and model loaded: the engine is idle */
    predict_stats before, after;
    predict_engine_stats(e, &before);
    predict_req *q[2];
    for (int i = 0; i < 2; i++)
        CHECK_INT(predict_submit(e, m, rows + 3 * i, 1, NULL, NULL, &q[i], err), 0);
    for (int i = 0; i < 2; i++)
        wait_done(q[i]);
    predict_engine_stats(e, &after);
    CHECK_INT(after.forwards - before.forwards, 1);
    for (int i = 0; i < 2; i++)
        predict_req_release(q[i]);
    predict_model_put(m);
    predict_engine_free(e);
}

typedef struct turn {
    predict_req *big; /* the other model's long request */
    int big_done;     /* whether it was done when the short one finished */
} turn;

static void short_done(void *arg)
{
    turn *t = arg;
    t->big_done = predict_req_done(t->big);
}

/* Models take turns: a 1-row request of one model finishes while a 400-row request of another,
 * queued first, is still running (forwards of 4 rows). */
static void test_turns(void)
{
    predict_engine *e = engine(0, 4);
    predict_model *a = model_get(e, "cls"), *b = model_get(e, "reg");
    static float rows[400 * 3];
    char err[ERR_LEN] = "";
    free(predict_rows(e, b, rows, 1)); /* both loaded before the race */
    free(predict_rows(e, a, rows, 1));
    turn t = {.big_done = -1};
    predict_req *small;
    CHECK_INT(predict_submit(e, a, rows, 400, NULL, NULL, &t.big, err), 0);
    CHECK_INT(predict_submit(e, b, rows, 1, short_done, &t, &small, err), 0);
    wait_done(t.big);
    wait_done(small);
    CHECK_INT(t.big_done, 0);
    predict_req_release(t.big);
    predict_req_release(small);
    predict_model_put(a);
    predict_model_put(b);
    predict_engine_free(e);
}

/* Options out of range are -EINVAL; a device that cannot be opened fails the requests with its
 * code and sentence, and predict_engine_device says so. */
static void test_options(void)
{
    char err[ERR_LEN] = "", name[128];
    predict_engine *e = NULL;
    predict_opts bad[] = {{.device = "tpu"}, {.device = "-1"},      {.max_batch = 2000},
                          {.max_batch = -3}, {.window_us = 200000}, {.window_us = -2}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CHECK_INT(predict_engine_new(&bad[i], &e, err), -EINVAL);
    CHECK(e == NULL);
    predict_engine_free(NULL);

    predict_opts o = {.device = "999", .window_us = 0};
    if (predict_engine_new(&o, &e, err) < 0)
        cltest_die("predict_engine_new", err);
    predict_model *m = model_get(e, "cls"); /* a dense model needs no device to be read */
    float row[3] = {0};
    predict_req *q;
    CHECK_INT(predict_submit(e, m, row, 1, NULL, NULL, &q, err), 0);
    wait_done(q);
    const float *out;
    CHECK_INT(predict_req_result(q, &out, err), -ENODEV);
    CHECK(strstr(err, "999") != NULL);
    CHECK_INT(predict_engine_device(e, name, sizeof name, err), -ENODEV);
    CHECK_STR(name, "");
    predict_model *cnn = NULL;
    char path[512];
    snprintf(path, sizeof path, "%s/cnn/model.safetensors", dir);
    CHECK_INT(predict_model_get(e, "cnn", path, &cnn, err), -ENODEV); /* conv: needs it */
    predict_req_release(q);
    predict_model_put(m);
    predict_engine_free(e);
}

/* Requests still queued when the engine stops finish with -ECANCELED, notify called. */
static void test_cancel(void)
{
    predict_engine *e = engine(0, 4);
    predict_model *m = model_get(e, "cls");
    static float rows[4000 * 3];
    counted c;
    atomic_init(&c.calls, 0);
    predict_req *q[3];
    char err[ERR_LEN] = "";
    for (int i = 0; i < 3; i++)
        CHECK_INT(predict_submit(e, m, rows, 4000, count_notify, &c, &q[i], err), 0);
    predict_engine_free(e);
    CHECK_INT(atomic_load(&c.calls), 3);
    const float *out;
    CHECK(predict_req_done(q[2]));
    CHECK_INT(predict_req_result(q[2], &out, err), -ECANCELED);
    for (int i = 0; i < 3; i++)
        predict_req_release(q[i]);
    predict_model_put(m);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The forward time of a 784-128-10 MLP at 32 rows, through the engine (no window). */
static void time_mlp(cltest *t)
{
    write_wide_csv();
    char text[1024];
    snprintf(text, sizeof text,
             "{\"dataset_url\": \"file://%s/wide.csv\", \"model\": {\"layers\": ["
             "{\"type\": \"dense\", \"units\": 128, \"activation\": \"relu\"}]},"
             "\"hyperparameters\": {\"epochs\": 1, \"validation_split\": 0.25}}",
             dir);
    job_spec *job = tf_parse_job(text);
    train(t, job, "mlp");
    char err[ERR_LEN] = "";
    predict_engine *e;
    predict_opts o = {.max_batch = 32, .window_us = 0};
    if (predict_engine_new(&o, &e, err) < 0)
        cltest_die("predict_engine_new", err);
    predict_model *m = model_get(e, "mlp");
    static float rows[32 * 784];
    for (size_t i = 0; i < 32 * 784; i++)
        rows[i] = (float)(i % 17) / 17.0f;
    for (int i = 0; i < 5; i++) /* warm: the first launches compile work-group functions */
        free(predict_rows(e, m, rows, 32));
    for (int w = 0; w < 2; w++) {
        size_t n = w ? 32 : 1;
        double dt[200];
        for (int i = 0; i < 200; i++) {
            double t0 = time_mono();
            free(predict_rows(e, m, rows, n));
            dt[i] = time_mono() - t0;
        }
        qsort(dt, 200, sizeof *dt, cmp_double);
        printf("784-128-10 MLP, forwards of 32 rows, no window: a request of %zu row%s takes "
               "p50 %.3f ms, p99 %.3f ms (submit to done, 200 runs)\n",
               n, n > 1 ? "s" : "", dt[100] * 1e3, dt[198] * 1e3);
    }
    predict_model_put(m);
    predict_engine_free(e);
    job_free(job);
}

int main(void)
{
    cltest t;
    cltest_open(&t);
    snprintf(dir, sizeof dir, "/tmp/trainyard-predict-XXXXXX");
    if (!mkdtemp(dir))
        cltest_die("mkdtemp", strerror(errno));
    write_csv("cls.csv", PREDICT_CLASSIFY);
    write_csv("reg.csv", PREDICT_REGRESS);
    write_csv("bin.csv", PREDICT_BINARY);
    write_images();
    job_spec *cls = csv_job("cls.csv", ""), *reg = csv_job("reg.csv", "\"task\": \"regression\","),
             *bin = csv_job("bin.csv", "\"binary\": true,"), *cnn = cnn_job();
    train(&t, cls, "cls");
    train(&t, reg, "reg");
    train(&t, bin, "bin");
    train(&t, cnn, "cnn");

    predict_engine *e = engine(0, 32);
    char name[128], err[ERR_LEN] = "";
    test_csv(e, cls, "cls.csv", "cls", PREDICT_CLASSIFY);
    test_csv(e, reg, "reg.csv", "reg", PREDICT_REGRESS);
    test_csv(e, bin, "bin.csv", "bin", PREDICT_BINARY);
    test_images(e, cnn);
    test_errors(e);
    CHECK_INT(predict_engine_device(e, name, sizeof name, err), 0);
    CHECK(name[0] != '\0');
    predict_model *a = model_get(e, "cls"), *b = model_get(e, "reg");
    uint64_t cls_bytes = predict_model_info(a)->device_bytes;
    uint64_t reg_bytes = predict_model_info(b)->device_bytes;
    predict_model_put(a);
    predict_model_put(b);
    predict_stats st;
    predict_engine_stats(e, &st);
    CHECK_INT(st.loaded, 4);
    CHECK_INT(st.evictions, 0);
    CHECK(st.forwards >= 6);
    predict_engine_free(e);

    test_too_big();
    test_lru(cls_bytes, reg_bytes);
    test_window();
    test_options();
    test_turns();
    test_cancel();
    time_mlp(&t);

    job_free(cls);
    job_free(reg);
    job_free(bin);
    job_free(cnn);
    cltest_close(&t);
    return check_exit_removing(dir);
}
