/* rmsnorm.c — float64 reference of dsl/examples/rmsnorm.tile. */
#include "ref.h"

#include <math.h>

void ref_rmsnorm(int64_t M, int64_t N, const double *x, const double *w, double eps, double *y) {
  for (int64_t m = 0; m < M; m++) {
    const double *xr = x + m * N;
    double ss = 0;
    for (int64_t j = 0; j < N; j++)
      ss += xr[j] * xr[j];
    double inv = 1.0 / sqrt(ss / (double)N + eps);
    for (int64_t j = 0; j < N; j++)
      y[m * N + j] = xr[j] * inv * w[j];
  }
}
