/* Unit tests of data/images_folder.c and decode.c: a tar of one folder per class holding PNG and
 * JPEG files (bit depths, colour types, interlacing), decoded, and the refused forms
 * with their messages. */
#include "tests/unit/data/images_check.h"

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
    test_folders();
    return check_exit();
}
