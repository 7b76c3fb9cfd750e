/* Unit tests of util/json_out: shortest reals (named values, then random doubles checked
 * against a brute-force search over "%.{1..17}g"), and everything else byte for byte as
 * jansson's own json_dumps writes it, under each flag the call sites use. */
#include "util/json_out.h"

#include <errno.h>
#include <float.h>
#include <stdint.h>
#include <unistd.h>

#include "tests/unit/check.h"

static void check_real(double d, const char *want)
{
    char text[JSON_OUT_REAL_MAX];
    int n = json_out_real(d, 0, text);
    CHECK_STR(text, want);
    CHECK_INT(n, (long long)strlen(want));
}

/* The least k for which "%.{k}g" of d reads back to d's bits. */
static int brute_force_digits(double d)
{
    char text[64];
    for (int k = 1; k <= 17; k++) {
        snprintf(text, sizeof text, "%.*g", k, d);
        double back = strtod(text, NULL);
        if (memcmp(&back, &d, sizeof d) == 0)
            return k;
    }
    return 99;
}

/* Significant digits of a JSON real as json_out writes it (no trailing zeros are significant:
 * a shortest form never ends in one). */
static int significant_digits(const char *text)
{
    char digits[64];
    size_t n = 0;
    for (const char *p = text; *p && *p != 'e'; p++)
        if (*p >= '0' && *p <= '9')
            digits[n++] = *p;
    digits[n] = '\0';
    size_t lead = strspn(digits, "0");
    while (n > lead && digits[n - 1] == '0')
        n--;
    return n > lead ? (int)(n - lead) : 1;
}

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint64_t rng_next(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

static void test_named_reals(void)
{
    check_real(0.9, "0.9");
    check_real(1e-7, "1e-7");
    check_real(0.1 + 0.2, "0.30000000000000004");
    check_real(1.0 / 3.0, "0.3333333333333333");
    check_real(5e-324, "5e-324");
    check_real(DBL_MAX, "1.7976931348623157e308");
    check_real(-DBL_MAX, "-1.7976931348623157e308");
    check_real(DBL_MIN, "2.2250738585072014e-308");
    check_real(-0.0, "-0.0");
    check_real(0.0, "0.0");
    check_real(1.0, "1.0");
    check_real(100.0, "100.0");
    check_real(-2.5, "-2.5");
    check_real(1e21, "1e21");
    check_real(1e15, "1e15");
    check_real(123456789012345.0, "123456789012345.0");
    check_real(123456789012345680.0, "1.2345678901234568e17");
    check_real(0.001, "0.001");
    check_real(0.0001, "0.0001");
    check_real(0.00001, "1e-5");
    check_real(0.001, "0.001");
    check_real(3.14159, "3.14159");
    check_real(1e100, "1e100");

    char text[JSON_OUT_REAL_MAX];
    CHECK_INT(json_out_real(NAN, 0, text), -EDOM);
    CHECK_INT(json_out_real(INFINITY, 0, text), -EDOM);
    CHECK_INT(json_out_real(-INFINITY, 0, text), -EDOM);

    /* A precision caps the digits: the shortest within it, else exactly that many. */
    json_out_real(0.1 + 0.2, 9, text);
    CHECK_STR(text, "0.3");
    json_out_real(1.0 / 3.0, 9, text);
    CHECK_STR(text, "0.333333333");
    json_out_real(0.9, 9, text);
    CHECK_STR(text, "0.9");

    /* Floats through json_out_float print as their own shortest decimal. */
    json_out_real(json_out_float(0.1f), 0, text);
    CHECK_STR(text, "0.1");
    json_out_real(json_out_float(1.2345f), 0, text);
    CHECK_STR(text, "1.2345");
    CHECK(strtof(text, NULL) == 1.2345f);
    json_out_real(json_out_float(16777216.0f), 0, text);
    CHECK_STR(text, "16777216.0");
}

/* json_out_float_text: the shortest digits in %g's notation, as export.c writes a float into
 * PyTorch code; random floats read back (strtof) to their own bits, and strtod of the text is
 * json_out_float's double (whose shortness test_named_reals checks). */
static void test_float_text(void)
{
    char text[JSON_OUT_REAL_MAX];
    const struct {
        float f;
        const char *want;
    } named[] = {{0.001f, "0.001"}, {1e-5f, "1e-05"},
                 {1.0f, "1"},       {0.99f, "0.99"},
                 {0.1f, "0.1"},     {16777216.0f, "16777216"},
                 {-0.0f, "-0"},     {3.4028235e38f, "3.4028235e+38"}};
    for (size_t i = 0; i < sizeof named / sizeof named[0]; i++) {
        int n = json_out_float_text(named[i].f, text);
        CHECK_STR(text, named[i].want);
        CHECK_INT(n, strlen(named[i].want));
    }
    json_out_float_text(NAN, text);
    CHECK_STR(text, "nan");
    int bad = 0;
    for (int i = 0; i < 100000 && bad < 10; i++) {
        uint32_t bits = (uint32_t)rng_next();
        float f;
        memcpy(&f, &bits, sizeof f);
        if (!isfinite(f))
            continue;
        json_out_float_text(f, text);
        float back = strtof(text, NULL);
        if (memcmp(&back, &f, sizeof f) != 0 || strtod(text, NULL) != json_out_float(f)) {
            fprintf(stderr, "float %a: text %s\n", (double)f, text);
            bad++;
        }
    }
    CHECK_INT(bad, 0);
}

static void test_random_reals(void)
{
    char text[JSON_OUT_REAL_MAX];
    int bad = 0;
    for (int i = 0; i < 200000 && bad < 10; i++) {
        double d;
        uint64_t bits = rng_next();
        if (i % 4 == 1) /* short decimals, as people write them */
            d = (double)(bits % 100000) / 1000.0;
        else if (i % 4 == 2) /* powers of two, where the rounding interval is lopsided */
            d = ldexp(1.0, (int)(bits % 2098) - 1074);
        else if (i % 4 == 3) /* floats, as metrics come */
            d = (double)(float)((double)(bits >> 11) / (double)(1ull << 53) * 10.0);
        else
            memcpy(&d, &bits, sizeof d);
        if (!isfinite(d))
            continue;
        int n = json_out_real(d, 0, text);
        double back = strtod(text, NULL);
        int ok = n == (int)strlen(text) && memcmp(&back, &d, sizeof d) == 0 &&
                 significant_digits(text) == brute_force_digits(d) &&
                 (strchr(text, '.') || strchr(text, 'e')) && !strchr(text, '+');
        if (!ok) {
            fprintf(stderr, "%.17g -> %s (brute force: %d digits)\n", d, text,
                    brute_force_digits(d));
            bad++;
        }
    }
    CHECK_INT(bad, 0);
}

/* json_out_dumps(v, flags) must equal json_dumps(v, flags) for values without reals other
 * than those %.17g already prints shortest. */
static void check_same_as_jansson(const json_t *v, size_t flags)
{
    char *ours = json_out_dumps(v, flags), *theirs = json_dumps(v, flags);
    CHECK_STR(ours, theirs);
    free(ours);
    free(theirs);
}

static void test_layout_and_escapes(void)
{
    char controls[40];
    for (int i = 1; i < 0x20; i++)
        controls[i - 1] = (char)i;
    strcpy(controls + 0x1F, "\x7f/\"\\");
    json_t *doc = json_pack(
        "{s:s, s:s#, s:s, s:[i, I, b, b, n, f, f, f, f], s:{}, s:[], s:{s:[{}, [[]], {s:i}]}}",
        "name", "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 \xed\x9f\xbf", "nul", "a\0b", 3,
        "controls", controls, "list", 42, (json_int_t)INT64_MIN, 1, 0, 0.5, 1.0, -2.0, 1024.0,
        "empty", "none", "deep", "z", "y", -7);
    json_object_set_new(doc, "b-first", json_string("sorted?"));
    json_object_set_new(doc, "a", json_string("/slash"));
    CHECK(doc != NULL);
    static const size_t flag_sets[] = {0,
                                       JSON_COMPACT,
                                       JSON_INDENT(2),
                                       JSON_INDENT(4) | JSON_SORT_KEYS,
                                       JSON_COMPACT | JSON_SORT_KEYS,
                                       JSON_ENSURE_ASCII,
                                       JSON_ENSURE_ASCII | JSON_INDENT(1) | JSON_COMPACT,
                                       JSON_ESCAPE_SLASH | JSON_COMPACT,
                                       JSON_INDENT(31)};
    for (size_t i = 0; i < sizeof flag_sets / sizeof flag_sets[0]; i++)
        check_same_as_jansson(doc, flag_sets[i]);

    /* Sorting puts "a" before "b-first" before "controls"; key order is kept otherwise. */
    char *sorted = json_out_dumps(doc, JSON_COMPACT | JSON_SORT_KEYS);
    CHECK(sorted && strstr(sorted, "{\"a\":") == sorted);
    free(sorted);

    /* Without JSON_ENCODE_ANY only containers; with it any value. */
    json_t *s = json_string("x\ty");
    CHECK(json_out_dumps(s, 0) == NULL);
    check_same_as_jansson(s, JSON_ENCODE_ANY);
    json_decref(s);
    json_t *r = json_real(0.9);
    char *text = json_out_dumps(r, JSON_ENCODE_ANY);
    CHECK_STR(text, "0.9");
    free(text);
    json_decref(r);
    json_t *i = json_integer(-3);
    check_same_as_jansson(i, JSON_ENCODE_ANY);
    json_decref(i);

    /* A string that is not UTF-8 is refused, as jansson refuses it. */
    json_t *raw = json_pack("[o]", json_stringn_nocheck("\xff", 1));
    CHECK(json_out_dumps(raw, 0) == NULL);
    json_decref(raw);
    /* JSON_EMBED is not supported. */
    CHECK(json_out_dumps(doc, JSON_EMBED) == NULL);
    json_decref(doc);
}

static void test_reals_in_documents(void)
{
    json_t *doc =
        json_pack("{s:{s:f, s:f, s:f, s:i}, s:[f, f]}", "hyperparameters", "beta1", 0.9, "epsilon",
                  1e-7, "learning_rate", 1.0, "epochs", 3, "xs", 0.1 + 0.2, 1e21);
    char *text = json_out_dumps(doc, JSON_COMPACT);
    CHECK_STR(text, "{\"hyperparameters\":{\"beta1\":0.9,\"epsilon\":1e-7,\"learning_rate\":1.0,"
                    "\"epochs\":3},\"xs\":[0.30000000000000004,1e21]}");
    /* What is written reads back to equal values, reals as reals. */
    json_t *back = json_loads(text, 0, NULL);
    CHECK(back && json_equal(back, doc));
    CHECK(json_is_real(json_object_get(json_object_get(back, "hyperparameters"), "learning_rate")));
    json_decref(back);
    free(text);

    char path[] = "/tmp/json_out_test_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    close(fd);
    CHECK_INT(json_out_dump_file(doc, path, JSON_INDENT(2)), 0);
    FILE *f = fopen(path, "r");
    char buf[512] = {0};
    size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    if (f)
        fclose(f);
    CHECK(n > 0 && strstr(buf, "\"epsilon\": 1e-7,\n") != NULL);
    unlink(path);
    CHECK(json_out_dump_file(doc, "/nonexistent/dir/x.json", 0) < 0);
    json_decref(doc);
}

int main(void)
{
    test_named_reals();
    test_random_reals();
    test_float_text();
    test_layout_and_escapes();
    test_reals_in_documents();
    return check_exit();
}
