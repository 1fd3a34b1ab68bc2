/* lower_nvptx_mma.c — DOT on tensor cores: ldmatrix + mma.sync.m16n8k16 (f16/bf16 in, f32 acc).
 *
 * The warps tile the [M, N] result (layout_mma_warps): warp w owns rows (w % wm) * M/wm and
 * columns (w / wm) * N/wn, as MT x NT fragments of 16 x 8 (layout_mma_acc). Per k16 step each
 * warp loads its MT operand-A fragments and NT operand-B fragments, then issues MT * NT mma.sync.
 * An operand in shared memory is read with ldmatrix (x4: a whole 16x16 A block, or two n8 tiles
 * of B; x2 when a warp has a single n8 tile); the .trans variant when the stored rows run along
 * the fragment's pair dimension (B stored [K, N], A stored transposed). The lane addresses come
 * from layout_ldmatrix_lane_bases, which the unit tests check against the ldmatrix definition.
 * A register operand arrives already in the fragment layout (the caller converts it through the
 * layout machinery; for an f32 accumulator turned f16 that is free) and is only packed in pairs.
 * The k loop is unrolled: K is a compile-time tile dim.
 */
#include "lower_nvptx_mma.h"

#include <string.h>

typedef struct Em {
  NvMmaDot *d;
  LLVMBuilderRef b;
  LLVMTypeRef i8, i32, f32, h2, half, bfl, bf2;
  LLVMValueRef warp_m, warp_n; /* i32: this warp's first row / column of the result */
  LLVMValueRef lane;
} Em;

static LLVMValueRef ci(Em *e, int64_t v) { return LLVMConstInt(e->i32, (unsigned long long)v, 1); }

static const char *NAME_MMA_F16 = "llvm.nvvm.mma.m16n8k16.row.col.f32.f32";
static const char *NAME_MMA_BF16 = "llvm.nvvm.mma.m16n8k16.row.col.bf16";
static const char *NAME_LDSM[2][2] = {
    {"llvm.nvvm.ldmatrix.sync.aligned.m8n8.x2.b16", "llvm.nvvm.ldmatrix.sync.aligned.m8n8.x2.trans.b16"},
    {"llvm.nvvm.ldmatrix.sync.aligned.m8n8.x4.b16", "llvm.nvvm.ldmatrix.sync.aligned.m8n8.x4.trans.b16"},
};

/* The caller checked every name with lookup_all first. */
static LLVMValueRef call(Em *e, const char *name, LLVMTypeRef *ovl, int novl, LLVMValueRef *args, int n) {
  LLVMContextRef ctx = e->d->ctx;
  unsigned id = LLVMLookupIntrinsicID(name, strlen(name));
  LLVMValueRef fn = LLVMGetIntrinsicDeclaration(e->d->mod, id, ovl, (size_t)novl);
  LLVMTypeRef ty = LLVMIntrinsicGetType(ctx, id, ovl, (size_t)novl);
  return LLVMBuildCall2(e->b, ty, fn, args, (unsigned)n, "");
}

static const char *lookup_all(void) {
  const char *names[6] = {NAME_MMA_F16, NAME_MMA_BF16, NAME_LDSM[0][0], NAME_LDSM[0][1], NAME_LDSM[1][0],
                          NAME_LDSM[1][1]};
  for (int i = 0; i < 6; i++)
    if (!LLVMLookupIntrinsicID(names[i], strlen(names[i])))
      return names[i];
  return NULL;
}

/* ------------------------------------------------------- shared operands */

/* Per operand in shared memory: the byte offset of this lane's ldmatrix row for the block at
 * operand coordinate (0, 0) of the warp's part; blocks add a constant. */
typedef struct SmemOp {
  const NvMmaOperand *op;
  int nmat;             /* matrices per ldmatrix: 4, or 2 */
  bool trans_insn;      /* ldmatrix .trans */
  LLVMValueRef lane_off;
} SmemOp;

static LLVMValueRef lane_coord(Em *e, const int32_t base[LAYOUT_LANE_BITS][2], int dim) {
  LLVMValueRef acc = ci(e, 0);
  for (int bit = 0; bit < LAYOUT_LANE_BITS; bit++) {
    if (!base[bit][dim])
      continue;
    LLVMValueRef on = LLVMBuildAnd(e->b, LLVMBuildLShr(e->b, e->lane, ci(e, bit), ""), ci(e, 1), "");
    acc = LLVMBuildAdd(e->b, acc, LLVMBuildMul(e->b, on, ci(e, base[bit][dim]), ""), "");
  }
  return acc;
}

/* Byte offset of operand element (i, j) given as i32 values. */
static LLVMValueRef elem_off(Em *e, const NvMmaOperand *op, LLVMValueRef i, LLVMValueRef j) {
  LLVMValueRef row = op->trans ? j : i, col = op->trans ? i : j;
  LLVMValueRef idx = LLVMBuildAdd(e->b, LLVMBuildMul(e->b, row, ci(e, op->pitch), ""), col, "");
  return LLVMBuildMul(e->b, idx, ci(e, 2), "");
}

/* is_b: operand B. The fragment's register pairs run along operand dim 1 for A (k) and dim 0 for
 * B (k); plain ldmatrix pairs elements along the stored row, so .trans is needed when the stored
 * rows do not run along that dim. */
static SmemOp smem_op(Em *e, const NvMmaOperand *op, bool is_b, int nmat, LLVMValueRef wi, LLVMValueRef wj) {
  SmemOp s = {op, nmat, is_b ? !op->trans : op->trans, NULL};
  int32_t base[LAYOUT_LANE_BITS][2];
  layout_ldmatrix_lane_bases(op->trans ? 1 : 0, nmat, base);
  LLVMValueRef i = LLVMBuildAdd(e->b, lane_coord(e, base, 0), wi, "");
  LLVMValueRef j = LLVMBuildAdd(e->b, lane_coord(e, base, 1), wj, "");
  s.lane_off = elem_off(e, op, i, j);
  return s;
}

/* ldmatrix of the 16x16 (x2: 16x8) block at operand coordinate (i0, j0) relative to the warp. */
static void ldsm(Em *e, const SmemOp *s, int32_t i0, int32_t j0, LLVMValueRef *out) {
  int32_t row = s->op->trans ? j0 : i0, col = s->op->trans ? i0 : j0;
  LLVMValueRef off = LLVMBuildAdd(e->b, s->lane_off, ci(e, (int64_t)(row * s->op->pitch + col) * 2), "");
  LLVMValueRef p = LLVMBuildInBoundsGEP2(e->b, e->i8, s->op->base, &off, 1, "");
  LLVMTypeRef pt = LLVMTypeOf(p);
  LLVMValueRef r = call(e, NAME_LDSM[s->nmat == 4][s->trans_insn], &pt, 1, &p, 1);
  for (int k = 0; k < s->nmat; k++)
    out[k] = LLVMBuildExtractValue(e->b, r, (unsigned)k, "");
}

/* ------------------------------------------------------ register operands */

static LLVMValueRef pack2(Em *e, LLVMValueRef lo, LLVMValueRef hi) {
  LLVMTypeRef et = e->d->bf16 ? e->bfl : e->half, vt = e->d->bf16 ? e->bf2 : e->h2;
  LLVMValueRef v = LLVMGetUndef(vt);
  v = LLVMBuildInsertElement(e->b, v, LLVMBuildFPTrunc(e->b, lo, et, ""), ci(e, 0), "");
  v = LLVMBuildInsertElement(e->b, v, LLVMBuildFPTrunc(e->b, hi, et, ""), ci(e, 1), "");
  return LLVMBuildBitCast(e->b, v, e->i32, "");
}

/* ------------------------------------------------------------------ mma */

static void mma(Em *e, LLVMValueRef *a, LLVMValueRef *bb, LLVMValueRef *c) {
  LLVMValueRef args[10];
  for (int k = 0; k < 4; k++)
    args[k] = e->d->bf16 ? a[k] : LLVMBuildBitCast(e->b, a[k], e->h2, "");
  for (int k = 0; k < 2; k++)
    args[4 + k] = e->d->bf16 ? bb[k] : LLVMBuildBitCast(e->b, bb[k], e->h2, "");
  for (int k = 0; k < 4; k++)
    args[6 + k] = c[k];
  LLVMValueRef r = call(e, e->d->bf16 ? NAME_MMA_BF16 : NAME_MMA_F16, NULL, 0, args, 10);
  for (int k = 0; k < 4; k++)
    c[k] = LLVMBuildExtractValue(e->b, r, (unsigned)k, "");
}

static void em_init(Em *e, NvMmaDot *d) {
  memset(e, 0, sizeof *e);
  e->d = d;
  e->b = d->b;
  e->i8 = LLVMInt8TypeInContext(d->ctx);
  e->i32 = LLVMInt32TypeInContext(d->ctx);
  e->f32 = LLVMFloatTypeInContext(d->ctx);
  e->half = LLVMHalfTypeInContext(d->ctx);
  e->bfl = LLVMBFloatTypeInContext(d->ctx);
  e->h2 = LLVMVectorType(e->half, 2);
  e->bf2 = LLVMVectorType(e->bfl, 2);
  e->lane = LLVMBuildAnd(e->b, d->tid, ci(e, 31), "");
  LLVMValueRef warp = LLVMBuildLShr(e->b, d->tid, ci(e, 5), "");
  int lwm = layout_log2((uint32_t)d->wm);
  LLVMValueRef wmi = LLVMBuildAnd(e->b, warp, ci(e, d->wm - 1), "");
  LLVMValueRef wni = LLVMBuildAnd(e->b, LLVMBuildLShr(e->b, warp, ci(e, lwm), ""), ci(e, d->wn - 1), "");
  e->warp_m = LLVMBuildMul(e->b, wmi, ci(e, d->M / d->wm), "");
  e->warp_n = LLVMBuildMul(e->b, wni, ci(e, d->N / d->wn), "");
}

const char *nvmma_emit_dot(NvMmaDot *d) {
  const char *missing = lookup_all();
  if (missing)
    return missing;
  Em em, *e = &em;
  em_init(e, d);
  int MT = d->M / d->wm / 16, NT = d->N / d->wn / 8, KT = d->K / 16, KTpad = d->Kpad / 16;
  int nmat_b = NT >= 2 ? 4 : 2;
  SmemOp sa = {0}, sb = {0};
  if (!d->a.regs)
    sa = smem_op(e, &d->a, false, 4, e->warp_m, ci(e, 0));
  if (!d->bop.regs)
    sb = smem_op(e, &d->bop, true, nmat_b, ci(e, 0), e->warp_n);
  LLVMValueRef af[4 * LAYOUT_MMA_MAX_MT], bf[2 * LAYOUT_MMA_MAX_NT]; /* layout_dot_uses_mma */
  if (MT > LAYOUT_MMA_MAX_MT || NT > LAYOUT_MMA_MAX_NT)
    return "mma tiling (too many fragments per warp)";
  for (int kt = 0; kt < KT; kt++) {
    for (int mt = 0; mt < MT; mt++) {
      if (!d->a.regs) {
        ldsm(e, &sa, 16 * mt, 16 * kt, &af[4 * mt]);
        continue;
      }
      LLVMValueRef *v = &d->a.regs[8 * (kt + KTpad * mt)];
      for (int q = 0; q < 4; q++)
        af[4 * mt + q] = pack2(e, v[2 * q], v[2 * q + 1]);
    }
    for (int nt = 0; nt < NT; nt += d->bop.regs ? 1 : nmat_b / 2) {
      if (!d->bop.regs) {
        ldsm(e, &sb, 16 * kt, 8 * nt, &bf[2 * nt]);
        continue;
      }
      LLVMValueRef *v = &d->bop.regs[4 * (nt + NT * kt)];
      for (int q = 0; q < 2; q++)
        bf[2 * nt + q] = pack2(e, v[2 * q], v[2 * q + 1]);
    }
    for (int mt = 0; mt < MT; mt++)
      for (int nt = 0; nt < NT; nt++)
        mma(e, &af[4 * mt], &bf[2 * nt], &d->c[4 * (nt + NT * mt)]);
  }
  return NULL;
}
