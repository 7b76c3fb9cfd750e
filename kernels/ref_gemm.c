/* ref_gemm.c: TEMPORARY naive reference GEMM so that the kern branch links; the real one comes
 * from the gemm branch. C = alpha·op(A)·op(B) + beta·C with double accumulation. */
#include "kernels/ref.h"

#include <stddef.h>

void ref_gemm(int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda,
              const float *B, int ldb, float beta, float *C, int ldc)
{
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double s = 0;
            for (int p = 0; p < K; p++) {
                float a = ta ? A[(size_t)p * lda + i] : A[(size_t)i * lda + p];
                float b = tb ? B[(size_t)j * ldb + p] : B[(size_t)p * ldb + j];
                s += (double)a * b;
            }
            float *c = &C[(size_t)i * ldc + j];
            *c = beta == 0.0f ? (float)(alpha * s) : (float)(alpha * s + (double)beta * *c);
        }
}
