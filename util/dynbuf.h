/* dynbuf: one growing byte buffer with a hard cap, for every buffer that grows from outside
 * input (request bodies, stream events, server replies, job documents), after curl's dynbuf.
 *
 * A buffer is initialised with the most bytes it may ever hold; an append that would pass it
 * fails with -EFBIG and adds nothing, so a caller can answer "too large" (413, a clear CLI
 * message) instead of growing without end. The bytes are always followed by a NUL (not counted
 * in the length), so text can be read in place. Capacity doubles from DYNBUF_FIRST bytes and is
 * held to max + 1.
 *
 * Ownership: the buffer owns its memory until dynbuf_take() hands it to the caller (free()).
 * dynbuf_free() accepts a buffer that was only initialised, or zeroed. A failed append leaves
 * the buffer as it was. Not thread-safe: one owner at a time. */
#ifndef TRAINYARD_UTIL_DYNBUF_H
#define TRAINYARD_UTIL_DYNBUF_H

#include <stddef.h>

#define DYNBUF_FIRST 256 /* the first allocation, or max + 1 when smaller */

typedef struct dynbuf {
    char *p;    /* NULL until the first byte; then len bytes and a NUL */
    size_t len; /* bytes held */
    size_t cap; /* bytes allocated (len + 1 at least once allocated) */
    size_t max; /* the most bytes it may hold */
} dynbuf;

/* An empty buffer that will hold at most max bytes. */
void dynbuf_init(dynbuf *b, size_t max);
/* Appends n bytes of data; -EFBIG when len + n would pass max, -ENOMEM; nothing is added then. */
int dynbuf_add(dynbuf *b, const void *data, size_t n);
/* Appends a NUL-terminated string (as dynbuf_add). */
int dynbuf_adds(dynbuf *b, const char *s);
/* Appends printf-formatted text (as dynbuf_add; -EINVAL for a format error). */
int dynbuf_addf(dynbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The bytes held, NUL-terminated; "" when empty (never NULL). Valid until the next change. */
const char *dynbuf_str(const dynbuf *b);
/* The number of bytes held. */
size_t dynbuf_len(const dynbuf *b);
/* Keeps the first len bytes (len <= dynbuf_len(), else nothing changes), memory and cap kept. */
void dynbuf_cut(dynbuf *b, size_t len);
/* Empties the buffer, keeping its memory and its cap. */
void dynbuf_reset(dynbuf *b);
/* Hands the bytes (NUL-terminated, for free()) to the caller and empties the buffer; *len (may be
 * NULL) is their count. NULL only when out of memory (an empty buffer gives ""). */
char *dynbuf_take(dynbuf *b, size_t *len);
/* Frees the memory; the buffer is empty afterwards, with its cap. Accepts NULL. */
void dynbuf_free(dynbuf *b);

#endif
