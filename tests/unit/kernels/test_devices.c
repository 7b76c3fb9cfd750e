/* Unit tests of worker/devices: the machine's listing is the OpenCL devices (PoCL here, real)
 * followed by the NVIDIA GPUs that nvidia-smi shows when OpenCL shows none (a real executable
 * this test writes on PATH, printing what the driver's tool prints; NVML is pointed at a path
 * that does not exist), with indices in that order; devices_pick takes an OpenCL device for a
 * kind first, a GPU without OpenCL for "gpu" when OpenCL has none, and any device by index; and
 * the registration's JSON of a GPU without OpenCL says so (agent_device_json). */
#include "kernels/devices.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/unit/check.h"
#include "tests/unit/kernels/fake_smi.h"
#include "util/err.h"
#include "worker/agent.h"

#define UUID1 FAKE_SMI_UUID1

static char dir[] = "/tmp/trainyard-test-devices-XXXXXX";

static void fake_smi(void)
{
    fake_smi_write(dir);
    char env[1024];
    snprintf(env, sizeof env, "%s:/usr/bin:/bin", dir);
    setenv("PATH", env, 1);
    setenv("TRAINYARD_NVML_LIB", "/nonexistent/libnvidia-ml.so.1", 1);
    unsetenv("TRAINYARD_DEVICE");
}

int main(void)
{
    fake_smi();
    char err[ERR_LEN] = "";
    ocl_device *cl = NULL, *all = NULL;
    size_t ncl = 0, n = 0;
    CHECK_INT(ocl_devices_list(&cl, &ncl, err), 0);
    int cl_gpu = 0;
    for (size_t i = 0; i < ncl; i++)
        cl_gpu |= (cl[i].type & CL_DEVICE_TYPE_GPU) && strstr(cl[i].platform_name, "NVIDIA");
    if (cl_gpu)
        check_skip("OpenCL shows an NVIDIA GPU here: nvidia-smi's GPUs are not added");
    CHECK_INT(devices_list(&all, &n, err), 0);
    CHECK_INT(n, ncl + 2);
    for (size_t i = 0; i < ncl && i < n; i++) {
        CHECK_STR(all[i].name, cl[i].name);
        CHECK_INT(all[i].opencl, 1);
        CHECK(strncmp(all[i].found_by, "opencl via ", 11) == 0);
    }
    for (size_t i = ncl; i < n; i++) {
        CHECK_INT(all[i].index, (int)i);
        CHECK_INT(all[i].opencl, 0);
        CHECK_STR(all[i].found_by, "nvidia-smi");
        CHECK_STR(ocl_device_kind(&all[i]), "gpu");
        CHECK(all[i].platform == NULL && all[i].id == NULL);
    }

    /* by index: the second GPU */
    ocl_device d;
    char want[32];
    snprintf(want, sizeof want, "%zu", ncl + 1);
    CHECK_INT(devices_pick(want, &d, err), 0);
    CHECK_STR(d.uuid, UUID1);
    CHECK_INT(d.opencl, 0);
    snprintf(want, sizeof want, "%zu", ncl + 2);
    CHECK_INT(devices_pick(want, &d, err), -ENODEV);
    CHECK(strstr(err, "there is no device") != NULL);

    /* "gpu": no OpenCL GPU here, so the first GPU without OpenCL */
    int ocl_any_gpu = 0;
    for (size_t i = 0; i < ncl; i++)
        ocl_any_gpu |= (cl[i].type & CL_DEVICE_TYPE_GPU) != 0;
    CHECK_INT(devices_pick("gpu", &d, err), 0);
    CHECK_INT(d.opencl, ocl_any_gpu);
    if (!ocl_any_gpu)
        CHECK_INT(d.index, (int)ncl);
    /* "cpu" never takes a GPU; with PoCL it is the OpenCL CPU */
    int rc = devices_pick("cpu", &d, err);
    CHECK(rc == 0 ? d.opencl == 1 : rc == -ENODEV);

    /* the registration says what a GPU without OpenCL is */
    json_t *j = agent_device_json(&all[n - 1]);
    CHECK(json_is_false(json_object_get(j, "opencl")));
    CHECK_STR(json_string_value(json_object_get(j, "found_by")), "nvidia-smi");
    CHECK_STR(json_string_value(json_object_get(j, "uuid")), UUID1);
    CHECK(json_object_get(j, "platform") == NULL);
    CHECK(json_object_get(j, "global_mem_bytes") == NULL); /* nvidia-smi -L does not say */
    json_decref(j);

    free(cl);
    free(all);
    fake_smi_remove(dir);
    return check_exit();
}
