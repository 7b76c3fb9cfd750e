/* ref: plain-C references of every kernel in kernels.h, with the same meaning and arguments
 * (host float arrays instead of cl_mem). Straightforward loops, double accumulation where a
 * sum is long; the tests compare the OpenCL kernels with these. */
#ifndef TRAINYARD_KERNELS_REF_H
#define TRAINYARD_KERNELS_REF_H

#include <stdint.h>

#include "kernels/kernels.h"

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

/* Image families (ref_conv.c): the same structs and meaning as their kern_ twins, host arrays. */
void ref_conv2d_fwd(const kern_conv *g, const float *x, const float *w, float *y);
/* kern_conv2d_fwd_maxpool: ref_conv2d_fwd, then a 2×2 max pool of stride 2 over its output; ytmp
 * holds the N·OH·OW·F conv output, argmax may be NULL. */
void ref_conv2d_fwd_maxpool(const kern_conv *g, const float *x, const float *w, float *ytmp,
                            float *y, int32_t *argmax);
void ref_conv2d_bwd_data(const kern_conv *g, const float *dy, const float *w, float *dx);
void ref_conv2d_bwd_weights(const kern_conv *g, const float *x, const float *dy, float *dw,
                            int accumulate);
void ref_pool2d_fwd(int mode, const kern_pool *g, const float *x, float *y, int32_t *argmax);
void ref_pool2d_bwd(int mode, const kern_pool *g, const float *dy, const int32_t *argmax,
                    float *dx);
void ref_batchnorm_fwd_train(int rows, int c, float momentum, float eps, const float *x,
                             const float *gamma, const float *beta, float *moving_mean,
                             float *moving_var, float *save_mean, float *save_invstd, float *y);
void ref_batchnorm_fwd_infer(int rows, int c, float eps, const float *x, const float *gamma,
                             const float *beta, const float *moving_mean, const float *moving_var,
                             float *y);
void ref_batchnorm_bwd(int rows, int c, const float *x, const float *dy, const float *gamma,
                       const float *save_mean, const float *save_invstd, float *dx, float *dgamma,
                       float *dbeta);
/* src is uint8 when g->src_u8, else float; mean and std may be NULL. */
void ref_image_batch(const kern_image *g, int rows, const void *src, const int32_t *idx, int start,
                     const float *mean, const float *std, float *dst);

#endif
