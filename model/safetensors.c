/* safetensors: the F32 subset of the safetensors format (and I64 for writing), written atomically
 * and read with every number checked before it is used (see safetensors.h for the layout). The
 * reader lists I64 tensors (PyTorch's num_batches_tracked in our own model.safetensors) with
 * their shape and span, but not their values (data stays NULL).
 *
 * Writer. The header is built with jansson in the caller's tensor order ("__metadata__" first
 * when there is any), dumped compact, and padded with spaces so that 8 + N is a multiple of 8:
 * the data then starts 8-byte aligned, as the reference implementation writes it. Tensors are
 * laid out back to back in the order given. The bytes go to "<path>.tmp-XXXXXX" (mkostemp, same
 * directory, so the rename cannot cross file systems), which is fsync'd and renamed over path;
 * the directory is fsync'd too so the rename itself survives a crash. On any failure the
 * temporary file is removed and path is untouched. The file is given mode 0644, as any artifact
 * a person downloads or copies (mkostemp alone would leave it 0600).
 *
 * Reader. The whole file is read into one malloc'd buffer. Header length: 1..100,000,000 bytes
 * (the reference implementation's cap) and inside the file; the header is a JSON object
 * (jansson bounds its own recursion at 2048 levels); every entry but "__metadata__" is a tensor
 * {"dtype": "F32", "shape": [n >= 0, ...] (at most SAFETENSORS_MAX_DIMS), "data_offsets": [b, e]}
 * with e - b == 4 * product(shape), and the tensors, sorted by offset, must tile the data buffer
 * exactly: no gap, no overlap, nothing after the last. Then every tensor starts at a multiple of
 * 4 from the data's start; if the data's start in the buffer is not float-aligned (a foreign
 * writer that did not pad), the data is moved to the buffer's start.
 *
 * Byte order: the format is little-endian. On a big-endian host the writer swaps through a
 * bounce buffer and the reader swaps its copy in place; on little-endian hosts (x86, the
 * target) the bytes go straight through.
 *
 * Invariants of a safetensors_file: tensors[i].data points into buf (never past data_len);
 * names and metadata strings are borrowed from header; both live until safetensors_close(). */
#include "model/safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "util/err.h"
#include "util/json_out.h"

#define ST_MAX_HEADER 100000000u
#define ST_META_KEY   "__metadata__"

struct safetensors_file {
    unsigned char *buf; /* the file's bytes, owned */
    json_t *header;     /* the parsed header, owned; names and metadata borrow from it */
    size_t n;
    safetensors_tensor *tensors;
    size_t n_meta;
    safetensors_meta *meta;
};

static int st_host_big_endian(void)
{
    return __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__;
}

static void st_swap32(unsigned char *p, size_t n_words)
{
    for (size_t i = 0; i < n_words; i++, p += 4) {
        unsigned char t0 = p[0], t1 = p[1];
        p[0] = p[3];
        p[1] = p[2];
        p[2] = t1;
        p[3] = t0;
    }
}

/* Whether s (NUL-terminated) is valid UTF-8: shortest forms only, no surrogates, <= U+10FFFF. */
static int st_utf8_valid(const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        unsigned c = *p;
        size_t n;
        unsigned cp, min;
        if (c < 0x80) {
            p++;
            continue;
        } else if (c >= 0xC2 && c <= 0xDF) {
            n = 1, cp = c & 0x1F, min = 0x80;
        } else if (c >= 0xE0 && c <= 0xEF) {
            n = 2, cp = c & 0x0F, min = 0x800;
        } else if (c >= 0xF0 && c <= 0xF4) {
            n = 3, cp = c & 0x07, min = 0x10000;
        } else {
            return 0;
        }
        for (size_t i = 1; i <= n; i++) {
            if ((p[i] & 0xC0) != 0x80)
                return 0;
            cp = (cp << 6) | (p[i] & 0x3F);
        }
        if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
            return 0;
        p += n + 1;
    }
    return 1;
}

/* ---- writer ------------------------------------------------------------------------------ */

/* Elements of t, checking its shape; -EINVAL with a message on a bad shape or one whose byte
 * size does not fit a JSON integer. */
static int st_count(const safetensors_tensor *t, uint64_t *count, char *err)
{
    if (t->ndim < 0 || t->ndim > SAFETENSORS_MAX_DIMS)
        return err_set(err, -EINVAL, "tensor \"%s\" has %d dimensions; 0 to %d are supported",
                       t->name, t->ndim, SAFETENSORS_MAX_DIMS);
    uint64_t c = 1;
    for (int d = 0; d < t->ndim; d++) {
        if (t->shape[d] < 0)
            return err_set(err, -EINVAL, "tensor \"%s\" has a negative dimension (%" PRId64 ")",
                           t->name, t->shape[d]);
        uint64_t dim = (uint64_t)t->shape[d];
        if (dim != 0 && c > (uint64_t)INT64_MAX / 4 / dim)
            return err_set(err, -EINVAL, "tensor \"%s\" is too large", t->name);
        c *= dim;
    }
    *count = c;
    return 0;
}

/* Builds the header object (new reference in *out) and the data size. */
static int st_header_build(const safetensors_tensor *tensors, size_t n,
                           const safetensors_meta *meta, size_t n_meta, json_t **out,
                           uint64_t *data_len, char *err)
{
    int rc = 0;
    uint64_t offset = 0;
    json_t *root = json_object();
    if (!root) {
        rc = err_set(err, -ENOMEM, "out of memory building the safetensors header");
        goto out;
    }
    if (n_meta > 0) {
        json_t *m = json_object();
        if (json_object_set_new(root, ST_META_KEY, m) < 0) {
            rc = err_set(err, -ENOMEM, "out of memory building the safetensors header");
            goto out;
        }
        for (size_t i = 0; i < n_meta; i++) {
            const char *k = meta[i].key, *v = meta[i].value;
            if (!k || !v) {
                rc = err_set(err, -EINVAL, "metadata entry %zu has no %s", i, k ? "value" : "key");
                goto out;
            }
            if (!st_utf8_valid(k) || !st_utf8_valid(v)) {
                rc = err_set(err, -EINVAL, "metadata entry %zu is not valid UTF-8", i);
                goto out;
            }
            if (json_object_get(m, k)) {
                rc = err_set(err, -EINVAL, "metadata key \"%s\" is given twice", k);
                goto out;
            }
            if (json_object_set_new(m, k, json_string(v)) < 0) {
                rc = err_set(err, -ENOMEM, "out of memory building the safetensors header");
                goto out;
            }
        }
    }
    for (size_t i = 0; i < n; i++) {
        const safetensors_tensor *t = &tensors[i];
        if (!t->name || !t->name[0]) {
            rc = err_set(err, -EINVAL, "tensor %zu has an empty name", i);
            goto out;
        }
        if (!st_utf8_valid(t->name)) {
            rc = err_set(err, -EINVAL, "tensor %zu's name is not valid UTF-8", i);
            goto out;
        }
        if (strcmp(t->name, ST_META_KEY) == 0) {
            rc = err_set(err, -EINVAL, "\"%s\" is reserved and cannot name a tensor", ST_META_KEY);
            goto out;
        }
        if (json_object_get(root, t->name)) {
            rc = err_set(err, -EINVAL, "two tensors are named \"%s\"", t->name);
            goto out;
        }
        uint64_t count = 0;
        rc = st_count(t, &count, err);
        if (rc < 0)
            goto out;
        uint64_t size = t->dtype == SAFETENSORS_I64 ? 8 : 4;
        if (count > 0 && (t->dtype == SAFETENSORS_I64 ? !t->data_i64 : !t->data)) {
            rc = err_set(err, -EINVAL, "tensor \"%s\" has no data", t->name);
            goto out;
        }
        if (count * size > (uint64_t)INT64_MAX - offset) {
            rc = err_set(err, -EINVAL, "the tensors add up to more bytes than a file can hold");
            goto out;
        }
        /* Each *_set_new / append_new steals its value, even when it fails. */
        json_t *entry = json_object(), *shape = json_array(), *offs = json_array();
        const char *dtype = t->dtype == SAFETENSORS_I64 ? "I64" : "F32";
        int bad = json_object_set_new(entry, "dtype", json_string(dtype)) < 0;
        for (int d = 0; d < t->ndim; d++)
            bad |= json_array_append_new(shape, json_integer(t->shape[d])) < 0;
        bad |= json_object_set_new(entry, "shape", shape) < 0;
        bad |= json_array_append_new(offs, json_integer((json_int_t)offset)) < 0;
        bad |= json_array_append_new(offs, json_integer((json_int_t)(offset + count * size))) < 0;
        bad |= json_object_set_new(entry, "data_offsets", offs) < 0;
        bad |= json_object_set_new(root, t->name, entry) < 0;
        if (bad) {
            rc = err_set(err, -ENOMEM, "out of memory building the safetensors header");
            goto out;
        }
        offset += count * size;
    }
    *out = root;
    root = NULL;
    *data_len = offset;
out:
    json_decref(root);
    return rc;
}

static int st_write_all(int fd, const void *p, size_t len)
{
    const unsigned char *b = p;
    while (len > 0) {
        ssize_t w = write(fd, b, len);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            return -errno;
        b += w;
        len -= (size_t)w;
    }
    return 0;
}

/* Writes n floats little-endian. */
static int st_write_floats(int fd, const float *data, uint64_t n)
{
    if (!st_host_big_endian())
        return st_write_all(fd, data, (size_t)n * 4);
    unsigned char chunk[1 << 16];
    const unsigned char *src = (const unsigned char *)data;
    uint64_t left = n * 4;
    while (left > 0) {
        size_t k = left < sizeof chunk ? (size_t)left : sizeof chunk;
        memcpy(chunk, src, k);
        st_swap32(chunk, k / 4);
        int rc = st_write_all(fd, chunk, k);
        if (rc < 0)
            return rc;
        src += k;
        left -= k;
    }
    return 0;
}

/* Writes n 64-bit integers little-endian. */
static int st_write_i64(int fd, const int64_t *data, uint64_t n)
{
    for (uint64_t i = 0; i < n; i++) {
        unsigned char b[8];
        for (int j = 0; j < 8; j++)
            b[j] = (unsigned char)((uint64_t)data[i] >> (8 * j));
        int rc = st_write_all(fd, b, sizeof b);
        if (rc < 0)
            return rc;
    }
    return 0;
}

/* fsyncs the directory holding path, so a rename into it is durable. */
static int st_sync_dir(const char *path)
{
    const char *slash = strrchr(path, '/');
    char *dir = slash ? strndup(path, slash == path ? 1 : (size_t)(slash - path)) : strdup(".");
    if (!dir)
        return -ENOMEM;
    int rc = 0;
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) {
        rc = -errno;
        goto out;
    }
    if (fsync(fd) < 0)
        rc = -errno;
    close(fd);
out:
    free(dir);
    return rc;
}

int safetensors_write(const char *path, const safetensors_tensor *tensors, size_t n,
                      const safetensors_meta *meta, size_t n_meta, char *err)
{
    int rc = 0, fd = -1, renamed = 0;
    json_t *header = NULL;
    char *text = NULL, *tmp = NULL;
    unsigned char *head = NULL;
    uint64_t data_len = 0;
    size_t text_len = 0, padded = 0, path_len = 0;
    if (!path || !path[0] || (n > 0 && !tensors) || (n_meta > 0 && !meta)) {
        rc = err_set(err, -EINVAL, "safetensors_write: no path, or a count without its array");
        goto out;
    }
    rc = st_header_build(tensors, n, meta, n_meta, &header, &data_len, err);
    if (rc < 0)
        goto out;
    text = json_out_dumps(header, JSON_COMPACT);
    if (!text) {
        rc = err_set(err, -ENOMEM, "out of memory writing the safetensors header");
        goto out;
    }
    text_len = strlen(text);
    padded = (text_len + 7) & ~(size_t)7; /* 8 + padded is then a multiple of 8 */
    if (padded > ST_MAX_HEADER) {
        rc = err_set(err, -EINVAL, "the safetensors header would be %zu bytes; the limit is %u",
                     padded, ST_MAX_HEADER);
        goto out;
    }
    head = malloc(8 + padded);
    if (!head) {
        rc = err_set(err, -ENOMEM, "out of memory writing the safetensors header");
        goto out;
    }
    for (int i = 0; i < 8; i++)
        head[i] = (unsigned char)((uint64_t)padded >> (8 * i));
    memcpy(head + 8, text, text_len);
    memset(head + 8 + text_len, ' ', padded - text_len);

    path_len = strlen(path);
    tmp = malloc(path_len + sizeof ".tmp-XXXXXX");
    if (!tmp) {
        rc = err_set(err, -ENOMEM, "out of memory");
        goto out;
    }
    memcpy(tmp, path, path_len);
    memcpy(tmp + path_len, ".tmp-XXXXXX", sizeof ".tmp-XXXXXX");
    fd = mkostemp(tmp, O_CLOEXEC);
    if (fd < 0) {
        rc = err_set(err, -errno, "cannot create %s: %s", tmp, strerror(errno));
        free(tmp);
        tmp = NULL; /* nothing to unlink */
        goto out;
    }
    if (fchmod(fd, 0644) != 0) {
        rc = err_set(err, -errno, "cannot set the mode of %s: %s", tmp, strerror(errno));
        goto out;
    }
    rc = st_write_all(fd, head, 8 + padded);
    for (size_t i = 0; rc == 0 && i < n; i++) {
        uint64_t count = 0;
        st_count(&tensors[i], &count, NULL); /* checked while building the header */
        if (count > 0 && tensors[i].dtype == SAFETENSORS_I64)
            rc = st_write_i64(fd, tensors[i].data_i64, count);
        else if (count > 0)
            rc = st_write_floats(fd, tensors[i].data, count);
    }
    if (rc < 0) {
        rc = err_set(err, rc, "cannot write %s: %s", tmp, strerror(-rc));
        goto out;
    }
    if (fsync(fd) < 0) {
        rc = err_set(err, -errno, "cannot sync %s: %s", tmp, strerror(errno));
        goto out;
    }
    rc = close(fd);
    fd = -1;
    if (rc < 0) {
        rc = err_set(err, -errno, "cannot close %s: %s", tmp, strerror(errno));
        goto out;
    }
    if (rename(tmp, path) < 0) {
        rc = err_set(err, -errno, "cannot rename %s to %s: %s", tmp, path, strerror(errno));
        goto out;
    }
    renamed = 1;
    rc = st_sync_dir(path);
    if (rc < 0) {
        rc = err_set(err, rc, "wrote %s but cannot sync its directory: %s", path, strerror(-rc));
        goto out;
    }
out:
    if (fd >= 0)
        close(fd);
    if (tmp && !renamed)
        unlink(tmp);
    free(tmp);
    free(head);
    free(text);
    json_decref(header);
    return rc;
}

/* ---- reader ------------------------------------------------------------------------------ */

typedef struct st_span {
    uint64_t begin, end;
    size_t index;
} st_span;

static int st_span_cmp(const void *a, const void *b)
{
    const st_span *x = a, *y = b;
    if (x->begin != y->begin)
        return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end)
        return x->end < y->end ? -1 : 1;
    return 0;
}

/* A non-negative JSON integer, or -1. */
static int64_t st_uint(const json_t *v)
{
    if (!json_is_integer(v) || json_integer_value(v) < 0)
        return -1;
    return (int64_t)json_integer_value(v);
}

/* Checks one tensor entry and fills t (all but data) and its byte span. */
static int st_tensor_read(const char *name, const json_t *entry, uint64_t data_len,
                          safetensors_tensor *t, st_span *span, char *err)
{
    if (!json_is_object(entry))
        return err_set(err, -EINVAL, "tensor \"%s\": its entry is not a JSON object", name);
    const char *key;
    json_t *val;
    json_object_foreach ((json_t *)entry, key, val) {
        if (strcmp(key, "dtype") != 0 && strcmp(key, "shape") != 0 &&
            strcmp(key, "data_offsets") != 0)
            return err_set(err, -EINVAL, "tensor \"%s\": unknown field \"%s\"", name, key);
    }
    const json_t *dtype = json_object_get(entry, "dtype");
    const json_t *shape = json_object_get(entry, "shape");
    const json_t *offs = json_object_get(entry, "data_offsets");
    if (!json_is_string(dtype) || !json_is_array(shape) || !json_is_array(offs))
        return err_set(err, -EINVAL,
                       "tensor \"%s\": needs \"dtype\" (a string), \"shape\" and "
                       "\"data_offsets\" (arrays)",
                       name);
    int i64 = strcmp(json_string_value(dtype), "I64") == 0;
    if (strcmp(json_string_value(dtype), "F32") != 0 && !i64)
        return err_set(err, -EINVAL,
                       "tensor \"%s\": dtype %.32s is not supported; only F32 is (and I64, "
                       "listed without its values)",
                       name, json_string_value(dtype));
    uint64_t esize = i64 ? 8 : 4;
    size_t ndim = json_array_size(shape);
    if (ndim > SAFETENSORS_MAX_DIMS)
        return err_set(err, -EINVAL, "tensor \"%s\": %zu dimensions; at most %d are supported",
                       name, ndim, SAFETENSORS_MAX_DIMS);
    /* count stays <= data_len / 4 unless a dimension is 0, so it cannot overflow. */
    uint64_t count = 1;
    int zero = 0, too_big = 0;
    for (size_t d = 0; d < ndim; d++) {
        int64_t dim = st_uint(json_array_get(shape, d));
        if (dim < 0)
            return err_set(err, -EINVAL, "tensor \"%s\": shape[%zu] is not a non-negative integer",
                           name, d);
        t->shape[d] = dim;
        if (dim == 0)
            zero = 1;
        else if (!too_big && count > data_len / esize / (uint64_t)dim)
            too_big = 1;
        else if (!too_big)
            count *= (uint64_t)dim;
    }
    if (zero)
        count = 0;
    else if (too_big)
        return err_set(err, -EINVAL, "tensor \"%s\": its shape needs more bytes than the file has",
                       name);
    int64_t b = json_array_size(offs) == 2 ? st_uint(json_array_get(offs, 0)) : -1;
    int64_t e = json_array_size(offs) == 2 ? st_uint(json_array_get(offs, 1)) : -1;
    if (b < 0 || e < 0 || b > e)
        return err_set(err, -EINVAL,
                       "tensor \"%s\": data_offsets must be [begin, end] with 0 <= begin <= end",
                       name);
    if ((uint64_t)e > data_len)
        return err_set(err, -EINVAL,
                       "tensor \"%s\": data_offsets [%" PRId64 ", %" PRId64
                       "] run past the data's %" PRIu64 " bytes",
                       name, b, e, data_len);
    if ((uint64_t)(e - b) != count * esize)
        return err_set(err, -EINVAL,
                       "tensor \"%s\": data_offsets span %" PRId64
                       " bytes but its shape needs %" PRIu64,
                       name, e - b, count * esize);
    t->name = name;
    t->dtype = i64 ? SAFETENSORS_I64 : SAFETENSORS_F32;
    t->ndim = (int)ndim;
    span->begin = (uint64_t)b;
    span->end = (uint64_t)e;
    return 0;
}

/* Reads the "__metadata__" object into f->meta. */
static int st_meta_read(safetensors_file *f, const json_t *m, char *err)
{
    if (!json_is_object(m))
        return err_set(err, -EINVAL, "\"%s\" is not a JSON object", ST_META_KEY);
    f->meta = calloc(json_object_size(m) + 1, sizeof *f->meta);
    if (!f->meta)
        return err_set(err, -ENOMEM, "out of memory reading safetensors metadata");
    const char *key;
    json_t *val;
    json_object_foreach ((json_t *)m, key, val) {
        if (!json_is_string(val))
            return err_set(err, -EINVAL, "metadata \"%s\" is not a string", key);
        f->meta[f->n_meta].key = key;
        f->meta[f->n_meta].value = json_string_value(val);
        f->n_meta++;
    }
    return 0;
}

/* Checks that the spans tile [0, data_len) exactly. */
static int st_check_tiling(const safetensors_file *f, st_span *spans, uint64_t data_len, char *err)
{
    qsort(spans, f->n, sizeof *spans, st_span_cmp);
    uint64_t at = 0;
    for (size_t i = 0; i < f->n; i++) {
        const char *name = f->tensors[spans[i].index].name;
        if (spans[i].begin < at)
            return err_set(err, -EINVAL, "tensor \"%s\" overlaps tensor \"%s\"", name,
                           f->tensors[spans[i - 1].index].name);
        if (spans[i].begin > at)
            return err_set(err, -EINVAL,
                           "data bytes %" PRIu64 " to %" PRIu64 " belong to no tensor", at,
                           spans[i].begin);
        at = spans[i].end;
    }
    if (at != data_len)
        return err_set(err, -EINVAL, "%" PRIu64 " bytes after the last tensor belong to none",
                       data_len - at);
    return 0;
}

/* Parses buf (len bytes; taken over: freed on failure, owned by *out on success). */
static int st_parse_owned(unsigned char *buf, size_t len, safetensors_file **out, char *err)
{
    int rc = 0;
    st_span *spans = NULL;
    safetensors_file *f = calloc(1, sizeof *f);
    if (!f) {
        free(buf);
        return err_set(err, -ENOMEM, "out of memory reading safetensors");
    }
    f->buf = buf;
    if (len < 8) {
        rc = err_set(err, -EINVAL, "%zu bytes is too short for a safetensors file", len);
        goto out;
    }
    uint64_t n_header = 0;
    for (int i = 0; i < 8; i++)
        n_header |= (uint64_t)buf[i] << (8 * i);
    if (n_header == 0 || n_header > ST_MAX_HEADER) {
        rc = err_set(err, -EINVAL, "header length %" PRIu64 " is not between 1 and %u", n_header,
                     ST_MAX_HEADER);
        goto out;
    }
    if (n_header > len - 8) {
        rc = err_set(err, -EINVAL,
                     "header length %" PRIu64 " runs past the end of the file (%zu bytes)",
                     n_header, len);
        goto out;
    }
    if (buf[8] != '{') {
        rc = err_set(err, -EINVAL, "the header does not start with '{'");
        goto out;
    }
    json_error_t jerr;
    f->header = json_loadb((const char *)buf + 8, (size_t)n_header, JSON_REJECT_DUPLICATES, &jerr);
    if (!f->header) {
        /* jansson 2.14 sets no error (line -1) when json_object() or json_array() fails while
         * parsing; every real syntax error has a position. */
        if (json_error_code(&jerr) == json_error_out_of_memory || jerr.line < 0) {
            rc = err_set(err, -ENOMEM, "out of memory reading the safetensors header");
            goto out;
        }
        rc = err_set(err, -EINVAL, "the header is not valid JSON: %s (at byte %d)", jerr.text,
                     jerr.position);
        goto out;
    }
    if (!json_is_object(f->header)) {
        rc = err_set(err, -EINVAL, "the header is not a JSON object");
        goto out;
    }
    size_t data_start = 8 + (size_t)n_header;
    uint64_t data_len = len - data_start;
    size_t entries = json_object_size(f->header);
    f->tensors = calloc(entries + 1, sizeof *f->tensors);
    spans = calloc(entries + 1, sizeof *spans);
    if (!f->tensors || !spans) {
        rc = err_set(err, -ENOMEM, "out of memory reading safetensors");
        goto out;
    }
    const char *key;
    json_t *val;
    json_object_foreach (f->header, key, val) {
        if (strcmp(key, ST_META_KEY) == 0) {
            rc = st_meta_read(f, val, err);
        } else {
            rc = st_tensor_read(key, val, data_len, &f->tensors[f->n], &spans[f->n], err);
            spans[f->n].index = f->n;
            f->n++;
        }
        if (rc < 0)
            goto out;
    }
    rc = st_check_tiling(f, spans, data_len, err);
    if (rc < 0)
        goto out;
    /* Tensors start at multiples of 4 from the data's start; make that start float-aligned. */
    unsigned char *data = buf + data_start;
    if ((uintptr_t)data % _Alignof(float) != 0) {
        memmove(buf, data, (size_t)data_len);
        data = buf;
    }
    if (st_host_big_endian())
        st_swap32(data, (size_t)data_len / 4);
    /* spans are sorted by offset now; each remembers its tensor's index. */
    for (size_t i = 0; i < f->n; i++)
        if (f->tensors[spans[i].index].dtype == SAFETENSORS_F32)
            f->tensors[spans[i].index].data = (const float *)(const void *)(data + spans[i].begin);
    *out = f;
    f = NULL;
out:
    free(spans);
    safetensors_close(f);
    return rc;
}

int safetensors_parse(const void *bytes, size_t len, safetensors_file **out, char *err)
{
    if (!bytes && len > 0)
        return err_set(err, -EINVAL, "safetensors_parse: no bytes");
    unsigned char *copy = malloc(len ? len : 1);
    if (!copy)
        return err_set(err, -ENOMEM, "out of memory copying %zu bytes", len);
    if (len > 0)
        memcpy(copy, bytes, len);
    return st_parse_owned(copy, len, out, err);
}

int safetensors_open(const char *path, safetensors_file **out, char *err)
{
    int rc = 0;
    unsigned char *buf = NULL;
    char why[ERR_LEN];
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        rc = err_set(err, -errno, "cannot open %s: %s", path, strerror(errno));
        goto out;
    }
    struct stat st;
    if (fstat(fd, &st) < 0) {
        rc = err_set(err, -errno, "cannot stat %s: %s", path, strerror(errno));
        goto out;
    }
    if (!S_ISREG(st.st_mode)) {
        rc = err_set(err, -EINVAL, "%s is not a regular file", path);
        goto out;
    }
    size_t len = (size_t)st.st_size;
    buf = malloc(len ? len : 1);
    if (!buf) {
        rc = err_set(err, -ENOMEM, "out of memory reading %s (%zu bytes)", path, len);
        goto out;
    }
    size_t got = 0;
    while (got < len) {
        ssize_t r = read(fd, buf + got, len - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            rc = err_set(err, -errno, "cannot read %s: %s", path, strerror(errno));
            goto out;
        }
        if (r == 0) {
            rc = err_set(err, -EIO, "%s shrank while being read", path);
            goto out;
        }
        got += (size_t)r;
    }
    rc = st_parse_owned(buf, len, out, why);
    buf = NULL; /* taken over */
    if (rc < 0)
        err_set(err, rc, "%s: %s", path, why);
out:
    if (fd >= 0)
        close(fd);
    free(buf);
    return rc;
}

size_t safetensors_count(const safetensors_file *f)
{
    return f ? f->n : 0;
}

const safetensors_tensor *safetensors_at(const safetensors_file *f, size_t i)
{
    return f && i < f->n ? &f->tensors[i] : NULL;
}

const safetensors_tensor *safetensors_find(const safetensors_file *f, const char *name)
{
    for (size_t i = 0; f && name && i < f->n; i++) {
        if (strcmp(f->tensors[i].name, name) == 0)
            return &f->tensors[i];
    }
    return NULL;
}

const char *safetensors_meta_get(const safetensors_file *f, const char *key)
{
    for (size_t i = 0; f && key && i < f->n_meta; i++) {
        if (strcmp(f->meta[i].key, key) == 0)
            return f->meta[i].value;
    }
    return NULL;
}

void safetensors_close(safetensors_file *f)
{
    if (!f)
        return;
    free(f->tensors);
    free(f->meta);
    json_decref(f->header);
    free(f->buf);
    free(f);
}
