/* zinflate: zlib decompression of one whole buffer whose output size is known in advance, for
 * the members of archives (data/npz.c: zip's raw deflate; data/images.c: a gzip file inside
 * a tar, whose size the gzip trailer gives).
 *
 * Ownership: *out is malloc'd by the callee (one more byte than the output, a NUL) and freed by
 * the caller; it is written only on success. */
#ifndef TRAINYARD_WORKER_ZINFLATE_H
#define TRAINYARD_WORKER_ZINFLATE_H

#include <stddef.h>

enum zinflate_kind { ZINFLATE_RAW = 0, ZINFLATE_GZIP = 1 };

/* Inflates in[0..in_len) (raw deflate or a single gzip member) into exactly out_len bytes;
 * what (a file's name) goes into messages. -EINVAL corrupt data, an output of another size, or
 * an out_len past deflate's greatest ratio (1032:1, refused before anything is allocated),
 * -ENOMEM. */
int zinflate_exact(const char *in, size_t in_len, int kind, size_t out_len, const char *what,
                   char **out, char *err);

/* The size a gzip member says it holds (its trailer's ISIZE, modulo 2^32); -EINVAL when in is
 * not gzip data. */
int zinflate_gzip_size(const char *in, size_t in_len, size_t *size, const char *what, char *err);

#endif
