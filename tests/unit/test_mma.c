/* test_mma.c — tensor-core layouts and lowering: the mma.m16n8k16 operand-B fragment against the
 * PTX ISA table; whole-tile accumulator / operand layouts against their definition; the
 * accumulator -> operand-A reinterpretation (FlashAttention-2's register reuse); the ldmatrix lane
 * addresses, simulated against the instruction's definition for every storage order; the layout
 * pass's choice; and gemm / attention PTX with mma.sync and ldmatrix that ptxas assembles for sm_80
 * and sm_90a without spills. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ast.h"
#include "layout.h"
#include "tilec.h"
#include "test_support.h"

static void coord_of(const Layout *l, uint32_t r, uint32_t lane, uint32_t warp, int32_t *c) {
  layout_coord(2, l->shape, layout_apply(l, r, lane, warp), c);
}

Test(mma, b_fragment_matches_ptx_table) {
  Layout l = layout_mma_m16n8k16_b();
  cr_assert_eq(l.shape[0], 16);
  cr_assert_eq(l.shape[1], 8);
  for (int lane = 0; lane < 32; lane++)
    for (int i = 0; i < 4; i++) {
      int group = lane >> 2, tig = lane % 4;
      int row = tig * 2 + (i & 1) + (i >= 2 ? 8 : 0), col = group;
      int32_t c[2];
      coord_of(&l, (uint32_t)i, (uint32_t)lane, 0, c);
      cr_assert_eq(c[0], row, "lane %d b%d", lane, i);
      cr_assert_eq(c[1], col, "lane %d b%d", lane, i);
    }
  cr_assert(layout_is_surjective(&l));
  cr_assert(layout_is_injective_mod_broadcast(&l));
}

Test(mma, warp_tiling_choice) {
  int wm, wn;
  cr_assert(layout_mma_warps(64, 64, 4, &wm, &wn));
  cr_assert(wm == 4 && wn == 1);
  cr_assert(layout_mma_warps(128, 64, 8, &wm, &wn));
  cr_assert(wm == 8 && wn == 1);
  cr_assert(layout_mma_warps(32, 64, 8, &wm, &wn));
  cr_assert(wm == 2 && wn == 4);
  cr_assert(layout_mma_warps(16, 8, 1, &wm, &wn));
  cr_assert_not(layout_mma_warps(16, 16, 4, &wm, &wn)); /* 4 warps cannot tile 16 x 16 */
  cr_assert_not(layout_mma_warps(8, 64, 1, &wm, &wn));
  cr_assert_not(layout_mma_warps(64, 4, 1, &wm, &wn));
  /* 2-D warp tiles (GEMM): the fewest ldmatrix per k16 step, ties to more warps along M. */
  cr_assert(layout_mma_warps_2d(128, 128, 8, &wm, &wn));
  cr_assert(wm == 4 && wn == 2, "%d x %d", wm, wn);
  cr_assert(layout_mma_warps_2d(64, 64, 4, &wm, &wn));
  cr_assert(wm == 2 && wn == 2, "%d x %d", wm, wn);
  cr_assert(layout_mma_warps_2d(16, 64, 4, &wm, &wn));
  cr_assert(wm == 1 && wn == 4, "%d x %d", wm, wn);
  cr_assert(layout_mma_warps_2d(32, 64, 8, &wm, &wn));
  cr_assert(wm == 2 && wn == 4, "%d x %d", wm, wn);
  cr_assert(layout_mma_warps_2d(256, 128, 8, &wm, &wn));
  cr_assert(wm == 4 && wn == 2, "%d x %d", wm, wn);
  cr_assert_not(layout_mma_warps_2d(16, 16, 4, &wm, &wn));
}

/* The whole-tile layouts hold, for (register, lane, warp), exactly the element the register
 * numbering in layout.h promises, and each element once (operands: once per replica warp). */
static void check_whole(int M, int N, int K, int wm, int wn) {
  int MW = M / wm, NW = N / wn, MT = MW / 16, NT = NW / 8, KT = K / 16;
  Layout acc = layout_mma_acc(M, N, wm, wn), a = layout_mma_operand_a(M, K, wm, wn);
  Layout b = layout_mma_operand_b(K, N, wm, wn);
  cr_assert_eq(layout_nregs(&acc), 4 * MT * NT);
  cr_assert_eq(layout_nregs(&a), 8 * MT * KT);
  cr_assert_eq(layout_nregs(&b), 4 * NT * KT);
  Layout fc = layout_mma_m16n8k16_acc(), fa = layout_mma_m16n8k16_a(), fb = layout_mma_m16n8k16_b();
  for (int w = 0; w < wm * wn; w++)
    for (int lane = 0; lane < 32; lane++) {
      int wi = w % wm, wj = w / wm;
      int32_t c[2], f[2];
      for (int r = 0; r < layout_nregs(&acc); r++) {
        int i = r % 4, nt = r / 4 % NT, mt = r / 4 / NT;
        coord_of(&acc, (uint32_t)r, (uint32_t)lane, (uint32_t)w, c);
        coord_of(&fc, (uint32_t)i, (uint32_t)lane, 0, f);
        cr_assert(c[0] == wi * MW + 16 * mt + f[0] && c[1] == wj * NW + 8 * nt + f[1], "acc r%d lane %d w%d", r,
                  lane, w);
      }
      for (int r = 0; r < layout_nregs(&a); r++) {
        int i = r % 8, kt = r / 8 % KT, mt = r / 8 / KT;
        coord_of(&a, (uint32_t)r, (uint32_t)lane, (uint32_t)w, c);
        coord_of(&fa, (uint32_t)i, (uint32_t)lane, 0, f);
        cr_assert(c[0] == wi * MW + 16 * mt + f[0] && c[1] == 16 * kt + f[1], "a r%d lane %d w%d", r, lane, w);
      }
      for (int r = 0; r < layout_nregs(&b); r++) {
        int i = r % 4, nt = r / 4 % NT, kt = r / 4 / NT;
        coord_of(&b, (uint32_t)r, (uint32_t)lane, (uint32_t)w, c);
        coord_of(&fb, (uint32_t)i, (uint32_t)lane, 0, f);
        cr_assert(c[0] == 16 * kt + f[0] && c[1] == wj * NW + 8 * nt + f[1], "b r%d lane %d w%d", r, lane, w);
      }
    }
  cr_assert(layout_is_surjective(&acc) && layout_is_injective_mod_broadcast(&acc));
  cr_assert(layout_is_surjective(&a) && layout_is_injective_mod_broadcast(&a));
  cr_assert(layout_is_surjective(&b) && layout_is_injective_mod_broadcast(&b));
  cr_assert_eq(layout_zero_mask(&acc, LAY_WARP), 0);
  cr_assert_eq(layout_vec_width(&acc), 2);
}

Test(mma, whole_tile_layouts) {
  int shapes[][3] = {{16, 8, 16}, {64, 64, 32}, {64, 128, 64}, {128, 64, 16}, {32, 64, 64}, {256, 256, 32}};
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
    for (int warps = 1; warps <= 8; warps *= 2) {
      int wm, wn;
      if (layout_mma_warps(shapes[s][0], shapes[s][1], warps, &wm, &wn))
        check_whole(shapes[s][0], shapes[s][1], shapes[s][2], wm, wn);
    }
}

/* Two adjacent n8 accumulator tiles are one k16 tile of operand A, in the same registers. */
Test(mma, accumulator_is_operand_a) {
  int32_t s16[2] = {16, 16};
  Layout acc2 = layout_mma_acc(16, 16, 1, 1), a = layout_mma_m16n8k16_a();
  cr_assert(layout_equal(&acc2, &a));
  (void)s16;
  int cases[][3] = {{64, 64, 4}, {64, 128, 4}, {128, 64, 8}, {16, 64, 1}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    int M = cases[i][0], N = cases[i][1], wm, wn;
    cr_assert(layout_mma_warps(M, N, cases[i][2], &wm, &wn));
    cr_assert_eq(wn, 1);
    Layout c = layout_mma_acc(M, N, wm, wn), op = layout_mma_operand_a(M, N, wm, wn);
    cr_assert(layout_equal(&c, &op), "M %d N %d", M, N);
  }
  /* With warps along N the operand replicates across them: not the same layout. */
  Layout c = layout_mma_acc(32, 64, 2, 4), op = layout_mma_operand_a(32, 64, 2, 4);
  cr_assert_not(layout_equal(&c, &op));
}

/* ldmatrix, by its definition: lane 8j + r gives the address of row r of matrix j (8 contiguous
 * b16). Without .trans thread t receives, in register j, row t / 4, columns 2 (t % 4) + {0, 1} of
 * matrix j; with .trans, column t / 4, rows 2 (t % 4) + {0, 1}. The lowering uses .trans when the
 * stored rows run along the fragment's pair dim (A: dim 1, B: dim 0). */
static void check_ldmatrix(bool is_b, int row_dim, int nmat) {
  int32_t base[LAYOUT_LANE_BITS][2];
  layout_ldmatrix_lane_bases(row_dim, nmat, base);
  int32_t start[32][2]; /* operand coordinate of each lane's row, by linearity */
  for (int l = 0; l < 32; l++) {
    start[l][0] = start[l][1] = 0;
    for (int b = 0; b < LAYOUT_LANE_BITS; b++)
      if (l >> b & 1) {
        start[l][0] ^= base[b][0];
        start[l][1] ^= base[b][1];
      }
    if (l >= 8 * nmat) /* lanes beyond the matrices: any valid address; ours repeat */
      continue;
    int j = l / 8, r = l % 8;
    /* The expected row start: matrix origin (8 (j & 1), 8 (j >> 1)), plus r along row_dim. */
    cr_assert_eq(start[l][0], 8 * (j & 1) + (row_dim == 0 ? r : 0), "lane %d", l);
    cr_assert_eq(start[l][1], 8 * (j >> 1) + (row_dim == 1 ? r : 0), "lane %d", l);
  }
  int pair_dim = is_b ? 0 : 1;
  bool trans_insn = row_dim == pair_dim;
  Layout frag = is_b ? layout_mma_m16n8k16_b() : layout_mma_m16n8k16_a();
  int frag_cols = is_b ? 8 : 16;
  for (int t = 0; t < 32; t++)
    for (int j = 0; j < nmat; j++)
      for (int h = 0; h < 2; h++) {
        int mrow = trans_insn ? 2 * (t % 4) + h : t / 4, mcol = trans_insn ? t / 4 : 2 * (t % 4) + h;
        const int32_t *s = start[8 * j + mrow];
        int32_t got[2] = {s[0], s[1]};
        got[1 - row_dim] += mcol; /* contiguous along the stored row */
        /* Register j, half h is fragment element 2 j + h; B with two n8 tiles: j >= 2 is tile 1. */
        int i = 2 * j + h, tile = 0;
        if (is_b && i >= 4) {
          tile = 1;
          i -= 4;
        }
        int32_t want[2];
        coord_of(&frag, (uint32_t)i, (uint32_t)t, 0, want);
        want[1] += tile * frag_cols;
        cr_assert(got[0] == want[0] && got[1] == want[1], "%s row_dim %d x%d: thread %d reg %d half %d",
                  is_b ? "B" : "A", row_dim, nmat, t, j, h);
      }
}

Test(mma, ldmatrix_addresses_give_fragments) {
  for (int row_dim = 0; row_dim < 2; row_dim++) {
    check_ldmatrix(false, row_dim, 4);
    check_ldmatrix(true, row_dim, 4);
    check_ldmatrix(true, row_dim, 2);
  }
}

/* ------------------------------------------------------------ the layout pass */

static SrcLoc at(int line) { return (SrcLoc){line, 1, line, 2}; }

static int emit(TirFunc *f, TirOp op, TileType t, int a, int b, int c) {
  TirInst *in = tir_emit(f, op, at(2));
  in->dst = tir_new_reg(f, t, NULL);
  in->args[0] = a, in->args[1] = b, in->args[2] = c;
  return in->dst;
}

Test(mma, layout_pass_gives_dot_results_the_accumulator_layout) {
  Arena *ar = arena_new();
  TirFunc *f = tir_func_new(ar, "k", at(1));
  f->threads = 128;
  TileType sa = {.elem = TY_F16, .rank = 2, .dims = {64, 32}, .place = PLACE_SHARED};
  TileType sb = {.elem = TY_F16, .rank = 2, .dims = {32, 64}, .place = PLACE_SHARED};
  TileType sq = {.elem = TY_F16, .rank = 2, .dims = {64, 64}, .place = PLACE_SHARED};
  TileType acc = {.elem = TY_F32, .rank = 2, .dims = {64, 64}};
  TileType row = {.elem = TY_F32, .rank = 2, .dims = {64, 1}};
  int a = tir_new_reg(f, sa, "a"), b = tir_new_reg(f, sb, "b"), q = tir_new_reg(f, sq, "q");
  int c = emit(f, TIR_CONST, acc, -1, -1, -1);
  int d = emit(f, TIR_DOT, acc, a, b, c);
  int r = emit(f, TIR_REDUCE_SUM, row, d, -1, -1);
  Diag dg = {0};
  dg.out = fopen("/dev/null", "w");
  cr_assert(layout_assign(f, &dg));
  Layout want = layout_mma_acc(64, 64, 4, 1);
  cr_assert(layout_equal(f->regs[d].type.layout, &want));
  cr_assert(layout_equal(f->regs[c].type.layout, &want));
  /* The row statistics are the accumulator's slice: reduced in-thread and over lane bits 0, 1. */
  Layout sl = layout_slice(&want, 1);
  cr_assert(layout_equal(f->regs[r].type.layout, &sl));
  /* A shared tile of the accumulator's shape keeps its blocked (16-byte) layout. */
  Layout blk = layout_blocked(2, (int32_t[]){64, 64}, 128, 8);
  cr_assert(layout_equal(f->regs[q].type.layout, &blk));
  /* K not a multiple of 16, or f32 operands: FMA fallback, blocked layouts. */
  f->regs[a].type.elem = f->regs[b].type.elem = TY_F32;
  cr_assert(layout_assign(f, &dg));
  cr_assert_not(layout_equal(f->regs[d].type.layout, &want));
  f->regs[a].type.elem = f->regs[b].type.elem = TY_F16;
  setenv("TILEC_MMA", "0", 1);
  cr_assert(layout_assign(f, &dg));
  unsetenv("TILEC_MMA");
  cr_assert_not(layout_equal(f->regs[d].type.layout, &want));
  fclose(dg.out);
  arena_free(ar);
}

/* ------------------------------------------------------- PTX of the examples */

static char *example_ptx(Arena *a, const char *example, const char **defs, GpuArch arch) {
  const char *path = arena_printf(a, "dsl/examples/%s.tile", example);
  return ptx_without_ws(a, source_ptx(a, path, example_text(a, example), defs, arch));
}

static int count(const char *s, const char *needle) {
  int n = 0;
  for (const char *p = s; (p = strstr(p, needle)); p++)
    n++;
  return n;
}


/* A dot whose warp tile needs more m16 / n8 fragments than the mma.sync emitter holds takes the
 * FMA path (it used to stop with "internal error: tensor-core lowering: mma tiling"). */
Test(mma, oversized_warp_tile_falls_back_to_fma) {
  static const char *const text =
      "kernel k<M0 = 512, N0 = 8>(A: f16[M, K], B: f16[K, N], C: out f32[M, N])\n"
      "  grid (1) threads (32)\n{\n"
      "  shared a = A[0 : +M0, 0 : +16];\n  shared b = B[0 : +16, 0 : +N0];\n"
      "  C[0 : +M0, 0 : +N0] = dot(a, b);\n}\n";
  const char *tall[] = {"M0=512", "N0=8", NULL}, *wide[] = {"M0=16", "N0=512", NULL};
  const char *const *shapes[] = {tall, wide};
  GpuArch arches[2] = {ARCH_SM80, ARCH_SM90A};
  for (int s = 0; s < 2; s++)
    for (int i = 0; i < 2; i++) {
      Arena *a = arena_new();
      char *ptx = source_ptx(a, "big_dot.tile", text, (const char **)shapes[s], arches[i]);
      cr_assert_eq(count(ptx, "mma.sync"), 0);
      cr_assert(count(ptx, "fma.rn.f32") > 0);
      arena_free(a);
    }
}

/* want_mma / want_ldsm: exact counts of the unrolled instructions per kernel (on sm_90a with
 * TILEC_WGMMA=0: the mma.sync path stays available there). */
static void check_example(const char *example, const char **defs, int want_mma, int want_ldsm) {
  GpuArch arches[2] = {ARCH_SM80, ARCH_SM90A};
  for (int i = 0; i < 2; i++) {
    Arena *a = arena_new();
    setenv("TILEC_WGMMA", "0", 1);
    char *ptx = example_ptx(a, example, defs, arches[i]);
    unsetenv("TILEC_WGMMA");
    cr_assert_eq(count(ptx, "wgmma"), 0);
    cr_assert_eq(count(ptx, "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"), want_mma, "%s %s", example,
                 arch_name(arches[i]));
    cr_assert_eq(count(ptx, "ldmatrix.sync.aligned.m8n8.x4"), want_ldsm, "%s %s", example, arch_name(arches[i]));
    cr_assert_not(strstr(ptx, ".local"));
    ptxas_assert_clean(ptx, arches[i]);
    arena_free(a);
  }
}

Test(mma, gemm_ptx_uses_tensor_cores) {
  /* 64 x 64 x 32 per block, 2 x 2 warps of 32 x 32 (no reduction: 2-D warp tiles): per k16 step
   * two A ldmatrix.x4, two for B (.trans, [K, N] row-major), eight mma; two steps. */
  check_example("gemm", NULL, 16, 8);
  /* 128 x 128 x 32 over 8 warps of 32 x 64: per k16 step 2 + 4 ldmatrix.x4, 16 mma. */
  const char *big[] = {"BM=128", "BN=128", "BK=32", "WARPS=8", "STAGES=3", NULL};
  check_example("gemm", big, 32, 12);
  /* TILEC_MMA_2D=0: warps along M only (16 x 64 each: 1 + 4 ldmatrix per k16 step). */
  setenv("TILEC_MMA_2D", "0", 1);
  check_example("gemm", NULL, 16, 10);
  unsetenv("TILEC_MMA_2D");
}

/* `for ... pipeline P`: the shared-tile loads of the body become cp.async copies P - 1 iterations
 * ahead into P stages; one wait_group P-2 and one barrier per iteration; TILEC_PIPELINE=0 keeps
 * the synchronous loads. A GEMM loop with P >= 3 on wgmma keeps its wgmma group in flight and
 * copies P - 2 ahead (wait_group P-3; wgmma_overlap_protocol_in_gemm_loop). */
Test(mma, pipelined_loads_use_cp_async) {
  struct {
    const char *example;
    const char *defs[8];
    int stages, copies; /* copies per issue: 16-byte chunks per thread over the loop's loads */
    int ahead;          /* iterations the copies run ahead */
  } cases[] = {
      {"gemm", {NULL}, 2, 2 + 2, 1},                                                  /* 64x32 + 32x64 f16, 128 threads */
      {"gemm", {"BM=128", "BN=128", "BK=32", "WARPS=8", "STAGES=3", NULL}, 3, 2 + 2, 1}, /* 256 threads; overlap */
      {"gemm", {"BM=128", "BN=128", "BK=32", "WARPS=8", "STAGES=4", NULL}, 4, 2 + 2, 2},
      {"attention", {NULL}, 2, 4 + 4, 1},                                             /* K, V 64x64 */
      {"attention", {"D=128", "CAUSAL=1", "BM=128", "WARPS=8", NULL}, 2, 4 + 4, 1},
      {"attention", {"BM=128", "WARPS=8", "STAGES=3", NULL}, 3, 2 + 2, 2},            /* two dots: no overlap */
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    Arena *a = arena_new();
    char *ptx = example_ptx(a, cases[i].example, cases[i].defs, ARCH_SM90A);
    char wait[64];
    snprintf(wait, sizeof wait, "cp.async.wait_group %d;", cases[i].ahead - 1);
    cr_assert_geq(count(ptx, wait), 1, "%s case %zu", cases[i].example, i);
    /* prologue: `ahead` commits; the body: one (the optimizer may duplicate one into two paths) */
    cr_assert_geq(count(ptx, "cp.async.commit_group;"), cases[i].ahead + 1, "%s case %zu", cases[i].example, i);
    cr_assert_eq(count(ptx, "cp.async.wait_group"), count(ptx, wait), "%s case %zu", cases[i].example, i);
    /* the fast path of every issue (`ahead` in the prologue, one in the body) at least */
    cr_assert_geq(count(ptx, "cp.async.cg.shared.global ["), (cases[i].ahead + 1) * cases[i].copies, "case %zu", i);
    cr_assert_not(strstr(ptx, ".local"));
    ptxas_assert_clean(ptx, ARCH_SM90A);
    arena_free(a);
  }
  setenv("TILEC_PIPELINE", "0", 1);
  Arena *a = arena_new();
  char *ptx = example_ptx(a, "gemm", NULL, ARCH_SM80);
  unsetenv("TILEC_PIPELINE");
  cr_assert_eq(count(ptx, "cp.async"), 0);
  cr_assert_eq(count(ptx, "mma.sync"), 16);
  arena_free(a);
}

/* Stages that do not fit in shared memory are dropped one by one (the depth is a request); the
 * kernel still compiles when one stage fits. 8 stages of [128, 128] + [128, 128] f16 tiles need
 * 8 x 69632 bytes; sm_90a has 227 KB. */
Test(mma, pipeline_stages_fit_shared_memory) {
  const char *defs[] = {"BM=128", "BN=128", "BK=128", "WARPS=8", "STAGES=8", NULL};
  Arena *a = arena_new();
  char *ptx = example_ptx(a, "gemm", defs, ARCH_SM90A);
  const char *sm = strstr(ptx, "// tilec: smem ");
  cr_assert(sm);
  int bytes = atoi(sm + strlen("// tilec: smem "));
  cr_assert_leq(bytes, arch_smem_limit(ARCH_SM90A));
  cr_assert_geq(bytes, 2 * 69632);
  /* 3 stages fit (208896 bytes + slots): the wgmma overlap copies one iteration ahead */
  cr_assert_geq(count(ptx, "cp.async.wait_group 0;"), 1);
  cr_assert_eq(count(ptx, "wgmma.wait_group.sync.aligned 1;"), 1);
  arena_free(a);
}

Test(mma, attention_ptx_uses_tensor_cores) {
  /* S = Q K^T: 4 k16 steps of (1 + 4) ldmatrix and 8 mma; O += P V: P stays in registers (the
   * accumulator is operand A), V by 4 ldmatrix.trans per step, 8 mma. */
  check_example("attention", NULL, 64, 36);
  const char *d128[] = {"D=128", "CAUSAL=1", NULL};
  check_example("attention", d128, 128, 72);
}

/* TILEC_MMA=0 keeps the FMA lowering (the fallback for other shapes and types). */
Test(mma, fma_fallback_when_disabled) {
  setenv("TILEC_MMA", "0", 1);
  Arena *a = arena_new();
  char *ptx = example_ptx(a, "gemm", NULL, ARCH_SM90A);
  unsetenv("TILEC_MMA");
  cr_assert_eq(count(ptx, "mma.sync"), 0);
  cr_assert_eq(count(ptx, "ldmatrix"), 0);
  cr_assert_geq(count(ptx, "fma.rn.f32"), 16);
  ptxas_assert_clean(ptx, ARCH_SM90A);
  arena_free(a);
}

/* bf16 operands, B given as trans() of an [N, K] tile (plain ldmatrix), 2 warps along M; with
 * BN = 8 a warp has one n8 tile and B comes with ldmatrix.x2. */
static const char *BF16_DOT =
    "kernel mmbf<BM = 32, BN = 16, BK = 32, WARPS = 2>(\n"
    "    A: bf16[M, K], B: bf16[N, K], C: out f32[M, N])\n"
    "  grid (cdiv(N, BN), cdiv(M, BM)) threads (WARPS * 32)\n"
    "{\n"
    "  let m0 = block.y * BM;\n"
    "  let n0 = block.x * BN;\n"
    "  reg acc: f32[BM, BN] = 0;\n"
    "  for k0 in 0 .. K step BK {\n"
    "    shared a = A[m0 : +BM, k0 : +BK];\n"
    "    shared b = B[n0 : +BN, k0 : +BK];\n"
    "    acc += dot(a, trans(b));\n"
    "  }\n"
    "  C[m0 : +BM, n0 : +BN] = acc;\n"
    "}\n";

Test(mma, bf16_and_single_n8_tile) {
  const char *bn8[] = {"BN=8", NULL};
  GpuArch arches[2] = {ARCH_SM80, ARCH_SM90A};
  for (int i = 0; i < 2; i++) {
    Arena *a = arena_new();
    char *ptx = source_ptx(a, "mmbf.tile", BF16_DOT, NULL, arches[i]);
    /* 2 k16 steps x (1 A + 1 B ldmatrix.x4, 2 mma) */
    cr_assert_eq(count(ptx, "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"), 4);
    cr_assert_eq(count(ptx, "ldmatrix.sync.aligned.m8n8.x4.shared.b16"), 4);
    ptxas_assert_clean(ptx, arches[i]);
    ptx = source_ptx(a, "mmbf.tile", BF16_DOT, bn8, arches[i]);
    cr_assert_eq(count(ptx, "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"), 2);
    cr_assert_eq(count(ptx, "ldmatrix.sync.aligned.m8n8.x2.shared.b16"), 2);
    ptxas_assert_clean(ptx, arches[i]);
    arena_free(a);
  }
}

/* ------------------------------------------------------------------ wgmma (sm_90a) */

/* On sm_90a the examples' dots run on wgmma (one per m64 tile and k16 step, shared operands by
 * descriptor), none on sm_80 or with TILEC_WGMMA=0; ptxas assembles them without spills. */
static void check_wgmma(const char *example, const char **defs, int want_desc, int want_rega) {
  Arena *a = arena_new();
  char *ptx = example_ptx(a, example, defs, ARCH_SM90A);
  cr_assert_eq(count(ptx, "wgmma.mma_async.sync.aligned"), want_desc + want_rega, "%s", example);
  cr_assert_eq(count(ptx, "}, {%r"), want_rega, "%s: wgmmas with A from registers", example);
  cr_assert_eq(count(ptx, "wgmma.fence.sync.aligned;"), count(ptx, "wgmma.wait_group.sync.aligned 0;"));
  cr_assert_geq(count(ptx, "fence.proxy.async.shared::cta;"), 1);
  cr_assert(strstr(ptx, ".extern .shared .align 1024 .b8 tilec_smem[]"));
  cr_assert_eq(count(ptx, "mma.sync"), 0);
  cr_assert_eq(count(ptx, "ldmatrix"), 0);
  cr_assert_not(strstr(ptx, ".local"));
  ptxas_assert_clean(ptx, ARCH_SM90A);
  char *p80 = example_ptx(a, example, defs, ARCH_SM80);
  cr_assert_eq(count(p80, "wgmma"), 0);
  cr_assert_gt(count(p80, "mma.sync"), 0);
  setenv("TILEC_WGMMA", "0", 1);
  char *off = example_ptx(a, example, defs, ARCH_SM90A);
  unsetenv("TILEC_WGMMA");
  cr_assert_eq(count(off, "wgmma"), 0);
  cr_assert_gt(count(off, "mma.sync"), 0);
  arena_free(a);
}

Test(mma, wgmma_on_sm90a) {
  check_wgmma("gemm", NULL, 2, 0); /* 64x64x32: one warpgroup, m64n64k16, 2 k16 steps */
  const char *w8[] = {"BM=128", "BN=128", "BK=64", "WARPS=8", "STAGES=3", NULL};
  check_wgmma("gemm", w8, 4, 0); /* 2 warpgroups of 64x128: 4 k16 steps of m64n128k16 */
  const char *w4[] = {"BM=128", "BN=128", "BK=32", "WARPS=4", "STAGES=3", NULL};
  check_wgmma("gemm", w4, 4, 0); /* one warpgroup, two m64 tiles, 2 k16 steps */
  const char *n256[] = {"BM=128", "BN=256", "BK=64", "WARPS=8", "STAGES=3", NULL};
  check_wgmma("gemm", n256, 4, 0); /* m64n256k16, 128 accumulator registers */
  check_wgmma("attention", NULL, 4, 4); /* S = Q K^T: 4 steps; O += P V: P from registers */
  const char *d128[] = {"D=128", "CAUSAL=1", "BM=128", "WARPS=8", NULL};
  check_wgmma("attention", d128, 8, 4);
  const char *w4a[] = {"BM=128", "BN=64", "WARPS=4", NULL};
  check_wgmma("attention", w4a, 8, 8); /* one warpgroup, two m64 tiles */
  /* BN = 8: B rows of 16 bytes cannot be a wgmma operand: the kernel keeps mma.sync. */
  const char *thin[] = {"BM=64", "BN=8", "BK=32", "WARPS=4", NULL};
  Arena *a = arena_new();
  char *ptx = example_ptx(a, "gemm", thin, ARCH_SM90A);
  cr_assert_eq(count(ptx, "wgmma"), 0);
  cr_assert_gt(count(ptx, "mma.sync"), 0);
  arena_free(a);
}

Test(mma, layout_pass_gives_wgmma_results_the_warpgroup_accumulator) {
  Arena *ar = arena_new();
  TirFunc *f = tir_func_new(ar, "k", at(1));
  f->threads = 256;
  TileType sa = {.elem = TY_F16, .rank = 2, .dims = {128, 32}, .place = PLACE_SHARED};
  TileType sb = {.elem = TY_F16, .rank = 2, .dims = {32, 128}, .place = PLACE_SHARED};
  TileType acc = {.elem = TY_F32, .rank = 2, .dims = {128, 128}};
  int a = tir_new_reg(f, sa, "a"), b = tir_new_reg(f, sb, "b");
  TirInst *la = tir_emit(f, TIR_LOAD, at(2));
  la->dst = a, la->args[0] = la->args[1] = la->args[2] = -1;
  TirInst *lb = tir_emit(f, TIR_LOAD, at(2));
  lb->dst = b, lb->args[0] = lb->args[1] = lb->args[2] = -1;
  for (int d = 0; d < TILE_MAX_RANK; d++)
    la->index[d].start = lb->index[d].start = -1;
  int c = emit(f, TIR_CONST, acc, -1, -1, -1);
  int d = emit(f, TIR_DOT, acc, a, b, c);
  cr_assert(layout_kernel_uses_wgmma(f));
  cr_assert(layout_is_wgmma_operand_tile(f, a) && layout_is_wgmma_operand_tile(f, b));
  Diag dg = {0};
  dg.out = fopen("/dev/null", "w");
  cr_assert(layout_assign_wgmma(f, &dg, true));
  Layout want = layout_wgmma_acc(128, 128, 2, 1);
  cr_assert(layout_equal(f->regs[d].type.layout, &want));
  cr_assert(layout_equal(f->regs[c].type.layout, &want));
  /* Without wgmma (another arch): the mma.sync 2-D warp tiles. */
  cr_assert(layout_assign(f, &dg));
  cr_assert_not(layout_equal(f->regs[d].type.layout, &want));
  setenv("TILEC_WGMMA", "0", 1);
  cr_assert_not(layout_kernel_uses_wgmma(f));
  unsetenv("TILEC_WGMMA");
  /* A shared operand read by anything but a DOT keeps the kernel on mma.sync. */
  emit(f, TIR_CVT, (TileType){.elem = TY_F32, .rank = 2, .dims = {128, 32}}, a, -1, -1);
  cr_assert_not(layout_kernel_uses_wgmma(f));
  fclose(dg.out);
  arena_free(ar);
}

/* ------------------------------------------- wgmma overlap in a pipelined GEMM loop
 *
 * With `pipeline P`, P >= 3, the main loop's wgmma group stays in flight into the next iteration
 * (wait_group 1) and the copies run P - 2 iterations ahead (lower_nvptx.c, plan_overlap). The
 * PTX is checked on every control-flow path (a small model checker over its branches, so the
 * check does not depend on how LLVM lays the blocks out). Per path it tracks the wgmma groups
 * this thread has in flight (commit_group adds one, wait_group N leaves at most N) and how many
 * were in flight at the last bar.sync, and it requires:
 *  - a cp.async copy only after a bar.sync that every thread reached with at most one group in
 *    flight, and no wgmma commit between that bar.sync and the copy (so the group still running
 *    is the previous iteration's, whose stage the copy does not target: the copies go P - 2
 *    ahead, into stage (i - 2) % P, checked by the wait_group P - 3 count);
 *  - a wgmma only after wgmma.fence since the last commit, and after a bar.sync preceded by
 *    fence.proxy.async (the landed copies visible to the tensor cores);
 *  - never more than two groups in flight, and none at a global store or at ret. */
enum { EV_OTHER, EV_COPY, EV_CP_COMMIT, EV_CP_WAIT, EV_PROXY, EV_BAR, EV_WG_FENCE, EV_WGMMA, EV_WG_COMMIT,
       EV_WG_WAIT, EV_STG, EV_RET };

typedef struct PtxLine {
  int ev, arg;      /* event kind; wait_group count */
  int jump;         /* branch target line, or -1 */
  bool cond, stops; /* a predicated branch; no fall-through (bra without predicate, ret) */
} PtxLine;

static int ptx_event(const char *l, int *arg) {
  static const struct { const char *s; int ev; } kinds[] = {
      {"cp.async.cg.shared.global", EV_COPY},       {"cp.async.commit_group", EV_CP_COMMIT},
      {"cp.async.wait_group", EV_CP_WAIT},          {"fence.proxy.async", EV_PROXY},
      {"bar.sync", EV_BAR},                          {"wgmma.fence.sync.aligned", EV_WG_FENCE},
      {"wgmma.mma_async", EV_WGMMA},                 {"wgmma.commit_group.sync.aligned", EV_WG_COMMIT},
      {"wgmma.wait_group.sync.aligned", EV_WG_WAIT}, {"st.global", EV_STG},
      {"ret;", EV_RET}};
  for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
    const char *p = strstr(l, kinds[k].s);
    if (p) {
      *arg = atoi(p + strlen(kinds[k].s));
      return kinds[k].ev;
    }
  }
  return EV_OTHER;
}

/* Splits the PTX of the kernel body into lines with their events and branch targets. */
static PtxLine *ptx_cfg(Arena *a, const char *ptx, int *nout) {
  int cap = count(ptx, "\n") + 1, n = 0;
  PtxLine *L = arena_alloc(a, sizeof *L * (size_t)cap);
  char **labels = arena_alloc(a, sizeof(char *) * (size_t)cap);
  char **targets = arena_alloc(a, sizeof(char *) * (size_t)cap);
  for (const char *p = ptx; *p && n < cap;) {
    const char *e = strchr(p, '\n');
    size_t len = e ? (size_t)(e - p) : strlen(p);
    char *l = arena_strndup(a, p, len);
    p += len + (e != NULL);
    L[n] = (PtxLine){.jump = -1};
    labels[n] = targets[n] = NULL;
    char *s = l + strspn(l, " \t");
    if (s[0] == '$' && s[strlen(s) - 1] == ':') {
      s[strlen(s) - 1] = 0;
      labels[n] = s;
    } else if (strstr(s, "bra") && (s[0] == '@' || !strncmp(s, "bra", 3))) {
      char *t = strchr(s, '$');
      cr_assert(t, "branch without a label: %s", s);
      t[strcspn(t, ";")] = 0;
      targets[n] = t;
      L[n].cond = s[0] == '@';
      L[n].stops = !L[n].cond;
    } else {
      L[n].ev = ptx_event(s, &L[n].arg);
      L[n].stops = L[n].ev == EV_RET;
    }
    n++;
  }
  for (int i = 0; i < n; i++)
    for (int j = 0; targets[i] && j < n; j++)
      if (labels[j] && !strcmp(labels[j], targets[i]))
        L[i].jump = j;
  for (int i = 0; i < n; i++)
    cr_assert(!targets[i] || L[i].jump >= 0, "branch to an unknown label %s", targets[i]);
  *nout = n;
  return L;
}

/* Path state: groups in flight (0..3); groups in flight at the last bar.sync (0..3, 3: none yet
 * or unknown); a wgmma commit since that bar.sync; fence.proxy.async right before it; a
 * wgmma.fence since the last commit. */
typedef struct Ps { int g, gbar; bool commit_since_bar, published, fenced; } Ps;

static int ps_code(Ps s) {
  return s.g + 4 * (s.gbar + 4 * (s.commit_since_bar + 2 * (s.published + 2 * s.fenced)));
}
enum { PS_CODES = 4 * 4 * 2 * 2 * 2 };

static char proto_err[256];
#define PROTO(cond, ...)                                                                                   \
  do {                                                                                                     \
    if (!(cond) && !proto_err[0])                                                                          \
      snprintf(proto_err, sizeof proto_err, __VA_ARGS__);                                                  \
  } while (0)

/* NULL when every path keeps the protocol, else the first violation found. */
static const char *overlap_protocol_error(const char *ptx) {
  proto_err[0] = 0;
  Arena *a = arena_new();
  int n;
  PtxLine *L = ptx_cfg(a, ptx, &n);
  bool *seen = arena_alloc(a, sizeof(bool) * (size_t)n * PS_CODES);
  memset(seen, 0, sizeof(bool) * (size_t)n * PS_CODES);
  int *stack_i = arena_alloc(a, sizeof(int) * (size_t)n * PS_CODES);
  Ps *stack_s = arena_alloc(a, sizeof(Ps) * (size_t)n * PS_CODES);
  int sp = 0;
  stack_i[sp] = 0;
  stack_s[sp++] = (Ps){.g = 0, .gbar = 3};
  int copies = 0, wgmmas = 0;
  while (sp > 0) {
    int i = stack_i[--sp];
    Ps s = stack_s[sp];
    for (; i < n; i++) {
      int code = ps_code(s);
      if (seen[(size_t)i * PS_CODES + code])
        break;
      seen[(size_t)i * PS_CODES + code] = true;
      const PtxLine *l = &L[i];
      switch (l->ev) {
      case EV_COPY:
        copies++;
        /* gbar 3 without a commit since: no barrier yet and no wgmma ever (the prologue) */
        PROTO(!s.commit_since_bar && (s.gbar <= 1 || s.gbar == 3),
                  "line %d: cp.async copy with %d wgmma groups in flight at the last bar.sync%s", i + 1, s.gbar,
                  s.commit_since_bar ? " and a wgmma commit since" : "");
        break;
      case EV_PROXY: s.published = true; break;
      case EV_BAR:
        PROTO(s.published, "line %d: bar.sync without fence.proxy.async before it", i + 1);
        s.gbar = s.g;
        s.commit_since_bar = false;
        break;
      case EV_WG_FENCE: s.fenced = true; break;
      case EV_WGMMA:
        wgmmas++;
        PROTO(s.fenced, "line %d: wgmma without wgmma.fence", i + 1);
        PROTO(s.gbar != 3, "line %d: wgmma before any bar.sync", i + 1);
        break;
      case EV_WG_COMMIT:
        s.g++;
        s.fenced = false;
        s.commit_since_bar = true;
        PROTO(s.g <= 2, "line %d: %d wgmma groups in flight", i + 1, s.g);
        if (s.g > 3)
          s.g = 3;
        break;
      case EV_WG_WAIT:
        if (s.g > l->arg)
          s.g = l->arg;
        break;
      case EV_STG:
      case EV_RET: PROTO(s.g == 0, "line %d: a global store or ret with wgmma groups in flight", i + 1); break;
      default: break;
      }
      if (l->ev != EV_PROXY && l->ev != EV_OTHER && l->ev != EV_BAR)
        s.published = false; /* fence.proxy.async must be the event right before bar.sync */
      if (l->jump >= 0) {
        if (l->cond) {
          stack_i[sp] = l->jump;
          stack_s[sp++] = s;
        } else {
          i = l->jump - 1;
          continue;
        }
      }
      if (l->stops)
        break;
    }
  }
  PROTO(copies > 0 && wgmmas > 0, "no cp.async copies or no wgmma");
  arena_free(a);
  return proto_err[0] ? proto_err : NULL;
}

/* The PTX with every line containing `what` blanked (a mutation the checker must reject). */
static char *without(Arena *a, const char *ptx, const char *what) {
  char *m = arena_strndup(a, ptx, strlen(ptx));
  for (char *p = m; (p = strstr(p, what));) {
    char *e = strchr(p, '\n');
    memset(p, ' ', e ? (size_t)(e - p) : strlen(p));
  }
  return m;
}

Test(mma, wgmma_overlap_protocol_in_gemm_loop) {
  struct {
    const char *defs[8];
    int stages, per_dot; /* wgmmas per dot */
  } cases[] = {
      {{"BM=128", "BN=128", "BK=64", "WARPS=8", "STAGES=4", NULL}, 4, 4},
      {{"BM=128", "BN=128", "BK=64", "WARPS=8", "STAGES=3", NULL}, 3, 4},
      {{"BM=128", "BN=256", "BK=64", "WARPS=8", "STAGES=4", NULL}, 4, 4},
      {{"BM=128", "BN=128", "BK=32", "WARPS=4", "STAGES=5", NULL}, 5, 4}, /* two m64 tiles per warpgroup */
  };
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    Arena *a = arena_new();
    char *ptx = example_ptx(a, "gemm", cases[c].defs, ARCH_SM90A);
    cr_assert_eq(count(ptx, "wgmma.mma_async"), cases[c].per_dot, "case %zu", c);
    cr_assert_eq(count(ptx, "wgmma.wait_group.sync.aligned 1;"), 1, "case %zu", c);
    cr_assert_eq(count(ptx, "wgmma.wait_group.sync.aligned 0;"), 1, "case %zu: the drain at the exit", c);
    char wait[64];
    snprintf(wait, sizeof wait, "cp.async.wait_group %d;", cases[c].stages - 3); /* P - 2 ahead */
    cr_assert_geq(count(ptx, wait), 1, "case %zu", c);
    cr_assert_eq(count(ptx, "cp.async.wait_group"), count(ptx, wait), "case %zu", c);
    const char *err = overlap_protocol_error(ptx);
    cr_assert(!err, "case %zu: %s", c, err);
    ptxas_assert_clean(ptx, ARCH_SM90A);
    /* The checker can fail: no drain at the exit (the epilogue stores with a group in flight); no
     * wait in the loop (groups pile up); no barrier (copies race the other warpgroups' wgmmas). */
    cr_assert(overlap_protocol_error(without(a, ptx, "wgmma.wait_group.sync.aligned 0;")), "case %zu", c);
    cr_assert(overlap_protocol_error(without(a, ptx, "wgmma.wait_group.sync.aligned 1;")), "case %zu", c);
    cr_assert(overlap_protocol_error(without(a, ptx, "bar.sync")), "case %zu", c);
    cr_assert(overlap_protocol_error(without(a, ptx, "fence.proxy.async")), "case %zu", c);
    /* Switched off: wait_group 0 after each dot, P - 1 ahead; the checker accepts that too. */
    setenv("TILEC_WGMMA_OVERLAP", "0", 1);
    char *off = example_ptx(a, "gemm", cases[c].defs, ARCH_SM90A);
    unsetenv("TILEC_WGMMA_OVERLAP");
    cr_assert_eq(count(off, "wgmma.wait_group.sync.aligned 1;"), 0);
    snprintf(wait, sizeof wait, "cp.async.wait_group %d;", cases[c].stages - 2);
    cr_assert_geq(count(off, wait), 1, "case %zu", c);
    err = overlap_protocol_error(off);
    cr_assert(!err, "case %zu, overlap off: %s", c, err);
    arena_free(a);
  }
  /* Two stages, and attention (two dots, a register operand A): no overlap. */
  Arena *a = arena_new();
  cr_assert_eq(count(example_ptx(a, "gemm", NULL, ARCH_SM90A), "wgmma.wait_group.sync.aligned 1;"), 0);
  const char *att[] = {"BM=128", "BN=64", "WARPS=8", "STAGES=3", NULL};
  char *ap = example_ptx(a, "attention", att, ARCH_SM90A);
  cr_assert_eq(count(ap, "wgmma.wait_group.sync.aligned 1;"), 0);
  cr_assert_geq(count(ap, "cp.async.wait_group 1;"), 1);
  arena_free(a);
}

/* A top-level LOAD into a shared tile is issued as cp.async.ca and waited for (cp.async.wait_all +
 * a barrier) where the tile is first read, here after the row's reduction, or before the loop
 * that reads it. TILEC_ASYNC_SHARED=0: no cp.async at all. */
Test(mma, async_shared_tiles_wait_at_first_read) {
  static const char src[] =
      "kernel rmsnorm<BLOCK = 4096, WARPS = 8>(X: f16[M, N], W: f16[N], Y: out f16[M, N], eps: f32)\n"
      "  grid (M) threads (WARPS * 32)\n"
      "{\n"
      "  require N <= BLOCK;\n"
      "  shared w = W[0 : +BLOCK];\n"
      "  reg x = to_f32(X[block.x, 0 : +BLOCK]);\n"
      "  let inv = rsqrt(sum(x * x, 0, keep) / to_f32(N) + eps);\n"
      "  Y[block.x, 0 : +BLOCK] = to(f16, x * inv * to_f32(w));\n"
      "}\n";
  static const char in_loop[] =
      "kernel k<BLOCK = 1024>(X: f16[N], Y: out f16[N]) grid (1) threads (128) {\n"
      "  shared s = X[0 : +BLOCK];\n"
      "  for i in 0 .. 2 { Y[0 : +BLOCK] = s; }\n"
      "}\n";
  static const char rewritten[] =
      "kernel k<BLOCK = 1024>(X: f16[N], Y: out f16[N]) grid (1) threads (128) {\n"
      "  shared s = X[0 : +BLOCK];\n"
      "  s = to(f16, 0.0);\n"
      "  Y[0 : +BLOCK] = s;\n"
      "}\n";
  GpuArch arches[2] = {ARCH_SM80, ARCH_SM90A};
  for (int i = 0; i < 2; i++) {
    Arena *a = arena_new();
    setenv("TILEC_ASYNC_SHARED", "0", 1);
    cr_expect_eq(count(source_ptx(a, "rms.tile", src, NULL, arches[i]), "cp.async"), 0);
    unsetenv("TILEC_ASYNC_SHARED");
    char *ptx = source_ptx(a, "rms.tile", src, NULL, arches[i]);
    cr_expect_geq(count(ptx, "cp.async.ca.shared.global ["), 4, "%s", arch_name(arches[i]));
    cr_expect_eq(count(ptx, "cp.async.wait_all;"), 1);
    const char *reduce = strstr(ptx, "shfl.sync.bfly"), *wait = strstr(ptx, "cp.async.wait_all;");
    cr_assert(reduce && wait);
    cr_expect_gt(wait, reduce, "the weight must be waited for after the reduction, not before it");
    ptxas_assert_clean(ptx, arches[i]);
    ptx = source_ptx(a, "loop.tile", in_loop, NULL, arches[i]);
    cr_expect_eq(count(ptx, "cp.async.wait_all;"), 1, "read in a loop: waited for once, before it");
    /* Written again before any read: the copies are waited for before that write, or a late
     * copy would land over it. */
    ptx = source_ptx(a, "rewrite.tile", rewritten, NULL, arches[i]);
    const char *commit = strstr(ptx, "cp.async.commit_group;"), *w2 = strstr(ptx, "cp.async.wait_all;");
    cr_assert(commit && w2, "%s", arch_name(arches[i]));
    const char *st = strstr(commit, "st.shared"); /* the first store after the copies: the zeros */
    cr_assert(st);
    cr_expect_lt(w2, st, "the second write must come after cp.async.wait_all");
    unsetenv("TILEC_ASYNC_SHARED");
    arena_free(a);
  }
}
