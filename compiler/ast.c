/* ast.c — AST constructors, names, and the --emit=ast printer. */
#include "ast.h"

#include <math.h>
#include <string.h>

static const char *const builtin_names[BI_COUNT] = {
#define X(e, name, lo, hi) [e] = name,
    AST_BUILTINS(X)
#undef X
};

const char *ast_builtin_name(AstBuiltin b) {
  return (unsigned)b < BI_COUNT ? builtin_names[b] : "?";
}

bool ast_builtin_from_name(const char *s, AstBuiltin *out) {
  for (int i = 0; i < BI_COUNT; i++)
    if (!strcmp(s, builtin_names[i])) {
      *out = (AstBuiltin)i;
      return true;
    }
  return false;
}

AstExpr *ast_expr(Arena *a, AstExprKind kind, SrcLoc loc) {
  AstExpr *e = arena_alloc(a, sizeof *e);
  e->kind = kind;
  e->loc = loc;
  return e;
}

AstStmt *ast_stmt(Arena *a, AstStmtKind kind, SrcLoc loc) {
  AstStmt *s = arena_alloc(a, sizeof *s);
  s->kind = kind;
  s->loc = loc;
  return s;
}

const char *ast_op_name(AstOp op) {
  static const char *const names[] = {
      [OP_ADD] = "+", [OP_SUB] = "-", [OP_MUL] = "*",  [OP_DIV] = "/",  [OP_REM] = "%",
      [OP_LT] = "<",  [OP_LE] = "<=", [OP_GT] = ">",   [OP_GE] = ">=",  [OP_EQ] = "==",
      [OP_NE] = "!=", [OP_AND] = "&&", [OP_OR] = "||", [OP_NEG] = "-", [OP_NOT] = "!",
  };
  return (unsigned)op < sizeof names / sizeof *names ? names[op] : "?";
}

/* Writes "f32[64, 128]" (or "i32" for a scalar) into buf. */
static const char *type_str(char *buf, size_t n, const TileType *t) {
  size_t len = (size_t)snprintf(buf, n, "%s", elem_name(t->elem));
  if (t->rank > 0 && len < n) {
    len += (size_t)snprintf(buf + len, n - len, "[");
    for (int i = 0; i < t->rank && len < n; i++)
      len += (size_t)snprintf(buf + len, n - len, "%s%d", i ? ", " : "", (int)t->dims[i]);
    if (len < n)
      snprintf(buf + len, n - len, "]");
  }
  return buf;
}

const char *ast_type_str(Arena *a, const TileType *t) {
  char buf[128];
  return arena_strdup(a, type_str(buf, sizeof buf, t));
}

SrcLoc ast_loc_join(SrcLoc a, SrcLoc b) {
  return (SrcLoc){a.line, a.col, b.end_line, b.end_col};
}

/* ------------------------------------------------------------------ printer */

static void indent(FILE *o, int depth) {
  for (int i = 0; i < depth; i++)
    fputs("  ", o);
}

static void print_num(FILE *o, double v) {
  if (isinf(v))
    fputs(v < 0 ? "-inf" : "inf", o);
  else if (v == floor(v) && fabs(v) < 1e15)
    fprintf(o, "%lld", (long long)v);
  else
    fprintf(o, "%.9g", v);
}

static const char *decl_kind_name(const AstDecl *d) {
  switch (d->kind) {
  case DECL_PARAM: return "param";
  case DECL_TYPE_PARAM: return "type param";
  case DECL_DIM: return "dim";
  case DECL_SCALAR_ARG: return "arg";
  case DECL_TENSOR_ARG: return "tensor";
  case DECL_VAR: return d->place == VAR_LET ? "let" : d->place == VAR_REG ? "reg" : "shared";
  case DECL_LOOP: return "loop";
  case DECL_SOFTMAX: return "online_softmax";
  }
  return "?";
}

/* One line per node: what it is, then ": type" and "= value" when constant. */
/* Calls whose second argument is a folded axis (printed as axis=N, not as an operand). */
static bool has_axis(const AstExpr *e) {
  AstBuiltin b = e->builtin;
  return (b >= BI_SUM && b <= BI_MIN) || b == BI_SQUEEZE || b == BI_EXPAND_DIMS;
}

static void print_expr(FILE *o, const AstExpr *e, int depth);

static void print_type_suffix(FILE *o, const AstExpr *e) {
  char buf[128];
  fprintf(o, " : %s", type_str(buf, sizeof buf, &e->ty));
  if (e->is_const) {
    fputs(" = ", o);
    print_num(o, e->cval);
  }
  if (e->kind == AST_BINARY || e->kind == AST_TERNARY ||
      (e->kind == AST_CALL && (e->builtin == BI_MAXIMUM || e->builtin == BI_MINIMUM ||
                               e->builtin == BI_WHERE))) {
    if (!e->is_const && e->opnd_ty.rank + (int)e->opnd_ty.elem > 0)
      fprintf(o, "  (operands %s)", type_str(buf, sizeof buf, &e->opnd_ty));
  }
  fputc('\n', o);
}

static void print_slice_items(FILE *o, const AstExpr *e, int depth) {
  for (int i = 0; i < e->nitems; i++) {
    const AstSliceItem *it = &e->items[i];
    indent(o, depth);
    if (it->kind == SLICE_INDEX) {
      fputs("index\n", o);
      print_expr(o, it->start, depth + 1);
    } else if (it->kind == SLICE_RANGE) {
      fprintf(o, "range +%d\n", (int)it->size);
      print_expr(o, it->start, depth + 1);
    } else {
      fprintf(o, "full %d\n", (int)it->size);
    }
  }
}

static void print_expr(FILE *o, const AstExpr *e, int depth) {
  if (!e)
    return;
  indent(o, depth);
  switch (e->kind) {
  case AST_INT:
  case AST_FLOAT:
  case AST_BOOL:
    fputs("literal", o);
    break;
  case AST_NAME:
    fprintf(o, "name %s", e->name);
    if (e->decl)
      fprintf(o, " (%s)", decl_kind_name(e->decl));
    break;
  case AST_BLOCK_ID:
    fprintf(o, "block.%s", e->field ? e->field : "?");
    break;
  case AST_UNARY:
  case AST_BINARY:
    fprintf(o, "%s %s", e->kind == AST_UNARY ? "unary" : "binary", ast_op_name(e->op));
    break;
  case AST_TERNARY:
    fputs("select ?:", o);
    break;
  case AST_CALL:
    fprintf(o, "call %s", e->name);
    if (has_axis(e))
      fprintf(o, " axis=%d%s", e->axis, e->keep ? " keep" : "");
    break;
  case AST_SLICE:
    fprintf(o, "slice %s", e->name);
    break;
  case AST_MEMBER:
    fprintf(o, "member %s.%s", e->name, e->field);
    break;
  case AST_METHOD:
    fprintf(o, "method %s.%s", e->name, e->field);
    break;
  }
  print_type_suffix(o, e);
  if (e->is_const && e->kind != AST_CALL && e->kind != AST_SLICE)
    return; /* folded: the children add nothing */
  if (e->kind == AST_SLICE)
    print_slice_items(o, e, depth + 1);
  if (e->kind == AST_CALL && has_axis(e)) {
    print_expr(o, e->args[0], depth + 1);
    return;
  }
  for (int i = 0; i < e->nargs; i++)
    print_expr(o, e->args[i], depth + 1);
}

static void print_stmts(FILE *o, const AstStmt *s, int depth);

static void print_stmt(FILE *o, const AstStmt *s, int depth) {
  char buf[128];
  indent(o, depth);
  switch (s->kind) {
  case ST_BLOCK:
    fputs("block\n", o);
    print_stmts(o, s->body, depth + 1);
    return;
  case ST_VAR:
    fprintf(o, "%s %s", s->place == VAR_LET ? "let" : s->place == VAR_REG ? "reg" : "shared",
            s->name);
    if (s->decl)
      fprintf(o, " : %s", type_str(buf, sizeof buf, &s->decl->ty));
    if (s->decl && s->decl->is_const) {
      fputs(" = ", o);
      print_num(o, s->decl->cval);
    }
    fputc('\n', o);
    print_expr(o, s->value, depth + 1);
    return;
  case ST_ASSIGN:
    fprintf(o, "assign %s %s=\n", s->name, s->assign_op ? ast_op_name(s->assign_op) : "");
    print_expr(o, s->value, depth + 1);
    return;
  case ST_STORE:
    fputs("store\n", o);
    print_expr(o, s->target, depth + 1);
    print_expr(o, s->value, depth + 1);
    return;
  case ST_FOR:
    fprintf(o, "for %s step %d pipeline %d\n", s->name, s->step_value, s->pipeline_value);
    print_expr(o, s->lo, depth + 1);
    print_expr(o, s->hi, depth + 1);
    print_stmt(o, s->body, depth + 1);
    return;
  case ST_IF:
    fputs("if\n", o);
    print_expr(o, s->value, depth + 1);
    print_stmt(o, s->body, depth + 1);
    if (s->els) {
      indent(o, depth);
      fputs("else\n", o);
      print_stmt(o, s->els, depth + 1);
    }
    return;
  case ST_REQUIRE:
    fputs("require\n", o);
    print_expr(o, s->value, depth + 1);
    return;
  case ST_SOFTMAX:
    fprintf(o, "online_softmax %s rows=%d", s->name, s->rows_value);
    for (int i = 0; i < s->nrescale; i++)
      fprintf(o, "%s%s", i ? ", " : " rescale=", s->rescale_names[i]);
    fputs(s->softmax_scale ? " scale\n" : "\n", o);
    if (s->softmax_scale)
      print_expr(o, s->softmax_scale, depth + 1);
    return;
  case ST_EXPR:
    fputs("expr\n", o);
    print_expr(o, s->value, depth + 1);
    return;
  }
}

static void print_stmts(FILE *o, const AstStmt *s, int depth) {
  for (; s; s = s->next)
    print_stmt(o, s, depth);
}

static void print_kernel(FILE *o, const AstKernel *k) {
  char buf[128];
  fprintf(o, "kernel %s\n", k->name);
  for (int i = 0; i < k->nparams; i++) {
    if (k->params[i].is_type) {
      fprintf(o, "  param %s: type = %s%s\n", k->params[i].name, elem_name(k->params[i].elem),
              k->params[i].overridden ? " (-D)" : "");
      continue;
    }
    fprintf(o, "  param %s = ", k->params[i].name);
    print_num(o, k->params[i].value);
    fprintf(o, "%s%s\n", k->params[i].is_float ? " (float)" : "",
            k->params[i].overridden ? " (-D)" : "");
  }
  for (int i = 0; i < k->ndims; i++) {
    fprintf(o, "  dim %s", k->dims[i].name);
    if (k->dims[i].pinned)
      fprintf(o, " = %lld (pinned)", (long long)k->dims[i].value);
    if (k->dims[i].derive)
      fprintf(o, " = %s (RPN, checked at launch)", k->dims[i].derive);
    fputc('\n', o);
  }
  for (int i = 0; i < k->nargs; i++) {
    const AstArg *a = &k->args[i];
    fprintf(o, "  arg %s: %s%s", a->name, a->is_out ? "out " : "", elem_name(a->elem));
    if (a->is_tensor) {
      fputc('[', o);
      for (int j = 0; j < a->rank; j++)
        fprintf(o, "%s%s", j ? ", " : "", k->dims[a->dims[j]].name);
      fputc(']', o);
    }
    fputs(a->init ? " = 0\n" : "\n", o);
  }
  for (int i = 0; i < k->ngrid; i++) {
    fprintf(o, "  grid.%c\n", "xyz"[i]);
    print_expr(o, k->grid[i], 2);
  }
  fprintf(o, "  threads %d\n", k->threads_value);
  fprintf(o, "  shared bytes %lld\n", (long long)k->smem_bytes);
  (void)buf;
  fputs("  body\n", o);
  if (k->body)
    print_stmts(o, k->body->body, 2);
}

void ast_print(FILE *out, const AstProgram *prog) {
  for (const AstKernel *k = prog->kernels; k; k = k->next)
    print_kernel(out, k);
}
