/* fake_smi: the unit tests' stand-in for the NVIDIA driver's nvidia-smi — a real executable
 * script, written into a fresh folder, that prints for -L what the tool prints on a machine of
 * two H200s (FAKE_SMI_UUID0, FAKE_SMI_UUID1) and fails for anything else. */
#ifndef TRAINYARD_TESTS_UNIT_WORKER_FAKE_SMI_H
#define TRAINYARD_TESTS_UNIT_WORKER_FAKE_SMI_H

#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/unit/check.h"

#define FAKE_SMI_UUID0 "GPU-2f1c3a4b-5d6e-7f80-91a2-b3c4d5e6f708"
#define FAKE_SMI_UUID1 "GPU-0a1b2c3d-4e5f-6071-8293-a4b5c6d7e8f9"

/* Makes dir (a mkdtemp template) and dir/nvidia-smi in it. */
static inline void fake_smi_write(char *dir)
{
    CHECK(mkdtemp(dir) != NULL);
    char path[512];
    snprintf(path, sizeof path, "%s/nvidia-smi", dir);
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (!f)
        return;
    fprintf(f, "#!/bin/sh\n[ \"$1\" = -L ] || exit 2\n"
               "echo 'GPU 0: NVIDIA H200 (UUID: " FAKE_SMI_UUID0 ")'\n"
               "echo 'GPU 1: NVIDIA H200 (UUID: " FAKE_SMI_UUID1 ")'\n");
    fclose(f);
    CHECK(chmod(path, 0755) == 0);
}

/* Removes what fake_smi_write made. */
static inline void fake_smi_remove(const char *dir)
{
    char path[512];
    snprintf(path, sizeof path, "%s/nvidia-smi", dir);
    unlink(path);
    rmdir(dir);
}

#endif
