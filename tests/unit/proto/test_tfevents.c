/* Unit tests of proto/tfevents: a written event file is read back with a protobuf wire decoder
 * of the test's own (not protobuf-c's), so the checks hold the writer to TensorBoard's field
 * numbers and wire types, and to TFRecord's framing with masked CRC-32C: the first record is
 * compared byte for byte with its encoding worked out by hand. tensorboard's own reader reads
 * the server's files in tests/e2e/test_tensorboard.py. */
#include "proto/tfevents.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/unit/check.h"
#include "util/crc32c.h"

static uint8_t file[1 << 16];
static size_t file_len;

static uint64_t le(const uint8_t *p, int bytes)
{
    uint64_t v = 0;
    for (int i = bytes - 1; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

/* The next record at *off: its data and length; 0 at the end, -1 when the framing is wrong. */
static int next_record(size_t *off, const uint8_t **data, size_t *len)
{
    if (*off == file_len)
        return 0;
    if (file_len - *off < 12)
        return -1;
    const uint8_t *p = file + *off;
    uint64_t n = le(p, 8);
    if (le(p + 8, 4) != crc32c_masked(p, 8) || file_len - *off - 12 < n + 4)
        return -1;
    if (le(p + 12 + n, 4) != crc32c_masked(p + 12, n))
        return -1;
    *data = p + 12;
    *len = n;
    *off += 12 + n + 4;
    return 1;
}

/* One protobuf field: number, wire type, and its varint, fixed bits or bytes. */
typedef struct field {
    int num, wt;
    uint64_t v; /* varint, fixed64, fixed32 */
    const uint8_t *b;
    size_t n; /* length-delimited */
} field;

static int varint(const uint8_t **p, const uint8_t *end, uint64_t *out)
{
    uint64_t v = 0;
    for (int shift = 0; *p < end && shift < 64; shift += 7) {
        uint8_t c = *(*p)++;
        v |= (uint64_t)(c & 0x7F) << shift;
        if (!(c & 0x80)) {
            *out = v;
            return 0;
        }
    }
    return -1;
}

/* The next field of [*p, end); 1, 0 at the end, -1 when malformed. */
static int next_field(const uint8_t **p, const uint8_t *end, field *f)
{
    uint64_t key;
    if (*p == end)
        return 0;
    if (varint(p, end, &key) < 0)
        return -1;
    memset(f, 0, sizeof *f);
    f->num = (int)(key >> 3);
    f->wt = (int)(key & 7);
    switch (f->wt) {
    case 0:
        return varint(p, end, &f->v) < 0 ? -1 : 1;
    case 1:
        if (end - *p < 8)
            return -1;
        f->v = le(*p, 8);
        *p += 8;
        return 1;
    case 5:
        if (end - *p < 4)
            return -1;
        f->v = le(*p, 4);
        *p += 4;
        return 1;
    case 2:
        if (varint(p, end, &f->v) < 0 || (uint64_t)(end - *p) < f->v)
            return -1;
        f->b = *p;
        f->n = (size_t)f->v;
        *p += f->n;
        return 1;
    default:
        return -1;
    }
}

static double f64(uint64_t bits)
{
    double d;
    memcpy(&d, &bits, sizeof d);
    return d;
}

static float f32(uint64_t bits)
{
    uint32_t b = (uint32_t)bits;
    float x;
    memcpy(&x, &b, sizeof x);
    return x;
}

/* Checks a HistogramProto's fields against what was written. */
static void check_histo(const uint8_t *p, const uint8_t *end)
{
    field f;
    int seen = 0;
    while (next_field(&p, end, &f) == 1) {
        if (f.num >= 1 && f.num <= 5) {
            static const double want[] = {-1.0, 2.0, 4.0, 1.5, 9.25};
            CHECK_INT(f.wt, 1);
            CHECK(f64(f.v) == want[f.num - 1]);
            seen |= 1 << f.num;
        } else if (f.num == 6 || f.num == 7) {
            static const double limits[] = {0.0, 1.0, 2.0}, counts[] = {1, 2, 1};
            CHECK_INT(f.wt, 2); /* packed */
            CHECK_INT(f.n, 24);
            for (int i = 0; i < 3 && f.n == 24; i++)
                CHECK(f64(le(f.b + 8 * i, 8)) == (f.num == 6 ? limits : counts)[i]);
            seen |= 1 << f.num;
        } else {
            CHECK(!"an unexpected HistogramProto field");
        }
    }
    CHECK_INT(seen, 0xFE);
}

int main(void)
{
    char path[] = "/tmp/test-tfevents-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    close(fd);
    char err[ERR_LEN];
    tfevents *w = NULL;
    CHECK_INT(tfevents_open(path, 1.5, &w, err), 0);
    const char *tags[] = {"loss", "val/acc"};
    double vals[] = {0.25, 0.1};
    tfevents_scalars(w, 2.0, 3, tags, vals, 2);
    double limits[] = {0.0, 1.0, 2.0}, counts[] = {1, 2, 1};
    tfevents_histo h = {.min = -1.0,
                        .max = 2.0,
                        .num = 4.0,
                        .sum = 1.5,
                        .sum_squares = 9.25,
                        .limits = limits,
                        .counts = counts,
                        .n = 3};
    tfevents_histogram(w, 2.5, 3, "0.weight", &h);
    CHECK_INT(tfevents_close(w, err), 0);
    FILE *f = fopen(path, "rb");
    CHECK(f != NULL);
    file_len = f ? fread(file, 1, sizeof file, f) : 0;
    if (f)
        fclose(f);
    unlink(path);

    /* Record 1, by hand: wall_time 1.5 (field 1, fixed64), file_version (field 3, bytes). */
    static const uint8_t first[] = {0x09, 0,   0,   0,   0,   0,   0,   0xF8, 0x3F, 0x1A, 13,  'b',
                                    'r',  'a', 'i', 'n', '.', 'E', 'v', 'e',  'n',  't',  ':', '2'};
    size_t off = 0, len = 0;
    const uint8_t *data = NULL;
    CHECK_INT(next_record(&off, &data, &len), 1);
    CHECK_INT(len, sizeof first);
    CHECK(len == sizeof first && memcmp(data, first, len) == 0);

    /* Record 2: wall_time 2, step 3, summary { value {tag, simple_value} x2 }. */
    CHECK_INT(next_record(&off, &data, &len), 1);
    const uint8_t *p = data, *end = data + len;
    field fl;
    int values = 0;
    while (next_field(&p, end, &fl) == 1) {
        if (fl.num == 1)
            CHECK(f64(fl.v) == 2.0);
        else if (fl.num == 2)
            CHECK_INT(fl.v, 3);
        else if (fl.num == 5) {
            const uint8_t *q = fl.b, *qend = fl.b + fl.n;
            field v;
            while (next_field(&q, qend, &v) == 1) {
                CHECK_INT(v.num, 1); /* Summary.value */
                const uint8_t *r = v.b, *rend = v.b + v.n;
                field x;
                while (next_field(&r, rend, &x) == 1) {
                    if (x.num == 1) {
                        CHECK(x.n == strlen(tags[values]) && memcmp(x.b, tags[values], x.n) == 0);
                    } else {
                        CHECK_INT(x.num, 2); /* simple_value: a float, fixed32 */
                        CHECK_INT(x.wt, 5);
                        CHECK(f32(x.v) == (float)vals[values]);
                    }
                }
                values++;
            }
        } else
            CHECK(!"an unexpected Event field");
    }
    CHECK_INT(values, 2);

    /* Record 3: the histogram under Summary.value.histo (field 5). */
    CHECK_INT(next_record(&off, &data, &len), 1);
    p = data;
    end = data + len;
    int histos = 0;
    while (next_field(&p, end, &fl) == 1) {
        if (fl.num != 5)
            continue;
        const uint8_t *q = fl.b, *qend = fl.b + fl.n;
        field v;
        CHECK_INT(next_field(&q, qend, &v), 1);
        const uint8_t *r = v.b, *rend = v.b + v.n;
        field x;
        while (next_field(&r, rend, &x) == 1) {
            if (x.num == 1)
                CHECK(x.n == 8 && memcmp(x.b, "0.weight", 8) == 0);
            else if (x.num == 5) {
                check_histo(x.b, x.b + x.n);
                histos++;
            }
        }
    }
    CHECK_INT(histos, 1);
    CHECK_INT(next_record(&off, &data, &len), 0);

    /* A corrupted byte fails its record's CRC. */
    file[20] ^= 1;
    off = 0;
    CHECK_INT(next_record(&off, &data, &len), -1);

    /* Sticky errors: a file that cannot be created is refused at open. */
    CHECK(tfevents_open("/nonexistent-dir/x", 0, &w, err) < 0);
    return check_exit();
}
