/* gemm.c: being written. */
