/* lower_nvptx_mma.h — DOT on tensor cores (ldmatrix + mma.sync m16n8k16), used by lower_nvptx.c.
 * Only compiler/lower_nvptx*.c include this header (it needs llvm-c/). */
#ifndef TILEC_LOWER_NVPTX_MMA_H
#define TILEC_LOWER_NVPTX_MMA_H

#include "layout.h"

#include <llvm-c/Core.h>

/* One operand of the dot, A [M, K] or B [K, N]: either a 2-D f16/bf16 buffer in shared memory
 * (read with ldmatrix) or register values already in the fragment layout
 * (layout_mma_operand_a / _b; f32 values rounded to the element type). */
typedef struct NvMmaOperand {
  LLVMValueRef base;      /* shared: i8 addrspace(3) pointer to element (0, 0), 16-byte aligned */
  int pitch;              /* shared: elements per stored row, a multiple of 8 */
  bool trans;             /* shared: element (i, j) is stored at row j, column i */
  LLVMValueRef *regs;     /* NULL: in shared memory; else the fragment-layout register values */
} NvMmaOperand;

typedef struct NvMmaDot {
  LLVMContextRef ctx;
  LLVMModuleRef mod;
  LLVMBuilderRef b;
  LLVMValueRef tid;       /* i32 thread index in the block */
  bool bf16;              /* operand type: bf16, else f16 */
  int32_t M, N, Kpad;     /* padded result dims; padded K (the operand layouts' extent) */
  int32_t K;              /* logical K, a multiple of 16: the k16 steps that run */
  int wm, wn;             /* layout_mma_warps */
  NvMmaOperand a, bop;
  LLVMValueRef *c;        /* in: the accumulator in layout_mma_acc (f32); out: the result */
} NvMmaDot;

/* Emits the dot. Returns NULL, or the name of an intrinsic LLVM does not know (an internal
 * error the caller reports). */
const char *nvmma_emit_dot(NvMmaDot *d);

/* ---- wgmma (sm_90a, lower_nvptx_wgmma.c). An operand in shared memory is a tile stored in
 * layout_smem_wgmma's swizzled layout, read through matrix descriptors; operand A may instead be
 * register values in layout_wgmma_operand_a. */
typedef struct NvWgmmaOperand {
  LLVMValueRef base;       /* shared: i8 addrspace(3) pointer to the tile, 8 * swizzle aligned */
  const SmemLayout *smem;  /* shared: the stored tile's layout */
  bool k_major;            /* shared: stored [M, K] (A) or [N, K] (B); else [K, M] / [K, N] */
  LLVMValueRef *regs;      /* A only: NULL, or the register values (f32, rounded) */
} NvWgmmaOperand;

typedef struct NvWgmmaDot {
  LLVMContextRef ctx;
  LLVMModuleRef mod;
  LLVMBuilderRef b;
  LLVMValueRef wg;       /* i32: this thread's warpgroup (tid / 128), the same in its 128 threads */
  bool bf16;
  int32_t M, N, Kpad, K; /* padded result dims, padded and logical K (k16 steps: K / 16) */
  int wgm, wgn;          /* layout_wgmma_warpgroups */
  int32_t Nissue;        /* columns a warpgroup's wgmma computes: N / wgn, or fewer when the
                            result's logical N is not a power of two (layout_dot_wgmma_n); the
                            accumulator registers of the columns beyond are left undefined */
  NvWgmmaOperand a, bop;
  LLVMValueRef *c;       /* in / out: the accumulator in layout_wgmma_acc (f32) */
  bool zero_acc;         /* c is all zeros: not read (the first k step's scale-d is 0) */
  int k_steps;           /* > 0: only the first k_steps k16 steps (TirInst.k_steps) */
  int in_flight;         /* 0: wait_group 0, the result is ready. 2: no wait (async; the caller
                            retires it with nvwgmma_wait). 1: wait_group 1: this dot's group
                            stays in flight (the previous one retires); c are the asm's outputs, to be
                            read only after nvwgmma_wait (the caller proved nothing else touches
                            them or the dot's shared operands until then, see plan_overlap) */
} NvWgmmaDot;

/* wgmma.fence, per k16 step and m64 tile one wgmma.mma_async (inline PTX: LLVM 19 has no
 * intrinsic), commit_group, wait_group d->in_flight. Returns NULL or an internal error message. */
const char *nvwgmma_emit_dot(NvWgmmaDot *d);

/* wgmma.wait_group pending (0 or 1), then each of vals[0 .. n) (f32) through an empty asm
 * statement ordered after it: the accumulators of dots left in flight, read only from here on. */
void nvwgmma_wait(LLVMContextRef ctx, LLVMBuilderRef b, int pending, LLVMValueRef *vals, int n);
void nvwgmma_drain(LLVMContextRef ctx, LLVMBuilderRef b, LLVMValueRef *vals, int n);
/* Both skip undefined values (the padding columns of a dot whose N is not a power of two). */

#endif
