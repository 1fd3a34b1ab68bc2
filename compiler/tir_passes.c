/* tir_passes.c — constant folding and dead-code elimination on the tile IR.
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
