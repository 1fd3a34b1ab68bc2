/* layernorm.c — float64 reference of dsl/examples/layernorm.tile. */
#include "ref.h"

#include <math.h>

void ref_layernorm_stats(const double *xr, int64_t N, double eps, double *mean, double *rstd) {
  double mu = 0, var = 0;
  for (int64_t j = 0; j < N; j++)
    mu += xr[j];
  mu /= (double)N;
  for (int64_t j = 0; j < N; j++)
    var += (xr[j] - mu) * (xr[j] - mu);
  *mean = mu;
  *rstd = 1.0 / sqrt(var / (double)N + eps);
}

void ref_layernorm(int64_t M, int64_t N, const double *x, const double *w, const double *b,
                   double eps, double *y) {
  for (int64_t m = 0; m < M; m++) {
    const double *xr = x + m * N;
    double mean, inv;
    ref_layernorm_stats(xr, N, eps, &mean, &inv);
    for (int64_t j = 0; j < N; j++)
      y[m * N + j] = (xr[j] - mean) * inv * w[j] + b[j];
  }
}
