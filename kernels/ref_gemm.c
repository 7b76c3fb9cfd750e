/* ref_gemm.c: being written. */
