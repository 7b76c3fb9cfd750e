/* Unit tests of data/npz.c and zinflate.c: .npz archives (stored and deflated members, dtypes,
 * shapes), .npy files in a tar, read back pixel for pixel, and corrupt or refused archives with
 * their messages. */
#include "tests/unit/data/images_check.h"

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

int main(void)
{
    test_npz();
    test_npz_corrupt();
    test_npy_tar();
    return check_exit();
}
