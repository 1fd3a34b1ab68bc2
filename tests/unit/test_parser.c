/* test_parser.c — the grammar: every construct builds the expected AST; syntax errors are
 * reported in file:line:col form; recovery reports several errors in one run. */
#include <criterion/criterion.h>
#include <string.h>

#include "ast.h"

typedef struct Parsed {
  Arena *a;
  AstProgram *prog;
  Diag d;
  SourceFile src;
  char *out;
  size_t outlen;
  FILE *mem;
} Parsed;

static void parse_str(Parsed *p, const char *text) {
  memset(p, 0, sizeof *p);
  p->a = arena_new();
  p->src = (SourceFile){"t.tile", text, strlen(text)};
  p->mem = open_memstream(&p->out, &p->outlen);
  diag_init(&p->d, &p->src, p->mem);
  p->prog = parse_program(p->a, &p->src, &p->d);
  fflush(p->mem);
}

static void done(Parsed *p) {
  fclose(p->mem);
  free(p->out);
  arena_free(p->a);
}

#define HEAD "kernel k<BM = 64, EPS = 1e-6, NEG = -2>(X: f16[M, N], Y: out f32[M, N], eps: f32)\n" \
             "  grid (cdiv(M, BM), 1) threads (128)\n{\n"

static AstStmt *body_of(Parsed *p) { return p->prog->kernels->body->body; }

Test(parser, kernel_header) {
  Parsed p;
  parse_str(&p, HEAD "}\n");
  cr_assert_not_null(p.prog, "%s", p.out);
  AstKernel *k = p.prog->kernels;
  cr_assert_str_eq(k->name, "k");
  cr_assert_eq(k->nparams, 3);
  cr_assert_str_eq(k->params[1].name, "EPS");
  cr_assert_eq(k->params[1].init->kind, AST_FLOAT);
  cr_assert_eq(k->params[2].init->kind, AST_UNARY);
  cr_assert_eq(k->nargs, 3);
  cr_assert(k->args[1].is_out);
  cr_assert_eq(k->args[0].type->ndims, 2);
  cr_assert_null(k->args[2].type->dims);
  cr_assert_eq(k->ngrid, 2);
  cr_assert_eq(k->grid[0]->kind, AST_CALL);
  cr_assert_eq(k->threads->kind, AST_INT);
  cr_assert_eq(k->loc.line, 1);
  cr_assert_eq(k->loc.col, 8);
  done(&p);
}

Test(parser, kernel_without_params_and_several_kernels) {
  Parsed p;
  parse_str(&p, "kernel a(X: f32[N]) grid (N) threads (32) {}\nkernel b() grid (1) threads (32) {}\n");
  cr_assert_not_null(p.prog);
  cr_assert_eq(p.prog->nkernels, 2);
  cr_assert_str_eq(p.prog->kernels->next->name, "b");
  done(&p);
}

Test(parser, variable_statements) {
  Parsed p;
  parse_str(&p, HEAD "  let a = 1;\n  reg b: f32[BM, 4] = 0;\n  shared c = X[0 : +BM, :];\n"
                     "  reg d = a;\n}\n");
  cr_assert_not_null(p.prog, "%s", p.out);
  AstStmt *s = body_of(&p);
  cr_assert_eq(s->kind, ST_VAR);
  cr_assert_eq(s->place, VAR_LET);
  s = s->next;
  cr_assert_eq(s->place, VAR_REG);
  cr_assert_not_null(s->type);
  cr_assert_eq(s->type->ndims, 2);
  s = s->next;
  cr_assert_eq(s->place, VAR_SHARED);
  cr_assert_eq(s->value->kind, AST_SLICE);
  cr_assert_eq(s->value->nitems, 2);
  cr_assert_eq(s->value->items[0].kind, SLICE_RANGE);
  cr_assert_eq(s->value->items[1].kind, SLICE_FULL);
  done(&p);
}

Test(parser, assignments_and_store) {
  Parsed p;
  parse_str(&p, HEAD "  reg a = 0.0;\n  a = 1.0;\n  a += 1.0;\n  a -= 1.0;\n  a *= 2.0;\n  a /= 2.0;\n"
                     "  Y[block.x, 0 : +4] = a;\n}\n");
  cr_assert_not_null(p.prog, "%s", p.out);
  AstStmt *s = body_of(&p)->next;
  int ops[] = {OP_NONE, OP_ADD, OP_SUB, OP_MUL, OP_DIV};
  for (int i = 0; i < 5; i++, s = s->next) {
    cr_assert_eq(s->kind, ST_ASSIGN);
    cr_assert_eq(s->assign_op, ops[i]);
  }
  cr_assert_eq(s->kind, ST_STORE);
  cr_assert_eq(s->target->items[0].kind, SLICE_INDEX);
  cr_assert_eq(s->target->items[0].start->kind, AST_BLOCK_ID);
  done(&p);
}

Test(parser, for_if_require_softmax) {
  Parsed p;
  parse_str(&p, HEAD "  require M > 0;\n  reg acc: f32[BM, 4] = 0;\n"
                     "  online_softmax st(rows = BM, rescale = acc, acc);\n"
                     "  for i in 0 .. N step 4 pipeline 2 { if i > 0 { acc += 1.0; } else if i < 0 {} else {} }\n"
                     "  for j in 0 .. N {}\n  st.update(acc);\n}\n");
  cr_assert_not_null(p.prog, "%s", p.out);
  AstStmt *s = body_of(&p);
  cr_assert_eq(s->kind, ST_REQUIRE);
  s = s->next->next;
  cr_assert_eq(s->kind, ST_SOFTMAX);
  cr_assert_not_null(s->rows);
  cr_assert_eq(s->nrescale, 2);
  s = s->next;
  cr_assert_eq(s->kind, ST_FOR);
  cr_assert_not_null(s->step);
  cr_assert_not_null(s->pipeline);
  AstStmt *iff = s->body->body;
  cr_assert_eq(iff->kind, ST_IF);
  cr_assert_not_null(iff->els);
  cr_assert_eq(iff->els->kind, ST_IF);
  cr_assert_eq(iff->els->els->kind, ST_BLOCK);
  s = s->next;
  cr_assert_null(s->step);
  cr_assert_null(s->pipeline);
  s = s->next;
  cr_assert_eq(s->kind, ST_EXPR);
  cr_assert_eq(s->value->kind, AST_METHOD);
  cr_assert_str_eq(s->value->field, "update");
  done(&p);
}

Test(parser, precedence) {
  Parsed p;
  parse_str(&p, HEAD "  let a = 1 + 2 * 3 < 4 && !true || false ? -1 : 2 % 3;\n}\n");
  cr_assert_not_null(p.prog, "%s", p.out);
  AstExpr *e = body_of(&p)->value;
  cr_assert_eq(e->kind, AST_TERNARY);
  AstExpr *c = e->args[0];
  cr_assert_eq(c->op, OP_OR);
  cr_assert_eq(c->args[0]->op, OP_AND);
  AstExpr *lt = c->args[0]->args[0];
  cr_assert_eq(lt->op, OP_LT);
  cr_assert_eq(lt->args[0]->op, OP_ADD);
  cr_assert_eq(lt->args[0]->args[1]->op, OP_MUL);
  cr_assert_eq(c->args[0]->args[1]->kind, AST_UNARY);
  cr_assert_eq(e->args[1]->kind, AST_UNARY);
  cr_assert_eq(e->args[2]->op, OP_REM);
  done(&p);
}

Test(parser, left_associative_and_parens) {
  Parsed p;
  parse_str(&p, HEAD "  let a = 8 - 4 - 2;\n  let b = 8 - (4 - 2);\n}\n");
  cr_assert_not_null(p.prog);
  AstExpr *a = body_of(&p)->value, *b = body_of(&p)->next->value;
  cr_assert_eq(a->args[0]->kind, AST_BINARY);
  cr_assert_eq(b->args[1]->kind, AST_BINARY);
  cr_assert_eq(b->args[1]->loc.col, 15); /* parens are part of the range */
  done(&p);
}

Test(parser, calls_members_block) {
  Parsed p;
  parse_str(&p, HEAD "  let a = maximum(exp(1.0), st.max);\n  let b = block.y;\n  let c = f();\n}\n");
  cr_assert_not_null(p.prog);
  AstExpr *a = body_of(&p)->value;
  cr_assert_eq(a->kind, AST_CALL);
  cr_assert_str_eq(a->name, "maximum");
  cr_assert_eq(a->nargs, 2);
  cr_assert_eq(a->args[1]->kind, AST_MEMBER);
  cr_assert_str_eq(a->args[1]->field, "max");
  cr_assert_eq(body_of(&p)->next->value->kind, AST_BLOCK_ID);
  cr_assert_eq(body_of(&p)->next->next->value->nargs, 0);
  done(&p);
}

Test(parser, expression_locations) {
  Parsed p;
  parse_str(&p, HEAD "  let a = x + yy;\n}\n");
  AstExpr *e = body_of(&p)->value;
  cr_assert_eq(e->loc.line, 4);
  cr_assert_eq(e->loc.col, 11);
  cr_assert_eq(e->loc.end_col, 17);
  done(&p);
}

Test(parser, missing_semicolon_message) {
  Parsed p;
  parse_str(&p, HEAD "  let a = 1\n  let b = 2;\n}\n");
  cr_assert_null(p.prog);
  cr_assert_str_eq(p.out, "t.tile:4:12: error: expected ';' before 'let'\n  let a = 1\n           ^\n");
  done(&p);
}

Test(parser, recovery_reports_several_errors) {
  Parsed p;
  parse_str(&p, HEAD "  let a = ;\n  let b = 1 +;\n  let c = 2;\n  reg = 3;\n}\n"
                     "kernel (X) {}\n"
                     "kernel ok() grid (1) threads (32) { let z = ; }\n");
  cr_assert_null(p.prog);
  cr_assert_geq(p.d.nerrors, 5, "%s", p.out);
  cr_assert(strstr(p.out, "t.tile:4:11: error: expected expression before ';'"), "%s", p.out);
  cr_assert(strstr(p.out, "t.tile:5:14: error: expected expression before ';'"), "%s", p.out);
  cr_assert(strstr(p.out, "t.tile:7:7: error:"), "%s", p.out);
  cr_assert(strstr(p.out, "t.tile:9:8: error:"), "%s", p.out);
  cr_assert(strstr(p.out, "t.tile:10:"), "%s", p.out);
  done(&p);
}

Test(parser, deep_nesting_is_an_error_not_a_crash) {
  enum { N = 10000 };
  char *text = malloc(3 * N + 200);
  strcpy(text, HEAD "  let a = ");
  size_t n = strlen(text);
  memset(text + n, '(', N);
  text[n + N] = '1';
  memset(text + n + N + 1, ')', N);
  strcpy(text + n + 2 * N + 1, ";\n}\n");
  Parsed p;
  parse_str(&p, text);
  cr_assert_null(p.prog);
  cr_assert(strstr(p.out, "nesting too deep"), "%.200s", p.out);
  done(&p);
  free(text);
}

/* 256 levels of brackets (MAX_NESTING in parser.y) of every construct parse; one more is the
 * located error that names the limit, whatever the construct: the parser's stack never runs
 * out first. */
enum { MAX_BRACKETS = 256 };

/* HEAD, then `prefix` + open^n + mid + close^n + `suffix`, then the closing brace. */
static char *nested(const char *prefix, const char *open, const char *mid, const char *close,
                    const char *suffix, int n) {
  char *text = malloc(strlen(HEAD) + (strlen(open) + strlen(close)) * (size_t)n + 256);
  char *p = text + sprintf(text, "%s%s", HEAD, prefix);
  for (int i = 0; i < n; i++)
    p += sprintf(p, "%s", open);
  p += sprintf(p, "%s", mid);
  for (int i = 0; i < n; i++)
    p += sprintf(p, "%s", close);
  sprintf(p, "%s\n}\n", suffix);
  return text;
}

static void expect_nesting(const char *text, bool too_deep, const char *what) {
  Parsed p;
  parse_str(&p, text);
  if (too_deep) {
    cr_assert_null(p.prog, "%s", what);
    cr_assert(strstr(p.out, "error: nesting too deep (more than 256 levels of brackets)"), "%s: %.300s",
              what, p.out);
    cr_assert_eq(p.d.nerrors, 1, "%s: %.300s", what, p.out);
  } else {
    cr_assert(!strstr(p.out, "nesting"), "%s: %.300s", what, p.out);
  }
  done(&p);
}

Test(parser, bracket_nesting_limit_is_exact) {
  static const char *const exprs[][3] = {
      {"(", "1", ")"},          {"exp(", "1.0", ")"},          {"-(", "1", ")"},
      {"1 > 0 ? 2 : (", "3", ")"}, {"where(true, 1.0, ", "1.0", ")"}, {"X[", "0", ", 0]"},
  };
  for (size_t f = 0; f < sizeof exprs / sizeof exprs[0]; f++)
    for (int extra = 0; extra <= 1; extra++) {
      char *text = nested("  let a = ", exprs[f][0], exprs[f][1], exprs[f][2], ";",
                          MAX_BRACKETS - 1 + extra); /* + the kernel body's brace */
      expect_nesting(text, extra, exprs[f][0]);
      free(text);
    }
  /* statements, likewise inside the kernel body's brace */
  static const char *const stmts[][2] = {{"{ ", "} "}, {"if 1 > 0 { ", "} "},
                                         {"for i in 0 .. 1 { ", "} "}};
  for (size_t f = 0; f < sizeof stmts / sizeof stmts[0]; f++)
    for (int extra = 0; extra <= 1; extra++) {
      char *text = nested("", stmts[f][0], "", stmts[f][1], "", MAX_BRACKETS - 1 + extra);
      expect_nesting(text, extra, stmts[f][0]);
      free(text);
    }
}

Test(parser, empty_file_parses) {
  Parsed p;
  parse_str(&p, "// only a comment\n");
  cr_assert_not_null(p.prog);
  cr_assert_eq(p.prog->nkernels, 0);
  done(&p);
}

Test(parser, softmax_options_are_checked) {
  Parsed p;
  parse_str(&p, HEAD "  online_softmax st(rows = 1, what = 2);\n}\n");
  cr_assert_null(p.prog);
  cr_assert(strstr(p.out, "unknown online_softmax option 'what'"), "%s", p.out);
  done(&p);
}

/* `T: type = f16`: a parameter with a kind; the kind word and the default are kept as written
 * (sema checks them). to(T, x) is an ordinary two-argument call to the parser. */
Test(parser, type_parameters) {
  Parsed p;
  parse_str(&p, "kernel k<T: type = bf16, B = 4, U: kind = x>(X: T[N], Y: out T[N])\n"
                "  grid (1) threads (32)\n{\n  Y[0 : +B] = to(T, to_f32(X[0 : +B]) * 2.0);\n}\n");
  cr_assert_not_null(p.prog, "%s", p.out);
  AstKernel *k = p.prog->kernels;
  cr_assert_eq(k->nparams, 3);
  cr_assert_str_eq(k->params[0].name, "T");
  cr_assert_str_eq(k->params[0].kind_name, "type");
  cr_assert_eq(k->params[0].kind_loc.col, 13);
  cr_assert_eq(k->params[0].init->kind, AST_NAME);
  cr_assert_str_eq(k->params[0].init->name, "bf16");
  cr_assert_null(k->params[1].kind_name);
  cr_assert_str_eq(k->params[2].kind_name, "kind");
  cr_assert_str_eq(k->args[0].type->elem_name, "T");
  AstExpr *v = body_of(&p)->value;
  cr_assert_eq(v->kind, AST_CALL);
  cr_assert_str_eq(v->name, "to");
  cr_assert_eq(v->nargs, 2);
  cr_assert_eq(v->args[0]->kind, AST_NAME);
  done(&p);
}

Test(parser, type_parameter_needs_a_default) {
  Parsed p;
  parse_str(&p, "kernel k<T: type>(X: T[N]) grid (1) threads (32) {}\n");
  cr_assert_null(p.prog);
  cr_assert(strstr(p.out, "t.tile:1:17: error: expected '=' before '>'"), "%s", p.out);
  done(&p);
}
