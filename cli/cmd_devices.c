/* cmd_devices: `trainyard devices [--json]` lists every device a worker here would offer
 * (kernels/devices.h): the OpenCL devices, then NVIDIA GPUs that only NVML or nvidia-smi shows,
 * each with how it was found; the same facts a job's resources.device is matched against. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "cli/cli.h"
#include "kernels/ocl.h"
#include "util/err.h"
#include "util/json_out.h"
#include "worker/agent.h"
#include "kernels/devices.h"

/* The API's Device object plus what only a person at this machine needs. */
static json_t *device_json(const ocl_device *d)
{
    json_t *o = agent_device_json(d);
    json_object_set_new(o, "vendor", json_string(d->vendor));
    if (!d->opencl)
        return o;
    json_object_set_new(o, "max_alloc_bytes", json_integer((json_int_t)d->max_alloc));
    json_object_set_new(o, "device_version", json_string(d->version));
    json_object_set_new(o, "driver_version", json_string(d->driver));
    return o;
}

int cmd_devices(int argc, char **argv)
{
    int as_json = 0;
    for (int i = 1; i < argc; i++) /* the server's devices instead (cmd_workers.c) */
        if (!strcmp(argv[i], "--remote") || !strcmp(argv[i], "--server"))
            return cmd_devices_remote(argc, argv);
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json")) {
            as_json = 1;
        } else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            printf("usage: trainyard devices [--json]\n"
                   "       trainyard devices --remote [--server URL] [--json]\n\n"
                   "Lists every OpenCL platform and device: index, type, name, compute units,\n"
                   "global memory, OpenCL C version and how it was found (the ICD files of\n"
                   "/etc/OpenCL/vendors, or the driver search of TRAINYARD_OPENCL_DRIVER_PATH).\n"
                   "NVIDIA GPUs that OpenCL does not show but NVML or nvidia-smi does follow, as\n"
                   "devices without OpenCL: a worker on one runs script jobs only.\n"
                   "A job's resources.device (gpu, cpu, any) picks among them;\n"
                   "TRAINYARD_DEVICE=<index> forces one.\n"
                   "With --remote (or --server URL) it lists instead the devices of the server's\n"
                   "workers: see `trainyard devices --remote --help`.\n");
            return 0;
        } else {
            fprintf(stderr, "trainyard devices: unknown argument '%s' (try --help)\n", argv[i]);
            return 2;
        }
    }

    char err[ERR_LEN];
    ocl_device *list = NULL;
    size_t n = 0;
    if (devices_list(&list, &n, err) < 0) {
        fprintf(stderr, "trainyard devices: %s\n", err);
        return 1;
    }
    if (as_json) {
        json_t *arr = json_array();
        for (size_t i = 0; i < n; i++)
            json_array_append_new(arr, device_json(&list[i]));
        json_t *doc = json_pack("{s:o}", "devices", arr);
        char *text = json_out_dumps(doc, JSON_INDENT(2));
        printf("%s\n", text);
        free(text);
        json_decref(doc);
    } else if (n == 0) {
        printf("no device found: no file of /etc/OpenCL/vendors names a driver that loads,\n"
               "the driver search (TRAINYARD_OPENCL_DRIVER_PATH) found no vendor's library, and\n"
               "neither NVML nor nvidia-smi shows an NVIDIA GPU.\n"
               "Install an OpenCL driver (pocl-opencl-icd for the CPU, or your GPU vendor's ICD)\n"
               "and run `trainyard devices` again.\n");
    } else {
        for (size_t i = 0; i < n; i++) {
            const ocl_device *d = &list[i];
            printf("%zu  %-4s %s\n", i, ocl_device_kind(d), d->name);
            if (!d->opencl) {
                printf("     uuid:          %s\n", d->uuid);
                if (d->global_mem)
                    printf("     memory:        %.1f GiB\n", (double)d->global_mem / (1u << 30));
                printf("     OpenCL:        none: script jobs only\n");
                printf("     found by:      %s\n", d->found_by);
                continue;
            }
            printf("     platform:      %s\n", d->platform_name);
            printf("     compute units: %u\n", d->compute_units);
            printf("     global memory: %.1f GiB\n", (double)d->global_mem / (1u << 30));
            printf("     OpenCL C:      %s\n", d->c_version);
            if (d->uuid[0])
                printf("     uuid:          %s\n", d->uuid);
            printf("     found by:      %s\n", d->found_by);
        }
    }
    free(list);
    return 0;
}
