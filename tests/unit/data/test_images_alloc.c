/* Fault tests of data/images: each format (a CIFAR-10 tar with class names and a test batch,
 * an MNIST tar with gzipped members and a test set, an npz with stored and deflated members and
 * a test set, a tar of .npy files, an image-folder tar of PNG and JPEG files) loaded with the n-th
 * allocation failing for every n until a run completes untouched. A failing load must return
 * -ENOMEM with a message and no sets; a completed one must give the same sets as the untouched run;
 * ASan's leak check sees whatever a failing path forgot to free. (libpng's and libjpeg's own
 * allocations are theirs, not counted: only our references to malloc are wrapped.) */
#include "data/images.h"

#include <errno.h>

#include "tests/unit/alloc_fail.h"
#include "tests/unit/check.h"
#include "tests/unit/data/images_build.h"
#include "util/err.h"
#include "data/images_priv.h"

/* A hash of a set's every field, pixels, labels and class names. */
static uint64_t set_hash(const image_set *s)
{
    uint64_t h = 1469598103934665603ull;
    if (!s)
        return h;
    size_t bytes = s->n * (size_t)(s->h * s->w * s->c) * (s->dtype == IMAGES_F32 ? 4 : 1);
    const unsigned char *parts[2] = {s->pixels, (const unsigned char *)s->labels};
    size_t lens[2] = {bytes, s->n * sizeof *s->labels};
    for (int k = 0; k < 2; k++)
        for (size_t i = 0; i < lens[k]; i++)
            h = (h ^ parts[k][i]) * 1099511628211ull;
    for (int i = 0; i < s->n_classes; i++)
        for (const char *c = s->class_names[i]; *c; c++)
            h = (h ^ (unsigned char)*c) * 1099511628211ull;
    return h ^ (s->n << 20) ^ ((uint64_t)s->h << 8) ^ (uint64_t)s->c ^ (uint64_t)s->n_classes;
}

/* Loads b in format with every allocation failing in turn; prints the failure points. */
static void fail_each(const char *what, const dynbuf *b, int format, long min_points)
{
    char err[ERR_LEN];
    image_set *tr = NULL, *te = NULL;
    CHECK_INT(images_load(dynbuf_str(b), dynbuf_len(b), format, &tr, &te, err), 0);
    uint64_t want_tr = set_hash(tr), want_te = set_hash(te);
    image_set_free(tr);
    image_set_free(te);
    long points = 0;
    ALLOC_FAIL_LOOP(&points, {
        tr = te = NULL;
        err[0] = '\0';
        int rc = images_load(dynbuf_str(b), dynbuf_len(b), format, &tr, &te, err);
        if (alloc_fail_off()) {
            CHECK_INT(rc, -ENOMEM);
            CHECK(err[0] != '\0');
            CHECK(tr == NULL && te == NULL);
        } else {
            CHECK_INT(rc, 0);
            CHECK(set_hash(tr) == want_tr && set_hash(te) == want_te);
        }
        image_set_free(tr);
        image_set_free(te);
    });
    printf("%s: %ld failure points\n", what, points);
    CHECK(points >= min_points);
}

static void test_cifar(dynbuf *b)
{
    dynbuf f;
    dynbuf_init(&f, IB_MAX);
    ib_cifar(&f, 0, 2, -1);
    ib_tar_file(b, "c/data_batch_1.bin", dynbuf_str(&f), dynbuf_len(&f));
    ib_tar_file(b, "c/test_batch.bin", dynbuf_str(&f), dynbuf_len(&f));
    const char meta[] = "a\nb\nc\nd\ne\nf\ng\nh\ni\nj\n";
    ib_tar_file(b, "c/batches.meta.txt", meta, sizeof meta - 1);
    ib_tar_end(b);
    dynbuf_free(&f);
    /* names ×10, file list, train set ×3 + names, test set ×3 + names */
    fail_each("cifar", b, IMAGES_FMT_CIFAR10, 30);
}

static void test_mnist(dynbuf *b)
{
    dynbuf f, z;
    dynbuf_init(&f, IB_MAX);
    dynbuf_init(&z, IB_MAX);
    ib_idx_images(&f, 3, 4, 4);
    ib_deflate(&z, dynbuf_str(&f), dynbuf_len(&f), 1);
    ib_tar_file(b, "train-images-idx3-ubyte.gz", dynbuf_str(&z), dynbuf_len(&z));
    ib_tar_file(b, "t10k-images-idx3-ubyte", dynbuf_str(&f), dynbuf_len(&f));
    dynbuf_reset(&f);
    ib_idx_labels(&f, 3, 10);
    ib_tar_file(b, "train-labels-idx1-ubyte", dynbuf_str(&f), dynbuf_len(&f));
    ib_tar_file(b, "t10k-labels-idx1-ubyte", dynbuf_str(&f), dynbuf_len(&f));
    ib_tar_end(b);
    dynbuf_free(&f);
    dynbuf_free(&z);
    fail_each("mnist", b, IMAGES_FMT_MNIST, 8);
}

static void npy_member(ib_zip *z, const char *name, const char *descr, const uint64_t *shape,
                       int ndim, const void *p, size_t n, int method)
{
    dynbuf f;
    dynbuf_init(&f, IB_MAX);
    ib_npy(&f, descr, shape, ndim, p, n);
    ib_zip_add(z, name, dynbuf_str(&f), dynbuf_len(&f), method);
    dynbuf_free(&f);
}

static void test_npz(dynbuf *b)
{
    ib_zip z;
    float px[2 * 3 * 3];
    for (int i = 0; i < 18; i++)
        px[i] = (float)i;
    int64_t y[2] = {1, 2};
    ib_zip_init(&z);
    npy_member(&z, "x_train.npy", "<f4", (uint64_t[]){2, 3, 3}, 3, px, sizeof px, 8);
    npy_member(&z, "y_train.npy", "<i8", (uint64_t[]){2}, 1, y, sizeof y, 0);
    npy_member(&z, "x_test.npy", "<f4", (uint64_t[]){2, 3, 3}, 3, px, sizeof px, 0);
    npy_member(&z, "y_test.npy", "<i8", (uint64_t[]){2}, 1, y, sizeof y, 8);
    ib_zip_end(&z, b);
    fail_each("npz", b, IMAGES_FMT_NPZ, 10);
}

static void test_npy_tar(dynbuf *b)
{
    dynbuf f;
    unsigned char px[12] = {1, 2, 3};
    int32_t y[3] = {2, 1, 0};
    dynbuf_init(&f, IB_MAX);
    ib_npy(&f, "|u1", (uint64_t[]){3, 2, 2}, 3, px, sizeof px);
    ib_tar_file(b, "x.npy", dynbuf_str(&f), dynbuf_len(&f));
    dynbuf_reset(&f);
    ib_npy(&f, "<i4", (uint64_t[]){3, 1}, 2, y, sizeof y);
    ib_tar_file(b, "y.npy", dynbuf_str(&f), dynbuf_len(&f));
    ib_tar_end(b);
    dynbuf_free(&f);
    fail_each("npy tar", b, IMAGES_FMT_NPY, 4);
}

static void test_folders(dynbuf *b)
{
    unsigned char px[5 * 4 * 3];
    const char *names[] = {"z/cats/1.png",  "z/dogs/2.jpg",  "z/cats/3.png",  "z/ants/4.png",
                           "z/bees/5.png",  "z/cows/6.png",  "z/elks/7.png",  "z/fish/8.png",
                           "z/gnus/9.png",  "z/hens/10.png", "z/ibis/11.png", "z/jays/12.png",
                           "z/koi/13.png",  "z/lynx/14.png", "z/mice/15.png", "z/newt/16.png",
                           "z/owls/17.png", "z/pigs/18.png"}; /* 17 classes: the table grows */
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        dynbuf f;
        dynbuf_init(&f, IB_MAX);
        for (size_t k = 0; k < sizeof px; k++)
            px[k] = (unsigned char)(k * 5 + i);
        if (strstr(names[i], ".jpg"))
            ib_jpeg(&f, 5, 4, 3, px);
        else
            ib_png(&f, 5, 4, PNG_COLOR_TYPE_RGB, 8, 0, px);
        ib_tar_file(b, names[i], dynbuf_str(&f), dynbuf_len(&f));
        dynbuf_free(&f);
    }
    ib_tar_end(b);
    fail_each("image folders", b, IMAGES_FMT_FOLDERS, 10);
}

int main(void)
{
    CHECK_INT(alloc_fail_init(), 0);
    dynbuf b;
    dynbuf_init(&b, IB_MAX);
    test_cifar(&b);
    dynbuf_reset(&b);
    test_mnist(&b);
    dynbuf_reset(&b);
    test_npz(&b);
    dynbuf_reset(&b);
    test_npy_tar(&b);
    dynbuf_reset(&b);
    test_folders(&b);
    dynbuf_free(&b);
    return check_exit();
}
