/* test_tir.c — TIR builder, printer, verifier (hand-broken IR) and passes. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tilec.h"

static SrcLoc at(int line, int col) { return (SrcLoc){line, col, line, col + 1}; }

static TileType ty(ElemType e, int rank, int d0, int d1) {
  TileType t = {.elem = e, .rank = rank};
  t.dims[0] = d0, t.dims[1] = d1;
  return t;
}

static int konst(TirFunc *f, TileType t, double v, SrcLoc loc) {
  TirInst *in = tir_emit(f, TIR_CONST, loc);
  in->dst = tir_new_reg(f, t, NULL);
  in->imm = v;
  return in->dst;
}

static int op2(TirFunc *f, TirOp op, TileType t, int a, int b, SrcLoc loc) {
  TirInst *in = tir_emit(f, op, loc);
  in->dst = tir_new_reg(f, t, NULL);
  in->args[0] = a, in->args[1] = b;
  return in->dst;
}

/* vadd by hand: Z[i0 : +64] = X[i0 : +64] + Y[i0 : +64], i0 = block.x * 64. */
static TirFunc *build_vadd(Arena *a) {
  TirFunc *f = tir_func_new(a, "vadd", at(1, 8));
  f->ndims = 1;
  f->dims = arena_alloc(a, sizeof *f->dims);
  f->dims[0] = (TirDim){"N", false, 0, NULL};
  f->nargs = 3;
  f->args = arena_alloc(a, 3 * sizeof *f->args);
  const char *names[] = {"X", "Y", "Z"};
  for (int i = 0; i < 3; i++)
    f->args[i] = (TirArg){.name = names[i], .kind = ARG_TENSOR, .elem = TY_F32, .is_out = i == 2, .rank = 1};
  f->grid[0] = (TirExpr){"N 64 cdiv", "cdiv(N, 64)", at(2, 8)};
  TileType i32 = ty(TY_I32, 0, 0, 0), v = ty(TY_F32, 1, 64, 0);
  TirInst *in = tir_emit(f, TIR_BLOCK_ID, at(3, 12));
  in->dst = tir_new_reg(f, i32, NULL);
  in->axis = 0;
  int bx = in->dst;
  int c = konst(f, i32, 64, at(3, 22));
  int i0 = op2(f, TIR_MUL, i32, bx, c, at(3, 12));
  f->regs[i0].name = "i0";
  int x[2];
  for (int k = 0; k < 2; k++) {
    in = tir_emit(f, TIR_LOAD, at(4, 20 + 20 * k));
    in->dst = x[k] = tir_new_reg(f, v, NULL);
    in->arg_index = k;
    in->index[0] = (TirIndex){true, i0, 64};
  }
  int s = op2(f, TIR_ADD, v, x[0], x[1], at(4, 20));
  in = tir_emit(f, TIR_STORE, at(4, 3));
  in->arg_index = 2;
  in->args[0] = s;
  in->index[0] = (TirIndex){true, i0, 64};
  return f;
}

static char *print_to_string(const TirFunc *f) {
  char *buf = NULL;
  size_t n = 0;
  FILE *m = open_memstream(&buf, &n);
  tir_print(m, f);
  fclose(m);
  return buf;
}

/* Runs the verifier with diagnostics captured; returns the message text (caller frees). */
static char *verify_msg(const TirFunc *f, bool *ok) {
  char *buf = NULL;
  size_t n = 0;
  FILE *m = open_memstream(&buf, &n);
  Diag d;
  diag_init(&d, NULL, m);
  *ok = tir_verify(f, &d, "test");
  fclose(m);
  return buf;
}

static void expect_reject(const TirFunc *f, const char *needle) {
  bool ok;
  char *msg = verify_msg(f, &ok);
  cr_assert(!ok, "verifier accepted broken IR (wanted: %s)", needle);
  cr_assert(strstr(msg, needle), "message '%s' lacks '%s'", msg, needle);
  cr_assert(strstr(msg, "after test"), "message '%s' lacks the stage", msg);
  free(msg);
}

Test(tir, builder_and_printer) {
  Arena *a = arena_new();
  TirFunc *f = build_vadd(a);
  char *text = print_to_string(f);
  const char *want =
      "kernel vadd threads 128\n"
      "  dim N\n"
      "  arg X: f32[N]\n"
      "  arg Y: f32[N]\n"
      "  arg Z: out f32[N]\n"
      "  grid.x \"N 64 cdiv\"    ; cdiv(N, 64)\n"
      "  grid.y \"1\"    ; 1\n"
      "  grid.z \"1\"    ; 1\n"
      "{\n"
      "  %0: i32 = block_id x    ; 3:12\n"
      "  %1: i32 = const 64    ; 3:22\n"
      "  %i0.2: i32 = mul %0, %1    ; 3:12\n"
      "  %3: f32[64] = load X[%i0.2 : +64] fill 0    ; 4:20\n"
      "  %4: f32[64] = load Y[%i0.2 : +64] fill 0    ; 4:40\n"
      "  %5: f32[64] = add %3, %4    ; 4:20\n"
      "  store Z[%i0.2 : +64], %5    ; 4:3\n"
      "}\n";
  cr_assert_str_eq(text, want);
  bool ok;
  char *msg = verify_msg(f, &ok);
  cr_assert(ok, "%s", msg);
  free(msg);
  free(text);
  arena_free(a);
}

Test(tir, printer_control_flow_and_constants) {
  Arena *a = arena_new();
  TirFunc *f = tir_func_new(a, "k", at(1, 1));
  TileType i32 = ty(TY_I32, 0, 0, 0), b = ty(TY_BOOL, 0, 0, 0);
  int lo = konst(f, i32, 0, at(2, 1)), hi = konst(f, i32, 10, at(2, 1)), st = konst(f, i32, 2, at(2, 1));
  int ninf = konst(f, ty(TY_F32, 2, 4, 1), -INFINITY, at(2, 5));
  (void)ninf;
  int tenth = konst(f, ty(TY_F32, 0, 0, 0), 0.1, at(2, 6));
  (void)tenth;
  TirInst *in = tir_emit(f, TIR_FOR, at(3, 1));
  in->dst = tir_new_reg(f, i32, "i");
  in->args[0] = lo, in->args[1] = hi, in->args[2] = st;
  in->pipeline = 2;
  int c = op2(f, TIR_LT, b, in->dst, hi, at(4, 1));
  tir_emit(f, TIR_IF, at(5, 1))->args[0] = c;
  tir_emit(f, TIR_ELSE, at(6, 1));
  tir_emit(f, TIR_ENDIF, at(7, 1));
  tir_emit(f, TIR_ENDFOR, at(8, 1));
  char *text = print_to_string(f);
  cr_assert(strstr(text, "  %3: f32[4, 1] = const -inf    ; 2:5\n"), "%s", text);
  cr_assert(strstr(text, "  %4: f32 = const 0.1    ; 2:6\n"), "%s", text);
  cr_assert(strstr(text, "  for %i.5 = %0, %1, %2 pipeline 2    ; 3:1\n"), "%s", text);
  cr_assert(strstr(text, "    %6: bool = lt %i.5, %1    ; 4:1\n"), "%s", text);
  cr_assert(strstr(text, "    if %6    ; 5:1\n    else    ; 6:1\n    endif    ; 7:1\n  endfor    ; 8:1\n"),
            "%s", text);
  bool ok;
  char *msg = verify_msg(f, &ok);
  cr_assert(ok, "%s", msg);
  free(msg);
  free(text);
  arena_free(a);
}

Test(tir, verify_rejects_wrong_arity) {
  Arena *a = arena_new();
  TirFunc *f = build_vadd(a);
  f->insts[5].args[2] = 0; /* add with a third operand */
  expect_reject(f, "operand 2 set but the op takes 2");
  f = build_vadd(a);
  f->insts[5].args[1] = -1; /* add with one operand */
  expect_reject(f, "operand 1 is register -1");
  arena_free(a);
}

Test(tir, verify_rejects_shape_mismatch) {
  Arena *a = arena_new();
  TirFunc *f = build_vadd(a);
  f->regs[4].type.dims[0] = 32; /* Y's tile is [32]: load and add disagree */
  expect_reject(f, "does not match the addressed slice");
  f = build_vadd(a);
  int r = tir_new_reg(f, ty(TY_F32, 1, 32, 0), NULL);
  tir_emit(f, TIR_CONST, at(9, 1))->dst = r;
  TirInst *in = tir_emit(f, TIR_ADD, at(9, 9));
  in->dst = tir_new_reg(f, ty(TY_F32, 1, 64, 0), NULL);
  in->args[0] = 5, in->args[1] = r;
  expect_reject(f, "operands differ: f32[64] vs f32[32]");
  arena_free(a);
}

Test(tir, verify_rejects_unbalanced_control_flow) {
  Arena *a = arena_new();
  TirFunc *f = build_vadd(a);
  tir_emit(f, TIR_ENDFOR, at(7, 7));
  expect_reject(f, "endfor without a matching for");
  f = build_vadd(a);
  int c = konst(f, ty(TY_BOOL, 0, 0, 0), 1, at(7, 1));
  tir_emit(f, TIR_IF, at(7, 2))->args[0] = c;
  tir_emit(f, TIR_ENDFOR, at(7, 3));
  expect_reject(f, "endfor without a matching for");
  f = build_vadd(a);
  TirInst *in = tir_emit(f, TIR_FOR, at(7, 4));
  in->dst = tir_new_reg(f, ty(TY_I32, 0, 0, 0), "i");
  in->args[0] = in->args[1] = in->args[2] = 1;
  expect_reject(f, "not closed (missing endfor)");
  arena_free(a);
}

Test(tir, verify_rejects_bad_reduce) {
  Arena *a = arena_new();
  TirFunc *f = build_vadd(a);
  TirInst *in = tir_emit(f, TIR_REDUCE_SUM, at(8, 1));
  in->dst = tir_new_reg(f, ty(TY_F32, 1, 1, 0), NULL);
  in->args[0] = 5;
  in->axis = 1; /* rank 1: only axis 0 */
  expect_reject(f, "reduce axis 1 out of range for rank 1");
  f = build_vadd(a);
  in = tir_emit(f, TIR_REDUCE_MAX, at(8, 1));
  in->dst = tir_new_reg(f, ty(TY_F32, 1, 64, 0), NULL); /* not keepdims */
  in->args[0] = 5;
  expect_reject(f, "keepdims");
  arena_free(a);
}

/* ANY only as the condition of the IF right after it, whose body a warp does alone. */
Test(tir, verify_rejects_misplaced_any) {
  Arena *a = arena_new();
  TileType b64 = ty(TY_BOOL, 1, 64, 0), b = ty(TY_BOOL, 0, 0, 0);
  TirFunc *f = build_vadd(a);
  int c = op2(f, TIR_LT, b64, 3, 4, at(8, 1)); /* X < Y */
  int some = op2(f, TIR_ANY, b, c, -1, at(8, 2));
  expect_reject(f, "any is not the condition of the if after it");
  f = build_vadd(a);
  c = op2(f, TIR_LT, b64, 3, 4, at(8, 1));
  some = op2(f, TIR_ANY, b, c, -1, at(8, 2));
  tir_emit(f, TIR_IF, at(8, 3))->args[0] = some;
  TirInst *in = tir_emit(f, TIR_REDUCE_SUM, at(8, 4));
  in->dst = tir_new_reg(f, ty(TY_F32, 1, 1, 0), NULL);
  in->args[0] = 5;
  tir_emit(f, TIR_ENDIF, at(8, 5));
  expect_reject(f, "an any-guard holds reduce_sum");
  f = build_vadd(a);
  c = op2(f, TIR_LT, b64, 3, 4, at(8, 1));
  some = op2(f, TIR_ANY, b, c, -1, at(8, 2));
  tir_emit(f, TIR_IF, at(8, 3))->args[0] = some;
  op2(f, TIR_MUL, ty(TY_F32, 1, 64, 0), 5, 5, at(8, 4));
  tir_emit(f, TIR_ENDIF, at(8, 5));
  op2(f, TIR_NOT, b, some, -1, at(8, 6));
  expect_reject(f, "any's result is used or written outside its if");
  f = build_vadd(a);
  some = op2(f, TIR_ANY, b, 5, -1, at(8, 2)); /* of the f32 tile X + Y */
  tir_emit(f, TIR_IF, at(8, 3))->args[0] = some;
  tir_emit(f, TIR_ENDIF, at(8, 5));
  expect_reject(f, "any of a value that is not a bool tile");
  arena_free(a);
}

Test(tir, verify_rejects_bad_dot) {
  Arena *a = arena_new();
  TirFunc *f = tir_func_new(a, "k", at(1, 1));
  int x = konst(f, ty(TY_F16, 2, 16, 32), 1, at(2, 1));
  int y = konst(f, ty(TY_F16, 2, 16, 8), 1, at(2, 2));
  int c = konst(f, ty(TY_F32, 2, 16, 8), 0, at(2, 3));
  TirInst *in = tir_emit(f, TIR_DOT, at(3, 1));
  in->dst = tir_new_reg(f, ty(TY_F32, 2, 16, 8), NULL);
  in->args[0] = x, in->args[1] = y, in->args[2] = c;
  expect_reject(f, "dot inner dimensions differ: [16, 32] x [16, 8]");
  f->regs[y].type.dims[0] = 32; /* now [16,32] x [32,8]: fine */
  bool ok;
  free(verify_msg(f, &ok));
  cr_assert(ok);
  f->regs[c].type.elem = TY_F16;
  expect_reject(f, "accumulator and result must be f32");
  arena_free(a);
}

Test(tir, verify_rejects_bad_load_rank) {
  Arena *a = arena_new();
  TirFunc *f = build_vadd(a);
  f->insts[3].index[1] = (TirIndex){false, 2, 1}; /* two indices on a rank-1 tensor */
  expect_reject(f, "2 indices for X, whose rank is 1");
  f = build_vadd(a);
  f->insts[3].index[0].start = 3; /* index register is the f32 tile itself */
  expect_reject(f, "read before any write");
  f = build_vadd(a);
  f->insts[4].index[0].start = 3; /* an f32 tile as index */
  expect_reject(f, "index 0 must be an i32 scalar");
  arena_free(a);
}

Test(tir, verify_rejects_bad_leaves_and_bcast) {
  Arena *a = arena_new();
  TirFunc *f = build_vadd(a);
  f->regs[0].type.elem = TY_F32; /* block_id into an f32 */
  expect_reject(f, "block_id result must be an i32 scalar");
  f = build_vadd(a);
  TirInst *in = tir_emit(f, TIR_BCAST, at(9, 1));
  in->dst = tir_new_reg(f, ty(TY_F32, 2, 4, 32), NULL);
  in->args[0] = 5;
  expect_reject(f, "cannot broadcast f32[64] to f32[4, 32]");
  f = build_vadd(a);
  f->insts[5].op = TIR_EXP2; /* arity 1 with two operands */
  expect_reject(f, "operand 1 set but the op takes 1");
  f = build_vadd(a);
  f->insts[6].arg_index = 0; /* store into an input */
  expect_reject(f, "not an out tensor");
  arena_free(a);
}

/* -------------------------------------------------------------- passes */

Test(tir_passes, fold_constants_and_dead_branches) {
  Arena *a = arena_new();
  TirFunc *f = build_vadd(a);
  TileType i32 = ty(TY_I32, 0, 0, 0), b = ty(TY_BOOL, 0, 0, 0);
  int two = konst(f, i32, 2, at(10, 1)), three = konst(f, i32, 3, at(10, 2));
  int sum = op2(f, TIR_ADD, i32, two, three, at(10, 3)); /* 5 */
  int five = konst(f, i32, 5, at(10, 4));
  int eq = op2(f, TIR_EQ, b, sum, five, at(10, 5)); /* true */
  tir_emit(f, TIR_IF, at(11, 1))->args[0] = eq;
  TirInst *in = tir_emit(f, TIR_STORE, at(12, 1)); /* kept */
  *in = f->insts[6];
  in->loc = at(12, 1);
  tir_emit(f, TIR_ELSE, at(13, 1));
  in = tir_emit(f, TIR_STORE, at(14, 1)); /* dropped */
  *in = f->insts[6];
  in->loc = at(14, 1);
  tir_emit(f, TIR_ENDIF, at(15, 1));
  /* an empty constant loop: removed */
  in = tir_emit(f, TIR_FOR, at(16, 1));
  in->dst = tir_new_reg(f, i32, "i");
  in->args[0] = five, in->args[1] = two, in->args[2] = three;
  in = tir_emit(f, TIR_STORE, at(17, 1));
  *in = f->insts[6];
  tir_emit(f, TIR_ENDFOR, at(18, 1));
  Diag d;
  diag_init(&d, NULL, stderr);
  cr_assert(tir_verify(f, &d, "build"));
  cr_assert(tir_fold_constants(f, &d));
  cr_assert(tir_verify(f, &d, "fold"));
  cr_assert(tir_eliminate_dead(f, &d));
  cr_assert(tir_verify(f, &d, "dce"));
  char *text = print_to_string(f);
  cr_assert(strstr(text, "; 12:1"), "%s", text);
  cr_assert(!strstr(text, "; 14:1"), "%s", text);
  cr_assert(!strstr(text, "if "), "%s", text);
  cr_assert(!strstr(text, "for "), "%s", text);
  cr_assert(!strstr(text, "; 10:"), "dead constants stayed:\n%s", text);
  free(text);
  arena_free(a);
}

Test(tir_passes, fold_uses_interpreter_rounding) {
  Arena *a = arena_new();
  TirFunc *f = tir_func_new(a, "k", at(1, 1));
  f->nargs = 1;
  f->args = arena_alloc(a, sizeof *f->args);
  f->ndims = 1;
  f->dims = arena_alloc(a, sizeof *f->dims);
  f->dims[0] = (TirDim){"N", false, 0, NULL};
  f->args[0] = (TirArg){.name = "O", .kind = ARG_TENSOR, .elem = TY_F16, .is_out = true, .rank = 1};
  TileType h = ty(TY_F16, 0, 0, 0);
  int x = konst(f, h, 1.0, at(2, 1)), y = konst(f, h, 0.0004, at(2, 2));
  int s = op2(f, TIR_ADD, h, x, y, at(2, 3)); /* 1 + 0.0004 rounds to 1 in f16 */
  int zero = konst(f, ty(TY_I32, 0, 0, 0), 0, at(2, 4));
  TirInst *in = tir_emit(f, TIR_STORE, at(3, 1));
  in->arg_index = 0, in->args[0] = s;
  in->index[0] = (TirIndex){false, zero, 1};
  Diag d;
  diag_init(&d, NULL, stderr);
  cr_assert(tir_fold_constants(f, &d) && tir_eliminate_dead(f, &d) && tir_verify(f, &d, "t"));
  cr_assert_eq(f->insts[0].op, TIR_CONST);
  cr_assert_eq(f->insts[0].imm, 1.0);
  arena_free(a);
}

Test(tir_passes, division_by_zero_is_not_folded) {
  Arena *a = arena_new();
  TirFunc *f = tir_func_new(a, "k", at(1, 1));
  TileType i32 = ty(TY_I32, 0, 0, 0);
  int x = konst(f, i32, 1, at(2, 1)), z = konst(f, i32, 0, at(2, 2));
  op2(f, TIR_DIV, i32, x, z, at(2, 3));
  Diag d;
  diag_init(&d, NULL, stderr);
  cr_assert(tir_fold_constants(f, &d));
  cr_assert_eq(f->insts[2].op, TIR_DIV);
  arena_free(a);
}
