/* job: the training job document — parsing, validation and defaults.
 *
 * A job arrives as JSON (POST /train or `trainyard train job.json`). job_parse() checks every
 * field, collecting *all* problems as {field, message} pairs (field is a JSON path such as
 * "hyperparameters.epochs" or "model.layers[2].units") rather than stopping at the first, and
 * fills a job_spec with every default resolved. job_to_json() writes the resolved document back
 * out (the `job.json` artifact, and what GET /jobs/{id} shows). Unknown fields are errors.
 *
 * Required: dataset_url, hyperparameters (an object; its members have defaults). model.layers
 * defaults to [] (no hidden layer: the output layer alone). dataset.sha256 may be null (no
 * check), which is how job_to_json() writes an absent one. Options that do not apply are errors,
 * not ignored: "binary" with regression, "momentum" with adam, beta1/beta2/epsilon with sgd.
 * Credentials in dataset_url (user:password@) are kept in the spec for the fetch; job_to_json()
 * writes them as ***@, and a URL whose userinfo is *** is refused, so such a resolved document
 * does not parse back until the real userinfo is put in again (the worker does so with the
 * lease's dataset_credentials). Every other resolved document parses back to the same spec.
 * Ownership: job_spec strings are owned by the spec; job_free() releases all, accepts NULL. */
#ifndef TRAINYARD_JOB_JOB_H
#define TRAINYARD_JOB_JOB_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "util/field_errors.h"

#define JOB_MAX_LAYERS     32
#define JOB_MAX_UNITS      65536
#define JOB_MAX_EPOCHS     100000
#define JOB_MAX_BATCH      (1 << 20)
#define JOB_MAX_JSON_DEPTH 16
#define JOB_MAX_DOC_BYTES  (1 << 20) /* job_parse() refuses longer text */

enum job_task { JOB_TASK_CLASSIFICATION = 0, JOB_TASK_REGRESSION = 1 };
enum job_layer_type { JOB_LAYER_DENSE = 0, JOB_LAYER_DROPOUT = 1 };
enum job_optimizer { JOB_OPT_SGD = 0, JOB_OPT_ADAM = 1 };
enum job_device { JOB_DEVICE_ANY = 0, JOB_DEVICE_GPU = 1, JOB_DEVICE_CPU = 2 };
/* A dense layer's activation. "softmax" is accepted only where it is the output, which the task
 * decides. The trainer maps these to the kernels' own values where it calls them. */
enum job_activation { JOB_ACT_LINEAR = 0, JOB_ACT_RELU = 1, JOB_ACT_TANH = 2, JOB_ACT_SIGMOID = 3 };

typedef struct job_layer {
    int type;       /* enum job_layer_type */
    int units;      /* dense */
    int activation; /* dense: enum job_activation; default relu */
    double rate;    /* dropout: 0 <= rate < 1 */
} job_layer;

typedef struct job_spec {
    char *name;        /* default "job" */
    char *dataset_url; /* http://, https:// or file://, with any user:password@ as given;
                          job_to_json shows that userinfo as ***@ */
    /* dataset */
    char *label_name; /* dataset.label_column as a name, or NULL */
    int label_index;  /* dataset.label_column as an index (negative counts from the end);
                         default -1: the last column. Ignored when label_name is set. */
    int header;       /* dataset.header: -1 auto-detect (default), 0 no, 1 yes */
    char *sha256;     /* dataset.sha256: 64 lowercase hex digits, or NULL */
    int standardize;  /* dataset.standardize: default 1 */
    /* task and model */
    int task;        /* enum job_task; default classification */
    int binary;      /* classification only: sigmoid + binary cross-entropy; default 0 */
    size_t n_layers; /* model.layers: hidden layers; the output layer follows from the task */
    job_layer layers[JOB_MAX_LAYERS];
    /* hyperparameters */
    int epochs;              /* default 10, 1..JOB_MAX_EPOCHS */
    int batch_size;          /* default 32, 1..JOB_MAX_BATCH; larger than the data = full batch */
    double learning_rate;    /* default 0.001 for adam, 0.01 for sgd; > 0 */
    int optimizer;           /* enum job_optimizer; default adam */
    double momentum;         /* sgd: 0 <= momentum < 1, default 0 */
    double beta1, beta2;     /* adam: defaults 0.9, 0.999 */
    double epsilon;          /* adam: default 1e-7 (Keras) */
    double validation_split; /* 0 <= v < 1, default 0 */
    int shuffle;             /* default 1 */
    uint64_t seed;           /* default 0 */
    /* scheduling */
    int device;              /* resources.device: enum job_device, default any */
    int max_attempts;        /* default 3, 1..100 */
    int max_runtime_seconds; /* default 86400, 1..2592000 */
    int priority;            /* default 0, -100..100 */
    int delete_checkpoint;   /* default 1: the job's checkpoint goes when it ends; 0 keeps it
                                as the artifact checkpoint.safetensors (Keras's BackupAndRestore
                                has the same switch under the same name) */
} job_spec;

/* Parses and validates a job document from text. On success *out is a new spec; on failure
 * returns -EINVAL with every problem in errs (a syntax error is one error on field ""). */
int job_parse(const char *text, size_t len, job_spec **out, field_errors *errs);
/* The same from an already-parsed JSON value (borrowed). */
int job_from_json(const json_t *doc, job_spec **out, field_errors *errs);
/* The resolved document with every default filled in (new reference). */
json_t *job_to_json(const job_spec *spec);
/* Releases a spec; accepts NULL. */
void job_free(job_spec *spec);
/* "relu", "tanh", "sigmoid", "linear" for an enum job_activation value; NULL for any other. */
const char *job_activation_name(int act);

#endif
