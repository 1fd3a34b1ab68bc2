/* layernorm_backward.c — float64 references of dsl/examples/layernorm_backward.tile. */
#include "ref.h"

void ref_layernorm_train(int64_t M, int64_t N, const double *x, const double *w, const double *b,
                         double eps, double *y, double *mean, double *rstd) {
  ref_layernorm(M, N, x, w, b, eps, y);
  for (int64_t m = 0; m < M; m++)
    ref_layernorm_stats(x + m * N, N, eps, &mean[m], &rstd[m]);
}

void ref_layernorm_backward(int64_t M, int64_t N, const double *x, const double *w, const double *mean,
                            const double *rstd, const double *dy, double *dx, double *dw, double *db) {
  for (int64_t j = 0; j < N; j++)
    dw[j] = db[j] = 0;
  for (int64_t m = 0; m < M; m++) {
    const double *xr = x + m * N, *gr = dy + m * N;
    double c1 = 0, c2 = 0;
    for (int64_t j = 0; j < N; j++) {
      double xhat = (xr[j] - mean[m]) * rstd[m];
      c1 += gr[j] * w[j] * xhat;
      c2 += gr[j] * w[j];
    }
    c1 /= (double)N, c2 /= (double)N;
    for (int64_t j = 0; j < N; j++) {
      double xhat = (xr[j] - mean[m]) * rstd[m];
      dx[m * N + j] = (gr[j] * w[j] - xhat * c1 - c2) * rstd[m];
      dw[j] += gr[j] * xhat;
      db[j] += gr[j];
    }
  }
}
