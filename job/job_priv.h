/* job_priv: what the files of job/ share (job.c lists which part lives where): the getters and
 * messages of job_fields.c, and each section's check and resolved form. Not part of the job/
 * API.
 *
 * The getters return 1 when the member is present and valid (out written), 0 when it is absent
 * (out untouched) and -1 when it is invalid (one {field, message} recorded, out untouched), so a
 * section can take a default, report a missing member or go on after a bad one. */
#ifndef TRAINYARD_JOB_JOB_PRIV_H
#define TRAINYARD_JOB_JOB_PRIV_H

#include <limits.h>

#include "job/job.h"

typedef struct job_vctx {
    field_errors *errs;
    int rc;         /* -ENOMEM once an allocation failed; 0 otherwise */
    int format_bad; /* dataset.format was given but wrong: checks that hang on it are skipped */
} job_vctx;

typedef char job_path[128];

typedef struct job_enum {
    const char *name;
    int value;
} job_enum;

typedef struct job_range {
    double lo, hi;
    int lo_open, hi_open; /* 1: the bound itself is excluded */
} job_range;

/* base.key, or key at the top; a path longer than the buffer is cut at a character boundary. */
void job_path_key(job_path out, const char *base, const char *key);
/* base[i]. */
void job_path_index(job_path out, const char *base, size_t i);
/* Records "must be <what>, got <value>" on path. */
void job_bad(job_vctx *v, const char *path, const char *what, const json_t *got);

int job_get_int(job_vctx *v, const json_t *obj, const char *key, const char *path, long long lo,
                long long hi, long long *out);
int job_get_int32(job_vctx *v, const json_t *obj, const char *key, const char *path, int lo, int hi,
                  int *out);
/* n integers from lo to hi, as a JSON array of n (or, when scalar_ok, one integer standing for
 * all n, as Keras takes kernel_size=3 for 3×3); names lists them for the message ("height,
 * width"). */
int job_get_ints(job_vctx *v, const json_t *obj, const char *key, const char *path, size_t n,
                 int lo, int hi, int scalar_ok, const char *names, int *out);
int job_get_number(job_vctx *v, const json_t *obj, const char *key, const char *path, job_range r,
                   double *out);
int job_get_bool(job_vctx *v, const json_t *obj, const char *key, const char *path, int *out);
/* A string that must be one of names (terminated by a NULL name); what lists them. */
int job_get_enum(job_vctx *v, const json_t *obj, const char *key, const char *path,
                 const job_enum *names, const char *what, int *out);
/* An object member, borrowed from obj. */
int job_get_object(job_vctx *v, const json_t *obj, const char *key, const char *path,
                   const json_t **out);
/* The name of value in names, or NULL. */
const char *job_enum_name(const job_enum *names, int value);

/* Sets obj[key] = val, stealing val; flags any failure, val == NULL included. */
void job_put(json_t *obj, const char *key, json_t *val, int *bad);
/* A string value, or NULL (flagging bad) when s is NULL. */
json_t *job_str(const char *s, int *bad);
/* [a, b], or NULL (flagging bad) when out of memory. */
json_t *job_pair(int a, int b, int *bad);

/* Which of a field and its alias (seed 002's names) the document gives: key, or alias when only
 * it is there; NULL (an error recorded on the alias) when both are. */
const char *job_alias(job_vctx *v, const json_t *doc, const char *key, const char *alias);

/* A copy of s, or NULL with v->rc = -ENOMEM. */
char *job_strdup(job_vctx *v, const char *s);
/* A string member, borrowed from obj. */
int job_get_string(job_vctx *v, const json_t *obj, const char *key, const char *path,
                   const char **out);
/* dataset.sha256 of the dataset object ds into s->sha256 (null or absent: none). */
void job_v_sha256(job_vctx *v, const json_t *ds, job_spec *s);
/* Checks url as field (http, https, file or s3; credentials only when credentials_ok) and
 * copies it into *out: 0, or -1 with an error recorded (or v->rc set). */
int job_url_check(job_vctx *v, const char *field, const char *url, int credentials_ok, char **out);
/* Ends a resolved document: resources, max_attempts, max_runtime_seconds, priority and
 * delete_checkpoint into doc, which it returns; NULL (doc released) when bad was set by an
 * earlier failure or one of these fails. */
json_t *job_doc_finish(json_t *doc, const job_spec *s, int bad);

/* The dataset (job_dataset.c): dataset_url or dataset_location into s->dataset_url (required
 * unless a script job); the "dataset" section into s (format, its options, sha256). */
void job_v_url(job_vctx *v, const json_t *doc, job_spec *s, int required);
void job_v_dataset(job_vctx *v, const json_t *doc, job_spec *s);
/* The resolved "dataset" object (new reference; NULL with *bad set on failure). */
json_t *job_dataset_to_json(const job_spec *s, int *bad);

/* A script job's own sections (job_script.c): training_script, code / code_url / code_sha256,
 * dataset (sha256 only), hyperparameters (any object); model, task and binary refused. */
void job_v_script(job_vctx *v, const json_t *doc, job_spec *s);
/* In a built-in job: code, code_url and code_sha256 are refused (they go with training_script). */
void job_v_not_script(job_vctx *v, const json_t *doc);
/* The resolved document of a script job (new reference; NULL when out of memory). */
json_t *job_script_to_json(const job_spec *s);

/* The model section (job_model.c): model.input_shape and model.layers into s, every shape
 * inferred. Reads s->format, s->task, s->binary and s->resize_* (set before it runs). */
void job_v_model(job_vctx *v, const json_t *doc, job_spec *s);
/* The resolved "model" object (new reference; NULL with *bad set on failure). */
json_t *job_model_to_json(const job_spec *s, int *bad);

/* The experiment sections (job_experiment.c): early_stopping, init_from, tensorboard, notify and
 * keep, checked after everything else. */
void job_v_experiment(job_vctx *v, const json_t *doc, job_spec *s);
/* Puts those sections that say something into a resolved document (flags *bad on failure). */
void job_experiment_to_json(json_t *doc, const job_spec *s, int *bad);
/* Releases what they own. */
void job_experiment_free(job_spec *s);

#endif
