/* Unit tests of data/tar.c, the in-memory walk under the image formats (the format itself is
 * util/tar.c's, tested in tests/unit/util/test_tar.c): ustar, GNU and pax names, the members it
 * skips, and every refused form (links, unsafe paths, truncation, bad checksums) with its
 * message. */
#include "tests/unit/data/images_check.h"

/* ---- tar ----------------------------------------------------------------------------------- */

/* All regular files of an archive as "name:size\n" lines; the reader's last code. */
static int tar_list(const dynbuf *b, char *out, size_t cap)
{
    tar_reader r;
    tar_entry e;
    size_t used = 0;
    int rc;
    out[0] = '\0';
    err[0] = '\0';
    tar_reader_init(&r, dynbuf_str(b), dynbuf_len(b));
    while ((rc = tar_reader_next(&r, &e, err)) > 0)
        used += (size_t)snprintf(out + used, cap - used, "%s:%zu\n", e.name, e.size);
    return rc;
}

static void test_tar(void)
{
    dynbuf b;
    char out[8192], longname[300];
    dynbuf_init(&b, IB_MAX);

    /* Directories skipped, "./" and "//" dropped, a GNU long name, an empty file, pax path. */
    memset(longname, 'n', sizeof longname);
    memcpy(longname, "deep/", 5);
    longname[250] = '\0';
    ib_tar_member(&b, "./data/", "", 0, '5');
    ib_tar_file(&b, "./data//a.bin", "abc", 3);
    ib_tar_file(&b, longname, "x", 1);
    ib_tar_file(&b, "empty", "", 0);
    const char pax[] = "30 mtime=1700000000.123456789\n21 path=pax/long.bin\n";
    ib_tar_member(&b, "PaxHeaders/x", pax, sizeof pax - 1, 'x');
    ib_tar_file(&b, "short.bin", "12345", 5);
    ib_tar_end(&b);
    CHECK(tar_probe(dynbuf_str(&b), dynbuf_len(&b)));
    CHECK_INT(tar_list(&b, out, sizeof out), 0);
    char want[8192];
    snprintf(want, sizeof want, "data/a.bin:3\n%s:1\nempty:0\npax/long.bin:5\n", longname);
    CHECK_STR(out, want);

    /* No end blocks at all: the end of the data at a header boundary ends it too. */
    dynbuf_reset(&b);
    ib_tar_file(&b, "a", "1", 1);
    CHECK_INT(tar_list(&b, out, sizeof out), 0);
    CHECK_STR(out, "a:1\n");

    /* A size in GNU base-256. */
    dynbuf_reset(&b);
    ib_tar_file(&b, "b256", "hello", 5);
    char *h = (char *)dynbuf_str(&b);
    memset(h + 124, 0, 12);
    h[124] = (char)0x80;
    h[135] = 5;
    memset(h + 148, ' ', 8);
    unsigned sum = 0;
    for (int i = 0; i < 512; i++)
        sum += (unsigned char)h[i];
    ib_octal((unsigned char *)h + 148, 7, sum);
    CHECK_INT(tar_list(&b, out, sizeof out), 0);
    CHECK_STR(out, "b256:5\n");

    /* Refused: links, "..", absolute paths, devices, a bad checksum, truncation. */
    struct {
        const char *name;
        char type;
        const char *want;
    } bad[] = {
        {"link", '2', "tar member link is a link; only regular files are read"},
        {"hard", '1', "tar member hard is a link"},
        {"a/../../etc/passwd", '0', "tar member a/../../etc/passwd: an absolute path, a '..'"},
        {"/etc/passwd", '0', "tar member /etc/passwd: an absolute path"},
        {"fifo", '6', "tar member fifo has type 0x36, not a regular file"},
        {"./", '0', "an empty name"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        dynbuf_reset(&b);
        ib_tar_member(&b, bad[i].name, "", 0, bad[i].type);
        ib_tar_end(&b);
        CHECK_INT(tar_list(&b, out, sizeof out), -EINVAL);
        if (!strstr(err, bad[i].want)) {
            fprintf(stderr, "tar %s: \"%s\" lacks \"%s\"\n", bad[i].name, err, bad[i].want);
            check_failures++;
        }
    }
    dynbuf_reset(&b);
    ib_tar_file(&b, "a", "1", 1);
    ((char *)dynbuf_str(&b))[0] = 'b';
    CHECK_INT(tar_list(&b, out, sizeof out), -EINVAL);
    CHECK_STR(err, "bad tar archive: the header at offset 0 has a wrong checksum");
    CHECK(!tar_probe(dynbuf_str(&b), dynbuf_len(&b)));

    dynbuf_reset(&b);
    ib_tar_file(&b, "first", "1", 1);
    ib_tar_file(&b, "cut", "0123456789", 10);
    b.len -= 512 + 500; /* the second member's data and most of its header */
    CHECK_INT(tar_list(&b, out, sizeof out), -EINVAL);
    CHECK_STR(err, "truncated tar archive: the header at offset 1024 has 12 of 512 bytes");
    dynbuf_reset(&b);
    ib_tar_file(&b, "cut", "0123456789", 10);
    b.len -= 512;
    CHECK_INT(tar_list(&b, out, sizeof out), -EINVAL);
    CHECK_STR(err, "truncated tar archive: cut needs 10 bytes at offset 512, 0 are left");

    /* A pax header that is not records. */
    dynbuf_reset(&b);
    ib_tar_member(&b, "PaxHeaders/x", "99 path=x\n", 10, 'x');
    ib_tar_file(&b, "a", "1", 1);
    CHECK_INT(tar_list(&b, out, sizeof out), -EINVAL);
    CHECK_STR(err, "bad tar archive: malformed pax header at offset 0");
    dynbuf_free(&b);
}

int main(void)
{
    test_tar();
    return check_exit();
}
