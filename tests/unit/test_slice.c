/* test_slice.c — slices of register tiles (x[a : +S, i, :] with constant starts) and index():
 * sema's result shapes and errors, TIR `extract`, the interpreter against a direct reference
 * (ragged rows, boxes at unaligned starts), and the GPU lowering (ptxas clean, no spills). */
#include <criterion/criterion.h>
#include <string.h>

#include "tilec.h"
#include "test_support.h"

static const char *src =
    "kernel rs<WARPS = 4>(X: f32[M, N], Y: out f32[M, N], Z: out f32[M], W: out f32[M, N],\n"
    "                     I: out i32[M])\n"
    "  grid (cdiv(M, 64)) threads (WARPS * 32)\n"
    "{\n"
    "  let r0 = block.x * 64;\n"
    "  reg x = X[r0 : +64, 0 : +64];\n"
    "  Y[r0 : +16, 0 : +64] = x[16 : +16, :];\n"
    "  Y[r0 + 16 : +16, 32 : +32] = x[0 : +16, 0 : +32] * 2;\n"
    "  Z[r0 : +64] = x[:, 5] + sum(x[:, 3 : +5], 1);\n"
    "  W[r0 : +64, 0 : +1] = x[:, 63 : +1];\n"
    "  W[r0 : +3, 1 : +7] = x[61 : +3, 9 : +7];\n"
    "  I[r0 : +64] = index(r0, 64) * 2;\n"
    "}\n";

enum { M = 70, N = 64 };

Test(slice, tir) {
  Arena *a = arena_new();
  Diag d;
  TirFunc *f = source_tir(a, "slice.tile", src, NULL, ARCH_SM90A, &d);
  int n = 0;
  for (int i = 0; i < f->ninsts; i++) {
    const TirInst *in = &f->insts[i];
    if (in->op != TIR_EXTRACT)
      continue;
    const TileType *s = &f->regs[in->args[0]].type, *t = &f->regs[in->dst].type;
    cr_assert_eq(t->rank, s->rank);
    if (n == 0)
      cr_assert(in->offs[0] == 16 && in->offs[1] == 0 && t->dims[0] == 16 && t->dims[1] == 64);
    n++;
  }
  cr_assert_eq(n, 6);
  arena_free(a);
}

static float xv(int i, int j) { return (float)((i * 7 + j * 3) % 23) - 11.0f; }

Test(slice, interpreter) {
  Arena *a = arena_new();
  Diag d;
  TirFunc *f = source_tir(a, "slice.tile", src, NULL, ARCH_SM90A, &d);
  static float x[M * N], y[M * N], z[M], w[M * N];
  static int32_t idx[M];
  for (int i = 0; i < M; i++)
    for (int j = 0; j < N; j++)
      x[i * N + j] = xv(i, j);
  for (int i = 0; i < M * N; i++)
    y[i] = w[i] = -99.0f;
  InterpArg args[5] = {{.tensor = {x, {M, N}, {N, 1}}}, {.tensor = {y, {M, N}, {N, 1}}},
                       {.tensor = {z, {M}, {1}}}, {.tensor = {w, {M, N}, {N, 1}}},
                       {.tensor = {idx, {M}, {1}}}};
  int64_t dims[2] = {M, N}, grid[3] = {(M + 63) / 64, 1, 1};
  char err[256];
  cr_assert(interp_run(f, args, dims, grid, err, sizeof err), "%s", err);
  for (int r0 = 0; r0 < M; r0 += 64) {
#define X(i, j) (r0 + (i) < M ? xv(r0 + (i), j) : 0.0f) /* rows past M read 0 */
    for (int i = 0; i < 16 && r0 + i < M; i++)
      for (int j = 0; j < 64; j++)
        cr_assert_eq(y[(r0 + i) * N + j], X(16 + i, j), "y[%d, %d]", r0 + i, j);
    for (int i = 0; i < 16 && r0 + 16 + i < M; i++)
      for (int j = 0; j < 32; j++)
        cr_assert_eq(y[(r0 + 16 + i) * N + 32 + j], X(i, j) * 2);
    for (int i = 0; i < 64 && r0 + i < M; i++) {
      float s = 0;
      for (int j = 3; j < 8; j++)
        s += X(i, j);
      cr_assert_eq(z[r0 + i], X(i, 5) + s, "z[%d]", r0 + i);
      cr_assert_eq(w[(r0 + i) * N], X(i, 63));
      cr_assert_eq(idx[r0 + i], 2 * (r0 + i));
    }
    for (int i = 0; i < 3 && r0 + i < M; i++)
      for (int j = 0; j < 7; j++)
        cr_assert_eq(w[(r0 + i) * N + 1 + j], X(61 + i, 9 + j));
#undef X
  }
  arena_free(a);
}

Test(slice, ptx) { source_assembles("slice.tile", src); }

/* The verifier keeps a box inside its source. */
Test(slice, verify_rejects_a_box_outside) {
  Arena *a = arena_new();
  Diag d;
  TirFunc *f = source_tir(a, "slice.tile", src, NULL, ARCH_SM90A, &d);
  for (int i = 0; i < f->ninsts; i++)
    if (f->insts[i].op == TIR_EXTRACT) {
      f->insts[i].offs[0] = 60; /* [60 : +16] of 64 rows */
      break;
    }
  const char *msg = tir_verify_message(a, f, &d);
  cr_assert(strstr(msg, "is out of range"), "%s", msg);
  arena_free(a);
}
