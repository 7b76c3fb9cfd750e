/* exepath: where programs are — a name looked up in PATH as a shell would, and this program's
 * own file and folder (/proc/self/exe), for the helpers it starts from beside itself (the
 * script launcher, local workers, trainyard-replica). */
#ifndef TRAINYARD_UTIL_EXEPATH_H
#define TRAINYARD_UTIL_EXEPATH_H

#include <stddef.h>

/* The first executable name in $PATH (/usr/local/bin:/usr/bin:/bin without one) into out[cap];
 * a name holding a slash is taken as it is when it can be run. 0, or -ENOENT. */
int exepath_which(const char *name, char *out, size_t cap);
/* This program's own path (/proc/self/exe resolved) into out[cap]: 0, or a negative code with
 * a sentence in err. */
int exepath_self(char *out, size_t cap, char *err);
/* The program `name` in this program's folder into out[cap]: 0 when it is there and can be
 * run, else -ENOENT (or -ENAMETOOLONG). */
int exepath_beside_self(const char *name, char *out, size_t cap);

#endif
