/* test_window.c — windows of shared tiles (x[a : +S, b : +T] with run-time starts): the TIR
 * `window` and tir_known_multiple, the interpreter against a direct reference (starts inside the
 * tile, reaching past either end, a scalar index, a fill), the verifier, and the GPU lowering
 * (vector reads where the start is a known multiple, element reads otherwise; ptxas clean). */
#include <criterion/criterion.h>
#include <string.h>

#include "tilec.h"
#include "test_support.h"

static const char *src =
    "kernel win<WARPS = 2>(X: f32[M, N], S: i32[M], Y: out f32[M, K], Z: out f32[M, 4, 8])\n"
    "  grid (M) threads (WARPS * 32)\n"
    "{\n"
    "  let r = block.x;\n"
    "  shared t = X[r : +8, 0 : +64];\n"
    "  let s = S[r];\n"
    "  Y[r, 0 : +16] = t[1, s : +16];\n"
    "  for c0 in 0 .. 64 step 16 { Y[r, 16 + c0 : +16] = t[0, c0 : +16] * 2.0; }\n"
    "  Z[r, 0 : +4, 0 : +8] = fill(t[s : +4, 8 : +8], -1.0);\n"
    "}\n";

enum { M = 11, N = 60, K = 80 };

static const int32_t starts[M] = {0, 5, 48, 50, -3, 7, 4, 63, -20, 64, 2};

Test(window, tir_and_known_multiples) {
  Arena *a = arena_new();
  Diag d;
  TirFunc *f = source_tir(a, "win.tile", src, NULL, ARCH_SM90A, &d);
  int n = 0;
  for (int i = 0; i < f->ninsts; i++) {
    const TirInst *in = &f->insts[i];
    if (in->op != TIR_WINDOW)
      continue;
    cr_assert_eq(f->regs[in->args[0]].type.place, PLACE_SHARED);
    cr_assert_eq(f->regs[in->dst].type.place, PLACE_REG);
    int64_t km = tir_known_multiple(f, in->args[2]);
    if (n == 0) /* t[1, s : +16]: a loaded start, nothing known */
      cr_assert(km == 1 && f->regs[in->dst].type.dims[1] == 16, "km %lld", (long long)km);
    if (n == 1) /* t[0, c0 : +16] in `0 .. 64 step 16` */
      cr_assert_eq(km, 16);
    if (n == 2) /* t[s : +4, 8 : +8]: a constant */
      cr_assert(km == 8 && in->imm == -1.0);
    n++;
  }
  cr_assert_eq(n, 3);
  arena_free(a);
}

static float xv(int i, int j) { return (float)((i * 13 + j * 5) % 29) - 14.0f; }

/* t as the tensor load fills it: rows past M and columns past N read 0. */
static float tv(int r, int i, int j) { return r + i < M && j < N ? xv(r + i, j) : 0.0f; }

Test(window, interpreter) {
  Arena *a = arena_new();
  Diag d;
  TirFunc *f = source_tir(a, "win.tile", src, NULL, ARCH_SM90A, &d);
  static float x[M * N], y[M * K], z[M * 32];
  int32_t s[M];
  memcpy(s, starts, sizeof s);
  for (int i = 0; i < M; i++)
    for (int j = 0; j < N; j++)
      x[i * N + j] = xv(i, j);
  InterpArg args[4] = {{.tensor = {x, {M, N}, {N, 1}}}, {.tensor = {s, {M}, {1}}},
                       {.tensor = {y, {M, K}, {K, 1}}}, {.tensor = {z, {M, 4, 8}, {32, 8, 1}}}};
  int64_t dims[5] = {M, N, M, M, K}, grid[3] = {M, 1, 1};
  for (int i = 0; i < f->ndims; i++) /* M, N, then the dims the other arguments name */
    if (!strcmp(f->dims[i].name, "K"))
      dims[i] = K;
  char err[256];
  cr_assert(interp_run(f, args, dims, grid, err, sizeof err), "%s", err);
  for (int r = 0; r < M; r++) {
    for (int j = 0; j < 16; j++) {
      int c = s[r] + j;
      cr_assert_eq(y[r * K + j], c >= 0 && c < 64 ? tv(r, 1, c) : 0.0f, "y[%d, %d] start %d", r, j, s[r]);
    }
    for (int j = 0; j < 64; j++)
      cr_assert_eq(y[r * K + 16 + j], 2 * tv(r, 0, j), "y[%d, %d]", r, 16 + j);
    for (int i = 0; i < 4; i++)
      for (int j = 0; j < 8; j++) {
        int rr = s[r] + i;
        cr_assert_eq(z[r * 32 + i * 8 + j], rr >= 0 && rr < 8 ? tv(r, rr, 8 + j) : -1.0f, "z[%d, %d, %d]", r, i, j);
      }
  }
  arena_free(a);
}

Test(window, ptx) { source_assembles("win.tile", src); }

/* A window in `0 .. N step 1024` starts at a known multiple of 1024 columns: both its paths read
 * 16 bytes a thread (8 f16 of 1024 over 128 threads; the masked one then selects the fill past
 * the tile); a window at a loaded start (S[...]) has no known alignment and reads element by
 * element on both of its paths. */
Test(window, vector_reads_only_at_known_multiples) {
  static const char *row =
      "kernel wr(X: f16[M, N], S: i32[M], Y: out f16[M, N])\n"
      "  grid (M) threads (128)\n"
      "{\n"
      "  shared t = X[block.x, 0 : +4096];\n"
      "  for c0 in 0 .. N step 1024 { Y[block.x, c0 : +1024] = t[c0 : +1024]; }\n"
      "  Y[block.x, 0 : +1024] = t[S[block.x] : +1024];\n"
      "}\n";
  Arena *a = arena_new();
  char *ptx = source_ptx(a, "wr.tile", row, NULL, ARCH_SM90A);
  int v4 = 0, b16 = 0;
  for (const char *p = ptx; (p = strstr(p, "ld.shared.")); p++) {
    v4 += !strncmp(p, "ld.shared.v4.b32", 16);
    b16 += !strncmp(p, "ld.shared.b16", 13);
  }
  /* the loop's inside path and its masked path (window_masked_chunks: the vector, then a select
   * per element): one v4 each; both paths of the other window: 8 b16 each */
  cr_assert(v4 >= 2 && v4 <= 3, "v4 %d\n%s", v4, ptx);
  cr_assert(b16 >= 16, "b16 %d", b16);
  char *elementwise = source_ptx_with(a, "wr.tile", row, NULL, ARCH_SM90A, "TILEC_WINDOW_CHUNKS", "0");
  cr_assert_geq(occurrences(elementwise, "ld.shared.b16"), b16 + 8, "TILEC_WINDOW_CHUNKS=0: the loop's masked path element by element");
  ptxas_assert_clean(ptx, ARCH_SM90A);
  arena_free(a);
}

/* The verifier: a window reads a shared tile. */
Test(window, verify_rejects_a_register_source) {
  Arena *a = arena_new();
  Diag d;
  TirFunc *f = source_tir(a, "win.tile", src, NULL, ARCH_SM90A, &d);
  for (int i = 0; i < f->ninsts; i++)
    if (f->insts[i].op == TIR_WINDOW) {
      f->regs[f->insts[i].args[0]].type.place = PLACE_REG;
      break;
    }
  const char *msg = tir_verify_message(a, f, &d);
  cr_assert(strstr(msg, "window reads a shared tile"), "%s", msg);
  arena_free(a);
}

/* Two tiles copied in at the top level, read in turn: the first's loop waits only for its own
 * commit group (cp.async.wait_group 1), the second's for the rest; with one tile, wait_all. */
Test(window, copies_wait_only_for_the_groups_read) {
  static const char *two =
      "kernel two(X: f16[M, N], Y: out f32[M])\n"
      "  grid (M) threads (128)\n"
      "{\n"
      "  shared a = X[block.x, 0 : +2048];\n"
      "  shared b = X[block.x, 2048 : +2048];\n"
      "  reg s: f32[512] = 0;\n"
      "  for c0 in 0 .. 2048 step 512 { s += to_f32(a[c0 : +512]); }\n"
      "  for c0 in 0 .. 2048 step 512 { s += to_f32(b[c0 : +512]); }\n"
      "  Y[block.x : +1] = sum(s, 0, keep);\n"
      "}\n";
  Arena *a = arena_new();
  char *ptx = source_ptx(a, "two.tile", two, NULL, ARCH_SM90A);
  const char *w1 = strstr(ptx, "cp.async.wait_group 1;"), *wall = strstr(ptx, "cp.async.wait_all;");
  cr_assert(w1 && wall && w1 < wall, "%s", ptx);
  cr_assert_null(strstr(wall + 1, "cp.async.wait"), "one wait per group");
  ptxas_assert_clean(ptx, ARCH_SM90A);
  arena_free(a);
}

/* A window as a shared tile's initializer: the window stays a register tile, a COPY fills the
 * shared one (a review finding: it used to retarget the window into shared memory). */
Test(window, initializes_a_shared_tile) {
  static const char *init =
      "kernel wi(X: f32[M, N], Y: out f32[M, N]) grid (M) threads (128) {\n"
      "  shared x = X[block.x, 0 : +256];\n"
      "  shared y = fill(x[block.x * 3 : +128], 2.0);\n"
      "  Y[block.x, 0 : +128] = y * 2.0;\n"
      "}\n";
  Arena *a = arena_new();
  Diag d;
  TirFunc *f = source_tir(a, "wi.tile", init, NULL, ARCH_SM90A, &d);
  bool copied = false;
  for (int i = 0; i < f->ninsts; i++)
    copied |= f->insts[i].op == TIR_COPY && f->regs[f->insts[i].dst].type.place == PLACE_SHARED &&
              f->insts[i - 1].op == TIR_WINDOW;
  cr_assert(copied);
  arena_free(a);
  source_assembles("wi.tile", init);
}
