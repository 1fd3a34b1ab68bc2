/* test_swap.c — tir_swap.c: a DOT of fewer than 64 rows computed as its transpose on sm_90a. */
#include "layout.h"
#include "test_support.h"

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

static const char *GEMM_M16[] = {"BM=16", "BN=64", "BK=128", "WARPS=4", "STAGES=6", NULL};

static TirFunc *gemm(Arena *a, const char **defs, GpuArch arch, Diag *d) {
  return source_tir(a, "gemm", example_text(a, "gemm"), defs, arch, d);
}

Test(swap, a_gemm_of_16_rows_becomes_its_transpose_on_wgmma) {
  Arena *a = arena_new();
  Diag d;
  TirFunc *f = gemm(a, GEMM_M16, ARCH_SM90A, &d);
  cr_assert(!layout_kernel_uses_wgmma(f), "16 rows: no wgmma tiling as written");
  TirFunc *g = tir_swap_small_dots(f, ARCH_SM90A, &d);
  cr_assert(g && g != f);
  cr_assert(layout_kernel_uses_wgmma(g));
  int dot = find_op(g, 0, TIR_DOT);
  const TirInst *in = &g->insts[dot];
  const TileType *c = &g->regs[in->dst].type;
  cr_assert_eq(c->dims[0], 64);
  cr_assert_eq(c->dims[1], 16, "the 16 rows on wgmma's N");
  const TirInst *ta = &g->insts[tir_only_write(g, in->args[0])], *tb = &g->insts[tir_only_write(g, in->args[1])];
  cr_assert_eq(ta->op, TIR_TRANS);
  cr_assert_eq(tb->op, TIR_TRANS);
  cr_assert_eq(g->regs[ta->args[0]].type.dims[1], 64, "operand A: B's [BK, BN] tile");
  cr_assert_eq(g->regs[tb->args[0]].type.dims[0], 16, "operand B: A's [16, BK] tile");
  int end = find_op(g, dot, TIR_ENDFOR);
  cr_assert_eq(g->insts[end + 1].op, TIR_TRANS, "the result transposed back after the loop");
  cr_assert_eq(g->insts[end + 1].args[0], in->dst);
  cr_assert_eq(g->regs[g->insts[end + 1].dst].type.dims[0], 16);
  cr_assert_eq(find_op(f, 0, TIR_TRANS), -1, "f itself is unchanged");
  arena_free(a);
}

Test(swap, left_alone_off_sm90a_with_the_knob_at_64_rows_and_when_the_loop_reads_the_sum) {
  Arena *a = arena_new();
  Diag d;
  TirFunc *f = gemm(a, GEMM_M16, ARCH_SM80, &d);
  cr_assert_eq(tir_swap_small_dots(f, ARCH_SM80, &d), f, "sm_80: mma.sync takes 16 rows");
  f = gemm(a, GEMM_M16, ARCH_SM90A, &d);
  setenv("TILEC_SWAP_AB", "0", 1);
  cr_assert_eq(tir_swap_small_dots(f, ARCH_SM90A, &d), f);
  unsetenv("TILEC_SWAP_AB");
  static const char *m64[] = {"BM=64", "BN=64", "BK=64", "WARPS=4", NULL};
  f = gemm(a, m64, ARCH_SM90A, &d);
  cr_assert_eq(tir_swap_small_dots(f, ARCH_SM90A, &d), f, "64 rows: wgmma as written");
  static const char src[] =
      "kernel k(A: f16[M, K], B: f16[K, N], C: out f32[M, N])\n"
      "  grid (cdiv(N, 64), cdiv(M, 16)) threads (128)\n"
      "{\n"
      "  reg acc: f32[16, 64] = 0;\n"
      "  reg s: f32[16, 64] = 0;\n"
      "  for k0 in 0 .. K step 64 pipeline 3 {\n"
      "    shared a = A[block.y * 16 : +16, k0 : +64];\n"
      "    shared b = B[k0 : +64, block.x * 64 : +64];\n"
      "    acc += dot(a, b);\n"
      "    s += acc;\n"
      "  }\n"
      "  C[block.y * 16 : +16, block.x * 64 : +64] = s;\n"
      "}\n";
  f = source_tir(a, "k.tile", src, NULL, ARCH_SM90A, &d);
  cr_assert_eq(tir_swap_small_dots(f, ARCH_SM90A, &d), f, "the loop reads the running sum: left as written");
  arena_free(a);
}

/* Both entries assemble without spills; the PTX: m64n16k16 with imm-trans-a 1. */
Test(swap, ptx_of_the_swapped_gemm) {
  Arena *a = arena_new();
  char *ptx = source_ptx(a, "gemm", example_text(a, "gemm"), GEMM_M16, ARCH_SM90A);
  cr_assert(strstr(ptx, "// tilec: ws gemm__ws"));
  cr_assert(strstr(ptx, "m64n16k16.f32.f16.f16"));
  /* both operands from descriptors, A MN-major (imm-trans-a 1), B K-major (imm-trans-b 0) */
  cr_assert(strstr(ptx, "}, %rd") && strstr(ptx, ", p, 1, 1, 1, 0;"));
  cr_assert(!strstr(ptx, "mma.sync"));
  ptxas_assert_unserialized(ptx, ARCH_SM90A);
  arena_free(a);
}

/* The transpose back after the loop goes through a scratch slot of shared memory, which the
 * schedule counts: 32 x 256 at pipeline 2 (a 36 KB slot) once got a ring and a TMA store that
 * did not fit beside it ("internal error: the warp-specialized entry does not fit", review of
 * session ai); 16 x 256 x 128 at pipeline 4 too. */
Test(swap, the_transpose_back_is_counted_in_shared_memory) {
  Arena *a = arena_new();
  static const char *m32[] = {"BM=32", "BN=256", "BK=64", "WARPS=8", "STAGES=2", NULL};
  static const char *m16[] = {"BM=16", "BN=256", "BK=128", "WARPS=4", "STAGES=4", NULL};
  const char **defs[2] = {m32, m16};
  for (int k = 0; k < 2; k++) {
    char *ptx = source_ptx(a, "gemm", example_text(a, "gemm"), defs[k], ARCH_SM90A);
    cr_assert(strstr(ptx, "// tilec: ws gemm__ws"), "case %d: the warp-specialized entry", k);
    ptxas_assert_unserialized(ptx, ARCH_SM90A);
  }
  arena_free(a);
}
