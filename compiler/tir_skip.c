/* tir_skip.c — a warpgroup skips the products of the iterations whose mask hides all its rows.
 *
 * A causal attention with 256-row query tiles and 64-key iterations gives each of its four
 * consumer warpgroups a band of 64 rows. On the diagonal, the keys of 6 of the 16 (warpgroup,
 * iteration) pairs lie wholly above the band's rows: `where(row >= col, s, -inf)` turns every
 * score of the band into -inf, P is 0 there, and yet each such pair costs two products (25% of
 * the tensor work at N = 512, 8% at 2k). This pass (warp-specialized entry, a loop that is not
 * rotated) puts those products under the band's condition:
 *
 *     %r = wg_row0 band 64 of 4      the first row of this warpgroup's band (before the loop)
 *     alive = not (some mask select of S is false on every element of the band, and scale > 0)
 *     if alive { S = dot(Q, K^T) } else { S = 0 }
 *     ... masks, softmax: as before ...
 *     if alive { acc = dot(P, V, acc) }
 *
 * The band's bound comes from intervals as in tir_guard.c: `row_index(m0, BM) >= col_index(n0,
 * BN)` is false on the band when m0 + r + band - 1 < n0. Why it is exact: whatever S holds, the
 * mask select runs (at the body's top level, or under its guard, which is taken whenever the
 * select changes an element) and writes -inf over the band before anything else reads S; the
 * pass then evaluates the instructions that compute from S abstractly, with S = -inf on the band
 * and each multiplier of it positive (checked at run time), and requires every product's A to
 * come out 0: p = exp(-inf - base) = 0, base being never infinite. So P V adds nothing. (A V
 * holding inf or NaN in a masked key would make 0 V NaN; skipped, it does not.) The softmax
 * itself runs as before; only the products are left out. Every synchronization (stage waits and
 * releases) stays common to all warpgroups, which tir_verify_schedule checks: a condition from
 * wg_row0 guards one DOT and nothing else.
 *
 * Only where it can fire: a mask whose bound involves the band (`col < N` holds for the whole
 * tile alike: the loop's bounds see to it) and a loop stepping by fewer keys than S has rows (at
 * 128 x 128 tiles the diagonal block spans both bands). A rotated loop is left alone: its
 * products are in flight across iterations, and ptxas serializes predicated async wgmmas there
 * (C7520, C7515). TILEC_SKIP_MASKED=0 turns the pass off (the A/B). */
#include "layout.h"
#include "tilec.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum { SKIP_MAX_CHECKS = 4, LIN_MAX_REGS = 3, SKIP_MAX_SCALES = 2, WG_ROW = -2 };
/* Bounds stay small and every register of a sum is checked to lie in [0, LIN_REG_MAX] at run
 * time, so the sums of a check never overflow i32. */
#define LIN_CONST_MAX (1 << 20)
#define LIN_REG_MAX ((INT32_MAX - LIN_CONST_MAX) / LIN_MAX_REGS)

/* Every element of an i32 index tile lies in [sum(regs) + lo, sum(regs) + hi]; a register is a
 * scalar (WG_ROW: the band's first row). */
typedef struct Lin {
  int regs[LIN_MAX_REGS], nregs;
  int64_t lo, hi;
} Lin;

/* The mask select `sel` is false on the whole band when sum(lhs) + lc < (<=) sum(rhs) + rc. */
typedef struct DeadCheck {
  int sel;
  Lin lhs, rhs;
  int64_t lc, rc;
  bool strict;
} DeadCheck;

/* Abstract values of the skipped instructions' registers, row by row over the band. */
typedef enum {
  AV_UNK,
  AV_NEGINF,  /* -inf */
  AV_ZERO,    /* 0 */
  AV_SCALAR,  /* a scalar r the loop does not write (a multiplier: checked > 0) */
  AV_OLD,     /* r's value before the iteration */
  AV_ISNINF,  /* old(r) == -inf */
  AV_BASE     /* select(old(r) == -inf, 0, old(r)): finite (for finite scores) */
} AvKind;

typedef struct Av {
  AvKind k;
  int r;
} Av;

typedef struct Skip {
  TirFunc *g;
  TirPipe *p;
  int S;                     /* the scores: the rotated DOT's result */
  int rows, band, bands;     /* S's rows; rows per consumer warpgroup; warpgroups */
  bool *tainted;             /* per instruction: computes from S (skipped) */
  bool *treg;                /* per register: S, or written by a tainted instruction */
  DeadCheck checks[SKIP_MAX_CHECKS];
  int nchecks;
  int scales[SKIP_MAX_SCALES], nscales;
  Av *av;
} Skip;

static bool in_body(const Skip *k, int j) { return j > k->p->first && j < k->p->last; }

static bool is_sync(TirOp op) {
  return op == TIR_PIPE_WAIT || op == TIR_PIPE_RELEASE || op == TIR_DOT_WAIT || op == TIR_WG_TURN ||
         op == TIR_WG_PASS || op == TIR_HEAD_WAIT || op == TIR_HEAD_RELEASE;
}

static bool is_marker(TirOp op) { return tir_op_info[op].flags & OPF_MARKER; }

static int def_before(const TirFunc *f, int r, int before) {
  for (int i = before - 1; i >= 0; i--)
    if (f->insts[i].dst == r)
      return i;
  return -1;
}

static bool written_in_body(const Skip *k, int r) {
  for (int j = k->p->first; j < k->p->last; j++)
    if (k->g->insts[j].dst == r)
      return true;
  return false;
}

static int match_endif(const TirFunc *f, int j) {
  for (int i = j + 1, depth = 0; i < f->ninsts; i++) {
    TirOp op = f->insts[i].op;
    depth += op == TIR_IF || op == TIR_FOR;
    if (op == TIR_ENDIF || op == TIR_ENDFOR) {
      if (depth == 0)
        return i;
      depth--;
    }
  }
  return f->ninsts - 1;
}

/* ---------------------------------------------- the band's bounds */

/* A scalar i32 a check can read at the top of the body: the loop variable, a register the body
 * does not write, or one the body writes once with a leaf (re-emitted there). */
static bool checkable_scalar(const Skip *k, int r) {
  const TirFunc *f = k->g;
  if (f->regs[r].type.rank != 0 || f->regs[r].type.elem != TY_I32)
    return false;
  if (r == f->insts[k->p->first].dst || !written_in_body(k, r))
    return true;
  int d = tir_only_write(f, r);
  return d >= 0 && (f->insts[d].op == TIR_DIM || f->insts[d].op == TIR_PARAM);
}

static bool lin_add(Lin *a, const Lin *b, int sign) {
  if (sign < 0 && b->nregs)
    return false;
  if (a->nregs + b->nregs > LIN_MAX_REGS)
    return false;
  for (int i = 0; i < b->nregs; i++)
    a->regs[a->nregs++] = b->regs[i];
  if (sign > 0)
    a->lo += b->lo, a->hi += b->hi;
  else
    a->lo -= b->hi, a->hi -= b->lo;
  return llabs(a->lo) < LIN_CONST_MAX && llabs(a->hi) < LIN_CONST_MAX;
}

static bool lin_of(const Skip *k, int r, int before, Lin *out) {
  const TirFunc *f = k->g;
  const TileType *t = &f->regs[r].type;
  memset(out, 0, sizeof *out);
  if (t->elem != TY_I32)
    return false;
  if (checkable_scalar(k, r)) {
    out->regs[out->nregs++] = r;
    return true;
  }
  int d = def_before(f, r, before);
  if (d < 0)
    return false;
  const TirInst *in = &f->insts[d];
  Lin b;
  switch (in->op) {
  case TIR_CONST:
    if (fabs(in->imm) >= LIN_CONST_MAX)
      return false;
    out->lo = out->hi = (int64_t)in->imm;
    return true;
  case TIR_IOTA:
    if (t->rank != 2 || in->axis < 0 || in->axis > 1)
      return false;
    if (in->axis == 1 || t->dims[0] == 1) {
      out->hi = t->dims[in->axis] - 1;
      return true;
    }
    if (t->dims[0] != k->rows)
      return false;
    out->regs[out->nregs++] = WG_ROW;
    out->hi = k->band - 1;
    return true;
  case TIR_BCAST:
    return lin_of(k, in->args[0], d, out);
  case TIR_ADD:
  case TIR_SUB:
    return lin_of(k, in->args[0], d, out) && lin_of(k, in->args[1], d, &b) &&
           lin_add(out, &b, in->op == TIR_ADD ? 1 : -1);
  default:
    return false;
  }
}

/* sel: S = select c, S, fill. A check when fill is -inf and c = cmp(a, b) is bounded. */
static bool plan_check(Skip *k, int sel) {
  const TirFunc *f = k->g;
  const TirInst *in = &f->insts[sel];
  int fd = def_before(f, in->args[2], sel);
  if (fd < 0 || f->insts[fd].op != TIR_CONST || !isinf(f->insts[fd].imm) || f->insts[fd].imm > 0)
    return false;
  int cd = def_before(f, in->args[0], sel);
  if (cd < 0 || k->nchecks == SKIP_MAX_CHECKS)
    return false;
  const TirInst *c = &f->insts[cd];
  if (c->op == TIR_BCAST) { /* a [1, n] or [rows, 1] condition broadcast to S's shape */
    cd = def_before(f, c->args[0], cd);
    if (cd < 0)
      return false;
    c = &f->insts[cd];
  }
  Lin a, b;
  if (!(tir_op_info[c->op].flags & OPF_CMP) || !lin_of(k, c->args[0], cd, &a) || !lin_of(k, c->args[1], cd, &b))
    return false;
  DeadCheck *ck = &k->checks[k->nchecks];
  ck->sel = sel;
  switch (c->op) {
  case TIR_GE: /* a >= b nowhere: a.hi < b.lo */
  case TIR_GT: /* a > b nowhere: a.hi <= b.lo */
    ck->lhs = a, ck->lc = a.hi, ck->rhs = b, ck->rc = b.lo, ck->strict = c->op == TIR_GE;
    break;
  case TIR_LT: /* a < b nowhere: b.hi <= a.lo */
  case TIR_LE: /* a <= b nowhere: b.hi < a.lo */
    ck->lhs = b, ck->lc = b.hi, ck->rhs = a, ck->rc = a.lo, ck->strict = c->op == TIR_LE;
    break;
  default:
    return false;
  }
  /* a bound without the band's rows holds for the whole tile alike: the loop's own business */
  bool band = false;
  for (int i = 0; i < ck->lhs.nregs; i++)
    band |= ck->lhs.regs[i] == WG_ROW;
  for (int i = 0; i < ck->rhs.nregs; i++)
    band |= ck->rhs.regs[i] == WG_ROW;
  if (band)
    k->nchecks++;
  return band;
}

/* ---------------------------------------------- what the scores feed */

static bool is_s_dot(const Skip *k, const TirInst *in) { return in->op == TIR_DOT && in->dst == k->S; }

static bool is_mask_select(const Skip *k, const TirInst *in) {
  return in->op == TIR_SELECT && in->dst == k->S && in->args[1] == k->S;
}

static void taint(Skip *k) {
  const TirFunc *f = k->g;
  k->treg[k->S] = true;
  for (bool more = true; more;) {
    more = false;
    for (int j = k->p->first + 1; j < k->p->last; j++) {
      const TirInst *in = &f->insts[j];
      if (k->tainted[j] || is_marker(in->op) || is_sync(in->op) || is_s_dot(k, in))
        continue;
      for (int a = 0; a < 3; a++)
        if (in->args[a] >= 0 && k->treg[in->args[a]]) {
          k->tainted[j] = more = true;
          if (in->dst >= 0)
            k->treg[in->dst] = true;
          break;
        }
    }
  }
}

/* Tainted instructions keep to the band's rows: elementwise work, row reductions, and a DOT
 * whose A is tainted (its rows are A's); nothing else writes what they write. */
static bool taint_ok(const Skip *k) {
  const TirFunc *f = k->g;
  for (int j = 0; j < f->ninsts; j++) {
    const TirInst *in = &f->insts[j];
    if (in->dst < 0 || !k->treg[in->dst] || in->dst == k->S)
      continue;
    if (!in_body(k, j) || !k->tainted[j]) {
      if (in_body(k, j))
        return false; /* written in the loop by something else too */
      continue;       /* its initial value (or a use after the loop) */
    }
  }
  for (int j = k->p->first + 1; j < k->p->last; j++) {
    const TirInst *in = &f->insts[j];
    if (!k->tainted[j])
      continue;
    if (in->dst < 0)
      return false;
    const TileType *t = &f->regs[in->dst].type;
    if (t->rank != 2 || t->dims[0] != k->rows || t->place == PLACE_SHARED)
      return false;
    unsigned fl = tir_op_info[in->op].flags;
    bool ok = (fl & OPF_ELEMWISE) || in->op == TIR_CVT || in->op == TIR_BCAST ||
              ((in->op == TIR_REDUCE_MAX || in->op == TIR_REDUCE_SUM) && in->axis == 1) ||
              (in->op == TIR_DOT && k->treg[in->args[0]] && !k->treg[in->args[1]] && in->args[2] == in->dst);
    if (!ok)
      return false;
    if (in->op == TIR_BCAST && f->regs[in->args[0]].type.rank != 2)
      return false;
  }
  return true;
}

/* ---------------------------------------------- the skipped instructions, evaluated */

static Av av(AvKind kind, int r) { return (Av){kind, r}; }

/* The value of a register the skipped instructions do not write (computed either way). */
static Av outside_value(const Skip *k, int r, int at) {
  const TirFunc *f = k->g;
  int d = def_before(f, r, at);
  if (f->regs[r].type.rank == 0 && f->regs[r].type.elem == TY_F32 && !written_in_body(k, r))
    return av(AV_SCALAR, r);
  if (d < 0)
    return av(AV_UNK, -1);
  const TirInst *in = &f->insts[d];
  if (in->op == TIR_CONST)
    return av(isinf(in->imm) && in->imm < 0 ? AV_NEGINF : in->imm == 0 ? AV_ZERO : AV_UNK, -1);
  if (in->op == TIR_BCAST)
    return outside_value(k, in->args[0], d);
  return av(AV_UNK, -1);
}

static bool eq(Av a, AvKind kind) { return a.k == kind; }

static Av eval(Skip *k, const TirInst *in, const Av *x, int dead_sel, int j) {
  switch (in->op) {
  case TIR_SELECT:
    if (j == dead_sel)
      return av(AV_NEGINF, -1);
    if (is_mask_select(k, in) && eq(x[1], AV_NEGINF) && eq(x[2], AV_NEGINF))
      return av(AV_NEGINF, -1);
    if (eq(x[0], AV_ISNINF) && eq(x[1], AV_ZERO) && eq(x[2], AV_OLD) && x[2].r == x[0].r)
      return av(AV_BASE, x[0].r);
    return av(AV_UNK, -1);
  case TIR_REDUCE_MAX:
  case TIR_BCAST:
  case TIR_COPY:
    return x[0];
  case TIR_REDUCE_SUM:
  case TIR_CVT:
    return eq(x[0], AV_ZERO) || eq(x[0], AV_NEGINF) ? x[0] : av(AV_UNK, -1);
  case TIR_MUL:
    for (int s = 0; s < 2; s++) {
      Av a = x[s], b = x[1 - s];
      if (eq(a, AV_NEGINF) && eq(b, AV_SCALAR)) {
        for (int i = 0; i < k->nscales; i++)
          if (k->scales[i] == b.r)
            return a;
        if (k->nscales == SKIP_MAX_SCALES)
          return av(AV_UNK, -1);
        k->scales[k->nscales++] = b.r;
        return a;
      }
    }
    return av(AV_UNK, -1);
  case TIR_MAX:
    if (eq(x[0], AV_NEGINF))
      return x[1];
    return eq(x[1], AV_NEGINF) ? x[0] : av(AV_UNK, -1);
  case TIR_EQ:
    if (eq(x[0], AV_OLD) && eq(x[1], AV_NEGINF))
      return av(AV_ISNINF, x[0].r);
    return av(AV_UNK, -1);
  case TIR_SUB:
    if (eq(x[0], AV_NEGINF) && eq(x[1], AV_BASE)) /* base is finite */
      return x[0];
    return av(AV_UNK, -1);
  case TIR_EXP:
  case TIR_EXP2:
    return eq(x[0], AV_NEGINF) ? av(AV_ZERO, -1) : av(AV_UNK, -1);
  case TIR_ADD:
    if (eq(x[1], AV_ZERO))
      return x[0];
    return eq(x[0], AV_ZERO) ? x[1] : av(AV_UNK, -1);
  case TIR_DOT: /* acc += 0 B */
    return eq(x[0], AV_ZERO) ? x[2] : av(AV_UNK, -1);
  default:
    return av(AV_UNK, -1);
  }
}

/* ---------------------------------------------- rewriting the loop */

typedef struct Out {
  TirFunc *g;
  TirInst *insts;
  int n;
  int *map;
  SrcLoc loc;
  int like; /* a scalar register */
} Out;

static TirInst *put(Out *o, TirOp op, int dst, int a0, int a1) {
  TirInst *in = &o->insts[o->n++];
  *in = (TirInst){.op = op, .dst = dst, .args = {a0, a1, -1}, .arg_index = -1, .pipeline = 1, .loc = o->loc};
  return in;
}

/* A new scalar register, with the loop variable's layout (a scalar's: the schedule runs after
 * the layout pass). */
static int scalar(Out *o, ElemType e) {
  return tir_new_reg(o->g, (TileType){.elem = e, .layout = o->g->regs[o->like].type.layout}, NULL);
}

static int put_const(Out *o, ElemType e, double v) {
  int r = scalar(o, e);
  put(o, TIR_CONST, r, -1, -1)->imm = v;
  return r;
}

/* sum(l's registers) + c, each register checked into [0, LIN_REG_MAX] (ANDed into *ok). */
static int put_sum(Out *o, const Skip *k, const Lin *l, int64_t c, int wgrow, int *ok) {
  int sum = put_const(o, TY_I32, (double)c);
  for (int i = 0; i < l->nregs; i++) {
    int r = l->regs[i];
    if (r == WG_ROW)
      r = wgrow;
    else if (r != k->g->insts[k->p->first].dst && written_in_body(k, r)) { /* a leaf the body computes: again here */
      TirInst copy = k->g->insts[tir_only_write(k->g, r)];
      copy.dst = scalar(o, TY_I32);
      copy.loc = o->loc;
      o->insts[o->n++] = copy;
      r = copy.dst;
    }
    int lo = scalar(o, TY_BOOL), hi = scalar(o, TY_BOOL), in_range = scalar(o, TY_BOOL), both = scalar(o, TY_BOOL);
    put(o, TIR_GE, lo, r, put_const(o, TY_I32, 0));
    put(o, TIR_LE, hi, r, put_const(o, TY_I32, LIN_REG_MAX));
    put(o, TIR_AND, in_range, lo, hi);
    put(o, TIR_AND, both, *ok, in_range);
    *ok = both;
    int next = scalar(o, TY_I32);
    put(o, TIR_ADD, next, sum, r);
    sum = next;
  }
  return sum;
}

/* alive: no check finds the band masked out in this iteration. */
static int put_alive(Out *o, const Skip *k, int wgrow) {
  int dead = put_const(o, TY_BOOL, 0);
  for (int c = 0; c < k->nchecks; c++) {
    const DeadCheck *ck = &k->checks[c];
    int ok = put_const(o, TY_BOOL, 1);
    int l = put_sum(o, k, &ck->lhs, ck->lc, wgrow, &ok);
    int r = put_sum(o, k, &ck->rhs, ck->rc, wgrow, &ok);
    int below = scalar(o, TY_BOOL), this_dead = scalar(o, TY_BOOL), any = scalar(o, TY_BOOL);
    put(o, ck->strict ? TIR_LT : TIR_LE, below, l, r);
    put(o, TIR_AND, this_dead, ok, below);
    put(o, TIR_OR, any, dead, this_dead);
    dead = any;
  }
  for (int s = 0; s < k->nscales; s++) {
    int pos = scalar(o, TY_BOOL), both = scalar(o, TY_BOOL);
    put(o, TIR_GT, pos, k->scales[s], put_const(o, TY_F32, 0));
    put(o, TIR_AND, both, dead, pos);
    dead = both;
  }
  int alive = scalar(o, TY_BOOL);
  put(o, TIR_NOT, alive, dead, -1);
  return alive;
}

static void copy_inst(Out *o, const TirFunc *f, int j) {
  o->map[j] = o->n;
  o->insts[o->n++] = f->insts[j];
}

/* The DOT at j under `if cond` of its own. */
static void put_guarded(Out *o, const TirFunc *f, int j, int cond) {
  o->loc = f->insts[j].loc;
  put(o, TIR_IF, -1, cond, -1);
  copy_inst(o, f, j);
  put(o, TIR_ENDIF, -1, -1, -1);
}

/* The products a skipping warpgroup leaves out: S's zero-accumulator DOTs, and the DOTs whose A
 * is zero on the band. */
static bool skipped_dot(const Skip *k, int j) {
  const TirInst *in = &k->g->insts[j];
  return in->op == TIR_DOT && (in->dst == k->S || k->tainted[j]);
}

static void rewrite(Skip *k) {
  TirFunc *f = k->g;
  TirPipe *p = k->p;
  Out o = {f, arena_alloc(f->arena, sizeof(TirInst) * (size_t)(f->ninsts + 16 + 96 * k->nchecks)), 0,
           arena_alloc(f->arena, sizeof(int) * (size_t)(f->ninsts + 1)), f->insts[p->first].loc, f->insts[p->first].dst};
  int alive = -1;
  for (int j = 0; j < f->ninsts; j++) {
    const TirInst *in = &f->insts[j];
    if (j == p->first) {
      int wgrow = scalar(&o, TY_I32);
      TirInst *w = put(&o, TIR_WG_ROW0, wgrow, -1, -1);
      w->imm = k->band, w->axis = k->bands;
      copy_inst(&o, f, j);
      alive = put_alive(&o, k, wgrow);
    } else if (in_body(k, j) && skipped_dot(k, j)) {
      put_guarded(&o, f, j, alive);
      if (in->dst == k->S) { /* zeros on the skipping path: S is not carried round the loop */
        o.insts[o.n - 1].op = TIR_ELSE;
        put(&o, TIR_CONST, in->dst, -1, -1)->imm = 0;
        put(&o, TIR_ENDIF, -1, -1, -1);
      }
    } else {
      copy_inst(&o, f, j);
    }
  }
  o.map[f->ninsts] = o.n;
  tir_schedule_remap(f, o.map);
  f->insts = o.insts;
  f->ninsts = f->cap_insts = o.n;
}

/* S's readers before the select that masks the band out are mask selects (what the skipped
 * DOT leaves in S never gets further), and that select runs whenever it changes an element: at
 * the body's top level, or under its guard. */
static bool garbage_masked(const Skip *k, int sel) {
  const TirFunc *f = k->g;
  for (int j = k->p->first + 1; j < sel; j++) {
    const TirInst *in = &f->insts[j];
    if (tir_inst_reads(in, k->S) && !is_sync(in->op) && !is_mask_select(k, in))
      return false;
  }
  int depth = tir_nest_depth(f, k->p->first, sel);
  if (depth == 0)
    return true;
  int open = sel - 1;
  while (open > k->p->first && f->insts[open].op != TIR_IF)
    open--;
  return depth == 1 && f->insts[open].imm == 1 && match_endif(f, open) > sel;
}

/* Every skipped DOT but S's reads a zero A on the band when check c's select masks it out. */
static bool zero_products_when(Skip *k, int dead_sel) {
  const TirFunc *f = k->g;
  bool *seen = calloc((size_t)f->nregs + 1, 1), ok = seen != NULL;
  for (int j = k->p->first + 1; ok && j < k->p->last; j++) {
    const TirInst *in = &f->insts[j];
    if (!k->tainted[j])
      continue;
    Av x[3] = {{AV_UNK, -1}, {AV_UNK, -1}, {AV_UNK, -1}};
    for (int a = 0; a < 3; a++) {
      int r = in->args[a];
      if (r < 0)
        continue;
      if (r == k->S)
        x[a] = seen[r] ? k->av[r] : av(AV_UNK, -1);
      else if (k->treg[r])
        x[a] = seen[r] ? k->av[r] : av(AV_OLD, r);
      else
        x[a] = outside_value(k, r, j);
    }
    if (in->op == TIR_DOT && !eq(x[0], AV_ZERO))
      ok = false;
    k->av[in->dst] = eval(k, in, x, dead_sel, j);
    seen[in->dst] = true;
  }
  free(seen);
  return ok;
}

/* ---------------------------------------------- the pass */

bool tir_skip_masked_rows(TirFunc *g, TirPipe *p) {
  const TirSchedule *s = g->sched;
  /* Not in a rotated loop: its products are in flight across the iteration, and ptxas
   * serializes predicated async wgmmas there (C7520, C7515). */
  if (env_off("TILEC_SKIP_MASKED") || !s || !s->ws || s->groups != 1 || p->rotated)
    return false;
  /* S: the one register the loop's zero-accumulator DOTs write */
  Skip k = {.g = g, .p = p, .S = -1};
  int d = -1, wgm, wgn, warpgroups = s->consumer_threads / 128;
  for (int j = p->first + 1; j < p->last; j++) {
    const TirInst *in = &g->insts[j];
    if (in->op != TIR_DOT || !tir_is_zero_tile(g, in->args[2]))
      continue;
    if (k.S >= 0 && in->dst != k.S)
      return false;
    d = j, k.S = in->dst;
  }
  if (d < 0 || !layout_dot_wgmma_tiling(g, &g->insts[d], &wgm, &wgn) || wgn != 1 || wgm != warpgroups || wgm < 2)
    return false;
  k.rows = g->regs[k.S].type.dims[0];
  k.bands = wgm;
  k.band = k.rows / wgm;
  /* Only a loop that steps by fewer than S's rows can have an iteration whose keys miss a band
   * wholly: at 128 x 128 tiles the diagonal block spans both bands, and a check that never
   * fires would only cost its branches. */
  int step = tir_only_write(g, g->insts[p->first].args[2]);
  if (step < 0 || g->insts[step].op != TIR_CONST || g->insts[step].imm >= k.rows)
    return false;
  for (int j = p->first + 1; j < p->last; j++)
    if (is_mask_select(&k, &g->insts[j]))
      plan_check(&k, j);
  if (!k.nchecks)
    return false;
  k.tainted = calloc((size_t)g->ninsts, 1);
  k.treg = calloc((size_t)g->nregs + 1, 1);
  k.av = calloc((size_t)g->nregs + 1, sizeof *k.av);
  bool ok = k.tainted && k.treg && k.av;
  if (ok) {
    taint(&k);
    ok = taint_ok(&k);
  }
  /* synchronous products only: one in flight at the branch's join is serialized (C7515) */
  for (int j = p->first + 1; ok && j < p->last; j++)
    if (skipped_dot(&k, j) && (g->insts[j].imm == 1 || j == p->overlap_dot || tir_nest_depth(g, p->first, j)))
      ok = false;
  for (int c = 0; ok && c < k.nchecks; c++)
    ok = garbage_masked(&k, k.checks[c].sel) && zero_products_when(&k, k.checks[c].sel);
  if (ok)
    rewrite(&k);
  free(k.tainted);
  free(k.treg);
  free(k.av);
  return ok;
}
