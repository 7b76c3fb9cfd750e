/* job: parsing, validation and defaults of the training job document (see job.h).
 *
 * Design. job_parse() guards the text (size cap, nesting depth counted by a scan that skips
 * strings, so jansson's recursive parser never goes deeper than JOB_MAX_JSON_DEPTH), lets
 * jansson parse it (duplicate keys rejected), and hands the tree to job_from_json(). That one
 * fills a job_spec that starts with every default, section by section; each getter either
 * writes a valid value or records one {field, message} and leaves the default in place, so one
 * pass reports every problem. Members are looked up by name; a separate pass over each object's
 * keys reports the ones no section knows ("unknown field"). The sections run in order: the
 * dataset (its format decides which options apply) and the task come before the model, whose
 * section lives in job_model.c (layers and shapes); the getters are shared with it through
 * job_priv.h.
 *
 * Messages read "must be <what>, got <what was there>" wherever a value is wrong, so a person
 * sees both the rule and their input. Text copied from the input into a message or field is
 * cut at a UTF-8 character boundary, so every field and message stays valid UTF-8 (the API
 * builds JSON from them).
 *
 * Invariants: errs->count <= FIELD_ERRORS_MAX (when more are found the last slot says so);
 * a spec handed out has passed every check; job_to_json() of such a spec is accepted by
 * job_from_json() and yields an equal spec. Only an out-of-memory failure leaves no {field,
 * message} pair naming the cause in the input (it gets one on field "" saying so). */
#include "job/job.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>

#include "job/job_priv.h"
#include "util/err.h"
#include "util/json_depth.h"
#include "util/url.h"
#include "util/utf8.h"

#define JOB_NAME_MAX_CHARS  128
#define JOB_URL_MAX_BYTES   4096
#define JOB_LABEL_MAX_CHARS 1024
#define JOB_LABEL_INDEX_MAX 1000000 /* label_column index: -MAX .. MAX-1 */
#define JOB_SNIP_BYTES      40      /* input text quoted in a message */

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

void job_check_members(job_vctx *v, const json_t *obj, const char *path, const char *const *known)
{
    const char *key;
    json_t *val;
    /* Iteration does not modify the object; jansson's iterator API just is not const. */
    json_object_foreach ((json_t *)obj, key, val) {
        int found = 0;
        for (size_t i = 0; known[i]; i++) {
            if (strcmp(key, known[i]) == 0) {
                found = 1;
                break;
            }
        }
        if (!found) {
            job_path p;
            job_path_key(p, path, key);
            field_errors_add(v->errs, p, "unknown field");
        }
    }
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

/* ---- sections ---------------------------------------------------------------------------- */

static const job_enum job_tasks[] = {
    {"classification", JOB_TASK_CLASSIFICATION},
    {"regression", JOB_TASK_REGRESSION},
    {NULL, 0},
};

static const job_enum job_optimizers[] = {
    {"sgd", JOB_OPT_SGD},
    {"adam", JOB_OPT_ADAM},
    {NULL, 0},
};

static const job_enum job_devices[] = {
    {"any", JOB_DEVICE_ANY},
    {"gpu", JOB_DEVICE_GPU},
    {"cpu", JOB_DEVICE_CPU},
    {NULL, 0},
};

static const job_enum job_formats[] = {
    {"csv", JOB_FORMAT_CSV},
    {"cifar10", JOB_FORMAT_CIFAR10},
    {"mnist", JOB_FORMAT_MNIST},
    {"npy", JOB_FORMAT_NPY},
    {"npz", JOB_FORMAT_NPZ},
    {"images", JOB_FORMAT_IMAGES},
    {NULL, 0},
};

static const job_enum job_scales[] = {
    {"unit", JOB_SCALE_UNIT},
    {"standardize", JOB_SCALE_STANDARDIZE},
    {NULL, 0},
};

/* Decodes one UTF-8 character at s (valid UTF-8, as jansson guarantees); returns its length. */
static size_t job_utf8_next(const unsigned char *s, unsigned *cp)
{
    if (s[0] < 0x80) {
        *cp = s[0];
        return 1;
    }
    if (s[0] < 0xE0) {
        *cp = ((s[0] & 0x1Fu) << 6) | (s[1] & 0x3Fu);
        return 2;
    }
    if (s[0] < 0xF0) {
        *cp = ((s[0] & 0x0Fu) << 12) | ((s[1] & 0x3Fu) << 6) | (s[2] & 0x3Fu);
        return 3;
    }
    *cp = ((s[0] & 0x07u) << 18) | ((s[1] & 0x3Fu) << 12) | ((s[2] & 0x3Fu) << 6) | (s[3] & 0x3Fu);
    return 4;
}

/* Which of a field and its alias (seed 002's names) the document gives: key, or alias when
 * only it is there. Both given is an error on the alias. */
static const char *job_alias(job_vctx *v, const json_t *doc, const char *key, const char *alias)
{
    if (!json_object_get(doc, alias))
        return key;
    if (json_object_get(doc, key)) {
        field_errors_add(v->errs, alias, "give %s or %s, not both", key, alias);
        return NULL;
    }
    return alias;
}

static void job_v_name(job_vctx *v, const json_t *doc, job_spec *s)
{
    const char *name = NULL;
    const char *key = job_alias(v, doc, "name", "model_name");
    if (!key || job_get_string(v, doc, key, "", &name) != 1)
        return;
    size_t chars = 0;
    int control = 0;
    const unsigned char *p = (const unsigned char *)name;
    while (*p) {
        unsigned cp;
        p += job_utf8_next(p, &cp);
        chars++;
        if (cp < 0x20 || (cp >= 0x7F && cp <= 0x9F))
            control = 1;
    }
    if (chars < 1 || chars > JOB_NAME_MAX_CHARS) {
        field_errors_add(v->errs, key, "must be 1 to %d characters long, got %zu",
                         JOB_NAME_MAX_CHARS, chars);
        return;
    }
    if (control) {
        field_errors_add(v->errs, key, "must not contain control characters");
        return;
    }
    char *copy = job_strdup(v, name);
    if (!copy)
        return;
    free(s->name);
    s->name = copy;
}

/* s3://bucket/key: the bucket 3 to 63 of [a-z0-9.-], the key not empty; neither userinfo nor
 * '?' or '#' (the fetch addresses the key path-style, and the credentials come from the
 * worker). 0, or -1 with an error on field. */
static int job_s3_check(job_vctx *v, const char *field, const char *url)
{
    const char *bucket = url + 5, *slash = strchr(bucket, '/');
    size_t blen = slash ? (size_t)(slash - bucket) : strlen(bucket);
    if (memchr(bucket, '@', blen)) {
        field_errors_add(v->errs, field,
                         "must not carry credentials in an s3:// URL: the worker's AWS_* "
                         "variables give them");
        return -1;
    }
    if (blen < 3 || blen > 63 || strspn(bucket, "abcdefghijklmnopqrstuvwxyz0123456789.-") < blen) {
        field_errors_add(v->errs, field,
                         "must name an S3 bucket of 3 to 63 lower-case letters, digits, '.' or "
                         "'-': s3://bucket/key");
        return -1;
    }
    if (!slash || !slash[1]) {
        field_errors_add(v->errs, field, "must name a key after the bucket: s3://bucket/key");
        return -1;
    }
    if (strpbrk(slash, "?#")) {
        field_errors_add(v->errs, field,
                         "must not hold '?' or '#' in an s3:// key (percent-encode them)");
        return -1;
    }
    return 0;
}

int job_url_check(job_vctx *v, const char *field, const char *url, int credentials_ok, char **out)
{
    static const char *const schemes[] = {"http://", "https://", "file://", "s3://"};
    const char *what = "a URL starting with http://, https://, file:// or s3://";
    size_t len = strlen(url);
    if (len > JOB_URL_MAX_BYTES) {
        field_errors_add(v->errs, field, "must be at most %d bytes long, got %zu",
                         JOB_URL_MAX_BYTES, len);
        return -1;
    }
    /* Schemes are matched exactly (lower case), so later checks on the prefix, such as the
     * file:// root, cannot be sidestepped by "FILE://". */
    size_t scheme_len = 0;
    for (size_t i = 0; i < sizeof schemes / sizeof schemes[0]; i++) {
        if (strncmp(url, schemes[i], strlen(schemes[i])) == 0)
            scheme_len = strlen(schemes[i]);
    }
    if (scheme_len == 0) { /* the message quotes the URL, without its credentials */
        char *shown = url_redact(url);
        json_t *got = shown ? json_string(shown) : NULL;
        if (got)
            job_bad(v, field, what, got);
        else
            field_errors_add(v->errs, field, "must be %s", what);
        json_decref(got);
        free(shown);
        return -1;
    }
    if (len == scheme_len) {
        field_errors_add(v->errs, field, "has nothing after the scheme");
        return -1;
    }
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)url[i];
        if (c <= 0x20 || c >= 0x7F) {
            field_errors_add(v->errs, field,
                             "must not contain spaces, control or non-ASCII characters "
                             "(percent-encode them, e.g. %%20 for a space)");
            return -1;
        }
    }
    if (scheme_len == 5) { /* s3:// */
        if (job_s3_check(v, field, url) < 0)
            return -1;
    } else {
        /* The URL must parse as libcurl will read it when it is fetched, so a malformed one is
         * refused now, naming the field, rather than failing the job later. */
        CURLU *u = curl_url();
        CURLUcode uc = u ? curl_url_set(u, CURLUPART_URL, url, 0) : CURLUE_OUT_OF_MEMORY;
        curl_url_cleanup(u);
        if (uc != CURLUE_OK) {
            field_errors_add(v->errs, field, "is not a valid URL: %s", curl_url_strerror(uc));
            return -1;
        }
        size_t at, ui_len;
        int has_ui = url_userinfo_span(url, &at, &ui_len);
        if (has_ui && !credentials_ok) {
            field_errors_add(v->errs, field,
                             "must not carry credentials (user:password@): documents show it "
                             "as given");
            return -1;
        }
        if (has_ui && ui_len == strlen(URL_REDACTED) &&
            memcmp(url + at, URL_REDACTED, ui_len) == 0) {
            field_errors_add(v->errs, field,
                             "has its credentials redacted (" URL_REDACTED "@), as jobs are "
                             "shown: write the real user:password@ again");
            return -1;
        }
    }
    char *copy = job_strdup(v, url);
    if (!copy)
        return -1;
    *out = copy;
    return 0;
}

/* dataset_url (or its alias dataset_location): required for a built-in job; a script job may
 * give none (or null, as job_to_json writes it). */
static void job_v_url(job_vctx *v, const json_t *doc, job_spec *s, int required)
{
    const char *url = NULL;
    const char *key = job_alias(v, doc, "dataset_url", "dataset_location");
    if (!key)
        return;
    const json_t *val = json_object_get(doc, key);
    if (!required && json_is_null(val))
        return;
    int r = job_get_string(v, doc, key, "", &url);
    if (r == 0 && required)
        field_errors_add(v->errs, key,
                         "is required: an http://, https://, file:// or s3:// URL of the dataset");
    if (r != 1)
        return;
    job_url_check(v, key, url, 1, &s->dataset_url);
}

static void job_v_label(job_vctx *v, const json_t *ds, job_spec *s)
{
    const json_t *val = json_object_get(ds, "label_column");
    if (!val)
        return;
    if (json_is_integer(val)) {
        long long i = 0;
        if (job_get_int(v, ds, "label_column", "dataset", -JOB_LABEL_INDEX_MAX,
                        JOB_LABEL_INDEX_MAX - 1, &i) == 1)
            s->label_index = (int)i;
        return;
    }
    if (!json_is_string(val)) {
        job_bad(v, "dataset.label_column",
                "a column name (a string) or a column index (an integer, negative counts from "
                "the end)",
                val);
        return;
    }
    const char *name = json_string_value(val);
    size_t chars = 0;
    for (const unsigned char *p = (const unsigned char *)name; *p; chars++) {
        unsigned cp;
        p += job_utf8_next(p, &cp);
    }
    if (chars < 1 || chars > JOB_LABEL_MAX_CHARS) {
        field_errors_add(v->errs, "dataset.label_column",
                         "must be a column name of 1 to %d characters, got %zu",
                         JOB_LABEL_MAX_CHARS, chars);
        return;
    }
    char *copy = job_strdup(v, name);
    if (copy)
        s->label_name = copy;
}

void job_v_sha256(job_vctx *v, const json_t *ds, job_spec *s)
{
    const json_t *val = json_object_get(ds, "sha256");
    if (!val || json_is_null(val)) /* null: no check, as job_to_json() writes it */
        return;
    const char *what = "64 hexadecimal digits (the SHA-256 of the file as downloaded) or null";
    if (!json_is_string(val)) {
        job_bad(v, "dataset.sha256", what, val);
        return;
    }
    const char *hex = json_string_value(val);
    size_t len = strlen(hex);
    if (len != 64) {
        field_errors_add(v->errs, "dataset.sha256", "must be %s, got %zu characters", what, len);
        return;
    }
    char lower[65];
    for (size_t i = 0; i < 64; i++) {
        unsigned char c = (unsigned char)hex[i];
        if (!isxdigit(c)) {
            field_errors_add(v->errs, "dataset.sha256",
                             "must be %s, got a non-hexadecimal character at position %zu", what,
                             i + 1);
            return;
        }
        lower[i] = (char)tolower(c);
    }
    lower[64] = '\0';
    char *copy = job_strdup(v, lower);
    if (copy)
        s->sha256 = copy;
}

/* Reports dataset.key, when present, as not applying to this job's format. */
static void job_not_for_format(job_vctx *v, const json_t *ds, const char *key, const job_spec *s)
{
    if (!json_object_get(ds, key))
        return;
    job_path p;
    job_path_key(p, "dataset", key);
    if (s->format == JOB_FORMAT_CSV)
        field_errors_add(v->errs, p,
                         "applies only to image formats (\"cifar10\", \"mnist\", \"npy\", "
                         "\"npz\", \"images\"); this job's dataset.format is \"csv\"");
    else
        field_errors_add(v->errs, p,
                         "applies only to dataset.format \"csv\"; this job's is \"%s\"%s",
                         job_format_name(s->format),
                         strcmp(key, "standardize") == 0 ? " (images use dataset.scale)" : "");
}

/* CSV's options: label_column, header, standardize. */
static void job_v_csv_options(job_vctx *v, const json_t *ds, job_spec *s)
{
    job_v_label(v, ds, s);
    const json_t *header = json_object_get(ds, "header");
    if (header) {
        if (json_is_boolean(header))
            s->header = json_is_true(header);
        else if (json_is_string(header) && strcmp(json_string_value(header), "auto") == 0)
            s->header = -1;
        else
            job_bad(v, "dataset.header", "true, false or \"auto\"", header);
    }
    job_get_bool(v, ds, "standardize", "dataset", &s->standardize);
}

/* The image formats' options: resize, scale, augment. */
static void job_v_image_options(job_vctx *v, const json_t *ds, job_spec *s)
{
    static const char *const augment_known[] = {"flip", "crop_padding", NULL};
    const json_t *resize = json_object_get(ds, "resize");
    int hw[2];
    if (resize && !json_is_null(resize) && /* null: no resize, as job_to_json() writes it */
        job_get_ints(v, ds, "resize", "dataset", 2, 1, JOB_MAX_IMAGE_SIDE, 0, "height, width",
                     hw) == 1) {
        s->resize_h = hw[0];
        s->resize_w = hw[1];
    }
    job_get_enum(v, ds, "scale", "dataset", job_scales, "\"unit\" or \"standardize\"", &s->scale);
    const json_t *aug = NULL;
    if (job_get_object(v, ds, "augment", "dataset", &aug) != 1)
        return;
    job_check_members(v, aug, "dataset.augment", augment_known);
    job_get_bool(v, aug, "flip", "dataset.augment", &s->augment_flip);
    job_get_int32(v, aug, "crop_padding", "dataset.augment", 0, JOB_MAX_CROP, &s->augment_crop);
}

static void job_v_dataset(job_vctx *v, const json_t *doc, job_spec *s)
{
    static const char *const known[] = {"format", "label_column", "header",
                                        "sha256", "standardize",  "resize",
                                        "scale",  "augment",      NULL};
    static const char *const csv_only[] = {"label_column", "header", "standardize", NULL};
    static const char *const image_only[] = {"resize", "scale", "augment", NULL};
    const json_t *ds = NULL;
    if (job_get_object(v, doc, "dataset", "", &ds) != 1)
        return;
    job_check_members(v, ds, "dataset", known);
    int r = job_get_enum(v, ds, "format", "dataset", job_formats,
                         "one of \"csv\", \"cifar10\", \"mnist\", \"npy\", \"npz\", \"images\"",
                         &s->format);
    job_v_sha256(v, ds, s);
    if (r < 0) {
        /* The format is in error already: check each option's own value, not whether it
         * applies, and leave the checks that hang on the format (input_shape) alone. */
        v->format_bad = 1;
        job_v_csv_options(v, ds, s);
        job_v_image_options(v, ds, s);
        return;
    }
    const char *const *refused = s->format == JOB_FORMAT_CSV ? image_only : csv_only;
    for (size_t i = 0; refused[i]; i++)
        job_not_for_format(v, ds, refused[i], s);
    if (s->format == JOB_FORMAT_CSV)
        job_v_csv_options(v, ds, s);
    else
        job_v_image_options(v, ds, s);
}

/* Reports key as not applying to the chosen optimizer. */
static void job_not_for(job_vctx *v, const json_t *hp, const char *key, const char *opt,
                        const char *other)
{
    if (!json_object_get(hp, key))
        return;
    job_path p;
    job_path_key(p, "hyperparameters", key);
    field_errors_add(v->errs, p, "applies only to optimizer \"%s\"; this job uses \"%s\"", other,
                     opt);
}

static void job_v_hyper(job_vctx *v, const json_t *doc, job_spec *s)
{
    static const char *const known[] = {
        "epochs", "batch_size", "learning_rate",    "optimizer", "momentum", "beta1",
        "beta2",  "epsilon",    "validation_split", "shuffle",   "seed",     NULL};
    const char *hpath = "hyperparameters";
    const json_t *hp = NULL;
    int r = job_get_object(v, doc, hpath, "", &hp);
    if (r == 0)
        field_errors_add(
            v->errs, hpath,
            "is required: an object such as {\"epochs\": 10} ({} takes every default)");
    if (r != 1)
        return;
    job_check_members(v, hp, hpath, known);
    job_get_int32(v, hp, "epochs", hpath, 1, JOB_MAX_EPOCHS, &s->epochs);
    job_get_int32(v, hp, "batch_size", hpath, 1, JOB_MAX_BATCH, &s->batch_size);
    int opt_r = job_get_enum(v, hp, "optimizer", hpath, job_optimizers, "\"sgd\" or \"adam\"",
                             &s->optimizer);
    s->learning_rate = s->optimizer == JOB_OPT_SGD ? 0.01 : 0.001;
    job_get_number(v, hp, "learning_rate", hpath, (job_range){0, 10, 1, 0}, &s->learning_rate);
    if (opt_r < 0) {
        /* The optimizer is in error already: check each option's own range, not whether it
         * applies. */
        job_get_number(v, hp, "momentum", hpath, (job_range){0, 1, 0, 1}, &s->momentum);
        job_get_number(v, hp, "beta1", hpath, (job_range){0, 1, 0, 1}, &s->beta1);
        job_get_number(v, hp, "beta2", hpath, (job_range){0, 1, 0, 1}, &s->beta2);
        job_get_number(v, hp, "epsilon", hpath, (job_range){0, 1, 1, 0}, &s->epsilon);
    } else if (s->optimizer == JOB_OPT_SGD) {
        job_get_number(v, hp, "momentum", hpath, (job_range){0, 1, 0, 1}, &s->momentum);
        job_not_for(v, hp, "beta1", "sgd", "adam");
        job_not_for(v, hp, "beta2", "sgd", "adam");
        job_not_for(v, hp, "epsilon", "sgd", "adam");
    } else {
        job_not_for(v, hp, "momentum", "adam", "sgd");
        job_get_number(v, hp, "beta1", hpath, (job_range){0, 1, 0, 1}, &s->beta1);
        job_get_number(v, hp, "beta2", hpath, (job_range){0, 1, 0, 1}, &s->beta2);
        job_get_number(v, hp, "epsilon", hpath, (job_range){0, 1, 1, 0}, &s->epsilon);
    }
    job_get_number(v, hp, "validation_split", hpath, (job_range){0, 1, 0, 1}, &s->validation_split);
    job_get_bool(v, hp, "shuffle", hpath, &s->shuffle);
    long long seed = 0;
    if (job_get_int(v, hp, "seed", hpath, 0, LLONG_MAX, &seed) == 1)
        s->seed = (uint64_t)seed;
}

static void job_v_resources(job_vctx *v, const json_t *doc, job_spec *s)
{
    static const char *const known[] = {"device", NULL};
    const json_t *res = NULL;
    if (job_get_object(v, doc, "resources", "", &res) != 1)
        return;
    job_check_members(v, res, "resources", known);
    job_get_enum(v, res, "device", "resources", job_devices, "\"gpu\", \"cpu\" or \"any\"",
                 &s->device);
}

/* "distribution": {"replicas": N, "nodes": M}: a data-parallel job of N ranks, each with its
 * share of every batch, for built-in jobs only. Each rank needs at least one row of a batch. */
static void job_v_distribution(job_vctx *v, const json_t *doc, job_spec *s)
{
    static const char *const known[] = {"replicas", "nodes", NULL};
    const json_t *dist = NULL;
    if (job_get_object(v, doc, "distribution", "", &dist) != 1)
        return;
    if (s->script) {
        field_errors_add(v->errs, "distribution",
                         "applies only to built-in jobs: a training_script runs as one process");
        return;
    }
    job_check_members(v, dist, "distribution", known);
    job_get_int32(v, dist, "replicas", "distribution", 1, JOB_MAX_REPLICAS, &s->replicas);
    if (json_object_get(dist, "nodes") &&
        job_get_int32(v, dist, "nodes", "distribution", 1, JOB_MAX_REPLICAS, &s->nodes) == 1 &&
        s->nodes > s->replicas)
        field_errors_add(v->errs, "distribution.nodes",
                         "must not exceed distribution.replicas: every node runs at least one");
    if (s->replicas > s->batch_size)
        field_errors_add(v->errs, "distribution.replicas",
                         "must not exceed hyperparameters.batch_size: each replica takes a "
                         "share of every batch");
}

static void job_v_task(job_vctx *v, const json_t *doc, job_spec *s)
{
    job_get_enum(v, doc, "task", "", job_tasks, "\"classification\" or \"regression\"", &s->task);
    if (s->task == JOB_TASK_REGRESSION) {
        if (json_object_get(doc, "binary"))
            field_errors_add(v->errs, "binary",
                             "applies only to \"task\": \"classification\"; remove it for "
                             "regression");
        return;
    }
    job_get_bool(v, doc, "binary", "", &s->binary);
}

static void job_defaults(job_spec *s)
{
    s->label_name = NULL;
    s->label_index = -1;
    s->header = -1;
    s->sha256 = NULL;
    s->standardize = 1;
    s->format = JOB_FORMAT_CSV;
    s->resize_h = s->resize_w = 0;
    s->scale = JOB_SCALE_UNIT;
    s->augment_flip = 0;
    s->augment_crop = 0;
    s->in_h = s->in_w = s->in_c = 0;
    s->output_given = 0;
    s->output_units = 0;
    s->task = JOB_TASK_CLASSIFICATION;
    s->binary = 0;
    s->n_layers = 0;
    s->epochs = 10;
    s->batch_size = 32;
    s->optimizer = JOB_OPT_ADAM;
    s->learning_rate = 0.001;
    s->momentum = 0;
    s->beta1 = 0.9;
    s->beta2 = 0.999;
    s->epsilon = 1e-7;
    s->validation_split = 0;
    s->shuffle = 1;
    s->seed = 0;
    s->device = JOB_DEVICE_ANY;
    s->max_attempts = 3;
    s->max_runtime_seconds = 86400;
    s->replicas = 1;
    s->priority = 0;
    s->delete_checkpoint = 1;
}

/* ---- public ------------------------------------------------------------------------------ */

int job_from_json(const json_t *doc, job_spec **out, field_errors *errs)
{
    static const char *const known[] = {"name",
                                        "model_name",
                                        "dataset_url",
                                        "dataset_location",
                                        "dataset",
                                        "task",
                                        "binary",
                                        "model",
                                        "hyperparameters",
                                        "resources",
                                        "distribution",
                                        "max_attempts",
                                        "max_runtime_seconds",
                                        "priority",
                                        "delete_checkpoint",
                                        "training_script",
                                        "code",
                                        "code_url",
                                        "code_sha256",
                                        "early_stopping",
                                        "init_from",
                                        "tensorboard",
                                        "notify",
                                        "keep",
                                        NULL};
    field_errors scratch;
    if (!errs)
        errs = &scratch;
    errs->count = 0;
    job_vctx v = {.errs = errs, .rc = 0, .format_bad = 0};
    int rc = 0;
    job_spec *s = NULL;
    if (!doc) {
        field_errors_add(errs, "", "no job document was given");
        rc = -EINVAL;
        goto out;
    }
    if (!json_is_object(doc)) {
        job_bad(&v, "", "a JSON object (the job)", doc);
        rc = -EINVAL;
        goto out;
    }
    s = calloc(1, sizeof *s);
    if (!s) {
        rc = -ENOMEM;
        goto out;
    }
    job_defaults(s);
    s->name = job_strdup(&v, "job");
    job_check_members(&v, doc, "", known);
    job_v_name(&v, doc, s);
    if (json_object_get(doc, "training_script")) {
        job_v_url(&v, doc, s, 0);
        job_v_script(&v, doc, s); /* job_script.c: the code, the dataset's sha256, the
                                     hyperparameters as given */
    } else {
        job_v_not_script(&v, doc);
        job_v_url(&v, doc, s, 1);
        job_v_dataset(&v, doc, s);
        job_v_task(&v, doc, s);
        job_v_model(&v, doc, s);
        job_v_hyper(&v, doc, s);
    }
    job_v_resources(&v, doc, s);
    job_v_distribution(&v, doc, s);
    job_get_int32(&v, doc, "max_attempts", "", 1, 100, &s->max_attempts);
    job_get_int32(&v, doc, "max_runtime_seconds", "", 1, 2592000, &s->max_runtime_seconds);
    job_get_int32(&v, doc, "priority", "", -100, 100, &s->priority);
    job_get_bool(&v, doc, "delete_checkpoint", "", &s->delete_checkpoint);
    job_v_experiment(&v, doc, s); /* job_experiment.c: after the rest, which monitor reads */
    if (v.rc < 0) {
        rc = v.rc;
        goto out;
    }
    if (errs->count > 0) {
        rc = -EINVAL;
        goto out;
    }
    *out = s;
    s = NULL;
out:
    if (rc == -ENOMEM)
        field_errors_add(errs, "", "out of memory while checking the job");
    job_free(s);
    return rc;
}

int job_parse(const char *text, size_t len, job_spec **out, field_errors *errs)
{
    field_errors scratch;
    if (!errs)
        errs = &scratch;
    errs->count = 0;
    int rc = 0;
    json_t *doc = NULL;
    if (!text) {
        field_errors_add(errs, "", "no job document was given");
        rc = -EINVAL;
        goto out;
    }
    if (len > JOB_MAX_DOC_BYTES) {
        field_errors_add(errs, "", "the job document is %zu bytes; the limit is %d", len,
                         JOB_MAX_DOC_BYTES);
        rc = -EINVAL;
        goto out;
    }
    if (json_text_depth(text, len, JOB_MAX_JSON_DEPTH) > JOB_MAX_JSON_DEPTH) {
        field_errors_add(errs, "", "the JSON is nested more than %d levels deep",
                         JOB_MAX_JSON_DEPTH);
        rc = -EINVAL;
        goto out;
    }
    json_error_t jerr;
    doc = json_loadb(text, len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &jerr);
    if (!doc) {
        /* jansson 2.14 sets no error at all when some of its allocations fail (json_object()
         * or json_array() while parsing): the position stays -1 and the text empty. A real
         * syntax error always has a position. */
        if (json_error_code(&jerr) == json_error_out_of_memory || jerr.line < 0) {
            field_errors_add(errs, "", "out of memory while reading the job");
            rc = -ENOMEM;
            goto out;
        }
        field_errors_add(errs, "", "invalid JSON at line %d, column %d: %s", jerr.line, jerr.column,
                         jerr.text);
        rc = -EINVAL;
        goto out;
    }
    rc = job_from_json(doc, out, errs);
out:
    json_decref(doc);
    return rc;
}

const char *job_format_name(int format)
{
    return job_enum_name(job_formats, format);
}

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

/* The resolved "dataset": the format's own options only, as only those parse back. */
static json_t *job_dataset_to_json(const job_spec *s, int *bad)
{
    json_t *ds = json_object();
    job_put(ds, "format", job_str(job_format_name(s->format), bad), bad);
    if (s->format == JOB_FORMAT_CSV) {
        if (s->label_name)
            job_put(ds, "label_column", json_string(s->label_name), bad);
        else
            job_put(ds, "label_column", json_integer(s->label_index), bad);
        if (s->header < 0)
            job_put(ds, "header", json_string("auto"), bad);
        else
            job_put(ds, "header", json_boolean(s->header), bad);
    }
    job_put(ds, "sha256", s->sha256 ? json_string(s->sha256) : json_null(), bad);
    if (s->format == JOB_FORMAT_CSV) {
        job_put(ds, "standardize", json_boolean(s->standardize), bad);
        return ds;
    }
    job_put(ds, "resize", s->resize_h ? job_pair(s->resize_h, s->resize_w, bad) : json_null(), bad);
    job_put(ds, "scale", job_str(job_enum_name(job_scales, s->scale), bad), bad);
    json_t *aug = json_object();
    job_put(aug, "flip", json_boolean(s->augment_flip), bad);
    job_put(aug, "crop_padding", json_integer(s->augment_crop), bad);
    job_put(ds, "augment", aug, bad);
    return ds;
}

json_t *job_to_json(const job_spec *s)
{
    if (!s)
        return NULL;
    if (job_is_script(s))
        return job_script_to_json(s);
    int bad = 0;
    json_t *doc = json_object();

    job_put(doc, "name", job_str(s->name, &bad), &bad);
    /* The credentials in the URL stay in the spec, for the fetch; every document shows
     * them as *** (what reaches job.json, the model's metadata, checkpoints, the API). */
    char *shown = s->dataset_url ? url_redact(s->dataset_url) : NULL;
    job_put(doc, "dataset_url", job_str(shown, &bad), &bad);
    free(shown);

    job_put(doc, "dataset", job_dataset_to_json(s, &bad), &bad);

    job_put(doc, "task", job_str(job_enum_name(job_tasks, s->task), &bad), &bad);
    if (s->task == JOB_TASK_CLASSIFICATION)
        job_put(doc, "binary", json_boolean(s->binary), &bad);

    job_put(doc, "model", job_model_to_json(s, &bad), &bad);

    json_t *hp = json_object();
    job_put(hp, "epochs", json_integer(s->epochs), &bad);
    job_put(hp, "batch_size", json_integer(s->batch_size), &bad);
    job_put(hp, "learning_rate", json_real(s->learning_rate), &bad);
    job_put(hp, "optimizer", job_str(job_enum_name(job_optimizers, s->optimizer), &bad), &bad);
    if (s->optimizer == JOB_OPT_SGD) {
        job_put(hp, "momentum", json_real(s->momentum), &bad);
    } else {
        job_put(hp, "beta1", json_real(s->beta1), &bad);
        job_put(hp, "beta2", json_real(s->beta2), &bad);
        job_put(hp, "epsilon", json_real(s->epsilon), &bad);
    }
    job_put(hp, "validation_split", json_real(s->validation_split), &bad);
    job_put(hp, "shuffle", json_boolean(s->shuffle), &bad);
    /* Parsed seeds are at most INT64_MAX (jansson's integer range). */
    job_put(hp, "seed", json_integer((json_int_t)s->seed), &bad);
    job_put(doc, "hyperparameters", hp, &bad);
    return job_doc_finish(doc, s, bad);
}

json_t *job_doc_finish(json_t *doc, const job_spec *s, int bad)
{
    json_t *res = json_object();
    job_put(res, "device", job_str(job_enum_name(job_devices, s->device), &bad), &bad);
    job_put(doc, "resources", res, &bad);
    if (s->replicas > 1 || s->nodes > 0) { /* absent for one replica: documents stay as they were */
        json_t *dist = json_pack("{s:i}", "replicas", s->replicas);
        if (dist && s->nodes > 0)
            job_put(dist, "nodes", json_integer(s->nodes), &bad);
        job_put(doc, "distribution", dist, &bad);
    }
    job_put(doc, "max_attempts", json_integer(s->max_attempts), &bad);
    job_put(doc, "max_runtime_seconds", json_integer(s->max_runtime_seconds), &bad);
    job_put(doc, "priority", json_integer(s->priority), &bad);
    job_put(doc, "delete_checkpoint", json_boolean(s->delete_checkpoint), &bad);
    job_experiment_to_json(doc, s, &bad);
    if (bad) {
        json_decref(doc);
        return NULL;
    }
    return doc;
}

void job_free(job_spec *spec)
{
    if (!spec)
        return;
    job_experiment_free(spec);
    free(spec->script);
    free(spec->code);
    free(spec->code_url);
    free(spec->code_sha256);
    free(spec->hyperparameters_json);
    free(spec->name);
    free(spec->dataset_url);
    free(spec->label_name);
    free(spec->sha256);
    free(spec);
}
