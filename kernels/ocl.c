/* ocl: device discovery, context + queue, and one program per kernel family.
 *
 * A family is one kernels/NAME.cl file; its program is built from common.cl and that file, only
 * when a kern asks for it (kern_new_for), so a dense model never compiles the convolutions. Each
 * program's device binary is cached on disk as NAME-<key>.bin, the key covering everything that
 * could change the result: platform, device, device and driver versions, build options, and the
 * text of common.cl and the family. A cached binary that fails to load or build is ignored and
 * replaced, so a stale or corrupt cache costs one compile, never a failure. Files are written to
 * a temporary name and renamed into place, so concurrent processes (several local workers) never
 * read half of one.
 *
 * When a compiled program is written matters on PoCL (bench/README.md, "Cold start"): taking the
 * binary compiles a generic work-group function of every kernel in it (most of a cold build's
 * time), while the per-local-size functions that launches compile are what a later run needs.
 * So a compiled program is saved by ocl_ctx_save() (the worker after its warm-up launches; any
 * context when freed), not at build, and its binary then carries those functions: the next
 * process compiles nothing even when PoCL's own cache is empty. Building families on several
 * threads gains nothing on PoCL 3.1 (its compiler runs one build at a time per process:
 * measured CPU time equal to wall time with 2 and 4 threads), so builds are sequential.
 *
 * Diagnostics. The context's notify callback keeps the driver's latest message (NVIDIA explains
 * there what it reports as CL_OUT_OF_RESOURCES, such as an illegal address) and prints the first
 * few; a failing call on the context, or a kern launch, ends its error sentence with it. A build
 * that fails prints its whole log to stderr. On NVIDIA (a device with cl_nv_compiler_options)
 * programs are built with -cl-nv-verbose, and a compiled family whose kernels spill registers
 * says so in one line (every family's registers with TRAINYARD_PROFILE set).
 *
 * Invariant: an ocl_ctx owns one context, one in-order queue and at most one program per
 * family. */
#include "kernels/ocl.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kernels/embedded.h"
#include "kernels/icd.h"
#include "util/path.h"
#include "util/err.h"
#include "util/sha256.h"
#include "util/timeutil.h"

#define OCL_MAX_PLATFORMS 16
#define OCL_MAX_DEVICES   64
#define OCL_BUILD_OPTIONS "-cl-std=CL1.2 -cl-mad-enable"
#define OCL_NV_OPTIONS    "-cl-nv-verbose" /* NVIDIA: ptxas' registers and spills in the log */
#define OCL_NOTES_PRINTED 16               /* driver messages printed per process, at most */
#define OCL_LOG_PRINTED   65536            /* bytes of a failed build's log printed, at most */

const char *ocl_strerror(cl_int rc)
{
    switch (rc) {
#define NAME(x)                                                                                    \
    case x:                                                                                        \
        return #x;
        NAME(CL_SUCCESS)
        NAME(CL_DEVICE_NOT_FOUND)
        NAME(CL_DEVICE_NOT_AVAILABLE)
        NAME(CL_COMPILER_NOT_AVAILABLE)
        NAME(CL_MEM_OBJECT_ALLOCATION_FAILURE)
        NAME(CL_OUT_OF_RESOURCES)
        NAME(CL_OUT_OF_HOST_MEMORY)
        NAME(CL_BUILD_PROGRAM_FAILURE)
        NAME(CL_MISALIGNED_SUB_BUFFER_OFFSET)
        NAME(CL_INVALID_VALUE)
        NAME(CL_INVALID_DEVICE)
        NAME(CL_INVALID_CONTEXT)
        NAME(CL_INVALID_COMMAND_QUEUE)
        NAME(CL_INVALID_MEM_OBJECT)
        NAME(CL_INVALID_BINARY)
        NAME(CL_INVALID_BUILD_OPTIONS)
        NAME(CL_INVALID_PROGRAM)
        NAME(CL_INVALID_PROGRAM_EXECUTABLE)
        NAME(CL_INVALID_KERNEL_NAME)
        NAME(CL_INVALID_KERNEL)
        NAME(CL_INVALID_ARG_INDEX)
        NAME(CL_INVALID_ARG_VALUE)
        NAME(CL_INVALID_ARG_SIZE)
        NAME(CL_INVALID_KERNEL_ARGS)
        NAME(CL_INVALID_WORK_DIMENSION)
        NAME(CL_INVALID_WORK_GROUP_SIZE)
        NAME(CL_INVALID_WORK_ITEM_SIZE)
        NAME(CL_INVALID_GLOBAL_OFFSET)
        NAME(CL_INVALID_EVENT_WAIT_LIST)
        NAME(CL_INVALID_OPERATION)
        NAME(CL_INVALID_BUFFER_SIZE)
        NAME(CL_INVALID_GLOBAL_WORK_SIZE)
        NAME(CL_PLATFORM_NOT_FOUND_KHR)
#undef NAME
    default:
        return "CL_UNKNOWN_ERROR";
    }
}

static int fail(char *err, cl_int rc, const char *what)
{
    return err_set(err, -EIO, "%s failed: %s (%d)", what, ocl_strerror(rc), rc);
}

static void info_str(cl_device_id d, cl_device_info what, char *out, size_t cap)
{
    out[0] = '\0';
    if (clGetDeviceInfo(d, what, cap, out, NULL) != CL_SUCCESS)
        snprintf(out, cap, "?");
    out[cap - 1] = '\0';
}

static void device_describe(cl_platform_id p, cl_device_id d, int index, ocl_device *o)
{
    memset(o, 0, sizeof *o);
    o->platform = p;
    o->id = d;
    o->index = index;
    if (clGetPlatformInfo(p, CL_PLATFORM_NAME, sizeof o->platform_name, o->platform_name, NULL))
        snprintf(o->platform_name, sizeof o->platform_name, "?");
    o->platform_name[sizeof o->platform_name - 1] = '\0';
    info_str(d, CL_DEVICE_NAME, o->name, sizeof o->name);
    info_str(d, CL_DEVICE_VENDOR, o->vendor, sizeof o->vendor);
    info_str(d, CL_DEVICE_VERSION, o->version, sizeof o->version);
    info_str(d, CL_DRIVER_VERSION, o->driver, sizeof o->driver);
    info_str(d, CL_DEVICE_OPENCL_C_VERSION, o->c_version, sizeof o->c_version);

    cl_uint cu = 0, align_bits = 0;
    cl_ulong gmem = 0, alloc = 0, lmem = 0;
    size_t wg = 0;
    clGetDeviceInfo(d, CL_DEVICE_TYPE, sizeof o->type, &o->type, NULL);
    clGetDeviceInfo(d, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof cu, &cu, NULL);
    clGetDeviceInfo(d, CL_DEVICE_GLOBAL_MEM_SIZE, sizeof gmem, &gmem, NULL);
    clGetDeviceInfo(d, CL_DEVICE_MAX_MEM_ALLOC_SIZE, sizeof alloc, &alloc, NULL);
    clGetDeviceInfo(d, CL_DEVICE_LOCAL_MEM_SIZE, sizeof lmem, &lmem, NULL);
    clGetDeviceInfo(d, CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof wg, &wg, NULL);
    clGetDeviceInfo(d, CL_DEVICE_MEM_BASE_ADDR_ALIGN, sizeof align_bits, &align_bits, NULL);
    o->compute_units = cu;
    o->global_mem = gmem;
    o->max_alloc = alloc;
    o->local_mem = lmem;
    o->max_work_group = wg;
    o->base_align_bytes = align_bits >= 8 ? align_bits / 8 : 128;
    o->opencl = 1;
    icd_found_by(o->platform_name, o->found_by, sizeof o->found_by);
    /* An NVIDIA GPU's UUID as CUDA names it (CUDA_VISIBLE_DEVICES=GPU-...): cl_khr_device_uuid's
     * 16 bytes, dashed 4-2-2-2-6. */
    unsigned char uuid[CL_UUID_SIZE_KHR];
    if (strstr(o->platform_name, "NVIDIA") && (o->type & CL_DEVICE_TYPE_GPU) &&
        clGetDeviceInfo(d, CL_DEVICE_UUID_KHR, sizeof uuid, uuid, NULL) == CL_SUCCESS) {
        size_t n = (size_t)snprintf(o->uuid, sizeof o->uuid, "GPU-");
        for (int i = 0; i < CL_UUID_SIZE_KHR; i++) {
            if (i == 4 || i == 6 || i == 8 || i == 10)
                o->uuid[n++] = '-';
            n += (size_t)snprintf(o->uuid + n, sizeof o->uuid - n, "%02x", uuid[i]);
        }
    }
}

/* The cache directory into dir, not created; 0, or -1 for "no cache". */
static int cache_dir_name(const char *given, char *dir, size_t cap)
{
    const char *env = getenv("TRAINYARD_KERNEL_CACHE");
    const char *xdg = getenv("XDG_CACHE_HOME");
    const char *home = getenv("HOME");
    if (given)
        snprintf(dir, cap, "%s", given);
    else if (env)
        snprintf(dir, cap, "%s", env);
    else if (xdg && *xdg)
        snprintf(dir, cap, "%s/trainyard/kernels", xdg);
    else if (home && *home)
        snprintf(dir, cap, "%s/.cache/trainyard/kernels", home);
    else
        return -1;
    return *dir ? 0 : -1;
}

/* Resolves the cache directory into dir (created if missing); returns 0 or -1 for "no cache". */
static int cache_dir_resolve(const char *given, char *dir, size_t cap)
{
    if (cache_dir_name(given, dir, cap) < 0)
        return -1;
    /* mkdir -p, one component at a time; failures show up when the file is opened. */
    for (char *p = dir + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        mkdir(dir, 0755);
        *p = '/';
    }
    mkdir(dir, 0755);
    return 0;
}

/* NVIDIA's OpenCL gives PTX as a program's binary, so a program loaded from trainyard's cache
 * is still compiled to the GPU's code at load, unless the driver's own compute cache has it:
 * that cache goes beside trainyard's (its cuda/ folder), so one folder kept across restarts (a
 * volume of a container) keeps both. CUDA_CACHE_PATH or CUDA_CACHE_DISABLE set by the user
 * win. The driver reads them when the loader starts it, so this runs before the first call. */
static void cuda_cache_place(void)
{
    char dir[4096], nv[4200];
    if (getenv("CUDA_CACHE_PATH") || getenv("CUDA_CACHE_DISABLE"))
        return;
    if (cache_dir_name(NULL, dir, sizeof dir) == 0 &&
        path_join(nv, sizeof nv, dir, "cuda", NULL) == 0)
        setenv("CUDA_CACHE_PATH", nv, 0);
}

/* The driver search (kernels/icd.h) and the ICD loader's first call, once per process: the
 * loader reads its environment then, and the temporary vendors folder can go right after. */
static void ocl_loader_start(void)
{
    char err[ERR_LEN];
    if (icd_prepare(err) < 0)
        fprintf(stderr, "trainyard: OpenCL: %s\n", err);
    cuda_cache_place();
    cl_uint np = 0;
    clGetPlatformIDs(0, NULL, &np);
    icd_done();
}

int ocl_devices_list(ocl_device **out, size_t *n, char *err)
{
    static pthread_once_t started = PTHREAD_ONCE_INIT;
    pthread_once(&started, ocl_loader_start);
    cl_platform_id plats[OCL_MAX_PLATFORMS];
    cl_uint np = 0;
    cl_int rc = clGetPlatformIDs(OCL_MAX_PLATFORMS, plats, &np);
    /* The ICD loader answers CL_PLATFORM_NOT_FOUND_KHR when no driver is installed: that is an
     * empty list, not an error. */
    if (rc == CL_PLATFORM_NOT_FOUND_KHR || (rc == CL_SUCCESS && np == 0)) {
        *out = NULL;
        *n = 0;
        return 0;
    }
    if (rc != CL_SUCCESS)
        return fail(err, rc, "clGetPlatformIDs");
    if (np > OCL_MAX_PLATFORMS)
        np = OCL_MAX_PLATFORMS;

    ocl_device *list = calloc(OCL_MAX_DEVICES, sizeof *list);
    if (!list)
        return err_set(err, -ENOMEM, "out of memory listing devices");
    size_t count = 0;
    for (cl_uint p = 0; p < np && count < OCL_MAX_DEVICES; p++) {
        cl_device_id devs[OCL_MAX_DEVICES];
        cl_uint nd = 0;
        if (clGetDeviceIDs(plats[p], CL_DEVICE_TYPE_ALL, OCL_MAX_DEVICES, devs, &nd) != CL_SUCCESS)
            continue; /* a platform without devices is not an error */
        for (cl_uint d = 0; d < nd && d < OCL_MAX_DEVICES && count < OCL_MAX_DEVICES; d++) {
            device_describe(plats[p], devs[d], (int)count, &list[count]);
            count++;
        }
    }
    *out = list;
    *n = count;
    return 0;
}

const char *ocl_device_kind(const ocl_device *d)
{
    if (d->type & CL_DEVICE_TYPE_GPU)
        return "gpu";
    if (d->type & CL_DEVICE_TYPE_CPU)
        return "cpu";
    if (d->type & CL_DEVICE_TYPE_ACCELERATOR)
        return "accelerator";
    return "other";
}

int ocl_device_pick(const char *want, ocl_device *out, char *err)
{
    ocl_device *list = NULL;
    size_t n = 0;
    int rc = ocl_devices_list(&list, &n, err);
    if (rc < 0)
        return rc;
    if (n == 0) {
        rc = err_set(err, -ENODEV,
                     "no OpenCL device found: install an OpenCL driver (pocl-opencl-icd for the "
                     "CPU, or your GPU vendor's ICD) and check with `trainyard devices`");
        goto out;
    }
    int best = -1;
    const char *forced = getenv("TRAINYARD_DEVICE");
    if (forced && *forced) {
        char *end = NULL;
        long i = strtol(forced, &end, 10);
        if (*end || i < 0 || (size_t)i >= n) {
            rc = err_set(err, -EINVAL, "TRAINYARD_DEVICE=%s is not a device index (0..%zu)", forced,
                         n - 1);
            goto out;
        }
        best = (int)i;
    } else {
        int gpu = !strcmp(want, "gpu"), cpu = !strcmp(want, "cpu"), any = !strcmp(want, "any");
        if (!gpu && !cpu && !any) {
            rc = err_set(err, -EINVAL, "device '%s' is not one of gpu, cpu, any", want);
            goto out;
        }
        for (size_t i = 0; i < n && best < 0; i++)
            if ((gpu || any) && (list[i].type & CL_DEVICE_TYPE_GPU))
                best = (int)i;
        for (size_t i = 0; i < n && best < 0; i++)
            if (cpu && (list[i].type & CL_DEVICE_TYPE_CPU))
                best = (int)i;
        if (best < 0 && any)
            best = 0;
        if (best < 0) {
            rc = err_set(err, -ENODEV, "no OpenCL %s device here (%zu device(s) of other types)",
                         want, n);
            goto out;
        }
    }
    *out = list[best];
    rc = 0;
out:
    free(list);
    return rc;
}

/* The cache key of one family: every input that can change its built binary. */
static void cache_key(const ocl_device *d, const char *options, int family, char hex[65])
{
    sha256_ctx h;
    uint8_t digest[32];
    sha256_init(&h);
    const char *parts[] = {d->platform_name, d->name, d->version, d->driver, options};
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++)
        sha256_update(&h, parts[i], strlen(parts[i]) + 1);
    const int srcs[2] = {0, family};
    for (int i = 0; i < 2; i++) {
        sha256_update(&h, kernels_source_names[srcs[i]], strlen(kernels_source_names[srcs[i]]) + 1);
        sha256_update(&h, kernels_sources[srcs[i]], strlen(kernels_sources[srcs[i]]) + 1);
    }
    sha256_final(&h, digest);
    sha256_hex(digest, hex);
}

/* The cache file of a family: DIR/<family>-<key>.bin; 0, or -1 when the cache is off. */
static int cache_path(const ocl_ctx *c, int family, char *path, size_t cap)
{
    if (!c->cache_dir[0])
        return -1;
    char key[65], stem[64];
    cache_key(&c->dev, c->options, family, key);
    snprintf(stem, sizeof stem, "%s", kernels_source_names[family]);
    char *dot = strrchr(stem, '.');
    if (dot)
        *dot = '\0';
    int n = snprintf(path, cap, "%s/%s-%s.bin", c->cache_dir, stem, key);
    return n > 0 && (size_t)n < cap ? 0 : -1;
}

static unsigned char *file_read_all(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    unsigned char *buf = NULL;
    long size = -1;
    if (fseek(f, 0, SEEK_END) == 0)
        size = ftell(f);
    if (size <= 0 || size > (1L << 30) || fseek(f, 0, SEEK_SET) != 0)
        goto out;
    buf = malloc((size_t)size);
    if (buf && fread(buf, 1, (size_t)size, f) != (size_t)size) {
        free(buf);
        buf = NULL;
    }
    *len = (size_t)size;
out:
    fclose(f);
    return buf;
}

static void cache_store(cl_program prog, const char *path)
{
    size_t size = 0;
    if (clGetProgramInfo(prog, CL_PROGRAM_BINARY_SIZES, sizeof size, &size, NULL) || size == 0)
        return;
    unsigned char *bin = malloc(size);
    if (!bin)
        return;
    char tmp[4300];
    snprintf(tmp, sizeof tmp, "%s.tmp-XXXXXX", path);
    int fd = -1;
    if (clGetProgramInfo(prog, CL_PROGRAM_BINARIES, sizeof bin, &bin, NULL) != CL_SUCCESS)
        goto out;
    fd = mkstemp(tmp);
    if (fd < 0)
        goto out;
    if (write(fd, bin, size) != (ssize_t)size || close(fd) != 0) {
        fd = -1;
        unlink(tmp);
        goto out;
    }
    fd = -1;
    if (rename(tmp, path) != 0)
        unlink(tmp);
out:
    if (fd >= 0) {
        close(fd);
        unlink(tmp);
    }
    free(bin);
}

/* The driver's messages, from clCreateContext's notify callback: the latest one is kept for the
 * next error sentence (ocl_ctx_driver_message) and the first OCL_NOTES_PRINTED are printed to
 * stderr as they come. Process-wide rather than per context: a driver may call back on its own
 * thread, and while a buffer holds it a context outlives the ocl_ctx that made it, so the
 * callback must not reach into an ocl_ctx. seq counts the messages; each ocl_ctx remembers the
 * last one it handed out. */
static struct {
    pthread_mutex_t lock;
    char last[ERR_LEN];
    unsigned long seq;
    unsigned printed;
} notes = {PTHREAD_MUTEX_INITIALIZER, "", 0, 0};

static void CL_CALLBACK ctx_notify(const char *errinfo, const void *private_info, size_t cb,
                                   void *user)
{
    (void)private_info;
    (void)cb;
    (void)user;
    pthread_mutex_lock(&notes.lock);
    snprintf(notes.last, sizeof notes.last, "%s", errinfo ? errinfo : "(no text)");
    notes.seq++;
    if (notes.printed < OCL_NOTES_PRINTED) {
        notes.printed++;
        fprintf(stderr, "OpenCL driver: %s%s\n", notes.last,
                notes.printed == OCL_NOTES_PRINTED ? " (its further messages are not printed)"
                                                   : "");
    }
    pthread_mutex_unlock(&notes.lock);
}

int ocl_ctx_driver_message(ocl_ctx *c, char *out, size_t cap)
{
    int fresh = 0;
    pthread_mutex_lock(&notes.lock);
    if (notes.seq != c->notes_seen) {
        c->notes_seen = notes.seq;
        snprintf(out, cap, "%s", notes.last);
        fresh = 1;
    }
    pthread_mutex_unlock(&notes.lock);
    if (!fresh && cap)
        out[0] = '\0';
    return fresh;
}

/* fail() for a call on c, with the driver's message when one came since the last error. */
static int ctx_fail(ocl_ctx *c, char *err, cl_int rc, const char *what)
{
    char note[ERR_LEN];
    if (ocl_ctx_driver_message(c, note, sizeof note))
        return err_set(err, -EIO, "%s failed: %s (%d); the driver said: %s", what, ocl_strerror(rc),
                       rc, note);
    return fail(err, rc, what);
}

/* ptxas' report in an NVIDIA build log (-cl-nv-verbose) as one line into out: each kernel's
 * registers, and the bytes it spills where it does ("gemm_tiled 40 regs, conv_dw 128 regs
 * (spills 24 B stores, 24 B loads)"). ptxas writes per kernel "Compiling entry function 'NAME'",
 * then "N bytes stack frame, S bytes spill stores, L bytes spill loads", then "Used R
 * registers". Returns the number of kernels found; with none out is "". */
static int nv_summary(const char *log, char *out, size_t cap)
{
    static const char frame[] = "bytes stack frame,";
    char name[128] = "";
    unsigned long st = 0, ld = 0, regs = 0;
    size_t n = 0;
    int kernels = 0;
    if (cap)
        out[0] = '\0';
    for (const char *line = log; line && *line;) {
        const char *end = strchr(line, '\n');
        int len = end ? (int)(end - line) : (int)strlen(line);
        char buf[512];
        snprintf(buf, sizeof buf, "%.*s", len, line);
        line = end ? end + 1 : NULL;
        const char *p = strstr(buf, "Compiling entry function '");
        if (p) {
            if (sscanf(p, "Compiling entry function '%127[^']'", name) != 1)
                name[0] = '\0';
            st = ld = 0;
            continue;
        }
        p = strstr(buf, frame);
        if (p && sscanf(p + sizeof frame - 1, " %lu bytes spill stores, %lu bytes spill loads", &st,
                        &ld) != 2)
            st = ld = 0;
        p = strstr(buf, "Used ");
        if (!p || !name[0] || sscanf(p, "Used %lu registers", &regs) != 1)
            continue;
        char one[256];
        if (st || ld)
            snprintf(one, sizeof one, "%s%s %lu regs (spills %lu B stores, %lu B loads)",
                     kernels ? ", " : "", name, regs, st, ld);
        else
            snprintf(one, sizeof one, "%s%s %lu regs", kernels ? ", " : "", name, regs);
        size_t w = strlen(one);
        if (n + w >= cap)
            break; /* out is full: the line ends with the kernels that fit */
        memcpy(out + n, one, w + 1);
        n += w;
        kernels++;
        name[0] = '\0';
    }
    return kernels;
}

/* Builds p (made from source or binary) for c's device. On failure the build log is printed to
 * stderr (its first OCL_LOG_PRINTED bytes) and its start ends the sentence in err. After a
 * compile on NVIDIA the log's register and spill report is printed as one line per family when a
 * kernel spills or TRAINYARD_PROFILE is set; a program from the cache has no such report. */
static int program_build(ocl_ctx *c, cl_program p, const char *family, char *err)
{
    cl_int rc = clBuildProgram(p, 1, &c->dev.id, c->options, NULL, NULL);
    size_t size = 0;
    char *log = NULL;
    if (clGetProgramBuildInfo(p, c->dev.id, CL_PROGRAM_BUILD_LOG, 0, NULL, &size) == CL_SUCCESS &&
        size > 1) {
        log = malloc(size + 1);
        if (log && clGetProgramBuildInfo(p, c->dev.id, CL_PROGRAM_BUILD_LOG, size, log, NULL) !=
                       CL_SUCCESS)
            log[0] = '\0';
        if (log)
            log[size] = '\0';
    }
    int ret = 0;
    if (rc != CL_SUCCESS) {
        fprintf(stderr, "building %s for %s failed (%s); the build log:\n%.*s\n", family,
                c->dev.name, ocl_strerror(rc), OCL_LOG_PRINTED, log ? log : "(empty)");
        ret = err_set(err, -EIO, "building the OpenCL kernels of %s for %s failed (%s): %s", family,
                      c->dev.name, ocl_strerror(rc), log ? log : "no build log");
    } else if (log && strstr(c->options, OCL_NV_OPTIONS)) {
        char line[2048];
        if (nv_summary(log, line, sizeof line) > 0 &&
            (strstr(line, "spills") || getenv("TRAINYARD_PROFILE")))
            fprintf(stderr, "kernels %s on %s: %s\n", family, c->dev.name, line);
    }
    free(log);
    return ret;
}

static cl_program program_from_cache(ocl_ctx *c, const char *path)
{
    size_t len = 0;
    unsigned char *bin = file_read_all(path, &len);
    if (!bin)
        return NULL;
    cl_int rc, status;
    const unsigned char *bins[1] = {bin};
    cl_program p = clCreateProgramWithBinary(c->context, 1, &c->dev.id, &len, bins, &status, &rc);
    free(bin);
    if (rc != CL_SUCCESS || status != CL_SUCCESS) {
        if (p)
            clReleaseProgram(p);
        return NULL;
    }
    if (clBuildProgram(p, 1, &c->dev.id, c->options, NULL, NULL) != CL_SUCCESS) {
        clReleaseProgram(p); /* a stale or corrupt binary: compiled again, quietly */
        return NULL;
    }
    return p;
}

static int program_from_source(ocl_ctx *c, int family, cl_program *out, char *err)
{
    cl_int rc;
    const char *srcs[2] = {kernels_sources[0], kernels_sources[family]};
    cl_program p = clCreateProgramWithSource(c->context, 2, srcs, NULL, &rc);
    if (rc != CL_SUCCESS)
        return fail(err, rc, "clCreateProgramWithSource");
    int ret = program_build(c, p, kernels_source_names[family], err);
    if (ret < 0) {
        clReleaseProgram(p);
        return ret;
    }
    *out = p;
    return 0;
}

int ocl_family_find(const char *file)
{
    for (unsigned i = 1; i < kernels_source_count && i < OCL_MAX_FAMILIES; i++)
        if (strcmp(kernels_source_names[i], file) == 0)
            return (int)i;
    return -ENOENT;
}

int ocl_kernel_family(const char *name)
{
    for (unsigned i = 0; i < kernels_entry_count; i++)
        if (strcmp(kernels_entry_names[i], name) == 0 && kernels_entry_source[i] < OCL_MAX_FAMILIES)
            return kernels_entry_source[i];
    return -ENOENT;
}

/* One family's build, on the caller's thread or one of its own: from the cache, else from
 * source. Writes only its own slot of c->programs and its own fields. */
typedef struct family_build {
    ocl_ctx *c;
    int family;
    int rc, compiled;
    char err[ERR_LEN];
    pthread_t thread;
    int started;
} family_build;

static void *family_build_run(void *arg)
{
    family_build *b = arg;
    char path[4200];
    cl_program p = NULL;
    if (cache_path(b->c, b->family, path, sizeof path) == 0)
        p = program_from_cache(b->c, path);
    if (!p) {
        b->compiled = 1;
        b->rc = program_from_source(b->c, b->family, &p, b->err);
    }
    if (b->rc == 0)
        b->c->programs[b->family] = p;
    return NULL;
}

/* Whether the families of one ocl_ctx_build are built on threads of their own:
 * TRAINYARD_KERNEL_BUILD=parallel|serial decides, else NVIDIA's platform alone, whose compiler
 * builds programs side by side. Not the others: PoCL 3.1 compiles one program at a time per
 * process (threads only add their cost), and Oclgrind's compiler corrupts its heap when two
 * threads build at once. */
static int build_parallel(const ocl_ctx *c)
{
    const char *how = getenv("TRAINYARD_KERNEL_BUILD");
    if (how && strcmp(how, "parallel") == 0)
        return 1;
    if (how && strcmp(how, "serial") == 0)
        return 0;
    return strstr(c->dev.platform_name, "NVIDIA") != NULL;
}

int ocl_ctx_build(ocl_ctx *c, const int *families, size_t n, char *err)
{
    double t0 = time_mono();
    family_build b[OCL_MAX_FAMILIES];
    size_t nb = 0;
    for (size_t i = 0; i < n; i++) {
        int f = families[i];
        if (f <= 0 || f >= OCL_MAX_FAMILIES || (unsigned)f >= kernels_source_count)
            return err_set(err, -EINVAL, "no kernel family %d", f);
        int twice = 0;
        for (size_t j = 0; j < nb; j++)
            twice |= b[j].family == f;
        if (c->programs[f] || twice)
            continue;
        b[nb++] = (family_build){.c = c, .family = f};
    }
    int threads = nb > 1 && build_parallel(c);
    for (size_t i = 0; i < nb; i++) {
        if (threads)
            b[i].started = pthread_create(&b[i].thread, NULL, family_build_run, &b[i]) == 0;
        if (!b[i].started) /* serial, or no thread to be had: here */
            family_build_run(&b[i]);
    }
    int rc = 0;
    for (size_t i = 0; i < nb; i++) {
        if (b[i].started)
            pthread_join(b[i].thread, NULL);
        if (b[i].compiled) {
            c->from_cache = 0;
            c->unsaved[b[i].family] = b[i].rc == 0;
        }
        if (b[i].rc < 0 && rc == 0)
            rc = err_set(err, b[i].rc, "%s", b[i].err);
    }
    c->build_seconds += time_mono() - t0;
    return rc;
}

int ocl_ctx_cached(const ocl_ctx *c, int family)
{
    char path[4200];
    if (family <= 0 || family >= OCL_MAX_FAMILIES)
        return 0;
    if (c->programs[family])
        return 1;
    return cache_path(c, family, path, sizeof path) == 0 && access(path, R_OK) == 0;
}

void ocl_ctx_save(ocl_ctx *c)
{
    for (int f = 1; f < OCL_MAX_FAMILIES; f++) {
        char path[4200];
        if (c->programs[f] && c->unsaved[f] && cache_path(c, f, path, sizeof path) == 0)
            cache_store(c->programs[f], path);
        c->unsaved[f] = 0;
    }
}

/* 1 when device d lists extension name (a whole word of CL_DEVICE_EXTENSIONS), else 0. */
static int device_has_extension(cl_device_id d, const char *name)
{
    size_t size = 0;
    if (clGetDeviceInfo(d, CL_DEVICE_EXTENSIONS, 0, NULL, &size) != CL_SUCCESS || size == 0)
        return 0;
    char *all = malloc(size + 1);
    if (!all || clGetDeviceInfo(d, CL_DEVICE_EXTENSIONS, size, all, NULL) != CL_SUCCESS) {
        free(all);
        return 0;
    }
    all[size] = '\0';
    int found = 0;
    for (char *save = NULL, *w = strtok_r(all, " ", &save); w && !found;
         w = strtok_r(NULL, " ", &save))
        found = strcmp(w, name) == 0;
    free(all);
    return found;
}

int ocl_ctx_new(const ocl_device *dev, const char *cache_dir, ocl_ctx **out, char *err)
{
    cl_int rc;
    int ret = 0;
    ocl_ctx *c = calloc(1, sizeof *c);
    if (!c)
        return err_set(err, -ENOMEM, "out of memory");
    c->dev = *dev;
    c->from_cache = 1;
    if (kernels_source_count > OCL_MAX_FAMILIES) {
        ret = err_set(err, -EINVAL, "%u kernel sources are more than OCL_MAX_FAMILIES (%d)",
                      kernels_source_count, OCL_MAX_FAMILIES);
        goto out;
    }

    cl_context_properties props[] = {CL_CONTEXT_PLATFORM, (cl_context_properties)dev->platform, 0};
    pthread_mutex_lock(&notes.lock);
    c->notes_seen = notes.seq; /* earlier messages were about other contexts */
    pthread_mutex_unlock(&notes.lock);
    c->context = clCreateContext(props, 1, &dev->id, ctx_notify, NULL, &rc);
    if (rc != CL_SUCCESS) {
        ret = ctx_fail(c, err, rc, "clCreateContext");
        goto out;
    }
    c->queue = clCreateCommandQueue(c->context, dev->id, 0, &rc);
    if (rc != CL_SUCCESS) {
        ret = ctx_fail(c, err, rc, "clCreateCommandQueue");
        goto out;
    }

    const char *extra = getenv("TRAINYARD_CL_OPTIONS");
    int nv = device_has_extension(dev->id, "cl_nv_compiler_options");
    snprintf(c->options, sizeof c->options, "%s%s%s %s", OCL_BUILD_OPTIONS, nv ? " " : "",
             nv ? OCL_NV_OPTIONS : "", extra ? extra : "");
    if (cache_dir_resolve(cache_dir, c->cache_dir, sizeof c->cache_dir) < 0)
        c->cache_dir[0] = '\0';
out:
    if (ret < 0) {
        ocl_ctx_free(c);
        return ret;
    }
    *out = c;
    return 0;
}

void ocl_ctx_free(ocl_ctx *c)
{
    if (!c)
        return;
    ocl_ctx_save(c);
    for (int f = 0; f < OCL_MAX_FAMILIES; f++)
        if (c->programs[f])
            clReleaseProgram(c->programs[f]);
    if (c->queue)
        clReleaseCommandQueue(c->queue);
    if (c->context)
        clReleaseContext(c->context);
    free(c);
}

int ocl_buffer_new(ocl_ctx *c, size_t bytes, cl_mem *out, char *err)
{
    cl_int rc;
    if (bytes == 0)
        return err_set(err, -EINVAL, "a device buffer needs at least one byte");
    if (bytes > c->dev.max_alloc)
        return err_set(err, -ENOMEM, "%zu bytes is more than %s can allocate in one buffer (%llu)",
                       bytes, c->dev.name, (unsigned long long)c->dev.max_alloc);
    cl_mem m = clCreateBuffer(c->context, CL_MEM_READ_WRITE, bytes, NULL, &rc);
    if (rc != CL_SUCCESS)
        return ctx_fail(c, err, rc, "clCreateBuffer");
    *out = m;
    return 0;
}

int ocl_write(ocl_ctx *c, cl_mem buf, size_t offset, size_t bytes, const void *src, char *err)
{
    cl_int rc = clEnqueueWriteBuffer(c->queue, buf, CL_TRUE, offset, bytes, src, 0, NULL, NULL);
    return rc == CL_SUCCESS ? 0 : ctx_fail(c, err, rc, "clEnqueueWriteBuffer");
}

int ocl_read(ocl_ctx *c, cl_mem buf, size_t offset, size_t bytes, void *dst, char *err)
{
    cl_int rc = clEnqueueReadBuffer(c->queue, buf, CL_TRUE, offset, bytes, dst, 0, NULL, NULL);
    return rc == CL_SUCCESS ? 0 : ctx_fail(c, err, rc, "clEnqueueReadBuffer");
}

int ocl_map(ocl_ctx *c, cl_mem buf, size_t offset, size_t bytes, void **out, char *err)
{
    cl_int rc = CL_SUCCESS;
    *out = clEnqueueMapBuffer(c->queue, buf, CL_TRUE, CL_MAP_READ | CL_MAP_WRITE, offset, bytes, 0,
                              NULL, NULL, &rc);
    return rc == CL_SUCCESS ? 0 : ctx_fail(c, err, rc, "clEnqueueMapBuffer");
}

int ocl_unmap(ocl_ctx *c, cl_mem buf, void *ptr, char *err)
{
    cl_int rc = clEnqueueUnmapMemObject(c->queue, buf, ptr, 0, NULL, NULL);
    return rc == CL_SUCCESS ? 0 : ctx_fail(c, err, rc, "clEnqueueUnmapMemObject");
}

int ocl_finish(ocl_ctx *c, char *err)
{
    cl_int rc = clFinish(c->queue);
    return rc == CL_SUCCESS ? 0 : ctx_fail(c, err, rc, "clFinish");
}
