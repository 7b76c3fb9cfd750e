/* Unit tests of util/mkdirs: nested folders made in one call, existing ones accepted (with
 * doubled and trailing slashes), a file in the way named in the error. */
#include "util/mkdirs.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/unit/check.h"
#include "util/err.h"

static int is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

int main(void)
{
    char tmp[] = "/tmp/trainyard-test-mkdirs-XXXXXX", path[256], err[ERR_LEN];
    if (!mkdtemp(tmp))
        return 1;

    snprintf(path, sizeof path, "%s/a/b/c", tmp);
    CHECK_INT(mkdirs(path, 0755, err), 0);
    CHECK(is_dir(path));
    CHECK_INT(mkdirs(path, 0755, err), 0); /* there already */
    snprintf(path, sizeof path, "%s//a/b//d/", tmp);
    CHECK_INT(mkdirs(path, 0755, err), 0);
    snprintf(path, sizeof path, "%s/a/b/d", tmp);
    CHECK(is_dir(path));

    /* a file where a folder should be: the error names it */
    snprintf(path, sizeof path, "%s/a/file", tmp);
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (f)
        fclose(f);
    snprintf(path, sizeof path, "%s/a/file/x", tmp);
    CHECK_INT(mkdirs(path, 0755, err), -ENOTDIR);
    CHECK(strstr(err, "/a/file") != NULL);
    snprintf(path, sizeof path, "%s/a/file", tmp);
    CHECK_INT(mkdirs(path, 0755, err), -ENOTDIR);
    CHECK_INT(mkdirs("", 0755, err), -EINVAL);

    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmp);
    CHECK_INT(system(cmd), 0);
    return check_exit();
}
