/* ws_gpu.c — the warp-specialized entry from `tilec --emit=c` on the GPU: dsl/examples/gemm.tile
 * at the bench's 128 x 256 x 64 tiles with the GELU epilogue (gw.{h,c}, sm_90a: TMA tensor maps
 * made per launch, a producer warpgroup, persistent tiles), against the float64 reference of
 * tests/ref: a ragged problem (a block per tile), one of more tiles than SMs (walked by the
 * resident blocks), one whose A is offset by one element (no TMA: the cp.async entry), and the
 * first again with TILERT_WS=0. tests/aot/ws_test.c checks on a fake driver which entry each
 * launch takes. Built by make gpu-prep, run by tests/gpu/run_gpu_tests.sh; compiled only by
 * tests/check_aot.sh. A machine with a driver but no GPU skips. */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include <cuda.h>
#include <stdio.h>

#include "cu_check.h"
#include "gpu_buf.h"
#include "gw.h"
#include "ref.h"
#include "tilec.h"

#include "gemm_check.h" /* after the generated header and ref.h */

static int check(const char *what, int64_t M, int64_t N, int64_t K, int offset, int *failures) {
  TK(gw_load(), gw_error);
  return gemm_check("ws_gpu", gw_launch, gw_error, what, M, N, K, offset, 2, failures);
}

int main(void) {
  int failures = 0;
  if (cu_no_device("ws_gpu"))
    return 0;
  if (cu_primary_context() || check("1000 x 768 x 512 (a block per tile)", 1000, 768, 512, 0, &failures) ||
      check("2048 x 4096 x 128 (256 tiles walked)", 2048, 4096, 128, 0, &failures) ||
      check("A offset by one element (cp.async entry)", 256, 512, 256, 1, &failures))
    return 1;
  gw_unload();
  setenv("TILERT_WS", "0", 1);
  if (check("1000 x 768 x 512, TILERT_WS=0", 1000, 768, 512, 0, &failures))
    return 1;
  gw_unload();
  printf("ws_gpu: %s\n", failures ? "FAILED" : "the generated launcher's entries match the reference");
  return failures != 0;
}
