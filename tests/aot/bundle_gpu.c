/* bundle_gpu.c — a file of several kernels through `tilec --emit=c` on the GPU:
 * dsl/examples/layernorm_backward.tile as one pair (ln.{h,c}, one module with both kernels),
 * layernorm_train and then layernorm_backward on the statistics it saved, as a training step
 * runs them, on ragged problems (M = 37 rows of N = 1000, and of N = 1024 = BLOCK, which runs the
 * kernels' full-size entries), against the float64 references of
 * tests/ref. Built (with ln.c, tests/ref, libtilec.a for the f16 rounding, -lcuda) by make
 * gpu-prep and run by tests/gpu/run_gpu_tests.sh; compiled only by tests/check_aot.sh. A machine
 * with a driver but no GPU skips. */
#include <cuda.h>
#include <stdio.h>

#include "cu_check.h"
#include "gpu_buf.h"
#include "ln.h"
#include "ref.h"
#include "tilec.h"

enum { M = 37 };
static const double EPS = 1e-5;

static int report(const char *what, int N, double err, int *failures) {
  printf("bundle_gpu: N = %d: %-28s rel err %.2e  %s\n", N, what, err, err <= 1e-2 ? "ok" : "FAILED");
  *failures += !(err <= 1e-2);
  return 0;
}

static int run(int N, int *failures) {
  int64_t mn[2] = {M, N}, m = M, n = N;
  Buf x, w, b, y, mean, rstd, dy, dx, dw, db;
  if (buf_new(&x, M * N, TY_F16, 3.0) || buf_new(&w, N, TY_F16, 1.0) ||
      buf_new(&b, N, TY_F16, 1.0) || buf_new(&y, M * N, TY_F16, 0) ||
      buf_new(&mean, M, TY_F32, 0) || buf_new(&rstd, M, TY_F32, 0) ||
      buf_new(&dy, M * N, TY_F16, 1.0) || buf_new(&dx, M * N, TY_F16, 0) ||
      buf_new(&dw, N, TY_F32, 5.0) || buf_new(&db, N, TY_F32, 5.0)) /* dW, dB: `= 0`, the launch zeroes them */
    return 1;
  tilec_tensor tx = tilec_tensor_contiguous(x.d, TILEC_F16, 2, mn);
  tilec_tensor tw = tilec_tensor_contiguous(w.d, TILEC_F16, 1, &n);
  tilec_tensor tb = tilec_tensor_contiguous(b.d, TILEC_F16, 1, &n);
  tilec_tensor ty = tilec_tensor_contiguous(y.d, TILEC_F16, 2, mn);
  tilec_tensor tmean = tilec_tensor_contiguous(mean.d, TILEC_F32, 1, &m);
  tilec_tensor trstd = tilec_tensor_contiguous(rstd.d, TILEC_F32, 1, &m);
  tilec_tensor tdy = tilec_tensor_contiguous(dy.d, TILEC_F16, 2, mn);
  tilec_tensor tdx = tilec_tensor_contiguous(dx.d, TILEC_F16, 2, mn);
  tilec_tensor tdw = tilec_tensor_contiguous(dw.d, TILEC_F32, 1, &n);
  tilec_tensor tdb = tilec_tensor_contiguous(db.d, TILEC_F32, 1, &n);
  TK(ln_load(), ln_error);
  TK(ln_layernorm_train_launch(NULL, &tx, &tw, &tb, &ty, &tmean, &trstd, (float)EPS), ln_error);
  TK(ln_layernorm_backward_launch(NULL, &tx, &tw, &tmean, &trstd, &tdy, &tdx, &tdw, &tdb),
     ln_error);
  CU(cuCtxSynchronize());
  if (buf_fetch(&y, TY_F16) || buf_fetch(&mean, TY_F32) || buf_fetch(&rstd, TY_F32) ||
      buf_fetch(&dx, TY_F16) || buf_fetch(&dw, TY_F32) || buf_fetch(&db, TY_F32))
    return 1;
  double *ry = malloc(sizeof(double) * M * N), *rmean = malloc(sizeof(double) * M),
         *rrstd = malloc(sizeof(double) * M), *rdx = malloc(sizeof(double) * M * N),
         *rdw = malloc(sizeof(double) * N), *rdb = malloc(sizeof(double) * N);
  ref_layernorm_train(M, N, x.v, w.v, b.v, EPS, ry, rmean, rrstd);
  /* the backward from the statistics the GPU saved, as the training step uses them */
  ref_layernorm_backward(M, N, x.v, w.v, mean.v, rstd.v, dy.v, rdx, rdw, rdb);
  report("layernorm_train Y", N, rel_err(y.v, ry, M * N), failures);
  report("layernorm_train Mean, Rstd", N, fmax(rel_err(mean.v, rmean, M), rel_err(rstd.v, rrstd, M)),
         failures);
  report("layernorm_backward dX", N, rel_err(dx.v, rdx, M * N), failures);
  report("layernorm_backward dW, dB", N, fmax(rel_err(dw.v, rdw, N), rel_err(db.v, rdb, N)),
         failures);
  ln_unload();
  Buf *all[] = {&x, &w, &b, &y, &mean, &rstd, &dy, &dx, &dw, &db};
  buf_free_all(all, sizeof all / sizeof all[0]);
  free(ry), free(rmean), free(rrstd), free(rdx), free(rdw), free(rdb);
  return 0;
}

int main(void) {
  int failures = 0;
  if (cu_no_device("bundle_gpu"))
    return 0;
  if (cu_primary_context() || run(1000, &failures) || run(1024, &failures))
    return 1;
  printf("bundle_gpu: %s\n", failures ? "FAILED" : "both kernels of one module match the references");
  return failures != 0;
}
