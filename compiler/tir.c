/* tir.c — tile IR: the op table and the builder. Printer: tir_print.c; verifier: tir_verify.c. */
#include "tilec.h"

#include <math.h>
#include <string.h>

const TirOpInfo tir_op_info[TIR_OP_COUNT] = {
#define X(e, name, nargs, flags) [e] = {name, nargs, flags},
    TIR_OPS(X)
#undef X
};

int64_t tile_numel(const TileType *t) {
  int64_t n = 1;
  for (int i = 0; i < t->rank; i++)
    n *= t->dims[i];
  return n;
}

bool tile_same_shape(const TileType *a, const TileType *b) {
  if (a->rank != b->rank)
    return false;
  for (int i = 0; i < a->rank; i++)
    if (a->dims[i] != b->dims[i])
      return false;
  return true;
}

int tir_only_write(const TirFunc *f, int r) {
  int def = -1;
  for (int i = 0; i < f->ninsts; i++)
    if (f->insts[i].dst == r) {
      if (def >= 0)
        return -1;
      def = i;
    }
  return def;
}

bool tir_arg_written(const TirFunc *f, int arg) {
  for (int i = 0; i < f->ninsts; i++)
    if (tir_op_writes_tensor(f->insts[i].op) && f->insts[i].arg_index == arg)
      return true;
  return false;
}

int tir_region_end(const TirFunc *f, int first) {
  int depth = 0;
  for (int i = first; i < f->ninsts; i++) {
    TirOp op = f->insts[i].op;
    depth += op == TIR_FOR || op == TIR_IF;
    depth -= op == TIR_ENDFOR || op == TIR_ENDIF;
    if (depth == 0)
      return i;
  }
  return -1;
}

int64_t tir_gcd(int64_t a, int64_t b) {
  a = a < 0 ? -a : a, b = b < 0 ? -b : b;
  while (b) {
    int64_t t = a % b;
    a = b, b = t;
  }
  return a;
}

/* Follows single writes: constants, sums, differences, products, copies and FOR counters
 * (lo + k * step); anything else divides by 1. Depth-bounded: a chain is short in practice. */
static int64_t known_multiple(const TirFunc *f, int r, int depth) {
  int w = depth > 16 ? -1 : tir_only_write(f, r);
  if (w < 0)
    return 1;
  const TirInst *in = &f->insts[w];
  switch (in->op) {
  case TIR_CONST:
    return in->imm == (double)(int64_t)in->imm && in->imm > -(1 << 30) && in->imm < (1 << 30) ? (int64_t)in->imm : 1;
  case TIR_COPY:
    return known_multiple(f, in->args[0], depth + 1);
  case TIR_ADD:
  case TIR_SUB:
    return tir_gcd(known_multiple(f, in->args[0], depth + 1), known_multiple(f, in->args[1], depth + 1));
  case TIR_MUL: {
    int64_t m = known_multiple(f, in->args[0], depth + 1) * known_multiple(f, in->args[1], depth + 1);
    return m > (1 << 30) || m < -(1 << 30) ? 1 : m;
  }
  case TIR_FOR:
    return tir_gcd(known_multiple(f, in->args[0], depth + 1), known_multiple(f, in->args[2], depth + 1));
  default:
    return 1;
  }
}

int64_t tir_known_multiple(const TirFunc *f, int r) {
  const TileType *t = &f->regs[r].type;
  if (t->elem != TY_I32 || t->rank != 0)
    return 1;
  int64_t m = known_multiple(f, r, 0);
  return m < 0 ? -m : m;
}


bool tir_is_i32_scalar(const TirFunc *f, int r) {
  return f->regs[r].type.rank == 0 && f->regs[r].type.elem == TY_I32;
}

/* Rows of a pinned length that is a whole number of 16-byte granules start where the tensor does
 * (on a boundary, as allocators give): no row of it needs shifting. */
bool tir_rows_whole_granules(const TirFunc *f, int arg) {
  const TirArg *a = &f->args[arg];
  if (a->rank < 1)
    return false;
  const TirDim *d = &f->dims[a->dims[a->rank - 1]];
  return d->pinned && (d->value * elem_bytes(a->elem)) % 16 == 0;
}

/* Whether instruction u writes a window of shared tile r (and reads nothing else of it). */
static bool tir_window_store_of(const TirInst *u, int r) {
  return u->op == TIR_WINDOW_STORE && u->dst == r && u->args[0] != r && u->args[1] != r && u->args[2] != r;
}

/* Shared tile r has readers, all WINDOWs of it, and is otherwise accessed only by window stores. */
static bool read_only_by_windows(const TirFunc *f, int r) {
  bool windows = false;
  for (int j = 0; j < f->ninsts; j++) {
    const TirInst *u = &f->insts[j];
    if (!tir_inst_reads(u, r) || tir_window_store_of(u, r))
      continue;
    if (u->op != TIR_WINDOW || u->args[0] != r || u->args[1] == r || u->args[2] == r)
      return false;
    windows = true;
  }
  return windows;
}

/* The one instruction that writes r whole (window stores aside), or -1. */
static int only_whole_write(const TirFunc *f, int r) {
  int def = -1;
  for (int i = 0; i < f->ninsts; i++)
    if (f->insts[i].dst == r && f->insts[i].op != TIR_WINDOW_STORE) {
      if (def >= 0)
        return -1;
      def = i;
    }
  return def;
}

int tir_windowed_row_load(const TirFunc *f, int r) {
  const TileType *t = &f->regs[r].type;
  int w = only_whole_write(f, r);
  return t->rank == 1 && t->place == PLACE_SHARED && w >= 0 && f->insts[w].op == TIR_LOAD && read_only_by_windows(f, r)
             ? w
             : -1;
}

int tir_enclosing(const TirFunc *f, int i) {
  for (int j = i - 1; j >= 0; j--)
    if ((f->insts[j].op == TIR_FOR || f->insts[j].op == TIR_IF) && tir_region_end(f, j) > i)
      return j;
  return -1;
}

bool tir_at_top_level(const TirFunc *f, int i) { return tir_enclosing(f, i) < 0; }

bool tir_is_zero_tile(const TirFunc *f, int r) {
  int def = tir_only_write(f, r);
  return def >= 0 && f->insts[def].op == TIR_CONST && f->insts[def].imm == 0;
}

bool tir_inst_reads(const TirInst *in, int r) {
  if (in->op == TIR_WINDOW_STORE && in->dst == r)
    return true;
  for (int i = 0; i < 3; i++)
    if (in->args[i] == r)
      return true;
  if (tir_op_addresses(in->op))
    for (int d = 0; d < TILE_MAX_RANK; d++)
      if (in->index[d].start == r)
        return true;
  return false;
}

double tir_atomic_start(const TirFunc *f, int arg) {
  double start = NAN;
  if (f->args[arg].zero_init)
    return 0;
  for (int i = 0; i < f->ninsts; i++)
    if (f->insts[i].arg_index == arg && f->insts[i].op == TIR_ATOMIC_ADD)
      return 0;
    else if (f->insts[i].arg_index == arg && f->insts[i].op == TIR_ATOMIC_MAX)
      start = -INFINITY;
  return start;
}

TirFunc *tir_func_new(Arena *a, const char *name, SrcLoc loc) {
  TirFunc *f = arena_alloc(a, sizeof *f);
  f->arena = a;
  f->name = arena_strdup(a, name);
  f->loc = loc;
  f->threads = 128;
  f->cluster = 1;
  for (int i = 0; i < 3; i++)
    f->grid[i] = (TirExpr){.rpn = "1", .text = "1", .loc = loc};
  return f;
}

/* Arrays grow by doubling inside the arena; the old copy stays until the arena is freed. */
static void *grow(Arena *a, void *old, int n, int *cap, size_t elem) {
  if (n < *cap)
    return old;
  int ncap = *cap ? *cap * 2 : 64;
  void *p = arena_alloc(a, (size_t)ncap * elem);
  if (old)
    memcpy(p, old, (size_t)n * elem);
  *cap = ncap;
  return p;
}

int tir_new_reg(TirFunc *f, TileType type, const char *name) {
  f->regs = grow(f->arena, f->regs, f->nregs, &f->cap_regs, sizeof *f->regs);
  f->regs[f->nregs] = (TirReg){.type = type, .name = name ? arena_strdup(f->arena, name) : NULL};
  return f->nregs++;
}

TirInst *tir_emit(TirFunc *f, TirOp op, SrcLoc loc) {
  f->insts = grow(f->arena, f->insts, f->ninsts, &f->cap_insts, sizeof *f->insts);
  TirInst *in = &f->insts[f->ninsts++];
  memset(in, 0, sizeof *in);
  in->op = op;
  in->dst = -1;
  in->args[0] = in->args[1] = in->args[2] = -1;
  in->pipeline = 1;
  in->loc = loc;
  for (int i = 0; i < TILE_MAX_RANK; i++)
    in->index[i].start = -1;
  return in;
}

TirInst *tir_out_inst(TirOut *o, TirOp op, int dst, int a0, int a1) {
  TirInst *in = &o->insts[o->n++];
  *in = (TirInst){.op = op, .dst = dst, .args = {a0, a1, -1}, .arg_index = -1, .pipeline = 1, .loc = o->loc};
  for (int i = 0; i < TILE_MAX_RANK; i++)
    in->index[i].start = -1;
  return in;
}

int tir_out_new(TirOut *o, TirOp op, TileType t, int a0, int a1) {
  int r = tir_new_reg(o->f, t, NULL);
  tir_out_inst(o, op, r, a0, a1);
  return r;
}

/* TRANS t of a shared tile is read in place (by the emitter, and as a wgmma operand by the layout
 * pass) when its result has this one definition and every use follows it in straight-line code
 * before the source is written again: no loop boundary in between, where a back edge could bring
 * a rewritten source to a later read; IFs are fine (a rotated loop reads the view in two). */
bool tir_trans_view_ok(const TirFunc *f, int t) {
  const TirInst *tr = &f->insts[t];
  int dst = tr->dst, src = tr->args[0];
  if (tr->op != TIR_TRANS || f->regs[src].type.place != PLACE_SHARED || f->regs[dst].type.place == PLACE_SHARED)
    return false;
  int last = -1;
  for (int i = 0; i < f->ninsts; i++) {
    if (i != t && f->insts[i].dst == dst)
      return false;
    if (tir_inst_reads(&f->insts[i], dst)) {
      if (i < t)
        return false;
      last = i;
    }
  }
  for (int i = t + 1; i < last; i++)
    if (f->insts[i].op == TIR_FOR || f->insts[i].op == TIR_ENDFOR || f->insts[i].dst == src)
      return false;
  return true;
}
