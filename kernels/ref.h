/* ref: plain-C references of every kernel in kernels.h, with the same meaning and arguments
 * (host float arrays instead of cl_mem). Straightforward loops, double accumulation where a
 * sum is long; the tests compare the OpenCL kernels with these. */
#ifndef TRAINYARD_KERNELS_REF_H
#define TRAINYARD_KERNELS_REF_H

#include <stdint.h>

void ref_gemm(int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda,
              const float *B, int ldb, float beta, float *C, int ldc);
void ref_bias_act_fwd(int rows, int cols, int act, float *y, const float *bias);
void ref_bias_act_bwd(int rows, int cols, int act, const float *y, float *dy, float *dbias);
void ref_softmax_xent(int rows, int cols, const float *logits, const int32_t *labels, float scale,
                      float *dlogits, float *loss, float *correct);
void ref_bce(int rows, const float *logits, const float *labels, float scale, float *dlogits,
             float *loss, float *correct);
void ref_mse(int rows, int cols, const float *pred, const float *target, float scale, float *dpred,
             float *loss);
void ref_dropout(int n, float rate, uint64_t seed, uint64_t offset, const float *x, float *y);
/* The counter-based uniform in [0, 1) that kern_dropout draws from (same bits on host and device).
 */
float ref_uniform(uint64_t seed, uint64_t counter);
void ref_reduce_sum(int n, const float *x, float *out, int index, int accumulate);
void ref_sgd(int n, float lr, float momentum, float *w, const float *g, float *v);
void ref_adam(int n, float lr, float beta1, float beta2, float eps, float bc1, float bc2, float *w,
              const float *g, float *m, float *v);
void ref_gather_rows(int rows, int cols, const uint32_t *src, const int32_t *idx, int start,
                     uint32_t *dst);

#endif
