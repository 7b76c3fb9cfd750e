/* Unit tests of the device class (kern_device_class, kernels.c): one switch,
 * TRAINYARD_DEVICE_CLASS, decides every per-device kernel choice, the per-family forces
 * (TRAINYARD_CONV) still win over it, an unknown value is refused with a sentence, and
 * kern_cpu_forms_fit follows the class. The class is read from the device's type when the switch
 * is unset. Without an OpenCL device the test skips (77). */
#include "tests/unit/check.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels.h"
#include "util/err.h"

static ocl_ctx *ctx;

/* The class from a device of type t with TRAINYARD_DEVICE_CLASS=force (NULL: unset). */
static int class_for(cl_device_type t, const char *force, enum kern_class *out)
{
    ocl_device d;
    memset(&d, 0, sizeof d);
    d.type = t;
    if (force)
        setenv("TRAINYARD_DEVICE_CLASS", force, 1);
    else
        unsetenv("TRAINYARD_DEVICE_CLASS");
    char err[ERR_LEN] = "";
    int rc = kern_device_class(&d, out, err);
    if (rc < 0)
        CHECK(strstr(err, "TRAINYARD_DEVICE_CLASS") != NULL);
    unsetenv("TRAINYARD_DEVICE_CLASS");
    return rc;
}

static void test_rule(void)
{
    enum kern_class c = KERN_CLASS_GPU;
    CHECK_INT(class_for(CL_DEVICE_TYPE_CPU, NULL, &c), 0);
    CHECK_INT(c, KERN_CLASS_CPU);
    CHECK_INT(class_for(CL_DEVICE_TYPE_GPU, NULL, &c), 0);
    CHECK_INT(c, KERN_CLASS_GPU);
    CHECK_INT(class_for(CL_DEVICE_TYPE_ACCELERATOR, NULL, &c), 0);
    CHECK_INT(c, KERN_CLASS_GPU);
    CHECK_INT(class_for(CL_DEVICE_TYPE_CPU, "gpu", &c), 0);
    CHECK_INT(c, KERN_CLASS_GPU);
    CHECK_INT(class_for(CL_DEVICE_TYPE_GPU, "cpu", &c), 0);
    CHECK_INT(c, KERN_CLASS_CPU);
    CHECK_INT(class_for(CL_DEVICE_TYPE_CPU, "", &c), 0); /* empty: as unset */
    CHECK_INT(c, KERN_CLASS_CPU);
    c = KERN_CLASS_CPU;
    CHECK_INT(class_for(CL_DEVICE_TYPE_CPU, "GPU-ish", &c), -EINVAL);
    CHECK_INT(c, KERN_CLASS_CPU); /* untouched on failure */
}

/* A kern made with the class switch (and conv force) set as given: its class, whether the CPU
 * forms fit, and whether the fused conv + max pool (the direct conv path) runs. */
static void kern_with(const char *cls, const char *conv, int want_class, int want_fused)
{
    char err[ERR_LEN] = "";
    kern *k = NULL;
    setenv("TRAINYARD_DEVICE_CLASS", cls, 1);
    if (conv)
        setenv("TRAINYARD_CONV", conv, 1);
    int rc = kern_new(ctx, &k, err);
    unsetenv("TRAINYARD_DEVICE_CLASS");
    unsetenv("TRAINYARD_CONV");
    CHECK_INT(rc, 0);
    if (rc < 0) {
        fprintf(stderr, "kern_new with class %s: %s\n", cls, err);
        return;
    }
    CHECK_INT(kern_class_of(k), want_class);
    CHECK_INT(kern_cpu_forms_fit(k), want_class == KERN_CLASS_CPU);
    CHECK_INT(kern_conv2d_fwd_maxpool_ok(k), want_fused);
    kern_free(k);
}

static void test_kern(void)
{
    kern_with("gpu", NULL, KERN_CLASS_GPU, 0);
    kern_with("cpu", NULL, KERN_CLASS_CPU, 1);
    kern_with("gpu", "direct", KERN_CLASS_GPU, 1); /* the family's force wins */
    kern_with("cpu", "gemm", KERN_CLASS_CPU, 0);

    char err[ERR_LEN] = "";
    kern *k = NULL;
    setenv("TRAINYARD_DEVICE_CLASS", "tpu", 1);
    CHECK_INT(kern_new(ctx, &k, err), -EINVAL);
    unsetenv("TRAINYARD_DEVICE_CLASS");
    CHECK(k == NULL);
    CHECK(strstr(err, "tpu") != NULL);
}

int main(void)
{
    test_rule();
    char err[ERR_LEN] = "";
    ocl_device dev;
    int rc = ocl_device_pick("any", &dev, err);
    if (rc == -ENODEV)
        check_skip(err);
    if (rc < 0 || ocl_ctx_new(&dev, NULL, &ctx, err) < 0) {
        fprintf(stderr, "opening %s: %s\n", rc < 0 ? "a device" : dev.name, err);
        return 1;
    }
    test_kern();
    ocl_ctx_free(ctx);
    return check_exit();
}
