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
 * not ignored: "binary" with regression, "momentum" with adam, beta1/beta2/epsilon with sgd,
 * label_column/header/standardize with an image format, resize/scale/augment with csv, a
 * conv2d's "filters" on a dense layer.
 *
 * Images (dataset.format other than csv) need model.input_shape [h, w, c]; every layer's output
 * shape is inferred at submit (job_layer.out_*), and a layer that cannot take its input is an
 * error on model.layers[i] naming both shapes. Activations are NHWC: a spatial layer's output is
 * out_h × out_w × out_c; flat ones have out_h = out_w = 1 and out_c = their width.
 *
 * Credentials in dataset_url (user:password@) are kept in the spec for the fetch; job_to_json()
 * writes them as ***@, and a URL whose userinfo is *** is refused, so such a resolved document
 * does not parse back until the real userinfo is put in again (the worker does so with the
 * lease's dataset_credentials). Every other resolved document parses back to the same spec.
 *
 * Script jobs. A document with `training_script` runs the user's own program instead of a model
 * trainyard builds (job_script.c): its code is `code` (the address POST /code answered) or
 * `code_url` (with an optional `code_sha256`), exactly one; `dataset_url` is optional and
 * `dataset` holds at most `sha256`; `hyperparameters` is any object, handed to the script as
 * JSON; `model`, `task` and `binary` are refused. Seed 002's names `model_name` and
 * `dataset_location` stand for `name` and `dataset_url` in either kind of job (both of a pair
 * is an error on the alias); the resolved document writes `name` and `dataset_url`.
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
#define JOB_MAX_KERNEL     31        /* kernel_size, pool_size and strides: 1..31 */
#define JOB_MAX_IMAGE_SIDE 4096      /* input_shape and resize height and width */
#define JOB_MAX_CHANNELS   4096      /* input_shape channels */
#define JOB_MAX_CROP       64        /* dataset.augment.crop_padding, pixels */
/* Per sample: the input and every layer's output together hold at most this many values (256 MiB
 * of float32 per sample), and one layer's weights (dense: in × units; conv2d: kh·kw·c·filters)
 * at most JOB_MAX_WEIGHTS, so no job can ask for an absurd amount of memory. */
#define JOB_MAX_ACTIVATIONS (1 << 26)
#define JOB_MAX_WEIGHTS     (1 << 28)

enum job_task { JOB_TASK_CLASSIFICATION = 0, JOB_TASK_REGRESSION = 1 };
enum job_layer_type {
    JOB_LAYER_DENSE = 0,
    JOB_LAYER_DROPOUT = 1,
    JOB_LAYER_CONV2D = 2,
    JOB_LAYER_MAXPOOL2D = 3,
    JOB_LAYER_AVGPOOL2D = 4,
    JOB_LAYER_GLOBAL_AVGPOOL2D = 5,
    JOB_LAYER_FLATTEN = 6,
    JOB_LAYER_BATCHNORM = 7
};
enum job_padding { JOB_PAD_VALID = 0, JOB_PAD_SAME = 1 };
/* dataset.format: csv, or one of the image formats (see docs/API.md for what each file holds). */
enum job_format {
    JOB_FORMAT_CSV = 0,
    JOB_FORMAT_CIFAR10 = 1,
    JOB_FORMAT_MNIST = 2,
    JOB_FORMAT_NPY = 3,
    JOB_FORMAT_NPZ = 4,
    JOB_FORMAT_IMAGES = 5
};
/* dataset.scale for images: unit divides uint8 pixels by 255; standardize also subtracts the
 * training set's per-channel mean and divides by its standard deviation. */
enum job_scale { JOB_SCALE_UNIT = 0, JOB_SCALE_STANDARDIZE = 1 };
enum job_optimizer { JOB_OPT_SGD = 0, JOB_OPT_ADAM = 1 };
enum job_device { JOB_DEVICE_ANY = 0, JOB_DEVICE_GPU = 1, JOB_DEVICE_CPU = 2 };

#define JOB_MAX_REPLICAS 64 /* distribution.replicas */
/* A dense or conv2d layer's activation. "softmax" is accepted only on a last dense layer, which
 * is then the output layer itself (job_spec.output_given). The trainer maps these to the
 * kernels' own values where it calls them. */
enum job_activation {
    JOB_ACT_LINEAR = 0,
    JOB_ACT_RELU = 1,
    JOB_ACT_TANH = 2,
    JOB_ACT_SIGMOID = 3,
    JOB_ACT_SOFTMAX = 4 /* only the given output layer's (job_spec.output_given) */
};

typedef struct job_layer {
    int type;       /* enum job_layer_type */
    int units;      /* dense */
    int activation; /* dense (default relu) and conv2d (default linear, as Keras):
                       enum job_activation; a given output layer has softmax or sigmoid */
    double rate;    /* dropout: 0 <= rate < 1 */
    int filters;    /* conv2d */
    int kh, kw;     /* conv2d kernel_size; pools pool_size (default 2×2); 0 for other layers */
    int sh, sw;     /* conv2d strides (default 1); pools strides (default pool_size) */
    int padding;    /* conv2d and pools: enum job_padding, default valid */
    int use_bias;   /* conv2d, default 1 */
    double bn_momentum, bn_epsilon; /* batchnorm: defaults 0.99, 0.001 (Keras) */
    int out_h, out_w, out_c;        /* the layer's output shape, NHWC; flat layers have
                                       out_h = out_w = 1 and out_c = their width. Where the
                                       input width is not known at submit (CSV) a width that
                                       follows from it is 0. */
} job_layer;

/* Experiments (job/job_experiment.c; docs/API.md "Early stopping", "Warm start", "TensorBoard",
 * "Notifications", "Retention"). */
enum job_es_mode { JOB_ES_MIN = 0, JOB_ES_MAX = 1 };
#define JOB_MAX_NOTIFY     8    /* entries of "notify" */
#define JOB_MAX_METRIC     64   /* bytes of a metric name (early_stopping.monitor) */
#define JOB_MAX_NOTIFY_URL 2048 /* bytes of a notify URL */
/* A notify entry's events, as bits. */
enum job_event_bit {
    JOB_EVENT_SUCCEEDED = 1 << 0,
    JOB_EVENT_FAILED = 1 << 1,
    JOB_EVENT_CANCELLED = 1 << 2,
    JOB_EVENT_RUNNING = 1 << 3
};

/* "early_stopping": Keras's EarlyStopping. After each epoch (from start_from_epoch on) the
 * monitored value improves when it beats the best so far by more than min_delta in the mode's
 * direction; after `patience` epochs in a row without improvement the job stops (it succeeds,
 * with stop_reason saying so). With a baseline, the first epochs must beat it instead. With
 * restore_best the saved model is the best epoch's. */
typedef struct job_early_stopping {
    int enabled;                  /* 1 when the document has early_stopping */
    char monitor[JOB_MAX_METRIC]; /* default "val_loss"; built-in jobs: loss, val_loss, accuracy,
                                     val_accuracy; script jobs: any metric name they report */
    int mode;                     /* enum job_es_mode; "auto" (default): max for names that
                                     contain "acc", else min */
    int patience;                 /* default 0, 0..JOB_MAX_EPOCHS */
    double min_delta;             /* default 0, >= 0 */
    int has_baseline;             /* 1 when baseline is given */
    double baseline;
    int start_from_epoch; /* default 0: epochs before it are not judged */
    int restore_best;     /* default 0 */
} job_early_stopping;

typedef struct job_notify {
    char *url;  /* http:// or https://; the host obeys the dataset allow-list rules */
    int events; /* enum job_event_bit set; default succeeded | failed | cancelled */
} job_notify;

typedef struct job_spec {
    char *name;        /* default "job" (the document may say model_name instead) */
    char *dataset_url; /* http://, https://, file:// or s3://bucket/key (the document may say
                          dataset_location instead), with any user:password@ as given;
                          job_to_json shows that userinfo as ***@. NULL only in a script job
                          that names no dataset. */
    /* dataset */
    char *label_name;       /* dataset.label_column as a name, or NULL */
    int label_index;        /* dataset.label_column as an index (negative counts from the end);
                               default -1: the last column. Ignored when label_name is set. */
    int header;             /* dataset.header: -1 auto-detect (default), 0 no, 1 yes */
    char *sha256;           /* dataset.sha256: 64 lowercase hex digits, or NULL */
    int standardize;        /* dataset.standardize (csv): default 1 */
    int format;             /* dataset.format: enum job_format, default csv */
    int resize_h, resize_w; /* dataset.resize [h, w] (images); 0s when absent */
    int scale;              /* dataset.scale (images): enum job_scale, default unit */
    int augment_flip;       /* dataset.augment.flip (images): random horizontal flip, default 0 */
    int augment_crop;       /* dataset.augment.crop_padding (images): random crop after zero
                               padding of this many pixels per side, default 0 */
    /* task and model */
    int task;             /* enum job_task; default classification */
    int binary;           /* classification only: sigmoid + binary cross-entropy; default 0 */
    int in_h, in_w, in_c; /* model.input_shape [h, w, c]; required for images, 0s for csv */
    size_t n_layers;      /* model.layers: hidden layers; the output layer follows from the task */
    job_layer layers[JOB_MAX_LAYERS];
    int output_given; /* 1: model.layers ended with the output layer itself: a dense "softmax"
                         (classification) or a dense "sigmoid" of 1 unit (binary). n_layers
                         excludes it; layers[n_layers] holds it (units, activation, shape). */
    int output_units; /* that layer's units when output_given (the trainer checks them against
                         the classes in the data), else 0 */
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
    int replicas;            /* distribution.replicas: data-parallel ranks, 1..JOB_MAX_REPLICAS,
                                default 1 (train/distrib.h) */
    int nodes;               /* distribution.nodes: machines the Slurm executor asks for,
                                1..replicas; 0 (default) lets Slurm place the ranks */
    int max_attempts;        /* default 3, 1..100 */
    int max_runtime_seconds; /* default 86400, 1..2592000 */
    int priority;            /* default 0, -100..100 */
    int delete_checkpoint;   /* default 1: the job's checkpoint goes when it ends; 0 keeps it
                                as the artifact checkpoint.safetensors (checkpoint.tar.gz for a
                                script job; Keras's BackupAndRestore has the same switch under
                                the same name) */
    /* a script job (training_script): the user's own program; the dataset, task, model and
       hyperparameter fields above keep their defaults and mean nothing then */
    char *script;               /* training_script; NULL for a built-in job */
    char *code;                 /* "sha256:<hex>", or NULL */
    char *code_url;             /* or NULL */
    char *code_sha256;          /* 64 hex with code_url, or NULL */
    char *hyperparameters_json; /* script jobs: the hyperparameters object as compact JSON text
                                   (util/json_out), "{}" when absent; NULL for built-in jobs */
    /* experiments */
    job_early_stopping early_stopping; /* "early_stopping"; enabled 0 when absent */
    char *init_from;                   /* "init_from": a job id whose model this one starts
                                          from (built-in jobs), or NULL */
    int tb_histograms;                 /* "tensorboard": {"histograms": true}: default 0 */
    size_t n_notify;                   /* "notify": 0..JOB_MAX_NOTIFY entries */
    job_notify notify[JOB_MAX_NOTIFY];
    int keep; /* "keep": serve --retain-days never removes it;
                 default 0 */
} job_spec;

/* 1 for a script job (one with training_script), 0 for a built-in one. */
static inline int job_is_script(const job_spec *s)
{
    return s->script != NULL;
}

/* Parses and validates a job document from text. On success *out is a new spec; on failure
 * returns -EINVAL with every problem in errs (a syntax error is one error on field ""). */
int job_parse(const char *text, size_t len, job_spec **out, field_errors *errs);
/* The same from an already-parsed JSON value (borrowed). */
int job_from_json(const json_t *doc, job_spec **out, field_errors *errs);
/* The resolved document with every default filled in (new reference). */
json_t *job_to_json(const job_spec *spec);
/* Releases a spec; accepts NULL. */
void job_free(job_spec *spec);
/* "relu", "tanh", "sigmoid", "linear", "softmax" for an enum job_activation value; NULL for any
 * other. */
const char *job_activation_name(int act);
/* "dense", "conv2d", ... for an enum job_layer_type value; NULL for any other. */
const char *job_layer_type_name(int type);
/* "succeeded", "failed", "cancelled", "running" for one enum job_event_bit; NULL otherwise. */
const char *job_event_name(int bit);
/* A spec's notify entries as the document writes them, [] when none (new reference; NULL when
 * out of memory). */
json_t *job_notify_to_json(const job_spec *spec);
/* "csv", "cifar10", ... for an enum job_format value; NULL for any other. */
const char *job_format_name(int format);
/* 1 when hidden layer i of a spec that job_parse() accepted outputs a spatial map (h × w × c):
 * conv2d, the two windowed pools, and dropout or batchnorm after one of those or after the image
 * input; 0 for dense, flatten, global_avgpool2d and what follows them flat. */
int job_layer_is_spatial(const job_spec *spec, size_t i);
/* The output size along one axis of a convolution or pooling window of k cells with stride s
 * over in cells (Keras's rule). valid: (in − k) / s + 1, no padding; same: ceil(in / s), with
 * max((out − 1)·s + k − in, 0) cells of zero padding, floor half of them before (*pad_before,
 * which may be NULL) and the rest after. Returns 0 when the window does not fit (valid and
 * k > in) or an argument is out of range. */
int job_conv_out(int in, int k, int s, int padding, int *pad_before);

#endif
