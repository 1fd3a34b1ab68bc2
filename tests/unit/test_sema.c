/* test_sema.c — semantic rules: types, constants, shapes, placement, parameters, launch, budget.
 * Each rule is exercised by a program that must pass and one that must fail with its message. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ast.h"

typedef struct Checked {
  Arena *a;
  AstProgram *prog;
  Diag d;
  SourceFile src;
  char *out;
  size_t outlen;
  FILE *mem;
  bool ok;
} Checked;

static void check_defs(Checked *c, const char *text, const Define *defs, int ndefs, GpuArch arch) {
  memset(c, 0, sizeof *c);
  c->a = arena_new();
  c->src = (SourceFile){"t.tile", text, strlen(text)};
  c->mem = open_memstream(&c->out, &c->outlen);
  diag_init(&c->d, &c->src, c->mem);
  c->prog = parse_program(c->a, &c->src, &c->d);
  cr_assert_not_null(c->prog, "syntax error in test program");
  c->ok = sema_check(c->a, c->prog, defs, ndefs, arch, &c->d);
  fflush(c->mem);
}

static void check(Checked *c, const char *text) { check_defs(c, text, NULL, 0, ARCH_SM90A); }

static void done(Checked *c) {
  fclose(c->mem);
  free(c->out);
  arena_free(c->a);
}

/* A program that must fail with `msg` somewhere in its diagnostics. */
static void expect_error(const char *text, const char *msg) {
  Checked c;
  check(&c, text);
  cr_assert(!c.ok, "accepted: %s", text);
  cr_assert(strstr(c.out, msg), "want '%s', got:\n%s", msg, c.out);
  done(&c);
}

static void expect_ok(const char *text) {
  Checked c;
  check(&c, text);
  cr_assert(c.ok, "rejected:\n%s\n%s", text, c.out);
  done(&c);
}

#define K(body) "kernel k<B = 128, F = 0.5, ON = 1>(X: f32[N], H: f16[M, N], Y: out f32[N], s: f32, n: i32, Z: out f32[M, N])\n" \
                "  grid (cdiv(N, B)) threads (128)\n{\n" body "}\n"

static AstStmt *stmt_n(Checked *c, int n) {
  AstStmt *s = c->prog->kernels->body->body;
  while (n-- > 0)
    s = s->next;
  return s;
}

Test(sema, examples_pass) {
  const char *files[] = {"vadd", "softmax", "softmax_online", "rmsnorm", "layernorm", "add_rmsnorm",
                         "gemm", "attention"};
  for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
    char path[128];
    snprintf(path, sizeof path, "dsl/examples/%s.tile", files[i]);
    FILE *f = fopen(path, "rb");
    cr_assert_not_null(f, "%s (run from the repository root)", path);
    static char text[1 << 16];
    size_t n = fread(text, 1, sizeof text - 1, f);
    text[n] = 0;
    fclose(f);
    Checked c;
    check(&c, text);
    cr_assert(c.ok, "%s:\n%s", path, c.out);
    cr_assert_eq(c.outlen, 0, "%s warned:\n%s", path, c.out);
    done(&c);
  }
}

Test(sema, literal_typing_and_folding) {
  Checked c;
  check(&c, K("  let a = X[0 : +B] * 2;\n  let b = B * 2 + 1;\n  let c = F * 4;\n  let d = 7 / 2;\n"
              "  Y[0 : +B] = a + to_f32(b) + to_f32(d) + c;\n"));
  cr_assert(c.ok, "%s", c.out);
  AstExpr *a = stmt_n(&c, 0)->value;
  cr_assert_eq(a->args[1]->ty.elem, TY_F32); /* the literal 2 took f32 */
  cr_assert(a->args[1]->is_const);
  AstDecl *b = stmt_n(&c, 1)->decl;
  cr_assert(b->is_const);
  cr_assert_eq(b->cval, 257);
  cr_assert_eq(stmt_n(&c, 2)->decl->cval, 2.0);
  cr_assert_eq(stmt_n(&c, 3)->decl->cval, 3); /* integer division truncates */
  done(&c);
}

Test(sema, float_constant_never_becomes_int) {
  expect_error(K("  let a = n + 0.5;\n  Y[a : +1] = 1.0;\n"), "float constant 0.5 cannot be used as i32");
}

Test(sema, elem_types_must_match) {
  expect_error(K("  Y[0 : +B] = X[0 : +B] + to_f16(X[0 : +B]);\n"), "different element types");
  expect_ok(K("  Y[0 : +B] = X[0 : +B] + to_f32(to_f16(X[0 : +B]));\n"));
}

Test(sema, broadcasting) {
  Checked c;
  check(&c, K("  let a = to_f32(H[0 : +4, 0 : +B]);\n  let r = sum(a, 1, keep);\n  let d = a - r;\n"
              "  let e = a * X[0 : +B];\n  Z[0 : +1, 0 : +B] = sum(d + e, 0, keep);\n"));
  cr_assert(c.ok, "%s", c.out);
  AstExpr *d = stmt_n(&c, 2)->value;
  cr_assert_eq(d->ty.rank, 2);
  cr_assert_eq(d->ty.dims[0], 4);
  cr_assert_eq(d->ty.dims[1], 128);
  cr_assert_eq(d->args[1]->ty.dims[1], 1);
  cr_assert(tile_same_shape(&d->opnd_ty, &d->ty));
  AstExpr *e = stmt_n(&c, 3)->value;
  cr_assert_eq(e->args[1]->ty.rank, 1); /* rank grows by leading 1s */
  cr_assert_eq(e->ty.rank, 2);
  done(&c);
  expect_error(K("  Y[0 : +B] = X[0 : +B] + X[0 : +64];\n"), "do not broadcast");
}

Test(sema, comparisons_give_bool) {
  Checked c;
  check(&c, K("  let m = X[0 : +B] < 1.0;\n  Y[0 : +B] = where(m, 1.0, 0.0);\n"));
  cr_assert(c.ok, "%s", c.out);
  AstExpr *m = stmt_n(&c, 0)->value;
  cr_assert_eq(m->ty.elem, TY_BOOL);
  cr_assert_eq(m->opnd_ty.elem, TY_F32);
  done(&c);
  expect_error(K("  let a = true + false;\n"), "does not take bool operands");
  expect_error(K("  let a = s && true;\n"), "must be bool");
  expect_error(K("  let a = s % 2.0;\n"), "'%' needs i32 operands");
}

Test(sema, dot_and_trans) {
  Checked c;
  check(&c, K("  reg a: f16[16, 32] = 0;\n  reg b: f16[64, 32] = 0;\n  let d = dot(a, trans(b));\n"
              "  Y[0 : +16] = sum(d, 1, keep);\n"));
  cr_assert(!c.ok); /* sum(d, 1, keep) is f32[16, 1]: does not broadcast to f32[16] */
  done(&c);
  check(&c, K("  reg a: f16[16, 32] = 0;\n  reg b: f16[64, 32] = 0;\n  let d = dot(a, trans(b));\n"
              "  Y[0 : +16] = sum(d, 1);\n"));
  cr_assert(c.ok, "%s", c.out); /* the reduction drops axis 1: f32[16] */
  cr_assert_eq(stmt_n(&c, 3)->value->ty.rank, 1);
  done(&c);
  check(&c, K("  reg a: f16[16, 32] = 0;\n  reg b: f16[64, 32] = 0;\n  let d = dot(a, trans(b));\n"
              "  Z[0 : +1, 0 : +64] = sum(d, 0, keep);\n"));
  cr_assert(c.ok, "%s", c.out);
  AstExpr *d = stmt_n(&c, 2)->value;
  cr_assert_eq(d->ty.elem, TY_F32);
  cr_assert_eq(d->ty.dims[0], 16);
  cr_assert_eq(d->ty.dims[1], 64);
  cr_assert_eq(d->args[1]->ty.dims[0], 32);
  done(&c);
  expect_error(K("  reg a: f16[16, 32] = 0;\n  let d = dot(a, a);\n"), "inner dimensions of 'dot' differ");
  expect_error(K("  reg a: f16[16] = 0;\n  let d = dot(a, a);\n"), "'dot' needs 2-D tiles");
  expect_error(K("  reg a: f16[16, 16] = 0;\n  reg b: f32[16, 16] = 0;\n  let d = dot(a, b);\n"),
               "different element types");
  expect_error(K("  reg a: f16[16] = 0;\n  let d = trans(a);\n"), "'trans' needs a 2-D tile");
}

Test(sema, slices) {
  Checked c;
  Define def = {"N", "128", {0}};
  check_defs(&c, K("  let a = H[n, :];\n  let b = H[1, 0 : +B];\n  Y[:] = to_f32(a + b);\n"), &def, 1, ARCH_SM90A);
  cr_assert(c.ok, "%s", c.out);
  AstExpr *a = stmt_n(&c, 0)->value;
  cr_assert_eq(a->ty.rank, 1);
  cr_assert_eq(a->ty.dims[0], 128);
  cr_assert_eq(a->ty.elem, TY_F16);
  cr_assert_eq(a->items[0].kind, SLICE_INDEX);
  cr_assert_eq(a->items[1].kind, SLICE_FULL);
  cr_assert_eq(a->items[1].size, 128);
  cr_assert(c.prog->kernels->dims[0].pinned); /* N, first seen on X */
  done(&c);
  expect_error(K("  let a = H[0 : +B];\n"), "has rank 2 but the slice has 1 index");
  expect_error(K("  let a = X[0 : +N];\n"), "a slice size must be a compile-time constant");
  expect_error(K("  let a = X[:];\n"), "':' takes the whole dimension 'N'");
  expect_error(K("  let a = X[0 : +0];\n"), "a slice size must be between 1");
  expect_error(K("  let a = s[0];\n"), "only tensor arguments and tiles ('reg', 'let', 'shared')");
  expect_error(K("  let a = X;\n"), "must be sliced to be read");
}

Test(sema, fill) {
  Checked c;
  check(&c, K("  Y[0 : +B] = fill(X[0 : +B], -inf);\n"));
  cr_assert(c.ok, "%s", c.out);
  AstExpr *f = stmt_n(&c, 0)->value;
  cr_assert_eq(f->builtin, BI_FILL);
  cr_assert(isinf(f->args[1]->cval) && f->args[1]->cval < 0);
  cr_assert_eq(f->args[1]->ty.elem, TY_F32);
  done(&c);
  expect_error(K("  Y[0 : +B] = fill(X[0 : +B], s);\n"), "fill value must be a compile-time");
  expect_error(K("  Y[0 : +1] = fill(s, 0.0);\n"), "must be a tensor slice");
}

Test(sema, reductions) {
  Checked c;
  check(&c, K("  let a = to_f32(H[0 : +4, 0 : +B]);\n  let m = max(a, 0, keep);\n  Z[0 : +1, 0 : +B] = m;\n"));
  cr_assert(c.ok, "%s", c.out);
  AstExpr *m = stmt_n(&c, 1)->value;
  cr_assert_eq(m->axis, 0);
  cr_assert_eq(m->ty.dims[0], 1);
  cr_assert_eq(m->ty.dims[1], 128);
  done(&c);
  expect_error(K("  let a = X[0 : +B];\n  let m = sum(a, 1);\n"), "reduction axis 1 is out of range");
  /* A reduction drops its axis; along axis 0 the rest lines up as numpy has it, along another it
   * would not, so that broadcast is refused (also through lets, element-wise ops, assignments). */
  expect_ok(K("  let a = to_f32(H[0 : +4, 0 : +B]);\n  Z[0 : +4, 0 : +B] = a - sum(a, 0);\n"));
  expect_ok(K("  let a = to_f32(H[0 : +4, 0 : +B]);\n  Z[0 : +4, 0 : +B] = a - sum(a, 1, keep);\n"));
  expect_ok(K("  let a = to_f32(H[0 : +4, 0 : +B]);\n  Y[0 : +4] = exp(sum(a, 1)) * 2;\n"));
  expect_error(K("  let a = to_f32(H[0 : +4, 0 : +B]);\n  let m = exp(max(a, 1)) + 1;\n"
                 "  Z[0 : +4, 0 : +B] = a - m;\n"), "which drops that axis");
  expect_error(K("  let a = to_f32(H[0 : +4, 0 : +B]);\n  reg m: f32[4] = 0;\n  m = max(a, 1);\n"
                 "  Z[0 : +4, 0 : +B] = where(a > m, a, 0.0);\n"), "which drops that axis");
  expect_error(K("  let a = to_f32(H[0 : +4, 0 : +B]);\n  Z[0 : +4, 0 : +B] = sum(a, 1);\n"),
               "which drops that axis");
  expect_error(K("  let a = to_f32(H[0 : +4, 0 : +B]);\n  let m = sum(a, 1, kep);\n"),
               "can only be 'keep'");
  expect_error(K("  let a = X[0 : +B];\n  let m = max(a, a);\n"), "use maximum(a, b)");
  expect_error(K("  let m = sum(s, 0);\n"), "its operand is a scalar");
}

Test(sema, index_tiles) {
  Checked c;
  check(&c, K("  let r = row_index(n, 8);\n  let q = col_index(0, B);\n  let z = r < q;\n"
              "  Z[0 : +1, 0 : +B] = sum(where(z, 1.0, 0.0), 0, keep);\n"));
  cr_assert(c.ok, "%s", c.out);
  cr_assert_eq(stmt_n(&c, 0)->value->ty.dims[0], 8);
  cr_assert_eq(stmt_n(&c, 0)->value->ty.dims[1], 1);
  cr_assert_eq(stmt_n(&c, 1)->value->ty.dims[0], 1);
  cr_assert_eq(stmt_n(&c, 2)->value->ty.dims[0], 8);
  cr_assert_eq(stmt_n(&c, 2)->value->ty.dims[1], 128);
  done(&c);
  expect_error(K("  let r = row_index(0, N);\n"), "size of an index tile must be a compile-time");
}

Test(sema, placement_rules) {
  expect_error(K("  let a = 1.0;\n  a = 2.0;\n"), "it is a 'let' value");
  expect_error(K("  B = 2;\n"), "cannot assign to parameter 'B'");
  expect_error(K("  X[0 : +B] = X[0 : +B];\n"), "cannot store to 'X': it is not declared 'out'");
  expect_ok(K("  reg a = X[0 : +B];\n  a = a * 2.0;\n  shared b = a;\n  b += 1.0;\n  Y[0 : +B] = b;\n"));
  expect_error(K("  reg a: f16[B] = X[0 : +B];\n"), "variable 'a' holds f16");
  expect_error(K("  Y[0 : +B] = to_f16(X[0 : +B]);\n"), "tensor 'Y' holds f32");
  expect_error(K("  reg a: f32[2, B] = 0;\n  Y[0 : +B] = a;\n"), "cannot broadcast f32[2, 128] to f32[128]");
}

Test(sema, names) {
  expect_error(K("  let a = bb;\n"), "undeclared name 'bb'");
  expect_error(K("  let a = 1;\n  let a = 2;\n"), "redeclaration of 'a'");
  expect_error(K("  let a = 1;\n  let a = 2;\n"), "note: previous declaration of 'a'");
  expect_error(K("  let s = 1;\n"), "redeclaration of 's'");
  expect_error(K("  let q = expp(1.0);\n"), "did you mean 'exp'?");
  expect_error(K("  let a = block.w;\n"), "unknown block index");
  expect_ok(K("  for i in 0 .. n { let t = i; Y[t : +1] = 1.0; }\n  for i in 0 .. n { Y[i : +1] = 2.0; }\n"));
}

Test(sema, control_flow) {
  Checked c;
  check(&c, K("  for i in 0 .. N step B pipeline 3 { Y[i : +B] = X[i : +B]; }\n"
              "  if ON { Y[0 : +1] = 1.0; }\n  if n > 0 && ON == 1 {} else {}\n"));
  cr_assert(c.ok, "%s", c.out);
  cr_assert_eq(stmt_n(&c, 0)->step_value, 128);
  cr_assert_eq(stmt_n(&c, 0)->pipeline_value, 3);
  cr_assert_eq(stmt_n(&c, 1)->value->ty.elem, TY_BOOL); /* int parameter as condition */
  done(&c);
  expect_error(K("  for i in 0 .. N step 0 {}\n"), "the loop step must be positive");
  expect_error(K("  for i in 0 .. N step n {}\n"), "the loop step must be a compile-time constant");
  expect_error(K("  for i in 0 .. s {}\n"), "the loop end must be a scalar i32");
  expect_error(K("  for i in 0 .. N pipeline 9 {}\n"), "the pipeline depth must be between 1 and 8");
  expect_error(K("  if s {}\n"), "an 'if' condition must be a scalar bool");
  expect_error(K("  if X[0 : +B] > 0.0 {}\n"), "an 'if' condition must be a scalar bool, found bool[128]");
  expect_error(K("  let a = s ? 1 : 2;\n"), "the condition of '?:' must be a scalar bool");
}

Test(sema, require) {
  Checked c;
  check(&c, K("  require N <= B * 4 && M > 0;\n"));
  cr_assert(c.ok, "%s", c.out);
  cr_assert_eq(c.prog->kernels->nrequires, 1);
  done(&c);
  expect_error(K("  let a = 1;\n  require a > 0;\n"), "require expressions may only use dimensions and parameters");
  expect_error(K("  for i in 0 .. N { require N > 0; }\n"), "only allowed at the top level");
  expect_error(K("  require B < 0;\n"), "always false");
  expect_error(K("  require N;\n"), "a requirement must be a scalar bool");
}

Test(sema, launch) {
  expect_error("kernel k(X: f32[N]) grid (N) threads (100) {}", "multiple of 32");
  expect_error("kernel k(X: f32[N]) grid (N) threads (2048) {}", "at most 1024");
  expect_error("kernel k(X: f32[N]) grid (N) threads (N) {}", "the thread count must be a compile-time constant");
  expect_error("kernel k(X: f32[N], n: i32) grid (n) threads (32) {}", "grid expressions may only use dimensions and parameters");
  expect_error("kernel k(X: f32[N]) grid (block.x) threads (32) {}", "not block.x");
  expect_error("kernel k(X: f32[N]) grid (exp(N)) threads (32) {}", "not allowed in grid expressions");
  expect_ok("kernel k<W = 8>(X: f32[N, M]) grid (cdiv(N, 4), maximum(M, 1), 2) threads (W * 32) {}");
}

Test(sema, parameters_and_defines) {
  Define defs[] = {{"B", "64", {0}}, {"F", "2.5", {0}}, {"M", "7", {0}}};
  Checked c;
  check_defs(&c, K("  let a = B;\n  Y[a : +1] = 1.0;\n"), defs, 3, ARCH_SM90A);
  cr_assert(c.ok, "%s", c.out);
  AstKernel *k = c.prog->kernels;
  cr_assert_eq(k->params[0].value, 64);
  cr_assert(k->params[0].overridden);
  cr_assert_eq(k->params[1].value, 2.5);
  cr_assert(k->params[1].is_float);
  cr_assert(!k->params[2].is_float);
  cr_assert_eq(k->ndims, 2);
  cr_assert_str_eq(k->dims[1].name, "M");
  cr_assert(k->dims[1].pinned);
  cr_assert_eq(k->dims[1].value, 7);
  cr_assert(!k->dims[0].pinned);
  cr_assert_eq(stmt_n(&c, 0)->decl->cval, 64);
  done(&c);

  Define bad[] = {{"NOPE", "1", {0}}};
  check_defs(&c, K(""), bad, 1, ARCH_SM90A);
  cr_assert(!c.ok);
  cr_assert(strstr(c.out, "no kernel has a parameter or dimension named 'NOPE' (kernel 'k' has parameters B, F, ON and dims N, M)"), "%s", c.out);
  done(&c);
  Define badv[] = {{"B", "x1", {0}}};
  check_defs(&c, K(""), badv, 1, ARCH_SM90A);
  cr_assert(strstr(c.out, "invalid value 'x1' for -D B"), "%s", c.out);
  done(&c);
  Define badf[] = {{"B", "1.5", {0}}};
  check_defs(&c, K(""), badf, 1, ARCH_SM90A);
  cr_assert(strstr(c.out, "is an integer"), "%s", c.out);
  done(&c);
}

Test(sema, param_defaults_use_earlier_params) {
  Define d = {"A", "10", {0}};
  Checked c;
  check_defs(&c, "kernel k<A = 4, C = (A * 2)>(Y: out f32[N]) grid (1) threads (32) { Y[0 : +C] = 1.0; }",
             &d, 1, ARCH_SM90A);
  cr_assert(c.ok, "%s", c.out);
  cr_assert_eq(c.prog->kernels->params[1].value, 20);
  done(&c);
}

Test(sema, param_pins_dimension) {
  Checked c;
  check(&c, "kernel k<D = 64>(Q: f16[N, D], O: out f16[N, D]) grid (N) threads (32) { O[block.x, :] = Q[block.x, :]; }");
  cr_assert(c.ok, "%s", c.out);
  cr_assert(c.prog->kernels->dims[1].pinned);
  cr_assert_eq(c.prog->kernels->dims[1].value, 64);
  done(&c);
}

Test(sema, shared_memory_budget) {
  const char *prog = "kernel k<BM = 128>(A: f16[M, K], C: out f32[M, K]) grid (1) threads (128) {\n"
                     "  shared a = A[0 : +BM, 0 : +256];\n  shared b = A[0 : +BM, 0 : +256];\n"
                     "  C[0 : +BM, 0 : +256] = to_f32(a) + to_f32(b);\n}\n";
  Checked c;
  check_defs(&c, prog, NULL, 0, ARCH_SM90A); /* 128 KB fits in 227 KB */
  cr_assert(c.ok, "%s", c.out);
  cr_assert_eq(c.prog->kernels->smem_bytes, 131072);
  done(&c);
  check_defs(&c, prog, NULL, 0, ARCH_SM86); /* not in 99 KB */
  cr_assert(!c.ok);
  cr_assert(strstr(c.out, "needs 131072 bytes of shared memory per block, more than the 101376 available on sm_86"), "%s", c.out);
  cr_assert(strstr(c.out, "note: shared tile 'a' is f16[128, 256] = 65536 bytes"), "%s", c.out);
  cr_assert(strstr(c.out, "note: shared tile 'b' is f16[128, 256] = 65536 bytes"), "%s", c.out);
  done(&c);
}

Test(sema, online_softmax) {
  Checked c;
  check(&c, K("  reg acc: f32[4, 8] = 0;\n  online_softmax st(rows = 4, rescale = acc);\n"
              "  let p = st.update(to_f32(H[0 : +4, 0 : +B]));\n  acc += sum(p, 1, keep);\n"
              "  Z[0 : +1, 0 : +8] = sum(st.finish(acc), 0, keep) + sum(st.max + st.sum, 0, keep);\n"));
  cr_assert(c.ok, "%s", c.out);
  AstStmt *sm = stmt_n(&c, 1);
  cr_assert_eq(sm->rows_value, 4);
  cr_assert_eq(sm->nrescale, 1);
  cr_assert_eq(sm->rescale[0], stmt_n(&c, 0)->decl);
  cr_assert_eq(stmt_n(&c, 2)->value->ty.dims[1], 128);
  done(&c);
  expect_error(K("  let acc = X[0 : +B];\n  online_softmax st(rows = 1, rescale = acc);\n"),
               "can only rescale 'reg' f32 tiles");
  expect_error(K("  reg acc: f32[2, 8] = 0;\n  online_softmax st(rows = 4, rescale = acc);\n"),
               "first dimension is rows = 4");
  expect_error(K("  online_softmax st(rows = 2);\n  st.update(X[0 : +B]);\n"), "needs an f32[2, K] tile");
  expect_error(K("  online_softmax st(rows = N);\n"), "'rows' must be a compile-time constant");
  expect_error(K("  online_softmax st(rows = 1);\n  let a = st.mean;\n"), "has no member 'mean'");
  expect_error(K("  online_softmax st(rows = 1);\n  let a = st;\n"), "not a value");
}

Test(sema, warnings) {
  Checked c;
  check(&c, K("  let a = 1;\n  exp(s);\n"));
  cr_assert(c.ok); /* warnings only */
  cr_assert(strstr(c.out, "warning: unused variable 'a'"), "%s", c.out);
  cr_assert(strstr(c.out, "warning: expression result unused"), "%s", c.out);
  cr_assert_eq(c.d.nwarnings, 2);
  done(&c);
}

Test(sema, element_types) {
  expect_error("kernel k(X: f64[N]) grid (1) threads (32) {}", "unknown element type 'f64'");
  expect_error("kernel k(X: f8e4m3[N]) grid (1) threads (32) {}", "reserved for fp8");
  expect_error("kernel k(x: out f32) grid (1) threads (32) {}", "only tensor arguments can be 'out'");
  expect_ok("kernel k(A: bf16[N], B: i32[N], C: bool[N], D: out bf16[N]) grid (1) threads (32) {\n"
            "  D[0 : +4] = where(C[0 : +4], A[0 : +4], to_bf16(B[0 : +4]));\n}\n");
}

Test(sema, casts_fold_and_round) {
  Checked c;
  check(&c, K("  let a = to_f16(0.1);\n  let b = to_i32(2.9);\n  Y[b : +1] = to_f32(a);\n"));
  cr_assert(c.ok, "%s", c.out);
  cr_assert_eq(stmt_n(&c, 0)->decl->ty.elem, TY_F16);
  cr_assert_eq(stmt_n(&c, 0)->decl->cval, round_to_elem(TY_F16, 0.1));
  cr_assert_eq(stmt_n(&c, 1)->decl->cval, 2);
  done(&c);
}

Test(sema, constant_errors) {
  expect_error(K("  let a = B / 0;\n"), "division by zero");
  expect_error(K("  let a = 2147483647 + B;\n"), "integer overflow");
}

Test(sema, error_limit) {
  char text[8192] = "kernel k() grid (1) threads (32) {\n";
  for (int i = 0; i < 30; i++)
    snprintf(text + strlen(text), sizeof text - strlen(text), "  let a%d = zz;\n", i);
  strcat(text, "}\n");
  Checked c;
  check(&c, text);
  cr_assert(!c.ok);
  cr_assert(strstr(c.out, "tilec: error: too many errors, stopping"));
  int n = 0;
  for (const char *p = c.out; (p = strstr(p, ": error: undeclared")); p++)
    n++;
  cr_assert_eq(n, DIAG_MAX_ERRORS);
  done(&c);
}

/* ---- review fixes: tile-size limit, register warning, redeclaration, -D range, scopes ---- */

Test(sema, tile_size_limit_matches_the_backend) {
  /* exactly TILE_MAX_ELEMS passes the per-tile limit (only the per-thread one refuses it);
   * one more row pads to twice as many */
  Checked c;
  check(&c, K("  reg a: f32[2048, 2048] = 0;\n  Z[0 : +1, 0 : +1] = sum(sum(a, 1, keep), 0, keep);\n"));
  cr_assert(!strstr(c.out, "is too large"), "%s", c.out);
  cr_assert(strstr(c.out, "t.tile:4:10: error: tile f32[2048, 2048] puts 32768 elements on each of "
                          "the 128 threads, and at most 512 per thread are supported"), "%s", c.out);
  cr_assert_eq(c.d.nerrors, 1, "%s", c.out);
  done(&c);
  check(&c, K("  reg a: f32[2049, 2048] = 0;\n  Z[0 : +1, 0 : +1] = sum(sum(a, 1, keep), 0, keep);\n"));
  cr_assert(!c.ok);
  cr_assert(strstr(c.out, "t.tile:4:10: error: tile f32[2049, 2048] is too large: 4196352 elements "
                          "(8388608 with each dimension rounded up to a power of two), and a tile "
                          "may have at most 4194304"), "%s", c.out);
  cr_assert_eq(c.d.nerrors, 1, "%s", c.out); /* the uses of 'a' stay silent */
  done(&c);
  /* at the slice that makes the tile, not at the kernel */
  check(&c, K("  let t = H[0 : +4096, 0 : +2048];\n  Z[0 : +1, 0 : +1] = to_f32(sum(sum(t, 1, keep), 0, keep));\n"));
  cr_assert(!c.ok);
  cr_assert(strstr(c.out, "t.tile:4:11: error: tile f16[4096, 2048] is too large"), "%s", c.out);
  cr_assert_eq(c.d.nerrors, 1, "%s", c.out);
  done(&c);
  expect_error(K("  let r = to_f32(row_index(0, 4096)) + to_f32(col_index(0, 2048));\n"),
               "tile f32[4096, 2048] is too large");
  expect_error(K("  online_softmax st(rows = 4194305);\n"), "tile f32[4194305, 1] is too large");
}

Test(sema, register_estimate_warns_once_at_the_largest_tile) {
  /* 128 threads: 255 f32 registers per thread is 32640 elements; f32[128, 256] is 256 each */
  Checked c;
  check(&c, K("  reg a: f32[128, 128] = 0;\n  reg b: f32[128, 256] = 0;\n"
              "  Z[0 : +128, 0 : +128] = a + sum(b, 1, keep);\n"));
  cr_assert(c.ok, "%s", c.out);
  cr_assert_eq(c.d.nwarnings, 1, "%s", c.out);
  cr_assert(strstr(c.out, "t.tile:5:7: warning: 'reg' tile 'b' (f32[128, 256]) alone needs about "
                          "256 registers per thread (32768 elements over 128 threads)"), "%s", c.out);
  cr_assert(strstr(c.out, "use more threads per block (e.g. a larger WARPS) or smaller tiles"));
  done(&c);
  /* f16 packs two per register: the same shape in f16 is 128 registers, no warning */
  check(&c, K("  reg b: f16[128, 256] = 0;\n  Z[0 : +128, 0 : +1] = to_f32(sum(b, 1, keep));\n"));
  cr_assert(c.ok, "%s", c.out);
  cr_assert_eq(c.d.nwarnings, 0, "%s", c.out);
  done(&c);
  /* shared tiles do not count */
  check(&c, K("  shared b: f32[128, 256] = 0;\n  Z[0 : +128, 0 : +1] = sum(b, 1, keep);\n"));
  cr_assert_eq(c.d.nwarnings, 0, "%s", c.out);
  done(&c);
  /* the examples with their defaults are warning-free (the -D variants: tests/diag, bench) */
  static const char *examples[] = {"vadd", "softmax", "softmax_online", "rmsnorm", "add_rmsnorm",
                                   "layernorm", "gemm", "attention", "cross_entropy"};
  for (size_t i = 0; i < sizeof examples / sizeof *examples; i++) {
    char path[128];
    snprintf(path, sizeof path, "dsl/examples/%s.tile", examples[i]);
    FILE *f = fopen(path, "rb");
    cr_assert_not_null(f, "%s", path);
    static char text[1 << 16];
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = 0;
    check(&c, text);
    cr_assert(c.ok && c.d.nwarnings == 0, "%s:\n%s", path, c.out);
    done(&c);
  }
}

Test(sema, redeclaration_gives_no_unused_warning) {
  Checked c;
  check(&c, K("  let a = 1;\n  let a = 2;\n  Y[a : +1] = 1.0;\n"));
  cr_assert(!c.ok);
  cr_assert(strstr(c.out, "redeclaration of 'a'"), "%s", c.out);
  cr_assert(!strstr(c.out, "unused variable"), "%s", c.out);
  cr_assert_eq(c.d.nwarnings, 0);
  /* later uses resolve to the latest declaration */
  cr_assert_eq(stmt_n(&c, 2)->target->items[0].start->decl, stmt_n(&c, 1)->decl);
  done(&c);
}

Test(sema, define_values_out_of_range) {
  Checked c;
  Define big[] = {{"B", "99999999999999999999", {0}}};
  check_defs(&c, K(""), big, 1, ARCH_SM90A);
  cr_assert(!c.ok);
  cr_assert(strstr(c.out, "tilec: error: -D B=99999999999999999999: the value is too large (integers are i32"), "%s", c.out);
  cr_assert(!strstr(c.out, "is an integer"), "%s", c.out);
  done(&c);
  Define big32[] = {{"B", "2147483648", {0}}};
  check_defs(&c, K(""), big32, 1, ARCH_SM90A);
  cr_assert(strstr(c.out, "the value is too large"), "%s", c.out);
  done(&c);
  Define bigf[] = {{"F", "1e999", {0}}};
  check_defs(&c, K(""), bigf, 1, ARCH_SM90A);
  cr_assert(strstr(c.out, "-D F=1e999: the value is too large\n"), "%s", c.out);
  done(&c);
  Define bigdim[] = {{"M", "3000000000", {0}}};
  check_defs(&c, K(""), bigdim, 1, ARCH_SM90A);
  cr_assert(strstr(c.out, "-D M=3000000000: the value is too large (a dimension is at most 2147483647)"), "%s", c.out);
  done(&c);
  Define edge[] = {{"B", "2147483647", {0}}, {"M", "2147483647", {0}}};
  check_defs(&c, K("  let a = B;\n  Y[a : +1] = 1.0;\n"), edge, 2, ARCH_SM90A);
  cr_assert(c.ok, "%s", c.out);
  done(&c);
}

/* Scopes are hashed: names leave with their block, siblings reuse names, and a kernel of many
 * thousands of declarations checks in linear time. */
Test(sema, scopes_at_scale) {
  expect_error(K("  if ON { let t = 1; }\n  let u = t;\n"), "undeclared name 't'");
  expect_ok(K("  if ON { let t = 1; Y[t : +1] = 1.0; }\n  let t = 2.0;\n  Y[0 : +1] = t;\n"));
  expect_error(K("  for i in 0 .. n { let t = i; Y[t : +1] = 1.0; for j in 0 .. n { let t = j; } }\n"),
               "redeclaration of 't'");
  enum { NLETS = 60000 };
  size_t cap = (size_t)NLETS * 32 + 512;
  char *text = malloc(cap);
  size_t len = (size_t)snprintf(text, cap, "kernel k(Y: out f32[N]) grid (1) threads (32) {\n  let v0 = 1;\n");
  for (int i = 1; i < NLETS; i++)
    len += (size_t)snprintf(text + len, cap - len, "  let v%d = v%d + 1;\n", i, i - 1);
  len += (size_t)snprintf(text + len, cap - len, "  Y[v%d : +1] = 1.0;\n}\n", NLETS - 1);
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  Checked c;
  check(&c, text);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  cr_assert(c.ok, "%.300s", c.out);
  cr_assert_eq(stmt_n(&c, NLETS - 1)->decl->cval, NLETS); /* v0 = 1 */
  double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
  cr_assert_lt(secs, 3.0, "%d lets took %.2f s (quadratic name lookup?)", NLETS, secs); /* was ~9 s */
  done(&c);
  free(text);
}

/* ------------------------------------------------------------------ type parameters */

#define TK(params, body) "kernel k<" params ">(X: T[M, N], W: T[N], Y: out T[M, N], eps: f32)\n" \
                         "  grid (M) threads (32)\n{\n" body "}\n"
#define TBODY "  reg x = to_f32(X[block.x, 0 : +16]) * to_f32(W[0 : +16]) + eps;\n" \
              "  Y[block.x, 0 : +16] = to(T, x);\n"

/* The element type of every argument, variable and expression is concrete after sema, and the
 * generic cast has become the concrete one. */
static void expect_elem(const char *params, const Define *defs, int ndefs, ElemType want) {
  char text[1024];
  snprintf(text, sizeof text, TK("%s", TBODY "  reg acc: T[16] = 0;\n  acc += X[block.x, 0 : +16];\n"),
           params);
  Checked c;
  check_defs(&c, text, defs, ndefs, ARCH_SM90A);
  cr_assert(c.ok, "%s", c.out);
  AstKernel *k = c.prog->kernels;
  cr_assert(k->params[0].is_type);
  cr_assert_eq(k->params[0].elem, want);
  cr_assert_eq(k->params[0].overridden, ndefs > 0);
  cr_assert_eq(k->args[0].elem, want);
  cr_assert_eq(k->args[1].elem, want);
  cr_assert_eq(k->args[2].elem, want);
  cr_assert_eq(k->args[3].elem, TY_F32);
  AstStmt *store = stmt_n(&c, 1);
  cr_assert_eq(store->value->kind, AST_CALL);
  cr_assert_eq(store->value->builtin, want == TY_F16 ? BI_TO_F16 : want == TY_BF16 ? BI_TO_BF16 : BI_TO_F32);
  cr_assert_eq(store->value->nargs, 1);
  cr_assert_str_eq(store->value->name, ast_builtin_name(store->value->builtin));
  cr_assert_eq(store->value->ty.elem, want);
  cr_assert_eq(stmt_n(&c, 2)->decl->ty.elem, want);
  done(&c);
}

Test(sema, type_parameter_default_and_define) {
  expect_elem("T: type = f16", NULL, 0, TY_F16);
  Define bf = {"T", "bf16", {0}};
  expect_elem("T: type = f16", &bf, 1, TY_BF16);
  Define f32 = {"T", "f32", {0}};
  expect_elem("T: type = bf16, B = 4", &f32, 1, TY_F32);
  /* a type parameter's default may name an earlier one */
  Checked c;
  check(&c, "kernel k<T: type = bf16, U: type = T>(X: U[N], Y: out f32[N]) grid (1) threads (32)\n"
            "{ Y[0 : +4] = to(f32, X[0 : +4]); }");
  cr_assert(c.ok, "%s", c.out);
  cr_assert_eq(c.prog->kernels->args[0].elem, TY_BF16);
  cr_assert_eq(c.prog->kernels->params[1].elem, TY_BF16);
  done(&c);
}

Test(sema, generic_cast_takes_element_type_names) {
  expect_ok(K("  let a = to(f16, X[0 : +B]);\n  Y[0 : +B] = to(f32, a) + to(f32, to(i32, s));\n"));
  expect_error(K("  let a = to(bool, X[0 : +B]);\n  Y[0 : +B] = to_f32(a);\n"), "'to' cannot convert to bool");
  expect_error(K("  Y[0 : +B] = to(f64, X[0 : +B]);\n"), "unknown element type 'f64'");
  expect_error(K("  Y[0 : +B] = to(B, X[0 : +B]);\n"), "'B' is a parameter, not an element type");
  expect_error(K("  Y[0 : +B] = to(1, X[0 : +B]);\n"), "the first argument of 'to' must be an element type");
  expect_error(K("  Y[0 : +B] = to(X[0 : +B]);\n"), "'to' takes 2 arguments, found 1");
}

Test(sema, type_parameter_errors) {
  expect_error(TK("T: type = f16", "  let v = T;\n  Y[0, 0 : +1] = to(T, 1.0);\n"),
               "'T' is a type parameter: it names an element type, not a value");
  expect_error(TK("T: type = f16", "  T = 3;\n"), "cannot assign to type parameter 'T'");
  expect_error(TK("T: typ = f16", ""), "unknown parameter kind 'typ'");
  expect_error(TK("T: type = 3", ""), "the default of type parameter 'T' must be an element type");
  expect_error(TK("T: type = f64", ""), "unknown element type 'f64'");
  expect_error(TK("T: type = f8e4m3", ""), "reserved for fp8");
  expect_error("kernel k<f16: type = bf16>(X: f16[N]) grid (1) threads (32) {}",
               "a type parameter cannot be named like the element type 'f16'");
  expect_error(TK("T: type = f16, B = 4", "  Y[0, 0 : +B] = to(T, to_f32(X[0, 0 : +B]) + to_f32(T));\n"),
               "is a type parameter");
  expect_error("kernel k<T: type = f16>(X: f32[T]) grid (1) threads (32) {}",
               "dimension 'T' has the same name as a type parameter");
  expect_error("kernel k<T: type = f16>(X: f32[N]) grid (T) threads (32) {}", "is a type parameter");
  /* the body is checked with the specialized type: bf16 tiles do not mix with f16 ones */
  Define bf = {"T", "bf16", {0}};
  Checked c;
  check_defs(&c, TK("T: type = f16", "  let h: f16[16] = 0;\n  Y[0, 0 : +16] = X[0, 0 : +16] + h;\n"),
             &bf, 1, ARCH_SM90A);
  cr_assert(!c.ok);
  cr_assert(strstr(c.out, "operands of '+' have different element types: bf16[16] and f16[16]"), "%s", c.out);
  done(&c);
}

Test(sema, type_parameter_bad_define) {
  Define bad = {"T", "f64", {0}};
  Checked c;
  check_defs(&c, TK("T: type = f16", TBODY), &bad, 1, ARCH_SM90A);
  cr_assert(!c.ok);
  cr_assert(strstr(c.out, "tilec: error: -D T=f64: 'f64' is not an element type (type parameter 'T' "
                          "of kernel 'k' takes f32, f16, bf16, i32 or bool)"), "%s", c.out);
  done(&c);
  Define num = {"T", "16", {0}};
  check_defs(&c, TK("T: type = f16", TBODY), &num, 1, ARCH_SM90A);
  cr_assert(!c.ok);
  cr_assert(strstr(c.out, "-D T=16: '16' is not an element type"), "%s", c.out);
  done(&c);
  /* a type name for a value parameter is a bad number */
  Define val = {"B", "bf16", {0}};
  check_defs(&c, TK("T: type = f16, B = 4", TBODY), &val, 1, ARCH_SM90A);
  cr_assert(!c.ok);
  cr_assert(strstr(c.out, "invalid value 'bf16' for -D B (expected a number)"), "%s", c.out);
  done(&c);
}
