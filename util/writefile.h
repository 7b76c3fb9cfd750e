/* writefile: a whole file written at once, through a temporary name beside it and a rename, so
 * a reader never sees half of it (a crash leaves the old file or none, and at worst the
 * temporary). */
#ifndef TRAINYARD_UTIL_WRITEFILE_H
#define TRAINYARD_UTIL_WRITEFILE_H

#include <stddef.h>

/* Writes len bytes of data to path (path.<pid>.tmp, then renamed); -errno with a sentence. */
int writefile(const char *path, const void *data, size_t len, char *err);

#endif
