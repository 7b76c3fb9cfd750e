/* embedded: the kernels/\*.cl sources, compiled into the binary by kernels/embed.py. */
#ifndef TRAINYARD_KERNELS_EMBEDDED_H
#define TRAINYARD_KERNELS_EMBEDDED_H

/* NUL-terminated source text of each family, in build order. */
extern const char *const kernels_sources[];
/* File name of each family ("gemm.cl"). */
extern const char *const kernels_source_names[];
/* Number of families. */
extern const unsigned kernels_source_count;

#endif
