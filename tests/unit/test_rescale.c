/* test_rescale.c — online_softmax's lazy max and the any-guard around its accumulators' rescale
 * (lower_tir.c softmax_update, docs/tir.md "Any-guards"): st.max moves only when a row's scores
 * pass it by more than log(256), the softmax and its logsumexp stay what they were, and the
 * rescale sits under `if (any(m_new != m))` in the IR, the interpreter and the PTX. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tilec.h"
#include "test_support.h"

/* Rows of 3 blocks of 4 scores: the softmax-weighted sum of V, the row max the state kept and
 * the logsumexp from it. */
static const char *src =
    "kernel rows<BN = 4>(S: f32[M, N], V: f32[N, 4], O: out f32[M, 4], Mx: out f32[M], L: out f32[M])\n"
    "  grid (M) threads (32)\n"
    "{\n"
    "  let r = block.x;\n"
    "  reg acc: f32[1, 4] = 0;\n"
    "  online_softmax st(rows = 1, rescale = acc);\n"
    "  for n0 in 0 .. N step BN {\n"
    "    let p = st.update(S[r : +1, n0 : +BN]);\n"
    "    acc += dot(p, V[n0 : +BN, 0 : +4]);\n"
    "  }\n"
    "  O[r : +1, 0 : +4] = st.finish(acc);\n"
    "  Mx[r : +1] = squeeze(st.max, 1);\n"
    "  L[r : +1] = squeeze(st.max + log(st.sum), 1);\n"
    "}\n";

enum { M = 3, N = 12 };

/* Row 0's blocks top out at 1, 3, 9: the max moves at the first block and at the third (by 8),
 * not at the second (by 2). Row 1's at 0, 5, 5.5 (never far enough after the first), row 2's at
 * -inf, -inf, 2 (fully masked, then a score). */
static const float scores[M * N] = {
    1, 0, -1, 0.5f, 3, 2, 0, 1, 9, 8, 0, 0,
    0, -1, -2, -3, 5, 4, 0, 0, 5.5f, 0, 1, 2,
    -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, 2, 1, -INFINITY, 0,
};

static void run(const char *lazy, const char *guard, float *o, float *mx, float *lse, TirFunc **fp, Arena *a) {
  Diag d;
  setenv("TILEC_RESCALE_GUARD", guard, 1);
  TirFunc *f = source_tir_with(a, "rows.tile", src, ARCH_SM90A, "TILEC_LAZY_MAX", lazy, &d);
  unsetenv("TILEC_RESCALE_GUARD");
  static float v[N * 4];
  for (int i = 0; i < N * 4; i++)
    v[i] = (float)((i * 37) % 11) - 5.0f;
  InterpArg args[5] = {{.tensor = {(float *)scores, {M, N}, {N, 1}}},
                       {.tensor = {v, {N, 4}, {4, 1}}},
                       {.tensor = {o, {M, 4}, {4, 1}}},
                       {.tensor = {mx, {M}, {1}}},
                       {.tensor = {lse, {M}, {1}}}};
  int64_t dims[2] = {M, N};
  int64_t grid[3] = {M, 1, 1};
  char err[256];
  cr_assert(interp_run(f, args, dims, grid, err, sizeof err), "%s", err);
  *fp = f;
}

Test(rescale, lazy_max_keeps_the_softmax) {
  Arena *a = arena_new();
  float o[2][M * 4], mx[2][M], lse[2][M];
  TirFunc *lazy, *exact;
  run("1", "1", o[0], mx[0], lse[0], &lazy, a);
  run("0", "1", o[1], mx[1], lse[1], &exact, a);
  cr_expect_eq(mx[1][0], 9.0f);
  cr_expect_eq(mx[0][0], 9.0f, "row 0 moved by 8 > log(256)");
  cr_expect_eq(mx[0][1], 0.0f, "row 1 never passed its first max by more than log(256): %g", mx[0][1]);
  cr_expect_eq(mx[1][1], 5.5f);
  cr_expect_eq(mx[0][2], 2.0f, "a fully masked row takes its first score");
  for (int r = 0; r < M; r++) {
    cr_expect(fabsf(lse[0][r] - lse[1][r]) <= 1e-5f * fabsf(lse[1][r]) + 1e-6f, "row %d: logsumexp %g vs %g", r,
              lse[0][r], lse[1][r]);
    for (int j = 0; j < 4; j++)
      cr_expect(fabsf(o[0][4 * r + j] - o[1][4 * r + j]) <= 1e-5f, "row %d col %d: %g vs %g", r, j, o[0][4 * r + j],
                o[1][4 * r + j]);
  }
  /* the lazy max: a threshold compare and a select more than the running max */
  cr_expect_eq(count_op(lazy, TIR_SELECT), count_op(exact, TIR_SELECT) + 1);
  arena_free(a);
}

/* The rescale under an any-guard: ANY, then the IF holding the broadcast and the multiply; the
 * same results without it (TILEC_RESCALE_GUARD=0) to the bit. */
Test(rescale, rescale_is_guarded) {
  Arena *a = arena_new();
  float o[2][M * 4], mx[2][M], lse[2][M];
  TirFunc *g, *plain;
  run("1", "1", o[0], mx[0], lse[0], &g, a);
  run("1", "0", o[1], mx[1], lse[1], &plain, a);
  int any = find_op(g, 0, TIR_ANY);
  cr_assert_geq(any, 0);
  cr_expect_eq(g->insts[any + 1].op, TIR_IF);
  cr_expect_eq(g->insts[any + 2].op, TIR_BCAST);
  cr_expect_eq(g->insts[any + 3].op, TIR_MUL);
  cr_expect_eq(g->insts[any + 4].op, TIR_ENDIF);
  cr_expect_eq(count_op(plain, TIR_ANY), 0);
  cr_expect_eq(memcmp(o[0], o[1], sizeof o[0]), 0);
  cr_expect_eq(memcmp(lse[0], lse[1], sizeof lse[0]), 0);
  arena_free(a);
}

/* On the GPU the guard is a vote across the warp and a branch around the accumulator's multiplies;
 * the warp-specialized attention entry keeps its rotated loop (one dot_wait 0 of the accumulator
 * before the guard) and assembles without spills or serialized wgmmas. */
Test(rescale, guard_in_the_ptx) {
  Arena *a = arena_new();
  const char *defs[] = {"D=128", "BM=128", "BN=128", "WARPS=8", "STAGES=2", NULL};
  char *ptx = source_ptx(a, "dsl/examples/attention.tile", example_text(a, "attention"), defs, ARCH_SM90A);
  char *ws = ptx_entry(a, ptx, "attention__ws");
  cr_assert_not_null(ws);
  cr_expect_geq(occurrences(ws, "vote.sync.any.pred"), 1);
  char *off = source_ptx_with(a, "dsl/examples/attention.tile", example_text(a, "attention"), defs, ARCH_SM90A,
                              "TILEC_RESCALE_GUARD", "0");
  cr_expect_eq(occurrences(off, "vote.sync.any.pred"), 0);
  cr_expect_eq(occurrences(ws, "wgmma.wait_group.sync.aligned 1"),
               occurrences(ptx_entry(a, off, "attention__ws"), "wgmma.wait_group.sync.aligned 1"),
               "the rotated loop's waits as without the guard");
  ptxas_assert_unserialized(ptx, ARCH_SM90A);
  ptxas_assert_clean(ptx, ARCH_SM90A);
  arena_free(a);
}
