/* tir_passes.c — tile-IR passes: constant folding, dead-code elimination, reduction operands
 * hoisted, narrow min/max accumulators, loop invariants hoisted.
 *
 * The IR is not SSA, so "constant" is decided conservatively: a register is a known constant
 * when exactly one instruction writes it and that instruction computes a splat from known
 * constants. The verifier guarantees every read comes after a write in linear order and lexical
 * scoping in lowering keeps single writes dominating their reads, so the one write is the value
 * every read sees. Both passes iterate to a fixed point (removing a dead branch can leave a
 * register with a single write, which can then fold). */
#include "tilec.h"

#include <stdlib.h>
#include <string.h>

enum { PASS_MAX_ROUNDS = 32 };

typedef struct Known {
  bool known;
  double value; /* as stored in a tile of the register's type */
} Known;

/* Instruction removal: mark, then compact once. */
static void compact(TirFunc *f, const bool *dead) {
  int k = 0;
  for (int i = 0; i < f->ninsts; i++)
    if (!dead[i])
      f->insts[k++] = f->insts[i];
  f->ninsts = k;
}

static int *count_writes(const TirFunc *f) {
  int *w = calloc((size_t)f->nregs + 1, sizeof *w);
  if (!w)
    return NULL;
  for (int i = 0; i < f->ninsts; i++)
    if (f->insts[i].dst >= 0)
      w[f->insts[i].dst]++;
  return w;
}

/* Index of the marker closing (or splitting) the block opened at `open`; stops at ELSE for IF. */
static int find_close(const TirFunc *f, int open) {
  int depth = 0;
  for (int i = open + 1; i < f->ninsts; i++) {
    TirOp op = f->insts[i].op;
    if (op == TIR_FOR || op == TIR_IF)
      depth++;
    else if (op == TIR_ENDFOR || op == TIR_ENDIF) {
      if (depth == 0)
        return i;
      depth--;
    } else if (op == TIR_ELSE && depth == 0)
      return i;
  }
  return f->ninsts - 1;
}

static void make_const(TirInst *in, double v) {
  in->op = TIR_CONST;
  in->imm = v;
  in->args[0] = in->args[1] = in->args[2] = -1;
  in->axis = 0;
}

/* Folds one instruction whose dst has a single write; true when it became/is a constant. */
static bool fold_inst(const TirFunc *f, TirInst *in, const Known *k, double *out) {
  ElemType dt = f->regs[in->dst].type.elem;
  switch (in->op) {
  case TIR_CONST:
    *out = round_to_elem(dt, in->imm);
    return true;
  case TIR_DIM:
    if (!f->dims[in->arg_index].pinned)
      return false;
    *out = (double)f->dims[in->arg_index].value;
    make_const(in, *out);
    return true;
  case TIR_BCAST:
  case TIR_REDUCE_MAX:
  case TIR_REDUCE_MIN: /* of a splat: the splat (a sum would depend on f32 rounding order) */
    if (!k[in->args[0]].known)
      return false;
    *out = k[in->args[0]].value;
    make_const(in, *out);
    return true;
  default:
    break;
  }
  if (!tir_op_maps_elements(in->op))
    return false;
  double a[3] = {0, 0, 0};
  int n = tir_op_info[in->op].nargs;
  for (int i = 0; i < n; i++) {
    if (!k[in->args[i]].known)
      return false;
    a[i] = k[in->args[i]].value;
  }
  int vi = in->op == TIR_SELECT ? 1 : 0;
  ElemType at = f->regs[in->args[vi]].type.elem;
  if (!interp_eval_elem(in->op, at, dt, a, out))
    return false; /* faults (i32 division by zero) stay for run time */
  make_const(in, *out);
  return true;
}

/* Dead branches of IFs on constants, loops with a constant empty range. */
static bool fold_control(const TirFunc *f, int i, const Known *k, bool *dead) {
  const TirInst *in = &f->insts[i];
  if (in->op == TIR_IF && k[in->args[0]].known) {
    int mid = find_close(f, i);
    int end = f->insts[mid].op == TIR_ELSE ? find_close(f, mid) : mid;
    bool taken = k[in->args[0]].value != 0;
    dead[i] = dead[end] = true;
    if (taken) /* drop ELSE .. ENDIF */
      for (int j = mid; j <= end; j++)
        dead[j] = true;
    else /* drop IF .. ELSE (or the whole IF .. ENDIF) */
      for (int j = i; j <= mid; j++)
        dead[j] = true;
    return true;
  }
  if (in->op == TIR_FOR && k[in->args[0]].known && k[in->args[1]].known &&
      k[in->args[0]].value >= k[in->args[1]].value) {
    int end = find_close(f, i);
    for (int j = i; j <= end; j++)
      dead[j] = true;
    return true;
  }
  return false;
}

/* One round; true when something changed. Instructions inside an already removed region are
 * skipped so two removals never overlap. */
static bool fold_round(TirFunc *f, bool *ok) {
  int *writes = count_writes(f);
  Known *k = calloc((size_t)f->nregs + 1, sizeof *k);
  bool *dead = calloc((size_t)f->ninsts + 1, sizeof *dead);
  bool changed = false;
  if (!writes || !k || !dead) {
    *ok = false;
  } else {
    for (int i = 0; i < f->ninsts; i++) {
      TirInst *in = &f->insts[i];
      if (dead[i])
        continue;
      if ((tir_op_info[in->op].flags & OPF_MARKER)) {
        changed |= fold_control(f, i, k, dead);
        continue;
      }
      if (in->dst < 0 || writes[in->dst] != 1)
        continue;
      TirOp before = in->op;
      double v;
      if (fold_inst(f, in, k, &v)) {
        k[in->dst] = (Known){true, v};
        changed |= before != TIR_CONST;
      }
    }
    if (changed)
      compact(f, dead);
  }
  free(writes);
  free(k);
  free(dead);
  return changed;
}

bool tir_fold_constants(TirFunc *f, Diag *d) {
  bool ok = true;
  for (int round = 0; round < PASS_MAX_ROUNDS && ok; round++)
    if (!fold_round(f, &ok))
      break;
  if (!ok)
    diag_plain(d, DIAG_ERROR, "constant folding: out of memory");
  return ok;
}

/* ------------------------------------------------------------- dead code */

static void mark_used(const TirFunc *f, bool *used) {
  memset(used, 0, (size_t)f->nregs + 1);
  for (int i = 0; i < f->ninsts; i++) {
    const TirInst *in = &f->insts[i];
    for (int a = 0; a < 3; a++)
      if (in->args[a] >= 0)
        used[in->args[a]] = true;
    if (tir_op_addresses(in->op))
      for (int d = 0; d < TILE_MAX_RANK; d++)
        if (in->index[d].start >= 0)
          used[in->index[d].start] = true;
  }
}

/* Pure instructions with unread results, then empty FOR/IF blocks; true when one went. */
static bool dead_round(TirFunc *f, bool *used, bool *dead) {
  mark_used(f, used);
  memset(dead, 0, (size_t)f->ninsts + 1);
  bool changed = false;
  for (int i = 0; i < f->ninsts; i++) {
    const TirInst *in = &f->insts[i];
    unsigned flags = tir_op_info[in->op].flags;
    if (!(flags & (OPF_SIDEFX | OPF_MARKER)) && in->dst >= 0 && !used[in->dst])
      dead[i] = changed = true;
  }
  for (int i = 0; i + 1 < f->ninsts; i++) {
    TirOp a = f->insts[i].op, b = f->insts[i + 1].op;
    bool empty_loop = a == TIR_FOR && b == TIR_ENDFOR && !used[f->insts[i].dst];
    bool empty_if = a == TIR_IF && b == TIR_ENDIF;
    bool empty_else = a == TIR_ELSE && b == TIR_ENDIF; /* keep the ENDIF, drop the ELSE */
    if (empty_loop || empty_if) {
      dead[i] = dead[i + 1] = changed = true;
      i++;
    } else if (empty_else) {
      dead[i] = changed = true;
    }
  }
  if (changed)
    compact(f, dead);
  return changed;
}

/* Registers no instruction mentions are dropped and the rest renumbered in order of first
 * mention, so printed IR stays dense and reads top to bottom after folding. */
static void number(int *map, int *n, int r) {
  if (r >= 0 && map[r] < 0)
    map[r] = (*n)++;
}

static void remap(const int *map, int *r) {
  if (*r >= 0)
    *r = map[*r];
}

static void renumber(TirFunc *f) {
  int *map = arena_alloc(f->arena, sizeof(int) * ((size_t)f->nregs + 1));
  TirReg *old = arena_alloc(f->arena, sizeof(TirReg) * ((size_t)f->nregs + 1));
  for (int r = 0; r < f->nregs; r++) /* an empty kernel has no registers (regs is NULL) */
    old[r] = f->regs[r], map[r] = -1;
  int n = 0;
  for (int i = 0; i < f->ninsts; i++) {
    TirInst *in = &f->insts[i];
    for (int a = 0; a < 3; a++)
      number(map, &n, in->args[a]);
    for (int d = 0; d < TILE_MAX_RANK; d++)
      number(map, &n, in->index[d].start);
    number(map, &n, in->dst);
  }
  for (int r = 0; r < f->nregs; r++)
    if (map[r] >= 0)
      f->regs[map[r]] = old[r];
  f->nregs = n;
  for (int i = 0; i < f->ninsts; i++) {
    TirInst *in = &f->insts[i];
    remap(map, &in->dst);
    for (int a = 0; a < 3; a++)
      remap(map, &in->args[a]);
    for (int d = 0; d < TILE_MAX_RANK; d++)
      remap(map, &in->index[d].start);
  }
}

bool tir_eliminate_dead(TirFunc *f, Diag *d) {
  bool *used = malloc((size_t)f->nregs + 1);
  bool *dead = malloc((size_t)f->ninsts + 1);
  if (!used || !dead) {
    free(used);
    free(dead);
    diag_plain(d, DIAG_ERROR, "dead-code elimination: out of memory");
    return false;
  }
  for (int round = 0; round < PASS_MAX_ROUNDS * 8; round++)
    if (!dead_round(f, used, dead))
      break;
  renumber(f);
  free(used);
  free(dead);
  return true;
}

/* ------------------------------------------------------------- reduction pairs */

/* A reduction followed closely by another whose operand is computed in between without it
 * (rmsnorm backward: sum(x * x), then inv from it, then gw = g * w and sum(gw * x)) cannot share
 * the first's trip through shared memory: the second's operand does not exist yet when the first
 * crosses warps. Moving that operand's computation above the first reduction lets the lowering
 * pair them (reduce_partner in lower_nvptx.c: both written, one barrier, both read). Only pure
 * register instructions move, and only when nothing between them and their new place reads or
 * writes what they write or writes what they read. TILEC_REDUCE_HOIST=0 turns it off. */
enum { HOIST_SPAN = 16 }; /* reduce_partner's REDUCE_PAIR_SPAN */

/* Register instructions that may change place among their neighbours. */
static bool hoistable(TirOp op) {
  return tir_op_maps_elements(op) || op == TIR_BCAST || op == TIR_RESHAPE || op == TIR_CONST || op == TIR_PARAM ||
         op == TIR_TRANS || op == TIR_EXTRACT;
}

static bool inst_writes_or_reads(const TirInst *in, int r) { return r >= 0 && (in->dst == r || tir_inst_reads(in, r)); }

/* Marks in `slice` the instructions of (i, j) that j's operand needs; false when one of them
 * cannot move above i (it needs i's result, or is not a pure register instruction). */
static bool operand_slice(const TirFunc *f, int i, int j, bool *slice) {
  memset(slice, 0, (size_t)(j - i) + 1);
  bool *need = calloc((size_t)f->nregs + 1, 1);
  if (!need)
    return false;
  for (int a = 0; a < 3; a++)
    if (f->insts[j].args[a] >= 0)
      need[f->insts[j].args[a]] = true;
  bool ok = true;
  for (int k = j - 1; k > i && ok; k--) {
    const TirInst *in = &f->insts[k];
    if (in->dst < 0 || !need[in->dst])
      continue;
    if (!hoistable(in->op) || tir_inst_reads(in, f->insts[i].dst) || in->dst == f->insts[i].dst) {
      ok = false;
      break;
    }
    slice[k - i] = true;
    for (int a = 0; a < 3; a++)
      if (in->args[a] >= 0)
        need[in->args[a]] = true;
  }
  free(need);
  return ok;
}

/* The slice may move above i: nothing it leaves behind in [i, k) touches what k writes or
 * writes what k reads. */
static bool slice_moves(const TirFunc *f, int i, int j, const bool *slice) {
  for (int k = i + 1; k < j; k++) {
    if (!slice[k - i])
      continue;
    const TirInst *in = &f->insts[k];
    for (int m = i; m < k; m++) {
      if (m > i && slice[m - i])
        continue;
      const TirInst *o = &f->insts[m];
      if (inst_writes_or_reads(o, in->dst))
        return false;
      for (int a = 0; a < 3; a++)
        if (in->args[a] >= 0 && o->dst == in->args[a])
          return false;
    }
  }
  return true;
}

/* A reduction that combines more than one element along its axis (one of a size-1 axis, like the
 * row sum of a single row, is a copy, and crosses nothing). */
static bool reduces_elements(const TirFunc *f, const TirInst *in) {
  const TileType *t = &f->regs[in->args[0]].type;
  return tir_op_reduces(in->op) && in->axis < t->rank && t->dims[in->axis] > 1;
}

/* The next reduction after i in straight-line code along i's axis, or -1. */
static int next_reduce(const TirFunc *f, int i) {
  for (int j = i + 1; j < f->ninsts && j <= i + HOIST_SPAN * 2; j++) {
    TirOp op = f->insts[j].op;
    if (reduces_elements(f, &f->insts[j]) && f->insts[j].axis == f->insts[i].axis)
      return j;
    if (tir_op_info[op].flags & (OPF_MARKER | OPF_SIDEFX))
      return -1;
  }
  return -1;
}

/* Reorders instructions [from, to] so that the marked ones (mark[k - from]) come first, each
 * group in its order: a slice moved above a reduction or a loop. */
static void move_marked_first(TirFunc *f, int from, int to, const bool *mark, TirInst *tmp) {
  int n = 0;
  for (int k = from; k <= to; k++)
    if (mark[k - from])
      tmp[n++] = f->insts[k];
  for (int k = from; k <= to; k++)
    if (!mark[k - from])
      tmp[n++] = f->insts[k];
  memcpy(&f->insts[from], tmp, sizeof *tmp * (size_t)n);
}

bool tir_hoist_reduce_operands(TirFunc *f, Diag *d) {
  if (env_off("TILEC_REDUCE_HOIST"))
    return true;
  bool *slice = malloc((size_t)HOIST_SPAN * 2 + 2);
  TirInst *tmp = malloc(sizeof *tmp * ((size_t)HOIST_SPAN * 2 + 2));
  if (!slice || !tmp) {
    free(slice);
    free(tmp);
    diag_plain(d, DIAG_ERROR, "reduction pairs: out of memory");
    return false;
  }
  bool moved = false;
  for (int i = 0; i < f->ninsts; i++) {
    int j = reduces_elements(f, &f->insts[i]) ? next_reduce(f, i) : -1;
    if (j < 0 || j == i + 1 || !operand_slice(f, i, j, slice) || !slice_moves(f, i, j, slice))
      continue;
    int n = 0;
    for (int k = i + 1; k < j; k++)
      n += slice[k - i];
    if (n == 0 || j - n - i > HOIST_SPAN)
      continue;
    move_marked_first(f, i, j - 1, slice, tmp); /* slice[0], i itself, is never marked */
    i += n; /* i's reduction now sits n further on */
    moved = true;
  }
  free(slice);
  free(tmp);
  if (moved)
    renumber(f);
  return true;
}

/* ---------------------------------------------- narrow min/max accumulators
 *
 * `acc = max(acc, to_f32(w))` in a loop, w f16 or bf16, keeps acc in w's type: the maximum of
 * narrow values is one of them, exact in their type, and the GPU computes two an instruction
 * (max.f16x2; lower_nvptx.c packed_minmax) where the f32 form pays a conversion and a max an
 * element. The loop gets `acc_n = max(acc_n, w)`, acc_n starts where acc does (its constant,
 * exact in the narrow type), and `acc = to_f32(acc_n)` follows the loop. Cross-entropy's running
 * maximum of its logits. A reduction of converted values is taken in their type the same way
 * (narrow_reduce). TILEC_NARROW_MINMAX=0 turns it off. */

/* The FOR whose body holds instruction i directly (not inside a nested IF or FOR), or -1. */
static int direct_loop(const TirFunc *f, int i) {
  int depth = 0;
  for (int j = i - 1; j >= 0; j--) {
    TirOp op = f->insts[j].op;
    if (op == TIR_ENDFOR || op == TIR_ENDIF)
      depth++;
    else if ((op == TIR_IF || op == TIR_FOR) && depth > 0)
      depth--;
    else if (op == TIR_FOR)
      return j;
    else if (op == TIR_IF || op == TIR_ELSE)
      return -1;
  }
  return -1;
}

/* The narrow source w of `v = cvt w` when v's one write is that CVT and w is an f16/bf16 tile of
 * acc's shape written once before it; else -1. */
static int narrow_source(const TirFunc *f, int v, int acc) {
  int c = tir_only_write(f, v);
  if (c < 0 || f->insts[c].op != TIR_CVT)
    return -1;
  int w = f->insts[c].args[0];
  TileType tw = f->regs[w].type, ta = f->regs[acc].type;
  if ((tw.elem != TY_F16 && tw.elem != TY_BF16) || tw.rank != ta.rank || tir_only_write(f, w) < 0)
    return -1;
  for (int d = 0; d < ta.rank; d++)
    if (tw.dims[d] != ta.dims[d])
      return -1;
  return w;
}

/* acc is written by its constant k and by i alone, and read in loop [loop, end] only by i. */
static int narrow_start(const TirFunc *f, int i, int loop, int end, int acc, ElemType e) {
  int k = -1;
  for (int j = 0; j < f->ninsts; j++) {
    const TirInst *in = &f->insts[j];
    if (j != i && in->dst == acc) {
      if (k >= 0 || in->op != TIR_CONST || j > loop || round_to_elem(e, in->imm) != in->imm)
        return -1;
      k = j;
    }
    if (j != i && j >= loop && j <= end && tir_inst_reads(in, acc))
      return -1;
  }
  return k;
}

/* Opens a slot at position p (shifting the rest), returns it. */
static TirInst *insert_at(TirFunc *f, int p, SrcLoc loc) {
  tir_emit(f, TIR_COPY, loc);
  memmove(&f->insts[p + 1], &f->insts[p], sizeof *f->insts * (size_t)(f->ninsts - 1 - p));
  TirInst *in = &f->insts[p];
  *in = (TirInst){.op = TIR_COPY, .dst = -1, .args = {-1, -1, -1}, .pipeline = 1, .loc = loc};
  for (int d = 0; d < TILE_MAX_RANK; d++)
    in->index[d].start = -1;
  return in;
}

static bool narrow_one(TirFunc *f, int i) {
  TirInst *in = &f->insts[i];
  if (in->op != TIR_MAX && in->op != TIR_MIN)
    return false;
  int acc = in->dst;
  const TileType *ta = &f->regs[acc].type;
  if (ta->place != PLACE_REG || ta->elem != TY_F32 || ta->rank == 0)
    return false;
  int v = in->args[0] == acc ? in->args[1] : in->args[1] == acc ? in->args[0] : -1;
  int w = v >= 0 && v != acc ? narrow_source(f, v, acc) : -1;
  int loop = w >= 0 ? direct_loop(f, i) : -1;
  int end = loop >= 0 ? tir_region_end(f, loop) : -1;
  ElemType e = w >= 0 ? f->regs[w].type.elem : TY_F32;
  int k = end >= 0 ? narrow_start(f, i, loop, end, acc, e) : -1;
  if (k < 0)
    return false;
  TileType tn = *ta;
  tn.elem = e;
  int an = tir_new_reg(f, tn, f->regs[acc].name);
  SrcLoc loc = in->loc, kloc = f->insts[k].loc;
  double start = f->insts[k].imm;
  in->dst = in->args[0] = an;  /* acc_n = max(acc_n, w) */
  in->args[1] = w;
  TirInst *cv = insert_at(f, end + 1, loc); /* acc = cvt acc_n, after the loop */
  cv->op = TIR_CVT, cv->dst = acc, cv->args[0] = an;
  TirInst *kn = insert_at(f, k + 1, kloc);  /* acc_n = acc's constant */
  kn->op = TIR_CONST, kn->dst = an, kn->imm = start;
  return true;
}

/* `r = reduce_max(v)` (or min) with `v = cvt w`, w f16/bf16 written once: `r' = reduce_max(w)`
 * in w's type and `r = cvt r'` after it, so the thread's part pairs w's values (max.f16x2). */
static bool narrow_reduce(TirFunc *f, int i) {
  TirInst *in = &f->insts[i];
  if (in->op != TIR_REDUCE_MAX && in->op != TIR_REDUCE_MIN)
    return false;
  int v = in->args[0], r = in->dst;
  const TileType *tv = &f->regs[v].type;
  if (tv->elem != TY_F32 || tv->place != PLACE_REG || f->regs[r].type.place != PLACE_REG)
    return false;
  int w = narrow_source(f, v, v);
  if (w < 0 || f->regs[w].type.place != PLACE_REG)
    return false;
  TileType tn = f->regs[r].type;
  tn.elem = f->regs[w].type.elem;
  int rn = tir_new_reg(f, tn, NULL);
  SrcLoc loc = in->loc;
  in->dst = rn, in->args[0] = w;
  TirInst *cv = insert_at(f, i + 1, loc);
  cv->op = TIR_CVT, cv->dst = r, cv->args[0] = rn;
  return true;
}

bool tir_narrow_minmax(TirFunc *f, Diag *d) {
  if (env_off("TILEC_NARROW_MINMAX"))
    return true;
  bool narrowed = false;
  for (int i = 0; i < f->ninsts; i++)
    if (narrow_one(f, i)) {
      i++; /* the constant inserted before it */
      narrowed = true;
    } else if (narrow_reduce(f, i)) {
      i++; /* the cvt after it */
      narrowed = true;
    }
  return !narrowed || tir_eliminate_dead(f, d); /* the loop's cvt */
}

/* ------------------------------------------------------- loop-invariant code motion
 *
 * A pure register instruction in a loop's body whose operands the loop does not write computes
 * the same tile every iteration: it moves above the `for` (layernorm backward's `to_f32(w)` of
 * a shared row copied once, converted again for every row; a scalar `to_f32(N)`); so does a
 * register load of a tensor the kernel never writes (weights read where they are used). LLVM
 * cannot do it on the GPU: the loop's barriers and asynchronous copies keep a shared read in
 * place. Moved tiles stay live across the loop, so a loop takes at most
 * INVARIANT_REGS_PER_THREAD registers of them a thread (a tile's padded elements over the
 * block's threads), else only its scalars move. Only instructions directly in the body (not
 * under a nested `if` or `for`; a nested loop's own invariants reach the outer body first),
 * written nowhere else, into registers, and none that can fault (i32 division): a loop that runs
 * zero times computes them for nothing.
 * TILEC_HOIST_INVARIANTS=0 turns it off. */
enum { INVARIANT_REGS_PER_THREAD = 32 };

/* hoistable()'s instructions, the leaves that read no state a loop changes, and register loads
 * of input tensors (a user's `to_f32(W[0 : +BLOCK])` written in the row loop). */
static bool loop_movable(const TirFunc *f, const TirInst *in) {
  if (in->op == TIR_LOAD)
    return !tir_arg_written(f, in->arg_index);
  return hoistable(in->op) || in->op == TIR_DIM || in->op == TIR_BLOCK_ID || in->op == TIR_IOTA;
}

/* Every register inst reads (operands, a load's index starts) is one the loop does not write. */
static bool reads_invariant(const TirFunc *f, const TirInst *in, const int *loop_writes) {
  for (int a = 0; a < 3; a++)
    if (in->args[a] >= 0 && loop_writes[in->args[a]])
      return false;
  if (in->op == TIR_LOAD)
    for (int d = 0; d < f->args[in->arg_index].rank; d++)
      if (in->index[d].start >= 0 && loop_writes[in->index[d].start])
        return false;
  return true;
}

static bool may_fault(const TirFunc *f, const TirInst *in) {
  return (in->op == TIR_DIV || in->op == TIR_REM) && f->regs[in->dst].type.elem == TY_I32;
}

/* Registers a thread holds of tile r (padded elements over the threads, 32-bit words); a
 * broadcast or reshape holds its operand's values (the lowering shares them). */
static int thread_words(const TirFunc *f, int r) {
  int def = tir_only_write(f, r);
  if (def >= 0 && (f->insts[def].op == TIR_BCAST || f->insts[def].op == TIR_RESHAPE))
    return thread_words(f, f->insts[def].args[0]);
  const TileType *t = &f->regs[r].type;
  if (t->rank == 0)
    return 0;
  int64_t n = 1;
  for (int d = 0; d < t->rank; d++) {
    int64_t p = 1;
    while (p < t->dims[d])
      p *= 2;
    n *= p;
  }
  int64_t words = (n + f->threads - 1) / f->threads;
  return (int)(elem_bytes(t->elem) < 4 ? (words + 1) / 2 : words);
}

/* Marks in cand[] the body instructions of loop [open, close] that may move above it (scalars
 * only when scalars_only); `loop_writes` counts each register's writes in the loop, `writes` in
 * the function. Returns the registers a thread keeps across the loop for them. */
static int invariant_slice(const TirFunc *f, int open, int close, const int *writes, int *loop_writes,
                           bool scalars_only, bool *cand) {
  memset(cand, 0, (size_t)(close - open + 1));
  for (int k = open; k <= close; k++)
    if (f->insts[k].dst >= 0)
      loop_writes[f->insts[k].dst]++;
  for (int k = open + 1; k < close; k++) {
    const TirInst *in = &f->insts[k];
    if (in->op == TIR_FOR || in->op == TIR_IF) {
      k = tir_region_end(f, k);
      continue;
    }
    if (!loop_movable(f, in) || in->dst < 0 || writes[in->dst] != 1 || may_fault(f, in) ||
        f->regs[in->dst].type.place != PLACE_REG || (scalars_only && f->regs[in->dst].type.rank > 0) ||
        !reads_invariant(f, in, loop_writes))
      continue;
    cand[k - open] = true;
    loop_writes[in->dst] = 0; /* its readers may follow */
  }
  int words = 0;
  for (int k = open + 1; k < close; k++) {
    const TirInst *in = &f->insts[k];
    if (!cand[k - open] || in->op == TIR_CONST)
      continue;
    for (int m = open + 1; m < close; m++)
      if (!cand[m - open] && tir_inst_reads(&f->insts[m], in->dst)) {
        words += thread_words(f, in->dst);
        break;
      }
  }
  for (int k = open; k <= close; k++)
    if (f->insts[k].dst >= 0)
      loop_writes[f->insts[k].dst] = 0;
  return words;
}

bool tir_hoist_invariants(TirFunc *f, Diag *d) {
  if (env_off("TILEC_HOIST_INVARIANTS"))
    return true;
  int *writes = count_writes(f);
  int *loop_writes = calloc((size_t)f->nregs + 1, sizeof *loop_writes);
  bool *cand = malloc((size_t)f->ninsts + 1);
  TirInst *tmp = malloc(sizeof *tmp * ((size_t)f->ninsts + 1));
  if (!writes || !loop_writes || !cand || !tmp) {
    free(writes), free(loop_writes), free(cand), free(tmp);
    diag_plain(d, DIAG_ERROR, "loop invariants: out of memory");
    return false;
  }
  /* innermost first: an inner loop's invariants land in the outer body, which comes next */
  for (int open = f->ninsts - 1; open >= 0; open--) {
    if (f->insts[open].op != TIR_FOR)
      continue;
    int close = tir_region_end(f, open);
    if (invariant_slice(f, open, close, writes, loop_writes, false, cand) > INVARIANT_REGS_PER_THREAD)
      invariant_slice(f, open, close, writes, loop_writes, true, cand);
    move_marked_first(f, open, close, cand, tmp);
  }
  free(writes), free(loop_writes), free(cand), free(tmp);
  return true;
}
