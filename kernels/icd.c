/* icd: the driver search before the ICD loader's first call (see icd.h).
 *
 * A vendor is "covered" when an .icd file of the system's vendors folder names a library of its
 * (by the library's name: libnvidia-opencl..., libamdocl..., libigdrcl..., libpocl...); only
 * vendors not covered are searched for, so a working installation is left exactly as it is.
 * Whether a covered library really loads is the loader's business: that cannot be known
 * without loading it, and loading it would start the loader.
 *
 * State: one static record, written by icd_prepare and icd_done only (under ocl_devices_list's
 * pthread_once), read afterwards by icd_found_by. */
#include "kernels/icd.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/path.h"
#include "util/err.h"
#include "util/writefile.h"

#define ICD_MAX_FILES 32
#define ICD_PATH_MAX  1024

typedef struct icd_vendor {
    const char *lib;      /* the library's file name in a driver folder */
    const char *stem;     /* how the name an .icd file holds begins */
    const char *platform; /* in CL_PLATFORM_NAME of its platforms */
} icd_vendor;

/* PoCL last: it is the last resort (see icd.h). */
static const icd_vendor icd_vendors[] = {
    {"libnvidia-opencl.so.1", "libnvidia-opencl", "NVIDIA"},
    {"libamdocl64.so", "libamdocl", "AMD"},
    {"libigdrcl.so", "libigdrcl", "Intel"},
    {"libpocl.so.2", "libpocl", "Portable Computing Language"},
};
#define ICD_N_VENDORS (sizeof icd_vendors / sizeof icd_vendors[0])
#define ICD_POCL      (ICD_N_VENDORS - 1)

typedef struct icd_file {
    char name[256];         /* its file name, "nvidia.icd" */
    char lib[ICD_PATH_MAX]; /* its first line: the library */
} icd_file;

static struct {
    char user[300];                          /* "OCL_ICD_VENDORS=..." when the user set one */
    char found[ICD_N_VENDORS][ICD_PATH_MAX]; /* a library the search found; "" none */
    char dir[ICD_PATH_MAX];                  /* the temporary vendors folder; "" none */
    char written[ICD_MAX_FILES + ICD_N_VENDORS][256]; /* its files */
    size_t n_written;
} icd;

/* The vendor whose library the name (a path or a file name) is, or -1. */
static int icd_vendor_of_lib(const char *lib)
{
    const char *base = strrchr(lib, '/');
    base = base ? base + 1 : lib;
    for (size_t v = 0; v < ICD_N_VENDORS; v++)
        if (strncmp(base, icd_vendors[v].stem, strlen(icd_vendors[v].stem)) == 0)
            return (int)v;
    return -1;
}

/* Reads the .icd files of ICD_VENDORS_DIR into files (at most ICD_MAX_FILES); their count. */
static size_t icd_files_read(icd_file *files)
{
    DIR *d = opendir(ICD_VENDORS_DIR);
    size_t n = 0;
    if (!d)
        return 0;
    for (struct dirent *e = readdir(d); e && n < ICD_MAX_FILES; e = readdir(d)) {
        size_t len = strlen(e->d_name);
        if (len < 5 || len >= sizeof files[n].name || strcmp(e->d_name + len - 4, ".icd") != 0)
            continue;
        char path[ICD_PATH_MAX];
        if (path_join(path, sizeof path, ICD_VENDORS_DIR, e->d_name, NULL) < 0)
            continue;
        FILE *f = fopen(path, "r");
        if (!f)
            continue;
        if (fgets(files[n].lib, sizeof files[n].lib, f)) {
            files[n].lib[strcspn(files[n].lib, "\r\n")] = '\0';
            snprintf(files[n].name, sizeof files[n].name, "%s", e->d_name);
            n += files[n].lib[0] != '\0';
        }
        fclose(f);
    }
    closedir(d);
    return n;
}

/* The first folder of path (colon-separated) that holds lib, as FOLDER/lib into out; 0 or -1. */
static int icd_search(const char *path, const char *lib, char *out, size_t cap)
{
    const char *p = path;
    while (*p) {
        size_t len = strcspn(p, ":");
        if (len > 0) {
            int n = snprintf(out, cap, "%.*s/%s", (int)len, p, lib);
            struct stat st;
            if (n > 0 && (size_t)n < cap && stat(out, &st) == 0 && S_ISREG(st.st_mode))
                return 0;
        }
        p += len;
        if (*p == ':')
            p++;
    }
    return -1;
}

/* Writes one .icd file naming lib into the temporary folder. */
static int icd_write(const char *name, const char *lib, char *err)
{
    char path[2 * ICD_PATH_MAX], line[ICD_PATH_MAX + 1];
    int n = snprintf(line, sizeof line, "%s\n", lib);
    int rc = path_join(path, sizeof path, icd.dir, name, err);
    if (rc == 0)
        rc = writefile(path, line, (size_t)n, err);
    if (rc == 0 && icd.n_written < sizeof icd.written / sizeof icd.written[0])
        snprintf(icd.written[icd.n_written++], sizeof icd.written[0], "%s", name);
    return rc;
}

int icd_prepare(char *err)
{
    const char *names[] = {"OCL_ICD_VENDORS", "OPENCL_VENDOR_PATH"};
    for (size_t i = 0; i < 2; i++) {
        const char *v = getenv(names[i]);
        if (v && *v) {
            snprintf(icd.user, sizeof icd.user, "%s=%s", names[i], v);
            return 0;
        }
    }
    static icd_file files[ICD_MAX_FILES];
    size_t n_files = icd_files_read(files);
    int covered[ICD_N_VENDORS] = {0};
    for (size_t i = 0; i < n_files; i++) {
        int v = icd_vendor_of_lib(files[i].lib);
        if (v >= 0)
            covered[v] = 1;
    }
    const char *path = getenv("TRAINYARD_OPENCL_DRIVER_PATH");
    if (!path)
        path = ICD_DRIVER_PATH;
    int found = 0;
    for (size_t v = 0; v < ICD_N_VENDORS; v++) {
        if (covered[v] || (v == ICD_POCL && (n_files > 0 || found)))
            continue;
        if (icd_search(path, icd_vendors[v].lib, icd.found[v], sizeof icd.found[v]) == 0)
            found++;
        else
            icd.found[v][0] = '\0';
    }
    if (!found)
        return 0;

    const char *tmp = getenv("TMPDIR");
    snprintf(icd.dir, sizeof icd.dir, "%s/trainyard-icd-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(icd.dir)) {
        int rc = err_set(err, -errno,
                         "cannot create a vendors folder for the OpenCL drivers found "
                         "(%s): %s",
                         icd.dir, strerror(errno));
        icd.dir[0] = '\0';
        memset(icd.found, 0, sizeof icd.found);
        return rc;
    }
    int rc = 0;
    for (size_t i = 0; i < n_files && rc == 0; i++)
        rc = icd_write(files[i].name, files[i].lib, err);
    char said[2048] = "";
    size_t used = 0;
    for (size_t v = 0; v < ICD_N_VENDORS && rc == 0; v++) {
        if (!icd.found[v][0])
            continue;
        char name[64];
        snprintf(name, sizeof name, "trainyard-%.40s.icd", icd_vendors[v].stem + 3);
        rc = icd_write(name, icd.found[v], err);
        int n = snprintf(said + used, sizeof said - used, "%s%s", used ? ", " : "", icd.found[v]);
        if (n > 0 && (size_t)n < sizeof said - used)
            used += (size_t)n;
    }
    if (rc == 0 && setenv("OCL_ICD_VENDORS", icd.dir, 1) < 0)
        rc = err_set(err, -errno, "cannot set OCL_ICD_VENDORS: %s", strerror(errno));
    if (rc < 0) {
        icd_done();
        memset(icd.found, 0, sizeof icd.found);
        return rc;
    }
    fprintf(stderr,
            "trainyard: OpenCL: no file of %s names %s: using it (found by the driver search; "
            "see TRAINYARD_OPENCL_DRIVER_PATH)\n",
            ICD_VENDORS_DIR, said);
    return 0;
}

void icd_done(void)
{
    if (!icd.dir[0])
        return;
    for (size_t i = 0; i < icd.n_written; i++) {
        char path[2 * ICD_PATH_MAX];
        if (path_join(path, sizeof path, icd.dir, icd.written[i], NULL) == 0)
            unlink(path);
    }
    rmdir(icd.dir);
    icd.dir[0] = '\0';
    icd.n_written = 0;
    unsetenv("OCL_ICD_VENDORS");
}

void icd_found_by(const char *platform_name, char *out, size_t cap)
{
    if (icd.user[0]) {
        snprintf(out, cap, "opencl via %s", icd.user);
        return;
    }
    for (size_t v = 0; v < ICD_N_VENDORS; v++) {
        if (icd.found[v][0] && strstr(platform_name, icd_vendors[v].platform)) {
            snprintf(out, cap, "opencl via driver search: %s", icd.found[v]);
            return;
        }
    }
    snprintf(out, cap, "opencl via " ICD_VENDORS_DIR);
}
