/* icd: finds OpenCL drivers that no ICD file names, before the ICD loader starts.
 *
 * ocl-icd loads the libraries that the .icd files of /etc/OpenCL/vendors name, and reads its
 * environment (OCL_ICD_VENDORS, OPENCL_VENDOR_PATH) once, at the first OpenCL call. A CUDA
 * container image often has the driver's libnvidia-opencl.so.1 but no nvidia.icd: the loader
 * then sees no platform. icd_prepare() looks in the driver folders for the vendors' libraries
 * that no .icd file names, and when it finds one writes a temporary vendors folder (a copy of
 * the system's .icd files plus one per library found) and points OCL_ICD_VENDORS at it; once
 * the loader has read it (icd_done), the folder is removed and the variable unset again, so a
 * child process (a local worker, a user's script) searches for itself. A user's own
 * OCL_ICD_VENDORS or OPENCL_VENDOR_PATH wins: then nothing is searched.
 *
 * The folders searched are TRAINYARD_OPENCL_DRIVER_PATH (colon-separated; set and empty: none)
 * or ICD_DRIVER_PATH. PoCL (libpocl.so.2) is a last resort, taken only when neither an .icd
 * file nor another vendor's library exists. Not thread-safe: ocl_devices_list calls both under
 * a pthread_once, before the loader's first call. */
#ifndef TRAINYARD_KERNELS_ICD_H
#define TRAINYARD_KERNELS_ICD_H

#include <stddef.h>

#define ICD_VENDORS_DIR "/etc/OpenCL/vendors"
#define ICD_DRIVER_PATH                                                                            \
    "/usr/local/nvidia/lib64:/usr/local/nvidia/lib:/usr/lib/x86_64-linux-gnu:/usr/lib64:"          \
    "/usr/lib:/usr/lib/x86_64-linux-gnu/intel-opencl:/usr/lib/intel-opencl:/opt/rocm/lib:"         \
    "/opt/amdgpu-pro/lib64"

/* Searches as described above; writes one line on stderr when it uses a library it found.
 * Returns 0, or a negative code when the temporary folder cannot be written (err says why; the
 * loader then sees only the system's .icd files). */
int icd_prepare(char *err);
/* After the loader's first call: removes the temporary folder and unsets OCL_ICD_VENDORS. */
void icd_done(void);
/* How a platform of this name was found, into out: "opencl via /etc/OpenCL/vendors", "opencl
 * via driver search: PATH" or "opencl via OCL_ICD_VENDORS=..." (the user's setting). */
void icd_found_by(const char *platform_name, char *out, size_t cap);

#endif
