/* path: see path.h. */
#include "util/path.h"

#include <errno.h>
#include <stdio.h>

#include "util/err.h"

int path_join(char *out, size_t cap, const char *dir, const char *name, char *err)
{
    int n = snprintf(out, cap, "%s/%s", dir, name);
    if (n < 0 || (size_t)n >= cap) {
        if (cap)
            out[0] = '\0';
        if (err)
            err_set(err, -ENAMETOOLONG, "the path %s/%s is too long", dir, name);
        return -ENAMETOOLONG;
    }
    return 0;
}
