/* json_out: jansson values as JSON text with the shortest reals (see json_out.h).
 *
 * The writer walks the value recursively into one growing buffer (depth capped at
 * JSON_OUT_MAX_DEPTH, as jansson's parser caps it, which also ends a value that contains
 * itself), then hands the buffer over or writes it out. Layout follows jansson's dump.c rule
 * for rule: after "[" or "{" and after each ",", a newline and depth * n spaces when indenting,
 * else one space unless JSON_COMPACT; before the closing bracket the same at depth - 1; ": "
 * between key and value, ":" when compact; empty containers as "[]" and "{}".
 *
 * Shortest reals: the text is "%.{k}g" for the least k whose strtod gives back the same bits,
 * then jansson's touches (".0" when there is neither '.' nor 'e', no '+' or leading zeros in
 * the exponent). For a normal double, if k digits read back then so do k' (k < k' <= 16): the
 * nearest k'-digit decimal is at least as close as the k-digit one, and k'-digit decimals are
 * more than an ulp apart there, so the two cannot differ and both lie within half an ulp; 17
 * always reads back. The predicate is thus monotone on 1..17 and a binary search finds k in at
 * most five tries. Subnormals, whose ulp is large relative to the value, are searched upward
 * from 1. The notation is %g's, except that a value below 1e15 whose shortest digits stop
 * short of the units is written out (100.0, not 1e2), as people and Python's repr write it. */
#include "util/json_out.h"

#include <errno.h>
#include <locale.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "util/dynbuf.h"
#include "util/utf8.h"

#define JSON_OUT_MAX_DEPTH 2048
#define JSON_OUT_DIGITS    17 /* enough for any double */

typedef struct jo_buf {
    dynbuf d; /* the text so far; no cap of its own (the values are the program's) */
    int rc;   /* the first failure: -ENOMEM or -EINVAL */
} jo_buf;

static void jo_put(jo_buf *b, const char *s, size_t n)
{
    if (b->rc < 0)
        return;
    b->rc = dynbuf_add(&b->d, s, n);
}

static void jo_puts(jo_buf *b, const char *s)
{
    jo_put(b, s, strlen(s));
}

/* ---- reals ------------------------------------------------------------------------------ */

/* The locale's decimal point in text (printf's) made '.'. */
static void jo_point(char *text)
{
    const char *point = localeconv()->decimal_point;
    if (point && strcmp(point, ".") != 0) {
        char *at = strstr(text, point);
        if (at) {
            size_t pl = strlen(point);
            *at = '.';
            memmove(at + 1, at + pl, strlen(at + pl) + 1);
        }
    }
}

/* "%.{k}g" of d into out with '.' as the decimal point whatever the locale; 1 when strtod
 * reads it back to d's bits (checked before the point is swapped: strtod follows the locale). */
static int jo_try(double d, int k, char out[JSON_OUT_REAL_MAX])
{
    if (snprintf(out, JSON_OUT_REAL_MAX, "%.*g", k, d) >= JSON_OUT_REAL_MAX)
        return 0; /* cannot happen for k <= 17: at most 24 bytes */
    double back = strtod(out, NULL);
    int same = memcmp(&back, &d, sizeof d) == 0;
    jo_point(out);
    return same;
}

int json_out_real(double d, int precision, char out[JSON_OUT_REAL_MAX])
{
    if (!isfinite(d))
        return -EDOM;
    int cap = precision > 0 && precision < JSON_OUT_DIGITS ? precision : JSON_OUT_DIGITS, k;
    if (fpclassify(d) == FP_NORMAL) {
        int lo = 1, hi = cap; /* the least k in lo..hi that reads back, else cap */
        while (lo < hi) {
            int mid = (lo + hi) / 2;
            if (jo_try(d, mid, out))
                hi = mid;
            else
                lo = mid + 1;
        }
        k = lo;
    } else {
        for (k = 1; k < cap && !jo_try(d, k, out); k++)
            ;
    }
    /* %g writes 100 with one digit as 1e+02; up to 15 integer digits the fixed notation is
     * kept by widening the precision: the digits added are zeros, since a k-digit integer
     * below 1e15 that reads back to d is d exactly. */
    int digits = k;
    char sci[JSON_OUT_REAL_MAX];
    const char *ex =
        snprintf(sci, sizeof sci, "%.*e", k - 1, d) < (int)sizeof sci ? strchr(sci, 'e') : NULL;
    int x = ex ? atoi(ex + 1) : -1;
    if (jo_try(d, k, out) && x >= 0 && x < 15 && x + 1 > k)
        digits = x + 1;
    jo_try(d, digits, out);
    size_t n = strlen(out);
    char *e = strchr(out, 'e');
    if (!e && !strchr(out, '.')) {
        memcpy(out + n, ".0", 3); /* "%.17g" is at most 24 bytes: it fits */
        return (int)n + 2;
    }
    if (e) { /* e+21 → e21, e-07 → e-7 */
        char *keep = e + 1 + (e[1] == '-'), *from = e + 1;
        if (*from == '-' || *from == '+')
            from++;
        while (*from == '0' && from[1])
            from++;
        memmove(keep, from, strlen(from) + 1);
    }
    return (int)strlen(out);
}

/* The least k (1..9) for which "%.{k}g" of f reads back (strtof) to f's bits: 9 always does. */
static int jo_float_digits(float f)
{
    char text[JSON_OUT_REAL_MAX];
    for (int k = 1; k < 9; k++) {
        snprintf(text, sizeof text, "%.*g", k, (double)f);
        float back = strtof(text, NULL);
        if (memcmp(&back, &f, sizeof f) == 0)
            return k;
    }
    return 9;
}

double json_out_float(float f)
{
    char text[JSON_OUT_REAL_MAX];
    if (!isfinite(f))
        return (double)f;
    snprintf(text, sizeof text, "%.*g", jo_float_digits(f), (double)f);
    return strtod(text, NULL);
}

int json_out_float_text(float f, char out[JSON_OUT_REAL_MAX])
{
    snprintf(out, JSON_OUT_REAL_MAX, "%.*g", isfinite(f) ? jo_float_digits(f) : 1, (double)f);
    jo_point(out);
    return (int)strlen(out);
}

/* ---- strings ---------------------------------------------------------------------------- */

/* The code point of the valid n-byte UTF-8 sequence at p. */
static uint32_t jo_code_point(const unsigned char *p, size_t n)
{
    static const unsigned char lead_mask[] = {0, 0x7F, 0x1F, 0x0F, 0x07};
    uint32_t c = p[0] & lead_mask[n];
    for (size_t i = 1; i < n; i++)
        c = (c << 6) | (p[i] & 0x3F);
    return c;
}

static void jo_string(jo_buf *b, const char *s, size_t len, size_t flags)
{
    const unsigned char *p = (const unsigned char *)s, *end = p + len;
    jo_put(b, "\"", 1);
    while (p < end) {
        const unsigned char *run = p; /* bytes that go out as they are */
        size_t n = 0;
        uint32_t c = 0;
        while (p < end) {
            n = utf8_seq_len(p, (size_t)(end - p));
            if (n == 0) {
                if (b->rc == 0)
                    b->rc = -EINVAL; /* jansson refuses invalid UTF-8 too */
                return;
            }
            c = jo_code_point(p, n);
            if (c == '"' || c == '\\' || c < 0x20 || (c == '/' && (flags & JSON_ESCAPE_SLASH)) ||
                (c > 0x7F && (flags & JSON_ENSURE_ASCII)))
                break;
            p += n;
        }
        jo_put(b, (const char *)run, (size_t)(p - run));
        if (p == end)
            break;
        static const char plain[] = "\"\\\b\f\n\r\t/", named[] = "\"\\bfnrt/";
        const char *at = c && c < 0x80 ? strchr(plain, (int)c) : NULL;
        char esc[16];
        if (at) { /* the two-character escapes */
            esc[0] = '\\';
            esc[1] = named[at - plain];
            esc[2] = '\0';
        } else if (c < 0x10000) {
            snprintf(esc, sizeof esc, "\\u%04X", (unsigned)c);
        } else { /* a UTF-16 surrogate pair */
            uint32_t v = c - 0x10000;
            snprintf(esc, sizeof esc, "\\u%04X\\u%04X", (unsigned)(0xD800 | (v >> 10)),
                     (unsigned)(0xDC00 | (v & 0x3FF)));
        }
        jo_puts(b, esc);
        p += n;
    }
    jo_put(b, "\"", 1);
}

/* ---- values ----------------------------------------------------------------------------- */

/* A line break and depth levels of indentation when indenting, else " " if space and not
 * compact (jansson's dump_indent). */
static void jo_indent(jo_buf *b, size_t flags, int depth, int space)
{
    static const char blanks[] = "                                ";
    size_t width = flags & JSON_MAX_INDENT;
    if (width > 0) {
        jo_put(b, "\n", 1);
        for (size_t left = width * (size_t)depth; left > 0;) {
            size_t n = left < sizeof blanks - 1 ? left : sizeof blanks - 1;
            jo_put(b, blanks, n);
            left -= n;
        }
    } else if (space && !(flags & JSON_COMPACT)) {
        jo_put(b, " ", 1);
    }
}

/* What follows an item of a container at depth: "," and the next item's line when more
 * follow, else the closing bracket's line. */
static void jo_after_item(jo_buf *b, size_t flags, int depth, int more)
{
    if (more) {
        jo_put(b, ",", 1);
        jo_indent(b, flags, depth + 1, 1);
    } else {
        jo_indent(b, flags, depth, 0);
    }
}

typedef struct jo_member {
    const char *key;
    size_t len;
    json_t *value;
} jo_member;

/* jansson's key order for JSON_SORT_KEYS: bytes, then length. */
static int jo_member_cmp(const void *x, const void *y)
{
    const jo_member *a = x, *b = y;
    int r = memcmp(a->key, b->key, a->len < b->len ? a->len : b->len);
    if (r != 0)
        return r;
    return a->len < b->len ? -1 : a->len > b->len;
}

static void jo_value(jo_buf *b, const json_t *v, size_t flags, int depth);

static void jo_object(jo_buf *b, const json_t *v, size_t flags, int depth)
{
    size_t n = json_object_size(v), i = 0;
    jo_member *m = n ? malloc(n * sizeof *m) : NULL;
    if (n && !m) {
        b->rc = b->rc < 0 ? b->rc : -ENOMEM;
        return;
    }
    for (void *it = json_object_iter((json_t *)v); it && i < n;
         it = json_object_iter_next((json_t *)v, it), i++)
        m[i] = (jo_member){json_object_iter_key(it), json_object_iter_key_len(it),
                           json_object_iter_value(it)};
    if ((flags & JSON_SORT_KEYS) && i > 1)
        qsort(m, i, sizeof *m, jo_member_cmp);
    jo_put(b, "{", 1);
    if (i > 0)
        jo_indent(b, flags, depth + 1, 0);
    for (size_t k = 0; k < i; k++) {
        jo_string(b, m[k].key, m[k].len, flags);
        jo_puts(b, flags & JSON_COMPACT ? ":" : ": ");
        jo_value(b, m[k].value, flags, depth + 1);
        jo_after_item(b, flags, depth, k + 1 < i);
    }
    jo_put(b, "}", 1);
    free(m);
}

static void jo_value(jo_buf *b, const json_t *v, size_t flags, int depth)
{
    char text[JSON_OUT_REAL_MAX];
    if (b->rc < 0)
        return;
    if (!v || depth > JSON_OUT_MAX_DEPTH) {
        b->rc = -EINVAL;
        return;
    }
    switch (json_typeof(v)) {
    case JSON_NULL:
        jo_puts(b, "null");
        break;
    case JSON_TRUE:
        jo_puts(b, "true");
        break;
    case JSON_FALSE:
        jo_puts(b, "false");
        break;
    case JSON_INTEGER:
        snprintf(text, sizeof text, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
        jo_puts(b, text);
        break;
    case JSON_REAL:
        if (json_out_real(json_real_value(v), (int)((flags >> 11) & 0x1F), text) < 0)
            b->rc = -EINVAL;
        else
            jo_puts(b, text);
        break;
    case JSON_STRING:
        jo_string(b, json_string_value(v), json_string_length(v), flags);
        break;
    case JSON_ARRAY: {
        size_t n = json_array_size(v);
        jo_put(b, "[", 1);
        if (n > 0)
            jo_indent(b, flags, depth + 1, 0);
        for (size_t i = 0; i < n; i++) {
            jo_value(b, json_array_get(v, i), flags, depth + 1);
            jo_after_item(b, flags, depth, i + 1 < n);
        }
        jo_put(b, "]", 1);
        break;
    }
    case JSON_OBJECT:
        jo_object(b, v, flags, depth);
        break;
    }
}

/* The text of v into b; 0 or -EINVAL / -ENOMEM, b's memory freed on failure. */
static int jo_dump(const json_t *v, size_t flags, jo_buf *b)
{
    dynbuf_init(&b->d, SIZE_MAX);
    b->rc = 0;
    if (!v || (flags & JSON_EMBED) ||
        (!(flags & JSON_ENCODE_ANY) && !json_is_object(v) && !json_is_array(v)))
        return -EINVAL;
    jo_value(b, v, flags, 0);
    if (b->rc < 0)
        dynbuf_free(&b->d);
    return b->rc;
}

char *json_out_dumps(const json_t *v, size_t flags)
{
    jo_buf b;
    return jo_dump(v, flags, &b) < 0 ? NULL : dynbuf_take(&b.d, NULL);
}

int json_out_dumpf(const json_t *v, FILE *f, size_t flags)
{
    jo_buf b;
    int rc = jo_dump(v, flags, &b);
    if (rc < 0)
        return rc;
    if (fwrite(dynbuf_str(&b.d), 1, dynbuf_len(&b.d), f) != dynbuf_len(&b.d))
        rc = -EIO;
    dynbuf_free(&b.d);
    return rc;
}

int json_out_dump_file(const json_t *v, const char *path, size_t flags)
{
    jo_buf b;
    int rc = jo_dump(v, flags, &b);
    if (rc < 0)
        return rc;
    FILE *f = fopen(path, "w");
    if (!f) {
        rc = -errno;
        goto out;
    }
    if (fwrite(dynbuf_str(&b.d), 1, dynbuf_len(&b.d), f) != dynbuf_len(&b.d))
        rc = -EIO;
    if (fclose(f) != 0 && rc == 0)
        rc = -errno;
out:
    dynbuf_free(&b.d);
    return rc;
}
