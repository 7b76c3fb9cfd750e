/* Unit tests of model/safetensors: the exact bytes of a small file worked out by hand from the
 * format description, a bit-exact write → read round trip, the writer's refusals (leaving the
 * target untouched), and the reader's refusal of every kind of corrupt file. */
#include "model/safetensors.h"

#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/unit/check.h"
#include "util/err.h"

static char dir[] = "/tmp/trainyard-test-st-XXXXXX";

static void path_in_dir(char *out, size_t cap, const char *name)
{
    snprintf(out, cap, "%s/%s", dir, name);
}

/* Reads a whole file into a malloc'd buffer; *len gets its size. */
static unsigned char *slurp(const char *path, size_t *len)
{
    FILE *fp = fopen(path, "rb");
    if (!fp)
        return NULL;
    fseek(fp, 0, SEEK_END);
    long n = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    unsigned char *b = malloc(n > 0 ? (size_t)n : 1);
    size_t got = fread(b, 1, (size_t)n, fp);
    fclose(fp);
    *len = got;
    return b;
}

/* Entries in the test directory (so a leftover temporary file shows up). */
static int dir_entries(void)
{
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
            n++;
    }
    if (d)
        closedir(d);
    return n;
}

/* The file, byte for byte, from the format description:
 *   8 bytes   little-endian u64 N = 136
 *   136 bytes the compact JSON header (135 bytes) + 1 space, so the data starts at 144 = 18 × 8
 *   12 bytes  a = [1.0, -2.0] then b = [[0.5]] as little-endian IEEE-754 binary32:
 *             1.0 = 0x3F800000, -2.0 = 0xC0000000, 0.5 = 0x3F000000 */
static void test_golden_bytes(void)
{
    static const char header[] =
        "{\"__metadata__\":{\"k\":\"v\"},"
        "\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
        "\"b\":{\"dtype\":\"F32\",\"shape\":[1,1],\"data_offsets\":[8,12]}} ";
    static const unsigned char prefix[8] = {0x88, 0, 0, 0, 0, 0, 0, 0}; /* 136 */
    static const unsigned char data[12] = {0x00, 0x00, 0x80, 0x3F, 0x00, 0x00,
                                           0x00, 0xC0, 0x00, 0x00, 0x00, 0x3F};
    CHECK_INT(sizeof header - 1, 136);
    unsigned char expect[8 + 136 + 12];
    memcpy(expect, prefix, 8);
    memcpy(expect + 8, header, 136);
    memcpy(expect + 144, data, 12);

    const float a[] = {1.0f, -2.0f}, b[] = {0.5f};
    safetensors_tensor t[2] = {{.name = "a", .ndim = 1, .shape = {2}, .data = a},
                               {.name = "b", .ndim = 2, .shape = {1, 1}, .data = b}};
    safetensors_meta m[1] = {{"k", "v"}};
    char path[256], err[ERR_LEN] = "";
    path_in_dir(path, sizeof path, "golden.safetensors");
    CHECK_INT(safetensors_write(path, t, 2, m, 1, err), 0);
    size_t len = 0;
    unsigned char *got = slurp(path, &len);
    CHECK_INT(len, sizeof expect);
    CHECK(got && len == sizeof expect && memcmp(got, expect, sizeof expect) == 0);
    if (got && len == sizeof expect && memcmp(got, expect, sizeof expect) != 0) {
        for (size_t i = 0; i < len; i++) {
            if (got[i] != expect[i]) {
                fprintf(stderr, "  first difference at byte %zu: 0x%02x, expected 0x%02x\n", i,
                        got[i], expect[i]);
                break;
            }
        }
    }
    free(got);
    unlink(path);

    /* Without metadata there is no "__metadata__" entry. */
    safetensors_tensor one = {.name = "w", .ndim = 1, .shape = {1}, .data = b};
    path_in_dir(path, sizeof path, "nometa.safetensors");
    CHECK_INT(safetensors_write(path, &one, 1, NULL, 0, err), 0);
    got = slurp(path, &len);
    /* {"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}} is 54 bytes → padded to 56. */
    static const char header2[] = "{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}"
                                  "  ";
    CHECK_INT(len, 8 + 56 + 4);
    CHECK(got && len == 68 && got[0] == 56 && memcmp(got + 1, "\0\0\0\0\0\0\0", 7) == 0 &&
          memcmp(got + 8, header2, 56) == 0 && memcmp(got + 64, data + 8, 4) == 0);
    free(got);
    unlink(path);
}

static int bits_equal(const float *x, const float *y, size_t n)
{
    return n == 0 || memcmp(x, y, n * sizeof(float)) == 0;
}

static void test_round_trip(void)
{
    float w1[3 * 4], b1[4], w2[2 * 2 * 3], scalar[1] = {42.5f};
    for (int i = 0; i < 12; i++)
        w1[i] = (float)i * 0.37f - 2.0f;
    b1[0] = NAN;
    b1[1] = -0.0f;
    b1[2] = 1e-45f; /* the smallest denormal */
    b1[3] = -INFINITY;
    for (int i = 0; i < 12; i++)
        w2[i] = 1.0f / (float)(i + 1);
    safetensors_tensor t[] = {
        {.name = "layers.0.weight", .ndim = 2, .shape = {3, 4}, .data = w1},
        {.name = "layers.0.bias", .ndim = 1, .shape = {4}, .data = b1},
        {.name = "empty", .ndim = 1, .shape = {0}, .data = NULL},
        {.name = "cube ü", .ndim = 3, .shape = {2, 2, 3}, .data = w2},
        {.name = "scalar", .ndim = 0, .shape = {0}, .data = scalar},
        {.name = "empty2d", .ndim = 2, .shape = {3, 0}, .data = NULL},
    };
    size_t n = sizeof t / sizeof t[0];
    safetensors_meta m[] = {{"format", "pt"},
                            {"config", "{\"layers\": [4, \"relu\"]}"},
                            {"empty", ""},
                            {"ünï", "cödé\n\t\"quoted\""}};
    char path[256], err[ERR_LEN] = "";
    path_in_dir(path, sizeof path, "model.safetensors");
    CHECK_INT(safetensors_write(path, t, n, m, 4, err), 0);
    CHECK_INT(dir_entries(), 1); /* no temporary file left behind */

    safetensors_file *f = NULL;
    CHECK_INT(safetensors_open(path, &f, err), 0);
    if (!f) {
        fprintf(stderr, "  %s\n", err);
        return;
    }
    CHECK_INT(safetensors_count(f), n);
    for (size_t i = 0; i < n && i < safetensors_count(f); i++) {
        const safetensors_tensor *r = safetensors_at(f, i);
        CHECK_STR(r->name, t[i].name); /* file order is the written order */
        CHECK_INT(r->ndim, t[i].ndim);
        size_t count = 1;
        for (int d = 0; d < t[i].ndim; d++) {
            CHECK_INT(r->shape[d], t[i].shape[d]);
            count *= (size_t)t[i].shape[d];
        }
        CHECK(bits_equal(r->data, t[i].data, count));
        CHECK(safetensors_find(f, t[i].name) == r);
    }
    CHECK(safetensors_at(f, n) == NULL);
    CHECK(safetensors_find(f, "nope") == NULL);
    CHECK(safetensors_find(f, "__metadata__") == NULL);
    for (size_t i = 0; i < 4; i++)
        CHECK_STR(safetensors_meta_get(f, m[i].key), m[i].value);
    CHECK(safetensors_meta_get(f, "missing") == NULL);
    safetensors_close(f);

    /* The same bytes through safetensors_parse. */
    size_t len = 0;
    unsigned char *bytes = slurp(path, &len);
    f = NULL;
    CHECK_INT(safetensors_parse(bytes, len, &f, err), 0);
    CHECK_INT(safetensors_count(f), n);
    const safetensors_tensor *w = safetensors_find(f, "layers.0.weight");
    CHECK(w && bits_equal(w->data, w1, 12));
    free(bytes);
    safetensors_close(f);

    /* Overwriting replaces the file whole. */
    CHECK_INT(safetensors_write(path, t, 1, NULL, 0, err), 0);
    f = NULL;
    CHECK_INT(safetensors_open(path, &f, err), 0);
    CHECK_INT(safetensors_count(f), 1);
    CHECK(safetensors_meta_get(f, "format") == NULL);
    safetensors_close(f);

    /* Metadata only, no tensors: an empty data buffer. */
    CHECK_INT(safetensors_write(path, NULL, 0, m, 1, err), 0);
    f = NULL;
    CHECK_INT(safetensors_open(path, &f, err), 0);
    CHECK_INT(safetensors_count(f), 0);
    CHECK_STR(safetensors_meta_get(f, "format"), "pt");
    safetensors_close(f);

    /* Only a zero-size tensor. */
    CHECK_INT(safetensors_write(path, &t[2], 1, NULL, 0, err), 0);
    f = NULL;
    CHECK_INT(safetensors_open(path, &f, err), 0);
    CHECK_INT(safetensors_count(f), 1);
    CHECK(safetensors_at(f, 0) && safetensors_at(f, 0)->shape[0] == 0);
    safetensors_close(f);
    unlink(path);
    safetensors_close(NULL);
    CHECK_INT(safetensors_count(NULL), 0);
}

/* Writing must fail with code and message part, leave path as it was and leave no temp file. */
static void expect_write_fails(const safetensors_tensor *t, size_t n, const safetensors_meta *m,
                               size_t n_meta, int code, const char *part, int line)
{
    char path[256], err[ERR_LEN] = "";
    path_in_dir(path, sizeof path, "keep.safetensors");
    int rc = safetensors_write(path, t, n, m, n_meta, err);
    size_t len = 0;
    unsigned char *b = slurp(path, &len);
    int ok = rc == code && strstr(err, part) && b && len == 5 && memcmp(b, "keep\n", 5) == 0 &&
             dir_entries() == 1;
    if (!ok) {
        fprintf(stderr, "test_safetensors.c:%d: rc %d err \"%s\"; expected %d and \"%s\"\n", line,
                rc, err, code, part);
        check_failures++;
    }
    free(b);
}
#define EXPECT_WRITE_FAILS(t, n, m, nm, code, part)                                                \
    expect_write_fails(t, n, m, nm, code, part, __LINE__)

static void test_writer_refuses(void)
{
    char path[256], err[ERR_LEN];
    path_in_dir(path, sizeof path, "keep.safetensors");
    FILE *fp = fopen(path, "w");
    fputs("keep\n", fp);
    fclose(fp);

    const float x[4] = {1, 2, 3, 4};
    safetensors_tensor dup[2] = {{.name = "w", .ndim = 1, .shape = {4}, .data = x},
                                 {.name = "w", .ndim = 1, .shape = {2}, .data = x}};
    EXPECT_WRITE_FAILS(dup, 2, NULL, 0, -EINVAL, "two tensors are named \"w\"");
    safetensors_tensor bad = {.name = "", .ndim = 1, .shape = {4}, .data = x};
    EXPECT_WRITE_FAILS(&bad, 1, NULL, 0, -EINVAL, "empty name");
    bad.name = NULL;
    EXPECT_WRITE_FAILS(&bad, 1, NULL, 0, -EINVAL, "empty name");
    bad.name = "__metadata__";
    EXPECT_WRITE_FAILS(&bad, 1, NULL, 0, -EINVAL, "reserved");
    bad.name = "\xff\xfe";
    EXPECT_WRITE_FAILS(&bad, 1, NULL, 0, -EINVAL, "not valid UTF-8");
    bad.name = "w";
    bad.shape[0] = -1;
    EXPECT_WRITE_FAILS(&bad, 1, NULL, 0, -EINVAL, "negative dimension");
    bad.shape[0] = 4;
    bad.ndim = SAFETENSORS_MAX_DIMS + 1;
    EXPECT_WRITE_FAILS(&bad, 1, NULL, 0, -EINVAL, "9 dimensions");
    bad.ndim = 1;
    bad.data = NULL;
    EXPECT_WRITE_FAILS(&bad, 1, NULL, 0, -EINVAL, "has no data");
    bad.data = x;
    bad.ndim = 4;
    bad.shape[0] = bad.shape[1] = bad.shape[2] = bad.shape[3] = INT64_C(1) << 20;
    EXPECT_WRITE_FAILS(&bad, 1, NULL, 0, -EINVAL, "too large");
    safetensors_tensor ok = {.name = "w", .ndim = 1, .shape = {4}, .data = x};
    safetensors_meta m2[2] = {{"k", "a"}, {"k", "b"}};
    EXPECT_WRITE_FAILS(&ok, 1, m2, 2, -EINVAL, "metadata key \"k\" is given twice");
    safetensors_meta m1[1] = {{"k", NULL}};
    EXPECT_WRITE_FAILS(&ok, 1, m1, 1, -EINVAL, "has no value");
    m1[0].value = "\xc3\x28";
    EXPECT_WRITE_FAILS(&ok, 1, m1, 1, -EINVAL, "not valid UTF-8");

    /* A directory that does not exist: the error names the path and errno. */
    err[0] = '\0';
    CHECK_INT(safetensors_write("/nonexistent-dir-for-test/x.safetensors", &ok, 1, NULL, 0, err),
              -ENOENT);
    CHECK(strstr(err, "/nonexistent-dir-for-test/x.safetensors.tmp-") != NULL);
    CHECK_INT(safetensors_write(NULL, &ok, 1, NULL, 0, err), -EINVAL);
    unlink(path);
}

/* Bytes of a file with the given header text (padded to a multiple of 8 when pad) and data. */
static unsigned char *craft(const char *header, int pad, const void *data, size_t data_len,
                            size_t *len)
{
    size_t h = strlen(header);
    size_t n = pad ? (h + 7) / 8 * 8 : h;
    unsigned char *b = malloc(8 + n + data_len + 1);
    for (int i = 0; i < 8; i++)
        b[i] = (unsigned char)((uint64_t)n >> (8 * i));
    memcpy(b + 8, header, h);
    memset(b + 8 + h, ' ', n - h);
    if (data_len)
        memcpy(b + 8 + n, data, data_len);
    *len = 8 + n + data_len;
    return b;
}

static void expect_parse_fails_at(const void *bytes, size_t len, const char *part, int line)
{
    char err[ERR_LEN] = "";
    safetensors_file *f = (safetensors_file *)1;
    int rc = safetensors_parse(bytes, len, &f, err);
    if (rc != -EINVAL || f != (safetensors_file *)1 || !strstr(err, part)) {
        fprintf(stderr, "test_safetensors.c:%d: rc %d err \"%s\"; expected -EINVAL and \"%s\"\n",
                line, rc, err, part);
        check_failures++;
    }
}
#define EXPECT_PARSE_FAILS(b, l, part) expect_parse_fails_at(b, l, part, __LINE__)

/* A header of tensors "a" and "b" with the given shapes and offsets over 12 bytes of data. */
static void expect_header_fails(const char *header, const char *part, int line)
{
    static const float data[3] = {1, 2, 3};
    size_t len;
    unsigned char *b = craft(header, 1, data, sizeof data, &len);
    expect_parse_fails_at(b, len, part, line);
    free(b);
}
#define EXPECT_HEADER_FAILS(h, part) expect_header_fails(h, part, __LINE__)

static void test_reader_refuses(void)
{
    /* A good file to cut and damage. */
    const float x[3] = {1, 2, 3};
    safetensors_tensor t[2] = {{.name = "a", .ndim = 1, .shape = {2}, .data = x},
                               {.name = "b", .ndim = 1, .shape = {1}, .data = x + 2}};
    char path[256], err[ERR_LEN];
    path_in_dir(path, sizeof path, "good.safetensors");
    CHECK_INT(safetensors_write(path, t, 2, NULL, 0, err), 0);
    size_t len = 0;
    unsigned char *good = slurp(path, &len);
    unlink(path);
    if (!good)
        return;
    safetensors_file *f = NULL;
    CHECK_INT(safetensors_parse(good, len, &f, err), 0);
    safetensors_close(f);

    /* Truncation anywhere. */
    EXPECT_PARSE_FAILS(good, 0, "too short");
    EXPECT_PARSE_FAILS(good, 7, "too short");
    EXPECT_PARSE_FAILS(good, 8, "runs past the end");
    EXPECT_PARSE_FAILS(good, 20, "runs past the end");
    EXPECT_PARSE_FAILS(good, len - 1, "run past the data");
    EXPECT_PARSE_FAILS(good, len - 4, "run past the data");
    /* Extra bytes at the end. */
    unsigned char *longer = malloc(len + 4);
    memcpy(longer, good, len);
    memset(longer + len, 0, 4);
    EXPECT_PARSE_FAILS(longer, len + 4, "4 bytes after the last tensor");
    free(longer);

    /* Header lengths: zero, over the cap, 2^64 - 1, and one that cuts the JSON short. */
    unsigned char *b = malloc(len);
    memcpy(b, good, len);
    memset(b, 0, 8);
    EXPECT_PARSE_FAILS(b, len, "header length 0 is not between 1 and 100000000");
    b[0] = 0x01, b[1] = 0xE1, b[2] = 0xF5, b[3] = 0x05; /* 100000001 */
    EXPECT_PARSE_FAILS(b, len, "header length 100000001");
    memset(b, 0xFF, 8);
    EXPECT_PARSE_FAILS(b, len, "header length 18446744073709551615");
    memcpy(b, good, len);
    b[0] = (unsigned char)(good[0] - 8);
    EXPECT_PARSE_FAILS(b, len, "not valid JSON");
    free(b);
    free(good);

    /* Header contents. */
    EXPECT_HEADER_FAILS("[]", "does not start with '{'");
    EXPECT_HEADER_FAILS(" {}", "does not start with '{'");
    EXPECT_HEADER_FAILS("{\"a\": ", "not valid JSON");
    EXPECT_HEADER_FAILS("{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,12]},"
                        "\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,12]}}",
                        "duplicate object key");
    EXPECT_HEADER_FAILS("{\"a\":{\"dtype\":\"F16\",\"shape\":[6],\"data_offsets\":[0,12]}}",
                        "tensor \"a\": dtype F16 is not supported; only F32");
    EXPECT_HEADER_FAILS("{\"a\":{\"dtype\":\"BF16\",\"shape\":[6],\"data_offsets\":[0,12]}}",
                        "dtype BF16");
    EXPECT_HEADER_FAILS("{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,16]}}",
                        "run past the data's 12 bytes");
    EXPECT_HEADER_FAILS("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,12]}}",
                        "span 12 bytes but its shape needs 8");
    EXPECT_HEADER_FAILS("{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[12,0]}}",
                        "0 <= begin <= end");
    EXPECT_HEADER_FAILS("{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[-4,8]}}",
                        "0 <= begin <= end");
    EXPECT_HEADER_FAILS("{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0]}}",
                        "0 <= begin <= end");
    EXPECT_HEADER_FAILS("{\"a\":{\"dtype\":\"F32\",\"shape\":[-3],\"data_offsets\":[0,12]}}",
                        "shape[0] is not a non-negative integer");
    EXPECT_HEADER_FAILS("{\"a\":{\"dtype\":\"F32\",\"shape\":[3.0],\"data_offsets\":[0,12]}}",
                        "shape[0] is not a non-negative integer");
    EXPECT_HEADER_FAILS("{\"a\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,3],"
                        "\"data_offsets\":[0,12]}}",
                        "9 dimensions");
    EXPECT_HEADER_FAILS("{\"a\":{\"dtype\":\"F32\",\"shape\":[4611686018427387904,"
                        "4611686018427387904],\"data_offsets\":[0,12]}}",
                        "needs more bytes than the file has");
    EXPECT_HEADER_FAILS("{\"a\":{\"dtype\":\"F32\",\"shape\":[3]}}", "needs \"dtype\"");
    EXPECT_HEADER_FAILS("{\"a\":[]}", "not a JSON object");
    EXPECT_HEADER_FAILS("{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,12],"
                        "\"x\":1}}",
                        "unknown field \"x\"");
    EXPECT_HEADER_FAILS("{\"__metadata__\":{\"k\":1},"
                        "\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,12]}}",
                        "metadata \"k\" is not a string");
    EXPECT_HEADER_FAILS("{\"__metadata__\":[],"
                        "\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,12]}}",
                        "\"__metadata__\" is not a JSON object");
    /* Overlap, gap, and a zero-size tensor inside another one. */
    EXPECT_HEADER_FAILS("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                        "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}",
                        "tensor \"b\" overlaps tensor \"a\"");
    EXPECT_HEADER_FAILS("{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,12]},"
                        "\"b\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,12]}}",
                        "overlaps");
    EXPECT_HEADER_FAILS("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                        "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}",
                        "data bytes 4 to 8 belong to no tensor");
    EXPECT_HEADER_FAILS("{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,12]},"
                        "\"z\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[4,4]}}",
                        "overlaps");
    EXPECT_HEADER_FAILS("{}", "12 bytes after the last tensor");

    /* Accepted: tensors listed out of offset order, a zero-size tensor at a boundary, and a
     * header whose length is not a multiple of 4 (the reader realigns the data). */
    static const float data[3] = {1, 2, 3};
    const char *hdr = "{\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]},"
                      "\"z\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[8,8]},"
                      "\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}";
    CHECK(strlen(hdr) % 4 != 0);
    for (int pad = 0; pad < 2; pad++) {
        b = craft(hdr, pad, data, sizeof data, &len);
        f = NULL;
        CHECK_INT(safetensors_parse(b, len, &f, err), 0);
        free(b);
        if (!f)
            continue;
        CHECK_INT(safetensors_count(f), 3);
        CHECK_STR(safetensors_at(f, 0)->name, "b");
        const safetensors_tensor *a = safetensors_find(f, "a");
        const safetensors_tensor *bt = safetensors_find(f, "b");
        CHECK(a && (uintptr_t)a->data % sizeof(float) == 0 && a->data[0] == 1 && a->data[1] == 2);
        CHECK(bt && bt->data[0] == 3);
        safetensors_close(f);
    }

    /* Files that are not there or not files. */
    f = NULL;
    CHECK_INT(safetensors_open("/nonexistent-dir-for-test/x.safetensors", &f, err), -ENOENT);
    CHECK_INT(safetensors_open(dir, &f, err), -EINVAL);
    CHECK(f == NULL);
    /* A corrupt file on disk: the message names the file. */
    path_in_dir(path, sizeof path, "bad.safetensors");
    FILE *fp = fopen(path, "wb");
    fwrite("\x02\0\0\0\0\0\0\0{}", 1, 10, fp);
    fwrite("junk", 1, 4, fp);
    fclose(fp);
    CHECK_INT(safetensors_open(path, &f, err), -EINVAL);
    CHECK(strstr(err, path) && strstr(err, "4 bytes after the last tensor"));
    unlink(path);
}

int main(void)
{
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    test_golden_bytes();
    test_round_trip();
    test_writer_refuses();
    test_reader_refuses();
    rmdir(dir);
    return check_exit();
}
