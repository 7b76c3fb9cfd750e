/* Tests of script/bundle.c: pack → check → unpack round trips (the same bytes twice, modes,
 * symlinks, long paths through pax), and the refusals (absolute paths, "..", links out, hard
 * links, devices, FIFOs, caps, members beneath a symlink), each archive built by hand. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "script/bundle.h"
#include "tests/unit/check.h"
#include "tests/unit/script/tarbuild.h"
#include "tests/unit/script/testfs.h"
#include "util/err.h"

static char tmp[256];

static void test_round_trip(void)
{
    char src[300], p[700], a[300], b[300], out[300];
    snprintf(src, sizeof src, "%s/src", tmp);
    mkdir(src, 0755);
    snprintf(p, sizeof p, "%s/train.py", src);
    write_file(p, "print('hi')\n", 0644);
    snprintf(p, sizeof p, "%s/run.sh", src);
    write_file(p, "#!/bin/sh\necho run\n", 0700);
    snprintf(p, sizeof p, "%s/pkg", src);
    mkdir(p, 0700);
    snprintf(p, sizeof p, "%s/pkg/mod.py", src);
    write_file(p, "x = 1\n", 0600);
    snprintf(p, sizeof p, "%s/empty", src);
    mkdir(p, 0755);
    snprintf(p, sizeof p, "%s/pkg/link.py", src);
    symlink("../train.py", p);
    /* a path over 100 bytes with no place to split it for ustar: a pax path record */
    char longname[200];
    memset(longname, 'n', 150);
    longname[150] = '\0';
    snprintf(p, sizeof p, "%s/%s", src, longname);
    write_file(p, "long\n", 0644);
    snprintf(p, sizeof p, "%s/fifo", src);
    mkfifo(p, 0644); /* skipped by pack */

    snprintf(a, sizeof a, "%s/a.tar.gz", tmp);
    snprintf(b, sizeof b, "%s/b.tar.gz", tmp);
    char err[ERR_LEN] = "";
    bundle_info info = {0};
    CHECK_INT(bundle_pack(src, a, NULL, &info, err), 0);
    CHECK_INT(info.files, 4);
    CHECK_INT(info.unpacked_bytes, 12 + 19 + 6 + 5);
    sleep(1); /* new mtimes must not change the bytes */
    snprintf(p, sizeof p, "%s/train.py", src);
    write_file(p, "print('hi')\n", 0644);
    CHECK_INT(bundle_pack(src, b, NULL, NULL, err), 0);
    size_t la, lb;
    char *da = read_all(a, &la), *db = read_all(b, &lb);
    CHECK(da && db && la == lb && memcmp(da, db, la) == 0);

    bundle_info ci = {0};
    CHECK_INT(bundle_check(da, la, NULL, &ci, err), 0);
    CHECK_INT(ci.files, 4);
    CHECK_INT(ci.unpacked_bytes, info.unpacked_bytes);

    snprintf(out, sizeof out, "%s/out", tmp);
    CHECK_INT(bundle_unpack(da, la, out, NULL, &ci, err), 0);
    if (err[0])
        fprintf(stderr, "%s\n", err);
    struct stat st;
    snprintf(p, sizeof p, "%s/run.sh", out);
    CHECK(stat(p, &st) == 0 && (st.st_mode & 07777) == 0755);
    snprintf(p, sizeof p, "%s/pkg/mod.py", out);
    CHECK(stat(p, &st) == 0 && (st.st_mode & 07777) == 0644);
    snprintf(p, sizeof p, "%s/pkg", out);
    CHECK(stat(p, &st) == 0 && S_ISDIR(st.st_mode) && (st.st_mode & 07777) == 0755);
    snprintf(p, sizeof p, "%s/empty", out);
    CHECK(stat(p, &st) == 0 && S_ISDIR(st.st_mode));
    snprintf(p, sizeof p, "%s/pkg/link.py", out);
    char t[64] = "";
    CHECK(readlink(p, t, sizeof t - 1) > 0 && !strcmp(t, "../train.py"));
    snprintf(p, sizeof p, "%s/%s", out, longname);
    size_t ll;
    char *lc = read_all(p, &ll);
    CHECK(lc && !strcmp(lc, "long\n"));
    free(lc);
    snprintf(p, sizeof p, "%s/fifo", out);
    CHECK(lstat(p, &st) < 0);

    /* the unpacked tree packs to the same bytes */
    char c[300];
    snprintf(c, sizeof c, "%s/c.tar.gz", tmp);
    CHECK_INT(bundle_pack(out, c, NULL, NULL, err), 0);
    size_t lc2;
    char *dc = read_all(c, &lc2);
    CHECK(dc && lc2 == la && memcmp(dc, da, la) == 0);
    free(dc);

    /* a standard reader agrees: Python's tarfile lists the same members */
    if (access("/usr/bin/python3", X_OK) == 0) {
        char cmd[700];
        snprintf(cmd, sizeof cmd,
                 "/usr/bin/python3 -c \"import tarfile,sys; t=tarfile.open('%s'); "
                 "n=sorted(m.name for m in t); sys.exit(0 if len(n)==7 and 'pkg/link.py' in n "
                 "else 1)\"",
                 a);
        CHECK_INT(system(cmd), 0);
    }

    /* unpack into a folder that is not empty: refused */
    CHECK_INT(bundle_unpack(da, la, out, NULL, NULL, err), -EEXIST);
    free(da);
    free(db);
}

/* Builds one archive from the members the callback adds and expects refusal with code. */
static void refuse(const char *what, tarbuf *t, int code, const bundle_limits *lim,
                   const char *needle)
{
    tb_end(t);
    size_t len;
    unsigned char *gz = tb_gzip(t, &len);
    char err[ERR_LEN] = "";
    int rc = bundle_check(gz, len, lim, NULL, err);
    if (rc != code || !strstr(err, needle)) {
        fprintf(stderr, "%s: rc %d, err \"%s\" (expected %d and \"%s\")\n", what, rc, err, code,
                needle);
        check_failures++;
    }
    char dir[300];
    snprintf(dir, sizeof dir, "%s/refused", tmp);
    CHECK_INT(bundle_unpack(gz, len, dir, lim, NULL, err), code);
    CHECK(access(dir, F_OK) < 0); /* nothing left behind */
    free(gz);
    free(t->p);
    memset(t, 0, sizeof *t);
}

static void test_refusals(void)
{
    tarbuf t = {0};
    tb_member(&t, '0', "ok.py", NULL, "x", 1, 0644);
    tb_member(&t, '0', "../x", NULL, "x", 1, 0644);
    refuse("dotdot", &t, -EINVAL, NULL, "\"../x\" has a \"..\" component");

    tb_member(&t, '0', "a/../../x", NULL, "x", 1, 0644);
    refuse("dotdot inside", &t, -EINVAL, NULL, "..");

    tb_member(&t, '0', "/abs", NULL, "x", 1, 0644);
    refuse("absolute", &t, -EINVAL, NULL, "\"/abs\" has an absolute path");

    tb_member(&t, '2', "sub/out", "../../etc/passwd", NULL, 0, 0777);
    refuse("symlink out", &t, -EINVAL, NULL, "symlink \"sub/out\" points outside");

    tb_member(&t, '2', "abs", "/etc/passwd", NULL, 0, 0777);
    refuse("symlink absolute", &t, -EINVAL, NULL, "absolute path \"/etc/passwd\"");

    /* d/l1 -> .. is inside (the root); d/l2 -> l1/.. would be above it on disk */
    tb_member(&t, '5', "d/", NULL, NULL, 0, 0755);
    tb_member(&t, '2', "d/l1", "..", NULL, 0, 0777);
    tb_member(&t, '2', "d/l2", "l1/..", NULL, 0, 0777);
    refuse("symlink through symlink", &t, -EINVAL, NULL, "steps back out of the symlink \"d/l1\"");

    tb_member(&t, '2', "l", "sub", NULL, 0, 0777);
    tb_member(&t, '0', "l/x", NULL, "x", 1, 0644);
    refuse("beneath symlink", &t, -EINVAL, NULL, "\"l/x\" lies beneath the symlink \"l\"");

    tb_member(&t, '0', "f", NULL, "x", 1, 0644);
    tb_member(&t, '0', "f", NULL, "y", 1, 0644);
    refuse("twice", &t, -EINVAL, NULL, "\"f\" appears twice");

    tb_member(&t, '0', "f", NULL, "x", 1, 0644);
    tb_member(&t, '1', "hard", "f", NULL, 0, 0644);
    refuse("hard link", &t, -EINVAL, NULL, "\"hard\" is a hard link");

    tb_member(&t, '6', "fifo", NULL, NULL, 0, 0644);
    refuse("fifo", &t, -EINVAL, NULL, "\"fifo\" is a FIFO");

    tb_member(&t, '3', "dev/null", NULL, NULL, 0, 0644);
    refuse("char device", &t, -EINVAL, NULL, "\"dev/null\" is a device");

    bundle_limits two = {.max_files = 2};
    tb_member(&t, '0', "a", NULL, "x", 1, 0644);
    tb_member(&t, '0', "b", NULL, "x", 1, 0644);
    tb_member(&t, '0', "c", NULL, "x", 1, 0644);
    refuse("file cap", &t, -EFBIG, &two, "more than 2 members (at \"c\")");

    bundle_limits small = {.max_unpacked_bytes = 1000};
    static char big[1001];
    tb_member(&t, '0', "big.bin", NULL, big, sizeof big, 0644);
    refuse("size cap", &t, -EFBIG, &small, "more than 1000 bytes (at \"big.bin\")");

    /* not gzip; gzip of something else; a truncated archive */
    char err[ERR_LEN];
    CHECK_INT(bundle_check("hello world, not gzip", 21, NULL, NULL, err), -EINVAL);
    tarbuf junk = {0};
    tb_put(&junk, "just some text, not a tar archive at all\n", 41);
    size_t len;
    unsigned char *gz = tb_gzip(&junk, &len);
    CHECK_INT(bundle_check(gz, len, NULL, NULL, err), -EINVAL);
    free(gz);
    free(junk.p);
    tb_member(&t, '0', "f", NULL, big, sizeof big, 0644);
    t.n -= 700; /* cut inside the data */
    gz = tb_gzip(&t, &len);
    CHECK_INT(bundle_check(gz, len, NULL, NULL, err), -EINVAL);
    CHECK(strstr(err, "truncated") != NULL);
    /* the gzip stream itself cut short */
    CHECK_INT(bundle_check(gz, len / 2, NULL, NULL, err), -EINVAL);
    free(gz);
    free(t.p);

    /* a bad checksum */
    tarbuf c = {0};
    tb_member(&c, '0', "f", NULL, "x", 1, 0644);
    c.p[0] = 'g';
    tb_end(&c);
    gz = tb_gzip(&c, &len);
    CHECK_INT(bundle_check(gz, len, NULL, NULL, err), -EINVAL);
    CHECK(strstr(err, "checksum") != NULL);
    free(gz);
    free(c.p);
}

/* Archives written by GNU tar (long names as 'L' members) and by Python's tarfile in its pax
 * and GNU formats: what users' own tools make must pass. */
static void test_other_writers(void)
{
    char src[300], cmd[1400], name[200];
    snprintf(src, sizeof src, "%s/other", tmp);
    mkdir(src, 0755);
    memset(name, 'q', 140);
    name[140] = '\0';
    snprintf(cmd, sizeof cmd,
             "cd '%s' && mkdir -p sub && echo hi > 'sub/%s' && ln -s 'sub/%s' link && "
             "echo x > plain.txt",
             src, name, name);
    CHECK_INT(system(cmd), 0);
    const char *makers[] = {
        "tar --format=gnu -czf '%s/gnu.tgz' -C '%s' .",
        "/usr/bin/python3 -c \"import tarfile; t = tarfile.open('%s/pax.tgz', 'w:gz', "
        "format=tarfile.PAX_FORMAT); t.add('%s', arcname='.'); t.close()\"",
        "/usr/bin/python3 -c \"import tarfile; t = tarfile.open('%s/gnupy.tgz', 'w:gz', "
        "format=tarfile.GNU_FORMAT); t.add('%s', arcname='.'); t.close()\"",
    };
    const char *files[] = {"gnu.tgz", "pax.tgz", "gnupy.tgz"};
    for (int i = 0; i < 3; i++) {
        snprintf(cmd, sizeof cmd, makers[i], tmp, src);
        if (system(cmd) != 0) {
            printf("(no archive from \"%s\": its tool is missing)\n", files[i]);
            continue;
        }
        char p[500], out[400], err[ERR_LEN] = "";
        snprintf(p, sizeof p, "%s/%s", tmp, files[i]);
        size_t len = 0;
        char *gz = read_all(p, &len);
        bundle_info info = {0};
        snprintf(out, sizeof out, "%s/other-out-%d", tmp, i);
        CHECK_INT(bundle_unpack(gz, len, out, NULL, &info, err), 0);
        if (err[0])
            fprintf(stderr, "%s: %s\n", files[i], err);
        CHECK_INT(info.files, 2);
        snprintf(p, sizeof p, "%s/link", out);
        size_t n;
        char *text = read_all(p, &n); /* through the symlink, to the long-named file */
        CHECK(text && !strcmp(text, "hi\n"));
        free(text);
        free(gz);
    }
}

/* A folder that is a symlink to a place outside is packed as the link, never followed. */
static void test_pack_no_follow(void)
{
    char src[300], p[400], gzp[300], out[300], err[ERR_LEN] = "";
    snprintf(src, sizeof src, "%s/nofollow", tmp);
    mkdir(src, 0755);
    snprintf(p, sizeof p, "%s/outside", tmp);
    mkdir(p, 0755);
    snprintf(p, sizeof p, "%s/outside/secret.txt", tmp);
    write_file(p, "secret\n", 0644);
    snprintf(p, sizeof p, "%s/dirlink", src);
    char target[300];
    snprintf(target, sizeof target, "%s/outside", tmp);
    CHECK_INT(symlink(target, p), 0);
    snprintf(gzp, sizeof gzp, "%s/nofollow.tar.gz", tmp);
    bundle_info info = {0};
    CHECK_INT(bundle_pack(src, gzp, NULL, &info, err), 0);
    CHECK_INT(info.files, 0);
    size_t len;
    char *gz = read_all(gzp, &len);
    /* an absolute link out: bundle_check refuses it, as the server would */
    CHECK_INT(bundle_check(gz, len, NULL, NULL, err), -EINVAL);
    CHECK(strstr(err, "dirlink") != NULL);
    snprintf(out, sizeof out, "%s/nofollow-out", tmp);
    CHECK(access(out, F_OK) < 0);
    free(gz);
}

int main(void)
{
    snprintf(tmp, sizeof tmp, "%s/trainyard-bundle-XXXXXX",
             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(tmp))
        return 1;
    test_round_trip();
    test_refusals();
    test_other_writers();
    test_pack_no_follow();
    rm_tree(tmp);
    return check_exit();
}
