/* lower_tir.c — checked AST (ast.h contract) -> verified tile IR.
 *
 * Every implicit rule of the language becomes explicit here: operands are broadcast (BCAST) and
 * constants materialised (CONST of the operand's final type and shape), so the IR has no implicit
 * promotion or broadcasting; compile-time `if` and `?:` keep only the taken side; online_softmax
 * is desugared into plain ops (docs/language.md, docs/tir.md); grid and `require` come as RPN
 * strings from sema. The result is verified here; the driver runs the passes. */
#include "ast.h"
#include "tilec.h"

#include <math.h>
#include <string.h>

/* online_softmax state: its two registers and the accumulators to rescale. */
typedef struct SoftmaxRegs {
  int m, l;
  int scale;              /* f32 scalar register of `scale = c`, or -1 */
  int rows;
  const AstStmt *st;
} SoftmaxRegs;

typedef struct Lower {
  Arena *a;
  TirFunc *f;
  const AstKernel *k;
  Diag *d;
  int *decl_reg;          /* per AstDecl id: its register, -1 before declaration */
  SoftmaxRegs *softmax;   /* per AstDecl id (DECL_SOFTMAX only) */
  bool failed;
} Lower;

__attribute__((format(printf, 3, 4))) static int lower_error(Lower *L, SrcLoc loc, const char *fmt,
                                                             ...) {
  va_list ap;
  va_start(ap, fmt);
  diag_vreport(L->d, DIAG_ERROR, loc, fmt, ap);
  va_end(ap);
  L->failed = true;
  return -1;
}

static TileType scalar_type(ElemType e) { return (TileType){.elem = e}; }

static TileType with_elem(TileType t, ElemType e) {
  t.elem = e;
  t.place = PLACE_REG;
  t.layout = NULL;
  return t;
}

static int new_reg(Lower *L, TileType t) {
  t.layout = NULL;
  return tir_new_reg(L->f, t, NULL);
}

static int emit_const(Lower *L, TileType t, double v, SrcLoc loc) {
  t.place = PLACE_REG;
  TirInst *in = tir_emit(L->f, TIR_CONST, loc);
  in->dst = new_reg(L, t);
  in->imm = round_to_elem(t.elem, v);
  return in->dst;
}

static int emit1(Lower *L, TirOp op, TileType t, int a, SrcLoc loc) {
  int dst = new_reg(L, with_elem(t, t.elem));
  TirInst *in = tir_emit(L->f, op, loc);
  in->dst = dst;
  in->args[0] = a;
  return dst;
}

static int emit2(Lower *L, TirOp op, TileType t, int a, int b, SrcLoc loc) {
  int dst = new_reg(L, with_elem(t, t.elem));
  TirInst *in = tir_emit(L->f, op, loc);
  in->dst = dst;
  in->args[0] = a;
  in->args[1] = b;
  return dst;
}

static int emit3(Lower *L, TirOp op, TileType t, int a, int b, int c, SrcLoc loc) {
  int dst = emit2(L, op, t, a, b, loc);
  L->f->insts[L->f->ninsts - 1].args[2] = c;
  return dst;
}

static const TileType *reg_type(Lower *L, int r) { return &L->f->regs[r].type; }

/* Brings register r to type t: CVT on the element type, then BCAST to the shape (numpy). */
static int coerce_reg(Lower *L, int r, TileType t, SrcLoc loc) {
  if (r < 0)
    return r;
  TileType cur = *reg_type(L, r);
  if (cur.elem != t.elem) {
    r = emit1(L, TIR_CVT, with_elem(cur, t.elem), r, loc);
    cur.elem = t.elem;
  }
  if (!tile_same_shape(&cur, &t))
    r = emit1(L, TIR_BCAST, with_elem(t, t.elem), r, loc);
  return r;
}

static int lower_expr(Lower *L, const AstExpr *e);

/* An operand brought to type t: constants become one CONST of t (splat), no BCAST. */
static int operand(Lower *L, const AstExpr *e, TileType t) {
  if (e->is_const)
    return emit_const(L, with_elem(t, t.elem), e->cval, e->loc);
  return coerce_reg(L, lower_expr(L, e), t, e->loc);
}

/* ------------------------------------------------------------- expressions */

static TirOp binary_op(AstOp op) {
  switch (op) {
  case OP_ADD: return TIR_ADD;
  case OP_SUB: return TIR_SUB;
  case OP_MUL: return TIR_MUL;
  case OP_DIV: return TIR_DIV;
  case OP_REM: return TIR_REM;
  case OP_LT: return TIR_LT;
  case OP_LE: return TIR_LE;
  case OP_GT: return TIR_GT;
  case OP_GE: return TIR_GE;
  case OP_EQ: return TIR_EQ;
  case OP_NE: return TIR_NE;
  case OP_AND: return TIR_AND;
  case OP_OR: return TIR_OR;
  case OP_NEG: return TIR_NEG;
  default: return TIR_NOT;
  }
}

static int lower_binary(Lower *L, const AstExpr *e) {
  TileType ot = e->opnd_ty;
  int a = operand(L, e->args[0], ot);
  int b = operand(L, e->args[1], ot);
  if (a < 0 || b < 0)
    return -1;
  return emit2(L, binary_op(e->op), e->ty, a, b, e->loc);
}

/* Result register written on both sides of an IF (C semantics: only one side runs). */
static int lower_branches(Lower *L, const AstExpr *c, const AstExpr *x, const AstExpr *y, TileType t,
                          SrcLoc loc) {
  int cond = operand(L, c, scalar_type(TY_BOOL));
  if (cond < 0)
    return -1;
  int dst = new_reg(L, with_elem(t, t.elem));
  tir_emit(L->f, TIR_IF, loc)->args[0] = cond;
  int vx = operand(L, x, t);
  TirInst *in = tir_emit(L->f, TIR_COPY, loc);
  in->dst = dst, in->args[0] = vx;
  tir_emit(L->f, TIR_ELSE, loc);
  int vy = operand(L, y, t);
  in = tir_emit(L->f, TIR_COPY, loc);
  in->dst = dst, in->args[0] = vy;
  tir_emit(L->f, TIR_ENDIF, loc);
  return vx < 0 || vy < 0 ? -1 : dst;
}

/* A scalar expression both of whose sides may run whatever the condition: names, literals, block
 * indices, minimum / maximum and arithmetic without an integer division (which may fault). */
static bool speculatable(const AstExpr *e, int depth) {
  if (depth > 16 || e->ty.rank != 0)
    return false;
  switch (e->kind) {
  case AST_INT: case AST_FLOAT: case AST_BOOL: case AST_NAME: case AST_BLOCK_ID:
    return true;
  case AST_UNARY:
    return speculatable(e->args[0], depth + 1);
  case AST_BINARY:
    if ((e->op == OP_DIV || e->op == OP_REM) && !elem_is_float(e->opnd_ty.elem))
      return false;
    return speculatable(e->args[0], depth + 1) && speculatable(e->args[1], depth + 1);
  case AST_TERNARY:
    return speculatable(e->args[0], depth + 1) && speculatable(e->args[1], depth + 1) &&
           speculatable(e->args[2], depth + 1);
  case AST_CALL:
    return (e->builtin == BI_MINIMUM || e->builtin == BI_MAXIMUM) && speculatable(e->args[0], depth + 1) &&
           speculatable(e->args[1], depth + 1);
  default:
    return false;
  }
}

/* c ? x : y: a SELECT when both sides are cheap scalars that cannot fault (so the value is one
 * register written once: a warp-specialized producer can replay it, docs/architecture.md), else
 * an IF / ELSE running one side. */
static int lower_ternary(Lower *L, const AstExpr *e) {
  const AstExpr *c = e->args[0];
  if (c->is_const) /* compile-time condition: only the taken side exists */
    return operand(L, c->cval != 0 ? e->args[1] : e->args[2], e->ty);
  if (speculatable(e->args[1], 0) && speculatable(e->args[2], 0)) {
    int vc = operand(L, c, scalar_type(TY_BOOL)), vx = operand(L, e->args[1], e->ty),
        vy = operand(L, e->args[2], e->ty);
    return vc < 0 || vx < 0 || vy < 0 ? -1 : emit3(L, TIR_SELECT, e->ty, vc, vx, vy, e->loc);
  }
  return lower_branches(L, c, e->args[1], e->args[2], e->ty, e->loc);
}

/* x[a : +S, i, :] of a register tile: EXTRACT of the box (constant starts), then a RESHAPE that
 * drops the axes of the scalar indices. */
/* The register of the tile a slice e reads, or -1 (reported). */
static int sliced_tile(Lower *L, const AstExpr *e) {
  int x = L->decl_reg[e->decl->id];
  return x >= 0 ? x : lower_error(L, e->loc, "internal error: '%s' sliced before its declaration", e->name);
}

static int lower_reg_slice(Lower *L, const AstExpr *e) {
  int x = sliced_tile(L, e);
  if (x < 0)
    return -1;
  TileType box = *reg_type(L, x);
  int32_t offs[TILE_MAX_RANK] = {0};
  bool whole = true;
  for (int i = 0; i < e->nitems; i++) {
    const AstSliceItem *it = &e->items[i];
    offs[i] = it->start ? (int32_t)it->start->cval : 0;
    whole &= offs[i] == 0 && it->size == box.dims[i];
    box.dims[i] = it->size;
  }
  if (!whole) {
    x = emit1(L, TIR_EXTRACT, with_elem(box, box.elem), x, e->loc);
    memcpy(L->f->insts[L->f->ninsts - 1].offs, offs, sizeof offs);
  }
  return box.rank == e->ty.rank ? x : emit1(L, TIR_RESHAPE, e->ty, x, e->loc);
}

/* The window x[a : +S, b : +T] of shared tile x (the register): its starts (row, column; rank 1:
 * a row, its row start 0) and the box it covers, a register tile of the tile's rank; -1 on error. */
static int window_of(Lower *L, const AstExpr *e, int starts[2], TileType *box) {
  int x = sliced_tile(L, e);
  if (x < 0)
    return -1;
  *box = *reg_type(L, x);
  box->place = PLACE_REG;
  box->layout = NULL;
  if (e->nitems == 1)
    starts[0] = emit_const(L, scalar_type(TY_I32), 0, e->loc);
  for (int i = 0; i < e->nitems; i++) {
    const AstSliceItem *it = &e->items[i];
    int k = i + 2 - e->nitems;
    starts[k] = it->start ? operand(L, it->start, scalar_type(TY_I32))
                          : emit_const(L, scalar_type(TY_I32), 0, it->loc);
    if (starts[k] < 0)
      return -1;
    box->dims[i] = it->size;
  }
  return x;
}

/* x[a : +S, b : +T] of a shared tile: a WINDOW at the starts reading `fill` outside the tile,
 * then a RESHAPE that drops the axes of the scalar indices. */
static int lower_shared_window(Lower *L, const AstExpr *e, double fill) {
  int starts[2];
  TileType box;
  int x = window_of(L, e, starts, &box);
  if (x < 0)
    return -1;
  x = emit3(L, TIR_WINDOW, box, x, starts[0], starts[1], e->loc);
  L->f->insts[L->f->ninsts - 1].imm = fill;
  return box.rank == e->ty.rank ? x : emit1(L, TIR_RESHAPE, e->ty, x, e->loc);
}

static int lower_slice(Lower *L, const AstExpr *e, double fill) {
  const AstDecl *t = e->decl;
  if (t->kind == DECL_VAR && t->place == VAR_SHARED)
    return lower_shared_window(L, e, fill);
  if (t->kind == DECL_VAR)
    return lower_reg_slice(L, e);
  int starts[TILE_MAX_RANK];
  for (int i = 0; i < e->nitems; i++) {
    const AstSliceItem *it = &e->items[i];
    starts[i] = it->start ? operand(L, it->start, scalar_type(TY_I32))
                          : emit_const(L, scalar_type(TY_I32), 0, it->loc);
    if (starts[i] < 0)
      return -1;
  }
  TirInst *in = tir_emit(L->f, TIR_LOAD, e->loc);
  in->dst = new_reg(L, with_elem(e->ty, e->ty.elem));
  in->arg_index = t->index;
  in->imm = fill;
  for (int i = 0; i < e->nitems; i++) {
    in->index[i].is_range = e->items[i].kind != SLICE_INDEX;
    in->index[i].start = starts[i];
    in->index[i].size = in->index[i].is_range ? e->items[i].size : 1;
  }
  return in->dst;
}

static TirOp unary_builtin(AstBuiltin b) {
  switch (b) {
  case BI_EXP: return TIR_EXP;
  case BI_EXP2: return TIR_EXP2;
  case BI_LOG: return TIR_LOG;
  case BI_SQRT: return TIR_SQRT;
  case BI_RSQRT: return TIR_RSQRT;
  case BI_TANH: return TIR_TANH;
  case BI_ERF: return TIR_ERF;
  case BI_SIGMOID: return TIR_SIGMOID;
  case BI_ABS: return TIR_ABS;
  default: return TIR_OP_COUNT;
  }
}

/* row_index(start, R): i32[R, 1]; col_index(start, C): i32[1, C]; index(start, n): i32[n];
 * start + iota. */
static int lower_index_tile(Lower *L, const AstExpr *e, int axis) {
  TirInst *in = tir_emit(L->f, TIR_IOTA, e->loc);
  int iota = in->dst = new_reg(L, with_elem(e->ty, TY_I32));
  in->axis = axis;
  const AstExpr *start = e->args[0];
  if (start->is_const && start->cval == 0)
    return iota;
  int s = operand(L, start, with_elem(e->ty, TY_I32));
  return s < 0 ? -1 : emit2(L, TIR_ADD, e->ty, iota, s, e->loc);
}

/* TIR reductions keep the axis; a reduction that drops it is one followed by a RESHAPE. */
static int lower_reduce(Lower *L, const AstExpr *e, TirOp op) {
  int x = lower_expr(L, e->args[0]);
  if (x < 0)
    return -1;
  TileType kept = *reg_type(L, x);
  kept.dims[e->axis] = 1;
  int dst = emit1(L, op, with_elem(kept, e->ty.elem), x, e->loc);
  L->f->insts[L->f->ninsts - 1].axis = e->axis;
  return e->keep ? dst : emit1(L, TIR_RESHAPE, e->ty, dst, e->loc);
}

static int lower_dot(Lower *L, const AstExpr *e, int acc) {
  int a = lower_expr(L, e->args[0]);
  int b = lower_expr(L, e->args[1]);
  if (a < 0 || b < 0)
    return -1;
  if (acc < 0)
    acc = emit_const(L, e->ty, 0, e->loc);
  return emit3(L, TIR_DOT, e->ty, a, b, acc, e->loc);
}

/* cdiv(a, b) = (a + b - 1) / b (documented for b > 0). */
static int lower_cdiv(Lower *L, const AstExpr *e) {
  int a = operand(L, e->args[0], e->ty), b = operand(L, e->args[1], e->ty);
  if (a < 0 || b < 0)
    return -1;
  int one = emit_const(L, e->ty, 1, e->loc);
  int sum = emit2(L, TIR_ADD, e->ty, a, b, e->loc);
  int num = emit2(L, TIR_SUB, e->ty, sum, one, e->loc);
  return emit2(L, TIR_DIV, e->ty, num, b, e->loc);
}

static int lower_call(Lower *L, const AstExpr *e) {
  AstBuiltin b = e->builtin;
  TirOp uop = unary_builtin(b);
  if (uop != TIR_OP_COUNT)
    return coerce_reg(L, emit1(L, uop, e->ty, operand(L, e->args[0], e->ty), e->loc), e->ty, e->loc);
  switch (b) {
  case BI_MAXIMUM:
  case BI_MINIMUM: {
    int x = operand(L, e->args[0], e->ty), y = operand(L, e->args[1], e->ty);
    if (x < 0 || y < 0)
      return -1;
    return emit2(L, b == BI_MAXIMUM ? TIR_MAX : TIR_MIN, e->ty, x, y, e->loc);
  }
  case BI_WHERE: {
    int c = operand(L, e->args[0], with_elem(e->ty, TY_BOOL));
    int x = operand(L, e->args[1], e->ty), y = operand(L, e->args[2], e->ty);
    if (c < 0 || x < 0 || y < 0)
      return -1;
    return emit3(L, TIR_SELECT, e->ty, c, x, y, e->loc);
  }
  case BI_TO_F32:
  case BI_TO_F16:
  case BI_TO_BF16:
  case BI_TO_I32: {
    const AstExpr *x = e->args[0];
    if (x->is_const)
      return emit_const(L, e->ty, x->cval, e->loc);
    int r = lower_expr(L, x);
    if (r < 0)
      return -1;
    return reg_type(L, r)->elem == e->ty.elem ? r : emit1(L, TIR_CVT, e->ty, r, e->loc);
  }
  case BI_CDIV:
    return lower_cdiv(L, e);
  case BI_ROW_INDEX:
  case BI_INDEX:
    return lower_index_tile(L, e, 0);
  case BI_COL_INDEX:
    return lower_index_tile(L, e, 1);
  case BI_SUM:
    return lower_reduce(L, e, TIR_REDUCE_SUM);
  case BI_MAX:
    return lower_reduce(L, e, TIR_REDUCE_MAX);
  case BI_MIN:
    return lower_reduce(L, e, TIR_REDUCE_MIN);
  case BI_DOT:
    return lower_dot(L, e, -1);
  case BI_TRANS: {
    int x = lower_expr(L, e->args[0]);
    return x < 0 ? -1 : emit1(L, TIR_TRANS, e->ty, x, e->loc);
  }
  case BI_SQUEEZE:
  case BI_EXPAND_DIMS: {
    int x = lower_expr(L, e->args[0]);
    return x < 0 ? -1 : emit1(L, TIR_RESHAPE, e->ty, x, e->loc);
  }
  case BI_CLUSTER_SUM:
  case BI_CLUSTER_MAX: { /* a cluster of one block (`cluster (1)`) combines nothing */
    int x = operand(L, e->args[0], e->ty);
    if (x < 0 || L->f->cluster == 1)
      return x;
    return emit1(L, b == BI_CLUSTER_SUM ? TIR_CLUSTER_SUM : TIR_CLUSTER_MAX, e->ty, x, e->loc);
  }
  case BI_FILL: {
    const AstExpr *v = e->args[1];
    if (e->args[0]->kind != AST_SLICE || !v->is_const)
      return lower_error(L, e->loc, "fill() needs a tensor slice and a constant value");
    return lower_slice(L, e->args[0], v->cval);
  }
  default:
    return lower_error(L, e->loc, "internal error: builtin %s cannot be lowered", ast_builtin_name(b));
  }
}

/* online_softmax update (docs/language.md):
 *   m_new = max(m, reduce_max(s)), kept at m unless it grows by more than SOFTMAX_LAZY (below);
 *   base = select(m_new == -inf, 0, m_new);
 *   alpha = exp(m - base); p = exp(s - base); l = l * alpha + reduce_sum(p);
 *   if (any(m_new != m)) acc *= alpha (each rescaled accumulator, broadcast); m = m_new; result p.
 * With `scale = c`: reduce_max(s) * c for the max and exp(s * c - base) for p, so the scaled
 * scores never exist as a tile (the backend folds c into the exponent's FMA). */
/* The lazy max (FlashAttention-4's rescaling threshold): a row's max moves only when the new
 * scores pass it by more than log(256), so p = exp(s - m) stays below 256 (exact in f16 and bf16,
 * far from overflow in the f32 sums) and after a row's first blocks alpha is 1 and the guard
 * skips the accumulators' rescale (64 multiplies a thread a step at d128), which a warp does
 * only when one of its rows moved. softmax = exp(s - m) / l and logsumexp = m + log(l) hold for
 * any m the sums were taken against, so the results are the same up to rounding. Only for a
 * state with accumulators to rescale. TILEC_LAZY_MAX=0: the running max itself (the guard still
 * skips rows that did not move); TILEC_RESCALE_GUARD=0: no guard. */
#define SOFTMAX_LAZY 5.545177444479562 /* log(256) */

/* The accumulators' rescale by alpha, under `if (any(moved))` unless switched off. */
static void softmax_rescale(Lower *L, const SoftmaxRegs *st, int alpha, int moved, SrcLoc loc) {
  bool guard = !env_off("TILEC_RESCALE_GUARD");
  if (guard) {
    int some = emit1(L, TIR_ANY, scalar_type(TY_BOOL), moved, loc);
    tir_emit(L->f, TIR_IF, loc)->args[0] = some;
  }
  for (int i = 0; i < st->st->nrescale; i++) {
    int acc = L->decl_reg[st->st->rescale[i]->id];
    TileType at = *reg_type(L, acc);
    int alpha_b = emit1(L, TIR_BCAST, with_elem(at, TY_F32), alpha, loc);
    TirInst *in = tir_emit(L->f, TIR_MUL, loc);
    in->dst = acc, in->args[0] = acc, in->args[1] = alpha_b;
  }
  if (guard)
    tir_emit(L->f, TIR_ENDIF, loc);
}

static int softmax_update(Lower *L, const SoftmaxRegs *st, const AstExpr *arg, SrcLoc loc) {
  int s = lower_expr(L, arg);
  if (s < 0)
    return -1;
  TileType rt = *reg_type(L, st->m);
  TileType stype = *reg_type(L, s);
  TileType bt = with_elem(rt, TY_BOOL);
  int rmax = emit1(L, TIR_REDUCE_MAX, rt, s, loc);
  L->f->insts[L->f->ninsts - 1].axis = 1;
  if (st->scale >= 0)
    rmax = emit2(L, TIR_MUL, rt, rmax, emit1(L, TIR_BCAST, rt, st->scale, loc), loc);
  int m_new = emit2(L, TIR_MAX, rt, st->m, rmax, loc);
  /* only with accumulators to rescale: without, the lazy max saves nothing, and a row op's
   * running max must stay the max for its chunks to start anywhere (tir_align.c). From -inf to
   * a finite max grows by inf; from -inf to -inf (NaN) does not. */
  if (st->st->nrescale > 0 && !env_off("TILEC_LAZY_MAX")) {
    int grown = emit2(L, TIR_SUB, rt, m_new, st->m, loc);
    int far = emit2(L, TIR_GT, bt, grown, emit_const(L, rt, SOFTMAX_LAZY, loc), loc);
    m_new = emit3(L, TIR_SELECT, rt, far, m_new, st->m, loc);
  }
  int ninf = emit_const(L, rt, -INFINITY, loc);
  int is_ninf = emit2(L, TIR_EQ, bt, m_new, ninf, loc);
  int zero = emit_const(L, rt, 0, loc);
  int base = emit3(L, TIR_SELECT, rt, is_ninf, zero, m_new, loc);
  int alpha = emit1(L, TIR_EXP, rt, emit2(L, TIR_SUB, rt, st->m, base, loc), loc);
  int base_s = emit1(L, TIR_BCAST, stype, base, loc);
  if (st->scale >= 0)
    s = emit2(L, TIR_MUL, stype, s, emit1(L, TIR_BCAST, stype, st->scale, loc), loc);
  int p = emit1(L, TIR_EXP, stype, emit2(L, TIR_SUB, stype, s, base_s, loc), loc);
  int psum = emit1(L, TIR_REDUCE_SUM, rt, p, loc);
  L->f->insts[L->f->ninsts - 1].axis = 1;
  int lscaled = emit2(L, TIR_MUL, rt, st->l, alpha, loc);
  TirInst *in = tir_emit(L->f, TIR_ADD, loc);
  in->dst = st->l, in->args[0] = lscaled, in->args[1] = psum;
  softmax_rescale(L, st, alpha, emit2(L, TIR_NE, bt, m_new, st->m, loc), loc);
  in = tir_emit(L->f, TIR_COPY, loc);
  in->dst = st->m, in->args[0] = m_new;
  return p;
}

/* finish(acc) = acc * select(l > 0, 1 / l, 0): rows that saw nothing give 0, not NaN. */
static int softmax_finish(Lower *L, const SoftmaxRegs *st, const AstExpr *arg, TileType t, SrcLoc loc) {
  int acc = operand(L, arg, t);
  if (acc < 0)
    return -1;
  TileType rt = *reg_type(L, st->l);
  int zero = emit_const(L, rt, 0, loc);
  int pos = emit2(L, TIR_GT, with_elem(rt, TY_BOOL), st->l, zero, loc);
  int inv = emit2(L, TIR_DIV, rt, emit_const(L, rt, 1, loc), st->l, loc);
  int scale = emit3(L, TIR_SELECT, rt, pos, inv, zero, loc);
  int scale_b = emit1(L, TIR_BCAST, t, scale, loc);
  return emit2(L, TIR_MUL, t, acc, scale_b, loc);
}

static const SoftmaxRegs *softmax_of(Lower *L, const AstExpr *e) {
  const AstDecl *d = e->decl;
  if (!d || d->kind != DECL_SOFTMAX || L->softmax[d->id].m < 0) {
    lower_error(L, e->loc, "internal error: '%s' is not a declared online_softmax", e->name);
    return NULL;
  }
  return &L->softmax[d->id];
}

static int lower_name(Lower *L, const AstExpr *e) {
  const AstDecl *d = e->decl;
  switch (d->kind) {
  case DECL_DIM: {
    TirInst *in = tir_emit(L->f, TIR_DIM, e->loc);
    in->dst = new_reg(L, scalar_type(TY_I32));
    in->arg_index = d->index;
    return in->dst;
  }
  case DECL_SCALAR_ARG: {
    TirInst *in = tir_emit(L->f, TIR_PARAM, e->loc);
    in->dst = new_reg(L, scalar_type(L->k->args[d->index].elem));
    in->arg_index = d->index;
    return coerce_reg(L, in->dst, with_elem(e->ty, e->ty.elem), e->loc);
  }
  case DECL_VAR:
  case DECL_LOOP:
    if (L->decl_reg[d->id] < 0)
      return lower_error(L, e->loc, "internal error: '%s' used before its declaration", d->name);
    return L->decl_reg[d->id];
  default:
    return lower_error(L, e->loc, "internal error: '%s' cannot be used as a value here", d->name);
  }
}

static int lower_expr(Lower *L, const AstExpr *e) {
  if (e->is_const)
    return emit_const(L, with_elem(e->ty, e->ty.elem), e->cval, e->loc);
  switch (e->kind) {
  case AST_NAME:
    return lower_name(L, e);
  case AST_BLOCK_ID: {
    TirInst *in = tir_emit(L->f, TIR_BLOCK_ID, e->loc);
    in->dst = new_reg(L, scalar_type(TY_I32));
    in->axis = e->axis;
    return in->dst;
  }
  case AST_UNARY: {
    int x = operand(L, e->args[0], e->ty);
    return x < 0 ? -1 : emit1(L, binary_op(e->op), e->ty, x, e->loc);
  }
  case AST_BINARY:
    return lower_binary(L, e);
  case AST_TERNARY:
    return lower_ternary(L, e);
  case AST_CALL:
    return lower_call(L, e);
  case AST_SLICE:
    return lower_slice(L, e, 0.0);
  case AST_MEMBER: {
    const SoftmaxRegs *st = softmax_of(L, e);
    return !st ? -1 : e->member == MEMBER_MAX ? st->m : st->l;
  }
  case AST_METHOD: {
    const SoftmaxRegs *st = softmax_of(L, e);
    if (!st)
      return -1;
    if (e->method == METHOD_UPDATE)
      return softmax_update(L, st, e->args[0], e->loc);
    return softmax_finish(L, st, e->args[0], e->ty, e->loc);
  }
  default:
    return lower_error(L, e->loc, "internal error: expression cannot be lowered");
  }
}

/* ------------------------------------------------------------- statements */

static void lower_stmts(Lower *L, const AstStmt *s);

/* Writes value expression v (brought to dst's type) into register dst. When v's last
 * instruction produced a fresh temporary of exactly that type, it is retargeted instead of
 * copied, so `s = where(...)` is one SELECT into s. */
static void write_reg(Lower *L, int dst, const AstExpr *v, SrcLoc loc) {
  TileType t = *reg_type(L, dst);
  if (v->is_const) {
    TirInst *in = tir_emit(L->f, TIR_CONST, loc);
    in->dst = dst;
    in->imm = round_to_elem(t.elem, v->cval);
    return;
  }
  int r = coerce_reg(L, lower_expr(L, v), t, loc);
  if (r < 0)
    return;
  TirInst *last = L->f->ninsts ? &L->f->insts[L->f->ninsts - 1] : NULL;
  /* a WINDOW's result stays a register tile (a shared target gets a COPY of it) */
  bool keep = last && last->op == TIR_WINDOW && t.place == PLACE_SHARED;
  if (last && last->dst == r && !L->f->regs[r].name && last->op != TIR_FOR && !keep) {
    last->dst = dst;
    return;
  }
  TirInst *in = tir_emit(L->f, TIR_COPY, loc);
  in->dst = dst;
  in->args[0] = r;
}

static void lower_var(Lower *L, const AstStmt *s) {
  const AstDecl *d = s->decl;
  TileType t = d->ty;
  t.place = s->place == VAR_SHARED ? PLACE_SHARED : PLACE_REG;
  t.layout = NULL;
  int dst = tir_new_reg(L->f, t, d->name);
  L->decl_reg[d->id] = dst;
  if (s->value)
    write_reg(L, dst, s->value, s->loc);
  else
    emit_const(L, t, 0, s->loc), L->f->insts[L->f->ninsts - 1].dst = dst;
}

static void lower_assign(Lower *L, const AstStmt *s) {
  int dst = L->decl_reg[s->decl->id];
  if (dst < 0) {
    lower_error(L, s->loc, "internal error: assignment to an undeclared variable");
    return;
  }
  TileType t = *reg_type(L, dst);
  const AstExpr *v = s->value;
  if (s->assign_op == 0) {
    write_reg(L, dst, v, s->loc);
    return;
  }
  /* acc += dot(a, b): one DOT accumulating into acc */
  if (s->assign_op == OP_ADD && v->kind == AST_CALL && v->builtin == BI_DOT && !v->is_const &&
      t.elem == TY_F32 && tile_same_shape(&t, &v->ty)) {
    int r = lower_dot(L, v, dst);
    if (r >= 0)
      L->f->insts[L->f->ninsts - 1].dst = dst;
    return;
  }
  int x = operand(L, v, with_elem(t, t.elem));
  if (x < 0)
    return;
  TirInst *in = tir_emit(L->f, binary_op((AstOp)s->assign_op), s->loc);
  in->dst = dst;
  in->args[0] = dst;
  in->args[1] = x;
}

/* A store or an atomic update (op) of tensor slice tg with value. */
static void lower_write(Lower *L, TirOp op, const AstExpr *tg, const AstExpr *value, SrcLoc loc) {
  int starts[TILE_MAX_RANK];
  for (int i = 0; i < tg->nitems; i++) {
    const AstSliceItem *it = &tg->items[i];
    starts[i] = it->start ? operand(L, it->start, scalar_type(TY_I32))
                          : emit_const(L, scalar_type(TY_I32), 0, it->loc);
    if (starts[i] < 0)
      return;
  }
  int v = operand(L, value, with_elem(tg->ty, tg->ty.elem));
  if (v < 0)
    return;
  TirInst *in = tir_emit(L->f, op, loc);
  in->arg_index = tg->decl->index;
  in->args[0] = v;
  for (int i = 0; i < tg->nitems; i++) {
    in->index[i].is_range = tg->items[i].kind != SLICE_INDEX;
    in->index[i].start = starts[i];
    in->index[i].size = in->index[i].is_range ? tg->items[i].size : 1;
  }
}

/* x[a : +S, b : +T] = value of a shared tile: the value (with the box's axes) into the window,
 * WINDOW_STORE, which writes x in place. */
static void lower_window_store(Lower *L, const AstExpr *tg, const AstExpr *value, SrcLoc loc) {
  int starts[2];
  TileType box;
  int x = window_of(L, tg, starts, &box);
  if (x < 0)
    return;
  int v = operand(L, value, with_elem(tg->ty, tg->ty.elem));
  if (v < 0)
    return;
  if (box.rank != tg->ty.rank)
    v = emit1(L, TIR_RESHAPE, box, v, loc);
  TirInst *in = tir_emit(L->f, TIR_WINDOW_STORE, loc);
  in->dst = x;
  in->args[0] = v, in->args[1] = starts[0], in->args[2] = starts[1];
}

static void lower_for(Lower *L, const AstStmt *s) {
  int lo = operand(L, s->lo, scalar_type(TY_I32));
  int hi = operand(L, s->hi, scalar_type(TY_I32));
  int step = emit_const(L, scalar_type(TY_I32), s->step_value > 0 ? s->step_value : 1, s->loc);
  if (lo < 0 || hi < 0)
    return;
  int iv = tir_new_reg(L->f, scalar_type(TY_I32), s->decl->name);
  L->decl_reg[s->decl->id] = iv;
  TirInst *in = tir_emit(L->f, TIR_FOR, s->loc);
  in->dst = iv;
  in->args[0] = lo, in->args[1] = hi, in->args[2] = step;
  in->pipeline = s->pipeline_value > 0 ? s->pipeline_value : 1;
  lower_stmts(L, s->body);
  tir_emit(L->f, TIR_ENDFOR, s->loc);
}

static void lower_if(Lower *L, const AstStmt *s) {
  const AstExpr *c = s->value;
  if (c->is_const) { /* compile-time: only the taken branch */
    lower_stmts(L, c->cval != 0 ? s->body : s->els);
    return;
  }
  int cond = operand(L, c, scalar_type(TY_BOOL));
  if (cond < 0)
    return;
  tir_emit(L->f, TIR_IF, s->loc)->args[0] = cond;
  lower_stmts(L, s->body);
  if (s->els) {
    tir_emit(L->f, TIR_ELSE, s->loc);
    lower_stmts(L, s->els);
  }
  tir_emit(L->f, TIR_ENDIF, s->loc);
}

static void lower_softmax_decl(Lower *L, const AstStmt *s) {
  const AstDecl *d = s->decl;
  TileType rt = {.elem = TY_F32, .rank = 2, .dims = {s->rows_value, 1}};
  SoftmaxRegs *st = &L->softmax[d->id];
  st->rows = s->rows_value;
  st->st = s;
  st->scale = s->softmax_scale ? operand(L, s->softmax_scale, (TileType){.elem = TY_F32}) : -1;
  st->m = tir_new_reg(L->f, rt, arena_printf(L->a, "%s.max", d->name));
  st->l = tir_new_reg(L->f, rt, arena_printf(L->a, "%s.sum", d->name));
  TirInst *in = tir_emit(L->f, TIR_CONST, s->loc);
  in->dst = st->m, in->imm = -INFINITY;
  in = tir_emit(L->f, TIR_CONST, s->loc);
  in->dst = st->l, in->imm = 0;
}

/* An expression statement: an atomic update, or a value computed for its effect (st.update). */
static void lower_expr_stmt(Lower *L, const AstExpr *e) {
  if (e->kind == AST_CALL && (e->builtin == BI_ATOMIC_ADD || e->builtin == BI_ATOMIC_MAX))
    lower_write(L, e->builtin == BI_ATOMIC_ADD ? TIR_ATOMIC_ADD : TIR_ATOMIC_MAX, e->args[0], e->args[1],
                e->loc);
  else
    lower_expr(L, e);
}

static void lower_stmt(Lower *L, const AstStmt *s) {
  switch (s->kind) {
  case ST_BLOCK: lower_stmts(L, s->body); break;
  case ST_VAR: lower_var(L, s); break;
  case ST_ASSIGN: lower_assign(L, s); break;
  case ST_STORE:
    if (s->target->decl->kind == DECL_VAR)
      lower_window_store(L, s->target, s->value, s->loc);
    else
      lower_write(L, TIR_STORE, s->target, s->value, s->loc);
    break;
  case ST_FOR: lower_for(L, s); break;
  case ST_IF: lower_if(L, s); break;
  case ST_SOFTMAX: lower_softmax_decl(L, s); break;
  case ST_EXPR: lower_expr_stmt(L, s->value); break;
  case ST_REQUIRE: break; /* launch-time, in TirFunc.requires */
  }
}

static void lower_stmts(Lower *L, const AstStmt *s) {
  for (; s && !L->failed; s = s->next)
    lower_stmt(L, s);
}

/* ------------------------------------------------------------- the kernel header */

static void lower_header(Lower *L) {
  const AstKernel *k = L->k;
  TirFunc *f = L->f;
  f->threads = k->threads_value;
  f->cluster = k->cluster_value > 1 ? k->cluster_value : 1;
  f->params = arena_alloc(L->a, sizeof *f->params * (size_t)(k->nparams + 1));
  for (int i = 0; i < k->nparams; i++) /* type parameters live on in the args' element types */
    if (!k->params[i].is_type)
      f->params[f->nparams++] = (TirParamValue){k->params[i].name, k->params[i].is_float, k->params[i].value};
  f->ndims = k->ndims;
  f->dims = arena_alloc(L->a, sizeof *f->dims * (size_t)(k->ndims + 1));
  for (int i = 0; i < k->ndims; i++)
    f->dims[i] = (TirDim){k->dims[i].name, k->dims[i].pinned, k->dims[i].value, k->dims[i].derive};
  f->nargs = k->nargs;
  f->args = arena_alloc(L->a, sizeof *f->args * (size_t)(k->nargs + 1));
  for (int i = 0; i < k->nargs; i++) {
    const AstArg *a = &k->args[i];
    TirArg *t = &f->args[i];
    *t = (TirArg){.name = a->name, .kind = a->is_tensor ? ARG_TENSOR : ARG_SCALAR, .elem = a->elem,
                  .is_out = a->is_out, .rank = a->is_tensor ? a->rank : 0, .loc = a->loc};
    /* TILEC_ZERO_INIT=0 (an A/B only: the caller must then zero it) drops `= 0` */
    t->zero_init = a->init != NULL && !env_off("TILEC_ZERO_INIT");
    for (int d = 0; d < t->rank; d++)
      t->dims[d] = a->dims[d];
  }
  for (int i = 0; i < 3; i++) /* sema put them in the runtime's form */
    f->grid[i] = k->launch_grid[i];
  f->nrequires = k->nrequires;
  f->requires = k->launch_requires;
}

TirFunc *lower_tir(Arena *a, const AstKernel *k, Diag *d) {
  Lower L = {.a = a, .k = k, .d = d};
  L.f = tir_func_new(a, k->name, k->loc);
  int n = k->ndecls + 1;
  L.decl_reg = arena_alloc(a, sizeof *L.decl_reg * (size_t)n);
  L.softmax = arena_alloc(a, sizeof *L.softmax * (size_t)n);
  for (int i = 0; i < n; i++)
    L.decl_reg[i] = L.softmax[i].m = L.softmax[i].l = -1;
  lower_header(&L);
  if (!L.failed)
    lower_stmts(&L, k->body);
  /* The passes (and the verifier after each) run in the driver; lowering's own output is
   * checked here so a lowering bug is reported as such. */
  if (L.failed || !tir_verify(L.f, d, "lower_tir"))
    return NULL;
  return L.f;
}
