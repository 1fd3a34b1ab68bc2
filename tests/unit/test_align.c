/* test_align.c — tir_align.c: chunk loops start at their row's 16-byte boundary only where the
 * body provably cannot tell, and give the loop as written's results in the interpreter (whose
 * rows start where the host buffer puts them: 203 f16 columns a row put rows at every shift). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "tilec.h"
#include "test_support.h"

/* A row's logsumexp (online max and sum, fill -inf) and a gradient-like output with a one-hot
 * column: both loops qualify. */
static const char *lse_src =
    "kernel lse<BN = 64, WARPS = 1>(X: f16[M, N], L: out f32[M], Y: out f16[M, N])\n"
    "  grid (M) threads (WARPS * 32)\n"
    "{\n"
    "  let r = block.x;\n"
    "  reg m: f32 = -inf;\n"
    "  reg s: f32 = 0;\n"
    "  for n0 in 0 .. N step BN {\n"
    "    let x = to_f32(fill(X[r, n0 : +BN], -inf));\n"
    "    let m_new = maximum(m, max(x, 0));\n"
    "    s = s * exp(m - m_new) + sum(exp(x - m_new), 0);\n"
    "    m = m_new;\n"
    "  }\n"
    "  let lse = m + log(s);\n"
    "  L[r] = lse;\n"
    "  for n0 in 0 .. N step BN {\n"
    "    Y[r, n0 : +BN] = to(f16, exp(to_f32(X[r, n0 : +BN]) - lse) - where(index(n0, BN) == 3, 1.0, 0.0));\n"
    "  }\n"
    "}\n";

/* How many loops of the kernel with body `body` (a loop over X's row r, s an f32 sum, W: f16[N])
 * the pass starts at the row's boundary. */
static int aligned_loops_with(const char *body, const char *knob_value) {
  char src[2048];
  snprintf(src, sizeof src,
           "kernel k<BN = 64, WARPS = 1>(X: f16[M, N], W: f16[N], S: out f32[M])\n"
           "  grid (M) threads (WARPS * 32)\n"
           "{\n"
           "  let r = block.x;\n"
           "  let w = to_f32(W[0 : +BN]);\n"
           "  let c = to_f32(W[0]);\n"
           "  reg s: f32 = 0;\n"
           "  for n0 in 0 .. N step BN {\n"
           "    %s\n"
           "  }\n"
           "  S[r] = s + sum(w, 0) + c;\n"
           "}\n",
           body);
  Arena *a = arena_new();
  Diag d;
  TirFunc *f = source_tir_with(a, "k.tile", src, ARCH_SM90A, "TILEC_ALIGN_WINDOWS", knob_value, &d);
  int n = count_op(f, TIR_ROW_SHIFT);
  arena_free(a);
  return n;
}

static int aligned_loops(const char *body) { return aligned_loops_with(body, NULL); }

/* The loops that tir_align moved (one ROW_SHIFT each) in the kernel source printf-formatted from
 * fmt; what names the case. */
static int moved_loops(const char *what, const char *fmt, ...) {
  char src[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(src, sizeof src, fmt, ap);
  va_end(ap);
  return aligned_loops_in(what, src);
}

Test(align, sums_whose_fill_is_their_identity) {
  cr_assert_eq(aligned_loops("s += sum(to_f32(X[r, n0 : +BN]), 0);"), 1, "fill 0 into a sum");
  cr_assert_eq(aligned_loops("s = maximum(s, max(to_f32(fill(X[r, n0 : +BN], -inf)), 0));"), 1, "fill -inf into a max");
  cr_assert_eq(aligned_loops("s += sum(exp(to_f32(fill(X[r, n0 : +BN], -inf)) - c), 0);"), 1,
               "exp(-inf - finite) = 0 into a sum");
}

Test(align, loops_that_would_see_the_shift) {
  cr_assert_eq(aligned_loops("s += sum(exp(to_f32(X[r, n0 : +BN])), 0);"), 0, "exp(fill 0) = 1 is no identity");
  cr_assert_eq(aligned_loops("s += sum(to_f32(X[r, n0 : +BN]) * w, 0);"), 0, "w pairs columns by position");
  cr_assert_eq(aligned_loops("s += sum(to_f32(X[r, n0 : +BN]), 0) * to_f32(n0);"), 0, "n0 used as a number");
  cr_assert_eq(aligned_loops("s += sum(where(index(n0, BN) < N, to_f32(X[r, n0 : +BN]), 1.0), 0);"), 0,
               "a column mask that holds before the row");
  cr_assert_eq(aligned_loops("s += sum(to_f32(X[r, n0 : +32]), 0);"), 0, "a window narrower than the step");
  cr_assert_eq(aligned_loops("s = maximum(s, max(to_f32(fill(X[r, n0 : +BN], -inf)) + 1.0, 0));"), 1,
               "-inf + 1 is still -inf");
  cr_assert_eq(aligned_loops("s = s * 0.5 + sum(to_f32(X[r, n0 : +BN]), 0);"), 0, "a sum that decays per chunk");
  cr_assert_eq(aligned_loops("s += sum(to_f32(X[r, n0 : +BN]), 0) + 1.0;"), 0, "a count of chunks");
  cr_assert_eq(aligned_loops("s += sum(to_f32(X[r, n0 : +BN]) * s, 0);"), 0, "a sum of values scaled by the sum so far");
  cr_assert_eq(aligned_loops("s += sum(exp(to_f32(fill(X[r, n0 : +BN], -inf)) - s), 0);"), 0,
               "exp of the running sum: not a rescaled sum");
}

Test(align, off_switch) {
  cr_assert_eq(aligned_loops_with("s += sum(to_f32(X[r, n0 : +BN]), 0);", "0"), 0);
}

enum { M = 9, N = 203 };

static void run_lse(bool align, float *l, uint16_t *y, int *shifts) {
  Arena *a = arena_new();
  Diag d;
  TirFunc *f = source_tir_with(a, "lse.tile", lse_src, ARCH_SM90A, "TILEC_ALIGN_WINDOWS", align ? NULL : "0", &d);
  *shifts = count_op(f, TIR_ROW_SHIFT);
  static _Alignas(16) uint16_t x[M * N];
  for (int i = 0; i < M * N; i++) {
    float v = (float)((i * 7919) % 61) / 8.0f - 3.0f; /* exact in f16 */
    elem_store(x, i, TY_F16, v);
  }
  InterpArg args[3] = {{.tensor = {x, {M, N}, {N, 1}}}, {.tensor = {l, {M}, {1}}}, {.tensor = {y, {M, N}, {N, 1}}}};
  int64_t dims[2] = {M, N}, grid[3] = {M, 1, 1};
  char err[256];
  cr_assert(interp_run(f, args, dims, grid, err, sizeof err), "%s", err);
  arena_free(a);
}

Test(align, same_results_as_the_loop_as_written) {
  static float l0[M], l1[M];
  static uint16_t y0[M * N], y1[M * N];
  int s0, s1;
  run_lse(false, l0, y0, &s0);
  run_lse(true, l1, y1, &s1);
  cr_assert_eq(s0, 0);
  cr_assert_eq(s1, 2, "both loops start at the row's boundary");
  for (int i = 0; i < M; i++)
    cr_assert(fabsf(l0[i] - l1[i]) <= 1e-5f * fabsf(l0[i]) + 1e-6f, "row %d: %g vs %g", i, l0[i], l1[i]);
  for (int i = 0; i < M * N; i++) {
    double a = elem_load(y0, i, TY_F16), b = elem_load(y1, i, TY_F16);
    cr_assert(fabs(a - b) <= 1e-3 * fabs(a) + 1e-6, "element %d: %g vs %g", i, a, b);
  }
}

/* The rewrite: row_shift of the first window load's row at the loop's start, the start moved back by it. */
Test(align, loop_starts_at_lo_minus_the_shift) {
  Arena *a = arena_new();
  Diag d;
  TirFunc *f = source_tir(a, "lse.tile", lse_src, NULL, ARCH_SM90A, &d);
  int i = find_op(f, 0, TIR_ROW_SHIFT);
  cr_assert(i >= 0);
  cr_assert_eq(f->insts[i].arg_index, 0, "aligned to X");
  cr_assert_eq(f->insts[i + 1].op, TIR_SUB);
  cr_assert_eq(f->insts[i + 2].op, TIR_FOR);
  cr_assert_eq(f->insts[i + 2].args[0], f->insts[i + 1].dst, "the loop starts at lo - shift");
  arena_free(a);
}

/* The chunks must cover the same real columns however they are placed: a loop from a later
 * column, or to a bound short of the row's length, would read other columns moved left. */
Test(align, loops_over_part_of_the_row_stay) {
  static const char *fmt =
      "kernel k<BN = 64>(X: f16[M, N], S: out f32[M])\n"
      "  grid (M) threads (32)\n"
      "{\n"
      "  let r = block.x;\n"
      "  reg s: f32 = 0;\n"
      "  for n0 in %s step BN { s += sum(to_f32(X[r, n0 : +BN]), 0); }\n"
      "  S[r] = s;\n"
      "}\n";
  static const struct { const char *range; int want; } cases[] = {
      {"0 .. N", 1}, {"3 .. N", 0}, {"0 .. N - 100", 0}, {"0 .. 2 * N", 0},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    cr_assert_eq(moved_loops(cases[i].range, fmt, cases[i].range), cases[i].want, "for n0 in %s", cases[i].range);
}

/* A row copied once into shared memory and read in windows by chunk loops (the one-pass row
 * kernels): the loops move to the row's boundary as those over the tensor do; an element-wise
 * running max or sum that only its reduction reads after the loop may be carried. */
static int aligned_window_loops(const char *copy, const char *range, const char *extra) {
  return moved_loops(range,
                     "kernel k<B = 256, C = 64>(X: f16[M, N], S: out f32[M], Y: out f16[M, N])\n"
                     "  grid (M) threads (32)\n"
                     "{\n"
                     "  let r = block.x;\n"
                     "  shared xs = fill(X[r, %s : +B], -inf);\n"
                     "  reg mx: f32[C] = -inf;\n"
                     "  for c0 in %s step C { mx = maximum(mx, to_f32(fill(xs[c0 : +C], -inf))); }\n"
                     "  let m = max(mx, 0);\n"
                     "  reg se: f32[C] = 0;\n"
                     "  for c0 in 0 .. N step C { se += exp(to_f32(fill(xs[c0 : +C], -inf)) - m); }\n"
                     "  S[r] = m + log(sum(se, 0)) + %s;\n"
                     "  for c0 in 0 .. N step C { Y[r, c0 : +C] = to(f16, exp(to_f32(xs[c0 : +C]) - m)); }\n"
                     "}\n",
                     copy, range, extra);
}

Test(align, windows_of_a_row_copied_once) {
  cr_assert_eq(aligned_window_loops("0", "0 .. N", "0.0"), 3, "all three loops");
  cr_assert_eq(aligned_window_loops("3", "0 .. N", "0.0"), 0, "a copy from column 3: window 0 is no row start");
  cr_assert_eq(aligned_window_loops("0", "0 .. N - 100", "0.0"), 2, "a max over part of the row");
}

/* Windows of two copied rows of different lengths in one loop: at a column past the shorter
 * tile but inside the longer one, one window reads its own fill and the other the copy's, a
 * pair neither scan assumes (here 0 + 0 into a max, where each fill alone gives -inf): the loop
 * stays. Of the same length, every column reads one kind of fill, and it moves. */
static int loops_over_two_rows(int long_len) {
  return moved_loops("two lengths",
                     "kernel k<C = 64>(X: f16[M, N], S: out f32[M])\n"
                     "  grid (M) threads (32)\n"
                     "{\n"
                     "  require N <= 128;\n"
                     "  let r = block.x;\n"
                     "  shared xs = fill(X[r, 0 : +128], -inf);\n"
                     "  shared ys = fill(X[r, 0 : +%d], 0);\n"
                     "  reg mx: f32[C] = -inf;\n"
                     "  for c0 in 0 .. N step C {\n"
                     "    mx = maximum(mx, to_f32(fill(xs[c0 : +C], 0)) + to_f32(fill(ys[c0 : +C], -inf)));\n"
                     "  }\n"
                     "  S[r] = max(mx, 0);\n"
                     "}\n",
                     long_len);
}

Test(align, windows_of_rows_of_two_lengths_stay) {
  cr_assert_eq(loops_over_two_rows(128), 1, "one length: the loop moves");
  cr_assert_eq(loops_over_two_rows(256), 0, "two lengths: the loop stays");
}

/* A row copy that something besides windows reads (here a max over the whole tile) is copied
 * as it is on the GPU, not shifted: its window loops stay, keeping their vector reads. */
Test(align, rows_read_whole_stay) {
  cr_assert_eq(aligned_window_loops("0", "0 .. N", "max(to_f32(xs), 0)"), 0);
}

/* A running max over windows moves only when nothing but the max along the window reads it
 * after the loop, nothing reads it inside, and one constant starts it: otherwise which column
 * meets which element of it could show. */
static int loops_with_running_max(const char *init, const char *step, const char *after) {
  return moved_loops(step,
                     "kernel k<B = 256, C = 64>(X: f16[M, N], S: out f32[M])\n"
                     "  grid (M) threads (32)\n"
                     "{\n"
                     "  let r = block.x;\n"
                     "  shared xs = fill(X[r, 0 : +B], -inf);\n"
                     "  reg mx: f32[C] = %s;\n"
                     "  for c0 in 0 .. N step C { mx = maximum(mx, %s); }\n"
                     "  S[r] = %s;\n"
                     "}\n",
                     init, step, after);
}

Test(align, running_maxima_read_only_by_their_max) {
  const char *x = "to_f32(fill(xs[c0 : +C], -inf))";
  cr_assert_eq(loops_with_running_max("-inf", x, "max(mx, 0)"), 1);
  cr_assert_eq(loops_with_running_max("-inf", x, "sum(mx, 0)"), 0, "a sum of the maxima");
  cr_assert_eq(loops_with_running_max("-inf", x, "max(mx, 0) + sum(mx, 0)"), 0, "the maxima read whole");
  cr_assert_eq(loops_with_running_max("-inf", "to_f32(fill(xs[c0 : +C], -inf)) + max(mx, 0)", "max(mx, 0)"), 0,
               "read inside the loop");
  cr_assert_eq(loops_with_running_max("to_f32(index(0, C))", x, "max(mx, 0)"), 0, "no one constant start");
}

/* The one-pass kernel in the interpreter, loops moved and not, on rows of n columns whose tensor
 * starts `off` elements past a 16-byte boundary: the same loss and gradient. With `ring`, the
 * same body walks 3 rows a block on a pipelined loop's ring. */
static void moved_windows_match_in(int n, int off, bool ring) {
  static const char *body =
      "  shared xs = fill(X[r, 0 : +B], -inf);\n"
      "  reg mx: f32[C] = -inf;\n"
      "  for c0 in 0 .. N step C { mx = maximum(mx, to_f32(fill(xs[c0 : +C], -inf))); }\n"
      "  let m = max(mx, 0);\n"
      "  reg se: f32[C] = 0;\n"
      "  for c0 in 0 .. N step C { se += exp(to_f32(fill(xs[c0 : +C], -inf)) - m); }\n"
      "  S[r] = m + log(sum(se, 0));\n"
      "  for c0 in 0 .. N step C { Y[r, c0 : +C] = to(f16, exp(to_f32(xs[c0 : +C]) - m)); }\n";
  char src[2048];
  snprintf(src, sizeof src,
           "kernel k<B = 256, C = 64>(X: f16[M, N], S: out f32[M], Y: out f16[M, N])\n"
           "  grid (%s) threads (32)\n"
           "{\n"
           "%s%s%s"
           "}\n",
           ring ? "cdiv(M, 3)" : "M",
           ring ? "for r in block.x * 3 .. minimum(block.x * 3 + 3, M) pipeline 2 {\n" : "let r = block.x;\n", body,
           ring ? "}\n" : "");
  moved_windows_agree(src, M, n, off, ring ? (M + 2) / 3 : M, 3, 0);
}

static void moved_windows_match(int n, int off) { moved_windows_match_in(n, off, false); }

Test(align, windows_give_the_results_of_the_loops_as_written) {
  moved_windows_match(N, 0);
  moved_windows_match(N, 3);
}

/* An empty row's row_shift is 0, so the moved loops run no iteration, as written: no chunk of
 * fill alone, whose running max of -inf would give exp(-inf - -inf), a NaN for -inf. */
Test(align, empty_rows_run_no_iteration) { moved_windows_match(0, 1); }

/* A ring of rows: each iteration of a pipelined loop copies one row and walks it in windows. The
 * window loops directly in that body move (the GPU lowering copies each stage at its own row's
 * shift); without `pipeline` the copy is a plain loop's, copied as it is, and they stay; a window
 * loop under an `if` of the body stays too. */
static int aligned_ring_loops(const char *pipeline, const char *open, const char *close) {
  return moved_loops(pipeline,
                     "kernel k<B = 256, C = 64>(X: f16[M, N], S: out f32[M], Y: out f16[M, N])\n"
                     "  grid (cdiv(M, 4)) threads (32)\n"
                     "{\n"
                     "  for r in block.x * 4 .. minimum(block.x * 4 + 4, M) %s {\n"
                     "    shared xs = fill(X[r, 0 : +B], -inf);\n"
                     "    reg mx: f32[C] = -inf;\n"
                     "    for c0 in 0 .. N step C { mx = maximum(mx, to_f32(fill(xs[c0 : +C], -inf))); }\n"
                     "    let m = max(mx, 0);\n"
                     "    S[r] = m;\n"
                     "    %s for c0 in 0 .. N step C { Y[r, c0 : +C] = to(f16, exp(to_f32(xs[c0 : +C]) - m)); } %s\n"
                     "  }\n"
                     "}\n",
                     pipeline, open, close);
}

Test(align, windows_of_a_ring_of_rows) {
  cr_assert_eq(aligned_ring_loops("pipeline 2", "", ""), 2, "both loops of the ring's body");
  cr_assert_eq(aligned_ring_loops("", "", ""), 0, "a plain loop's copy");
  cr_assert_eq(aligned_ring_loops("pipeline 2", "if m > 0.0 {", "}"), 1, "the loop under the if stays");
}

Test(align, ring_windows_give_the_results_of_the_loops_as_written) {
  moved_windows_match_in(N, 0, true);
  moved_windows_match_in(N, 3, true);
}
