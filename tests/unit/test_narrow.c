/* test_narrow.c — narrow min/max accumulators (tir_passes.c tir_narrow_minmax, lower_nvptx.c
 * packed_minmax): a loop's `acc = maximum(acc, to_f32(w))` over f16/bf16 w keeps acc in w's type,
 * converted once after the loop; the interpreter's results are the same to the bit, and the GPU
 * takes two elements an instruction. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "tilec.h"
#include "test_support.h"

/* A row's maximum and minimum over chunks of C columns: the last chunk ragged (N = 100). */
static const char *src_fmt =
    "kernel rowext<T: type = %s, C = 64>(X: T[M, N], Y: out f32[M], Z: out f32[M])\n"
    "  grid (M) threads (32)\n"
    "{\n"
    "  let r = block.x;\n"
    "  reg mx: f32[C] = -inf;\n"
    "  reg mn: f32[C] = inf;\n"
    "  for c0 in 0 .. N step C {\n"
    "    mx = maximum(mx, to_f32(fill(X[r, c0 : +C], -inf)));\n"
    "    mn = minimum(to_f32(fill(X[r, c0 : +C], inf)), mn);\n"
    "  }\n"
    "  Y[r] = max(mx, 0);\n"
    "  Z[r] = min(mn, 0);\n"
    "}\n";

/* Not narrowed: the accumulator is read in the loop besides its maximum, or starts at a value
 * f16 does not hold. */
static const char *kept_src =
    "kernel kept<C = 64>(X: f16[M, N], Y: out f32[M], Z: out f32[M])\n"
    "  grid (M) threads (32)\n"
    "{\n"
    "  let r = block.x;\n"
    "  reg mx: f32[C] = -inf;\n"
    "  reg mo: f32[C] = 0.1;\n"
    "  reg s: f32[C] = 0;\n"
    "  for c0 in 0 .. N step C {\n"
    "    mx = maximum(mx, to_f32(fill(X[r, c0 : +C], -inf)));\n"
    "    s += mx;\n"
    "    mo = maximum(mo, to_f32(fill(X[r, c0 : +C], -inf)));\n"
    "  }\n"
    "  Y[r] = sum(s, 0);\n"
    "  Z[r] = max(mo, 0);\n"
    "}\n";

/* A row's maximum and minimum at once, no loop: the reductions of converted values. */
static const char *reduce_fmt =
    "kernel rowred<T: type = %s>(X: T[M, N], Y: out f32[M], Z: out f32[M])\n"
    "  grid (M) threads (32)\n"
    "{\n"
    "  let r = block.x;\n"
    "  Y[r] = max(to_f32(fill(X[r, 0 : +128], -inf)), 0);\n"
    "  Z[r] = min(to_f32(fill(X[r, 0 : +128], inf)), 0);\n"
    "}\n";

enum { M = 3, N = 100 };

static char *source_of(Arena *a, const char *fmt, const char *type) {
  size_t n = strlen(fmt) + 16;
  char *s = arena_alloc(a, n);
  snprintf(s, n, fmt, type);
  return s;
}

static char *source(Arena *a, const char *type) { return source_of(a, src_fmt, type); }

/* The instructions of f writing a register of element type e with op op. */
static int count_typed(const TirFunc *f, TirOp op, ElemType e) {
  int n = 0;
  for (int i = 0; i < f->ninsts; i++)
    n += f->insts[i].op == op && f->insts[i].dst >= 0 && f->regs[f->insts[i].dst].type.elem == e;
  return n;
}

static void run(TirFunc *f, bool bf, float *y, float *z) {
  static uint16_t x[M * N];
  for (int i = 0; i < M * N; i++) {
    float v = (float)sin(i * 0.37) * 40.0f - (float)(i % 7); /* rounds in the narrow type */
    if (i == 5)
      v = -0.0f;
    x[i] = bf ? f32_to_bf16_bits(v) : f32_to_f16_bits(v);
  }
  InterpArg args[3] = {{.tensor = {x, {M, N}, {N, 1}}}, {.tensor = {y, {M}, {1}}}, {.tensor = {z, {M}, {1}}}};
  int64_t dims[2] = {M, N};
  int64_t grid[3] = {M, 1, 1};
  char err[256];
  cr_assert(interp_run(f, args, dims, grid, err, sizeof err), "%s", err);
}

static void same_results(const char *type, ElemType e) {
  Arena *a = arena_new();
  Diag d;
  const char *text = source(a, type);
  TirFunc *on = source_tir_with(a, "rowext.tile", text, ARCH_SM90A, "TILEC_NARROW_MINMAX", NULL, &d);
  TirFunc *off = source_tir_with(a, "rowext.tile", text, ARCH_SM90A, "TILEC_NARROW_MINMAX", "0", &d);
  cr_expect_eq(count_typed(on, TIR_MAX, e), 1, "the running maximum in %s", type);
  cr_expect_eq(count_typed(on, TIR_MIN, e), 1, "the running minimum in %s", type);
  cr_expect_eq(count_typed(off, TIR_MAX, e) + count_typed(off, TIR_MIN, e), 0);
  cr_expect_eq(count_typed(on, TIR_CVT, TY_F32), 2, "one conversion after the loop each (the loop's went)");
  int end = find_op(on, 0, TIR_ENDFOR);
  cr_assert_geq(end, 0);
  cr_expect_eq(on->insts[end + 1].op, TIR_CVT);
  float y[2][M], z[2][M];
  run(on, e == TY_BF16, y[0], z[0]);
  run(off, e == TY_BF16, y[1], z[1]);
  for (int r = 0; r < M; r++) {
    cr_expect(y[0][r] == y[1][r] && signbit(y[0][r]) == signbit(y[1][r]), "row %d max %g vs %g", r, y[0][r], y[1][r]);
    cr_expect(z[0][r] == z[1][r], "row %d min %g vs %g", r, z[0][r], z[1][r]);
    cr_expect(isfinite(y[0][r]) && isfinite(z[0][r]), "the fill never wins");
  }
  arena_free(a);
}

Test(narrow, f16_accumulators_give_the_same_extremes) { same_results("f16", TY_F16); }
Test(narrow, bf16_accumulators_give_the_same_extremes) { same_results("bf16", TY_BF16); }

Test(narrow, accumulators_read_in_the_loop_or_not_exact_stay_f32) {
  Arena *a = arena_new();
  Diag d;
  TirFunc *f = source_tir_with(a, "kept.tile", kept_src, ARCH_SM90A, "TILEC_NARROW_MINMAX", NULL, &d);
  cr_expect_eq(count_typed(f, TIR_MAX, TY_F16), 0);
  cr_expect_eq(count_typed(f, TIR_MAX, TY_F32), 2);
  arena_free(a);
}

/* On the GPU: max.f16x2 / min.f16x2 (bf16x2 for bf16), two elements an instruction, and no f32
 * max left in the loop; without the pass none. Assembles for sm_80 and sm_90a. */
Test(narrow, packed_in_the_ptx) {
  Arena *a = arena_new();
  const char *defs[] = {NULL};
  for (int bf = 0; bf < 2; bf++) {
    const char *text = source(a, bf ? "bf16" : "f16");
    char *ptx = source_ptx(a, "rowext.tile", text, defs, ARCH_SM90A);
    char *off = source_ptx_with(a, "rowext.tile", text, defs, ARCH_SM90A, "TILEC_NARROW_MINMAX", "0");
    const char *mx = bf ? "max.bf16x2" : "max.f16x2", *mn = bf ? "min.bf16x2" : "min.f16x2";
    cr_expect_geq(occurrences(ptx, mx), 1, "%s", mx);
    cr_expect_geq(occurrences(ptx, mn), 1, "%s", mn);
    cr_expect_eq(occurrences(off, mx) + occurrences(off, mn), 0);
    cr_expect_lt(occurrences(ptx, "max.f32"), occurrences(off, "max.f32"));
    source_assembles("rowext.tile", text);
  }
  arena_free(a);
}

/* Cross-entropy backward's one-pass kernel: its running maximum over the row's windows is packed. */
Test(narrow, cross_entropy_row_max_is_packed) {
  Arena *a = arena_new();
  const char *defs[] = {"BLOCK=50264", "C=4096", "WARPS=16", NULL};
  Diag d;
  TirFunc *f = source_tir_kernel(a, "dsl/examples/cross_entropy_backward.tile",
                                 example_text(a, "cross_entropy_backward"), defs, ARCH_SM90A, 1, &d);
  cr_expect_eq(count_typed(f, TIR_MAX, TY_F16), 1);
  arena_free(a);
}

/* reduce_max(to_f32(w)) becomes to_f32(reduce_max(w)): the same results to the bit, and on the GPU
 * the thread's part of the reduction pairs w's values (max.f16x2, min.bf16x2). */
Test(narrow, reductions_of_converted_values) {
  Arena *a = arena_new();
  Diag d;
  const char *defs[] = {NULL};
  for (int bf = 0; bf < 2; bf++) {
    ElemType e = bf ? TY_BF16 : TY_F16;
    const char *text = source_of(a, reduce_fmt, bf ? "bf16" : "f16");
    TirFunc *on = source_tir_with(a, "rowred.tile", text, ARCH_SM90A, "TILEC_NARROW_MINMAX", NULL, &d);
    TirFunc *off = source_tir_with(a, "rowred.tile", text, ARCH_SM90A, "TILEC_NARROW_MINMAX", "0", &d);
    cr_expect_eq(count_typed(on, TIR_REDUCE_MAX, e) + count_typed(on, TIR_REDUCE_MIN, e), 2);
    cr_expect_eq(count_typed(off, TIR_REDUCE_MAX, e) + count_typed(off, TIR_REDUCE_MIN, e), 0);
    int red = find_op(on, 0, TIR_REDUCE_MAX);
    cr_assert_geq(red, 0);
    cr_expect_eq(on->insts[red + 1].op, TIR_CVT);
    float y[2][M], z[2][M];
    run(on, bf, y[0], z[0]);
    run(off, bf, y[1], z[1]);
    for (int r = 0; r < M; r++)
      cr_expect(y[0][r] == y[1][r] && z[0][r] == z[1][r], "row %d: %g %g vs %g %g", r, y[0][r], z[0][r], y[1][r],
                z[1][r]);
    char *ptx = source_ptx(a, "rowred.tile", text, defs, ARCH_SM90A);
    cr_expect_geq(occurrences(ptx, bf ? "max.bf16x2" : "max.f16x2"), 1);
    cr_expect_geq(occurrences(ptx, bf ? "min.bf16x2" : "min.f16x2"), 1);
    source_assembles("rowred.tile", text);
  }
  arena_free(a);
}
