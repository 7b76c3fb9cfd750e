/* Unit tests of the per-family build scheme (kernels/ocl.c, kern_new_for, kern_warmup): kernels
 * are found by name in their family, a kern built for some families refuses the others' wrappers
 * with a sentence, a compiled family reaches the disk cache only when saved and loads from it the
 * next time, a corrupt cache file costs a compile rather than a failure, and the warm-up runs.
 * The cache lives in a fresh temporary folder. Without an OpenCL device the test skips (77). */
#include "tests/unit/check.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "kernels/kernels.h"
#include "util/err.h"

static ocl_device dev;
static char dir[] = "/tmp/trainyard-test-ocl-XXXXXX";

/* Number of files in dir whose name starts with prefix; the path of the last in path. */
static int cache_files(const char *prefix, char *path, size_t cap)
{
    DIR *d = opendir(dir);
    int n = 0;
    if (!d)
        return 0;
    for (struct dirent *e = readdir(d); e; e = readdir(d)) {
        if (strncmp(e->d_name, prefix, strlen(prefix)) != 0)
            continue;
        n++;
        if (path)
            snprintf(path, cap, "%s/%s", dir, e->d_name);
    }
    closedir(d);
    return n;
}

static void test_lookup(void)
{
    int gemm = ocl_family_find("gemm.cl");
    CHECK(gemm > 0);
    CHECK_INT(ocl_kernel_family("gemm_cpu"), gemm);
    CHECK_INT(ocl_kernel_family("gemm_tiled"), gemm);
    CHECK(ocl_kernel_family("optim_adam") == ocl_family_find("optim.cl"));
    CHECK_INT(ocl_kernel_family("no_such_kernel"), -ENOENT);
    CHECK_INT(ocl_family_find("common.cl"), -ENOENT); /* shared text, not a family */
    CHECK_INT(ocl_family_find("nope.cl"), -ENOENT);
}

/* One kern of the optimiser family alone: its wrappers run, the others say why they cannot. */
static void test_mask_and_cache(void)
{
    char err[ERR_LEN] = "", path[4400] = "";
    ocl_ctx *c = NULL;
    kern *k = NULL;
    CHECK_INT(ocl_ctx_new(&dev, dir, &c, err), 0);
    CHECK_INT(kern_new_for(c, KERN_FAM_OPTIM, &k, err), 0);
    CHECK_INT(c->from_cache, 0);
    CHECK(c->programs[ocl_family_find("optim.cl")] != NULL);
    CHECK(c->programs[ocl_family_find("gemm.cl")] == NULL);
    CHECK_INT(cache_files("optim-", NULL, 0), 0); /* compiled, not saved yet */

    cl_mem w = NULL, g = NULL;
    float one[4] = {1, 1, 1, 1}, got[4] = {0};
    CHECK_INT(ocl_buffer_new(c, sizeof one, &w, err), 0);
    CHECK_INT(ocl_buffer_new(c, sizeof one, &g, err), 0);
    CHECK_INT(ocl_write(c, w, 0, sizeof one, one, err), 0);
    CHECK_INT(ocl_write(c, g, 0, sizeof one, one, err), 0);
    CHECK_INT(kern_sgd(k, 4, 0.5f, 0.0f, w, g, NULL), 0);
    CHECK_INT(ocl_read(c, w, 0, sizeof got, got, err), 0);
    CHECK(got[3] == 0.5f);
    CHECK_INT(kern_gemm(k, 0, 0, 2, 2, 1, 1.0f, w, 1, g, 2, 0.0f, w, 2), -EIO);
    CHECK(strstr(kern_last_error(k), "without the gemm family") != NULL);
    CHECK_INT(kern_bias_act_fwd(k, 2, 2, KERN_ACT_RELU, w, g), -EIO);
    CHECK(strstr(kern_last_error(k), "kern_new_for") != NULL);
    /* dry: the other families' launches are skipped, not refused, and write nothing */
    kern_set_dry(k, 1);
    CHECK_INT(kern_gemm(k, 0, 0, 2, 2, 1, 1.0f, w, 1, g, 2, 0.0f, w, 2), 0);
    CHECK_INT(kern_bias_act_fwd(k, 2, 2, KERN_ACT_RELU, w, g), 0);
    CHECK_INT(ocl_read(c, w, 0, sizeof got, got, err), 0);
    CHECK(got[0] == 0.5f && got[3] == 0.5f);
    CHECK_INT(kern_sgd(k, 4, 0.5f, 0.0f, w, g, NULL), 0); /* its own family still runs */
    CHECK_INT(ocl_read(c, w, 0, sizeof got, got, err), 0);
    CHECK(got[3] == 0.0f);
    kern_set_dry(k, 0);
    clReleaseMemObject(w);
    clReleaseMemObject(g);
    kern_free(k);
    unsigned both = KERN_FAM_OPTIM | KERN_FAM_GEMM;
    CHECK_INT(kern_families_cached(c, both), KERN_FAM_OPTIM); /* built here */
    CHECK_INT(kern_families_unsaved(c, both), KERN_FAM_OPTIM);
    ocl_ctx_save(c);
    CHECK_INT(kern_families_unsaved(c, both), 0);
    CHECK_INT(cache_files("optim-", path, sizeof path), 1);
    CHECK_INT(cache_files("gemm-", NULL, 0), 0);
    ocl_ctx_free(c);
    CHECK_INT(ocl_ctx_new(&dev, dir, &c, err), 0);
    CHECK_INT(kern_families_cached(c, both), KERN_FAM_OPTIM); /* on disk */
    ocl_ctx_free(c);

    /* The next context loads the saved binary. */
    CHECK_INT(ocl_ctx_new(&dev, dir, &c, err), 0);
    CHECK_INT(kern_new_for(c, KERN_FAM_OPTIM, &k, err), 0);
    CHECK_INT(c->from_cache, 1);
    kern_free(k);
    ocl_ctx_free(c);

    /* A corrupt file is compiled over and replaced. */
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL);
    if (f) {
        fputs("not a program binary", f);
        fclose(f);
    }
    CHECK_INT(ocl_ctx_new(&dev, dir, &c, err), 0);
    CHECK_INT(kern_new_for(c, KERN_FAM_OPTIM, &k, err), 0);
    CHECK_INT(c->from_cache, 0);
    kern_free(k);
    ocl_ctx_free(c); /* saves it again */
    CHECK_INT(ocl_ctx_new(&dev, dir, &c, err), 0);
    CHECK_INT(kern_new_for(c, KERN_FAM_OPTIM, &k, err), 0);
    CHECK_INT(c->from_cache, 1);
    kern_free(k);
    ocl_ctx_free(c);
}

/* Every family, warmed up: no wrapper fails on the warm-up shapes. */
static void test_warmup(void)
{
    char err[ERR_LEN] = "";
    ocl_ctx *c = NULL;
    kern *k = NULL;
    CHECK_INT(ocl_ctx_new(&dev, NULL, &c, err), 0);
    CHECK_INT(kern_new(c, &k, err), 0);
    int rc = kern_warmup(k, err);
    if (rc < 0)
        fprintf(stderr, "kern_warmup: %s\n", err);
    CHECK_INT(rc, 0);
    kern_free(k);
    ocl_ctx_free(c);
}

static void remove_dir(void)
{
    DIR *d = opendir(dir);
    char path[4400];
    if (!d)
        return;
    for (struct dirent *e = readdir(d); e; e = readdir(d)) {
        if (e->d_name[0] == '.')
            continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        unlink(path);
    }
    closedir(d);
    rmdir(dir);
}

int main(void)
{
    char err[ERR_LEN] = "";
    int rc = ocl_device_pick("any", &dev, err);
    if (rc == -ENODEV)
        check_skip(err);
    if (rc < 0) {
        fprintf(stderr, "picking an OpenCL device: %s\n", err);
        return 1;
    }
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    test_lookup();
    test_mask_and_cache();
    test_warmup();
    remove_dir();
    return check_exit();
}
