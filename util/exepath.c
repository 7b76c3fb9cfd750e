/* exepath: where programs are (see exepath.h). */
#include "util/exepath.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/err.h"

int exepath_which(const char *name, char *out, size_t cap)
{
    if (strchr(name, '/')) {
        if ((size_t)snprintf(out, cap, "%s", name) >= cap)
            return -ENAMETOOLONG;
        return access(out, X_OK) == 0 ? 0 : -ENOENT;
    }
    const char *path = getenv("PATH");
    if (!path || !*path)
        path = "/usr/local/bin:/usr/bin:/bin";
    for (const char *p = path; *p;) {
        size_t len = strcspn(p, ":");
        int n = snprintf(out, cap, "%.*s/%s", (int)len, p, name);
        if (len > 0 && n > 0 && (size_t)n < cap && access(out, X_OK) == 0)
            return 0;
        p += len + (p[len] == ':');
    }
    return -ENOENT;
}

int exepath_self(char *out, size_t cap, char *err)
{
    ssize_t k = readlink("/proc/self/exe", out, cap - 1);
    if (k < 0)
        return err_set(err, -errno, "cannot find this program's path (/proc/self/exe): %s",
                       strerror(errno));
    if ((size_t)k >= cap - 1)
        return err_set(err, -ENAMETOOLONG, "this program's path is too long");
    out[k] = '\0';
    return 0;
}

int exepath_beside_self(const char *name, char *out, size_t cap)
{
    char err[ERR_LEN];
    int rc = exepath_self(out, cap, err);
    if (rc < 0)
        return rc;
    char *slash = strrchr(out, '/');
    size_t dir = slash ? (size_t)(slash - out) + 1 : 0;
    if (dir + strlen(name) + 1 > cap)
        return -ENAMETOOLONG;
    memcpy(out + dir, name, strlen(name) + 1);
    return access(out, X_OK) == 0 ? 0 : -ENOENT;
}
