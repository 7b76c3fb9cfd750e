/* embedded: the kernels/\*.cl sources, compiled into the binary by kernels/embed.py. */
#ifndef TRAINYARD_KERNELS_EMBEDDED_H
#define TRAINYARD_KERNELS_EMBEDDED_H

/* NUL-terminated source text of each file, common.cl first. */
extern const char *const kernels_sources[];
/* File name of each source ("gemm.cl"). */
extern const char *const kernels_source_names[];
/* Number of sources. */
extern const unsigned kernels_source_count;
/* Every __kernel function of the sources ("gemm_cpu")... */
extern const char *const kernels_entry_names[];
/* ...and the index in kernels_sources of the file that defines it. */
extern const unsigned char kernels_entry_source[];
/* Number of kernels. */
extern const unsigned kernels_entry_count;

#endif
