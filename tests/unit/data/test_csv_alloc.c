/* Fault tests of data/csv: a reader over text that grows every array it has (a record wider
 * than the first cells array, quoted cells with doubled quotes past the first scratch buffer and
 * fixup array), with the n-th allocation failing for every n until a run reads the whole text
 * untouched. A failing csv_reader_next() must return -ENOMEM with a message naming the line and
 * leave the record as it was; records before it must match the untouched run's; ASan checks that
 * csv_reader_free() releases whatever was grown. */
#include "data/csv.h"

#include <errno.h>

#include "tests/unit/alloc_fail.h"
#include "tests/unit/check.h"
#include "util/err.h"

static char text[16384];
static size_t text_len;

/* Line 1: 100 plain cells; line 2: 40 quoted cells with doubled quotes, 20 bytes each;
 * line 3: a short record. */
static void build_text(void)
{
    size_t o = 0;
    for (int i = 0; i < 100; i++)
        o += (size_t)snprintf(text + o, sizeof text - o, "%s%d", i ? "," : "", i);
    text[o++] = '\n';
    for (int i = 0; i < 40; i++)
        o += (size_t)snprintf(text + o, sizeof text - o, "%s\"cell %02d \"\"quoted\"\" x\"",
                              i ? "," : "", i);
    o += (size_t)snprintf(text + o, sizeof text - o, "\r\n1.5,\"a,b\",c\n");
    text_len = o;
}

/* Reads the whole text; folds every cell into a hash. Returns the last csv_reader_next() code
 * (0 at the end) and the records read in *records. */
static int read_all(uint64_t *hash, size_t *records, char *err)
{
    csv_reader r;
    csv_reader_init(&r, text, text_len);
    uint64_t h = 1469598103934665603ull;
    size_t n = 0;
    int rc;
    for (;;) {
        csv_record rec, before;
        memset(&rec, 0xAB, sizeof rec);
        before = rec;
        rc = csv_reader_next(&r, &rec, err);
        if (rc <= 0) {
            CHECK(memcmp(&rec, &before, sizeof rec) == 0); /* untouched on failure and at end */
            break;
        }
        n++;
        for (size_t i = 0; i < rec.n; i++) {
            for (size_t k = 0; k < rec.cells[i].len; k++)
                h = (h ^ (unsigned char)rec.cells[i].ptr[k]) * 1099511628211ull;
            h = (h ^ 0xFF) * 1099511628211ull;
        }
    }
    csv_reader_free(&r);
    *hash = h;
    *records = n;
    return rc;
}

static void test_reader(void)
{
    build_text();
    char err[ERR_LEN];
    uint64_t want = 0;
    size_t want_records = 0;
    CHECK_INT(read_all(&want, &want_records, err), 0);
    CHECK_INT(want_records, 3);
    long points = 0;
    ALLOC_FAIL_LOOP(&points, {
        uint64_t h = 0;
        size_t records = 0;
        err[0] = '\0';
        int rc = read_all(&h, &records, err);
        if (alloc_fail_off()) {
            CHECK_INT(rc, -ENOMEM);
            CHECK(strstr(err, "out of memory reading line") != NULL);
            CHECK(records < want_records);
        } else {
            CHECK_INT(rc, 0);
            CHECK(h == want);
        }
    });
    printf("csv_reader_next: %ld failure points\n", points);
    CHECK(points >= 4); /* cells twice, scratch twice, fixups */
}

int main(void)
{
    CHECK_INT(alloc_fail_init(), 0);
    test_reader();
    return check_exit();
}
