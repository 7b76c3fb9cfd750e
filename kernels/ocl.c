/* ocl.c: being written. */
