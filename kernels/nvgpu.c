/* nvgpu: NVML through dlopen, else `nvidia-smi -L` (see nvgpu.h).
 *
 * The NVML ABI used (nvml.h, stable since the _v2 entry points of CUDA 5): functions return an
 * int (nvmlReturn_t, NVML_SUCCESS == 0); a device is an opaque pointer (nvmlDevice_t); the
 * memory record is three unsigned long long (total, free, used). Names and UUIDs fit 96 bytes
 * (NVML_DEVICE_NAME_V2_BUFFER_SIZE, NVML_DEVICE_UUID_V2_BUFFER_SIZE). The library is closed
 * again after the listing (nvmlShutdown, dlclose): nothing of it is kept. */
#include "kernels/nvgpu.h"

#include <ctype.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/err.h"

typedef int nvml_return;
typedef struct nvml_device_st *nvml_device;
typedef struct nvml_memory {
    unsigned long long total, free, used;
} nvml_memory;

typedef struct nvml_api {
    nvml_return (*init)(void);
    nvml_return (*shutdown)(void);
    nvml_return (*count)(unsigned *);
    nvml_return (*handle)(unsigned, nvml_device *);
    nvml_return (*name)(nvml_device, char *, unsigned);
    nvml_return (*uuid)(nvml_device, char *, unsigned);
    nvml_return (*memory)(nvml_device, nvml_memory *);
} nvml_api;

/* Looks up sym in h into *fn; 0, or -1 when missing. */
static int nvml_sym(void *h, const char *sym, void *fn)
{
    void *p = dlsym(h, sym);
    memcpy(fn, &p, sizeof p); /* a data pointer into a function pointer, as POSIX allows */
    return p ? 0 : -1;
}

int nvgpu_nvml_list(const char *lib, nvgpu *out, size_t cap, size_t *n, char *err)
{
    if (!lib)
        lib = NVGPU_NVML_LIB;
    void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    if (!h)
        return err_set(err, -ENOENT, "NVML is not here: %s", dlerror());
    nvml_api api;
    int missing =
        nvml_sym(h, "nvmlInit_v2", &api.init) | nvml_sym(h, "nvmlShutdown", &api.shutdown) |
        nvml_sym(h, "nvmlDeviceGetCount_v2", &api.count) |
        nvml_sym(h, "nvmlDeviceGetHandleByIndex_v2", &api.handle) |
        nvml_sym(h, "nvmlDeviceGetName", &api.name) | nvml_sym(h, "nvmlDeviceGetUUID", &api.uuid) |
        nvml_sym(h, "nvmlDeviceGetMemoryInfo", &api.memory);
    if (missing) {
        dlclose(h);
        return err_set(err, -ENOSYS, "%s is not NVML: it lacks NVML's functions", lib);
    }
    int rc = 0;
    unsigned count = 0;
    nvml_return r = api.init();
    if (r != 0) {
        dlclose(h);
        return err_set(err, -EIO, "nvmlInit_v2 failed (NVML error %d)", r);
    }
    r = api.count(&count);
    if (r != 0)
        rc = err_set(err, -EIO, "nvmlDeviceGetCount_v2 failed (NVML error %d)", r);
    size_t k = 0;
    for (unsigned i = 0; rc == 0 && i < count && k < cap; i++) {
        nvml_device d = NULL;
        char name[96] = "", uuid[96] = "";
        nvml_memory mem = {0, 0, 0};
        r = api.handle(i, &d);
        if (r == 0)
            r = api.name(d, name, sizeof name);
        if (r == 0)
            r = api.uuid(d, uuid, sizeof uuid);
        if (r != 0)
            continue; /* a GPU NVML cannot describe (lost, or not ours to see): skipped */
        if (api.memory(d, &mem) != 0)
            mem.total = 0;
        nvgpu *g = &out[k++];
        memset(g, 0, sizeof *g);
        g->index = (int)i;
        snprintf(g->name, sizeof g->name, "%.*s", (int)sizeof name - 1, name);
        snprintf(g->uuid, sizeof g->uuid, "%.*s", (int)sizeof uuid - 1, uuid);
        g->memory = mem.total;
    }
    api.shutdown();
    dlclose(h);
    if (rc < 0)
        return rc;
    *n = k;
    return 0;
}

size_t nvgpu_smi_parse(const char *text, nvgpu *out, size_t cap)
{
    size_t k = 0;
    for (const char *line = text; line && *line && k < cap;) {
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);
        char buf[512];
        snprintf(buf, sizeof buf, "%.*s", (int)(len < sizeof buf ? len : sizeof buf - 1), line);
        line = end ? end + 1 : NULL;
        /* GPU <index>: <name> (UUID: GPU-<hex and dashes>) */
        int index = -1, at = 0;
        if (sscanf(buf, "GPU %d: %n", &index, &at) != 1 || index < 0 || at == 0)
            continue;
        char *open = strstr(buf + at, " (UUID: ");
        char *close = open ? strchr(open, ')') : NULL;
        if (!open || !close)
            continue;
        const char *uuid = open + strlen(" (UUID: ");
        size_t ulen = (size_t)(close - uuid);
        int ok = ulen > 4 && ulen < sizeof out[k].uuid && strncmp(uuid, "GPU-", 4) == 0;
        for (size_t i = 4; ok && i < ulen; i++)
            ok = isxdigit((unsigned char)uuid[i]) || uuid[i] == '-';
        if (!ok || open == buf + at)
            continue;
        nvgpu *g = &out[k++];
        memset(g, 0, sizeof *g);
        g->index = index;
        snprintf(g->name, sizeof g->name, "%.*s", (int)(open - (buf + at)), buf + at);
        snprintf(g->uuid, sizeof g->uuid, "%.*s", (int)ulen, uuid);
    }
    return k;
}

/* Runs `nvidia-smi -L` (from PATH) and parses what it prints; 0 GPUs when it is not there.
 * coreutils' timeout bounds it: nvidia-smi is known to hang while a driver is wedged. */
static size_t nvgpu_smi_list(nvgpu *out, size_t cap)
{
    FILE *p = popen("timeout -k 2 " NVGPU_SMI_TIMEOUT " nvidia-smi -L 2>/dev/null", "r");
    if (!p)
        return 0;
    char *text = malloc(NVGPU_SMI_MAX + 1);
    size_t len = 0, got;
    while (text && len < NVGPU_SMI_MAX && (got = fread(text + len, 1, NVGPU_SMI_MAX - len, p)) > 0)
        len += got;
    int status = pclose(p);
    size_t k = 0;
    if (text && status == 0) {
        text[len] = '\0';
        k = nvgpu_smi_parse(text, out, cap);
    }
    free(text);
    return k;
}

int nvgpu_list(const char *lib, nvgpu **out, size_t *n, const char **how, char *err)
{
    nvgpu *list = calloc(NVGPU_MAX, sizeof *list);
    if (!list)
        return err_set(err, -ENOMEM, "out of memory listing GPUs");
    size_t k = 0;
    char why[ERR_LEN];
    if (nvgpu_nvml_list(lib, list, NVGPU_MAX, &k, why) == 0 && k > 0) {
        *how = "nvml";
    } else {
        k = nvgpu_smi_list(list, NVGPU_MAX);
        *how = "nvidia-smi";
    }
    *out = list;
    *n = k;
    return 0;
}
