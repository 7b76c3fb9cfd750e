/* kernels.c: being written. */
