/* tarbuild: hand-made tar members and gzip for the bundle tests, so that hostile archives
 * (members a real tar would never write) can be built byte by byte. */
#ifndef TRAINYARD_TESTS_SCRIPT_TARBUILD_H
#define TRAINYARD_TESTS_SCRIPT_TARBUILD_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zlib.h>

typedef struct tarbuf {
    unsigned char *p;
    size_t n, cap;
} tarbuf;

static void tb_put(tarbuf *t, const void *d, size_t n)
{
    if (t->n + n > t->cap) {
        t->cap = (t->n + n) * 2 + 4096;
        t->p = realloc(t->p, t->cap);
    }
    memcpy(t->p + t->n, d, n);
    t->n += n;
}

/* One member: ustar header (type, name ≤ 100 bytes, link ≤ 100 bytes), data, padding. */
static void tb_member(tarbuf *t, char type, const char *name, const char *link, const void *data,
                      size_t size, unsigned mode)
{
    unsigned char h[512];
    memset(h, 0, sizeof h);
    memcpy(h, name, strlen(name) > 100 ? 100 : strlen(name));
    snprintf((char *)h + 100, 8, "%07o", mode);
    snprintf((char *)h + 108, 8, "%07o", 0);
    snprintf((char *)h + 116, 8, "%07o", 0);
    snprintf((char *)h + 124, 12, "%011zo", size);
    snprintf((char *)h + 136, 12, "%011o", 0);
    h[156] = (unsigned char)type;
    if (link)
        memcpy(h + 157, link, strlen(link));
    memcpy(h + 257,
           "ustar\0"
           "00",
           8);
    memset(h + 148, ' ', 8);
    unsigned sum = 0;
    for (int i = 0; i < 512; i++)
        sum += h[i];
    snprintf((char *)h + 148, 8, "%06o", sum);
    tb_put(t, h, 512);
    if (size) {
        tb_put(t, data, size);
        static const unsigned char z[512];
        if (size % 512)
            tb_put(t, z, 512 - size % 512);
    }
}

static void tb_end(tarbuf *t)
{
    static const unsigned char z[1024];
    tb_put(t, z, sizeof z);
}

/* gzip of t's bytes into a malloc'd buffer; *len its size. */
static unsigned char *tb_gzip(const tarbuf *t, size_t *len)
{
    z_stream z;
    memset(&z, 0, sizeof z);
    deflateInit2(&z, 6, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY);
    size_t cap = deflateBound(&z, t->n) + 64;
    unsigned char *out = malloc(cap);
    z.next_in = t->p;
    z.avail_in = (uInt)t->n;
    z.next_out = out;
    z.avail_out = (uInt)cap;
    deflate(&z, Z_FINISH);
    *len = cap - z.avail_out;
    deflateEnd(&z);
    return out;
}

#endif
