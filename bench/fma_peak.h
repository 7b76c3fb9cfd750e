/* fma_peak: this machine's fp32 FMA peak, measured, so benchmarks can print their GFLOP/s beside
 * it in the same run. */
#ifndef TRAINYARD_BENCH_FMA_PEAK_H
#define TRAINYARD_BENCH_FMA_PEAK_H

/* GFLOP/s of a register-only FMA loop on `threads` threads at once (the best of 20 ~15 ms runs),
 * using AVX-512 when the CPU has it, else AVX2+FMA; 0 when it has neither (then
 * *isa is "none"). *isa names what ran. */
double fma_peak_gflops(int threads, const char **isa);

#endif
