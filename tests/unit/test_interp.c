/* test_interp.c — op-level semantics of the TIR interpreter (docs/tir.md, "Semantics"). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tilec.h"

static const SrcLoc L0 = {1, 1, 1, 2};

static TileType T(ElemType e, int rank, int d0, int d1) {
  TileType t = {.elem = e, .rank = rank};
  t.dims[0] = d0, t.dims[1] = d1;
  return t;
}
#define SCALAR(e) T(e, 0, 0, 0)

/* A kernel with tensor arguments given as (name, elem, rank, out); dims are D0, D1, ... one per
 * tensor dimension, in order. */
typedef struct ArgSpec {
  const char *name;
  ElemType elem;
  int rank;
  bool out;
  bool scalar;
} ArgSpec;

static TirFunc *kernel(Arena *a, const ArgSpec *specs, int n) {
  TirFunc *f = tir_func_new(a, "t", L0);
  f->args = arena_alloc(a, sizeof *f->args * (size_t)n);
  f->dims = arena_alloc(a, sizeof *f->dims * 16);
  f->nargs = n;
  for (int i = 0; i < n; i++) {
    TirArg *t = &f->args[i];
    *t = (TirArg){.name = specs[i].name, .kind = specs[i].scalar ? ARG_SCALAR : ARG_TENSOR,
                  .elem = specs[i].elem, .is_out = specs[i].out, .rank = specs[i].rank};
    for (int d = 0; d < t->rank; d++) {
      f->dims[f->ndims] = (TirDim){arena_printf(a, "D%d", f->ndims), false, 0, NULL};
      t->dims[d] = f->ndims++;
    }
  }
  return f;
}

static int K(TirFunc *f, TileType t, double v) {
  TirInst *in = tir_emit(f, TIR_CONST, L0);
  in->dst = tir_new_reg(f, t, NULL);
  in->imm = v;
  return in->dst;
}

static int E(TirFunc *f, TirOp op, TileType t, int a, int b, int c) {
  TirInst *in = tir_emit(f, op, L0);
  in->dst = tir_new_reg(f, t, NULL);
  in->args[0] = a, in->args[1] = b, in->args[2] = c;
  return in->dst;
}
#define E1(f, op, t, a) E(f, op, t, a, -1, -1)
#define E2(f, op, t, a, b) E(f, op, t, a, b, -1)

static void into(TirFunc *f, int dst) { f->insts[f->ninsts - 1].dst = dst; }

/* LOAD/STORE of a 2-D box [r0 : +R, c0 : +C] (or 1-D [c0 : +C] when rank 1). */
static int load2(TirFunc *f, int arg, TileType t, int r0, int c0, double fill) {
  TirInst *in = tir_emit(f, TIR_LOAD, L0);
  in->dst = tir_new_reg(f, t, NULL);
  in->arg_index = arg;
  in->imm = fill;
  if (t.rank == 2) {
    in->index[0] = (TirIndex){true, r0, t.dims[0]};
    in->index[1] = (TirIndex){true, c0, t.dims[1]};
  } else {
    in->index[0] = (TirIndex){true, c0, t.dims[0]};
  }
  return in->dst;
}

static void store2(TirFunc *f, int arg, int v, int r0, int c0) {
  const TileType *t = &f->regs[v].type;
  TirInst *in = tir_emit(f, TIR_STORE, L0);
  in->arg_index = arg;
  in->args[0] = v;
  if (t->rank == 2) {
    in->index[0] = (TirIndex){true, r0, t->dims[0]};
    in->index[1] = (TirIndex){true, c0, t->dims[1]};
  } else if (t->rank == 0) {
    in->index[0] = (TirIndex){false, c0, 1};
  } else {
    in->index[0] = (TirIndex){true, c0, t->dims[0]};
  }
}

static InterpTensor tensor2(void *data, int64_t rows, int64_t cols) {
  InterpTensor t = {.data = data};
  if (rows <= 0) {
    t.shape[0] = cols, t.strides[0] = 1;
  } else {
    t.shape[0] = rows, t.shape[1] = cols;
    t.strides[0] = cols, t.strides[1] = 1;
  }
  return t;
}

static bool run(TirFunc *f, InterpArg *args, const int64_t *dims, int64_t gx, char *err) {
  Diag d;
  diag_init(&d, NULL, stderr);
  cr_assert(tir_verify(f, &d, "test"), "test kernel does not verify");
  int64_t grid[3] = {gx, 1, 1};
  return interp_run(f, args, dims, grid, err, 256);
}

static float h(float x) { return f16_bits_to_f32(f32_to_f16_bits(x)); }

Test(interp, f16_rounds_on_every_write) {
  Arena *a = arena_new();
  ArgSpec s[] = {{"X", TY_F16, 1, false, false}, {"Y", TY_F16, 1, true, false}};
  TirFunc *f = kernel(a, s, 2);
  TileType v = T(TY_F16, 1, 4, 0);
  int zero = K(f, SCALAR(TY_I32), 0);
  int x = load2(f, 0, v, -1, zero, 0);
  int tiny = K(f, v, 0.0004);                  /* f16(0.0004) */
  int sum = E2(f, TIR_ADD, v, x, tiny);        /* rounds back to x for x = 1 */
  int ex = E1(f, TIR_EXP, v, sum);
  store2(f, 1, ex, -1, zero);
  uint16_t X[4], Y[4] = {0};
  float xs[4] = {1.0f, 0.1f, -2.5f, 3.14159f};
  for (int i = 0; i < 4; i++)
    X[i] = f32_to_f16_bits(xs[i]);
  InterpArg args[2] = {{.tensor = tensor2(X, 0, 4)}, {.tensor = tensor2(Y, 0, 4)}};
  int64_t dims[2] = {4, 4};
  char err[256];
  cr_assert(run(f, args, dims, 1, err), "%s", err);
  for (int i = 0; i < 4; i++) {
    float xv = f16_bits_to_f32(X[i]);
    float want = h(expf(h(xv + h(0.0004f))));
    cr_assert_eq(f16_bits_to_f32(Y[i]), want, "element %d: %g vs %g", i, f16_bits_to_f32(Y[i]), want);
  }
  cr_assert_eq(f16_bits_to_f32(Y[0]), h(expf(1.0f)), "1 + 0.0004 must round to 1 in f16");
  arena_free(a);
}

Test(interp, bf16_and_casts) {
  Arena *a = arena_new();
  ArgSpec s[] = {{"X", TY_F32, 1, false, false}, {"Y", TY_BF16, 1, true, false},
                 {"Z", TY_I32, 1, true, false}};
  TirFunc *f = kernel(a, s, 3);
  TileType v = T(TY_F32, 1, 6, 0);
  int zero = K(f, SCALAR(TY_I32), 0);
  int x = load2(f, 0, v, -1, zero, 0);
  store2(f, 1, E1(f, TIR_CVT, T(TY_BF16, 1, 6, 0), x), -1, zero);
  store2(f, 2, E1(f, TIR_CVT, T(TY_I32, 1, 6, 0), x), -1, zero);
  float X[6] = {1.00390625f, 1.01171875f, -7.9f, 3e9f, NAN, -3e9f};
  uint16_t Y[6];
  int32_t Z[6];
  InterpArg args[3] = {{.tensor = tensor2(X, 0, 6)}, {.tensor = tensor2(Y, 0, 6)}, {.tensor = tensor2(Z, 0, 6)}};
  int64_t dims[3] = {6, 6, 6};
  char err[256];
  cr_assert(run(f, args, dims, 1, err), "%s", err);
  cr_assert_eq(bf16_bits_to_f32(Y[0]), 1.0f);        /* tie to even: down */
  cr_assert_eq(bf16_bits_to_f32(Y[1]), 1.015625f);   /* tie to even: up */
  cr_assert(isnan(bf16_bits_to_f32(Y[4])));
  cr_assert_eq(Z[0], 1);
  cr_assert_eq(Z[2], -7);          /* toward zero */
  cr_assert_eq(Z[3], INT32_MAX);   /* saturates */
  cr_assert_eq(Z[4], 0);           /* NaN -> 0 */
  cr_assert_eq(Z[5], INT32_MIN);
  arena_free(a);
}

/* A 3x5 tensor read as [4, 8] tiles at (r0, c0) = (block.x * 2 - 1, 1): fill outside. */
Test(interp, load_masks_with_fill_and_store_drops) {
  Arena *a = arena_new();
  ArgSpec s[] = {{"X", TY_F32, 2, false, false}, {"Y", TY_F32, 2, true, false}};
  TirFunc *f = kernel(a, s, 2);
  TileType t = T(TY_F32, 2, 4, 8);
  TirInst *in = tir_emit(f, TIR_BLOCK_ID, L0);
  int bx = in->dst = tir_new_reg(f, SCALAR(TY_I32), NULL);
  int r0 = E2(f, TIR_SUB, SCALAR(TY_I32), E2(f, TIR_MUL, SCALAR(TY_I32), bx, K(f, SCALAR(TY_I32), 2)),
              K(f, SCALAR(TY_I32), 1));
  int c0 = K(f, SCALAR(TY_I32), 1);
  int x = load2(f, 0, t, r0, c0, -INFINITY);
  store2(f, 1, x, r0, c0);
  float X[15], Y[15];
  for (int i = 0; i < 15; i++)
    X[i] = (float)i, Y[i] = -1;
  InterpArg args[2] = {{.tensor = tensor2(X, 3, 5)}, {.tensor = tensor2(Y, 3, 5)}};
  int64_t dims[4] = {3, 5, 3, 5};
  char err[256];
  cr_assert(run(f, args, dims, 1, err), "%s", err); /* block 0: rows -1..2 */
  for (int r = 0; r < 3; r++)
    for (int c = 0; c < 5; c++)
      cr_assert_eq(Y[r * 5 + c], c >= 1 ? X[r * 5 + c] : -1, "(%d,%d)", r, c);
  arena_free(a);

  /* The fill value itself: sum of a masked row of -inf is -inf; of a fill-0 load, the real sum. */
  a = arena_new();
  ArgSpec s2[] = {{"X", TY_F32, 2, false, false}, {"Y", TY_F32, 2, true, false}};
  f = kernel(a, s2, 2);
  int z = K(f, SCALAR(TY_I32), 0);
  x = load2(f, 0, T(TY_F32, 2, 4, 8), z, z, 7.5);
  int sum = E1(f, TIR_REDUCE_SUM, T(TY_F32, 2, 4, 1), x);
  f->insts[f->ninsts - 1].axis = 1;
  store2(f, 1, sum, z, z);
  float Y2[3] = {0, 0, 0};
  InterpArg args2[2] = {{.tensor = tensor2(X, 3, 5)}, {.tensor = tensor2(Y2, 3, 1)}};
  int64_t dims2[4] = {3, 5, 3, 1};
  cr_assert(run(f, args2, dims2, 1, err), "%s", err);
  for (int r = 0; r < 3; r++) {
    float want = 0;
    for (int c = 0; c < 8; c++)
      want += c < 5 ? X[r * 5 + c] : 7.5f;
    cr_assert_eq(Y2[r], want, "row %d: %g vs %g", r, Y2[r], want);
  }
  arena_free(a);
}

Test(interp, scalar_index_out_of_range_masks_everything) {
  Arena *a = arena_new();
  ArgSpec s[] = {{"X", TY_I32, 2, false, false}, {"Y", TY_I32, 1, true, false}};
  TirFunc *f = kernel(a, s, 2);
  TirInst *in = tir_emit(f, TIR_BLOCK_ID, L0);
  int bx = in->dst = tir_new_reg(f, SCALAR(TY_I32), NULL); /* row = block.x: 0, 1, 2(out) */
  int z = K(f, SCALAR(TY_I32), 0);
  in = tir_emit(f, TIR_LOAD, L0);
  int x = in->dst = tir_new_reg(f, T(TY_I32, 1, 4, 0), NULL);
  in->arg_index = 0, in->imm = 99;
  in->index[0] = (TirIndex){false, bx, 1};
  in->index[1] = (TirIndex){true, z, 4};
  int four = K(f, SCALAR(TY_I32), 4);
  int c0 = E2(f, TIR_MUL, SCALAR(TY_I32), bx, four);
  store2(f, 1, x, -1, c0);
  int32_t X[8] = {1, 2, 3, 4, 5, 6, 7, 8}, Y[12];
  InterpArg args[2] = {{.tensor = tensor2(X, 2, 4)}, {.tensor = tensor2(Y, 0, 12)}};
  int64_t dims[3] = {2, 4, 12};
  char err[256];
  cr_assert(run(f, args, dims, 3, err), "%s", err);
  for (int i = 0; i < 12; i++)
    cr_assert_eq(Y[i], i < 8 ? X[i] : 99, "element %d", i);
  arena_free(a);
}

Test(interp, dot_reduce_trans_bcast) {
  Arena *a = arena_new();
  ArgSpec s[] = {{"A", TY_F16, 2, false, false}, {"B", TY_F16, 2, false, false},
                 {"C", TY_F32, 2, true, false}, {"R", TY_F32, 2, true, false}};
  TirFunc *f = kernel(a, s, 4);
  int M = 5, Kd = 7, N = 3;
  int z = K(f, SCALAR(TY_I32), 0);
  int A = load2(f, 0, T(TY_F16, 2, M, Kd), z, z, 0);
  int Bt = load2(f, 1, T(TY_F16, 2, N, Kd), z, z, 0); /* B given as [N, K], transposed in IR */
  int B = E1(f, TIR_TRANS, T(TY_F16, 2, Kd, N), Bt);
  int acc = K(f, T(TY_F32, 2, M, N), 0.5);
  int d = E(f, TIR_DOT, T(TY_F32, 2, M, N), A, B, acc);
  int mx = E1(f, TIR_REDUCE_MAX, T(TY_F32, 2, 1, N), d); /* axis 0 */
  f->insts[f->ninsts - 1].axis = 0;
  int mxb = E1(f, TIR_BCAST, T(TY_F32, 2, M, N), mx);
  store2(f, 2, d, z, z);
  store2(f, 3, mxb, z, z);
  uint16_t Ah[35], Bh[21];
  double Ad[35], Bd[21];
  for (int i = 0; i < 35; i++)
    Ah[i] = f32_to_f16_bits((float)sin(i * 1.3) * 2), Ad[i] = f16_bits_to_f32(Ah[i]);
  for (int i = 0; i < 21; i++)
    Bh[i] = f32_to_f16_bits((float)cos(i * 0.7)), Bd[i] = f16_bits_to_f32(Bh[i]);
  float C[15], Rm[15];
  InterpArg args[4] = {{.tensor = tensor2(Ah, M, Kd)}, {.tensor = tensor2(Bh, N, Kd)},
                       {.tensor = tensor2(C, M, N)}, {.tensor = tensor2(Rm, M, N)}};
  int64_t dims[8] = {M, Kd, N, Kd, M, N, M, N};
  char err[256];
  cr_assert(run(f, args, dims, 1, err), "%s", err);
  for (int i = 0; i < M; i++)
    for (int j = 0; j < N; j++) {
      float want = 0.5f; /* f32, k ascending */
      for (int k = 0; k < Kd; k++)
        want += (float)Ad[i * Kd + k] * (float)Bd[j * Kd + k];
      cr_assert_eq(C[i * N + j], want, "(%d,%d)", i, j);
    }
  for (int j = 0; j < N; j++) {
    float m = -INFINITY;
    for (int i = 0; i < M; i++)
      m = fmaxf(m, C[i * N + j]);
    for (int i = 0; i < M; i++)
      cr_assert_eq(Rm[i * N + j], m);
  }
  arena_free(a);
}

Test(interp, int_semantics_and_faults) {
  Arena *a = arena_new();
  ArgSpec s[] = {{"Y", TY_I32, 1, true, false}, {"n", TY_I32, 0, false, true}};
  TirFunc *f = kernel(a, s, 2);
  TileType i = SCALAR(TY_I32);
  TirInst *in = tir_emit(f, TIR_PARAM, L0);
  int n = in->dst = tir_new_reg(f, i, NULL);
  in->arg_index = 1;
  int m7 = K(f, i, -7);
  int q = E2(f, TIR_DIV, i, m7, n);
  int r = E2(f, TIR_REM, i, m7, n);
  int z = K(f, i, 0), one = K(f, i, 1);
  store2(f, 0, q, -1, z);
  store2(f, 0, r, -1, one);
  int32_t Y[2];
  InterpArg args[2] = {{.tensor = tensor2(Y, 0, 2)}, {.scalar = 2}};
  int64_t dims[1] = {2};
  char err[256];
  cr_assert(run(f, args, dims, 1, err), "%s", err);
  cr_assert_eq(Y[0], -3); /* C truncation */
  cr_assert_eq(Y[1], -1);
  args[1].scalar = 0;
  cr_assert(!run(f, args, dims, 1, err));
  cr_assert(strstr(err, "division by zero"), "%s", err);
  arena_free(a);
}

Test(interp, loops_and_ifs) {
  Arena *a = arena_new();
  ArgSpec s[] = {{"Y", TY_I32, 1, true, false}};
  TirFunc *f = kernel(a, s, 1);
  TileType i = SCALAR(TY_I32);
  int acc = K(f, i, 0);
  int lo = K(f, i, 1), hi = K(f, i, 10), st = K(f, i, 3); /* i = 1, 4, 7 */
  TirInst *in = tir_emit(f, TIR_FOR, L0);
  int iv = in->dst = tir_new_reg(f, i, "i");
  in->args[0] = lo, in->args[1] = hi, in->args[2] = st;
  int big = E2(f, TIR_GT, SCALAR(TY_BOOL), iv, K(f, i, 3));
  tir_emit(f, TIR_IF, L0)->args[0] = big;
  E2(f, TIR_ADD, i, acc, iv), into(f, acc);         /* + 4 + 7 */
  tir_emit(f, TIR_ELSE, L0);
  E2(f, TIR_SUB, i, acc, K(f, i, 100)), into(f, acc); /* - 100 */
  tir_emit(f, TIR_ENDIF, L0);
  tir_emit(f, TIR_ENDFOR, L0);
  int z = K(f, i, 0);
  store2(f, 0, acc, -1, z);
  int32_t Y[1] = {0};
  InterpArg args[1] = {{.tensor = tensor2(Y, 0, 1)}};
  int64_t dims[1] = {1};
  char err[256];
  cr_assert(run(f, args, dims, 1, err), "%s", err);
  cr_assert_eq(Y[0], 4 + 7 - 100);
  arena_free(a);
}

/* The online-softmax desugaring (docs/language.md) on rows that only ever see -inf: p = 0,
 * alpha = 0, l = 0, finish gives 0 — never NaN. Row 1 has real values for comparison. */
Test(interp, fully_masked_online_softmax_rows_give_zero) {
  Arena *a = arena_new();
  ArgSpec s[] = {{"S", TY_F32, 2, false, false}, {"O", TY_F32, 2, true, false}};
  TirFunc *f = kernel(a, s, 2);
  TileType rt = T(TY_F32, 2, 2, 1), st = T(TY_F32, 2, 2, 4), at = T(TY_F32, 2, 2, 3);
  int z = K(f, SCALAR(TY_I32), 0);
  int m = K(f, rt, -INFINITY), l = K(f, rt, 0), acc = K(f, at, 1);
  for (int it = 0; it < 2; it++) {
    int sv = load2(f, 0, st, z, z, -INFINITY);
    int rmax = E1(f, TIR_REDUCE_MAX, rt, sv);
    f->insts[f->ninsts - 1].axis = 1;
    int mn = E2(f, TIR_MAX, rt, m, rmax);
    int isinf = E2(f, TIR_EQ, T(TY_BOOL, 2, 2, 1), mn, K(f, rt, -INFINITY));
    int base = E(f, TIR_SELECT, rt, isinf, K(f, rt, 0), mn);
    int alpha = E1(f, TIR_EXP, rt, E2(f, TIR_SUB, rt, m, base));
    int p = E1(f, TIR_EXP, st, E2(f, TIR_SUB, st, sv, E1(f, TIR_BCAST, st, base)));
    int ps = E1(f, TIR_REDUCE_SUM, rt, p);
    f->insts[f->ninsts - 1].axis = 1;
    E2(f, TIR_ADD, rt, E2(f, TIR_MUL, rt, l, alpha), ps), into(f, l);
    E2(f, TIR_MUL, at, acc, E1(f, TIR_BCAST, at, alpha)), into(f, acc);
    E1(f, TIR_COPY, rt, mn), into(f, m);
    E2(f, TIR_ADD, at, acc, K(f, at, 1)), into(f, acc); /* acc += something */
  }
  int pos = E2(f, TIR_GT, T(TY_BOOL, 2, 2, 1), l, K(f, rt, 0));
  int scale = E(f, TIR_SELECT, rt, pos, E2(f, TIR_DIV, rt, K(f, rt, 1), l), K(f, rt, 0));
  int out = E2(f, TIR_MUL, at, acc, E1(f, TIR_BCAST, at, scale));
  store2(f, 1, out, z, z);
  float S[8] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY, 1, 2, 3, -INFINITY};
  float O[6];
  InterpArg args[2] = {{.tensor = tensor2(S, 2, 4)}, {.tensor = tensor2(O, 2, 3)}};
  int64_t dims[4] = {2, 4, 2, 3};
  char err[256];
  cr_assert(run(f, args, dims, 1, err), "%s", err);
  for (int j = 0; j < 3; j++) {
    cr_assert_eq(O[j], 0.0f, "masked row gives %g", O[j]);
    cr_assert(isfinite(O[3 + j]) && O[3 + j] > 0, "%g", O[3 + j]);
  }
  arena_free(a);
}

Test(interp, eval_elem_matches_interpreter) {
  double args[3] = {1.0, 0.0004, 0};
  double out;
  cr_assert(interp_eval_elem(TIR_ADD, TY_F16, TY_F16, args, &out));
  cr_assert_eq(out, 1.0);
  args[0] = 7, args[1] = 0;
  cr_assert(!interp_eval_elem(TIR_DIV, TY_I32, TY_I32, args, &out));
  args[0] = 1, args[1] = 3, args[2] = 4;
  cr_assert(interp_eval_elem(TIR_SELECT, TY_F32, TY_F32, args, &out));
  cr_assert_eq(out, 3);
  args[0] = 2.5, args[1] = 2.5;
  cr_assert(interp_eval_elem(TIR_LE, TY_F32, TY_BOOL, args, &out));
  cr_assert_eq(out, 1);
}
