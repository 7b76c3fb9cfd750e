/* Unit tests of data/images (with tar.c, npz.c, zinflate.c, decode.c, images_folder.c): each
 * format built in memory (tests/unit/data/images_build.h), its good forms read back pixel for
 * pixel, and every refused form with its message. */
#include "data/images.h"

#include <errno.h>

#include "tests/unit/check.h"
#include "tests/unit/data/images_build.h"
#include "util/err.h"
#include "data/images_priv.h"
#include "data/tar.h"

static char err[ERR_LEN];

/* images_load() on a dynbuf, with the sets and the code; the outputs stay NULL on failure. */
static int load(const dynbuf *b, int format, image_set **train, image_set **test)
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
static void expect_error(const dynbuf *b, int format, int code, const char *want)
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
static int pixels_match(const image_set *s, size_t k, size_t first)
{
    const unsigned char *p = (const unsigned char *)s->pixels + k * (size_t)(s->h * s->w * s->c);
    for (int y = 0; y < s->h; y++)
        for (int x = 0; x < s->w; x++)
            for (int ch = 0; ch < s->c; ch++)
                if (p[(y * s->w + x) * s->c + ch] != ib_pixel(first + k, y, x, ch))
                    return 0;
    return 1;
}

/* ---- tar ----------------------------------------------------------------------------------- */

/* All regular files of an archive as "name:size\n" lines; the reader's last code. */
static int tar_list(const dynbuf *b, char *out, size_t cap)
{
    tar_reader r;
    tar_entry e;
    size_t used = 0;
    int rc;
    out[0] = '\0';
    err[0] = '\0';
    tar_reader_init(&r, dynbuf_str(b), dynbuf_len(b));
    while ((rc = tar_reader_next(&r, &e, err)) > 0)
        used += (size_t)snprintf(out + used, cap - used, "%s:%zu\n", e.name, e.size);
    return rc;
}

static void test_tar(void)
{
    dynbuf b;
    char out[8192], longname[300];
    dynbuf_init(&b, IB_MAX);

    /* Directories skipped, "./" and "//" dropped, a GNU long name, an empty file, pax path. */
    memset(longname, 'n', sizeof longname);
    memcpy(longname, "deep/", 5);
    longname[250] = '\0';
    ib_tar_member(&b, "./data/", "", 0, '5');
    ib_tar_file(&b, "./data//a.bin", "abc", 3);
    ib_tar_file(&b, longname, "x", 1);
    ib_tar_file(&b, "empty", "", 0);
    const char pax[] = "30 mtime=1700000000.123456789\n21 path=pax/long.bin\n";
    ib_tar_member(&b, "PaxHeaders/x", pax, sizeof pax - 1, 'x');
    ib_tar_file(&b, "short.bin", "12345", 5);
    ib_tar_end(&b);
    CHECK(tar_probe(dynbuf_str(&b), dynbuf_len(&b)));
    CHECK_INT(tar_list(&b, out, sizeof out), 0);
    char want[8192];
    snprintf(want, sizeof want, "data/a.bin:3\n%s:1\nempty:0\npax/long.bin:5\n", longname);
    CHECK_STR(out, want);

    /* No end blocks at all: the end of the data at a header boundary ends it too. */
    dynbuf_reset(&b);
    ib_tar_file(&b, "a", "1", 1);
    CHECK_INT(tar_list(&b, out, sizeof out), 0);
    CHECK_STR(out, "a:1\n");

    /* A size in GNU base-256. */
    dynbuf_reset(&b);
    ib_tar_file(&b, "b256", "hello", 5);
    char *h = (char *)dynbuf_str(&b);
    memset(h + 124, 0, 12);
    h[124] = (char)0x80;
    h[135] = 5;
    memset(h + 148, ' ', 8);
    unsigned sum = 0;
    for (int i = 0; i < 512; i++)
        sum += (unsigned char)h[i];
    ib_octal((unsigned char *)h + 148, 7, sum);
    CHECK_INT(tar_list(&b, out, sizeof out), 0);
    CHECK_STR(out, "b256:5\n");

    /* Refused: links, "..", absolute paths, devices, a bad checksum, truncation. */
    struct {
        const char *name;
        char type;
        const char *want;
    } bad[] = {
        {"link", '2', "tar member link is a link; only regular files are read"},
        {"hard", '1', "tar member hard is a link"},
        {"a/../../etc/passwd", '0', "tar member a/../../etc/passwd: an absolute path, a '..'"},
        {"/etc/passwd", '0', "tar member /etc/passwd: an absolute path"},
        {"fifo", '6', "tar member fifo has type 0x36, not a regular file"},
        {"./", '0', "an empty name"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        dynbuf_reset(&b);
        ib_tar_member(&b, bad[i].name, "", 0, bad[i].type);
        ib_tar_end(&b);
        CHECK_INT(tar_list(&b, out, sizeof out), -EINVAL);
        if (!strstr(err, bad[i].want)) {
            fprintf(stderr, "tar %s: \"%s\" lacks \"%s\"\n", bad[i].name, err, bad[i].want);
            check_failures++;
        }
    }
    dynbuf_reset(&b);
    ib_tar_file(&b, "a", "1", 1);
    ((char *)dynbuf_str(&b))[0] = 'b';
    CHECK_INT(tar_list(&b, out, sizeof out), -EINVAL);
    CHECK_STR(err, "bad tar archive: no ustar header with a right checksum at offset 0");
    CHECK(!tar_probe(dynbuf_str(&b), dynbuf_len(&b)));

    dynbuf_reset(&b);
    ib_tar_file(&b, "first", "1", 1);
    ib_tar_file(&b, "cut", "0123456789", 10);
    b.len -= 512 + 500; /* the second member's data and most of its header */
    CHECK_INT(tar_list(&b, out, sizeof out), -EINVAL);
    CHECK_STR(err, "truncated tar archive: the header at offset 1024 has 12 of 512 bytes");
    dynbuf_reset(&b);
    ib_tar_file(&b, "cut", "0123456789", 10);
    b.len -= 512;
    CHECK_INT(tar_list(&b, out, sizeof out), -EINVAL);
    CHECK_STR(err, "truncated tar archive: cut needs 10 bytes at offset 512, 0 are left");

    /* A pax header that is not records. */
    dynbuf_reset(&b);
    ib_tar_member(&b, "PaxHeaders/x", "99 path=x\n", 10, 'x');
    ib_tar_file(&b, "a", "1", 1);
    CHECK_INT(tar_list(&b, out, sizeof out), -EINVAL);
    CHECK_STR(err, "bad tar archive: malformed pax header at offset 0");
    dynbuf_free(&b);
}

/* ---- CIFAR-10 ------------------------------------------------------------------------------ */

static void test_cifar_file(void)
{
    dynbuf b;
    image_set *tr, *te;
    dynbuf_init(&b, IB_MAX);
    ib_cifar(&b, 0, 3, -1);
    CHECK_INT(load(&b, IMAGES_FMT_CIFAR10, &tr, &te), 0);
    CHECK(te == NULL);
    CHECK_INT(tr->n, 3);
    CHECK_INT(tr->h, 32);
    CHECK_INT(tr->w, 32);
    CHECK_INT(tr->c, 3);
    CHECK_INT(tr->dtype, IMAGES_U8);
    CHECK_INT(tr->n_classes, 10);
    CHECK_STR(tr->class_names[0], "0");
    CHECK_STR(tr->class_names[9], "9");
    for (size_t i = 0; i < 3; i++) {
        CHECK_INT(tr->labels[i], i);
        CHECK(pixels_match(tr, i, 0));
    }
    image_set_free(tr);

    /* 2 records and 1200 bytes of a third. */
    dynbuf_reset(&b);
    ib_cifar(&b, 0, 3, -1);
    b.len -= 3073 - 1200;
    expect_error(&b, IMAGES_FMT_CIFAR10, -EINVAL,
                 "CIFAR-10 data: truncated record 3: 1200 of 3073 bytes");
    dynbuf_reset(&b);
    ib_cifar(&b, 0, 1, -1);
    ib_cifar(&b, 1, 1, 12);
    expect_error(&b, IMAGES_FMT_CIFAR10, -EINVAL,
                 "CIFAR-10 data: record 2 has label 12; CIFAR-10 labels are 0 to 9");
    dynbuf_reset(&b);
    expect_error(&b, IMAGES_FMT_CIFAR10, -EINVAL, "CIFAR-10 data holds no records");
    dynbuf_free(&b);
}

static void test_cifar_tar(void)
{
    dynbuf b, f;
    image_set *tr, *te;
    dynbuf_init(&b, IB_MAX);
    dynbuf_init(&f, IB_MAX);
    /* Batches out of order in the tar; _10 sorts after _2. */
    ib_tar_member(&b, "cifar-10-batches-bin/", "", 0, '5');
    ib_cifar(&f, 2, 3, -1);
    ib_tar_file(&b, "cifar-10-batches-bin/data_batch_2.bin", dynbuf_str(&f), dynbuf_len(&f));
    dynbuf_reset(&f);
    ib_cifar(&f, 5, 1, -1);
    ib_tar_file(&b, "cifar-10-batches-bin/data_batch_10.bin", dynbuf_str(&f), dynbuf_len(&f));
    dynbuf_reset(&f);
    ib_cifar(&f, 0, 2, -1);
    ib_tar_file(&b, "cifar-10-batches-bin/data_batch_1.bin", dynbuf_str(&f), dynbuf_len(&f));
    dynbuf_reset(&f);
    ib_cifar(&f, 100, 2, 7);
    ib_tar_file(&b, "cifar-10-batches-bin/test_batch.bin", dynbuf_str(&f), dynbuf_len(&f));
    const char meta[] =
        "airplane\nautomobile\nbird\ncat\ndeer\ndog\nfrog\nhorse\nship\r\ntruck\n\n";
    ib_tar_file(&b, "cifar-10-batches-bin/batches.meta.txt", meta, sizeof meta - 1);
    ib_tar_file(&b, "cifar-10-batches-bin/readme.html", "<html>", 6);
    ib_tar_end(&b);
    CHECK_INT(load(&b, IMAGES_FMT_CIFAR10, &tr, &te), 0);
    CHECK_INT(tr->n, 6);
    for (size_t i = 0; i < 6; i++) {
        CHECK(pixels_match(tr, i, 0));
        CHECK_INT(tr->labels[i], i % 10);
    }
    CHECK_INT(tr->n_classes, 10);
    CHECK_STR(tr->class_names[0], "airplane");
    CHECK_STR(tr->class_names[8], "ship");
    CHECK_STR(tr->class_names[9], "truck");
    CHECK(te != NULL);
    if (te) {
        CHECK_INT(te->n, 2);
        CHECK(pixels_match(te, 0, 100) && pixels_match(te, 1, 100));
        CHECK_INT(te->labels[1], 7);
        CHECK_STR(te->class_names[1], "automobile");
    }
    image_set_free(tr);
    image_set_free(te);

    /* No training batch; a short meta file; a bad record in a batch names the batch. */
    dynbuf_reset(&b);
    ib_tar_file(&b, "test_batch.bin", dynbuf_str(&f), dynbuf_len(&f));
    ib_tar_end(&b);
    expect_error(&b, IMAGES_FMT_CIFAR10, -EINVAL,
                 "no data_batch_N.bin file in the CIFAR-10 archive");
    dynbuf_reset(&b);
    ib_tar_file(&b, "data_batch_1.bin", dynbuf_str(&f), dynbuf_len(&f));
    ib_tar_file(&b, "batches.meta.txt", "a\nb\nc\n", 6);
    ib_tar_end(&b);
    expect_error(&b, IMAGES_FMT_CIFAR10, -EINVAL,
                 "data_batch_1.bin: record 1 has label 7; batches.meta.txt names 3 classes, so "
                 "labels are 0 to 2");
    dynbuf_reset(&b);
    ib_tar_file(&b, "data_batch_1.bin", dynbuf_str(&f), dynbuf_len(&f));
    ib_tar_file(&b, "batches.meta.txt", "only\n", 5);
    ib_tar_end(&b);
    expect_error(&b, IMAGES_FMT_CIFAR10, -EINVAL,
                 "batches.meta.txt names 1 class; it needs at least 2");
    dynbuf_reset(&b);
    ib_tar_file(&b, "data_batch_1.bin", dynbuf_str(&f), dynbuf_len(&f));
    ib_tar_file(&b, "batches.meta.txt", "cat\ndog\ncat\n", 12);
    ib_tar_end(&b);
    expect_error(&b, IMAGES_FMT_CIFAR10, -EINVAL,
                 "batches.meta.txt names class 'cat' twice (classes 1 and 3)");
    dynbuf_reset(&b);
    ib_tar_file(&b, "data_batch_1.bin", dynbuf_str(&f), dynbuf_len(&f) - 5);
    ib_tar_end(&b);
    expect_error(&b, IMAGES_FMT_CIFAR10, -EINVAL,
                 "data_batch_1.bin: truncated record 2: 3068 of 3073 bytes");
    dynbuf_free(&b);
    dynbuf_free(&f);
}

/* ---- MNIST --------------------------------------------------------------------------------- */

/* An MNIST tar: train of n images rows × cols (gzipped when gz) and labels of nl, and, when
 * test, 2 test images and labels. */
static void mnist_tar(dynbuf *b, uint32_t n, uint32_t nl, uint32_t rows, uint32_t cols, int gz,
                      int test)
{
    dynbuf f, z;
    dynbuf_init(&f, IB_MAX);
    dynbuf_init(&z, IB_MAX);
    dynbuf_reset(b);
    ib_idx_images(&f, n, rows, cols);
    if (gz) {
        ib_deflate(&z, dynbuf_str(&f), dynbuf_len(&f), 1);
        ib_tar_file(b, "mnist/train-images-idx3-ubyte.gz", dynbuf_str(&z), dynbuf_len(&z));
    } else {
        ib_tar_file(b, "mnist/train-images-idx3-ubyte", dynbuf_str(&f), dynbuf_len(&f));
    }
    dynbuf_reset(&f);
    ib_idx_labels(&f, nl, 10);
    ib_tar_file(b, "mnist/train-labels-idx1-ubyte", dynbuf_str(&f), dynbuf_len(&f));
    if (test) {
        dynbuf_reset(&f);
        ib_idx_images(&f, 2, rows, cols);
        ib_tar_file(b, "mnist/t10k-images.idx3-ubyte", dynbuf_str(&f), dynbuf_len(&f));
        dynbuf_reset(&f);
        ib_idx_labels(&f, 2, 10);
        dynbuf_reset(&z);
        ib_deflate(&z, dynbuf_str(&f), dynbuf_len(&f), 1);
        ib_tar_file(b, "mnist/t10k-labels-idx1-ubyte.gz", dynbuf_str(&z), dynbuf_len(&z));
    }
    ib_tar_end(b);
    dynbuf_free(&f);
    dynbuf_free(&z);
}

static void test_mnist(void)
{
    dynbuf b;
    image_set *tr, *te;
    dynbuf_init(&b, IB_MAX);
    mnist_tar(&b, 12, 12, 5, 4, 1, 1);
    CHECK_INT(load(&b, IMAGES_FMT_MNIST, &tr, &te), 0);
    CHECK_INT(tr->n, 12);
    CHECK_INT(tr->h, 5);
    CHECK_INT(tr->w, 4);
    CHECK_INT(tr->c, 1);
    CHECK_INT(tr->n_classes, 10); /* labels 0..9 */
    CHECK_STR(tr->class_names[9], "9");
    for (size_t i = 0; i < 12; i++) {
        CHECK(pixels_match(tr, i, 0));
        CHECK_INT(tr->labels[i], i % 10);
    }
    CHECK(te != NULL);
    if (te) {
        CHECK_INT(te->n, 2);
        CHECK(pixels_match(te, 1, 0));
        CHECK_INT(te->n_classes, 10);
    }
    image_set_free(tr);
    image_set_free(te);

    /* Without a test set, not gzipped: classes up to the largest label. */
    mnist_tar(&b, 3, 3, 2, 2, 0, 0);
    CHECK_INT(load(&b, IMAGES_FMT_MNIST, &tr, &te), 0);
    CHECK(te == NULL);
    CHECK_INT(tr ? tr->n_classes : 0, 3);
    image_set_free(tr);

    mnist_tar(&b, 3, 4, 2, 2, 0, 0);
    expect_error(&b, IMAGES_FMT_MNIST, -EINVAL,
                 "train-images-idx3-ubyte holds 3 images but train-labels-idx1-ubyte 4 labels");

    /* Labels where the images should be: the magic found is named. */
    dynbuf f;
    dynbuf_init(&f, IB_MAX);
    ib_idx_labels(&f, 3, 10);
    dynbuf_reset(&b);
    ib_tar_file(&b, "train-images-idx3-ubyte", dynbuf_str(&f), dynbuf_len(&f));
    ib_tar_file(&b, "train-labels-idx1-ubyte", dynbuf_str(&f), dynbuf_len(&f));
    ib_tar_end(&b);
    expect_error(&b, IMAGES_FMT_MNIST, -EINVAL,
                 "train-images-idx3-ubyte: wrong magic 0x00000801, expected 0x00000803");

    /* Truncated images; a missing labels file; a test file without its pair; not a tar. */
    dynbuf_reset(&f);
    ib_idx_images(&f, 3, 2, 2);
    dynbuf l;
    dynbuf_init(&l, IB_MAX);
    ib_idx_labels(&l, 3, 10);
    dynbuf_reset(&b);
    ib_tar_file(&b, "train-images-idx3-ubyte", dynbuf_str(&f), dynbuf_len(&f) - 1);
    ib_tar_file(&b, "train-labels-idx1-ubyte", dynbuf_str(&l), dynbuf_len(&l));
    ib_tar_end(&b);
    expect_error(&b, IMAGES_FMT_MNIST, -EINVAL,
                 "train-images-idx3-ubyte: truncated data: 3 images need 28 bytes, the file has "
                 "27");
    dynbuf_reset(&b);
    ib_tar_file(&b, "train-images-idx3-ubyte", dynbuf_str(&f), dynbuf_len(&f));
    ib_tar_end(&b);
    expect_error(&b, IMAGES_FMT_MNIST, -EINVAL, "no train-labels-idx1-ubyte (or ");
    dynbuf_reset(&b);
    ib_tar_file(&b, "train-images-idx3-ubyte", dynbuf_str(&f), dynbuf_len(&f));
    ib_tar_file(&b, "train-labels-idx1-ubyte", dynbuf_str(&l), dynbuf_len(&l));
    ib_tar_file(&b, "t10k-images-idx3-ubyte", dynbuf_str(&f), dynbuf_len(&f));
    ib_tar_end(&b);
    expect_error(&b, IMAGES_FMT_MNIST, -EINVAL, "no t10k-labels-idx1-ubyte (or ");
    expect_error(&f, IMAGES_FMT_MNIST, -EINVAL, "MNIST data must be a tar");

    /* A gzipped member that is not gzip, or is cut short. */
    dynbuf_reset(&b);
    ib_tar_file(&b, "train-images-idx3-ubyte.gz", dynbuf_str(&f), dynbuf_len(&f));
    ib_tar_end(&b);
    expect_error(&b, IMAGES_FMT_MNIST, -EINVAL, "train-images-idx3-ubyte.gz is not gzip data");
    dynbuf z;
    dynbuf_init(&z, IB_MAX);
    ib_deflate(&z, dynbuf_str(&f), dynbuf_len(&f), 1);
    dynbuf_reset(&b);
    ib_tar_file(&b, "train-images-idx3-ubyte.gz", dynbuf_str(&z), dynbuf_len(&z) - 12);
    ib_tar_end(&b);
    expect_error(&b, IMAGES_FMT_MNIST, -EINVAL, "corrupt train-images-idx3-ubyte.gz");
    dynbuf_reset(&b); /* a gzip trailer that claims 1 GiB */
    memcpy((char *)dynbuf_str(&z) + dynbuf_len(&z) - 4, "\0\0\0\x40", 4);
    ib_tar_file(&b, "train-images-idx3-ubyte.gz", dynbuf_str(&z), dynbuf_len(&z));
    ib_tar_end(&b);
    expect_error(&b, IMAGES_FMT_MNIST, -EINVAL, "compressed bytes cannot hold 1073741824");
    dynbuf_reset(&f);
    ib_idx_images(&f, 0, 28, 28);
    dynbuf_reset(&b);
    ib_tar_file(&b, "train-images-idx3-ubyte", dynbuf_str(&f), dynbuf_len(&f));
    ib_tar_file(&b, "train-labels-idx1-ubyte", dynbuf_str(&l), dynbuf_len(&l));
    ib_tar_end(&b);
    expect_error(&b, IMAGES_FMT_MNIST, -EINVAL,
                 "train-images-idx3-ubyte: 0 images of 28×28; it must hold at least one");
    dynbuf_free(&z);
    dynbuf_free(&l);
    dynbuf_free(&f);
    dynbuf_free(&b);
}

/* ---- npz ----------------------------------------------------------------------------------- */

/* Adds an .npy member to z. */
static void zip_npy(ib_zip *z, const char *name, const char *descr, const uint64_t *shape, int ndim,
                    const void *data, size_t size, int method)
{
    dynbuf f;
    dynbuf_init(&f, IB_MAX);
    ib_npy(&f, descr, shape, ndim, data, size);
    ib_zip_add(z, name, dynbuf_str(&f), dynbuf_len(&f), method);
    dynbuf_free(&f);
}

static void test_npz(void)
{
    dynbuf b;
    ib_zip z;
    image_set *tr, *te;
    unsigned char px[4 * 3 * 2];
    int64_t y8[4] = {3, 0, 1, 3};
    int32_t y4[2] = {4, 0};
    dynbuf_init(&b, IB_MAX);
    for (size_t i = 0; i < sizeof px; i++)
        px[i] = (unsigned char)(i * 9);

    /* uint8 (n, h, w) with int64 labels, stored; a deflated test set with int32 (n, 1). */
    ib_zip_init(&z);
    zip_npy(&z, "x_train.npy", "|u1", (uint64_t[]){4, 3, 2}, 3, px, sizeof px, 0);
    zip_npy(&z, "y_train.npy", "<i8", (uint64_t[]){4}, 1, y8, sizeof y8, 0);
    zip_npy(&z, "x_test.npy", "|u1", (uint64_t[]){2, 3, 2}, 3, px, 12, 8);
    zip_npy(&z, "y_test.npy", "<i4", (uint64_t[]){2, 1}, 2, y4, sizeof y4, 8);
    ib_zip_end(&z, &b);
    CHECK_INT(load(&b, IMAGES_FMT_NPZ, &tr, &te), 0);
    if (tr && te) {
        CHECK_INT(tr->n, 4);
        CHECK_INT(tr->h, 3);
        CHECK_INT(tr->w, 2);
        CHECK_INT(tr->c, 1);
        CHECK_INT(tr->dtype, IMAGES_U8);
        CHECK(memcmp(tr->pixels, px, sizeof px) == 0);
        CHECK_INT(tr->labels[0], 3);
        CHECK_INT(tr->labels[3], 3);
        CHECK_INT(tr->n_classes, 5); /* the test set's 4 */
        CHECK_STR(tr->class_names[4], "4");
        CHECK_INT(te->n, 2);
        CHECK(memcmp(te->pixels, px, 12) == 0);
        CHECK_INT(te->labels[0], 4);
        CHECK_INT(te->n_classes, 5);
    }
    image_set_free(tr);
    image_set_free(te);

    /* float32 (n, h, w, c), x and y, deflated; uint8 labels. */
    float fx[2 * 2 * 2 * 3];
    for (size_t i = 0; i < 24; i++)
        fx[i] = (float)i / 8.0f - 1.0f;
    unsigned char y1[2] = {1, 0};
    dynbuf_reset(&b);
    ib_zip_init(&z);
    zip_npy(&z, "x.npy", "<f4", (uint64_t[]){2, 2, 2, 3}, 4, fx, sizeof fx, 8);
    zip_npy(&z, "y.npy", "|u1", (uint64_t[]){2}, 1, y1, sizeof y1, 8);
    ib_zip_end(&z, &b);
    CHECK_INT(load(&b, IMAGES_FMT_NPZ, &tr, &te), 0);
    CHECK(te == NULL);
    if (tr) {
        CHECK_INT(tr->dtype, IMAGES_F32);
        CHECK_INT(tr->c, 3);
        CHECK(memcmp(tr->pixels, fx, sizeof fx) == 0);
        CHECK_INT(tr->n_classes, 2);
    }
    image_set_free(tr);

    /* Refused forms, each with its message. */
    struct {
        const char *xname, *xdescr, *yname, *ydescr;
        uint64_t xshape[4], yshape[2];
        int xdim, ydim;
        const char *want;
    } bad[] = {
        {"x.npy",
         "<f8",
         "y.npy",
         "|u1",
         {1, 2, 2},
         {1},
         3,
         1,
         "x.npy has dtype '<f8'; images must be uint8 ('|u1') or float32 ('<f4')"},
        {"x.npy",
         "|u1",
         "y.npy",
         "<f4",
         {1, 2, 2},
         {1},
         3,
         1,
         "y.npy has dtype '<f4'; labels must be integers"},
        {"x.npy",
         "|u1",
         "y.npy",
         "|u1",
         {2, 2, 2},
         {1},
         3,
         1,
         "x.npy holds 2 images but y.npy 1 labels"},
        {"x.npy",
         "|u1",
         "y.npy",
         "|u1",
         {4, 2},
         {4},
         2,
         1,
         "x.npy has 2 dimensions; images are (n, h, w) or (n, h, w, c)"},
        {"x.npy",
         "|u1",
         "y.npy",
         "|u1",
         {1, 2, 2},
         {1, 2},
         3,
         2,
         "y.npy must have shape (n,) or (n, 1)"},
        {"x.npy",
         "|u1",
         "y.npy",
         "|u1",
         {1, 5000, 1},
         {1},
         3,
         1,
         "x.npy: images of 5000×1×1; each dimension must be 1 to 4096"},
        {"x.npy", "|u1", "y.npy", "|u1", {0, 2, 2}, {0}, 3, 1, "x.npy holds no images"},
        {"x.npy", ">f4", "y.npy", "|u1", {1, 2, 2}, {1}, 3, 1, "x.npy has dtype '>f4'"},
        {"x.npy", "|b1", "y.npy", "|u1", {1, 2, 2}, {1}, 3, 1, "which is not read"},
        {"x.npy",
         "|u1",
         "z.npy",
         "|u1",
         {1, 2, 2},
         {1},
         3,
         1,
         "the npz holds no y.npy; it needs x and y, or x_train and y_train (and x_test with "
         "y_test); other members: z.npy"},
        {"x_train.npy", "|u1", "y_train.npy", "|u1", {1, 2, 2}, {1}, 3, 1, ""}, /* good */
    };
    unsigned char data[64] = {0};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        uint64_t xs = 1, ys = 1;
        for (int d = 0; d < bad[i].xdim; d++)
            xs *= bad[i].xshape[d];
        for (int d = 0; d < bad[i].ydim; d++)
            ys *= bad[i].yshape[d];
        int xsize = bad[i].xdescr[2] - '0', ysize = bad[i].ydescr[2] - '0';
        dynbuf_reset(&b);
        ib_zip_init(&z);
        zip_npy(&z, bad[i].xname, bad[i].xdescr, bad[i].xshape, bad[i].xdim, data,
                xs * (uint64_t)xsize > 64 ? 0 : xs * (uint64_t)xsize, 0);
        zip_npy(&z, bad[i].yname, bad[i].ydescr, bad[i].yshape, bad[i].ydim, data,
                ys * (uint64_t)ysize, 0);
        ib_zip_end(&z, &b);
        if (!bad[i].want[0]) {
            CHECK_INT(load(&b, IMAGES_FMT_NPZ, &tr, &te), 0);
            image_set_free(tr);
            continue;
        }
        /* The 5000-wide image has too little data too; its shape is checked first. */
        if (xs * (uint64_t)xsize > 64)
            continue;
        expect_error(&b, IMAGES_FMT_NPZ, -EINVAL, bad[i].want);
    }
    dynbuf_free(&b);
}

/* Format npy: the same arrays as .npy files in a tar. */
static void test_npy_tar(void)
{
    dynbuf b, f;
    image_set *tr, *te;
    unsigned char px[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    uint16_t y[2] = {0, 2};
    dynbuf_init(&b, IB_MAX);
    dynbuf_init(&f, IB_MAX);
    ib_npy(&f, "|u1", (uint64_t[]){2, 2, 2}, 3, px, 8);
    ib_tar_file(&b, "arrays/x_train.npy", dynbuf_str(&f), dynbuf_len(&f));
    ib_tar_file(&b, "arrays/x_test.npy", dynbuf_str(&f), dynbuf_len(&f));
    dynbuf_reset(&f);
    ib_npy(&f, "<u2", (uint64_t[]){2}, 1, y, sizeof y);
    ib_tar_file(&b, "arrays/y_train.npy", dynbuf_str(&f), dynbuf_len(&f));
    ib_tar_file(&b, "arrays/y_test.npy", dynbuf_str(&f), dynbuf_len(&f));
    ib_tar_file(&b, "arrays/notes.txt", "x", 1);
    ib_tar_end(&b);
    CHECK_INT(load(&b, IMAGES_FMT_NPY, &tr, &te), 0);
    if (tr && te) {
        CHECK_INT(tr->n, 2);
        CHECK_INT(tr->h, 2);
        CHECK_INT(tr->c, 1);
        CHECK(memcmp(tr->pixels, px, 8) == 0);
        CHECK_INT(tr->labels[1], 2);
        CHECK_INT(tr->n_classes, 3);
        CHECK_INT(te->n, 2);
    }
    image_set_free(tr);
    image_set_free(te);

    dynbuf_reset(&b);
    dynbuf_reset(&f);
    ib_npy(&f, "|u1", (uint64_t[]){2, 2, 2}, 3, px, 8);
    ib_tar_file(&b, "x.npy", dynbuf_str(&f), dynbuf_len(&f));
    ib_tar_file(&b, "labels.npy", dynbuf_str(&f), dynbuf_len(&f));
    ib_tar_end(&b);
    expect_error(&b, IMAGES_FMT_NPY, -EINVAL,
                 "the tar holds no y.npy; it needs x and y, or x_train and y_train (and x_test "
                 "with y_test); other members: labels.npy");
    dynbuf_reset(&b);
    ib_tar_file(&b, "a/x.npy", dynbuf_str(&f), dynbuf_len(&f));
    ib_tar_file(&b, "b/x.npy", dynbuf_str(&f), dynbuf_len(&f));
    ib_tar_end(&b);
    expect_error(&b, IMAGES_FMT_NPY, -EINVAL, "the tar holds two x.npy files");
    dynbuf_free(&f);
    dynbuf_free(&b);
}

/* Zip-level and npy-level corruption of a good archive. */
static void test_npz_corrupt(void)
{
    dynbuf b, f;
    ib_zip z;
    unsigned char px[8] = {1, 2, 3, 4, 5, 6, 7, 8}, y[2] = {0, 1};
    dynbuf_init(&b, IB_MAX);
    dynbuf_init(&f, IB_MAX);

    /* A CRC mismatch in a stored member. */
    ib_zip_init(&z);
    zip_npy(&z, "x.npy", "|u1", (uint64_t[]){2, 2, 2}, 3, px, 8, 0);
    zip_npy(&z, "y.npy", "|u1", (uint64_t[]){2}, 1, y, 2, 0);
    ib_zip_end(&z, &b);
    char *p = memmem(dynbuf_str(&b), dynbuf_len(&b), px, 8);
    CHECK(p != NULL);
    if (p)
        p[3] ^= 1;
    expect_error(&b, IMAGES_FMT_NPZ, -EINVAL, "npz member x.npy fails its CRC-32 check");

    /* A deflated member cut short (its compressed size in both headers made smaller). */
    dynbuf_reset(&b);
    ib_zip_init(&z);
    zip_npy(&z, "x.npy", "|u1", (uint64_t[]){2, 2, 2}, 3, px, 8, 8);
    zip_npy(&z, "y.npy", "|u1", (uint64_t[]){2}, 1, y, 2, 0);
    ib_zip_end(&z, &b);
    char *cd = memmem(dynbuf_str(&b), dynbuf_len(&b), "PK\1\2", 4);
    CHECK(cd != NULL);
    if (cd)
        cd[20] = (char)(cd[20] - 5);
    expect_error(&b, IMAGES_FMT_NPZ, -EINVAL, "corrupt x.npy");
    /* A deflated member that claims more than deflate can give: refused before allocating. */
    if (cd) {
        cd[20] = (char)(cd[20] + 5);
        memcpy(cd + 24, "\xff\xff\xff\x7f", 4);
    }
    expect_error(&b, IMAGES_FMT_NPZ, -EINVAL, "compressed bytes cannot hold 2147483647");

    /* Data shorter than the shape. */
    dynbuf_reset(&b);
    ib_zip_init(&z);
    ib_npy(&f, "|u1", (uint64_t[]){2, 2, 2}, 3, px, 7);
    ib_zip_add(&z, "x.npy", dynbuf_str(&f), dynbuf_len(&f), 0);
    zip_npy(&z, "y.npy", "|u1", (uint64_t[]){2}, 1, y, 2, 0);
    ib_zip_end(&z, &b);
    expect_error(&b, IMAGES_FMT_NPZ, -EINVAL, "x.npy: its shape needs 8 bytes of data, it holds 7");

    /* Fortran order; a header that is not a dict; not npy at all. */
    struct {
        const char *from, *to, *want;
    } edits[] = {
        {"'fortran_order': False", "'fortran_order': True ", "x.npy is in Fortran order"},
        {"{'descr'", "[('f0', ", "the .npy header is not a dict of descr"},
        {"\x93NUMPY", "\x93NUMPX", "x.npy is not a .npy array"},
    };
    for (size_t i = 0; i < sizeof edits / sizeof edits[0]; i++) {
        dynbuf_reset(&f);
        ib_npy(&f, "|u1", (uint64_t[]){2, 2, 2}, 3, px, 8);
        char *at = memmem(dynbuf_str(&f), dynbuf_len(&f), edits[i].from, strlen(edits[i].from));
        CHECK(at != NULL);
        if (at)
            memcpy(at, edits[i].to, strlen(edits[i].to));
        dynbuf_reset(&b);
        ib_zip_init(&z);
        ib_zip_add(&z, "x.npy", dynbuf_str(&f), dynbuf_len(&f), 0);
        zip_npy(&z, "y.npy", "|u1", (uint64_t[]){2}, 1, y, 2, 0);
        ib_zip_end(&z, &b);
        expect_error(&b, IMAGES_FMT_NPZ, -EINVAL, edits[i].want);
    }

    /* Labels: negative, and a float32 image that is not finite. */
    int32_t neg[2] = {0, -1};
    dynbuf_reset(&b);
    ib_zip_init(&z);
    zip_npy(&z, "x.npy", "|u1", (uint64_t[]){2, 2, 2}, 3, px, 8, 0);
    zip_npy(&z, "y.npy", "<i4", (uint64_t[]){2}, 1, neg, sizeof neg, 0);
    ib_zip_end(&z, &b);
    expect_error(&b, IMAGES_FMT_NPZ, -EINVAL, "y.npy: label 1 is outside 0 to 65535");
    float fx[2] = {0.5f, NAN};
    dynbuf_reset(&b);
    ib_zip_init(&z);
    zip_npy(&z, "x.npy", "<f4", (uint64_t[]){2, 1, 1}, 3, fx, sizeof fx, 0);
    zip_npy(&z, "y.npy", "|u1", (uint64_t[]){2}, 1, y, 2, 0);
    ib_zip_end(&z, &b);
    expect_error(&b, IMAGES_FMT_NPZ, -EINVAL, "x.npy: value 1 is nan; images must be finite");

    /* A test set of another size; another compression method; zip64; not a zip. */
    dynbuf_reset(&b);
    ib_zip_init(&z);
    zip_npy(&z, "x_train.npy", "|u1", (uint64_t[]){2, 2, 2}, 3, px, 8, 0);
    zip_npy(&z, "y_train.npy", "|u1", (uint64_t[]){2}, 1, y, 2, 0);
    zip_npy(&z, "x_test.npy", "|u1", (uint64_t[]){2, 4, 1}, 3, px, 8, 0);
    zip_npy(&z, "y_test.npy", "|u1", (uint64_t[]){2}, 1, y, 2, 0);
    ib_zip_end(&z, &b);
    expect_error(&b, IMAGES_FMT_NPZ, -EINVAL,
                 "x_test.npy holds uint8 images of 4×1×1, x_train.npy uint8 images of 2×2×1");
    dynbuf_reset(&b);
    ib_zip_init(&z);
    zip_npy(&z, "x.npy", "|u1", (uint64_t[]){2, 2, 2}, 3, px, 8, 0);
    zip_npy(&z, "y.npy", "|u1", (uint64_t[]){2}, 1, y, 2, 0);
    ib_zip_end(&z, &b);
    cd = memmem(dynbuf_str(&b), dynbuf_len(&b), "PK\1\2", 4);
    if (cd)
        cd[10] = 12; /* bzip2 */
    expect_error(&b, IMAGES_FMT_NPZ, -EINVAL,
                 "npz member x.npy uses compression method 12; only stored (0) and deflate (8)");
    char *eocd = (char *)dynbuf_str(&b) + dynbuf_len(&b) - 22;
    memset(eocd + 10, 0xFF, 2);
    expect_error(&b, IMAGES_FMT_NPZ, -EINVAL, "zip64 npz archives are not read");
    expect_error(&f, IMAGES_FMT_NPZ, -EINVAL,
                 "not an npz (zip) archive: no end of central directory record");

    /* A lone .npy: no labels. */
    expect_error(&f, IMAGES_FMT_NPY, -EINVAL,
                 "a lone .npy file holds one array, so no labels: put x.npy and y.npy in a tar "
                 "(format npy), or save both with numpy.savez");
    expect_error(&f, IMAGES_FMT_CSV, -EINVAL, "format 0 is not an image format");
    dynbuf_free(&f);
    dynbuf_free(&b);
}

/* ---- image folders ------------------------------------------------------------------------ */

#define FW 6
#define FH 4

/* A smooth test image's sample (JPEG keeps it within a few levels). */
static unsigned char smooth(int i, int y, int x, int ch)
{
    return (unsigned char)(60 + i * 10 + x * 5 + y * 4 + ch * 20);
}

/* Samples of image i in c channels of depth bits (16: big-endian, value × 257). */
static void samples(unsigned char *out, int i, int c, int depth)
{
    size_t k = 0;
    for (int y = 0; y < FH; y++)
        for (int x = 0; x < FW; x++)
            for (int ch = 0; ch < c; ch++) {
                unsigned char v = smooth(i, y, x, ch < 3 ? ch : 9);
                out[k++] = v;
                if (depth == 16)
                    out[k++] = v;
            }
}

static int png_channels(int type)
{
    switch (type) {
    case PNG_COLOR_TYPE_GRAY:
    case PNG_COLOR_TYPE_PALETTE:
        return 1;
    case PNG_COLOR_TYPE_GRAY_ALPHA:
        return 2;
    case PNG_COLOR_TYPE_RGB:
        return 3;
    default:
        return 4;
    }
}

/* Adds a PNG of image i to the tar. */
static void tar_png(dynbuf *b, const char *name, int i, int type, int depth, int interlace)
{
    unsigned char px[FW * FH * 4 * 2];
    dynbuf f;
    dynbuf_init(&f, IB_MAX);
    samples(px, i, png_channels(type), depth);
    ib_png(&f, FW, FH, type, depth, interlace, px);
    ib_tar_file(b, name, dynbuf_str(&f), dynbuf_len(&f));
    dynbuf_free(&f);
}

/* Adds a JPEG of image i in c channels to the tar. */
static void tar_jpeg(dynbuf *b, const char *name, int i, int c)
{
    unsigned char px[FW * FH * 4];
    dynbuf f;
    dynbuf_init(&f, IB_MAX);
    samples(px, i, c, 8);
    ib_jpeg(&f, FW, FH, c, px);
    ib_tar_file(b, name, dynbuf_str(&f), dynbuf_len(&f));
    dynbuf_free(&f);
}

/* Whether image k of s is image i of the test, exactly or within tol (JPEG). */
static int folder_match(const image_set *s, size_t k, int i, int tol)
{
    const unsigned char *p = (const unsigned char *)s->pixels + k * (size_t)(FW * FH * s->c);
    for (int y = 0; y < FH; y++)
        for (int x = 0; x < FW; x++)
            for (int ch = 0; ch < s->c; ch++) {
                int d = p[(y * FW + x) * s->c + ch] - smooth(i, y, x, ch);
                if (d > tol || d < -tol)
                    return 0;
            }
    return 1;
}

static void test_folders(void)
{
    dynbuf b;
    image_set *tr, *te;
    dynbuf_init(&b, IB_MAX);

    /* RGB from every kind of PNG and a JPEG; classes sorted; other files skipped. */
    ib_tar_member(&b, "shapes/", "", 0, '5');
    tar_png(&b, "shapes/triangles/0.png", 0, PNG_COLOR_TYPE_RGB, 8, 0);
    tar_png(&b, "shapes/circles/1.png", 1, PNG_COLOR_TYPE_RGB_ALPHA, 8, 0);
    tar_png(&b, "shapes/circles/2.PNG", 2, PNG_COLOR_TYPE_RGB, 16, 1);
    tar_jpeg(&b, "shapes/squares/3.JPG", 3, 3);
    tar_png(&b, "shapes/squares/4.png", 4, PNG_COLOR_TYPE_RGB_ALPHA, 16, 0);
    ib_tar_file(&b, "shapes/README.txt", "hello", 5);
    ib_tar_file(&b, "shapes/circles/._1.png", "mac", 3);
    ib_tar_file(&b, "shapes/circles/.DS_Store", "mac", 3);
    ib_tar_end(&b);
    CHECK_INT(load(&b, IMAGES_FMT_FOLDERS, &tr, &te), 0);
    CHECK(te == NULL);
    if (tr) {
        CHECK_INT(tr->n, 5);
        CHECK_INT(tr->h, FH);
        CHECK_INT(tr->w, FW);
        CHECK_INT(tr->c, 3);
        CHECK_INT(tr->n_classes, 3);
        CHECK_STR(tr->class_names[0], "circles");
        CHECK_STR(tr->class_names[1], "squares");
        CHECK_STR(tr->class_names[2], "triangles");
        int want_labels[5] = {2, 0, 0, 1, 1};
        for (int i = 0; i < 5; i++) {
            CHECK_INT(tr->labels[i], want_labels[i]);
            CHECK(folder_match(tr, (size_t)i, i, i == 3 ? 8 : 0));
        }
    }
    image_set_free(tr);

    /* Grey: 8-bit, 16-bit, grey + alpha, interlaced, and a greyscale JPEG. */
    dynbuf_reset(&b);
    tar_png(&b, "a/0.png", 0, PNG_COLOR_TYPE_GRAY, 8, 1);
    tar_png(&b, "a/1.png", 1, PNG_COLOR_TYPE_GRAY, 16, 0);
    tar_png(&b, "b/2.png", 2, PNG_COLOR_TYPE_GRAY_ALPHA, 8, 0);
    tar_jpeg(&b, "b/3.jpeg", 3, 1);
    ib_tar_end(&b);
    CHECK_INT(load(&b, IMAGES_FMT_FOLDERS, &tr, &te), 0);
    if (tr) {
        CHECK_INT(tr->n, 4);
        CHECK_INT(tr->c, 1);
        for (int i = 0; i < 4; i++)
            CHECK(folder_match(tr, (size_t)i, i, i == 3 ? 8 : 0));
        CHECK_INT(tr->labels[3], 1);
    }
    image_set_free(tr);

    /* A palette PNG expands to RGB; 2-bit grey expands to 0, 85, 170, 255. */
    unsigned char idx[FW * FH], grey2[FH * 2];
    for (int k = 0; k < FW * FH; k++)
        idx[k] = (unsigned char)(k * 10);
    dynbuf f;
    dynbuf_init(&f, IB_MAX);
    ib_png(&f, FW, FH, PNG_COLOR_TYPE_PALETTE, 8, 0, idx);
    dynbuf_reset(&b);
    ib_tar_file(&b, "p/0.png", dynbuf_str(&f), dynbuf_len(&f));
    ib_tar_end(&b);
    CHECK_INT(load(&b, IMAGES_FMT_FOLDERS, &tr, &te), 0);
    if (tr) {
        const unsigned char *p = tr->pixels;
        CHECK_INT(tr->c, 3);
        CHECK(p[3 * 5] == 50 && p[3 * 5 + 1] == 205 && p[3 * 5 + 2] == 25);
    }
    image_set_free(tr);
    for (int y = 0; y < FH; y++) /* 6 pixels of 2 bits: 0 1 2 3 0 1 */
        grey2[2 * y] = 0x1B, grey2[2 * y + 1] = 0x10;
    dynbuf_reset(&f);
    ib_png(&f, FW, FH, PNG_COLOR_TYPE_GRAY, 2, 0, grey2);
    dynbuf_reset(&b);
    ib_tar_file(&b, "g/0.png", dynbuf_str(&f), dynbuf_len(&f));
    ib_tar_end(&b);
    CHECK_INT(load(&b, IMAGES_FMT_FOLDERS, &tr, &te), 0);
    if (tr) {
        const unsigned char *p = tr->pixels;
        CHECK(p[0] == 0 && p[1] == 85 && p[2] == 170 && p[3] == 255 && p[4] == 0 && p[5] == 85);
    }
    image_set_free(tr);

    /* Shapes that differ: channels, then size. */
    dynbuf_reset(&b);
    tar_png(&b, "cats/1.png", 0, PNG_COLOR_TYPE_RGB, 8, 0);
    tar_png(&b, "cats/2.png", 0, PNG_COLOR_TYPE_GRAY, 8, 0);
    ib_tar_end(&b);
    expect_error(&b, IMAGES_FMT_FOLDERS, -EINVAL,
                 "cats/2.png is 4×6×1, but the first image, cats/1.png, is 4×6×3");
    unsigned char big[5000 * 3] = {0};
    dynbuf_reset(&f);
    ib_png(&f, 5, 3, PNG_COLOR_TYPE_RGB, 8, 0, big);
    dynbuf_reset(&b);
    tar_png(&b, "cats/1.png", 0, PNG_COLOR_TYPE_RGB, 8, 0);
    ib_tar_file(&b, "dogs/x.png", dynbuf_str(&f), dynbuf_len(&f));
    ib_tar_end(&b);
    expect_error(&b, IMAGES_FMT_FOLDERS, -EINVAL,
                 "dogs/x.png is 3×5×3, but the first image, cats/1.png, is 4×6×3");

    /* Too wide; CMYK; truncated PNG and JPEG; not an image; no folder; no image at all. */
    dynbuf_reset(&f);
    ib_png(&f, 5000, 1, PNG_COLOR_TYPE_RGB, 8, 0, big);
    dynbuf_reset(&b);
    ib_tar_file(&b, "cats/wide.png", dynbuf_str(&f), dynbuf_len(&f));
    ib_tar_end(&b);
    expect_error(&b, IMAGES_FMT_FOLDERS, -EINVAL,
                 "cats/wide.png: 5000×1 pixels; width and height must be 1 to 4096");
    dynbuf_reset(&b);
    tar_jpeg(&b, "cats/cmyk.jpg", 0, 4);
    ib_tar_end(&b);
    expect_error(&b, IMAGES_FMT_FOLDERS, -EINVAL, "cats/cmyk.jpg: a JPEG of 4 colour components");
    dynbuf_reset(&f);
    unsigned char px[FW * FH * 3];
    samples(px, 0, 3, 8);
    ib_png(&f, FW, FH, PNG_COLOR_TYPE_RGB, 8, 0, px);
    dynbuf_reset(&b);
    ib_tar_file(&b, "cats/cut.png", dynbuf_str(&f), dynbuf_len(&f) - 20);
    ib_tar_end(&b);
    expect_error(&b, IMAGES_FMT_FOLDERS, -EINVAL, "cats/cut.png: the file ends early");
    dynbuf_reset(&f);
    ib_jpeg(&f, FW, FH, 3, px);
    dynbuf_reset(&b);
    ib_tar_file(&b, "cats/cut.jpg", dynbuf_str(&f), dynbuf_len(&f) - 20);
    ib_tar_end(&b);
    expect_error(&b, IMAGES_FMT_FOLDERS, -EINVAL, "cats/cut.jpg: Premature end of JPEG file");
    dynbuf_reset(&f);
    ib_jpeg_scans(&f, FW, FH, 3, px, 1);
    dynbuf_reset(&b);
    ib_tar_file(&b, "cats/scans.jpg", dynbuf_str(&f), dynbuf_len(&f));
    ib_tar_end(&b);
    expect_error(&b, IMAGES_FMT_FOLDERS, -EINVAL, "cats/scans.jpg: a JPEG of more than 100 scans");
    dynbuf_reset(&b);
    ib_tar_file(&b, "cats/1.png", "GIF89a", 6);
    ib_tar_end(&b);
    expect_error(&b, IMAGES_FMT_FOLDERS, -EINVAL, "cats/1.png is neither a PNG nor a JPEG file");
    dynbuf_reset(&b);
    tar_png(&b, "1.png", 0, PNG_COLOR_TYPE_RGB, 8, 0);
    ib_tar_end(&b);
    expect_error(&b, IMAGES_FMT_FOLDERS, -EINVAL, "image 1.png is not in a class folder");
    dynbuf_reset(&b);
    ib_tar_file(&b, "cats/notes.txt", "x", 1);
    ib_tar_end(&b);
    expect_error(&b, IMAGES_FMT_FOLDERS, -EINVAL, "no .png, .jpg or .jpeg image in the archive");
    expect_error(&f, IMAGES_FMT_FOLDERS, -EINVAL, "bad tar archive");
    dynbuf_free(&f);
    dynbuf_free(&b);
}

int main(void)
{
    test_tar();
    test_cifar_file();
    test_cifar_tar();
    test_mnist();
    test_npz();
    test_npz_corrupt();
    test_npy_tar();
    test_folders();
    return check_exit();
}
