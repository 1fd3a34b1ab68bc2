/* lower_nvptx.c — TIR -> LLVM IR (C API) -> PTX. The only compiler file with llvm-c/.
 *
 * Strategy (docs/architecture.md, "GPU lowering"):
 *  - every tile has a linear layout (layout.c); a register tile is, per thread, an alloca array of
 *    its elements indexed by constants (SROA turns them into registers); float tiles hold f32 values
 *    already rounded to their element type, ints i32, bools i1;
 *  - shared tiles live in dynamic shared memory, rows padded by 16 bytes against bank conflicts
 *    where a DOT or a transposed view reads them (read_elementwise);
 *    every shared write is preceded by a barrier when shared memory was read since the last one,
 *    and followed by one, so readers always see complete tiles and writers never overtake readers;
 *  - reductions: in-thread, then shfl.sync.bfly over the lane bits that walk the axis, then one
 *    shared-memory step over the warp bits that walk it;
 *  - layout conversions (BCAST, TRANS, mismatched layouts) are register moves when the layouts
 *    allow, else a round trip through a scratch slot of shared memory;
 *  - LOAD/STORE: per-thread masked accesses, 16-byte vectors when the run is in bounds and aligned
 *    (checked at run time per run), scalar masked accesses otherwise; the paths of a register
 *    load meet in memory words, unpacked after the join;
 *  - after O3, cheap integer values (columns, bounds tests) are recomputed in the blocks that use
 *    them rather than kept alive (remat_remote_uses); memory-bound kernels ask ptxas for an
 *    occupancy (.minnctapersm, occupancy_blocks);
 *  - DOT: tensor cores (lower_nvptx_mma.c) or FMA over K from operands in shared memory;
 *  - `for ... pipeline P`: shared-tile loads as cp.async copies P-1 iterations ahead (plan_pipes).
 */
#include "layout.h"
#include "lower_nvptx_mma.h"
#include "tilec.h"

#include <llvm-c/Analysis.h>
#include <llvm-c/Core.h>
#include <llvm-c/Target.h>
#include <llvm-c/TargetMachine.h>
#include <llvm-c/Transforms/PassBuilder.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define MAX_NEST 64

/* Per TIR register. */
typedef struct Tile {
  const Layout *lay;
  int n;                 /* registers per thread */
  LLVMValueRef regs;     /* PLACE_REG: alloca [n x T] */
  bool shared;           /* backed by shared memory */
  bool narrow;           /* PLACE_REG f16/bf16 that a packed min/max reads or writes, or a max/min
                            reduction reads (plan_narrow): its registers hold the narrow values,
                            so loop-carried ones stay packed (else f32 values) */
  int smem_off;          /* shared: byte offset of its buffer */
  int pitch;             /* shared: elements per padded row */
  int view_of;           /* TRANS of a shared tile read in place: the source register, else -1 */
  int pipe;              /* shared, filled by a pipelined load: index into Cg.pipes, else -1 */
  bool head;             /* shared, a head load's (ws entry: the producer's TMA fills it) */
  bool in_flight;        /* shared, its cp.async copies not yet waited for (async_shared_load) */
  int group;             /* in flight: its copies' commit group, counted in Cg.commits (of a
                            progressive copy: the last part's) */
  int parts;             /* a progressive copy's commit groups (TirSchedule.progs), else 0 */
  int stage_bytes;       /* pipelined: bytes of one stage (the buffer holds Pipe.stages of them) */
  const SmemLayout *swz; /* shared wgmma operand: its swizzled layout (no pitch), else NULL */
  int stored_cols;       /* a rank-1 shared tile read only through windows: the elements its
                            buffer holds, its length rounded up to 16 bytes (a row of 50257
                            logits: 100 KB, where its layout's power-of-two shape takes 128 KB);
                            its copies skip the positions past them (stored_row). Else 0. */
  /* A cp.async ring tile whose rows may start anywhere in memory (rows of 50257 f16 logits):
   * a misaligned row is copied from the 16-byte aligned address at or before it, so element
   * (i, j) sits shift_i elements past its place, shift_i the row's misalignment in elements;
   * get_tile adds it back (plan_shifted). */
  const TirInst *shifted; /* the LOAD filling it, or NULL */
  LLVMValueRef shift;     /* a row copied once, shifted, that windows read (plan_shifted): its
                             misalignment in elements (i32), set by its LOAD; window column c
                             sits at c + shift */
  bool ahead;             /* a lookahead load's register: pipe_top fills it, its LOAD emits nothing */
  const bool *pad;        /* register tile: which registers hold only padding (read as undef, so
                             LLVM drops what is computed from them), or NULL: none */
  bool window_stored;     /* shared, written by window stores: a window's reads outside it load
                             nothing (an owned store's loop has no barrier against them) */
} Tile;

/* A tile operand seen as a 2-D array in shared memory (DOT operands). */
typedef struct SmemView {
  LLVMValueRef base;     /* i8 addrspace(3) pointer */
  ElemType elem;
  int pitch;
  bool trans;            /* element (i, j) lives at row j, column i */
} SmemView;

/* A pipelined loop of the schedule (tir_schedule.c) and the emitter's state for it. The cp.async
 * entry issues the ring's copies tp->ahead iterations ahead into tp->stages rotating stages
 * (docs/architecture.md, "Pipelined loads"); the warp-specialized entry waits for the
 * producer's TMA on the stage's full mbarrier and frees it on its empty one. */
typedef struct Pipe {
  const TirPipe *tp;
  LLVMValueRef rslot, wslot; /* i32 allocas: the stage the body reads; the stage the next prefetch fills */
  LLVMValueRef phase;        /* ws: i32 alloca, the parity of rslot's full barrier this round */
  LLVMValueRef iter;         /* ws, and a thread-private ring: i32 alloca, iterations completed */
  LLVMValueRef *next;        /* per lookahead load (TirPipe.lookahead) and iteration ahead (1 ..
                                tp->lookahead_dist): alloca [n x T], that iteration's values,
                                nearest first (next[l * lookahead_dist + k]: k + 1 ahead) */
} Pipe;

/* What the block did to global memory since its last barrier (order_global), per tensor
 * argument: the kind of write (GMEM_STORED / GMEM_ADDED / GMEM_MAXED; 0: none) and the register
 * LOAD of it (-1: none; GMEM_LOADS_MIXED: several that differ, or a copy into shared memory).
 * Saved at a branch or a loop and joined where the paths meet. */
typedef struct GmemState {
  unsigned char *kind;
  int *load;
} GmemState;

typedef struct Nest {
  TirOp op;
  Pipe *pipe;            /* FOR: its pipeline, or NULL */
  LLVMBasicBlockRef cond, exit, false_bb, end_bb;
  LLVMBasicBlockRef join; /* FOR with an overlapped dot (cp.async entry): where the path of a
                             loop that runs no iteration meets the drained one, or NULL */
  LLVMValueRef counter, hi, step;
  int ind;               /* FOR: the induction register */
  int first;             /* the FOR / IF instruction */
  GmemState *gm;         /* global-memory order state at the FOR / IF (a loop that runs no
                            iteration, a branch not taken: joined at the end) and, after an
                            ELSE, of the THEN branch */
} Nest;

/* Scratch slots: A and B stage DOT operands and layout conversions; RED0 and RED1 hold the
 * per-warp partials of cross-warp reductions, used in turn, so a reduction right after another
 * (softmax's max then sum, layernorm's mean then variance) needs no barrier before writing its
 * partials: the previous reduction read the other slot. */
/* SLOT_RED0_ODD, SLOT_RED1_ODD: RED0 and RED1 of the odd iterations of a thread-private ring's
 * loop (Cg.red_odd). */
enum { SLOT_A, SLOT_B, SLOT_RED0, SLOT_RED1, SLOT_CLUSTER, SLOT_RED0_ODD, SLOT_RED1_ODD, NSLOTS };

typedef struct Cg {
  TirFunc *f;
  Diag *d;
  const NvptxOptions *o;
  bool failed;
  LLVMContextRef ctx;
  LLVMModuleRef mod;
  LLVMBuilderRef b, eb; /* eb: allocas at the top of the entry block */
  LLVMValueRef fn;
  LLVMBasicBlockRef entry;
  LLVMTypeRef i1, i8, i16, i32, i64, f16, bf16, f32, vd, p0, p1, p3;
  LLVMValueRef *tensor_ptr;          /* per arg */
  LLVMValueRef (*tensor_stride)[TILE_MAX_RANK];
  LLVMValueRef *scalar;              /* per arg */
  LLVMValueRef *dimv;                /* per TirDim */
  Tile *tiles;
  LLVMValueRef smem;                 /* extern dynamic shared array */
  LLVMValueRef slot_ph[NSLOTS];      /* placeholders, replaced by smem + offset at the end */
  int slot_size[NSLOTS];
  int smem_tiles;                    /* bytes used by shared tiles */
  bool dirty;                        /* shared memory read since the last barrier */
  int barrier_at[MAX_NEST];          /* barriers owed before these instructions or the first
                                        after them (the ends of loops of owned window stores) */
  int nbarrier_at;
  GmemState *gm;                     /* global memory since the last barrier (order_global) */
  int stage_ahead;                   /* ring tiles are read from the stage this many iterations
                                        ahead (a rotated loop's next-stage DOT, TirInst.stage) */
  bool red_read[2];                  /* slot RED0 / RED1 read since the last barrier */
  bool barriered;                    /* a barrier since the last control-flow marker or the
                                        thread-private ring's wait (a body with none gets one at
                                        its latch: see pipe_top) */
  LLVMValueRef red_odd;              /* in a thread-private ring's loop: i1, an odd iteration, whose
                                        reductions use the _ODD slots; else NULL */
  bool odd_slots_used;               /* ... and its body took a slot by red_odd */
  bool copies_in_flight;             /* some tile's cp.async copies not yet waited for */
  int commits;                       /* commit groups of top-level tile copies so far (static) */
  int prog_tile, prog_end;           /* in the loop of a progressive copy: its tile, the ENDFOR;
                                        else -1 */
  LLVMValueRef prog_landed;          /* i32 alloca: the parts that loop has waited for, minus 1 */
  int red_next;                      /* the RED slot the next cross-warp reduction uses */
  LLVMValueRef tid, lane, warp;
  Nest nest[MAX_NEST];
  int depth;
  Pipe *pipes;                       /* the schedule's pipelined loops */
  int npipes;
  int stages_used;                   /* the most stages any loop got */
  const TirSchedule *sched;
  bool ws;                           /* this entry is the warp-specialized one (sched->ws) */
  bool cvt_unpacked;                 /* ws: P rounded to f16 where the softmax makes it, not packed at
                                        the dot (WsPlan.unpacked) */
  int mbar_off;                      /* ws: byte offset of full[stages] then empty[stages] */
  LLVMValueRef *tmap;                /* ws: per tensor map, its generic address (grid_constant) */
  bool persistent;                   /* ws and sched->persistent: the body runs once per tile */
  LLVMValueRef grid_tiles[4];        /* persistent: the logical grid and the raster group (i32 parameters) */
  LLVMValueRef pblock[3];            /* persistent: i32 allocas, the tile's block index */
  bool cluster;                      /* persistent with a cluster of 2 (sched->cluster) */
  int groups;                        /* ws: consumer groups taking turns on tiles (sched->groups) */
  LLVMValueRef group;                /* consumers: this thread's group (i32) */
  LLVMValueRef tile_j;               /* ping-pong consumers: i32 alloca, the group's tiles so far */
  LLVMValueRef head_count;           /* head loads, consumers: i32 alloca, the tiles whose head
                                        tiles they released (copy count % head_stages) */
  Tile *staging;                     /* TMA stores: per tensor map (store maps only), its staging
                                        tile in shared memory (swz set; the STORE's register tile
                                        written in TMA's layout) */
  struct Reduction **red_pair;       /* per instruction: a REDUCE lowered with an earlier one
                                        (reduce_partner), its result to put there, or NULL */
  Tile *shift_stage;                 /* shifted stores: per instruction, the staging buffer of a
                                        STORE whose rows may start anywhere (pitch, smem_off;
                                        pitch 0: none; plan_shifted_store); view_of >= 0: it is
                                        that ring tile's current stage (shift_stage_alias) */
  LLVMValueRef crank;                /* cluster: this block's rank in it (0, 1) */
  int cluster_ops;                   /* cluster reductions emitted: each has 4 bytes of SLOT_CLUSTER */
  int *retry_cap;                    /* set when shared memory overflows with stages: retry with this cap */
  SrcLoc loc;                        /* of the instruction being lowered */
  bool wgmma;                        /* DOTs on wgmma (sm_90a, layout_kernel_uses_wgmma) */
  const char *fn_name;               /* the entry point's name */
  bool aligned_version;              /* emitting the version of a pipelined loop whose shifted
                                        tiles and stores are all aligned (version_loop): the
                                        plain copies, reads and stores */
  bool protocol_only;                /* emitting an idle warpgroup's loop (idle_band_loop): its
                                        markers, scalars and synchronization only */
  int nbarriers;                     /* consumer barriers emitted so far */
  const TirInst **def_once;          /* per register: its one defining instruction, or NULL */
  bool *in_index_select;             /* per register: defined by a compare or broadcast that
                                        lower_index_select lowers with the select reading it */
} Cg;

/* ------------------------------------------------------------ helpers */

/* Whether tile t is read and copied shifted here: not in a loop version whose rows are all
 * aligned (version_loop). */
static bool shifted_here(const Cg *g, const Tile *t) { return t->shifted && !g->aligned_version; }

/* Whether register r's tile is a row plan_shifted_row copies shifted (once, or on a ring of
 * rows): a windowed row; plan_shifted never takes a tile that windows read. */
static bool shifted_row_tile(const Cg *g, int r) {
  return g->tiles[r].shifted && tir_windowed_row_load(g->f, r) >= 0;
}

__attribute__((format(printf, 2, 3))) static void cg_error(Cg *g, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  if (!g->failed)
    diag_vreport(g->d, DIAG_ERROR, g->loc, fmt, ap);
  va_end(ap);
  g->failed = true;
}

static LLVMValueRef ci32(Cg *g, int64_t v) { return LLVMConstInt(g->i32, (unsigned long long)v, 1); }
static LLVMValueRef ci64(Cg *g, int64_t v) { return LLVMConstInt(g->i64, (unsigned long long)v, 1); }
static LLVMValueRef cf32(Cg *g, double v) { return LLVMConstReal(g->f32, v); }

/* Every intrinsic is looked up by name: a misspelled one would otherwise become an extern call. */
static LLVMValueRef call_intrin(Cg *g, const char *name, LLVMTypeRef *ovl, int novl, LLVMValueRef *args,
                                int nargs) {
  unsigned id = LLVMLookupIntrinsicID(name, strlen(name));
  if (!id) {
    cg_error(g, "internal error: LLVM has no intrinsic %s", name);
    return LLVMGetUndef(g->i32);
  }
  LLVMValueRef fn = LLVMGetIntrinsicDeclaration(g->mod, id, ovl, (size_t)novl);
  LLVMTypeRef ty = LLVMIntrinsicGetType(g->ctx, id, ovl, (size_t)novl);
  return LLVMBuildCall2(g->b, ty, fn, args, (unsigned)nargs, "");
}

static LLVMValueRef intrin0(Cg *g, const char *name) { return call_intrin(g, name, NULL, 0, NULL, 0); }
static LLVMValueRef intrin1(Cg *g, const char *name, LLVMValueRef x) {
  return call_intrin(g, name, NULL, 0, &x, 1);
}
static LLVMValueRef ovl1(Cg *g, const char *name, LLVMValueRef x) {
  LLVMTypeRef t = LLVMTypeOf(x);
  return call_intrin(g, name, &t, 1, &x, 1);
}
static LLVMValueRef ovl2(Cg *g, const char *name, LLVMValueRef x, LLVMValueRef y) {
  LLVMTypeRef t = LLVMTypeOf(x);
  LLVMValueRef a[2] = {x, y};
  return call_intrin(g, name, &t, 1, a, 2);
}

static void inline_asm0(Cg *g, const char *text);
static void zero_wait_at_exit(Cg *g);
static void gmem_set(Cg *g, const GmemState *s);

static void barrier(Cg *g) {
  /* wgmma reads shared memory through the async proxy: every thread's shared writes (st.shared,
   * cp.async landed) are made visible to it before the barrier that publishes them. */
  if (g->wgmma)
    inline_asm0(g, "fence.proxy.async.shared::cta;");
  if (g->ws) { /* the consumers (of this group) only: the producer warpgroup never reaches one */
    LLVMValueRef a[2] = {LLVMBuildAdd(g->b, g->group, ci32(g, 1), ""), ci32(g, g->sched->consumer_threads)};
    call_intrin(g, "llvm.nvvm.barrier.sync.cnt", NULL, 0, a, 2);
  } else {
    intrin0(g, "llvm.nvvm.barrier0");
  }
  g->barriered = true;
  g->dirty = false;
  g->red_read[0] = g->red_read[1] = false;
  g->nbarriers++;
  if (g->gm)
    gmem_set(g, NULL);
}

static void inline_asm0(Cg *g, const char *text) {
  LLVMTypeRef ft = LLVMFunctionType(g->vd, NULL, 0, 0);
  LLVMValueRef fn = LLVMGetInlineAsm(ft, (char *)text, strlen(text), "~{memory}", 9, 1, 0, LLVMInlineAsmDialectATT, 0);
  LLVMBuildCall2(g->b, ft, fn, NULL, 0, "");
}

static LLVMValueRef entry_alloca(Cg *g, LLVMTypeRef t, int n) {
  LLVMValueRef first = LLVMGetFirstInstruction(g->entry);
  if (first)
    LLVMPositionBuilderBefore(g->eb, first);
  else
    LLVMPositionBuilderAtEnd(g->eb, g->entry);
  return LLVMBuildArrayAlloca(g->eb, t, ci32(g, n), "");
}

static LLVMBasicBlockRef new_bb(Cg *g, const char *name) {
  return LLVMAppendBasicBlockInContext(g->ctx, g->fn, name);
}

/* Type of a tile's elements in registers, and in memory. */
static LLVMTypeRef reg_type(Cg *g, ElemType e) {
  return e == TY_BOOL ? g->i1 : e == TY_I32 ? g->i32 : g->f32;
}
static LLVMTypeRef mem_type(Cg *g, ElemType e) {
  switch (e) {
  case TY_BOOL: return g->i8;
  case TY_I32: return g->i32;
  case TY_F16: return g->f16;
  case TY_BF16: return g->bf16;
  default: return g->f32;
  }
}

/* Register value -> memory value and back. */
static LLVMValueRef to_mem(Cg *g, ElemType e, LLVMValueRef v) {
  if (e == TY_BOOL)
    return LLVMBuildZExt(g->b, v, g->i8, "");
  if (e == TY_F16 || e == TY_BF16)
    return LLVMBuildFPTrunc(g->b, v, mem_type(g, e), "");
  return v;
}
static LLVMValueRef from_mem(Cg *g, ElemType e, LLVMValueRef v) {
  if (e == TY_BOOL)
    return LLVMBuildICmp(g->b, LLVMIntNE, v, LLVMConstInt(g->i8, 0, 0), "");
  if (e == TY_F16 || e == TY_BF16)
    return LLVMBuildFPExt(g->b, v, g->f32, "");
  return v;
}
/* A value as stored in a tile of type e: f16/bf16 rounded to nearest even. */
static LLVMValueRef round_elem(Cg *g, ElemType e, LLVMValueRef v) {
  if (e == TY_F16 || e == TY_BF16)
    return from_mem(g, e, to_mem(g, e, v));
  return v;
}

static LLVMValueRef const_elem(Cg *g, ElemType e, double v) {
  v = round_to_elem(e, v);
  if (e == TY_BOOL)
    return LLVMConstInt(g->i1, v != 0, 0);
  if (e == TY_I32)
    return ci32(g, (int64_t)v);
  return cf32(g, v);
}

/* ---------------------------------------------------- layout arithmetic */

/* XOR of the bases of the set bits of this thread's lane and warp index (a run-time i32). */
static LLVMValueRef lw_value(Cg *g, const uint32_t *lane_b, const uint32_t *warp_b, int nwarp) {
  LLVMValueRef acc = ci32(g, 0);
  for (int k = 0; k < LAYOUT_LANE_BITS + nwarp; k++) {
    uint32_t basis = k < LAYOUT_LANE_BITS ? lane_b[k] : warp_b[k - LAYOUT_LANE_BITS];
    if (!basis)
      continue;
    LLVMValueRef bit = LLVMBuildAnd(g->b, LLVMBuildLShr(g->b, g->tid, ci32(g, k), ""), ci32(g, 1), "");
    LLVMValueRef term = LLVMBuildAnd(g->b, LLVMBuildNeg(g->b, bit, ""), ci32(g, basis), "");
    acc = LLVMBuildXor(g->b, acc, term, "");
  }
  return acc;
}

static LLVMValueRef layout_lw(Cg *g, const Layout *l) {
  return lw_value(g, l->basis[LAY_LANE], l->basis[LAY_WARP], l->nbits[LAY_WARP]);
}

static uint32_t lw_bits(const Layout *l) {
  uint32_t m = 0;
  for (int k = LAY_LANE; k < LAY_NKINDS; k++)
    for (int b = 0; b < l->nbits[k]; b++)
      m |= l->basis[k][b];
  return m;
}

/* Flat coordinate of register r of this thread: constant part XOR the lane/warp part; an add
 * when the bits are disjoint (address arithmetic folds better). */
static LLVMValueRef elem_flat(Cg *g, const Layout *l, LLVMValueRef lw, int r) {
  uint32_t c = layout_apply_kind(l, LAY_REG, (uint32_t)r);
  if (!(c & lw_bits(l)))
    return LLVMBuildAdd(g->b, lw, ci32(g, c), "");
  return LLVMBuildXor(g->b, lw, ci32(g, c), "");
}

static int dim_shift(const Layout *l, int d) {
  int s = 0;
  for (int e = d + 1; e < l->rank; e++)
    s += layout_log2((uint32_t)l->shape[e]);
  return s;
}

/* Bits [shift, shift + log2(mask + 1)) of register r's flat coordinate, as (lane/warp part) op
 * (constant part): per dimension the parts are computed apart, so registers that share a row
 * share the very same LLVM value (GVN merges them; one shared load per row in DOT). */
static LLVMValueRef elem_bits(Cg *g, const Layout *l, LLVMValueRef lw, int r, int shift, uint32_t mask) {
  uint32_t c = (layout_apply_kind(l, LAY_REG, (uint32_t)r) >> shift) & mask;
  uint32_t lwb = (lw_bits(l) >> shift) & mask;
  LLVMValueRef v = LLVMBuildLShr(g->b, lw, ci32(g, shift), "");
  if (mask != 0xffffffffu)
    v = LLVMBuildAnd(g->b, v, ci32(g, (int64_t)mask), "");
  if (!c)
    return v;
  return (c & lwb) ? LLVMBuildXor(g->b, v, ci32(g, c), "") : LLVMBuildAdd(g->b, v, ci32(g, c), "");
}

static LLVMValueRef elem_dim(Cg *g, const Layout *l, LLVMValueRef lw, int r, int d) {
  return elem_bits(g, l, lw, r, dim_shift(l, d), (uint32_t)l->shape[d] - 1);
}

/* Threads that hold replicas (zero lane/warp bases set) must not write: i1 "I write", or NULL. */
static LLVMValueRef writer_pred(Cg *g, uint32_t lane_mask, uint32_t warp_mask) {
  uint32_t m = lane_mask | warp_mask << LAYOUT_LANE_BITS;
  if (!m)
    return NULL;
  return LLVMBuildICmp(g->b, LLVMIntEQ, LLVMBuildAnd(g->b, g->tid, ci32(g, m), ""), ci32(g, 0), "");
}

static LLVMValueRef layout_writer(Cg *g, const Layout *l) {
  return writer_pred(g, layout_zero_mask(l, LAY_LANE), layout_zero_mask(l, LAY_WARP));
}

/* Runs `then` code under pred: returns the merge block to continue at (NULL if pred is NULL). */
static LLVMBasicBlockRef begin_if(Cg *g, LLVMValueRef pred) {
  if (!pred)
    return NULL;
  LLVMBasicBlockRef then = new_bb(g, "w"), join = new_bb(g, "wj");
  LLVMBuildCondBr(g->b, pred, then, join);
  LLVMPositionBuilderAtEnd(g->b, then);
  return join;
}
static void end_if(Cg *g, LLVMBasicBlockRef join) {
  if (!join)
    return;
  LLVMBuildBr(g->b, join);
  LLVMPositionBuilderAtEnd(g->b, join);
}

/* ------------------------------------------------------ shared memory */

static LLVMValueRef smem_at(Cg *g, LLVMValueRef base, LLVMValueRef byte_off) {
  return LLVMBuildInBoundsGEP2(g->b, g->i8, base, &byte_off, 1, "");
}

static LLVMValueRef slot_at(Cg *g, int slot, int bytes) {
  if (bytes > g->slot_size[slot])
    g->slot_size[slot] = bytes;
  return g->slot_ph[slot];
}

static LLVMValueRef slot_base(Cg *g, int slot, int bytes) {
  if (!g->red_odd || (slot != SLOT_RED0 && slot != SLOT_RED1))
    return slot_at(g, slot, bytes);
  LLVMValueRef odd = slot_at(g, SLOT_RED0_ODD + slot - SLOT_RED0, bytes);
  g->odd_slots_used = true;
  return LLVMBuildSelect(g->b, g->red_odd, odd, slot_at(g, slot, bytes), "");
}

/* Stage `slot` (an i32 value) of a pipelined tile's buffer. */
static LLVMValueRef stage_base(Cg *g, const Tile *t, LLVMValueRef slot) {
  LLVMValueRef off = LLVMBuildAdd(g->b, ci32(g, t->smem_off), LLVMBuildMul(g->b, slot, ci32(g, t->stage_bytes), ""), "");
  return LLVMBuildInBoundsGEP2(g->b, g->i8, g->smem, &off, 1, "");
}

/* The ring stage `ahead` (0 or 1) iterations after the current one. */
static LLVMValueRef ring_slot(Cg *g, const Pipe *p, int ahead) {
  LLVMValueRef slot = LLVMBuildLoad2(g->b, g->i32, p->rslot, "stage");
  if (!ahead)
    return slot;
  LLVMValueRef next = LLVMBuildAdd(g->b, slot, ci32(g, 1), "");
  return LLVMBuildSelect(g->b, LLVMBuildICmp(g->b, LLVMIntEQ, next, ci32(g, p->tp->stages), ""), ci32(g, 0), next, "");
}

static LLVMValueRef tile_base(Cg *g, const Tile *t) {
  if (t->pipe >= 0)
    return stage_base(g, t, ring_slot(g, &g->pipes[t->pipe], g->stage_ahead));
  if (t->head && g->sched->head_stages == 2) /* the consumers' current copy */
    return stage_base(g, t, LLVMBuildAnd(g->b, LLVMBuildLoad2(g->b, g->i32, g->head_count, ""), ci32(g, 1), ""));
  LLVMValueRef off = ci32(g, t->smem_off);
  return LLVMBuildInBoundsGEP2(g->b, g->i8, g->smem, &off, 1, "");
}

/* Element offset of register r's element in a buffer of the layout's padded shape with rows of
 * `pitch` elements. */
static LLVMValueRef buf_index(Cg *g, const Layout *l, LLVMValueRef lw, int r, int pitch) {
  if (l->rank == 0)
    return ci32(g, 0);
  int32_t inner = l->shape[l->rank - 1];
  int sh = layout_log2((uint32_t)inner);
  LLVMValueRef col = elem_bits(g, l, lw, r, 0, (uint32_t)inner - 1);
  if (l->rank == 1)
    return col;
  LLVMValueRef row = elem_bits(g, l, lw, r, sh, 0xffffffffu);
  return LLVMBuildAdd(g->b, LLVMBuildMul(g->b, row, ci32(g, pitch), ""), col, "");
}

/* swz_byte_off for a layout whose column blocks are not a power of two apart (rows not a power
 * of two): the in-block offset is linear in the coordinate bits (XOR), the block index too, and
 * the offset is the first plus the block index times the block's bytes. */
static LLVMValueRef swz_byte_off_blocks(Cg *g, const SmemLayout *swz, const Layout *L, int r) {
  uint32_t lb[LAYOUT_LANE_BITS], wb[LAYOUT_MAX_BITS], lk[LAYOUT_LANE_BITS], wk[LAYOUT_MAX_BITS], ck;
  for (int k = 0; k < LAYOUT_LANE_BITS; k++)
    lb[k] = layout_smem_split(swz, L->basis[LAY_LANE][k], &lk[k]);
  for (int k = 0; k < L->nbits[LAY_WARP]; k++)
    wb[k] = layout_smem_split(swz, L->basis[LAY_WARP][k], &wk[k]);
  uint32_t c = layout_smem_split(swz, layout_apply_kind(L, LAY_REG, (uint32_t)r), &ck);
  LLVMValueRef v = LLVMBuildXor(g->b, lw_value(g, lb, wb, L->nbits[LAY_WARP]), ci32(g, c), "");
  LLVMValueRef blk = LLVMBuildXor(g->b, lw_value(g, lk, wk, L->nbits[LAY_WARP]), ci32(g, ck), "");
  return LLVMBuildAdd(g->b, v, LLVMBuildMul(g->b, blk, ci32(g, swz->rows * swz->swizzle), ""), "");
}

/* Byte offset in the swizzled layout swz of register r's element of a tile in layout L (the
 * element's flat coordinate through layout_smem_offset, a lane/warp part and a constant). */
static LLVMValueRef swz_byte_off(Cg *g, const SmemLayout *swz, const Layout *L, int r) {
  if (swz->rows & (swz->rows - 1))
    return swz_byte_off_blocks(g, swz, L, r);
  uint32_t lb[LAYOUT_LANE_BITS], wb[LAYOUT_MAX_BITS], reach = 0;
  for (int k = 0; k < LAYOUT_LANE_BITS; k++)
    reach |= lb[k] = layout_smem_offset(swz, L->basis[LAY_LANE][k]);
  for (int k = 0; k < L->nbits[LAY_WARP]; k++)
    reach |= wb[k] = layout_smem_offset(swz, L->basis[LAY_WARP][k]);
  LLVMValueRef v = lw_value(g, lb, wb, L->nbits[LAY_WARP]);
  uint32_t c = layout_smem_offset(swz, layout_apply_kind(L, LAY_REG, (uint32_t)r));
  if (!c)
    return v;
  return (c & reach) ? LLVMBuildXor(g->b, v, ci32(g, c), "") : LLVMBuildAdd(g->b, v, ci32(g, c), "");
}

/* Byte offset of register r's element in a shared tile's buffer (lw: layout_lw of its layout):
 * row * pitch + column, or the swizzled layout's linear map (layout_smem_offset) of the element's
 * flat coordinate, split like the coordinate into a lane/warp part and a constant. */
static LLVMValueRef tile_byte_off(Cg *g, const Tile *t, LLVMValueRef lw, int r) {
  const Layout *L = t->lay;
  ElemType e = g->f->regs[t - g->tiles].type.elem;
  if (!t->swz)
    return LLVMBuildMul(g->b, buf_index(g, L, lw, r, t->pitch), ci32(g, elem_bytes(e)), "");
  return swz_byte_off(g, t->swz, L, r);
}



/* Writes a thread's register values into a buffer (row pitch in elements), vectorized per run. */
static void buf_write(Cg *g, LLVMValueRef base, const Layout *l, ElemType e, int pitch,
                      LLVMValueRef *vals) {
  LLVMValueRef lw = layout_lw(g, l);
  LLVMBasicBlockRef join = begin_if(g, layout_writer(g, l));
  int n = layout_nregs(l), ch = layout_vec_chunk(l, e), eb = elem_bytes(e);
  LLVMTypeRef mt = mem_type(g, e);
  for (int r = 0; r < n; r += ch) {
    LLVMValueRef idx = buf_index(g, l, lw, r, pitch);
    LLVMValueRef p = smem_at(g, base, LLVMBuildMul(g->b, idx, ci32(g, eb), ""));
    if (ch == 1) {
      LLVMSetAlignment(LLVMBuildStore(g->b, to_mem(g, e, vals[r]), p), (unsigned)eb);
      continue;
    }
    LLVMTypeRef vt = LLVMVectorType(mt, (unsigned)ch);
    LLVMValueRef v = LLVMGetUndef(vt);
    for (int j = 0; j < ch; j++)
      v = LLVMBuildInsertElement(g->b, v, to_mem(g, e, vals[r + j]), ci32(g, j), "");
    LLVMSetAlignment(LLVMBuildStore(g->b, v, p), (unsigned)(eb * ch));
  }
  end_if(g, join);
}

/* A thread's registers of layout l read from (store: written to) a buffer (row pitch in elements),
 * `ch` elements an access; registers marked in pad (may be NULL) hold only padding: neither read
 * (undef: a read there could leave the buffer) nor written, their chunks taken element by element. */
static void buf_chunks(Cg *g, LLVMValueRef base, const Layout *l, ElemType e, int pitch, int ch,
                       const bool *pad, LLVMValueRef *vals, bool store) {
  LLVMValueRef lw = layout_lw(g, l);
  int n = layout_nregs(l), eb = elem_bytes(e);
  LLVMTypeRef mt = mem_type(g, e);
  for (int r = 0; r < n; r += ch) {
    int npad = 0;
    for (int j = 0; pad && j < ch; j++)
      npad += pad[r + j];
    int w = npad ? 1 : ch;
    for (int j = 0; j < ch; j += w) {
      if (npad && pad[r + j]) {
        if (!store)
          vals[r + j] = LLVMGetUndef(reg_type(g, e));
        continue;
      }
      LLVMValueRef idx = buf_index(g, l, lw, r + j, pitch);
      LLVMValueRef p = smem_at(g, base, LLVMBuildMul(g->b, idx, ci32(g, eb), ""));
      LLVMTypeRef vt = w == 1 ? mt : LLVMVectorType(mt, (unsigned)w);
      if (store) {
        LLVMValueRef v = w == 1 ? to_mem(g, e, vals[r + j]) : LLVMGetUndef(vt);
        for (int k = 0; w > 1 && k < w; k++)
          v = LLVMBuildInsertElement(g->b, v, to_mem(g, e, vals[r + j + k]), ci32(g, k), "");
        LLVMSetAlignment(LLVMBuildStore(g->b, v, p), (unsigned)(eb * w));
        continue;
      }
      LLVMValueRef v = LLVMBuildLoad2(g->b, vt, p, "");
      LLVMSetAlignment(v, (unsigned)(eb * w));
      for (int k = 0; k < w; k++)
        vals[r + j + k] = from_mem(g, e, w == 1 ? v : LLVMBuildExtractElement(g->b, v, ci32(g, k), ""));
    }
  }
  if (!store)
    g->dirty = true;
}

/* Reads a thread's registers of layout l from a buffer (row pitch in elements), `ch` elements a
 * load; registers marked in pad (may be NULL) hold only padding: undef, not loaded (a read there
 * could leave the buffer), and a chunk holding one is read element by element. */
static void buf_read_chunks(Cg *g, LLVMValueRef base, const Layout *l, ElemType e, int pitch, int ch,
                            const bool *pad, LLVMValueRef *vals) {
  buf_chunks(g, base, l, e, pitch, ch, pad, vals, false);
}

static void buf_read(Cg *g, LLVMValueRef base, const Layout *l, ElemType e, int pitch, LLVMValueRef *vals) {
  buf_read_chunks(g, base, l, e, pitch, layout_vec_chunk(l, e), NULL, vals);
}

static int padded_pitch(const Layout *l, ElemType e) {
  if (l->rank == 0)
    return 1;
  int inner = l->shape[l->rank - 1];
  return l->rank >= 2 ? inner + 16 / elem_bytes(e) : inner;
}

/* Whether shared tile r is read only elementwise, in its own layout (no DOT operand, no
 * transposed view). Such a tile's rows get no padding (plan): the 16 bytes a row that spread a
 * DOT operand's rows over the banks put a warp's contiguous row reads off the 128-byte lines of
 * shared memory (a wavefront more per 512 bytes). Ring stages start on those lines too.
 * TILEC_ROW_PAD=1: every rank-2 tile padded, stages 16-byte aligned (before session p). */
static bool read_elementwise(const TirFunc *f, int r) {
  for (int j = 0; j < f->ninsts; j++) {
    const TirInst *u = &f->insts[j];
    if ((u->op == TIR_DOT || u->op == TIR_TRANS) && tir_inst_reads(u, r))
      return false;
  }
  return true;
}

static int buf_bytes(const Layout *l, ElemType e, int pitch) {
  int rows = l->rank ? (int)(layout_numel(l) / (uint32_t)l->shape[l->rank - 1]) : 1;
  int b = rows * pitch * elem_bytes(e);
  return (b + 15) & ~15;
}

/* ------------------------------------------------------- tile access */

static const TileType *rtype(Cg *g, int r) { return &g->f->regs[r].type; }

/* The type of register tile r's registers in its alloca: narrow (Tile.narrow) or f32. */
static LLVMTypeRef tile_reg_type(Cg *g, int r) {
  ElemType e = rtype(g, r)->elem;
  return g->tiles[r].narrow ? mem_type(g, e) : reg_type(g, e);
}

static void shifted_read(Cg *g, const Tile *t, ElemType e, LLVMValueRef *vals); /* reads through the LOAD's Access */

/* Values of register `r` in its own layout. */
static void get_tile(Cg *g, int r, LLVMValueRef *vals) {
  Tile *t = &g->tiles[r];
  ElemType e = rtype(g, r)->elem;
  if (t->view_of >= 0) {
    /* Transposed read of the source's buffer: element (i, j) is source (j, i). */
    Tile *s = &g->tiles[t->view_of];
    LLVMValueRef base = tile_base(g, s), lw = layout_lw(g, t->lay);
    for (int k = 0; k < t->n; k++) {
      LLVMValueRef i = elem_dim(g, t->lay, lw, k, 0), j = elem_dim(g, t->lay, lw, k, 1);
      LLVMValueRef idx = LLVMBuildAdd(g->b, LLVMBuildMul(g->b, j, ci32(g, s->pitch), ""), i, "");
      LLVMValueRef p = smem_at(g, base, LLVMBuildMul(g->b, idx, ci32(g, elem_bytes(e)), ""));
      vals[k] = from_mem(g, e, LLVMBuildLoad2(g->b, mem_type(g, e), p, ""));
    }
    g->dirty = true;
    return;
  }
  if (shifted_here(g, t)) {
    shifted_read(g, t, e, vals);
    return;
  }
  if (t->shared) {
    buf_read(g, tile_base(g, t), t->lay, e, t->pitch, vals);
    return;
  }
  LLVMTypeRef rt = tile_reg_type(g, r);
  for (int k = 0; k < t->n; k++) {
    if (t->pad && t->pad[k]) {
      vals[k] = LLVMGetUndef(reg_type(g, e));
      continue;
    }
    LLVMValueRef idx = ci32(g, k);
    LLVMValueRef p = LLVMBuildInBoundsGEP2(g->b, rt, t->regs, &idx, 1, "");
    vals[k] = LLVMBuildLoad2(g->b, rt, p, "");
    if (t->narrow)
      vals[k] = from_mem(g, e, vals[k]);
  }
}

/* Tile.pad of register tile r. */
static void plan_padding(Cg *g, int r) {
  Tile *t = &g->tiles[r];
  const TileType *ty = &g->f->regs[r].type;
  if (ty->place != PLACE_REG || !t->lay)
    return;
  bool *pad = NULL;
  for (int k = 0; k < t->n; k++)
    if (layout_reg_is_padding(t->lay, ty->dims, (uint32_t)k)) {
      if (!pad)
        pad = arena_alloc(g->f->arena, sizeof(bool) * (size_t)t->n);
      pad[k] = true;
    }
  t->pad = pad;
}

/* Stores values (in the register's layout) into register r, rounding to its element type. */
static void store_regs(Cg *g, int r, LLVMValueRef *vals);
static void put_tile(Cg *g, int r, LLVMValueRef *vals) {
  Tile *t = &g->tiles[r];
  ElemType e = rtype(g, r)->elem;
  for (int k = 0; k < t->n; k++)
    vals[k] = round_elem(g, e, vals[k]);
  store_regs(g, r, vals);
}

/* put_tile without the rounding: values already exact in the register's element type. */
static void store_regs(Cg *g, int r, LLVMValueRef *vals) {
  Tile *t = &g->tiles[r];
  ElemType e = rtype(g, r)->elem;
  if (t->shared) {
    if (g->dirty)
      barrier(g);
    buf_write(g, tile_base(g, t), t->lay, e, t->pitch, vals);
    barrier(g);
    return;
  }
  LLVMTypeRef rt = tile_reg_type(g, r);
  for (int k = 0; k < t->n; k++) {
    LLVMValueRef idx = ci32(g, k);
    LLVMValueRef p = LLVMBuildInBoundsGEP2(g->b, rt, t->regs, &idx, 1, "");
    LLVMBuildStore(g->b, t->narrow ? to_mem(g, e, vals[k]) : vals[k], p);
  }
}

static LLVMValueRef *vals_new(Cg *g, int n) {
  return arena_alloc(g->f->arena, sizeof(LLVMValueRef) * (size_t)(n ? n : 1));
}

/* -------------------------------------------------- layout conversion */

/* Coordinate maps from a destination tile to the source tile it reads. */
typedef enum { MAP_IDENT, MAP_BCAST, MAP_TRANS, MAP_RESHAPE, MAP_EXTRACT } MapKind;
typedef struct Map {
  MapKind k;
  const int32_t *offs;     /* MAP_EXTRACT: the box's first element per dimension */
} Map;

static uint32_t map_flat(const Map *m, const Layout *dst, const Layout *src, uint32_t f) {
  /* Dims of size 1 (padded: 1 too) add no bits: both tiles number their elements alike. */
  if (m->k == MAP_RESHAPE)
    return f;
  int32_t dc[TILE_MAX_RANK] = {0}, sc[TILE_MAX_RANK] = {0};
  layout_coord(dst->rank, dst->shape, f, dc);
  if (m->k == MAP_TRANS) {
    sc[0] = dc[1];
    sc[1] = dc[0];
  } else if (m->k == MAP_EXTRACT) {
    /* Padding elements of the box may reach past the source's padded dim: they wrap, so that
     * every address stays inside the source (their values are never used). */
    for (int d = 0; d < src->rank; d++)
      sc[d] = (dc[d] + m->offs[d]) & (src->shape[d] - 1);
  } else {
    int off = dst->rank - src->rank;
    for (int d = 0; d < src->rank; d++)
      sc[d] = src->shape[d] == 1 ? 0 : dc[d + off];
  }
  return layout_flat(src->rank, src->shape, sc);
}

/* Whether the map is linear over GF(2) up to a constant (map(a ^ b) = map(a) ^ map(b) ^ map(0)),
 * which the register and lane/warp-basis conversions rely on. A box is when each start is a
 * multiple of the box's padded size: adding it then sets bits the box does not use. */
static bool map_affine(const Map *m, const Layout *dst) {
  if (m->k != MAP_EXTRACT)
    return true;
  for (int d = 0; d < dst->rank; d++)
    if (m->offs[d] % dst->shape[d])
      return false;
  return true;
}

/* Register-only conversion when every lane/warp basis maps onto the source's and every
 * destination register finds its element among the thread's source registers. */
static bool convert_in_regs(const Layout *src, const Layout *dst, const Map *m, int *from) {
  if (src->nbits[LAY_WARP] != dst->nbits[LAY_WARP] || !map_affine(m, dst))
    return false;
  uint32_t c0 = map_flat(m, dst, src, 0);
  for (int kind = LAY_LANE; kind < LAY_NKINDS; kind++)
    for (int b = 0; b < dst->nbits[kind]; b++)
      if ((map_flat(m, dst, src, dst->basis[kind][b]) ^ c0) != src->basis[kind][b])
        return false;
  for (int r = 0; r < layout_nregs(dst); r++) {
    uint32_t want = map_flat(m, dst, src, layout_apply_kind(dst, LAY_REG, (uint32_t)r));
    from[r] = -1;
    for (int q = 0; q < layout_nregs(src) && from[r] < 0; q++)
      if (layout_apply_kind(src, LAY_REG, (uint32_t)q) == want)
        from[r] = q;
    if (from[r] < 0)
      return false;
  }
  return true;
}

/* The source flat coordinate of each destination register, for the exchange through shared
 * memory: from the mapped lane/warp bases when the map is affine, else (a box at any start) from
 * the destination's coordinates plus the box's start. */
static void mapped_flats(Cg *g, const Layout *src, const Layout *dst, const Map *m, LLVMValueRef *flat) {
  int nd = layout_nregs(dst);
  if (!map_affine(m, dst)) {
    LLVMValueRef lw = layout_lw(g, dst);
    for (int r = 0; r < nd; r++) {
      flat[r] = ci32(g, 0);
      for (int d = 0; d < dst->rank; d++) {
        LLVMValueRef c = LLVMBuildAdd(g->b, elem_dim(g, dst, lw, r, d), ci32(g, m->offs[d]), "");
        c = LLVMBuildAnd(g->b, c, ci32(g, src->shape[d] - 1), "");
        flat[r] = LLVMBuildOr(g->b, flat[r], LLVMBuildShl(g->b, c, ci32(g, dim_shift(src, d)), ""), "");
      }
    }
    return;
  }
  uint32_t lane_m[LAYOUT_LANE_BITS], warp_m[LAYOUT_MAX_BITS], c0 = map_flat(m, dst, src, 0);
  for (int b = 0; b < LAYOUT_LANE_BITS; b++)
    lane_m[b] = map_flat(m, dst, src, dst->basis[LAY_LANE][b]) ^ c0;
  for (int b = 0; b < dst->nbits[LAY_WARP]; b++)
    warp_m[b] = map_flat(m, dst, src, dst->basis[LAY_WARP][b]) ^ c0;
  LLVMValueRef lw = lw_value(g, lane_m, warp_m, dst->nbits[LAY_WARP]);
  for (int r = 0; r < nd; r++) {
    uint32_t c = map_flat(m, dst, src, layout_apply_kind(dst, LAY_REG, (uint32_t)r));
    flat[r] = LLVMBuildXor(g->b, lw, ci32(g, c), "");
  }
}

static void convert(Cg *g, const Layout *src, ElemType e, LLVMValueRef *in, const Layout *dst, const Map *m,
                    LLVMValueRef *out) {
  int nd = layout_nregs(dst);
  int *from = arena_alloc(g->f->arena, sizeof(int) * (size_t)nd);
  if (layout_equal(src, dst) && (m->k == MAP_IDENT || m->k == MAP_BCAST || m->k == MAP_RESHAPE)) {
    memcpy(out, in, sizeof(LLVMValueRef) * (size_t)nd);
    return;
  }
  if (convert_in_regs(src, dst, m, from)) {
    for (int r = 0; r < nd; r++)
      out[r] = in[from[r]];
    return;
  }
  /* Through shared memory: the source writes its padded tile row-major, the destination reads
   * the elements its map points at. */
  int pitch = src->rank ? src->shape[src->rank - 1] : 1;
  LLVMValueRef base = slot_base(g, SLOT_A, buf_bytes(src, e, pitch));
  if (g->dirty)
    barrier(g);
  buf_write(g, base, src, e, pitch, in);
  barrier(g);
  LLVMValueRef *flat = vals_new(g, nd);
  mapped_flats(g, src, dst, m, flat);
  int eb = elem_bytes(e);
  for (int r = 0; r < nd; r++) {
    LLVMValueRef p = smem_at(g, base, LLVMBuildMul(g->b, flat[r], ci32(g, eb), ""));
    out[r] = from_mem(g, e, LLVMBuildLoad2(g->b, mem_type(g, e), p, ""));
  }
  g->dirty = true;
}

/* Values of register r in layout `want` (same shape). */
static void get_tile_as(Cg *g, int r, const Layout *want, LLVMValueRef *vals) {
  Tile *t = &g->tiles[r];
  if (layout_equal(t->lay, want)) {
    get_tile(g, r, vals);
    return;
  }
  LLVMValueRef *tmp = vals_new(g, t->n);
  get_tile(g, r, tmp);
  convert(g, t->lay, rtype(g, r)->elem, tmp, want, &(Map){MAP_IDENT, NULL}, vals);
}

/* ------------------------------------------------------ element math */

static const char ex2_intrinsic[] = "llvm.nvvm.ex2.approx.ftz.f";

static LLVMValueRef ex2(Cg *g, LLVMValueRef x) { return intrin1(g, ex2_intrinsic, x); }

/* Whether instruction `in` is a call of ex2 (the peepholes and exp_on_fma rewrite them). */
static bool is_ex2_call(LLVMValueRef in) {
  if (LLVMGetInstructionOpcode(in) != LLVMCall)
    return false;
  LLVMValueRef fn = LLVMGetCalledValue(in);
  size_t len = 0;
  return fn && !strcmp(LLVMGetValueName2(fn, &len), ex2_intrinsic);
}

static LLVMValueRef exp_f(Cg *g, LLVMValueRef x) {
  return ex2(g, LLVMBuildFMul(g->b, x, cf32(g, 1.4426950408889634), ""));
}

/* erf by Abramowitz & Stegun 7.1.26 (|error| < 1.5e-7), with exp from ex2. */
static LLVMValueRef erf_f(Cg *g, LLVMValueRef x) {
  LLVMBuilderRef b = g->b;
  LLVMValueRef ax = ovl1(g, "llvm.fabs", x);
  LLVMValueRef t = LLVMBuildFDiv(b, cf32(g, 1.0), LLVMBuildFAdd(b, cf32(g, 1.0), LLVMBuildFMul(b, cf32(g, 0.3275911), ax, ""), ""), "");
  static const double a[5] = {0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429};
  LLVMValueRef poly = cf32(g, a[4]);
  for (int i = 3; i >= 0; i--)
    poly = LLVMBuildFAdd(b, LLVMBuildFMul(b, poly, t, ""), cf32(g, a[i]), "");
  poly = LLVMBuildFMul(b, poly, t, "");
  LLVMValueRef e = exp_f(g, LLVMBuildFNeg(b, LLVMBuildFMul(b, ax, ax, ""), ""));
  LLVMValueRef y = LLVMBuildFSub(b, cf32(g, 1.0), LLVMBuildFMul(b, poly, e, ""), "");
  LLVMValueRef neg = LLVMBuildFCmp(b, LLVMRealOLT, x, cf32(g, 0.0), "");
  return LLVMBuildSelect(b, neg, LLVMBuildFNeg(b, y, ""), y, "");
}

static LLVMValueRef unary_f(Cg *g, TirOp op, LLVMValueRef x) {
  LLVMBuilderRef b = g->b;
  switch (op) {
  case TIR_COPY: return x;
  case TIR_NEG: return LLVMBuildFNeg(b, x, "");
  case TIR_ABS: return ovl1(g, "llvm.fabs", x);
  case TIR_EXP: return exp_f(g, x);
  case TIR_EXP2: return ex2(g, x);
  case TIR_LOG:
    return LLVMBuildFMul(b, intrin1(g, "llvm.nvvm.lg2.approx.ftz.f", x), cf32(g, 0.6931471805599453), "");
  case TIR_SQRT: return intrin1(g, "llvm.nvvm.sqrt.rn.f", x);
  case TIR_RSQRT: return intrin1(g, "llvm.nvvm.rsqrt.approx.f", x);
  case TIR_TANH: {
    /* tanh x = 1 - 2 / (e^{2x} + 1): saturates cleanly to +-1 for large |x|. The reciprocal is
     * rcp.approx (1 ulp; e^{2x} + 1 >= 1 is never subnormal): a GEMM's GELU epilogue spent as
     * long on IEEE div.rn as on everything else. */
    LLVMValueRef e = ex2(g, LLVMBuildFMul(b, x, cf32(g, 2.0 * 1.4426950408889634), ""));
    LLVMValueRef r = intrin1(g, "llvm.nvvm.rcp.approx.ftz.f", LLVMBuildFAdd(b, e, cf32(g, 1.0), ""));
    return LLVMBuildFSub(b, cf32(g, 1.0), LLVMBuildFMul(b, cf32(g, 2.0), r, ""), "");
  }
  case TIR_ERF: return erf_f(g, x);
  case TIR_SIGMOID: {
    LLVMValueRef e = ex2(g, LLVMBuildFMul(b, x, cf32(g, -1.4426950408889634), ""));
    return intrin1(g, "llvm.nvvm.rcp.approx.ftz.f", LLVMBuildFAdd(b, cf32(g, 1.0), e, ""));
  }
  default: return NULL;
  }
}

static LLVMValueRef unary_i(Cg *g, TirOp op, LLVMValueRef x, ElemType e) {
  switch (op) {
  case TIR_COPY: return x;
  case TIR_NEG: return LLVMBuildNeg(g->b, x, "");
  case TIR_NOT: return LLVMBuildNot(g->b, x, "");
  case TIR_ABS: {
    LLVMValueRef a[2] = {x, LLVMConstInt(g->i1, 0, 0)};
    LLVMTypeRef t = g->i32;
    (void)e;
    return call_intrin(g, "llvm.abs", &t, 1, a, 2);
  }
  default: return NULL;
  }
}

/* A float add, subtract or multiply the backend may fuse into an fma with its neighbour in the
 * same block (LLVM's `contract`): one rounding instead of two, one instruction instead of two;
 * the interpreter's rounding of each op is the reference within the tests' tolerances.
 * TILEC_FP_CONTRACT=0: off. */
static LLVMValueRef contractable(LLVMValueRef v) {
  if (LLVMIsAInstruction(v) && !env_off("TILEC_FP_CONTRACT"))
    LLVMSetFastMathFlags(v, LLVMFastMathAllowContract);
  return v;
}

static LLVMValueRef binary(Cg *g, TirOp op, ElemType e, LLVMValueRef x, LLVMValueRef y) {
  LLVMBuilderRef b = g->b;
  if (elem_is_float(e)) {
    switch (op) {
    case TIR_ADD: return contractable(LLVMBuildFAdd(b, x, y, ""));
    case TIR_SUB: return contractable(LLVMBuildFSub(b, x, y, ""));
    case TIR_MUL: return contractable(LLVMBuildFMul(b, x, y, ""));
    case TIR_DIV: return LLVMBuildFDiv(b, x, y, "");
    case TIR_MIN: return ovl2(g, "llvm.minnum", x, y);
    case TIR_MAX: return ovl2(g, "llvm.maxnum", x, y);
    case TIR_LT: return LLVMBuildFCmp(b, LLVMRealOLT, x, y, "");
    case TIR_LE: return LLVMBuildFCmp(b, LLVMRealOLE, x, y, "");
    case TIR_GT: return LLVMBuildFCmp(b, LLVMRealOGT, x, y, "");
    case TIR_GE: return LLVMBuildFCmp(b, LLVMRealOGE, x, y, "");
    case TIR_EQ: return LLVMBuildFCmp(b, LLVMRealOEQ, x, y, "");
    case TIR_NE: return LLVMBuildFCmp(b, LLVMRealUNE, x, y, "");
    default: return NULL;
    }
  }
  switch (op) {
  case TIR_ADD: return LLVMBuildAdd(b, x, y, "");
  case TIR_SUB: return LLVMBuildSub(b, x, y, "");
  case TIR_MUL: return LLVMBuildMul(b, x, y, "");
  case TIR_DIV: return LLVMBuildSDiv(b, x, y, "");
  case TIR_REM: return LLVMBuildSRem(b, x, y, "");
  case TIR_MIN: return ovl2(g, "llvm.smin", x, y);
  case TIR_MAX: return ovl2(g, "llvm.smax", x, y);
  case TIR_AND: return LLVMBuildAnd(b, x, y, "");
  case TIR_OR: return LLVMBuildOr(b, x, y, "");
  case TIR_LT: return LLVMBuildICmp(b, LLVMIntSLT, x, y, "");
  case TIR_LE: return LLVMBuildICmp(b, LLVMIntSLE, x, y, "");
  case TIR_GT: return LLVMBuildICmp(b, LLVMIntSGT, x, y, "");
  case TIR_GE: return LLVMBuildICmp(b, LLVMIntSGE, x, y, "");
  case TIR_EQ: return LLVMBuildICmp(b, LLVMIntEQ, x, y, "");
  case TIR_NE: return LLVMBuildICmp(b, LLVMIntNE, x, y, "");
  default: return NULL;
  }
}

static LLVMValueRef cvt(Cg *g, ElemType from, ElemType to, LLVMValueRef x) {
  LLVMBuilderRef b = g->b;
  bool ff = elem_is_float(from), tf = elem_is_float(to);
  if (ff && tf)
    return x;
  if (ff && to == TY_BOOL)
    return LLVMBuildFCmp(b, LLVMRealUNE, x, cf32(g, 0.0), "");
  if (ff) {
    /* Saturating, NaN -> 0: the interpreter's rule. */
    LLVMTypeRef ovl[2] = {g->i32, g->f32};
    return call_intrin(g, "llvm.fptosi.sat", ovl, 2, &x, 1);
  }
  if (tf)
    return from == TY_BOOL ? LLVMBuildUIToFP(b, x, g->f32, "") : LLVMBuildSIToFP(b, x, g->f32, "");
  if (to == TY_BOOL)
    return from == TY_BOOL ? x : LLVMBuildICmp(b, LLVMIntNE, x, ci32(g, 0), "");
  return from == TY_BOOL ? LLVMBuildZExt(b, x, g->i32, "") : x;
}

/* --------------------------------------------------------- the ops */

/* Minimum and maximum of f16/bf16 tiles, two elements an instruction (max.f16x2, max.bf16x2;
 * sm_80 on). Exact in the narrow type, so the same result as in f32; the operands, f32 in
 * registers, are fpext of narrow values, so LLVM folds the fptrunc away and the operands stay
 * the packed words they were loaded as. TILEC_PACKED_MINMAX=0: one f32 instruction an element. */
static bool packs_pairs(ElemType e) { return (e == TY_F16 || e == TY_BF16) && !env_off("TILEC_PACKED_MINMAX"); }

static bool packs_minmax(Cg *g, const TirInst *in) {
  return (in->op == TIR_MIN || in->op == TIR_MAX) && packs_pairs(g->f->regs[in->dst].type.elem) &&
         g->tiles[in->dst].n % 2 == 0;
}

/* A max or min reduction of an f16/bf16 tile (tir_narrow_minmax's form of a maximum of converted
 * values): its source is read as pairs (reduce_pairs). */
static bool reduces_pairs(const TirFunc *f, const TirInst *in) {
  return (in->op == TIR_REDUCE_MAX || in->op == TIR_REDUCE_MIN) && packs_pairs(f->regs[in->args[0]].type.elem);
}

static bool packed_minmax(Cg *g, const TirInst *in, LLVMValueRef *x, LLVMValueRef *y, LLVMValueRef *out) {
  if (!packs_minmax(g, in))
    return false;
  ElemType e = g->f->regs[in->dst].type.elem;
  TirOp op = in->op;
  int n = g->tiles[in->dst].n;
  LLVMTypeRef v2 = LLVMVectorType(mem_type(g, e), 2);
  for (int k = 0; k < n; k += 2) {
    LLVMValueRef a = LLVMGetUndef(v2), b = LLVMGetUndef(v2);
    for (int j = 0; j < 2; j++) {
      a = LLVMBuildInsertElement(g->b, a, to_mem(g, e, x[k + j]), ci32(g, j), "");
      b = LLVMBuildInsertElement(g->b, b, to_mem(g, e, y[k + j]), ci32(g, j), "");
    }
    LLVMValueRef r = ovl2(g, op == TIR_MAX ? "llvm.maxnum" : "llvm.minnum", a, b);
    for (int j = 0; j < 2; j++)
      out[k + j] = from_mem(g, e, LLVMBuildExtractElement(g->b, r, ci32(g, j), ""));
  }
  return true;
}

static void lower_elemwise(Cg *g, const TirInst *in) {
  int dst = in->dst, n = g->tiles[dst].n;
  const Layout *L = g->tiles[dst].lay;
  int nargs = tir_op_info[in->op].nargs;
  LLVMValueRef *a[3] = {NULL, NULL, NULL};
  for (int i = 0; i < nargs; i++) {
    a[i] = vals_new(g, n);
    get_tile_as(g, in->args[i], L, a[i]);
  }
  ElemType at = rtype(g, in->args[in->op == TIR_SELECT ? 1 : 0])->elem, dt = rtype(g, dst)->elem;
  LLVMValueRef *out = vals_new(g, n);
  if (packed_minmax(g, in, a[0], a[1], out)) {
    put_tile(g, dst, out);
    return;
  }
  for (int k = 0; k < n; k++) {
    LLVMValueRef v = NULL;
    if (in->op == TIR_CVT)
      v = cvt(g, at, dt, a[0][k]);
    else if (in->op == TIR_SELECT)
      v = LLVMBuildSelect(g->b, a[0][k], a[1][k], a[2][k], "");
    else if (nargs == 1)
      v = elem_is_float(at) ? unary_f(g, in->op, a[0][k]) : unary_i(g, in->op, a[0][k], at);
    else
      v = binary(g, in->op, at, a[0][k], a[1][k]);
    if (!v) {
      cg_error(g, "internal error: %s on %s is not supported by the GPU backend", tir_op_info[in->op].name,
               elem_name(at));
      return;
    }
    out[k] = v;
  }
  put_tile(g, dst, out);
}

static void lower_leaf(Cg *g, const TirInst *in) {
  int dst = in->dst, n = g->tiles[dst].n;
  ElemType e = rtype(g, dst)->elem;
  LLVMValueRef *out = vals_new(g, n);
  const Layout *L = g->tiles[dst].lay;
  switch (in->op) {
  case TIR_CONST:
    for (int k = 0; k < n; k++)
      out[k] = const_elem(g, e, in->imm);
    break;
  case TIR_PARAM:
    out[0] = g->scalar[in->arg_index];
    break;
  case TIR_DIM:
    out[0] = g->dimv[in->arg_index];
    break;
  case TIR_ROW_SHIFT: {
    LLVMValueRef at = LLVMBuildPtrToInt(g->b, g->tensor_ptr[in->arg_index], g->i64, "");
    int eb = elem_bytes(g->f->args[in->arg_index].elem);
    for (int k = 0; k < 3 && in->args[k] >= 0; k++) {
      LLVMValueRef idx;
      get_tile(g, in->args[k], &idx);
      LLVMValueRef off = LLVMBuildMul(g->b, LLVMBuildSExt(g->b, idx, g->i64, ""), g->tensor_stride[in->arg_index][k], "");
      at = LLVMBuildAdd(g->b, at, LLVMBuildMul(g->b, off, ci64(g, eb), ""), "");
    }
    at = LLVMBuildUDiv(g->b, LLVMBuildAnd(g->b, at, ci64(g, 15), ""), ci64(g, eb), "");
    const TirArg *a = &g->f->args[in->arg_index];
    LLVMValueRef len = g->dimv[a->dims[a->rank - 1]]; /* an empty row: 0, so a moved loop runs no iteration */
    LLVMValueRef empty = LLVMBuildICmp(g->b, LLVMIntSLE, len, ci32(g, 0), "");
    out[0] = LLVMBuildSelect(g->b, empty, ci32(g, 0), LLVMBuildTrunc(g->b, at, g->i32, ""), "");
    break;
  }
  case TIR_BLOCK_ID: {
    static const char *names[3] = {"llvm.nvvm.read.ptx.sreg.ctaid.x", "llvm.nvvm.read.ptx.sreg.ctaid.y",
                                   "llvm.nvvm.read.ptx.sreg.ctaid.z"};
    if (in->axis < 0 || in->axis > 2) {
      cg_error(g, "internal error: block axis %d", in->axis);
      return;
    }
    out[0] = g->persistent ? LLVMBuildLoad2(g->b, g->i32, g->pblock[in->axis], "") : intrin0(g, names[in->axis]);
    if (!g->persistent && in->axis == 0 && g->sched && g->sched->reverse_x) {
      LLVMValueRef last = LLVMBuildSub(g->b, intrin0(g, "llvm.nvvm.read.ptx.sreg.nctaid.x"), ci32(g, 1), "");
      out[0] = LLVMBuildSub(g->b, last, out[0], "");
    }
    break;
  }
  default: { /* IOTA */
    LLVMValueRef lw = layout_lw(g, L);
    for (int k = 0; k < n; k++)
      out[k] = elem_dim(g, L, lw, k, in->axis);
    break;
  }
  }
  put_tile(g, dst, out);
}

static void lower_copyish(Cg *g, const TirInst *in) {
  int dst = in->dst, src = in->args[0];
  Tile *d = &g->tiles[dst], *s = &g->tiles[src];
  ElemType e = rtype(g, src)->elem;
  if (in->op == TIR_TRANS && d->view_of >= 0)
    return; /* read in place by its users */
  LLVMValueRef *sv = vals_new(g, s->n), *out = vals_new(g, d->n);
  get_tile(g, src, sv);
  Map m = {in->op == TIR_TRANS     ? MAP_TRANS
           : in->op == TIR_RESHAPE ? MAP_RESHAPE
           : in->op == TIR_EXTRACT ? MAP_EXTRACT
                                   : MAP_BCAST,
           in->offs};
  convert(g, s->lay, e, sv, d->lay, &m, out);
  put_tile(g, dst, out);
}

/* ------------------------------------------- index compares with a select */

/* A mask such as where(row_index(m0, BM) >= col_index(n0, BN), s, -inf) compares two index
 * tiles, each a uniform value plus one coordinate of the element. In a register layout whose
 * lane/warp bits and register bits of that coordinate are disjoint, the coordinate is a per-thread
 * part plus a constant of the register, so (Ux + lx + cx_k) op (Uy + ly + cy_k) is
 * T op (cy_k - cx_k) with T = Ux - Uy + lx - ly once per thread: one compare with an immediate an
 * element instead of building each element's indices first (the causal diagonal block's 32 column
 * indices of a 64-element thread; elements whose constants differ equally share a compare), and
 * cross-entropy's one-hot index(c0, C) == t likewise. An ordering of one coordinate and a bound
 * (col_index(c0, BN) < N) stays as written: its columns are built anyway for the loads and stores
 * there, and the range check's branch would cost more than it saves. The rewrite is exact while
 * neither side can wrap and their difference fits in i32: equality always; an ordering when
 * |Ux|, |Uy| <= 2^29, which a branch on the uniform values checks (else the compare as written).
 * The compare is lowered with the select that reads it (through broadcasts of the same rank), so
 * no tile of predicates lives across the branch. On by default (docs/performance.md, session bg);
 * TILEC_INDEX_COMPARE=0 writes the compares as written. */

/* The most instructions from a select's condition back to its compare (broadcasts, then it). */
enum { MAX_INDEX_CHAIN = 8 };

/* value = base + the element's coordinate along axis (axis -1: base alone; base NULL: 0). */
typedef struct IndexForm {
  LLVMValueRef base;
  int axis;
} IndexForm;

static const TirInst *def_once(const Cg *g, int r) { return r >= 0 ? g->def_once[r] : NULL; }

/* Whether register r is an index form: iota, a broadcast of a scalar or of the same rank, sums of
 * forms with at most one coordinate, and differences whose subtrahend has none. With build, its
 * uniform part is read from the single-definition tiles it is made of (their values cannot have
 * changed since). */
static bool index_form(Cg *g, int r, bool build, IndexForm *f, int depth) {
  const TirInst *d = def_once(g, r);
  if (!d || depth > 8 || g->f->regs[r].type.elem != TY_I32 || g->tiles[r].shared)
    return false;
  const TileType *t = &g->f->regs[r].type;
  if (d->op == TIR_IOTA) { /* along a dimension of 1: 0 everywhere, also once broadcast */
    *f = (IndexForm){NULL, t->dims[d->axis] == 1 ? -1 : d->axis};
    return true;
  }
  if (d->op == TIR_BCAST) {
    int s = d->args[0];
    if (g->f->regs[s].type.rank == t->rank)
      return index_form(g, s, build, f, depth + 1);
    if (g->f->regs[s].type.rank != 0)
      return false;
    *f = (IndexForm){NULL, -1};
    if (build) {
      LLVMValueRef *v = vals_new(g, g->tiles[r].n);
      get_tile(g, r, v);
      f->base = v[0];
    }
    return true;
  }
  IndexForm x, y;
  if ((d->op != TIR_ADD && d->op != TIR_SUB) || !index_form(g, d->args[0], build, &x, depth + 1) ||
      !index_form(g, d->args[1], build, &y, depth + 1))
    return false;
  if (y.axis >= 0 && (d->op == TIR_SUB || x.axis >= 0))
    return false;
  f->axis = x.axis >= 0 ? x.axis : y.axis;
  f->base = NULL;
  if (build) {
    LLVMValueRef a = x.base ? x.base : ci32(g, 0), b = y.base ? y.base : ci32(g, 0);
    f->base = d->op == TIR_ADD ? LLVMBuildAdd(g->b, a, b, "") : LLVMBuildSub(g->b, a, b, "");
  }
  return true;
}

/* Whether coordinate `axis` of layout L is (lane/warp part) + (register constant): their bits
 * disjoint. */
static bool coord_splits(const Layout *L, int axis) {
  if (axis < 0)
    return true;
  int shift = dim_shift(L, axis);
  uint32_t mask = (uint32_t)L->shape[axis] - 1, regs = 0;
  for (int b = 0; b < L->nbits[LAY_REG]; b++)
    regs |= L->basis[LAY_REG][b];
  return !(((regs & lw_bits(L)) >> shift) & mask);
}

/* Whether convert() takes a tile from layout src to dst (map kind k) in registers: the compare as
 * written, on the branch lower_index_select does not take, must not touch shared memory, whose
 * barrier bookkeeping (Cg.dirty, Cg.red_read, ...) would then describe that branch alone. */
static bool converts_in_regs(Cg *g, const Layout *src, const Layout *dst, MapKind k) {
  if (layout_equal(src, dst) && k != MAP_TRANS && k != MAP_EXTRACT)
    return true;
  int *from = arena_alloc(g->f->arena, sizeof(int) * (size_t)layout_nregs(dst));
  return convert_in_regs(src, dst, &(Map){k, NULL}, from);
}

/* Register k's constant part of its coordinate along axis (coord_splits holds; axis -1: 0). */
static int64_t reg_coord(const Layout *L, int k, int axis) {
  if (axis < 0)
    return 0;
  return (layout_apply_kind(L, LAY_REG, (uint32_t)k) >> dim_shift(L, axis)) & ((uint32_t)L->shape[axis] - 1);
}

static bool is_int_compare(const Cg *g, const TirInst *in) {
  return in && (tir_op_info[in->op].flags & OPF_CMP) && g->f->regs[in->args[0]].type.elem == TY_I32;
}

/* The compare a SELECT's condition comes from through single-use broadcasts of the same rank,
 * if it is one lower_index_select can take; else NULL. */
static const TirInst *index_select_compare(Cg *g, const TirInst *sel, const int *uses) {
  const TirFunc *f = g->f;
  if (sel->op != TIR_SELECT || g->tiles[sel->dst].shared || env_off("TILEC_INDEX_COMPARE"))
    return NULL;
  const Layout *L = g->tiles[sel->dst].lay;
  for (int k = 1; k < 3; k++)
    if (g->tiles[sel->args[k]].shared || g->tiles[sel->args[k]].view_of >= 0)
      return NULL;
  int r = sel->args[0], links = 0;
  if (!converts_in_regs(g, g->tiles[r].lay, L, MAP_IDENT))
    return NULL;
  const TirInst *d = def_once(g, r);
  while (d && d->op == TIR_BCAST && uses[r] == 1 && !g->tiles[r].shared && ++links < MAX_INDEX_CHAIN &&
         f->regs[d->args[0]].type.rank == f->regs[r].type.rank &&
         converts_in_regs(g, g->tiles[d->args[0]].lay, g->tiles[r].lay, MAP_BCAST))
    d = def_once(g, r = d->args[0]);
  if (!is_int_compare(g, d) || uses[r] != 1 || g->tiles[r].shared || f->regs[r].type.rank != L->rank)
    return NULL;
  for (int k = 0; k < 2; k++)
    if (!converts_in_regs(g, g->tiles[d->args[k]].lay, g->tiles[r].lay, MAP_IDENT))
      return NULL;
  IndexForm x, y;
  if (!index_form(g, d->args[0], false, &x, 0) || !index_form(g, d->args[1], false, &y, 0))
    return NULL;
  bool eq = d->op == TIR_EQ || d->op == TIR_NE;
  if (x.axis < 0 && y.axis < 0)
    return NULL;
  if ((!eq && (x.axis < 0 || y.axis < 0)) || !coord_splits(L, x.axis) || !coord_splits(L, y.axis))
    return NULL;
  return d;
}

/* The plan: per register, whether lower_index_select lowers its definition (the compare and the
 * broadcasts between it and its select), so lower_inst skips it. */
static void plan_index_selects(Cg *g) {
  const TirFunc *f = g->f;
  int *uses = arena_alloc(f->arena, sizeof(int) * (size_t)(f->nregs + 1));
  g->def_once = arena_alloc(f->arena, sizeof(TirInst *) * (size_t)(f->nregs + 1));
  g->in_index_select = arena_alloc(f->arena, sizeof(bool) * (size_t)(f->nregs + 1));
  for (int i = 0; i < f->ninsts; i++) {
    const TirInst *in = &f->insts[i];
    for (int k = 0; k < 3; k++)
      if (in->args[k] >= 0)
        uses[in->args[k]]++;
    for (int k = 0; tir_op_addresses(in->op) && k < TILE_MAX_RANK; k++)
      if (in->index[k].start >= 0)
        uses[in->index[k].start]++;
  }
  for (int r = 0; r < f->nregs; r++) {
    int w = tir_only_write(f, r);
    g->def_once[r] = w >= 0 ? &f->insts[w] : NULL;
  }
  for (int i = 0; i < f->ninsts; i++) {
    const TirInst *sel = &f->insts[i], *cmp = index_select_compare(g, sel, uses);
    for (int r = cmp ? sel->args[0] : -1; r >= 0; r = def_once(g, r) == cmp ? -1 : def_once(g, r)->args[0])
      g->in_index_select[r] = true;
  }
}

/* Lowers SELECT sel with the compare of its condition (index_select_compare): the one-difference
 * compares under the range check, the compare as written otherwise. */
static bool lower_index_select(Cg *g, const TirInst *sel) {
  if (!g->in_index_select[sel->args[0]])
    return false;
  const Layout *L = g->tiles[sel->dst].lay;
  int n = g->tiles[sel->dst].n;
  const TirInst *chain[MAX_INDEX_CHAIN];
  int nchain = 0;
  for (int r = sel->args[0]; nchain < MAX_INDEX_CHAIN; r = chain[nchain - 1]->args[0]) {
    chain[nchain++] = def_once(g, r);
    if (is_int_compare(g, chain[nchain - 1]))
      break;
  }
  const TirInst *cmp = chain[nchain - 1];
  IndexForm x, y;
  if (!is_int_compare(g, cmp) || !index_form(g, cmp->args[0], true, &x, 0) || !index_form(g, cmp->args[1], true, &y, 0)) {
    cg_error(g, "internal error: index compare");
    return true;
  }
  LLVMValueRef *a = vals_new(g, n), *b = vals_new(g, n), *out = vals_new(g, n);
  get_tile_as(g, sel->args[1], L, a);
  get_tile_as(g, sel->args[2], L, b);
  LLVMValueRef ok = NULL;
  if (cmp->op != TIR_EQ && cmp->op != TIR_NE)
    for (int s = 0; s < 2; s++) {
      LLVMValueRef u = s ? y.base : x.base;
      if (!u)
        continue;
      LLVMValueRef in = LLVMBuildICmp(g->b, LLVMIntULE, LLVMBuildAdd(g->b, u, ci32(g, 1 << 29), ""), ci32(g, 1 << 30), "");
      ok = ok ? LLVMBuildAnd(g->b, ok, in, "") : in;
    }
  LLVMBasicBlockRef fast = new_bb(g, "idx"), slow = ok ? new_bb(g, "idxw") : NULL, join = ok ? new_bb(g, "idxj") : NULL;
  if (ok)
    LLVMBuildCondBr(g->b, ok, fast, slow);
  else
    LLVMBuildBr(g->b, fast);
  LLVMPositionBuilderAtEnd(g->b, fast);
  LLVMValueRef lw = layout_lw(g, L), t = ci32(g, 0);
  int axes[2] = {x.axis, y.axis};
  for (int s = 0; s < 2; s++) {
    LLVMValueRef u = s ? y.base : x.base;
    if (axes[s] >= 0) { /* register 0's coordinate: the thread's part alone */
      LLVMValueRef part = elem_dim(g, L, lw, 0, axes[s]);
      u = u ? LLVMBuildAdd(g->b, u, part, "") : part;
    }
    if (u)
      t = s ? LLVMBuildSub(g->b, t, u, "") : LLVMBuildAdd(g->b, t, u, "");
  }
  for (int k = 0; k < n; k++) {
    int64_t cx = reg_coord(L, k, axes[0]), cy = reg_coord(L, k, axes[1]);
    out[k] = LLVMBuildSelect(g->b, binary(g, cmp->op, TY_I32, t, ci32(g, cy - cx)), a[k], b[k], "");
  }
  put_tile(g, sel->dst, out);
  if (!ok)
    return true;
  LLVMBuildBr(g->b, join);
  LLVMPositionBuilderAtEnd(g->b, slow);
  for (int c = nchain - 1; c >= 0; c--)
    if (chain[c]->op == TIR_BCAST)
      lower_copyish(g, chain[c]);
    else
      lower_elemwise(g, chain[c]);
  lower_elemwise(g, sel);
  LLVMBuildBr(g->b, join);
  LLVMPositionBuilderAtEnd(g->b, join);
  return true;
}

static LLVMValueRef in_range(Cg *g, LLVMValueRef idx, LLVMValueRef size);

/* The widest vector (in elements, at most want) a WINDOW may read: its first element's offset is
 * a known multiple of it (tir_known_multiple of the column start, the row pitch). */
static int window_chunk(Cg *g, const TirInst *in, const Tile *s, int want) {
  int64_t m = tir_gcd(tir_known_multiple(g->f, in->args[2]), s->pitch);
  while (want > 1 && m % want)
    want >>= 1;
  return want;
}

typedef struct Window {
  const Tile *src, *dst;
  ElemType e;
  LLVMValueRef r0, c0;     /* the starts */
  int32_t rows, cols;      /* the source tile's logical extent (rank 1: one row) */
  double fill;
} Window;

/* The window inside the tile, the usual case (one test, uniform across the block): the buffer
 * read in the result's layout from the window's first element, `ch` elements at a time. */
static void window_inside(Cg *g, const Window *w, int ch, LLVMValueRef *vals) {
  int eb = elem_bytes(w->e);
  LLVMValueRef first = LLVMBuildAdd(g->b, LLVMBuildMul(g->b, w->r0, ci32(g, w->src->pitch), ""), w->c0, "");
  LLVMValueRef base = smem_at(g, tile_base(g, w->src), LLVMBuildMul(g->b, first, ci32(g, eb), ""));
  buf_read_chunks(g, base, w->dst->lay, w->e, w->src->pitch, ch, w->dst->pad, vals);
}

/* A load of type t from shared buffer address p where ok holds: else undef, and where the tile is
 * written by window stores (window_stored) no load at all, not even a discarded one of the
 * buffer's start, which another thread of an owned store's loop may be writing. */
static LLVMValueRef window_load(Cg *g, const Tile *t, LLVMTypeRef ty, LLVMValueRef p, LLVMValueRef ok, unsigned align) {
  if (!t->window_stored) {
    LLVMValueRef v = LLVMBuildLoad2(g->b, ty, p, "");
    LLVMSetAlignment(v, align);
    return v;
  }
  LLVMBasicBlockRef from = LLVMGetInsertBlock(g->b), ld = new_bb(g, "wl"), join = new_bb(g, "wlj");
  LLVMBuildCondBr(g->b, ok, ld, join);
  LLVMPositionBuilderAtEnd(g->b, ld);
  LLVMValueRef v = LLVMBuildLoad2(g->b, ty, p, "");
  LLVMSetAlignment(v, align);
  LLVMBuildBr(g->b, join);
  LLVMPositionBuilderAtEnd(g->b, join);
  LLVMValueRef phi = LLVMBuildPhi(g->b, ty, ""), in_v[2] = {v, LLVMGetUndef(ty)};
  LLVMBasicBlockRef in_b[2] = {ld, from};
  LLVMAddIncoming(phi, in_v, in_b, 2);
  return phi;
}

/* Register k of window w (lw: layout_lw of its layout): its element's index in the tile's buffer
 * (a shifted row's shift added), and in *ok whether the element lies inside the tile. */
static LLVMValueRef window_elem(Cg *g, const Window *w, LLVMValueRef lw, int k, LLVMValueRef *ok) {
  const Layout *l = w->dst->lay;
  LLVMValueRef col = LLVMBuildAdd(g->b, w->c0, elem_dim(g, l, lw, k, l->rank - 1), "");
  LLVMValueRef row = l->rank == 2 ? LLVMBuildAdd(g->b, w->r0, elem_dim(g, l, lw, k, 0), "") : w->r0;
  *ok = LLVMBuildAnd(g->b, in_range(g, col, ci32(g, w->cols)), in_range(g, row, ci32(g, w->rows)), "");
  LLVMValueRef idx = LLVMBuildAdd(g->b, LLVMBuildMul(g->b, row, ci32(g, w->src->pitch), ""), col, "");
  return w->src->shift ? LLVMBuildAdd(g->b, idx, w->src->shift, "") : idx;
}

/* Registers [from, to) of a window that reaches outside the tile: element by element, those
 * outside read the fill (and load from the buffer's start, so that no address leaves it). */
static void window_masked_regs(Cg *g, const Window *w, int from, int to, LLVMValueRef *vals) {
  const Tile *d = w->dst;
  int eb = elem_bytes(w->e);
  LLVMValueRef lw = layout_lw(g, d->lay), base = tile_base(g, w->src);
  LLVMValueRef fill = const_elem(g, w->e, w->fill);
  for (int k = from; k < to; k++) {
    if (d->pad && d->pad[k]) {
      vals[k] = LLVMGetUndef(reg_type(g, w->e));
      continue;
    }
    LLVMValueRef ok, idx = window_elem(g, w, lw, k, &ok);
    idx = LLVMBuildSelect(g->b, ok, idx, ci32(g, 0), "");
    LLVMValueRef v = window_load(g, w->src, mem_type(g, w->e), smem_at(g, base, LLVMBuildMul(g->b, idx, ci32(g, eb), "")),
                                 ok, (unsigned)eb);
    vals[k] = LLVMBuildSelect(g->b, ok, from_mem(g, w->e, v), fill, "");
  }
}

static void window_masked(Cg *g, const Window *w, LLVMValueRef *vals) { window_masked_regs(g, w, 0, w->dst->n, vals); }

/* A window that reaches outside the tile, where it starts on a whole chunk of ch elements of the
 * buffer: each chunk of a thread that lies in the buffer is one vector read (one that does not
 * reads the buffer's first chunk instead), then each element outside the tile takes the fill: a
 * compare and a select an element where window_masked pays a scalar read, its address and two
 * compares (a row's first window, which a moved loop starts before the row, and its last, past
 * the row's end). Chunks with padding go element by element. */
static void window_masked_chunks(Cg *g, const Window *w, int ch, LLVMValueRef *vals) {
  const Tile *d = w->dst;
  const Layout *l = d->lay;
  int eb = elem_bytes(w->e), rank = l->rank, pitch = w->src->pitch;
  int32_t bufrows = w->src->lay->rank == 2 ? w->src->lay->shape[0] : 1;
  LLVMValueRef lw = layout_lw(g, l), base = tile_base(g, w->src), fill = const_elem(g, w->e, w->fill);
  LLVMTypeRef mt = mem_type(g, w->e), vt = LLVMVectorType(mt, (unsigned)ch);
  for (int r = 0; r < d->n; r += ch) {
    bool padded = false;
    for (int j = 0; d->pad && j < ch; j++)
      padded |= d->pad[r + j];
    if (padded) {
      window_masked_regs(g, w, r, r + ch, vals);
      continue;
    }
    LLVMValueRef row = rank == 2 ? LLVMBuildAdd(g->b, w->r0, elem_dim(g, l, lw, r, 0), "") : w->r0;
    LLVMValueRef col = LLVMBuildAdd(g->b, w->c0, elem_dim(g, l, lw, r, rank - 1), "");
    LLVMValueRef bcol = w->src->shift ? LLVMBuildAdd(g->b, col, w->src->shift, "") : col;
    LLVMValueRef inbuf = LLVMBuildAnd(g->b, LLVMBuildICmp(g->b, LLVMIntULE, bcol, ci32(g, pitch - ch), ""),
                                      in_range(g, row, ci32(g, bufrows)), "");
    LLVMValueRef idx = LLVMBuildAdd(g->b, LLVMBuildMul(g->b, row, ci32(g, pitch), ""), bcol, "");
    idx = LLVMBuildSelect(g->b, inbuf, idx, ci32(g, 0), "");
    LLVMValueRef v = window_load(g, w->src, vt, smem_at(g, base, LLVMBuildMul(g->b, idx, ci32(g, eb), "")), inbuf,
                                 (unsigned)(eb * ch));
    LLVMValueRef row_ok = in_range(g, row, ci32(g, w->rows));
    LLVMValueRef oks = LLVMGetUndef(LLVMVectorType(g->i1, (unsigned)ch));
    for (int k = 0; k < ch; k++) {
      LLVMValueRef ck = LLVMBuildAdd(g->b, w->c0, elem_dim(g, l, lw, r + k, rank - 1), "");
      LLVMValueRef ok = LLVMBuildAnd(g->b, in_range(g, ck, ci32(g, w->cols)), row_ok, "");
      if (d->narrow)
        oks = LLVMBuildInsertElement(g->b, oks, ok, ci32(g, k), "");
      else
        vals[r + k] = LLVMBuildSelect(g->b, ok, from_mem(g, w->e, LLVMBuildExtractElement(g->b, v, ci32(g, k), "")), fill, "");
    }
    /* A narrow tile's packed readers take the words as loaded: the fill chosen for the whole
     * vector, or LLVM splits the load into the pieces its elements are selected from. */
    if (d->narrow) {
      LLVMValueRef fv[16]; /* ch: a 16-byte chunk, 8 narrow elements */
      for (int k = 0; k < ch; k++)
        fv[k] = LLVMConstReal(mt, round_to_elem(w->e, w->fill));
      LLVMValueRef sel = LLVMBuildSelect(g->b, oks, v, LLVMConstVector(fv, (unsigned)ch), "");
      for (int k = 0; k < ch; k++)
        vals[r + k] = from_mem(g, w->e, LLVMBuildExtractElement(g->b, sel, ci32(g, k), ""));
    }
  }
}

/* Whether registers a and b hold the same value: one register, or one constant, each written once. */
static bool same_value(const TirFunc *f, int a, int b) {
  int wa = tir_only_write(f, a), wb = tir_only_write(f, b);
  if (wa < 0 || wb < 0)
    return false;
  return a == b || (f->insts[wa].op == TIR_CONST && f->insts[wb].op == TIR_CONST && f->insts[wa].imm == f->insts[wb].imm);
}

/* A known multiple of window in's column start plus its tile's shift (a row copied shifted): in a
 * loop that tir_align.c moved to the boundary of the row the tile copies, `for c0 = lo - %s ..`
 * with `%s = row_shift` of that row, the windows start at lo + k * step there; elsewhere 1. */
static int64_t shifted_window_multiple(Cg *g, const TirInst *in, const Tile *t) {
  const TirFunc *f = g->f;
  int fo = tir_only_write(f, in->args[2]);
  int sub = fo >= 0 && f->insts[fo].op == TIR_FOR ? tir_only_write(f, f->insts[fo].args[0]) : -1;
  int rw = sub >= 0 && f->insts[sub].op == TIR_SUB ? tir_only_write(f, f->insts[sub].args[1]) : -1;
  const TirInst *rs = rw >= 0 ? &f->insts[rw] : NULL, *ld = t->shifted;
  if (!rs || rs->op != TIR_ROW_SHIFT || rs->arg_index != ld->arg_index)
    return 1;
  for (int d = 0; d < f->args[ld->arg_index].rank; d++)
    if (!same_value(f, rs->args[d], ld->index[d].start))
      return 1;
  return tir_gcd(tir_known_multiple(f, f->insts[sub].args[0]), tir_known_multiple(f, f->insts[fo].args[2]));
}

/* Whether window w (of register shape dt, its layout w->dst's) lies inside its tile: every element
 * of the window in the tile, and every element of its padded layout (which the vector accesses
 * also touch, then drop) in the tile's buffer. One test, uniform across the block. */
static LLVMValueRef window_fits(Cg *g, const Window *w, const TileType *dt) {
  const Layout *sl = w->src->lay, *dl = w->dst->lay;
  int32_t drows = dt->rank == 2 ? dt->dims[0] : 1, dcols = dt->dims[dt->rank - 1];
  int32_t prows = dt->rank == 2 ? dl->shape[0] : 1, pcols = dl->shape[dl->rank - 1];
  int32_t bufrows = sl->rank == 2 ? sl->shape[0] : 1;
  /* a shifted row's elements lie up to a chunk further on, in its room */
  int32_t buf = w->src->pitch - (w->src->shifted ? 16 / elem_bytes(w->e) : 0);
  int32_t chi = w->cols - dcols < buf - pcols ? w->cols - dcols : buf - pcols;
  int32_t rhi = w->rows - drows < bufrows - prows ? w->rows - drows : bufrows - prows;
  if (chi < 0 || rhi < 0)
    return LLVMConstInt(LLVMInt1TypeInContext(g->ctx), 0, 0);
  return LLVMBuildAnd(g->b, LLVMBuildICmp(g->b, LLVMIntULE, w->c0, ci32(g, chi), ""),
                      LLVMBuildICmp(g->b, LLVMIntULE, w->r0, ci32(g, rhi), ""), "");
}

/* A window's buffer is plain (its elements at row * pitch + column, plus a shifted row's shift);
 * false after an internal error naming tile r. */
static bool window_buffer_plain(Cg *g, const Tile *t, int r) {
  if (!t->swz && t->view_of < 0 && !(t->shifted && !t->shift))
    return true;
  const char *name = g->f->regs[r].name;
  cg_error(g, "internal error: a window of shared tile '%s', whose buffer is swizzled, shifted or "
           "a transposed view (planning keeps windowed tiles plain) on %s", name ? name : "?",
           arch_name(g->o->arch));
  return false;
}

/* WINDOW: a register box of a shared tile at run-time starts; elements outside the tile read the
 * fill (the interpreter's rule). The tile's buffer is row-major with rows Tile.pitch apart. */
static void lower_window(Cg *g, const TirInst *in) {
  const TileType *st = rtype(g, in->args[0]), *dt = rtype(g, in->dst);
  Window w = {&g->tiles[in->args[0]], &g->tiles[in->dst], dt->elem, NULL, NULL,
              st->rank == 2 ? st->dims[0] : 1, st->dims[st->rank - 1], in->imm};
  if (!window_buffer_plain(g, w.src, in->args[0]))
    return;
  get_tile(g, in->args[1], &w.r0);
  get_tile(g, in->args[2], &w.c0);
  LLVMValueRef inside = window_fits(g, &w, dt);
  LLVMValueRef *vals = vals_new(g, w.dst->n);
  LLVMBasicBlockRef fast = new_bb(g, "win"), slow = new_bb(g, "wout"), join = new_bb(g, "wj");
  LLVMBuildCondBr(g->b, inside, fast, slow);
  LLVMPositionBuilderAtEnd(g->b, fast);
  int want = layout_vec_chunk(w.dst->lay, w.e);
  LLVMValueRef c0 = w.c0; /* the masked paths', which add the shift themselves */
  if (!w.src->shift) {
    window_inside(g, &w, window_chunk(g, in, w.src, want), vals);
  } else {
    w.c0 = LLVMBuildAdd(g->b, c0, w.src->shift, "");
    if (shifted_window_multiple(g, in, w.src) % want == 0) {
      /* A shifted row read where tir_align moved the loop: whole chunks of the buffer. */
      window_inside(g, &w, want, vals);
    } else {
      /* Elsewhere vector reads where the window happens to start on a whole chunk of the
       * buffer, element reads otherwise. */
      LLVMValueRef even = LLVMBuildICmp(g->b, LLVMIntEQ, LLVMBuildAnd(g->b, w.c0, ci32(g, want - 1), ""), ci32(g, 0), "");
      LLVMBasicBlockRef vec = new_bb(g, "wvec"), one = new_bb(g, "wone");
      LLVMBuildCondBr(g->b, even, vec, one);
      LLVMPositionBuilderAtEnd(g->b, vec);
      window_inside(g, &w, want, vals);
      store_regs(g, in->dst, vals);
      LLVMBuildBr(g->b, join);
      LLVMPositionBuilderAtEnd(g->b, one);
      w.c0 = c0;
      window_masked(g, &w, vals);
    }
    w.c0 = c0;
  }
  store_regs(g, in->dst, vals);
  LLVMBuildBr(g->b, join);
  LLVMPositionBuilderAtEnd(g->b, slow);
  int mch = !w.src->shift                                  ? window_chunk(g, in, w.src, want)
            : shifted_window_multiple(g, in, w.src) % want == 0 ? want
                                                                : 1;
  if (mch > 1 && !env_off("TILEC_WINDOW_CHUNKS"))
    window_masked_chunks(g, &w, mch, vals);
  else
    window_masked(g, &w, vals);
  store_regs(g, in->dst, vals);
  LLVMBuildBr(g->b, join);
  LLVMPositionBuilderAtEnd(g->b, join);
  g->dirty = true;
}

/* The FOR of the loop whose body holds WINDOW_STORE i as its own (owned_store_loop), or -1: the
 * innermost loop around it, directly in its body; its column start the loop variable, of a
 * constant step no shorter than the window, and its row start fixed in the loop (the iterations'
 * windows are disjoint); a WINDOW of the tile before it with the same starts and layout, which
 * holds no replicas (each element read and written by one thread); no other access to the tile in
 * the loop. Each thread then rewrites only what it read itself this iteration, and nothing else
 * of the loop reads the tile: the store needs no barrier of its own, only one before the loop
 * (reads of earlier loops) and one after it (sync_before). */
static int owned_store_loop(const Cg *g, int i) {
  const TirFunc *f = g->f;
  const TirInst *st = &f->insts[i];
  int lf = tir_enclosing(f, i);
  if (lf < 0 || f->insts[lf].op != TIR_FOR || st->args[2] != f->insts[lf].dst)
    return -1;
  const TileType *vt = &f->regs[st->args[0]].type;
  const Layout *vl = g->tiles[st->args[0]].lay;
  int step = tir_only_write(f, f->insts[lf].args[2]), end = tir_region_end(f, lf);
  if (step < 0 || f->insts[step].op != TIR_CONST || f->insts[step].imm < vt->dims[vt->rank - 1] ||
      layout_zero_mask(vl, LAY_LANE) || layout_zero_mask(vl, LAY_WARP))
    return -1;
  int tile = st->dst, reads = 0;
  for (int j = lf + 1; j < end; j++) {
    const TirInst *u = &f->insts[j];
    if (u->dst == st->args[1] && u->op != TIR_CONST)
      return -1;
    if (j == i || !(tir_inst_reads(u, tile) || u->dst == tile))
      continue;
    if (j > i || u->op != TIR_WINDOW || u->args[0] != tile || !same_value(f, u->args[1], st->args[1]) ||
        u->args[2] != st->args[2] || g->tiles[u->dst].lay != vl || !tile_same_shape(&f->regs[u->dst].type, vt))
      return -1;
    reads++;
  }
  return reads == 1 ? lf : -1;
}

static bool loop_has_owned_store(Cg *g, int first) {
  int end = tir_region_end(g->f, first);
  for (int j = first + 1; j < end; j++)
    if (g->f->insts[j].op == TIR_WINDOW_STORE && owned_store_loop(g, j) == first)
      return true;
  return false;
}

/* A barrier owed before instruction `at` (or the first after it that is lowered), beside those
 * already owed (nested loops of owned stores each get theirs); false when no more fit. */
static bool owe_barrier(Cg *g, int at) {
  for (int k = 0; k < g->nbarrier_at; k++)
    if (g->barrier_at[k] == at)
      return true;
  if (g->nbarrier_at == MAX_NEST)
    return false;
  g->barrier_at[g->nbarrier_at++] = at;
  return true;
}

/* Window w's registers (vals, w->dst's layout) that fall inside its tile, element by element; the
 * others are dropped. */
static void window_masked_store(Cg *g, const Window *w, LLVMValueRef *vals) {
  const Tile *d = w->dst;
  int eb = elem_bytes(w->e);
  LLVMValueRef lw = layout_lw(g, d->lay), base = tile_base(g, w->src);
  for (int k = 0; k < d->n; k++) {
    if (d->pad && d->pad[k])
      continue;
    LLVMValueRef ok, idx = window_elem(g, w, lw, k, &ok);
    LLVMBasicBlockRef join = begin_if(g, ok);
    LLVMValueRef p = smem_at(g, base, LLVMBuildMul(g->b, idx, ci32(g, eb), ""));
    LLVMSetAlignment(LLVMBuildStore(g->b, to_mem(g, w->e, vals[k]), p), (unsigned)eb);
    end_if(g, join);
  }
}

/* WINDOW_STORE: the value's elements inside the tile written in place (lower_window's addressing:
 * vectors where the window fits and its start is a known multiple of them, a shifted row's
 * columns at its shift), the rest dropped; one writer per element where the layout holds
 * replicas. A store its thread owns (owned_store_loop) leaves the barriers to its loop; any other
 * is fenced as a shared tile's write is: a barrier before it if shared memory was read, one after. */
static void lower_window_store(Cg *g, const TirInst *in) {
  int i = (int)(in - g->f->insts);
  const TileType *st = rtype(g, in->dst), *vt = rtype(g, in->args[0]);
  Window w = {&g->tiles[in->dst], &g->tiles[in->args[0]], st->elem, NULL, NULL,
              st->rank == 2 ? st->dims[0] : 1, st->dims[st->rank - 1], 0};
  if (!window_buffer_plain(g, w.src, in->dst))
    return;
  LLVMValueRef *vals = vals_new(g, w.dst->n);
  get_tile(g, in->args[0], vals);
  get_tile(g, in->args[1], &w.r0);
  get_tile(g, in->args[2], &w.c0);
  int loop = owned_store_loop(g, i);
  if (loop >= 0 && !owe_barrier(g, tir_region_end(g->f, loop) + 1))
    loop = -1;
  if (loop < 0 && g->dirty)
    barrier(g);
  LLVMBasicBlockRef writer = begin_if(g, layout_writer(g, w.dst->lay));
  LLVMValueRef inside = window_fits(g, &w, vt);
  LLVMBasicBlockRef fast = new_bb(g, "wsin"), slow = new_bb(g, "wsout"), join = new_bb(g, "wsj");
  LLVMBuildCondBr(g->b, inside, fast, slow);
  LLVMPositionBuilderAtEnd(g->b, fast);
  int want = layout_vec_chunk(w.dst->lay, w.e);
  int ch = !w.src->shift ? window_chunk(g, in, w.src, want)
           : shifted_window_multiple(g, in, w.src) % want == 0 ? want : 1;
  LLVMValueRef first = w.src->shift ? LLVMBuildAdd(g->b, w.c0, w.src->shift, "") : w.c0;
  first = LLVMBuildAdd(g->b, LLVMBuildMul(g->b, w.r0, ci32(g, w.src->pitch), ""), first, "");
  LLVMValueRef base = smem_at(g, tile_base(g, w.src), LLVMBuildMul(g->b, first, ci32(g, elem_bytes(w.e)), ""));
  buf_chunks(g, base, w.dst->lay, w.e, w.src->pitch, ch, w.dst->pad, vals, true);
  LLVMBuildBr(g->b, join);
  LLVMPositionBuilderAtEnd(g->b, slow);
  window_masked_store(g, &w, vals);
  LLVMBuildBr(g->b, join);
  LLVMPositionBuilderAtEnd(g->b, join);
  end_if(g, writer);
  if (loop < 0)
    barrier(g);
}

static LLVMValueRef combine(Cg *g, TirOp op, ElemType e, LLVMValueRef x, LLVMValueRef y) {
  TirOp b = op == TIR_REDUCE_SUM ? TIR_ADD : op == TIR_REDUCE_MAX ? TIR_MAX : TIR_MIN;
  return binary(g, b, elem_is_float(e) ? TY_F32 : TY_I32, x, y);
}

static LLVMValueRef identity(Cg *g, TirOp op, ElemType e) {
  if (elem_is_float(e))
    return cf32(g, op == TIR_REDUCE_SUM ? 0.0 : op == TIR_REDUCE_MAX ? -INFINITY : INFINITY);
  return ci32(g, op == TIR_REDUCE_SUM ? 0 : op == TIR_REDUCE_MAX ? INT32_MIN : INT32_MAX);
}

static LLVMValueRef shfl_xor(Cg *g, LLVMValueRef v, int mask, bool isf) {
  LLVMValueRef a[4] = {ci32(g, -1), v, ci32(g, mask), ci32(g, 0x1f)};
  return call_intrin(g, isf ? "llvm.nvvm.shfl.sync.bfly.f32" : "llvm.nvvm.shfl.sync.bfly.i32", NULL, 0, a, 4);
}

/* The component of flat coordinate f along axis a (nonzero: it walks the axis). */
static uint32_t along(const Layout *l, uint32_t f, int a) {
  return f & ((uint32_t)(l->shape[a] - 1) << dim_shift(l, a));
}

/* A reduction after its in-thread and lane steps (reduce_local): the partial results acc of the
 * reduced layout S, and the warp bits it still crosses (through shared memory, slot RED0 + k). */
typedef struct Reduction {
  const TirInst *in;
  Layout S;
  int ns;
  LLVMValueRef *acc;
  uint32_t lane_red, warp_red;
} Reduction;

/* The lane and warp bits of layout L along axis a (false: a basis mixes axes). */
static bool reduce_bits(const Layout *L, int a, uint32_t *lane_red, uint32_t *warp_red) {
  *lane_red = *warp_red = 0;
  for (int kind = LAY_LANE; kind < LAY_NKINDS; kind++)
    for (int b = 0; b < L->nbits[kind]; b++) {
      uint32_t basis = L->basis[kind][b];
      if (!along(L, basis, a))
        continue;
      if (basis != along(L, basis, a))
        return false;
      if (kind == LAY_LANE)
        *lane_red |= 1u << b;
      else
        *warp_red |= 1u << b;
    }
  return true;
}

/* How many independent chains an in-thread reduction of n values runs (reduce_chained). One
 * chain of n - 1 dependent max or add instructions left the softmax of attention waiting on each
 * result (ncu: FMNMX 12% of the samples at d64, most of them on the fixed-latency wait); two
 * chains halve the wait with the same instructions (four spilled the 512-thread cp.async entry of
 * 192-row attention, held to 128 registers), but for a sum of products, whose one chain folds
 * every product into an fma (n instructions; two chains: n + 1), so those keep one. From 32
 * values: on an H100 (run av1) two chains made 128-column d64 tiles 2.6% faster, but 64-column
 * ones (16 values) 3% slower. TILEC_REDUCE_CHAINS=0: one chain always (the A/B). */
enum { REDUCE_CHAINS = 2, REDUCE_CHAIN_MIN = 32 };
static int reduce_chains(const Cg *g, const TirInst *in, int n) {
  if (n < REDUCE_CHAIN_MIN || env_off("TILEC_REDUCE_CHAINS"))
    return 1;
  int w = tir_only_write(g->f, in->args[0]);
  if (in->op == TIR_REDUCE_SUM && w >= 0 && g->f->insts[w].op == TIR_MUL)
    return 1;
  return REDUCE_CHAINS;
}

/* The reduction of v[0 .. n) in `chains` interleaved chains (value k on chain k % chains), the
 * chains then combined pairwise; one chain: v[0] op v[1] op ... in order. */
static LLVMValueRef reduce_chained(Cg *g, TirOp op, ElemType e, LLVMValueRef *v, int n, int chains) {
  LLVMValueRef c[REDUCE_CHAINS] = {0};
  for (int k = 0; k < n; k++)
    c[k % chains] = c[k % chains] ? combine(g, op, e, c[k % chains], v[k]) : v[k];
  for (int w = 1; w < chains; w *= 2)
    for (int i = 0; i + w < chains; i += 2 * w)
      c[i] = combine(g, op, e, c[i], c[i + w]);
  return c[0];
}

/* v[0 .. n) of one result element reduced as pairs (max.f16x2: values 2i and 2i + 1 side by side)
 * in `chains` chains, then the pair's two halves, then an odd last value. */
static LLVMValueRef reduce_pairs(Cg *g, TirOp op, ElemType e, LLVMValueRef *v, int n, int chains) {
  LLVMTypeRef v2 = LLVMVectorType(mem_type(g, e), 2);
  LLVMValueRef *pk = vals_new(g, n / 2);
  for (int i = 0; i < n / 2; i++) {
    pk[i] = LLVMGetUndef(v2);
    for (int j = 0; j < 2; j++)
      pk[i] = LLVMBuildInsertElement(g->b, pk[i], to_mem(g, e, v[2 * i + j]), ci32(g, j), "");
  }
  LLVMValueRef p = reduce_chained(g, op, e, pk, n / 2, chains);
  LLVMValueRef r = combine(g, op, e, from_mem(g, e, LLVMBuildExtractElement(g->b, p, ci32(g, 0), "")),
                           from_mem(g, e, LLVMBuildExtractElement(g->b, p, ci32(g, 1), "")));
  return n % 2 ? combine(g, op, e, r, v[n - 1]) : r;
}

static bool reduce_local(Cg *g, const TirInst *in, Reduction *R) {
  int src = in->args[0], a = in->axis;
  const Layout *L = g->tiles[src].lay;
  ElemType e = rtype(g, src)->elem;
  bool isf = elem_is_float(e);
  R->in = in;
  R->S = layout_slice(L, a);
  int n = g->tiles[src].n, ns = R->ns = layout_nregs(&R->S);
  LLVMValueRef *v = vals_new(g, n);
  get_tile(g, src, v);
  /* Padding along the axis must not contribute. */
  int32_t logical = rtype(g, src)->dims[a];
  if (logical < L->shape[a]) {
    LLVMValueRef lw = layout_lw(g, L);
    for (int k = 0; k < n; k++) {
      LLVMValueRef c = elem_dim(g, L, lw, k, a);
      LLVMValueRef ok = LLVMBuildICmp(g->b, LLVMIntULT, c, ci32(g, logical), "");
      v[k] = LLVMBuildSelect(g->b, ok, v[k], identity(g, in->op, e), "");
    }
  }
  /* In-thread: register r lands on the slice register made of its bits that survive. */
  LLVMValueRef *acc = R->acc = vals_new(g, ns);
  int per = n / ns; /* every slice register gets per values */
  bool packed = per >= 2 && g->tiles[src].narrow && reduces_pairs(g->f, in); /* two an instruction */
  int chains = reduce_chains(g, in, packed ? per / 2 : per);
  LLVMValueRef *part = vals_new(g, n); /* slice register q's values: part[q * per .. (q + 1) * per) */
  int *np = arena_alloc(g->f->arena, sizeof(int) * (size_t)ns);
  memset(np, 0, sizeof(int) * (size_t)ns);
  for (int k = 0; k < n; k++) {
    int q = 0, qb = 0;
    for (int b = 0; b < L->nbits[LAY_REG]; b++) {
      uint32_t basis = L->basis[LAY_REG][b];
      if (basis & ~along(L, basis, a)) {
        if (along(L, basis, a)) {
          cg_error(g, "internal error: reduction over a layout that mixes axes");
          return false;
        }
        q |= (k >> b & 1) << qb++;
      }
    }
    if (chains == 1 && !packed) /* in register order, the slice registers' chains interleaved */
      acc[q] = acc[q] ? combine(g, in->op, e, acc[q], v[k]) : v[k];
    else
      part[q * per + np[q]++] = v[k];
  }
  for (int q = 0; q < ns && packed; q++)
    acc[q] = reduce_pairs(g, in->op, e, part + q * per, per, chains);
  for (int q = 0; q < ns && chains > 1 && !packed; q++)
    acc[q] = reduce_chained(g, in->op, e, part + q * per, np[q], chains);
  /* Across lanes; the warps are reduce_warps_write / _read's. */
  if (!reduce_bits(L, a, &R->lane_red, &R->warp_red)) {
    cg_error(g, "internal error: reduction over a layout that mixes axes");
    return false;
  }
  for (int b = 0; b < LAYOUT_LANE_BITS; b++)
    if (R->lane_red >> b & 1)
      for (int q = 0; q < ns; q++)
        acc[q] = combine(g, in->op, e, acc[q], shfl_xor(g, acc[q], 1 << b, isf));
  return true;
}

/* Where a reduction's warp group goes in its slot: the flat index of slice element q times the
 * group size, plus this warp's rank among the warps reduced together. */
static LLVMValueRef reduce_slot_index(Cg *g, const Reduction *R, LLVMValueRef flat, LLVMValueRef grp) {
  int G = 1 << __builtin_popcount(R->warp_red);
  return LLVMBuildAdd(g->b, LLVMBuildMul(g->b, flat, ci32(g, G), ""), grp, "");
}

/* Each warp's partial results into slot RED0 + k (one writer per element); a barrier follows. */
static void reduce_warps_write(Cg *g, const Reduction *R, int k) {
  const Layout *L = g->tiles[R->in->args[0]].lay;
  int G = 1 << __builtin_popcount(R->warp_red);
  LLVMValueRef base = slot_base(g, SLOT_RED0 + k, (int)layout_numel(&R->S) * G * 4);
  LLVMValueRef grp = ci32(g, 0);
  for (int b = 0, j = 0; b < R->S.nbits[LAY_WARP]; b++)
    if (R->warp_red >> b & 1) {
      LLVMValueRef bit = LLVMBuildAnd(g->b, LLVMBuildLShr(g->b, g->warp, ci32(g, b), ""), ci32(g, 1), "");
      grp = LLVMBuildOr(g->b, grp, LLVMBuildShl(g->b, bit, ci32(g, j++), ""), "");
    }
  LLVMValueRef lw = layout_lw(g, &R->S);
  LLVMBasicBlockRef join = begin_if(
      g, writer_pred(g, R->lane_red | layout_zero_mask(L, LAY_LANE), layout_zero_mask(L, LAY_WARP)));
  for (int q = 0; q < R->ns; q++) {
    LLVMValueRef idx = reduce_slot_index(g, R, elem_flat(g, &R->S, lw, q), grp);
    LLVMBuildStore(g->b, R->acc[q], smem_at(g, base, LLVMBuildMul(g->b, idx, ci32(g, 4), "")));
  }
  end_if(g, join);
}

/* After the barrier: every thread combines the warps' partial results from slot RED0 + k. */
static void reduce_warps_read(Cg *g, Reduction *R, int k) {
  ElemType e = rtype(g, R->in->args[0])->elem;
  LLVMTypeRef rt = elem_is_float(e) ? g->f32 : g->i32;
  int G = 1 << __builtin_popcount(R->warp_red);
  LLVMValueRef base = slot_base(g, SLOT_RED0 + k, (int)layout_numel(&R->S) * G * 4);
  LLVMValueRef lw = layout_lw(g, &R->S);
  for (int q = 0; q < R->ns; q++) {
    LLVMValueRef flat = elem_flat(g, &R->S, lw, q), r = NULL;
    for (int j = 0; j < G; j++) {
      LLVMValueRef idx = reduce_slot_index(g, R, flat, ci32(g, j));
      LLVMValueRef x = LLVMBuildLoad2(g->b, rt, smem_at(g, base, LLVMBuildMul(g->b, idx, ci32(g, 4), "")), "");
      r = r ? combine(g, R->in->op, e, r, x) : x;
    }
    R->acc[q] = r;
  }
  g->red_read[k] = true;
  g->dirty = true;
}

static void reduce_finish(Cg *g, const Reduction *R) {
  Tile *d = &g->tiles[R->in->dst];
  ElemType e = rtype(g, R->in->args[0])->elem;
  LLVMValueRef *out = vals_new(g, d->n);
  convert(g, &R->S, elem_is_float(e) ? TY_F32 : e, R->acc, d->lay, &(Map){MAP_IDENT, NULL}, out);
  put_tile(g, R->in->dst, out);
}

/* The reduction that can share REDUCE i's trip through shared memory (one barrier for both), or
 * -1: a later REDUCE across warps within REDUCE_PAIR_SPAN straight-line instructions, whose
 * register source nothing from i on writes and whose result nothing in between touches
 * (layernorm backward's two row sums). Its in-thread and lane steps then run at i too. */
enum { REDUCE_PAIR_SPAN = 16 };
static int reduce_partner(Cg *g, int i) {
  const TirFunc *f = g->f;
  for (int j = i + 1; j < f->ninsts && j <= i + REDUCE_PAIR_SPAN; j++) {
    const TirInst *u = &f->insts[j];
    TirOp op = u->op;
    if ((tir_op_info[op].flags & OPF_MARKER) || op == TIR_DOT || op == TIR_PIPE_WAIT || op == TIR_PIPE_RELEASE ||
        op == TIR_DOT_WAIT || op == TIR_WG_TURN || op == TIR_WG_PASS || op == TIR_HEAD_WAIT || op == TIR_HEAD_RELEASE)
      return -1;
    if (!tir_op_reduces(op))
      continue;
    const Tile *t = &g->tiles[u->args[0]];
    uint32_t lane_red, warp_red;
    if (t->shared || t->view_of >= 0 || !reduce_bits(t->lay, u->axis, &lane_red, &warp_red) || !warp_red)
      continue;
    bool ok = true;
    for (int k = i; k < j && ok; k++) {
      const TirInst *w = &f->insts[k];
      ok = w->dst != u->args[0] && (k == i || (w->dst != u->dst && !tir_inst_reads(w, u->dst)));
    }
    if (ok)
      return j;
  }
  return -1;
}

static void lower_reduce(Cg *g, const TirInst *in) {
  int i = (int)(in - g->f->insts);
  if (g->red_pair[i]) { /* its partner lowered it */
    reduce_finish(g, g->red_pair[i]);
    return;
  }
  Reduction R;
  if (!reduce_local(g, in, &R))
    return;
  if (R.warp_red) {
    int j = env_off("TILEC_REDUCE_PAIRS") ? -1 : reduce_partner(g, i), k = g->red_next;
    Reduction *Q = NULL;
    if (j >= 0) {
      Q = arena_alloc(g->f->arena, sizeof *Q);
      if (!reduce_local(g, &g->f->insts[j], Q))
        return;
    } else {
      g->red_next ^= 1;
    }
    if (g->red_read[k] || (Q && g->red_read[k ^ 1]))
      barrier(g);
    reduce_warps_write(g, &R, k);
    if (Q)
      reduce_warps_write(g, Q, k ^ 1);
    barrier(g);
    reduce_warps_read(g, &R, k);
    if (Q) {
      reduce_warps_read(g, Q, k ^ 1);
      g->red_pair[j] = Q;
    }
  }
  reduce_finish(g, &R);
}

/* ------------------------------------------------------------- DOT */

static SmemView operand_view(Cg *g, int r, int slot, bool *staged) {
  Tile *t = &g->tiles[r];
  ElemType e = rtype(g, r)->elem;
  if (t->view_of >= 0) {
    Tile *s = &g->tiles[t->view_of];
    return (SmemView){tile_base(g, s), e, s->pitch, true};
  }
  if (t->shared)
    return (SmemView){tile_base(g, t), e, t->pitch, false};
  /* A register operand is staged in a scratch slot. */
  int pitch = padded_pitch(t->lay, e);
  LLVMValueRef base = slot_base(g, slot, buf_bytes(t->lay, e, pitch));
  LLVMValueRef *v = vals_new(g, t->n);
  get_tile(g, r, v);
  if (g->dirty)
    barrier(g);
  buf_write(g, base, t->lay, e, pitch, v);
  *staged = true;
  return (SmemView){base, e, pitch, false};
}

static LLVMValueRef view_load(Cg *g, const SmemView *v, LLVMValueRef i, LLVMValueRef j) {
  LLVMValueRef row = v->trans ? j : i, col = v->trans ? i : j;
  LLVMValueRef idx = LLVMBuildAdd(g->b, LLVMBuildMul(g->b, row, ci32(g, v->pitch), ""), col, "");
  LLVMValueRef p = smem_at(g, v->base, LLVMBuildMul(g->b, idx, ci32(g, elem_bytes(v->elem)), ""));
  return from_mem(g, v->elem, LLVMBuildLoad2(g->b, mem_type(g, v->elem), p, ""));
}

/* A DOT operand for the tensor-core path: shared memory in place (ldmatrix), or registers
 * converted to the fragment layout (free for an accumulator turned into operand A). */
static void mma_operand(Cg *g, int r, const Layout *frag, NvMmaOperand *op) {
  Tile *t = &g->tiles[r];
  if (t->view_of >= 0 || t->shared) {
    Tile *s = t->view_of >= 0 ? &g->tiles[t->view_of] : t;
    *op = (NvMmaOperand){tile_base(g, s), s->pitch, t->view_of >= 0, NULL};
    return;
  }
  op->regs = vals_new(g, layout_nregs(frag));
  get_tile_as(g, r, frag, op->regs);
}

/* Tensor cores (lower_nvptx_mma.c) when the layout pass gave the result the mma layout. */
static bool lower_dot_mma(Cg *g, const TirInst *in) {
  int wm, wn;
  Tile *d = &g->tiles[in->dst];
  if (!layout_dot_uses_mma(g->f, in, &wm, &wn))
    return false;
  Layout acc = layout_mma_acc(d->lay->shape[0], d->lay->shape[1], wm, wn);
  if (!layout_equal(d->lay, &acc))
    return false;
  const TileType *ta = rtype(g, in->args[0]);
  NvMmaDot md = {.ctx = g->ctx, .mod = g->mod, .b = g->b, .tid = g->tid, .bf16 = ta->elem == TY_BF16,
                 .M = acc.shape[0], .N = acc.shape[1], .Kpad = layout_pow2_ceil(ta->dims[1]),
                 .K = ta->dims[1], .wm = wm, .wn = wn};
  md.c = vals_new(g, d->n);
  get_tile_as(g, in->args[2], d->lay, md.c);
  Layout la = layout_mma_operand_a(md.M, md.Kpad, wm, wn), lb = layout_mma_operand_b(md.Kpad, md.N, wm, wn);
  mma_operand(g, in->args[0], &la, &md.a);
  mma_operand(g, in->args[1], &lb, &md.bop);
  const char *missing = nvmma_emit_dot(&md);
  if (missing) {
    cg_error(g, "internal error: tensor-core lowering: %s", missing);
    return true;
  }
  g->dirty = true;
  put_tile(g, in->dst, md.c);
  return true;
}

/* This thread's warpgroup (tid / 128) for a DOT over nwg warpgroups. With several, through a
 * shuffle from lane 0: ptxas then proves it warp-uniform and builds the A descriptors derived
 * from it in uniform registers (one UIADD3.64 a k16 step instead of a 64-bit add in vector
 * registers and two R2UR moves before each wgmma; CUTLASS's canonical_warp_group_idx does the
 * same). TILEC_WG_UNIFORM=0: the plain shift (the A/B). */
static LLVMValueRef dot_warpgroup(Cg *g, int nwg) {
  LLVMValueRef wg = LLVMBuildLShr(g->b, g->tid, ci32(g, 7), "wg");
  if (nwg == 1 || env_off("TILEC_WG_UNIFORM"))
    return wg;
  LLVMValueRef a[4] = {ci32(g, -1), wg, ci32(g, 0), ci32(g, 0x1f)};
  return call_intrin(g, "llvm.nvvm.shfl.sync.idx.i32", NULL, 0, a, 4);
}

/* wgmma (lower_nvptx_wgmma.c) in a kernel whose DOTs all qualify (layout_kernel_uses_wgmma). */
static bool lower_dot_wgmma(Cg *g, const TirInst *in) {
  int wgm, wgn;
  if (!g->wgmma)
    return false;
  Tile *d = &g->tiles[in->dst];
  const TileType *ta = rtype(g, in->args[0]);
  Layout acc = layout_wgmma_acc(d->lay->shape[0], d->lay->shape[1], 1, 1);
  if (layout_dot_wgmma_tiling(g->f, in, &wgm, &wgn))
    acc = layout_wgmma_acc(d->lay->shape[0], d->lay->shape[1], wgm, wgn);
  Tile *a = &g->tiles[in->args[0]], *b = &g->tiles[in->args[1]];
  /* A: a shared tile, the view of a swizzled one (layout_trans_a_in_place), or registers */
  Tile *as = a->view_of >= 0 && g->tiles[a->view_of].swz ? &g->tiles[a->view_of] : a;
  Tile *bs = b->view_of >= 0 ? &g->tiles[b->view_of] : b;
  if (!layout_equal(d->lay, &acc) || !bs->swz || (as->shared && !as->swz)) {
    cg_error(g, "internal error: wgmma operands or accumulator layout");
    return true;
  }
  NvWgmmaDot wd = {.ctx = g->ctx, .mod = g->mod, .b = g->b, .bf16 = ta->elem == TY_BF16,
                   .M = acc.shape[0], .N = acc.shape[1], .Kpad = layout_pow2_ceil(ta->dims[1]), .K = ta->dims[1],
                   .wgm = wgm, .wgn = wgn, .Nissue = layout_dot_wgmma_n(g->f, in, wgn),
                   .zero_acc = tir_is_zero_tile(g->f, in->args[2]),
                   .k_steps = in->k_steps};
  wd.c = vals_new(g, d->n);
  get_tile_as(g, in->args[2], d->lay, wd.c);
  g->stage_ahead = in->stage;
  if (as->shared) { /* [M, K] in place, K-major; the view of a [K, M] tile, MN-major */
    wd.a = (NvWgmmaOperand){tile_base(g, as), as->swz, a->view_of < 0, NULL};
  } else {
    Layout la = layout_wgmma_operand_a(wd.M, wd.Kpad, wgm, wgn);
    wd.a.regs = vals_new(g, layout_nregs(&la));
    get_tile_as(g, in->args[0], &la, wd.a.regs);
  }
  wd.bop = (NvWgmmaOperand){tile_base(g, bs), bs->swz, b->view_of >= 0, NULL};
  g->stage_ahead = 0;
  /* The overlapped DOT of the innermost loop (plan_overlap): its group stays in flight; the
   * loop's exit drains it (lower_marker, ENDFOR). */
  const Nest *ns = g->depth > 0 ? &g->nest[g->depth - 1] : NULL;
  if (in->imm == 1) /* async (a rotated loop): a DOT_WAIT retires it */
    wd.in_flight = 2;
  else if (ns && ns->op == TIR_FOR && ns->pipe && ns->pipe->tp->overlap_dot == (int)(in - g->f->insts))
    wd.in_flight = 1;
  wd.wg = dot_warpgroup(g, wgm * wgn);
  const char *err = nvwgmma_emit_dot(&wd);
  if (err) {
    cg_error(g, "internal error: wgmma lowering: %s", err);
    return true;
  }
  g->dirty = true;
  put_tile(g, in->dst, wd.c);
  return true;
}

/* Turns (sched->turns warpgroups, tir_schedule.c): warpgroup w's turn is named barrier
 * TURN_BARRIER + w, completed by w's bar.sync and the previous warpgroup's bar.arrive. */
enum { TURN_BARRIER = 3 }; /* after 0 (the block) and 1, 2 (the consumer groups: barrier()) */

static void asm_call_void(Cg *g, const char *text, const char *cons, LLVMValueRef *args, int n);

static LLVMValueRef turn_barrier(Cg *g, LLVMValueRef w) {
  return LLVMBuildAdd(g->b, w, ci32(g, TURN_BARRIER), "");
}

static void turn_arrive(Cg *g, LLVMValueRef w) {
  LLVMValueRef a[2] = {turn_barrier(g, w), ci32(g, 2 * 128)};
  asm_call_void(g, "bar.arrive $0, $1;", "r,r,~{memory}", a, 2);
}

/* WG_TURN: wait until the previous warpgroup passed; WG_PASS: pass to the next one. */
static void lower_turn(Cg *g, const TirInst *in) {
  LLVMValueRef w = LLVMBuildLShr(g->b, g->tid, ci32(g, 7), "wg");
  if (in->op == TIR_WG_TURN) {
    LLVMValueRef a[2] = {turn_barrier(g, w), ci32(g, 2 * 128)};
    asm_call_void(g, "bar.sync $0, $1;", "r,r,~{memory}", a, 2);
    return;
  }
  LLVMValueRef next = LLVMBuildAdd(g->b, w, ci32(g, 1), "");
  LLVMValueRef wrap = LLVMBuildICmp(g->b, LLVMIntEQ, next, ci32(g, g->sched->turns), "");
  turn_arrive(g, LLVMBuildSelect(g->b, wrap, ci32(g, 0), next, ""));
}

/* wgmma.wait_group imm; the register's values (an async DOT's result) pinned after it. */
static void lower_dot_wait(Cg *g, const TirInst *in) {
  int r = in->args[0];
  LLVMValueRef *v = vals_new(g, g->tiles[r].n);
  get_tile(g, r, v);
  nvwgmma_wait(g->ctx, g->b, (int)in->imm, v, g->tiles[r].n);
  store_regs(g, r, v);
}

static void lower_dot(Cg *g, const TirInst *in) {
  if (lower_dot_wgmma(g, in) || lower_dot_mma(g, in))
    return;
  int dst = in->dst;
  Tile *d = &g->tiles[dst];
  const Layout *L = d->lay;
  int n = d->n, K = rtype(g, in->args[0])->dims[1];
  LLVMValueRef *c = vals_new(g, n);
  get_tile_as(g, in->args[2], L, c);
  bool staged = false;
  SmemView va = operand_view(g, in->args[0], SLOT_A, &staged);
  SmemView vb = operand_view(g, in->args[1], SLOT_B, &staged);
  if (staged)
    barrier(g);
  /* acc[n] lives in an alloca across the k loop. */
  LLVMValueRef acc = entry_alloca(g, g->f32, n);
  for (int k = 0; k < n; k++) {
    LLVMValueRef idx = ci32(g, k);
    LLVMBuildStore(g->b, c[k], LLVMBuildInBoundsGEP2(g->b, g->f32, acc, &idx, 1, ""));
  }
  LLVMValueRef kv = entry_alloca(g, g->i32, 1);
  LLVMBuildStore(g->b, ci32(g, 0), kv);
  LLVMBasicBlockRef head = new_bb(g, "dot"), body = new_bb(g, "dot.body"), exit = new_bb(g, "dot.end");
  LLVMBuildBr(g->b, head);
  LLVMPositionBuilderAtEnd(g->b, head);
  LLVMValueRef k = LLVMBuildLoad2(g->b, g->i32, kv, "k");
  LLVMBuildCondBr(g->b, LLVMBuildICmp(g->b, LLVMIntSLT, k, ci32(g, K), ""), body, exit);
  LLVMPositionBuilderAtEnd(g->b, body);
  LLVMValueRef lw = layout_lw(g, L);
  for (int r = 0; r < n; r++) {
    LLVMValueRef m = elem_dim(g, L, lw, r, 0), j = elem_dim(g, L, lw, r, 1);
    LLVMValueRef x = view_load(g, &va, m, k), y = view_load(g, &vb, k, j);
    LLVMValueRef idx = ci32(g, r);
    LLVMValueRef p = LLVMBuildInBoundsGEP2(g->b, g->f32, acc, &idx, 1, "");
    LLVMValueRef args[3] = {x, y, LLVMBuildLoad2(g->b, g->f32, p, "")};
    LLVMTypeRef t = g->f32;
    LLVMBuildStore(g->b, call_intrin(g, "llvm.fma", &t, 1, args, 3), p);
  }
  LLVMBuildStore(g->b, LLVMBuildAdd(g->b, k, ci32(g, 1), ""), kv);
  LLVMBuildBr(g->b, head);
  LLVMPositionBuilderAtEnd(g->b, exit);
  g->dirty = true;
  LLVMValueRef *out = vals_new(g, n);
  for (int r = 0; r < n; r++) {
    LLVMValueRef idx = ci32(g, r);
    out[r] = LLVMBuildLoad2(g->b, g->f32, LLVMBuildInBoundsGEP2(g->b, g->f32, acc, &idx, 1, ""), "");
  }
  put_tile(g, dst, out);
}

/* ------------------------------------------------------ LOAD / STORE */

typedef struct Access {
  const TirArg *arg;
  LLVMValueRef start[TILE_MAX_RANK]; /* i32 */
  int tile_dim[TILE_MAX_RANK];       /* tensor dim -> tile dim, -1 for a scalar index */
  LLVMValueRef base;                 /* i64 element offset of the scalar-indexed part */
  LLVMValueRef scalar_ok;            /* i1: scalar indices in bounds */
} Access;

static LLVMValueRef arg_dim(Cg *g, const TirArg *a, int d) { return g->dimv[a->dims[d]]; }

static LLVMValueRef in_range(Cg *g, LLVMValueRef idx, LLVMValueRef size) {
  return LLVMBuildICmp(g->b, LLVMIntULT, idx, size, "");
}

static void access_init(Cg *g, const TirInst *in, Access *ac) {
  ac->arg = &g->f->args[in->arg_index];
  ac->base = ci64(g, 0);
  ac->scalar_ok = LLVMConstInt(g->i1, 1, 0);
  int j = 0;
  for (int d = 0; d < ac->arg->rank; d++) {
    LLVMValueRef s = NULL;
    LLVMValueRef *sv = &s;
    get_tile(g, in->index[d].start, sv);
    ac->start[d] = s;
    ac->tile_dim[d] = in->index[d].is_range ? j++ : -1;
    if (!in->index[d].is_range) {
      ac->scalar_ok = LLVMBuildAnd(g->b, ac->scalar_ok, in_range(g, s, arg_dim(g, ac->arg, d)), "");
      LLVMValueRef off = LLVMBuildMul(g->b, LLVMBuildSExt(g->b, s, g->i64, ""), g->tensor_stride[in->arg_index][d], "");
      ac->base = LLVMBuildAdd(g->b, ac->base, off, "");
    }
  }
}

/* Element offset and in-bounds predicate of tile element r (run: elements r..r+len-1 along the
 * last dim all in bounds); with col, the last dim is left out of *ok and *col is the element's
 * index along it (a shifted copy's row, which bounds its bytes itself). */
static void access_at(Cg *g, const TirInst *in, const Access *ac, const TileType *tt, const Layout *L,
                      LLVMValueRef lw, int r, int len, LLVMValueRef *off, LLVMValueRef *ok, LLVMValueRef *col) {
  *off = ac->base;
  *ok = ac->scalar_ok;
  for (int d = 0; d < ac->arg->rank; d++) {
    int j = ac->tile_dim[d];
    if (j < 0)
      continue;
    LLVMValueRef t = elem_dim(g, L, lw, r, j);
    bool last = j == tt->rank - 1;
    int extra = last ? len - 1 : 0;
    if (last && col) {
      *col = LLVMBuildAdd(g->b, ac->start[d], t, "");
      *off = LLVMBuildAdd(g->b, *off, LLVMBuildMul(g->b, LLVMBuildSExt(g->b, *col, g->i64, ""), g->tensor_stride[in->arg_index][d], ""), "");
      continue;
    }
    /* Within the logical tile, and start + t (.. + extra) within the tensor. */
    if (tt->dims[j] < L->shape[j] || extra)
      *ok = LLVMBuildAnd(g->b, *ok, in_range(g, LLVMBuildAdd(g->b, t, ci32(g, extra), ""), ci32(g, tt->dims[j])), "");
    LLVMValueRef idx = LLVMBuildAdd(g->b, ac->start[d], t, "");
    *ok = LLVMBuildAnd(g->b, *ok, in_range(g, idx, arg_dim(g, ac->arg, d)), "");
    if (extra)
      *ok = LLVMBuildAnd(g->b, *ok, in_range(g, LLVMBuildAdd(g->b, idx, ci32(g, extra), ""), arg_dim(g, ac->arg, d)), "");
    *off = LLVMBuildAdd(g->b, *off, LLVMBuildMul(g->b, LLVMBuildSExt(g->b, idx, g->i64, ""), g->tensor_stride[in->arg_index][d], ""), "");
  }
}

static void access_elem(Cg *g, const TirInst *in, const Access *ac, const TileType *tt, const Layout *L,
                        LLVMValueRef lw, int r, int len, LLVMValueRef *off, LLVMValueRef *ok) {
  access_at(g, in, ac, tt, L, lw, r, len, off, ok, NULL);
}

static LLVMValueRef gaddr(Cg *g, int arg, ElemType e, LLVMValueRef off) {
  return LLVMBuildInBoundsGEP2(g->b, mem_type(g, e), g->tensor_ptr[arg], &off, 1, "");
}

/* Vector chunk for a global access: the tile's last dim must be the tensor's last dim. */
static int global_chunk(const TirInst *in, const TirArg *a, const Layout *L, ElemType e) {
  if (!in->index[a->rank - 1].is_range || e == TY_BOOL)
    return 1;
  return layout_vec_chunk(L, e);
}


/* pred ? (fast block) : (slow block); returns {fast, slow, join} blocks, positioned at fast. */
static void split3(Cg *g, LLVMValueRef pred, LLVMBasicBlockRef bb[3]) {
  bb[0] = new_bb(g, "vec");
  bb[1] = new_bb(g, "scalar");
  bb[2] = new_bb(g, "join");
  LLVMBuildCondBr(g->b, pred, bb[0], bb[1]);
  LLVMPositionBuilderAtEnd(g->b, bb[0]);
}

static LLVMValueRef aligned(Cg *g, LLVMValueRef p, int bytes) {
  LLVMValueRef i = LLVMBuildPtrToInt(g->b, p, g->i64, "");
  return LLVMBuildICmp(g->b, LLVMIntEQ, LLVMBuildAnd(g->b, i, ci64(g, bytes - 1), ""), ci64(g, 0), "");
}

/* "{$first, ..., $first+words-1}" (or "$first" for one word). */
static void asm_regs(char *buf, size_t cap, int first, int words) {
  if (words == 1) {
    snprintf(buf, cap, "$%d", first);
    return;
  }
  size_t k = (size_t)snprintf(buf, cap, "{");
  for (int w = 0; w < words && k < cap; w++)
    k += (size_t)snprintf(buf + k, cap - k, "%s$%d", w ? ", " : "", first + w);
  snprintf(buf + k, cap - k, "}");
}

static const char *vec_suffix(int words) { return words == 4 ? ".v4" : words == 2 ? ".v2" : ""; }

/* A 4/8/16-byte global load as inline PTX. A plain LLVM vector load whose elements are used one
 * by one gets scalarized by the optimizer; this keeps ld.global.v4.b32. Side effects on (and no
 * memory attributes): it stays ordered with the kernel's own stores (and the other loads). */
static void vec_load_words(Cg *g, LLVMValueRef p, int words, LLVMValueRef *out) {
  char regs[48], text[96];
  static const char *cons[5] = {NULL, "=r,l", "=r,=r,l", NULL, "=r,=r,=r,=r,l"};
  asm_regs(regs, sizeof regs, 0, words);
  snprintf(text, sizeof text, "ld.global%s.b32 %s, [$%d];", vec_suffix(words), regs, words);
  LLVMTypeRef wt[4] = {g->i32, g->i32, g->i32, g->i32};
  LLVMTypeRef ret = words == 1 ? g->i32 : LLVMStructTypeInContext(g->ctx, wt, (unsigned)words, 0);
  LLVMTypeRef ft = LLVMFunctionType(ret, &g->i64, 1, 0);
  LLVMValueRef fn = LLVMGetInlineAsm(ft, text, strlen(text), (char *)cons[words], strlen(cons[words]), 1, 0,
                                     LLVMInlineAsmDialectATT, 0);
  LLVMValueRef addr = LLVMBuildPtrToInt(g->b, p, g->i64, "");
  LLVMValueRef r = LLVMBuildCall2(g->b, ft, fn, &addr, 1, "");
  for (int w = 0; w < words; w++)
    out[w] = words == 1 ? r : LLVMBuildExtractValue(g->b, r, (unsigned)w, "");
}

/* Memory words -> register values (f16/bf16 two per word). */
static void words_to_elems(Cg *g, ElemType e, int words, LLVMValueRef *w, LLVMValueRef *out) {
  int k = 0;
  for (int i = 0; i < words; i++) {
    if (elem_bytes(e) == 2) {
      LLVMValueRef v2 = LLVMBuildBitCast(g->b, w[i], LLVMVectorType(mem_type(g, e), 2), "");
      for (int j = 0; j < 2; j++)
        out[k++] = from_mem(g, e, LLVMBuildExtractElement(g->b, v2, ci32(g, j), ""));
    } else {
      out[k++] = e == TY_F32 ? LLVMBuildBitCast(g->b, w[i], g->f32, "") : w[i];
    }
  }
}

/* The vector chunks of a global access (n / ch of them, `ch` elements each): the address of each,
 * whether it is in bounds and aligned, and whether all of them are. One test of `all` per access
 * picks the fast path, where the loads are issued back to back before any is used (every chunk's
 * bytes in flight at once); a thread at a ragged edge takes the chunk-by-chunk path. */
typedef struct Chunks {
  int count;
  LLVMValueRef *p, *ok, all;
} Chunks;

static LLVMValueRef rows_aligned_to(Cg *g, const TirInst *in, const Access *ac, int eb, int bytes);

/* In an entry whose contract puts every tensor and its strides (but the last) on 16 bytes
 * (tir_aligned_args), a chunk is aligned when its row is: a chunk's column in the tile is a
 * multiple of the chunk (layout_vec_width), so only the tile's first column and scalar indices
 * remain to test, which the optimizer folds where they are constant. Tested per chunk elsewhere
 * (LLVM's known-bits analysis stops six operations deep, short of the layout's column arithmetic
 * under a row offset, so it cannot drop those tests itself). */
static Chunks chunks_plan(Cg *g, const TirInst *in, const Access *ac, const TileType *tt, const Layout *L,
                          LLVMValueRef lw, int n, int ch) {
  ElemType e = tt->elem;
  Chunks c = {n / ch, vals_new(g, n / ch), vals_new(g, n / ch), LLVMConstInt(g->i1, 1, 0)};
  int bytes = ch * elem_bytes(e);
  LLVMValueRef rows_ok = tir_aligned_args(g->f) && bytes <= 16 ? rows_aligned_to(g, in, ac, elem_bytes(e), bytes) : NULL;
  for (int k = 0; k < c.count; k++) {
    LLVMValueRef off, ok;
    access_elem(g, in, ac, tt, L, lw, k * ch, ch, &off, &ok);
    c.p[k] = gaddr(g, in->arg_index, e, off);
    c.ok[k] = LLVMBuildAnd(g->b, ok, rows_ok ? rows_ok : aligned(g, c.p[k], bytes), "");
    c.all = LLVMBuildAnd(g->b, c.all, c.ok[k], "");
  }
  return c;
}

static LLVMValueRef const_mem(Cg *g, ElemType e, double v) {
  v = round_to_elem(e, v);
  if (e == TY_BOOL)
    return LLVMConstInt(g->i8, v != 0, 0);
  if (e == TY_I32)
    return ci32(g, (int64_t)v);
  return LLVMConstReal(mem_type(g, e), v);
}

/* The masked scalar accesses of elements r .. r+len-1 (ragged edges, unaligned views). */
/* One element from global address src to shared address dst when ok, else fill (memory type). */
static void copy_elem_masked(Cg *g, ElemType e, LLVMValueRef ok, LLVMValueRef src, LLVMValueRef dst, LLVMValueRef fill) {
  LLVMTypeRef mt = mem_type(g, e);
  LLVMBasicBlockRef from = LLVMGetInsertBlock(g->b), then = new_bb(g, "ld"), join = new_bb(g, "ld.j");
  LLVMBuildCondBr(g->b, ok, then, join);
  LLVMPositionBuilderAtEnd(g->b, then);
  LLVMValueRef v = LLVMBuildLoad2(g->b, mt, src, "");
  LLVMSetAlignment(v, (unsigned)elem_bytes(e));
  LLVMBuildBr(g->b, join);
  LLVMPositionBuilderAtEnd(g->b, join);
  LLVMValueRef phi = LLVMBuildPhi(g->b, mt, "");
  LLVMValueRef vals[2] = {fill, v};
  LLVMBasicBlockRef blocks[2] = {from, then};
  LLVMAddIncoming(phi, vals, blocks, 2);
  LLVMSetAlignment(LLVMBuildStore(g->b, phi, dst), (unsigned)elem_bytes(e));
}

static void load_shared_scalars(Cg *g, const TirInst *in, const Access *ac, const TileType *tt, const Layout *L,
                                LLVMValueRef lw, int r, int len, LLVMValueRef sp, LLVMValueRef fill) {
  ElemType e = tt->elem;
  for (int j = 0; j < len; j++) {
    LLVMValueRef off, ok;
    access_elem(g, in, ac, tt, L, lw, r + j, 1, &off, &ok);
    copy_elem_masked(g, e, ok, gaddr(g, in->arg_index, e, off), smem_at(g, sp, ci32(g, j * elem_bytes(e))), fill);
  }
}

/* Whether element r of shared tile t (its row) lies in the rows its storage has, or NULL when
 * it has them all: a tile stored in fewer rows than its layout's (SmemLayout.rows, not a power
 * of two) gets no writes of fill values to the padding rows, which lie past its buffer; nor does
 * a rank-1 tile stored in fewer elements (Tile.stored_cols) past them. */
static LLVMValueRef stored_row(Cg *g, const Tile *t, LLVMValueRef lw, int r) {
  if (t->stored_cols)
    return LLVMBuildICmp(g->b, LLVMIntULT, elem_dim(g, t->lay, lw, r, 0), ci32(g, t->stored_cols), "");
  if (!t->swz || t->swz->rows >= t->lay->shape[0])
    return NULL;
  return LLVMBuildICmp(g->b, LLVMIntULT, elem_dim(g, t->lay, lw, r, 0), ci32(g, t->swz->rows), "");
}

static void store_words_shared(Cg *g, LLVMValueRef *w, int words, LLVMValueRef sp) {
  LLVMValueRef vec = LLVMGetUndef(LLVMVectorType(g->i32, (unsigned)words));
  for (int j = 0; j < words; j++)
    vec = LLVMBuildInsertElement(g->b, vec, w[j], ci32(g, j), "");
  LLVMSetAlignment(LLVMBuildStore(g->b, words == 1 ? w[0] : vec, sp), (unsigned)(4 * words));
}

/* LOAD into a shared tile: each chunk goes from global memory straight to shared memory in its
 * memory type, so the tile never sits in registers (a [64, 128] f16 tile would take 64 of them).
 * When every chunk of the thread is in bounds, all global loads are issued before the first
 * shared store. */
static void lower_load_shared(Cg *g, const TirInst *in) {
  int dst = in->dst;
  Tile *t = &g->tiles[dst];
  const TileType *tt = rtype(g, dst);
  const Layout *L = t->lay;
  ElemType e = tt->elem;
  int n = t->n, eb = elem_bytes(e), ch = global_chunk(in, &g->f->args[in->arg_index], L, e);
  int nch = n / ch, words = ch * eb / 4;
  Access ac;
  access_init(g, in, &ac);
  LLVMValueRef lw = layout_lw(g, L), base = tile_base(g, t), fill = const_mem(g, e, in->imm);
  if (g->dirty)
    barrier(g);
  LLVMBasicBlockRef wj = begin_if(g, layout_writer(g, L));
  LLVMValueRef *sp = vals_new(g, nch);
  for (int k = 0; k < nch; k++)
    sp[k] = smem_at(g, base, tile_byte_off(g, t, lw, k * ch));
  if (ch == 1) {
    for (int k = 0; k < nch; k++) {
      LLVMBasicBlockRef sj = begin_if(g, stored_row(g, t, lw, k));
      load_shared_scalars(g, in, &ac, tt, L, lw, k, 1, sp[k], fill);
      end_if(g, sj);
    }
  } else {
    Chunks c = chunks_plan(g, in, &ac, tt, L, lw, n, ch);
    LLVMBasicBlockRef bb[3];
    LLVMValueRef *w = vals_new(g, nch * words);
    split3(g, c.all, bb);
    for (int k = 0; k < nch; k++)
      vec_load_words(g, c.p[k], words, w + k * words);
    for (int k = 0; k < nch; k++)
      store_words_shared(g, w + k * words, words, sp[k]);
    LLVMBuildBr(g->b, bb[2]);
    LLVMPositionBuilderAtEnd(g->b, bb[1]);
    for (int k = 0; k < nch; k++) {
      LLVMBasicBlockRef cb[3];
      split3(g, c.ok[k], cb);
      vec_load_words(g, c.p[k], words, w);
      store_words_shared(g, w, words, sp[k]);
      LLVMBuildBr(g->b, cb[2]);
      LLVMPositionBuilderAtEnd(g->b, cb[1]);
      LLVMBasicBlockRef sj = begin_if(g, stored_row(g, t, lw, k * ch));
      load_shared_scalars(g, in, &ac, tt, L, lw, k * ch, ch, sp[k], fill);
      end_if(g, sj);
      LLVMBuildBr(g->b, cb[2]);
      LLVMPositionBuilderAtEnd(g->b, cb[2]);
    }
    LLVMBuildBr(g->b, bb[2]);
    LLVMPositionBuilderAtEnd(g->b, bb[2]);
  }
  end_if(g, wj);
  barrier(g);
}

/* -------------------------------------------- pipelined loads (cp.async)
 *
 * A pipelined loop (plan_pipes) with P stages runs as
 *   prologue: copies of iterations 0 .. P-2 into stages 0 .. P-2, one commit group each;
 *   each iteration: cp.async.wait_group P-2 (this thread's copies of this iteration landed),
 *     bar.sync (everyone's landed, and everyone finished reading the stage the previous iteration
 *     used, which the prefetch below refills), copies of iteration + P-1, commit, then the body
 *     reading stage `rslot`;
 *   exit: cp.async.wait_all.
 * With a wgmma overlap (plan_overlap) everything runs Pipe.ahead = P - 2 iterations ahead instead
 * of P - 1 (wait_group P-3), so the stage refilled is never the one the group still in flight reads.
 * A prefetch past the loop end copies nothing (its group is empty). Copies are 16-byte
 * cp.async.cg; a chunk wholly out of bounds with fill 0 is a zero-size copy (zero-filled); a
 * partly masked or unaligned chunk falls back to masked scalar loads and st.shared. */

/* .cg (L2 only) for the pipelined loads, which every block reads once; .ca (through L1) for
 * async_shared_load's, typically weights that every block of a SM reads. */
static void cp_async16(Cg *g, LLVMValueRef dst, LLVMValueRef src, LLVMValueRef src_size, bool l1) {
  LLVMValueRef args[3] = {dst, src, src_size};
  const char *name = l1 ? (src_size ? "llvm.nvvm.cp.async.ca.shared.global.16.s" : "llvm.nvvm.cp.async.ca.shared.global.16")
                        : (src_size ? "llvm.nvvm.cp.async.cg.shared.global.16.s" : "llvm.nvvm.cp.async.cg.shared.global.16");
  call_intrin(g, name, NULL, 0, args, src_size ? 3 : 2);
}

static void cp_async_commit(Cg *g) { intrin0(g, "llvm.nvvm.cp.async.commit.group"); }

static void cp_async_wait(Cg *g, int pending) {
  LLVMValueRef n = ci32(g, pending);
  call_intrin(g, "llvm.nvvm.cp.async.wait.group", NULL, 0, &n, 1);
}

/* The misalignment in elements (0 .. 16 / eb - 1) of element `off` of LOAD in's tensor. */
static LLVMValueRef elem_misalign(Cg *g, const TirInst *in, LLVMValueRef off, int eb) {
  LLVMValueRef p = LLVMBuildPtrToInt(g->b, g->tensor_ptr[in->arg_index], g->i64, "");
  LLVMValueRef e = LLVMBuildAdd(g->b, LLVMBuildLShr(g->b, p, ci64(g, eb == 2 ? 1 : 2), ""), off, "");
  return LLVMBuildTrunc(g->b, LLVMBuildAnd(g->b, e, ci64(g, 16 / eb - 1), ""), g->i32, "");
}

/* The element offset just past the last element of LOAD in's tensor (its extent in memory). */
static LLVMValueRef tensor_extent(Cg *g, const TirInst *in) {
  const TirArg *a = &g->f->args[in->arg_index];
  LLVMValueRef end = ci64(g, 1);
  for (int d = 0; d < a->rank; d++) {
    LLVMValueRef last = LLVMBuildSExt(g->b, LLVMBuildSub(g->b, arg_dim(g, a, d), ci32(g, 1), ""), g->i64, "");
    end = LLVMBuildAdd(g->b, end, LLVMBuildMul(g->b, last, g->tensor_stride[in->arg_index][d], ""), "");
  }
  return end;
}

/* What copy_granule needs of a shifted row. */
typedef struct Granule {
  LLVMValueRef row_ok;                /* i1: the row's other coordinates in bounds */
  LLVMValueRef start, ncols;          /* i32: the tile's first column in the tensor; the columns */
  LLVMValueRef extent;                /* i64: tensor_extent */
  LLVMValueRef fill;                  /* the LOAD's fill, in memory type */
  int dims, shape;                    /* the tile's last dim: logical, padded */
} Granule;

/* The Granule of LOAD or STORE in's tile (row_ok is per chunk: the caller's). */
static Granule granule_of(Cg *g, const Access *ac, const TileType *tt, const Layout *L) {
  int last = tt->rank - 1;
  Granule gr = {.ncols = arg_dim(g, ac->arg, ac->arg->rank - 1), .dims = tt->dims[last], .shape = L->shape[last]};
  for (int d = 0; d < ac->arg->rank; d++)
    if (ac->tile_dim[d] == last)
      gr.start = ac->start[d];
  return gr;
}

/* Whether tile columns lo .. hi - 1 of the granule's row are all the tile's and the tensor's. */
static LLVMValueRef granule_span_ok(Cg *g, const Granule *gr, LLVMValueRef lo, LLVMValueRef hi) {
  LLVMValueRef ok = LLVMBuildAnd(g->b, gr->row_ok, LLVMBuildICmp(g->b, LLVMIntSGE, lo, ci32(g, 0), ""), "");
  ok = LLVMBuildAnd(g->b, ok, LLVMBuildICmp(g->b, LLVMIntSLE, hi, ci32(g, gr->dims), ""), "");
  /* a window that starts left of the row (X[r, n0 - 8 : +BN]) has no element there */
  ok = LLVMBuildAnd(g->b, ok, LLVMBuildICmp(g->b, LLVMIntSGE, LLVMBuildAdd(g->b, gr->start, lo, ""), ci32(g, 0), ""), "");
  return LLVMBuildAnd(g->b, ok, LLVMBuildICmp(g->b, LLVMIntSLE, LLVMBuildAdd(g->b, gr->start, hi, ""), gr->ncols, ""), "");
}

/* Whether tile column tc of the granule's row is the tile's and the tensor's. */
static LLVMValueRef granule_elem_ok(Cg *g, const Granule *gr, LLVMValueRef tc) {
  LLVMValueRef ok = LLVMBuildAnd(g->b, gr->row_ok, in_range(g, tc, ci32(g, gr->dims)), "");
  return LLVMBuildAnd(g->b, ok, in_range(g, LLVMBuildAdd(g->b, gr->start, tc, ""), gr->ncols), "");
}

/* Whether the granule at tile columns tc0 .. tc0 + ch - 1 is one of the row's inner ones: all its
 * columns the tile's (and read) and the tensor's, in a row whose other coordinates are in bounds.
 * Then its 16 bytes lie inside the tensor too (strides are positive and the innermost is 1: the
 * runtime and the AOT launcher refuse others), so two unsigned compares decide what copy_granule's
 * general test decides with eight and two 64-bit ones; most granules of a long row are inner. */
static LLVMValueRef granule_inner(Cg *g, const Granule *gr, LLVMValueRef tc0, int ch) {
  int reach = (gr->dims < gr->shape ? gr->dims : gr->shape) - ch;
  if (reach < 0)
    return LLVMConstInt(g->i1, 0, 0);
  LLVMValueRef room = LLVMBuildSub(g->b, gr->ncols, ci32(g, ch), "");
  LLVMValueRef ok = LLVMBuildAnd(g->b, gr->row_ok, LLVMBuildICmp(g->b, LLVMIntSGE, room, ci32(g, 0), ""), "");
  ok = LLVMBuildAnd(g->b, ok, LLVMBuildICmp(g->b, LLVMIntULE, tc0, ci32(g, reach), ""), "");
  LLVMValueRef col = LLVMBuildAdd(g->b, gr->start, tc0, "");
  return LLVMBuildAnd(g->b, ok, LLVMBuildICmp(g->b, LLVMIntULE, col, room, ""), "");
}

/* One 16-byte granule of a shifted row (copy_shifted): global elements back .. back + ch - 1 (back
 * 16-byte aligned), tile columns tc0 .. tc0 + ch - 1, into dst. Positions no reader reaches (tile
 * columns outside [0, shape)) are left as they are; when every position a reader reaches holds a
 * valid element and the 16 bytes lie inside the tensor, one cp.async; else element by element,
 * the LOAD's fill where an element is out of bounds. Where `may_be_inner`, an inner granule
 * (granule_inner) takes the cp.async without the general test (TILEC_INNER_GRANULES=0: always the
 * general test); the granule after a row's last chunk never is one (it ends past the tile). */
static void copy_granule(Cg *g, const TirInst *in, const Granule *gr, LLVMValueRef dst, LLVMValueRef back,
                         LLVMValueRef tc0, bool may_be_inner, bool l1) {
  ElemType e = rtype(g, in->dst)->elem;
  int eb = elem_bytes(e), ch = 16 / eb;
  LLVMBasicBlockRef ib[3] = {NULL, NULL, NULL};
  if (may_be_inner && !env_off("TILEC_INNER_GRANULES")) {
    split3(g, granule_inner(g, gr, tc0, ch), ib);
    cp_async16(g, dst, gaddr(g, in->arg_index, e, back), NULL, l1);
    LLVMBuildBr(g->b, ib[2]);
    LLVMPositionBuilderAtEnd(g->b, ib[1]);
  }
  LLVMValueRef tc_end = LLVMBuildAdd(g->b, tc0, ci32(g, ch), "");
  LLVMValueRef lo = LLVMBuildSelect(g->b, LLVMBuildICmp(g->b, LLVMIntSLT, tc0, ci32(g, 0), ""), ci32(g, 0), tc0, "");
  LLVMValueRef hi = LLVMBuildSelect(g->b, LLVMBuildICmp(g->b, LLVMIntSGT, tc_end, ci32(g, gr->shape), ""),
                                    ci32(g, gr->shape), tc_end, "");
  LLVMBasicBlockRef any = begin_if(g, LLVMBuildICmp(g->b, LLVMIntSLT, lo, hi, ""));
  LLVMValueRef valid = granule_span_ok(g, gr, lo, hi);
  LLVMValueRef inside = LLVMBuildAnd(g->b, LLVMBuildICmp(g->b, LLVMIntSGE, back, ci64(g, 0), ""),
                                     LLVMBuildICmp(g->b, LLVMIntSLE, LLVMBuildAdd(g->b, back, ci64(g, ch), ""), gr->extent, ""), "");
  LLVMBasicBlockRef bb[3];
  split3(g, LLVMBuildAnd(g->b, valid, inside, ""), bb);
  cp_async16(g, dst, gaddr(g, in->arg_index, e, back), NULL, l1);
  LLVMBuildBr(g->b, bb[2]);
  LLVMPositionBuilderAtEnd(g->b, bb[1]);
  for (int p = 0; p < ch; p++) {
    LLVMValueRef tc = LLVMBuildAdd(g->b, tc0, ci32(g, p), "");
    LLVMBasicBlockRef rj = begin_if(g, in_range(g, tc, ci32(g, gr->shape))); /* a position a reader reaches */
    copy_elem_masked(g, e, granule_elem_ok(g, gr, tc), gaddr(g, in->arg_index, e, LLVMBuildAdd(g->b, back, ci64(g, p), "")),
                     smem_at(g, dst, ci32(g, p * eb)), gr->fill);
    end_if(g, rj);
  }
  LLVMBuildBr(g->b, bb[2]);
  LLVMPositionBuilderAtEnd(g->b, bb[2]);
  end_if(g, any);
  if (ib[2]) {
    LLVMBuildBr(g->b, ib[2]);
    LLVMPositionBuilderAtEnd(g->b, ib[2]);
  }
}

/* The copies of a shifted tile (Tile.shifted) where some chunk of the thread is misaligned or
 * out of bounds: each chunk from the 16-byte aligned address at or before it (the row's shift
 * elements earlier), and the row's last chunk also the granule after it, which holds the row's
 * last `shift` elements (copy_granule). */
static void copy_shifted(Cg *g, const TirInst *in, const Access *ac, const Tile *t, LLVMValueRef lw, LLVMValueRef *sp,
                         bool l1) {
  const TileType *tt = rtype(g, in->dst);
  const Layout *L = t->lay;
  int eb = elem_bytes(tt->elem), ch = 16 / eb, last = tt->rank - 1;
  Granule gr = granule_of(g, ac, tt, L);
  gr.extent = tensor_extent(g, in);
  gr.fill = const_mem(g, tt->elem, in->imm);
  if (t->stored_cols)
    gr.shape = t->stored_cols;
  /* One row (a rank-1 tile): every chunk starts on a multiple of ch columns (layout_vec_width), so
   * all share the row's shift; computed once, as LLVM does not see it through the layout's bits. */
  LLVMValueRef row_shift = NULL;
  if (tt->rank == 1)
    row_shift = elem_misalign(g, in, LLVMBuildAdd(g->b, ac->base, LLVMBuildSExt(g->b, gr.start, g->i64, ""), ""), eb);
  for (int k = 0; k < t->n / ch; k++) {
    LLVMBasicBlockRef sj = begin_if(g, stored_row(g, t, lw, k * ch));
    LLVMValueRef off, col;
    access_at(g, in, ac, tt, L, lw, k * ch, 1, &off, &gr.row_ok, &col);
    LLVMValueRef shift = row_shift ? row_shift : elem_misalign(g, in, off, eb);
    LLVMValueRef back = LLVMBuildSub(g->b, off, LLVMBuildZExt(g->b, shift, g->i64, ""), "");
    LLVMValueRef tcol = elem_dim(g, L, lw, k * ch, last), tc0 = LLVMBuildSub(g->b, tcol, shift, "");
    copy_granule(g, in, &gr, sp[k], back, tc0, true, l1);
    LLVMBasicBlockRef j = begin_if(g, LLVMBuildICmp(g->b, LLVMIntEQ, tcol, ci32(g, gr.shape - ch), ""));
    copy_granule(g, in, &gr, smem_at(g, sp[k], ci32(g, 16)), LLVMBuildAdd(g->b, back, ci64(g, ch), ""),
                 LLVMBuildAdd(g->b, tc0, ci32(g, ch), ""), false, l1);
    end_if(g, j);
    end_if(g, sj);
  }
}

/* The misalignment in elements of the row LOAD in copies (a rank-1 tile: one row). */
static LLVMValueRef row_misalign(Cg *g, const TirInst *in) {
  const TileType *tt = rtype(g, in->dst);
  Access ac;
  access_init(g, in, &ac);
  LLVMValueRef off, ok;
  access_elem(g, in, &ac, tt, g->tiles[in->dst].lay, ci32(g, 0), 0, 1, &off, &ok);
  return elem_misalign(g, in, off, elem_bytes(tt->elem));
}

/* Whether every row of LOAD in's tile starts on a `bytes` boundary: the tensor's address, the
 * row strides and the tile's first column (loop-invariant but for the column). */
static LLVMValueRef rows_aligned_to(Cg *g, const TirInst *in, const Access *ac, int eb, int bytes) {
  const TirArg *a = ac->arg;
  LLVMValueRef p = LLVMBuildPtrToInt(g->b, g->tensor_ptr[in->arg_index], g->i64, "");
  LLVMValueRef mis = LLVMBuildAnd(g->b, p, ci64(g, bytes - 1), "");
  mis = LLVMBuildOr(g->b, mis, LLVMBuildMul(g->b, LLVMBuildSExt(g->b, ac->start[a->rank - 1], g->i64, ""), ci64(g, eb), ""), "");
  mis = LLVMBuildOr(g->b, mis, LLVMBuildMul(g->b, ac->base, ci64(g, eb), ""), "");
  for (int d = 0; d < a->rank - 1; d++)
    if (ac->tile_dim[d] >= 0)
      mis = LLVMBuildOr(g->b, mis, LLVMBuildMul(g->b, g->tensor_stride[in->arg_index][d], ci64(g, eb), ""), "");
  return LLVMBuildICmp(g->b, LLVMIntEQ, LLVMBuildAnd(g->b, mis, ci64(g, bytes - 1), ""), ci64(g, 0), "");
}

static LLVMValueRef rows_aligned(Cg *g, const TirInst *in, const Access *ac, int eb) {
  return rows_aligned_to(g, in, ac, eb, 16);
}

/* The low word of (hi:lo) >> bits (bits < 32) in one shf (LLVM's fshr with a variable amount
 * became six instructions). */
static LLVMValueRef funnel_right(Cg *g, LLVMValueRef hi, LLVMValueRef lo, LLVMValueRef bits) {
  LLVMTypeRef pt[3] = {g->i32, g->i32, g->i32};
  LLVMTypeRef ft = LLVMFunctionType(g->i32, pt, 3, 0);
  static const char text[] = "shf.r.wrap.b32 $0, $1, $2, $3;", cons[] = "=r,r,r,r";
  LLVMValueRef fn = LLVMGetInlineAsm(ft, (char *)text, strlen(text), (char *)cons, strlen(cons), 0, 0,
                                     LLVMInlineAsmDialectATT, 0);
  LLVMValueRef args[3] = {lo, hi, bits};
  return LLVMBuildCall2(g->b, ft, fn, args, 3, "");
}

/* One chunk (16 bytes) of a shifted row, whose elements sit `shift` elements past their place
 * at element idx (16-byte aligned): inside the two aligned 16-byte words there, so two vector
 * loads, and each 32-bit word of the chunk is a funnel shift of a pair of neighbours picked by
 * shift's whole words. Read element by element instead, the warp's 2-byte reads 16 bytes apart
 * took four-way bank conflicts each (run t3: 19% of the warps' samples on them at 50257
 * columns). The 16 bytes past a row's last chunk are the room its shift spills into. */
static void shifted_chunk(Cg *g, LLVMValueRef base, LLVMValueRef idx, LLVMValueRef shift, ElemType e,
                          LLVMValueRef *out) {
  int eb = elem_bytes(e);
  LLVMValueRef byte = LLVMBuildMul(g->b, idx, ci32(g, eb), ""), w[8];
  LLVMTypeRef v4 = LLVMVectorType(g->i32, 4);
  for (int h = 0; h < 2; h++) {
    LLVMValueRef x = LLVMBuildLoad2(g->b, v4, smem_at(g, base, LLVMBuildAdd(g->b, byte, ci32(g, 16 * h), "")), "");
    LLVMSetAlignment(x, 16);
    for (int j = 0; j < 4; j++)
      w[4 * h + j] = LLVMBuildExtractElement(g->b, x, ci32(g, j), "");
  }
  LLVMValueRef sb = LLVMBuildMul(g->b, shift, ci32(g, eb), ""); /* bytes: 0 .. 15 */
  LLVMValueRef kw = LLVMBuildLShr(g->b, sb, ci32(g, 2), "");
  LLVMValueRef bits = LLVMBuildShl(g->b, LLVMBuildAnd(g->b, sb, ci32(g, 3), ""), ci32(g, 3), "");
  LLVMValueRef u[5], words[4];
  for (int i = 0; i < 5; i++) {
    u[i] = w[i];
    for (int c = 1; c < 4; c++)
      u[i] = LLVMBuildSelect(g->b, LLVMBuildICmp(g->b, LLVMIntEQ, kw, ci32(g, c), ""), w[i + c], u[i], "");
  }
  for (int i = 0; i < 4; i++)
    words[i] = funnel_right(g, u[i + 1], u[i], bits);
  words_to_elems(g, e, 4, words, out);
}

/* Reads of a shifted tile: row i's elements sit shift_i past their places (copy_shifted, which
 * also wrote the LOAD's fill where the bounds exclude an element). The plain reads when every
 * row of the tile is aligned (rows_aligned: no per-element arithmetic on that path). */
static void shifted_read(Cg *g, const Tile *t, ElemType e, LLVMValueRef *vals) {
  const TirInst *in = t->shifted;
  const TileType *tt = rtype(g, in->dst);
  const Layout *L = t->lay;
  int eb = elem_bytes(e), ch = 16 / eb, n = t->n;
  Access ac;
  access_init(g, in, &ac);
  LLVMValueRef lw = layout_lw(g, L), base = tile_base(g, t), off, ok;
  LLVMValueRef *v = vals_new(g, n), *w = vals_new(g, n);
  LLVMBasicBlockRef bb[3];
  split3(g, rows_aligned(g, in, &ac, eb), bb);
  buf_read(g, base, L, e, t->pitch, v);
  LLVMBasicBlockRef vec_end = LLVMGetInsertBlock(g->b);
  LLVMBuildBr(g->b, bb[2]);
  LLVMPositionBuilderAtEnd(g->b, bb[1]);
  for (int k = 0; k < n / ch; k++) {
    access_elem(g, in, &ac, tt, L, lw, k * ch, 1, &off, &ok);
    shifted_chunk(g, base, buf_index(g, L, lw, k * ch, t->pitch), elem_misalign(g, in, off, eb), e, w + k * ch);
  }
  LLVMBasicBlockRef scalar_end = LLVMGetInsertBlock(g->b);
  LLVMBuildBr(g->b, bb[2]);
  LLVMPositionBuilderAtEnd(g->b, bb[2]);
  for (int r = 0; r < n; r++) {
    vals[r] = LLVMBuildPhi(g->b, LLVMTypeOf(v[r]), "");
    LLVMValueRef in_vals[2] = {v[r], w[r]};
    LLVMBasicBlockRef in_bbs[2] = {vec_end, scalar_end};
    LLVMAddIncoming(vals[r], in_vals, in_bbs, 2);
  }
  g->dirty = true;
}

/* The cp.async copies of chunks k0 .. k1 - 1 (chunks_plan c, shared addresses sp) of LOAD in:
 * all at once when every chunk is in bounds, else chunk by chunk with the fill. */
static void copy_chunks(Cg *g, const TirInst *in, Access *ac, Tile *t, LLVMValueRef lw, LLVMValueRef *sp,
                        const Chunks *c, int k0, int k1, bool l1) {
  const TileType *tt = rtype(g, in->dst);
  const Layout *L = t->lay;
  ElemType e = tt->elem;
  int ch = 16 / elem_bytes(e);
  bool zero_fill = in->imm == 0 && !signbit(in->imm);
  LLVMValueRef fill = const_mem(g, e, in->imm);
  LLVMBasicBlockRef bb[3];
  split3(g, c->all, bb);
  for (int k = k0; k < k1; k++)
    cp_async16(g, sp[k], c->p[k], NULL, l1);
  LLVMBuildBr(g->b, bb[2]);
  LLVMPositionBuilderAtEnd(g->b, bb[1]);
  if (shifted_here(g, t))
    copy_shifted(g, in, ac, t, lw, sp, l1);
  for (int k = k0; k < (shifted_here(g, t) ? k0 : k1); k++) {
    LLVMBasicBlockRef cb[3];
    split3(g, c->ok[k], cb);
    cp_async16(g, sp[k], c->p[k], NULL, l1);
    LLVMBuildBr(g->b, cb[2]);
    LLVMPositionBuilderAtEnd(g->b, cb[1]);
    LLVMBasicBlockRef sj = begin_if(g, stored_row(g, t, lw, k * ch));
    if (zero_fill) {
      /* The first element out of bounds: so is the whole chunk (indices grow along it). */
      LLVMValueRef off0, ok0;
      access_elem(g, in, ac, tt, L, lw, k * ch, 1, &off0, &ok0);
      LLVMBasicBlockRef db[3];
      split3(g, ok0, db);
      load_shared_scalars(g, in, ac, tt, L, lw, k * ch, ch, sp[k], fill);
      LLVMBuildBr(g->b, db[2]);
      LLVMPositionBuilderAtEnd(g->b, db[1]);
      cp_async16(g, sp[k], g->tensor_ptr[in->arg_index], ci32(g, 0), l1);
      LLVMBuildBr(g->b, db[2]);
      LLVMPositionBuilderAtEnd(g->b, db[2]);
    } else {
      load_shared_scalars(g, in, ac, tt, L, lw, k * ch, ch, sp[k], fill);
    }
    end_if(g, sj);
    LLVMBuildBr(g->b, cb[2]);
    LLVMPositionBuilderAtEnd(g->b, cb[2]);
  }
  LLVMBuildBr(g->b, bb[2]);
  LLVMPositionBuilderAtEnd(g->b, bb[2]);
}

/* The copies of one LOAD into stage `slot` of its tile, committed in `parts` groups of
 * consecutive chunks (every thread commits, writer or not, so that the groups count the same
 * everywhere); parts 0: one group, left to the caller to commit (a pipe's stage). */
static void async_load_parts(Cg *g, const TirInst *in, LLVMValueRef slot, bool l1, int parts) {
  Tile *t = &g->tiles[in->dst];
  const Layout *L = t->lay;
  bool split = parts > 1;
  int ch = 16 / elem_bytes(rtype(g, in->dst)->elem), nch = t->n / ch, per = split ? nch / parts : nch;
  Access ac;
  access_init(g, in, &ac);
  LLVMValueRef lw = layout_lw(g, L), base = stage_base(g, t, slot), writer = layout_writer(g, L);
  LLVMBasicBlockRef wj = split ? NULL : begin_if(g, writer);
  LLVMValueRef *sp = vals_new(g, nch);
  for (int k = 0; k < nch; k++)
    sp[k] = smem_at(g, base, tile_byte_off(g, t, lw, k * ch));
  Chunks c = chunks_plan(g, in, &ac, rtype(g, in->dst), L, lw, t->n, ch);
  for (int k0 = 0; k0 < nch; k0 += per) {
    LLVMBasicBlockRef pj = split ? begin_if(g, writer) : NULL;
    copy_chunks(g, in, &ac, t, lw, sp, &c, k0, k0 + per, l1);
    end_if(g, pj);
    if (split)
      cp_async_commit(g);
  }
  end_if(g, wj);
  if (parts == 1)
    cp_async_commit(g);
}

/* The copies of one pipelined LOAD into stage `slot` of its tile. */
static void async_load(Cg *g, const TirInst *in, LLVMValueRef slot, bool l1) { async_load_parts(g, in, slot, l1, 0); }

static void lower_inst(Cg *g, const TirInst *in);

/* Copies of every load of p for the iteration whose counter is ctr (i64) into stage `slot`, when
 * ctr < hi. The loop variable and the chain registers take that iteration's values meanwhile and
 * get their own back afterwards. */
/* The loop variable and the chain registers of p take the values of the iteration whose counter
 * is ctr (i64); returns what they held, for chain_leave. */
static LLVMValueRef *chain_enter(Cg *g, const TirPipe *p, LLVMValueRef ctr) {
  const TirFunc *f = g->f;
  int ind = f->insts[p->first].dst;
  LLVMValueRef *saved = vals_new(g, p->nchain + 1);
  get_tile(g, ind, &saved[0]);
  for (int c = 0; c < p->nchain; c++)
    get_tile(g, f->insts[p->chain[c]].dst, &saved[1 + c]);
  LLVMValueRef iv = LLVMBuildTrunc(g->b, ctr, g->i32, "");
  store_regs(g, ind, &iv);
  SrcLoc loc = g->loc;
  for (int c = 0; c < p->nchain; c++)
    lower_inst(g, &f->insts[p->chain[c]]);
  g->loc = loc;
  return saved;
}

static void chain_leave(Cg *g, const TirPipe *p, LLVMValueRef *saved) {
  store_regs(g, g->f->insts[p->first].dst, &saved[0]);
  for (int c = 0; c < p->nchain; c++)
    store_regs(g, g->f->insts[p->chain[c]].dst, &saved[1 + c]);
}

static void pipe_issue(Cg *g, const Pipe *pp, LLVMValueRef ctr, LLVMValueRef hi, LLVMValueRef slot) {
  const TirPipe *p = pp->tp;
  LLVMBasicBlockRef join = begin_if(g, LLVMBuildICmp(g->b, LLVMIntSLT, ctr, hi, ""));
  LLVMValueRef *saved = chain_enter(g, p, ctr);
  SrcLoc loc = g->loc;
  for (int l = 0; l < p->nloads; l++)
    async_load(g, &g->f->insts[p->loads[l]], slot, false);
  g->loc = loc;
  chain_leave(g, p, saved);
  end_if(g, join);
}

/* Register tile r with lookahead slot `slot` (an alloca of its registers' shape) standing in for
 * its own registers: what get_tile reads and store_regs writes until the call returns `own`. */
static LLVMValueRef regs_at(Cg *g, int r, LLVMValueRef slot) {
  LLVMValueRef own = g->tiles[r].regs;
  g->tiles[r].regs = slot;
  return own;
}

/* The lookahead loads of the iteration whose counter is ctr (i64) into Pipe.next slot k (k + 1
 * iterations ahead of the one running once the loop is in it), when ctr < hi (the chain replayed
 * for it as in pipe_issue); the registers of the running iteration keep their values. */
static void lookahead_issue(Cg *g, const Pipe *pp, LLVMValueRef ctr, LLVMValueRef hi, int k) {
  const TirPipe *p = pp->tp;
  if (!p->nlookahead)
    return;
  LLVMBasicBlockRef join = begin_if(g, LLVMBuildICmp(g->b, LLVMIntSLT, ctr, hi, ""));
  LLVMValueRef *saved = chain_enter(g, p, ctr);
  SrcLoc loc = g->loc;
  for (int l = 0; l < p->nlookahead; l++) {
    const TirInst *in = &g->f->insts[p->lookahead[l]];
    Tile *t = &g->tiles[in->dst];
    LLVMValueRef own = regs_at(g, in->dst, pp->next[l * p->lookahead_dist + k]);
    t->ahead = false;
    lower_inst(g, in);
    t->ahead = true;
    t->regs = own;
  }
  g->loc = loc;
  chain_leave(g, p, saved);
  end_if(g, join);
}

/* At the top of the body: the lookahead loads' values for this iteration (issued
 * p->lookahead_dist iterations earlier) into their registers; the later iterations' values move
 * one slot nearer (registers: the moves cost nothing after SSA). */
static void lookahead_take(Cg *g, const Pipe *pp) {
  const TirPipe *p = pp->tp;
  for (int l = 0; l < p->nlookahead; l++) {
    int r = g->f->insts[p->lookahead[l]].dst;
    LLVMValueRef *q = &pp->next[l * p->lookahead_dist], *v = vals_new(g, g->tiles[r].n);
    for (int k = 0; k < p->lookahead_dist; k++) { /* registers <- q[0] <- q[1] <- ... */
      LLVMValueRef own = regs_at(g, r, q[k]);
      get_tile(g, r, v);
      g->tiles[r].regs = k ? q[k - 1] : own;
      store_regs(g, r, v);
      g->tiles[r].regs = own;
    }
  }
}

/* At the FOR, before the loop: the first P - 1 iterations' copies. */
static void mbar_wait(Cg *g, LLVMValueRef bar, LLVMValueRef parity, bool sleep);
static LLVMValueRef turn_addr(Cg *g, LLVMValueRef r);

/* A thread-private ring (TirPipe.thread_private) in the cp.async entry, in this version of its
 * loop. Across threads, and so keeping the barrier: a shifted tile's reads (at its row's shift),
 * and a shifted store staged in a ring tile's stage (shift_stage_alias: the threads read each
 * other's granules there until the store ends, and only the barrier keeps the refill after). */
static bool ring_private(const Cg *g, const Pipe *p) {
  const TirPipe *tp = p->tp;
  if (g->ws || !tp->thread_private)
    return false;
  for (int l = 0; l < tp->nloads; l++) {
    int r = g->f->insts[tp->loads[l]].dst;
    if (shifted_here(g, &g->tiles[r]))
      return false;
    for (int i = tp->first + 1; i < tp->last && !g->aligned_version; i++)
      if (g->shift_stage[i].pitch && g->shift_stage[i].view_of == r)
        return false;
  }
  return true;
}

static void pipe_prologue(Cg *g, const Pipe *p, LLVMValueRef lo, LLVMValueRef hi, LLVMValueRef step) {
  if (g->ws) { /* the ring's stage and parity run on across tiles (emit_roles starts them) */
    LLVMBuildStore(g->b, ci32(g, 0), p->iter);
    if (g->groups == 2) {
      /* Tile i of the block's walk (i = 2 j + group) fills ring positions i n .. i n + n - 1: every
       * tile runs the same n iterations (the schedule's condition for a persistent walk). */
      LLVMValueRef span = LLVMBuildSub(g->b, hi, lo, "");
      LLVMValueRef n = LLVMBuildSDiv(g->b, LLVMBuildAdd(g->b, span, LLVMBuildSub(g->b, step, ci64(g, 1), ""), ""), step, "");
      n = LLVMBuildSelect(g->b, LLVMBuildICmp(g->b, LLVMIntSGT, span, ci64(g, 0), ""), n, ci64(g, 0), "");
      LLVMValueRef j = LLVMBuildZExt(g->b, LLVMBuildLoad2(g->b, g->i32, g->tile_j, ""), g->i64, "");
      LLVMValueRef i = LLVMBuildAdd(g->b, LLVMBuildShl(g->b, j, ci64(g, 1), ""), LLVMBuildZExt(g->b, g->group, g->i64, ""), "");
      LLVMValueRef pos = LLVMBuildMul(g->b, i, n, "");
      LLVMValueRef S = ci64(g, p->tp->stages);
      LLVMBuildStore(g->b, LLVMBuildTrunc(g->b, LLVMBuildURem(g->b, pos, S, ""), g->i32, ""), p->rslot);
      LLVMValueRef round = LLVMBuildUDiv(g->b, pos, S, "");
      LLVMBuildStore(g->b, LLVMBuildTrunc(g->b, LLVMBuildAnd(g->b, round, ci64(g, 1), ""), g->i32, ""), p->phase);
      /* our turn: group 0's first passes at once (parity 1 of a fresh barrier) */
      LLVMValueRef j32 = LLVMBuildLoad2(g->b, g->i32, g->tile_j, "");
      LLVMValueRef first = LLVMBuildZExt(g->b, LLVMBuildICmp(g->b, LLVMIntEQ, g->group, ci32(g, 0), ""), g->i32, "");
      mbar_wait(g, turn_addr(g, g->group), LLVMBuildXor(g->b, LLVMBuildAnd(g->b, j32, ci32(g, 1), ""), first, ""), false);
    }
    return;
  }
  LLVMBuildStore(g->b, ci32(g, 0), p->rslot);
  if (ring_private(g, p))
    LLVMBuildStore(g->b, ci32(g, 0), p->iter);
  if (g->dirty)
    barrier(g); /* the stages may still be read from a previous run of the loop */
  for (int s = 0; s < p->tp->ahead; s++) {
    LLVMValueRef ctr = LLVMBuildAdd(g->b, lo, LLVMBuildMul(g->b, step, ci64(g, s), ""), "");
    pipe_issue(g, p, ctr, hi, ci32(g, s));
    cp_async_commit(g);
  }
  LLVMBuildStore(g->b, ci32(g, p->tp->ahead), p->wslot);
  for (int l = 0; l < p->tp->nlookahead; l++) {
    int r = g->f->insts[p->tp->lookahead[l]].dst;
    for (int k = 0; k < p->tp->lookahead_dist; k++)
      p->next[l * p->tp->lookahead_dist + k] = entry_alloca(g, tile_reg_type(g, r), g->tiles[r].n);
  }
  for (int k = 0; k < p->tp->lookahead_dist; k++)
    lookahead_issue(g, p, LLVMBuildAdd(g->b, lo, LLVMBuildMul(g->b, step, ci64(g, k), ""), ""), hi, k);
}

/* At the top of the body (counter ctr): wait for this iteration's stage, prefetch p->ahead
 * iterations ahead. Committed before this point: the groups of iterations 0 .. i + ahead - 1 (the
 * prologue's `ahead` and one per earlier iteration), so waiting until at most ahead - 1 are
 * pending means iteration i's copies landed (this thread's; the barrier: everyone's). */
static void pipe_top(Cg *g, const Pipe *p, LLVMValueRef ctr, LLVMValueRef hi, LLVMValueRef step) {
  int dist = p->tp->lookahead_dist;
  lookahead_take(g, p);
  lookahead_issue(g, p, LLVMBuildAdd(g->b, ctr, LLVMBuildMul(g->b, step, ci64(g, dist), ""), ""), hi, dist - 1);
  LLVMValueRef ahead = LLVMBuildAdd(g->b, ctr, LLVMBuildMul(g->b, step, ci64(g, p->tp->ahead), ""), "");
  cp_async_wait(g, p->tp->ahead - 1);
  if (ring_private(g, p)) {
    /* Each thread reads only what it copied: its wait suffices, and the refill below writes a
     * stage only this thread read. The reductions' slots alternate by iteration, so that writing
     * this iteration's needs no barrier either: the ones this iteration's parity last used, two
     * iterations back, were read before a barrier of the iteration between (at its latch if its
     * body took a slot and no barrier is sure to have run). */
    g->barriered = g->odd_slots_used = false;
    g->red_odd = LLVMBuildTrunc(g->b, LLVMBuildLoad2(g->b, g->i32, p->iter, ""), g->i1, "");
    g->red_read[0] = g->red_read[1] = false;
    g->dirty = true; /* the last iteration's reads of the other scratch slots may be running */
  } else {
    barrier(g);
  }
  pipe_issue(g, p, ahead, hi, LLVMBuildLoad2(g->b, g->i32, p->wslot, ""));
  cp_async_commit(g);
}

static void rotate_slot(Cg *g, LLVMValueRef slot, int stages) {
  LLVMValueRef v = LLVMBuildAdd(g->b, LLVMBuildLoad2(g->b, g->i32, slot, ""), ci32(g, 1), "");
  LLVMValueRef wrap = LLVMBuildICmp(g->b, LLVMIntEQ, v, ci32(g, stages), "");
  LLVMBuildStore(g->b, LLVMBuildSelect(g->b, wrap, ci32(g, 0), v, ""), slot);
}

/* At the ENDFOR, before the counter steps. */
/* A ring position one further: the stage, and the mbarrier parity, which flips each time the
 * stage wraps to 0 (i32 allocas). */
static void ring_advance(Cg *g, LLVMValueRef slot, LLVMValueRef phase, int stages) {
  rotate_slot(g, slot, stages);
  LLVMValueRef wrapped = LLVMBuildICmp(g->b, LLVMIntEQ, LLVMBuildLoad2(g->b, g->i32, slot, ""), ci32(g, 0), "");
  LLVMValueRef ph = LLVMBuildLoad2(g->b, g->i32, phase, "");
  LLVMBuildStore(g->b, LLVMBuildXor(g->b, ph, LLVMBuildZExt(g->b, wrapped, g->i32, ""), ""), phase);
}

static void pipe_advance(Cg *g, const Pipe *p) {
  if (g->ws) {
    ring_advance(g, p->rslot, p->phase, p->tp->stages);
  } else {
    rotate_slot(g, p->rslot, p->tp->stages);
    rotate_slot(g, p->wslot, p->tp->stages);
  }
  if (g->ws || ring_private(g, p)) { /* Pipe.iter: the ws ring's count; a private ring's parity */
    LLVMValueRef it = LLVMBuildLoad2(g->b, g->i32, p->iter, "");
    LLVMBuildStore(g->b, LLVMBuildAdd(g->b, it, ci32(g, 1), ""), p->iter);
  }
}

/* ---------------------------------------------- warp specialization: mbarriers and TMA
 *
 * The warp-specialized entry (sched->ws): full[s] and empty[s] mbarriers per stage, after the
 * shared tiles. full[s] completes when the producer's arrive.expect_tx and the stage's TMA bytes
 * have landed (count 1); empty[s] when every consumer warp arrived after its last read (count
 * consumer warps). Iteration j uses stage j % P in round j / P: consumers wait for full with
 * parity round & 1, the producer for empty with parity (round & 1) ^ 1 (a fresh barrier counts
 * its phase before the first as complete, so round 0 passes at once). */

static void asm_call_void(Cg *g, const char *text, const char *cons, LLVMValueRef *args, int n) {
  LLVMTypeRef ps[8];
  for (int i = 0; i < n; i++)
    ps[i] = LLVMTypeOf(args[i]);
  LLVMTypeRef ft = LLVMFunctionType(g->vd, ps, (unsigned)n, 0);
  LLVMValueRef fn = LLVMGetInlineAsm(ft, (char *)text, strlen(text), (char *)cons, strlen(cons), 1, 0,
                                     LLVMInlineAsmDialectATT, 0);
  LLVMBuildCall2(g->b, ft, fn, args, (unsigned)n, "");
}

/* The ring's barrier sets: 2 with an early set (TirPipe.early: set 1), else 1. */
static int ring_sets(const TirPipe *p) { return p->early ? 2 : 1; }

/* The bytes of the ring's mbarriers: full and empty per stage, for each set. */
static int ring_mbar_bytes(const Cg *g) { return 16 * g->pipes[0].tp->stages * ring_sets(g->pipes[0].tp); }

/* The 32-bit shared-window address of mbarrier `which` (0: full, 1: empty) of stage slot, of the
 * early set's barriers (after the others) when early. */
static LLVMValueRef mbar_addr(Cg *g, bool early, int which, LLVMValueRef slot) {
  int stages = g->pipes[0].tp->stages;
  LLVMValueRef off = LLVMBuildAdd(g->b, ci32(g, g->mbar_off + 16 * stages * early + 8 * stages * which),
                                  LLVMBuildMul(g->b, slot, ci32(g, 8), ""), "");
  LLVMValueRef p = LLVMBuildInBoundsGEP2(g->b, g->i8, g->smem, &off, 1, "");
  return LLVMBuildPtrToInt(g->b, p, g->i32, "");
}

/* Ping-pong: turn[r] opens group r's main loop; the other group arrives on it when its own main
 * loop has waited for its last stage. So the groups wait for ring stages strictly in the walk's
 * order, and a stage's full barrier is never more than one phase ahead of its waiter (a parity
 * wait cannot tell phase k from k + 2). */
static LLVMValueRef turn_addr(Cg *g, LLVMValueRef r) {
  LLVMValueRef off = LLVMBuildAdd(g->b, ci32(g, g->mbar_off + ring_mbar_bytes(g)), LLVMBuildMul(g->b, r, ci32(g, 8), ""), "");
  return LLVMBuildPtrToInt(g->b, LLVMBuildInBoundsGEP2(g->b, g->i8, g->smem, &off, 1, ""), g->i32, "");
}

/* Head loads: a ring of head_stages copies of their own; copy `slot`'s full (which = 0) and
 * empty (1) barriers after the ring's. */
static LLVMValueRef head_mbar(Cg *g, int which, LLVMValueRef slot) {
  LLVMValueRef off = LLVMBuildAdd(g->b, ci32(g, g->mbar_off + ring_mbar_bytes(g) + 8 * which),
                                  LLVMBuildMul(g->b, slot, ci32(g, 16), ""), "");
  return LLVMBuildPtrToInt(g->b, LLVMBuildInBoundsGEP2(g->b, g->i8, g->smem, &off, 1, ""), g->i32, "");
}

/* The copy (slot) and the parity of its barriers' current phase for the head loads of the
 * count-th tile of the walk. */
static void head_ring(Cg *g, LLVMValueRef count, LLVMValueRef *slot, LLVMValueRef *parity) {
  bool two = g->sched->head_stages == 2;
  *slot = two ? LLVMBuildAnd(g->b, count, ci32(g, 1), "") : ci32(g, 0);
  *parity = LLVMBuildAnd(g->b, two ? LLVMBuildLShr(g->b, count, ci32(g, 1), "") : count, ci32(g, 1), "");
}

/* sleep: the producer's waits for a free stage sleep until the phase completes, up to the hint
 * (10 ms, CUTLASS's), instead of spinning: the producer of the d64 attention loop spun ~240 times
 * an iteration (9% of the issued instructions, taken from the consumer warps of its SM
 * sub-partition). The consumers' waits for data spin: waking from the sleep cost the M = 16
 * GEMM, whose every iteration waits for its loads, 16% (H200, session q). TILEC_WAIT_HINT=0:
 * no sleeping. */
static void mbar_wait(Cg *g, LLVMValueRef bar, LLVMValueRef parity, bool sleep) {
  LLVMValueRef a[2] = {bar, parity};
  char text[160];
  snprintf(text, sizeof text,
           "{\n.reg .pred p;\nTILEC_WAIT_${:uid}:\n"
           "mbarrier.try_wait.parity.shared::cta.b64 p, [$0], $1%s;\n"
           "@!p bra TILEC_WAIT_${:uid};\n}",
           sleep && !env_off("TILEC_WAIT_HINT") ? ", 10000000" : "");
  asm_call_void(g, text, "r,r,~{memory}", a, 2);
}

static LLVMValueRef elected(Cg *g) { return LLVMBuildICmp(g->b, LLVMIntEQ, g->lane, ci32(g, 0), ""); }

/* One arrival per warp on mbarrier bar (a shared-window address), when go, after all the warp's
 * lanes got here; with a cluster, on the peer block's barrier at the same address too. */
static void warp_arrive(Cg *g, LLVMValueRef bar, LLVMValueRef go, bool peer) {
  LLVMValueRef all = ci32(g, -1);
  call_intrin(g, "llvm.nvvm.bar.warp.sync", NULL, 0, &all, 1);
  LLVMBasicBlockRef join = begin_if(g, go);
  asm_call_void(g, "mbarrier.arrive.shared::cta.b64 _, [$0];", "r,~{memory}", &bar, 1);
  if (peer) {
    LLVMValueRef a[2] = {bar, LLVMBuildXor(g->b, g->crank, ci32(g, 1), "")};
    asm_call_void(g,
                  "{\n.reg .b32 ra;\nmapa.shared::cluster.u32 ra, $0, $1;\n"
                  "mbarrier.arrive.release.cluster.shared::cluster.b64 _, [ra];\n}",
                  "r,r,~{memory}", a, 2);
  }
  end_if(g, join);
}

/* Consumers, PIPE_WAIT: this iteration's stage has landed (ahead 1: the next iteration's, whose
 * parity flips when its stage wraps to 0). */
static void ws_wait(Cg *g, const Pipe *p, int ahead, bool early) {
  LLVMValueRef slot = ring_slot(g, p, ahead);
  LLVMValueRef phase = LLVMBuildLoad2(g->b, g->i32, p->phase, "");
  if (ahead)
    phase = LLVMBuildXor(g->b, phase, LLVMBuildZExt(g->b, LLVMBuildICmp(g->b, LLVMIntEQ, slot, ci32(g, 0), ""), g->i32, ""), "");
  mbar_wait(g, mbar_addr(g, early, 0, slot), phase, false);
}

/* Consumers, PIPE_RELEASE: one arrival per warp on empty, after all its lanes' reads (lag 1: the
 * previous iteration's stage, whose wgmma group the overlapped DOT's wait_group 1 retired). */
static void ws_release(Cg *g, const Pipe *p, int lag, bool early) {
  int stages = p->tp->stages;
  LLVMValueRef slot = LLVMBuildLoad2(g->b, g->i32, p->rslot, "");
  LLVMValueRef go = elected(g);
  if (lag) {
    LLVMValueRef prev = LLVMBuildSelect(g->b, LLVMBuildICmp(g->b, LLVMIntEQ, slot, ci32(g, 0), ""), ci32(g, stages - 1),
                                        LLVMBuildSub(g->b, slot, ci32(g, 1), ""), "");
    slot = prev;
    LLVMValueRef started = LLVMBuildICmp(g->b, LLVMIntSGT, LLVMBuildLoad2(g->b, g->i32, p->iter, ""), ci32(g, 0), "");
    go = LLVMBuildAnd(g->b, go, started, "");
  }
  /* with a cluster, the peer's stage took our multicast half: free it there too */
  warp_arrive(g, mbar_addr(g, early, 1, slot), go, g->cluster);
}

static void lower_pipe_sync(Cg *g, const TirInst *in) {
  Pipe *p = &g->pipes[in->axis];
  const Nest *ns = &g->nest[g->depth - 1];
  if (in->op == TIR_PIPE_WAIT) {
    if (g->ws)
      ws_wait(g, p, in->stage, in->early_set);
    else
      pipe_top(g, p, LLVMBuildLoad2(g->b, g->i64, ns->counter, ""), ns->hi, ns->step);
  } else if (g->ws) {
    ws_release(g, p, (int)in->imm, in->early_set);
  } /* cp.async: the barrier at the next PIPE_WAIT orders every read before the refill */
}

/* A TMA box's coordinates for LOAD or STORE in over a tensor of rank dimensions: the index
 * starts, innermost first. */
static void tma_coords(Cg *g, const TirInst *in, int rank, LLVMValueRef *coord) {
  for (int d = 0; d < rank; d++)
    get_tile(g, in->index[d].start, &coord[rank - 1 - d]);
}

static void store_chunk(Cg *g, ElemType e, LLVMValueRef p, LLVMValueRef *v, int ch);

/* The TMA boxes of tensor map t's LOAD into shared memory at dst, completing on mbarrier full. Coordinates are the
 * index starts, innermost first; box c of the row sits c * (the layout's rows) * swizzle bytes in. */
static void tma_load(Cg *g, int t, LLVMValueRef dst, LLVMValueRef full) {
  const TirTmap *m = &g->sched->tmaps[t];
  const TirInst *in = &g->f->insts[m->load];
  const TirArg *a = &g->f->args[m->arg];
  const SmemLayout *swz = g->tiles[in->dst].swz;
  if (!swz || swz->rows < m->rows) { /* box c lands c * swz->rows * swizzle in: the layout's column block c */
    cg_error(g, "internal error: TMA boxes of %d rows into a tile laid out in %d", m->rows, swz ? swz->rows : 0);
    return;
  }
  LLVMValueRef base = LLVMBuildPtrToInt(g->b, dst, g->i32, "");
  LLVMValueRef coord[TILE_MAX_RANK];
  tma_coords(g, in, a->rank, coord);
  char text[320], cons[64] = "r,l";
  int n = snprintf(text, sizeof text, "cp.async.bulk.tensor.%dd.shared::cluster.global.mbarrier::complete_tx::bytes%s [$0], [$1, {",
                   a->rank, m->multicast ? ".multicast::cluster" : "");
  for (int d = 0; d < a->rank; d++) {
    n += snprintf(text + n, sizeof text - (size_t)n, d ? ", $%d" : "$%d", 2 + d);
    strcat(cons, ",r");
  }
  n += snprintf(text + n, sizeof text - (size_t)n, "}], [$%d]", 2 + a->rank);
  snprintf(text + n, sizeof text - (size_t)n, m->multicast ? ", $%d;" : ";", 3 + a->rank);
  strcat(cons, m->multicast ? ",r,h,~{memory}" : ",r,~{memory}");
  /* multicast: this block's half of the rows, written to both blocks of the cluster */
  int half = m->multicast ? m->rows / 2 : 0, outer = a->rank - 1 - m->outer;
  LLVMValueRef row0 = m->multicast ? LLVMBuildMul(g->b, g->crank, ci32(g, half), "") : ci32(g, 0);
  coord[outer] = LLVMBuildAdd(g->b, coord[outer], row0, "");
  base = LLVMBuildAdd(g->b, base, LLVMBuildMul(g->b, row0, ci32(g, m->row_bytes), ""), "");
  for (int c = 0; c < m->chunks; c++) {
    LLVMValueRef args[2 + TILE_MAX_RANK + 2];
    args[0] = LLVMBuildAdd(g->b, base, ci32(g, c * swz->rows * m->row_bytes), "");
    args[1] = LLVMBuildPtrToInt(g->b, g->tmap[t], g->i64, ""); /* an address: cvta.param, no copy */
    for (int d = 0; d < a->rank; d++)
      args[2 + d] = coord[d];
    args[2] = LLVMBuildAdd(g->b, coord[0], ci32(g, c * m->box[a->rank - 1]), "");
    args[2 + a->rank] = full;
    args[3 + a->rank] = LLVMConstInt(g->i16, 3, 0); /* both blocks */
    asm_call_void(g, text, cons, args, (m->multicast ? 4 : 3) + a->rank);
  }
}

/* STORE_BARRIER + w: warpgroup w's own in a split TMA store (w < 4), after the turns' (3 + w, w < 7) */
enum { STORE_BARRIER = 10, WARPGROUP = 128 };

/* The thread that issues (and waits for) a TMA store's bulk groups: the consumers' first, or
 * with a split store (TirTmap.split) each warpgroup's. */
static LLVMValueRef store_leader(Cg *g, bool split) {
  return LLVMBuildICmp(g->b, LLVMIntEQ, LLVMBuildAnd(g->b, g->tid, ci32(g, split ? WARPGROUP - 1 : -1), ""),
                       ci32(g, 0), "");
}

/* The barrier of a TMA store's writers: the consumers', or the warpgroup's own. */
static void store_barrier(Cg *g, bool split) {
  if (!split) {
    barrier(g);
    return;
  }
  inline_asm0(g, "fence.proxy.async.shared::cta;");
  LLVMValueRef a[2] = {LLVMBuildAdd(g->b, LLVMBuildLShr(g->b, g->tid, ci32(g, 7), ""), ci32(g, STORE_BARRIER), ""),
                       ci32(g, WARPGROUP)};
  call_intrin(g, "llvm.nvvm.barrier.sync.cnt", NULL, 0, a, 2);
}

/* TMA store map t's STORE (the epilogue, consumers): the leader waits until the previous tile's
 * bulk store has read the staging tile and a barrier publishes that; every thread writes its
 * elements into the staging tile in TMA's layout; a proxy fence and a barrier; the leader issues
 * the boxes (TMA clips what lies outside the tensor: the STORE's mask) and commits them as one
 * bulk group, which the next tile's store (or the consumers' exit) waits for. A split store does
 * all of it per warpgroup, on the warpgroup's rows of the staging tile. */
static void tma_store(Cg *g, const TirInst *in, int t) {
  const TirTmap *m = &g->sched->tmaps[t];
  const TirArg *a = &g->f->args[m->arg];
  const Tile *st = &g->staging[t];
  int src = in->args[0], n = g->tiles[src].n;
  const Layout *L = g->tiles[src].lay;
  ElemType e = rtype(g, src)->elem;
  bool split = m->split > 1;
  LLVMValueRef first = store_leader(g, split);
  LLVMBasicBlockRef j = begin_if(g, first);
  inline_asm0(g, "cp.async.bulk.wait_group.read 0;");
  end_if(g, j);
  store_barrier(g, split);
  LLVMValueRef *v = vals_new(g, n);
  get_tile(g, src, v);
  LLVMValueRef off = ci32(g, st->smem_off);
  LLVMValueRef base = LLVMBuildInBoundsGEP2(g->b, g->i8, g->smem, &off, 1, "");
  int ch = layout_vec_chunk(L, e);
  ch = ch > 8 ? 8 : ch; /* a run stays inside one 16-byte unit of the swizzle */
  LLVMBasicBlockRef wj = begin_if(g, layout_writer(g, L));
  for (int r = 0; r < n; r += ch)
    store_chunk(g, e, smem_at(g, base, swz_byte_off(g, st->swz, L, r)), v + r, ch);
  end_if(g, wj);
  store_barrier(g, split); /* with the proxy fence: the bulk store reads what the threads wrote */
  j = begin_if(g, first);
  LLVMValueRef coord[TILE_MAX_RANK];
  tma_coords(g, in, a->rank, coord);
  LLVMValueRef wg_rows = ci32(g, 0); /* a split store: this warpgroup's first row */
  if (split)
    wg_rows = LLVMBuildMul(g->b, LLVMBuildLShr(g->b, g->tid, ci32(g, 7), ""), ci32(g, m->box[m->outer]), "");
  int outer = a->rank - 1 - m->outer; /* coordinates are innermost first */
  coord[outer] = LLVMBuildAdd(g->b, coord[outer], wg_rows, "");
  char text[256], cons[64] = "l";
  int k = snprintf(text, sizeof text, "cp.async.bulk.tensor.%dd.global.shared::cta.bulk_group [$0, {", a->rank);
  for (int d = 0; d < a->rank; d++) {
    k += snprintf(text + k, sizeof text - (size_t)k, d ? ", $%d" : "$%d", 1 + d);
    strcat(cons, ",r");
  }
  snprintf(text + k, sizeof text - (size_t)k, "}], [$%d];", 1 + a->rank);
  strcat(cons, ",r,~{memory}");
  LLVMValueRef sbase = LLVMBuildAdd(g->b, LLVMBuildPtrToInt(g->b, base, g->i32, ""),
                                    LLVMBuildMul(g->b, wg_rows, ci32(g, m->row_bytes), ""), "");
  for (int c = 0; c < m->chunks; c++) {
    LLVMValueRef args[2 + TILE_MAX_RANK];
    args[0] = LLVMBuildPtrToInt(g->b, g->tmap[t], g->i64, "");
    for (int d = 0; d < a->rank; d++)
      args[1 + d] = coord[d];
    args[1] = LLVMBuildAdd(g->b, coord[0], ci32(g, c * m->box[a->rank - 1]), "");
    args[1 + a->rank] = LLVMBuildAdd(g->b, sbase, ci32(g, c * m->rows * m->row_bytes), "");
    asm_call_void(g, text, cons, args, 2 + a->rank);
  }
  inline_asm0(g, "cp.async.bulk.commit_group;");
  end_if(g, j);
}

/* The TMA store map of STORE in (ws consumers), or -1. */
static int tma_store_map(Cg *g, const TirInst *in) {
  const TirSchedule *s = g->sched;
  for (int t = 0; g->ws && t < s->ntmaps; t++)
    if (s->tmaps[t].store && s->tmaps[t].load == (int)(in - g->f->insts))
      return t;
  return -1;
}

/* ---------------------------------------------- persistent grid: the tile loop
 *
 * The block walks tiles t = ctaid.x, ctaid.x + nctaid.x, ... below tiles.x * tiles.y * tiles.z,
 * each decoded to the block index the body sees (pblock): z outermost, then groups of G rows
 * of y (G, the fourth grid parameter, >= 1, chosen by the runtime), x along a group's rows
 * (neighbouring blocks share the rows of the operands they read: L2 reuse, the grouped order of
 * Triton's matmul tutorial; G = 1 is the hardware's own order).
 *
 * A row walk (TirSchedule.walk_rows: a tile's cost follows its x) reads the fourth parameter as
 * a chunk C >= 1 instead: the walker takes C consecutive tiles of the order, then skips the
 * chunks of the other walkers. With C >= 2 the order along a row is folded, x = gx - 1, 0,
 * gx - 2, 1, ...: a chunk of 2 is a long tile and its short mirror, which together cost what any
 * other pair costs; a chunk of gx is a whole row. With C = 1 x is plain (reversed where the
 * trips grow with x: the longest blocks first). */

typedef struct TileLoop {
  LLVMValueRef t;               /* i32 alloca: the tile */
  LLVMValueRef stride;          /* tiles between two of this walker's */
  LLVMValueRef chunk;           /* a row walk (TirSchedule.walk_rows): tiles per step, or NULL */
  LLVMBasicBlockRef cond, exit;
} TileLoop;

static LLVMValueRef umin(Cg *g, LLVMValueRef a, LLVMValueRef b) {
  return LLVMBuildSelect(g->b, LLVMBuildICmp(g->b, LLVMIntULT, a, b, ""), a, b, "");
}

/* The grid the loop walks: the logical one, halved (rounded up) along a cluster's axis. */
static LLVMValueRef walked_dim(Cg *g, int ax) {
  LLVMValueRef n = g->grid_tiles[ax];
  if (g->cluster && g->sched->cluster_axis == ax)
    n = LLVMBuildLShr(g->b, LLVMBuildAdd(g->b, n, ci32(g, 1), ""), ci32(g, 1), "");
  return n;
}

static void tile_decode(Cg *g, LLVMValueRef t) {
  LLVMValueRef gx = walked_dim(g, 0), gy = walked_dim(g, 1), b = NULL;
  LLVMValueRef per_z = LLVMBuildMul(g->b, gx, gy, "");
  LLVMValueRef r = LLVMBuildURem(g->b, t, per_z, "");
  bool rows = g->sched->walk_rows;
  LLVMValueRef group = rows ? ci32(g, 1) : g->grid_tiles[3];
  LLVMValueRef width = LLVMBuildMul(g->b, gx, group, "");
  LLVMValueRef first_y = LLVMBuildMul(g->b, LLVMBuildUDiv(g->b, r, width, ""), group, "");
  LLVMValueRef gsize = umin(g, LLVMBuildSub(g->b, gy, first_y, ""), group);
  LLVMValueRef q = LLVMBuildURem(g->b, r, width, "");
  b = LLVMBuildUDiv(g->b, q, gsize, "");
  if (rows) {
    LLVMValueRef last = LLVMBuildSub(g->b, gx, ci32(g, 1), ""), half = LLVMBuildLShr(g->b, b, ci32(g, 1), "");
    LLVMValueRef odd = LLVMBuildTrunc(g->b, b, LLVMInt1TypeInContext(g->ctx), "");
    LLVMValueRef folded = LLVMBuildSelect(g->b, odd, half, LLVMBuildSub(g->b, last, half, ""), "");
    LLVMValueRef plain = g->sched->reverse_x ? LLVMBuildSub(g->b, last, b, "") : b;
    b = LLVMBuildSelect(g->b, LLVMBuildICmp(g->b, LLVMIntUGE, g->grid_tiles[3], ci32(g, 2), ""), folded, plain, "");
  }
  LLVMValueRef y = LLVMBuildAdd(g->b, first_y, LLVMBuildURem(g->b, q, gsize, ""), "");
  if (g->sched->rotate_x) /* (TirSchedule.rotate_x) */
    b = LLVMBuildURem(g->b, LLVMBuildAdd(g->b, b, y, ""), gx, "");
  LLVMBuildStore(g->b, b, g->pblock[0]);
  LLVMBuildStore(g->b, y, g->pblock[1]);
  LLVMBuildStore(g->b, LLVMBuildUDiv(g->b, t, per_z, ""), g->pblock[2]);
  if (g->cluster) { /* the pair's two tiles: 2 i + rank along the axis (one may be past the edge:
                       every access of it is masked) */
    LLVMValueRef *pb = &g->pblock[g->sched->cluster_axis];
    LLVMValueRef v = LLVMBuildLoad2(g->b, g->i32, *pb, "");
    LLVMBuildStore(g->b, LLVMBuildAdd(g->b, LLVMBuildShl(g->b, v, ci32(g, 1), ""), g->crank, ""), *pb);
  }
}

/* The walk's first tile and stride: the block's (cluster's) index and the grid's blocks (clusters). */
static LLVMValueRef walk_index(Cg *g, const char *sreg) {
  LLVMValueRef v = intrin0(g, sreg);
  return g->cluster ? LLVMBuildLShr(g->b, v, ci32(g, 1), "") : v;
}

/* Opens the loop; the builder is left in its body with pblock set. A consumer group of a
 * ping-pong block takes every groups-th tile of the block's walk, from its group's. */

static TileLoop tile_loop_begin(Cg *g, bool consumer) {
  TileLoop l = {entry_alloca(g, g->i32, 1), NULL, NULL, new_bb(g, "tile"), NULL};
  LLVMValueRef first = walk_index(g, "llvm.nvvm.read.ptx.sreg.ctaid.x");
  l.stride = walk_index(g, "llvm.nvvm.read.ptx.sreg.nctaid.x");
  if (consumer && g->groups == 2) {
    first = LLVMBuildAdd(g->b, first, LLVMBuildMul(g->b, g->group, l.stride, ""), "");
    l.stride = LLVMBuildShl(g->b, l.stride, ci32(g, 1), "");
  }
  if (g->sched->walk_rows) { /* chunk `first`'s first tile (a chunk of 0 from a foreign launcher: 1) */
    LLVMValueRef c = g->grid_tiles[3];
    l.chunk = LLVMBuildSelect(g->b, LLVMBuildICmp(g->b, LLVMIntEQ, c, ci32(g, 0), ""), ci32(g, 1), c, "");
    first = LLVMBuildMul(g->b, first, l.chunk, "");
  }
  LLVMBuildStore(g->b, first, l.t);
  LLVMBuildBr(g->b, l.cond);
  LLVMPositionBuilderAtEnd(g->b, l.cond);
  LLVMValueRef t = LLVMBuildLoad2(g->b, g->i32, l.t, "");
  LLVMValueRef total = LLVMBuildMul(g->b, LLVMBuildMul(g->b, walked_dim(g, 0), walked_dim(g, 1), ""), walked_dim(g, 2), "");
  LLVMBasicBlockRef body = new_bb(g, "tile.body");
  l.exit = new_bb(g, "tile.end");
  LLVMBuildCondBr(g->b, LLVMBuildICmp(g->b, LLVMIntULT, t, total, ""), body, l.exit);
  LLVMPositionBuilderAtEnd(g->b, body);
  tile_decode(g, t);
  return l;
}

/* The latch (the builder's block falls through to the next tile); the builder ends at the exit.
 * A row walk goes on along its chunk, then to the first tile of its chunk + stride (C = 1: the
 * plain walk's t + stride). */
static void tile_loop_end(Cg *g, const TileLoop *l) {
  LLVMValueRef t = LLVMBuildLoad2(g->b, g->i32, l->t, ""), next = LLVMBuildAdd(g->b, t, l->stride, "");
  if (l->chunk) {
    LLVMValueRef t1 = LLVMBuildAdd(g->b, t, ci32(g, 1), "");
    LLVMValueRef chunk_end = LLVMBuildICmp(g->b, LLVMIntEQ, LLVMBuildURem(g->b, t1, l->chunk, ""), ci32(g, 0), "");
    LLVMValueRef jump = LLVMBuildAdd(g->b, t1, LLVMBuildMul(g->b, LLVMBuildSub(g->b, l->stride, ci32(g, 1), ""), l->chunk, ""), "");
    next = LLVMBuildSelect(g->b, chunk_end, jump, t1, "");
  }
  LLVMBuildStore(g->b, next, l->t);
  LLVMBuildBr(g->b, l->cond);
  LLVMPositionBuilderAtEnd(g->b, l->exit);
}

/* The producer warpgroup: gives registers back, then one thread replays the slice and walks the
 * loop, per iteration: wait for the stage to be empty, expect its bytes, replay the chain,
 * issue the boxes; persistent: for every tile of the block, the ring running on. The other
 * producer threads exit at once. */
/* The producer's head loads for its count-th tile: wait until the consumers freed that tile's
 * copy (empty; a fresh barrier's phase before the first counts as complete), then TMA the
 * head tiles in, completing on full. */
static void produce_heads(Cg *g, LLVMValueRef count) {
  const TirSchedule *s = g->sched;
  LLVMValueRef n = LLVMBuildLoad2(g->b, g->i32, count, ""), slot, parity;
  head_ring(g, n, &slot, &parity);
  mbar_wait(g, head_mbar(g, 1, slot), LLVMBuildXor(g->b, parity, ci32(g, 1), ""), true);
  LLVMBuildStore(g->b, LLVMBuildAdd(g->b, n, ci32(g, 1), ""), count);
  LLVMValueRef full = head_mbar(g, 0, slot);
  LLVMValueRef ex[2] = {full, ci32(g, s->head_bytes)};
  asm_call_void(g, "mbarrier.arrive.expect_tx.shared::cta.b64 _, [$0], $1;", "r,r,~{memory}", ex, 2);
  for (int h = 0; h < s->nheads; h++)
    tma_load(g, s->pipes[0].nloads + h, stage_base(g, &g->tiles[g->f->insts[s->heads[h]].dst], slot), full);
}

/* Consumers: HEAD_WAIT waits for this tile's head tiles in its copy; HEAD_RELEASE frees the copy
 * for the producer (one arrival per warp) and moves on to the next tile's. The cp.async entry
 * loads them itself. */
static void lower_head_sync(Cg *g, const TirInst *in) {
  if (!g->ws)
    return;
  LLVMValueRef n = LLVMBuildLoad2(g->b, g->i32, g->head_count, ""), slot, parity;
  head_ring(g, n, &slot, &parity);
  if (in->op == TIR_HEAD_RELEASE) {
    warp_arrive(g, head_mbar(g, 1, slot), elected(g), false);
    LLVMBuildStore(g->b, LLVMBuildAdd(g->b, n, ci32(g, 1), ""), g->head_count);
    return;
  }
  mbar_wait(g, head_mbar(g, 0, slot), parity, false);
}

static void emit_producer(Cg *g) {
  const TirFunc *f = g->f;
  const TirSchedule *s = g->sched;
  const TirPipe *p = g->pipes[0].tp;
  char text[64];
  snprintf(text, sizeof text, "setmaxnreg.dec.sync.aligned.u32 %d;", s->producer_regs);
  inline_asm0(g, text);
  LLVMBasicBlockRef done = new_bb(g, "producer.done");
  LLVMBasicBlockRef work = new_bb(g, "producer");
  LLVMBuildCondBr(g->b, LLVMBuildICmp(g->b, LLVMIntEQ, g->tid, ci32(g, s->consumer_threads * s->groups), ""), work,
                  done);
  LLVMPositionBuilderAtEnd(g->b, work);
  LLVMValueRef ctr = entry_alloca(g, g->i64, 1), slot = entry_alloca(g, g->i32, 1), phase = entry_alloca(g, g->i32, 1);
  LLVMValueRef heads_done = entry_alloca(g, g->i32, 1);
  LLVMBuildStore(g->b, ci32(g, 0), slot);
  LLVMBuildStore(g->b, ci32(g, 1), phase);
  LLVMBuildStore(g->b, ci32(g, 0), heads_done);
  TileLoop tl;
  if (g->persistent)
    tl = tile_loop_begin(g, false);
  for (int k = 0; k < s->nslice; k++)
    lower_inst(g, &f->insts[s->slice[k]]);
  /* This tile's head tiles go after its first head_after ring loads (or after all of them when
   * there are fewer): those need only stages the last tile frees before its head tiles, so the
   * ring keeps running ahead across tiles. */
  int after = s->nheads ? s->head_after : -1;
  if (after == 0)
    produce_heads(g, heads_done);
  LLVMValueRef nth = entry_alloca(g, g->i32, 1);
  LLVMBuildStore(g->b, ci32(g, 0), nth);
  const TirInst *fi = &f->insts[p->first];
  LLVMValueRef lo, hi, step;
  get_tile(g, fi->args[0], &lo);
  get_tile(g, fi->args[1], &hi);
  get_tile(g, fi->args[2], &step);
  LLVMBuildStore(g->b, LLVMBuildSExt(g->b, lo, g->i64, ""), ctr);
  LLVMValueRef hi64 = LLVMBuildSExt(g->b, hi, g->i64, ""), step64 = LLVMBuildSExt(g->b, step, g->i64, "");
  LLVMBasicBlockRef cond = new_bb(g, "producer.for"), body = new_bb(g, "producer.body");
  LLVMBasicBlockRef walked = new_bb(g, "producer.walked");
  LLVMBuildBr(g->b, cond);
  LLVMPositionBuilderAtEnd(g->b, cond);
  LLVMValueRef i = LLVMBuildLoad2(g->b, g->i64, ctr, "");
  LLVMBuildCondBr(g->b, LLVMBuildICmp(g->b, LLVMIntSLT, i, hi64, ""), body, walked);
  LLVMPositionBuilderAtEnd(g->b, body);
  LLVMValueRef k = LLVMBuildLoad2(g->b, g->i32, nth, "");
  if (after > 0) {
    LLVMBasicBlockRef join = begin_if(g, LLVMBuildICmp(g->b, LLVMIntEQ, k, ci32(g, after), ""));
    produce_heads(g, heads_done);
    end_if(g, join);
  }
  LLVMBuildStore(g->b, LLVMBuildAdd(g->b, k, ci32(g, 1), ""), nth);
  LLVMValueRef sl = LLVMBuildLoad2(g->b, g->i32, slot, ""), ph = LLVMBuildLoad2(g->b, g->i32, phase, "");
  LLVMValueRef iv = LLVMBuildTrunc(g->b, i, g->i32, "");
  store_regs(g, fi->dst, &iv);
  /* the early set first, as soon as its stage is free: the others' may still be read */
  for (int set = ring_sets(p) - 1; set >= 0; set--) {
    mbar_wait(g, mbar_addr(g, set, 1, sl), ph, true);
    LLVMValueRef full = mbar_addr(g, set, 0, sl);
    LLVMValueRef ex[2] = {full, ci32(g, set ? s->early_bytes : s->tx_bytes - s->early_bytes)};
    asm_call_void(g, "mbarrier.arrive.expect_tx.shared::cta.b64 _, [$0], $1;", "r,r,~{memory}", ex, 2);
    for (int c = 0; c < (set == ring_sets(p) - 1 ? p->nchain : 0); c++)
      lower_inst(g, &f->insts[p->chain[c]]);
    for (int t = 0; t < p->nloads; t++)
      if ((p->early && p->early[t]) == set)
        tma_load(g, t, stage_base(g, &g->tiles[f->insts[p->loads[t]].dst], sl), full);
  }
  ring_advance(g, slot, phase, p->stages);
  LLVMBuildStore(g->b, LLVMBuildAdd(g->b, i, step64, ""), ctr);
  LLVMBuildBr(g->b, cond);
  LLVMPositionBuilderAtEnd(g->b, walked);
  if (after > 0) {
    LLVMValueRef k = LLVMBuildLoad2(g->b, g->i32, nth, "");
    LLVMBasicBlockRef join = begin_if(g, LLVMBuildICmp(g->b, LLVMIntSLE, k, ci32(g, after), ""));
    produce_heads(g, heads_done);
    end_if(g, join);
  }
  if (g->persistent)
    tile_loop_end(g, &tl);
  if (g->cluster) {
    /* The tail: every stage released by both blocks' consumers before this block may exit (the
     * peer's consumers arrive on our empty barriers; our multicast halves sit in its stages). */
    for (int k = 0; k < p->stages; k++) {
      for (int set = 0; set < ring_sets(p); set++)
        mbar_wait(g, mbar_addr(g, set, 1, LLVMBuildLoad2(g->b, g->i32, slot, "")), LLVMBuildLoad2(g->b, g->i32, phase, ""),
                  true);
      ring_advance(g, slot, phase, p->stages);
    }
  }
  LLVMBuildBr(g->b, done);
  LLVMPositionBuilderAtEnd(g->b, done);
  zero_wait_at_exit(g);
  LLVMBuildRetVoid(g->b);
}

/* Entry of the warp-specialized kernel: thread 0 initializes the mbarriers, everyone meets once
 * (the only block-wide barrier), then the roles part: the producer warpgroup (threads from
 * consumer_threads on) runs emit_producer and exits; the consumers raise their register budget
 * and run the kernel body. */
static void emit_roles(Cg *g) {
  const TirSchedule *s = g->sched;
  int stages = g->pipes[0].tp->stages;
  LLVMBasicBlockRef join = begin_if(g, LLVMBuildICmp(g->b, LLVMIntEQ, g->tid, ci32(g, 0), ""));
  for (int k = 0; k < stages * ring_sets(g->pipes[0].tp); k++) {
    LLVMValueRef a[2] = {mbar_addr(g, k >= stages, 0, ci32(g, k % stages)), ci32(g, 1)};
    asm_call_void(g, "mbarrier.init.shared::cta.b64 [$0], $1;", "r,r,~{memory}", a, 2);
    a[0] = mbar_addr(g, k >= stages, 1, ci32(g, k % stages));
    a[1] = ci32(g, s->consumer_threads / 32 * (g->cluster ? 2 : 1));
    asm_call_void(g, "mbarrier.init.shared::cta.b64 [$0], $1;", "r,r,~{memory}", a, 2);
  }
  for (int r = 0; r < (s->groups == 2 ? 2 : 0); r++) {
    LLVMValueRef a[2] = {turn_addr(g, ci32(g, r)), ci32(g, s->consumer_threads / 32)};
    asm_call_void(g, "mbarrier.init.shared::cta.b64 [$0], $1;", "r,r,~{memory}", a, 2);
  }
  for (int k = 0; k < (s->nheads ? 2 * s->head_stages : 0); k++) { /* full: the producer; empty: consumer warps */
    LLVMValueRef a[2] = {head_mbar(g, k & 1, ci32(g, k >> 1)), ci32(g, k & 1 ? s->consumer_threads / 32 : 1)};
    asm_call_void(g, "mbarrier.init.shared::cta.b64 [$0], $1;", "r,r,~{memory}", a, 2);
  }
  inline_asm0(g, "fence.mbarrier_init.release.cluster;");
  end_if(g, join);
  if (g->cluster) { /* the peer's barriers are initialized before anyone arrives on them */
    inline_asm0(g, "barrier.cluster.arrive.release.aligned;");
    inline_asm0(g, "barrier.cluster.wait.acquire.aligned;");
  } else {
    intrin0(g, "llvm.nvvm.barrier0");
  }
  LLVMBasicBlockRef prod = new_bb(g, "role.producer"), cons = new_bb(g, "role.consumer");
  LLVMBuildCondBr(g->b, LLVMBuildICmp(g->b, LLVMIntUGE, g->tid, ci32(g, s->consumer_threads * s->groups), ""), prod,
                  cons);
  LLVMPositionBuilderAtEnd(g->b, prod);
  emit_producer(g);
  LLVMPositionBuilderAtEnd(g->b, cons);
  char text[64];
  snprintf(text, sizeof text, "setmaxnreg.inc.sync.aligned.u32 %d;", s->consumer_regs);
  inline_asm0(g, text);
  LLVMBuildStore(g->b, ci32(g, 0), g->pipes[0].rslot);
  LLVMBuildStore(g->b, ci32(g, 0), g->pipes[0].phase);
  if (s->nheads) {
    g->head_count = entry_alloca(g, g->i32, 1);
    LLVMBuildStore(g->b, ci32(g, 0), g->head_count);
  }
  if (s->turns) { /* warpgroup 0 has the first turn: the last one passes it once, up front */
    LLVMValueRef last = LLVMBuildICmp(g->b, LLVMIntEQ, LLVMBuildLShr(g->b, g->tid, ci32(g, 7), ""),
                                      ci32(g, s->turns - 1), "");
    LLVMBasicBlockRef join = begin_if(g, last);
    turn_arrive(g, ci32(g, 0));
    end_if(g, join);
  }
  if (g->groups == 2) { /* from here on a group sees its own threads 0..127, as the kernel did */
    g->group = LLVMBuildLShr(g->b, g->tid, ci32(g, 7), "group");
    g->tid = LLVMBuildAnd(g->b, g->tid, ci32(g, 127), "");
    g->lane = LLVMBuildAnd(g->b, g->tid, ci32(g, 31), "lane");
    g->warp = LLVMBuildLShr(g->b, g->tid, ci32(g, 5), "warp");
    g->tile_j = entry_alloca(g, g->i32, 1);
    LLVMBuildStore(g->b, ci32(g, 0), g->tile_j);
  }
}

/* Masked scalar loads of elements r .. r+len-1 into the slots of tmp (the fill when masked). */
static void load_reg_scalars(Cg *g, const TirInst *in, const Access *ac, const TileType *tt, const Layout *L,
                             LLVMValueRef lw, int r, int len, LLVMValueRef tmp, LLVMValueRef fill) {
  ElemType e = tt->elem;
  LLVMTypeRef mt = mem_type(g, e), rt = reg_type(g, e);
  for (int j = 0; j < len; j++) {
    LLVMValueRef off, ok, idx = ci32(g, r + j);
    access_elem(g, in, ac, tt, L, lw, r + j, 1, &off, &ok);
    LLVMValueRef slot = LLVMBuildInBoundsGEP2(g->b, rt, tmp, &idx, 1, "");
    LLVMBuildStore(g->b, fill, slot);
    LLVMBasicBlockRef then = new_bb(g, "ld"), join = new_bb(g, "ld.j");
    LLVMBuildCondBr(g->b, ok, then, join);
    LLVMPositionBuilderAtEnd(g->b, then);
    LLVMValueRef v = LLVMBuildLoad2(g->b, mt, gaddr(g, in->arg_index, e, off), "");
    LLVMSetAlignment(v, (unsigned)elem_bytes(e));
    LLVMBuildStore(g->b, from_mem(g, e, v), slot);
    LLVMBuildBr(g->b, join);
    LLVMPositionBuilderAtEnd(g->b, join);
  }
}

/* Masked scalar loads of elements r .. r+len-1 (whole words of them), packed into the words of
 * wtmp from the word holding element r (the fill where masked). */
static void load_word_scalars(Cg *g, const TirInst *in, const Access *ac, const TileType *tt, const Layout *L,
                              LLVMValueRef lw, int r, int len, LLVMValueRef wtmp, LLVMValueRef fill) {
  ElemType e = tt->elem;
  int eb = elem_bytes(e), per = 4 / eb;
  LLVMTypeRef mt = mem_type(g, e);
  LLVMValueRef m[16];
  for (int j = 0; j < len; j++) {
    LLVMValueRef off, ok;
    access_elem(g, in, ac, tt, L, lw, r + j, 1, &off, &ok);
    LLVMBasicBlockRef from = LLVMGetInsertBlock(g->b), then = new_bb(g, "ld"), join = new_bb(g, "ld.j");
    LLVMBuildCondBr(g->b, ok, then, join);
    LLVMPositionBuilderAtEnd(g->b, then);
    LLVMValueRef v = LLVMBuildLoad2(g->b, mt, gaddr(g, in->arg_index, e, off), "");
    LLVMSetAlignment(v, (unsigned)eb);
    LLVMBuildBr(g->b, join);
    LLVMPositionBuilderAtEnd(g->b, join);
    m[j] = LLVMBuildPhi(g->b, mt, "");
    LLVMValueRef vals[2] = {fill, v};
    LLVMBasicBlockRef blocks[2] = {from, then};
    LLVMAddIncoming(m[j], vals, blocks, 2);
  }
  for (int i = 0; i < len / per; i++) {
    LLVMValueRef w = m[i * per];
    if (per > 1) {
      w = LLVMGetUndef(LLVMVectorType(mt, (unsigned)per));
      for (int j = 0; j < per; j++)
        w = LLVMBuildInsertElement(g->b, w, m[i * per + j], ci32(g, j), "");
    }
    LLVMValueRef idx = ci32(g, r / per + i);
    LLVMBuildStore(g->b, LLVMBuildBitCast(g->b, w, g->i32, ""), LLVMBuildInBoundsGEP2(g->b, g->i32, wtmp, &idx, 1, ""));
  }
}

/* Words w[0 .. words-1] into the word slots from `at` of wtmp. */
static void words_store(Cg *g, LLVMValueRef *w, int words, LLVMValueRef wtmp, int at) {
  for (int i = 0; i < words; i++) {
    LLVMValueRef idx = ci32(g, at + i);
    LLVMBuildStore(g->b, w[i], LLVMBuildInBoundsGEP2(g->b, g->i32, wtmp, &idx, 1, ""));
  }
}

/* ------------------------------------------- asynchronous shared-tile loads
 *
 * A LOAD into a shared tile at the top level (outside loops and ifs) that moves in 16-byte
 * chunks is issued as cp.async copies and waited for only where the tile is first read
 * (flush_copies: cp.async.wait_all, then a barrier), at the next control-flow marker, or at the
 * kernel's end. Meanwhile the block goes on, and the bytes in flight hold no registers: a row
 * kernel's weights, staged this way at its start, are in shared memory by the time the row's
 * statistics are known, instead of an L2 round trip after them (rmsnorm on the H200: up to +5%,
 * docs/performance.md round 4). The copies are cp.async.ca: a SM's blocks share the weights
 * through L1 (with .cg, L2 only, layernorm's 64 KB of weight and bias per block at 16384 columns
 * came from L2 for every block and ran 9% slower). TILEC_ASYNC_SHARED=0 (or TILEC_PIPELINE=0)
 * loads the tile through registers, synchronously (lower_load_shared). */

static bool async_shared_enabled(void) { return !env_off("TILEC_ASYNC_SHARED"); }

static bool async_shared_load(Cg *g, const TirInst *in) {
  return g->depth == 0 && async_shared_enabled() && tir_pipelining_enabled() && tir_load_moves_16_bytes(g->f, in);
}

static void flush_copies(Cg *g) {
  if (!g->copies_in_flight)
    return;
  intrin0(g, "llvm.nvvm.cp.async.wait.all");
  barrier(g);
  for (int r = 0; r < g->f->nregs; r++)
    g->tiles[r].in_flight = false;
  g->copies_in_flight = false;
}

/* The latest commit group of the in-flight tiles that instructions first..last read or write, or
 * -1 when they load a shared tile (a pipelined loop commits groups of its own at run time: wait
 * for all). */
static int groups_needed(Cg *g, int first, int last) {
  int need = 0;
  for (int i = first; i <= last; i++) {
    const TirInst *in = &g->f->insts[i];
    if (in->op == TIR_LOAD && i > first && g->tiles[in->dst].shared)
      return -1;
    for (int r = 0; r < g->f->nregs; r++)
      if (g->tiles[r].in_flight && r != g->prog_tile && (tir_inst_reads(in, r) || in->dst == r) &&
          g->tiles[r].group > need)
        need = g->tiles[r].group;
  }
  return need;
}

/* Waits for commit groups 1..k (the later ones may stay in flight), then a barrier. */
static void wait_groups(Cg *g, int k) {
  if (k == g->commits) {
    flush_copies(g);
    return;
  }
  cp_async_wait(g, g->commits - k);
  barrier(g);
  g->copies_in_flight = false;
  for (int r = 0; r < g->f->nregs; r++) {
    if (g->tiles[r].in_flight && g->tiles[r].group <= k)
      g->tiles[r].in_flight = false;
    g->copies_in_flight |= g->tiles[r].in_flight;
  }
}

/* In the loop of a progressive copy, before window `in` (at the loop counter c0, padded width
 * W): its parts up to (c0 + W - 1) / (S / parts), if the loop has not waited for them yet (the
 * counter only grows): `cp.async.wait_group` for the commit of that part (a switch over the
 * parts: the count is an immediate), then a barrier for the other threads' copies. Block-
 * uniform: the counter and the landed count are the same in every thread. */
static void wait_parts(Cg *g, const TirInst *in) {
  const Tile *t = &g->tiles[in->args[0]];
  int parts = t->parts, shift = layout_log2((uint32_t)(t->lay->shape[0] / parts));
  LLVMValueRef c0;
  get_tile(g, in->args[2], &c0);
  LLVMValueRef last = LLVMBuildAdd(g->b, c0, ci32(g, g->tiles[in->dst].lay->shape[0] - 1), "");
  LLVMValueRef need = LLVMBuildAShr(g->b, last, ci32(g, shift), "part");
  need = LLVMBuildSelect(g->b, LLVMBuildICmp(g->b, LLVMIntSGT, need, ci32(g, parts - 1), ""), ci32(g, parts - 1), need, "");
  LLVMValueRef landed = LLVMBuildLoad2(g->b, g->i32, g->prog_landed, "");
  LLVMBasicBlockRef join = begin_if(g, LLVMBuildICmp(g->b, LLVMIntSGT, need, landed, ""));
  bool barriered = g->barriered; /* the barrier below runs on one path */
  LLVMBasicBlockRef done = new_bb(g, "parts.landed");
  LLVMValueRef sw = LLVMBuildSwitch(g->b, need, done, (unsigned)parts);
  for (int p = 0; p < parts; p++) {
    LLVMBasicBlockRef w = new_bb(g, "part.wait");
    LLVMAddCase(sw, ci32(g, p), w);
    LLVMPositionBuilderAtEnd(g->b, w);
    cp_async_wait(g, g->commits - (t->group - parts + 1 + p));
    LLVMBuildBr(g->b, done);
  }
  LLVMPositionBuilderAtEnd(g->b, done);
  barrier(g);
  LLVMBuildStore(g->b, need, g->prog_landed);
  end_if(g, join);
  g->barriered = barriered;
}

/* Global memory written by one thread and then read or written by another of the block. */
enum { GMEM_STORED = 1, GMEM_ADDED, GMEM_MAXED };
enum { GMEM_LOADS_MIXED = -2 };

static int gmem_access(TirOp op) {
  return op == TIR_STORE ? GMEM_STORED : op == TIR_ATOMIC_ADD ? GMEM_ADDED : op == TIR_ATOMIC_MAX ? GMEM_MAXED : 0;
}

/* The block's state becomes s (NULL: nothing since a barrier). */
static void gmem_set(Cg *g, const GmemState *s) {
  for (int k = 0; k < g->f->nargs; k++) {
    g->gm->kind[k] = s ? s->kind[k] : 0;
    g->gm->load[k] = s ? s->load[k] : -1;
  }
}

/* A copy of the block's state (of an empty one before plan made it). */
static GmemState *gmem_save(Cg *g) {
  size_t n = (size_t)g->f->nargs + 1;
  GmemState *s = arena_alloc(g->f->arena, sizeof *s);
  s->kind = arena_alloc(g->f->arena, n);
  s->load = arena_alloc(g->f->arena, sizeof(int) * n);
  for (size_t k = 0; k < n; k++) {
    s->kind[k] = g->gm ? g->gm->kind[k] : 0;
    s->load[k] = g->gm ? g->gm->load[k] : -1;
  }
  return s;
}

/* The state after two paths join (one of them left s): what either did is owed after the join,
 * a write of two kinds as a store, loads of two places as mixed. */
static void gmem_join(Cg *g, const GmemState *s) {
  for (int k = 0; k < g->f->nargs; k++) {
    unsigned char a = s->kind[k], b = g->gm->kind[k];
    g->gm->kind[k] = a && b && a != b ? GMEM_STORED : a ? a : b;
    int la = s->load[k], lb = g->gm->load[k];
    g->gm->load[k] = la == -1 ? lb : lb == -1 || la == lb ? la : GMEM_LOADS_MIXED;
  }
}

/* The register tile an access moves: a LOAD's result, a STORE's or an atomic's value. */
static int access_tile(const TirInst *in) { return in->op == TIR_LOAD ? in->dst : in->args[0]; }

/* Whether access st (a STORE, an atomic, or another register LOAD) moves exactly the elements
 * register LOAD ld read, each in the thread that read it: the same index registers (each written
 * once, outside loop FOR `loop` when st is in its next iteration, so the same values) or equal
 * constants, the same sizes, and st's tile in the loaded tile's layout, which holds no element
 * twice. */
static bool same_thread_elements(const Cg *g, const TirInst *ld, const TirInst *st, int loop) {
  const TirFunc *f = g->f;
  int end = loop >= 0 ? tir_region_end(f, loop) : -1;
  for (int d = 0; d < f->args[st->arg_index].rank; d++) {
    const TirIndex *a = &ld->index[d], *b = &st->index[d];
    int w = tir_only_write(f, a->start);
    if (!same_value(f, a->start, b->start) || a->size != b->size || a->is_range != b->is_range || (loop <= w && w <= end))
      return false;
  }
  const Layout *l = g->tiles[ld->dst].lay;
  return layout_equal(l, g->tiles[access_tile(st)].lay) && !layout_zero_mask(l, LAY_LANE) && !layout_zero_mask(l, LAY_WARP);
}

/* Whether instruction in reads or writes a tensor the block accessed since the last barrier in a
 * way that may not reorder with it: anything after a store; a load or a store after an atomic,
 * an atomic after another kind (atomics of one kind commute); a write after a load of other
 * elements, or from other threads (a shifted copy `Y[r, 1 : +n] = Y[r, 0 : +n]`). loop >= 0:
 * in the next iteration of loop FOR `loop` (-1: in this one). */
static bool gmem_conflict(const Cg *g, const TirInst *in, int loop) {
  if (!tir_op_addresses(in->op) || in->arg_index < 0)
    return false;
  int was = g->gm->kind[in->arg_index], ld = g->gm->load[in->arg_index];
  if (was && (was == GMEM_STORED || gmem_access(in->op) != was))
    return true;
  return gmem_access(in->op) && ld != -1 &&
         (ld == GMEM_LOADS_MIXED || !same_thread_elements(g, &g->f->insts[ld], in, loop));
}

/* Records load in (index i) in the order state: the first register load, kept while the others
 * read the same elements in the same threads. */
static void gmem_note_load(Cg *g, const TirInst *in, int i) {
  int *ld = &g->gm->load[in->arg_index];
  if (*ld == -1 && !g->tiles[in->dst].shared)
    *ld = i;
  else if (*ld < 0 || g->tiles[in->dst].shared || !same_thread_elements(g, &g->f->insts[*ld], in, -1))
    *ld = GMEM_LOADS_MIXED;
}

/* Whether the iterations of loop FOR `first` touch disjoint elements of tensor argument arg:
 * along some dimension every access of its body takes a range that starts at the loop counter
 * and is no longer than the loop's constant step (the examples' `Y[r, c0 : +C]`). */
static bool iterations_disjoint(const TirFunc *f, int first, int arg) {
  const TirInst *fr = &f->insts[first];
  int w = tir_only_write(f, fr->args[2]), end = tir_region_end(f, first);
  if (w < 0 || f->insts[w].op != TIR_CONST || f->insts[w].imm < 1)
    return false;
  for (int d = 0; d < f->args[arg].rank; d++) {
    bool along = true;
    for (int j = first + 1; j < end && along; j++) {
      const TirInst *in = &f->insts[j];
      if (tir_op_addresses(in->op) && in->arg_index == arg)
        along = in->index[d].start == fr->dst && in->index[d].size <= f->insts[w].imm;
    }
    if (along)
      return true;
  }
  return false;
}

/* Before instruction in: a barrier when it (or, at a FOR or an IF, its body) touches a tensor
 * the block accessed in an earlier statement in a way gmem_conflict does not let reorder, so that
 * the program order the interpreter gives two statements holds between threads too (`Y[r, 0 :
 * +N] = ...; Y[r, k : +1] = ...`: the element k is stored by another thread first). bar.sync
 * orders the block's global accesses as well. */
static void order_global(Cg *g, const TirInst *in) {
  int i = (int)(in - g->f->insts);
  bool opens = in->op == TIR_FOR || in->op == TIR_IF;
  int last = opens ? tir_region_end(g->f, i) : i;
  for (int j = opens ? i + 1 : i; j <= last; j++)
    if (gmem_conflict(g, &g->f->insts[j], -1)) {
      barrier(g);
      break;
    }
  if (gmem_access(in->op))
    g->gm->kind[in->arg_index] = (unsigned char)gmem_access(in->op);
  else if (in->op == TIR_LOAD && in->arg_index >= 0)
    gmem_note_load(g, in, i);
}

/* At the end of the body of loop FOR `first`: a barrier when the next iteration's accesses
 * conflict with this one's (a row stored in place from shifted elements, iteration after
 * iteration) and the iterations do not touch disjoint elements. */
static void order_global_carried(Cg *g, int first) {
  int end = tir_region_end(g->f, first);
  for (int j = first + 1; j < end; j++) {
    const TirInst *in = &g->f->insts[j];
    if (gmem_conflict(g, in, first) && !iterations_disjoint(g->f, first, in->arg_index)) {
      barrier(g);
      return;
    }
  }
}

/* The last of the instructions from i on that only compute in registers (elementwise ops,
 * conversions, broadcasts, constants): a later group waited for within them would cost a second
 * barrier and overlap nothing (`d * inv * w + bias` with w and bias copied as two groups). */
static int register_run_end(const TirFunc *f, int i) {
  int j = i;
  while (j + 1 < f->ninsts) {
    TirOp op = f->insts[j + 1].op;
    bool cheap = tir_op_maps_elements(op) || op == TIR_BCAST || op == TIR_CONST || op == TIR_PARAM ||
                 op == TIR_DIM || op == TIR_BLOCK_ID || op == TIR_IOTA;
    if (!cheap)
      break;
    j++;
  }
  return j;
}

/* Before instruction in: wait for the copies of the tiles it reads or writes (a copy that lands
 * after a later write to the same tile would undo it) and, at a FOR or an IF, of those its body
 * does, so that nothing waits in a loop or a branch. Copies only wait for the groups they need:
 * a row copied as two tiles is reduced from its first while the second lands. ELSE, ENDFOR and
 * ENDIF need nothing: no copy is issued inside a body. */
static void wait_for_operands(Cg *g, const TirInst *in) {
  int i = (int)(in - g->f->insts);
  if (i == g->prog_end)
    g->prog_tile = -1; /* what the loop did not wait for, the next reader does */
  if (!g->copies_in_flight)
    return;
  bool opens = in->op == TIR_FOR || in->op == TIR_IF;
  if ((tir_op_info[in->op].flags & OPF_MARKER) && !opens)
    return;
  if (in->op == TIR_WINDOW && in->args[0] == g->prog_tile && g->tiles[in->args[0]].in_flight)
    wait_parts(g, in);
  for (int k = 0; k < g->sched->nprogs; k++) {
    int r = g->f->insts[g->sched->progs[k].load].dst;
    if (g->sched->progs[k].loop == i && g->tiles[r].in_flight && g->tiles[r].parts) {
      g->prog_tile = r;
      g->prog_end = tir_region_end(g->f, i);
      LLVMBuildStore(g->b, ci32(g, -1), g->prog_landed);
    }
  }
  int need = groups_needed(g, i, opens ? tir_region_end(g->f, i) : i);
  if (need > 0 && need < g->commits && !opens)
    need = groups_needed(g, i, register_run_end(g->f, i));
  if (need < 0)
    flush_copies(g);
  else if (need > 0)
    wait_groups(g, need);
}

static bool loop_has_owned_store(Cg *g, int first);

/* What must precede instruction in across threads: the barriers owed at the ends of loops of
 * owned window stores and before such a loop, the order of global accesses, the copies it
 * reads. */
static void sync_before(Cg *g, const TirInst *in) {
  int i = (int)(in - g->f->insts);
  bool owed = false;
  for (int k = 0; k < g->nbarrier_at; k++)
    if (i >= g->barrier_at[k]) {
      owed = true;
      g->barrier_at[k--] = g->barrier_at[--g->nbarrier_at];
    }
  if (owed)
    barrier(g);
  if (in->op == TIR_FOR && g->dirty && loop_has_owned_store(g, i))
    barrier(g); /* no thread may still read, from an earlier loop, what the stores overwrite */
  order_global(g, in);
  wait_for_operands(g, in);
}

static void lower_load(Cg *g, const TirInst *in) {
  int dst = in->dst;
  Tile *rg = &g->tiles[dst];
  /* a ring of rows: the stage this iteration reads holds its own row, copied at that row's shift */
  if (rg->pipe >= 0 && shifted_row_tile(g, dst))
    rg->shift = shifted_here(g, rg) ? row_misalign(g, in) : ci32(g, 0);
  if (rg->pipe >= 0 || rg->head || rg->ahead)
    return; /* issued ahead (pipe_top: copies or a lookahead load), or by the producer (head loads) */
  if (g->tiles[dst].shared && async_shared_load(g, in)) {
    if (g->dirty)
      barrier(g); /* earlier reads of this buffer (a second LOAD into the tile) are done */
    Tile *t = &g->tiles[dst];
    if (t->shifted)
      t->shift = row_misalign(g, in);
    int parts = t->parts && !t->shifted ? t->parts : 1;
    async_load_parts(g, in, ci32(g, 0), true, parts);
    t->parts = parts > 1 ? parts : 0;
    t->in_flight = g->copies_in_flight = true;
    t->group = g->commits += parts;
    return;
  }
  if (g->tiles[dst].shared) {
    lower_load_shared(g, in);
    return;
  }
  const TileType *tt = rtype(g, dst);
  const Layout *L = g->tiles[dst].lay;
  ElemType e = tt->elem;
  int n = g->tiles[dst].n, eb = elem_bytes(e), ch = global_chunk(in, &g->f->args[in->arg_index], L, e);
  int nch = n / ch, words = ch * eb / 4;
  Access ac;
  access_init(g, in, &ac);
  LLVMValueRef lw = layout_lw(g, L);
  LLVMTypeRef rt = reg_type(g, e);
  LLVMValueRef *out = vals_new(g, n);
  if (ch == 1) {
    LLVMValueRef tmp = entry_alloca(g, rt, n);
    load_reg_scalars(g, in, &ac, tt, L, lw, 0, n, tmp, const_elem(g, e, in->imm));
    for (int r = 0; r < n; r++) {
      LLVMValueRef idx = ci32(g, r);
      out[r] = LLVMBuildLoad2(g->b, rt, LLVMBuildInBoundsGEP2(g->b, rt, tmp, &idx, 1, ""), "");
    }
  } else {
    /* The paths meet in memory words, unpacked after the join: a phi per word rather than per
     * element (half the registers for f16), and the unpacking is left next to its uses, where
     * the rematerialization after O3 can repeat it instead of keeping a row of f32 alive. */
    LLVMValueRef wtmp = entry_alloca(g, g->i32, nch * words), fill = const_mem(g, e, in->imm);
    Chunks c = chunks_plan(g, in, &ac, tt, L, lw, n, ch);
    LLVMBasicBlockRef bb[3];
    LLVMValueRef *w = vals_new(g, nch * words);
    split3(g, c.all, bb);
    for (int k = 0; k < nch; k++)
      vec_load_words(g, c.p[k], words, w + k * words);
    words_store(g, w, nch * words, wtmp, 0);
    LLVMBuildBr(g->b, bb[2]);
    LLVMPositionBuilderAtEnd(g->b, bb[1]);
    for (int k = 0; k < nch; k++) {
      LLVMBasicBlockRef cb[3];
      split3(g, c.ok[k], cb);
      vec_load_words(g, c.p[k], words, w);
      words_store(g, w, words, wtmp, k * words);
      LLVMBuildBr(g->b, cb[2]);
      LLVMPositionBuilderAtEnd(g->b, cb[1]);
      load_word_scalars(g, in, &ac, tt, L, lw, k * ch, ch, wtmp, fill);
      LLVMBuildBr(g->b, cb[2]);
      LLVMPositionBuilderAtEnd(g->b, cb[2]);
    }
    LLVMBuildBr(g->b, bb[2]);
    LLVMPositionBuilderAtEnd(g->b, bb[2]);
    for (int i = 0; i < nch * words; i++) {
      LLVMValueRef idx = ci32(g, i);
      w[i] = LLVMBuildLoad2(g->b, g->i32, LLVMBuildInBoundsGEP2(g->b, g->i32, wtmp, &idx, 1, ""), "");
    }
    words_to_elems(g, e, nch * words, w, out);
  }
  /* Loaded values are exact in their type (and the fill is rounded): no rounding again. */
  store_regs(g, dst, out);
}

/* One chunk of ch values as a vector store (LLVM keeps st.global.v4 for stores). */
static void store_chunk(Cg *g, ElemType e, LLVMValueRef p, LLVMValueRef *v, int ch) {
  LLVMValueRef vec = LLVMGetUndef(LLVMVectorType(mem_type(g, e), (unsigned)ch));
  for (int j = 0; j < ch; j++)
    vec = LLVMBuildInsertElement(g->b, vec, to_mem(g, e, v[j]), ci32(g, j), "");
  LLVMSetAlignment(LLVMBuildStore(g->b, vec, p), (unsigned)(ch * elem_bytes(e)));
}

static void store_scalars(Cg *g, const TirInst *in, const Access *ac, const TileType *tt, const Layout *L,
                          LLVMValueRef lw, int r, int len, LLVMValueRef *v) {
  ElemType e = tt->elem;
  for (int j = 0; j < len; j++) {
    LLVMValueRef off, ok;
    access_elem(g, in, ac, tt, L, lw, r + j, 1, &off, &ok);
    LLVMBasicBlockRef then = new_bb(g, "st"), join = new_bb(g, "st.j");
    LLVMBuildCondBr(g->b, ok, then, join);
    LLVMPositionBuilderAtEnd(g->b, then);
    LLVMSetAlignment(LLVMBuildStore(g->b, to_mem(g, e, v[r + j]), gaddr(g, in->arg_index, e, off)),
                     (unsigned)elem_bytes(e));
    LLVMBuildBr(g->b, join);
    LLVMPositionBuilderAtEnd(g->b, join);
  }
}

/* What a STORE and an atomic share: the value's registers, its target's addressing, and the
 * guard through which only the thread holding each element writes it (layout_writer). */
static LLVMBasicBlockRef write_begin(Cg *g, const TirInst *in, LLVMValueRef **v, Access *ac, LLVMValueRef *lw) {
  int src = in->args[0];
  const Layout *L = g->tiles[src].lay;
  *v = vals_new(g, g->tiles[src].n);
  get_tile(g, src, *v);
  access_init(g, in, ac);
  *lw = layout_lw(g, L);
  return begin_if(g, layout_writer(g, L));
}

/* One 16-byte granule of a shifted STORE's row (store_shifted), from the staging buffer at src
 * to global elements back .. back + ch - 1 (tile columns tc0 ..): one vector store where every
 * element is the STORE's to write (inside the logical tile and the tensor), else element by
 * element. */
static void store_granule(Cg *g, const TirInst *in, const Granule *gr, LLVMValueRef src, LLVMValueRef back,
                          LLVMValueRef tc0) {
  ElemType e = rtype(g, in->args[0])->elem;
  int eb = elem_bytes(e), ch = 16 / eb;
  LLVMTypeRef mt = mem_type(g, e), vt = LLVMVectorType(mt, (unsigned)ch);
  LLVMBasicBlockRef bb[3];
  split3(g, granule_span_ok(g, gr, tc0, LLVMBuildAdd(g->b, tc0, ci32(g, ch), "")), bb);
  LLVMValueRef x = LLVMBuildLoad2(g->b, vt, src, "");
  LLVMSetAlignment(x, 16);
  LLVMSetAlignment(LLVMBuildStore(g->b, x, gaddr(g, in->arg_index, e, back)), 16);
  LLVMBuildBr(g->b, bb[2]);
  LLVMPositionBuilderAtEnd(g->b, bb[1]);
  for (int p = 0; p < ch; p++) {
    LLVMBasicBlockRef j = begin_if(g, granule_elem_ok(g, gr, LLVMBuildAdd(g->b, tc0, ci32(g, p), "")));
    LLVMValueRef y = LLVMBuildLoad2(g->b, mt, smem_at(g, src, ci32(g, p * eb)), "");
    LLVMSetAlignment(y, (unsigned)eb);
    LLVMSetAlignment(LLVMBuildStore(g->b, y, gaddr(g, in->arg_index, e, LLVMBuildAdd(g->b, back, ci64(g, p), ""))),
                     (unsigned)eb);
    end_if(g, j);
  }
  LLVMBuildBr(g->b, bb[2]);
  LLVMPositionBuilderAtEnd(g->b, bb[2]);
}

/* The pair of 2-byte elements a, b as one 32-bit word (a in the low half). */
static LLVMValueRef pack_pair(Cg *g, ElemType e, LLVMValueRef a, LLVMValueRef b) {
  LLVMTypeRef vt = LLVMVectorType(mem_type(g, e), 2);
  LLVMValueRef v = LLVMBuildInsertElement(g->b, LLVMGetUndef(vt), to_mem(g, e, a), ci32(g, 0), "");
  v = LLVMBuildInsertElement(g->b, v, to_mem(g, e, b), ci32(g, 1), "");
  return LLVMBuildBitCast(g->b, v, g->i32, "");
}

static void smem_store(Cg *g, LLVMValueRef base, LLVMValueRef byte, LLVMValueRef v, unsigned align) {
  LLVMSetAlignment(LLVMBuildStore(g->b, v, smem_at(g, base, byte)), align);
}

/* One chunk (8 elements of 2 bytes) of a shifted STORE's row into its staging buffer at element
 * idx + shift: 32-bit stores of element pairs, four where the shift is even, else one 2-byte
 * store at each end and three words between (the words at the ends are shared with the
 * neighbouring chunks, written by other threads). Element by element, the warp's 2-byte stores
 * 16 bytes apart took four-way bank conflicts each, eight a chunk. */
static void shifted_chunk_store(Cg *g, LLVMValueRef base, LLVMValueRef idx, LLVMValueRef shift, ElemType e,
                                LLVMValueRef *v) {
  LLVMValueRef byte = LLVMBuildShl(g->b, LLVMBuildAdd(g->b, idx, shift, ""), ci32(g, 1), "");
  LLVMBasicBlockRef bb[3];
  split3(g, LLVMBuildICmp(g->b, LLVMIntEQ, LLVMBuildAnd(g->b, shift, ci32(g, 1), ""), ci32(g, 0), ""), bb);
  for (int j = 0; j < 4; j++)
    smem_store(g, base, LLVMBuildAdd(g->b, byte, ci32(g, 4 * j), ""), pack_pair(g, e, v[2 * j], v[2 * j + 1]), 4);
  LLVMBuildBr(g->b, bb[2]);
  LLVMPositionBuilderAtEnd(g->b, bb[1]);
  smem_store(g, base, byte, to_mem(g, e, v[0]), 2);
  for (int j = 0; j < 3; j++)
    smem_store(g, base, LLVMBuildAdd(g->b, byte, ci32(g, 2 + 4 * j), ""), pack_pair(g, e, v[2 * j + 1], v[2 * j + 2]), 4);
  smem_store(g, base, LLVMBuildAdd(g->b, byte, ci32(g, 14), ""), to_mem(g, e, v[7]), 2);
  LLVMBuildBr(g->b, bb[2]);
  LLVMPositionBuilderAtEnd(g->b, bb[2]);
}

/* A STORE whose rows may be misaligned, through its staging buffer (plan_shifted_store): each
 * writer puts its elements in the buffer, row i shifted by its misalignment shift_i, a barrier,
 * then each stores the 16-byte aligned granules that start in its chunks (the row's last chunk
 * also the granule after it; store_granule). The barrier before: the buffer's last readers. */
static void store_shifted(Cg *g, const TirInst *in, const Access *ac, LLVMValueRef *v, LLVMValueRef lw) {
  const Tile *st = &g->shift_stage[in - g->f->insts];
  int src = in->args[0];
  const TileType *tt = rtype(g, src);
  const Layout *L = g->tiles[src].lay;
  ElemType e = tt->elem;
  int eb = elem_bytes(e), ch = 16 / eb, n = g->tiles[src].n, last = tt->rank - 1;
  LLVMValueRef soff = ci32(g, st->smem_off);
  LLVMValueRef base = st->view_of >= 0 ? tile_base(g, &g->tiles[st->view_of])
                                       : LLVMBuildInBoundsGEP2(g->b, g->i8, g->smem, &soff, 1, "");
  LLVMValueRef *shift = vals_new(g, n / ch), *back = vals_new(g, n / ch), *row_ok = vals_new(g, n / ch), off, col;
  for (int k = 0; k < n / ch; k++) {
    access_at(g, in, ac, tt, L, lw, k * ch, 1, &off, &row_ok[k], &col);
    shift[k] = elem_misalign(g, in, off, eb);
    back[k] = LLVMBuildSub(g->b, off, LLVMBuildZExt(g->b, shift[k], g->i64, ""), "");
  }
  barrier(g);
  LLVMBasicBlockRef wj = begin_if(g, layout_writer(g, L));
  for (int r = 0; eb == 2 && r < n; r += ch) /* 2-byte elements: chunks of 8 (moves_16_byte_chunks) */
    shifted_chunk_store(g, base, buf_index(g, L, lw, r, st->pitch), shift[r / ch], e, v + r);
  for (int r = 0; eb != 2 && r < n; r++) {
    LLVMValueRef idx = LLVMBuildAdd(g->b, buf_index(g, L, lw, r, st->pitch), shift[r / ch], "");
    smem_store(g, base, LLVMBuildMul(g->b, idx, ci32(g, eb), ""), to_mem(g, e, v[r]), (unsigned)eb);
  }
  end_if(g, wj);
  barrier(g);
  Granule gr = granule_of(g, ac, tt, L);
  wj = begin_if(g, layout_writer(g, L));
  for (int k = 0; k < n / ch; k++) {
    LLVMValueRef tcol = elem_dim(g, L, lw, k * ch, last), tc0 = LLVMBuildSub(g->b, tcol, shift[k], "");
    LLVMValueRef src_at = smem_at(g, base, LLVMBuildMul(g->b, buf_index(g, L, lw, k * ch, st->pitch), ci32(g, eb), ""));
    gr.row_ok = row_ok[k];
    store_granule(g, in, &gr, src_at, back[k], tc0);
    LLVMValueRef row_end = LLVMBuildICmp(g->b, LLVMIntEQ, tcol, ci32(g, gr.shape - ch), "");
    LLVMBasicBlockRef j = begin_if(g, LLVMBuildAnd(g->b, row_end, LLVMBuildICmp(g->b, LLVMIntNE, shift[k], ci32(g, 0), ""), ""));
    store_granule(g, in, &gr, smem_at(g, src_at, ci32(g, 16)), LLVMBuildAdd(g->b, back[k], ci64(g, ch), ""),
                  LLVMBuildAdd(g->b, tc0, ci32(g, ch), ""));
    end_if(g, j);
  }
  end_if(g, wj);
  g->dirty = true; /* the buffer was read; and on the other path no barrier ran */
  g->red_read[0] = g->red_read[1] = true;
}

/* The chunks of a STORE: all at once where the thread's chunks are in bounds and aligned, else
 * chunk by chunk (a masked chunk element by element). */
static void store_chunks(Cg *g, const TirInst *in, const Access *ac, LLVMValueRef lw, LLVMValueRef *v) {
  int src = in->args[0];
  const TileType *tt = rtype(g, src);
  const Layout *L = g->tiles[src].lay;
  ElemType e = tt->elem;
  int n = g->tiles[src].n, ch = global_chunk(in, &g->f->args[in->arg_index], L, e);
  if (ch == 1) {
    store_scalars(g, in, ac, tt, L, lw, 0, n, v);
  } else {
    Chunks c = chunks_plan(g, in, ac, tt, L, lw, n, ch);
    LLVMBasicBlockRef bb[3];
    split3(g, c.all, bb);
    for (int k = 0; k < c.count; k++)
      store_chunk(g, e, c.p[k], v + k * ch, ch);
    LLVMBuildBr(g->b, bb[2]);
    LLVMPositionBuilderAtEnd(g->b, bb[1]);
    for (int k = 0; k < c.count; k++) {
      LLVMBasicBlockRef cb[3];
      split3(g, c.ok[k], cb);
      store_chunk(g, e, c.p[k], v + k * ch, ch);
      LLVMBuildBr(g->b, cb[2]);
      LLVMPositionBuilderAtEnd(g->b, cb[1]);
      store_scalars(g, in, ac, tt, L, lw, k * ch, ch, v);
      LLVMBuildBr(g->b, cb[2]);
      LLVMPositionBuilderAtEnd(g->b, cb[2]);
    }
    LLVMBuildBr(g->b, bb[2]);
    LLVMPositionBuilderAtEnd(g->b, bb[2]);
  }
}

static void lower_store(Cg *g, const TirInst *in) {
  int tm = tma_store_map(g, in);
  if (tm >= 0) {
    tma_store(g, in, tm);
    return;
  }
  LLVMValueRef *v, lw;
  Access ac;
  if (!g->shift_stage[in - g->f->insts].pitch || g->aligned_version) {
    LLVMBasicBlockRef wj = write_begin(g, in, &v, &ac, &lw);
    store_chunks(g, in, &ac, lw, v);
    end_if(g, wj);
    return;
  }
  /* a shifted store: the barriers of the misaligned path are the block's, so the writer guard
   * is inside each path */
  int src = in->args[0];
  const Layout *L = g->tiles[src].lay;
  v = vals_new(g, g->tiles[src].n);
  get_tile(g, src, v);
  access_init(g, in, &ac);
  lw = layout_lw(g, L);
  LLVMBasicBlockRef bb[3];
  split3(g, rows_aligned(g, in, &ac, elem_bytes(rtype(g, src)->elem)), bb);
  LLVMBasicBlockRef wj = begin_if(g, layout_writer(g, L));
  store_chunks(g, in, &ac, lw, v);
  end_if(g, wj);
  LLVMBuildBr(g->b, bb[2]);
  LLVMPositionBuilderAtEnd(g->b, bb[1]);
  bool barriered = g->barriered; /* store_shifted's barriers run on the misaligned path only */
  store_shifted(g, in, &ac, v, lw);
  g->barriered = barriered;
  LLVMBuildBr(g->b, bb[2]);
  LLVMPositionBuilderAtEnd(g->b, bb[2]);
}

/* Elements r .. r+len-1 of an atomic, one relaxed read-modify-write each, masked like a store.
 * The result is unused: ptxas turns it into red.global. LLVM expands what the arch lacks (bf16
 * add before sm_90, f32 max) into a compare-and-swap loop. */
static void atomic_scalars(Cg *g, const TirInst *in, const Access *ac, LLVMValueRef lw, int r, int len,
                           LLVMValueRef *v) {
  const TileType *tt = rtype(g, in->args[0]);
  const Layout *L = g->tiles[in->args[0]].lay;
  ElemType e = tt->elem;
  LLVMAtomicRMWBinOp op = in->op == TIR_ATOMIC_ADD ? (e == TY_I32 ? LLVMAtomicRMWBinOpAdd : LLVMAtomicRMWBinOpFAdd)
                                                   : (e == TY_I32 ? LLVMAtomicRMWBinOpMax : LLVMAtomicRMWBinOpFMax);
  for (int j = r; j < r + len; j++) {
    LLVMValueRef off, ok;
    access_elem(g, in, ac, tt, L, lw, j, 1, &off, &ok);
    LLVMBasicBlockRef then = new_bb(g, "atom"), join = new_bb(g, "atom.j");
    LLVMBuildCondBr(g->b, ok, then, join);
    LLVMPositionBuilderAtEnd(g->b, then);
    LLVMBuildAtomicRMW(g->b, op, gaddr(g, in->arg_index, e, off), to_mem(g, e, v[j]), LLVMAtomicOrderingMonotonic, 0);
    LLVMBuildBr(g->b, join);
    LLVMPositionBuilderAtEnd(g->b, join);
  }
}

/* One sm_90 vector reduction of ch (2 or 4) f32 values at p (aligned to ch * 4 bytes). */
static void red_add_f32_vec(Cg *g, LLVMValueRef p, LLVMValueRef *v, int ch) {
  char regs[48], text[96], cons[32] = "l";
  asm_regs(regs, sizeof regs, 1, ch);
  snprintf(text, sizeof text, "red.relaxed.gpu.global.add%s.f32 [$0], %s;", vec_suffix(ch), regs);
  LLVMValueRef args[5] = {LLVMBuildPtrToInt(g->b, p, g->i64, "")};
  for (int j = 0; j < ch; j++) {
    args[1 + j] = v[j];
    strcat(cons, ",f");
  }
  strcat(cons, ",~{memory}");
  asm_call_void(g, text, cons, args, 1 + ch);
}

/* The vector width of an f32 ATOMIC_ADD on sm_90 (red.global.add.v2/.v4.f32): the thread's runs
 * of contiguous elements (layout_vec_width: a run's registers are distinct elements, so a replica
 * is a whole run, skipped like a replica element); 1 elsewhere. The atomics of
 * dW-style sums (one per column per block, all blocks on the same addresses) are what the L2
 * serializes: a vector is one operation for 2-4 columns. */
static int atomic_vec_chunk(Cg *g, const TirInst *in, const Layout *L, ElemType e) {
  if (in->op != TIR_ATOMIC_ADD || e != TY_F32 || g->o->arch != ARCH_SM90A || env_off("TILEC_VEC_ATOMICS"))
    return 1;
  int ch = global_chunk(in, &g->f->args[in->arg_index], L, e);
  ch = ch > 4 ? 4 : ch;
  return ch >= 2 ? ch : 1;
}

/* ATOMIC_ADD / ATOMIC_MAX: each element combined exactly once, by the one thread that writes it
 * (layout_writer) and never for a register replica; where atomic_vec_chunk allows, a run in
 * bounds and aligned as one vector reduction, else element by element. */
static void lower_atomic(Cg *g, const TirInst *in) {
  int src = in->args[0];
  const TileType *tt = rtype(g, src);
  const Layout *L = g->tiles[src].lay;
  int n = g->tiles[src].n, ch = atomic_vec_chunk(g, in, L, tt->elem);
  uint32_t replica = layout_zero_mask(L, LAY_REG);
  LLVMValueRef *v, lw;
  Access ac;
  LLVMBasicBlockRef wj = write_begin(g, in, &v, &ac, &lw);
  Chunks c = {0};
  if (ch > 1)
    c = chunks_plan(g, in, &ac, tt, L, lw, n, ch);
  for (int r = 0; r < n; r += ch) {
    if ((uint32_t)r & replica)
      continue;
    if (ch == 1) {
      atomic_scalars(g, in, &ac, lw, r, 1, v);
      continue;
    }
    LLVMBasicBlockRef bb[3];
    split3(g, c.ok[r / ch], bb);
    red_add_f32_vec(g, c.p[r / ch], v + r, ch);
    LLVMBuildBr(g->b, bb[2]);
    LLVMPositionBuilderAtEnd(g->b, bb[1]);
    atomic_scalars(g, in, &ac, lw, r, ch, v);
    LLVMBuildBr(g->b, bb[2]);
    LLVMPositionBuilderAtEnd(g->b, bb[2]);
  }
  end_if(g, wj);
}

/* ---------------------------------------------------- control flow */

/* The pipelined loop whose FOR is instruction i, or NULL. */
static Pipe *pipe_at(Cg *g, int i) {
  for (int k = 0; k < g->npipes; k++)
    if (g->pipes[k].tp->first == i)
      return &g->pipes[k];
  return NULL;
}

static void lower_marker(Cg *g, const TirInst *in) {
  /* Markers break the straight-line view of shared-memory state: assume a read happened, and no
   * barrier on every path. */
  bool barriered = g->barriered;
  g->dirty = true;
  g->red_read[0] = g->red_read[1] = true;
  g->barriered = false;
  switch (in->op) {
  case TIR_FOR: {
    if (g->depth == MAX_NEST) {
      cg_error(g, "control flow nested deeper than %d", MAX_NEST);
      return;
    }
    Nest *ns = &g->nest[g->depth++];
    ns->op = TIR_FOR;
    ns->ind = in->dst;
    ns->first = (int)(in - g->f->insts);
    ns->gm = gmem_save(g);
    ns->pipe = pipe_at(g, (int)(in - g->f->insts));
    LLVMValueRef lo, hi, step;
    get_tile(g, in->args[0], &lo);
    get_tile(g, in->args[1], &hi);
    get_tile(g, in->args[2], &step);
    /* A hidden 64-bit counter, bounds read once: the interpreter's loop. */
    ns->counter = entry_alloca(g, g->i64, 1);
    ns->hi = LLVMBuildSExt(g->b, hi, g->i64, "");
    ns->step = LLVMBuildSExt(g->b, step, g->i64, "");
    LLVMBuildStore(g->b, LLVMBuildSExt(g->b, lo, g->i64, ""), ns->counter);
    ns->join = NULL;
    if (ns->pipe && !g->ws && ns->pipe->tp->overlap_dot >= 0) {
      /* A loop that runs no iteration skips the drain: its accumulator (the zeros before the
       * loop) must not meet the in-flight wgmma group's registers before the drain's wait, or
       * ptxas sees non-wgmma writes of them inside the group and serializes every wgmma of the
       * entry (C7515). */
      LLVMBasicBlockRef run = new_bb(g, "for.run");
      ns->join = new_bb(g, "for.join");
      LLVMBuildCondBr(g->b, LLVMBuildICmp(g->b, LLVMIntSLT, LLVMBuildSExt(g->b, lo, g->i64, ""), ns->hi, ""), run,
                      ns->join);
      LLVMPositionBuilderAtEnd(g->b, run);
    }
    if (ns->pipe)
      pipe_prologue(g, ns->pipe, LLVMBuildSExt(g->b, lo, g->i64, ""), ns->hi, ns->step);
    ns->cond = new_bb(g, "for");
    LLVMBasicBlockRef body = new_bb(g, "for.body");
    ns->exit = new_bb(g, "for.end");
    LLVMBuildBr(g->b, ns->cond);
    LLVMPositionBuilderAtEnd(g->b, ns->cond);
    LLVMValueRef i = LLVMBuildLoad2(g->b, g->i64, ns->counter, "");
    LLVMBuildCondBr(g->b, LLVMBuildICmp(g->b, LLVMIntSLT, i, ns->hi, ""), body, ns->exit);
    LLVMPositionBuilderAtEnd(g->b, body);
    LLVMValueRef iv = LLVMBuildTrunc(g->b, i, g->i32, "");
    put_tile(g, in->dst, &iv);
    return;
  }
  case TIR_ENDFOR: {
    Nest *ns = &g->nest[--g->depth];
    order_global_carried(g, ns->first);
    if (ns->pipe && ring_private(g, ns->pipe)) {
      if (g->odd_slots_used && !barriered) /* the one every iteration runs (pipe_top) */
        barrier(g);
      g->red_odd = NULL; /* no loop inside its body (ring_is_thread_private) */
    }
    if (ns->pipe)
      pipe_advance(g, ns->pipe);
    LLVMValueRef i = LLVMBuildLoad2(g->b, g->i64, ns->counter, "");
    LLVMBuildStore(g->b, LLVMBuildAdd(g->b, i, ns->step, ""), ns->counter);
    LLVMBuildBr(g->b, ns->cond);
    LLVMPositionBuilderAtEnd(g->b, ns->exit);
    gmem_join(g, ns->gm);
    if (ns->pipe && !g->ws)
      intrin0(g, "llvm.nvvm.cp.async.wait.all"); /* nothing is left in flight; kept for clarity of the protocol */
    if (ns->pipe && ns->pipe->tp->overlap_dot >= 0) {
      /* The last iteration's wgmma group (none if the loop did not run: the wait is then a
       * no-op) retires before anything reads the accumulator or writes shared memory. */
      int acc = g->f->insts[ns->pipe->tp->overlap_dot].dst;
      LLVMValueRef *v = vals_new(g, g->tiles[acc].n);
      get_tile(g, acc, v);
      nvwgmma_drain(g->ctx, g->b, v, g->tiles[acc].n);
      store_regs(g, acc, v);
      if (g->ws) { /* the last iteration's stage: its group retired with the drain */
        ws_release(g, ns->pipe, 1, false);
        if (ns->pipe->tp->early_tail) /* the last iteration's unread product read the early set */
          ws_release(g, ns->pipe, 1, true);
      }
    }
    if (ns->pipe && g->groups == 2) /* the other group's turn */
      warp_arrive(g, turn_addr(g, LLVMBuildXor(g->b, g->group, ci32(g, 1), "")), elected(g), false);
    if (ns->join) {
      LLVMBuildBr(g->b, ns->join);
      LLVMPositionBuilderAtEnd(g->b, ns->join);
    }
    return;
  }
  case TIR_IF: {
    if (g->depth == MAX_NEST) {
      cg_error(g, "control flow nested deeper than %d", MAX_NEST);
      return;
    }
    Nest *ns = &g->nest[g->depth++];
    ns->op = TIR_IF;
    ns->end_bb = NULL;
    ns->gm = gmem_save(g);
    LLVMValueRef c;
    get_tile(g, in->args[0], &c);
    LLVMBasicBlockRef then = new_bb(g, "then");
    ns->false_bb = new_bb(g, "else");
    LLVMBuildCondBr(g->b, c, then, ns->false_bb);
    LLVMPositionBuilderAtEnd(g->b, then);
    return;
  }
  case TIR_ELSE: {
    Nest *ns = &g->nest[g->depth - 1];
    ns->end_bb = new_bb(g, "endif");
    LLVMBuildBr(g->b, ns->end_bb);
    LLVMPositionBuilderAtEnd(g->b, ns->false_bb);
    GmemState *then = gmem_save(g); /* the ELSE starts from the state at the IF */
    gmem_set(g, ns->gm);
    ns->gm = then;
    return;
  }
  default: { /* ENDIF */
    Nest *ns = &g->nest[--g->depth];
    LLVMBasicBlockRef next = ns->end_bb ? ns->end_bb : ns->false_bb;
    LLVMBuildBr(g->b, next);
    LLVMPositionBuilderAtEnd(g->b, next);
    gmem_join(g, ns->gm); /* THEN's state after an ELSE; else the state at the IF (not taken) */
    return;
  }
  }
}

/* Every thread of every block of the cluster arrives, then waits: the release / acquire order
 * each block's shared-memory writes before its peers' reads (and is a block barrier too). */
static void cluster_barrier(Cg *g) {
  inline_asm0(g, "barrier.cluster.arrive.release.aligned;");
  inline_asm0(g, "barrier.cluster.wait.acquire.aligned;");
}

/* CLUSTER_SUM / CLUSTER_MAX (at the top level: every thread of every block gets here once, in
 * the same order): thread 0 writes the block's value to its own 4-byte slot (one per reduction,
 * never rewritten, so no barrier protects a slot from the next reduction), a cluster barrier,
 * then every thread reads all the blocks' slots through distributed shared memory (mapa) and
 * combines them in rank order, so every block gets the same bits. The kernel's end has one more
 * cluster barrier (a block's shared memory goes with it). */
static void lower_cluster_reduce(Cg *g, const TirInst *in) {
  int k = g->cluster_ops++, n = g->f->cluster;
  LLVMValueRef v, off = ci32(g, 4 * k);
  get_tile(g, in->args[0], &v);
  LLVMValueRef slot = LLVMBuildInBoundsGEP2(g->b, g->i8, slot_base(g, SLOT_CLUSTER, 4 * (k + 1)), &off, 1, "");
  LLVMBasicBlockRef j = begin_if(g, LLVMBuildICmp(g->b, LLVMIntEQ, g->tid, ci32(g, 0), ""));
  LLVMBuildStore(g->b, v, slot);
  end_if(g, j);
  cluster_barrier(g);
  LLVMTypeRef at[2] = {g->i32, g->i32};
  LLVMTypeRef ft = LLVMFunctionType(g->f32, at, 2, 0);
  static const char text[] = "{\n.reg .b32 ra;\nmapa.shared::cluster.u32 ra, $1, $2;\nld.shared::cluster.f32 $0, [ra];\n}";
  LLVMValueRef fn = LLVMGetInlineAsm(ft, (char *)text, strlen(text), "=f,r,r,~{memory}", 16, 1, 0,
                                     LLVMInlineAsmDialectATT, 0);
  LLVMValueRef local = LLVMBuildPtrToInt(g->b, slot, g->i32, ""), r = NULL;
  for (int b = 0; b < n; b++) {
    LLVMValueRef args[2] = {local, ci32(g, b)};
    LLVMValueRef x = LLVMBuildCall2(g->b, ft, fn, args, 2, "");
    r = !r ? x : in->op == TIR_CLUSTER_SUM ? LLVMBuildFAdd(g->b, r, x, "") : ovl2(g, "llvm.maxnum", r, x);
  }
  store_regs(g, in->dst, &r);
}

/* ANY (an any-guard's condition, docs/tir.md): whether some element this thread holds is true,
 * then the same for its warp (vote.any), so that the guard branches the warp as one. */
static void lower_any(Cg *g, const TirInst *in) {
  if (g->protocol_only) { /* an idle warpgroup's loop: the guard's body is not protocol */
    LLVMValueRef no = LLVMConstInt(g->i1, 0, 0);
    store_regs(g, in->dst, &no);
    return;
  }
  int n = g->tiles[in->args[0]].n;
  LLVMValueRef *v = vals_new(g, n), some = LLVMConstInt(g->i1, 0, 0);
  get_tile(g, in->args[0], v);
  for (int k = 0; k < n; k++)
    some = LLVMBuildOr(g->b, some, v[k], "");
  LLVMValueRef args[2] = {ci32(g, -1), some};
  LLVMValueRef r = call_intrin(g, "llvm.nvvm.vote.any.sync", NULL, 0, args, 2);
  store_regs(g, in->dst, &r);
}

/* An out tensor declared `= 0` is zeroed by the runtime in a launch just before this kernel's,
 * which sm_90 lets this kernel overlap (programmatic dependent launch, runtime/zero.c): the
 * kernel's first access to such a tensor waits for that launch to complete. A kernel that reads
 * one waits at its start (its loads may be ring copies the pipeline issues anywhere); otherwise
 * each store or atomic waits, which after the first costs an instruction: the accumulating kernels
 * (dW and dB of layernorm backward) write them once, after their row loop. */
static bool zero_wait_at_entry(const TirFunc *f) {
  for (int i = 0; i < f->ninsts; i++)
    if (f->insts[i].op == TIR_LOAD && f->args[f->insts[i].arg_index].zero_init)
      return true;
  return false;
}

static bool waits_for_zeroing(const Cg *g) {
  if (g->o->arch != ARCH_SM90A)
    return false;
  for (int i = 0; i < g->f->nargs; i++)
    if (g->f->args[i].zero_init)
      return true;
  return false;
}

/* Every block also waits before it exits (at once, by then), so that the kernel never completes
 * before the zeroing it overlaps, whichever blocks wrote: what follows in the stream then finds
 * the tensors zeroed. */
static void zero_wait_at_exit(Cg *g) {
  if (waits_for_zeroing(g))
    inline_asm0(g, "griddepcontrol.wait;");
}

static void zero_wait(Cg *g, const TirInst *in) {
  bool writes = in->op == TIR_STORE || in->op == TIR_ATOMIC_ADD || in->op == TIR_ATOMIC_MAX;
  if (writes && g->f->args[in->arg_index].zero_init && waits_for_zeroing(g) && !zero_wait_at_entry(g->f))
    inline_asm0(g, "griddepcontrol.wait;");
}

static void lower_inst(Cg *g, const TirInst *in) {
  g->loc = in->loc;
  if (in->dst >= 0 && g->in_index_select[in->dst])
    return; /* lowered with its select */
  if (in->op == TIR_SELECT && lower_index_select(g, in))
    return;
  unsigned fl = tir_op_info[in->op].flags;
  zero_wait(g, in);
  if (fl & OPF_MARKER)
    lower_marker(g, in);
  else if (tir_op_maps_elements(in->op))
    lower_elemwise(g, in);
  else
    switch (in->op) {
    case TIR_CONST:
    case TIR_PARAM:
    case TIR_DIM:
    case TIR_BLOCK_ID:
    case TIR_ROW_SHIFT:
    case TIR_IOTA: lower_leaf(g, in); break;
    case TIR_BCAST:
    case TIR_TRANS:
    case TIR_RESHAPE:
    case TIR_EXTRACT: lower_copyish(g, in); break;
    case TIR_WINDOW: lower_window(g, in); break;
    case TIR_WINDOW_STORE: lower_window_store(g, in); break;
    case TIR_REDUCE_SUM:
    case TIR_REDUCE_MAX:
    case TIR_REDUCE_MIN: lower_reduce(g, in); break;
    case TIR_DOT: lower_dot(g, in); break;
    case TIR_LOAD: lower_load(g, in); break;
    case TIR_STORE: lower_store(g, in); break;
    case TIR_ATOMIC_ADD:
    case TIR_ATOMIC_MAX: lower_atomic(g, in); break;
    case TIR_PIPE_WAIT:
    case TIR_PIPE_RELEASE: lower_pipe_sync(g, in); break;
    case TIR_DOT_WAIT: lower_dot_wait(g, in); break;
    case TIR_WG_TURN:
    case TIR_WG_PASS: lower_turn(g, in); break;
    case TIR_HEAD_WAIT:
    case TIR_HEAD_RELEASE: lower_head_sync(g, in); break;
    case TIR_CLUSTER_SUM:
    case TIR_CLUSTER_MAX: lower_cluster_reduce(g, in); break;
    case TIR_ANY: lower_any(g, in); break;
    default: cg_error(g, "internal error: op %s has no GPU lowering", tir_op_info[in->op].name);
    }
}

/* ------------------------------------------------ planning and setup */

static bool is_written(const TirInst *in, int r) { return in->dst == r; }

/* A wgmma operand tile: the swizzled layout, no row padding; each stage aligned to 1024 bytes
 * (the swizzle pattern repeats every 8 rows of 128 bytes and is applied to address bits). */
static void plan_swizzled(Cg *g, Tile *t, const TileType *ty) {
  SmemLayout *s = arena_alloc(g->f->arena, sizeof *s);
  int32_t rows = t->lay->rank == 2 ? layout_wgmma_tile_rows(g->f, (int)(t - g->tiles)) : 0;
  if (t->lay->rank != 2 || !layout_smem_wgmma(rows, t->lay->shape[1], elem_bytes(ty->elem), s)) {
    cg_error(g, "internal error: wgmma operand tile layout");
    return;
  }
  t->swz = s;
  t->pitch = 0;
  g->smem_tiles = (g->smem_tiles + 1023) & ~1023;
  t->smem_off = g->smem_tiles;
  t->stage_bytes = ((int)layout_smem_bytes(s) + 1023) & ~1023;
}

/* Whether TILEC_SHIFTED chooses the shifted rows: 1 everywhere, 0 nowhere; unset (the default):
 * in loops with an aligned version (version_loop). */
static bool shifted_forced(void) { return env_on("TILEC_SHIFTED") || env_off("TILEC_SHIFTED"); }

/* Whether instruction i may move shifted rows: by default inside a pipelined loop (kept where the
 * loop gets an aligned version, version_loop; plan_versions drops the rest); with TILEC_SHIFTED=1
 * everywhere, with TILEC_SHIFTED=0 nowhere. */
static bool shifted_wanted(const Cg *g, int i) {
  if (shifted_forced())
    return env_on("TILEC_SHIFTED");
  for (int k = 0; k < g->npipes; k++)
    if (g->pipes[k].tp->first < i && i < g->pipes[k].tp->last)
      return true;
  return false;
}

/* Whether LOAD or STORE in moves tile t's rows in whole 16-byte chunks of 2- or 4-byte elements
 * (what a shifted tile or store needs). */
static bool moves_16_byte_chunks(Cg *g, const TirInst *in, const Tile *t, const TileType *tt) {
  int eb = elem_bytes(tt->elem);
  return (eb == 2 || eb == 4) && global_chunk(in, &g->f->args[in->arg_index], t->lay, tt->elem) * eb == 16;
}

/* Shifted tiles (Tile.shifted), opt-in (TILEC_SHIFTED=1): a LOAD into a cp.async ring tile (the
 * cp.async entry; TMA needs aligned rows anyway) of 2- or 4-byte elements whose last dim runs
 * along the tensor's rows in 16-byte chunks, the tile's only write, read only elementwise
 * (get_tile: DOT operands and transposed views read the plain layout). Opt-in: on the H200 it
 * made cross-entropy's misaligned rows (50257 columns) 5-14% faster but its aligned ones 4%
 * slower (runs n3, n4; docs/performance.md). */
static bool plan_shifted_row(Cg *g, int i);

static void plan_shifted(Cg *g, int i) {
  const TirFunc *f = g->f;
  const TirInst *in = &f->insts[i];
  if (in->op != TIR_LOAD || g->ws || plan_shifted_row(g, i) || !shifted_wanted(g, i))
    return;
  Tile *t = &g->tiles[in->dst];
  const TileType *tt = rtype(g, in->dst);
  if (tt->place != PLACE_SHARED || t->pipe < 0 || t->view_of >= 0 || !moves_16_byte_chunks(g, in, t, tt) ||
      (g->wgmma && layout_is_wgmma_operand_tile(f, in->dst)))
    return;
  for (int j = 0; j < f->ninsts; j++) {
    const TirInst *u = &f->insts[j];
    if ((j != i && u->dst == in->dst) ||
        ((u->op == TIR_DOT || u->op == TIR_TRANS || u->op == TIR_WINDOW) && tir_inst_reads(u, in->dst)))
      return;
  }
  t->shifted = in;
}

/* Whether LOAD i fills a ring tile of a pipelined loop directly in the loop's body (no branch or
 * loop between): one row an iteration, its copy issued ahead (pipe_top). */
static bool ring_row_load(const Cg *g, int i) {
  const Tile *t = &g->tiles[g->f->insts[i].dst];
  return t->pipe >= 0 && tir_nest_depth(g->f, g->pipes[t->pipe].tp->first, i) == 0;
}

/* A row copied into a rank-1 shared tile that only windows read, once (the one-pass row kernels:
 * `shared xs = X[r, 0 : +BLOCK]`) or a row an iteration on a pipelined loop's ring (a ring of
 * rows): a row that starts anywhere is copied 16 bytes at a time from the aligned address at or
 * before it (copy_shifted), column c at c + shift, and the windows read it there (lower_window;
 * a ring's stage at its own row's shift, lower_load), in vectors where tir_align moved their
 * loop to the row's boundary. On by default; TILEC_SHIFTED=0 turns it off. */
static bool plan_shifted_row(Cg *g, int i) {
  const TirFunc *f = g->f;
  const TirInst *in = &f->insts[i];
  Tile *t = &g->tiles[in->dst];
  const TileType *tt = rtype(g, in->dst);
  if (env_off("TILEC_SHIFTED") || tir_windowed_row_load(f, in->dst) != i || t->head || t->parts ||
      !async_shared_enabled() || !tir_pipelining_enabled() || !tir_load_moves_16_bytes(f, in) ||
      !moves_16_byte_chunks(g, in, t, tt) || !(t->pipe >= 0 ? ring_row_load(g, i) : tir_at_top_level(f, i)) ||
      tir_rows_whole_granules(f, in->arg_index))
    return false;
  t->shifted = in;
  return true;
}

/* Shifted stores (opt-in with the shifted tiles, TILEC_SHIFTED=1): a STORE of a register tile
 * of 2- or 4-byte elements whose last dim runs along the tensor's rows in 16-byte chunks (in
 * the cp.async entry, as the shifted tiles) gets a staging buffer (the tile's layout, a 16-byte chunk of room per
 * row) of at most SHIFT_STAGE_MAX bytes (a row op's tile, not a GEMM's C, whose buffer would
 * cost the ring its stages): a misaligned row goes through it (store_shifted) instead of a
 * 2-byte store per element. */
enum { SHIFT_STAGE_MAX = 16 * 1024 };
static void plan_shifted_store(Cg *g, int i) {
  const TirFunc *f = g->f;
  const TirInst *in = &f->insts[i];
  if (in->op != TIR_STORE || g->ws || !shifted_wanted(g, i)) /* ws: two ping-pong groups would share the buffer */
    return;
  const Tile *t = &g->tiles[in->args[0]];
  const TileType *tt = rtype(g, in->args[0]);
  if (t->shared || t->view_of >= 0 || tt->rank < 1 || !moves_16_byte_chunks(g, in, t, tt))
    return;
  int pitch = padded_pitch(t->lay, tt->elem) + (t->lay->rank == 1 ? 16 / elem_bytes(tt->elem) : 0);
  if (buf_bytes(t->lay, tt->elem, pitch) > SHIFT_STAGE_MAX)
    return;
  Tile *st = &g->shift_stage[i];
  st->lay = t->lay;
  st->pitch = pitch;
}

/* A ring tile whose current stage can hold shifted STORE i's staging buffer, or -1: a tile of the
 * innermost pipelined loop around the STORE (cp.async entry; the STORE at the top level of its
 * body) that nothing in the loop body reads after it, with a stage at least the buffer's size. Its reads precede the STORE's first barrier
 * and the refill of the stage follows the next iteration's PIPE_WAIT barrier, so the buffer costs
 * no shared memory (and no occupancy: a row op's extra buffer took a block per SM). */
static int shift_stage_alias(Cg *g, int i) {
  const TirFunc *f = g->f;
  const TirPipe *in_loop = NULL;
  for (int k = 0; k < g->npipes; k++) {
    const TirPipe *p = g->pipes[k].tp;
    if (p->first < i && i < p->last && (!in_loop || p->first > in_loop->first))
      in_loop = p;
  }
  /* Not inside a nested if or loop of the body (a nested loop's next pass would read the stage the
   * STORE wrote), nor beside an overlapped DOT (its wgmma group may still read a stage after the
   * STORE's barrier). */
  if (!in_loop || tir_nest_depth(f, in_loop->first, i) || in_loop->overlap_dot >= 0)
    return -1;
  int bytes = buf_bytes(g->shift_stage[i].lay, rtype(g, f->insts[i].args[0])->elem, g->shift_stage[i].pitch);
  for (int l = 0; in_loop && l < in_loop->nloads; l++) {
    int r = f->insts[in_loop->loads[l]].dst;
    bool read_after = false;
    for (int j = i + 1; j < in_loop->last && !read_after; j++)
      for (int v = 0; v < f->nregs && !read_after; v++)
        read_after = (v == r || g->tiles[v].view_of == r) && tir_inst_reads(&f->insts[j], v);
    if (!read_after && g->tiles[r].stage_bytes >= bytes)
      return r;
  }
  return -1;
}

static bool loop_gets_versions(const Cg *g, const TirPipe *p);

/* By default (TILEC_SHIFTED unset) a loop keeps its shifted tiles and stores only where it gets
 * an aligned version (version_loop): there aligned rows run the plain code. A ring of rows
 * (plan_shifted_row) keeps its shift either way, as a row copied once does: its windows read in
 * vectors at any shift where tir_align moved their loops. */
static void plan_versions(Cg *g) {
  if (shifted_forced())
    return;
  for (int k = 0; k < g->npipes; k++) {
    const TirPipe *p = g->pipes[k].tp;
    if (loop_gets_versions(g, p))
      continue;
    for (int i = p->first + 1; i < p->last; i++) {
      const TirInst *in = &g->f->insts[i];
      if (in->op == TIR_LOAD && g->tiles[in->dst].shifted == in && !shifted_row_tile(g, in->dst))
        g->tiles[in->dst].shifted = NULL;
      if (in->op == TIR_STORE)
        g->shift_stage[i].pitch = 0;
    }
  }
}

/* The emitter's state for the schedule's pipes; marks their ring tiles. */
static void plan_pipes(Cg *g) {
  const TirFunc *f = g->f;
  const TirSchedule *s = g->sched;
  g->pipes = arena_alloc(f->arena, sizeof(Pipe) * (size_t)(s->npipes + 1));
  for (int r = 0; r < f->nregs; r++)
    g->tiles[r].pipe = -1;
  for (int h = 0; g->ws && h < s->nheads; h++)
    g->tiles[f->insts[s->heads[h]].dst].head = true;
  for (int k = 0; k < s->npipes; k++) {
    Pipe *p = &g->pipes[g->npipes++];
    p->tp = &s->pipes[k];
    p->rslot = entry_alloca(g, g->i32, 1);
    p->wslot = entry_alloca(g, g->i32, 1);
    p->phase = entry_alloca(g, g->i32, 1);
    p->iter = entry_alloca(g, g->i32, 1);
    for (int l = 0; l < p->tp->nloads; l++)
      g->tiles[f->insts[p->tp->loads[l]].dst].pipe = k;
    p->next = vals_new(g, p->tp->nlookahead * p->tp->lookahead_dist);
    for (int l = 0; l < p->tp->nlookahead; l++)
      g->tiles[f->insts[p->tp->lookahead[l]].dst].ahead = true;
    if (p->tp->stages > g->stages_used)
      g->stages_used = p->tp->stages;
  }
}

/* A rank-1 shared tile that one load writes and only windows read (they read the fill past its
 * length) is stored in its length rounded up to 16 bytes, not its layout's power-of-two shape
 * (Tile.stored_cols). Only the load's copies skip the positions past that length: a constant or
 * a copy of another tile writes the whole layout. */
static void plan_stored_cols(Cg *g, int r) {
  const TirFunc *f = g->f;
  Tile *t = &g->tiles[r];
  const TileType *ty = &f->regs[r].type;
  int ch = 16 / elem_bytes(ty->elem), stored = (ty->dims[0] + ch - 1) / ch * ch;
  int room = t->shifted ? ch : 0; /* the chunk a shifted row spills into */
  if (tir_windowed_row_load(f, r) < 0 || g->ws || stored + room >= t->pitch ||
      env_off("TILEC_STORED_COLS"))
    return;
  t->stored_cols = stored;
  t->pitch = stored + room;
}

/* Tile.narrow: the register tiles a packed min/max reads or writes, and the f16/bf16 sources of
 * max and min reductions. */
static void plan_narrow(Cg *g) {
  const TirFunc *f = g->f;
  for (int i = 0; i < f->ninsts; i++) {
    const TirInst *in = &f->insts[i];
    int rs[3] = {-1, -1, -1};
    if (packs_minmax(g, in))
      rs[0] = in->dst, rs[1] = in->args[0], rs[2] = in->args[1];
    else if (reduces_pairs(f, in))
      rs[0] = in->args[0];
    for (int j = 0; j < 3 && rs[j] >= 0; j++) {
      Tile *t = &g->tiles[rs[j]];
      if (f->regs[rs[j]].type.place == PLACE_REG && !t->shared && t->view_of < 0)
        t->narrow = true;
    }
  }
}

static bool plan(Cg *g) {
  TirFunc *f = g->f;
  g->tiles = arena_alloc(f->arena, sizeof(Tile) * (size_t)(f->nregs + 1));
  g->gm = gmem_save(g); /* empty */
  plan_pipes(g);
  for (int r = 0; r < f->nregs; r++) {
    Tile *t = &g->tiles[r];
    t->lay = f->regs[r].type.layout;
    t->n = layout_nregs(t->lay);
    t->view_of = -1;
    plan_padding(g, r);
  }
  for (int i = 0; i < f->ninsts; i++)
    if (f->insts[i].op == TIR_TRANS && tir_trans_view_ok(f, i))
      g->tiles[f->insts[i].dst].view_of = f->insts[i].args[0];
    else if (f->insts[i].op == TIR_WINDOW_STORE)
      g->tiles[f->insts[i].dst].window_stored = true;
  g->prog_tile = g->prog_end = -1;
  for (int k = 0; k < g->sched->nprogs; k++) {
    g->tiles[f->insts[g->sched->progs[k].load].dst].parts = g->sched->progs[k].parts;
    if (!g->prog_landed)
      g->prog_landed = entry_alloca(g, g->i32, 1);
  }
  g->shift_stage = arena_alloc(f->arena, sizeof(Tile) * (size_t)(f->ninsts + 1));
  g->red_pair = arena_alloc(f->arena, sizeof(struct Reduction *) * (size_t)(f->ninsts + 1));
  for (int i = 0; i < f->ninsts; i++) {
    plan_shifted(g, i);
    plan_shifted_store(g, i);
  }
  plan_versions(g);
  bool old_pad = env_on("TILEC_ROW_PAD");
  for (int r = 0; r < f->nregs; r++) {
    Tile *t = &g->tiles[r];
    const TileType *ty = &f->regs[r].type;
    if (ty->place == PLACE_SHARED) {
      t->shared = true;
      t->pitch = padded_pitch(t->lay, ty->elem);
      if (!old_pad && !t->shifted && t->lay->rank >= 2 && read_elementwise(f, r))
        t->pitch = t->lay->shape[t->lay->rank - 1];
      if (t->shifted && t->lay->rank == 1)
        t->pitch += 16 / elem_bytes(ty->elem); /* room for the chunk a shifted row spills into */
      plan_stored_cols(g, r);
      if (!old_pad && t->pipe >= 0)
        g->smem_tiles = (g->smem_tiles + 127) & ~127;
      t->smem_off = g->smem_tiles;
      t->stage_bytes = buf_bytes(t->lay, ty->elem, t->pitch);
      if (!old_pad && t->pipe >= 0)
        t->stage_bytes = (t->stage_bytes + 127) & ~127;
      if (g->wgmma && layout_is_wgmma_operand_tile(f, r))
        plan_swizzled(g, t, ty);
      g->smem_tiles += t->stage_bytes * (t->pipe >= 0 ? g->pipes[t->pipe].tp->stages : t->head ? g->sched->head_stages : 1);
    }
  }
  plan_index_selects(g);
  if (g->ws && g->sched->nstores) { /* TMA stores: a staging tile each, 1 KB aligned (swizzle) */
    const TirSchedule *s = g->sched;
    g->staging = arena_alloc(f->arena, sizeof(Tile) * (size_t)s->ntmaps);
    for (int t = s->ntmaps - s->nstores; t < s->ntmaps; t++) {
      const TileType *ty = &f->regs[f->insts[s->tmaps[t].load].args[0]].type;
      Tile *st = &g->staging[t];
      memset(st, 0, sizeof *st);
      SmemLayout *swz = arena_alloc(f->arena, sizeof *swz);
      st->swz = swz;
      if (!layout_smem_wgmma(ty->dims[0], ty->dims[1], 2, swz)) {
        cg_error(g, "internal error: TMA store staging layout");
        return false;
      }
      g->smem_tiles = (g->smem_tiles + 1023) & ~1023;
      st->smem_off = g->smem_tiles;
      g->smem_tiles += ty->dims[0] * ty->dims[1] * 2;
    }
  }
  for (int i = 0; i < f->ninsts; i++) { /* shifted stores' staging buffers */
    Tile *st = &g->shift_stage[i];
    st->view_of = -1;
    if (!st->pitch || (st->view_of = shift_stage_alias(g, i)) >= 0)
      continue;
    g->smem_tiles = (g->smem_tiles + 15) & ~15;
    st->smem_off = g->smem_tiles;
    g->smem_tiles += buf_bytes(st->lay, rtype(g, f->insts[i].args[0])->elem, st->pitch);
  }
  if (g->ws) { /* full[stages], empty[stages]; ping-pong: turn[2]; head loads: {full, empty}[head_stages] */
    const TirSchedule *s = g->sched;
    g->mbar_off = (g->smem_tiles + 7) & ~7;
    g->smem_tiles = g->mbar_off + ring_mbar_bytes(g) + (s->nheads ? 16 * s->head_stages : s->groups == 2 ? 16 : 0);
  }
  plan_narrow(g);
  for (int r = 0; r < f->nregs; r++) {
    Tile *t = &g->tiles[r];
    if (!t->shared && t->view_of < 0)
      t->regs = entry_alloca(g, tile_reg_type(g, r), t->n);
  }
  return true;
}

static bool check_func(Cg *g) {
  TirFunc *f = g->f;
  for (int i = 0; i < f->nargs; i++) {
    const TirArg *a = &f->args[i];
    g->loc = a->loc;
    if (a->kind == ARG_SCALAR && a->elem != TY_F32 && a->elem != TY_I32) {
      cg_error(g, "scalar argument %s: the GPU backend passes f32 and i32 scalars only, not %s", a->name,
               elem_name(a->elem));
      return false;
    }
    if (a->kind == ARG_TENSOR && (a->rank < 1 || a->rank > TILE_MAX_RANK)) {
      cg_error(g, "tensor argument %s has rank %d", a->name, a->rank);
      return false;
    }
  }
  for (int i = 0; i < f->ninsts; i++) {
    const TirInst *in = &f->insts[i];
    g->loc = in->loc;
    if ((unsigned)in->op >= TIR_OP_COUNT) {
      cg_error(g, "internal error: bad op %d", (int)in->op);
      return false;
    }
    if (in->op == TIR_PARAM && (in->arg_index < 0 || in->arg_index >= f->nargs))
      return cg_error(g, "internal error: param %d", in->arg_index), false;
    if (in->op == TIR_DIM && (in->arg_index < 0 || in->arg_index >= f->ndims))
      return cg_error(g, "internal error: dim %d", in->arg_index), false;
  }
  g->loc = f->loc;
  return true;
}

/* `align bytes` on parameter k (0-based) of the kernel. */
static void param_align(Cg *g, int k, unsigned bytes) {
  unsigned align = LLVMGetEnumAttributeKindForName("align", 5);
  LLVMAddAttributeAtIndex(g->fn, (unsigned)k + 1, LLVMCreateEnumAttribute(g->ctx, align, bytes));
}

static void build_signature(Cg *g) {
  TirFunc *f = g->f;
  int np = 0; /* a tensor takes at most TILE_MAX_RANK parameters, a dim one; the ws entry adds the
               * grid of a persistent walk (4) and its tensor maps */
  size_t cap = (size_t)(TILE_MAX_RANK * f->nargs + f->ndims + 4 + TIR_MAX_TMAPS + 1);
  LLVMTypeRef *ps = arena_alloc(f->arena, sizeof *ps * cap);
  for (int i = 0; i < f->nargs; i++) {
    const TirArg *a = &f->args[i];
    if (a->kind == ARG_TENSOR) {
      ps[np++] = g->p1;
      for (int d = 0; d + 1 < a->rank; d++)
        ps[np++] = g->i64;
    } else {
      ps[np++] = a->elem == TY_F32 ? g->f32 : g->i32;
    }
  }
  for (int i = 0; i < f->ndims; i++)
    if (!f->dims[i].pinned)
      ps[np++] = g->i32;
  int first_tiles = np;
  if (g->persistent)
    for (int k = 0; k < 4; k++)
      ps[np++] = g->i32;
  int first_tmap = np, ntmaps = g->ws ? g->sched->ntmaps : 0;
  /* CUtensorMap: 128 bytes, 64-byte aligned, by value (grid_constant: read in place) */
  LLVMTypeRef tmap_ty = LLVMArrayType(g->i8, 128);
  for (int t = 0; t < ntmaps; t++)
    ps[np++] = g->p0;
  LLVMTypeRef ft = LLVMFunctionType(g->vd, ps, (unsigned)np, 0);
  g->fn = LLVMAddFunction(g->mod, g->fn_name, ft);
  g->tmap = arena_alloc(f->arena, sizeof(LLVMValueRef) * (size_t)(ntmaps + 1));
  LLVMMetadataRef idx[TIR_MAX_TMAPS];
  for (int t = 0; t < ntmaps; t++) {
    unsigned byval = LLVMGetEnumAttributeKindForName("byval", 5);
    LLVMAddAttributeAtIndex(g->fn, (unsigned)(first_tmap + t + 1), LLVMCreateTypeAttribute(g->ctx, byval, tmap_ty));
    param_align(g, first_tmap + t, 64);
    idx[t] = LLVMValueAsMetadata(ci32(g, first_tmap + t + 1)); /* 1-based */
  }
  if (ntmaps) { /* one annotation listing them all: LLVM 19 reads only one per kernel */
    LLVMMetadataRef md[3] = {LLVMValueAsMetadata(g->fn), LLVMMDStringInContext2(g->ctx, "grid_constant", 13),
                             LLVMMDNodeInContext2(g->ctx, idx, (size_t)ntmaps)};
    LLVMAddNamedMetadataOperand(g->mod, "nvvm.annotations", LLVMMetadataAsValue(g->ctx, LLVMMDNodeInContext2(g->ctx, md, 3)));
  }
  LLVMSetFunctionCallConv(g->fn, LLVMPTXKernelCallConv);
  g->entry = LLVMAppendBasicBlockInContext(g->ctx, g->fn, "entry");
  LLVMPositionBuilderAtEnd(g->b, g->entry);
  g->tensor_ptr = arena_alloc(f->arena, sizeof(LLVMValueRef) * (size_t)(f->nargs + 1));
  g->tensor_stride = arena_alloc(f->arena, sizeof *g->tensor_stride * (size_t)(f->nargs + 1));
  g->scalar = arena_alloc(f->arena, sizeof(LLVMValueRef) * (size_t)(f->nargs + 1));
  g->dimv = arena_alloc(f->arena, sizeof(LLVMValueRef) * (size_t)(f->ndims + 1));
  int p = 0;
  bool al = tir_aligned_args(f);
  for (int i = 0; i < f->nargs; i++) {
    const TirArg *a = &f->args[i];
    if (a->kind == ARG_TENSOR) {
      if (al)
        param_align(g, p, 16);
      g->tensor_ptr[i] = LLVMGetParam(g->fn, (unsigned)p++);
      LLVMSetValueName2(g->tensor_ptr[i], a->name, strlen(a->name));
      int eb = elem_bytes(a->elem);
      for (int d = 0; d + 1 < a->rank; d++) {
        g->tensor_stride[i][d] = LLVMGetParam(g->fn, (unsigned)p++);
        if (al && eb < 16)
          g->tensor_stride[i][d] = LLVMBuildAnd(g->b, g->tensor_stride[i][d], ci64(g, -(16 / eb)), "");
      }
      g->tensor_stride[i][a->rank - 1] = ci64(g, 1);
    } else {
      g->scalar[i] = LLVMGetParam(g->fn, (unsigned)p++);
      LLVMSetValueName2(g->scalar[i], a->name, strlen(a->name));
    }
  }
  for (int i = 0; i < f->ndims; i++) {
    if (f->dims[i].pinned) {
      g->dimv[i] = ci32(g, f->dims[i].value);
    } else {
      g->dimv[i] = LLVMGetParam(g->fn, (unsigned)p++);
      LLVMSetValueName2(g->dimv[i], f->dims[i].name, strlen(f->dims[i].name));
    }
  }
  for (int k = 0; g->persistent && k < 4; k++)
    g->grid_tiles[k] = LLVMGetParam(g->fn, (unsigned)(first_tiles + k));
  if (waits_for_zeroing(g) && zero_wait_at_entry(f))
    inline_asm0(g, "griddepcontrol.wait;");
  for (int t = 0; t < ntmaps; t++)
    g->tmap[t] = LLVMGetParam(g->fn, (unsigned)(first_tmap + t));
}

static int block_threads(const Cg *g) {
  return g->ws ? g->sched->consumer_threads * g->sched->groups + g->sched->producer_threads : g->f->threads;
}

static void annotate(Cg *g) {
  char buf[16];
  snprintf(buf, sizeof buf, "%d", block_threads(g));
  LLVMAttributeRef at = LLVMCreateStringAttribute(g->ctx, "nvvm.maxntid", 12, buf, (unsigned)strlen(buf));
  LLVMAddAttributeAtIndex(g->fn, LLVMAttributeFunctionIndex, at);
  const char *keys[2] = {"kernel", "maxntidx"};
  int vals[2] = {1, block_threads(g)};
  for (int i = 0; i < 2; i++) {
    LLVMMetadataRef md[3] = {LLVMValueAsMetadata(g->fn), LLVMMDStringInContext2(g->ctx, keys[i], strlen(keys[i])),
                             LLVMValueAsMetadata(ci32(g, vals[i]))};
    LLVMAddNamedMetadataOperand(g->mod, "nvvm.annotations",
                                LLVMMetadataAsValue(g->ctx, LLVMMDNodeInContext2(g->ctx, md, 3)));
  }
}

/* Blocks per SM that a kernel without DOT (a memory-bound one: row ops, element-wise; shared
 * tiles count against the SM's shared memory, not registers) asks ptxas to fit (`.minnctapersm`), or 0. Left alone, ptxas spends registers up
 * to the next occupancy step (a 512-thread row kernel at 74 registers: one block per SM, nothing
 * to overlap its barriers with); these kernels want bytes in flight per SM, i.e. resident blocks.
 * The register budget per thread is 1.5 values per element of the largest register tile (a row
 * and values derived from it are live together for part of the kernel), or the words of all
 * loads if more (vadd: both inputs in flight), plus 16 for addresses and indices; blocks = the SM's 64K registers over that budget, at most 1024 threads per SM (at most
 * 64 registers per thread are asked for: above that, 1024 threads per SM already carry the ~40 KB
 * in flight a memory-bound kernel needs (measured), and a tighter cap makes ALU-heavy element-wise
 * kernels spill). */
static bool has_loop_versions(const Cg *g);

static int occupancy_blocks(Cg *g) {
  const TirFunc *f = g->f;
  int maxn = 0, loaded = 0;
  for (int i = 0; i < f->ninsts; i++) {
    const TirInst *in = &f->insts[i];
    if (in->op == TIR_DOT)
      return 0;
    if (in->op == TIR_LOAD && !g->tiles[in->dst].shared) /* words in flight in registers */
      loaded += (g->tiles[in->dst].n * elem_bytes(f->regs[in->dst].type.elem) + 3) / 4;
  }
  for (int r = 0; r < f->nregs; r++)
    if (!g->tiles[r].shared && g->tiles[r].view_of < 0 && g->tiles[r].n > maxn)
      maxn = g->tiles[r].n;
  int budget = (3 * maxn / 2 > loaded ? 3 * maxn / 2 : loaded) + 16, threads = f->threads;
  /* Two versions of a loop (version_loop): ptxas, left alone, gave the code 40-82 registers where
   * either version alone takes 32 (cross-entropy backward: a block less per SM); held to the
   * occupancy of 32 registers (up to the SM's threads), which it meets without spilling (else
   * the hint is dropped). */
  bool small_versions = budget < 32 && has_loop_versions(g);
  if (small_versions)
    budget = 32;
  int blocks = 65536 / (budget * threads), cap = (small_versions ? arch_sm_threads(g->o->arch) : 1024) / threads;
  cap = cap > arch_sm_blocks(g->o->arch) ? arch_sm_blocks(g->o->arch) : cap;
  blocks = blocks > cap ? cap : blocks;
  if (g->smem_tiles) { /* shared tiles (a row kernel's staged weights): the SM's shared memory */
    int by_smem = (arch_smem_limit(g->o->arch) + 1024) / (g->smem_tiles + 1024 + 256);
    blocks = blocks > by_smem ? by_smem : blocks;
  }
  /* Small tiles (budget <= 32): ptxas's own choice already fits 2048 threads, or the kernel is
   * ALU-bound; a bound there only costs it scheduling freedom. */
  return blocks >= 2 && (budget > 32 || small_versions) ? blocks : 0;
}

static void annotate_occupancy(Cg *g) {
  /* ws: the schedule's bound only; another would shrink the registers the block is launched
   * with below its budgets, and the consumers' setmaxnreg.inc would wait for ever */
  const char *force = getenv("TILEC_MINBLOCKS"); /* tuning experiments: override the estimate */
  int blocks = g->ws ? (g->sched->launch_blocks > 1 ? g->sched->launch_blocks : 0)
               : force && *force ? atoi(force) : occupancy_blocks(g);
  if (!blocks)
    return;
  LLVMMetadataRef md[3] = {LLVMValueAsMetadata(g->fn), LLVMMDStringInContext2(g->ctx, "minctasm", 8),
                           LLVMValueAsMetadata(ci32(g, blocks))};
  LLVMAddNamedMetadataOperand(g->mod, "nvvm.annotations", LLVMMetadataAsValue(g->ctx, LLVMMDNodeInContext2(g->ctx, md, 3)));
}

static LLVMValueRef new_smem_global(Cg *g, const char *name) {
  LLVMValueRef v = LLVMAddGlobalInAddressSpace(g->mod, LLVMArrayType(g->i8, 0), name, 3);
  LLVMSetLinkage(v, LLVMExternalLinkage);
  LLVMSetAlignment(v, 16);
  return v;
}

/* Places the scratch slots after the shared tiles; returns total dynamic shared bytes. */
static int finish_smem(Cg *g) {
  int off = g->smem_tiles;
  for (int s = 0; s < NSLOTS; s++) {
    LLVMValueRef idx = ci32(g, off);
    LLVMValueRef at = LLVMConstInBoundsGEP2(g->i8, g->smem, &idx, 1);
    LLVMReplaceAllUsesWith(g->slot_ph[s], at);
    LLVMDeleteGlobal(g->slot_ph[s]);
    off += (g->slot_size[s] + 15) & ~15;
  }
  if (!LLVMGetFirstUse(g->smem)) {
    LLVMDeleteGlobal(g->smem);
    g->smem = NULL;
  }
  return off;
}

static void report_smem(Cg *g, int total) {
  int limit = arch_smem_limit(g->o->arch);
  if (total <= limit)
    return;
  if (g->stages_used > 1) {
    /* Pipeline stages are a request: the caller compiles again with fewer. The front end's
     * budget check counts one stage of each tile, so an error reported here is the real one. */
    *g->retry_cap = g->stages_used - 1;
    g->failed = true;
    return;
  }
  g->loc = g->f->loc;
  cg_error(g, "kernel %s needs %d bytes of shared memory; %s allows %d per block (smaller tiles or "
           "fewer shared tiles)", g->f->name, total, arch_name(g->o->arch), limit);
  for (int r = 0; r < g->f->nregs; r++)
    if (g->tiles[r].shared) {
      const TileType *t = &g->f->regs[r].type;
      diag_report(g->d, DIAG_NOTE, g->f->loc, "shared tile %s: %s[%s], %d bytes",
                  g->f->regs[r].name ? g->f->regs[r].name : "(temporary)", elem_name(t->elem),
                  layout_str(g->f->arena, g->tiles[r].lay),
                  g->tiles[r].swz ? g->tiles[r].stage_bytes : buf_bytes(g->tiles[r].lay, t->elem, g->tiles[r].pitch));
    }
}

/* --------------------------------------------------------- codegen */

static void targets_init(void) {
  LLVMInitializeNVPTXTargetInfo();
  LLVMInitializeNVPTXTarget();
  LLVMInitializeNVPTXTargetMC();
  LLVMInitializeNVPTXAsmPrinter();
}

/* Once per process, also when several threads compile at once (libtilec.so, tilec_api.h). */
static bool targets_ready(void) {
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, targets_init);
  return true;
}

static const char *TRIPLE = "nvptx64-nvidia-cuda";

/* ---------------------------------------- arithmetic peepholes (after O3) */

/* How many instructions of block bb with opcode op use v as their operand idx. */
static int uses_as(LLVMValueRef v, LLVMOpcode op, unsigned idx, LLVMBasicBlockRef bb) {
  int n = 0;
  for (LLVMUseRef u = LLVMGetFirstUse(v); u; u = LLVMGetNextUse(u)) {
    LLVMValueRef user = LLVMGetUser(u);
    if (LLVMIsAInstruction(user) && LLVMGetInstructionOpcode(user) == op && LLVMGetOperand(user, idx) == v &&
        LLVMGetInstructionParent(user) == bb)
      n++;
  }
  return n;
}

static bool single_use(LLVMValueRef v) {
  LLVMUseRef u = LLVMGetFirstUse(v);
  return u && !LLVMGetNextUse(u);
}

/* Values made once per key and block (the reciprocal of a divisor, minus a subtrahend times a
 * constant), at the first use in the block: they dominate the later ones there and live no
 * longer than needed (made at the definition, 1 / N lived through layernorm and spilled). */
typedef struct PeepMap {
  LLVMValueRef key[64], key2[64], val[64];
  int n;
} PeepMap;

static LLVMValueRef peep_find(const PeepMap *m, LLVMValueRef k, LLVMValueRef k2) {
  for (int i = 0; i < m->n; i++)
    if (m->key[i] == k && m->key2[i] == k2)
      return m->val[i];
  return NULL;
}

/* A value cached for (k, k2) computed in block bb, or NULL. */
static LLVMValueRef peep_in_block(const PeepMap *m, LLVMValueRef k, LLVMValueRef k2, LLVMBasicBlockRef bb) {
  for (int i = 0; i < m->n; i++)
    if (m->key[i] == k && m->key2[i] == k2 && LLVMGetInstructionParent(m->val[i]) == bb)
      return m->val[i];
  return NULL;
}

/* The scalar that vector v repeats (the SLP vectorizer's splat: a shufflevector with an all-zero
 * mask of an insertelement at 0), or NULL. */
static LLVMValueRef splat_of(LLVMValueRef v) {
  if (!LLVMIsAInstruction(v) || LLVMGetInstructionOpcode(v) != LLVMShuffleVector)
    return NULL;
  for (unsigned i = 0; i < LLVMGetNumMaskElements(v); i++)
    if (LLVMGetMaskValue(v, i) != 0)
      return NULL;
  LLVMValueRef ins = LLVMGetOperand(v, 0), at = NULL;
  if (!LLVMIsAInstruction(ins) || LLVMGetInstructionOpcode(ins) != LLVMInsertElement)
    return NULL;
  at = LLVMGetOperand(ins, 2);
  return LLVMIsAConstantInt(at) && LLVMConstIntGetZExtValue(at) == 0 ? LLVMGetOperand(ins, 1) : NULL;
}

/* x / d for a d shared by several divisions (a row's sum broadcast along the row, also as the
 * splat of a vectorized division): one correctly rounded reciprocal per d, then a multiply per
 * element, at most 1.5 ulp from the quotient instead of 0.5. A div.rn.f32 is a dozen instructions
 * with a slow-path branch per element, which made softmax at 16384 columns compute-bound behind
 * the baseline (which does 1 / sum, then multiplies). */
static bool peep_div(Cg *g, LLVMValueRef in, PeepMap *m) {
  LLVMValueRef x = LLVMGetOperand(in, 0), d = LLVMGetOperand(in, 1);
  LLVMTypeRef t = LLVMTypeOf(in);
  bool vec = LLVMGetTypeKind(t) == LLVMVectorTypeKind;
  if (vec && !(d = splat_of(d)))
    return false;
  if (LLVMIsConstant(d) || LLVMTypeOf(d) != g->f32)
    return false;
  LLVMBasicBlockRef bb = LLVMGetInstructionParent(in);
  LLVMPositionBuilderBefore(g->b, in);
  LLVMValueRef r = peep_find(m, d, (LLVMValueRef)bb); /* the divisions rewritten before no longer count */
  if (!r) {
    /* Shared: four scalar divisions by d in this block, or a splat of it (a vector division is
     * several). Fewer stay divisions: the reciprocal costs about one and keeps a register alive
     * from the first to the last (layernorm's two per-row `/ N` spilled). */
    if (m->n == 64 || (!vec && uses_as(d, LLVMFDiv, 1, bb) + uses_as(d, LLVMInsertElement, 1, bb) < 4))
      return false;
    r = LLVMBuildFDiv(g->b, cf32(g, 1.0), d, "");
    m->key[m->n] = d, m->key2[m->n] = (LLVMValueRef)bb, m->val[m->n++] = r;
  }
  if (vec) {
    unsigned n = LLVMGetVectorSize(t);
    LLVMValueRef one = LLVMBuildInsertElement(g->b, LLVMGetPoison(t), r, ci32(g, 0), "");
    r = LLVMBuildShuffleVector(g->b, one, LLVMGetPoison(t), LLVMConstNull(LLVMVectorType(g->i32, n)), "");
  }
  LLVMReplaceAllUsesWith(in, LLVMBuildFMul(g->b, x, r, ""));
  return true;
}

/* exp(a - b) = ex2((a - b) * log2 e) with b shared by several subtractions (a row's max): one fma
 * per element, ex2(fma(a, log2 e, -(b log2 e))), with -(b log2 e) computed once per b. The
 * exponent loses up to half an ulp of b log2 e (relative error 4e-8 |b| in the result; ex2.approx
 * itself is 2 ulp), and the subtraction's instruction goes. */
/* A value the same for every element of a block: an argument, a constant, or an instruction
 * of another block (hoisted out of the loop). */
static bool uniform_value(LLVMValueRef v, LLVMBasicBlockRef bb) {
  return LLVMIsAArgument(v) || LLVMIsAConstant(v) || (LLVMIsAInstruction(v) && LLVMGetInstructionParent(v) != bb);
}

/* exp's fma(x * u, c, nb) with u uniform (online_softmax's `scale`): fma(x, u * c, nb), u * c
 * computed once per block (cached in prod), so the scaled scores are never materialized.
 * Rounding: one product less (u * c rounds once instead of x * u). */
static void fold_uniform_factor(Cg *g, PeepMap *prod, LLVMValueRef *x, LLVMValueRef *c, LLVMBasicBlockRef bb,
                                LLVMValueRef before) {
  LLVMValueRef a = *x;
  if (!LLVMIsAInstruction(a) || LLVMGetInstructionOpcode(a) != LLVMFMul || !single_use(a) ||
      LLVMGetInstructionParent(a) != bb)
    return;
  int ui = uniform_value(LLVMGetOperand(a, 1), bb) ? 1 : uniform_value(LLVMGetOperand(a, 0), bb) ? 0 : -1;
  if (ui < 0)
    return;
  LLVMValueRef u = LLVMGetOperand(a, (unsigned)ui);
  LLVMValueRef uc = peep_in_block(prod, u, *c, bb);
  if (!uc) {
    if (prod->n == 64)
      return;
    LLVMPositionBuilderBefore(g->b, before);
    uc = LLVMBuildFMul(g->b, u, *c, "");
    prod->key[prod->n] = u, prod->key2[prod->n] = *c, prod->val[prod->n++] = uc;
  }
  *x = LLVMGetOperand(a, (unsigned)(1 - ui));
  *c = uc;
}

static bool peep_exp(Cg *g, LLVMValueRef call, PeepMap *m, PeepMap *prod) {
  if (!is_ex2_call(call))
    return false;
  LLVMValueRef mul = LLVMGetOperand(call, 0);
  if (!LLVMIsAInstruction(mul) || LLVMGetInstructionOpcode(mul) != LLVMFMul || !single_use(mul))
    return false;
  int ci = LLVMIsAConstantFP(LLVMGetOperand(mul, 1)) ? 1 : LLVMIsAConstantFP(LLVMGetOperand(mul, 0)) ? 0 : -1;
  if (ci < 0)
    return false;
  LLVMValueRef c = LLVMGetOperand(mul, (unsigned)ci), s = LLVMGetOperand(mul, (unsigned)(1 - ci));
  if (!LLVMIsAInstruction(s) || LLVMGetInstructionOpcode(s) != LLVMFSub || !single_use(s))
    return false;
  LLVMValueRef a = LLVMGetOperand(s, 0), b = LLVMGetOperand(s, 1);
  if (LLVMIsConstant(b))
    return false;
  LLVMBasicBlockRef bb = LLVMGetInstructionParent(s);
  if (LLVMGetInstructionParent(mul) != bb)
    return false;
  LLVMPositionBuilderBefore(g->b, s);
  LLVMValueRef nb = peep_in_block(m, b, c, bb);
  if (!nb) {
    if (m->n == 64 || uses_as(b, LLVMFSub, 1, bb) < 2)
      return false;
    nb = LLVMBuildFNeg(g->b, LLVMBuildFMul(g->b, b, c, ""), "");
    m->key[m->n] = b, m->key2[m->n] = c, m->val[m->n++] = nb;
  }
  LLVMValueRef x = a, cx = c;
  fold_uniform_factor(g, prod, &x, &cx, bb, s);
  LLVMPositionBuilderBefore(g->b, mul);
  LLVMValueRef args[3] = {x, cx, nb};
  LLVMTypeRef t = g->f32;
  LLVMReplaceAllUsesWith(mul, call_intrin(g, "llvm.fma", &t, 1, args, 3));
  LLVMInstructionEraseFromParent(mul);
  LLVMInstructionEraseFromParent(s);
  if (x != a)
    LLVMInstructionEraseFromParent(a);
  return true;
}

/* A packed conversion (lower_nvptx_wgmma.c pack2) of values that were rounded to the same narrow
 * type through f32 (fpext of fptrunc, how register tiles of f16/bf16 hold their values): it
 * rounds the unrounded value itself, so the two scalar conversions per element go. */
static void peep_cvt_pack(LLVMValueRef call) {
  LLVMValueRef fn = LLVMGetCalledValue(call);
  size_t len = 0;
  const char *text = fn && LLVMIsAInlineAsm(fn) ? LLVMGetInlineAsmAsmString(fn, &len) : NULL;
  bool bf = text && !strncmp(text, "cvt.rn.bf16x2.f32", 17);
  if (!text || (strncmp(text, "cvt.rn.f16x2.f32", 16) != 0 && !bf))
    return;
  for (unsigned i = 0; i < 2; i++) {
    LLVMValueRef ext = LLVMGetOperand(call, i);
    if (!LLVMIsAInstruction(ext) || LLVMGetInstructionOpcode(ext) != LLVMFPExt)
      continue;
    LLVMValueRef tr = LLVMGetOperand(ext, 0);
    LLVMTypeKind k = LLVMGetTypeKind(LLVMTypeOf(tr));
    if (LLVMIsAInstruction(tr) && LLVMGetInstructionOpcode(tr) == LLVMFPTrunc &&
        k == (bf ? LLVMBFloatTypeKind : LLVMHalfTypeKind))
      LLVMSetOperand(call, i, LLVMGetOperand(tr, 0));
  }
}

/* TILEC_PEEP=0 turns these off, to compare. */
static void arith_peepholes(Cg *g) {
  const char *env = getenv("TILEC_PEEP");
  if (env && !strcmp(env, "0"))
    return;
  PeepMap m = {.n = 0}, prod = {.n = 0};
  /* TILEC_CVT_PACK=0 keeps the rounding: ptxas then holds P as packed halves from the softmax on
   * (fewer registers in a rotated loop, where the unrounded values live until the packing) */
  const char *pk = getenv("TILEC_CVT_PACK");
  bool pack = !g->cvt_unpacked && (!pk || strcmp(pk, "0") != 0);
  for (LLVMBasicBlockRef bb = LLVMGetFirstBasicBlock(g->fn); bb; bb = LLVMGetNextBasicBlock(bb)) {
    LLVMValueRef next;
    for (LLVMValueRef in = LLVMGetFirstInstruction(bb); in; in = next) {
      next = LLVMGetNextInstruction(in);
      LLVMOpcode op = LLVMGetInstructionOpcode(in);
      if (op == LLVMFDiv && peep_div(g, in, &m))
        LLVMInstructionEraseFromParent(in);
      else if (op == LLVMCall && !peep_exp(g, in, &m, &prod) && pack)
        peep_cvt_pack(in);
    }
  }
}

/* ------------------------------------------ exp2 on the FMA pipe (after O3) */

/* ex2.approx runs on MUFU, 16 results a clock per SM, beside 128 FMA lanes: attention at head
 * dim 64 (its two GEMMs take about as long per score on the tensor cores as ex2 on MUFU) and
 * cross-entropy (two exponentials an element) can wait on it. TILEC_EXP_POLY=K moves one in K
 * exponentials of a block that has at least K (a tile's elements, in program order) to the FMA
 * pipe (FlashAttention-4's split). 2^x there: x clamped to [-127, 128] (NaN kept), j = rint(x)
 * by adding 1.5 * 2^23, f = x - j in [-0.5, 0.5], 2^f by a degree-5 polynomial with constant
 * term 1 (minimax for the relative error: at most 4.9e-7, about 4 ulp; 2^0 = 1
 * exactly), times 2^j made in the exponent field: (j + 127) << 23, 0 at j = -127 (x < -126.5
 * gives 0, as ex2.approx.ftz's flush does) and +inf at j = 128 (x >= 127.5 gives +inf, where
 * 2^x overflows at 128). Twelve instructions, none on MUFU. */
static const double exp_poly_coef[6] = {1.0, 0.693142831, 0.240223512, 0.0555740036, 0.00966628268, 0.00111255073};

static LLVMValueRef ex2_on_fma(Cg *g, LLVMValueRef x) {
  LLVMBuilderRef b = g->b;
  x = ovl2(g, "llvm.minimum", ovl2(g, "llvm.maximum", x, cf32(g, -127.0)), cf32(g, 128.0));
  LLVMValueRef round = cf32(g, 12582912.0);
  LLVMValueRef t = LLVMBuildFAdd(b, x, round, "");
  LLVMValueRef f = LLVMBuildFSub(b, x, LLVMBuildFSub(b, t, round, ""), "");
  LLVMValueRef p = cf32(g, exp_poly_coef[5]);
  LLVMTypeRef ft = g->f32;
  for (int k = 4; k >= 0; k--) {
    LLVMValueRef a[3] = {p, f, cf32(g, exp_poly_coef[k])};
    p = call_intrin(g, "llvm.fma", &ft, 1, a, 3);
  }
  /* t's low mantissa bits hold j: t << 23 is j << 23 (mod 2^32) */
  LLVMValueRef e = LLVMBuildShl(b, LLVMBuildBitCast(b, t, g->i32, ""), ci32(g, 23), "");
  e = LLVMBuildAdd(b, e, ci32(g, 127 << 23), "");
  return LLVMBuildFMul(b, p, LLVMBuildBitCast(b, e, g->f32, ""), "");
}

static void exp_on_fma(Cg *g) {
  const char *env = getenv("TILEC_EXP_POLY");
  long every = env ? strtol(env, NULL, 10) : 0;
  if (every < 2)
    return;
  for (LLVMBasicBlockRef bb = LLVMGetFirstBasicBlock(g->fn); bb; bb = LLVMGetNextBasicBlock(bb)) {
    long n = 0, k = 0;
    for (LLVMValueRef in = LLVMGetFirstInstruction(bb); in; in = LLVMGetNextInstruction(in))
      n += is_ex2_call(in);
    if (n < every)
      continue;
    LLVMValueRef next;
    for (LLVMValueRef in = LLVMGetFirstInstruction(bb); in; in = next) {
      next = LLVMGetNextInstruction(in);
      if (!is_ex2_call(in) || ++k % every)
        continue;
      LLVMPositionBuilderBefore(g->b, in);
      LLVMReplaceAllUsesWith(in, ex2_on_fma(g, LLVMGetOperand(in, 0)));
      LLVMInstructionEraseFromParent(in);
    }
  }
}

/* ------------------------------------------ rematerialization (after O3) */

enum { REMAT_DEPTH = 3 };

/* A value that costs no register of its own: a constant or a kernel parameter. */
static bool free_value(LLVMValueRef v) { return LLVMIsConstant(v) || LLVMIsAArgument(v); }

static bool remat_op(LLVMValueRef v) {
  if (!LLVMIsAInstruction(v))
    return false;
  switch (LLVMGetInstructionOpcode(v)) {
  case LLVMICmp: case LLVMAdd: case LLVMSub: case LLVMOr: case LLVMXor: case LLVMAnd: case LLVMShl: case LLVMLShr:
  case LLVMZExt: case LLVMSExt: case LLVMTrunc:
    return true;
  default:
    return false;
  }
}

/* The operand of v that is not free (constant or parameter), and how many there are. */
static LLVMValueRef nonfree_operand(LLVMValueRef v, int *n) {
  LLVMValueRef x = NULL;
  *n = 0;
  for (int i = 0; i < LLVMGetNumOperands(v); i++)
    if (!free_value(LLVMGetOperand(v, (unsigned)i)))
      x = LLVMGetOperand(v, (unsigned)i), ++*n;
  return x;
}

/* Whether v can be recomputed in bb from one value (the anchor, *anchor; NULL when v needs none):
 * v is a chain of cheap instructions, each over constants, parameters and the previous one, down
 * to a value that is not cheap, is defined in bb, or lies REMAT_DEPTH steps down. */
static bool remat_chain(LLVMValueRef v, LLVMBasicBlockRef bb, LLVMValueRef *anchor) {
  LLVMValueRef a = v;
  *anchor = NULL;
  for (int d = 0;; d++) {
    int n;
    LLVMValueRef x = nonfree_operand(a, &n);
    if (n == 0)
      return true;
    if (n > 1) {
      if (a == v)
        return false;
      *anchor = a;
      break;
    }
    if (!remat_op(x) || d + 1 == REMAT_DEPTH || LLVMGetInstructionParent(x) == bb) {
      *anchor = x;
      break;
    }
    a = x;
  }
  LLVMTypeKind k = LLVMGetTypeKind(LLVMTypeOf(*anchor));
  unsigned w = k == LLVMIntegerTypeKind ? LLVMGetIntTypeWidth(LLVMTypeOf(*anchor)) : 0;
  return w == 32 || w == 64;
}

/* Clones made in the block being rewritten, so each value is recomputed once per block. */
typedef struct RematMap {
  LLVMValueRef *key, *val;
  int n, cap;
} RematMap;

static LLVMValueRef remat_find(const RematMap *m, LLVMValueRef v) {
  for (int i = 0; i < m->n; i++)
    if (m->key[i] == v)
      return m->val[i];
  return NULL;
}

static void remat_put(Cg *g, RematMap *m, LLVMValueRef k, LLVMValueRef v) {
  if (m->n == m->cap) {
    int cap = m->cap ? 2 * m->cap : 64;
    LLVMValueRef *nk = arena_alloc(g->f->arena, sizeof *nk * (size_t)cap), *nv = arena_alloc(g->f->arena, sizeof *nv * (size_t)cap);
    if (m->n) {
      memcpy(nk, m->key, sizeof *nk * (size_t)m->n);
      memcpy(nv, m->val, sizeof *nv * (size_t)m->n);
    }
    m->key = nk, m->val = nv, m->cap = cap;
  }
  m->key[m->n] = k;
  m->val[m->n++] = v;
}

/* The anchor, copied into this block through an opaque move: LLVM's codegen runs GVN and machine
 * CSE again, which would merge clones of the same expression back into the first one. */
static LLVMValueRef remat_anchor_copy(Cg *g, LLVMValueRef v) {
  bool wide = LLVMGetIntTypeWidth(LLVMTypeOf(v)) == 64;
  const char *text = wide ? "mov.b64 $0, $1;" : "mov.b32 $0, $1;", *cons = wide ? "=l,l" : "=r,r";
  LLVMTypeRef t = LLVMTypeOf(v), ft = LLVMFunctionType(t, &t, 1, 0);
  LLVMValueRef fn = LLVMGetInlineAsm(ft, text, strlen(text), cons, strlen(cons), 1, 0, LLVMInlineAsmDialectATT, 0);
  return LLVMBuildCall2(g->b, ft, fn, &v, 1, "");
}

/* v recomputed at the builder's position in bb from a copy of the anchor. */
static LLVMValueRef remat_clone(Cg *g, RematMap *m, LLVMValueRef v, LLVMValueRef anchor, LLVMBasicBlockRef bb) {
  if (free_value(v) || LLVMGetInstructionParent(v) == bb)
    return v;
  LLVMValueRef c = remat_find(m, v);
  if (c)
    return c;
  if (v == anchor) {
    c = remat_anchor_copy(g, v);
  } else {
    c = LLVMInstructionClone(v);
    for (int i = 0; i < LLVMGetNumOperands(v); i++)
      LLVMSetOperand(c, (unsigned)i, remat_clone(g, m, LLVMGetOperand(v, (unsigned)i), anchor, bb));
    LLVMInsertIntoBuilder(g->b, c);
  }
  remat_put(g, m, v, c);
  return c;
}

/* Erases rematerializable instructions left without uses, until none is. */
static void remat_dce(LLVMValueRef fn) {
  for (bool again = true; again;) {
    again = false;
    for (LLVMBasicBlockRef bb = LLVMGetFirstBasicBlock(fn); bb; bb = LLVMGetNextBasicBlock(bb)) {
      LLVMValueRef next;
      for (LLVMValueRef in = LLVMGetFirstInstruction(bb); in; in = next) {
        next = LLVMGetNextInstruction(in);
        if (remat_op(in) && !LLVMGetFirstUse(in)) {
          LLVMInstructionEraseFromParent(in);
          again = true;
        }
      }
    }
  }
}

/* GVN merges every computation of an element's column or bounds test into one value, so a value
 * computed for a load's in-bounds test at the top of the kernel stays alive, through every
 * reduction and barrier, until a `where` or the ragged path of the final store uses it again: a
 * [2, 4096] tile's 24 columns cost 24 registers for the whole kernel. Recomputing such a value in
 * each block that uses it (an ALU instruction or a few over a lane index and constants) costs no
 * register; ptxas keeps the copies apart. Forward through each block, so the first use in a block
 * makes the clone that the later ones share. */
static void remat_remote_uses(Cg *g) {
  for (LLVMBasicBlockRef bb = LLVMGetFirstBasicBlock(g->fn); bb; bb = LLVMGetNextBasicBlock(bb)) {
    RematMap m = {0};
    for (LLVMValueRef in = LLVMGetFirstInstruction(bb); in; in = LLVMGetNextInstruction(in)) {
      if (LLVMGetInstructionOpcode(in) == LLVMPHI)
        continue;
      for (int i = 0; i < LLVMGetNumOperands(in); i++) {
        LLVMValueRef op = LLVMGetOperand(in, (unsigned)i), anchor = NULL;
        if (!remat_op(op) || LLVMGetInstructionParent(op) == bb || !remat_chain(op, bb, &anchor))
          continue;
        LLVMPositionBuilderBefore(g->b, in);
        LLVMSetOperand(in, (unsigned)i, remat_clone(g, &m, op, anchor, bb));
      }
    }
  }
  remat_dce(g->fn);
}


/* Optimizes the module and prints it: PTX after the metadata, or LLVM IR. gs: the entry points
 * (their peepholes run per function); meta: the "// tilec:" lines. */
static char *emit(Cg **gs, int n, LLVMTargetMachineRef tm, const char *meta) {
  Cg *g = gs[0];
  Arena *a = g->f->arena;
  char *err = NULL;
  if (LLVMVerifyModule(g->mod, LLVMReturnStatusAction, &err)) {
    cg_error(g, "internal error: invalid LLVM module: %s", err ? err : "?");
    LLVMDisposeMessage(err);
    return NULL;
  }
  LLVMDisposeMessage(err);
  char pipeline[32];
  snprintf(pipeline, sizeof pipeline, "default<O%d>", g->o->opt_level < 0 ? 0 : g->o->opt_level > 3 ? 3 : g->o->opt_level);
  LLVMPassBuilderOptionsRef po = LLVMCreatePassBuilderOptions();
  LLVMErrorRef e = LLVMRunPasses(g->mod, pipeline, tm, po);
  LLVMDisposePassBuilderOptions(po);
  if (e) {
    char *m = LLVMGetErrorMessage(e);
    cg_error(g, "internal error: LLVM passes: %s", m);
    LLVMDisposeErrorMessage(m);
    return NULL;
  }
  const char *rm = getenv("TILEC_REMAT"); /* TILEC_REMAT=0: off, to compare */
  for (int i = 0; i < n; i++) {
    arith_peepholes(gs[i]);
    exp_on_fma(gs[i]);
    if (!rm || strcmp(rm, "0") != 0)
      remat_remote_uses(gs[i]);
  }
  if (g->o->dump_llvm) {
    char *s = LLVMPrintModuleToString(g->mod);
    char *r = arena_strdup(a, s);
    LLVMDisposeMessage(s);
    return r;
  }
  LLVMMemoryBufferRef buf = NULL;
  if (LLVMTargetMachineEmitToMemoryBuffer(tm, g->mod, LLVMAssemblyFile, &err, &buf)) {
    cg_error(g, "internal error: PTX emission: %s", err ? err : "?");
    LLVMDisposeMessage(err);
    return NULL;
  }
  size_t ml = strlen(meta), pl = LLVMGetBufferSize(buf);
  char *out = arena_alloc(a, ml + pl + 1);
  memcpy(out, meta, ml);
  memcpy(out + ml, LLVMGetBufferStart(buf), pl);
  out[ml + pl] = 0;
  LLVMDisposeMemoryBuffer(buf);
  return out;
}

/* ---------------------------------------------------- loop versions */

/* A pipelined loop of the cp.async entry with shifted tiles or stores (plan_shifted,
 * plan_shifted_store) is emitted twice behind one test before it: a version for rows that are
 * 16-byte aligned in every iteration, with the plain copies, reads and stores (the code of the
 * loop without shifted tiles), and the shifted version for the rest. Inside one version the
 * per-tile alignment tests are gone; they cost aligned rows 5% (run p2: cross-entropy backward
 * at 32000 and 128256 columns). */

/* Whether instruction i of loop p moves rows that may be shifted. */
static bool shifted_access(const Cg *g, const TirPipe *p, int i) {
  const TirInst *in = &g->f->insts[i];
  if (i <= p->first || i >= p->last)
    return false;
  if (in->op == TIR_LOAD)
    return g->tiles[in->dst].shifted == in;
  return in->op == TIR_STORE && g->shift_stage[i].pitch;
}

/* The CONST instruction of loop p that is the only write of register r in the loop (index
 * constants are made where they are used), or NULL. */
static const TirInst *loop_const(const TirFunc *f, const TirPipe *p, int r) {
  const TirInst *c = NULL;
  for (int j = p->first; j <= p->last; j++)
    if (is_written(&f->insts[j], r)) {
      if (c || f->insts[j].op != TIR_CONST)
        return NULL;
      c = &f->insts[j];
    }
  return c;
}

/* Whether register r keeps one value through loop p: no instruction of the loop writes it, or
 * only a constant does. */
static bool loop_invariant(const TirFunc *f, const TirPipe *p, int r) {
  for (int j = p->first; j <= p->last; j++)
    if (is_written(&f->insts[j], r))
      return loop_const(f, p, r) != NULL;
  return true;
}

/* Whether every shifted access of loop p has the same alignment in every iteration up to the
 * loop's start and step: its scalar indices loop-invariant (they scale a row stride), the last
 * dim's start too or the loop variable (a range of an outer dim starts anywhere: only its stride
 * counts). */
static bool loop_versionable(const Cg *g, const TirPipe *p) {
  const TirFunc *f = g->f;
  int ind = f->insts[p->first].dst, n = 0;
  if (g->ws)
    return false;
  for (int i = p->first + 1; i < p->last; i++) {
    if (!shifted_access(g, p, i))
      continue;
    n++;
    const TirInst *in = &f->insts[i];
    int rank = f->args[in->arg_index].rank;
    for (int d = 0; d < rank; d++) {
      int r = in->index[d].start;
      bool last = d == rank - 1;
      if ((last || !in->index[d].is_range) && !loop_invariant(f, p, r) && !(last && r == ind))
        return false;
    }
  }
  return n > 0;
}

/* True (i1) when the rows of every shifted access of loop p start 16-byte aligned in every
 * iteration: per access, the address of its first element (the tensor's, plus its scalar indices
 * and one-row ranges times their strides, plus the loop's lo for a last dim that starts at the
 * loop variable) and the loop's step; a range of rows, the row stride. The first element is
 * tested as one sum: a row that starts anywhere is aligned where the loop starts at its
 * boundary (tir_align.c). */
static LLVMValueRef loop_rows_aligned(Cg *g, const TirPipe *p, LLVMValueRef lo, LLVMValueRef step) {
  const TirFunc *f = g->f;
  int ind = f->insts[p->first].dst;
  LLVMValueRef mis = ci64(g, 0);
  for (int i = p->first + 1; i < p->last; i++) {
    if (!shifted_access(g, p, i))
      continue;
    const TirInst *in = &f->insts[i];
    const TirArg *a = &f->args[in->arg_index];
    LLVMValueRef eb = ci64(g, elem_bytes(a->elem));
    LLVMValueRef first = LLVMBuildPtrToInt(g->b, g->tensor_ptr[in->arg_index], g->i64, "");
    for (int d = 0; d < a->rank; d++) {
      const TirIndex *x = &in->index[d];
      bool last = d == a->rank - 1;
      if (last && x->start == ind) {
        first = LLVMBuildAdd(g->b, first, LLVMBuildMul(g->b, LLVMBuildSExt(g->b, lo, g->i64, ""), eb, ""), "");
        mis = LLVMBuildOr(g->b, mis, LLVMBuildMul(g->b, LLVMBuildSExt(g->b, step, g->i64, ""), eb, ""), "");
        continue;
      }
      if (!last && x->is_range && (x->size > 1 || !loop_invariant(f, p, x->start))) {
        mis = LLVMBuildOr(g->b, mis, LLVMBuildMul(g->b, g->tensor_stride[in->arg_index][d], eb, ""), "");
        continue;
      }
      const TirInst *c = loop_const(f, p, x->start);
      LLVMValueRef v;
      if (c)
        v = ci32(g, (int64_t)c->imm);
      else
        get_tile(g, x->start, &v);
      v = LLVMBuildMul(g->b, LLVMBuildSExt(g->b, v, g->i64, ""), g->tensor_stride[in->arg_index][d], "");
      first = LLVMBuildAdd(g->b, first, LLVMBuildMul(g->b, v, eb, ""), "");
    }
    mis = LLVMBuildOr(g->b, mis, first, "");
  }
  return LLVMBuildICmp(g->b, LLVMIntEQ, LLVMBuildAnd(g->b, mis, ci64(g, 15), ""), ci64(g, 0), "");
}

/* Whether loop p is emitted in two versions (TILEC_LOOP_VERSIONS=0, or the plain module of
 * plain_if_cheaper: none is). */
static bool loop_gets_versions(const Cg *g, const TirPipe *p) {
  return loop_versionable(g, p) && !env_off("TILEC_LOOP_VERSIONS") && !g->o->no_loop_versions;
}

static bool has_loop_versions(const Cg *g) {
  for (int k = 0; k < g->npipes; k++)
    if (loop_gets_versions(g, g->pipes[k].tp))
      return true;
  return false;
}

/* The emitter's state that a version changes, for starting the other from the same place. */
typedef struct EmitState {
  bool dirty, red_read[2], copies_in_flight;
  int red_next, stage_ahead;
  bool *in_flight;                 /* per register */
  struct Reduction **red_pair;     /* per instruction */
  GmemState *gm;
} EmitState;

static void state_save(Cg *g, EmitState *s) {
  const TirFunc *f = g->f;
  s->dirty = g->dirty, s->red_read[0] = g->red_read[0], s->red_read[1] = g->red_read[1];
  s->copies_in_flight = g->copies_in_flight, s->red_next = g->red_next, s->stage_ahead = g->stage_ahead;
  s->in_flight = arena_alloc(f->arena, sizeof(bool) * (size_t)(f->nregs + 1));
  for (int r = 0; r < f->nregs; r++)
    s->in_flight[r] = g->tiles[r].in_flight;
  s->red_pair = arena_alloc(f->arena, sizeof(struct Reduction *) * (size_t)(f->ninsts + 1));
  memcpy(s->red_pair, g->red_pair, sizeof(struct Reduction *) * (size_t)f->ninsts);
  s->gm = gmem_save(g);
}

/* Back to state s; with merge, the union of s and the current state (after the join of two
 * versions: a barrier or a wait owed on either path is owed after it). */
static void state_restore(Cg *g, const EmitState *s, bool merge) {
  const TirFunc *f = g->f;
  g->dirty = s->dirty || (merge && g->dirty);
  for (int k = 0; k < 2; k++)
    g->red_read[k] = s->red_read[k] || (merge && g->red_read[k]);
  g->copies_in_flight = s->copies_in_flight || (merge && g->copies_in_flight);
  g->red_next = s->red_next, g->stage_ahead = s->stage_ahead;
  for (int r = 0; r < f->nregs; r++)
    g->tiles[r].in_flight = s->in_flight[r] || (merge && g->tiles[r].in_flight);
  if (merge)
    gmem_join(g, s->gm);
  else
    gmem_set(g, s->gm);
  if (!merge)
    memcpy(g->red_pair, s->red_pair, sizeof(struct Reduction *) * (size_t)f->ninsts);
}

/* What an idle warpgroup's loop runs (TirSchedule.band_rows): the markers, the scalars (the
 * bounds and branches, computed from scalars only, scalar loads among them: tir_schedule.c
 * skeleton_runs_alike) and the protocol it shares with the producer and the other warpgroups. */
static bool protocol_inst(const Cg *g, const TirInst *in) {
  switch (in->op) {
  case TIR_PIPE_WAIT:
  case TIR_PIPE_RELEASE:
  case TIR_WG_TURN:
  case TIR_WG_PASS:
  case TIR_HEAD_WAIT:
  case TIR_HEAD_RELEASE: return true;
  case TIR_DOT:
  case TIR_DOT_WAIT: return false;
  default: return (tir_op_info[in->op].flags & OPF_MARKER) || (in->dst >= 0 && g->f->regs[in->dst].type.rank == 0);
  }
}

static void emit_range(Cg *g, int first, int last) {
  for (int i = first; i <= last && !g->failed; i++) {
    if (g->protocol_only && !protocol_inst(g, &g->f->insts[i]))
      continue;
    sync_before(g, &g->f->insts[i]);
    lower_inst(g, &g->f->insts[i]);
  }
}

/* Instruction i is the FOR of a versionable loop: both versions emitted; the loop's ENDFOR
 * returned. Else -1, nothing emitted. TILEC_LOOP_VERSIONS=0: the shifted loop alone where
 * TILEC_SHIFTED=1, else the plain loop. */
static int version_loop(Cg *g, int i) {
  const Pipe *pp = pipe_at(g, i);
  const TirPipe *p = pp ? pp->tp : NULL;
  if (!p || !loop_gets_versions(g, p))
    return -1;
  if (g->o->loop_versions)
    ++*g->o->loop_versions;
  const TirInst *in = &g->f->insts[i];
  sync_before(g, in);
  LLVMValueRef lo, step;
  get_tile(g, in->args[0], &lo);
  get_tile(g, in->args[2], &step);
  LLVMBasicBlockRef bb[3];
  split3(g, loop_rows_aligned(g, p, lo, step), bb);
  EmitState start, aligned_end;
  state_save(g, &start);
  g->aligned_version = true;
  emit_range(g, p->first, p->last);
  g->aligned_version = false;
  LLVMBuildBr(g->b, bb[2]);
  state_save(g, &aligned_end);
  state_restore(g, &start, false);
  LLVMPositionBuilderAtEnd(g->b, bb[1]);
  emit_range(g, p->first, p->last);
  LLVMBuildBr(g->b, bb[2]);
  LLVMPositionBuilderAtEnd(g->b, bb[2]);
  state_restore(g, &aligned_end, true);
  return p->last;
}


/* Instruction i is the FOR of the warp-specialized loop with idle bands (TirSchedule.band_rows):
 * a warpgroup whose rows start at or past the bound runs the loop's protocol only, the others the
 * whole loop; the loop's ENDFOR returned. Where the whole loop emitted a consumer barrier (a
 * layout exchange through shared memory: the schedule rules out the rest) the idle warpgroups
 * run it whole too, so that every barrier still meets all of them. Else -1, nothing emitted. */
static int idle_band_loop(Cg *g, int i) {
  const TirSchedule *s = g->sched;
  if (!g->ws || !s->band_rows || i != s->pipes[0].first)
    return -1;
  const TirPipe *p = &s->pipes[0];
  sync_before(g, &g->f->insts[i]);
  LLVMValueRef row0, wg = dot_warpgroup(g, s->consumer_threads / 128);
  get_tile(g, s->band_row0, &row0);
  LLVMValueRef first = LLVMBuildAdd(g->b, row0, LLVMBuildMul(g->b, wg, ci32(g, s->band_rows), ""), "");
  LLVMBasicBlockRef bb[3];
  split3(g, LLVMBuildICmp(g->b, LLVMIntSGE, first, g->dimv[s->band_dim], "idle"), bb);
  EmitState start, whole_end;
  state_save(g, &start);
  LLVMPositionBuilderAtEnd(g->b, bb[1]);
  int barriers = g->nbarriers;
  emit_range(g, p->first, p->last);
  LLVMBuildBr(g->b, bb[2]);
  state_save(g, &whole_end);
  state_restore(g, &start, false);
  LLVMPositionBuilderAtEnd(g->b, bb[0]);
  g->protocol_only = g->nbarriers == barriers;
  emit_range(g, p->first, p->last);
  g->protocol_only = false;
  LLVMBuildBr(g->b, bb[2]);
  LLVMPositionBuilderAtEnd(g->b, bb[2]);
  state_restore(g, &whole_end, true);
  return p->last;
}

/* Lowers the scheduled function into g->mod as entry point g->fn_name (g->ws: the warp-
 * specialized one). Returns the dynamic shared bytes, or -1 (failed, or *retry_cap set). */
static int build_kernel(Cg *g) {
  TirFunc *f = g->f;
  g->persistent = g->ws && g->sched->persistent;
  g->cluster = g->persistent && g->sched->cluster == 2;
  g->groups = g->ws ? g->sched->groups : 1;
  g->group = ci32(g, 0);
  g->smem = new_smem_global(g, g->ws ? "tilec_smem_ws" : "tilec_smem");
  if (g->wgmma)
    LLVMSetAlignment(g->smem, 1024); /* swizzled tiles: offsets aligned to 1024 from here */
  g->slot_ph[SLOT_A] = new_smem_global(g, "tilec_slot_a");
  g->slot_ph[SLOT_B] = new_smem_global(g, "tilec_slot_b");
  g->slot_ph[SLOT_RED0] = new_smem_global(g, "tilec_slot_red0");
  g->slot_ph[SLOT_RED1] = new_smem_global(g, "tilec_slot_red1");
  g->slot_ph[SLOT_CLUSTER] = new_smem_global(g, "tilec_slot_cluster");
  g->slot_ph[SLOT_RED0_ODD] = new_smem_global(g, "tilec_slot_red0_odd");
  g->slot_ph[SLOT_RED1_ODD] = new_smem_global(g, "tilec_slot_red1_odd");
  build_signature(g);
  annotate(g);
  g->tid = intrin0(g, "llvm.nvvm.read.ptx.sreg.tid.x");
  g->lane = LLVMBuildAnd(g->b, g->tid, ci32(g, 31), "lane");
  g->warp = LLVMBuildLShr(g->b, g->tid, ci32(g, 5), "warp");
  if (g->cluster) {
    LLVMTypeRef ft = LLVMFunctionType(g->i32, NULL, 0, 0);
    const char *t = "mov.u32 $0, %cluster_ctarank;";
    g->crank = LLVMBuildCall2(g->b, ft, LLVMGetInlineAsm(ft, (char *)t, strlen(t), "=r", 2, 0, 0, LLVMInlineAsmDialectATT, 0),
                              NULL, 0, "crank");
  }
  plan(g);
  annotate_occupancy(g);
  for (int k = 0; g->persistent && k < 3; k++)
    g->pblock[k] = entry_alloca(g, g->i32, 1);
  if (g->ws)
    emit_roles(g);
  TileLoop tl;
  if (g->persistent) {
    tl = tile_loop_begin(g, true);
    g->dirty = true; /* the previous tile's reads of shared memory */
    g->red_read[0] = g->red_read[1] = true;
  }
  for (int i = 0; i < f->ninsts && !g->failed; i++) {
    int end = version_loop(g, i);
    if (end < 0)
      end = idle_band_loop(g, i);
    if (end >= 0) {
      i = end;
      continue;
    }
    sync_before(g, &f->insts[i]);
    lower_inst(g, &f->insts[i]);
  }
  if (g->failed)
    return -1;
  flush_copies(g); /* no copy may land in the shared memory of an exited block */
  if (g->groups == 2) {
    LLVMValueRef j = LLVMBuildLoad2(g->b, g->i32, g->tile_j, "");
    LLVMBuildStore(g->b, LLVMBuildAdd(g->b, j, ci32(g, 1), ""), g->tile_j);
  }
  if (g->persistent)
    tile_loop_end(g, &tl);
  if (g->ws && g->sched->nstores) {
    /* the staging tiles stay until the last bulk store has read them; its writes to global memory
     * complete on their own (CUTLASS's store tail), so a block of one short tile exits early */
    bool split = false;
    for (int t = 0; t < g->sched->ntmaps; t++)
      split |= g->sched->tmaps[t].store && g->sched->tmaps[t].split > 1;
    LLVMBasicBlockRef j = begin_if(g, store_leader(g, split));
    inline_asm0(g, "cp.async.bulk.wait_group.read 0;");
    end_if(g, j);
  }
  if (g->cluster_ops) /* no block leaves while a peer may still read its slots */
    cluster_barrier(g);
  zero_wait_at_exit(g);
  LLVMBuildRetVoid(g->b);
  int smem = finish_smem(g);
  report_smem(g, smem);
  return g->failed ? -1 : smem;
}

/* The module's LLVM state in m (context, module, builders, types; every entry's Cg copies it). */
static LLVMTargetMachineRef module_open(Cg *m, const NvptxOptions *o, Diag *d, const char *name) {
  targets_ready();
  LLVMTargetRef target;
  char *err = NULL;
  if (LLVMGetTargetFromTriple(TRIPLE, &target, &err)) {
    diag_plain(d, DIAG_ERROR, "internal error: no NVPTX target in LLVM: %s", err ? err : "?");
    LLVMDisposeMessage(err);
    return NULL;
  }
  /* arch_name() is a whitelisted name: LLVM only warns on unknown CPUs. */
  LLVMTargetMachineRef tm = LLVMCreateTargetMachine(target, TRIPLE, arch_name(o->arch), "+ptx85",
                                                    LLVMCodeGenLevelAggressive, LLVMRelocDefault,
                                                    LLVMCodeModelDefault);
  m->ctx = LLVMContextCreate();
  m->mod = LLVMModuleCreateWithNameInContext(name, m->ctx);
  LLVMSetTarget(m->mod, TRIPLE);
  LLVMTargetDataRef td = LLVMCreateTargetDataLayout(tm);
  LLVMSetModuleDataLayout(m->mod, td);
  LLVMDisposeTargetData(td);
  m->b = LLVMCreateBuilderInContext(m->ctx);
  m->eb = LLVMCreateBuilderInContext(m->ctx);
  m->i1 = LLVMInt1TypeInContext(m->ctx);
  m->i8 = LLVMInt8TypeInContext(m->ctx);
  m->i16 = LLVMInt16TypeInContext(m->ctx);
  m->i32 = LLVMInt32TypeInContext(m->ctx);
  m->i64 = LLVMInt64TypeInContext(m->ctx);
  m->f16 = LLVMHalfTypeInContext(m->ctx);
  m->bf16 = LLVMBFloatTypeInContext(m->ctx);
  m->f32 = LLVMFloatTypeInContext(m->ctx);
  m->vd = LLVMVoidTypeInContext(m->ctx);
  m->p0 = LLVMPointerTypeInContext(m->ctx, 0);
  m->p1 = LLVMPointerTypeInContext(m->ctx, 1);
  m->p3 = LLVMPointerTypeInContext(m->ctx, 3);
  return tm;
}

static void module_close(Cg *m, LLVMTargetMachineRef tm) {
  LLVMDisposeBuilder(m->b);
  LLVMDisposeBuilder(m->eb);
  LLVMDisposeModule(m->mod);
  LLVMContextDispose(m->ctx);
  LLVMDisposeTargetMachine(tm);
}

/* Kernel f0's entry points in m's module: NAME (cp.async, any view) and, when the schedule has
 * warp specialization, NAME__ws (TMA, picked by the runtime when the views allow it; left out when
 * it would not fit shared memory). Appends their Cgs to gs and their metadata to *meta. False
 * after an error, or with *retry_cap set (the stages overflowed shared memory: nothing reported). */
/* How the warp-specialized entries are scheduled (compile_ws tries them in turn while ptxas says
 * those entries spill). */
typedef struct WsPlan {
  bool rotate;        /* rotate loops where legal (TILEC_ROTATE=1) */
  bool wide_producer; /* the producer at 40 registers instead of 24 (SchedOptions) */
  bool whole_stores;  /* TMA stores of whole tiles, not per warpgroup (SchedOptions) */
  bool unpacked;      /* the ws entry's P rounded where the softmax makes it (as TILEC_CVT_PACK=0):
                         the unrounded scores no longer live until the packing at the dot, which
                         a rotated loop of wide key tiles cannot afford; TILEC_UNPACKED_PLAN=1 */
  bool one_block;     /* registers for 1 block an SM where the schedule would budget 2 (SchedOptions) */
  bool no_idle_bands; /* no idle bands (SchedOptions): their loop's second copy tipped ptxas over */
  const bool *no_ws;  /* per kernel of the file: no warp-specialized entry (SchedOptions), or NULL */
  bool rotated;       /* out: some loop was rotated */
  bool two_blocks;    /* out: some warp-specialized entry is budgeted for 2 blocks an SM */
  bool split;         /* out: some TMA store is split by warpgroup */
  bool banded;        /* out: some warp-specialized entry has idle bands */
  bool ws;            /* out: some kernel has a warp-specialized entry */
} WsPlan;

static bool module_add(const Cg *m, TirFunc *f0, int stage_cap, WsPlan *plan, bool no_ws, int *retry_cap, Cg **gs, int *ngs,
                       const char **meta, int *smem_out) {
  Cg *g = arena_alloc(f0->arena, sizeof *g);
  *g = *m;
  if (!(f0 = tir_swap_small_dots(f0, m->o->arch, m->d)))
    return false;
  g->f = f0;
  g->loc = f0->loc;
  g->retry_cap = retry_cap;
  g->wgmma = m->o->arch == ARCH_SM90A && layout_kernel_uses_wgmma(f0);
  if (!check_func(g) || !layout_assign_wgmma(f0, g->d, g->wgmma))
    return false;
  SchedOptions so = {.arch = m->o->arch, .wgmma = g->wgmma, .stage_cap = stage_cap, .wide_producer = plan->wide_producer,
                     .whole_stores = plan->whole_stores, .one_block = plan->one_block, .no_ws = no_ws,
                     .no_idle_bands = plan->no_idle_bands};
  TirFunc *f = tir_schedule(f0, &so, g->d);
  if (!f)
    return false;
  g->f = f;
  g->sched = f->sched;
  g->fn_name = f->name;
  Cg *ws = arena_alloc(f0->arena, sizeof *ws);
  *ws = *g;
  plan->ws |= f->sched->ws;
  if (f->sched->ws) { /* its own copy: rotated loops and prefetched epilogue loads (the cp.async entry
                         * keeps the plain ring and its registers) */
    so.ws_entry = true;
    so.rotate = plan->rotate;
    TirFunc *fw = tir_schedule(f0, &so, g->d);
    if (!fw)
      return false;
    ws->f = fw;
    ws->sched = fw->sched;
    ws->cvt_unpacked = plan->unpacked;
    plan->rotated |= fw->sched->pipes[0].rotated;
    plan->two_blocks |= fw->sched->launch_blocks > 1;
    plan->banded |= fw->sched->band_rows > 0;
    for (int t = 0; t < fw->sched->ntmaps; t++)
      plan->split |= fw->sched->tmaps[t].store && fw->sched->tmaps[t].split > 1;
  }
  int smem = build_kernel(g), ws_smem = -1;
  if (smem >= 0 && f->sched->ws) {
    ws->ws = true;
    ws->fn_name = arena_printf(f->arena, "%s__ws", f->name);
    int *ws_retry = arena_alloc(f->arena, sizeof *ws_retry);
    ws->retry_cap = ws_retry;
    if (smem + 16 * f->sched->pipes[0].stages + 8 <= arch_smem_limit(m->o->arch))
      ws_smem = build_kernel(ws);
    if (ws->failed && *ws_retry) /* the mbarriers tipped it over after all */
      cg_error(g, "internal error: the warp-specialized entry of %s does not fit shared memory", f->name);
    if (ws->failed)
      g->failed = true;
  }
  if (g->failed)
    return false;
  gs[(*ngs)++] = g;
  *meta = arena_printf(f->arena, "%s%s%s", *meta, meta_emit(f->arena, f, smem),
                       waits_for_zeroing(g) ? "// tilec: zero_wait\n" : "");
  if (ws_smem >= 0) {
    gs[(*ngs)++] = ws;
    /* the warp-specialized entry's own schedule: its tensor maps (store_ring may give it a TMA
     * store the cp.async entry's ring had no room for) */
    *meta = arena_printf(f->arena, "%s%s", *meta, meta_emit_ws(f->arena, ws->f, ws->fn_name, ws_smem));
  }
  if (smem_out)
    *smem_out = smem;
  return true;
}

/* One compilation of the n kernels into one module, kernel k with at most caps[k] pipeline
 * stages per loop; *retry_cap > 0 afterwards when one's stages overflowed shared memory (nothing
 * reported; compile that kernel again with that cap). */
static char *compile_once(TirFunc **fs, int n, const int *caps, WsPlan *plan, const NvptxOptions *o, Diag *d,
                          int *smem_bytes_out, int *retry_cap) {
  Cg m = {.d = d, .o = o, .loc = fs[0]->loc};
  LLVMTargetMachineRef tm = module_open(&m, o, d, fs[0]->name);
  if (!tm)
    return NULL;
  Cg **gs = arena_alloc(fs[0]->arena, sizeof(Cg *) * (size_t)(2 * n + 1));
  int ngs = 0;
  const char *meta = "";
  bool ok = true;
  for (int k = 0; k < n && ok; k++)
    ok = module_add(&m, fs[k], caps[k], plan, plan->no_ws && plan->no_ws[k], retry_cap, gs, &ngs, &meta,
                    n == 1 ? smem_bytes_out : NULL);
  char *out = ok ? emit(gs, ngs, tm, meta) : NULL;
  module_close(&m, tm);
  return out;
}

/* Whether the `.minnctapersm` at hint belongs to a warp-specialized entry (NAME__ws). */
static bool hint_of_ws_entry(const char *ptx, const char *hint) {
  const char *entry = NULL;
  for (const char *p = ptx; (p = strstr(p, ".entry ")) && p < hint; p++)
    entry = p;
  const char *paren = entry ? strchr(entry, '(') : NULL;
  return paren && paren - entry >= 4 && !strncmp(paren - 4, "__ws", 4);
}

/* The `.minnctapersm` hint (annotate_occupancy) is an estimate; where ptxas is at hand it has the
 * last word: a hint under which ptxas spills is dropped, so ptxas picks the registers itself. The
 * hint is a directive to ptxas only, so the PTX is otherwise the same. Without ptxas the estimate
 * stays (TILEC_OCC_CHECK=0 skips the check, to compare). A warp-specialized entry's hint is its
 * register budget, not an estimate: it stays (compile_ws retries that entry's spills). */
static char *drop_spilling_hint(Arena *a, char *ptx, GpuArch arch) {
  const char *check = getenv("TILEC_OCC_CHECK");
  if (!strstr(ptx, ".minnctapersm") || (check && !strcmp(check, "0")))
    return ptx;
  const char *ptxas = ptxas_find(a);
  long spill = ptxas ? ptxas_spill_bytes(a, ptxas, ptx, arch, NULL) : 0;
  long ws = spill > 0 && strstr(ptx, "__ws(") ? ptxas_spill_bytes(a, ptxas, ptx, arch, "__ws") : 0;
  spill -= ws > 0 ? ws : 0;
  if (spill <= 0)
    return ptx;
  char *line = ptx;
  while ((line = strstr(line, ".minnctapersm"))) {
    if (hint_of_ws_entry(ptx, line)) {
      line++;
      continue;
    }
    while (line > ptx && line[-1] != '\n')
      line--;
    char *end = strchr(line, '\n');
    end = end ? end + 1 : line + strlen(line);
    memmove(line, end, strlen(end) + 1);
  }
  return ptx;
}

static long ws_spill_bytes(Arena *a, const char *ptx, GpuArch arch) {
  const char *ptxas = ptxas_find(a);
  return ptxas ? ptxas_spill_bytes(a, ptxas, ptx, arch, "__ws") : 0;
}

/* The kernel of fs whose function ptxas's message `why` names ("... in function NAME. ..."), or
 * -1; *ws: the function is its warp-specialized entry NAME__ws. */
static int refused_kernel(TirFunc **fs, int n, const char *why, bool *ws) {
  const char *fn = strstr(why, "in function ");
  size_t len = fn ? strcspn(fn += strlen("in function "), ". \t") : 0;
  if ((*ws = len > 4 && !strncmp(fn + len - 4, "__ws", 4)))
    len -= 4;
  for (int k = 0; fn && k < n; k++)
    if (strlen(fs[k]->name) == len && !strncmp(fs[k]->name, fn, len))
      return k;
  return -1;
}

/* Reports ptxas's refusal `why` at the kernel it names; NULL. */
static char *refused(TirFunc **fs, int n, const char *why, const NvptxOptions *o, Diag *d) {
  bool ws;
  int k = refused_kernel(fs, n, why, &ws);
  const char *text = strstr(why, ": ") ? strstr(why, ": ") + 2 : why; /* after "ptxas fatal   : " */
  diag_report(d, DIAG_ERROR, fs[k >= 0 ? k : 0]->loc, "ptxas cannot assemble this kernel for %s (%s); use "
              "fewer warps a block (WARPS) or smaller tiles", arch_name(o->arch), text);
  return NULL;
}

/* A module with wgmma kernels but no warp-specialized entry (whose plans ptxas already checks):
 * out, or an error where ptxas refuses it for registers (C7602: a wgmma wider than a thread's
 * registers at the block's launch, as m64n192 over 16 warps, 128 registers needing 154). */
static char *wgmma_assembles(TirFunc **fs, int n, char *out, const NvptxOptions *o, Diag *d) {
  bool wgmma = false;
  for (int k = 0; k < n; k++)
    wgmma |= o->arch == ARCH_SM90A && layout_kernel_uses_wgmma(fs[k]);
  const char *ptxas = wgmma ? ptxas_find(fs[0]->arena) : NULL;
  char *why = ptxas ? ptxas_refusal(fs[0]->arena, ptxas, out, o->arch) : NULL;
  return why && strstr(why, "(C7602)") ? refused(fs, n, why, o, d) : out;
}

/* Rotated loops (tir_schedule.c) are on where legal (3+ stages), TILEC_ROTATE=0 turns them off:
 * since the last iteration stopped zeroing the scores (session q) they beat the plain
 * warp-specialized loop of as many stages on the H200 (docs/performance.md). A rotated loop keeps the
 * next iteration's scores, this one's P and the output accumulator in registers at once. Where
 * ptxas at hand says a warp-specialized entry spills, the module is compiled again: with the
 * producer at 40 registers (the consumers at 232), then without rotation, then both, then (the
 * few registers of a split TMA store tipped a GELU epilogue over) with whole-tile stores; then, if
 * an entry was budgeted for 2 blocks an SM (one consumer warpgroup), every plan again at 1
 * block's registers. The first plan without spills wins, else the one that spills the fewest
 * bytes (the earlier on a tie). Where ptxas refuses every plan's module for registers (C7602: a
 * wgmma wider than a thread's registers at the block's launch, as m64n192 in a block of 640
 * threads), the kernel whose entry it names goes without one and runs its cp.async entry instead
 * of failing to load; a module ptxas still refuses that way is an error at the kernel. */
static char *compile_ws(TirFunc **fs, int n, const int *caps, const NvptxOptions *o, Diag *d, int *smem_bytes_out,
                        int *retry_cap) {
  bool rotate = tir_rotation_enabled();
  /* In order; the first without a spill wins, else the fewest spilled bytes. `if_rotated`: tried
   * only when a loop was rotated (the plain plans are plan 0 again otherwise, and the unpacked P
   * pays only in a rotated loop); `if_split`: only when a store was split. */
  static const struct {
    WsPlan plan;
    bool if_rotated, if_split;
  } plans[] = {{{.rotate = true}, false, false},
               {{.rotate = true, .unpacked = true}, true, false},
               {{.rotate = true, .wide_producer = true}, false, false},
               {{0}, true, false},
               {{.wide_producer = true}, true, false},
               {{.rotate = true, .whole_stores = true}, false, true},
               {{.rotate = true, .wide_producer = true, .whole_stores = true}, false, true}};
  bool unpacked_on = env_on("TILEC_UNPACKED_PLAN"); /* opt-in: run z2 measured it slower than the plain loop */
  char *best = NULL;
  long best_spill = 0;
  bool rotated = false, split = false, two_blocks = false, banded = false;
  /* round 1 (every plan spilled, some entry budgeted for 2 blocks an SM): the plans again at 1
   * block's registers; rounds 2 and 3 (every plan spilled and some entry had idle bands): rounds
   * 0 and 1 without them (their loop's second copy moved ptxas's allocation: GEMM + GELU in bf16
   * spilled 4 bytes with them, none without) */
  for (int round = 0; round < 4; round++)
    for (size_t k = 0; k < sizeof plans / sizeof plans[0]; k++) {
      if ((round & 1 && !two_blocks) || (round >= 2 && !banded))
        break;
      if ((plans[k].if_rotated && !rotated) || (plans[k].if_split && !split) || (plans[k].plan.unpacked && !unpacked_on))
        continue;
      WsPlan plan = plans[k].plan;
      plan.rotate &= rotate;
      plan.one_block = round & 1;
      plan.no_idle_bands = round >= 2;
      char *out = compile_once(fs, n, caps, &plan, o, d, smem_bytes_out, retry_cap);
      if (!out || *retry_cap || o->dump_llvm)
        return out;
      if (!plan.ws)
        return wgmma_assembles(fs, n, out, o, d);
      long spill = ws_spill_bytes(fs[0]->arena, out, o->arch);
      if (spill == 0) /* < 0: ptxas refused the module (C7602 ...): the next plan */
        return out;
      if (!best || (spill > 0 && (best_spill < 0 || spill < best_spill)))
        best = out, best_spill = spill; /* the fewest spilled bytes; the earlier plan on a tie */
      rotated |= plan.rotated;
      split |= plan.split;
      two_blocks |= plan.two_blocks;
      banded |= plan.banded;
    }
  /* ptxas refused every plan's module for want of registers (not for any other reason: a ptxas
   * too old for the PTX's .version refuses everything, and the driver may still take it): the
   * kernel whose warp-specialized entry it names goes without one, until ptxas takes the module
   * or names another function */
  const char *ptxas = best && best_spill < 0 ? ptxas_find(fs[0]->arena) : NULL;
  char *why = ptxas ? ptxas_refusal(fs[0]->arena, ptxas, best, o->arch) : NULL;
  if (!why || !strstr(why, "(C7602)"))
    return best; /* (*smem_bytes_out is the cp.async entry's: the same for every plan) */
  bool *no_ws = arena_alloc(fs[0]->arena, sizeof(bool) * (size_t)n);
  memset(no_ws, 0, sizeof(bool) * (size_t)n);
  char *out = best;
  int k;
  bool ws;
  while (why && (k = refused_kernel(fs, n, why, &ws)) >= 0 && ws && !no_ws[k]) {
    no_ws[k] = true;
    WsPlan plan = {.no_ws = no_ws};
    if (!(out = compile_once(fs, n, caps, &plan, o, d, smem_bytes_out, retry_cap)) || *retry_cap)
      return out;
    why = ptxas_refusal(fs[0]->arena, ptxas, out, o->arch);
  }
  return why ? refused(fs, n, why, o, d) : out;
}

/* The numbers after each `key` in a module's metadata, in order, into v[0 .. max); their count. */
static int module_meta(const char *ptx, const char *key, int *v, int max) {
  int n = 0;
  for (const char *p = ptx; n < max && (p = strstr(p, key)); p++)
    v[n++] = atoi(p + strlen(key));
  return n;
}

static int module_smem(const char *ptx, int *v, int max) { return module_meta(ptx, "// tilec: smem ", v, max); }

/* Whether module a (with loop versions) costs no more than module b (without): per function no
 * more ptxas registers, per kernel no fewer blocks per SM by shared memory. */
static bool no_costlier(Arena *ar, const char *ptxas, GpuArch arch, const char *a, const char *b) {
  enum { MAXF = 64 };
  int ra[MAXF], rb[MAXF], n = ptxas_registers(ar, ptxas, a, arch, ra, MAXF);
  if (n < 0 || ptxas_registers(ar, ptxas, b, arch, rb, MAXF) != n)
    return false;
  for (int k = 0; k < n; k++)
    if (ra[k] > rb[k])
      return false;
  int ta[MAXF], tb[MAXF];
  n = module_smem(a, ra, MAXF);
  if (module_smem(b, rb, MAXF) != n || module_meta(a, "// tilec: threads ", ta, MAXF) != n ||
      module_meta(b, "// tilec: threads ", tb, MAXF) != n)
    return false;
  for (int k = 0; k < n; k++)
    if (arch_blocks_per_sm(arch, ta[k], ra[k]) < arch_blocks_per_sm(arch, tb[k], rb[k]))
      return false;
  return true;
}

/* The most instructions of any entry of a PTX module: its lines that start with a tab, from one
 * `.entry` to the next, but for comments (`// begin inline asm`); declarations count. */
static long ptx_largest_entry(const char *ptx) {
  long most = 0;
  for (const char *p = strstr(ptx, ".entry"), *next; p; p = next) {
    next = strstr(p + 1, ".entry");
    long n = 0;
    for (const char *t = p; (t = strstr(t, "\n\t")) && (!next || t < next); t += 2)
      n += t[2] != '/';
    most = n > most ? n : most;
  }
  return most;
}

/* A module with loop versions is not kept where an entry of it has more PTX instructions than
 * this: the instruction fetch starts to show. Rmsnorm backward with four rows of 1024 columns a
 * step (32 elements a thread, each with its shifted copy) came out at 18000 an entry with its
 * versions (4.9 times the plain module, at the same registers) and ran 5-6% slower with them
 * (run ar4, H100); layernorm backward's thread-private ring kept versions of 10000 and stalled on
 * instruction fetch (session aq's profile). Cross-entropy backward's versioned entries have
 * 3900-5200 and keep them (its misaligned rows run 1.5 times faster with them). */
enum { VERSIONS_MAX_INSTRUCTIONS = 8000 };

/* Loop versions by default (TILEC_SHIFTED unset) only where they cost nothing: where the ptxas at
 * hand gives some function of the module more registers, or some kernel's shared memory fewer
 * blocks per SM, than the module without them (the plain loops), or where they make an entry
 * longer than VERSIONS_MAX_INSTRUCTIONS, the plain module is kept. Without ptxas, no
 * versions by default. --emit=llvm shows the module the PTX would come from. The compiles made
 * only to compare report to a scratch sink (their messages would repeat the kept module's). */
static char *plain_if_cheaper(TirFunc **fs, int n, const NvptxOptions *o, Diag *d, char *versioned,
                              char *(*again)(TirFunc **, int, const NvptxOptions *, Diag *)) {
  if (!versioned || shifted_forced())
    return versioned;
  Arena *a = fs[0]->arena;
  FILE *sink = fopen("/dev/null", "w");
  Diag quiet = *d;
  quiet.out = sink ? sink : d->out;
  quiet.nerrors = quiet.nwarnings = 0;
  NvptxOptions ptx_o = *o, plain_o = *o;
  ptx_o.dump_llvm = false;
  ptx_o.loop_versions = plain_o.loop_versions = NULL;
  plain_o.no_loop_versions = true;
  char *v_ptx = o->dump_llvm ? again(fs, n, &ptx_o, &quiet) : versioned;
  ptx_o.no_loop_versions = true;
  char *plain_ptx = again(fs, n, &ptx_o, o->dump_llvm ? &quiet : d);
  if (sink)
    fclose(sink);
  const char *ptxas = ptxas_find(a);
  if (!plain_ptx || (ptxas && v_ptx && no_costlier(a, ptxas, o->arch, v_ptx, plain_ptx) &&
                     ptx_largest_entry(v_ptx) <= VERSIONS_MAX_INSTRUCTIONS))
    return versioned;
  return o->dump_llvm ? again(fs, n, &plain_o, d) : plain_ptx;
}

static char *compile_single(TirFunc *f, const NvptxOptions *o, Diag *d, int *smem_bytes_out);
static char *compile_one(TirFunc **fs, int n, const NvptxOptions *o, Diag *d);
static char *compile_module(TirFunc **fs, int n, const NvptxOptions *o, Diag *d);

char *nvptx_compile(TirFunc *f, const NvptxOptions *o, Diag *d, int *smem_bytes_out) {
  if (smem_bytes_out)
    *smem_bytes_out = 0;
  int versions = 0;
  NvptxOptions vo = *o;
  vo.loop_versions = &versions;
  char *out = compile_single(f, &vo, d, smem_bytes_out);
  char *kept = versions ? plain_if_cheaper(&f, 1, o, d, out, compile_one) : out;
  int smem;
  if (kept != out && kept && smem_bytes_out && module_smem(kept, &smem, 1) == 1)
    *smem_bytes_out = smem; /* the plain module's (its cp.async entry's, as compile_single reports) */
  return kept;
}

static char *compile_one(TirFunc **fs, int n, const NvptxOptions *o, Diag *d) {
  (void)n;
  return compile_single(fs[0], o, d, NULL);
}

static char *compile_single(TirFunc *f, const NvptxOptions *o, Diag *d, int *smem_bytes_out) {
  if ((unsigned)o->arch >= ARCH_COUNT) {
    diag_plain(d, DIAG_ERROR, "unknown GPU architecture %d", (int)o->arch);
    return NULL;
  }
  int cap = 8; /* the language's largest pipeline depth */
  for (;;) {
    int retry = 0;
    char *out = compile_ws(&f, 1, &cap, o, d, smem_bytes_out, &retry);
    if (!retry)
      return out && !o->dump_llvm ? drop_spilling_hint(f->arena, out, o->arch) : out;
    cap = retry;
  }
}

char *nvptx_compile_module(TirFunc **fs, int n, const NvptxOptions *o, Diag *d) {
  int versions = 0;
  NvptxOptions vo = *o;
  vo.loop_versions = &versions;
  char *out = compile_module(fs, n, &vo, d);
  return versions ? plain_if_cheaper(fs, n, o, d, out, compile_module) : out;
}

static char *compile_module(TirFunc **fs, int n, const NvptxOptions *o, Diag *d) {
  if (n < 1 || (unsigned)o->arch >= ARCH_COUNT) {
    diag_plain(d, DIAG_ERROR, "internal error: a module of %d kernels for architecture %d", n, (int)o->arch);
    return NULL;
  }
  /* Each kernel's stage count alone first (the retries of nvptx_compile), then the module. */
  int *caps = arena_alloc(fs[0]->arena, sizeof(int) * (size_t)n);
  for (int k = 0; k < n; k++) {
    caps[k] = 8;
    for (;;) {
      int retry = 0;
      WsPlan plan = {0}; /* stage caps only */
      if (!compile_once(&fs[k], 1, &caps[k], &plan, o, d, NULL, &retry) && !retry)
        return NULL;
      if (!retry)
        break;
      caps[k] = retry;
    }
  }
  int retry = 0;
  char *out = compile_ws(fs, n, caps, o, d, NULL, &retry);
  if (retry) {
    diag_plain(d, DIAG_ERROR, "internal error: a kernel's shared memory changed in the module");
    return NULL;
  }
  return out && !o->dump_llvm ? drop_spilling_hint(fs[0]->arena, out, o->arch) : out;
}
