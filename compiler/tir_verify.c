/* tir_verify.c — every structural and typing rule of the tile IR (docs/tir.md, "Rules").
 *
 * Run after lowering and after every pass. The first broken rule is reported at the offending
 * instruction's source position with the stage that produced the IR; later passes and backends
 * may then assume all of these rules without checking them again. */
#include "tilec.h"
#include "tilert.h"

#include <math.h>
#include <string.h>

typedef struct Verifier {
  const TirFunc *f;
  Diag *d;
  const char *stage;
  const TirInst *in;   /* the instruction being checked */
  bool *written;       /* per register: written by an earlier instruction (linear order) */
} Verifier;

__attribute__((format(printf, 2, 3))) static bool fail(Verifier *v, const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  SrcLoc loc = v->in ? v->in->loc : v->f->loc;
  const char *op = v->in && (unsigned)v->in->op < TIR_OP_COUNT ? tir_op_info[v->in->op].name : "";
  if (v->in)
    diag_report(v->d, DIAG_ERROR, loc, "internal error: invalid tile IR after %s: instruction %d (%s): %s",
                v->stage, (int)(v->in - v->f->insts), op, msg);
  else
    diag_report(v->d, DIAG_ERROR, loc, "internal error: invalid tile IR after %s: %s", v->stage, msg);
  return false;
}

static const TileType *rt(Verifier *v, int r) { return &v->f->regs[r].type; }

static void type_str(const TileType *t, char *buf, size_t n) {
  int k = snprintf(buf, n, "%s", elem_name(t->elem));
  if (t->rank == 0)
    return;
  k += snprintf(buf + k, n - (size_t)k, "[");
  for (int i = 0; i < t->rank && (size_t)k < n; i++)
    k += snprintf(buf + k, n - (size_t)k, "%s%d", i ? ", " : "", (int)t->dims[i]);
  if ((size_t)k < n)
    snprintf(buf + k, n - (size_t)k, "]");
}

static bool same_type(const TileType *a, const TileType *b) {
  return a->elem == b->elem && tile_same_shape(a, b);
}

static bool check_regs(Verifier *v) {
  for (int r = 0; r < v->f->nregs; r++) {
    const TileType *t = rt(v, r);
    if ((unsigned)t->elem >= TY_COUNT)
      return fail(v, "register %d has an invalid element type", r);
    if (t->rank < 0 || t->rank > TILE_MAX_RANK)
      return fail(v, "register %d has rank %d", r, t->rank);
    for (int i = 0; i < t->rank; i++)
      if (t->dims[i] < 1)
        return fail(v, "register %d has dimension %d of size %d", r, i, (int)t->dims[i]);
  }
  return true;
}

/* Register numbers in range, arity, unused slots -1, operands written before (linear order). */
static bool check_operands(Verifier *v) {
  const TirInst *in = v->in;
  const TirOpInfo *info = &tir_op_info[in->op];
  int n = tir_op_writes_tensor(in->op) ? 1 : info->nargs < 0 ? 0 : info->nargs;
  if (in->op == TIR_ROW_SHIFT) { /* one index per dim of its tensor */
    if (in->arg_index < 0 || in->arg_index >= v->f->nargs || v->f->args[in->arg_index].kind != ARG_TENSOR ||
        v->f->args[in->arg_index].rank > 3)
      return fail(v, "row_shift of argument %d: not a tensor of rank 3 or less", in->arg_index);
    n = v->f->args[in->arg_index].rank;
  }
  for (int i = 0; i < 3; i++) {
    int r = in->args[i];
    if (i >= n) {
      if (r != -1)
        return fail(v, "operand %d set but the op takes %d", i, n);
      continue;
    }
    if (r < 0 || r >= v->f->nregs)
      return fail(v, "operand %d is register %d, out of range (%d registers)", i, r, v->f->nregs);
    if (!v->written[r])
      return fail(v, "operand %d (register %d) is read before any write", i, r);
  }
  bool sync = in->op == TIR_PIPE_WAIT || in->op == TIR_PIPE_RELEASE || in->op == TIR_DOT_WAIT ||
              in->op == TIR_WG_TURN || in->op == TIR_WG_PASS || in->op == TIR_HEAD_WAIT || in->op == TIR_HEAD_RELEASE;
  bool wants_dst = !tir_op_writes_tensor(in->op) && !sync && (!(info->flags & OPF_MARKER) || in->op == TIR_FOR);
  if (wants_dst && (in->dst < 0 || in->dst >= v->f->nregs))
    return fail(v, "result register %d out of range (%d registers)", in->dst, v->f->nregs);
  if (!wants_dst && in->dst != -1)
    return fail(v, "has a result register but the op writes none");
  return true;
}

static bool elem_allowed(unsigned flags, ElemType e) {
  if (e == TY_BOOL)
    return flags & OPF_BOOL_OK;
  if (e == TY_I32)
    return flags & OPF_INT_OK;
  return flags & OPF_FLOAT_OK;
}

static bool check_allowed(Verifier *v, int r) {
  const TileType *t = rt(v, r);
  if (!elem_allowed(tir_op_info[v->in->op].flags, t->elem))
    return fail(v, "operand type %s not allowed", elem_name(t->elem));
  return true;
}

static bool is_i32_scalar(const TileType *t) { return t->elem == TY_I32 && t->rank == 0; }

static bool check_elemwise(Verifier *v) {
  const TirInst *in = v->in;
  const TileType *d = rt(v, in->dst);
  int n = tir_op_info[in->op].nargs;
  int first = in->op == TIR_SELECT ? 1 : 0;
  if (in->op == TIR_SELECT) {
    const TileType *c = rt(v, in->args[0]);
    if (c->elem != TY_BOOL || !tile_same_shape(c, d))
      return fail(v, "select condition must be bool of the result's shape");
  }
  const TileType *a = rt(v, in->args[first]);
  for (int i = first; i < n; i++) {
    if (!check_allowed(v, in->args[i]))
      return false;
    if (!same_type(a, rt(v, in->args[i]))) {
      char s0[96], s1[96];
      type_str(a, s0, sizeof s0), type_str(rt(v, in->args[i]), s1, sizeof s1);
      return fail(v, "operands differ: %s vs %s (lowering must insert bcast/cvt)", s0, s1);
    }
  }
  if (tir_op_info[in->op].flags & OPF_CMP) {
    if (d->elem != TY_BOOL || !tile_same_shape(a, d))
      return fail(v, "comparison result must be bool of the operands' shape");
  } else if (!same_type(a, d)) {
    char s0[96], s1[96];
    type_str(a, s0, sizeof s0), type_str(d, s1, sizeof s1);
    return fail(v, "result type %s differs from operand type %s", s1, s0);
  }
  return true;
}

/* numpy: align trailing dims; every source dim equals the result's or is 1. */
static bool check_bcast(Verifier *v) {
  const TileType *s = rt(v, v->in->args[0]), *d = rt(v, v->in->dst);
  if (s->elem != d->elem)
    return fail(v, "bcast changes the element type (%s -> %s)", elem_name(s->elem), elem_name(d->elem));
  if (s->rank > d->rank)
    return fail(v, "bcast to a lower rank (%d -> %d)", s->rank, d->rank);
  for (int i = 0; i < s->rank; i++) {
    int sd = s->dims[s->rank - 1 - i], dd = d->dims[d->rank - 1 - i];
    if (sd != dd && sd != 1) {
      char s0[96], s1[96];
      type_str(s, s0, sizeof s0), type_str(d, s1, sizeof s1);
      return fail(v, "cannot broadcast %s to %s", s0, s1);
    }
  }
  return true;
}

static bool check_reduce(Verifier *v) {
  const TileType *s = rt(v, v->in->args[0]), *d = rt(v, v->in->dst);
  int ax = v->in->axis;
  if (!check_allowed(v, v->in->args[0]))
    return false;
  if (ax < 0 || ax >= s->rank)
    return fail(v, "reduce axis %d out of range for rank %d", ax, s->rank);
  if (d->elem != s->elem || d->rank != s->rank)
    return fail(v, "reduce result must keep the element type and rank");
  for (int i = 0; i < s->rank; i++)
    if (d->dims[i] != (i == ax ? 1 : s->dims[i]))
      return fail(v, "reduce result must have the source shape with axis %d of size 1 (keepdims)", ax);
  return true;
}

static bool check_dot(Verifier *v) {
  const TileType *a = rt(v, v->in->args[0]), *b = rt(v, v->in->args[1]);
  const TileType *c = rt(v, v->in->args[2]), *d = rt(v, v->in->dst);
  if (a->rank != 2 || b->rank != 2 || c->rank != 2 || d->rank != 2)
    return fail(v, "dot operands must all be 2-D");
  if (!elem_is_float(a->elem) || a->elem != b->elem)
    return fail(v, "dot inputs must be the same float type (%s, %s)", elem_name(a->elem),
                elem_name(b->elem));
  if (c->elem != TY_F32 || d->elem != TY_F32)
    return fail(v, "dot accumulator and result must be f32");
  int M = a->dims[0], K = a->dims[1], N = b->dims[1];
  if (b->dims[0] != K)
    return fail(v, "dot inner dimensions differ: [%d, %d] x [%d, %d]", M, K, (int)b->dims[0], N);
  if (c->dims[0] != M || c->dims[1] != N || d->dims[0] != M || d->dims[1] != N)
    return fail(v, "dot accumulator/result must be [%d, %d]", M, N);
  return true;
}

static bool check_trans(Verifier *v) {
  const TileType *s = rt(v, v->in->args[0]), *d = rt(v, v->in->dst);
  if (s->rank != 2 || d->rank != 2)
    return fail(v, "trans needs 2-D tiles");
  if (s->elem != d->elem || s->dims[0] != d->dims[1] || s->dims[1] != d->dims[0])
    return fail(v, "trans result must be the source with its two dims swapped");
  return true;
}

/* EXTRACT takes a box of its source: same element type and rank, within the source. */
static bool check_extract(Verifier *v) {
  const TileType *s = rt(v, v->in->args[0]), *d = rt(v, v->in->dst);
  if (s->elem != d->elem || s->rank != d->rank)
    return fail(v, "extract must keep the element type and the rank");
  for (int i = 0; i < d->rank; i++)
    if (v->in->offs[i] < 0 || v->in->offs[i] > s->dims[i] - d->dims[i])
      return fail(v, "extract [%d : +%d] of dim %d (size %d) is out of range", v->in->offs[i],
                  d->dims[i], i, s->dims[i]);
  return true;
}

/* WINDOW (store: WINDOW_STORE): a register box of shared tile t of rank 1 or 2, no larger than
 * it, at the i32 starts args[1], args[2]; box b the window's value. */
static bool check_window_box(Verifier *v, const TileType *t, const TileType *b, bool store) {
  const char *op = store ? "window_store" : "window";
  if (t->place != PLACE_SHARED || b->place != PLACE_REG)
    return fail(v, store ? "window_store writes a register tile into a shared tile"
                         : "window reads a shared tile into a register tile");
  if (t->elem != b->elem || t->rank != b->rank || t->rank < 1 || t->rank > 2)
    return fail(v, "%s must keep the element type and the rank (1 or 2)", op);
  if (!is_i32_scalar(rt(v, v->in->args[1])) || !is_i32_scalar(rt(v, v->in->args[2])))
    return fail(v, "%s starts must be i32 scalars", op);
  for (int i = 0; i < b->rank; i++)
    if (b->dims[i] > t->dims[i])
      return fail(v, "%s of %d elements along dim %d of a tile of %d", op, b->dims[i], i, t->dims[i]);
  return true;
}

/* RESHAPE only inserts or removes dims of size 1: the other dims are the same, in order. */
static bool check_reshape(Verifier *v) {
  const TileType *s = rt(v, v->in->args[0]), *d = rt(v, v->in->dst);
  int i = 0, j = 0;
  for (;; i++, j++) {
    while (i < s->rank && s->dims[i] == 1)
      i++;
    while (j < d->rank && d->dims[j] == 1)
      j++;
    if (i == s->rank || j == d->rank || s->dims[i] != d->dims[j])
      break;
  }
  if (s->elem != d->elem || i != s->rank || j != d->rank) {
    char s0[96], s1[96];
    type_str(s, s0, sizeof s0), type_str(d, s1, sizeof s1);
    return fail(v, "reshape %s to %s does more than insert or remove dims of size 1", s0, s1);
  }
  return true;
}

static bool check_memory(Verifier *v) {
  const TirInst *in = v->in;
  const TirFunc *f = v->f;
  if (in->arg_index < 0 || in->arg_index >= f->nargs || f->args[in->arg_index].kind != ARG_TENSOR)
    return fail(v, "argument %d is not a tensor argument", in->arg_index);
  const TirArg *a = &f->args[in->arg_index];
  if (tir_op_writes_tensor(in->op) && !a->is_out)
    return fail(v, "%s to %s, which is not an out tensor", tir_op_info[in->op].name, a->name);
  if ((in->op == TIR_ATOMIC_ADD && a->elem == TY_BOOL) ||
      (in->op == TIR_ATOMIC_MAX && a->elem != TY_I32 && a->elem != TY_F32))
    return fail(v, "%s on %s elements", tir_op_info[in->op].name, elem_name(a->elem));
  TileType want = {.elem = a->elem};
  for (int d = 0; d < TILE_MAX_RANK; d++) {
    const TirIndex *ix = &in->index[d];
    if (d >= a->rank) {
      if (ix->start != -1)
        return fail(v, "%d indices for %s, whose rank is %d", d + 1, a->name, a->rank);
      continue;
    }
    if (ix->start < 0 || ix->start >= f->nregs)
      return fail(v, "%s has rank %d but index %d is missing", a->name, a->rank, d);
    if (!v->written[ix->start])
      return fail(v, "index %d (register %d) is read before any write", d, ix->start);
    if (!is_i32_scalar(rt(v, ix->start)))
      return fail(v, "index %d must be an i32 scalar", d);
    if (ix->size < 1 || (!ix->is_range && ix->size != 1))
      return fail(v, "index %d has size %d", d, (int)ix->size);
    if (ix->is_range)
      want.dims[want.rank++] = ix->size;
  }
  const TileType *t = rt(v, in->op == TIR_LOAD ? in->dst : in->args[0]);
  if (t->elem != a->elem)
    return fail(v, "tile element type %s differs from %s's %s", elem_name(t->elem), a->name,
                elem_name(a->elem));
  if (!tile_same_shape(t, &want)) {
    char s0[96], s1[96];
    type_str(t, s0, sizeof s0), type_str(&want, s1, sizeof s1);
    return fail(v, "tile %s does not match the addressed slice %s", s0, s1);
  }
  return true;
}

static bool check_leaf(Verifier *v) {
  const TirInst *in = v->in;
  const TileType *d = rt(v, in->dst);
  switch (in->op) {
  case TIR_CONST:
    if (d->elem == TY_I32 && (in->imm != floor(in->imm) || fabs(in->imm) > 2147483648.0))
      return fail(v, "i32 constant %g is not an i32", in->imm);
    if (d->elem == TY_BOOL && in->imm != 0 && in->imm != 1)
      return fail(v, "bool constant must be 0 or 1");
    return true;
  case TIR_PARAM:
    if (in->arg_index < 0 || in->arg_index >= v->f->nargs ||
        v->f->args[in->arg_index].kind != ARG_SCALAR)
      return fail(v, "argument %d is not a scalar argument", in->arg_index);
    if (d->rank != 0 || d->elem != v->f->args[in->arg_index].elem)
      return fail(v, "param result must be a scalar of the argument's type");
    return true;
  case TIR_DIM:
    if (in->arg_index < 0 || in->arg_index >= v->f->ndims)
      return fail(v, "dim %d out of range", in->arg_index);
    if (!is_i32_scalar(d))
      return fail(v, "dim result must be an i32 scalar");
    return true;
  case TIR_BLOCK_ID:
    if (in->axis < 0 || in->axis > 2)
      return fail(v, "block_id axis %d", in->axis);
    if (!is_i32_scalar(d))
      return fail(v, "block_id result must be an i32 scalar");
    return true;
  case TIR_IOTA:
    if (d->elem != TY_I32 || in->axis < 0 || in->axis >= d->rank)
      return fail(v, "iota needs an i32 tile and an axis below its rank");
    return true;
  case TIR_ROW_SHIFT:
    for (int i = 0; i < 3 && in->args[i] >= 0; i++)
      if (!is_i32_scalar(rt(v, in->args[i])))
        return fail(v, "row_shift index %d is not an i32 scalar", i);
    if (!is_i32_scalar(d))
      return fail(v, "row_shift result must be an i32 scalar");
    return true;
  default:
    return true;
  }
}

/* Markers: nesting is checked by the caller with a stack; here, operand types. */
static bool check_marker(Verifier *v) {
  const TirInst *in = v->in;
  if (in->op == TIR_FOR) {
    for (int i = 0; i < 3; i++)
      if (!is_i32_scalar(rt(v, in->args[i])))
        return fail(v, "for bounds and step must be i32 scalars");
    if (!is_i32_scalar(rt(v, in->dst)))
      return fail(v, "for induction register must be an i32 scalar");
    if (in->pipeline < 1)
      return fail(v, "pipeline depth %d", in->pipeline);
  }
  if (in->op == TIR_IF) {
    const TileType *c = rt(v, in->args[0]);
    if (c->elem != TY_BOOL || c->rank != 0)
      return fail(v, "if condition must be a bool scalar");
  }
  return true;
}

static bool check_types(Verifier *v) {
  const TirInst *in = v->in;
  unsigned flags = tir_op_info[in->op].flags;
  if (flags & OPF_MARKER)
    return check_marker(v);
  if (flags & OPF_ELEMWISE)
    return check_elemwise(v);
  switch (in->op) {
  case TIR_BCAST:
    return check_bcast(v);
  case TIR_CVT:
    if (!tile_same_shape(rt(v, in->args[0]), rt(v, in->dst)))
      return fail(v, "cvt changes the shape");
    return true;
  case TIR_TRANS:
    return check_trans(v);
  case TIR_RESHAPE:
    return check_reshape(v);
  case TIR_EXTRACT:
    return check_extract(v);
  case TIR_WINDOW:
    return check_window_box(v, rt(v, in->args[0]), rt(v, in->dst), false);
  case TIR_WINDOW_STORE:
    return check_window_box(v, rt(v, in->dst), rt(v, in->args[0]), true);
  case TIR_REDUCE_SUM:
  case TIR_REDUCE_MAX:
  case TIR_REDUCE_MIN:
    return check_reduce(v);
  case TIR_ANY: /* and that it is an IF's condition: check_any_guard */
    if (rt(v, in->args[0])->elem != TY_BOOL || rt(v, in->dst)->elem != TY_BOOL || rt(v, in->dst)->rank != 0)
      return fail(v, "any of a value that is not a bool tile, or into one that is not a bool scalar");
    return true;
  case TIR_DOT:
    return check_dot(v);
  case TIR_DOT_WAIT: /* its protocol: tir_verify_schedule */
    if (v->in->imm != 0 && v->in->imm != 1)
      return fail(v, "dot_wait leaves %g groups in flight (0 or 1)", v->in->imm);
    return true;
  case TIR_WG_TURN:
  case TIR_WG_PASS:
  case TIR_HEAD_WAIT:
  case TIR_HEAD_RELEASE: /* their protocol: tir_verify_schedule */
    return true;
  case TIR_PIPE_WAIT:
  case TIR_PIPE_RELEASE: /* which pipe, and its rules: tir_verify_schedule */
    if (v->in->axis < 0 || (v->in->imm != 0 && v->in->imm != 1))
      return fail(v, "pipe %d, lag %g", v->in->axis, v->in->imm);
    return true;
  case TIR_LOAD:
  case TIR_STORE:
  case TIR_ATOMIC_ADD:
  case TIR_ATOMIC_MAX:
    return check_memory(v);
  case TIR_CLUSTER_SUM:
  case TIR_CLUSTER_MAX: { /* at the top level: tir_verify's loop */
    const TileType *x = rt(v, in->args[0]), *d = rt(v, in->dst);
    if (v->f->cluster < 2)
      return fail(v, "a cluster reduction in a kernel without a cluster");
    if (x->rank != 0 || x->elem != TY_F32 || d->rank != 0 || d->elem != TY_F32)
      return fail(v, "a cluster reduction of a value that is not an f32 scalar");
    return true;
  }
  default:
    return check_leaf(v);
  }
}

/* FOR/ENDFOR and IF/ELSE/ENDIF nest; a loop body never writes its induction register. */
static bool check_nesting(Verifier *v, int *stack, int *depth) {
  const TirInst *in = v->in;
  const TirInst *insts = v->f->insts;
  switch (in->op) {
  case TIR_FOR:
  case TIR_IF:
    stack[(*depth)++] = (int)(in - insts);
    return true;
  case TIR_ELSE:
    if (*depth == 0 || insts[stack[*depth - 1]].op != TIR_IF)
      return fail(v, "else without a matching if");
    stack[*depth - 1] = (int)(in - insts); /* an ELSE closes with ENDIF like its IF */
    return true;
  case TIR_ENDFOR:
    if (*depth == 0 || insts[stack[*depth - 1]].op != TIR_FOR)
      return fail(v, "endfor without a matching for");
    (*depth)--;
    return true;
  case TIR_ENDIF:
    if (*depth == 0 || (insts[stack[*depth - 1]].op != TIR_IF && insts[stack[*depth - 1]].op != TIR_ELSE))
      return fail(v, "endif without a matching if");
    (*depth)--;
    return true;
  default:
    if (in->dst >= 0)
      for (int i = 0; i < *depth; i++)
        if (insts[stack[i]].op == TIR_FOR && insts[stack[i]].dst == in->dst)
          return fail(v, "writes the induction register of an enclosing for");
    return true;
  }
}

static bool check_header(Verifier *v) {
  const TirFunc *f = v->f;
  for (int i = 0; i < f->nargs; i++) {
    const TirArg *a = &f->args[i];
    if (a->kind == ARG_TENSOR) {
      if (a->rank < 1 || a->rank > TILE_MAX_RANK)
        return fail(v, "argument %s has rank %d", a->name, a->rank);
      for (int d = 0; d < a->rank; d++)
        if (a->dims[d] < 0 || a->dims[d] >= f->ndims)
          return fail(v, "argument %s: dim %d refers to no dim", a->name, d);
    }
  }
  if (f->threads < 32 || f->threads > 1024 || f->threads % 32)
    return fail(v, "threads %d is not a multiple of 32 in [32, 1024]", f->threads);
  if (f->cluster < 1 || f->cluster > TILERT_MAX_CLUSTER)
    return fail(v, "a cluster of %d blocks", f->cluster);
  for (int i = 0; i < 3; i++)
    if (!f->grid[i].rpn || !*f->grid[i].rpn)
      return fail(v, "grid axis %d has no expression", i);
  return true;
}

/* An any-guard: ANY's result is the condition of the IF right after it and read by nothing else,
 * and that IF has no ELSE and holds only register work a warp does alone (elementwise ops,
 * broadcasts, constants): the GPU answers ANY per warp, so warps may disagree, and nothing in the
 * body may wait for another warp. */
static bool check_any_guard(Verifier *v, int i) {
  const TirFunc *f = v->f;
  int c = f->insts[i].dst;
  if (i + 1 >= f->ninsts || f->insts[i + 1].op != TIR_IF || f->insts[i + 1].args[0] != c)
    return fail(v, "any is not the condition of the if after it");
  for (int k = 0; k < f->ninsts; k++)
    if (k != i + 1 && (tir_inst_reads(&f->insts[k], c) || (k != i && f->insts[k].dst == c)))
      return fail(v, "any's result is used or written outside its if");
  for (int k = i + 2; k < f->ninsts && f->insts[k].op != TIR_ENDIF; k++) {
    TirOp op = f->insts[k].op;
    if (!(tir_op_info[op].flags & OPF_ELEMWISE) && op != TIR_BCAST && op != TIR_CONST)
      return fail(v, "an any-guard holds %s (only elementwise work, broadcasts and constants)", tir_op_info[op].name);
  }
  return true;
}

bool tir_verify(const TirFunc *f, Diag *d, const char *stage) {
  Verifier v = {.f = f, .d = d, .stage = stage ? stage : "?"};
  if (!check_header(&v) || !check_regs(&v))
    return false;
  bool written_buf[256];
  bool *written = f->nregs <= 256 ? written_buf : arena_alloc(f->arena, (size_t)f->nregs);
  memset(written, 0, (size_t)f->nregs);
  v.written = written;
  int stack_buf[64];
  int *stack = f->ninsts <= 64 ? stack_buf : arena_alloc(f->arena, sizeof(int) * (size_t)f->ninsts);
  int depth = 0;
  for (int i = 0; i < f->ninsts; i++) {
    v.in = &f->insts[i];
    if ((unsigned)v.in->op >= TIR_OP_COUNT)
      return fail(&v, "unknown op %d", (int)v.in->op);
    if (!check_operands(&v) || !check_types(&v) || !check_nesting(&v, stack, &depth))
      return false;
    if (v.in->op == TIR_ANY && !check_any_guard(&v, i))
      return false;
    if ((v.in->op == TIR_CLUSTER_SUM || v.in->op == TIR_CLUSTER_MAX) && depth > 0)
      return fail(&v, "a cluster reduction inside a loop or branch (every block of the cluster reaches it once)");
    if (v.in->dst >= 0)
      written[v.in->dst] = true;
  }
  v.in = NULL;
  if (depth > 0) {
    v.in = &f->insts[stack[depth - 1]];
    return fail(&v, "not closed (missing %s)", v.in->op == TIR_FOR ? "endfor" : "endif");
  }
  return true;
}
