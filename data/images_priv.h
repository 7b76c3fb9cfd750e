/* images_priv: what the image readers share (images.c, npz.c, images_folder.c): the format
 * codes, making a set within the limits, and naming its classes. Not for use outside data/. */
#ifndef TRAINYARD_WORKER_IMAGES_PRIV_H
#define TRAINYARD_WORKER_IMAGES_PRIV_H

#include "data/images.h"

/* job/job.h's enum job_format values, the codes images_load() takes. */
enum images_format {
    IMAGES_FMT_CSV = 0,
    IMAGES_FMT_CIFAR10 = 1,
    IMAGES_FMT_MNIST = 2,
    IMAGES_FMT_NPY = 3,
    IMAGES_FMT_NPZ = 4,
    IMAGES_FMT_FOLDERS = 5
};

/* A set of n images of h × w × c in dtype with room for its pixels and labels (contents
 * undefined) and no classes yet; what names the data in messages. -EINVAL for an empty set or a
 * dimension outside 1..IMAGES_MAX_DIM, -EFBIG past DATASET_MAX_VALUES, -ENOMEM. */
int images_set_new(size_t n, int h, int w, int c, int dtype, const char *what, image_set **out,
                   char *err);

/* Gives s n_classes classes named names[i] (copied), or "0", "1", ... when names is NULL. */
int images_set_classes(image_set *s, int n_classes, char *const *names, char *err);

/* Gives train and test (which may be NULL) the classes "0" .. the largest label of both; what
 * names the format in messages. -EINVAL for a label below 0 or past DATASET_MAX_CLASSES - 1. */
int images_labels_classes(image_set *train, image_set *test, const char *what, char *err);

/* strcmp() on two char * array elements, for qsort() and bsearch(). */
int images_strcmp(const void *a, const void *b);

/* The last path component of a '/'-separated path. */
const char *images_basename(const char *path);

/* Reads an image-folder tar (format 5); see images.h. */
int images_folder_load(const char *data, size_t len, image_set **out, char *err);

/* Reads an npz (format 4); see images.h. */
int npz_load(const char *data, size_t len, image_set **train, image_set **test, char *err);

/* Reads a tar of .npy files (format 3); see images.h. */
int npy_tar_load(const char *data, size_t len, image_set **train, image_set **test, char *err);

#endif
