/* predict/ on the libraries its meson.build names and nothing else (tests/unit/meson.build links
 * this test with predict, model, data, kernels, job and util alone), so an include that reaches
 * up (into train/, worker/, the scheduler) fails the build here. Each of predict's objects is
 * reached: the engine, the model reader and the preprocessing.
 * - predict_prepare: a CSV row standardised, an image resized, scaled and standardised per
 *   channel, and shapes or values that do not fit refused with a sentence;
 * - the engine: a missing model file is -ENOENT naming it, a file that is no model -EINVAL, and
 *   the counters stay at zero; it stops and frees cleanly. Needs no OpenCL device: a CSV model is
 *   read before the device is opened. */
#include "predict/predict.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/unit/check.h"
#include "util/err.h"

static void test_prepare_rows(void)
{
    static const char *const features[] = {"a", "b"};
    static const float mean[] = {1, -2}, std[] = {2, 4};
    predict_info in = {.in_h = 1,
                       .in_w = 1,
                       .in_c = 2,
                       .inputs = 2,
                       .outputs = 1,
                       .task = PREDICT_REGRESS,
                       .n_features = 2,
                       .features = features,
                       .mean = mean,
                       .std = std};
    float vals[4] = {3, 2, 1, -2}, rows[4];
    int64_t dims[1] = {2};
    char err[ERR_LEN] = "";
    CHECK_INT(predict_prepare(&in, vals, 2, dims, 1, rows, err), 0);
    CHECK(rows[0] == 1.0f && rows[1] == 1.0f && rows[2] == 0.0f && rows[3] == 0.0f);
    dims[0] = 3;
    CHECK_INT(predict_prepare(&in, vals, 1, dims, 1, rows, err), -EINVAL);
    CHECK(err[0] != '\0');
    dims[0] = 2;
    vals[1] = NAN;
    err[0] = '\0';
    CHECK_INT(predict_prepare(&in, vals, 2, dims, 1, rows, err), -EINVAL);
    CHECK(err[0] != '\0');
}

/* A 1×2 image of two channels resized to 1×4: half-pixel bilinear, as training's image batch. */
static void test_prepare_image(void)
{
    static const float mean[] = {0.5f, 0.0f}, std[] = {0.5f, 1.0f};
    predict_info in = {.image = 1,
                       .in_h = 1,
                       .in_w = 4,
                       .in_c = 2,
                       .inputs = 8,
                       .outputs = 2,
                       .task = PREDICT_CLASSIFY,
                       .pixel_scale = 1.0f / 255,
                       .mean = mean,
                       .std = std};
    float px[4] = {0, 255, 255, 0}, rows[8];
    int64_t dims[3] = {1, 2, 2};
    char err[ERR_LEN] = "";
    CHECK_INT(predict_prepare(&in, px, 1, dims, 3, rows, err), 0);
    /* source x of the outputs: 0 (clamped), 0.25, 0.75, 1 (clamped at the edge) */
    static const float t[4] = {0, 0.25f, 0.75f, 1};
    for (int x = 0; x < 4; x++) {
        CHECK(fabsf(rows[2 * x] - (t[x] - 0.5f) / 0.5f) < 1e-6f);
        CHECK(fabsf(rows[2 * x + 1] - (1 - t[x])) < 1e-6f);
    }
    dims[2] = 3; /* three channels for a two-channel model */
    CHECK_INT(predict_prepare(&in, px, 1, dims, 3, rows, err), -EINVAL);
    CHECK(strstr(err, "2") != NULL);
}

static void test_engine(void)
{
    predict_opts o = {.device = "any"};
    predict_engine *e = NULL;
    char err[ERR_LEN] = "";
    CHECK_INT(predict_engine_new(&o, &e, err), 0);
    predict_model *m = (predict_model *)1;
    CHECK_INT(predict_model_get(e, "missing", "/nonexistent/model.safetensors", &m, err), -ENOENT);
    CHECK(strstr(err, "/nonexistent/model.safetensors") != NULL);
    CHECK(m == (predict_model *)1);
    char path[] = "/tmp/trainyard-predict-link-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    CHECK(write(fd, "not a model", 11) == 11);
    close(fd);
    err[0] = '\0';
    CHECK_INT(predict_model_get(e, "garbage", path, &m, err), -EINVAL);
    CHECK(err[0] != '\0');
    unlink(path);
    predict_stats s;
    predict_engine_stats(e, &s);
    CHECK(s.requests == 0 && s.loads == 0 && s.loaded == 0);
    predict_engine_stop(e);
    CHECK_INT(predict_model_get(e, "missing", "/nonexistent/model.safetensors", &m, err),
              -ECANCELED);
    predict_engine_free(e);
    predict_engine_free(NULL);
}

int main(void)
{
    test_prepare_rows();
    test_prepare_image();
    test_engine();
    return check_exit();
}
