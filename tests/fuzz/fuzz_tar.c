/* fuzz_tar: libFuzzer target for util/tar.c, the one tar reader (under data/tar.c and
 * script/bundle.c).
 *
 * Input: byte 0 + 1 is the piece size; the rest is the archive, in an exact-size copy so that a
 * read past the end is caught. It is read twice, whole and in pieces of that size.
 * Properties: the reader never takes more than it is given; every data piece lies inside the
 * bytes given; a member's path and link are NUL-terminated inside their buffers; the data
 * pieces of a member add up to its size unless the archive ends in them; both reads see the
 * same members, the same data and end with the same code and message. Never a crash. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/err.h"
#include "util/tar.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct summary {
    uint64_t members, bytes, hash;
    int rc;
    char err[ERR_LEN];
} summary;

static void fuzz_fail(const char *what)
{
    fprintf(stderr, "fuzz_tar: %s\n", what);
    abort();
}

static uint64_t fuzz_mix(uint64_t h, const unsigned char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

static void fuzz_read(const unsigned char *p, size_t n, size_t step, summary *s)
{
    tar_stream t;
    tar_stream_init(&t);
    memset(s, 0, sizeof *s);
    s->hash = 14695981039346656037ull;
    size_t pos = 0;
    uint64_t left = 0;
    for (;;) {
        size_t give = n - pos < step ? n - pos : step, used, len;
        const void *d;
        int ev = tar_stream_next(&t, p + pos, give, &used, &d, &len, s->err);
        if (ev < 0) {
            s->rc = ev;
            return;
        }
        if (used > give)
            fuzz_fail("took more than it was given");
        if (ev == TAR_MEMBER) {
            if (!memchr(t.m.path, '\0', sizeof t.m.path) ||
                !memchr(t.m.link, '\0', sizeof t.m.link))
                fuzz_fail("a path or link without its NUL");
            if (left != 0)
                fuzz_fail("a member began before the last one's data was all given");
            s->members++;
            left = t.m.size;
            s->hash = fuzz_mix(s->hash, (const unsigned char *)t.m.path, strlen(t.m.path) + 1);
            s->hash = fuzz_mix(s->hash, (const unsigned char *)t.m.link, strlen(t.m.link) + 1);
            s->hash = fuzz_mix(s->hash, (const unsigned char *)&t.m.type, 1);
        } else if (ev == TAR_DATA) {
            const unsigned char *q = d;
            if (q < p + pos || q + len > p + pos + give || len > left)
                fuzz_fail("a data piece outside the bytes given or past the member");
            left -= len;
            s->bytes += len;
            s->hash = fuzz_mix(s->hash, q, len);
        }
        pos += used;
        if (ev == TAR_END || (ev == TAR_MORE && pos == n))
            break;
    }
    s->rc = tar_stream_end(&t, s->err);
    if (s->rc == 0 && left != 0)
        fuzz_fail("a clean end inside a member's data");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    size_t step = (size_t)data[0] + 1, n = size - 1;
    unsigned char *p = malloc(n ? n : 1);
    if (!p)
        return 0;
    memcpy(p, data + 1, n);
    summary whole, pieces;
    fuzz_read(p, n, n ? n : 1, &whole);
    fuzz_read(p, n, step, &pieces);
    if (whole.rc != pieces.rc || whole.members != pieces.members || whole.bytes != pieces.bytes ||
        whole.hash != pieces.hash || strcmp(whole.err, pieces.err) != 0)
        fuzz_fail("whole and in pieces differ");
    free(p);
    return 0;
}
