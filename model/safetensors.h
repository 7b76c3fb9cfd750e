/* safetensors: writer and reader of the safetensors format for F32 tensors (the writer also
 * takes I64 ones).
 *
 * Layout: an 8-byte little-endian header length N, then N bytes of JSON
 * {"__metadata__": {str: str}, "<name>": {"dtype": "F32", "shape": [...],
 * "data_offsets": [begin, end]}, ...} padded with spaces to a multiple of 8, then the raw
 * little-endian data. Offsets are relative to the end of the header. Files are written to a
 * temporary name and renamed, so a reader never sees half a file.
 *
 * Ownership: a safetensors_file owns its bytes; tensors' data and metadata strings borrowed from
 * it live until safetensors_close(), which accepts NULL. */
#ifndef TRAINYARD_WORKER_SAFETENSORS_H
#define TRAINYARD_WORKER_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#define SAFETENSORS_MAX_DIMS 8

/* Element types. The writer takes both; the reader F32, and I64 tensors (PyTorch's batchnorm
 * counter) with dtype set and no values (data and data_i64 NULL). */
enum safetensors_dtype { SAFETENSORS_F32 = 0, SAFETENSORS_I64 = 1 };

typedef struct safetensors_tensor {
    const char *name;
    int ndim;
    int64_t shape[SAFETENSORS_MAX_DIMS];
    const float *data;       /* F32, product(shape) elements */
    int dtype;               /* enum safetensors_dtype; 0 (F32) unless set */
    const int64_t *data_i64; /* I64 data (writer only), product(shape) elements */
} safetensors_tensor;

typedef struct safetensors_meta {
    const char *key;
    const char *value;
} safetensors_meta;

typedef struct safetensors_file safetensors_file;

/* Writes n tensors and n_meta metadata pairs to path (atomically). */
int safetensors_write(const char *path, const safetensors_tensor *tensors, size_t n,
                      const safetensors_meta *meta, size_t n_meta, char *err);
/* Reads and validates a whole file (F32 tensors, and I64 ones without values; offsets in bounds,
 * contiguous, no overlap). */
int safetensors_open(const char *path, safetensors_file **out, char *err);
/* The same from bytes in memory (copied). */
int safetensors_parse(const void *bytes, size_t len, safetensors_file **out, char *err);
/* Number of tensors and the i-th (in file order). */
size_t safetensors_count(const safetensors_file *f);
const safetensors_tensor *safetensors_at(const safetensors_file *f, size_t i);
/* The tensor named name, or NULL. */
const safetensors_tensor *safetensors_find(const safetensors_file *f, const char *name);
/* The metadata value for key, or NULL. */
const char *safetensors_meta_get(const safetensors_file *f, const char *key);
/* Releases a file; accepts NULL. */
void safetensors_close(safetensors_file *f);

#endif
