/* path: joining a folder and a name into a buffer of fixed size, the one way every folder of
 * the project builds a file's path (util/datadir.h builds the data directory's own). */
#ifndef TRAINYARD_UTIL_PATH_H
#define TRAINYARD_UTIL_PATH_H

#include <stddef.h>

/* "dir/name" into out[cap]. 0, or -ENAMETOOLONG with a sentence in err (when err is not NULL)
 * and out holding nothing useful: never a path cut short. */
int path_join(char *out, size_t cap, const char *dir, const char *name, char *err);

#endif
