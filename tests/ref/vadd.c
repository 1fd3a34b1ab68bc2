/* vadd.c — float64 reference of dsl/examples/vadd.tile. */
#include "ref.h"

void ref_vadd(int64_t n, const double *x, const double *y, double *z) {
  for (int64_t i = 0; i < n; i++)
    z[i] = x[i] + y[i];
}
