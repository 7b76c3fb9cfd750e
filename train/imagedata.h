/* imagedata: an image dataset as the trainer uses it: parsed, checked against the model's input
 * shape, split, standardisation statistics computed, uploaded to the device once, and turned
 * into batches there.
 *
 * The pixels go to the device as the file had them (uint8, or float32 for float npz) and stay
 * there for the run; every batch is made on the device by kern_image_batch: gather by index,
 * bilinear resize to the input shape, scale (1/255 for uint8), per-channel standardisation
 * when dataset.scale is "standardize", and for training batches the job's augmentation keyed
 * by (seed, epoch, image). Labels go up once too (int32 classes, or float 0/1 for binary) and
 * are gathered with the same indices.
 *
 * Validation: the dataset's test set (CIFAR's test_batch.bin, MNIST's t10k files, npz
 * x_test/y_test) when there is one and validation_split is 0; otherwise the split of the
 * training images that dataset_split_order() gives (the test set is then unused).
 * Standardisation statistics: per channel over the training images (not the validation ones),
 * at the source resolution, after scaling: mean and population std (a std of 0 becomes 1).
 *
 * Ownership: imagedata_free() releases everything, device buffers included; accepts NULL. */
#ifndef TRAINYARD_WORKER_IMAGEDATA_H
#define TRAINYARD_WORKER_IMAGEDATA_H

#include <stddef.h>
#include <stdint.h>

#include "job/job.h"
#include "kernels/kernels.h"
#include "data/images.h"

typedef struct imagedata {
    image_set *train, *test; /* as parsed */
    int val_from_test;       /* 1: the validation rows are the test set */
    size_t n_train, n_val;   /* images trained on and validated on */
    int32_t *train_ids;      /* n_train indices into train */
    int32_t *val_ids;        /* n_val indices into the validation source */
    int n_classes;
    float *mean, *std; /* c floats each when standardised, else NULL */
    kern_image geom;   /* source and destination shapes, scale, augmentation */
    cl_mem src[2];     /* pixels of train and (when used) test on the device */
    cl_mem labels[2];  /* their labels */
    cl_mem idx, vidx;  /* this epoch's training order; the validation indices */
    cl_mem mean_d, std_d;
} imagedata;

/* Parses bytes in job->format, checks the images against model.input_shape (after
 * dataset.resize) and the labels against the classes, splits, and computes the standardisation.
 * Errors name what is wrong. */
int imagedata_load(const char *bytes, size_t len, const job_spec *job, imagedata **out, char *err);
/* Device bytes imagedata_upload() will allocate. */
uint64_t imagedata_device_bytes(const imagedata *d);
/* Uploads pixels, labels (float_labels: as float 0/1, else int32), indices and the
 * standardisation (after a resume has replaced d->mean/std, if it does). */
int imagedata_upload(imagedata *d, ocl_ctx *c, int float_labels, char *err);
/* Enqueues a batch of rows images from position start of the training order (train: with
 * augmentation for epoch) or of the validation indices into x (rows × h·w·c floats) and
 * their labels into y. */
int imagedata_batch(imagedata *d, kern *k, int train, int epoch, size_t start, int rows, cl_mem x,
                    cl_mem y, char *err);
/* Releases d; accepts NULL. */
void imagedata_free(imagedata *d);

#endif
