/* add_rmsnorm.c — float64 reference of dsl/examples/add_rmsnorm.tile. */
#include "ref.h"

void ref_add_rmsnorm(int64_t M, int64_t N, const double *x, const double *r, const double *w,
                     double eps, double *h, double *y) {
  for (int64_t i = 0; i < M * N; i++)
    h[i] = x[i] + r[i];
  ref_rmsnorm(M, N, h, w, eps, y);
}
