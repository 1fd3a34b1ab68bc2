/* softmax.c — float64 reference of dsl/examples/softmax.tile and softmax_online.tile. */
#include "ref.h"

#include <math.h>

void ref_softmax(int64_t M, int64_t N, const double *x, double *y) {
  for (int64_t m = 0; m < M; m++) {
    const double *xr = x + m * N;
    double *yr = y + m * N;
    double mx = -INFINITY, sum = 0;
    for (int64_t j = 0; j < N; j++)
      mx = fmax(mx, xr[j]);
    for (int64_t j = 0; j < N; j++)
      sum += yr[j] = exp(xr[j] - mx);
    for (int64_t j = 0; j < N; j++)
      yr[j] /= sum;
  }
}
