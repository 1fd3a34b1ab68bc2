/* tuned_gpu.c — the tuned row-op bundle (`make tuned`) on the GPU: each linked entry point
 * (softmax, rmsnorm, layernorm, add_rmsnorm) in f16 and bf16 at row lengths that take a pinned
 * winner (1024, 4096, 16384) and a runtime-N fallback (1000, 3000), on random inputs, against the
 * float64 references of tests/ref. Built (with every .c of build/tuned and tests/ref, libtilec.a for
 * the f16/bf16 rounding, -lcuda) and run by tests/gpu/run_gpu_tests.sh. */
#include <cuda.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "add_rmsnorm.h"
#include "cu_check.h"
#include "gpu_buf.h"
#include "layernorm.h"
#include "ref.h"
#include "rmsnorm.h"
#include "softmax.h"
#include "tilec.h"

enum { SOFTMAX, RMSNORM, LAYERNORM, ADD_RMSNORM, NKERNELS };
static const char *const kernel_name[NKERNELS] = {"softmax", "rmsnorm", "layernorm", "add_rmsnorm"};
static const double EPS = 1e-5;

/* One kernel, dtype and shape: launch the linked entry point, compare; 0 when it passes. */
static int run_case(int k, ElemType t, int64_t M, int64_t N, double *err) {
  tilec_dtype dt = t == TY_BF16 ? TILEC_BF16 : TILEC_F16;
  int64_t mn[2] = {M, N}, vn[1] = {N};
  Buf x, y, w, b, r;
  if (buf_new(&x, M * N, t, 3.0) || buf_new(&y, M * N, t, 0.0) || buf_new(&w, N, t, 1.0) ||
      buf_new(&b, N, t, 1.0) || buf_new(&r, M * N, t, 1.0))
    return 1;
  CU(cuMemsetD16(y.d, 0x7fff, (size_t)(M * N))); /* NaN in f16 and bf16 alike: every element must be written */
  tilec_tensor tx = tilec_tensor_contiguous(x.d, dt, 2, mn), ty = tilec_tensor_contiguous(y.d, dt, 2, mn);
  tilec_tensor tw = tilec_tensor_contiguous(w.d, dt, 1, vn), tb = tilec_tensor_contiguous(b.d, dt, 1, vn);
  tilec_tensor tr = tilec_tensor_contiguous(r.d, dt, 2, mn);
  double *ref = malloc((size_t)(M * N) * sizeof(double)), *h = malloc((size_t)(M * N) * sizeof(double));
  switch (k) {
  case SOFTMAX:
    TK(softmax_launch(NULL, &tx, &ty), softmax_error);
    ref_softmax(M, N, x.v, ref);
    break;
  case RMSNORM:
    TK(rmsnorm_launch(NULL, &tx, &tw, &ty, (float)EPS), rmsnorm_error);
    ref_rmsnorm(M, N, x.v, w.v, EPS, ref);
    break;
  case LAYERNORM:
    TK(layernorm_launch(NULL, &tx, &tw, &tb, &ty, (float)EPS), layernorm_error);
    ref_layernorm(M, N, x.v, w.v, b.v, EPS, ref);
    break;
  default:
    TK(add_rmsnorm_launch(NULL, &tx, &tr, &tw, &ty, (float)EPS), add_rmsnorm_error);
    ref_add_rmsnorm(M, N, x.v, r.v, w.v, EPS, h, ref);
    break;
  }
  CU(cuCtxSynchronize());
  if (buf_fetch(&y, t) || buf_fetch(&r, t))
    return 1;
  *err = rel_err(y.v, ref, M * N);
  if (k == ADD_RMSNORM) {
    double eh = rel_err(r.v, h, M * N);
    *err = eh > *err ? eh : *err;
  }
  buf_free(&x), buf_free(&y), buf_free(&w), buf_free(&b), buf_free(&r);
  free(ref), free(h);
  return !(*err <= 1e-2);
}

int main(void) {
  static const int64_t lengths[] = {1000, 1024, 3000, 4096, 16384};
  if (cu_primary_context()) /* device 0's primary context, current: what the generated code uses */
    return 1;
  TK(softmax_load(), softmax_error);
  TK(rmsnorm_load(), rmsnorm_error);
  TK(layernorm_load(), layernorm_error);
  TK(add_rmsnorm_load(), add_rmsnorm_error);
  int failures = 0, cases = 0;
  srand(7);
  for (int k = 0; k < NKERNELS; k++)
    for (int bf = 0; bf < 2; bf++)
      for (size_t i = 0; i < sizeof lengths / sizeof lengths[0]; i++) {
        double err = INFINITY;
        int64_t M = 257; /* ragged in rows too */
        int bad = run_case(k, bf ? TY_BF16 : TY_F16, M, lengths[i], &err);
        printf("%-12s %-4s %5ld x %-6ld rel err %.2e  %s\n", kernel_name[k], bf ? "bf16" : "f16", (long)M,
               (long)lengths[i], err, bad ? "FAILED" : "ok");
        failures += bad;
        cases++;
      }
  printf("tuned_gpu: %d of %d cases passed\n", cases - failures, cases);
  return failures != 0;
}
