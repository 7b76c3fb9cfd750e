/* Unit tests of util/tar.c, the one tar reader: each rule of util/tar.h on hand-built headers
 * (checksums unsigned and signed, magic, number fields, base-256, prefix, pax records, GNU long
 * names, types without data, the end), truncated archives at every state, huge sizes; and
 * every archive read whole and in pieces of 1, 7 and 512 bytes, which must agree. */
#include "util/tar.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "tests/unit/check.h"
#include "util/err.h"

static unsigned char ar[64 * 1024];
static size_t ar_len;
static char err[ERR_LEN];

/* Writes v as width - 1 octal digits and a NUL. */
static void octal(unsigned char *f, int width, unsigned long long v)
{
    f[width - 1] = '\0';
    for (int i = width - 2; i >= 0; i--, v >>= 3)
        f[i] = (unsigned char)('0' + (v & 7));
}

/* Appends a POSIX header (gnu: GNU's magic) and returns it, its checksum still to be sealed. */
static unsigned char *hdr(const char *name, unsigned long long size, char type, int gnu)
{
    unsigned char *h = ar + ar_len;
    memset(h, 0, 512);
    memcpy(h, name, strnlen(name, 100));
    octal(h + 100, 8, 0644);
    octal(h + 124, 12, size);
    h[156] = (unsigned char)type;
    memcpy(h + 257, gnu ? "ustar  " : "ustar\00000", 8);
    ar_len += 512;
    return h;
}

/* Writes h's checksum field: the unsigned sum, or the signed one. */
static void seal(unsigned char *h, int sign)
{
    long s = 0;
    for (int i = 0; i < 512; i++)
        s += (i >= 148 && i < 156) ? ' ' : sign ? (signed char)h[i] : h[i];
    octal(h + 148, 7, (unsigned long long)s);
}

/* Appends data, padded to 512. */
static void put(const void *p, size_t n)
{
    memcpy(ar + ar_len, p, n);
    ar_len += n;
    while (ar_len % 512)
        ar[ar_len++] = 0;
}

/* A sealed member with its data. */
static void member(const char *name, char type, const char *data, size_t n)
{
    seal(hdr(name, n, type, 0), 0);
    put(data, n);
}

/* A sealed regular member whose header has field[0..n) written at offset at. */
static void member_with(const char *name, int gnu, size_t at, const char *field, size_t n,
                        const char *data, size_t size)
{
    unsigned char *h = hdr(name, size, '0', gnu);
    memcpy(h + at, field, n);
    seal(h, 0);
    put(data, size);
}

static void ext(char type, const char *data, size_t n)
{
    member("././@Ext", type, data, n);
}

static void end_blocks(void)
{
    memset(ar + ar_len, 0, 1024);
    ar_len += 1024;
}

/* Reads ar in pieces of step bytes (0: whole) into out: one line per member, "type path>link
 * size:data"; returns 0, or the reader's code with err set. */
static int list_step(size_t step, char *out, size_t cap)
{
    tar_stream t;
    tar_stream_init(&t);
    size_t o = 0, pos = 0;
    uint64_t left = 0; /* of the member's data */
    out[0] = '\0';
    err[0] = '\0';
    for (;;) {
        size_t n = ar_len - pos, used, len;
        if (step && n > step)
            n = step;
        const void *d;
        int ev = tar_stream_next(&t, ar + pos, n, &used, &d, &len, err);
        if (ev < 0)
            return ev;
        CHECK(used <= n);
        pos += used;
        if (ev == TAR_MEMBER) {
            o += (size_t)snprintf(out + o, cap - o, "%c %s>%s %llu:", t.m.type ? t.m.type : '@',
                                  t.m.path, t.m.link, (unsigned long long)t.m.size);
            left = t.m.size;
        } else if (ev == TAR_DATA) {
            o += (size_t)snprintf(out + o, cap - o, "%.*s", (int)len, (const char *)d);
            left -= len;
        } else if (ev == TAR_END) {
            break;
        } else if (pos == ar_len) {
            return tar_stream_end(&t, err);
        }
        if (ev != TAR_MORE && left == 0)
            o += (size_t)snprintf(out + o, cap - o, "\n");
    }
    /* after the end: nothing is taken */
    size_t used, len;
    const void *d;
    CHECK_INT(tar_stream_next(&t, ar, 512, &used, &d, &len, err), TAR_END);
    CHECK_INT(used, 0);
    return tar_stream_end(&t, err);
}

/* list_step whole and in pieces: every way must give the same listing and code. */
static int list(char *out, size_t cap)
{
    static const size_t steps[] = {1, 7, 512};
    char other[4096], first_err[ERR_LEN];
    int rc = list_step(0, out, cap);
    snprintf(first_err, sizeof first_err, "%s", err);
    for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++) {
        int rc2 = list_step(steps[i], other, sizeof other);
        if (rc2 != rc || strcmp(other, out) != 0 || strcmp(err, first_err) != 0) {
            fprintf(stderr, "step %zu: %d \"%s\" \"%s\", whole: %d \"%s\" \"%s\"\n", steps[i], rc2,
                    other, err, rc, out, first_err);
            check_failures++;
        }
    }
    return rc;
}

static void expect(int rc, const char *listing, const char *message)
{
    char out[4096];
    CHECK_INT(list(out, sizeof out), rc);
    if (listing)
        CHECK_STR(out, listing);
    if (message && !strstr(err, message)) {
        fprintf(stderr, "err \"%s\" lacks \"%s\"\n", err, message);
        check_failures++;
    }
    ar_len = 0;
}

static void test_headers(void)
{
    /* POSIX and GNU magic; the prefix read in POSIX headers only */
    member("a.txt", '0', "abc", 3);
    member_with("b.txt", 1, 345, "ignored", 7, "hi", 2); /* GNU: times live there */
    member_with("c.txt", 0, 345, "dir/sub", 7, "c", 1);
    end_blocks();
    expect(0, "0 a.txt> 3:abc\n0 b.txt> 2:hi\n0 dir/sub/c.txt> 1:c\n", NULL);
    member("a", '0', "x", 1);
    CHECK(tar_is_header(ar));
    unsigned field = 0;
    CHECK(sscanf((const char *)ar + 148, "%o", &field) == 1 && field > 0);
    CHECK_INT(tar_checksum(ar), field);
    ar_len = 0;

    /* the checksum: unsigned or signed; wrong, all spaces or 0 refused */
    unsigned char *h = hdr("caf\xc3\xa9", 0, '0', 0);
    seal(h, 1);
    CHECK(tar_is_header(h));
    end_blocks();
    expect(0, "0 caf\xc3\xa9> 0:\n", NULL);
    h = hdr("x", 0, '0', 0);
    seal(h, 0);
    h[0] = 'y';
    CHECK(!tar_is_header(h));
    expect(-EINVAL, NULL, "bad tar archive: the header at offset 0 has a wrong checksum");
    h = hdr("x", 0, '0', 0);
    memset(h + 148, ' ', 8);
    expect(-EINVAL, NULL, "wrong checksum");
    h = hdr("x", 0, '0', 0);
    memset(h + 148, 0, 8);
    expect(-EINVAL, NULL, "wrong checksum");

    /* magic: "ustar" then NUL or space; anything else (v7 included) refused */
    member("ok", '0', "", 0);
    h = hdr("x", 0, '0', 0);
    h[262] = 'X';
    seal(h, 0);
    expect(-EINVAL, NULL, "the block at offset 512 is not a ustar or GNU tar header");
    h = hdr("x", 0, '0', 0);
    memset(h + 257, 0, 8);
    seal(h, 0);
    CHECK(!tar_is_header(h));
    expect(-EINVAL, NULL, "not a ustar or GNU tar header");
}

static void test_numbers(void)
{
    /* leading spaces, a space end, twelve digits with no end, a NUL-first field read 0 */
    member_with("s", 0, 124, "     3 ", 7, "abc", 3);
    member_with("t", 0, 124, "000000000002", 12, "de", 2);
    unsigned char *h = hdr("z", 0, '0', 0);
    memset(h + 124, 0, 12);
    seal(h, 0);
    end_blocks();
    expect(0, "0 s> 3:abc\n0 t> 2:de\n0 z> 0:\n", NULL);

    /* all spaces, a non-octal digit, junk after the digits: refused */
    const char *bad[] = {"            ", "00000000008", "0000000001x"};
    for (int i = 0; i < 3; i++) {
        h = hdr("n", 0, '0', 0);
        memcpy(h + 124, bad[i], 12);
        seal(h, 0);
        end_blocks();
        expect(-EINVAL, NULL, "the header at offset 0 has an unreadable size or mode");
    }
    h = hdr("m", 0, '0', 0);
    memset(h + 100, ' ', 8);
    seal(h, 0);
    expect(-EINVAL, NULL, "unreadable size or mode");

    /* base-256: read; negative and past 2^63 - 1 refused; the largest one is read, and is
     * then a huge size the data cannot meet */
    h = hdr("b", 0, '0', 0);
    memset(h + 124, 0, 12);
    h[124] = 0x80;
    h[135] = 5;
    seal(h, 0);
    put("hello", 5);
    end_blocks();
    expect(0, "0 b> 5:hello\n", NULL);
    h = hdr("neg", 0, '0', 0);
    memset(h + 124, 0xff, 12);
    seal(h, 0);
    expect(-EINVAL, NULL, "unreadable size");
    h = hdr("big", 0, '0', 0);
    memset(h + 124, 0, 12);
    h[124] = 0x80;
    h[128] = 0x80; /* bit 63 */
    seal(h, 0);
    expect(-EINVAL, NULL, "unreadable size");
    h = hdr("huge", 0, '0', 0);
    memset(h + 124, 0xff, 12);
    h[124] = 0x80;
    memset(h + 125, 0, 3);
    h[128] = 0x7f;
    seal(h, 0);
    ar[ar_len++] = 'x';
    expect(-EINVAL, NULL,
           "truncated tar archive: huge needs 9223372036854775807 bytes at offset 512, 1 are left");
    /* the largest octal size, 8 GiB - 1 */
    h = hdr("oct", 077777777777ull, '0', 0);
    seal(h, 0);
    expect(-EINVAL, NULL, "oct needs 8589934591 bytes at offset 512, 0 are left");
}

static void test_pax(void)
{
    /* path, linkpath and size apply to the next member only; other keys (a NUL in a value
     * included) are passed; an empty value cancels its record */
    const char pax[] = "30 mtime=1700000000.123456789\n"
                       "21 path=pax/long.bin\n"
                       "16 linkpath=tgt\n"
                       "10 size=4\n"
                       "13 x.bin=\0\001\002\n";
    ext('x', pax, sizeof pax - 1);
    seal(hdr("short", 9, '0', 0), 0); /* its size field says 9: the pax size wins */
    put("1234", 4);
    member("plain", '0', "p", 1);
    const char cancel[] = "21 path=pax/long.bin\n8 path=\n";
    ext('x', cancel, sizeof cancel - 1);
    member("own", '0', "o", 1);
    const char global[] = "16 path=globbed\n";
    ext('g', global, sizeof global - 1);
    member("not-globbed", '0', "g", 1);
    end_blocks();
    expect(0, "0 pax/long.bin>tgt 4:1234\n0 plain> 1:p\n0 own> 1:o\n0 not-globbed> 1:g\n", NULL);

    /* malformed records: each refuses the archive */
    const char *bad[] = {
        "99 path=x\n",      /* longer than the member */
        "8 path=x\n",       /* its length is not its own */
        "11 pathxyz\n",     /* no '=' */
        "6 =ab\n",          /* an empty key */
        "10 path=xy",       /* no '\n' at its end */
        " 9 path=x\n",      /* a space before its length */
        "+10 path=x\n",     /* a sign */
        "10 path=x\n10 pa", /* the next one runs past the member */
        "11 size=1x\n",     /* a size that is not a number */
        "3 a\n",            /* too short for key, '=' and '\n' */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ext('x', bad[i], strlen(bad[i]));
        member("m", '0', "", 0);
        end_blocks();
        expect(-EINVAL, NULL, "bad tar archive: malformed pax header at offset 0");
    }
    const char nul[] = "12 path=a\0b\n";
    ext('x', nul, sizeof nul - 1);
    member("m", '0', "", 0);
    expect(-EINVAL, NULL, "a pax path or linkpath holding a NUL at offset 0");

    /* a path of 4095 bytes passes, 4096 is refused */
    static char rec[5000], want[5000];
    for (int over = 0; over < 2; over++) {
        size_t vlen = 4095 + (size_t)over;
        size_t rlen = 5 + 1 + vlen + 1 + 4; /* "NNNN path=" value "\n" */
        int k = snprintf(rec, sizeof rec, "%zu path=", rlen);
        memset(rec + k, 'p', vlen);
        rec[k + vlen] = '\n';
        ext('x', rec, rlen);
        member("m", '0', "", 0);
        end_blocks();
        if (over) {
            expect(-EINVAL, NULL, "a path or link target over 4095 bytes");
        } else {
            memset(want, 'p', vlen);
            snprintf(want + vlen, sizeof want - vlen, "> 0:\n");
            char out[8192];
            CHECK_INT(list_step(0, out, sizeof out), 0);
            CHECK(strlen(out) > 4 && out[0] == '0' && !strcmp(out + 2, want));
            ar_len = 0;
        }
    }
}

static void test_gnu(void)
{
    /* 'L' and 'K' read up to their NUL; what follows the NUL is ignored; neither has a cap
     * on its size but the path's */
    char lname[300];
    memset(lname, 'L', 150);
    lname[150] = '\0';
    memcpy(lname + 151, "junk", 4);
    ext('L', lname, 155);
    ext('K', "link-target\0zz", 14);
    member("cut", '2', "", 0);
    static char padded[3000];
    memcpy(padded, "short-name", 10);
    ext('L', padded, sizeof padded);
    member("x", '0', "q", 1);
    end_blocks();
    char want[512];
    snprintf(want, sizeof want, "2 %.150s>link-target 0:\n0 short-name> 1:q\n", lname);
    expect(0, want, NULL);

    static char toolong[4200];
    memset(toolong, 'n', sizeof toolong);
    ext('L', toolong, sizeof toolong);
    member("x", '0', "", 0);
    expect(-EINVAL, NULL,
           "bad tar archive: a path or link target over 4095 bytes in the "
           "extended header at offset 0");
}

static void test_types_and_end(void)
{
    /* links, devices, directories and FIFOs have no data whatever their size field says: the
     * next header follows at once */
    const char types[] = "123456";
    for (int i = 0; i < 6; i++)
        seal(hdr("t", 1024, types[i], 0), 0);
    member("after", '0', "a", 1);
    /* the end is the first zero block: what follows is not read */
    memset(ar + ar_len, 0, 512);
    ar_len += 512;
    memcpy(ar + ar_len, "junk after the end", 18);
    ar_len += 512;
    expect(0, "1 t> 0:\n2 t> 0:\n3 t> 0:\n4 t> 0:\n5 t> 0:\n6 t> 0:\n0 after> 1:a\n", NULL);
    /* input that ends at a header boundary, no end blocks: fine; empty input too */
    member("a", '\0', "1", 1);
    expect(0, "@ a> 1:1\n", NULL);
    expect(0, "", NULL);

    /* truncated: inside a header, data, padding, an extension */
    member("first", '0', "1", 1);
    member("cut", '0', "0123456789", 10);
    ar_len -= 512 + 500;
    expect(-EINVAL, "0 first> 1:1\n",
           "truncated tar archive: the header at offset 1024 has 12 of 512 bytes");
    member("cut", '0', "0123456789", 10);
    ar_len -= 510;
    expect(-EINVAL, NULL, "truncated tar archive: cut needs 10 bytes at offset 512, 2 are left");
    member("cut", '0', "0123456789", 10);
    ar_len -= 100;
    expect(-EINVAL, NULL, "truncated tar archive: it ends inside a member's padding at offset 924");
    ext('x', "21 path=pax/long.bin\n", 21);
    ar_len -= 500;
    expect(-EINVAL, NULL,
           "truncated tar archive: the extended header at offset 0 needs 21 bytes, 12 are left");
}

int main(void)
{
    test_headers();
    test_numbers();
    test_pax();
    test_gnu();
    test_types_and_end();
    return check_exit();
}
