/* Fault tests of model/safetensors: safetensors_write, safetensors_open and safetensors_parse
 * with the n-th allocation failing (ours and jansson's), for every n until a run completes
 * untouched. A failed write must return a negative code with a message and leave neither the
 * file nor a temporary behind; a failed read must return a negative code with a message and
 * leave *out as it was; ASan checks nothing leaks. */
#include "model/safetensors.h"

#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

#include "tests/unit/alloc_fail.h"
#include "tests/unit/check.h"
#include "util/err.h"

static char dir[] = "/tmp/trainyard-test-st-alloc-XXXXXX";
static char path[128];

static const float w[6] = {1, 2, 3, 4, 5, 6};
static const float b[2] = {-1, 0.5f};
static const safetensors_tensor tensors[] = {
    {.name = "dense0.weight", .ndim = 2, .shape = {2, 3}, .data = w},
    {.name = "dense0.bias", .ndim = 1, .shape = {2}, .data = b},
};
static const safetensors_meta meta[] = {{"format", "pt"}, {"epoch", "3"}};

#define UNTOUCHED ((safetensors_file *)1)

/* Files in dir. */
static int dir_entries(void)
{
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));)
        n += e->d_name[0] != '.';
    if (d)
        closedir(d);
    return n;
}

/* The file read back is what was written. */
static void check_content(const safetensors_file *f)
{
    CHECK_INT(safetensors_count(f), 2);
    const safetensors_tensor *t = safetensors_find(f, "dense0.weight");
    CHECK(t && t->ndim == 2 && t->shape[1] == 3 && memcmp(t->data, w, sizeof w) == 0);
    t = safetensors_find(f, "dense0.bias");
    CHECK(t && t->ndim == 1 && memcmp(t->data, b, sizeof b) == 0);
    CHECK_STR(safetensors_meta_get(f, "epoch"), "3");
}

static void test_write(void)
{
    char err[ERR_LEN];
    long points = 0;
    ALLOC_FAIL_LOOP(&points, {
        err[0] = '\0';
        unlink(path);
        int rc = safetensors_write(path, tensors, 2, meta, 2, err);
        if (alloc_fail_off()) {
            /* The directory sync after the rename allocates too: then the file is there, and
             * the error says it could not be made durable. */
            int after_rename = strstr(err, "cannot sync its directory") != NULL;
            CHECK_INT(rc, -ENOMEM);
            CHECK(err[0] != '\0');
            CHECK_INT(dir_entries(), after_rename ? 1 : 0);
        } else {
            CHECK_INT(rc, 0);
            CHECK_INT(dir_entries(), 1);
        }
    });
    printf("safetensors_write: %ld failure points\n", points);
    CHECK(points >= 10);
}

static void test_open(void)
{
    char err[ERR_LEN];
    long points = 0, syntax = 0;
    ALLOC_FAIL_LOOP(&points, {
        safetensors_file *f = UNTOUCHED;
        err[0] = '\0';
        int rc = safetensors_open(path, &f, err);
        int hit = alloc_fail_off();
        if (rc == 0) {
            if (!hit) /* jansson's lexer may drop a byte on a failed growth and go on */
                check_content(f);
            safetensors_close(f);
        } else {
            /* jansson's lexer reports a failed string copy as a syntax error */
            syntax += rc == -EINVAL && strstr(err, "not valid JSON") != NULL;
            CHECK(rc == -ENOMEM || (rc == -EINVAL && strstr(err, "not valid JSON") != NULL));
            CHECK(err[0] != '\0');
            CHECK(f == UNTOUCHED);
        }
    });
    printf("safetensors_open: %ld failure points (%ld reported by jansson as bad JSON)\n", points,
           syntax);
    CHECK(points >= 10);
}

/* Our allocations only (jansson not counted): every failure is -ENOMEM. */
static void test_parse(void)
{
    char err[ERR_LEN];
    FILE *fp = fopen(path, "rb");
    unsigned char bytes[4096];
    size_t len = fp ? fread(bytes, 1, sizeof bytes, fp) : 0;
    if (fp)
        fclose(fp);
    CHECK(len > 8);
    long points = 0;
    alloc_fail_jansson(0);
    ALLOC_FAIL_LOOP(&points, {
        safetensors_file *f = UNTOUCHED;
        int rc = safetensors_parse(bytes, len, &f, err);
        if (alloc_fail_off()) {
            CHECK_INT(rc, -ENOMEM);
            CHECK(f == UNTOUCHED);
        } else {
            CHECK_INT(rc, 0);
            check_content(f);
            safetensors_close(f);
        }
    });
    alloc_fail_jansson(1);
    printf("safetensors_parse: %ld failure points of ours\n", points);
    CHECK(points >= 4);
}

int main(void)
{
    CHECK_INT(alloc_fail_init(), 0);
    if (!mkdtemp(dir))
        check_skip("cannot create a temporary directory");
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    test_write();
    test_open();
    test_parse();
    unlink(path);
    rmdir(dir);
    return check_exit();
}
