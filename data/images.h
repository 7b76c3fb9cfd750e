/* images: image datasets as the trainer consumes them: n images of h × w × c, NHWC, uint8 or
 * float32, one class label each, parsed from the bytes fetch_url() delivered (a gzip download is
 * already gunzipped, so a .tar.gz arrives as a tar).
 *
 * Formats (the format argument takes job/job.h's enum job_format values; CSV is not read here):
 * - CIFAR-10 binary (1): one data file of 3073-byte records (a label byte, then the 1024 red,
 *   1024 green and 1024 blue bytes of a 32×32 image, row-major), or a tar holding
 *   data_batch_*.bin (the training set, in name order) and optionally test_batch.bin (the test
 *   set) in any folder; batches.meta.txt, when there, names the 10 classes (one a line).
 *   Labels must be < 10.
 * - MNIST IDX (2): a tar holding train-images-idx3-ubyte and train-labels-idx1-ubyte (and
 *   t10k-images-idx3-ubyte / t10k-labels-idx1-ubyte as the test set), each possibly gzipped
 *   inside the tar (a ".gz" name). A bare IDX file is not read: the images and their labels are
 *   two files, and a URL names one. Classes: one per label value, 0 .. the largest label.
 * - NumPy .npy (3): a tar holding the same arrays as npz below, as .npy files in any folder
 *   (x.npy and y.npy, or x_train.npy ...). A lone .npy is refused: one array has no labels.
 * - NumPy .npz (4): a zip (stored or deflated members, no zip64) holding x.npy and y.npy, or
 *   x_train.npy and y_train.npy (and x_test.npy / y_test.npy as the test set). x: uint8 ('|u1')
 *   or float32 ('<f4'), C order, shape (n, h, w) (then c = 1) or (n, h, w, c); y: integers
 *   ('|u1', '|i1', '<i2', '<u2', '<i4', '<u4', '<i8', '<u8') of shape (n,) or (n, 1), each
 *   >= 0. Float32 pixels must be finite and are kept as they are (not rescaled). Classes:
 *   0 .. the largest label over both sets.
 * - Image folders (5): a tar of PNG and JPEG files (by their .png, .jpg or .jpeg ending, any
 *   case; other files and names starting with '.' are skipped), each in a folder named after
 *   its class (the file's parent folder: "cats/1.png", "data/cats/1.png"; two folders of one
 *   name are one class). Classes are the folder names in byte order. PNG: grey, grey + alpha, RGB,
 * RGBA and palette images, 1 to 16 bits; alpha is dropped (not composited), palettes expand to RGB,
 * 16 bits scale to 8. JPEG: greyscale (c = 1) or colour (c = 3); CMYK is refused. Every image must
 * have the first one's h × w × c. No test set.
 *
 * Limits: h, w and c at most IMAGES_MAX_DIM; n × h × w × c at most DATASET_MAX_VALUES;
 * at most DATASET_MAX_CLASSES classes.
 *
 * Ownership: images_load() gives the caller *train and *test, each freed with
 * image_set_free(); each owns its pixels, labels and class names. */
#ifndef TRAINYARD_WORKER_IMAGES_H
#define TRAINYARD_WORKER_IMAGES_H

#include <stddef.h>
#include <stdint.h>

#define IMAGES_MAX_DIM 4096

enum images_dtype { IMAGES_U8 = 0, IMAGES_F32 = 1 };

typedef struct image_set {
    size_t n;
    int h, w, c;
    int dtype;       /* enum images_dtype */
    void *pixels;    /* n × h × w × c, NHWC */
    int32_t *labels; /* n, each in [0, n_classes) */
    int n_classes;
    char **class_names; /* n_classes strings ("0".."9" for CIFAR/MNIST unless names known,
                           folder names for image folders) */
} image_set;

/* Parses bytes (as fetch_url delivered them: already gunzipped when they were gzip) in the
 * given job format into the training set and, when the data carries one (CIFAR's
 * test_batch.bin, MNIST's t10k files, npz x_test/y_test), the test set (*test NULL when not).
 * Errors name what is wrong: file, record, expected vs got. -EINVAL bad data, -EFBIG too big,
 * -ENOMEM. */
int images_load(const char *data, size_t len, int format, image_set **train, image_set **test,
                char *err);

/* Releases a set; accepts NULL. */
void image_set_free(image_set *s);

#endif
