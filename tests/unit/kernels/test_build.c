/* Unit tests of kernels/ocl.c's program builds: every family built on threads of its own
 * (TRAINYARD_KERNEL_BUILD=parallel, what every platform but PoCL does) and one after another
 * (serial) into empty caches, each giving programs that run, the same cache files, and a second
 * context that loads them all from the cache; a family asked for twice is built once, an unknown
 * one refused; and NVIDIA's compute cache placed beside the kernel cache unless the user set
 * CUDA_CACHE_PATH. Runs on the default OpenCL device, or skips. */
#include "kernels/kernels.h"

#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/unit/check.h"
#include "tests/unit/kernels/cltest.h"

static char root[64];

/* How many NAME-<key>.bin files the cache folder holds. */
static int cache_files(const char *dir)
{
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)))
        n += strstr(e->d_name, ".bin") != NULL;
    if (d)
        closedir(d);
    return n;
}

/* A context on dev with its cache in dir, every family built as TRAINYARD_KERNEL_BUILD=how says,
 * checked by one GEMM; *from_cache says whether every program came from the cache. */
static void build_all(const ocl_device *dev, const char *dir, const char *how, int *from_cache)
{
    char err[ERR_LEN] = "";
    setenv("TRAINYARD_KERNEL_BUILD", how, 1);
    ocl_ctx *c = NULL;
    kern *k = NULL;
    CHECK_INT(ocl_ctx_new(dev, dir, &c, err), 0);
    if (!c)
        return;
    CHECK_INT(kern_new(c, &k, err), 0);
    if (!k)
        fprintf(stderr, "%s build: %s\n", how, err);
    for (int f = 1; f < OCL_MAX_FAMILIES && k; f++)
        if (ocl_family_find("gemm.cl") == f)
            CHECK(c->programs[f] != NULL);
    *from_cache = c->from_cache;
    if (k) { /* the programs run: 2×2 times 2×2 */
        float a[4] = {1, 2, 3, 4}, b[4] = {5, 6, 7, 8}, out[4] = {0};
        cl_mem A, B, C;
        CHECK_INT(ocl_buffer_new(c, sizeof a, &A, err), 0);
        CHECK_INT(ocl_buffer_new(c, sizeof b, &B, err), 0);
        CHECK_INT(ocl_buffer_new(c, sizeof out, &C, err), 0);
        CHECK_INT(ocl_write(c, A, 0, sizeof a, a, err), 0);
        CHECK_INT(ocl_write(c, B, 0, sizeof b, b, err), 0);
        CHECK_INT(kern_gemm(k, 0, 0, 2, 2, 2, 1.0f, A, 2, B, 2, 0.0f, C, 2), 0);
        CHECK_INT(ocl_read(c, C, 0, sizeof out, out, err), 0);
        CHECK(out[0] == 19 && out[1] == 22 && out[2] == 43 && out[3] == 50);
        clReleaseMemObject(A), clReleaseMemObject(B), clReleaseMemObject(C);
    }
    kern_free(k);
    ocl_ctx_save(c);
    ocl_ctx_free(c);
}

static void test_parallel_and_serial(const ocl_device *dev)
{
    const char *ways[] = {"parallel", "serial"};
    int files[2] = {0, 0};
    for (int i = 0; i < 2; i++) {
        char dir[128];
        snprintf(dir, sizeof dir, "%s/%s", root, ways[i]);
        int from_cache = -1;
        build_all(dev, dir, ways[i], &from_cache);
        CHECK_INT(from_cache, 0); /* an empty cache: compiled */
        files[i] = cache_files(dir);
        CHECK(files[i] > 5);
        build_all(dev, dir, ways[i], &from_cache);
        CHECK_INT(from_cache, 1); /* the second context loads every family */
        CHECK_INT(cache_files(dir), files[i]);
    }
    CHECK_INT(files[0], files[1]);
    printf("every family built on threads and one by one: %d cache files each\n", files[0]);
}

static void test_build_args(const ocl_device *dev)
{
    char err[ERR_LEN] = "", dir[128];
    snprintf(dir, sizeof dir, "%s/args", root);
    setenv("TRAINYARD_KERNEL_BUILD", "parallel", 1);
    ocl_ctx *c = NULL;
    CHECK_INT(ocl_ctx_new(dev, dir, &c, err), 0);
    if (!c)
        return;
    int gemm = ocl_family_find("gemm.cl"), twice[2] = {gemm, gemm};
    CHECK_INT(ocl_ctx_build(c, twice, 2, err), 0);
    CHECK(c->programs[gemm] != NULL);
    int bad[2] = {gemm, OCL_MAX_FAMILIES};
    CHECK_INT(ocl_ctx_build(c, bad, 2, err), -EINVAL);
    CHECK(strstr(err, "family") != NULL);
    ocl_ctx_free(c);
}

int main(void)
{
    snprintf(root, sizeof root, "/tmp/trainyard-build-XXXXXX");
    if (!mkdtemp(root))
        cltest_die("mkdtemp", strerror(errno));
    /* the compute cache goes beside the kernel cache when the user set none */
    unsetenv("CUDA_CACHE_PATH");
    unsetenv("CUDA_CACHE_DISABLE");
    char kc[128], want[160];
    snprintf(kc, sizeof kc, "%s/default", root);
    setenv("TRAINYARD_KERNEL_CACHE", kc, 1);
    ocl_device dev;
    char err[ERR_LEN] = "";
    int rc = ocl_device_pick("any", &dev, err);
    snprintf(want, sizeof want, "%s/cuda", kc);
    const char *cuda = getenv("CUDA_CACHE_PATH");
    CHECK(cuda && strcmp(cuda, want) == 0);
    if (rc == -ENODEV)
        check_skip(err);
    if (rc < 0)
        cltest_die("picking an OpenCL device", err);
    test_parallel_and_serial(&dev);
    test_build_args(&dev);
    return check_exit_removing(root);
}
