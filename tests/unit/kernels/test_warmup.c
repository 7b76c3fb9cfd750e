/* Unit test of kern_warmup (kernels/warmup.c): after the warm-up of every family, a job's steps
 * compile nothing more. PoCL compiles one work-group function per kernel, local size and grid
 * class on first launch and writes each into its cache folder as a .so, so the test points
 * POCL_CACHE_DIR at a fresh folder, builds every family (trainyard's own cache off), warms up,
 * counts the .so files, then runs models the way the trainer does (CSV batches gathered, image
 * batches made by kern_image_batch, a training step, an evaluation, a short last batch) and
 * checks after each that the count has not moved; a failure names the new files. The models
 * cover every layer kind, the three losses, both optimizers and a parameter count past PoCL's
 * 65,535-wide "smallgrid" limit. On an OpenCL platform other than PoCL the count means nothing
 * and the test skips (77), as it does without a device. */

#include "tests/unit/check.h"

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "job/job.h"
#include "kernels/kernels.h"
#include "util/err.h"
#include "model/model.h"

#define BATCH 32

static char pocl_dir[] = "/tmp/trainyard-test-warmup-XXXXXX";
static int so_count;
static const char *so_since; /* when set, files newer than the warm-up are printed */
static char so_names[1 << 16];

static int count_so(const char *path, const struct stat *st, int type, struct FTW *f)
{
    (void)st;
    (void)f;
    size_t n = strlen(path);
    if (type == FTW_F && n > 3 && strcmp(path + n - 3, ".so") == 0) {
        so_count++;
        if (so_since && !strstr(so_since, path + strlen(pocl_dir)) &&
            strlen(so_names) + n + 2 < sizeof so_names) {
            strcat(so_names, path + strlen(pocl_dir));
            strcat(so_names, "\n");
        }
    }
    return 0;
}

/* .so files under the PoCL cache; with `before` (a listing), the new ones go to so_names. */
static int pocl_variants(const char *before)
{
    so_count = 0;
    so_since = before;
    so_names[0] = '\0';
    nftw(pocl_dir, count_so, 16, FTW_PHYS);
    return so_count;
}

static int remove_entry(const char *path, const struct stat *st, int type, struct FTW *f)
{
    (void)st;
    (void)type;
    (void)f;
    return remove(path);
}

/* A zero-filled buffer of bytes. */
static cl_mem zeros(ocl_ctx *c, size_t bytes)
{
    char err[ERR_LEN] = "";
    cl_mem m = NULL;
    void *z = calloc(1, bytes);
    if (!z || ocl_buffer_new(c, bytes, &m, err) < 0 || ocl_write(c, m, 0, bytes, z, err) < 0) {
        fprintf(stderr, "zero buffer of %zu bytes: %s\n", bytes, err);
        exit(1);
    }
    free(z);
    return m;
}

/* The trainer's batch, then a step, an evaluation, and a last batch of 7 rows. */
static void run_job(ocl_ctx *c, kern *k, const char *what, const char *doc, int inputs, int outputs,
                    int loss, int src_hw)
{
    char err[ERR_LEN] = "";
    field_errors errs = {0};
    job_spec *job = NULL;
    model *m = NULL;
    if (job_parse(doc, strlen(doc), &job, &errs) < 0) {
        fprintf(stderr, "%s: job: %s\n", what, errs.count ? errs.items[0].message : "?");
        exit(1);
    }
    CHECK_INT(model_new(c, k, job, inputs, outputs, loss, BATCH, 0, &m, err), 0);
    if (!m) {
        fprintf(stderr, "%s: model_new: %s\n", what, err);
        exit(1);
    }
    cl_mem x = zeros(c, (size_t)BATCH * inputs * 4), y = zeros(c, BATCH * 4);
    cl_mem idx = zeros(c, 4 * BATCH), src = NULL;
    if (src_hw)
        src = zeros(c, (size_t)BATCH * src_hw * src_hw * job->in_c);
    else
        src = zeros(c, (size_t)BATCH * inputs * 4);
    static const int rows[] = {BATCH, 7};
    for (int i = 0; i < 2; i++) {
        int rc = 0;
        if (src_hw) {
            kern_image g = {.src_u8 = 1,
                            .n_src = BATCH,
                            .sh = src_hw,
                            .sw = src_hw,
                            .c = job->in_c,
                            .dh = job->in_h,
                            .dw = job->in_w,
                            .scale = 1.0f / 255,
                            .flip = 1,
                            .crop = 4,
                            .seed = 1};
            rc = kern_image_batch(k, &g, rows[i], src, idx, 0, NULL, NULL, x);
        } else {
            rc = kern_gather_rows(k, rows[i], inputs, src, idx, 0, x);
            if (rc == 0)
                rc = kern_gather_rows(k, rows[i], 1, y, idx, 0, y);
        }
        if (rc < 0)
            fprintf(stderr, "%s: batch: %s\n", what, kern_last_error(k));
        CHECK_INT(rc, 0);
        CHECK_INT(model_train_step(m, rows[i], x, y, err), 0);
        CHECK_INT(model_evaluate(m, rows[i], x, y, err), 0);
    }
    CHECK_INT(ocl_finish(c, err), 0);
    clReleaseMemObject(x);
    clReleaseMemObject(y);
    clReleaseMemObject(idx);
    clReleaseMemObject(src);
    model_free(m);
    job_free(job);
}

#define JOB(layers, extra, hyper)                                                                  \
    "{\"name\": \"w\", \"dataset_url\": \"https://example.com/d\", \"task\": "                     \
    "\"classification\", " extra "\"model\": {" layers "}, \"hyperparameters\": {" hyper           \
    "\"batch_size\": 32}}"

int main(void)
{
    char err[ERR_LEN] = "";
    if (!mkdtemp(pocl_dir)) {
        perror("mkdtemp");
        return 1;
    }
    setenv("POCL_CACHE_DIR", pocl_dir, 1);
    setenv("POCL_KERNEL_CACHE", "1", 1);
    ocl_device dev;
    int rc = ocl_device_pick("any", &dev, err);
    if (rc == -ENODEV)
        check_skip(err);
    if (rc < 0) {
        fprintf(stderr, "picking an OpenCL device: %s\n", err);
        return 1;
    }
    if (!strstr(dev.platform_name, "Portable Computing Language")) {
        rmdir(pocl_dir);
        check_skip("the compile count is read from PoCL's cache folder; this is not PoCL");
    }
    ocl_ctx *c = NULL;
    kern *k = NULL;
    CHECK_INT(ocl_ctx_new(&dev, "", &c, err), 0);
    CHECK_INT(kern_new(c, &k, err), 0);
    rc = kern_warmup(k, err);
    if (rc < 0)
        fprintf(stderr, "kern_warmup: %s\n", err);
    CHECK_INT(rc, 0);
    int warmed = pocl_variants(NULL);
    printf("%d work-group functions after the warm-up\n", warmed);
    CHECK(warmed > 0); /* PoCL writes its cache where the test said */

    /* a listing of the warmed files, to name the new ones on failure */
    static char listing[1 << 16];
    so_since = NULL;
    struct {
        const char *what, *doc;
        int inputs, outputs, loss, src_hw;
    } jobs[] = {
        {"the seed CNN (CIFAR-10 resized to 64×64)",
         JOB("\"input_shape\": [64, 64, 3], \"layers\": [{\"type\": \"conv2d\", \"filters\": 32, "
             "\"kernel_size\": 3, \"activation\": \"relu\"}, {\"type\": \"maxpool2d\", "
             "\"pool_size\": 2}, {\"type\": \"flatten\"}, {\"type\": \"dense\", \"units\": 10, "
             "\"activation\": \"softmax\"}]",
             "\"dataset\": {\"format\": \"cifar10\", \"resize\": [64, 64]}, ", ""),
         64 * 64 * 3, 10, MODEL_LOSS_SOFTMAX_XENT, 32},
        {"examples/shapes-job.json",
         JOB("\"input_shape\": [32, 32, 3], \"layers\": [{\"type\": \"conv2d\", \"filters\": 16, "
             "\"kernel_size\": 3, \"padding\": \"same\", \"activation\": \"relu\"}, {\"type\": "
             "\"maxpool2d\", \"pool_size\": 2}, {\"type\": \"conv2d\", \"filters\": 32, "
             "\"kernel_size\": 3, \"padding\": \"same\", \"activation\": \"relu\"}, {\"type\": "
             "\"maxpool2d\", \"pool_size\": 2}, {\"type\": \"flatten\"}, {\"type\": \"dense\", "
             "\"units\": 64, \"activation\": \"relu\"}, {\"type\": \"dense\", \"units\": 4, "
             "\"activation\": \"softmax\"}]",
             "\"dataset\": {\"format\": \"cifar10\"}, ", ""),
         32 * 32 * 3, 4, MODEL_LOSS_SOFTMAX_XENT, 32},
        {"batchnorm, stride 2, average and global pooling, dropout, SGD",
         JOB("\"input_shape\": [20, 20, 3], \"layers\": [{\"type\": \"conv2d\", \"filters\": 8, "
             "\"kernel_size\": 3, \"strides\": 2, \"padding\": \"same\", \"use_bias\": false}, "
             "{\"type\": \"batchnorm\"}, {\"type\": \"avgpool2d\", \"pool_size\": 2}, "
             "{\"type\": \"conv2d\", \"filters\": 40, \"kernel_size\": 1}, {\"type\": "
             "\"global_avgpool2d\"}, {\"type\": \"dense\", \"units\": 16, \"activation\": "
             "\"tanh\"}, {\"type\": \"batchnorm\"}, {\"type\": \"dropout\", \"rate\": 0.2}]",
             "\"dataset\": {\"format\": \"cifar10\", \"resize\": [20, 20]}, ",
             "\"optimizer\": \"sgd\", \"momentum\": 0.9, "),
         20 * 20 * 3, 3, MODEL_LOSS_SOFTMAX_XENT, 16},
        {"spirals (2 features, dense 64-64)",
         JOB("\"layers\": [{\"type\": \"dense\", \"units\": 64, \"activation\": \"relu\"}, "
             "{\"type\": \"dense\", \"units\": 64, \"activation\": \"relu\"}]",
             "", ""),
         2, 3, MODEL_LOSS_SOFTMAX_XENT, 0},
        {"a wide dense net: 200,000 parameters, dropout over 32×512, sigmoid",
         JOB("\"layers\": [{\"type\": \"dense\", \"units\": 256, \"activation\": \"sigmoid\"}, "
             "{\"type\": \"dropout\", \"rate\": 0.5}, {\"type\": \"dense\", \"units\": 512, "
             "\"activation\": \"relu\"}, {\"type\": \"dropout\", \"rate\": 0.5}]",
             "", ""),
         784, 10, MODEL_LOSS_SOFTMAX_XENT, 0},
        {"binary (sigmoid cross-entropy)",
         JOB("\"layers\": [{\"type\": \"dense\", \"units\": 5, \"activation\": \"tanh\"}]", "", ""),
         13, 1, MODEL_LOSS_BCE, 0},
        {"regression (MSE), 31 features",
         JOB("\"layers\": [{\"type\": \"dense\", \"units\": 17, \"activation\": \"linear\"}]", "",
             ""),
         31, 1, MODEL_LOSS_MSE, 0},
    };
    for (size_t i = 0; i < sizeof jobs / sizeof jobs[0]; i++) {
        /* the listing before this job: every .so path, one per line */
        listing[0] = '\0';
        so_names[0] = '\0';
        so_since = "";
        pocl_variants(""); /* every file is "new" against an empty listing */
        snprintf(listing, sizeof listing, "%s", so_names);
        int before = so_count;
        run_job(c, k, jobs[i].what, jobs[i].doc, jobs[i].inputs, jobs[i].outputs, jobs[i].loss,
                jobs[i].src_hw);
        int after = pocl_variants(listing);
        if (after != before)
            fprintf(stderr, "%s: its steps compiled %d work-group function(s):\n%s", jobs[i].what,
                    after - before, so_names);
        CHECK_INT(after, before);
    }
    kern_free(k);
    ocl_ctx_free(c);
    nftw(pocl_dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
    return check_exit();
}
