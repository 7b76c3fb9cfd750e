/* ocl: the OpenCL runtime trainyard uses: device discovery, one context + in-order queue per
 * device, and the program (every kernels/\*.cl family, embedded at build time) built once per
 * process, its binary cached on disk keyed by device, driver, options and source hash so that
 * a second run does not compile.
 *
 * Ownership: ocl_devices_list() returns a malloc'd array the caller free()s; an ocl_ctx is
 * released with ocl_ctx_free(), which accepts NULL. */
#ifndef TRAINYARD_KERNELS_OCL_H
#define TRAINYARD_KERNELS_OCL_H

#include <stddef.h>
#include <stdint.h>

#include <CL/cl.h>
#include <CL/cl_ext.h>

typedef struct ocl_device {
    cl_platform_id platform;
    cl_device_id id;
    int index; /* position in ocl_devices_list(), stable for one machine */
    char platform_name[128];
    char name[128];
    char vendor[128];
    char version[128];   /* CL_DEVICE_VERSION */
    char driver[128];    /* CL_DRIVER_VERSION */
    char c_version[128]; /* CL_DEVICE_OPENCL_C_VERSION */
    cl_device_type type;
    unsigned compute_units;
    uint64_t global_mem;
    uint64_t max_alloc;
    uint64_t local_mem;
    size_t max_work_group;
    unsigned base_align_bytes; /* sub-buffer origin alignment */
} ocl_device;

typedef struct ocl_ctx {
    ocl_device dev;
    cl_context context;
    cl_command_queue queue;
    cl_program program;
    int from_cache;       /* 1 when the program binary came from the disk cache */
    double build_seconds; /* time spent creating the program, cache or compile */
} ocl_ctx;

/* Lists every device of every platform into a malloc'd array; *n may be 0 (no OpenCL). */
int ocl_devices_list(ocl_device **out, size_t *n, char *err);
/* "gpu", "cpu", "accelerator" or "other". */
const char *ocl_device_kind(const ocl_device *d);
/* Picks a device: want is "gpu", "cpu" or "any" (prefers a GPU). -ENODEV when none fits.
 * The environment variable TRAINYARD_DEVICE=<index> forces one device of the listing. */
int ocl_device_pick(const char *want, ocl_device *out, char *err);
/* Creates the context, queue and program for dev. cache_dir NULL uses the default
 * ($TRAINYARD_KERNEL_CACHE, else $XDG_CACHE_HOME/trainyard/kernels, else ~/.cache/...);
 * "" disables the cache. */
int ocl_ctx_new(const ocl_device *dev, const char *cache_dir, ocl_ctx **out, char *err);
/* Releases the program, queue and context; accepts NULL. */
void ocl_ctx_free(ocl_ctx *c);
/* Allocates a device buffer of bytes (> 0). */
int ocl_buffer_new(ocl_ctx *c, size_t bytes, cl_mem *out, char *err);
/* Blocking copy host → device at byte offset. */
int ocl_write(ocl_ctx *c, cl_mem buf, size_t offset, size_t bytes, const void *src, char *err);
/* Blocking copy device → host at byte offset (waits for queued work on that buffer). */
int ocl_read(ocl_ctx *c, cl_mem buf, size_t offset, size_t bytes, void *dst, char *err);
/* Waits for everything queued. */
int ocl_finish(ocl_ctx *c, char *err);
/* A readable name for an OpenCL status code ("CL_OUT_OF_RESOURCES"). */
const char *ocl_strerror(cl_int rc);

#endif
