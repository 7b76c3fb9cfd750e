/* ocl: the OpenCL runtime trainyard uses: device discovery, one context + in-order queue per
 * device, and one program per kernel family (kernels/NAME.cl with common.cl, embedded at build
 * time), built on demand, each family's binary cached on disk keyed by device, driver, options
 * and source text so that a second run compiles nothing.
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
    /* How it was found: "opencl via /etc/OpenCL/vendors", "opencl via driver search: PATH"
     * (kernels/icd.h), or for a GPU without OpenCL "nvml" / "nvidia-smi" (kernels/nvgpu.h). */
    char found_by[300];
    char uuid[96]; /* an NVIDIA GPU's "GPU-xxxxxxxx-...", else "" */
    int opencl;    /* 1 for an OpenCL device; 0: platform and id are NULL, no kernel runs on it */
} ocl_device;

#define OCL_MAX_FAMILIES 32 /* kernels/\*.cl files, common.cl included */

typedef struct ocl_ctx {
    ocl_device dev;
    cl_context context;
    cl_command_queue queue;
    /* One program per family, indexed like kernels_sources (kernels/embedded.h); NULL until
     * ocl_ctx_build() built it. Slot 0 (common.cl) never holds one. */
    cl_program programs[OCL_MAX_FAMILIES];
    unsigned char unsaved[OCL_MAX_FAMILIES]; /* compiled here, not yet written to the cache */
    char options[512];                       /* build options */
    char cache_dir[4096];                    /* "" when the cache is off */
    int from_cache;           /* 1 while every program built so far came from the disk cache */
    double build_seconds;     /* time spent building programs so far, cache or compile */
    unsigned long notes_seen; /* the driver messages handed out so far (ocl_ctx_driver_message) */
} ocl_ctx;

/* Lists every device of every platform into a malloc'd array; *n may be 0 (no OpenCL). The
 * first call runs the driver search of kernels/icd.h before the ICD loader starts. */
int ocl_devices_list(ocl_device **out, size_t *n, char *err);
/* "gpu", "cpu", "accelerator" or "other". */
const char *ocl_device_kind(const ocl_device *d);
/* Picks a device: want is "gpu", "cpu" or "any" (prefers a GPU). -ENODEV when none fits.
 * The environment variable TRAINYARD_DEVICE=<index> forces one device of the listing. */
int ocl_device_pick(const char *want, ocl_device *out, char *err);
/* Creates the context and queue for dev; no program is built yet (ocl_ctx_build). cache_dir
 * NULL uses the default ($TRAINYARD_KERNEL_CACHE, else $XDG_CACHE_HOME/trainyard/kernels, else
 * ~/.cache/...); "" disables the cache. */
int ocl_ctx_new(const ocl_device *dev, const char *cache_dir, ocl_ctx **out, char *err);
/* The driver's latest message (clCreateContext's notify callback: NVIDIA explains a
 * CL_OUT_OF_RESOURCES there) not handed out before through c, into out: 1, or 0 and "" when none
 * came. The failures of ocl_* calls on c and of kern launches end their sentence with it. The
 * messages are the process's: with several contexts, one may be about another. */
int ocl_ctx_driver_message(ocl_ctx *c, char *out, size_t cap);
/* Index in kernels_sources of the family file ("gemm.cl"), or -ENOENT when it is not embedded. */
int ocl_family_find(const char *file);
/* Index of the family whose source defines kernel `name`, or -ENOENT. */
int ocl_kernel_family(const char *name);
/* Builds the programs of the n families (indices from ocl_family_find) that are not built yet:
 * each from the disk cache, else compiled from common.cl and its file. A compiled program is
 * written to the cache by ocl_ctx_save(), not here: PoCL compiles a kernel's work-group
 * function for each local size on first launch, and a binary taken after those launches holds
 * them, while taking one right after the build costs a generic compile of every kernel. */
int ocl_ctx_build(ocl_ctx *c, const int *families, size_t n, char *err);
/* 1 when family (an index from ocl_family_find) is built in c or its binary is in the disk
 * cache (a file of its key exists; whether it loads is found out at build), else 0. */
int ocl_ctx_cached(const ocl_ctx *c, int family);
/* Writes every program compiled in this context and not yet saved to the cache (best effort:
 * a cache that cannot be written costs a compile next time, never a failure). */
void ocl_ctx_save(ocl_ctx *c);
/* Saves (ocl_ctx_save), then releases the programs, queue and context; accepts NULL. */
void ocl_ctx_free(ocl_ctx *c);
/* Allocates a device buffer of bytes (> 0). */
int ocl_buffer_new(ocl_ctx *c, size_t bytes, cl_mem *out, char *err);
/* Blocking copy host → device at byte offset. */
int ocl_write(ocl_ctx *c, cl_mem buf, size_t offset, size_t bytes, const void *src, char *err);
/* Blocking copy device → host at byte offset (waits for queued work on that buffer). */
int ocl_read(ocl_ctx *c, cl_mem buf, size_t offset, size_t bytes, void *dst, char *err);
/* Maps bytes of buf at offset for the host to read and write (waits for queued work on it):
 * *out points at them until ocl_unmap, which enqueues their way back. A CPU device (PoCL)
 * hands out its own memory, so neither way copies; a GPU copies as read and write would. */
int ocl_map(ocl_ctx *c, cl_mem buf, size_t offset, size_t bytes, void **out, char *err);
int ocl_unmap(ocl_ctx *c, cl_mem buf, void *ptr, char *err);
/* Waits for everything queued. */
int ocl_finish(ocl_ctx *c, char *err);
/* A readable name for an OpenCL status code ("CL_OUT_OF_RESOURCES"). */
const char *ocl_strerror(cl_int rc);

#endif
