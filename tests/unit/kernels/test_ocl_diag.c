/* Unit tests of ocl.c's diagnostics, reaching its statics: the driver's messages from the
 * context's notify callback end the sentence of the next failing call (an ocl_* call or a kern
 * launch) once, and only the first few are printed; a build that fails gives the compiler's log
 * in its sentence; the register and spill report of an NVIDIA build log reads as one line. The
 * failing calls are real ones refused by the device (PoCL here). Without an OpenCL device only
 * the parts that need none run, then the test skips (77). */
#include "kernels/ocl.c"

#include "tests/unit/check.h"

#include "kernels/kern_priv.h"

/* Copied from the form ptxas prints with -cl-nv-verbose (two kernels, one spilling). */
static const char nv_log[] =
    "ptxas info    : 0 bytes gmem\n"
    "ptxas info    : Compiling entry function 'gemm_tiled' for 'sm_90'\n"
    "ptxas info    : Function properties for gemm_tiled\n"
    "ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
    "ptxas info    : Used 40 registers, 4352 bytes smem, 432 bytes cmem[0]\n"
    "ptxas info    : Compiling entry function 'conv_dw' for 'sm_90'\n"
    "ptxas info    : Function properties for conv_dw\n"
    "ptxas         .     48 bytes stack frame, 24 bytes spill stores, 28 bytes spill loads\n"
    "ptxas info    : Used 255 registers, 16384 bytes smem, 420 bytes cmem[0]\n";

static void test_nv_summary(void)
{
    char line[256];
    CHECK_INT(nv_summary(nv_log, line, sizeof line), 2);
    CHECK_STR(line, "gemm_tiled 40 regs, conv_dw 255 regs (spills 24 B stores, 28 B loads)");
    CHECK_INT(nv_summary("warning: nothing of ptxas here\n", line, sizeof line), 0);
    CHECK_STR(line, "");
    char small[24]; /* room for the first kernel only */
    CHECK_INT(nv_summary(nv_log, small, sizeof small), 1);
    CHECK_STR(small, "gemm_tiled 40 regs");
}

/* A message handed out once; the print count stops at OCL_NOTES_PRINTED. */
static void test_notes(ocl_ctx *c)
{
    char note[ERR_LEN];
    CHECK_INT(ocl_ctx_driver_message(c, note, sizeof note), 0);
    CHECK_STR(note, "");
    ctx_notify("CL_OUT_OF_RESOURCES error executing clEnqueueNDRangeKernel (test)", NULL, 0, NULL);
    CHECK_INT(ocl_ctx_driver_message(c, note, sizeof note), 1);
    CHECK(strstr(note, "(test)") != NULL);
    CHECK_INT(ocl_ctx_driver_message(c, note, sizeof note), 0);
    for (int i = 0; i < OCL_NOTES_PRINTED + 4; i++)
        ctx_notify("repeated (test)", NULL, 0, NULL);
    CHECK_INT(notes.printed, OCL_NOTES_PRINTED);
    CHECK_INT(ocl_ctx_driver_message(c, note, sizeof note), 1);
}

/* Real failures carry the message given just before them. */
static void test_failures(ocl_ctx *c)
{
    char err[ERR_LEN] = "", junk[8];
    cl_mem m;
    if (ocl_buffer_new(c, 16, &m, err) < 0) {
        fprintf(stderr, "ocl_buffer_new: %s\n", err);
        check_failures++;
        return;
    }
    /* A driver that explains refusals itself (Oclgrind does) replaces the message given here
     * with its own before the call returns: either way one ends the sentence, once. */
    char note[ERR_LEN];
    ctx_notify("the driver's words (test)", NULL, 0, NULL);
    CHECK_INT(ocl_read(c, m, 64, sizeof junk, junk, err), -EIO); /* past the buffer's end */
    printf("%s\n", err);
    CHECK(strstr(err, "clEnqueueReadBuffer failed: CL_INVALID_VALUE") != NULL);
    CHECK(strstr(err, "; the driver said: ") != NULL);
    CHECK_INT(ocl_ctx_driver_message(c, note, sizeof note), 0); /* told once */

    kern *k = NULL;
    if (kern_new_for(c, KERN_FAM_OPTIM, &k, err) < 0) {
        fprintf(stderr, "kern_new_for: %s\n", err);
        check_failures++;
        clReleaseMemObject(m);
        return;
    }
    ctx_notify("launch trouble (test)", NULL, 0, NULL);
    int n = 4;
    float lr = 0.1f, mom = 0.0f;
    int has_v = 0;
    karg a[] = {ARG(n), ARG(lr), ARG(mom), ARG(has_v), ARG_MEM(m), ARG_MEM(m), ARG_MEM(m)};
    size_t global = 3, local = 2; /* not a multiple: CL_INVALID_WORK_GROUP_SIZE */
    CHECK_INT(kern_launch(k, "test", k->sgd, a, NARGS(a), 1, &global, &local), -EIO);
    CHECK(strstr(kern_last_error(k), "; the driver said: ") != NULL);
    CHECK_INT(ocl_ctx_driver_message(c, note, sizeof note), 0);
    kern_free(k);
    clReleaseMemObject(m);
}

/* A program that does not compile: the sentence carries the compiler's complaint. */
static void test_build_log(ocl_ctx *c)
{
    const char *src = "__kernel void broken(__global float *x) { x[0] = undeclared_name; }\n";
    cl_int rc;
    cl_program p = clCreateProgramWithSource(c->context, 1, &src, NULL, &rc);
    CHECK_INT(rc, CL_SUCCESS);
    if (rc != CL_SUCCESS)
        return;
    char err[ERR_LEN] = "";
    CHECK_INT(program_build(c, p, "broken.cl", err), -EIO);
    CHECK(strstr(err, "broken.cl") != NULL);
    CHECK(strstr(err, "undeclared_name") != NULL);
    clReleaseProgram(p);
}

int main(void)
{
    test_nv_summary();
    char err[ERR_LEN] = "";
    ocl_device dev;
    int rc = ocl_device_pick("any", &dev, err);
    if (rc == -ENODEV) {
        if (check_failures)
            return check_exit();
        check_skip(err);
    }
    ocl_ctx *c = NULL;
    if (rc < 0 || ocl_ctx_new(&dev, "", &c, err) < 0) {
        fprintf(stderr, "opening the device: %s\n", err);
        return 1;
    }
    test_notes(c);
    test_failures(c);
    test_build_log(c);
    ocl_ctx_free(c);
    return check_exit();
}
