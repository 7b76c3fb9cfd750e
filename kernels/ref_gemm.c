/* ref_gemm: the plain-C meaning of kern_gemm, used by the tests to judge the OpenCL kernels.
 *
 * C = alpha·op(A)·op(B) + beta·C over row-major float matrices, op(X) = X or Xᵀ. Each C element
 * is one dot product accumulated in double, so the reference is more exact than any kernel it
 * checks. beta 0 writes C without reading it (NaNs there vanish), as kern_gemm does. */
#include "kernels/ref.h"

void ref_gemm(int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda,
              const float *B, int ldb, float beta, float *C, int ldc)
{
    for (int i = 0; i < M; i++) {
        for (int j = 0; j < N; j++) {
            double s = 0;
            for (int p = 0; p < K; p++) {
                float a = ta ? A[(long)p * lda + i] : A[(long)i * lda + p];
                float b = tb ? B[(long)j * ldb + p] : B[(long)p * ldb + j];
                s += (double)a * b;
            }
            float *c = &C[(long)i * ldc + j];
            double v = (double)alpha * s;
            if (beta != 0.0f)
                v += (double)beta * *c;
            *c = (float)v;
        }
    }
}
