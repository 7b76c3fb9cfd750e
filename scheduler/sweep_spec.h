/* sweep_spec: the sweep document (POST /sweeps) — validation, and the job document of each
 * trial, which is a function of the document and the trial's number alone.
 *
 * {"name": "s", "base": {job document}, "parameters": {"PATH": {"type": ..., ...}},
 *  "algorithm": "random" | "grid", "seed": 0, "metric": {"name": "val_loss", "mode": "min"},
 *  "max_trials": 16, "max_concurrent": 4, "asha": {"min_epochs": 1, "reduction_factor": 3},
 *  "notify": [...]}
 *
 * A parameter's PATH names a member of the job document ("hyperparameters.learning_rate",
 * "model.layers[0].units", "dataset.standardize"); its type is log_uniform (min > 0, max > min),
 * uniform (max > min), int_uniform (integers, max >= min; both ends drawn) or choice (values:
 * 1..256 JSON values). Trial n (1-based) is base with each PATH set to its value, named
 * "<name>-<n>". random draws each value from a splitmix64 stream keyed by (seed, n, the
 * parameter's place in PATH order), so a trial's document never depends on any other trial or
 * on when it was made; grid (choice parameters only) walks the product of the values in PATH
 * order, the last PATH fastest, and makes exactly that many trials (at most max_trials).
 *
 * Validation is complete at submit: every trial's document is built and parsed with
 * job_from_json, so a trial can never fail to be made later. Problems name their field:
 * "parameters[\"PATH\"].min", "base.hyperparameters.epochs", "metric.name"...; a trial's
 * document that does not parse names the parameter whose member it is, or base.<field>.
 * Refused besides: dataset credentials in base (a sweep's document is shown as given),
 * hyperparameters.epochs as a parameter with asha (the rungs are on base's epochs), a metric a
 * built-in job does not report (loss, val_loss, accuracy, val_accuracy only; val_* needs
 * validation data: hyperparameters.validation_split > 0 for csv; accuracy needs
 * classification).
 *
 * Ownership: sweep_spec_parse returns a spec the caller frees with sweep_spec_free (accepts
 * NULL); it holds its own reference to the document. */
#ifndef TRAINYARD_SCHEDULER_SWEEP_SPEC_H
#define TRAINYARD_SCHEDULER_SWEEP_SPEC_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "util/field_errors.h"

#define SWEEP_MAX_PARAMS  32
#define SWEEP_MAX_TRIALS  1000
#define SWEEP_MAX_CHOICES 256
#define SWEEP_PATH_MAX    100 /* bytes of a parameter's path */
#define SWEEP_NAME_CHARS  120 /* a sweep's name: trials add "-<n>" within a job name's 128 */
#define SWEEP_METRIC_MAX  64  /* bytes of metric.name, NUL included */

enum sweep_param_type { SWEEP_LOG_UNIFORM, SWEEP_UNIFORM, SWEEP_INT_UNIFORM, SWEEP_CHOICE };

typedef struct sweep_param {
    char path[SWEEP_PATH_MAX + 1];
    int type; /* enum sweep_param_type */
    double min, max;
    const json_t *values; /* choice: borrowed from the spec's document */
} sweep_param;

typedef struct sweep_spec {
    json_t *doc;        /* the resolved sweep document (every default filled), owned */
    const char *name;   /* borrowed from doc */
    const json_t *base; /* borrowed from doc: the job document as given */
    size_t n_params;
    sweep_param params[SWEEP_MAX_PARAMS]; /* sorted by path */
    int grid;                             /* 1: algorithm grid */
    uint64_t seed;
    char metric[SWEEP_METRIC_MAX];
    int maximize; /* metric.mode max */
    int n_trials; /* trials it makes: max_trials, or the grid's size */
    int max_trials, max_concurrent;
    int asha;                        /* 1 when asha is given */
    int min_epochs, eta, max_epochs; /* asha's; max_epochs = base's epochs */
    int script;                      /* base is a script job */
} sweep_spec;

/* Validates a sweep document (borrowed). On success *out is a new spec; on failure -EINVAL with
 * every problem in errs (-ENOMEM without). */
int sweep_spec_parse(const json_t *doc, sweep_spec **out, field_errors *errs);
/* The same for a document sweep_spec_parse accepted before (a stored one): only trial 1's
 * document is parsed again. */
int sweep_spec_parse_stored(const json_t *doc, sweep_spec **out, field_errors *errs);
/* Trial n's job document (1 <= n <= s->n_trials) as given to job_from_json: new reference, or
 * NULL when out of memory. */
json_t *sweep_trial_doc(const sweep_spec *s, int n);
/* The values of s's parameters in a trial's resolved document (borrowed), as
 * {"PATH": value}: new reference, NULL when out of memory; a PATH the document lacks is null. */
json_t *sweep_trial_params(const sweep_spec *s, const json_t *doc);
/* Releases a spec; accepts NULL. */
void sweep_spec_free(sweep_spec *s);

#endif
