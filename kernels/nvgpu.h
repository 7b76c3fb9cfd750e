/* nvgpu: NVIDIA GPUs found without OpenCL, so that a machine whose OpenCL does not work still
 * runs script jobs (which use CUDA) on its GPUs.
 *
 * First NVML, from the driver's libnvidia-ml.so.1 opened at run time (dlopen; no NVIDIA header
 * or library is needed to build: the few types used are declared from NVML's documented ABI),
 * else the output of `nvidia-smi -L`. Each GPU is named by its UUID ("GPU-xxxxxxxx-..."), which
 * is what CUDA_VISIBLE_DEVICES takes.
 *
 * Ownership: nvgpu_list's array is malloc'd; the caller free()s it. */
#ifndef TRAINYARD_KERNELS_NVGPU_H
#define TRAINYARD_KERNELS_NVGPU_H

#include <stddef.h>
#include <stdint.h>

#define NVGPU_NVML_LIB    "libnvidia-ml.so.1"
#define NVGPU_MAX         64
#define NVGPU_SMI_MAX     (64 * 1024) /* the most of nvidia-smi's output read */
#define NVGPU_SMI_TIMEOUT "10"        /* seconds nvidia-smi -L may take */

typedef struct nvgpu {
    int index; /* NVML's / nvidia-smi's index */
    char name[128];
    char uuid[96];
    uint64_t memory; /* bytes; 0 when unknown (nvidia-smi -L does not say) */
} nvgpu;

/* The GPUs of this machine: NVML's when lib (NULL: NVGPU_NVML_LIB) loads, else nvidia-smi's
 * (found on PATH). *how is "nvml" or "nvidia-smi" (a static string). 0 with *n == 0 when
 * neither is there or neither finds a GPU; a negative code only when out of memory. */
int nvgpu_list(const char *lib, nvgpu **out, size_t *n, const char **how, char *err);
/* NVML alone: -ENOENT when lib cannot be opened, -ENOSYS when it lacks NVML's functions, -EIO
 * when NVML fails (err says which call and its code). */
int nvgpu_nvml_list(const char *lib, nvgpu *out, size_t cap, size_t *n, char *err);
/* Parses `nvidia-smi -L` ("GPU 0: NVIDIA H200 (UUID: GPU-...)" lines; MIG lines and anything
 * else are skipped) into out (at most cap); the count found. */
size_t nvgpu_smi_parse(const char *text, nvgpu *out, size_t cap);

#endif
