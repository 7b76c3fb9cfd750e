/* mkdirs: a folder and its parents (see mkdirs.h). */
#include "util/mkdirs.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "util/err.h"

int mkdirs(const char *dir, mode_t mode, char *err)
{
    char path[PATH_MAX];
    int n = snprintf(path, sizeof path, "%s", dir);
    if (n <= 0 || (size_t)n >= sizeof path)
        return err_set(err, n <= 0 ? -EINVAL : -ENAMETOOLONG, "folder '%s': %s", dir,
                       n <= 0 ? "empty name" : "path too long");
    /* each prefix that ends before a '/' (or at the end), the root's "/" excepted */
    for (char *p = path + 1;; p++) {
        if (*p != '/' && *p != '\0')
            continue;
        char was = *p;
        *p = '\0';
        if (p[-1] != '/' && mkdir(path, mode) != 0 && errno != EEXIST)
            return err_set(err, -errno, "cannot create the folder %s: %s", path, strerror(errno));
        *p = was;
        if (!was)
            break;
    }
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
        return err_set(err, -ENOTDIR, "%s is not a folder", dir);
    return 0;
}
