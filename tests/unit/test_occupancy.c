/* test_occupancy.c — the `.minnctapersm` hint of kernels without DOT stays only when ptxas
 * reports no spill under it (issue 14); without ptxas the estimate stays. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tilec.h"
#include "test_support.h"

/* Rotary embedding of a [ROWS, 128] bf16 tile: at ROWS = 32 its values do not fit the 64
 * registers the estimate asks for (8 blocks of 128 threads); at ROWS = 16 they do. */
static const char *rope =
    "kernel rope<ROWS = 32, D = 128, HD = 64, WARPS = 4>(X: bf16[M, D], C: f32[M, HD], S: f32[M, HD],\n"
    "                                                    Y: out bf16[M, D])\n"
    "  grid (cdiv(M, ROWS)) threads (WARPS * 32)\n"
    "{\n"
    "  let r0 = block.x * ROWS;\n"
    "  let x1 = to_f32(X[r0 : +ROWS, 0 : +HD]);\n"
    "  let x2 = to_f32(X[r0 : +ROWS, HD : +HD]);\n"
    "  let c = C[r0 : +ROWS, 0 : +HD];\n"
    "  let s = S[r0 : +ROWS, 0 : +HD];\n"
    "  Y[r0 : +ROWS, 0 : +HD] = to_bf16(x1 * c - x2 * s);\n"
    "  Y[r0 : +ROWS, HD : +HD] = to_bf16(x2 * c + x1 * s);\n"
    "}\n";

static char *rope_ptx(Arena *a, const char *rows, GpuArch arch) {
  Diag d;
  const char *defs[] = {rows, NULL};
  TirFunc *f = source_tir(a, "rope.tile", rope, defs, arch, &d);
  NvptxOptions o = {.arch = arch, .opt_level = 3};
  char *ptx = nvptx_compile(f, &o, &d, NULL);
  cr_assert(ptx);
  return ptx;
}

Test(occupancy, hint_dropped_when_ptxas_spills) {
  if (!have_ptxas())
    cr_skip_test("no ptxas");
  for (int k = 0; k < 2; k++) {
    Arena *a = arena_new();
    GpuArch arch = k ? ARCH_SM90A : ARCH_SM80;
    char *big = rope_ptx(a, "ROWS=32", arch), *small = rope_ptx(a, "ROWS=16", arch);
    cr_assert_null(strstr(big, ".minnctapersm"), "%s: a hint that spills is kept", arch_name(arch));
    cr_assert_eq(ptxas_spill_bytes(a, ptxas_find(a), big, arch, NULL), 0);
    ptxas_assert_clean(big, arch);
    cr_assert(strstr(small, ".minnctapersm 8"), "%s: the hint that fits is dropped", arch_name(arch));
    ptxas_assert_clean(small, arch);
    arena_free(a);
  }
}

/* Without ptxas (or with TILEC_OCC_CHECK=0) the estimate is emitted as it is; ptxas then spills. */
Test(occupancy, estimate_kept_without_ptxas) {
  Arena *a = arena_new();
  setenv("TILEC_PTXAS", "/nonexistent/ptxas", 1);
  cr_assert(strstr(rope_ptx(a, "ROWS=32", ARCH_SM90A), ".minnctapersm 8"));
  unsetenv("TILEC_PTXAS");
  setenv("TILEC_OCC_CHECK", "0", 1);
  char *ptx = rope_ptx(a, "ROWS=32", ARCH_SM90A);
  cr_assert(strstr(ptx, ".minnctapersm 8"));
  unsetenv("TILEC_OCC_CHECK");
  if (have_ptxas())
    cr_assert_gt(ptxas_spill_bytes(a, ptxas_find(a), ptx, ARCH_SM90A, NULL), 0, "the case no longer spills");
  arena_free(a);
}
