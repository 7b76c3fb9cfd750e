/* job_script: the sections of a script job's document (see job.h, "Script jobs").
 *
 * A script job keeps the scheduling fields of a built-in one (resources, max_attempts,
 * max_runtime_seconds, priority, delete_checkpoint: job.c reads them for both) and replaces the
 * rest: training_script, the code (code, or code_url with an optional code_sha256), a dataset
 * that may only be checked (dataset.sha256) and hyperparameters that trainyard does not read
 * beyond their being an object; they reach the script as JSON text, kept in the spec as
 * compact text (util/json_out) so the resolved document carries them exactly.
 *
 * Invariant: job_script_to_json() of a spec job_v_script() filled parses back to the same spec
 * (dataset_url and code_sha256 are written as null when absent, which the parse accepts). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "job/job_priv.h"
#include "util/json_out.h"
#include "util/url.h"

#define JOB_SCRIPT_MAX_BYTES 255
#define JOB_CODE_PREFIX      "sha256:"

/* training_script: 1..255 bytes of printable ASCII, no backslash, relative (no leading '/') and
 * with no ".." component, so it names a file inside the unpacked code. */
static void job_v_training_script(job_vctx *v, const json_t *doc, job_spec *s)
{
    const char *path = NULL;
    if (job_get_string(v, doc, "training_script", "", &path) != 1)
        return;
    size_t n = strlen(path);
    const char *why = NULL;
    if (n < 1 || n > JOB_SCRIPT_MAX_BYTES)
        why = "must be 1 to 255 bytes long: the script's path inside the code, such as "
              "\"train.py\"";
    for (size_t i = 0; !why && i < n; i++) {
        unsigned char c = (unsigned char)path[i];
        if (c < 0x20 || c > 0x7E || c == '\\')
            why = "must be printable ASCII without backslashes: the script's path inside the "
                  "code, with '/' between folders";
    }
    if (!why && path[0] == '/')
        why = "must be relative to the code's root (no leading '/'), such as \"train.py\"";
    for (const char *p = path; !why && *p;) {
        size_t len = strcspn(p, "/");
        if (len == 2 && p[0] == '.' && p[1] == '.')
            why = "must stay inside the code: no \"..\" component";
        p += len;
        if (*p == '/')
            p++;
    }
    if (why) {
        field_errors_add(v->errs, "training_script", "%s", why);
        return;
    }
    s->script = job_strdup(v, path);
}

/* 64 hexadecimal digits into a new lower-case copy; NULL (with the reason in why) otherwise. */
static char *job_hex64(job_vctx *v, const char *hex, const char **why)
{
    if (strlen(hex) != 64 || strspn(hex, "0123456789abcdefABCDEF") != 64) {
        *why = "must be 64 hexadecimal digits (a SHA-256)";
        return NULL;
    }
    char *copy = job_strdup(v, hex);
    for (size_t i = 0; copy && i < 64; i++)
        copy[i] = (char)(copy[i] >= 'A' && copy[i] <= 'F' ? copy[i] - 'A' + 'a' : copy[i]);
    return copy;
}

/* code, or code_url with code_sha256: exactly one of code and code_url. */
static void job_v_code(job_vctx *v, const json_t *doc, job_spec *s)
{
    const json_t *code = json_object_get(doc, "code");
    const json_t *url = json_object_get(doc, "code_url");
    const json_t *sum = json_object_get(doc, "code_sha256");
    const char *text = NULL, *why = NULL;
    if (!code && !url) {
        field_errors_add(v->errs, "code",
                         "a script job needs its code: upload a .tar.gz of the folder with POST "
                         "/code and give its address as code, or give code_url");
        return;
    }
    if (code && url) {
        field_errors_add(v->errs, "code_url", "give code or code_url, not both");
        return;
    }
    if (code && sum)
        field_errors_add(v->errs, "code_sha256",
                         "goes with code_url only: code is already a SHA-256 address");
    if (code && job_get_string(v, doc, "code", "", &text) == 1) {
        size_t plen = strlen(JOB_CODE_PREFIX);
        char *hex = strncmp(text, JOB_CODE_PREFIX, plen) == 0 ? job_hex64(v, text + plen, &why)
                                                              : (why = "", NULL);
        if (hex && strcmp(hex, text + plen) == 0) {
            s->code = job_strdup(v, text);
        } else if (!v->rc) {
            field_errors_add(v->errs, "code",
                             "must be \"sha256:\" and 64 lower-case hexadecimal digits, the "
                             "address POST /code answered");
        }
        free(hex);
    }
    if (url && job_get_string(v, doc, "code_url", "", &text) == 1)
        job_url_check(v, "code_url", text, 0, &s->code_url);
    if (url && sum && !json_is_null(sum)) {
        if (!json_is_string(sum)) {
            job_bad(v, "code_sha256", "64 hexadecimal digits or null", sum);
        } else {
            s->code_sha256 = job_hex64(v, json_string_value(sum), &why);
            if (!s->code_sha256 && !v->rc)
                field_errors_add(v->errs, "code_sha256", "%s", why);
        }
    }
}

void job_v_script(job_vctx *v, const json_t *doc, job_spec *s)
{
    static const char *const builtin_only[] = {"model", "task", "binary", NULL};
    static const char *const dataset_known[] = {"sha256", NULL};
    for (size_t i = 0; builtin_only[i]; i++) {
        if (json_object_get(doc, builtin_only[i]))
            field_errors_add(v->errs, builtin_only[i],
                             "is for built-in jobs; a script job builds its own model");
    }
    job_v_training_script(v, doc, s);
    job_v_code(v, doc, s);
    const json_t *ds = NULL;
    if (job_get_object(v, doc, "dataset", "", &ds) == 1) {
        const char *key;
        json_t *val;
        json_object_foreach ((json_t *)ds, key, val) {
            if (strcmp(key, dataset_known[0]) == 0)
                continue;
            job_path p;
            job_path_key(p, "dataset", key);
            field_errors_add(v->errs, p,
                             "is for built-in jobs; a script job's dataset may hold only sha256 "
                             "(the script reads the file itself)");
        }
        job_v_sha256(v, ds, s);
    }
    const json_t *hp = NULL;
    int r = job_get_object(v, doc, "hyperparameters", "", &hp);
    if (r < 0)
        return;
    char *text = r == 1 ? json_out_dumps(hp, JSON_COMPACT) : strdup("{}");
    if (!text)
        v->rc = -ENOMEM;
    s->hyperparameters_json = text;
}

void job_v_not_script(job_vctx *v, const json_t *doc)
{
    static const char *const keys[] = {"code", "code_url", "code_sha256", NULL};
    for (size_t i = 0; keys[i]; i++) {
        if (json_object_get(doc, keys[i]))
            field_errors_add(v->errs, keys[i],
                             "only with training_script: a built-in job needs no code");
    }
}

json_t *job_script_to_json(const job_spec *s)
{
    int bad = 0;
    json_t *doc = json_object();
    job_put(doc, "name", job_str(s->name, &bad), &bad);
    if (s->dataset_url) {
        char *shown = url_redact(s->dataset_url);
        job_put(doc, "dataset_url", job_str(shown, &bad), &bad);
        free(shown);
    } else {
        job_put(doc, "dataset_url", json_null(), &bad);
    }
    json_t *ds = json_object();
    job_put(ds, "sha256", s->sha256 ? json_string(s->sha256) : json_null(), &bad);
    job_put(doc, "dataset", ds, &bad);
    job_put(doc, "training_script", job_str(s->script, &bad), &bad);
    if (s->code) {
        job_put(doc, "code", json_string(s->code), &bad);
    } else {
        job_put(doc, "code_url", job_str(s->code_url, &bad), &bad);
        job_put(doc, "code_sha256", s->code_sha256 ? json_string(s->code_sha256) : json_null(),
                &bad);
    }
    json_t *hp = json_loads(s->hyperparameters_json ? s->hyperparameters_json : "{}", 0, NULL);
    job_put(doc, "hyperparameters", hp, &bad);
    return job_doc_finish(doc, s, bad);
}
