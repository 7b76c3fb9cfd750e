/* trainer_outputs: what a run leaves in its output folder besides checkpoints: train.log and
 * metrics.csv (opened at the start, a row per epoch), job.json (the resolved job),
 * model.safetensors and model.onnx with the trainyard.* metadata, and --val-outputs' .npy of
 * the model's outputs on the validation rows. Rank 0 alone writes (trainer_lead). */
#include "train/trainer_priv.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/path.h"
#include "util/err.h"
#include "util/json_out.h"
#include "util/mkdirs.h"
#include "data/dataset.h"
#include "model/export.h"
#include "model/export_onnx.h"
#include "model/safetensors.h"
#include "train/imagedata.h"

/* metrics.csv's columns; a row's values are trainer_epoch_json's of the same names. */
static const char *const metrics_columns[] = {"epoch",    "loss",         "val_loss",
                                              "accuracy", "val_accuracy", "seconds"};

int trainer_open_outputs(trainer_ctx *r, char *err)
{
    const char *dir = r->opts->out_dir;
    char path[4096];
    int rc = mkdirs(dir, 0755, err);
    if (rc < 0)
        return rc;
    rc = path_join(path, sizeof path, dir, "train.log", err);
    if (rc < 0)
        return rc;
    r->log = fopen(path, r->resume ? "a" : "w");
    if (!r->log)
        return err_set(err, -errno, "cannot write %s: %s", path, strerror(errno));
    rc = path_join(path, sizeof path, dir, "metrics.csv", err);
    if (rc < 0)
        return rc;
    return metrics_csv_open(path, metrics_columns, sizeof metrics_columns / sizeof *metrics_columns,
                            &r->metrics, err);
}

void trainer_metrics_row(trainer_ctx *r, const trainer_epoch *e)
{
    if (!r->metrics)
        return; /* a data-parallel rank but 0 writes nothing */
    json_t *row = trainer_epoch_json(e);
    metrics_csv_row(r->metrics, row);
    json_decref(row);
}

/* The model's outputs on a chunk of validation rows, as probabilities, into user (floats). */
static int outputs_chunk(trainer_ctx *r, size_t start, int rows, cl_mem x, cl_mem y, void *user,
                         char *err)
{
    (void)y;
    int k = r->outputs;
    float *dst = (float *)user + start * (size_t)k;
    cl_mem out;
    int rc = model_forward(r->m, rows, x, &out, err);
    if (rc == 0)
        rc = ocl_read(r->c, out, 0, (size_t)rows * (size_t)k * sizeof *dst, dst, err);
    for (int i = 0; rc == 0 && i < rows; i++)
        model_row_probabilities(r->loss, dst + (size_t)i * (size_t)k, k);
    return rc;
}

/* opts->val_outputs: the outputs on the validation rows, in order, as a float32 .npy of
 * [rows, outputs] (version 1.0, little-endian as the hosts we run on). */
int trainer_write_val_outputs(trainer_ctx *r, char *err)
{
    const char *path = r->opts->val_outputs;
    size_t n = trainer_val_rows(r), k = (size_t)r->outputs;
    float *v = malloc((n * k + 1) * sizeof *v);
    if (!v)
        return err_set(err, -ENOMEM, "out of memory for %zu validation outputs", n * k);
    int rc = trainer_each_val_chunk(r, outputs_chunk, v, err);
    if (rc < 0)
        goto out;
    char head[128];
    int len = snprintf(head, sizeof head,
                       "{'descr': '<f4', 'fortran_order': False, 'shape': (%zu, %zu), }", n, k);
    while ((10 + len + 1) % 64)
        head[len++] = ' ';
    head[len++] = '\n';
    unsigned char magic[10] = {0x93,
                               'N',
                               'U',
                               'M',
                               'P',
                               'Y',
                               1,
                               0,
                               (unsigned char)(len & 0xff),
                               (unsigned char)(len >> 8)};
    FILE *f = fopen(path, "wb");
    if (!f) {
        rc = err_set(err, -errno, "cannot write %s: %s", path, strerror(errno));
        goto out;
    }
    int bad = fwrite(magic, 1, sizeof magic, f) != sizeof magic ||
              fwrite(head, 1, (size_t)len, f) != (size_t)len ||
              fwrite(v, sizeof *v, n * k, f) != n * k;
    if (fclose(f) != 0 || bad)
        rc = err_set(err, -EIO, "writing %s failed", path);
    if (rc == 0)
        trainer_say(r, "validation outputs: %zu rows × %zu written to %s", n, k, path);
out:
    free(v);
    return rc;
}

static json_t *floats_json(const float *v, size_t n)
{
    json_t *a = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(a, json_real(json_out_float(v[i])));
    return a;
}

/* model.safetensors: the tensors under PyTorch nn.Sequential names (export.h), with metadata
 * trainyard.model (layers, shapes, tensor names, output, loss), trainyard.pytorch (the
 * Sequential to build), trainyard.standardization, trainyard.features (CSV feature names; [] for
 * images), trainyard.classes, trainyard.label, trainyard.job and trainyard.input ({"pixel_scale":
 * s} for images: a pixel's factor before standardisation; {} for CSV). */
int trainer_write_model(trainer_ctx *r, char *err)
{
    float *params = NULL, *stats = NULL;
    export_set *e = NULL;
    int rc = model_read_params(r->m, &params, &stats, err);
    if (rc == 0)
        rc = export_build(r->m, params, stats, &e, err);
    if (rc < 0)
        goto done;
    const image_set *cl = r->img ? trainer_image_classes(r->img) : NULL;
    size_t n_std = trainer_std_len(r);
    json_t *std = r->mean ? json_pack("{s:o, s:o}", "mean", floats_json(r->mean, n_std), "std",
                                      floats_json(r->std, n_std))
                          : json_null();
    json_t *meta_json[] = {
        json_incref(e->config),
        std,
        r->img ? json_array() : trainer_strings_json(r->all->feature_names, r->all->cols),
        cl                  ? trainer_strings_json(cl->class_names, (size_t)cl->n_classes)
        : r->all->n_classes ? trainer_strings_json(r->all->class_names, (size_t)r->all->n_classes)
                            : json_array(),
        job_to_json(r->job),
        /* what a pixel is multiplied by before standardisation (predict/ prepares so) */
        r->img ? json_pack("{s:f}", "pixel_scale", json_out_float(r->img->geom.scale))
               : json_object(),
    };
    const char *keys[] = {"trainyard.model",    "trainyard.standardization",
                          "trainyard.features", "trainyard.classes",
                          "trainyard.job",      "trainyard.input"};
    enum { NMETA = sizeof keys / sizeof keys[0] };
    char *vals[NMETA] = {0};
    safetensors_meta meta[NMETA + 3];
    size_t nm = 0;
    meta[nm++] = (safetensors_meta){"format", "pt"};
    meta[nm++] = (safetensors_meta){"trainyard.label", r->img ? "label" : r->all->label_name};
    meta[nm++] = (safetensors_meta){"trainyard.pytorch", e->torch};
    for (int i = 0; i < NMETA; i++) {
        vals[i] = json_out_dumps(meta_json[i], JSON_COMPACT | JSON_ENCODE_ANY);
        json_decref(meta_json[i]);
        if (!vals[i])
            rc = err_set(err, -ENOMEM, "out of memory writing the model metadata");
        meta[nm++] = (safetensors_meta){keys[i], vals[i] ? vals[i] : ""};
    }
    char path[4096];
    if (rc == 0)
        rc = path_join(path, sizeof path, r->opts->out_dir, "model.safetensors", err);
    if (rc == 0)
        rc = safetensors_write(path, e->tensors, e->n, meta, nm, err);
    /* model.onnx: the same network and tensors with the preprocessing inside (what :predict
     * takes: raw rows or pixels), and the trainyard.* metadata */
    export_onnx_prep prep = {.mean = r->mean,
                             .std = r->std,
                             .n = n_std,
                             .pixel_scale = r->img ? r->img->geom.scale : 1.0f};
    if (rc == 0)
        rc = path_join(path, sizeof path, r->opts->out_dir, "model.onnx", err);
    if (rc == 0)
        rc = export_onnx_write(r->m, e, &prep, meta + 1, nm - 1, path, err);
    for (int i = 0; i < NMETA; i++)
        free(vals[i]);
done:
    export_free(e);
    free(params);
    free(stats);
    return rc;
}

int trainer_write_job(trainer_ctx *r, char *err)
{
    char path[4096];
    int rc = path_join(path, sizeof path, r->opts->out_dir, "job.json", err);
    if (rc < 0)
        return rc;
    if (json_out_dump_file(r->job_json, path, JSON_INDENT(2)) != 0)
        rc = err_set(err, -EIO, "cannot write %s", path);
    return rc;
}
