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
 * layers and shapes depend on both.
 *
 * Where each part lives (all sharing job_priv.h):
 *   job.c            the document: name, task, hyperparameters, resources, distribution, the
 *                    top-level limits; job_from_json / job_parse / job_to_json / job_free
 *   job_fields.c     paths, messages, typed getters, resolved-document helpers
 *   job_dataset.c    dataset_url and the "dataset" section (formats and their options)
 *   job_model.c      the "model" section: layers, input shape, shape inference
 *   job_script.c     a training_script job's own sections
 *   job_experiment.c early_stopping, init_from, tensorboard, notify, keep
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

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "job/job_priv.h"
#include "util/json_depth.h"
#include "util/url.h"

#define JOB_NAME_MAX_CHARS 128

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
    field_errors_unknown(v->errs, hp, hpath, known);
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
    field_errors_unknown(v->errs, res, "resources", known);
    job_get_enum(v, res, "device", "resources", job_devices, "\"gpu\", \"cpu\" or \"any\"",
                 &s->device);
}

/* "distribution": {"replicas": N, "nodes": M}: a data-parallel job of N ranks. A built-in job's
 * ranks each take a share of every batch, so each needs at least one row of it; a script job's
 * ranks are N copies of the script, each with its framework's environment (TF_CONFIG, torchrun's
 * variables), which share the work as the script says. */
static void job_v_distribution(job_vctx *v, const json_t *doc, job_spec *s)
{
    static const char *const known[] = {"replicas", "nodes", NULL};
    const json_t *dist = NULL;
    if (job_get_object(v, doc, "distribution", "", &dist) != 1)
        return;
    field_errors_unknown(v->errs, dist, "distribution", known);
    job_get_int32(v, dist, "replicas", "distribution", 1, JOB_MAX_REPLICAS, &s->replicas);
    if (json_object_get(dist, "nodes") &&
        job_get_int32(v, dist, "nodes", "distribution", 1, JOB_MAX_REPLICAS, &s->nodes) == 1 &&
        s->nodes > s->replicas)
        field_errors_add(v->errs, "distribution.nodes",
                         "must not exceed distribution.replicas: every node runs at least one");
    if (!s->script && s->replicas > s->batch_size)
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
    field_errors_unknown(v.errs, doc, "", known);
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
