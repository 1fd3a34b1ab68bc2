/* test_wgmma.c — Hopper wgmma layouts: the accumulator and register operand A against the PTX ISA
 * fragment tables; the swizzled shared-memory layout (a bijection; 16-byte chunks permuted as
 * the ISA's 32B / 64B / 128B patterns); and a simulation of what wgmma reads, given the matrix
 * descriptor (the canonical K-major and MN-major layouts, address arithmetic then the swizzle on
 * address bits), against where the shared-tile fill (layout_smem_offset) put each element. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "layout.h"
#include "tilec.h"

static void coord(const Layout *l, uint32_t r, uint32_t lane, uint32_t warp, int32_t *c) {
  layout_coord(2, l->shape, layout_apply(l, r, lane, warp), c);
}

/* PTX ISA, "Register Fragments" of wgmma .m64nNk16, f32 accumulator D: thread (warp w of the
 * warpgroup, lane) holds d_i, i < N/2, at row 16 w + lane / 4 + 8 * ((i >> 1) & 1) and column
 * 8 * (i >> 2) + 2 * (lane % 4) + (i & 1). Further m64 tiles of a warpgroup follow in registers,
 * further warpgroups in warp bits (M first). */
Test(wgmma, accumulator_matches_ptx_table) {
  int32_t Ns[] = {8, 16, 64, 128, 256};
  for (size_t t = 0; t < sizeof Ns / sizeof Ns[0]; t++)
    for (int wgm = 1; wgm <= 2; wgm++)
      for (int MT = 1; MT <= 2; MT++)
        for (int wgn = 1; wgn <= 2 && Ns[t] / wgn >= 8; wgn++) {
          int32_t N = Ns[t], M = 64 * MT * wgm, Nw = N / wgn;
          Layout l = layout_wgmma_acc(M, N, wgm, wgn);
          cr_assert_eq(layout_threads(&l), 128 * wgm * wgn);
          cr_assert_eq(layout_nregs(&l), Nw / 2 * MT);
          cr_assert(layout_is_surjective(&l) && layout_is_injective_mod_broadcast(&l));
          for (int warp = 0; warp < 4 * wgm * wgn; warp++)
            for (int lane = 0; lane < 32; lane++)
              for (int r = 0; r < Nw / 2 * MT; r++) {
                int i = r % (Nw / 2), mt = r / (Nw / 2), g = warp / 4, gm = g % wgm, gn = g / wgm;
                int32_t c[2];
                coord(&l, (uint32_t)r, (uint32_t)lane, (uint32_t)warp, c);
                cr_assert_eq(c[0], gm * M / wgm + 64 * mt + 16 * (warp % 4) + lane / 4 + 8 * ((i >> 1) & 1));
                cr_assert_eq(c[1], gn * Nw + 8 * (i >> 2) + 2 * (lane % 4) + (i & 1));
              }
        }
}

/* With one m64 tile per warpgroup the wgmma accumulator is the mma.sync one over 4 warps per
 * warpgroup: the epilogues, reductions and the online softmax see the layouts they know. */
Test(wgmma, accumulator_equals_mma_acc_for_m64_warpgroups) {
  for (int wgm = 1; wgm <= 4; wgm *= 2)
    for (int32_t N = 8; N <= 256; N *= 2) {
      Layout a = layout_wgmma_acc(64 * wgm, N, wgm, 1), b = layout_mma_acc(64 * wgm, N, 4 * wgm, 1);
      cr_assert(layout_equal(&a, &b), "wgm %d N %d", wgm, N);
    }
}

/* Operand A from registers (PTX ISA, wgmma .m64nNk16 A fragment, f16/bf16): a_i (i < 8) of warp
 * w at row 16 w + lane / 4 + 8 * ((i >> 1) & 1), column 2 * (lane % 4) + (i & 1) + 8 * (i >> 2);
 * then k16 steps, then m64 tiles. The accumulator of a dot is that operand (P @ V in attention). */
Test(wgmma, register_operand_a_matches_ptx_table_and_the_accumulator) {
  for (int wgm = 1; wgm <= 2; wgm++)
    for (int32_t K = 16; K <= 128; K *= 2) {
      int32_t M = 64 * wgm;
      Layout l = layout_wgmma_operand_a(M, K, wgm, 1);
      for (int warp = 0; warp < 4 * wgm; warp++)
        for (int lane = 0; lane < 32; lane++)
          for (int r = 0; r < layout_nregs(&l); r++) {
            int i = r % 8, kt = r / 8;
            int32_t c[2];
            coord(&l, (uint32_t)r, (uint32_t)lane, (uint32_t)warp, c);
            cr_assert_eq(c[0], 64 * (warp / 4) + 16 * (warp % 4) + lane / 4 + 8 * ((i >> 1) & 1));
            cr_assert_eq(c[1], 16 * kt + 2 * (lane % 4) + (i & 1) + 8 * (i >> 2));
          }
      Layout acc = layout_wgmma_acc(M, K, wgm, 1);
      cr_assert(layout_equal(&l, &acc));
    }
  /* Warpgroups along N hold replicas of A. */
  Layout r = layout_wgmma_operand_a(64, 32, 1, 2);
  cr_assert_eq(layout_zero_mask(&r, LAY_WARP), 4u);
}

Test(wgmma, warpgroup_tiling) {
  int m, n;
  cr_assert(layout_wgmma_warpgroups(128, 128, 2, false, &m, &n) && m == 2 && n == 1);
  cr_assert(layout_wgmma_warpgroups(128, 128, 1, false, &m, &n) && m == 1 && n == 1);
  cr_assert(layout_wgmma_warpgroups(64, 256, 2, false, &m, &n) && m == 1 && n == 2);
  cr_assert_not(layout_wgmma_warpgroups(64, 256, 2, true, &m, &n)); /* rows must stay whole */
  cr_assert_not(layout_wgmma_warpgroups(32, 64, 1, false, &m, &n));  /* M < 64 */
  cr_assert_not(layout_wgmma_warpgroups(64, 512, 1, false, &m, &n)); /* N > 256 */
}

/* ------------------------------------------------------------ swizzled shared layout */

static uint32_t flat2(const SmemLayout *s, int32_t row, int32_t col) {
  return (uint32_t)row << layout_log2((uint32_t)s->cols) | (uint32_t)col;
}

/* A bijection onto [0, bytes) with every element's bytes contiguous and 16-byte chunks kept
 * whole; the chunk of (row, col) is the ISA pattern: within block col / T, row `row` at
 * `swizzle` bytes a row, chunk (col % T) / 8 XOR ((byte address >> 7) % (swizzle / 16)). */
Test(wgmma, swizzle_is_the_isa_pattern_and_bijective) {
  int32_t shapes[][2] = {{64, 64}, {64, 32}, {64, 16}, {32, 64}, {128, 128}, {64, 256}, {8, 16}, {16, 128}};
  for (size_t t = 0; t < sizeof shapes / sizeof shapes[0]; t++) {
    SmemLayout s;
    int32_t R = shapes[t][0], C = shapes[t][1];
    cr_assert(layout_smem_wgmma(R, C, 2, &s));
    int W = C * 2 < 128 ? C * 2 : 128, T = W / 2;
    cr_assert_eq(s.swizzle, W);
    uint32_t bytes = (uint32_t)(R * C * 2);
    uint8_t *seen = calloc(bytes / 2, 1);
    for (int32_t row = 0; row < R; row++)
      for (int32_t col = 0; col < C; col++) {
        uint32_t off = layout_smem_offset(&s, flat2(&s, row, col));
        cr_assert_lt(off, bytes);
        cr_assert_eq(off % 2, 0);
        cr_assert_not(seen[off / 2], "shape %d x %d: (%d, %d) collides", R, C, row, col);
        seen[off / 2] = 1;
        /* the element's place inside its 16-byte chunk is unchanged (cp.async of 8 halves) */
        cr_assert_eq(off % 16, (uint32_t)(col % 8) * 2);
        uint32_t plain = (uint32_t)((col / T) * R * W + row * W + (col % T) * 2);
        cr_assert_eq(off >> 7, plain >> 7, "rows stay in place");
        uint32_t chunk = ((uint32_t)(col % T) / 8) ^ ((plain >> 7) & (uint32_t)(W / 16 - 1));
        cr_assert_eq((off >> 4) & (uint32_t)(W / 16 - 1), chunk, "(%d, %d) of %d x %d", row, col, R, C);
      }
    free(seen);
  }
  /* 128B: 8 rows of 8 chunks form a Latin square (row r's chunk j lands at j ^ r). */
  SmemLayout s;
  cr_assert(layout_smem_wgmma(8, 64, 2, &s));
  for (int r = 0; r < 8; r++)
    for (int j = 0; j < 8; j++)
      cr_assert_eq(layout_smem_offset(&s, flat2(&s, r, 8 * j)), (uint32_t)(128 * r + 16 * (j ^ r)));
  cr_assert_not(layout_smem_wgmma(64, 8, 2, &s)); /* rows of 16 bytes: no wgmma layout */
  cr_assert_not(layout_smem_wgmma(4, 64, 2, &s));
}

/* What wgmma reads for operand element (mn, k) of a 64 x 16 (A) or N x 16 (B) slice, from its
 * descriptor (PTX ISA matrix descriptor; canonical layouts in CuTe's notation, T = 8 halves):
 *   K-major:  ((8, m), (T, 2k)) : ((swizzle bytes per row, SBO), (1, T)), i.e. row mn % 8 of the
 *             core-matrix group mn / 8, K contiguous;
 *   MN-major: ((T, swizzle/16, m), (8, k)) : ((1, T, LBO), (swizzle bytes per row, SBO)).
 * then the swizzle on the byte address (tile base aligned to its 8-row repeat). */
static uint32_t hw_read(const WgmmaDesc *d, int swizzle, bool k_major, int32_t mn, int32_t k) {
  uint32_t a;
  if (k_major) {
    a = d->start + (uint32_t)(mn / 8) * d->sbo + (uint32_t)(mn % 8) * (uint32_t)swizzle + (uint32_t)k * 2;
  } else {
    int32_t T = swizzle / 2;
    a = d->start + (uint32_t)(mn % T) * 2 + (uint32_t)(mn / T) * d->lbo + (uint32_t)(k % 8) * (uint32_t)swizzle +
        (uint32_t)(k / 8) * d->sbo;
  }
  return layout_swizzle(a, swizzle);
}

/* Every element of every slice the lowering reads (mn0 per warpgroup / m64 tile, k0 per k16
 * step) is read where the fill wrote it; the descriptor bits hold the fields. */
static void check_operand(int32_t R, int32_t C, bool k_major, int32_t slice_mn, int32_t mn_step) {
  SmemLayout s;
  cr_assert(layout_smem_wgmma(R, C, 2, &s));
  int32_t MN = k_major ? R : C, K = k_major ? C : R;
  for (int32_t mn0 = 0; mn0 < MN; mn0 += mn_step)
    for (int32_t k0 = 0; k0 < K; k0 += 16) {
      WgmmaDesc d = layout_wgmma_desc(&s, k_major, mn0, k0);
      uint64_t bits = layout_wgmma_desc_bits(&d, 4096 + d.start);
      cr_assert_eq(bits & 0x3fff, (4096 + d.start) >> 4);
      cr_assert_eq(bits >> 16 & 0x3fff, d.lbo >> 4);
      cr_assert_eq(bits >> 32 & 0x3fff, d.sbo >> 4);
      cr_assert_eq(bits >> 62, (uint64_t)(s.swizzle == 128 ? 1 : s.swizzle == 64 ? 2 : 3));
      for (int32_t mn = 0; mn < slice_mn; mn++)
        for (int32_t k = 0; k < 16; k++) {
          int32_t row = k_major ? mn0 + mn : k0 + k, col = k_major ? k0 + k : mn0 + mn;
          uint32_t want = layout_smem_offset(&s, flat2(&s, row, col));
          cr_assert_eq(hw_read(&d, s.swizzle, k_major, mn, k), want,
                       "%s %d x %d: slice (%d, %d) element (%d, %d)", k_major ? "K-major" : "MN-major", R, C, mn0,
                       k0, mn, k);
        }
    }
}

Test(wgmma, descriptor_reads_what_the_fill_wrote) {
  /* A [M, K] K-major: m64 slices. K = 32 (64B swizzle), 64 (128B), 128 (two column blocks). */
  check_operand(64, 32, true, 64, 64);
  check_operand(128, 64, true, 64, 64);
  check_operand(128, 128, true, 64, 64);
  check_operand(64, 16, true, 64, 64); /* 32B swizzle */
  /* B [K, N] MN-major (gemm): the whole N per warpgroup, or halves (2 warpgroups along N). */
  check_operand(32, 64, false, 64, 64);
  check_operand(32, 128, false, 128, 128);
  check_operand(64, 256, false, 256, 256);
  check_operand(64, 256, false, 128, 128);
  check_operand(16, 32, false, 32, 32);
  check_operand(16, 16, false, 16, 16);
  /* A as trans of a shared [K, M] tile, MN-major (a weight gradient's X^T, a GEMM of few rows as
   * B^T A^T): m64 slices along the columns, the warpgroups' rows too. */
  check_operand(64, 64, false, 64, 64);
  check_operand(64, 128, false, 64, 64);
  check_operand(128, 256, false, 64, 64);
  check_operand(256, 64, false, 64, 64);
  /* B [N, K] K-major (attention's trans(k)): N rows per slice. */
  check_operand(64, 64, true, 64, 64);
  check_operand(128, 128, true, 128, 128);
  check_operand(256, 64, true, 256, 256);
  /* Rows that are not a power of two: attention's 176-key tiles at d128 (K as [N, K], V as
   * [K, N] MN-major, whose LBO is then 176 rows), 144 keys at d64. */
  check_operand(176, 128, true, 176, 176);
  check_operand(176, 128, false, 128, 128);
  check_operand(144, 64, true, 144, 144);
  check_operand(48, 256, false, 256, 256);
}

/* A tile of rows that are not a power of two takes exactly rows * cols * 2 bytes: each column
 * block keeps the ISA pattern (as a power-of-two tile's block) and block j starts at
 * j * rows * swizzle bytes (TMA's boxes of `rows` rows, one per block, land there). */
Test(wgmma, swizzle_of_rows_not_a_power_of_two) {
  int32_t shapes[][2] = {{176, 128}, {144, 64}, {24, 256}, {200, 32}, {40, 128}};
  for (size_t t = 0; t < sizeof shapes / sizeof shapes[0]; t++) {
    SmemLayout s;
    int32_t R = shapes[t][0], C = shapes[t][1];
    cr_assert(layout_smem_wgmma(R, C, 2, &s), "%d x %d", R, C);
    int W = C * 2 < 128 ? C * 2 : 128, T = W / 2;
    uint32_t bytes = (uint32_t)(R * C * 2);
    cr_assert_eq(layout_smem_bytes(&s), bytes);
    uint8_t *seen = calloc(bytes / 2, 1);
    for (int32_t row = 0; row < R; row++)
      for (int32_t col = 0; col < C; col++) {
        uint32_t off = layout_smem_offset(&s, flat2(&s, row, col));
        uint32_t want = (uint32_t)(col / T) * (uint32_t)(R * W) +
                        layout_swizzle((uint32_t)(row * W + (col % T) * 2), W);
        cr_assert_eq(off, want, "%d x %d: (%d, %d)", R, C, row, col);
        cr_assert_lt(off, bytes);
        cr_assert_not(seen[off / 2], "%d x %d: (%d, %d) collides", R, C, row, col);
        seen[off / 2] = 1;
        uint32_t block;
        cr_assert_eq(layout_smem_split(&s, flat2(&s, row, col), &block) + block * (uint32_t)(R * W), off);
        cr_assert_eq(block, (uint32_t)(col / T));
      }
    free(seen);
  }
  SmemLayout s;
  cr_assert_not(layout_smem_wgmma(100, 64, 2, &s)); /* neither a power of two nor 8-row groups */
  cr_assert_not(layout_smem_wgmma(64, 96, 2, &s));  /* the columns stay a power of two */
}

/* The registers of a wgmma accumulator beyond a logical N of 176 (of the padded 256) hold only
 * padding: the m64n176 wgmma leaves them undefined and nothing computes with them. */
Test(wgmma, accumulator_padding_registers) {
  Layout l = layout_wgmma_acc(128, 256, 2, 1);
  int32_t dims[2] = {128, 176};
  cr_assert_eq(layout_nregs(&l), 128);
  for (uint32_t r = 0; r < 128; r++)
    cr_assert_eq(layout_reg_is_padding(&l, dims, r), r >= 88, "register %u", r);
  int32_t whole[2] = {128, 256};
  cr_assert_not(layout_reg_is_padding(&l, whole, 127));
  /* a row tile whose padding is spread over the lanes: no register is padding alone */
  Layout row = layout_blocked(2, (int32_t[]){1, 1024}, 256, 4);
  cr_assert_not(layout_reg_is_padding(&row, (int32_t[]){1, 1000}, 3));
}
