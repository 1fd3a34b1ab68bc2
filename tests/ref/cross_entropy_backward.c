/* cross_entropy_backward.c — float64 reference of dsl/examples/cross_entropy_backward.tile. */
#include "ref.h"

#include <math.h>

void ref_cross_entropy_backward(int64_t M, int64_t N, const double *x, const double *label,
                                const double *dloss, double *loss, double *dx) {
  ref_cross_entropy(M, N, x, label, loss);
  for (int64_t m = 0; m < M; m++) {
    const double *xr = x + m * N;
    double t = label[m];
    bool valid = t >= 0 && t < (double)N;
    double mx = -INFINITY, sum = 0;
    for (int64_t j = 0; j < N; j++)
      mx = fmax(mx, xr[j]);
    for (int64_t j = 0; j < N; j++)
      sum += exp(xr[j] - mx);
    for (int64_t j = 0; j < N; j++)
      dx[m * N + j] = valid ? (exp(xr[j] - mx) / sum - (j == (int64_t)t)) * dloss[m] : 0.0;
  }
}
