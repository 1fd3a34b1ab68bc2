/* rmsnorm_backward.c — float64 reference of dsl/examples/rmsnorm_backward.tile. */
#include "ref.h"

#include <math.h>

void ref_rmsnorm_backward(int64_t M, int64_t N, const double *x, const double *w, const double *dy,
                          double eps, double *dx, double *dw) {
  for (int64_t j = 0; j < N; j++)
    dw[j] = 0;
  for (int64_t m = 0; m < M; m++) {
    const double *xr = x + m * N, *gr = dy + m * N;
    double ss = 0, dot = 0;
    for (int64_t j = 0; j < N; j++) {
      ss += xr[j] * xr[j];
      dot += gr[j] * w[j] * xr[j];
    }
    double inv = 1.0 / sqrt(ss / (double)N + eps);
    double c = dot * inv * inv * inv / (double)N;
    for (int64_t j = 0; j < N; j++) {
      dx[m * N + j] = gr[j] * w[j] * inv - xr[j] * c;
      dw[j] += gr[j] * xr[j] * inv;
    }
  }
}
