/* gemm.cl: being written. */
