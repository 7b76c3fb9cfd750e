/* Unit tests of data/csv: quoting, line ends, blank lines, line numbers, errors, and the
 * number parser's accepted and refused forms. */
#include "data/csv.h"

#include <errno.h>

#include "tests/unit/check.h"
#include "util/err.h"

/* All records of text, as "cell|cell|...\n" lines prefixed by their line numbers, in out. */
static int csv_dump(const char *text, char *out, size_t size, char *err)
{
    csv_reader r;
    csv_record rec;
    size_t used = 0;
    int rc;
    out[0] = '\0';
    csv_reader_init(&r, text, strlen(text));
    for (;;) {
        rc = csv_reader_next(&r, &rec, err);
        if (rc <= 0)
            break;
        used += (size_t)snprintf(out + used, size - used, "%zu:", rec.line);
        for (size_t i = 0; i < rec.n; i++)
            used += (size_t)snprintf(out + used, size - used, "%s%.*s", i ? "|" : "",
                                     (int)rec.cells[i].len, rec.cells[i].ptr);
        used += (size_t)snprintf(out + used, size - used, "\n");
    }
    csv_reader_free(&r);
    return rc;
}

static void test_tokens(void)
{
    char out[1024], err[ERR_LEN];
    CHECK_INT(csv_dump("a,b,c\n1,2,3\n", out, sizeof out, err), 0);
    CHECK_STR(out, "1:a|b|c\n2:1|2|3\n");

    /* No trailing newline; CRLF; empty cells and a trailing comma. */
    CHECK_INT(csv_dump("a,b\r\n1,\r\n,2,", out, sizeof out, err), 0);
    CHECK_STR(out, "1:a|b\n2:1|\n3:|2|\n");

    /* Quoted commas, doubled quotes, newlines inside quotes; line numbers are where records
     * start. */
    CHECK_INT(
        csv_dump("x,\"a,b\"\n\"say \"\"hi\"\"\",\"two\nlines\"\n3,\"\"\n", out, sizeof out, err),
        0);
    CHECK_STR(out, "1:x|a,b\n2:say \"hi\"|two\nlines\n4:3|\n");

    /* Several escaped cells in one record: each points at its own unescaped text. */
    CHECK_INT(csv_dump("\"a\"\"\",\"b\"\"\"\"c\",\"\"\"\"\n", out, sizeof out, err), 0);
    CHECK_STR(out, "1:a\"|b\"\"c|\"\n");

    /* Blank and whitespace-only lines are skipped but counted. */
    CHECK_INT(csv_dump("\n\na,b\n\n  \n\r\n1,2\n\n", out, sizeof out, err), 0);
    CHECK_STR(out, "3:a|b\n7:1|2\n");

    /* Spaces around a quoted cell; a bare CR is data; a quote mid-cell is data. */
    CHECK_INT(csv_dump("  \"q, r\"  ,a\rb,c\"d\n", out, sizeof out, err), 0);
    CHECK_STR(out, "1:q, r|a\rb|c\"d\n");

    /* A byte order mark is skipped. */
    CHECK_INT(csv_dump("\xEF\xBB\xBFh,i\n", out, sizeof out, err), 0);
    CHECK_STR(out, "1:h|i\n");

    /* Empty text. */
    CHECK_INT(csv_dump("", out, sizeof out, err), 0);
    CHECK_STR(out, "");
}

static void test_errors(void)
{
    char out[1024], err[ERR_LEN];
    err[0] = '\0';
    CHECK_INT(csv_dump("a,b\n1,2\n3,\"open\n4,5\n", out, sizeof out, err), -EBADMSG);
    CHECK(strstr(err, "line 3") != NULL);
    CHECK(strstr(err, "never closed") != NULL);

    err[0] = '\0';
    CHECK_INT(csv_dump("a,b\n\"x\"y,2\n", out, sizeof out, err), -EBADMSG);
    CHECK(strstr(err, "line 2") != NULL);

    /* The text need not be NUL-terminated: the reader stops at len. */
    csv_reader r;
    csv_record rec;
    const char text[] = "1,2\n3,4XXXX";
    csv_reader_init(&r, text, 7);
    CHECK_INT(csv_reader_next(&r, &rec, err), 1);
    CHECK_INT(csv_reader_next(&r, &rec, err), 1);
    CHECK_INT(rec.n, 2);
    CHECK_INT(rec.cells[1].len, 1);
    CHECK_INT(csv_reader_next(&r, &rec, err), 0);
    csv_reader_free(&r);
}

static void test_wide(void)
{
    /* A record wider than the reader's first array, to exercise growth. */
    size_t n = 5000;
    char *text = malloc(n * 8 + 2);
    CHECK(text != NULL);
    if (!text)
        return;
    size_t used = 0;
    for (size_t i = 0; i < n; i++)
        used += (size_t)sprintf(text + used, "%s%zu", i ? "," : "", i);
    text[used++] = '\n';
    csv_reader r;
    csv_record rec;
    char err[ERR_LEN];
    csv_reader_init(&r, text, used);
    CHECK_INT(csv_reader_next(&r, &rec, err), 1);
    CHECK_INT(rec.n, n);
    CHECK_INT(rec.bytes, used);
    CHECK(rec.cells[4999].len == 4 && memcmp(rec.cells[4999].ptr, "4999", 4) == 0);
    csv_reader_free(&r);
    free(text);
}

static double num(const char *s, int *rc)
{
    double v = -12345;
    *rc = csv_number(s, strlen(s), &v);
    return v;
}

static void test_numbers(void)
{
    int rc;
    CHECK_NEAR(num("0", &rc), 0, 0);
    CHECK_INT(rc, 0);
    CHECK_NEAR(num("255", &rc), 255, 0);
    CHECK_NEAR(num("  -17 ", &rc), -17, 0);
    CHECK_NEAR(num("\t+3.25", &rc), 3.25, 0);
    CHECK_NEAR(num("0.1", &rc), 0.1, 0);
    CHECK(num("0.1", &rc) == 0.1); /* correctly rounded */
    CHECK(num("123.456", &rc) == 123.456);
    CHECK_NEAR(num(".5", &rc), 0.5, 0);
    CHECK_NEAR(num("5.", &rc), 5, 0);
    CHECK_NEAR(num("1e3", &rc), 1000, 0);
    CHECK_INT(rc, 0);
    CHECK_NEAR(num("-2.5E-2", &rc), -0.025, 1e-18);
    CHECK_INT(rc, 0);
    CHECK(num("12345678901234567890", &rc) == 12345678901234567890.0);
    CHECK_INT(rc, 0);
    CHECK(num("0.000000000000000000000000001", &rc) == 1e-27);
    CHECK_INT(rc, 0);
    CHECK(num("000000000000000000000042", &rc) == 42);

    const char *bad[] = {"",      "  ",  "-",   "+",    ".",   "abc", "1a",
                         "1.2.3", "1e",  "inf", "-inf", "nan", "NaN", "infinity",
                         "0x10",  "1 2", "--1", "1,5",  "e5"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        double v = 7;
        int r = csv_number(bad[i], strlen(bad[i]), &v);
        if (r != -EINVAL)
            fprintf(stderr, "csv_number(\"%s\") gave %d\n", bad[i], r);
        CHECK_INT(r, -EINVAL);
        CHECK_NEAR(v, 7, 0); /* untouched on failure */
    }
    CHECK_INT(csv_number("1e999", 5, &(double){0}), -ERANGE);
    /* Only len bytes are read. */
    double v;
    CHECK_INT(csv_number("12x", 2, &v), 0);
    CHECK_NEAR(v, 12, 0);
}

int main(void)
{
    test_tokens();
    test_errors();
    test_wide();
    test_numbers();
    return check_exit();
}
