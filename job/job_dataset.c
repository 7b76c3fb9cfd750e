/* job_dataset: where a built-in job's data comes from and how it is read — dataset_url (or
 * dataset_location) and the "dataset" section — and its resolved form.
 *
 * Design. The format is read first, since it decides which options apply: label_column,
 * header and standardize for "csv"; resize, scale and augment for the image formats. An option
 * given for the other kind of format is reported as not applying. When the format itself is in
 * error, each option's own value is still checked (so one pass reports every problem) and
 * v->format_bad tells the model section to leave the checks that hang on the format alone.
 *
 * URLs (job_url_check, shared with job_script.c's code_url): http, https, file or s3, at most
 * JOB_URL_MAX_BYTES, parsed as libcurl will read them when fetched; credentials shown redacted
 * are refused, so a document read back from the API cannot silently lose them.
 *
 * Invariant: job_dataset_to_json() writes only the options of the spec's format, as only those
 * parse back. */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>

#include "job/job_priv.h"
#include "util/url.h"
#include "util/utf8.h"

#define JOB_URL_MAX_BYTES   4096
#define JOB_LABEL_MAX_CHARS 1024
#define JOB_LABEL_INDEX_MAX 1000000 /* label_column index: -MAX .. MAX-1 */

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
void job_v_url(job_vctx *v, const json_t *doc, job_spec *s, int required)
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
    size_t chars = utf8_chars(name); /* valid UTF-8, as jansson guarantees */
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
    field_errors_unknown(v->errs, aug, "dataset.augment", augment_known);
    job_get_bool(v, aug, "flip", "dataset.augment", &s->augment_flip);
    job_get_int32(v, aug, "crop_padding", "dataset.augment", 0, JOB_MAX_CROP, &s->augment_crop);
}

void job_v_dataset(job_vctx *v, const json_t *doc, job_spec *s)
{
    static const char *const known[] = {"format", "label_column", "header",
                                        "sha256", "standardize",  "resize",
                                        "scale",  "augment",      NULL};
    static const char *const csv_only[] = {"label_column", "header", "standardize", NULL};
    static const char *const image_only[] = {"resize", "scale", "augment", NULL};
    const json_t *ds = NULL;
    if (job_get_object(v, doc, "dataset", "", &ds) != 1)
        return;
    field_errors_unknown(v->errs, ds, "dataset", known);
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

const char *job_format_name(int format)
{
    return job_enum_name(job_formats, format);
}

/* The resolved "dataset": the format's own options only, as only those parse back. */
json_t *job_dataset_to_json(const job_spec *s, int *bad)
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
