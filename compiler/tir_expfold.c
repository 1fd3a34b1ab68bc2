/* tir_expfold.c — a broadcast factor folded into the exponential it scales.
 *
 * Cross-entropy's gradient `exp(x - lse) * gl` and online softmax's output `exp(x - max) / sum`
 * scale an exponential of a difference by a broadcast scalar: per element a subtract (which the
 * backend fuses with exp's log2(e) multiply into one FMA), an ex2 and a multiply. For c > 0,
 *
 *     exp(x - s) * c = exp(x - (s - log c))        exp(x - s) / c = exp(x - (s + log c))
 *
 * so the factor joins the broadcast operand, computed once, and each element pays the FMA and the
 * ex2 alone. c's sign is not known at compile time (a gradient can be negative, an ignored row's
 * is 0), so the element-wise part is versioned on a scalar test that every thread answers alike:
 *
 *     k = s - log c;  pos = c > 0
 *     if (pos) { m = exp(x - bcast k) } else { d = x - bcast s; e = exp d; m = e * c }
 *
 * c = 0 and -0 take the original path, so a zero (of either sign) comes out as before; a NaN c
 * too. The folded form rounds once more (log c), far below the f16/bf16 outputs these feed;
 * exp's own approximation (ex2.approx) is larger. Only where s and c are one-element tiles (a
 * row scalar: `gl`, `lse`, a one-row softmax state), the exponential and its difference feed
 * nothing else, and the three instructions lie in one straight-line block.
 * TILEC_EXP_FOLD=0 turns it off. */
#include "tilec.h"

typedef struct Fold {
  int mul;      /* m = e * c (or e / c) */
  int exp, sub; /* e = exp d;  d = x - sb */
  int sb, c;    /* the broadcasts of s and of c */
  int s, cs;    /* their one-element sources, not written between their broadcasts and the
                 * multiply: k and pos read them there (tir_hoist_invariants moves them out) */
} Fold;

/* Whether no instruction but `user` reads r. */
static bool read_only_by(const TirFunc *f, int r, int user) {
  for (int i = 0; i < f->ninsts; i++)
    if (i != user && tir_inst_reads(&f->insts[i], r))
      return false;
  return true;
}

/* The instruction writing r, when it is r's only write and has opcode op; else -1. */
static int single_def(const TirFunc *f, int r, TirOp op) {
  int d = r >= 0 ? tir_only_write(f, r) : -1;
  return d >= 0 && f->insts[d].op == op ? d : -1;
}

static bool written_between(const TirFunc *f, int r, int from, int to) {
  for (int i = from + 1; i < to; i++)
    if (f->insts[i].dst == r)
      return true;
  return false;
}

static bool one_f32(const TileType *t) { return t->elem == TY_F32 && t->place == PLACE_REG && tile_numel(t) == 1; }

/* e read only at fl->mul, written by an EXP of a SUB read only by it, whose subtrahend and the
 * factor are broadcasts of one-element f32 tiles of one type. */
static bool match_operands(const TirFunc *f, Fold *fl, int e, int c) {
  fl->exp = single_def(f, e, TIR_EXP);
  if (fl->exp < 0 || !read_only_by(f, e, fl->mul))
    return false;
  int d = f->insts[fl->exp].args[0];
  fl->sub = single_def(f, d, TIR_SUB);
  if (fl->sub < 0 || !read_only_by(f, d, fl->exp))
    return false;
  fl->sb = f->insts[fl->sub].args[1];
  int dsb = single_def(f, fl->sb, TIR_BCAST), dc = single_def(f, c, TIR_BCAST);
  if (dsb < 0 || dc < 0)
    return false;
  fl->c = c;
  fl->s = f->insts[dsb].args[0], fl->cs = f->insts[dc].args[0];
  const TileType *ts = &f->regs[fl->s].type, *tc = &f->regs[fl->cs].type;
  if (!one_f32(ts) || !one_f32(tc) || ts->rank != tc->rank)
    return false;
  return !written_between(f, fl->s, dsb, fl->mul) && !written_between(f, fl->cs, dc, fl->mul);
}

/* The sub, the exp and the multiply in one straight-line block, nothing between them writing
 * the sub's source (the sub moves down to the multiply). */
static bool straight(const TirFunc *f, const Fold *fl) {
  const TirInst *sub = &f->insts[fl->sub];
  for (int i = fl->sub + 1; i < fl->mul; i++) {
    const TirInst *in = &f->insts[i];
    if (i == fl->exp)
      continue;
    if ((tir_op_info[in->op].flags & OPF_MARKER) || in->dst == sub->args[0])
      return false;
  }
  return true;
}

static bool match(const TirFunc *f, int i, Fold *fl) {
  const TirInst *in = &f->insts[i];
  const TileType *t = &f->regs[in->dst].type;
  if ((in->op != TIR_MUL && in->op != TIR_DIV) || t->elem != TY_F32 || t->place != PLACE_REG || tile_numel(t) < 2)
    return false;
  fl->mul = i;
  if (match_operands(f, fl, in->args[0], in->args[1]) && straight(f, fl))
    return true;
  return in->op == TIR_MUL && match_operands(f, fl, in->args[1], in->args[0]) && straight(f, fl);
}

/* ------------------------------------------------------------ rewriting */

/* k = s -+ log cs and pos = cs > 0; returns pos, sets *kb to k's broadcast. */
static int put_scalars(TirOut *o, const Fold *fl, int *kb) {
  const TirFunc *f = o->f;
  TileType ts = f->regs[fl->s].type, scalar = {.elem = TY_F32};
  bool div = f->insts[fl->mul].op == TIR_DIV;
  int lc = tir_out_new(o, TIR_LOG, ts, fl->cs, -1);
  int k = tir_out_new(o, div ? TIR_ADD : TIR_SUB, ts, fl->s, lc);
  *kb = tir_out_new(o, TIR_BCAST, f->regs[fl->sb].type, k, -1);
  int c0 = ts.rank ? tir_out_new(o, TIR_RESHAPE, scalar, fl->cs, -1) : fl->cs;
  int zero = tir_new_reg(o->f, scalar, NULL);
  tir_out_inst(o, TIR_CONST, zero, -1, -1)->imm = 0.0;
  return tir_out_new(o, TIR_GT, (TileType){.elem = TY_BOOL}, c0, zero);
}

static void rewrite(TirFunc *f, const Fold *fl) {
  TirOut o = {f, NULL, 0, f->insts[fl->mul].loc};
  o.insts = arena_alloc(f->arena, sizeof(TirInst) * ((size_t)f->ninsts + 12));
  for (int i = 0; i < fl->mul; i++)
    if (i != fl->sub && i != fl->exp)
      o.insts[o.n++] = f->insts[i];
  int kb, pos = put_scalars(&o, fl, &kb);
  const TirInst *sub = &f->insts[fl->sub], *m = &f->insts[fl->mul];
  tir_out_inst(&o, TIR_IF, -1, pos, -1);
  int d2 = tir_out_new(&o, TIR_SUB, f->regs[sub->dst].type, sub->args[0], kb);
  tir_out_inst(&o, TIR_EXP, m->dst, d2, -1);
  tir_out_inst(&o, TIR_ELSE, -1, -1, -1);
  o.insts[o.n++] = *sub;
  o.insts[o.n++] = f->insts[fl->exp];
  o.insts[o.n++] = *m;
  tir_out_inst(&o, TIR_ENDIF, -1, -1, -1);
  for (int i = fl->mul + 1; i < f->ninsts; i++)
    o.insts[o.n++] = f->insts[i];
  f->insts = o.insts;
  f->ninsts = f->cap_insts = o.n;
}

bool tir_fold_exp_scale(TirFunc *f, Diag *d) {
  (void)d;
  if (env_off("TILEC_EXP_FOLD"))
    return true;
  for (int i = 0; i < f->ninsts; i++) {
    Fold fl;
    if (match(f, i, &fl)) {
      int before = f->ninsts;
      rewrite(f, &fl);
      i += f->ninsts - before; /* past the scalars, the IF, ELSE and ENDIF */
    }
  }
  return true;
}
