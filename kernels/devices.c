/* devices: the OpenCL devices, then the NVIDIA GPUs OpenCL does not show (see devices.h).
 *
 * "Does not show" is decided per machine, not per GPU: when the NVIDIA OpenCL platform lists
 * any GPU it lists them all, and when it lists none (no driver for the loader) every GPU NVML or
 * nvidia-smi finds is added. */
#include "kernels/devices.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/err.h"
#include "kernels/nvgpu.h"

/* 1 when one of list's OpenCL devices is an NVIDIA GPU. */
static int devices_nvidia_seen(const ocl_device *list, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if ((list[i].type & CL_DEVICE_TYPE_GPU) && strstr(list[i].platform_name, "NVIDIA"))
            return 1;
    return 0;
}

int devices_list(ocl_device **out, size_t *n, char *err)
{
    ocl_device *cl = NULL;
    size_t ncl = 0;
    int rc = ocl_devices_list(&cl, &ncl, err);
    if (rc < 0)
        return rc;
    nvgpu *gpus = NULL;
    size_t ngpu = 0;
    const char *how = "";
    if (!devices_nvidia_seen(cl, ncl)) {
        rc = nvgpu_list(getenv("TRAINYARD_NVML_LIB"), &gpus, &ngpu, &how, err);
        if (rc < 0) {
            free(cl);
            return rc;
        }
    }
    ocl_device *all = calloc(ncl + ngpu + 1, sizeof *all);
    if (!all) {
        free(cl);
        free(gpus);
        return err_set(err, -ENOMEM, "out of memory listing devices");
    }
    if (ncl)
        memcpy(all, cl, ncl * sizeof *cl);
    for (size_t i = 0; i < ngpu; i++) {
        ocl_device *d = &all[ncl + i];
        d->index = (int)(ncl + i);
        d->type = CL_DEVICE_TYPE_GPU;
        d->global_mem = gpus[i].memory;
        snprintf(d->name, sizeof d->name, "%s", gpus[i].name);
        snprintf(d->vendor, sizeof d->vendor, "NVIDIA Corporation");
        snprintf(d->uuid, sizeof d->uuid, "%s", gpus[i].uuid);
        snprintf(d->found_by, sizeof d->found_by, "%s", how);
    }
    free(cl);
    free(gpus);
    *out = all;
    *n = ncl + ngpu;
    return 0;
}

int devices_pick(const char *want, ocl_device *out, char *err)
{
    char *end = NULL;
    long index = strtol(want, &end, 10);
    int is_index = end != want && !*end;
    ocl_device picked;
    int rc = is_index ? -ENODEV : ocl_device_pick(want, &picked, err);
    if (rc == 0 || (rc < 0 && rc != -ENODEV))
        goto out;
    ocl_device *list = NULL;
    size_t n = 0;
    char why[ERR_LEN];
    snprintf(why, sizeof why, "%s", err ? err : "");
    rc = devices_list(&list, &n, err);
    if (rc < 0)
        goto out;
    rc = -ENODEV;
    if (is_index && index >= 0 && (size_t)index < n) {
        picked = list[index];
        rc = 0;
    } else if (is_index) {
        err_set(err, rc, "there is no device %ld (%zu found: see `trainyard devices`)", index, n);
    } else {
        /* no OpenCL device fits: a GPU without OpenCL does for "gpu" and "any" */
        for (size_t i = 0; i < n && rc < 0; i++) {
            if (!list[i].opencl && strcmp(want, "cpu") != 0) {
                picked = list[i];
                rc = 0;
            }
        }
        if (rc < 0 && err)
            snprintf(err, ERR_LEN, "%s", why);
    }
    free(list);
out:
    if (rc == 0)
        *out = picked;
    return rc;
}
