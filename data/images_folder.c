/* images_folder: a tar of PNG/JPEG images in one folder per class (images.h says what is read).
 *
 * Three walks over the tar, which cost little beside decoding: the first counts the images, the
 * second records each image's bytes and its folder's class (names kept once each, found through
 * an open-addressing hash table), the third decodes each image into its place, with the tar
 * reader's name for messages. Between the second and third walks the classes are sorted by name
 * and each image's provisional class number is replaced by its rank.
 *
 * Every image must have the first one's shape: each header is read (decode_header(), which
 * decodes no pixels) and compared before its pixels are decoded into the set. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "util/array.h"
#include "util/err.h"
#include "data/dataset.h"
#include "data/decode.h"
#include "data/images_priv.h"
#include "data/tar.h"

/* The bytes of one image and its class's provisional number (then its rank). */
typedef struct folder_image {
    const char *data;
    size_t size;
    int32_t cls;
} folder_image;

/* The distinct class names in order of first sight, and a hash table of their indices + 1
 * (0: empty slot; cap a power of two, at least twice the names). */
typedef struct folder_classes {
    char **names;
    int n;
    size_t names_cap;
    int32_t *slots;
    size_t cap;
} folder_classes;

/* Whether a tar member is an image to read: a .png, .jpg or .jpeg ending, any case, and a
 * base name that does not start with '.'. */
static int folder_is_image(const char *path)
{
    const char *base = images_basename(path), *dot = strrchr(base, '.');
    if (base[0] == '.' || !dot)
        return 0;
    return strcasecmp(dot, ".png") == 0 || strcasecmp(dot, ".jpg") == 0 ||
           strcasecmp(dot, ".jpeg") == 0;
}

static uint64_t folder_hash(const char *s, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
    return h;
}

static int folder_rehash(folder_classes *fc, size_t cap)
{
    int32_t *slots = calloc(cap, sizeof *slots);
    if (!slots)
        return -ENOMEM;
    for (int i = 0; i < fc->n; i++) {
        size_t k = folder_hash(fc->names[i], strlen(fc->names[i])) & (cap - 1);
        while (slots[k])
            k = (k + 1) & (cap - 1);
        slots[k] = i + 1;
    }
    free(fc->slots);
    fc->slots = slots;
    fc->cap = cap;
    return 0;
}

/* The class number of the folder name[0..n), added when new. */
static int folder_class(folder_classes *fc, const char *name, size_t n, int32_t *cls, char *err)
{
    if (!fc->slots && folder_rehash(fc, 64) < 0)
        return err_set(err, -ENOMEM, "out of memory for class names");
    size_t k = folder_hash(name, n) & (fc->cap - 1);
    for (; fc->slots[k]; k = (k + 1) & (fc->cap - 1)) {
        const char *have = fc->names[fc->slots[k] - 1];
        if (strlen(have) == n && memcmp(have, name, n) == 0) {
            *cls = fc->slots[k] - 1;
            return 0;
        }
    }
    if (fc->n == DATASET_MAX_CLASSES)
        return err_set(err, -EINVAL, "more than %d class folders", DATASET_MAX_CLASSES);
    if (n > DATASET_MAX_LABEL)
        return err_set(err, -EINVAL, "a class folder name of %zu bytes, over %d", n,
                       DATASET_MAX_LABEL);
    if (ARRAY_GROW(fc->names, fc->names_cap, (size_t)fc->n + 1, DATASET_MAX_CLASSES) < 0)
        return err_set(err, -ENOMEM, "out of memory for class names");
    char *copy = strndup(name, n);
    if (!copy)
        return err_set(err, -ENOMEM, "out of memory for class names");
    if ((size_t)(fc->n + 1) * 2 > fc->cap && folder_rehash(fc, fc->cap * 2) < 0) {
        free(copy);
        return err_set(err, -ENOMEM, "out of memory for class names");
    }
    fc->names[fc->n] = copy;
    k = folder_hash(name, n) & (fc->cap - 1);
    while (fc->slots[k])
        k = (k + 1) & (fc->cap - 1);
    fc->slots[k] = ++fc->n;
    *cls = fc->n - 1;
    return 0;
}

static void folder_classes_free(folder_classes *fc)
{
    for (int i = 0; i < fc->n; i++)
        free(fc->names[i]);
    free(fc->names);
    free(fc->slots);
}

/* Walks the tar's images: with images NULL counts them into *n; else records each with its
 * provisional class, and the first one's name (cut at 255 bytes) into first[256]. */
static int folder_walk(const char *data, size_t len, folder_image *images, folder_classes *fc,
                       char *first, size_t *n, char *err)
{
    tar_reader r;
    tar_entry e;
    size_t count = 0;
    int rc;
    tar_reader_init(&r, data, len);
    for (;;) {
        rc = tar_reader_next(&r, &e, err);
        if (rc <= 0)
            break;
        if (!folder_is_image(e.name))
            continue;
        const char *base = images_basename(e.name);
        if (base == e.name)
            return err_set(err, -EINVAL,
                           "image %s is not in a class folder (the archive must hold "
                           "class/image.png)",
                           e.name);
        if (images) {
            if (count == 0)
                snprintf(first, 256, "%s", e.name);
            const char *folder = base - 1;
            while (folder > e.name && folder[-1] != '/')
                folder--;
            images[count] = (folder_image){e.data, e.size, 0};
            rc = folder_class(fc, folder, (size_t)(base - 1 - folder), &images[count].cls, err);
            if (rc < 0)
                return rc;
        }
        count++;
    }
    if (rc < 0)
        return rc;
    *n = count;
    return 0;
}

/* Sorts the class names and turns each image's provisional class into the name's rank. */
static int folder_rank(folder_classes *fc, folder_image *images, size_t n, char *err)
{
    int32_t *rank = malloc((size_t)fc->n * sizeof *rank);
    char **sorted = malloc((size_t)fc->n * sizeof *sorted);
    if (!rank || !sorted) {
        free(rank);
        free(sorted);
        return err_set(err, -ENOMEM, "out of memory sorting class names");
    }
    /* Sort indices by name: an insertion into place per class would be quadratic, so sort a copy
     * of the pointers and find each one's rank by binary search. */
    memcpy(sorted, fc->names, (size_t)fc->n * sizeof *sorted);
    qsort(sorted, (size_t)fc->n, sizeof *sorted, images_strcmp);
    for (int i = 0; i < fc->n; i++) {
        char **at = bsearch(&fc->names[i], sorted, (size_t)fc->n, sizeof *sorted, images_strcmp);
        rank[i] = (int32_t)(at - sorted);
    }
    for (size_t i = 0; i < n; i++)
        images[i].cls = rank[images[i].cls];
    memcpy(fc->names, sorted, (size_t)fc->n * sizeof *sorted);
    free(rank);
    free(sorted);
    return 0;
}

/* Decodes every image into s, in the tar's order (the walk gives each one's name). */
static int folder_decode(const char *data, size_t len, const folder_image *images,
                         const char *first, image_set *s, char *err)
{
    tar_reader r;
    tar_entry e;
    decode_shape want = {s->h, s->w, s->c}, got;
    size_t i = 0, per = (size_t)s->h * (size_t)s->w * (size_t)s->c;
    tar_reader_init(&r, data, len);
    while (i < s->n && tar_reader_next(&r, &e, err) > 0) {
        if (!folder_is_image(e.name))
            continue;
        int rc = decode_header(images[i].data, images[i].size, e.name, &got, err);
        if (rc < 0)
            return rc;
        if (got.h != want.h || got.w != want.w || got.c != want.c)
            return err_set(err, -EINVAL, "%s is %d×%d×%d, but the first image, %s, is %d×%d×%d",
                           e.name, got.h, got.w, got.c, first, want.h, want.w, want.c);
        rc = decode_image(images[i].data, images[i].size, e.name, &want,
                          (unsigned char *)s->pixels + i * per, err);
        if (rc < 0)
            return rc;
        s->labels[i] = images[i].cls;
        i++;
    }
    return 0;
}

int images_folder_load(const char *data, size_t len, image_set **out, char *err)
{
    folder_classes fc = {0};
    folder_image *images = NULL;
    image_set *s = NULL;
    size_t n = 0;
    decode_shape shape;
    char first[256];
    int rc = folder_walk(data, len, NULL, NULL, NULL, &n, err);
    if (rc < 0)
        return rc;
    if (n == 0)
        return err_set(err, -EINVAL,
                       "no .png, .jpg or .jpeg image in the archive (it must hold "
                       "class/image.png)");
    images = malloc(n * sizeof *images);
    if (!images)
        return err_set(err, -ENOMEM, "out of memory listing %zu images", n);
    rc = folder_walk(data, len, images, &fc, first, &n, err);
    if (rc == 0)
        rc = folder_rank(&fc, images, n, err);
    if (rc < 0)
        goto out;
    rc = decode_header(images[0].data, images[0].size, first, &shape, err);
    if (rc == 0)
        rc = images_set_new(n, shape.h, shape.w, shape.c, IMAGES_U8, "the image archive", &s, err);
    if (rc == 0)
        rc = images_set_classes(s, fc.n, fc.names, err);
    if (rc == 0)
        rc = folder_decode(data, len, images, first, s, err);
    if (rc < 0)
        goto out;
    *out = s;
    s = NULL;
out:
    image_set_free(s);
    folder_classes_free(&fc);
    free(images);
    return rc;
}
