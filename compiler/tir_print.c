/* tir_print.c — the --emit=tir text format (spec: docs/tir.md).
 *
 * One instruction per line, indented by control-flow depth, with its source position as a
 * trailing comment. Registers print as %N, or %name.N when they carry a user variable name
 * (names alone are ambiguous: loops and shadowing reuse them). */
#include "tilec.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char *axis_name(int axis) {
  static const char *names[] = {"x", "y", "z"};
  return axis >= 0 && axis < 3 ? names[axis] : "?";
}

static void print_reg(FILE *out, const TirFunc *f, int r) {
  if (r < 0 || r >= f->nregs) {
    fprintf(out, "%%<bad %d>", r);
    return;
  }
  if (f->regs[r].name)
    fprintf(out, "%%%s.%d", f->regs[r].name, r);
  else
    fprintf(out, "%%%d", r);
}

static void print_type(FILE *out, const TileType *t) {
  if (t->place == PLACE_SHARED)
    fputs("shared ", out);
  fputs(elem_name(t->elem), out);
  if (t->rank == 0)
    return;
  fputc('[', out);
  for (int i = 0; i < t->rank; i++)
    fprintf(out, "%s%d", i ? ", " : "", (int)t->dims[i]);
  fputc(']', out);
}

/* Shortest decimal that reads back as the same value of type t (a float constant prints as
 * 0.7978846, not as the 17 digits of its double); inf/nan spelled as in the language. */
static void print_number(FILE *out, double v, ElemType t) {
  if (isnan(v)) {
    fputs("nan", out);
    return;
  }
  if (isinf(v)) {
    fputs(v < 0 ? "-inf" : "inf", out);
    return;
  }
  if (v == floor(v) && fabs(v) < 1e15) { /* integers as integers: 10, not 1e+01 */
    fprintf(out, "%.0f", v);
    return;
  }
  char buf[64];
  for (int prec = 1; prec <= 17; prec++) {
    snprintf(buf, sizeof buf, "%.*g", prec, v);
    double back = strtod(buf, NULL);
    if (t < TY_COUNT && elem_is_float(t) ? round_to_elem(t, back) == round_to_elem(t, v) : back == v)
      break;
  }
  fputs(buf, out);
}

static void print_address(FILE *out, const TirFunc *f, const TirInst *in) {
  const TirArg *a = in->arg_index >= 0 && in->arg_index < f->nargs ? &f->args[in->arg_index] : NULL;
  int rank = a ? a->rank : 0;
  fprintf(out, "%s[", a ? a->name : "<bad arg>");
  for (int d = 0; d < rank; d++) {
    if (d)
      fputs(", ", out);
    print_reg(out, f, in->index[d].start);
    if (in->index[d].is_range)
      fprintf(out, " : +%d", (int)in->index[d].size);
  }
  fputc(']', out);
}

static void print_args(FILE *out, const TirFunc *f, const TirInst *in, int n) {
  for (int i = 0; i < n; i++) {
    fputs(i ? ", " : " ", out);
    print_reg(out, f, in->args[i]);
  }
}

/* The operands and attributes after the op name. */
static void print_operands(FILE *out, const TirFunc *f, const TirInst *in) {
  switch (in->op) {
  case TIR_CONST:
    fputc(' ', out);
    print_number(out, in->imm, in->dst >= 0 && in->dst < f->nregs ? f->regs[in->dst].type.elem : TY_F32);
    break;
  case TIR_PARAM:
    if (in->arg_index >= 0 && in->arg_index < f->nargs)
      fprintf(out, " %s", f->args[in->arg_index].name);
    else
      fprintf(out, " #%d", in->arg_index);
    break;
  case TIR_DIM:
    if (in->arg_index >= 0 && in->arg_index < f->ndims)
      fprintf(out, " %s", f->dims[in->arg_index].name);
    else
      fprintf(out, " #%d", in->arg_index);
    break;
  case TIR_BLOCK_ID:
    fprintf(out, " %s", axis_name(in->axis));
    break;
  case TIR_IOTA:
    fprintf(out, " axis %d", in->axis);
    break;
  case TIR_ROW_SHIFT:
    fprintf(out, " %s[", in->arg_index >= 0 && in->arg_index < f->nargs ? f->args[in->arg_index].name : "?");
    for (int i = 0; i < 3 && in->args[i] >= 0; i++) {
      fputs(i ? ", " : "", out);
      print_reg(out, f, in->args[i]);
    }
    fputc(']', out);
    break;
  case TIR_EXTRACT:
    print_args(out, f, in, 1);
    for (int d = 0; d < f->regs[in->dst].type.rank; d++)
      fprintf(out, "%s%d : +%d", d ? ", " : " [", in->offs[d], f->regs[in->dst].type.dims[d]);
    fputs(f->regs[in->dst].type.rank ? "]" : "", out);
    break;
  case TIR_REDUCE_SUM:
  case TIR_REDUCE_MAX:
  case TIR_REDUCE_MIN:
    print_args(out, f, in, 1);
    fprintf(out, ", axis %d", in->axis);
    break;
  case TIR_LOAD:
    fputc(' ', out);
    print_address(out, f, in);
    fputs(" fill ", out);
    print_number(out, in->imm, in->dst >= 0 && in->dst < f->nregs ? f->regs[in->dst].type.elem : TY_F32);
    break;
  case TIR_WINDOW:
    print_args(out, f, in, 3);
    fputs(" fill ", out);
    print_number(out, in->imm, in->dst >= 0 && in->dst < f->nregs ? f->regs[in->dst].type.elem : TY_F32);
    break;
  case TIR_STORE:
  case TIR_ATOMIC_ADD:
  case TIR_ATOMIC_MAX:
    fputc(' ', out);
    print_address(out, f, in);
    fputs(", ", out);
    print_reg(out, f, in->args[0]);
    break;
  case TIR_FOR:
    fputc(' ', out);
    print_reg(out, f, in->dst);
    fputs(" =", out);
    print_args(out, f, in, 3);
    if (in->pipeline > 1)
      fprintf(out, " pipeline %d", in->pipeline);
    break;
  case TIR_PIPE_WAIT:
    fprintf(out, " pipe %d%s%s", in->axis, in->early_set ? ", early set" : "", in->stage == 1 ? ", next stage" : "");
    break;
  case TIR_DOT_WAIT:
    fprintf(out, " %d in flight, ", (int)in->imm);
    print_reg(out, f, in->args[0]);
    break;
  case TIR_PIPE_RELEASE:
    fprintf(out, " pipe %d%s%s", in->axis, in->early_set ? ", early set" : "", in->imm == 1 ? ", previous stage" : "");
    break;
  default: {
    int n = tir_op_info[in->op].nargs;
    print_args(out, f, in, n < 0 ? 0 : n);
    if (in->op == TIR_DOT && (in->imm == 1 || in->stage))
      fprintf(out, "%s%s", in->imm == 1 ? " async" : "", in->stage == 1 ? " next stage" : "");
    if (in->op == TIR_DOT && in->k_steps)
      fprintf(out, ", %d k step%s", in->k_steps, in->k_steps == 1 ? "" : "s");
    break;
  }
  }
}

static void print_inst(FILE *out, const TirFunc *f, const TirInst *in, int depth) {
  for (int i = 0; i < depth; i++)
    fputs("  ", out);
  if (in->dst >= 0 && in->op != TIR_FOR) {
    print_reg(out, f, in->dst);
    fputs(": ", out);
    if (in->dst < f->nregs)
      print_type(out, &f->regs[in->dst].type);
    fputs(" = ", out);
  }
  fputs((unsigned)in->op < TIR_OP_COUNT ? tir_op_info[in->op].name : "<bad op>", out);
  print_operands(out, f, in);
  fprintf(out, "    ; %d:%d\n", in->loc.line, in->loc.col);
}

static void print_expr(FILE *out, const char *what, const TirExpr *e) {
  fprintf(out, "  %s \"%s\"", what, e->rpn ? e->rpn : "");
  if (e->text)
    fprintf(out, "    ; %s", e->text);
  fputc('\n', out);
}

static void print_header(FILE *out, const TirFunc *f) {
  fprintf(out, "kernel %s threads %d", f->name, f->threads);
  if (f->cluster > 1)
    fprintf(out, " cluster %d", f->cluster);
  fputc('\n', out);
  for (int i = 0; i < f->nparams; i++) {
    fprintf(out, "  param %s = ", f->params[i].name);
    print_number(out, f->params[i].value, TY_COUNT); /* exact double */
    fputc('\n', out);
  }
  for (int i = 0; i < f->ndims; i++) {
    if (f->dims[i].pinned)
      fprintf(out, "  dim %s = %lld\n", f->dims[i].name, (long long)f->dims[i].value);
    else
      fprintf(out, "  dim %s\n", f->dims[i].name);
  }
  for (int i = 0; i < f->nargs; i++) {
    const TirArg *a = &f->args[i];
    fprintf(out, "  arg %s: %s%s", a->name, a->is_out ? "out " : "", elem_name(a->elem));
    if (a->kind == ARG_TENSOR) {
      fputc('[', out);
      for (int d = 0; d < a->rank; d++) {
        int di = a->dims[d];
        fprintf(out, "%s%s", d ? ", " : "", di >= 0 && di < f->ndims ? f->dims[di].name : "?");
      }
      fputc(']', out);
    }
    fputs(a->zero_init ? " = 0\n" : "\n", out);
  }
  static const char *gnames[3] = {"grid.x", "grid.y", "grid.z"};
  for (int i = 0; i < 3; i++)
    print_expr(out, gnames[i], &f->grid[i]);
  for (int i = 0; i < f->nrequires; i++)
    print_expr(out, "require", &f->requires[i]);
}

void tir_print(FILE *out, const TirFunc *f) {
  print_header(out, f);
  fputs("{\n", out);
  int depth = 1;
  for (int i = 0; i < f->ninsts; i++) {
    const TirInst *in = &f->insts[i];
    bool closes = in->op == TIR_ENDFOR || in->op == TIR_ENDIF || in->op == TIR_ELSE;
    if (closes && depth > 1)
      depth--;
    print_inst(out, f, in, depth);
    if (in->op == TIR_FOR || in->op == TIR_IF || in->op == TIR_ELSE)
      depth++;
  }
  fputs("}\n", out);
}
