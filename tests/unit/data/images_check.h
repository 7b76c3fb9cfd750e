/* images_check: what the data/ image-format tests share (test_images_tar.c,
 * test_images_cifar_mnist.c, test_images_npz.c, test_images_folders.c): images_load() on an
 * archive built in memory (tests/unit/data/images_build.h), the expected failure with its
 * message, and the pixel-for-pixel comparison. Header-only: each test executable includes it
 * once. */
#ifndef TRAINYARD_TESTS_UNIT_DATA_IMAGES_CHECK_H
#define TRAINYARD_TESTS_UNIT_DATA_IMAGES_CHECK_H

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "data/images.h"
#include "data/images_priv.h"
#include "data/tar.h"
#include "tests/unit/check.h"
#include "tests/unit/data/images_build.h"
#include "util/err.h"

static char err[ERR_LEN];

/* images_load() on a dynbuf, with the sets and the code; the outputs stay NULL on failure. */
static inline int load(const dynbuf *b, int format, image_set **train, image_set **test)
{
    *train = *test = NULL;
    err[0] = '\0';
    /* An exact-size copy, so ASan sees a read past the end. */
    size_t n = dynbuf_len(b);
    char *copy = malloc(n ? n : 1);
    if (!copy)
        abort();
    memcpy(copy, dynbuf_str(b), n);
    int rc = images_load(copy, n, format, train, test, err);
    free(copy);
    if (rc < 0)
        CHECK(*train == NULL && *test == NULL && err[0]);
    return rc;
}

/* Checks that loading fails with code and a message that contains want. */
static inline void expect_error(const dynbuf *b, int format, int code, const char *want)
{
    image_set *tr, *te;
    CHECK_INT(load(b, format, &tr, &te), code);
    if (!strstr(err, want)) {
        fprintf(stderr, "message \"%s\" lacks \"%s\"\n", err, want);
        check_failures++;
    }
    image_set_free(tr);
    image_set_free(te);
}

/* Whether image k of s holds ib_pixel(first + k, ...) for every pixel. */
static inline int pixels_match(const image_set *s, size_t k, size_t first)
{
    const unsigned char *p = (const unsigned char *)s->pixels + k * (size_t)(s->h * s->w * s->c);
    for (int y = 0; y < s->h; y++)
        for (int x = 0; x < s->w; x++)
            for (int ch = 0; ch < s->c; ch++)
                if (p[(y * s->w + x) * s->c + ch] != ib_pixel(first + k, y, x, ch))
                    return 0;
    return 1;
}

#endif
