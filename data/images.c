/* images: images_load() by format, the sets' allocation and classes (images_priv.h), and the two
 * fixed-layout formats, CIFAR-10 binary and MNIST IDX. NumPy archives are read in npz.c, image
 * folders in images_folder.c.
 *
 * CIFAR-10: each 3073-byte record is a label byte and three 32×32 planes (R, G, B); the set is
 * stored NHWC, so record r's byte 1 + ch·1024 + y·32 + x goes to pixel (r, y, x, ch). A tar's
 * data_batch_*.bin files are concatenated in name order (strverscmp: data_batch_10 after _9).
 *
 * MNIST IDX: big-endian 32-bit fields; images 0x00000803, n, rows, cols, then n·rows·cols
 * bytes; labels 0x00000801, n, then n bytes. A file's length must be exactly what its header
 * says. Inside a tar, a ".gz" member is inflated first, to the size its gzip trailer gives
 * (capped at DATASET_MAX_VALUES + 16 bytes).
 *
 * Invariant: every function writes its outputs only on success; a failure frees what it made. */
#include "data/images.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/err.h"
#include "data/dataset.h"
#include "data/images_priv.h"
#include "data/tar.h"
#include "data/zinflate.h"

#define CIFAR_SIDE        32
#define CIFAR_PLANE       (CIFAR_SIDE * CIFAR_SIDE)
#define CIFAR_RECORD      (1 + 3 * CIFAR_PLANE)
#define CIFAR_CLASSES     10  /* without batches.meta.txt */
#define CIFAR_MAX_CLASSES 256 /* a label is one byte */
#define CIFAR_MAX_FILES   1024

void image_set_free(image_set *s)
{
    if (!s)
        return;
    if (s->class_names) {
        for (int i = 0; i < s->n_classes; i++)
            free(s->class_names[i]);
        free(s->class_names);
    }
    free(s->pixels);
    free(s->labels);
    free(s);
}

int images_set_new(size_t n, int h, int w, int c, int dtype, const char *what, image_set **out,
                   char *err)
{
    if (n == 0)
        return err_set(err, -EINVAL, "%s holds no images", what);
    if (h < 1 || w < 1 || c < 1 || h > IMAGES_MAX_DIM || w > IMAGES_MAX_DIM || c > IMAGES_MAX_DIM)
        return err_set(err, -EINVAL, "%s: images of %d×%d×%d; each dimension must be 1 to %d", what,
                       h, w, c, IMAGES_MAX_DIM);
    size_t per = (size_t)h * (size_t)w * (size_t)c;
    if (n > DATASET_MAX_VALUES / per)
        return err_set(err, -EFBIG, "%s: %zu images of %d×%d×%d are more than %u values", what, n,
                       h, w, c, DATASET_MAX_VALUES);
    size_t bytes = n * per * (dtype == IMAGES_F32 ? sizeof(float) : 1);
    image_set *s = calloc(1, sizeof *s);
    if (!s)
        return err_set(err, -ENOMEM, "out of memory for %s", what);
    s->pixels = malloc(bytes);
    s->labels = malloc(n * sizeof *s->labels);
    if (!s->pixels || !s->labels) {
        image_set_free(s);
        return err_set(err, -ENOMEM, "out of memory for %s (%zu bytes)", what, bytes);
    }
    s->n = n;
    s->h = h;
    s->w = w;
    s->c = c;
    s->dtype = dtype;
    *out = s;
    return 0;
}

int images_set_classes(image_set *s, int n_classes, char *const *names, char *err)
{
    char **v = calloc((size_t)n_classes, sizeof *v);
    if (!v)
        return err_set(err, -ENOMEM, "out of memory for class names");
    for (int i = 0; i < n_classes; i++) {
        char num[16];
        snprintf(num, sizeof num, "%d", i);
        v[i] = strdup(names ? names[i] : num);
        if (!v[i]) {
            for (int j = 0; j < i; j++)
                free(v[j]);
            free(v);
            return err_set(err, -ENOMEM, "out of memory for class names");
        }
    }
    s->class_names = v;
    s->n_classes = n_classes;
    return 0;
}

int images_strcmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

const char *images_basename(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

/* ---- CIFAR-10 ------------------------------------------------------------------------------ */

/* One CIFAR file's bytes: a view into the data, and its name (the base name inside a tar,
 * cut at 127 bytes) for messages. */
typedef struct cifar_file {
    char name[128];
    const char *data;
    size_t len;
} cifar_file;
/* Checks each file's length and labels (below n_classes); *records gets their total. */
static int cifar_check(const cifar_file *f, int nf, int n_classes, size_t *records, char *err)
{
    size_t total = 0;
    for (int i = 0; i < nf; i++) {
        size_t n = f[i].len / CIFAR_RECORD, rest = f[i].len % CIFAR_RECORD;
        if (rest)
            return err_set(err, -EINVAL, "%s: truncated record %zu: %zu of %d bytes", f[i].name,
                           n + 1, rest, CIFAR_RECORD);
        if (n == 0)
            return err_set(err, -EINVAL, "%s holds no records", f[i].name);
        for (size_t r = 0; r < n; r++) {
            unsigned char label = (unsigned char)f[i].data[r * CIFAR_RECORD];
            if (label >= n_classes && n_classes == CIFAR_CLASSES)
                return err_set(err, -EINVAL,
                               "%s: record %zu has label %u; CIFAR-10 labels are 0 to 9", f[i].name,
                               r + 1, label);
            if (label >= n_classes)
                return err_set(err, -EINVAL,
                               "%s: record %zu has label %u; batches.meta.txt names %d classes, "
                               "so labels are 0 to %d",
                               f[i].name, r + 1, label, n_classes, n_classes - 1);
        }
        total += n;
    }
    *records = total;
    return 0;
}

/* Makes a set of the files' records, in order, with n_classes class names (or names NULL: "0",
 * "1", ...). */
static int cifar_set(const cifar_file *f, int nf, int n_classes, char *const *names,
                     const char *what, image_set **out, char *err)
{
    size_t n = 0;
    image_set *s = NULL;
    int rc = cifar_check(f, nf, n_classes, &n, err);
    if (rc < 0)
        return rc;
    rc = images_set_new(n, CIFAR_SIDE, CIFAR_SIDE, 3, IMAGES_U8, what, &s, err);
    if (rc < 0)
        return rc;
    rc = images_set_classes(s, n_classes, names, err);
    if (rc < 0) {
        image_set_free(s);
        return rc;
    }
    size_t k = 0;
    unsigned char *px = s->pixels;
    for (int i = 0; i < nf; i++) {
        for (size_t r = 0; r < f[i].len / CIFAR_RECORD; r++, k++) {
            const unsigned char *rec = (const unsigned char *)f[i].data + r * CIFAR_RECORD;
            unsigned char *dst = px + k * 3 * CIFAR_PLANE;
            s->labels[k] = rec[0];
            for (int p = 0; p < CIFAR_PLANE; p++) {
                dst[3 * p] = rec[1 + p];
                dst[3 * p + 1] = rec[1 + CIFAR_PLANE + p];
                dst[3 * p + 2] = rec[1 + 2 * CIFAR_PLANE + p];
            }
        }
    }
    *out = s;
    return 0;
}

/* Parses batches.meta.txt: one class name per non-empty line (trailing spaces and CR trimmed),
 * 2 to CIFAR_MAX_CLASSES of them (CIFAR-10's own file names 10; a CIFAR-format set of other
 * classes names its own), into names[], malloc'd; *count gets how many. */
static int cifar_meta(const char *d, size_t len, char *names[CIFAR_MAX_CLASSES], int *count,
                      char *err)
{
    int n = 0, rc = 0;
    size_t i = 0;
    while (i < len) {
        size_t j = i;
        while (j < len && d[j] != '\n')
            j++;
        size_t e = j;
        while (e > i && (d[e - 1] == '\r' || d[e - 1] == ' ' || d[e - 1] == '\t'))
            e--;
        if (e > i) {
            if (n == CIFAR_MAX_CLASSES) {
                rc = err_set(err, -EINVAL, "batches.meta.txt names more than %d classes",
                             CIFAR_MAX_CLASSES);
                goto fail;
            }
            if (e - i > DATASET_MAX_LABEL || memchr(d + i, '\0', e - i)) {
                rc = err_set(err, -EINVAL,
                             "batches.meta.txt: class name %d is over %d bytes or holds a NUL",
                             n + 1, DATASET_MAX_LABEL);
                goto fail;
            }
            names[n] = strndup(d + i, e - i);
            if (!names[n]) {
                rc = err_set(err, -ENOMEM, "out of memory for class names");
                goto fail;
            }
            for (int k = 0; k < n; k++)
                if (strcmp(names[k], names[n]) == 0) {
                    rc = err_set(err, -EINVAL,
                                 "batches.meta.txt names class '%.64s' twice (classes %d and %d)",
                                 names[n], k + 1, n + 1);
                    n++; /* freed below */
                    goto fail;
                }
            n++;
        }
        i = j + 1;
    }
    if (n >= 2) {
        *count = n;
        return 0;
    }
    rc = err_set(err, -EINVAL, "batches.meta.txt names %d class%s; it needs at least 2", n,
                 n == 1 ? "" : "es");
fail:
    for (int k = 0; k < n; k++) {
        free(names[k]);
        names[k] = NULL;
    }
    return rc;
}

static int cifar_file_cmp(const void *a, const void *b)
{
    return strverscmp(((const cifar_file *)a)->name, ((const cifar_file *)b)->name);
}

/* A tar: data_batch*.bin the training set, test_batch.bin the test set, batches.meta.txt the
 * class names. */
static int cifar_load_tar(const char *data, size_t len, image_set **train, image_set **test,
                          char *err)
{
    tar_reader r;
    tar_entry e;
    cifar_file *files = NULL, test_file;
    char *names[CIFAR_MAX_CLASSES] = {0};
    int nf = 0, has_test = 0, has_meta = 0, n_classes = CIFAR_CLASSES, rc;
    image_set *tr = NULL, *te = NULL;
    tar_reader_init(&r, data, len);
    for (;;) {
        rc = tar_reader_next(&r, &e, err);
        if (rc <= 0)
            break;
        const char *base = images_basename(e.name);
        size_t bl = strlen(base);
        cifar_file *f = NULL;
        if (strcmp(base, "batches.meta.txt") == 0) {
            if (has_meta) {
                rc = err_set(err, -EINVAL, "two batches.meta.txt files in the archive");
                goto out;
            }
            rc = cifar_meta(e.data, e.size, names, &n_classes, err);
            if (rc < 0)
                goto out;
            has_meta = 1;
        } else if (strcmp(base, "test_batch.bin") == 0) {
            if (has_test) {
                rc = err_set(err, -EINVAL, "two test_batch.bin files in the archive");
                goto out;
            }
            f = &test_file;
            has_test = 1;
        } else if (strncmp(base, "data_batch", 10) == 0 && bl > 4 &&
                   strcmp(base + bl - 4, ".bin") == 0) {
            if (nf == CIFAR_MAX_FILES) {
                rc = err_set(err, -EINVAL, "more than %d data_batch files in the archive",
                             CIFAR_MAX_FILES);
                goto out;
            }
            if (!files) {
                files = malloc(CIFAR_MAX_FILES * sizeof *files);
                if (!files) {
                    rc = err_set(err, -ENOMEM, "out of memory listing the archive");
                    goto out;
                }
            }
            f = &files[nf++];
        }
        if (f) {
            snprintf(f->name, sizeof f->name, "%s", base);
            f->data = e.data;
            f->len = e.size;
        }
    }
    if (rc < 0)
        goto out;
    if (nf == 0) {
        rc = err_set(err, -EINVAL, "no data_batch_N.bin file in the CIFAR-10 archive");
        goto out;
    }
    qsort(files, (size_t)nf, sizeof *files, cifar_file_cmp);
    rc = cifar_set(files, nf, n_classes, has_meta ? names : NULL, "the CIFAR-10 training set", &tr,
                   err);
    if (rc < 0)
        goto out;
    if (has_test) {
        rc = cifar_set(&test_file, 1, n_classes, has_meta ? names : NULL, "test_batch.bin", &te,
                       err);
        if (rc < 0)
            goto out;
    }
    *train = tr;
    *test = te;
    tr = te = NULL;
out:
    for (int i = 0; i < CIFAR_MAX_CLASSES; i++)
        free(names[i]);
    free(files);
    image_set_free(tr);
    image_set_free(te);
    return rc;
}

static int cifar_load(const char *data, size_t len, image_set **train, image_set **test, char *err)
{
    if (tar_probe(data, len))
        return cifar_load_tar(data, len, train, test, err);
    cifar_file f = {.name = "CIFAR-10 data", .data = data, .len = len};
    image_set *s;
    int rc = cifar_set(&f, 1, CIFAR_CLASSES, NULL, "the CIFAR-10 data", &s, err);
    if (rc < 0)
        return rc;
    *train = s;
    *test = NULL;
    return 0;
}

/* ---- MNIST IDX ----------------------------------------------------------------------------- */

#define IDX_IMAGES 0x00000803u
#define IDX_LABELS 0x00000801u

/* The four files an MNIST tar may hold, by the base names they go by (with or without ".gz"). */
enum { MNIST_TRAIN_X, MNIST_TRAIN_Y, MNIST_TEST_X, MNIST_TEST_Y, MNIST_FILES };
static const char *const mnist_names[MNIST_FILES][2] = {
    {"train-images-idx3-ubyte", "train-images.idx3-ubyte"},
    {"train-labels-idx1-ubyte", "train-labels.idx1-ubyte"},
    {"t10k-images-idx3-ubyte", "t10k-images.idx3-ubyte"},
    {"t10k-labels-idx1-ubyte", "t10k-labels.idx1-ubyte"},
};

/* One file: its bytes (a view into the tar, or owned when it was inflated). */
typedef struct mnist_file {
    const char *data;
    size_t len;
    char *owned;
    int found;
} mnist_file;

static uint32_t idx_u32(const char *p)
{
    const unsigned char *u = (const unsigned char *)p;
    return (uint32_t)u[0] << 24 | (uint32_t)u[1] << 16 | (uint32_t)u[2] << 8 | u[3];
}

/* Which of the four files base is, or -1; *gz says whether it ends in ".gz". */
static int mnist_which(const char *base, int *gz)
{
    size_t bl = strlen(base);
    *gz = bl > 3 && strcmp(base + bl - 3, ".gz") == 0;
    size_t n = *gz ? bl - 3 : bl;
    for (int i = 0; i < MNIST_FILES; i++) {
        for (int k = 0; k < 2; k++) {
            if (strlen(mnist_names[i][k]) == n && memcmp(base, mnist_names[i][k], n) == 0)
                return i;
        }
    }
    return -1;
}

/* Checks an IDX file's magic and length for its kind; *n, *rows, *cols from its header. */
static int idx_header(const mnist_file *f, int which, uint32_t *n, uint32_t *rows, uint32_t *cols,
                      char *err)
{
    const char *name = mnist_names[which][0];
    int images = which == MNIST_TRAIN_X || which == MNIST_TEST_X;
    size_t head = images ? 16 : 8;
    uint32_t want = images ? IDX_IMAGES : IDX_LABELS;
    uint32_t magic = f->len >= 4 ? idx_u32(f->data) : 0;
    if (f->len >= 4 && magic != want)
        return err_set(err, -EINVAL, "%s: wrong magic 0x%08x, expected 0x%08x (IDX %s)", name,
                       magic, want, images ? "unsigned-byte images" : "unsigned-byte labels");
    if (f->len < head)
        return err_set(err, -EINVAL, "%s: truncated header: %zu of %zu bytes", name, f->len, head);
    *n = idx_u32(f->data + 4);
    *rows = images ? idx_u32(f->data + 8) : 1;
    *cols = images ? idx_u32(f->data + 12) : 1;
    if (*n == 0 || *rows == 0 || *cols == 0 || *rows > IMAGES_MAX_DIM || *cols > IMAGES_MAX_DIM)
        return err_set(err, -EINVAL,
                       "%s: %u images of %u×%u; it must hold at least one, of 1 to %d on a side",
                       name, *n, *rows, *cols, IMAGES_MAX_DIM);
    uint64_t need = head + (uint64_t)*n * *rows * *cols;
    if (f->len != need)
        return err_set(err, -EINVAL, "%s: %s: %u %s need %llu bytes, the file has %zu", name,
                       f->len < need ? "truncated data" : "bytes after the data", *n,
                       images ? "images" : "labels", (unsigned long long)need, f->len);
    return 0;
}

/* The set of one images file and its labels file (kinds x and x + 1). */
static int mnist_set(const mnist_file *files, int x, const char *what, image_set **out, char *err)
{
    uint32_t n, rows, cols, nl, one;
    int rc = idx_header(&files[x], x, &n, &rows, &cols, err);
    if (rc == 0)
        rc = idx_header(&files[x + 1], x + 1, &nl, &one, &one, err);
    if (rc < 0)
        return rc;
    if (nl != n)
        return err_set(err, -EINVAL, "%s holds %u images but %s %u labels", mnist_names[x][0], n,
                       mnist_names[x + 1][0], nl);
    image_set *s;
    rc = images_set_new(n, (int)rows, (int)cols, 1, IMAGES_U8, what, &s, err);
    if (rc < 0)
        return rc;
    memcpy(s->pixels, files[x].data + 16, (size_t)n * rows * cols);
    for (uint32_t i = 0; i < n; i++)
        s->labels[i] = (unsigned char)files[x + 1].data[8 + i];
    *out = s;
    return 0;
}

/* Takes tar member e as MNIST file which: inflated when gz. */
static int mnist_take(mnist_file *f, const tar_entry *e, int gz, char *err)
{
    if (f->found)
        return err_set(err, -EINVAL, "two %s files in the archive", images_basename(e->name));
    if (gz) {
        size_t size;
        const char *base = images_basename(e->name);
        int rc = zinflate_gzip_size(e->data, e->size, &size, base, err);
        if (rc < 0)
            return rc;
        if (size > (size_t)DATASET_MAX_VALUES + 16)
            return err_set(err, -EFBIG, "%s inflates to %zu bytes, over the limit of %u", base,
                           size, DATASET_MAX_VALUES + 16);
        rc = zinflate_exact(e->data, e->size, ZINFLATE_GZIP, size, base, &f->owned, err);
        if (rc < 0)
            return rc;
        f->data = f->owned;
        f->len = size;
    } else {
        f->data = e->data;
        f->len = e->size;
    }
    f->found = 1;
    return 0;
}

static int mnist_load(const char *data, size_t len, image_set **train, image_set **test, char *err)
{
    mnist_file files[MNIST_FILES] = {0};
    image_set *tr = NULL, *te = NULL;
    tar_reader r;
    tar_entry e;
    int rc;
    if (!tar_probe(data, len))
        return err_set(err, -EINVAL,
                       "MNIST data must be a tar (or .tar.gz) holding train-images-idx3-ubyte and "
                       "train-labels-idx1-ubyte; this is not a tar archive");
    tar_reader_init(&r, data, len);
    for (;;) {
        rc = tar_reader_next(&r, &e, err);
        if (rc <= 0)
            break;
        int gz, which = mnist_which(images_basename(e.name), &gz);
        if (which >= 0) {
            rc = mnist_take(&files[which], &e, gz, err);
            if (rc < 0)
                goto out;
        }
    }
    if (rc < 0)
        goto out;
    for (int i = 0; i < MNIST_FILES; i++) {
        if (!files[i].found && (i < MNIST_TEST_X || files[i ^ 1].found)) {
            rc = err_set(err, -EINVAL, "no %s (or %s.gz) in the MNIST archive%s", mnist_names[i][0],
                         mnist_names[i][0], i < MNIST_TEST_X ? "" : " beside its pair");
            goto out;
        }
    }
    rc = mnist_set(files, MNIST_TRAIN_X, "the MNIST training set", &tr, err);
    if (rc < 0)
        goto out;
    if (files[MNIST_TEST_X].found) {
        rc = mnist_set(files, MNIST_TEST_X, "the MNIST test set", &te, err);
        if (rc < 0)
            goto out;
        if (te->h != tr->h || te->w != tr->w) {
            rc = err_set(err, -EINVAL, "%s holds images of %d×%d, %s %d×%d", mnist_names[2][0],
                         te->h, te->w, mnist_names[0][0], tr->h, tr->w);
            goto out;
        }
    }
    rc = images_labels_classes(tr, te, "MNIST", err);
    if (rc < 0)
        goto out;
    *train = tr;
    *test = te;
    tr = te = NULL;
out:
    for (int i = 0; i < MNIST_FILES; i++)
        free(files[i].owned);
    image_set_free(tr);
    image_set_free(te);
    return rc;
}

/* ---- images_load ------------------------------------------------------------------------- */

int images_labels_classes(image_set *train, image_set *test, const char *what, char *err)
{
    int32_t max = 0;
    for (int k = 0; k < 2; k++) {
        image_set *s = k ? test : train;
        for (size_t i = 0; s && i < s->n; i++) {
            if (s->labels[i] < 0 || s->labels[i] >= DATASET_MAX_CLASSES)
                return err_set(
                    err, -EINVAL, "%s: label %ld of image %zu of the %s set is outside 0 to %d",
                    what, (long)s->labels[i], i, k ? "test" : "training", DATASET_MAX_CLASSES - 1);
            if (s->labels[i] > max)
                max = s->labels[i];
        }
    }
    int rc = images_set_classes(train, max + 1, NULL, err);
    if (rc == 0 && test)
        rc = images_set_classes(test, max + 1, NULL, err);
    return rc;
}

int images_load(const char *data, size_t len, int format, image_set **train, image_set **test,
                char *err)
{
    image_set *tr = NULL, *te = NULL;
    int rc;
    switch (format) {
    case IMAGES_FMT_CIFAR10:
        rc = cifar_load(data, len, &tr, &te, err);
        break;
    case IMAGES_FMT_MNIST:
        rc = mnist_load(data, len, &tr, &te, err);
        break;
    case IMAGES_FMT_NPY:
        rc = npy_tar_load(data, len, &tr, &te, err);
        break;
    case IMAGES_FMT_NPZ:
        rc = npz_load(data, len, &tr, &te, err);
        break;
    case IMAGES_FMT_FOLDERS:
        rc = images_folder_load(data, len, &tr, err);
        break;
    default:
        return err_set(err, -EINVAL, "format %d is not an image format", format);
    }
    if (rc < 0)
        return rc;
    *train = tr;
    *test = te;
    return 0;
}
