/* prepare: request values → the rows a model takes, preprocessed as its training did, on the
 * host (no device: any thread may call it).
 *
 * Features: the trainer standardises CSV features on the host with dataset_standardize()
 * ((x − mean) / std in float, per feature) with the training split's statistics; the same
 * function does it here with the statistics the model file carries.
 * Images: the trainer's image batch (kern_image_batch) resizes bilinearly with half-pixel
 * centres, multiplies by the pixel scale and standardises per channel; ref_image_batch() is
 * its plain-C twin (kernels/ref.h), called here with the request's images as a float source,
 * no augmentation. Values must be finite, as training's data must be.
 * model/export_onnx.c writes the same operations, in the same order, into model.onnx's graph:
 * a change here is a change there. */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/ref.h"
#include "predict/predict.h"
#include "util/err.h"
#include "data/dataset.h"
#include "data/images.h"

static size_t features_of(const predict_info *in)
{
    return in->n_features ? in->n_features : (size_t)in->inputs;
}

static int features_check(const predict_info *in, const int64_t *dims, int ndim, char *err)
{
    size_t want = features_of(in);
    if (ndim != 1 || dims[0] != (int64_t)want)
        return err_set(err, -EINVAL, "each instance must be a list of %zu feature values", want);
    return 0;
}

static int features_prepare(const predict_info *in, const float *vals, size_t n, float *rows)
{
    size_t want = features_of(in);
    memcpy(rows, vals, n * want * sizeof *rows);
    if (in->mean && in->std) {
        dataset d = {.rows = n, .cols = want, .x = rows};
        dataset_standardize(&d, in->mean, in->std);
    }
    return 0;
}

static int images_check(const predict_info *in, const int64_t *dims, int ndim, char *err)
{
    int gray = in->in_c == 1;
    int ok = (ndim == 3 && dims[2] == in->in_c) || (gray && ndim == 2);
    for (int d = 0; ok && d < 2; d++)
        ok = dims[d] >= 1 && dims[d] <= IMAGES_MAX_DIM;
    if (!ok)
        return err_set(err, -EINVAL,
                       "each instance must be an image of [height, width, %d]%s (height and width "
                       "1..%d; it is resized to %d×%d)",
                       in->in_c, gray ? " or [height, width]" : "", IMAGES_MAX_DIM, in->in_h,
                       in->in_w);
    return 0;
}

static int images_prepare(const predict_info *in, const float *vals, size_t n, const int64_t *dims,
                          float *rows, char *err)
{
    if (n > INT_MAX)
        return err_set(err, -E2BIG, "too many images in one call");
    int32_t *idx = malloc((n + 1) * sizeof *idx);
    if (!idx)
        return err_set(err, -ENOMEM, "out of memory preparing %zu images", n);
    for (size_t i = 0; i < n; i++)
        idx[i] = (int32_t)i;
    kern_image g = {.src_u8 = 0,
                    .n_src = (int)n,
                    .sh = (int)dims[0],
                    .sw = (int)dims[1],
                    .c = in->in_c,
                    .dh = in->in_h,
                    .dw = in->in_w,
                    .scale = in->pixel_scale};
    ref_image_batch(&g, (int)n, vals, idx, 0, in->mean, in->std, rows);
    free(idx);
    return 0;
}

/* Training refuses inf and NaN in its data (dataset.h); so do requests. */
static int finite_check(const float *vals, size_t n, const int64_t *dims, int ndim, char *err)
{
    size_t per = 1;
    for (int d = 0; d < ndim; d++)
        per *= (size_t)dims[d];
    for (size_t i = 0; i < n * per; i++)
        if (!isfinite(vals[i]))
            return err_set(err, -EINVAL, "instance %zu holds a value that is not a finite number",
                           i / per);
    return 0;
}

int predict_prepare(const predict_info *in, const float *vals, size_t n, const int64_t *dims,
                    int ndim, float *rows, char *err)
{
    if (!in || (n && (!vals || !rows)) || (ndim > 0 && !dims) || ndim < 0)
        return err_set(err, -EINVAL, "predict_prepare: bad arguments");
    if (n == 0)
        return 0;
    int rc = in->image ? images_check(in, dims, ndim, err) : features_check(in, dims, ndim, err);
    if (rc == 0)
        rc = finite_check(vals, n, dims, ndim, err);
    if (rc < 0)
        return rc;
    return in->image ? images_prepare(in, vals, n, dims, rows, err)
                     : features_prepare(in, vals, n, rows);
}
