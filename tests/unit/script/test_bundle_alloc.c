/* Fault tests of script/bundle.c: bundle_check, bundle_unpack and bundle_pack with the n-th
 * allocation failing, for every n until a run completes untouched. A failure must be -ENOMEM
 * with a message, leave no unpacked folder and no pack (nor its temporary) behind; a run that
 * succeeds gives the same bytes or counts as the untouched one; ASan checks nothing leaks. */
#include "script/bundle.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/unit/alloc_fail.h"
#include "tests/unit/check.h"
#include "tests/unit/script/testfs.h"
#include "util/err.h"

static char tmp[] = "/tmp/trainyard-test-bundle-alloc-XXXXXX";

/* Entries of tmp (not counting . and ..). */
static int entries(void)
{
    DIR *d = opendir(tmp);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));)
        n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
    if (d)
        closedir(d);
    return n;
}

int main(void)
{
    if (alloc_fail_init() < 0 || !mkdtemp(tmp))
        return 1;
    char src[128], p[512], gz_path[128], out[128], err[ERR_LEN];
    snprintf(src, sizeof src, "%s/src", tmp);
    mkdir(src, 0755);
    snprintf(p, sizeof p, "%s/a.py", src);
    write_file(p, "print(1)\n", 0644);
    snprintf(p, sizeof p, "%s/sub", src);
    mkdir(p, 0755);
    snprintf(p, sizeof p, "%s/sub/b.txt", src);
    write_file(p, "bee\n", 0644);
    char longname[200];
    memset(longname, 'z', 150);
    longname[150] = '\0';
    snprintf(p, sizeof p, "%s/sub/%s", src, longname); /* a pax record */
    write_file(p, "long\n", 0644);
    snprintf(p, sizeof p, "%s/sub/link", src);
    CHECK_INT(symlink("b.txt", p), 0);
    snprintf(gz_path, sizeof gz_path, "%s/ref.tar.gz", tmp);
    CHECK_INT(bundle_pack(src, gz_path, NULL, NULL, err), 0);
    size_t len;
    char *ref = read_all(gz_path, &len);
    int base = entries(); /* src and ref.tar.gz */

    long points = 0;
    snprintf(out, sizeof out, "%s/pack.tar.gz", tmp);
    ALLOC_FAIL_LOOP(&points, {
        err[0] = '\0';
        int rc = bundle_pack(src, out, NULL, NULL, err);
        if (alloc_fail_off()) {
            CHECK_INT(rc, -ENOMEM);
            CHECK(err[0] != '\0');
            CHECK_INT(entries(), base);
        } else {
            size_t n;
            char *b = read_all(out, &n);
            CHECK(rc == 0 && b && n == len && memcmp(b, ref, n) == 0);
            free(b);
            unlink(out);
        }
    });
    printf("bundle_pack: %ld failure points\n", points);
    CHECK(points >= 5);

    ALLOC_FAIL_LOOP(&points, {
        bundle_info info = {0};
        int rc = bundle_check(ref, len, NULL, &info, err);
        if (alloc_fail_off()) {
            CHECK_INT(rc, -ENOMEM);
            CHECK(err[0] != '\0');
        } else {
            CHECK_INT(rc, 0);
            CHECK_INT(info.files, 3);
        }
    });
    printf("bundle_check: %ld failure points\n", points);
    CHECK(points >= 5);

    snprintf(out, sizeof out, "%s/unpacked", tmp);
    ALLOC_FAIL_LOOP(&points, {
        int rc = bundle_unpack(ref, len, out, NULL, NULL, err);
        if (alloc_fail_off()) {
            CHECK_INT(rc, -ENOMEM);
            CHECK(access(out, F_OK) < 0);
        } else {
            CHECK_INT(rc, 0);
            rm_tree(out);
        }
    });
    printf("bundle_unpack: %ld failure points\n", points);
    CHECK(points >= 5);

    free(ref);
    rm_tree(tmp);
    return check_exit();
}
