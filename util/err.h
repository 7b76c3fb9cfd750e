/* err: the error convention every module follows.
 *
 * A function that can fail returns int: 0 on success, a negative errno-style code on failure
 * (-EINVAL, -ENOENT, -ENOMEM, -EIO, ...). Where a person will read why, the caller passes a
 * `char err[ERR_LEN]` and the failing function writes one sentence into it with err_set().
 * Output parameters are written only on success. */
#ifndef TRAINYARD_UTIL_ERR_H
#define TRAINYARD_UTIL_ERR_H

#include <errno.h>

#define ERR_LEN 512

/* Writes a printf-style message into err (which may be NULL) and returns code (negative). */
int err_set(char *err, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#endif
