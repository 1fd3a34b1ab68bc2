/* test_wstore.c — window stores into shared tiles (x[a : +S, b : +T] = v): the TIR
 * `window_store`, the interpreter against a direct reference (windows inside the tile, reaching
 * past either end, a scalar row index), the verifier, the GPU lowering (a store its thread owns
 * leaves its barriers to its loop; ptxas clean), and tir_align (a loop that stores moves to its
 * row's boundary only where nothing later reads what it leaves past the row). */
#include <criterion/criterion.h>
#include <string.h>

#include "tilec.h"
#include "test_support.h"

static const char *src =
    "kernel ws<WARPS = 2>(X: f32[M, N], S: i32[M], Z: out f32[M, 8, 64])\n"
    "  grid (M) threads (WARPS * 32)\n"
    "{\n"
    "  let r = block.x;\n"
    "  shared t = X[r : +8, 0 : +64];\n"
    "  let s = S[r];\n"
    "  t[1, s : +16] = t[1, s : +16] * 2.0 + 1.0;\n"
    "  t[s : +4, 8 : +8] = fill(t[s : +4, 8 : +8], -1.0) - 3.0;\n"
    "  Z[r, 0 : +8, 0 : +64] = t;\n"
    "}\n";

enum { M = 11, N = 60 };

static const int32_t starts[M] = {0, 5, 48, 50, -3, 7, 4, 63, -20, 64, 2};

static float xv(int i, int j) { return (float)((i * 13 + j * 5) % 29) - 14.0f; }

/* The tile after the copy: rows past M and columns past N read 0. */
static float tv(int r, int i, int j) { return r + i < M && j < N ? xv(r + i, j) : 0.0f; }

Test(wstore, tir) {
  Arena *a = arena_new();
  Diag d;
  TirFunc *f = source_tir(a, "ws.tile", src, NULL, ARCH_SM90A, &d);
  cr_assert_eq(count_op(f, TIR_WINDOW_STORE), 2);
  int i = nth_op(f, TIR_WINDOW_STORE, 0);
  const TirInst *in = &f->insts[i];
  cr_assert_eq(f->regs[in->dst].type.place, PLACE_SHARED);
  cr_assert_eq(f->regs[in->args[0]].type.rank, 2, "the value takes the tile's rank: [1, 16]");
  cr_assert(tir_inst_reads(in, in->dst), "a window store reads the rest of its tile");
  arena_free(a);
}

Test(wstore, interpreter) {
  Arena *a = arena_new();
  Diag d;
  TirFunc *f = source_tir(a, "ws.tile", src, NULL, ARCH_SM90A, &d);
  static float x[M * N], z[M * 512];
  int32_t s[M];
  memcpy(s, starts, sizeof s);
  for (int i = 0; i < M; i++)
    for (int j = 0; j < N; j++)
      x[i * N + j] = xv(i, j);
  InterpArg args[3] = {{.tensor = {x, {M, N}, {N, 1}}}, {.tensor = {s, {M}, {1}}},
                       {.tensor = {z, {M, 8, 64}, {512, 64, 1}}}};
  int64_t dims[2] = {M, N}, grid[3] = {M, 1, 1};
  char err[256];
  cr_assert(interp_run(f, args, dims, grid, err, sizeof err), "%s", err);
  for (int r = 0; r < M; r++) {
    float t[8][64];
    for (int i = 0; i < 8; i++)
      for (int j = 0; j < 64; j++)
        t[i][j] = tv(r, i, j);
    for (int j = 0; j < 16; j++) /* past the tile's end the window reads 0, and the store drops it */
      if (s[r] + j >= 0 && s[r] + j < 64)
        t[1][s[r] + j] = t[1][s[r] + j] * 2.0f + 1.0f;
    for (int i = 0; i < 4; i++)
      for (int j = 0; j < 8; j++)
        if (s[r] + i >= 0 && s[r] + i < 8)
          t[s[r] + i][8 + j] -= 3.0f;
    for (int i = 0; i < 8; i++)
      for (int j = 0; j < 64; j++)
        cr_assert_eq(z[r * 512 + i * 64 + j], t[i][j], "z[%d, %d, %d] start %d", r, i, j, s[r]);
  }
  arena_free(a);
}

Test(wstore, ptx) { source_assembles("ws.tile", src); }

Test(wstore, verify_rejects_a_register_target) {
  Arena *a = arena_new();
  Diag d;
  TirFunc *f = source_tir(a, "ws.tile", src, NULL, ARCH_SM90A, &d);
  f->regs[f->insts[nth_op(f, TIR_WINDOW_STORE, 0)].args[0]].type.place = PLACE_SHARED;
  const char *msg = tir_verify_message(a, f, &d);
  cr_assert(strstr(msg, "window_store writes a register tile into a shared tile"), "%s", msg);
  arena_free(a);
}

/* A row's exponentials written back over it (bench/ab/cross_entropy_backward_stored.tile's loop),
 * then read by a second loop (`after`), every loop over the row copied once. A window of 256 f16
 * over 32 threads puts each element in one thread (8 a thread, as 16-byte vectors). */
static const char *row_fmt =
    "kernel k<B = 1024, C = 256>(X: f16[M, N], S: out f32[M], Y: out f16[M, N])\n"
    "  grid (M) threads (32)\n"
    "{\n"
    "  let r = block.x;\n"
    "  shared xs = fill(X[r, 0 : +B], -inf);\n"
    "  reg mx: f32[C] = -inf;\n"
    "  for c0 in 0 .. N step C { mx = maximum(mx, to_f32(fill(xs[c0 : +C], -inf))); }\n"
    "  let m = max(mx, 0);\n"
    "  reg se: f32[C] = 0;\n"
    "  for c0 in 0 .. N step C {\n"
    "    let e = exp(to_f32(fill(xs[c0 : +C], -inf)) - m);\n"
    "    se += e;\n"
    "    %s = to(f16, e);\n"
    "  }\n"
    "  let s = sum(se, 0);\n"
    "  %s\n"
    "}\n";

static const char *dx_after = "S[r] = m + log(s);\n"
                              "  for c0 in 0 .. N step C { Y[r, c0 : +C] = to(f16, to_f32(xs[c0 : +C]) / s); }";

static char *row_src(Arena *a, const char *target, const char *after) {
  size_t n = strlen(row_fmt) + strlen(target) + strlen(after) + 1;
  char *p = arena_alloc(a, n);
  snprintf(p, n, row_fmt, target, after);
  return p;
}

/* The loops tir_align moved. */
static int moved(const char *target, const char *after) {
  Arena *a = arena_new();
  int n = aligned_loops_in(target, row_src(a, target, after));
  arena_free(a);
  return n;
}

/* Past the row a moved loop stores at other columns than the loop as written: a later loop that
 * only stores what it reads there (to columns past the tensor, dropped) moves; one that sums the
 * windows, fill columns too, would see the difference, so the storing loop stays (and the sum). */
Test(wstore, loops_that_store_move_where_nothing_reads_past_the_row) {
  cr_assert_eq(moved("xs[c0 : +C]", dx_after), 3, "all three loops");
  cr_assert_eq(moved("xs[c0 : +C]", "reg t: f32[C] = 0;\n"
                                    "  for c0 in 0 .. N step C { t += to_f32(xs[c0 : +C]); }\n"
                                    "  S[r] = sum(t, 0) / s;"),
               1, "a later sum over the windows: only the max loop moves");
  cr_assert_eq(moved("xs[c0 + 1 : +C]", dx_after), 2, "a store beside the loop's window: that loop stays");
}

/* A loop around both (a second pass over the row, no new copy): the max loop's second pass reads
 * what the stores left past the row, so neither it nor the storing loop moves. */
Test(wstore, a_pass_after_the_stores_keeps_the_loops) {
  Arena *a = arena_new();
  Diag d;
  const char *text =
      "kernel k<B = 1024, C = 256>(X: f16[M, N], S: out f32[M])\n"
      "  grid (M) threads (32)\n"
      "{\n"
      "  let r = block.x;\n"
      "  shared xs = fill(X[r, 0 : +B], -inf);\n"
      "  reg acc: f32 = 0;\n"
      "  for it in 0 .. 2 {\n"
      "    reg mx: f32[C] = -inf;\n"
      "    for c0 in 0 .. N step C { mx = maximum(mx, to_f32(fill(xs[c0 : +C], -inf))); }\n"
      "    let m = max(mx, 0);\n"
      "    for c0 in 0 .. N step C { xs[c0 : +C] = to(f16, exp(to_f32(fill(xs[c0 : +C], -inf)) - m)); }\n"
      "    acc += m;\n"
      "  }\n"
      "  S[r] = acc;\n"
      "}\n";
  TirFunc *f = source_tir_with(a, "k.tile", text, ARCH_SM90A, "TILEC_ALIGN_WINDOWS", NULL, &d);
  cr_assert_not_null(f);
  cr_assert_eq(count_op(f, TIR_ROW_SHIFT), 0);
  arena_free(a);
}

/* The same kernel in the interpreter, loops moved and not, on rows whose tensor starts `off`
 * elements past a 16-byte boundary: the same sums, the same gradient to a unit of f16. */
static void stored_rows_match(int off) {
  Arena *a = arena_new();
  moved_windows_agree(row_src(a, "xs[c0 : +C]", dx_after), M, 1003, off, M, 3, 1.0f / 1024);
  arena_free(a);
}

Test(wstore, moved_loops_give_the_results_of_the_loops_as_written) {
  stored_rows_match(0);
  stored_rows_match(3);
}

/* Whether a barrier lies between the store loop's exponential and its first shared store. */
static bool barrier_before_store(const char *ptx) {
  const char *e = strstr(ptx, "ex2.approx"), *st = e ? strstr(e, "st.shared") : NULL, *b = e ? strstr(e, "bar.sync") : NULL;
  cr_assert(st, "%s", ptx);
  return b && b < st;
}

/* The GPU lowering: a store that rewrites the window its thread read this iteration has no
 * barrier of its own (one after its loop); a store to another window waits for every thread's
 * reads first, in the loop. */
Test(wstore, owned_stores_leave_their_barriers_to_the_loop) {
  Arena *a = arena_new();
  const char *defs[] = {"N=1000", NULL};
  char *owned = source_ptx(a, "k.tile", row_src(a, "xs[c0 : +C]", dx_after), defs, ARCH_SM90A);
  char *other = source_ptx(a, "k.tile", row_src(a, "xs[c0 + 1 : +C]", dx_after), defs, ARCH_SM90A);
  cr_assert_not(barrier_before_store(owned));
  cr_assert(barrier_before_store(other));
  ptxas_assert_clean(owned, ARCH_SM90A);
  ptxas_assert_clean(other, ARCH_SM90A);
  ptxas_assert_clean(source_ptx(a, "k.tile", row_src(a, "xs[c0 : +C]", dx_after), defs, ARCH_SM80), ARCH_SM80);
  arena_free(a);
}

/* Owned stores in nested loops: the inner loop's barrier (before the outer body reads what it
 * stored, in another layout) is owed beside the outer loop's, not replaced by it, so the kernel
 * has as many barriers as with the outer store after the inner loop (a review finding: one
 * fewer, and a race). */
static const char *nest_fmt =
    "kernel nest<C = 512, WARPS = 4>(X: f32[M, N], Y: f32[M, N], Z: out f32[M, 4, 128])\n"
    "  grid (M) threads (WARPS * 32)\n"
    "{\n"
    "  let r = block.x;\n"
    "  shared a = X[r, 0 : +2048];\n"
    "  shared b = Y[r, 0 : +2048];\n"
    "  for c0 in 0 .. 2048 step C {\n"
    "    %s\n"
    "    for d0 in 0 .. 2048 step C { let wa = a[d0 : +C]; a[d0 : +C] = wa + 1.0; }\n"
    "    Z[r, c0 / C, 0 : +128] = a[c0 : +128];\n"
    "    %s\n"
    "  }\n"
    "}\n";

Test(wstore, nested_owned_loops_each_get_their_barrier) {
  Arena *a = arena_new();
  const char *outer = "let wb = b[c0 : +C]; b[c0 : +C] = wb * 2.0;";
  char first[1024], last[1024];
  snprintf(first, sizeof first, nest_fmt, outer, "");
  snprintf(last, sizeof last, nest_fmt, "", outer);
  int nf = occurrences(source_ptx(a, "nest.tile", first, NULL, ARCH_SM90A), "bar.sync");
  int nl = occurrences(source_ptx(a, "nest.tile", last, NULL, ARCH_SM90A), "bar.sync");
  cr_assert_geq(nf, nl, "outer store first: %d barriers, last: %d", nf, nl);
  arena_free(a);
}
