/* npz: NumPy's .npz archives (a zip of .npy files, as numpy.savez and numpy.savez_compressed
 * write them), and tars of .npy files (format npy), into image sets; see images.h for what is
 * accepted. Both find the same members by name and share everything after that.
 *
 * Zip: the end-of-central-directory record is found by scanning back from the end (over at most
 * a 65535-byte comment); each central-directory entry gives a member's method, CRC-32, sizes and
 * local header offset. Sizes are taken from the central directory, never from a local header:
 * numpy writes its members with force_zip64, whose local headers hold 0xFFFFFFFF sizes and a
 * zip64 extra field, while the central directory holds the real ones for members under 4 GiB.
 * A central directory that needs zip64 itself (a member or archive over 4 GiB, more than 65535
 * members) is refused, and so are encryption, multi-disk archives and methods other than
 * stored (0) and deflate (8). Every member read has its CRC-32 checked.
 *
 * NPY (format versions 1, 2 and 3): "\x93NUMPY", major, minor, the header length (2 bytes in
 * version 1, else 4, little-endian), then a Python dict literal with 'descr', 'fortran_order'
 * and 'shape', then the data, whose length must be exactly the shape's product × the item size.
 *
 * A deflated x member is inflated once and its buffer becomes the set's pixels (the data moved
 * to its start), so a compressed archive costs its inflated size once, not twice. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "util/err.h"
#include "data/dataset.h"
#include "data/images_priv.h"
#include "data/tar.h"
#include "data/zinflate.h"

#define NPY_MAX_DIMS 8

/* ---- zip ----------------------------------------------------------------------------------- */

/* The members npz_load() reads, by name. */
enum { NPZ_X, NPZ_Y, NPZ_X_TRAIN, NPZ_Y_TRAIN, NPZ_X_TEST, NPZ_Y_TEST, NPZ_MEMBERS };
static const char *const npz_names[NPZ_MEMBERS] = {"x.npy",       "y.npy",      "x_train.npy",
                                                   "y_train.npy", "x_test.npy", "y_test.npy"};

/* A member as the central directory describes it. */
typedef struct zip_member {
    int found, method, has_crc; /* has_crc: 0 for a tar member (tar keeps no checksum) */
    uint32_t crc;
    size_t comp, size;
    const char *data; /* its compressed bytes, in the archive */
} zip_member;

static uint32_t le32(const char *p)
{
    const unsigned char *u = (const unsigned char *)p;
    return (uint32_t)u[0] | (uint32_t)u[1] << 8 | (uint32_t)u[2] << 16 | (uint32_t)u[3] << 24;
}

static uint16_t le16(const char *p)
{
    const unsigned char *u = (const unsigned char *)p;
    return (uint16_t)(u[0] | u[1] << 8);
}

/* Appends name to the list of other members shown in an error (at most about 200 bytes). */
static void zip_note_other(char *others, const char *name, size_t n)
{
    size_t used = strlen(others);
    if (used > 200)
        return;
    snprintf(others + used, 256 - used, "%s%.*s", used ? ", " : "", (int)(n > 64 ? 64 : n), name);
    if (strlen(others) > 200)
        snprintf(others + 200, 56, ", ...");
}

/* Reads the central directory into m[NPZ_MEMBERS]; others lists the names not wanted. */
static int zip_read(const char *d, size_t len, zip_member *m, char *others, char *err)
{
    if (len < 22)
        return err_set(err, -EINVAL, "not an npz (zip) archive: %zu bytes", len);
    size_t eocd = len - 22, stop = len - 22 > 65535 ? len - 22 - 65535 : 0;
    while (le32(d + eocd) != 0x06054b50u) {
        if (eocd == stop)
            return err_set(err, -EINVAL,
                           "not an npz (zip) archive: no end of central directory record");
        eocd--;
    }
    uint16_t disk = le16(d + eocd + 4), cd_disk = le16(d + eocd + 6);
    uint16_t entries = le16(d + eocd + 10);
    uint32_t cd_size = le32(d + eocd + 12), cd_off = le32(d + eocd + 16);
    if (entries == 0xFFFF || cd_size == 0xFFFFFFFFu || cd_off == 0xFFFFFFFFu)
        return err_set(err, -EINVAL,
                       "zip64 npz archives are not read (over 4 GiB or 65535 "
                       "members)");
    if (disk != 0 || cd_disk != 0)
        return err_set(err, -EINVAL, "multi-disk zip archives are not read");
    if (cd_off > eocd || cd_size > eocd - cd_off)
        return err_set(err, -EINVAL, "bad npz archive: the central directory lies outside it");
    size_t p = cd_off, end = (size_t)cd_off + cd_size;
    for (uint16_t i = 0; i < entries; i++) {
        if (end - p < 46 || le32(d + p) != 0x02014b50u)
            return err_set(err, -EINVAL, "bad npz archive: central directory entry %u is broken",
                           i + 1);
        uint16_t flags = le16(d + p + 8), method = le16(d + p + 10);
        uint32_t comp = le32(d + p + 20), size = le32(d + p + 24), local = le32(d + p + 42);
        size_t nlen = le16(d + p + 28), elen = le16(d + p + 30), clen = le16(d + p + 32);
        if (end - p - 46 < nlen + elen + clen)
            return err_set(err, -EINVAL, "bad npz archive: central directory entry %u is broken",
                           i + 1);
        const char *name = d + p + 46;
        int k = 0;
        while (k < NPZ_MEMBERS &&
               !(strlen(npz_names[k]) == nlen && memcmp(npz_names[k], name, nlen) == 0))
            k++;
        uint32_t crc = le32(d + p + 16);
        p += 46 + nlen + elen + clen;
        if (k == NPZ_MEMBERS) {
            zip_note_other(others, name, nlen);
            continue;
        }
        if (m[k].found)
            return err_set(err, -EINVAL, "the npz holds two %s members", npz_names[k]);
        if (flags & 1)
            return err_set(err, -EINVAL, "npz member %s is encrypted", npz_names[k]);
        if (method != 0 && method != 8)
            return err_set(err, -EINVAL,
                           "npz member %s uses compression method %u; only stored (0) and "
                           "deflate (8) are read",
                           npz_names[k], method);
        if (comp == 0xFFFFFFFFu || size == 0xFFFFFFFFu || local == 0xFFFFFFFFu)
            return err_set(err, -EINVAL, "npz member %s needs zip64 (over 4 GiB), not read",
                           npz_names[k]);
        if (local > len || len - local < 30 || le32(d + local) != 0x04034b50u)
            return err_set(err, -EINVAL, "bad npz archive: member %s has no local header",
                           npz_names[k]);
        size_t data_at = (size_t)local + 30 + le16(d + local + 26) + le16(d + local + 28);
        if (data_at > len || len - data_at < comp)
            return err_set(err, -EINVAL, "truncated npz archive: member %s runs past its end",
                           npz_names[k]);
        if (method == 0 && comp != size)
            return err_set(err, -EINVAL, "bad npz archive: stored member %s has sizes %u and %u",
                           npz_names[k], comp, size);
        m[k] = (zip_member){1, method, 1, crc, comp, size, d + data_at};
    }
    return 0;
}

/* A member's bytes: a view into the archive (stored), or *owned (inflated). CRC checked. */
static int zip_member_bytes(const zip_member *m, int k, const char **out, char **owned, char *err)
{
    const char *b = m->data;
    *owned = NULL;
    if (m->method == 8) {
        int rc = zinflate_exact(m->data, m->comp, ZINFLATE_RAW, m->size, npz_names[k], owned, err);
        if (rc < 0)
            return rc;
        b = *owned;
    }
    if (m->has_crc && crc32(0, (const Bytef *)b, (uInt)m->size) != m->crc) {
        free(*owned);
        *owned = NULL;
        return err_set(err, -EINVAL, "npz member %s fails its CRC-32 check", npz_names[k]);
    }
    *out = b;
    return 0;
}

/* ---- npy ----------------------------------------------------------------------------------- */

typedef struct npy_array {
    char kind; /* 'u', 'i', 'f' (others refused before) */
    int size;  /* bytes per item */
    char descr[16];
    int ndim;
    uint64_t shape[NPY_MAX_DIMS];
    const char *data;
    size_t len; /* bytes of data */
} npy_array;

static const char *npy_ws(const char *p, const char *e)
{
    while (p < e && (*p == ' ' || *p == '\t' || *p == '\n'))
        p++;
    return p;
}

/* A quoted Python string at *p into out[cap]; advances *p. */
static int npy_str(const char **p, const char *e, char *out, size_t cap)
{
    const char *s = *p;
    if (s >= e || (*s != '\'' && *s != '"'))
        return -1;
    char q = *s++;
    const char *t = memchr(s, q, (size_t)(e - s));
    if (!t || (size_t)(t - s) >= cap)
        return -1;
    memcpy(out, s, (size_t)(t - s));
    out[t - s] = '\0';
    *p = t + 1;
    return 0;
}

/* The header dict; fills kind/size/descr, ndim/shape; *fortran gets fortran_order. */
static int npy_dict(const char *p, const char *e, npy_array *a, int *fortran)
{
    int seen = 0;
    p = npy_ws(p, e);
    if (p >= e || *p++ != '{')
        return -1;
    for (;;) {
        char key[32];
        p = npy_ws(p, e);
        if (p < e && *p == '}')
            break;
        if (npy_str(&p, e, key, sizeof key) < 0)
            return -1;
        p = npy_ws(p, e);
        if (p >= e || *p++ != ':')
            return -1;
        p = npy_ws(p, e);
        if (strcmp(key, "descr") == 0) {
            if (npy_str(&p, e, a->descr, sizeof a->descr) < 0)
                return -1;
            seen |= 1;
        } else if (strcmp(key, "fortran_order") == 0) {
            if (e - p >= 4 && memcmp(p, "True", 4) == 0) {
                *fortran = 1;
                p += 4;
            } else if (e - p >= 5 && memcmp(p, "False", 5) == 0) {
                *fortran = 0;
                p += 5;
            } else {
                return -1;
            }
            seen |= 2;
        } else if (strcmp(key, "shape") == 0) {
            if (p >= e || *p++ != '(')
                return -1;
            a->ndim = 0;
            for (;;) {
                p = npy_ws(p, e);
                if (p < e && *p == ')')
                    break;
                if (p >= e || *p < '0' || *p > '9' || a->ndim == NPY_MAX_DIMS)
                    return -1;
                uint64_t v = 0;
                while (p < e && *p >= '0' && *p <= '9') {
                    if (v > UINT64_MAX / 10 - 9)
                        return -1;
                    v = v * 10 + (uint64_t)(*p++ - '0');
                }
                a->shape[a->ndim++] = v;
                p = npy_ws(p, e);
                if (p < e && *p == ',')
                    p++;
                else if (p >= e || *p != ')')
                    return -1;
            }
            p++;
            seen |= 4;
        } else {
            return -1;
        }
        p = npy_ws(p, e);
        if (p < e && *p == ',')
            p++;
        else if (p >= e || *p != '}')
            return -1;
    }
    return seen == 7 ? 0 : -1;
}

/* Parses one .npy file (name for messages) into *a, its data a view into buf. */
static int npy_parse(const char *buf, size_t len, const char *name, npy_array *a, char *err)
{
    memset(a, 0, sizeof *a);
    if (len < 10 || memcmp(buf, "\x93NUMPY", 6) != 0)
        return err_set(err, -EINVAL, "%s is not a .npy array (no \\x93NUMPY magic)", name);
    unsigned major = (unsigned char)buf[6];
    if (major < 1 || major > 3)
        return err_set(err, -EINVAL, "%s: .npy format version %u is not read", name, major);
    size_t at = major == 1 ? 10 : 12;
    if (len < at)
        return err_set(err, -EINVAL, "%s: truncated .npy header", name);
    size_t hlen = major == 1 ? le16(buf + 8) : le32(buf + 8);
    if (hlen > len - at)
        return err_set(err, -EINVAL, "%s: truncated .npy header", name);
    int fortran = 0;
    if (npy_dict(buf + at, buf + at + hlen, a, &fortran) < 0)
        return err_set(err, -EINVAL,
                       "%s: the .npy header is not a dict of descr, fortran_order and shape "
                       "(structured arrays are not read)",
                       name);
    if (fortran)
        return err_set(err, -EINVAL,
                       "%s is in Fortran order; save it in C order (numpy.ascontiguousarray)",
                       name);
    const char *t = a->descr;
    char order = (*t == '<' || *t == '>' || *t == '|' || *t == '=') ? *t++ : '=';
    a->kind = *t ? *t++ : 0;
    char *end;
    long size = strtol(t, &end, 10);
    if (t[0] < '1' || t[0] > '9' || *end || size > 8 || (order == '>' && size > 1) ||
        !(a->kind == 'u' || a->kind == 'i' || a->kind == 'f'))
        return err_set(err, -EINVAL, "%s has dtype '%s', which is not read", name, a->descr);
    a->size = (int)size;
    uint64_t count = 1;
    for (int i = 0; i < a->ndim; i++) {
        if (a->shape[i] && count > UINT64_MAX / a->shape[i])
            return err_set(err, -EFBIG, "%s: its shape is too large", name);
        count *= a->shape[i];
    }
    a->data = buf + at + hlen;
    a->len = len - at - hlen;
    if (count > UINT64_MAX / (uint64_t)size || count * (uint64_t)size != a->len)
        return err_set(err, -EINVAL, "%s: its shape needs %llu bytes of data, it holds %zu", name,
                       (unsigned long long)(count * (uint64_t)size), a->len);
    return 0;
}

/* ---- sets ---------------------------------------------------------------------------------- */

/* Label i of y (an integer of y->size bytes, little-endian) into *v; -1 for a negative one or
 * one past the class limit. */
static int npy_label(const npy_array *y, size_t i, int32_t *v)
{
    const unsigned char *p = (const unsigned char *)y->data + i * (size_t)y->size;
    uint64_t u = 0;
    for (int b = y->size - 1; b >= 0; b--)
        u = u << 8 | p[b];
    if ((y->kind == 'i' && (u >> (8 * y->size - 1)) & 1) || u >= DATASET_MAX_CLASSES)
        return -1;
    *v = (int32_t)u;
    return 0;
}

/* Members kx (images) and kx + 1 (labels) into a set. */
static int npz_set(const zip_member *m, int kx, image_set **out, char *err)
{
    const char *xb, *yb, *xn = npz_names[kx], *yn = npz_names[kx + 1];
    char *xo = NULL, *yo = NULL;
    npy_array x, y;
    image_set *s = NULL;
    int rc = zip_member_bytes(&m[kx], kx, &xb, &xo, err);
    if (rc == 0)
        rc = zip_member_bytes(&m[kx + 1], kx + 1, &yb, &yo, err);
    if (rc == 0)
        rc = npy_parse(xb, m[kx].size, xn, &x, err);
    if (rc == 0)
        rc = npy_parse(yb, m[kx + 1].size, yn, &y, err);
    if (rc < 0)
        goto out;
    int dtype = x.kind == 'u' && x.size == 1 ? IMAGES_U8 : IMAGES_F32;
    if (!(x.kind == 'u' && x.size == 1) && !(x.kind == 'f' && x.size == 4)) {
        rc = err_set(err, -EINVAL,
                     "%s has dtype '%s'; images must be uint8 ('|u1') or float32 ('<f4'): "
                     "convert with x.astype('float32')",
                     xn, x.descr);
        goto out;
    }
    if (y.kind == 'f') {
        rc = err_set(err, -EINVAL, "%s has dtype '%s'; labels must be integers: y.astype('int64')",
                     yn, y.descr);
        goto out;
    }
    if (x.ndim != 3 && x.ndim != 4) {
        rc = err_set(err, -EINVAL, "%s has %d dimensions; images are (n, h, w) or (n, h, w, c)", xn,
                     x.ndim);
        goto out;
    }
    if (!(y.ndim == 1 || (y.ndim == 2 && y.shape[1] == 1))) {
        rc = err_set(err, -EINVAL, "%s must have shape (n,) or (n, 1)", yn);
        goto out;
    }
    if (x.shape[0] != y.shape[0]) {
        rc = err_set(err, -EINVAL, "%s holds %llu images but %s %llu labels", xn,
                     (unsigned long long)x.shape[0], yn, (unsigned long long)y.shape[0]);
        goto out;
    }
    uint64_t c = x.ndim == 4 ? x.shape[3] : 1;
    if (x.shape[1] > IMAGES_MAX_DIM || x.shape[2] > IMAGES_MAX_DIM || c > IMAGES_MAX_DIM) {
        rc = err_set(err, -EINVAL, "%s: images of %llu×%llu×%llu; each dimension must be 1 to %d",
                     xn, (unsigned long long)x.shape[1], (unsigned long long)x.shape[2],
                     (unsigned long long)c, IMAGES_MAX_DIM);
        goto out;
    }
    rc = images_set_new((size_t)x.shape[0], (int)x.shape[1], (int)x.shape[2], (int)c, dtype, xn, &s,
                        err);
    if (rc < 0)
        goto out;
    if (dtype == IMAGES_F32) {
        const char *p = x.data;
        for (size_t i = 0; i < x.len / 4; i++, p += 4) {
            float v;
            memcpy(&v, p, 4);
            if (!isfinite(v)) {
                rc = err_set(err, -EINVAL, "%s: value %zu is %g; images must be finite", xn, i,
                             (double)v);
                goto out;
            }
        }
    }
    if (xo) {
        memmove(xo, x.data, x.len); /* adopt the inflated buffer as the pixels */
        free(s->pixels);
        s->pixels = xo;
        xo = NULL;
    } else {
        memcpy(s->pixels, x.data, x.len);
    }
    for (size_t i = 0; i < s->n; i++) {
        if (npy_label(&y, i, &s->labels[i]) < 0) {
            rc = err_set(err, -EINVAL, "%s: label %zu is outside 0 to %d", yn, i,
                         DATASET_MAX_CLASSES - 1);
            goto out;
        }
    }
    *out = s;
    s = NULL;
out:
    image_set_free(s);
    free(xo);
    free(yo);
    return rc;
}

/* The sets from the members found (a zip's or a tar's; what names the container). */
static int npz_sets(const zip_member *m, const char *others, const char *what, image_set **train,
                    image_set **test, char *err)
{
    image_set *tr = NULL, *te = NULL;
    int kx = m[NPZ_X].found || m[NPZ_Y].found ? NPZ_X : NPZ_X_TRAIN;
    int need[4] = {kx, kx + 1, NPZ_X_TEST, NPZ_Y_TEST};
    int n_need = m[NPZ_X_TEST].found || m[NPZ_Y_TEST].found ? 4 : 2;
    for (int i = 0; i < n_need; i++) {
        if (!m[need[i]].found)
            return err_set(err, -EINVAL,
                           "the %s holds no %s; it needs x and y, or x_train and y_train (and "
                           "x_test with y_test)%s%s",
                           what, npz_names[need[i]], others[0] ? "; other members: " : "", others);
    }
    int rc = npz_set(m, kx, &tr, err);
    if (rc < 0)
        goto out;
    if (m[NPZ_X_TEST].found) {
        rc = npz_set(m, NPZ_X_TEST, &te, err);
        if (rc < 0)
            goto out;
        if (te->h != tr->h || te->w != tr->w || te->c != tr->c || te->dtype != tr->dtype) {
            rc = err_set(err, -EINVAL,
                         "x_test.npy holds %s images of %d×%d×%d, %s %s images of %d×%d×%d",
                         te->dtype ? "float32" : "uint8", te->h, te->w, te->c, npz_names[kx],
                         tr->dtype ? "float32" : "uint8", tr->h, tr->w, tr->c);
            goto out;
        }
    }
    rc = images_labels_classes(tr, te, what, err);
    if (rc < 0)
        goto out;
    *train = tr;
    *test = te;
    tr = te = NULL;
out:
    image_set_free(tr);
    image_set_free(te);
    return rc;
}

int npz_load(const char *data, size_t len, image_set **train, image_set **test, char *err)
{
    zip_member m[NPZ_MEMBERS] = {0};
    char others[256] = "";
    int rc = zip_read(data, len, m, others, err);
    if (rc < 0)
        return rc;
    return npz_sets(m, others, "npz", train, test, err);
}

int npy_tar_load(const char *data, size_t len, image_set **train, image_set **test, char *err)
{
    zip_member m[NPZ_MEMBERS] = {0};
    char others[256] = "";
    tar_reader r;
    tar_entry e;
    int rc;
    if (!tar_probe(data, len))
        return err_set(err, -EINVAL,
                       "a lone .npy file holds one array, so no labels: put x.npy and y.npy in a "
                       "tar (format npy), or save both with numpy.savez(path, x=images, "
                       "y=labels) (format npz)");
    tar_reader_init(&r, data, len);
    for (;;) {
        rc = tar_reader_next(&r, &e, err);
        if (rc <= 0)
            break;
        const char *base = images_basename(e.name);
        int k = 0;
        while (k < NPZ_MEMBERS && strcmp(npz_names[k], base) != 0)
            k++;
        if (k == NPZ_MEMBERS) {
            zip_note_other(others, e.name, strlen(e.name));
            continue;
        }
        if (m[k].found)
            return err_set(err, -EINVAL, "the tar holds two %s files", npz_names[k]);
        m[k] = (zip_member){1, 0, 0, 0, e.size, e.size, e.data};
    }
    if (rc < 0)
        return rc;
    return npz_sets(m, others, "tar", train, test, err);
}
