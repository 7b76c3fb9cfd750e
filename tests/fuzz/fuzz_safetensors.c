/* fuzz_safetensors: libFuzzer target for the safetensors reader and writer
 * (model/safetensors.c).
 *
 * Byte 0, bit 0 chooses the mode; the rest of the input feeds it.
 * (a) Parse: the bytes are a file for safetensors_parse(), which must fail cleanly or hand out
 *     tensors whose every float can be read (ASan checks the bounds) and metadata strings.
 * (b) Round trip: the bytes describe up to 3 tensors (name, up to 4 dimensions of 0..4, data
 *     taken raw from the input, so NaNs and odd bit patterns too) and up to 3 metadata pairs;
 *     safetensors_write() puts them in a file in a per-process temporary directory, and when it
 *     accepts them (it refuses duplicate or invalid names, which the input may produce)
 *     safetensors_open() must read every tensor back with the same name, order, shape and bits,
 *     and every metadata value. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/err.h"
#include "model/safetensors.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char fuzz_dir[256];
static char fuzz_path[300];

static void fuzz_cleanup(void)
{
    unlink(fuzz_path);
    rmdir(fuzz_dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(fuzz_dir, sizeof fuzz_dir, "%s/fuzz-safetensors-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(fuzz_dir)) {
        perror("fuzz_safetensors: mkdtemp");
        exit(1);
    }
    snprintf(fuzz_path, sizeof fuzz_path, "%s/t.safetensors", fuzz_dir);
    atexit(fuzz_cleanup);
    return 0;
}

static void fuzz_fail(const char *what, const char *detail)
{
    fprintf(stderr, "fuzz_safetensors: %s%s%s\n", what, detail ? ": " : "", detail ? detail : "");
    abort();
}

/* A cursor over the input; reads past its end give zeros. */
typedef struct fuzz_in {
    const uint8_t *p;
    size_t n;
} fuzz_in;

static uint8_t fuzz_byte(fuzz_in *in)
{
    if (in->n == 0)
        return 0;
    in->n--;
    return *in->p++;
}

/* A NUL-terminated string of up to 15 bytes (NULs in the input end it early) into buf[16]. */
static char *fuzz_string(fuzz_in *in, char *buf)
{
    size_t len = fuzz_byte(in) & 15;
    for (size_t i = 0; i < len; i++)
        buf[i] = (char)fuzz_byte(in);
    buf[len] = '\0';
    return buf;
}

static void fuzz_parse(const uint8_t *data, size_t size)
{
    safetensors_file *f = NULL;
    char err[ERR_LEN] = "";
    if (safetensors_parse(data, size, &f, err) < 0) {
        if (!err[0] || f)
            fuzz_fail("a failure without a message, or with a file", NULL);
        return;
    }
    volatile float sink = 0;
    for (size_t i = 0; i < safetensors_count(f); i++) {
        const safetensors_tensor *t = safetensors_at(f, i);
        uint64_t count = 1;
        if (t->ndim < 0 || t->ndim > SAFETENSORS_MAX_DIMS)
            fuzz_fail("bad ndim", t->name);
        for (int d = 0; d < t->ndim; d++)
            count *= (uint64_t)t->shape[d];
        if (t->dtype == SAFETENSORS_I64 ? t->data || t->data_i64 : count && !t->data)
            fuzz_fail("values where the reader gives none, or none where it must", t->name);
        for (uint64_t k = 0; t->dtype == SAFETENSORS_F32 && k < count; k++)
            sink += t->data[k]; /* the reader keeps no values of an I64 tensor (safetensors.h) */
        if (safetensors_find(f, t->name) != t)
            fuzz_fail("safetensors_find does not find", t->name);
    }
    (void)sink;
    safetensors_close(f);
}

#define FUZZ_MAX_T 3

static void fuzz_round_trip(const uint8_t *data, size_t size)
{
    fuzz_in in = {data, size};
    safetensors_tensor t[FUZZ_MAX_T];
    safetensors_meta m[FUZZ_MAX_T];
    char names[FUZZ_MAX_T][16], keys[FUZZ_MAX_T][16], values[FUZZ_MAX_T][16];
    float *buf[FUZZ_MAX_T] = {NULL};
    size_t counts[FUZZ_MAX_T];
    uint8_t shape = fuzz_byte(&in);
    size_t n = shape % (FUZZ_MAX_T + 1), n_meta = (shape >> 2) % (FUZZ_MAX_T + 1);
    for (size_t i = 0; i < n; i++) {
        memset(&t[i], 0, sizeof t[i]);
        t[i].name = fuzz_string(&in, names[i]);
        t[i].ndim = fuzz_byte(&in) % 5;
        size_t count = 1;
        for (int d = 0; d < t[i].ndim; d++) {
            t[i].shape[d] = fuzz_byte(&in) % 5;
            count *= (size_t)t[i].shape[d];
        }
        counts[i] = count;
        buf[i] = malloc(count ? count * sizeof(float) : 1);
        if (!buf[i])
            abort();
        for (size_t k = 0; k < count * sizeof(float); k++)
            ((uint8_t *)buf[i])[k] = fuzz_byte(&in);
        t[i].data = count ? buf[i] : NULL;
    }
    for (size_t i = 0; i < n_meta; i++) {
        m[i].key = fuzz_string(&in, keys[i]);
        m[i].value = fuzz_string(&in, values[i]);
    }
    char err[ERR_LEN] = "";
    int rc = safetensors_write(fuzz_path, t, n, m, n_meta, err);
    if (rc < 0) {
        if (rc != -EINVAL || !err[0])
            fuzz_fail("the writer failed other than on bad input", err);
        if (access(fuzz_path, F_OK) == 0)
            fuzz_fail("a failed write left a file", NULL);
        goto out;
    }
    safetensors_file *f = NULL;
    rc = safetensors_open(fuzz_path, &f, err);
    if (rc < 0)
        fuzz_fail("the reader refused what the writer wrote", err);
    if (safetensors_count(f) != n)
        fuzz_fail("the tensor count changed", NULL);
    for (size_t i = 0; i < n; i++) {
        const safetensors_tensor *r = safetensors_at(f, i);
        if (strcmp(r->name, t[i].name) != 0)
            fuzz_fail("a name or the order changed", t[i].name);
        if (r->ndim != t[i].ndim ||
            memcmp(r->shape, t[i].shape, (size_t)t[i].ndim * sizeof r->shape[0]) != 0)
            fuzz_fail("a shape changed", t[i].name);
        if (counts[i] && memcmp(r->data, t[i].data, counts[i] * sizeof(float)) != 0)
            fuzz_fail("data changed", t[i].name);
    }
    for (size_t i = 0; i < n_meta; i++) {
        const char *v = safetensors_meta_get(f, m[i].key);
        if (!v || strcmp(v, m[i].value) != 0)
            fuzz_fail("a metadata value changed", m[i].key);
    }
    safetensors_close(f);
    if (unlink(fuzz_path) < 0)
        fuzz_fail("cannot remove the file", fuzz_path);
out:
    for (size_t i = 0; i < n; i++)
        free(buf[i]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    if (data[0] & 1)
        fuzz_round_trip(data + 1, size - 1);
    else
        fuzz_parse(data + 1, size - 1);
    return 0;
}
