/* fma_peak: this machine's fp32 FMA peak, measured, so benchmarks can print their GFLOP/s beside
 * it in the same run: the host CPU's (a register loop in C) and, for a device that is not a CPU,
 * the device's own (the same loop as an OpenCL kernel). */
#ifndef TRAINYARD_BENCH_FMA_PEAK_H
#define TRAINYARD_BENCH_FMA_PEAK_H

#include "kernels/ocl.h"

/* GFLOP/s of a register-only FMA loop on `threads` threads at once (the best of 20 ~15 ms runs),
 * using AVX-512 when the CPU has it, else AVX2+FMA; 0 when it has neither (then
 * *isa is "none"). *isa names what ran. */
double fma_peak_gflops(int threads, const char **isa);

/* GFLOP/s of an FMA-loop kernel on c's device (16 independent chains per work-item, 2048
 * work-items per compute unit, each launch grown to ~20 ms, the best of 10); 0 on an OpenCL
 * failure, with the reason in err. */
double fma_peak_device_gflops(ocl_ctx *c, char *err);

/* Measures and prints the peaks as JSON lines: the host CPU's on `threads` threads (the device's
 * compute units on a CPU device, else the host's cores)
 *   {"fma_peak_gflops": p, "isa": "avx512", "threads": 2}
 * then, when the device is not a CPU or device_loop is set (to try the kernel on PoCL), its own
 *   {"device_fma_peak_gflops": p, "device": "NAME"}   ("error" instead of p when it failed).
 * Returns the peak the device's kernels are measured against: the CPU's on a CPU device, else the
 * device's (0 when its loop failed). */
double fma_peak_print(ocl_ctx *c, int device_loop);

/* Reads the options bench-conv and bench-gemm share, [--quick] [--device-peak], into *quick and
 * *device_loop; -EINVAL with a usage line for prog on stderr when argv holds anything else. */
int fma_peak_args(int argc, char **argv, const char *prog, int *quick, int *device_loop);

#endif
