/* Unit tests of data/images.c's raw binary formats: CIFAR-10 (one batch file, or the batches in a
 * tar) and MNIST (idx files in a tar, gzipped or not), read back pixel for pixel, and every
 * refused form with its message. */
#include "tests/unit/data/images_check.h"

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

int main(void)
{
    test_cifar_file();
    test_cifar_tar();
    test_mnist();
    return check_exit();
}
