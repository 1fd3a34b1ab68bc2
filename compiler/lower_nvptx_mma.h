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

#endif
