/* test_guard.c — tir_guard.c: masks put under a scalar guard only where interval bounds prove
 * they keep every element, with the same results in the interpreter either way. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tilec.h"
#include "test_support.h"

/* Sums of column blocks with a ragged last block (`col < N`), a diagonal mask
 * (`row >= col`) and a mask on data (`x > 0`, not an index: never guarded). */
static const char *src =
    "kernel masked<BM = 8, BN = 16, WARPS = 1>(X: f32[M, N], Y: out f32[M, N])\n"
    "  grid (cdiv(M, BM)) threads (WARPS * 32)\n"
    "{\n"
    "  let m0 = block.x * BM;\n"
    "  reg acc: f32[BM, BN] = 0;\n"
    "  for n0 in 0 .. N step BN {\n"
    "    reg x = X[m0 : +BM, n0 : +BN];\n"
    "    x = where(col_index(n0, BN) < N, x, 0.0);\n"
    "    x = where(row_index(m0, BM) >= col_index(n0, BN), x, 0.0);\n"
    "    x = where(x > 0.0, x, 0.5);\n"
    "    acc += x;\n"
    "  }\n"
    "  Y[m0 : +BM, 0 : +BN] = acc;\n"
    "}\n";

enum { M = 37, N = 45 };

/* Whether every SELECT at loop depth 1 sits inside an IF. */
static int guarded_selects(const TirFunc *f) {
  int depth_if = 0, n = 0;
  for (int i = 0; i < f->ninsts; i++) {
    TirOp op = f->insts[i].op;
    depth_if += op == TIR_IF;
    depth_if -= op == TIR_ENDIF;
    n += op == TIR_SELECT && depth_if > 0;
  }
  return n;
}

static void run(bool guard, float *y, int *nif, int *nguarded) {
  Arena *a = arena_new();
  Diag d;
  TirFunc *f = source_tir_with(a, "masked.tile", src, ARCH_SM90A, "TILEC_MASK_GUARD", guard ? NULL : "0", &d);
  *nif = count_op(f, TIR_IF);
  *nguarded = guarded_selects(f);
  static float x[M * N];
  for (int i = 0; i < M * N; i++)
    x[i] = (float)((i * 7919) % 23) - 5.0f;
  InterpArg args[2] = {{.tensor = {x, {M, N}, {N, 1}}}, {.tensor = {y, {M, N}, {N, 1}}}};
  int64_t dims[2] = {M, N};
  int64_t grid[3] = {(M + 7) / 8, 1, 1};
  char err[256];
  cr_assert(interp_run(f, args, dims, grid, err, sizeof err), "%s", err);
  arena_free(a);
}

Test(guard, index_masks_are_guarded_data_masks_are_not) {
  static float y0[M * N], y1[M * N];
  int nif0, nif1, g0, g1;
  run(false, y0, &nif0, &g0);
  run(true, y1, &nif1, &g1);
  cr_assert_eq(nif0, 0);
  cr_assert_eq(g0, 0);
  cr_assert_eq(nif1, 2, "the column and the diagonal masks");
  cr_assert_eq(g1, 2, "x > 0 depends on the data: it stays unguarded");
  for (int i = 0; i < M * N; i++)
    cr_assert_eq(memcmp(&y0[i], &y1[i], sizeof(float)), 0, "element %d: %g vs %g", i, y0[i], y1[i]);
}

/* The guard of `col_index(n0, BN) < N` is `n0 + 15 < N` with an i32 overflow check on n0. */
Test(guard, bound_is_the_last_column) {
  Arena *a = arena_new();
  Diag d;
  TirFunc *f = source_tir(a, "masked.tile", src, NULL, ARCH_SM90A, &d);
  bool seen15 = false, seen_limit = false;
  for (int i = 0; i < f->ninsts; i++) {
    const TirInst *in = &f->insts[i];
    if (in->op == TIR_CONST && f->regs[in->dst].type.rank == 0) {
      seen15 |= in->imm == 15;
      seen_limit |= in->imm == 2147483647.0 - 15;
    }
  }
  cr_assert(seen15 && seen_limit);
  arena_free(a);
}

/* One-hot masks (tir_guard_onehots): `where(col_index(n0, BN) == t, g, 0)` is false in every
 * chunk but t's, so its index tree and select go under `if (not (n0 + BN - 1 < t or t < n0))`;
 * its one user subtracting it (x - 0 = x) goes too, and the unmasked path copies x. An addition
 * of the mask (x + 0 is not x for x = -0.0) keeps its add outside, and the mask's copy. */
static const char *onehot_src =
    "kernel onehot<BN = 16, WARPS = 1>(X: f32[M, N], T: i32[M], Y: out f32[M, N], Z: out f32[M, N])\n"
    "  grid (M) threads (WARPS * 32)\n"
    "{\n"
    "  let r = block.x;\n"
    "  let t = T[r];\n"
    "  for n0 in 0 .. N step BN {\n"
    "    let x = X[r : +1, n0 : +BN];\n"
    "    Y[r : +1, n0 : +BN] = x * 2.0 - where(col_index(n0, BN) == t, 3.0, 0.0);\n"
    "    Z[r : +1, n0 : +BN] = x + where(col_index(n0, BN) != t, 0.0, 5.0);\n"
    "  }\n"
    "}\n";

static void run_onehot(const char *knob_value, float *y, float *z, int *nif, bool *sub_inside) {
  Arena *a = arena_new();
  Diag d;
  TirFunc *f = source_tir_with(a, "onehot.tile", onehot_src, ARCH_SM90A, "TILEC_ONEHOT_GUARD", knob_value, &d);
  *nif = count_op(f, TIR_IF);
  *sub_inside = false;
  for (int i = find_op(f, 0, TIR_IF); i >= 0 && f->insts[i].op != TIR_ENDIF; i++)
    *sub_inside |= f->insts[i].op == TIR_SUB;
  static float x[M * N];
  static int32_t t[M];
  for (int i = 0; i < M * N; i++)
    x[i] = (float)((i * 7919) % 23) - 5.0f;
  for (int m = 0; m < M; m++)
    t[m] = m % 7 == 3 ? -1 : (m * 13) % N; /* one label outside every chunk */
  InterpArg args[4] = {{.tensor = {x, {M, N}, {N, 1}}}, {.tensor = {t, {M}, {1}}},
                       {.tensor = {y, {M, N}, {N, 1}}}, {.tensor = {z, {M, N}, {N, 1}}}};
  int64_t dims[2] = {M, N};
  int64_t grid[3] = {M, 1, 1};
  char err[256];
  cr_assert(interp_run(f, args, dims, grid, err, sizeof err), "%s", err);
  arena_free(a);
}

Test(guard, one_hot_masks_are_guarded_per_chunk) {
  static float y0[M * N], y1[M * N], z0[M * N], z1[M * N];
  int nif0, nif1;
  bool sub0, sub1;
  run_onehot("0", y0, z0, &nif0, &sub0);
  run_onehot(NULL, y1, z1, &nif1, &sub1);
  cr_assert_eq(nif0, 0);
  cr_assert_eq(nif1, 2, "the == and the != masks");
  cr_assert(sub1, "x * 2 - mask moves under the first guard");
  for (int i = 0; i < M * N; i++) {
    cr_assert_eq(memcmp(&y0[i], &y1[i], sizeof(float)), 0, "Y %d: %g vs %g", i, y0[i], y1[i]);
    cr_assert_eq(memcmp(&z0[i], &z1[i], sizeof(float)), 0, "Z %d: %g vs %g", i, z0[i], z1[i]);
  }
  source_assembles("onehot.tile", onehot_src);
}
