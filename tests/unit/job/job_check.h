/* job_check: what the job/ unit tests share: parse a document expecting success or one error on
 * a field, compare two specs field by field, and the round trip spec → resolved JSON → spec.
 * Header-only: each test executable includes it once, after tests/unit/check.h. */
#ifndef TRAINYARD_TESTS_UNIT_JOB_CHECK_H
#define TRAINYARD_TESTS_UNIT_JOB_CHECK_H

#include <errno.h>

#include "job/job.h"
#include "tests/unit/check.h"

static inline job_spec *parse_ok(const char *text)
{
    job_spec *s = NULL;
    field_errors errs;
    int rc = job_parse(text, strlen(text), &s, &errs);
    CHECK_INT(rc, 0);
    CHECK_INT(errs.count, 0);
    for (size_t i = 0; i < errs.count; i++)
        fprintf(stderr, "  unexpected error: %s: %s\n", errs.items[i].field, errs.items[i].message);
    return s;
}

/* Index of the error on field whose message contains part, or -1. */
static inline int find_error(const field_errors *errs, const char *field, const char *part)
{
    for (size_t i = 0; i < errs->count; i++) {
        if (strcmp(errs->items[i].field, field) == 0 && strstr(errs->items[i].message, part))
            return (int)i;
    }
    return -1;
}

static inline void dump_errors(const field_errors *errs)
{
    for (size_t i = 0; i < errs->count; i++)
        fprintf(stderr, "  error %zu: \"%s\": %s\n", i, errs->items[i].field,
                errs->items[i].message);
}

/* Parses text expecting failure with an error on field containing part (and only one error
 * when single is set). */
static inline void expect_error_at(const char *text, const char *field, const char *part,
                                   int single, const char *file, int line)
{
    job_spec *s = (job_spec *)1; /* must stay untouched */
    field_errors errs;
    int rc = job_parse(text, strlen(text), &s, &errs);
    int ok = rc == -EINVAL && s == (job_spec *)1 && find_error(&errs, field, part) >= 0 &&
             (!single || errs.count == 1);
    if (!ok) {
        fprintf(stderr, "%s:%d: expected error on \"%s\" containing \"%s\" (rc %d)\n", file, line,
                field, part, rc);
        dump_errors(&errs);
        check_failures++;
    }
}
#define EXPECT_ERROR(text, field, part) expect_error_at(text, field, part, 1, __FILE__, __LINE__)
/* The same, where other errors may come with it. */
#define EXPECT_ERRORS(text, field, part) expect_error_at(text, field, part, 0, __FILE__, __LINE__)

/* Two strings that may be NULL: both NULL, or equal. */
#define CHECK_OPT_STR(a, b)                                                                        \
    do {                                                                                           \
        const char *opt_a_ = (a), *opt_b_ = (b);                                                   \
        if (opt_a_ || opt_b_)                                                                      \
            CHECK_STR(opt_a_, opt_b_);                                                             \
    } while (0)

static inline void check_specs_equal(const job_spec *a, const job_spec *b)
{
    CHECK_STR(a->name, b->name);
    CHECK_OPT_STR(a->dataset_url, b->dataset_url);
    CHECK_OPT_STR(a->script, b->script);
    CHECK_OPT_STR(a->code, b->code);
    CHECK_OPT_STR(a->code_url, b->code_url);
    CHECK_OPT_STR(a->code_sha256, b->code_sha256);
    CHECK_OPT_STR(a->hyperparameters_json, b->hyperparameters_json);
    CHECK_INT(a->delete_checkpoint, b->delete_checkpoint);
    CHECK((a->label_name == NULL) == (b->label_name == NULL));
    if (a->label_name)
        CHECK_STR(a->label_name, b->label_name);
    else
        CHECK_INT(a->label_index, b->label_index);
    CHECK_INT(a->header, b->header);
    CHECK((a->sha256 == NULL) == (b->sha256 == NULL));
    if (a->sha256)
        CHECK_STR(a->sha256, b->sha256);
    CHECK_INT(a->standardize, b->standardize);
    CHECK_INT(a->format, b->format);
    CHECK_INT(a->resize_h, b->resize_h);
    CHECK_INT(a->resize_w, b->resize_w);
    CHECK_INT(a->scale, b->scale);
    CHECK_INT(a->augment_flip, b->augment_flip);
    CHECK_INT(a->augment_crop, b->augment_crop);
    CHECK_INT(a->in_h, b->in_h);
    CHECK_INT(a->in_w, b->in_w);
    CHECK_INT(a->in_c, b->in_c);
    CHECK_INT(a->task, b->task);
    CHECK_INT(a->binary, b->binary);
    CHECK_INT(a->n_layers, b->n_layers);
    CHECK_INT(a->output_given, b->output_given);
    CHECK_INT(a->output_units, b->output_units);
    /* Every field of every layer, the given output layer included. */
    for (size_t i = 0; i < a->n_layers + (size_t)a->output_given && i < JOB_MAX_LAYERS; i++) {
        const job_layer *x = &a->layers[i], *y = &b->layers[i];
        CHECK_INT(x->type, y->type);
        CHECK_INT(x->units, y->units);
        CHECK_INT(x->activation, y->activation);
        CHECK(x->rate == y->rate);
        CHECK_INT(x->filters, y->filters);
        CHECK_INT(x->kh, y->kh);
        CHECK_INT(x->kw, y->kw);
        CHECK_INT(x->sh, y->sh);
        CHECK_INT(x->sw, y->sw);
        CHECK_INT(x->padding, y->padding);
        CHECK_INT(x->use_bias, y->use_bias);
        CHECK(x->bn_momentum == y->bn_momentum);
        CHECK(x->bn_epsilon == y->bn_epsilon);
        CHECK_INT(x->out_h, y->out_h);
        CHECK_INT(x->out_w, y->out_w);
        CHECK_INT(x->out_c, y->out_c);
    }
    CHECK_INT(a->epochs, b->epochs);
    CHECK_INT(a->batch_size, b->batch_size);
    CHECK(a->learning_rate == b->learning_rate);
    CHECK_INT(a->optimizer, b->optimizer);
    if (a->optimizer == JOB_OPT_SGD) {
        CHECK(a->momentum == b->momentum);
    } else {
        CHECK(a->beta1 == b->beta1);
        CHECK(a->beta2 == b->beta2);
        CHECK(a->epsilon == b->epsilon);
    }
    CHECK(a->validation_split == b->validation_split);
    CHECK_INT(a->shuffle, b->shuffle);
    CHECK(a->seed == b->seed);
    CHECK_INT(a->device, b->device);
    CHECK_INT(a->max_attempts, b->max_attempts);
    CHECK_INT(a->max_runtime_seconds, b->max_runtime_seconds);
    CHECK_INT(a->priority, b->priority);
    const job_early_stopping *ea = &a->early_stopping, *eb = &b->early_stopping;
    CHECK_INT(ea->enabled, eb->enabled);
    CHECK_STR(ea->monitor, eb->monitor);
    CHECK_INT(ea->mode, eb->mode);
    CHECK_INT(ea->patience, eb->patience);
    CHECK(ea->min_delta == eb->min_delta);
    CHECK_INT(ea->has_baseline, eb->has_baseline);
    CHECK(ea->baseline == eb->baseline);
    CHECK_INT(ea->start_from_epoch, eb->start_from_epoch);
    CHECK_INT(ea->restore_best, eb->restore_best);
    CHECK_OPT_STR(a->init_from, b->init_from);
    CHECK_INT(a->tb_histograms, b->tb_histograms);
    CHECK_INT(a->n_notify, b->n_notify);
    for (size_t i = 0; i < a->n_notify && i < b->n_notify; i++) {
        CHECK_STR(a->notify[i].url, b->notify[i].url);
        CHECK_INT(a->notify[i].events, b->notify[i].events);
    }
    CHECK_INT(a->keep, b->keep);
}

/* Spec → JSON text → spec: equal specs, and the second dump is the same text as the first. */
static inline void round_trip(const char *text)
{
    job_spec *a = parse_ok(text), *b = NULL;
    if (!a)
        return;
    json_t *doc = job_to_json(a);
    CHECK(doc != NULL);
    char *dumped = json_dumps(doc, JSON_COMPACT);
    CHECK(dumped != NULL);
    if (dumped)
        b = parse_ok(dumped);
    if (b) {
        check_specs_equal(a, b);
        json_t *doc2 = job_to_json(b);
        char *dumped2 = json_dumps(doc2, JSON_COMPACT);
        CHECK_STR(dumped2, dumped);
        free(dumped2);
        json_decref(doc2);
    }
    free(dumped);
    json_decref(doc);
    job_free(a);
    job_free(b);
}

/* A minimal valid document with extra top-level members spliced in (x is "" or ", ..."). */
#define DOC(x) "{\"dataset_url\": \"https://data.example/d.csv\", \"hyperparameters\": {}" x "}"
/* A minimal document with the dataset URL url. */
#define DOC_X_URL(url) "{\"dataset_url\": \"" url "\", \"hyperparameters\": {}}"
/* The same with members spliced into hyperparameters. */
#define DOC_HP(x) "{\"dataset_url\": \"https://data.example/d.csv\", \"hyperparameters\": {" x "}}"

#endif
