/* cross_entropy.c — float64 reference of dsl/examples/cross_entropy.tile. */
#include "ref.h"

#include <math.h>

void ref_cross_entropy(int64_t M, int64_t N, const double *x, const double *label, double *loss) {
  for (int64_t m = 0; m < M; m++) {
    const double *xr = x + m * N;
    double t = label[m];
    if (!(t >= 0 && t < (double)N)) { /* ignored row (ignore_index) */
      loss[m] = 0;
      continue;
    }
    double mx = -INFINITY, sum = 0;
    for (int64_t j = 0; j < N; j++)
      mx = fmax(mx, xr[j]);
    for (int64_t j = 0; j < N; j++)
      sum += exp(xr[j] - mx);
    loss[m] = mx + log(sum) - xr[(int64_t)t];
  }
}
