/* writefile: see writefile.h. */
#include "util/writefile.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "util/err.h"

int writefile(const char *path, const void *data, size_t len, char *err)
{
    char tmp[4200];
    if ((size_t)snprintf(tmp, sizeof tmp, "%s.%d.tmp", path, (int)getpid()) >= sizeof tmp)
        return err_set(err, -ENAMETOOLONG, "%s: the path is too long", path);
    FILE *f = fopen(tmp, "wb");
    if (!f)
        return err_set(err, -errno, "cannot write %s: %s", tmp, strerror(errno));
    int ok = fwrite(data, 1, len, f) == len;
    ok = fclose(f) == 0 && ok;
    if (!ok || rename(tmp, path) < 0) {
        unlink(tmp);
        return err_set(err, -EIO, "cannot write %s", path);
    }
    return 0;
}
