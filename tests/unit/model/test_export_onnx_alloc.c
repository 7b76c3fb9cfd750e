/* Fault tests of model/export_onnx: export_onnx_write of an image model with its whole
 * preprocessing (resize, pixel scale, standardisation) and of a standardised CSV model, with the
 * n-th allocation failing (ours and jansson's), for every n until a run completes untouched. A
 * failed write must return -ENOMEM with a message and leave no file behind; the untouched run
 * writes the file; ASan checks that no failing path leaks. */
#include "model/export_onnx.h"

#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

#include "tests/unit/alloc_fail.h"
#include "tests/unit/check.h"
#include "util/err.h"

static char dir[] = "/tmp/trainyard-test-onnx-alloc-XXXXXX";
static char path[128];

static void check_write(job_spec *job, int inputs, const export_onnx_prep *prep, long at_least)
{
    char err[ERR_LEN];
    model *m = NULL;
    export_set *e = NULL;
    const safetensors_meta meta[] = {{"trainyard.label", "y"}};
    CHECK_INT(model_plan(job, inputs, 3, MODEL_LOSS_SOFTMAX_XENT, &m, err), 0);
    if (!m)
        return;
    float *params = calloc(m->n_params + 1, sizeof *params);
    CHECK_INT(export_build(m, params, NULL, &e, err), 0);
    long points = 0;
    ALLOC_FAIL_LOOP(&points, {
        err[0] = '\0';
        unlink(path);
        int rc = export_onnx_write(m, e, prep, meta, 1, path, err);
        if (alloc_fail_off()) {
            CHECK_INT(rc, -ENOMEM);
            CHECK(err[0] != '\0');
            CHECK(access(path, F_OK) != 0);
        } else {
            CHECK_INT(rc, 0);
            CHECK(access(path, F_OK) == 0);
        }
    });
    printf("export_onnx_write, %s: %ld failure points\n", job->in_h ? "image" : "CSV", points);
    CHECK(points >= at_least);
    export_free(e);
    free(params);
    free(m);
}

int main(void)
{
    if (alloc_fail_init() < 0 || !mkdtemp(dir))
        return 1;
    snprintf(path, sizeof path, "%s/model.onnx", dir);
    const float mean[3] = {0.5f, 0.25f, 0.125f}, std[3] = {2.0f, 4.0f, 8.0f};
    job_spec *job = calloc(1, sizeof *job);
    job->layers[0] = (job_layer){.type = JOB_LAYER_DENSE, .units = 4};
    job->n_layers = 1;
    export_onnx_prep csv = {.mean = mean, .std = std, .n = 3};
    check_write(job, 3, &csv, 50);

    job->in_h = 5;
    job->in_w = 6;
    job->in_c = 3;
    job->layers[0] = (job_layer){
        .type = JOB_LAYER_CONV2D, .filters = 2, .kh = 3, .kw = 3, .sh = 1, .sw = 1, .use_bias = 1};
    job->layers[1] = (job_layer){.type = JOB_LAYER_FLATTEN};
    job->n_layers = 2;
    export_onnx_prep img = {.mean = mean, .std = std, .n = 3, .pixel_scale = 1.0f / 255.0f};
    check_write(job, 5 * 6 * 3, &img, 300);
    free(job);
    unlink(path);
    rmdir(dir);
    return check_exit();
}
