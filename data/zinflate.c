/* zinflate: see zinflate.h. The output buffer is allocated once at its known size; inflate()
 * must fill it exactly and end the stream there, so a lying size is caught either way. zlib
 * counts in uInt, so the input and output are fed at most 1 GiB at a time. */
#include "data/zinflate.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "util/err.h"

#define ZINFLATE_STEP (1u << 30)
/* Deflate gives at most 1032 bytes per input byte (a 258-byte match in 2 bits, and a little for
 * the block headers); a size claimed past that is a lie, refused before it is allocated. */
#define ZINFLATE_MAX_RATIO 1032
#define ZINFLATE_SLACK     1024

int zinflate_gzip_size(const char *in, size_t in_len, size_t *size, const char *what, char *err)
{
    const unsigned char *p = (const unsigned char *)in;
    if (in_len < 18 || p[0] != 0x1f || p[1] != 0x8b)
        return err_set(err, -EINVAL, "%s is not gzip data", what);
    p += in_len - 4;
    *size = (size_t)p[0] | (size_t)p[1] << 8 | (size_t)p[2] << 16 | (size_t)p[3] << 24;
    return 0;
}

int zinflate_exact(const char *in, size_t in_len, int kind, size_t out_len, const char *what,
                   char **out, char *err)
{
    z_stream z;
    memset(&z, 0, sizeof z);
    if (in_len <
        (out_len - (out_len < ZINFLATE_SLACK ? out_len : ZINFLATE_SLACK)) / ZINFLATE_MAX_RATIO)
        return err_set(err, -EINVAL, "corrupt %s: %zu compressed bytes cannot hold %zu", what,
                       in_len, out_len);
    char *buf = malloc(out_len + 1);
    if (!buf)
        return err_set(err, -ENOMEM, "out of memory inflating %s (%zu bytes)", what, out_len);
    int zr = inflateInit2(&z, kind == ZINFLATE_GZIP ? 16 + MAX_WBITS : -MAX_WBITS);
    if (zr != Z_OK) {
        free(buf);
        return err_set(err, -ENOMEM, "out of memory inflating %s", what);
    }
    size_t used_in = 0, used_out = 0;
    int rc = 0;
    for (;;) {
        size_t in_left = in_len - used_in, out_left = out_len - used_out;
        z.next_in = (Bytef *)(in + used_in);
        z.avail_in = (uInt)(in_left < ZINFLATE_STEP ? in_left : ZINFLATE_STEP);
        z.next_out = (Bytef *)(buf + used_out);
        /* One spare byte past the expected end shows an output that is too long. */
        z.avail_out = (uInt)(out_left < ZINFLATE_STEP ? out_left + 1 : ZINFLATE_STEP);
        uInt avail_in = z.avail_in, avail_out = z.avail_out;
        zr = inflate(&z, Z_NO_FLUSH);
        used_in += avail_in - z.avail_in;
        used_out += avail_out - z.avail_out;
        if (used_out > out_len) {
            rc = err_set(err, -EINVAL, "corrupt %s: it inflates to more than %zu bytes", what,
                         out_len);
            goto out;
        }
        if (zr == Z_STREAM_END)
            break;
        if (zr == Z_MEM_ERROR) {
            rc = err_set(err, -ENOMEM, "out of memory inflating %s", what);
            goto out;
        }
        if (zr == Z_OK)
            continue; /* progress; no progress is Z_BUF_ERROR */
        rc = err_set(err, -EINVAL, "corrupt %s: %s", what,
                     zr == Z_OK || zr == Z_BUF_ERROR ? "the compressed data ends early"
                                                     : (z.msg ? z.msg : "inflate failed"));
        goto out;
    }
    if (used_in != in_len) {
        rc = err_set(err, -EINVAL, "corrupt %s: %zu bytes follow the compressed data", what,
                     in_len - used_in);
        goto out;
    }
    if (used_out != out_len) {
        rc = err_set(err, -EINVAL, "corrupt %s: it inflates to %zu bytes, expected %zu", what,
                     used_out, out_len);
        goto out;
    }
    buf[out_len] = '\0';
    *out = buf;
    buf = NULL;
out:
    inflateEnd(&z);
    free(buf);
    return rc;
}
