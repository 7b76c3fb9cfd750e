/* Unit tests of train/trainer: trainer_run on the default OpenCL device with its hooks, as the
 * worker and `trainyard train` drive it.
 * - a dense job on CSV: the phases in order (downloading, training, saving), on_epoch once per
 *   epoch with finite metrics, metrics.csv's rows the values on_epoch saw, train.log holding every
 *   on_log line, the artifacts written, the loss going down;
 * - should_stop ends the run at once without a model; should_finish ends it after that epoch
 *   with the model written and its reason;
 * - early stopping inside the trainer: a min_delta no epoch can beat stops after patience + 1
 *   epochs, with restore_best the model holds the best epoch's weights;
 * - val_outputs: a float32 .npy of the validation rows' probabilities;
 * - failures say what went wrong: a missing file, a bad cell, a dataset outside the root;
 * - trainer_kern_families asks for the families a job's layers use.
 * Skips without an OpenCL device. */
#include "train/trainer.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/unit/check.h"
#include "tests/unit/kernels/cltest.h"
#include "tests/unit/train/train_fixtures.h"
#include "model/safetensors.h"

#define EPOCHS        5
#define LOG_LINES_MAX 64

static char dir[256];

/* What the hooks saw. */
typedef struct seen {
    int phases[8], n_phases;
    trainer_epoch epochs[EPOCHS + 1];
    int n_epochs;
    char *lines[LOG_LINES_MAX];
    int n_lines;
    int stop_after;   /* should_stop answers 1 once this many epochs were seen; 0 never */
    int finish_after; /* should_finish answers 1 after this epoch; 0 never */
} seen;

static void on_log(void *user, const char *line)
{
    seen *s = user;
    if (s->n_lines < LOG_LINES_MAX)
        s->lines[s->n_lines++] = strdup(line);
}

static void on_phase(void *user, int phase)
{
    seen *s = user;
    if (s->n_phases < 8)
        s->phases[s->n_phases++] = phase;
}

static int on_epoch(void *user, const trainer_epoch *e)
{
    seen *s = user;
    if (s->n_epochs <= EPOCHS)
        s->epochs[s->n_epochs++] = *e;
    return 0;
}

static int should_stop(void *user)
{
    seen *s = user;
    return s->stop_after && s->n_epochs >= s->stop_after;
}

static int should_finish(void *user, char *why, size_t cap)
{
    seen *s = user;
    if (!s->finish_after || s->n_epochs < s->finish_after)
        return 0;
    snprintf(why, cap, "asked to finish after epoch %d", s->finish_after);
    return 1;
}

static void seen_free(seen *s)
{
    for (int i = 0; i < s->n_lines; i++)
        free(s->lines[i]);
}

static void write_file(const char *rel, const char *text)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, rel);
    FILE *f = fopen(path, "w");
    if (!f)
        cltest_die("writing", path);
    fputs(text, f);
    fclose(f);
}

/* Three features, three classes a small MLP separates, 600 rows. */
static void write_dataset(void)
{
    char path[512];
    snprintf(path, sizeof path, "%s/data.csv", dir);
    tf_write_three_class_csv(path, 5, 600);
}

static job_spec *dense_job(const char *file, const char *extra)
{
    char text[1024];
    snprintf(text, sizeof text,
             "{\"dataset_url\": \"file://%s/%s\", \"model\": {\"layers\": ["
             "{\"type\": \"dense\", \"units\": 16, \"activation\": \"relu\"}]},"
             "\"hyperparameters\": {\"epochs\": %d, \"batch_size\": 32, \"optimizer\": \"adam\","
             "\"learning_rate\": 0.01, \"validation_split\": 0.2, \"seed\": 3}%s}",
             dir, file, EPOCHS, extra);
    return tf_parse_job(text);
}

static int train(cltest *t, const job_spec *job, const char *out, seen *s, const char *val_outputs,
                 trainer_result *res, char *err)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, out);
    trainer_opts o = {
        .out_dir = path, .dataset_root = dir, .checkpoint_seconds = -1, .val_outputs = val_outputs};
    trainer_hooks h = {.user = s,
                       .on_log = on_log,
                       .on_phase = on_phase,
                       .on_epoch = on_epoch,
                       .should_stop = should_stop,
                       .should_finish = should_finish};
    memset(res, 0, sizeof *res);
    err[0] = '\0';
    return trainer_run(job, t->c, t->k, &o, &h, res, err);
}

static int exists(const char *out, const char *name)
{
    char path[512];
    struct stat st;
    snprintf(path, sizeof path, "%s/%s/%s", dir, out, name);
    return stat(path, &st) == 0 && st.st_size > 0;
}

static char *slurp(const char *out, const char *name)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s/%s", dir, out, name);
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char *buf = calloc(1, 1 << 20);
    size_t n = fread(buf, 1, (1 << 20) - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

static void test_hooks_and_artifacts(cltest *t)
{
    job_spec *job = dense_job("data.csv", "");
    seen s = {0};
    trainer_result res;
    char err[ERR_LEN];
    CHECK_INT(train(t, job, "plain", &s, NULL, &res, err), 0);
    CHECK_INT(res.epochs_done, EPOCHS);
    CHECK_INT(res.stopped, 0);
    CHECK(res.stop_reason[0] == '\0');
    /* the phases, in order */
    CHECK_INT(s.n_phases, 3);
    CHECK_INT(s.phases[0], TRAINER_PHASE_DOWNLOADING);
    CHECK_INT(s.phases[1], TRAINER_PHASE_TRAINING);
    CHECK_INT(s.phases[2], TRAINER_PHASE_SAVING);
    /* one on_epoch per epoch, numbered, with every metric a classification with validation has */
    CHECK_INT(s.n_epochs, EPOCHS);
    for (int i = 0; i < s.n_epochs; i++) {
        const trainer_epoch *e = &s.epochs[i];
        CHECK_INT(e->epoch, i + 1);
        CHECK_INT(e->epochs, EPOCHS);
        CHECK(isfinite(e->loss) && isfinite(e->val_loss));
        CHECK(e->accuracy >= 0 && e->accuracy <= 1 && e->val_accuracy >= 0 && e->val_accuracy <= 1);
        CHECK(e->seconds > 0 && e->samples_per_second > 0);
    }
    CHECK(s.epochs[EPOCHS - 1].loss < s.epochs[0].loss);
    CHECK(s.epochs[EPOCHS - 1].val_accuracy > 0.8);
    CHECK(res.last.epoch == EPOCHS && res.last.loss == s.epochs[EPOCHS - 1].loss);
    /* metrics.csv: a header and the values on_epoch saw, row by row, bit for bit */
    char *csv = slurp("plain", "metrics.csv");
    CHECK(csv != NULL);
    if (csv) {
        char *line = strtok(csv, "\n");
        CHECK(line && strcmp(line, "epoch,loss,val_loss,accuracy,val_accuracy,seconds") == 0);
        for (int i = 0; i < EPOCHS; i++) {
            line = strtok(NULL, "\n");
            CHECK(line != NULL);
            if (!line)
                break;
            int epoch = 0;
            double loss = 0, val_loss = 0, acc = 0, val_acc = 0;
            CHECK_INT(sscanf(line, "%d,%lf,%lf,%lf,%lf", &epoch, &loss, &val_loss, &acc, &val_acc),
                      5);
            CHECK_INT(epoch, i + 1);
            /* the shortest digits of each double read back to it exactly (metrics_csv.h) */
            CHECK(loss == s.epochs[i].loss && val_loss == s.epochs[i].val_loss);
            CHECK(acc == s.epochs[i].accuracy && val_acc == s.epochs[i].val_accuracy);
        }
        CHECK(strtok(NULL, "\n") == NULL);
        free(csv);
    }
    /* train.log: every line on_log received */
    char *log = slurp("plain", "train.log");
    CHECK(log != NULL && s.n_lines > 3);
    for (int i = 0; log && i < s.n_lines; i++)
        CHECK(strstr(log, s.lines[i]) != NULL);
    free(log);
    CHECK(exists("plain", "model.safetensors") && exists("plain", "job.json"));
    seen_free(&s);
    job_free(job);
}

static void test_stop_and_finish(cltest *t)
{
    job_spec *job = dense_job("data.csv", "");
    trainer_result res;
    char err[ERR_LEN];

    /* should_stop: the run ends where it is, reports it, and leaves no model */
    seen s = {.stop_after = 2};
    CHECK_INT(train(t, job, "stopped", &s, NULL, &res, err), 0);
    CHECK_INT(res.stopped, 1);
    CHECK(res.epochs_done <= 2);
    CHECK(!exists("stopped", "model.safetensors"));
    seen_free(&s);

    /* should_finish: epoch 2 is the last, the model written, the reason kept */
    seen f = {.finish_after = 2};
    CHECK_INT(train(t, job, "finished", &f, NULL, &res, err), 0);
    CHECK_INT(res.stopped, 0);
    CHECK_INT(res.epochs_done, 2);
    CHECK_INT(res.stopped_epoch, 2);
    CHECK(strstr(res.stop_reason, "asked to finish after epoch 2") != NULL);
    CHECK_INT(f.n_epochs, 2);
    CHECK(exists("finished", "model.safetensors"));
    seen_free(&f);
    job_free(job);
}

/* A min_delta of 10 on val_loss: no epoch after the first improves, so with patience 1 training
 * ends after epoch 2, and restore_best gives back epoch 1's weights. */
static void test_early_stopping(cltest *t)
{
    job_spec *job =
        dense_job("data.csv", ", \"early_stopping\": {\"monitor\": \"val_loss\", \"patience\": 1,"
                              " \"min_delta\": 10, \"restore_best\": true}");
    seen s = {0};
    trainer_result res;
    char err[ERR_LEN];
    CHECK_INT(train(t, job, "early", &s, NULL, &res, err), 0);
    CHECK_INT(res.epochs_done, 2);
    CHECK_INT(res.stopped_epoch, 2);
    CHECK_INT(res.best_epoch, 1);
    CHECK(strstr(res.stop_reason, "early stopping") != NULL);
    CHECK(exists("early", "model.safetensors"));
    seen_free(&s);
    job_free(job);
}

/* The validation rows' outputs: 120 rows (20% of 600) of 3 probabilities summing to 1. */
static void test_val_outputs(cltest *t)
{
    job_spec *job = dense_job("data.csv", "");
    seen s = {0};
    trainer_result res;
    char err[ERR_LEN], path[512];
    snprintf(path, sizeof path, "%s/val.npy", dir);
    CHECK_INT(train(t, job, "val", &s, path, &res, err), 0);
    FILE *f = fopen(path, "rb");
    CHECK(f != NULL);
    if (f) {
        char head[128] = {0};
        CHECK_INT(fread(head, 1, 10, f), 10);
        CHECK(memcmp(head, "\x93NUMPY", 6) == 0);
        unsigned hlen = (unsigned char)head[8] | (unsigned)(unsigned char)head[9] << 8;
        CHECK(hlen < sizeof head);
        CHECK_INT(fread(head, 1, hlen, f), hlen);
        CHECK(strstr(head, "'<f4'") != NULL && strstr(head, "(120, 3)") != NULL);
        float p[3];
        int rows = 0;
        while (fread(p, sizeof p, 1, f) == 1) {
            CHECK(fabs(p[0] + p[1] + p[2] - 1.0) < 1e-4);
            rows++;
        }
        CHECK_INT(rows, 120);
        fclose(f);
    }
    seen_free(&s);
    job_free(job);
}

static void expect_failure(cltest *t, const char *file, const char *out, const char *says)
{
    job_spec *job = dense_job(file, "");
    seen s = {0};
    trainer_result res;
    char err[ERR_LEN];
    int rc = train(t, job, out, &s, NULL, &res, err);
    CHECK(rc < 0);
    if (!strstr(err, says))
        fprintf(stderr, "%s: expected \"%s\" in: %s\n", file, says, err);
    CHECK(strstr(err, says) != NULL);
    CHECK_INT(s.n_epochs, 0);
    CHECK(!exists(out, "model.safetensors"));
    seen_free(&s);
    job_free(job);
}

static void test_failures(cltest *t)
{
    expect_failure(t, "missing.csv", "f-missing", "missing.csv");
    write_file("bad.csv", "a,b,label\n1,2,x\n3,oops,y\n5,6,x\n");
    expect_failure(t, "bad.csv", "f-bad", "oops");
    expect_failure(t, "../etc/passwd", "f-root", "passwd");
}

static void test_families(void)
{
    job_spec *dense = dense_job("data.csv", "");
    CHECK_INT((int)trainer_kern_families(dense), KERN_FAM_DENSE);
    job_free(dense);
    job_spec *dropout = tf_parse_job("{\"dataset_url\": \"file:///x.csv\", \"model\": {\"layers\":"
                                     " [{\"type\": \"dense\", \"units\": 4},"
                                     " {\"type\": \"dropout\", \"rate\": 0.5}]},"
                                     " \"hyperparameters\": {\"epochs\": 1}}");
    CHECK_INT((int)trainer_kern_families(dropout), KERN_FAM_DENSE | KERN_FAM_DROPOUT);
    job_free(dropout);
    job_spec *cnn = tf_parse_job(
        "{\"dataset_url\": \"file:///x.bin\", \"dataset\": {\"format\": \"cifar10\"},"
        " \"model\": {\"input_shape\": [32, 32, 3], \"layers\": ["
        "{\"type\": \"conv2d\", \"filters\": 4, \"kernel_size\": 3},"
        "{\"type\": \"batchnorm\"}, {\"type\": \"maxpool2d\"}, {\"type\": \"flatten\"}]},"
        " \"hyperparameters\": {\"epochs\": 1}}");
    CHECK_INT((int)trainer_kern_families(cnn),
              KERN_FAM_DENSE | KERN_FAM_IMAGE | KERN_FAM_CONV | KERN_FAM_POOL | KERN_FAM_BATCHNORM);
    job_free(cnn);
}

int main(void)
{
    test_families();
    cltest t;
    cltest_open(&t);
    snprintf(dir, sizeof dir, "/tmp/trainyard-trainer-XXXXXX");
    if (!mkdtemp(dir))
        cltest_die("mkdtemp", strerror(errno));
    write_dataset();
    test_hooks_and_artifacts(&t);
    test_stop_and_finish(&t);
    test_early_stopping(&t);
    test_val_outputs(&t);
    test_failures(&t);
    cltest_close(&t);
    return check_exit_removing(dir);
}
