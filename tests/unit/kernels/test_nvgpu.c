/* Unit tests of worker/nvgpu: the parser of `nvidia-smi -L` (GPU lines kept, MIG lines and
 * malformed ones skipped, names with spaces and parentheses, the cap), NVML's loader when the
 * library is absent (-ENOENT) or is not NVML (-ENOSYS, with a real library that lacks its
 * functions), and nvgpu_list falling back to a real nvidia-smi executable found on PATH (a
 * script this test writes, printing what the driver's tool prints) and finding nothing when
 * there is none. */
#include "kernels/nvgpu.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/unit/check.h"
#include "tests/unit/kernels/fake_smi.h"
#include "util/err.h"

#define UUID0 FAKE_SMI_UUID0
#define UUID1 FAKE_SMI_UUID1

static void test_parse(void)
{
    const char *text =
        "GPU 0: NVIDIA H200 (UUID: " UUID0 ")\n"
        "  MIG 3g.71gb     Device  0: (UUID: MIG-1c2d3e4f-0000-5555-aaaa-bbbbccccdddd)\n"
        "GPU 1: NVIDIA A100-SXM4-80GB (rev 2) (UUID: " UUID1 ")\n"
        "GPU 2: broken line without a uuid\n"
        "GPU 3: NVIDIA X (UUID: GPU-not/hex)\n"
        "No devices were found\n"
        "GPU 7: NVIDIA L4 (UUID: GPU-abcdef01-2345-6789-abcd-ef0123456789)";
    nvgpu g[8];
    size_t n = nvgpu_smi_parse(text, g, 8);
    CHECK_INT(n, 3);
    CHECK_INT(g[0].index, 0);
    CHECK_STR(g[0].name, "NVIDIA H200");
    CHECK_STR(g[0].uuid, UUID0);
    CHECK_INT(g[0].memory, 0);
    CHECK_INT(g[1].index, 1);
    CHECK_STR(g[1].name, "NVIDIA A100-SXM4-80GB (rev 2)");
    CHECK_STR(g[1].uuid, UUID1);
    CHECK_INT(g[2].index, 7); /* the last line needs no newline */
    CHECK_STR(g[2].name, "NVIDIA L4");
    CHECK_INT(nvgpu_smi_parse(text, g, 1), 1); /* the cap */
    CHECK_INT(nvgpu_smi_parse("", g, 8), 0);
}

static void test_nvml_absent(void)
{
    nvgpu g[4];
    size_t n = 99;
    char err[ERR_LEN] = "";
    CHECK_INT(nvgpu_nvml_list("/nonexistent/libnvidia-ml.so.1", g, 4, &n, err), -ENOENT);
    CHECK(strstr(err, "NVML is not here") != NULL);
    CHECK_INT(n, 99); /* untouched on failure */
    CHECK_INT(nvgpu_nvml_list("libm.so.6", g, 4, &n, err), -ENOSYS);
    CHECK(strstr(err, "not NVML") != NULL);
    /* The driver's own name: absent on a machine without the NVIDIA driver (this one, in CI). */
    int rc = nvgpu_nvml_list(NULL, g, 4, &n, err);
    CHECK(rc == -ENOENT || rc == 0 || rc == -EIO);
}

static void test_list_falls_back_to_smi(void)
{
    char dir[] = "/tmp/trainyard-test-nvgpu-XXXXXX", err[ERR_LEN] = "";
    fake_smi_write(dir);
    const char *old = getenv("PATH");
    char *saved = strdup(old ? old : "/usr/bin:/bin");
    char path[1024];
    snprintf(path, sizeof path, "%s:/usr/bin:/bin", dir);
    setenv("PATH", path, 1);
    nvgpu *g = NULL;
    size_t n = 0;
    const char *how = NULL;
    CHECK_INT(nvgpu_list("/nonexistent/libnvidia-ml.so.1", &g, &n, &how, err), 0);
    CHECK_STR(how, "nvidia-smi");
    CHECK_INT(n, 2);
    if (n == 2) {
        CHECK_STR(g[1].uuid, UUID1);
        CHECK_STR(g[1].name, "NVIDIA H200");
    }
    free(g);

    /* no nvidia-smi at all: nothing, and no error */
    setenv("PATH", "/nonexistent", 1);
    g = NULL;
    n = 9;
    CHECK_INT(nvgpu_list("/nonexistent/libnvidia-ml.so.1", &g, &n, &how, err), 0);
    CHECK_INT(n, 0);
    free(g);

    setenv("PATH", saved, 1);
    free(saved);
    fake_smi_remove(dir);
}

int main(void)
{
    test_parse();
    test_nvml_absent();
    test_list_falls_back_to_smi();
    return check_exit();
}
