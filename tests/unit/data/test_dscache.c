/* Unit tests of data/dscache on a real folder: keys, put and get, least-recently-used eviction
 * under the cap, an entry over the cap, corrupt and half-written entries, crash leftovers, and
 * processes (fork) racing on one entry. The HTTP side (conditional requests, 304) is exercised
 * end to end in tests/e2e/test_dataset_cache.py. */
#include "data/dscache.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tests/unit/check.h"
#include "util/err.h"
#include "util/sha256.h"

static char tmp[256];

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    return remove(path);
}

/* A fresh cache folder under tmp with the given cap. */
static dscache *fresh(const char *name, uint64_t cap)
{
    char dir[512], err[ERR_LEN];
    snprintf(dir, sizeof dir, "%s/%s", tmp, name);
    nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    dscache *c = NULL;
    CHECK_INT(dscache_open(dir, cap, &c, err), 0);
    return c;
}

static int exists(const dscache *c, const char *key, const char *ext)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s.%s", dscache_dir(c), key, ext);
    return access(path, F_OK) == 0;
}

static int put(dscache *c, const char *key, const char *data)
{
    char err[ERR_LEN];
    dscache_entry e = {.downloaded = strlen(data)};
    memset(e.wire_sha256, 'a', 64);
    return dscache_put(c, key, data, strlen(data), &e, err);
}

/* Expects key to hold want. */
static void expect(dscache *c, const char *key, const char *want, int line)
{
    char err[ERR_LEN] = "", *data = NULL;
    size_t len = 0;
    int rc = dscache_get(c, key, &data, &len, NULL, err);
    if (rc != 0 || len != strlen(want) || memcmp(data, want, len) != 0 || data[len] != '\0') {
        fprintf(stderr, "%s:%d: get gave %d \"%s\", %zu bytes\n", __FILE__, line, rc, err, len);
        check_failures++;
    }
    free(data);
}

static void expect_missing(dscache *c, const char *key, int line)
{
    char err[ERR_LEN], *data = (char *)"untouched";
    size_t len = 7;
    int rc = dscache_get(c, key, &data, &len, NULL, err);
    if (rc != -ENOENT || strcmp(data, "untouched") != 0 || len != 7) {
        fprintf(stderr, "%s:%d: get gave %d, expected -ENOENT\n", __FILE__, line, rc);
        check_failures++;
    }
}

static void test_keys(void)
{
    char a[65], b[65], c[65], d[65], e[65];
    const char *sha = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";
    const char *upper = "00112233445566778899AABBCCDDEEFF00112233445566778899AABBCCDDEEFF";
    dscache_key("https://h/x.csv", NULL, a);
    dscache_key("https://h/x.csv", sha, b);
    dscache_key("https://h/x.csv", upper, c);
    dscache_key("https://u:p@h/x.csv", NULL, d);
    dscache_key("https://h/x.csv?sig=1", NULL, e);
    CHECK(strlen(a) == 64 && strcmp(a, b) != 0);
    CHECK_STR(b, c);                               /* the digest's case does not matter */
    CHECK(strcmp(a, d) != 0 && strcmp(a, e) != 0); /* credentials and queries are part of it */

    char dir[256];
    setenv("TRAINYARD_DATASET_CACHE", "/x/cache", 1);
    setenv("XDG_CACHE_HOME", "/xdg", 1);
    CHECK_INT(dscache_default_dir(dir, sizeof dir), 0);
    CHECK_STR(dir, "/x/cache");
    unsetenv("TRAINYARD_DATASET_CACHE");
    CHECK_INT(dscache_default_dir(dir, sizeof dir), 0);
    CHECK_STR(dir, "/xdg/trainyard/datasets");
    unsetenv("XDG_CACHE_HOME");
    setenv("HOME", "/home/u", 1);
    CHECK_INT(dscache_default_dir(dir, sizeof dir), 0);
    CHECK_STR(dir, "/home/u/.cache/trainyard/datasets");
    CHECK_INT(dscache_default_dir(dir, 8), -ENAMETOOLONG);
    unsetenv("HOME");
    CHECK_INT(dscache_default_dir(dir, sizeof dir), -ENOENT);
}

static void test_put_get(void)
{
    dscache *c = fresh("basic", 0);
    char key[65], err[ERR_LEN];
    CHECK_INT(dscache_cap(c), DSCACHE_DEFAULT_BYTES);
    dscache_key("http://h/a.csv", NULL, key);
    expect_missing(c, key, __LINE__);
    dscache_entry e = {.downloaded = 5, .was_gzip = 1};
    memset(e.wire_sha256, 'b', 64);
    snprintf(e.etag, sizeof e.etag, "\"v1\"");
    CHECK_INT(dscache_put(c, key, "a,b\n1,2\n", 8, &e, err), 0);
    expect(c, key, "a,b\n1,2\n", __LINE__);

    dscache_entry got;
    CHECK_INT(dscache_peek(c, key, &got, err), 0);
    CHECK_INT(got.size, 8);
    CHECK_INT(got.downloaded, 5);
    CHECK_INT(got.was_gzip, 1);
    CHECK_STR(got.etag, "\"v1\"");
    CHECK_STR(got.last_modified, "");
    CHECK_INT(got.wire_sha256[63], 'b');
    char hex[65];
    sha256_buf_hex("a,b\n1,2\n", 8, hex);
    CHECK_STR(got.sha256, hex);
    CHECK(got.last_use_us >= got.created_us && got.created_us > 0);

    /* a put replaces; an empty dataset is an entry too */
    CHECK_INT(put(c, key, "new"), 0);
    expect(c, key, "new", __LINE__);
    CHECK_INT(put(c, key, ""), 0);
    expect(c, key, "", __LINE__);
    CHECK_INT(dscache_remove(c, key, err), 0);
    expect_missing(c, key, __LINE__);
    CHECK(!exists(c, key, "data") && !exists(c, key, "json"));
    dscache_free(c);
    dscache_free(NULL);

    /* a folder that cannot be one */
    char file[512];
    snprintf(file, sizeof file, "%s/plain-file", tmp);
    FILE *f = fopen(file, "w");
    if (f)
        fclose(f);
    CHECK(dscache_open(file, 0, &c, err) < 0);
    CHECK(strstr(err, "plain-file") != NULL);
}

static void test_lru(void)
{
    dscache *c = fresh("lru", 300);
    char a[65], b[65], k3[65], d[65], err[ERR_LEN];
    char hundred[101];
    memset(hundred, 'x', 100);
    hundred[100] = '\0';
    dscache_key("http://h/a", NULL, a);
    dscache_key("http://h/b", NULL, b);
    dscache_key("http://h/c", NULL, k3);
    dscache_key("http://h/d", NULL, d);
    CHECK_INT(put(c, a, hundred), 0);
    CHECK_INT(put(c, b, hundred), 0);
    CHECK_INT(put(c, k3, hundred), 0); /* 300 of 300: all fit */
    expect(c, a, hundred, __LINE__);   /* a is now the most recently used */
    CHECK_INT(put(c, d, hundred), 0);  /* b, the least recently used, goes */
    expect_missing(c, b, __LINE__);
    CHECK(!exists(c, b, "data"));
    expect(c, a, hundred, __LINE__);
    expect(c, k3, hundred, __LINE__);
    expect(c, d, hundred, __LINE__);
    /* now c is the oldest use: a 150-byte entry makes room by dropping c and a */
    char big[151];
    memset(big, 'y', 150);
    big[150] = '\0';
    CHECK_INT(put(c, b, big), 0);
    expect_missing(c, k3, __LINE__);
    expect_missing(c, a, __LINE__);
    expect(c, d, hundred, __LINE__);
    expect(c, b, big, __LINE__);

    /* an entry over the whole cap is not cached, and nothing is evicted for it */
    char huge[302];
    memset(huge, 'z', 301);
    huge[301] = '\0';
    dscache_entry e = {0};
    CHECK_INT(dscache_put(c, a, huge, 301, &e, err), -EFBIG);
    CHECK(strstr(err, "cap of 300") != NULL);
    expect_missing(c, a, __LINE__);
    expect(c, d, hundred, __LINE__);
    expect(c, b, big, __LINE__);
    /* replacing an entry counts its new size, not both */
    CHECK_INT(put(c, b, big), 0);
    expect(c, d, hundred, __LINE__);
    dscache_free(c);
}

static void write_to(const dscache *c, const char *key, const char *ext, const char *text,
                     size_t len)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s.%s", dscache_dir(c), key, ext);
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL);
    if (!f)
        return;
    CHECK_INT(fwrite(text, 1, len, f), len);
    fclose(f);
}

static void test_corrupt(void)
{
    dscache *c = fresh("corrupt", 0);
    char key[65], err[ERR_LEN], *data = NULL;
    size_t len;
    dscache_key("http://h/a", NULL, key);

    /* bytes changed in place (same size): the digest catches it, the entry goes */
    CHECK_INT(put(c, key, "hello, world"), 0);
    write_to(c, key, "data", "hellO, world", 12);
    CHECK_INT(dscache_get(c, key, &data, &len, NULL, err), -EBADMSG);
    CHECK(strstr(err, "sha256") != NULL);
    CHECK(!exists(c, key, "data") && !exists(c, key, "json"));
    CHECK_INT(put(c, key, "hello, world"), 0); /* and is written anew */
    expect(c, key, "hello, world", __LINE__);

    /* a half-written data file */
    write_to(c, key, "data", "hello", 5);
    CHECK_INT(dscache_get(c, key, &data, &len, NULL, err), -EBADMSG);
    CHECK(strstr(err, "5 bytes where 12") != NULL);
    expect_missing(c, key, __LINE__);

    /* a json that is not one, or names another key */
    CHECK_INT(put(c, key, "hello, world"), 0);
    write_to(c, key, "json", "{\"size\": 1", 10);
    CHECK_INT(dscache_get(c, key, &data, &len, NULL, err), -EBADMSG);
    char other[65];
    dscache_key("http://h/b", NULL, other);
    CHECK_INT(put(c, other, "other"), 0);
    char path[1024], text[2048];
    snprintf(path, sizeof path, "%s/%s.json", dscache_dir(c), other);
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(text, 1, sizeof text - 1, f) : 0;
    if (f)
        fclose(f);
    write_to(c, key, "json", text, n); /* other's metadata under key's name */
    write_to(c, key, "data", "other", 5);
    CHECK_INT(dscache_get(c, key, &data, &len, NULL, err), -EBADMSG);

    /* leftovers of a crash: a data without json, a json without data, an old temporary file;
     * the next put's scan removes them, and leaves a fresh temporary file alone */
    char k1[65], k2[65];
    dscache_key("http://h/1", NULL, k1);
    dscache_key("http://h/2", NULL, k2);
    write_to(c, k1, "data", "lonely", 6);
    CHECK_INT(put(c, k2, "two"), 0);
    snprintf(path, sizeof path, "%s/%s.data", dscache_dir(c), k2);
    CHECK_INT(unlink(path), 0);
    char old_tmp[1024], new_tmp[1024];
    snprintf(old_tmp, sizeof old_tmp, "%s/tmp.1.0.%s.data", dscache_dir(c), k1);
    snprintf(new_tmp, sizeof new_tmp, "%s/tmp.1.1.%s.data", dscache_dir(c), k1);
    FILE *t1 = fopen(old_tmp, "w"), *t2 = fopen(new_tmp, "w");
    if (t1)
        fclose(t1);
    if (t2)
        fclose(t2);
    struct timespec old[2] = {{.tv_sec = time(NULL) - 7200}, {.tv_sec = time(NULL) - 7200}};
    CHECK_INT(utimensat(AT_FDCWD, old_tmp, old, 0), 0);
    CHECK_INT(put(c, other, "other"), 0);
    CHECK(!exists(c, k1, "data"));
    CHECK(!exists(c, k2, "json"));
    CHECK(access(old_tmp, F_OK) != 0);
    CHECK(access(new_tmp, F_OK) == 0);
    expect(c, other, "other", __LINE__);
    dscache_free(c);
}

/* Several processes put different contents under one key, and read it, at once: every read
 * that succeeds returns one of the contents whole, and the entry left is valid. */
static void test_race(void)
{
    dscache *c = fresh("race", 4096);
    char key[65], filler[65];
    dscache_key("http://h/race", NULL, key);
    enum { PROCS = 4, ROUNDS = 60 };
    char contents[PROCS][1024];
    for (int p = 0; p < PROCS; p++) {
        memset(contents[p], 'a' + p, (size_t)(300 + 100 * p));
        contents[p][300 + 100 * p] = '\0';
    }
    pid_t pids[PROCS];
    for (int p = 0; p < PROCS; p++) {
        pids[p] = fork();
        if (pids[p] == 0) {
            int bad = 0;
            for (int r = 0; r < ROUNDS; r++) {
                if (put(c, key, contents[p]) != 0)
                    bad++;
                /* other keys too, so that eviction runs while others read and write */
                char url[64];
                snprintf(url, sizeof url, "http://h/filler-%d-%d", p, r % 5);
                dscache_key(url, NULL, filler);
                if (put(c, filler, contents[(p + 1) % PROCS]) != 0)
                    bad++;
                char err[ERR_LEN], *data = NULL;
                size_t len = 0;
                int rc = dscache_get(c, key, &data, &len, NULL, err);
                if (rc == 0) {
                    int known = 0;
                    for (int q = 0; q < PROCS; q++)
                        known |= len == strlen(contents[q]) && !memcmp(data, contents[q], len);
                    bad += !known;
                } else if (rc != -ENOENT && rc != -EBADMSG) {
                    bad++;
                }
                free(data);
            }
            _exit(bad ? 1 : 0);
        }
    }
    for (int p = 0; p < PROCS; p++) {
        int status = -1;
        CHECK(pids[p] > 0);
        if (pids[p] > 0)
            waitpid(pids[p], &status, 0);
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
    int rc = put(c, key, contents[0]);
    CHECK_INT(rc, 0);
    expect(c, key, contents[0], __LINE__);
    /* no temporary file is left behind, and the cap held */
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "ls %s | grep -c '^tmp\\.' > /dev/null", dscache_dir(c));
    CHECK(system(cmd) != 0);
    snprintf(cmd, sizeof cmd, "test $(cat %s/*.data | wc -c) -le 4096", dscache_dir(c));
    CHECK_INT(system(cmd), 0);
    dscache_free(c);
}

/* Without a cache, and for file://, dscache_fetch is fetch_url. */
static void test_fetch_passthrough(void)
{
    dscache *c = fresh("files", 0);
    char path[512], url[600], err[ERR_LEN], *data = NULL;
    size_t len = 0;
    snprintf(path, sizeof path, "%s/d.csv", tmp);
    FILE *f = fopen(path, "w");
    if (f) {
        fputs("a,b\n1,2\n", f);
        fclose(f);
    }
    snprintf(url, sizeof url, "file://%s", path);
    fetch_opts o = {.file_root = tmp};
    dscache_result res;
    fetch_stats st;
    CHECK_INT(dscache_fetch(c, url, &o, &data, &len, &st, &res, err), 0);
    CHECK_INT(len, 8);
    CHECK_INT(res.how, DSCACHE_FETCHED);
    free(data);
    CHECK_INT(dscache_fetch(NULL, url, &o, &data, &len, &st, &res, err), 0);
    free(data);
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "ls %s | grep -q json", dscache_dir(c));
    CHECK(system(cmd) != 0); /* nothing was stored */
    o.file_root = NULL;
    CHECK_INT(dscache_fetch(c, url, &o, &data, &len, &st, &res, err), -EACCES);
    dscache_free(c);
}

int main(void)
{
    snprintf(tmp, sizeof tmp, "/tmp/trainyard-dscache-XXXXXX");
    if (!mkdtemp(tmp)) {
        perror("mkdtemp");
        return 1;
    }
    test_keys();
    test_put_get();
    test_lru();
    test_corrupt();
    test_race();
    test_fetch_passthrough();
    nftw(tmp, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    return check_exit();
}
