/* dynbuf: a growing byte buffer with a hard cap (see dynbuf.h).
 *
 * Invariants: len <= max; cap <= max + 1; when p is not NULL, len < cap and p[len] == '\0'.
 * Every size sum is checked against max before it is formed, so none can wrap. */
#include "util/dynbuf.h"

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void dynbuf_init(dynbuf *b, size_t max)
{
    b->p = NULL;
    b->len = 0;
    b->cap = 0;
    b->max = max < SIZE_MAX ? max : SIZE_MAX - 1;
}

/* Makes room for n more bytes and the NUL; -EFBIG past max, -ENOMEM. */
static int dynbuf_grow(dynbuf *b, size_t n)
{
    size_t need, cap;
    char *p;

    if (n > b->max - b->len)
        return -EFBIG;
    need = b->len + n + 1;
    if (b->p && need <= b->cap)
        return 0;
    cap = b->cap ? b->cap : DYNBUF_FIRST;
    while (cap < need && cap <= (b->max + 1) / 2)
        cap *= 2;
    if (cap < need || cap > b->max + 1)
        cap = cap < need ? need : b->max + 1;
    p = realloc(b->p, cap);
    if (!p)
        return -ENOMEM;
    b->p = p;
    b->cap = cap;
    return 0;
}

int dynbuf_add(dynbuf *b, const void *data, size_t n)
{
    int rc = dynbuf_grow(b, n);

    if (rc < 0)
        return rc;
    if (n)
        memcpy(b->p + b->len, data, n);
    b->len += n;
    b->p[b->len] = '\0';
    return 0;
}

int dynbuf_adds(dynbuf *b, const char *s)
{
    return dynbuf_add(b, s, strlen(s));
}

int dynbuf_addf(dynbuf *b, const char *fmt, ...)
{
    va_list ap;
    int n, rc;

    va_start(ap, fmt);
    n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0)
        return -EINVAL;
    rc = dynbuf_grow(b, (size_t)n);
    if (rc < 0)
        return rc;
    va_start(ap, fmt);
    vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
    return 0;
}

const char *dynbuf_str(const dynbuf *b)
{
    return b->p ? b->p : "";
}

size_t dynbuf_len(const dynbuf *b)
{
    return b->len;
}

void dynbuf_cut(dynbuf *b, size_t len)
{
    if (len >= b->len)
        return;
    b->len = len;
    b->p[len] = '\0';
}

void dynbuf_reset(dynbuf *b)
{
    b->len = 0;
    if (b->p)
        b->p[0] = '\0';
}

char *dynbuf_take(dynbuf *b, size_t *len)
{
    char *p = b->p;
    size_t n = b->len;

    if (!p && !(p = calloc(1, 1)))
        return NULL;
    b->p = NULL;
    b->len = 0;
    b->cap = 0;
    if (len)
        *len = n;
    return p;
}

void dynbuf_free(dynbuf *b)
{
    if (!b)
        return;
    free(b->p);
    b->p = NULL;
    b->len = 0;
    b->cap = 0;
}
