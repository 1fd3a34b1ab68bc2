/* layernorm.c — float64 reference of dsl/examples/layernorm.tile. */
#include "ref.h"

#include <math.h>

void ref_layernorm(int64_t M, int64_t N, const double *x, const double *w, const double *b,
                   double eps, double *y) {
  for (int64_t m = 0; m < M; m++) {
    const double *xr = x + m * N;
    double mean = 0, var = 0;
    for (int64_t j = 0; j < N; j++)
      mean += xr[j];
    mean /= (double)N;
    for (int64_t j = 0; j < N; j++)
      var += (xr[j] - mean) * (xr[j] - mean);
    double inv = 1.0 / sqrt(var / (double)N + eps);
    for (int64_t j = 0; j < N; j++)
      y[m * N + j] = (xr[j] - mean) * inv * w[j] + b[j];
  }
}
