/* test_shape.c — squeeze / expand_dims: sema's result shapes, TIR `reshape` and its verifier
 * rule, the interpreter (elements keep their order), and the GPU lowering (ptxas clean). */
#include <criterion/criterion.h>
#include <string.h>

#include "tilec.h"
#include "test_support.h"

/* Per-row sums to a rank-1 output, column sums added to another, and a round trip through
 * expand_dims; ragged in both dimensions. */
static const char *src =
    "kernel rows<ROWS = 4, BLOCK = 256, WARPS = 4>(X: f32[M, N], Y: out f32[M], Z: out f32[N],\n"
    "                                               W: out f32[M, N])\n"
    "  grid (cdiv(M, ROWS)) threads (WARPS * 32)\n"
    "{\n"
    "  require N <= BLOCK;\n"
    "  let r0 = block.x * ROWS;\n"
    "  reg x = X[r0 : +ROWS, 0 : +BLOCK];\n"
    "  let s = sum(x, 1);                              // f32[ROWS]\n"
    "  Y[r0 : +ROWS] = s;\n"
    "  atomic_add(Z[0 : +BLOCK], sum(x, 0));\n"
    "  W[r0 : +ROWS, 0 : +BLOCK] = x - expand_dims(s, 1);\n"
    "}\n";

enum { M = 10, N = 200 };

static TirFunc *compile_tir(Arena *a, Diag *d) { return source_tir(a, "shape.tile", src, NULL, ARCH_SM90A, d); }

Test(shape, tir_types) {
  Arena *a = arena_new();
  Diag d;
  TirFunc *f = compile_tir(a, &d);
  int n = 0;
  for (int i = 0; i < f->ninsts; i++) {
    const TirInst *in = &f->insts[i];
    if (in->op != TIR_RESHAPE)
      continue;
    const TileType *s = &f->regs[in->args[0]].type, *t = &f->regs[in->dst].type;
    cr_assert_eq(t->rank, s->rank + (n == 2 ? 1 : -1), "reshape %d", n);
    n++;
  }
  cr_assert_eq(n, 3, "two squeezes and an expand_dims");
  arena_free(a);
}

Test(shape, verify_rejects_a_real_reshape) {
  Arena *a = arena_new();
  Diag d;
  TirFunc *f = compile_tir(a, &d);
  for (int i = 0; i < f->ninsts; i++)
    if (f->insts[i].op == TIR_RESHAPE) {
      /* f32[4, 1] -> f32[4] becomes f32[4, 1] -> f32[2, 2]: same count, other shape */
      TileType *t = &f->regs[f->insts[i].dst].type;
      t->rank = 2, t->dims[0] = 2, t->dims[1] = 2;
      break;
    }
  const char *msg = tir_verify_message(a, f, &d);
  cr_assert(strstr(msg, "does more than insert or remove dims of size 1"), "%s", msg);
  arena_free(a);
}

Test(shape, interpreter) {
  Arena *a = arena_new();
  Diag d;
  TirFunc *f = compile_tir(a, &d);
  static float x[M * N], y[M + 1], z[N + 1], w[M * N];
  for (int i = 0; i < M * N; i++)
    x[i] = (float)((i * 13) % 17) - 8.0f;
  y[M] = z[N] = -99.0f; /* guards: out of range, never written */
  memset(z, 0, sizeof(float) * N);
  InterpArg args[4] = {{.tensor = {x, {M, N}, {N, 1}}}, {.tensor = {y, {M}, {1}}},
                       {.tensor = {z, {N}, {1}}}, {.tensor = {w, {M, N}, {N, 1}}}};
  int64_t dims[2] = {M, N}, grid[3] = {(M + 3) / 4, 1, 1};
  char err[256];
  cr_assert(interp_run(f, args, dims, grid, err, sizeof err), "%s", err);
  for (int i = 0; i < M; i++) {
    float s = 0; /* small integers: exact in any order */
    for (int j = 0; j < N; j++)
      s += x[i * N + j];
    cr_assert_eq(y[i], s, "row %d", i);
    for (int j = 0; j < N; j++)
      cr_assert_eq(w[i * N + j], x[i * N + j] - s, "w[%d, %d]", i, j);
  }
  for (int j = 0; j < N; j++) {
    float s = 0;
    for (int i = 0; i < M; i++)
      s += x[i * N + j];
    cr_assert_eq(z[j], s, "column %d", j);
  }
  cr_assert(y[M] == -99.0f && z[N] == -99.0f);
  arena_free(a);
}

Test(shape, ptx) { source_assembles("shape.tile", src); }
