/* tir_swap.c — a GEMM of few rows computed as its transpose (sm_90a, before the layout pass).
 *
 * wgmma's M is 64 rows a warpgroup and its N 8 to 256, so a DOT acc[M, N] = dot(a, b, acc) with
 * M < 64 (a GEMM of 16 rows: a decode step's activations times a weight) cannot run on it and
 * stays on mma.sync with cp.async copies. Its transpose, acc^T[N, M] = dot(trans(b), trans(a),
 * acc^T), puts the long N on wgmma's M and the few rows on its N (m64n16k16), reading the same
 * shared tiles in place (b as the MN-major operand A, a as the K-major B), so the kernel gets the
 * TMA / warp-specialized entry too. cuBLAS does the same at such shapes ("swap AB").
 *
 * The rewrite, for a DOT of 8, 16 or 32 rows and a multiple of 64 columns at the top level of a
 * top-level loop's body, whose operands are shared tiles and whose accumulator is written only by one CONST before the loop and by the DOT, and
 * read only by the DOT inside the loop and by instructions after it:
 *
 *   acc = const c            ->  acc' = const c                  (acc': f32[N, M])
 *   acc = dot a, b, acc      ->  a' = trans b; b' = trans a; acc' = dot a', b', acc'
 *   endfor                   ->  endfor; acc = trans acc'
 *
 * It is kept only when the kernel then runs on wgmma (layout_kernel_uses_wgmma) and did not
 * before. The interpreter runs the kernel as written. TILEC_SWAP_AB=0 turns it off. */
#include "layout.h"

#include <string.h>

typedef struct Swap {
  int init, dot, end; /* the CONST, the DOT, the loop's ENDFOR */
} Swap;

/* The FOR whose body holds instruction j at its top level, when that FOR is at the function's
 * top level; else -1. */
static int top_loop_of(const TirFunc *f, int j) {
  int depth = 0, open = -1;
  for (int i = 0; i < j; i++) {
    TirOp op = f->insts[i].op;
    if (op == TIR_FOR || op == TIR_IF) {
      if (depth == 0)
        open = op == TIR_FOR ? i : -1;
      depth++;
    } else if (op == TIR_ENDFOR || op == TIR_ENDIF) {
      depth--;
    }
  }
  return depth == 1 ? open : -1;
}

static bool swappable(const TirFunc *f, int j, Swap *sw) {
  const TirInst *d = &f->insts[j];
  const TileType *c = &f->regs[d->dst].type, *a = &f->regs[d->args[0]].type, *b = &f->regs[d->args[1]].type;
  if (d->args[2] != d->dst || c->rank != 2 || c->place != PLACE_REG || a->place != PLACE_SHARED ||
      b->place != PLACE_SHARED || c->dims[0] >= 64 || c->dims[0] < 8 || layout_pow2_ceil(c->dims[0]) != c->dims[0] ||
      c->dims[1] % 64)
    return false;
  int loop = top_loop_of(f, j);
  if (loop < 0)
    return false;
  sw->dot = j;
  sw->end = tir_region_end(f, loop);
  sw->init = -1;
  for (int i = 0; i < f->ninsts; i++) {
    const TirInst *in = &f->insts[i];
    if (i == j)
      continue;
    if (in->dst == d->dst) {
      if (sw->init >= 0 || in->op != TIR_CONST || i > loop || top_loop_of(f, i) >= 0)
        return false;
      sw->init = i;
    } else if (tir_inst_reads(in, d->dst) && i <= sw->end) {
      return false;
    }
  }
  return sw->init >= 0;
}

static TirInst inst_of(TirOp op, int dst, int a0, int a1, int a2, SrcLoc loc) {
  TirInst in;
  memset(&in, 0, sizeof in);
  in.op = op;
  in.dst = dst;
  in.args[0] = a0, in.args[1] = a1, in.args[2] = a2;
  in.loc = loc;
  return in;
}

static int new_reg(TirFunc *g, const TileType *like, int32_t d0, int32_t d1) {
  TileType t = *like;
  t.place = PLACE_REG;
  t.layout = NULL;
  t.dims[0] = d0, t.dims[1] = d1;
  return tir_new_reg(g, t, NULL);
}

/* f with the DOT of sw transposed (a copy: f is unchanged). */
static TirFunc *swap_dot(const TirFunc *f, const Swap *sw) {
  TirFunc *g = arena_alloc(f->arena, sizeof *g);
  *g = *f;
  g->regs = arena_alloc(f->arena, sizeof *g->regs * (size_t)(f->nregs + 4));
  memcpy(g->regs, f->regs, sizeof *g->regs * (size_t)f->nregs);
  g->cap_regs = f->nregs + 4;
  const TirInst *d = &f->insts[sw->dot];
  const TileType *c = &f->regs[d->dst].type, *a = &f->regs[d->args[0]].type, *b = &f->regs[d->args[1]].type;
  int acc_t = new_reg(g, c, c->dims[1], c->dims[0]);
  int a_t = new_reg(g, b, b->dims[1], b->dims[0]), b_t = new_reg(g, a, a->dims[1], a->dims[0]);
  g->cap_insts = f->ninsts + 4;
  g->insts = arena_alloc(f->arena, sizeof *g->insts * (size_t)g->cap_insts);
  int n = 0;
  for (int i = 0; i < f->ninsts; i++) {
    const TirInst *in = &f->insts[i];
    if (i == sw->init) {
      g->insts[n] = *in;
      g->insts[n++].dst = acc_t;
    } else if (i == sw->dot) {
      g->insts[n++] = inst_of(TIR_TRANS, a_t, d->args[1], -1, -1, d->loc);
      g->insts[n++] = inst_of(TIR_TRANS, b_t, d->args[0], -1, -1, d->loc);
      g->insts[n++] = inst_of(TIR_DOT, acc_t, a_t, b_t, acc_t, d->loc);
    } else {
      g->insts[n++] = *in;
    }
    if (i == sw->end)
      g->insts[n++] = inst_of(TIR_TRANS, d->dst, acc_t, -1, -1, d->loc);
  }
  g->ninsts = n;
  return g;
}

TirFunc *tir_swap_small_dots(TirFunc *f, GpuArch arch, Diag *d) {
  if (arch != ARCH_SM90A || env_off("TILEC_SWAP_AB") || layout_kernel_uses_wgmma(f))
    return f;
  TirFunc *g = f;
  for (int j = 0; j < g->ninsts; j++) {
    Swap sw;
    if (g->insts[j].op == TIR_DOT && swappable(g, j, &sw)) {
      g = swap_dot(g, &sw);
      j += 2; /* past the two TRANSes before the new DOT */
    }
  }
  if (g == f || !layout_kernel_uses_wgmma(g))
    return f;
  return tir_verify(g, d, "swap_small_dots") ? g : NULL;
}
