/* images_build: writers of the image dataset formats, for the tests of data/images (built in
 * memory, so each test says exactly which bytes it reads): tar members (ustar, with a GNU 'L'
 * header for long names), CIFAR-10 records, MNIST IDX files, gzip, .npy arrays, zip archives
 * (stored or deflated), PNG and JPEG files.
 *
 * Every writer appends to a dynbuf; the tests hold few and small buffers, so an allocation that
 * fails here aborts the test (the allocation-failure test turns its counting off around them). */
#ifndef TRAINYARD_TESTS_IMAGES_BUILD_H
#define TRAINYARD_TESTS_IMAGES_BUILD_H

#include <stdint.h>
#include <stdio.h> /* before jpeglib.h, which uses FILE */
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h>
#include <png.h>
#include <zlib.h>

#include "util/dynbuf.h"

#define IB_MAX ((size_t)1 << 30)

static inline void ib_add(dynbuf *b, const void *p, size_t n)
{
    if (dynbuf_add(b, p, n) < 0)
        abort();
}

/* ---- tar ----------------------------------------------------------------------------------- */

/* Writes v as width - 1 octal digits and a NUL into f. */
static inline void ib_octal(unsigned char *f, int width, unsigned long long v)
{
    f[width - 1] = '\0';
    for (int i = width - 2; i >= 0; i--, v >>= 3)
        f[i] = (unsigned char)('0' + (v & 7));
}

/* One header: name (at most 100 bytes), size, type; magic "ustar\0" "00" (POSIX) or
 * "ustar  \0" (GNU). */
static inline void ib_tar_header(dynbuf *b, const char *name, size_t size, char type, int gnu)
{
    unsigned char h[512];
    memset(h, 0, sizeof h);
    memcpy(h, name, strnlen(name, 100));
    ib_octal(h + 100, 8, 0644);
    ib_octal(h + 108, 8, 0);
    ib_octal(h + 116, 8, 0);
    ib_octal(h + 124, 12, size);
    ib_octal(h + 136, 12, 0);
    h[156] = (unsigned char)type;
    memcpy(h + 257, gnu ? "ustar  " : "ustar\00000", 8);
    memset(h + 148, ' ', 8);
    unsigned sum = 0;
    for (int i = 0; i < 512; i++)
        sum += h[i];
    ib_octal(h + 148, 7, sum);
    ib_add(b, h, sizeof h);
}

static inline void ib_tar_pad(dynbuf *b, size_t size)
{
    static const char zero[512];
    if (size % 512)
        ib_add(b, zero, 512 - size % 512);
}

/* A member of the given type with data; a name over 100 bytes gets a GNU 'L' header first. */
static inline void ib_tar_member(dynbuf *b, const char *name, const void *data, size_t size,
                                 char type)
{
    size_t nl = strlen(name);
    if (nl > 100) {
        ib_tar_header(b, "././@LongLink", nl + 1, 'L', 1);
        ib_add(b, name, nl + 1);
        ib_tar_pad(b, nl + 1);
    }
    ib_tar_header(b, name, size, type, nl > 100);
    ib_add(b, data, size);
    ib_tar_pad(b, size);
}

static inline void ib_tar_file(dynbuf *b, const char *name, const void *data, size_t size)
{
    ib_tar_member(b, name, data, size, '0');
}

static inline void ib_tar_end(dynbuf *b)
{
    static const char zero[1024];
    ib_add(b, zero, sizeof zero);
}

/* ---- CIFAR-10 and MNIST -------------------------------------------------------------------- */

/* The value of channel ch of pixel (y, x) of image i, as the tests' images hold it. */
static inline unsigned char ib_pixel(size_t i, int y, int x, int ch)
{
    return (unsigned char)(i * 7 + (size_t)y * 13 + (size_t)x * 3 + (size_t)ch * 101);
}

/* n CIFAR records (labels i % 10 unless label >= 0) starting at image number first. */
static inline void ib_cifar(dynbuf *b, size_t first, size_t n, int label)
{
    unsigned char rec[3073];
    for (size_t i = first; i < first + n; i++) {
        rec[0] = (unsigned char)(label >= 0 ? label : (int)(i % 10));
        for (int ch = 0; ch < 3; ch++)
            for (int y = 0; y < 32; y++)
                for (int x = 0; x < 32; x++)
                    rec[1 + ch * 1024 + y * 32 + x] = ib_pixel(i, y, x, ch);
        ib_add(b, rec, sizeof rec);
    }
}

static inline void ib_be32(dynbuf *b, uint32_t v)
{
    unsigned char p[4] = {(unsigned char)(v >> 24), (unsigned char)(v >> 16),
                          (unsigned char)(v >> 8), (unsigned char)v};
    ib_add(b, p, 4);
}

/* An IDX images file of n rows × cols images (pixels ib_pixel(i, y, x, 0)). */
static inline void ib_idx_images(dynbuf *b, uint32_t n, uint32_t rows, uint32_t cols)
{
    ib_be32(b, 0x803);
    ib_be32(b, n);
    ib_be32(b, rows);
    ib_be32(b, cols);
    for (uint32_t i = 0; i < n; i++)
        for (uint32_t y = 0; y < rows; y++)
            for (uint32_t x = 0; x < cols; x++) {
                unsigned char v = ib_pixel(i, (int)y, (int)x, 0);
                ib_add(b, &v, 1);
            }
}

/* An IDX labels file of n labels (i % modulo). */
static inline void ib_idx_labels(dynbuf *b, uint32_t n, uint32_t modulo)
{
    ib_be32(b, 0x801);
    ib_be32(b, n);
    for (uint32_t i = 0; i < n; i++) {
        unsigned char v = (unsigned char)(i % modulo);
        ib_add(b, &v, 1);
    }
}

/* ---- zlib: gzip and raw deflate ------------------------------------------------------------ */

/* Compresses p[0..n) as gzip (gzip = 1) or raw deflate into b. */
static inline void ib_deflate(dynbuf *b, const void *p, size_t n, int gzip)
{
    z_stream z;
    memset(&z, 0, sizeof z);
    if (deflateInit2(&z, 6, Z_DEFLATED, gzip ? 16 + MAX_WBITS : -MAX_WBITS, 8,
                     Z_DEFAULT_STRATEGY) != Z_OK)
        abort();
    size_t cap = deflateBound(&z, (uLong)n);
    unsigned char *out = malloc(cap);
    if (!out)
        abort();
    z.next_in = (Bytef *)p;
    z.avail_in = (uInt)n;
    z.next_out = out;
    z.avail_out = (uInt)cap;
    if (deflate(&z, Z_FINISH) != Z_STREAM_END)
        abort();
    ib_add(b, out, cap - z.avail_out);
    deflateEnd(&z);
    free(out);
}

/* ---- npy and zip --------------------------------------------------------------------------- */

/* A version 1 .npy of the given descr and shape (ndim entries), data of its size; header padded
 * to 64 bytes with a newline, as numpy writes it. */
static inline void ib_npy(dynbuf *b, const char *descr, const uint64_t *shape, int ndim,
                          const void *data, size_t size)
{
    char dict[256];
    int n =
        snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': (", descr);
    for (int i = 0; i < ndim; i++)
        n += snprintf(dict + n, sizeof dict - (size_t)n, "%llu,%s", (unsigned long long)shape[i],
                      i + 1 < ndim ? " " : "");
    if (ndim > 1)
        n--; /* numpy writes (3,) but (3, 4) */
    n += snprintf(dict + n, sizeof dict - (size_t)n, "), }");
    size_t total = 10 + (size_t)n + 1;
    size_t pad = (64 - total % 64) % 64;
    unsigned char head[10] = {0x93,
                              'N',
                              'U',
                              'M',
                              'P',
                              'Y',
                              1,
                              0,
                              (unsigned char)((size_t)n + pad + 1),
                              (unsigned char)(((size_t)n + pad + 1) >> 8)};
    ib_add(b, head, sizeof head);
    ib_add(b, dict, (size_t)n);
    for (size_t i = 0; i < pad; i++)
        ib_add(b, " ", 1);
    ib_add(b, "\n", 1);
    ib_add(b, data, size);
}

static inline void ib_le(dynbuf *b, uint32_t v, int bytes)
{
    for (int i = 0; i < bytes; i++) {
        unsigned char c = (unsigned char)(v >> (8 * i));
        ib_add(b, &c, 1);
    }
}

/* A zip being written: the local parts in data, the central directory in cd. */
typedef struct ib_zip {
    dynbuf data, cd;
    int entries;
} ib_zip;

static inline void ib_zip_init(ib_zip *z)
{
    dynbuf_init(&z->data, IB_MAX);
    dynbuf_init(&z->cd, IB_MAX);
    z->entries = 0;
}

/* Adds member name holding p[0..n), stored (method 0) or deflated (8). */
static inline void ib_zip_add(ib_zip *z, const char *name, const void *p, size_t n, int method)
{
    dynbuf comp;
    dynbuf_init(&comp, IB_MAX);
    if (method == 8)
        ib_deflate(&comp, p, n, 0);
    else
        ib_add(&comp, p, n);
    uint32_t crc = (uint32_t)crc32(0, (const Bytef *)p, (uInt)n);
    uint32_t off = (uint32_t)dynbuf_len(&z->data), nl = (uint32_t)strlen(name);
    ib_le(&z->data, 0x04034b50, 4);
    ib_le(&z->data, 20, 2);
    ib_le(&z->data, 0, 2);
    ib_le(&z->data, (uint32_t)method, 2);
    ib_le(&z->data, 0, 4); /* time, date */
    ib_le(&z->data, crc, 4);
    ib_le(&z->data, (uint32_t)dynbuf_len(&comp), 4);
    ib_le(&z->data, (uint32_t)n, 4);
    ib_le(&z->data, nl, 2);
    ib_le(&z->data, 0, 2);
    ib_add(&z->data, name, nl);
    ib_add(&z->data, dynbuf_str(&comp), dynbuf_len(&comp));
    ib_le(&z->cd, 0x02014b50, 4);
    ib_le(&z->cd, 20, 2);
    ib_le(&z->cd, 20, 2);
    ib_le(&z->cd, 0, 2);
    ib_le(&z->cd, (uint32_t)method, 2);
    ib_le(&z->cd, 0, 4);
    ib_le(&z->cd, crc, 4);
    ib_le(&z->cd, (uint32_t)dynbuf_len(&comp), 4);
    ib_le(&z->cd, (uint32_t)n, 4);
    ib_le(&z->cd, nl, 2);
    ib_le(&z->cd, 0, 2); /* extra */
    ib_le(&z->cd, 0, 2); /* comment */
    ib_le(&z->cd, 0, 2); /* disk */
    ib_le(&z->cd, 0, 2); /* internal attributes */
    ib_le(&z->cd, 0, 4); /* external attributes */
    ib_le(&z->cd, off, 4);
    ib_add(&z->cd, name, nl);
    z->entries++;
    dynbuf_free(&comp);
}

/* Ends the zip into out (data, central directory, end record); frees z. */
static inline void ib_zip_end(ib_zip *z, dynbuf *out)
{
    uint32_t cd_off = (uint32_t)dynbuf_len(&z->data), cd_size = (uint32_t)dynbuf_len(&z->cd);
    ib_add(out, dynbuf_str(&z->data), dynbuf_len(&z->data));
    ib_add(out, dynbuf_str(&z->cd), dynbuf_len(&z->cd));
    ib_le(out, 0x06054b50, 4);
    ib_le(out, 0, 2);
    ib_le(out, 0, 2);
    ib_le(out, (uint32_t)z->entries, 2);
    ib_le(out, (uint32_t)z->entries, 2);
    ib_le(out, cd_size, 4);
    ib_le(out, cd_off, 4);
    ib_le(out, 0, 2);
    dynbuf_free(&z->data);
    dynbuf_free(&z->cd);
}

/* ---- PNG and JPEG -------------------------------------------------------------------------- */

static inline void ib_png_write(png_structp png, png_bytep p, png_size_t n)
{
    ib_add(png_get_io_ptr(png), p, n);
}

static inline void ib_png_flush(png_structp png)
{
    (void)png;
}

/* A PNG of w × h, the given colour type and bit depth, interlaced (Adam7) or not, from rows
 * of packed samples (16-bit samples big-endian, as PNG stores them). */
static inline void ib_png(dynbuf *b, int w, int h, int color_type, int depth, int interlace,
                          const unsigned char *samples)
{
    png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
    png_infop info = png ? png_create_info_struct(png) : NULL;
    png_bytep *rows = malloc((size_t)h * sizeof *rows);
    if (!info || !rows || setjmp(png_jmpbuf(png)))
        abort();
    png_set_write_fn(png, b, ib_png_write, ib_png_flush);
    png_set_IHDR(png, info, (png_uint_32)w, (png_uint_32)h, depth, color_type,
                 interlace ? PNG_INTERLACE_ADAM7 : PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT,
                 PNG_FILTER_TYPE_DEFAULT);
    if (color_type == PNG_COLOR_TYPE_PALETTE) {
        png_color pal[256];
        for (int i = 0; i < 256; i++)
            pal[i] = (png_color){(png_byte)i, (png_byte)(255 - i), (png_byte)(i / 2)};
        png_set_PLTE(png, info, pal, 256);
    }
    png_write_info(png, info);
    size_t row = png_get_rowbytes(png, info);
    for (int y = 0; y < h; y++)
        rows[y] = (png_bytep)samples + (size_t)y * row;
    png_write_image(png, rows);
    png_write_end(png, info);
    png_destroy_write_struct(&png, &info);
    free(rows);
}

/* A baseline JPEG (quality 95) of w × h × c (1 grey, 3 RGB, 4 CMYK) from packed samples; with
 * many_scans (c = 3 only), a progressive one of 190 scans: the DC of all three components, then
 * each component's 63 AC coefficients one scan each. */
static inline void ib_jpeg_scans(dynbuf *b, int w, int h, int c, const unsigned char *samples,
                                 int many_scans)
{
    struct jpeg_compress_struct cinfo;
    struct jpeg_error_mgr jerr;
    unsigned char *mem = NULL;
    unsigned long size = 0;
    cinfo.err = jpeg_std_error(&jerr);
    jpeg_create_compress(&cinfo);
    jpeg_mem_dest(&cinfo, &mem, &size);
    cinfo.image_width = (JDIMENSION)w;
    cinfo.image_height = (JDIMENSION)h;
    cinfo.input_components = c;
    cinfo.in_color_space = c == 1 ? JCS_GRAYSCALE : c == 3 ? JCS_RGB : JCS_CMYK;
    jpeg_set_defaults(&cinfo);
    jpeg_set_quality(&cinfo, 95, TRUE);
    static jpeg_scan_info scans[1 + 3 * 63];
    if (many_scans) {
        scans[0] = (jpeg_scan_info){3, {0, 1, 2, 0}, 0, 0, 0, 0};
        for (int k = 0; k < 3 * 63; k++)
            scans[1 + k] = (jpeg_scan_info){1, {k / 63, 0, 0, 0}, 1 + k % 63, 1 + k % 63, 0, 0};
        cinfo.scan_info = scans;
        cinfo.num_scans = 1 + 3 * 63;
    }
    jpeg_start_compress(&cinfo, TRUE);
    while (cinfo.next_scanline < cinfo.image_height) {
        JSAMPROW row = (JSAMPROW)(samples + (size_t)cinfo.next_scanline * (size_t)w * (size_t)c);
        jpeg_write_scanlines(&cinfo, &row, 1);
    }
    jpeg_finish_compress(&cinfo);
    jpeg_destroy_compress(&cinfo);
    ib_add(b, mem, size);
    free(mem);
}

static inline void ib_jpeg(dynbuf *b, int w, int h, int c, const unsigned char *samples)
{
    ib_jpeg_scans(b, w, h, c, samples, 0);
}

#endif
