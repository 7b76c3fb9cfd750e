/* job_fields: the vocabulary every section of the job document is checked with (see
 * job_priv.h): field paths ("dataset.augment.flip", "model.layers[2]"), messages that quote what
 * was given ("must be <what>, got <what was there>"), the typed getters, the report of unknown
 * members, and the few helpers that write a resolved document.
 *
 * Text copied from the input into a message is cut at a UTF-8 character boundary (quoting at
 * most JOB_SNIP_BYTES), so every message stays valid UTF-8 (the API builds JSON from them).
 * A getter writes its output only when it returns 1. */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "job/job_priv.h"
#include "util/utf8.h"

#define JOB_SNIP_BYTES 40 /* input text quoted in a message */

/* ---- validation context and paths ------------------------------------------------------ */

void job_path_key(job_path out, const char *base, const char *key)
{
    int n;
    if (base[0])
        n = snprintf(out, sizeof(job_path), "%s.%s", base, key);
    else
        n = snprintf(out, sizeof(job_path), "%s", key);
    if (n < 0 || (size_t)n >= sizeof(job_path))
        utf8_trim_end(out);
}

void job_path_index(job_path out, const char *base, size_t i)
{
    int n = snprintf(out, sizeof(job_path), "%s[%zu]", base, i);
    if (n < 0 || (size_t)n >= sizeof(job_path))
        utf8_trim_end(out);
}

char *job_strdup(job_vctx *v, const char *s)
{
    char *d = strdup(s);
    if (!d)
        v->rc = -ENOMEM;
    return d;
}

/* A short array of numbers (a shape, a kernel size) is written out, as "[3, 0]"; any other array
 * is "an array". */
static void job_describe_array(const json_t *v, char *buf, size_t cap)
{
    size_t n = json_array_size(v);
    int inline_ok = n >= 1 && n <= 4;
    for (size_t i = 0; inline_ok && i < n; i++)
        inline_ok = json_is_number(json_array_get(v, i));
    if (!inline_ok) {
        snprintf(buf, cap, "an array");
        return;
    }
    size_t used = 0;
    for (size_t i = 0; i < n && used < cap; i++) {
        const json_t *e = json_array_get(v, i);
        int w;
        if (json_is_integer(e))
            w = snprintf(buf + used, cap - used, "%s%lld", i ? ", " : "[",
                         (long long)json_integer_value(e));
        else
            w = snprintf(buf + used, cap - used, "%s%g", i ? ", " : "[", json_real_value(e));
        if (w < 0)
            break;
        used += (size_t)w;
    }
    if (used < cap)
        snprintf(buf + used, cap - used, "]");
}

/* A short description of what a value is, for "got ..." (quotes at most JOB_SNIP_BYTES of a
 * string, cut at a character boundary). */
static void job_describe(const json_t *v, char *buf, size_t cap)
{
    switch (json_typeof(v)) {
    case JSON_STRING: {
        const char *s = json_string_value(v);
        size_t n = strlen(s);
        if (n > JOB_SNIP_BYTES) {
            char cut[JOB_SNIP_BYTES + 1];
            memcpy(cut, s, JOB_SNIP_BYTES);
            cut[JOB_SNIP_BYTES] = '\0';
            utf8_trim_end(cut);
            snprintf(buf, cap, "\"%s...\"", cut);
        } else {
            snprintf(buf, cap, "\"%s\"", s);
        }
        break;
    }
    case JSON_INTEGER:
        snprintf(buf, cap, "%lld", (long long)json_integer_value(v));
        break;
    case JSON_REAL:
        snprintf(buf, cap, "%g", json_real_value(v));
        break;
    case JSON_OBJECT:
        snprintf(buf, cap, "an object");
        break;
    case JSON_ARRAY:
        job_describe_array(v, buf, cap);
        break;
    case JSON_TRUE:
        snprintf(buf, cap, "true");
        break;
    case JSON_FALSE:
        snprintf(buf, cap, "false");
        break;
    case JSON_NULL:
    default:
        snprintf(buf, cap, "null");
        break;
    }
}

void job_bad(job_vctx *v, const char *path, const char *what, const json_t *got)
{
    char desc[JOB_SNIP_BYTES + 16];
    job_describe(got, desc, sizeof desc);
    field_errors_add(v->errs, path, "must be %s, got %s", what, desc);
}

/* ---- typed getters: 1 = present and valid (out written), 0 = absent, -1 = invalid ------- */

/* An integer value from lo to hi into *out: 0, or -1 when val is anything else. */
static int job_int_value(const json_t *val, long long lo, long long hi, long long *out)
{
    long long i;
    if (json_is_real(val)) {
        /* An integral real (3.0) is an integer, as JSON Schema counts it: some encoders cannot
         * write one any other way. Checked before any cast: d may be far outside long long. */
        double d = json_real_value(val);
        if (!isfinite(d) || floor(d) != d || fabs(d) > 9007199254740992.0)
            return -1;
        i = (long long)d;
    } else if (json_is_integer(val)) {
        i = json_integer_value(val);
    } else {
        return -1;
    }
    if (i < lo || i > hi)
        return -1;
    *out = i;
    return 0;
}

int job_get_int(job_vctx *v, const json_t *obj, const char *key, const char *path, long long lo,
                long long hi, long long *out)
{
    const json_t *val = json_object_get(obj, key);
    if (!val)
        return 0;
    long long i = 0;
    if (job_int_value(val, lo, hi, &i) < 0) {
        job_path p;
        job_path_key(p, path, key);
        char what[96];
        if (lo == 0 && hi == LLONG_MAX)
            snprintf(what, sizeof what, "a non-negative integer");
        else
            snprintf(what, sizeof what, "an integer from %lld to %lld", lo, hi);
        job_bad(v, p, what, val);
        return -1;
    }
    *out = i;
    return 1;
}

int job_get_ints(job_vctx *v, const json_t *obj, const char *key, const char *path, size_t n,
                 int lo, int hi, int scalar_ok, const char *names, int *out)
{
    const json_t *val = json_object_get(obj, key);
    if (!val)
        return 0;
    int got[4] = {0};
    long long i = 0;
    int ok = n <= 4;
    if (ok && scalar_ok && !json_is_array(val)) {
        ok = job_int_value(val, lo, hi, &i) == 0;
        for (size_t k = 0; k < n; k++)
            got[k] = (int)i;
    } else if (ok) {
        ok = json_is_array(val) && json_array_size(val) == n;
        for (size_t k = 0; ok && k < n; k++) {
            ok = job_int_value(json_array_get(val, k), lo, hi, &i) == 0;
            got[k] = (int)i;
        }
    }
    if (!ok) {
        job_path p;
        job_path_key(p, path, key);
        char what[160];
        if (scalar_ok)
            snprintf(what, sizeof what, "an integer from %d to %d or [%s] of such integers", lo, hi,
                     names);
        else
            snprintf(what, sizeof what, "[%s], each an integer from %d to %d", names, lo, hi);
        job_bad(v, p, what, val);
        return -1;
    }
    memcpy(out, got, n * sizeof *out);
    return 1;
}

/* job_get_int for an int field. */
int job_get_int32(job_vctx *v, const json_t *obj, const char *key, const char *path, int lo, int hi,
                  int *out)
{
    long long i = 0;
    int r = job_get_int(v, obj, key, path, lo, hi, &i);
    if (r == 1)
        *out = (int)i;
    return r;
}

int job_get_number(job_vctx *v, const json_t *obj, const char *key, const char *path, job_range r,
                   double *out)
{
    const json_t *val = json_object_get(obj, key);
    if (!val)
        return 0;
    job_path p;
    job_path_key(p, path, key);
    char what[96];
    snprintf(what, sizeof what, "a number %s %g and %s %g", r.lo_open ? ">" : ">=", r.lo,
             r.hi_open ? "<" : "<=", r.hi);
    if (!json_is_number(val)) {
        job_bad(v, p, what, val);
        return -1;
    }
    double d = json_number_value(val);
    int low_ok = r.lo_open ? d > r.lo : d >= r.lo;
    int high_ok = r.hi_open ? d < r.hi : d <= r.hi;
    if (!low_ok || !high_ok) {
        job_bad(v, p, what, val);
        return -1;
    }
    *out = d;
    return 1;
}

int job_get_bool(job_vctx *v, const json_t *obj, const char *key, const char *path, int *out)
{
    const json_t *val = json_object_get(obj, key);
    if (!val)
        return 0;
    if (!json_is_boolean(val)) {
        job_path p;
        job_path_key(p, path, key);
        job_bad(v, p, "true or false", val);
        return -1;
    }
    *out = json_is_true(val);
    return 1;
}

int job_get_enum(job_vctx *v, const json_t *obj, const char *key, const char *path,
                 const job_enum *names, const char *what, int *out)
{
    const json_t *val = json_object_get(obj, key);
    if (!val)
        return 0;
    if (json_is_string(val)) {
        for (size_t i = 0; names[i].name; i++) {
            if (strcmp(json_string_value(val), names[i].name) == 0) {
                *out = names[i].value;
                return 1;
            }
        }
    }
    job_path p;
    job_path_key(p, path, key);
    job_bad(v, p, what, val);
    return -1;
}

int job_get_string(job_vctx *v, const json_t *obj, const char *key, const char *path,
                   const char **out)
{
    const json_t *val = json_object_get(obj, key);
    if (!val)
        return 0;
    if (!json_is_string(val)) {
        job_path p;
        job_path_key(p, path, key);
        job_bad(v, p, "a string", val);
        return -1;
    }
    *out = json_string_value(val);
    return 1;
}

int job_get_object(job_vctx *v, const json_t *obj, const char *key, const char *path,
                   const json_t **out)
{
    const json_t *val = json_object_get(obj, key);
    if (!val)
        return 0;
    if (!json_is_object(val)) {
        job_path p;
        job_path_key(p, path, key);
        job_bad(v, p, "an object", val);
        return -1;
    }
    *out = val;
    return 1;
}

/* Which of a field and its alias (seed 002's names) the document gives: key, or alias when
 * only it is there. Both given is an error on the alias. */
const char *job_alias(job_vctx *v, const json_t *doc, const char *key, const char *alias)
{
    if (!json_object_get(doc, alias))
        return key;
    if (json_object_get(doc, key)) {
        field_errors_add(v->errs, alias, "give %s or %s, not both", key, alias);
        return NULL;
    }
    return alias;
}

/* ---- resolved-document helpers ---------------------------------------------------------- */

const char *job_enum_name(const job_enum *names, int value)
{
    for (size_t i = 0; names[i].name; i++) {
        if (names[i].value == value)
            return names[i].name;
    }
    return NULL;
}

/* jansson frees val when the set fails, so nothing leaks on any path. */
void job_put(json_t *obj, const char *key, json_t *val, int *bad)
{
    if (json_object_set_new(obj, key, val) < 0)
        *bad = 1;
}

json_t *job_str(const char *s, int *bad)
{
    if (!s) {
        *bad = 1;
        return NULL;
    }
    return json_string(s);
}

json_t *job_pair(int a, int b, int *bad)
{
    json_t *pair = json_pack("[ii]", a, b);
    if (!pair)
        *bad = 1;
    return pair;
}
