/* test_hoist.c — tir_hoist_reduce_operands (tir_passes.c): a reduction's operand computed
 * between it and an earlier reduction it does not depend on moves above that one, so that the
 * two cross warps with one barrier; operands that need the earlier result, and moves that would
 * change what an instruction reads, stay. The interpreter gives the same bits either way. */
#include <criterion/criterion.h>
#include <string.h>

#include "tilec.h"
#include "test_support.h"

/* Two row sums, the second's operand written after the first (rmsnorm backward's shape), then a
 * sum that needs the first's result, and a register the first reads that is written again before
 * the fourth sum. */
static const char *src =
    "kernel sums<BLOCK = 256, WARPS = 4>(X: f32[M, N], G: f32[M, N], S: out f32[M, 4])\n"
    "  grid (M) threads (WARPS * 32)\n"
    "{\n"
    "  let r = block.x;\n"
    "  let x = X[r : +1, 0 : +BLOCK];\n"
    "  let g = G[r : +1, 0 : +BLOCK];\n"
    "  let a = sum(x * x, 1, keep);\n"
    "  let inv = rsqrt(a + 1.0);\n"
    "  let gx = g * x;\n"
    "  let b = sum(gx * 2.0, 1, keep);\n"
    "  let c = sum(x * inv, 1, keep);\n"
    "  reg t = g;\n"
    "  let d = sum(t, 1, keep);\n"
    "  t = x * 3.0;\n"
    "  let e = sum(t, 1, keep);\n"
    "  S[r : +1, 0 : +1] = a + b;\n"
    "  S[r : +1, 1 : +1] = c;\n"
    "  S[r : +1, 2 : +1] = d;\n"
    "  S[r : +1, 3 : +1] = e;\n"
    "}\n";

enum { M = 5, N = 256 };

/* The instruction that writes register r last before `before`, or -1. */
static int writer_before(const TirFunc *f, int r, int before) {
  int w = -1;
  for (int i = 0; i < before; i++)
    if (f->insts[i].dst == r)
      w = i;
  return w;
}

/* Index of the k-th REDUCE_SUM of f. */
static int nth_sum(const TirFunc *f, int k) { return nth_op(f, TIR_REDUCE_SUM, k); }

static void run(const TirFunc *f, float *s) {
  static float x[M * N], g[M * N];
  for (int i = 0; i < M * N; i++)
    x[i] = (float)((i * 7919) % 23) / 8.0f - 1.0f, g[i] = (float)((i * 104729) % 19) / 4.0f - 2.0f;
  InterpArg args[3] = {{.tensor = {x, {M, N}, {N, 1}}}, {.tensor = {g, {M, N}, {N, 1}}},
                       {.tensor = {s, {M, 4}, {4, 1}}}};
  int64_t dims[2] = {M, N};
  int64_t grid[3] = {M, 1, 1};
  char err[256];
  cr_assert(interp_run(f, args, dims, grid, err, sizeof err), "%s", err);
}

Test(hoist, independent_operands_move_above_the_earlier_sum) {
  Arena *a = arena_new();
  Diag d;
  TirFunc *on = source_tir_with(a, "sums.tile", src, ARCH_SM90A, "TILEC_REDUCE_HOIST", NULL, &d);
  TirFunc *off = source_tir_with(a, "sums.tile", src, ARCH_SM90A, "TILEC_REDUCE_HOIST", "0", &d);
  cr_assert_eq(on->ninsts, off->ninsts, "the pass only reorders");
  int a0 = nth_sum(on, 0), b0 = nth_sum(on, 1);
  cr_assert(a0 >= 0 && b0 > a0);
  cr_assert_lt(writer_before(on, on->insts[b0].args[0], b0), a0, "b's operand (gx * 2) before a's sum");
  cr_assert_lt(writer_before(on, on->insts[a0].args[0], a0), a0);
  int a1 = nth_sum(off, 0), b1 = nth_sum(off, 1);
  cr_assert_gt(writer_before(off, off->insts[b1].args[0], b1), a1, "off: as written");
  /* c needs inv, from a: its operand stays after a's sum */
  int c0 = nth_sum(on, 2);
  cr_assert_gt(writer_before(on, on->insts[c0].args[0], c0), a0);
  /* e's operand writes t, which d's sum reads: it stays after d */
  int d0 = nth_sum(on, 3), e0 = nth_sum(on, 4);
  cr_assert_gt(writer_before(on, on->insts[e0].args[0], e0), d0);
  static float s_on[M * 4], s_off[M * 4];
  run(on, s_on);
  run(off, s_off);
  cr_assert_eq(memcmp(s_on, s_off, sizeof s_on), 0, "the same sums, bit for bit");
  cr_assert_eq(s_on[2], s_off[2]);
  arena_free(a);
}

/* In rmsnorm backward the two row sums then share a barrier (one bar.sync fewer in the row loop);
 * the module assembles without spills. */
Test(hoist, rmsnorm_backward_sums_share_a_barrier) {
  static const char *defs[] = {"BLOCK=1024", "ROWS=1", "CHUNK=16", "WARPS=4", "STAGES=3", NULL};
  Arena *a = arena_new();
  const char *text = example_text(a, "rmsnorm_backward");
  char *on = source_ptx(a, "rmsnorm_backward.tile", text, defs, ARCH_SM90A);
  char *off = source_ptx_with(a, "rmsnorm_backward.tile", text, defs, ARCH_SM90A, "TILEC_REDUCE_HOIST", "0");
  cr_assert_lt(occurrences(on, "bar.sync"), occurrences(off, "bar.sync"), "%d vs %d", occurrences(on, "bar.sync"),
               occurrences(off, "bar.sync"));
  ptxas_assert_clean(on, ARCH_SM90A);
  ptxas_assert_clean(source_ptx(a, "rmsnorm_backward.tile", text, defs, ARCH_SM80), ARCH_SM80);
  arena_free(a);
}
