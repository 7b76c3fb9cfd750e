/* fuzz_images: libFuzzer target for the image dataset readers (data/images.c, tar.c, npz.c,
 * zinflate.c, decode.c, images_folder.c).
 *
 * Input: byte 0 modulo 6 is the job format handed to images_load() (0 CSV, refused at once;
 * 1 CIFAR-10, 2 MNIST, 3 a tar of .npy files, 4 npz, 5 image folders); the rest is the
 * dataset's bytes, passed in an exact-size copy so that a read past the end is caught.
 * Properties, on success: a training set of n >= 1 images with h, w, c in 1..IMAGES_MAX_DIM,
 * pixels and labels there, every label in [0, n_classes), 1 <= n_classes <= 65536, class names
 * there, non-empty and distinct; float32 pixels finite; a test set, when there, of the same
 * h × w × c, dtype and classes. On failure: a negative errno, a message, no sets. Never a crash
 * or a leak. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/err.h"
#include "data/dataset.h"
#include "data/images.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static volatile unsigned fuzz_sink; /* keeps the pixel reads from being optimised away */

static void fuzz_fail(const char *what)
{
    fprintf(stderr, "fuzz_images: %s\n", what);
    abort();
}

static void fuzz_check(const image_set *s, const image_set *train)
{
    if (s->n < 1 || s->h < 1 || s->w < 1 || s->c < 1 || s->h > IMAGES_MAX_DIM ||
        s->w > IMAGES_MAX_DIM || s->c > IMAGES_MAX_DIM || !s->pixels || !s->labels)
        fuzz_fail("an empty set, a dimension out of range or missing arrays");
    if (s->n_classes < 1 || s->n_classes > DATASET_MAX_CLASSES || !s->class_names)
        fuzz_fail("classes out of range");
    for (size_t i = 0; i < s->n; i++) {
        if (s->labels[i] < 0 || s->labels[i] >= s->n_classes)
            fuzz_fail("a label is out of range");
    }
    size_t values = s->n * (size_t)s->h * (size_t)s->w * (size_t)s->c;
    if (s->dtype == IMAGES_F32) {
        for (size_t i = 0; i < values; i++) {
            if (!isfinite(((const float *)s->pixels)[i]))
                fuzz_fail("a float pixel is not finite");
        }
    } else if (s->dtype == IMAGES_U8) {
        unsigned sum = 0; /* every byte readable (ASan checks) */
        for (size_t i = 0; i < values; i++)
            sum += ((const unsigned char *)s->pixels)[i];
        fuzz_sink = sum;
    } else {
        fuzz_fail("an unknown dtype");
    }
    for (int c = 0; c < s->n_classes; c++) {
        if (!s->class_names[c] || !s->class_names[c][0])
            fuzz_fail("a class has no name");
        for (int d = 0; d < c && s->n_classes <= 1024; d++) {
            if (strcmp(s->class_names[c], s->class_names[d]) == 0)
                fuzz_fail("two classes have the same name");
        }
    }
    if (train && (s->h != train->h || s->w != train->w || s->c != train->c ||
                  s->dtype != train->dtype || s->n_classes != train->n_classes))
        fuzz_fail("the test set's shape, dtype or classes differ from the training set's");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    int format = data[0] % 6;
    size_t len = size - 1;
    char *bytes = malloc(len ? len : 1);
    if (!bytes)
        abort();
    memcpy(bytes, data + 1, len);
    image_set *train = NULL, *test = NULL;
    char err[ERR_LEN] = "";
    int rc = images_load(bytes, len, format, &train, &test, err);
    if (rc == 0) {
        if (!train)
            fuzz_fail("success without a training set");
        fuzz_check(train, NULL);
        if (test)
            fuzz_check(test, train);
        image_set_free(train);
        image_set_free(test);
    } else if (rc > 0 || !err[0] || train || test) {
        fuzz_fail("a failure without a negative code and a message, or with a set");
    }
    free(bytes);
    return 0;
}
