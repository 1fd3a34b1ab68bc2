/* lower_nvptx_wgmma.c — DOT on Hopper warpgroup MMA: wgmma.mma_async.m64nNk16 (sm_90a).
 *
 * wgm x wgn warpgroups tile the [M, N] result (layout_wgmma_warpgroups); warpgroup g owns rows
 * (g % wgm) * M/wgm and columns (g / wgm) * N/wgn, as M/wgm/64 tiles of 64 x N/wgn. Per k16
 * step and m64 tile one wgmma reads A (a shared-memory descriptor, or 4 registers of f16 pairs)
 * and B (a descriptor) and accumulates into that tile's N/wgn/2 registers of the accumulator
 * (layout_wgmma_acc). The descriptors describe slices of tiles stored in layout_smem_wgmma's
 * swizzled layout (layout_wgmma_desc: start, leading / stride byte offsets, swizzle mode); only
 * the start address is a run-time value (the stage of a pipelined tile, the warpgroup's rows).
 * The protocol: wgmma.fence, the wgmmas, commit_group, wait_group 0; the accumulator values pass
 * through empty asm statements before the fence and after the wait, so that no other instruction
 * touches them while the wgmmas are in flight. The caller made the tiles' shared-memory writes
 * visible to the async proxy (fence.proxy.async before the barrier).
 * Overlap (d->in_flight = 1, a GEMM main loop, lower_nvptx.c plan_overlap): wait_group 1 instead,
 * so this dot's group runs on while the loop goes round (barrier, cp.async issue, the next
 * iteration's fence and wgmmas, which accumulate into the same registers: the ISA orders
 * wgmmas of one shape on the same accumulator without a wait). The wait retires the previous
 * iteration's group; the caller drains the last one (nvwgmma_wait) at the loop exit.
 */
#include "lower_nvptx_mma.h"

#include <stdio.h>
#include <string.h>

typedef struct Wg {
  NvWgmmaDot *d;
  LLVMBuilderRef b;
  LLVMTypeRef i32, i64, f32, half, bfl, h2, bf2, vd;
  LLVMValueRef wg_m, wg_n; /* i32: this warpgroup's index along M and along N */
} Wg;

static LLVMValueRef ci(Wg *w, int64_t v) { return LLVMConstInt(w->i32, (unsigned long long)v, 1); }

static LLVMValueRef asm_call(Wg *w, LLVMTypeRef ret, LLVMTypeRef *params, int np, const char *text,
                             const char *cons, LLVMValueRef *args) {
  LLVMTypeRef ft = LLVMFunctionType(ret, params, (unsigned)np, 0);
  LLVMValueRef fn = LLVMGetInlineAsm(ft, (char *)text, strlen(text), (char *)cons, strlen(cons), 1, 0,
                                     LLVMInlineAsmDialectATT, 0);
  return LLVMBuildCall2(w->b, ft, fn, args, (unsigned)np, "");
}

static void asm0(Wg *w, const char *text) { asm_call(w, w->vd, NULL, 0, text, "~{memory}", NULL); }

/* The value through an empty side-effect asm: ordered with the wgmma protocol's statements. */
static LLVMValueRef pin(Wg *w, LLVMValueRef v) {
  LLVMTypeRef t = w->f32;
  return asm_call(w, t, &t, 1, "", "=f,0", &v);
}

/* Two f32 values as one register of f16 (bf16) pairs, lo in the low half: one cvt.rn.f16x2.f32
 * instead of two conversions and a move (peep_cvt_pack drops the rounding the values went
 * through as elements of an f16 tile). */
static LLVMValueRef pack2(Wg *w, LLVMValueRef lo, LLVMValueRef hi) {
  LLVMValueRef in[2] = {hi, lo}; /* cvt's first source goes to the upper half */
  LLVMTypeRef ps[2] = {w->f32, w->f32};
  return asm_call(w, w->i32, ps, 2, w->d->bf16 ? "cvt.rn.bf16x2.f32 $0, $1, $2;" : "cvt.rn.f16x2.f32 $0, $1, $2;",
                  "=r,f,f", in);
}

/* XOR (add: the column blocks of a tile whose rows are not a power of two, SmemLayout) over the
 * set bits of idx (an i32 below 1 << nbits) of off[bit]. */
static LLVMValueRef lin_bits(Wg *w, LLVMValueRef idx, int nbits, const uint32_t *off, bool add) {
  LLVMValueRef acc = ci(w, 0);
  for (int b = 0; b < nbits; b++) {
    LLVMValueRef bit = LLVMBuildAnd(w->b, LLVMBuildLShr(w->b, idx, ci(w, b), ""), ci(w, 1), "");
    LLVMValueRef term = LLVMBuildAnd(w->b, LLVMBuildNeg(w->b, bit, ""), ci(w, off[b]), "");
    acc = add ? LLVMBuildAdd(w->b, acc, term, "") : LLVMBuildXor(w->b, acc, term, "");
  }
  return acc;
}

/* Per shared operand: the tile's shared-window address plus this warpgroup's part of the slice
 * origin (i32); slices add a constant (their origins' bits are disjoint from the warpgroup's). */
typedef struct SmemOperand {
  const NvWgmmaOperand *op;
  LLVMValueRef addr;
  LLVMValueRef d0;    /* the descriptor of element (0, 0), computed once per DOT */
  uint32_t start0;    /* its start offset */
} SmemOperand;

static LLVMValueRef full_desc(Wg *w, const SmemOperand *s, const WgmmaDesc *dd) {
  LLVMValueRef a = LLVMBuildAdd(w->b, s->addr, ci(w, dd->start), "");
  LLVMValueRef lo = LLVMBuildAnd(w->b, LLVMBuildLShr(w->b, a, ci(w, 4), ""), ci(w, 0x3fff), "");
  uint64_t hi = layout_wgmma_desc_bits(dd, 0);
  return LLVMBuildOr(w->b, LLVMBuildZExt(w->b, lo, w->i64, ""), LLVMConstInt(w->i64, hi, 0), "");
}

/* wg_idx walks operand dim mn (rows of A, columns of B) by `step` per warpgroup. The descriptor
 * of (0, 0) goes through an asm statement, so that LLVM derives every other one from it inside
 * the DOT instead of hoisting a dozen 64-bit loop-invariant descriptors out of the loop
 * (registers a rotated attention loop needs for its tiles). */
static SmemOperand smem_operand(Wg *w, const NvWgmmaOperand *op, LLVMValueRef wg_idx, int nwg, int32_t step) {
  SmemOperand s = {op, NULL, NULL, 0};
  uint32_t off[8] = {0};
  int nb = 0;
  for (int v = 1; v < nwg && nb < 8; v *= 2)
    off[nb++] = layout_wgmma_desc(op->smem, op->k_major, step * v, 0).start;
  LLVMValueRef base = LLVMBuildPtrToInt(w->b, op->base, w->i32, "");
  bool add = (op->smem->rows & (op->smem->rows - 1)) != 0;
  s.addr = LLVMBuildAdd(w->b, base, lin_bits(w, wg_idx, nb, off, add), "");
  WgmmaDesc d0 = layout_wgmma_desc(op->smem, op->k_major, 0, 0);
  s.start0 = d0.start;
  LLVMValueRef v = full_desc(w, &s, &d0);
  s.d0 = asm_call(w, w->i64, &w->i64, 1, "mov.b64 $0, $1;", "=l,l", &v);
  return s;
}

/* Shared-memory addresses stay below 2^18, so a descriptor's 14-bit address field never
 * carries: the descriptor of (mn0, k0) is d0 plus the 16-byte units between the two starts,
 * when the other fields agree. */
static LLVMValueRef desc(Wg *w, const SmemOperand *s, int32_t mn0, int32_t k0) {
  WgmmaDesc dd = layout_wgmma_desc(s->op->smem, s->op->k_major, mn0, k0);
  WgmmaDesc d0 = layout_wgmma_desc(s->op->smem, s->op->k_major, 0, 0);
  if (layout_wgmma_desc_bits(&dd, 0) != layout_wgmma_desc_bits(&d0, 0) || dd.start < s->start0 ||
      (dd.start - s->start0) % 16)
    return full_desc(w, s, &dd);
  return LLVMBuildAdd(w->b, s->d0, LLVMConstInt(w->i64, (dd.start - s->start0) / 16, 0), "");
}

static int put(char *buf, size_t cap, size_t *k, const char *fmt, int v) {
  int n = snprintf(buf + *k, cap - *k, fmt, v);
  if (n < 0 || (size_t)n >= cap - *k)
    return -1;
  *k += (size_t)n;
  return 0;
}

/* One wgmma over acc[0 .. N/wgn/2) (in place). a_regs: 4 i32 values, or NULL with da. */
static const char *wgmma(Wg *w, LLVMValueRef *acc, LLVMValueRef da, LLVMValueRef *a_regs, LLVMValueRef db,
                         bool trans_a, bool trans_b, int scale_d) {
  int nacc = w->d->Nissue / 2, nin = a_regs ? 4 : 1;
  const char *ty = w->d->bf16 ? "bf16" : "f16";
  char text[4096], cons[4096];
  size_t k = 0, c = 0;
  int err = 0;
  err |= put(text, sizeof text, &k, "{\n.reg .pred p;\nsetp.ne.b32 p, $%d, 0;\n", nacc + nin + 1);
  err |= put(text, sizeof text, &k, "wgmma.mma_async.sync.aligned.m64n%dk16.f32.", w->d->Nissue);
  err |= put(text, sizeof text, &k, ty[0] == 'b' ? "bf16.bf16 {" : "f16.f16 {", 0);
  for (int i = 0; i < nacc; i++) {
    err |= put(text, sizeof text, &k, i ? ", $%d" : "$%d", i);
    err |= put(cons, sizeof cons, &c, "=f,", 0);
  }
  if (a_regs) {
    err |= put(text, sizeof text, &k, "}, {$%d, ", nacc);
    err |= put(text, sizeof text, &k, "$%d, ", nacc + 1);
    err |= put(text, sizeof text, &k, "$%d, ", nacc + 2);
    err |= put(text, sizeof text, &k, "$%d}, ", nacc + 3);
    err |= put(cons, sizeof cons, &c, "r,r,r,r,", 0);
  } else {
    err |= put(text, sizeof text, &k, "}, $%d, ", nacc);
    err |= put(cons, sizeof cons, &c, "l,", 0);
  }
  err |= put(text, sizeof text, &k, "$%d, p, 1, 1", nacc + nin);
  if (!a_regs)
    err |= put(text, sizeof text, &k, ", %d", trans_a);
  err |= put(text, sizeof text, &k, ", %d;\n}", trans_b);
  err |= put(cons, sizeof cons, &c, "l,r", 0);
  for (int i = 0; i < nacc; i++)
    err |= put(cons, sizeof cons, &c, ",%d", i);
  if (err)
    return "wgmma asm text too long";
  LLVMTypeRef fts[128], params[128 + 6];
  LLVMValueRef args[128 + 6];
  int np = 0;
  for (int i = 0; i < nacc; i++)
    fts[i] = w->f32;
  for (int i = 0; i < nin; i++) {
    params[np] = a_regs ? w->i32 : w->i64;
    args[np++] = a_regs ? a_regs[i] : da;
  }
  params[np] = w->i64;
  args[np++] = db;
  params[np] = w->i32;
  args[np++] = ci(w, scale_d); /* 1: D += A B; 0: D = A B */
  for (int i = 0; i < nacc; i++) {
    params[np] = w->f32;
    args[np++] = acc[i];
  }
  LLVMTypeRef rt = LLVMStructTypeInContext(w->d->ctx, fts, (unsigned)nacc, 0);
  LLVMValueRef r = asm_call(w, rt, params, np, text, cons, args);
  for (int i = 0; i < nacc; i++)
    acc[i] = LLVMBuildExtractValue(w->b, r, (unsigned)i, "");
  return NULL;
}

static void wg_init(Wg *w, NvWgmmaDot *d) {
  memset(w, 0, sizeof *w);
  w->d = d;
  w->b = d->b;
  w->i32 = LLVMInt32TypeInContext(d->ctx);
  w->i64 = LLVMInt64TypeInContext(d->ctx);
  w->f32 = LLVMFloatTypeInContext(d->ctx);
  w->half = LLVMHalfTypeInContext(d->ctx);
  w->bfl = LLVMBFloatTypeInContext(d->ctx);
  w->h2 = LLVMVectorType(w->half, 2);
  w->bf2 = LLVMVectorType(w->bfl, 2);
  w->vd = LLVMVoidTypeInContext(d->ctx);
  w->wg_m = LLVMBuildAnd(w->b, d->wg, ci(w, d->wgm - 1), "");
  w->wg_n = LLVMBuildAnd(w->b, LLVMBuildLShr(w->b, d->wg, ci(w, layout_log2((uint32_t)d->wgm)), ""), ci(w, d->wgn - 1), "");
}

const char *nvwgmma_emit_dot(NvWgmmaDot *d) {
  Wg wg, *w = &wg;
  wg_init(w, d);
  int32_t Mw = d->M / d->wgm, Nw = d->N / d->wgn;
  int MT = Mw / 64, KT = d->K / 16, KTpad = d->Kpad / 16, nacc = Nw / 2, nout = d->Nissue / 2;
  if (Mw % 64 || Nw % 8 || Nw > 256 || !d->bop.smem || (!d->a.regs && !d->a.smem) || d->Nissue % 8 ||
      d->Nissue < 8 || d->Nissue > Nw)
    return "wgmma tiling";
  SmemOperand sa = {0}, sb;
  if (!d->a.regs)
    sa = smem_operand(w, &d->a, w->wg_m, d->wgm, Mw);
  sb = smem_operand(w, &d->bop, w->wg_n, d->wgn, Nw);
  /* Operand A from registers: packed before the fence (ptxas would otherwise insert a
   * warpgroup.arrive of its own before each wgmma that reads freshly written registers). */
  LLVMValueRef a4[4 * LAYOUT_WGMMA_MAX_A_FRAGS]; /* dot_wgmma_ok in layout.c */
  if (d->a.regs && MT * KT > LAYOUT_WGMMA_MAX_A_FRAGS)
    return "wgmma tiling (too many A fragments)";
  for (int mt = 0; d->a.regs && mt < MT; mt++)
    for (int kt = 0; kt < KT; kt++)
      for (int q = 0; q < 4; q++) {
        LLVMValueRef *v = &d->a.regs[8 * (kt + KTpad * mt)];
        a4[4 * (kt + KT * mt) + q] = pack2(w, v[2 * q], v[2 * q + 1]);
      }
  /* A zero accumulator: the first k step writes D = A B (scale-d 0) over undefined registers
   * instead of zeroing nacc registers with moves first. */
  for (int i = 0; i < nacc * MT; i++)
    d->c[i] = d->zero_acc || i % nacc >= nout ? LLVMGetUndef(w->f32) : pin(w, d->c[i]);
  asm0(w, "wgmma.fence.sync.aligned;");
  int issued = d->k_steps > 0 && d->k_steps < KT ? d->k_steps : KT;
  for (int kt = 0; kt < issued; kt++) {
    LLVMValueRef db = desc(w, &sb, 0, 16 * kt);
    for (int mt = 0; mt < MT; mt++) {
      LLVMValueRef da = d->a.regs ? NULL : desc(w, &sa, 64 * mt, 16 * kt);
      const char *err = wgmma(w, &d->c[nacc * mt], da, d->a.regs ? &a4[4 * (kt + KT * mt)] : NULL, db,
                              d->a.regs ? false : !d->a.k_major, !d->bop.k_major, d->zero_acc && kt == 0 ? 0 : 1);
      if (err)
        return err;
    }
  }
  asm0(w, "wgmma.commit_group.sync.aligned;");
  if (d->in_flight == 1) {
    /* No pin: the values are the asm's outputs, still being written by the tensor cores; the
     * only instructions that see them before nvwgmma_wait are the next iteration's pins (empty)
     * and wgmmas on the same registers. */
    asm0(w, "wgmma.wait_group.sync.aligned 1;");
    return NULL;
  }
  if (d->in_flight == 2) /* async: a later nvwgmma_wait retires it and pins the values */
    return NULL;
  if (d->in_flight != 0)
    return "wgmma groups in flight";
  asm0(w, "wgmma.wait_group.sync.aligned 0;");
  for (int i = 0; i < nacc * MT; i++)
    if (i % nacc < nout)
      d->c[i] = pin(w, d->c[i]);
  return NULL;
}

void nvwgmma_wait(LLVMContextRef ctx, LLVMBuilderRef b, int pending, LLVMValueRef *vals, int n) {
  Wg w = {.b = b, .f32 = LLVMFloatTypeInContext(ctx), .vd = LLVMVoidTypeInContext(ctx)};
  asm0(&w, pending ? "wgmma.wait_group.sync.aligned 1;" : "wgmma.wait_group.sync.aligned 0;");
  for (int i = 0; i < n; i++)
    if (!LLVMIsUndef(vals[i]))
      vals[i] = pin(&w, vals[i]);
}

/* The drain of an overlapped loop: wait_group 0, then each value copied by a real instruction
 * (x + -0.0 is x for every x, NaN and -0.0 included). Without the copy, an epilogue that converts
 * the accumulator straight to f16 pairs (`C = to_f16(acc)`) reads the wgmma registers with the
 * packing conversion, and ptxas serializes every wgmma of the entry (C7514), loop included. */
void nvwgmma_drain(LLVMContextRef ctx, LLVMBuilderRef b, LLVMValueRef *vals, int n) {
  Wg w = {.b = b, .f32 = LLVMFloatTypeInContext(ctx), .vd = LLVMVoidTypeInContext(ctx)};
  asm0(&w, "wgmma.wait_group.sync.aligned 0;");
  for (int i = 0; i < n; i++)
    if (!LLVMIsUndef(vals[i]))
      vals[i] = asm_call(&w, w.f32, &w.f32, 1, "add.f32 $0, $1, 0f80000000;", "=f,f", &vals[i]);
}
