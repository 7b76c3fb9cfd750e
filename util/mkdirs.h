/* mkdirs: `mkdir -p` — a folder and every missing parent. */
#ifndef TRAINYARD_UTIL_MKDIRS_H
#define TRAINYARD_UTIL_MKDIRS_H

#include <sys/types.h>

/* Creates dir and its missing parents with mode (an existing folder is fine); -errno with a
 * sentence naming the part that could not be made, -ENOTDIR when dir exists and is not a
 * folder. */
int mkdirs(const char *dir, mode_t mode, char *err);

#endif
