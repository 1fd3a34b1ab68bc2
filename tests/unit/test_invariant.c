/* test_invariant.c — tir_hoist_invariants (tir_passes.c): pure register instructions whose
 * operands a loop does not write move above the loop; what reads the loop variable, what sits
 * under a nested `if`, an i32 division and tiles over the loop's register budget stay. The
 * interpreter gives the same bits either way, and layernorm backward's conversion of its shared
 * weight row leaves the row loop. */
#include <criterion/criterion.h>
#include <string.h>

#include "tilec.h"
#include "test_support.h"

/* w's conversion, to_f32(N) and K / 3 do not change from row to row; x does; the conversion
 * under the `if` runs only on rows past the first. */
static const char *src =
    "kernel rows<BLOCK = 256, WARPS = 4>(X: f16[M, N], W: f16[N], Y: out f32[M, N], K: i32)\n"
    "  grid (cdiv(M, 4)) threads (WARPS * 32)\n"
    "{\n"
    "  shared w = W[0 : +BLOCK];\n"
    "  let m0 = block.x * 4;\n"
    "  for r in m0 .. minimum(m0 + 4, M) {\n"
    "    let x = to_f32(X[r : +1, 0 : +BLOCK]);\n"
    "    let q = K / 3;\n"
    "    Y[r : +1, 0 : +BLOCK] = x * to_f32(w) + to_f32(N) + to_f32(q);\n"
    "    if (r > m0) {\n"
    "      Y[r : +1, 0 : +BLOCK] = x - to_f32(w);\n"
    "    }\n"
    "  }\n"
    "}\n";

enum { M = 7, N = 256 };

/* The first conversion of a shared tile at or after `from`, or -1. */
static int shared_cvt(const TirFunc *f, int from) {
  for (int i = find_op(f, from, TIR_CVT); i >= 0; i = find_op(f, i + 1, TIR_CVT))
    if (f->regs[f->insts[i].args[0]].type.place == PLACE_SHARED)
      return i;
  return -1;
}

/* path's kernel after the passes, with the loop-invariant pass as `value` sets it (NULL: on). */
static TirFunc *lowered(Arena *a, const char *path, const char *text, const char *value) {
  Diag d;
  TirFunc *f = source_tir_with(a, path, text, ARCH_SM90A, "TILEC_HOIST_INVARIANTS", value, &d);
  cr_assert(f, "%s did not compile", path);
  return f;
}

static void run(const TirFunc *f, float *y) {
  static uint16_t x[M * N], w[N];
  for (int i = 0; i < M * N; i++)
    x[i] = f32_to_f16_bits((float)((i * 7919) % 23) / 8.0f - 1.0f);
  for (int i = 0; i < N; i++)
    w[i] = f32_to_f16_bits((float)((i * 104729) % 19) / 4.0f - 2.0f);
  InterpArg args[4] = {{.tensor = {x, {M, N}, {N, 1}}}, {.tensor = {w, {N}, {1}}},
                       {.tensor = {y, {M, N}, {N, 1}}}, {.scalar = 22}};
  int64_t dims[2] = {M, N};
  int64_t grid[3] = {2, 1, 1};
  char err[256];
  cr_assert(interp_run(f, args, dims, grid, err, sizeof err), "%s", err);
}

Test(invariant, pure_invariants_move_above_the_loop) {
  Arena *a = arena_new();
  TirFunc *on = lowered(a, "rows.tile", src, NULL), *off = lowered(a, "rows.tile", src, "0");
  cr_assert_eq(on->ninsts, off->ninsts, "the pass only moves instructions");
  int loop = find_op(on, 0, TIR_FOR), branch = find_op(on, 0, TIR_IF);
  cr_assert(loop >= 0 && branch > loop);
  int cvt = shared_cvt(on, 0);
  cr_expect(cvt >= 0 && cvt < loop, "to_f32(w) above the loop (at %d, loop at %d)", cvt, loop);
  cr_expect_gt(shared_cvt(on, cvt + 1), branch, "the one under the if stays there");
  cr_expect_lt(find_op(on, 0, TIR_DIM), loop, "to_f32(N)'s dim above the loop");
  cr_expect_gt(find_op(on, 0, TIR_DIV), loop, "K / 3 stays: an i32 division may fault");
  cr_expect_gt(nth_op(on, TIR_LOAD, 1), loop, "X's row reads the loop variable");
  cr_expect_gt(shared_cvt(off, 0), find_op(off, 0, TIR_FOR), "off: as written");
  static float y_on[M * N], y_off[M * N];
  run(on, y_on);
  run(off, y_off);
  cr_assert_eq(memcmp(y_on, y_off, sizeof y_on), 0, "the same rows, bit for bit");
  arena_free(a);
}

/* One warp and a 4096-column row: the converted row is 128 registers a thread, over the budget
 * of 32, so only the scalar moves. */
static const char *wide =
    "kernel wide<BLOCK = 4096>(X: f16[M, N], W: f16[N], Y: out f32[M, N])\n"
    "  grid (cdiv(M, 4)) threads (32)\n"
    "{\n"
    "  shared w = W[0 : +BLOCK];\n"
    "  let m0 = block.x * 4;\n"
    "  for r in m0 .. minimum(m0 + 4, M) {\n"
    "    Y[r : +1, 0 : +BLOCK] = to_f32(X[r : +1, 0 : +BLOCK]) * to_f32(w) + to_f32(N);\n"
    "  }\n"
    "}\n";

Test(invariant, tiles_over_the_budget_stay) {
  Arena *a = arena_new();
  TirFunc *f = lowered(a, "wide.tile", wide, NULL);
  int loop = find_op(f, 0, TIR_FOR);
  cr_expect_gt(shared_cvt(f, 0), loop, "128 registers a thread: stays in the loop");
  cr_expect_lt(find_op(f, 0, TIR_DIM), loop, "the scalar moves");
  arena_free(a);
}

/* A register load of an input tensor at indices the loop does not change reads the same elements
 * every iteration and moves; one of a tensor the loop writes (Y's first row, rewritten by the
 * loop's first iteration) and one at the loop variable stay. */
static const char *loads =
    "kernel acc<BLOCK = 256, WARPS = 4>(X: f32[M, N], W: f32[N], Y: out f32[M, N])\n"
    "  grid (cdiv(M, 4)) threads (WARPS * 32)\n"
    "{\n"
    "  let m0 = block.x * 4;\n"
    "  for r in m0 .. minimum(m0 + 4, M) {\n"
    "    let prev = Y[m0 : +1, 0 : +BLOCK];\n"
    "    Y[r : +1, 0 : +BLOCK] = X[r : +1, 0 : +BLOCK] * expand_dims(W[0 : +BLOCK], 0) + prev;\n"
    "  }\n"
    "}\n";

/* The LOAD of tensor argument `arg`, or -1. */
static int load_of(const TirFunc *f, int arg) {
  for (int i = find_op(f, 0, TIR_LOAD); i >= 0; i = find_op(f, i + 1, TIR_LOAD))
    if (f->insts[i].arg_index == arg)
      return i;
  return -1;
}

Test(invariant, input_loads_move_and_written_tensors_stay) {
  Arena *a = arena_new();
  TirFunc *f = lowered(a, "acc.tile", loads, NULL);
  int loop = find_op(f, 0, TIR_FOR);
  cr_expect_lt(load_of(f, 1), loop, "W's row above the loop");
  cr_expect_gt(load_of(f, 2), loop, "Y is written in the loop: its read stays");
  cr_expect_gt(load_of(f, 0), loop, "X's row reads the loop variable");
  arena_free(a);
}

/* PTX instructions in the largest loop of `entry` (the span from a label to the last branch
 * back to it), and how many of them contain `what`. */
static int loop_count(const char *ptx, const char *entry, const char *what) {
  const char *p = strstr(ptx, entry), *end = p ? strstr(p + 1, ".entry ") : NULL;
  if (!end)
    end = p + strlen(p);
  int best = 0, best_what = 0;
  for (const char *l = p; l && l < end; l = strstr(l + 1, "\n$L__BB")) {
    char label[32];
    if (sscanf(l + 1, "%31[^:]:", label) != 1 || label[0] != '$')
      continue;
    char bra[48];
    snprintf(bra, sizeof bra, "%s;", label);
    const char *back = NULL;
    for (const char *q = strstr(l + 1, bra); q && q < end; q = strstr(q + 1, bra))
      back = q;
    if (!back)
      continue;
    int n = 0, k = 0;
    for (const char *q = strchr(l + 1, '\n'); q && q < back; q = strchr(q + 1, '\n')) {
      const char *eol = strchr(q + 1, '\n');
      if (!eol || q[1] != '\t' || eol[-1] != ';')
        continue;
      n++;
      const char *hit = strstr(q + 1, what);
      k += hit && hit < eol;
    }
    if (n > best)
      best = n, best_what = k;
  }
  return what ? best_what : best;
}

Test(invariant, layernorm_backward_converts_its_weights_once) {
  static const char *defs[] = {"BLOCK=4096", "ROWS=1", "CHUNK=32", "WARPS=8", "STAGES=4", NULL};
  Arena *a = arena_new();
  const char *text = example_text(a, "layernorm_backward");
  char *on = source_ptx(a, "layernorm_backward.tile", text, defs, ARCH_SM90A);
  char *off = source_ptx_with(a, "layernorm_backward.tile", text, defs, ARCH_SM90A, "TILEC_HOIST_INVARIANTS", "0");
  const char *entry = ".entry layernorm_backward(";
  int cvt_on = loop_count(on, entry, "cvt.f32.f16"), cvt_off = loop_count(off, entry, "cvt.f32.f16");
  cr_expect_eq(cvt_off - cvt_on, 16, "w's 4096 / 256 columns a thread leave the loop (%d vs %d)", cvt_on, cvt_off);
  cr_expect_lt(loop_count(on, entry, ""), loop_count(off, entry, ""));
  ptxas_assert_clean(on, ARCH_SM90A);
  ptxas_assert_clean(source_ptx(a, "layernorm_backward.tile", text, defs, ARCH_SM80), ARCH_SM80);
  arena_free(a);
}

/* rmsnorm backward as a user might write it, W read where it is used in the row loop
 * (`g * to_f32(W[0 : +BLOCK])`): its weights are loaded and converted once, as in the example,
 * which loads them before the loop; the loops come within 1% of each other. */
Test(invariant, a_weight_load_in_the_loop_costs_what_the_example_does) {
  static const char *defs[] = {"BLOCK=4096", "ROWS=1", "CHUNK=32", "WARPS=8", "STAGES=4", NULL};
  Arena *a = arena_new();
  const char *text = example_text(a, "rmsnorm_backward");
  const char *hoisted = "  let w = to_f32(W[0 : +BLOCK]);", *use = "    let gw = g * w;";
  const char *h = strstr(text, hoisted), *u = strstr(text, use);
  cr_assert(h && u && h < u, "rmsnorm_backward.tile no longer has the lines this test rewrites");
  const char *h_end = strchr(h, '\n'), *u_end = u + strlen(use);
  char *user = arena_printf(a, "%.*s%.*s    let gw = g * to_f32(W[0 : +BLOCK]);%s", (int)(h - text), text,
                            (int)(u - h_end), h_end, u_end);
  char *ex = source_ptx(a, "rmsnorm_backward.tile", text, defs, ARCH_SM90A);
  char *on = source_ptx(a, "user.tile", user, defs, ARCH_SM90A);
  char *off = source_ptx_with(a, "user.tile", user, defs, ARCH_SM90A, "TILEC_HOIST_INVARIANTS", "0");
  const char *entry = ".entry rmsnorm_backward(";
  int n_ex = loop_count(ex, entry, ""), n_on = loop_count(on, entry, ""), n_off = loop_count(off, entry, "");
  cr_expect_leq(n_on * 100, n_ex * 101, "user form %d, example %d PTX instructions a row", n_on, n_ex);
  cr_expect_lt(n_on, n_off, "kept in the loop: %d", n_off);
  ptxas_assert_clean(on, ARCH_SM90A);
  arena_free(a);
}
