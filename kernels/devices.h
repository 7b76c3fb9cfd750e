/* devices: every device of this machine a worker can offer — the OpenCL devices
 * (kernels/ocl.h, found through the ICD loader and the driver search of kernels/icd.h), then,
 * when OpenCL shows no NVIDIA GPU, the NVIDIA GPUs that NVML or nvidia-smi finds
 * (kernels/nvgpu.h) as devices without OpenCL (opencl 0, found_by "nvml" or "nvidia-smi"): those
 * run script jobs only. A device's index is its place in this listing, so `trainyard devices`,
 * `worker --device N` and serve's local workers agree; the OpenCL devices come first, at the
 * indices ocl_devices_list gives them.
 *
 * Ownership: devices_list's array is malloc'd; the caller free()s it. */
#ifndef TRAINYARD_KERNELS_DEVICES_H
#define TRAINYARD_KERNELS_DEVICES_H

#include <stddef.h>

#include "kernels/ocl.h"

/* The listing above; *n may be 0. $TRAINYARD_NVML_LIB names the NVML library to open instead
 * of libnvidia-ml.so.1 (tests). */
int devices_list(ocl_device **out, size_t *n, char *err);
/* Picks one: want is "any", "gpu", "cpu" or an index of devices_list. A kind takes an OpenCL
 * device first (ocl_device_pick, which obeys TRAINYARD_DEVICE), and a GPU without OpenCL only
 * when no OpenCL device fits ("gpu", "any"). -ENODEV with a sentence when none fits. */
int devices_pick(const char *want, ocl_device *out, char *err);

#endif
