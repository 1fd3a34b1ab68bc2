/* gemm.c — float64 references of dsl/examples/gemm.tile and of a weight gradient X^T dY. */
#include "ref.h"

#include <math.h>

static double act_fn(int act, double y) {
  if (act == 1)
    return y > 0 ? y : 0;
  if (act == 2)
    return 0.5 * y * (1.0 + tanh(0.7978845608 * (y + 0.044715 * y * y * y)));
  return y;
}

void ref_gemm(int64_t M, int64_t N, int64_t K, const double *a, const double *b, const double *bias,
              int act, double *c) {
  for (int64_t i = 0; i < M; i++)
    for (int64_t j = 0; j < N; j++) {
      double s = 0;
      for (int64_t k = 0; k < K; k++)
        s += a[i * K + k] * b[k * N + j];
      c[i * N + j] = act_fn(act, s + bias[j]);
    }
}

void ref_gemm_tn(int64_t M, int64_t I, int64_t O, const double *x, const double *dy, double *dw) {
  for (int64_t i = 0; i < I; i++)
    for (int64_t o = 0; o < O; o++) {
      double s = 0;
      for (int64_t m = 0; m < M; m++)
        s += x[m * I + i] * dy[m * O + o];
      dw[i * O + o] = s;
    }
}
