/* tir_guard.c — masks skipped where they cannot mask anything.
 *
 * A kernel masks the ragged edge of a tile with `where(index < N, x, fill)` and a causal
 * attention masks the diagonal with `where(row >= col, s, -inf)`. Written once in the loop
 * body, the mask costs an index computation, a compare and a select per element in every
 * iteration, although only the last (or the diagonal) iteration can have an element it changes.
 * This pass puts each such select, with the index tree only it reads, under
 *
 *     if (not all_true) { tree; x = select c, x, y }
 *
 * where all_true is a handful of scalar instructions bounding the index tree by intervals:
 * iota along an axis of n lies in [0, n - 1], a broadcast scalar s in [s, s], sums and
 * differences add the bounds. So `col_index(n0, BN) < N` holds everywhere when
 * n0 + BN - 1 < N, and `row_index(m0, BM) >= col_index(n0, BN)` when m0 >= n0 + BN - 1.
 * The interpreter runs the guarded IR too, so CI checks the bounds against every example.
 *
 * Bounds are "register + constant" (at most one scalar register per side); the guard also
 * checks that adding the constant does not overflow i32, so a wrapped index can never pass
 * for an in-range one. The tree moves into the IF only when it is its own (every register
 * written once, read by nothing else) and no scalar it reads is written between its use and
 * the select (so moved, it computes the same values). */
#include "tilec.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct Bound {
  int reg;        /* a scalar i32 register, or -1 */
  int64_t lo, hi; /* the values lie in [reg + lo, reg + hi] (reg counted as 0 when -1) */
} Bound;

/* One endpoint pair to compare: lhs.reg + lhs_c OP rhs.reg + rhs_c. The checks hold together,
 * but a check marked or_next holds with the next one or instead of it (an index that differs
 * from a scalar everywhere lies wholly below it or wholly above). */
typedef struct Check {
  int lreg, rreg;
  int64_t lc, rc;
  TirOp op; /* LT or LE */
  bool or_next;
} Check;

enum { GUARD_MAX_CHECKS = 8, GUARD_MAX_TREE = 64 };

typedef struct Guard {
  TirFunc *f;
  int *writes;   /* writes per register (whole function) */
  int sel;       /* the select */
  int tree[GUARD_MAX_TREE], ntree; /* instructions of the index tree */
  Check checks[GUARD_MAX_CHECKS];
  int nchecks;
  bool apart;    /* EQ / NE masks (tir_guard_onehots), not the orderings */
} Guard;

static int def_of(const TirFunc *f, int r, int before) {
  for (int i = before - 1; i >= 0; i--)
    if (f->insts[i].dst == r)
      return i;
  return -1;
}

/* A tree register: written once, by an instruction before the select at the same level. */
static int tree_def(Guard *g, int r) {
  if (g->writes[r] != 1 || g->ntree == GUARD_MAX_TREE)
    return -1;
  int d = def_of(g->f, r, g->sel);
  if (d < 0)
    return -1;
  for (int i = d + 1; i < g->sel; i++)
    if (tir_op_info[g->f->insts[i].op].flags & OPF_MARKER)
      return -1;
  for (int t = 0; t < g->ntree; t++)
    if (g->tree[t] == d)
      return d; /* a shared subtree moves once */
  g->tree[g->ntree++] = d;
  return d;
}

static bool bound_of(Guard *g, int r, Bound *b) {
  const TirFunc *f = g->f;
  if (tir_is_i32_scalar(f, r)) {
    *b = (Bound){r, 0, 0};
    return true;
  }
  if (f->regs[r].type.elem != TY_I32)
    return false;
  int d = tree_def(g, r);
  if (d < 0)
    return false;
  const TirInst *in = &f->insts[d];
  Bound x, y;
  switch (in->op) {
  case TIR_IOTA:
    *b = (Bound){-1, 0, f->regs[r].type.dims[in->axis] - 1};
    return true;
  case TIR_CONST:
    *b = (Bound){-1, (int64_t)in->imm, (int64_t)in->imm};
    return true;
  case TIR_BCAST:
    return bound_of(g, in->args[0], b);
  case TIR_ADD:
    if (!bound_of(g, in->args[0], &x) || !bound_of(g, in->args[1], &y) || (x.reg >= 0 && y.reg >= 0))
      return false;
    *b = (Bound){x.reg >= 0 ? x.reg : y.reg, x.lo + y.lo, x.hi + y.hi};
    return true;
  case TIR_SUB:
    if (!bound_of(g, in->args[0], &x) || !bound_of(g, in->args[1], &y) || y.reg >= 0)
      return false;
    *b = (Bound){x.reg, x.lo - y.hi, x.hi - y.lo};
    return true;
  default:
    return false;
  }
}

/* Every element of a < b (le: a <= b): a's largest below b's smallest. */
static bool add_check(Guard *g, int a, int b, TirOp op) {
  Bound x, y;
  if (g->nchecks == GUARD_MAX_CHECKS || !bound_of(g, a, &x) || !bound_of(g, b, &y))
    return false;
  g->checks[g->nchecks++] = (Check){x.reg, y.reg, x.hi, y.lo, op, false};
  return true;
}

/* Every element of a differs from b's: all of a below all of b, or all above. A one-hot mask
 * `where(col_index(n0, BN) == t, g, 0)` is then false in every chunk but the label's. */
static bool add_apart(Guard *g, int a, int b) {
  if (g->nchecks + 2 > GUARD_MAX_CHECKS || !add_check(g, a, b, TIR_LT))
    return false;
  g->checks[g->nchecks - 1].or_next = true;
  return add_check(g, b, a, TIR_LT);
}

/* Every element of `a OP b` is want (OP an ordering), as checks on their bounds. */
static bool all_ordered(Guard *g, TirOp op, int a, int b, bool want) {
  switch (op) {
  case TIR_LT: /* a < b everywhere, or b <= a everywhere */
    return want ? add_check(g, a, b, TIR_LT) : add_check(g, b, a, TIR_LE);
  case TIR_LE:
    return want ? add_check(g, a, b, TIR_LE) : add_check(g, b, a, TIR_LT);
  case TIR_GT:
    return want ? add_check(g, b, a, TIR_LT) : add_check(g, a, b, TIR_LE);
  case TIR_GE:
    return want ? add_check(g, b, a, TIR_LE) : add_check(g, a, b, TIR_LT);
  default:
    return false;
  }
}

/* Whether every element of bool register c is `want`, as checks on its bounds. */
static bool all_are(Guard *g, int c, bool want) {
  int d = tree_def(g, c);
  if (d < 0)
    return false;
  const TirInst *in = &g->f->insts[d];
  int a = in->args[0], b = in->args[1];
  switch (in->op) {
  case TIR_BCAST:
    return all_are(g, a, want);
  case TIR_NOT:
    return all_are(g, a, !want);
  case TIR_AND:
  case TIR_OR:
    if ((in->op == TIR_AND) != want)
      return false; /* some false / some true: either operand could say it */
    return all_are(g, a, want) && all_are(g, b, want);
  case TIR_LT: /* a < b everywhere, or b <= a everywhere */
  case TIR_LE:
  case TIR_GT:
  case TIR_GE:
    return !g->apart && all_ordered(g, in->op, a, b, want);
  case TIR_EQ:
    return g->apart && !want && add_apart(g, a, b);
  case TIR_NE:
    return g->apart && want && add_apart(g, a, b);
  default:
    return false;
  }
}

/* No tree register is read outside the tree and the select, and no scalar a tree instruction
 * reads is rewritten before the select. */
static bool tree_is_own(const Guard *g) {
  const TirFunc *f = g->f;
  for (int t = 0; t < g->ntree; t++) {
    const TirInst *ti = &f->insts[g->tree[t]];
    for (int i = 0; i < f->ninsts; i++) {
      bool inside = i == g->sel;
      for (int u = 0; u < g->ntree; u++)
        inside |= g->tree[u] == i;
      if (!inside && tir_inst_reads(&f->insts[i], ti->dst))
        return false;
    }
    for (int a = 0; a < 3; a++)
      for (int i = g->tree[t] + 1; ti->args[a] >= 0 && i < g->sel; i++)
        if (f->insts[i].dst == ti->args[a])
          return false;
  }
  return true;
}

/* ---------------------------------------------- rewriting */

static int out_const(TirOut *o, ElemType e, int64_t v) {
  int r = tir_new_reg(o->f, (TileType){.elem = e}, NULL);
  tir_out_inst(o, TIR_CONST, r, -1, -1)->imm = (double)v;
  return r;
}

static int out_op(TirOut *o, TirOp op, ElemType e, int a0, int a1) {
  return tir_out_new(o, op, (TileType){.elem = e}, a0, a1);
}

/* reg + c as an i32 scalar, and (in *ok, ANDed) that it does not overflow. */
static int out_side(TirOut *o, int reg, int64_t c, int *ok) {
  if (reg < 0)
    return out_const(o, TY_I32, c);
  if (c == 0)
    return reg;
  int limit = out_const(o, TY_I32, c > 0 ? INT_MAX - c : INT_MIN - c);
  int fits = out_op(o, c > 0 ? TIR_LE : TIR_GE, TY_BOOL, reg, limit);
  *ok = *ok < 0 ? fits : out_op(o, TIR_AND, TY_BOOL, *ok, fits);
  return out_op(o, TIR_ADD, TY_I32, reg, out_const(o, TY_I32, c));
}

/* One check's comparison, or -1 when a constant leaves i32. */
static int out_check(TirOut *o, const Check *c, int *ok) {
  if (c->lc < INT_MIN || c->lc > INT_MAX || c->rc < INT_MIN || c->rc > INT_MAX)
    return -1;
  int l = out_side(o, c->lreg, c->lc, ok), r = out_side(o, c->rreg, c->rc, ok);
  return out_op(o, c->op, TY_BOOL, l, r);
}

/* The guard's condition: some element may be masked (NOT of all checks and no overflow). */
static int out_condition(TirOut *o, const Guard *g) {
  int all = -1;
  for (int k = 0; k < g->nchecks; k++) {
    int holds = out_check(o, &g->checks[k], &all);
    while (holds >= 0 && g->checks[k].or_next && k + 1 < g->nchecks) {
      int other = out_check(o, &g->checks[++k], &all);
      holds = other < 0 ? -1 : out_op(o, TIR_OR, TY_BOOL, holds, other);
    }
    if (holds < 0)
      return -1;
    all = all < 0 ? holds : out_op(o, TIR_AND, TY_BOOL, all, holds);
  }
  return out_op(o, TIR_NOT, TY_BOOL, all, -1);
}

/* Whether register r holds the splat constant v (its one write a CONST of v, sign of zero too). */
static bool is_splat(const Guard *g, int r, double v) {
  int d = tir_only_write(g->f, r);
  return d >= 0 && g->f->insts[d].op == TIR_CONST && g->f->insts[d].imm == v &&
         signbit(g->f->insts[d].imm) == signbit(v);
}

/* The one reader of the select's result when the select's kept operand is that reader's identity
 * (x - 0, x + -0.0 or an integer x + 0, x * 1), so that it can move under the guard too and the
 * unmasked path copy its other operand (cross-entropy's `p * g - where(col == t, g, 0)`); -1 when
 * not. It must follow in straight-line code, with nothing in between touching its result or
 * writing its other operand. */
static int identity_user(const Guard *g, int kept) {
  const TirFunc *f = g->f;
  int r = f->insts[g->sel].dst, u = -1;
  if (g->writes[r] != 1)
    return -1;
  for (int i = 0; i < f->ninsts; i++)
    if (i != g->sel && tir_inst_reads(&f->insts[i], r)) {
      if (u >= 0 || i < g->sel)
        return -1;
      u = i;
    }
  if (u < 0)
    return -1;
  const TirInst *in = &f->insts[u];
  int other = in->args[0] == r ? in->args[1] : in->args[0];
  bool is_int = f->regs[r].type.elem == TY_I32;
  bool identity = (in->op == TIR_SUB && in->args[1] == r && in->args[0] != r && is_splat(g, kept, 0.0)) ||
                  (in->op == TIR_ADD && other != r && is_splat(g, kept, is_int ? 0.0 : -0.0)) ||
                  (in->op == TIR_MUL && other != r && is_splat(g, kept, 1.0));
  if (!identity)
    return -1;
  for (int i = g->sel + 1; i < u; i++) {
    const TirInst *w = &f->insts[i];
    if ((tir_op_info[w->op].flags & OPF_MARKER) || w->dst == other || w->dst == in->dst || tir_inst_reads(w, in->dst))
      return -1;
  }
  return u;
}

/* The select at g->sel, guarded; the instructions before it that are not the tree copied. */
static bool guard_select(Guard *g) {
  TirFunc *f = g->f;
  const TirInst *sel = &f->insts[g->sel];
  bool keeps_x = sel->dst == sel->args[1]; /* all true: dst stays x */
  bool keeps_y = sel->dst == sel->args[2];
  bool want = true;
  if (!keeps_x && keeps_y)
    want = false;
  g->ntree = g->nchecks = 0;
  bool bounded = all_are(g, sel->args[0], want);
  if (!bounded && g->apart && !keeps_x && !keeps_y) { /* a one-hot into a new register: all false */
    want = false;
    g->ntree = g->nchecks = 0;
    bounded = all_are(g, sel->args[0], want);
  }
  if (!bounded || !tree_is_own(g))
    return false;
  TirOut o = {f, NULL, 0, sel->loc};
  size_t extra = (size_t)(14 * g->nchecks + 8); /* out_check: up to 12 each, and AND / OR */
  o.insts = arena_alloc(f->arena, sizeof(TirInst) * ((size_t)f->ninsts + extra));
  bool *in_tree = calloc((size_t)f->ninsts + 1, sizeof *in_tree);
  if (!in_tree)
    return false;
  for (int t = 0; t < g->ntree; t++)
    in_tree[g->tree[t]] = true;
  for (int i = 0; i < g->sel; i++)
    if (!in_tree[i])
      o.insts[o.n++] = f->insts[i];
  TirInst s = *sel;
  int u = keeps_x || keeps_y ? -1 : identity_user(g, s.args[want ? 1 : 2]);
  if (u >= 0) { /* guard passes: the user gives its other operand */
    const TirInst *ui = &f->insts[u];
    tir_out_inst(&o, TIR_COPY, ui->dst, ui->args[0] == s.dst ? ui->args[1] : ui->args[0], -1);
  } else if (!keeps_x && !keeps_y) { /* guard passes: the select would have produced its kept operand */
    tir_out_inst(&o, TIR_COPY, s.dst, s.args[want ? 1 : 2], -1);
  }
  int cond = out_condition(&o, g);
  if (cond < 0) {
    free(in_tree);
    return false;
  }
  tir_out_inst(&o, TIR_IF, -1, cond, -1);
  for (int i = 0; i < g->sel; i++)
    if (in_tree[i])
      o.insts[o.n++] = f->insts[i];
  o.insts[o.n++] = s;
  if (u >= 0)
    o.insts[o.n++] = f->insts[u];
  tir_out_inst(&o, TIR_ENDIF, -1, -1, -1);
  for (int i = g->sel + 1; i < f->ninsts; i++)
    if (i != u)
      o.insts[o.n++] = f->insts[i];
  free(in_tree);
  f->insts = o.insts;
  f->ninsts = f->cap_insts = o.n;
  return true;
}

/* Whether the select at i is inside a loop (a mask outside one runs once: not worth a branch). */
static bool in_loop(const TirFunc *f, int i) {
  int depth = 0;
  for (int j = i - 1; j >= 0; j--) {
    TirOp op = f->insts[j].op;
    if (op == TIR_ENDFOR || op == TIR_ENDIF)
      depth++;
    else if (op == TIR_IF && depth > 0)
      depth--;
    else if (op == TIR_FOR) {
      if (depth == 0)
        return true;
      depth--;
    }
  }
  return false;
}

static bool guard_all(TirFunc *f, bool apart) {
  for (int i = 0; i < f->ninsts; i++) {
    if (f->insts[i].op != TIR_SELECT || !in_loop(f, i) || f->regs[f->insts[i].dst].type.rank == 0)
      continue;
    int *writes = calloc((size_t)f->nregs + 1, sizeof *writes);
    if (!writes)
      return true; /* an optimization: skipping it is correct */
    for (int k = 0; k < f->ninsts; k++)
      if (f->insts[k].dst >= 0)
        writes[f->insts[k].dst]++;
    Guard g = {.f = f, .writes = writes, .sel = i, .apart = apart};
    int before = f->ninsts;
    if (guard_select(&g))
      i += f->ninsts - before; /* past the moved tree, the guard and the ENDIF */
    free(writes);
  }
  return true;
}

bool tir_guard_masks(TirFunc *f, Diag *d) {
  (void)d;
  return env_off("TILEC_MASK_GUARD") || guard_all(f, false);
}

bool tir_guard_onehots(TirFunc *f, Diag *d) {
  (void)d;
  return env_off("TILEC_MASK_GUARD") || env_off("TILEC_ONEHOT_GUARD") || guard_all(f, true);
}
