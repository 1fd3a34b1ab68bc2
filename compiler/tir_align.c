/* tir_align.c — chunk loops over a row start at the row's 16-byte boundary.
 *
 * `for n0 in 0 .. N step BN { x = X[r, n0 : +BN]; ... }` walks a row in chunks. A row that does
 * not start on a 16-byte boundary (a row of 50257 f16 logits does one time in 8) puts every chunk
 * across two granules, and its copies, reads and stores take the shifted paths of the GPU
 * lowering. Started s elements earlier,
 *
 *     %s = row_shift X[r, 0];  for n0 in 0 - s .. N step BN
 *
 * the chunks lie on the row's granules: the first begins with s columns before the row, which
 * read the load's fill as the columns past N of the last chunk do. The loop must run from column
 * 0 to the row length N of every tensor it windows (so both placements cover the same real
 * columns), and the rewrite is legal when the body cannot tell the difference:
 *   - the loop variable only starts windows of the loop's step along the tensors' last dim
 *     (loads; stores and atomics, which never write a column outside the tensor) and column
 *     indices (`col_index(n0, BN)`: iota plus the variable);
 *   - every value computed from a window reaches only stores and atomics of a window, and
 *     reductions along the window whose input at a fill column is their identity (sum 0,
 *     max -inf, min +inf): nothing else leaves an iteration;
 *   - nothing depends on where the chunks begin: what a window store writes comes from its
 *     columns and values fixed before the loop (a store into a copied row's window, its columns
 *     past the row written differently by the two placements, only where no later read of the
 *     tile depends on them: later_windows_blind), and every value the loop carries (read before its
 *     write in the body, or after the loop) is a running max or min of a reduction, a running
 *     sum of one, or the sum of exponentials rescaled to a running max, s = s exp(m - c) +
 *     sum(exp(y - c)) with c the new max (or the `softmax` construct's c: 0 where it is -inf),
 *     whose reductions read only the columns and values fixed before the loop.
 * The value at a fill column comes from evaluating the body there: a load gives its fill, a value
 * from outside the windows (the same at every column) is taken to be finite, so -inf - m = -inf,
 * exp(-inf) = 0 and 0 * g = 0 (cross-entropy's running max and sum of exp(x - m) over chunks
 * filled with -inf); a column index, and whatever is computed from it, is unknown there.
 * Only the order of the float sums changes. */
#include "tilec.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* What a body register holds at a fill column. */
typedef enum {
  V_UNIFORM, /* the same at every column, not from a window (known: a constant) */
  V_PAD,     /* from a window; at a fill column exactly Val.v */
  V_ANY,     /* from a window; unknown at a fill column */
  V_IOTA,    /* iota along the window: only a column index may use it */
  V_VAR,     /* the loop variable broadcast: likewise */
} ValKind;

typedef struct Val {
  ValKind kind;
  bool known;  /* V_UNIFORM: a constant */
  bool iter;   /* depends on where this iteration's chunk begins: a reduction over it, or a
                  value the loop carries */
  double v;    /* V_PAD's fill-column value, a known V_UNIFORM's value */
} Val;

typedef struct Scan {
  const TirFunc *f;
  int first, end;  /* the FOR and its ENDFOR */
  int var;         /* the loop variable */
  int32_t step;
  int bound;       /* the loop's upper bound */
  Val *val;        /* per register, where `set` */
  bool *set;
  int target;      /* the first window load of 16-byte granules (a LOAD, or the LOAD filling the
                      shared tile a WINDOW reads), or -1 */
  bool tile_fill;  /* a WINDOW of a copied row at a fill column reads the copy's fill (its LOAD's,
                      for the columns past the tensor), not the window's own (past the tile) */
  int32_t win_len; /* the length of the copied rows the loop windows (0: none yet): one length, so
                      that at any column every window reads the same kind of fill */
} Scan;

static const Val uniform = {V_UNIFORM, false, false, 0};
static const Val any = {V_ANY, false, false, 0};

/* The size of r's last dim (1 for a scalar). */
static int32_t last_dim(const TirFunc *f, int r) {
  const TileType *t = &f->regs[r].type;
  return t->rank ? t->dims[t->rank - 1] : 1;
}

static bool written_in(const Scan *s, int r) {
  for (int j = s->first; j <= s->end; j++)
    if (s->f->insts[j].dst == r)
      return true;
  return false;
}

/* A register the body reads before writing it here: from before the loop, or carried from the
 * previous iteration. Uniform when it holds one value per row of the window axis (a scalar, a
 * [.., 1] tile, a constant, a broadcast of such); else it pairs its columns with the window's
 * by position, which the shift changes (false). */
static bool outer_val(const Scan *s, int r, Val *out) {
  const TirFunc *f = s->f;
  *out = uniform;
  out->iter = written_in(s, r);
  if (last_dim(f, r) == 1)
    return true;
  int w = tir_only_write(f, r);
  if (w < 0 || written_in(s, r))
    return false;
  const TirInst *in = &f->insts[w];
  if (in->op == TIR_CONST) {
    out->known = true, out->v = in->imm;
    return true;
  }
  return in->op == TIR_BCAST && last_dim(f, in->args[0]) == 1;
}

static bool get_val(const Scan *s, int r, Val *out) {
  if (r == s->var) {
    *out = uniform; /* read only by BCAST (checked there) */
    return true;
  }
  if (s->set[r]) {
    *out = s->val[r];
    return true;
  }
  return outer_val(s, r, out);
}

/* A value at a fill column that is constant: a V_PAD or a known uniform. */
static bool constant_at_fill(const Val *a) { return a->kind == V_PAD || (a->kind == V_UNIFORM && a->known); }

/* One element op at a fill column: folded where its operands are constants there, or where an
 * infinity or a zero decides it whatever the finite uniform operand is. */
static Val elem_val(const TirFunc *f, const TirInst *in, const Val *a, int n) {
  bool all_uniform = true, all_const = true, any_pad = false;
  for (int k = 0; k < n; k++) {
    all_uniform &= a[k].kind == V_UNIFORM;
    all_const &= constant_at_fill(&a[k]);
    any_pad |= a[k].kind == V_PAD;
    if (a[k].kind == V_ANY && !(in->op == TIR_SELECT && k > 0))
      return any;
  }
  if (in->op == TIR_SELECT && a[0].kind == V_PAD)
    return a[0].v != 0 ? a[1] : a[2];
  if (all_uniform && !all_const)
    return uniform;
  if (all_const) {
    double x[3] = {0, 0, 0}, r;
    for (int k = 0; k < n; k++)
      x[k] = a[k].v;
    ElemType at = f->regs[in->args[in->op == TIR_SELECT ? 1 : 0]].type.elem;
    if (!interp_eval_elem(in->op, at, f->regs[in->dst].type.elem, x, &r))
      return any;
    return (Val){any_pad ? V_PAD : V_UNIFORM, !any_pad, false, r};
  }
  /* a V_PAD against an unknown finite uniform */
  if (n != 2)
    return in->op == TIR_SELECT && a[1].kind == V_PAD && a[2].kind == V_PAD && a[1].v == a[2].v ? a[1] : any;
  const Val *p = a[0].kind == V_PAD ? &a[0] : &a[1];
  bool p_first = p == &a[0];
  if (!isinf(p->v) && !(in->op == TIR_MUL && p->v == 0))
    return any;
  switch (in->op) {
  case TIR_ADD: return *p;
  case TIR_SUB: return p_first ? *p : (Val){V_PAD, false, false, -p->v};
  case TIR_MUL: return p->v == 0 ? (Val){V_PAD, false, false, 0} : any;
  default: return any;
  }
}

/* The identity of a reduction, which a fill column must give it. */
static bool is_identity(TirOp op, double v) {
  return op == TIR_REDUCE_SUM ? v == 0 : op == TIR_REDUCE_MAX ? v == -INFINITY : v == INFINITY;
}

/* Whether tensor access `in` (LOAD, STORE, an atomic) reads or writes a window of the loop
 * (*window); false when it uses the loop variable otherwise, or a window's other indices change
 * with where chunks begin. */
static bool access_kind(const Scan *s, const TirInst *in, bool *window) {
  int rank = s->f->args[in->arg_index].rank;
  *window = false;
  for (int d = 0; d < rank; d++) {
    Val v;
    if (in->index[d].start != s->var) {
      if (!get_val(s, in->index[d].start, &v) || v.iter)
        return false;
      continue;
    }
    if (d != rank - 1 || !in->index[d].is_range || in->index[d].size != s->step)
      return false;
    *window = true;
  }
  return true;
}

/* Register r, not uniform, written by body instruction j: only there, and read only after it in
 * the body (nothing carries a column's value to another iteration or out of the loop). */
static bool stays_in_iteration(const Scan *s, int r, int j) {
  const TirFunc *f = s->f;
  if (tir_only_write(f, r) != j)
    return false;
  for (int i = 0; i < f->ninsts; i++)
    if ((i <= j || i >= s->end) && tir_inst_reads(&f->insts[i], r))
      return false;
  return true;
}

/* A window load the loop can align to: granules of 16 bytes, its other indices fixed in the loop. */
static bool target_ok(const Scan *s, const TirInst *in) {
  const TirFunc *f = s->f;
  const TirArg *a = &f->args[in->arg_index];
  if (a->rank > 3 || ((int64_t)s->step * elem_bytes(a->elem)) % 16)
    return false;
  for (int d = 0; d < a->rank - 1; d++)
    if (written_in(s, in->index[d].start))
      return false;
  return true;
}

/* Whether register r holds dim d of the kernel: read by DIM, or a constant equal to it pinned. */
static bool holds_dim(const TirFunc *f, int r, int d) {
  int w = tir_only_write(f, r);
  if (w < 0)
    return false;
  const TirInst *in = &f->insts[w];
  if (in->op == TIR_DIM)
    return in->arg_index == d;
  return in->op == TIR_CONST && f->dims[d].pinned && in->imm == (double)f->dims[d].value;
}

static bool scan_memory(Scan *s, int j, const TirInst *in, Val *out) {
  bool window;
  if (!access_kind(s, in, &window))
    return false;
  /* The chunks cover the row, columns 0 .. N - 1, however they are placed: the loop ends at the
   * windowed tensor's row length (another bound would move which real columns the last chunk
   * reads or writes). */
  const TirArg *a = &s->f->args[in->arg_index];
  if (window && !holds_dim(s->f, s->bound, a->dims[a->rank - 1]))
    return false;
  if (in->op == TIR_LOAD) {
    if (!window) {
      if (!outer_val(s, in->dst, out))
        return false;
      *out = uniform;
      for (int d = 0; d < s->f->args[in->arg_index].rank; d++)
        out->iter |= written_in(s, in->index[d].start);
      return true;
    }
    if (s->target < 0 && target_ok(s, in))
      s->target = j;
    *out = (Val){V_PAD, false, false, in->imm};
    return true;
  }
  Val v;
  return get_val(s, in->args[0], &v) && !v.iter && (window || v.kind == V_UNIFORM);
}

/* Whether instruction w lies directly in the body of a pipelined loop (no branch or loop between)
 * and loop `first` directly in the same body, after it: a row copied on a ring, one row an
 * iteration, walked by a loop of that iteration. */
static bool ring_row_before(const TirFunc *f, int w, int first) {
  int j = tir_enclosing(f, w);
  return j >= 0 && f->insts[j].op == TIR_FOR && f->insts[j].pipeline > 1 && first < tir_region_end(f, j) &&
         tir_nest_depth(f, j, first) == 0;
}

/* The LOAD that copies a row into shared tile r, before the loop, from its column 0, or NULL:
 * `shared xs = X[r, 0 : +B]`, rank 1, the tile's only write, read only through windows, outside
 * every loop (copied once) or directly in a pipelined loop's body with the loop (a ring of rows),
 * as the GPU lowering needs to copy it shifted (plan_shifted_row): a moved loop over a row copied
 * as it is would lose its windows' vector reads. */
static const TirInst *row_copy(const Scan *s, int r) {
  const TirFunc *f = s->f;
  int w = tir_windowed_row_load(f, r);
  if (w < 0 || w > s->first || !(tir_at_top_level(f, w) || ring_row_before(f, w, s->first)))
    return NULL;
  const TirInst *ld = &f->insts[w];
  const TirArg *a = &f->args[ld->arg_index];
  if (!ld->index[a->rank - 1].is_range)
    return NULL;
  for (int d = 0; d < a->rank - 1; d++)
    if (ld->index[d].is_range)
      return NULL;
  return tir_is_zero_tile(f, ld->index[a->rank - 1].start) ? ld : NULL;
}

/* Whether loop l's passes give window store k and window j disjoint columns: both directly in
 * its body, at its counter, which steps by a constant no smaller than either window. */
static bool disjoint_passes(const TirFunc *f, int l, int k, int j) {
  const TirInst *fo = &f->insts[l];
  int step = tir_only_write(f, fo->args[2]);
  if (step < 0 || f->insts[step].op != TIR_CONST)
    return false;
  int wk = last_dim(f, f->insts[k].args[0]), wj = last_dim(f, f->insts[j].dst);
  return f->insts[k].args[2] == fo->dst && f->insts[j].args[2] == fo->dst && f->insts[step].imm >= wk &&
         f->insts[step].imm >= wj && !tir_nest_depth(f, l, k) && !tir_nest_depth(f, l, j);
}

/* Whether window j may read a column that window store k wrote, with no run of the copy `ld`
 * between them: k comes first in a run of the code after ld, or a loop that starts after ld
 * holds both and its next pass may run j on what k wrote. */
static bool may_follow(const TirFunc *f, int ld, int k, int j) {
  if (ld < k && k < j)
    return true;
  int lo = k < j ? k : j, hi = k < j ? j : k;
  for (int l = ld + 1; l < lo; l++)
    if (f->insts[l].op == TIR_FOR && tir_region_end(f, l) > hi && !disjoint_passes(f, l, k, j))
      return true;
  return false;
}

/* Whether a window store to tile r (copied whole by ld) may have run before instruction j. */
static bool stored_before(const TirFunc *f, int r, int ld, int j) {
  for (int k = ld + 1; k < f->ninsts; k++)
    if (f->insts[k].op == TIR_WINDOW_STORE && f->insts[k].dst == r && may_follow(f, ld, k, j))
      return true;
  return false;
}

/* WINDOW xs[c0 : +step] of a row copied once (row_copy): a window of the row as a LOAD's is,
 * column c0 + j of the tensor; past the tensor it reads the copy's fill, past the tile the
 * window's (Scan.tile_fill picks which one this scan assumes), or, after a window store to the
 * tile, whatever that store left there (any: where a moved loop's stores fall past the row
 * depends on where its chunks begin). */
static bool scan_window(Scan *s, const TirInst *in, Val *out) {
  const TirFunc *f = s->f;
  const TirInst *ld = in->args[2] == s->var ? row_copy(s, in->args[0]) : NULL;
  if (!ld || last_dim(f, in->dst) != s->step || f->regs[in->dst].type.rank != 1)
    return false;
  bool stored = stored_before(f, in->args[0], (int)(ld - f->insts), (int)(in - f->insts));
  const TirArg *a = &f->args[ld->arg_index];
  int32_t len = last_dim(f, in->args[0]);
  if (!holds_dim(f, s->bound, a->dims[a->rank - 1]) || (s->win_len && s->win_len != len))
    return false;
  s->win_len = len;
  /* rows of whole granules: the GPU lowering copies them as they are (plan_shifted_row) */
  if (s->target < 0 && target_ok(s, ld) && !tir_rows_whole_granules(f, ld->arg_index))
    s->target = (int)(ld - f->insts);
  *out = stored ? any : (Val){V_PAD, false, false, s->tile_fill ? ld->imm : in->imm};
  return true;
}

static int align_target(const TirFunc *f, int first, Val *val, bool *set);

/* Whether every WINDOW of tile r (copied whole by ld) outside loop first..end that may run after
 * its window store st lies in a loop of its own that may start at its row's boundary knowing
 * nothing of what the tile holds past the row: then what the store leaves there reaches nothing.
 * A later loop that stores too asks the same of the reads after it, at most STORE_CHAIN deep
 * (else no: each level rescans the rest, so a chain of storing loops would take exponential
 * time). */
enum { STORE_CHAIN = 3 };
static bool later_windows_blind(const TirFunc *f, int r, int ld, int st, int first, int end) {
  static _Thread_local int depth;
  if (depth >= STORE_CHAIN)
    return false;
  depth++;
  bool blind = true;
  for (int k = 0; k < f->ninsts && blind; k++) {
    const TirInst *u = &f->insts[k];
    if (u->op != TIR_WINDOW || u->args[0] != r || (k > first && k < end) || !may_follow(f, ld, st, k))
      continue;
    int lf = tir_enclosing(f, k);
    if (lf < 0 || f->insts[lf].op != TIR_FOR || lf < ld || (lf < first && tir_region_end(f, lf) > end)) {
      blind = false; /* a read outside every loop, under an if, or in a loop around the copy or the store */
      break;
    }
    Val *val = calloc((size_t)f->nregs + 1, sizeof *val);
    bool *set = calloc((size_t)f->nregs + 1, sizeof *set);
    blind = val && set && align_target(f, lf, val, set) >= 0;
    free(val);
    free(set);
    k = tir_region_end(f, lf);
  }
  depth--;
  return blind;
}

/* WINDOW_STORE xs[c0 : +step] = v of a row copied once, in the loop's body: each column gets a
 * value fixed by it, wherever the chunks begin; past the row the placement decides which columns
 * it writes, so every later reader of the tile must not depend on them (later_windows_blind). */
static bool scan_window_store(Scan *s, const TirInst *in) {
  const TirFunc *f = s->f;
  int v = in->args[0];
  const TirInst *ld = in->args[2] == s->var ? row_copy(s, in->dst) : NULL;
  Val a;
  if (!ld || last_dim(f, v) != s->step || f->regs[v].type.rank != 1 || !get_val(s, v, &a) || a.iter ||
      a.kind == V_IOTA || a.kind == V_VAR || !get_val(s, in->args[1], &a) || a.kind != V_UNIFORM || a.iter)
    return false;
  /* the loop covers the stored row's real columns, 0 .. N - 1, in either placement */
  const TirArg *arg = &f->args[ld->arg_index];
  int32_t len = last_dim(f, in->dst);
  if (!holds_dim(f, s->bound, arg->dims[arg->rank - 1]) || (s->win_len && s->win_len != len))
    return false;
  s->win_len = len;
  return later_windows_blind(f, in->dst, (int)(ld - f->insts), (int)(in - f->insts), s->first, s->end);
}

static bool scan_reduce(Scan *s, const TirInst *in, Val *out) {
  Val a;
  if (!get_val(s, in->args[0], &a) || a.kind == V_IOTA || a.kind == V_VAR)
    return false;
  bool along = in->axis == s->f->regs[in->args[0]].type.rank - 1;
  if (a.kind == V_UNIFORM) {
    *out = uniform;
    out->iter = a.iter;
    return true;
  }
  if (along) {
    *out = uniform;
    out->iter = true;
    return a.kind == V_PAD && is_identity(in->op, a.v);
  }
  bool kept = a.kind == V_PAD && (in->op != TIR_REDUCE_SUM || a.v == 0 || isinf(a.v));
  *out = kept ? a : any;
  out->iter = a.iter;
  return true;
}

static bool scan_bcast(Scan *s, const TirInst *in, Val *out) {
  const TirFunc *f = s->f;
  if (in->args[0] == s->var) {
    *out = (Val){V_VAR, false, false, 0};
    return true;
  }
  Val a;
  if (!get_val(s, in->args[0], &a) || a.kind == V_IOTA || a.kind == V_VAR)
    return false;
  *out = a;
  return a.kind == V_UNIFORM || last_dim(f, in->args[0]) == last_dim(f, in->dst);
}

static TirOp reduction_of(TirOp op) {
  return op == TIR_ADD ? TIR_REDUCE_SUM : op == TIR_MAX ? TIR_REDUCE_MAX : op == TIR_MIN ? TIR_REDUCE_MIN : TIR_OP_COUNT;
}

/* Body instruction j is `acc = acc OP x`, an element-wise accumulator over the chunks (OP add,
 * max or min) that only a reduction by OP along the window reads after the loop: which column
 * meets which element of acc then does not matter. acc starts as a constant (the same in every
 * element) and x, fixed by its columns, gives OP's identity at a fill column. */
static bool accumulator(const Scan *s, int j) {
  const TirFunc *f = s->f;
  const TirInst *in = &f->insts[j];
  TirOp red = reduction_of(in->op);
  int r = in->dst, k = r < 0 ? -1 : in->args[0] == r ? 1 : in->args[1] == r ? 0 : -1;
  if (red == TIR_OP_COUNT || k < 0 || in->args[0] == in->args[1] || last_dim(f, r) < 2)
    return false;
  int x = in->args[k];
  if (!s->set[x] || s->val[x].kind != V_PAD || s->val[x].iter || !is_identity(red, s->val[x].v))
    return false;
  int inits = 0;
  for (int i = 0; i < f->ninsts; i++) {
    const TirInst *u = &f->insts[i];
    bool body = i > s->first && i < s->end;
    if (u->dst == r && i != j && (body || u->op != TIR_CONST || ++inits > 1))
      return false;
    if (i != j && tir_inst_reads(u, r) &&
        (body || u->op != red || u->axis != f->regs[r].type.rank - 1 || i < s->end))
      return false;
  }
  return inits == 1;
}

/* Body instruction j: its value at a fill column, false where the rewrite would show. */
static bool scan_inst(Scan *s, int j) {
  const TirFunc *f = s->f;
  const TirInst *in = &f->insts[j];
  if (accumulator(s, j)) {
    s->val[in->dst] = any;
    s->set[in->dst] = true;
    return true;
  }
  Val out = uniform, a[3] = {uniform, uniform, uniform};
  switch (in->op) {
  case TIR_CONST: out.known = true, out.v = in->imm; break;
  case TIR_PARAM:
  case TIR_DIM:
  case TIR_BLOCK_ID: break;
  case TIR_IOTA:
    if (in->axis == f->regs[in->dst].type.rank - 1)
      out.kind = V_IOTA;
    break;
  case TIR_LOAD:
  case TIR_STORE:
  case TIR_ATOMIC_ADD:
  case TIR_ATOMIC_MAX:
    if (!scan_memory(s, j, in, &out))
      return false;
    break;
  case TIR_REDUCE_SUM:
  case TIR_REDUCE_MAX:
  case TIR_REDUCE_MIN:
    if (!scan_reduce(s, in, &out))
      return false;
    break;
  case TIR_BCAST:
    if (!scan_bcast(s, in, &out))
      return false;
    break;
  case TIR_WINDOW:
    if (!scan_window(s, in, &out))
      return false;
    break;
  case TIR_WINDOW_STORE: /* its dst, the tile, is no value of the loop (carried_ok) */
    return scan_window_store(s, in);
  case TIR_RESHAPE: /* of a value that stays one per row (a reduction's [1] to a scalar) */
  case TIR_TRANS:
  case TIR_EXTRACT:
    if (!get_val(s, in->args[0], &out) || out.kind != V_UNIFORM || (last_dim(f, in->dst) > 1 && !out.known))
      return false;
    break;
  default: {
    if (!tir_op_maps_elements(in->op))
      return false;
    int n = tir_op_info[in->op].nargs < 0 ? 1 : tir_op_info[in->op].nargs;
    for (int k = 0; k < n; k++)
      if (in->args[k] == s->var || !get_val(s, in->args[k], &a[k]))
        return false;
    if (in->op == TIR_ADD && ((a[0].kind == V_IOTA && a[1].kind == V_VAR) || (a[0].kind == V_VAR && a[1].kind == V_IOTA)))
      out = any; /* a column index: outside [0, N) at a fill column */
    else {
      for (int k = 0; k < n; k++)
        if (a[k].kind == V_IOTA || a[k].kind == V_VAR)
          return false;
      out = elem_val(f, in, a, n);
      for (int k = 0; k < n; k++)
        out.iter |= a[k].iter;
    }
  }
  }
  if (in->dst < 0)
    return true;
  if (out.kind != V_UNIFORM && !stays_in_iteration(s, in->dst, j))
    return false;
  s->val[in->dst] = out;
  s->set[in->dst] = true;
  return true;
}

/* ---- what the loop carries */

/* The body's only write of r (an index), or -1. */
static int body_write(const Scan *s, int r) {
  int w = -1;
  for (int j = s->first + 1; j < s->end; j++)
    if (s->f->insts[j].dst == r) {
      if (w >= 0)
        return -1;
      w = j;
    }
  return w;
}

/* The register whose value r holds at body instruction `at`: r's copies, reshapes and broadcasts
 * written in the body before `at` followed back to their source. */
static int strip(const Scan *s, int r, int at) {
  for (int k = 0; k < 8; k++) {
    int w = body_write(s, r);
    if (w < 0 || w >= at)
      return r;
    TirOp op = s->f->insts[w].op;
    if (op != TIR_COPY && op != TIR_RESHAPE && op != TIR_BCAST)
      return r;
    r = s->f->insts[w].args[0], at = w;
  }
  return r;
}

static int index_of(const Scan *s, const TirInst *in) { return (int)(in - s->f->insts); }

/* The body instruction before `at` computing the value r holds there (past copies and the
 * like), or NULL. */
static const TirInst *def_of(const Scan *s, int r, int at) {
  int w = body_write(s, strip(s, r, at));
  return w < 0 || w >= at ? NULL : &s->f->insts[w];
}

/* A constant c (made in the body or before it). */
static bool is_const(const Scan *s, int r, int at, double c) {
  const TirInst *in = def_of(s, r, at);
  int w = in ? -1 : tir_only_write(s->f, r);
  in = in ? in : w >= 0 ? &s->f->insts[w] : NULL;
  return in && in->op == TIR_CONST && in->imm == c;
}

/* Whether r (read at `at`) is a reduction `op` along the window of values fixed by their columns
 * (a running max, min or sum of it does not depend on where chunks begin). */
static bool chunk_reduction(const Scan *s, int r, int at, TirOp op) {
  const TirInst *in = def_of(s, r, at);
  return in && in->op == op && in->axis == s->f->regs[in->args[0]].type.rank - 1 && s->set[in->args[0]] &&
         !s->val[in->args[0]].iter;
}

/* Whether one operand of two-operand `in` is carried register r's value before its write: *x
 * gets the other. */
static bool one_is(const Scan *s, const TirInst *in, int r, int *x) {
  int at = index_of(s, in);
  for (int k = 0; k < 2; k++)
    if (strip(s, in->args[k], at) == r && body_write(s, r) >= at) {
      *x = in->args[1 - k];
      return true;
    }
  return false;
}

/* The instruction computing the value the body writes to r. */
static const TirInst *written_value(const Scan *s, int r) { return def_of(s, r, s->end); }

/* A running max or min: r = max(r, reduce_max(y)). */
static bool running_extreme(const Scan *s, int r) {
  const TirInst *in = written_value(s, r);
  int x;
  return in && (in->op == TIR_MAX || in->op == TIR_MIN) && one_is(s, in, r, &x) &&
         chunk_reduction(s, x, index_of(s, in), reduction_of(in->op));
}

/* Whether c (read at `at`) is running max m's new value, or the `softmax` construct's form of it,
 * select(m' == -inf, 0, m'). */
static bool new_max(const Scan *s, int m, int c, int at) {
  int next = strip(s, m, s->end);
  if (strip(s, c, at) == next)
    return true;
  const TirInst *sel = def_of(s, c, at);
  if (!sel || sel->op != TIR_SELECT)
    return false;
  int ats = index_of(s, sel);
  const TirInst *eq = def_of(s, sel->args[0], ats);
  return eq && eq->op == TIR_EQ && strip(s, eq->args[0], index_of(s, eq)) == next &&
         is_const(s, eq->args[1], index_of(s, eq), -INFINITY) && is_const(s, sel->args[1], ats, 0) &&
         strip(s, sel->args[2], ats) == next;
}

/* exp(a - c) computed before `at`: its SUB into *sub. */
static bool exp_of_difference(const Scan *s, int r, int at, const TirInst **sub) {
  const TirInst *e = def_of(s, r, at);
  *sub = e && e->op == TIR_EXP ? def_of(s, e->args[0], index_of(s, e)) : NULL;
  return *sub && (*sub)->op == TIR_SUB;
}

/* s = s * exp(m - c) + reduce_sum(exp(y - c)) (the ADD `in`), with m a running max, c its new
 * value and y fixed by its columns: the sum of exp(y - c) over the columns so far, wherever the
 * chunks began. */
static bool rescaled_sum(const Scan *s, int r, const TirInst *in) {
  int at = index_of(s, in);
  for (int k = 0; k < 2; k++) {
    const TirInst *mul = def_of(s, in->args[k], at), *sum = def_of(s, in->args[1 - k], at), *d1, *d2;
    int e;
    if (!mul || mul->op != TIR_MUL || !one_is(s, mul, r, &e) || !sum || sum->op != TIR_REDUCE_SUM ||
        sum->axis != s->f->regs[sum->args[0]].type.rank - 1)
      continue;
    if (!exp_of_difference(s, e, index_of(s, mul), &d1) || !exp_of_difference(s, sum->args[0], index_of(s, sum), &d2))
      continue;
    int a1 = index_of(s, d1), a2 = index_of(s, d2), m = strip(s, d1->args[0], a1), y = d2->args[0];
    if (body_write(s, m) <= a1 || !running_extreme(s, m) || written_value(s, m)->op != TIR_MAX ||
        !new_max(s, m, d1->args[1], a1) || !new_max(s, m, d2->args[1], a2))
      continue;
    if (s->set[y] && !s->val[y].iter && s->val[y].kind != V_UNIFORM)
      return true;
  }
  return false;
}

/* A running sum, s = s + reduce_sum(y), or one rescaled to a running max (rescaled_sum). */
static bool running_sum(const Scan *s, int r) {
  const TirInst *in = written_value(s, r);
  int x;
  if (!in || in->op != TIR_ADD)
    return false;
  if (one_is(s, in, r, &x))
    return chunk_reduction(s, x, index_of(s, in), TIR_REDUCE_SUM);
  return rescaled_sum(s, r, in);
}

/* Every register the loop carries (written in the body and read before that write, or after the
 * loop) is a running max, min or sum. */
static bool carried_ok(const Scan *s) {
  const TirFunc *f = s->f;
  for (int j = s->first + 1; j < s->end; j++) {
    int r = f->insts[j].dst;
    if (r < 0 || r == s->var || f->insts[j].op == TIR_WINDOW_STORE)
      continue;
    bool carried = false;
    for (int i = 0; i < f->ninsts && !carried; i++)
      if ((i > s->first && i <= j) || i >= s->end)
        carried = tir_inst_reads(&f->insts[i], r);
    if (carried && !(body_write(s, r) == j && (running_extreme(s, r) || running_sum(s, r) || accumulator(s, j))))
      return false;
  }
  return true;
}

/* The first window load of loop `first` when the loop may start at its row's boundary, else -1. */
static int align_target(const TirFunc *f, int first, Val *val, bool *set) {
  const TirInst *fr = &f->insts[first];
  int w = tir_only_write(f, fr->args[2]);
  if (w < 0 || f->insts[w].op != TIR_CONST || f->insts[w].imm < 1 || f->insts[w].imm > (1 << 20))
    return -1;
  Scan s = {f, first, tir_region_end(f, first), fr->dst, (int32_t)f->insts[w].imm, fr->args[1], val, set, -1, false, 0};
  /* From column 0: chunks moved left of a later start would read real columns before it. */
  if (s.end < 0 || !tir_is_zero_tile(f, fr->args[0]))
    return -1;
  /* Twice when a window of a copied row reads two fills (its own, the copy's): legal with both. */
  for (int pass = 0; pass < 2; pass++) {
    s.tile_fill = pass == 1;
    memset(set, 0, (size_t)f->nregs + 1);
    for (int j = first + 1; j < s.end; j++)
      if (!scan_inst(&s, j))
        return -1;
    if (!carried_ok(&s))
      return -1;
  }
  return s.target;
}

/* Before FOR `first`: %s = row_shift of the target's row at the loop's start; %lo = lo - %s. */
static void rewrite(TirFunc *f, int first, int target) {
  TirInst *out = arena_alloc(f->arena, sizeof(TirInst) * ((size_t)f->ninsts + 2));
  memcpy(out, f->insts, sizeof(TirInst) * (size_t)first);
  const TirInst *ld = &f->insts[target];
  TirInst fr = f->insts[first];
  TileType i32 = {.elem = TY_I32, .rank = 0};
  TirInst rs = {.op = TIR_ROW_SHIFT, .dst = tir_new_reg(f, i32, NULL), .args = {-1, -1, -1},
                .arg_index = ld->arg_index, .loc = fr.loc};
  int rank = f->args[ld->arg_index].rank;
  for (int d = 0; d < rank; d++)
    rs.args[d] = d == rank - 1 ? fr.args[0] : ld->index[d].start;
  TirInst sub = {.op = TIR_SUB, .dst = tir_new_reg(f, i32, NULL), .args = {fr.args[0], rs.dst, -1}, .loc = fr.loc};
  out[first] = rs, out[first + 1] = sub;
  fr.args[0] = sub.dst;
  out[first + 2] = fr;
  memcpy(out + first + 3, f->insts + first + 1, sizeof(TirInst) * (size_t)(f->ninsts - first - 1));
  f->insts = out;
  f->ninsts = f->cap_insts = f->ninsts + 2;
}

bool tir_align_windows(TirFunc *f, Diag *d) {
  (void)d;
  const char *env = getenv("TILEC_ALIGN_WINDOWS");
  if (env && !strcmp(env, "0"))
    return true;
  for (int i = 0; i < f->ninsts; i++) {
    if (f->insts[i].op != TIR_FOR || !tir_is_i32_scalar(f, f->insts[i].args[0]))
      continue;
    Val *val = calloc((size_t)f->nregs + 1, sizeof *val);
    bool *set = calloc((size_t)f->nregs + 1, sizeof *set);
    int target = val && set ? align_target(f, i, val, set) : -1;
    free(val);
    free(set);
    if (target >= 0) {
      rewrite(f, i, target);
      i += 2;
    }
  }
  return true;
}
