/* decode: see decode.h.
 *
 * Both libraries report errors by longjmp. Each is driven by a *_steps() function that holds
 * the setjmp() and does every library call; the state a longjmp must find intact (the library's
 * structs, the read position, the message) lives in its caller's frame, so no local variable of
 * the function that called setjmp() is read after the jump (C11 7.13.2.1). The caller frees
 * the library's structs on both paths.
 *
 * Warnings: libpng's are ignored (benign by its own account); libjpeg's are ignored except
 * "premature end of JPEG file", which becomes an error so that a truncated JPEG is refused. */
#include "data/decode.h"

#include <errno.h>
#include <setjmp.h>
#include <stdio.h> /* before jpeglib.h, which uses FILE */
#include <string.h>

#include <jerror.h>
#include <jpeglib.h>
#include <png.h>

#include "util/err.h"
#include "data/images.h"

#define DECODE_MSG 200

/* Checks a header's size; writes the reason into msg and returns -1 when refused. */
static int decode_check_size(long w, long h, char *msg)
{
    if (w >= 1 && h >= 1 && w <= IMAGES_MAX_DIM && h <= IMAGES_MAX_DIM)
        return 0;
    snprintf(msg, DECODE_MSG, "%ld×%ld pixels; width and height must be 1 to %d", w, h,
             IMAGES_MAX_DIM);
    return -1;
}

/* Checks that the header's shape is the one asked for (decode_image()). */
static int decode_check_want(const decode_shape *got, const decode_shape *want, char *msg)
{
    if (!want || (got->h == want->h && got->w == want->w && got->c == want->c))
        return 0;
    snprintf(msg, DECODE_MSG, "%d×%d×%d, expected %d×%d×%d", got->h, got->w, got->c, want->h,
             want->w, want->c);
    return -1;
}

/* ---- PNG ----------------------------------------------------------------------------------- */

typedef struct dec_png {
    const unsigned char *p;
    size_t len, pos;
    char msg[DECODE_MSG];
} dec_png;

static void dec_png_read(png_structp png, png_bytep out, size_t n)
{
    dec_png *s = png_get_io_ptr(png);
    if (n > s->len - s->pos)
        png_error(png, "the file ends early");
    memcpy(out, s->p + s->pos, n);
    s->pos += n;
}

static void dec_png_error(png_structp png, png_const_charp msg)
{
    dec_png *s = png_get_error_ptr(png);
    snprintf(s->msg, sizeof s->msg, "%s", msg);
    png_longjmp(png, 1);
}

static void dec_png_warning(png_structp png, png_const_charp msg)
{
    (void)png;
    (void)msg;
}

/* The header into *got; with out, the pixels too (the header must match want). -1 on error,
 * the reason in s->msg. */
static int dec_png_steps(png_structp png, png_infop info, dec_png *s, decode_shape *got,
                         const decode_shape *want, unsigned char *out)
{
    if (setjmp(png_jmpbuf(png)))
        return -1;
    png_set_read_fn(png, s, dec_png_read);
    png_read_info(png, info);
    png_uint_32 w = png_get_image_width(png, info), h = png_get_image_height(png, info);
    int type = png_get_color_type(png, info), depth = png_get_bit_depth(png, info);
    if (decode_check_size((long)w, (long)h, s->msg) < 0)
        return -1;
    got->w = (int)w;
    got->h = (int)h;
    got->c = (type & PNG_COLOR_MASK_COLOR) ? 3 : 1; /* palette included; alpha dropped */
    if (!out)
        return 0;
    if (decode_check_want(got, want, s->msg) < 0)
        return -1;
    if (type == PNG_COLOR_TYPE_PALETTE)
        png_set_palette_to_rgb(png);
    if (type == PNG_COLOR_TYPE_GRAY && depth < 8)
        png_set_expand_gray_1_2_4_to_8(png);
    if (depth == 16)
        png_set_scale_16(png);
    if (type & PNG_COLOR_MASK_ALPHA)
        png_set_strip_alpha(png);
    int passes = png_set_interlace_handling(png);
    png_read_update_info(png, info);
    size_t stride = (size_t)w * (size_t)got->c;
    if (png_get_channels(png, info) != got->c || png_get_rowbytes(png, info) != stride) {
        snprintf(s->msg, sizeof s->msg, "an unexpected row layout (%d channels, %zu bytes)",
                 png_get_channels(png, info), png_get_rowbytes(png, info));
        return -1;
    }
    for (int p = 0; p < passes; p++)
        for (png_uint_32 y = 0; y < h; y++)
            png_read_row(png, out + y * stride, NULL);
    return 0;
}

static int dec_png_run(const char *data, size_t len, const char *name, decode_shape *got,
                       const decode_shape *want, unsigned char *out, char *err)
{
    dec_png s = {.p = (const unsigned char *)data, .len = len};
    png_structp png =
        png_create_read_struct(PNG_LIBPNG_VER_STRING, &s, dec_png_error, dec_png_warning);
    png_infop info = png ? png_create_info_struct(png) : NULL;
    int rc = 0;
    if (!info)
        rc = err_set(err, -ENOMEM, "%s: out of memory for the PNG decoder", name);
    else if (dec_png_steps(png, info, &s, got, want, out) < 0)
        rc = err_set(err, -EINVAL, "%s: %s", name, s.msg);
    png_destroy_read_struct(&png, info ? &info : NULL, NULL);
    return rc;
}

/* ---- JPEG ---------------------------------------------------------------------------------- */

/* A progressive JPEG may hold any number of scans, each a pass over the whole image: a small
 * file could cost minutes. Real encoders write about ten; more than this is refused. */
#define DECODE_MAX_SCANS 100

typedef struct dec_jpeg {
    struct jpeg_error_mgr pub; /* first: libjpeg hands back a pointer to it */
    struct jpeg_progress_mgr progress;
    jmp_buf jump;
    char msg[JMSG_LENGTH_MAX];
} dec_jpeg;

static void dec_jpeg_exit(j_common_ptr ci)
{
    dec_jpeg *e = (dec_jpeg *)ci->err;
    e->pub.format_message(ci, e->msg);
    longjmp(e->jump, 1);
}

static void dec_jpeg_emit(j_common_ptr ci, int level)
{
    if (level < 0 && ci->err->msg_code == JWRN_JPEG_EOF)
        ci->err->error_exit(ci);
}

static void dec_jpeg_progress(j_common_ptr ci)
{
    j_decompress_ptr d = (j_decompress_ptr)ci;
    if (d->input_scan_number > DECODE_MAX_SCANS) {
        dec_jpeg *e = (dec_jpeg *)ci->err;
        snprintf(e->msg, sizeof e->msg, "a JPEG of more than %d scans", DECODE_MAX_SCANS);
        longjmp(e->jump, 1);
    }
}

/* As dec_png_steps(), for JPEG. ci is zeroed but for its error manager. */
static int dec_jpeg_steps(struct jpeg_decompress_struct *ci, dec_jpeg *e, const char *data,
                          size_t len, decode_shape *got, const decode_shape *want,
                          unsigned char *out)
{
    if (setjmp(e->jump))
        return -1;
    jpeg_create_decompress(ci);
    ci->progress = &e->progress;
    jpeg_mem_src(ci, (const unsigned char *)data, (unsigned long)len);
    jpeg_read_header(ci, TRUE);
    if (decode_check_size((long)ci->image_width, (long)ci->image_height, e->msg) < 0)
        return -1;
    if (ci->num_components != 1 && ci->num_components != 3) {
        snprintf(e->msg, sizeof e->msg,
                 "a JPEG of %d colour components (CMYK?); only greyscale and colour are read",
                 ci->num_components);
        return -1;
    }
    got->w = (int)ci->image_width;
    got->h = (int)ci->image_height;
    got->c = ci->num_components;
    if (!out)
        return 0;
    if (decode_check_want(got, want, e->msg) < 0)
        return -1;
    ci->out_color_space = got->c == 1 ? JCS_GRAYSCALE : JCS_RGB;
    jpeg_start_decompress(ci);
    size_t stride = (size_t)got->w * (size_t)got->c;
    if (ci->output_components != got->c || ci->output_width != ci->image_width) {
        snprintf(e->msg, sizeof e->msg, "an unexpected output layout");
        return -1;
    }
    while (ci->output_scanline < ci->output_height) {
        JSAMPROW row = out + ci->output_scanline * stride;
        jpeg_read_scanlines(ci, &row, 1);
    }
    jpeg_finish_decompress(ci);
    return 0;
}

static int dec_jpeg_run(const char *data, size_t len, const char *name, decode_shape *got,
                        const decode_shape *want, unsigned char *out, char *err)
{
    struct jpeg_decompress_struct ci;
    dec_jpeg e;
    memset(&ci, 0, sizeof ci);
    memset(&e, 0, sizeof e);
    ci.err = jpeg_std_error(&e.pub);
    e.pub.error_exit = dec_jpeg_exit;
    e.pub.emit_message = dec_jpeg_emit;
    e.progress.progress_monitor = dec_jpeg_progress;
    int rc = 0;
    if (dec_jpeg_steps(&ci, &e, data, len, got, want, out) < 0)
        rc = err_set(err, -EINVAL, "%s: %s", name, e.msg);
    jpeg_destroy_decompress(&ci);
    return rc;
}

/* ---- by format ----------------------------------------------------------------------------- */

static int decode_run(const char *data, size_t len, const char *name, decode_shape *got,
                      const decode_shape *want, unsigned char *out, char *err)
{
    if (len >= 8 && memcmp(data, "\x89PNG\r\n\x1a\n", 8) == 0)
        return dec_png_run(data, len, name, got, want, out, err);
    if (len >= 3 && memcmp(data, "\xff\xd8\xff", 3) == 0)
        return dec_jpeg_run(data, len, name, got, want, out, err);
    return err_set(err, -EINVAL, "%s is neither a PNG nor a JPEG file", name);
}

int decode_header(const char *data, size_t len, const char *name, decode_shape *shape, char *err)
{
    decode_shape got;
    int rc = decode_run(data, len, name, &got, NULL, NULL, err);
    if (rc == 0)
        *shape = got;
    return rc;
}

int decode_image(const char *data, size_t len, const char *name, const decode_shape *shape,
                 unsigned char *out, char *err)
{
    decode_shape got;
    return decode_run(data, len, name, &got, shape, out, err);
}
