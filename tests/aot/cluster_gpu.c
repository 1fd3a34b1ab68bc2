/* cluster_gpu.c — kernels that run in thread-block clusters, launched by `tilec --emit=c`'s
 * generated C (cuLaunchKernelEx) on the GPU, against the float64 references of tests/ref:
 * - xc.{h,c}: bench/ab/cross_entropy_backward_split.tile (a row split over a cluster of 4 blocks
 *   that combine its max and sum through distributed shared memory), on rows that leave the
 *   last blocks of a cluster empty (1000 columns), misaligned rows (50257) and an ignored label;
 * - gc.{h,c}: dsl/examples/gemm.tile compiled with TILEC_CLUSTER=1 (128 x 128 tiles): the
 *   warp-specialized entry walks pairs of tiles along M, multicasting B to both blocks of a
 *   cluster of 2: a ragged problem of fewer pairs than resident clusters, and one they walk.
 * (gemm_check.h, as ws_gpu.c). tests/aot/ws_test.c checks on a fake driver which entry and cluster
 * each launch takes. Built by
 * make gpu-prep, run by tests/gpu/run_gpu_tests.sh; compiled only by tests/check_aot.sh. A
 * machine with a driver but no GPU skips. */
#include <cuda.h>
#include <stdio.h>

#include "cu_check.h"
#include "gc.h"
#include "gpu_buf.h"
#include "ref.h"
#include "tilec.h"
#include "xc.h"

#include "gemm_check.h" /* after the generated header and ref.h */

static int report(const char *what, double err, double tol, int *failures) {
  printf("cluster_gpu: %-52s rel err %.2e  %s\n", what, err, err <= tol ? "ok" : "FAILED");
  *failures += !(err <= tol);
  return 0;
}

/* Cross-entropy loss and gradient of M rows of N logits; row 1's label is ignored (-100). */
static int check_split(const char *what, int64_t M, int64_t N, int *failures) {
  int64_t mn[2] = {M, N};
  Buf x, dloss, loss, dx;
  if (buf_new(&x, M * N, TY_F16, 4.0) || buf_new(&dloss, M, TY_F32, 1.0) || buf_new(&loss, M, TY_F32, 0) ||
      buf_new(&dx, M * N, TY_F16, 0))
    return 1;
  int32_t *label = malloc(sizeof(int32_t) * (size_t)M);
  double *label_v = malloc(sizeof(double) * (size_t)M);
  for (int64_t i = 0; i < M; i++)
    label[i] = i == 1 ? -100 : (int32_t)((i * 7919) % N), label_v[i] = label[i];
  CUdeviceptr dlabel;
  CU(cuMemAlloc(&dlabel, sizeof(int32_t) * (size_t)M));
  CU(cuMemcpyHtoD(dlabel, label, sizeof(int32_t) * (size_t)M));
  tilec_tensor tx = tilec_tensor_contiguous(x.d, TILEC_F16, 2, mn);
  tilec_tensor tlabel = tilec_tensor_contiguous(dlabel, TILEC_I32, 1, &M);
  tilec_tensor tdloss = tilec_tensor_contiguous(dloss.d, TILEC_F32, 1, &M);
  tilec_tensor tloss = tilec_tensor_contiguous(loss.d, TILEC_F32, 1, &M);
  tilec_tensor tdx = tilec_tensor_contiguous(dx.d, TILEC_F16, 2, mn);
  TK(xc_launch(NULL, &tx, &tlabel, &tdloss, &tloss, &tdx), xc_error);
  CU(cuCtxSynchronize());
  if (buf_fetch(&loss, TY_F32) || buf_fetch(&dx, TY_F16))
    return 1;
  double *want_loss = malloc(sizeof(double) * (size_t)M), *want_dx = malloc(sizeof(double) * (size_t)(M * N));
  ref_cross_entropy_backward(M, N, x.v, label_v, dloss.v, want_loss, want_dx);
  char name[96];
  snprintf(name, sizeof name, "%s: loss", what);
  report(name, rel_err(loss.v, want_loss, M), 1e-3, failures);
  snprintf(name, sizeof name, "%s: dX", what);
  report(name, rel_err(dx.v, want_dx, M * N), 1e-2, failures);
  free(want_loss), free(want_dx), free(label), free(label_v);
  cuMemFree(dlabel);
  Buf *all[] = {&x, &dloss, &loss, &dx};
  buf_free_all(all, sizeof all / sizeof all[0]);
  return 0;
}

int main(void) {
  int failures = 0;
  if (cu_no_device("cluster_gpu"))
    return 0;
  if (cu_primary_context() || check_split("row split, 5 x 1000 (empty blocks)", 5, 1000, &failures) ||
      check_split("row split, 64 x 50257 (misaligned rows)", 64, 50257, &failures) ||
      gemm_check("cluster_gpu", gc_launch, gc_error, "GEMM pairs, 2000 x 2056 x 200 (ragged)", 2000, 2056, 200, 0,
                 1, &failures) ||
      gemm_check("cluster_gpu", gc_launch, gc_error, "GEMM pairs, 4096 x 4096 x 256 (walked)", 4096, 4096, 256, 0,
                 1, &failures))
    return 1;
  xc_unload();
  gc_unload();
  printf("cluster_gpu: %s\n", failures ? "FAILED" : "the generated launcher's cluster launches match the reference");
  return failures != 0;
}
