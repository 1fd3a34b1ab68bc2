/* test_layout.c — linear layouts: exhaustive checks over shapes, thread counts and vector widths. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "layout.h"

/* How many (reg, lane, warp) hold each flat element. */
static int *holders(const Layout *l) {
  int *count = calloc(layout_numel(l), sizeof(int));
  for (int r = 0; r < layout_nregs(l); r++)
    for (int lane = 0; lane < 32; lane++)
      for (int w = 0; w < layout_threads(l) / 32; w++) {
        uint32_t f = layout_apply(l, (uint32_t)r, (uint32_t)lane, (uint32_t)w);
        cr_assert_lt(f, layout_numel(l));
        count[f]++;
      }
  return count;
}

static void check_blocked(int rank, const int32_t *shape, int threads, int vec) {
  Layout l = layout_blocked(rank, shape, threads, vec);
  int *count = holders(&l);
  uint32_t n = layout_numel(&l);
  int per = layout_nregs(&l) * threads / (int)n;
  cr_assert_geq(per, 1);
  for (uint32_t f = 0; f < n; f++)
    cr_assert_eq(count[f], per, "element %u held %d times, expected %d", f, count[f], per);
  free(count);
  cr_assert(layout_is_surjective(&l));
  cr_assert(layout_is_injective_mod_broadcast(&l));
  /* No register replicas: a thread never holds the same element twice. */
  cr_assert_eq(layout_zero_mask(&l, LAY_REG), 0);
  int want = vec;
  while (rank && want > shape[rank - 1])
    want >>= 1;
  cr_assert_eq(layout_vec_width(&l), rank ? want : 1);
  /* Replicas only when the tile is smaller than the threads' first vectors. */
  if (n >= (uint32_t)(threads * want)) {
    cr_assert_eq(layout_zero_mask(&l, LAY_LANE), 0);
    cr_assert_eq(layout_zero_mask(&l, LAY_WARP), 0);
  }
}

Test(layout, blocked_bijective_exhaustive) {
  int dims[] = {1, 2, 4, 8, 32, 64, 256};
  int nd = (int)(sizeof dims / sizeof *dims);
  for (int threads = 32; threads <= 1024; threads *= 2)
    for (int vec = 1; vec <= 16; vec *= 2) {
      for (int a = 0; a < nd; a++) {
        int32_t s1[1] = {dims[a] * 16};
        check_blocked(1, s1, threads, vec);
        for (int b = 0; b < nd; b++) {
          int32_t s2[2] = {dims[a], dims[b]};
          check_blocked(2, s2, threads, vec);
          if (threads == 128)
            for (int c = 0; c < 4; c++) {
              int32_t s3[3] = {dims[c], dims[a], dims[b]};
              check_blocked(3, s3, threads, vec);
            }
        }
      }
      check_blocked(0, NULL, threads, vec);
    }
}

Test(layout, blocked_row_structure) {
  /* f32[1, 1024], 128 threads, 16-byte vectors: thread t holds cols 4t..4t+3 and 512 more. */
  int32_t shape[2] = {1, 1024};
  Layout l = layout_blocked(2, shape, 128, 4);
  cr_assert_eq(layout_nregs(&l), 8);
  for (int r = 0; r < 8; r++)
    for (int t = 0; t < 128; t++) {
      int32_t c[2];
      layout_coord(2, l.shape, layout_apply(&l, (uint32_t)r, (uint32_t)t % 32, (uint32_t)t / 32), c);
      cr_assert_eq(c[0], 0);
      cr_assert_eq(c[1], 4 * t + (r & 3) + 512 * (r >> 2));
    }
}

Test(layout, flat_coord_roundtrip) {
  int32_t shape[3] = {4, 8, 16};
  for (uint32_t f = 0; f < 4 * 8 * 16; f++) {
    int32_t c[3];
    layout_coord(3, shape, f, c);
    cr_assert_eq(c[2], (int32_t)(f % 16));
    cr_assert_eq(c[1], (int32_t)(f / 16 % 8));
    cr_assert_eq(c[0], (int32_t)(f / 128));
    cr_assert_eq(layout_flat(3, shape, c), f);
  }
}

/* The slice holds, per thread, exactly the projections of what the parent holds. */
static void check_slice(const Layout *l, int axis) {
  Layout s = layout_slice(l, axis);
  cr_assert_eq(s.shape[axis], 1);
  cr_assert(layout_is_injective_mod_broadcast(&s));
  cr_assert(layout_is_surjective(&s));
  int threads = layout_threads(l);
  for (int t = 0; t < threads; t++) {
    uint32_t n = layout_numel(&s);
    char *want = calloc(n, 1), *have = calloc(n, 1);
    for (int r = 0; r < layout_nregs(l); r++) {
      int32_t c[TILE_MAX_RANK];
      layout_coord(l->rank, l->shape, layout_apply(l, (uint32_t)r, (uint32_t)t % 32, (uint32_t)t / 32), c);
      c[axis] = 0;
      want[layout_flat(s.rank, s.shape, c)] = 1;
    }
    for (int r = 0; r < layout_nregs(&s); r++)
      have[layout_apply(&s, (uint32_t)r, (uint32_t)t % 32, (uint32_t)t / 32)] = 1;
    cr_assert_eq(memcmp(want, have, n), 0, "thread %d axis %d", t, axis);
    free(want);
    free(have);
  }
}

Test(layout, slice_exhaustive) {
  int dims[] = {1, 2, 16, 64, 128};
  for (int threads = 32; threads <= 256; threads *= 2)
    for (int a = 0; a < 5; a++)
      for (int b = 0; b < 5; b++)
        for (int vec = 1; vec <= 8; vec *= 4) {
          int32_t s2[2] = {dims[a], dims[b]};
          Layout l = layout_blocked(2, s2, threads, vec);
          check_slice(&l, 0);
          check_slice(&l, 1);
        }
  Layout acc = layout_mma_m16n8k16_acc();
  check_slice(&acc, 0);
  check_slice(&acc, 1);
}

Test(layout, slice_of_row_is_broadcast_scalar) {
  int32_t shape[2] = {1, 1024};
  Layout l = layout_blocked(2, shape, 128, 8);
  Layout s = layout_slice(&l, 1);
  cr_assert_eq(layout_nregs(&s), 1);
  cr_assert_eq(layout_zero_mask(&s, LAY_LANE), 31);
  cr_assert_eq(layout_zero_mask(&s, LAY_WARP), 3);
  /* Projection to rank 0 is the scalar layout. */
  Layout p = layout_project(&l, 0, NULL);
  Layout sc = layout_scalar(128);
  cr_assert(layout_equal(&p, &sc));
}

Test(layout, project_rank1_into_rank2) {
  /* W: f16[1024] broadcast into [4, 1024]: every thread holds W at its columns. */
  int32_t shape[2] = {4, 1024}, wshape[1] = {1024};
  Layout l = layout_blocked(2, shape, 128, 8);
  Layout w = layout_project(&l, 1, wshape);
  for (int t = 0; t < 128; t++)
    for (int r = 0; r < layout_nregs(&l); r++) {
      int32_t c[2];
      layout_coord(2, l.shape, layout_apply(&l, (uint32_t)r, (uint32_t)t % 32, (uint32_t)t / 32), c);
      bool found = false;
      for (int q = 0; q < layout_nregs(&w); q++)
        found |= layout_apply(&w, (uint32_t)q, (uint32_t)t % 32, (uint32_t)t / 32) == (uint32_t)c[1];
      cr_assert(found);
    }
}

Test(layout, vec_width) {
  int32_t s[2] = {64, 64};
  Layout l = layout_blocked(2, s, 128, 8);
  cr_assert_eq(layout_vec_width(&l), 8);
  l = layout_blocked(2, s, 128, 4);
  cr_assert_eq(layout_vec_width(&l), 4);
  int32_t narrow[2] = {64, 2};
  l = layout_blocked(2, narrow, 128, 8);
  cr_assert_eq(layout_vec_width(&l), 2);
  /* A column tile has no contiguous run along its last dim. */
  int32_t col[2] = {64, 1};
  l = layout_blocked(2, col, 128, 8);
  cr_assert_eq(layout_vec_width(&l), 1);
  /* Another basis touching the run's bits breaks it. */
  l = layout_blocked(2, s, 128, 4);
  l.basis[LAY_LANE][0] ^= 1;
  cr_assert_eq(layout_vec_width(&l), 1);
  Layout acc = layout_mma_m16n8k16_acc();
  cr_assert_eq(layout_vec_width(&acc), 2);
}

Test(layout, mma_m16n8k16_accumulator_matches_ptx_table) {
  Layout l = layout_mma_m16n8k16_acc();
  for (int lane = 0; lane < 32; lane++)
    for (int i = 0; i < 4; i++) {
      int group = lane >> 2, tig = lane % 4;
      int row = group + 8 * (i >= 2), col = 2 * tig + (i & 1);
      int32_t c[2];
      layout_coord(2, l.shape, layout_apply(&l, (uint32_t)i, (uint32_t)lane, 0), c);
      cr_assert_eq(c[0], row, "lane %d c%d", lane, i);
      cr_assert_eq(c[1], col, "lane %d c%d", lane, i);
    }
  int *count = holders(&l);
  for (int f = 0; f < 128; f++)
    cr_assert_eq(count[f], 1);
  free(count);
}

Test(layout, mma_m16n8k16_a_matches_ptx_table) {
  Layout l = layout_mma_m16n8k16_a();
  for (int lane = 0; lane < 32; lane++)
    for (int i = 0; i < 8; i++) {
      int group = lane >> 2, tig = lane % 4;
      int row = group + 8 * (i % 4 >= 2), col = 2 * tig + (i & 1) + 8 * (i >= 4);
      int32_t c[2];
      layout_coord(2, l.shape, layout_apply(&l, (uint32_t)i, (uint32_t)lane, 0), c);
      cr_assert_eq(c[0], row, "lane %d a%d", lane, i);
      cr_assert_eq(c[1], col, "lane %d a%d", lane, i);
    }
  cr_assert(layout_is_surjective(&l));
  cr_assert(layout_is_injective_mod_broadcast(&l));
}

Test(layout, transpose_and_equality) {
  int32_t s[2] = {32, 64};
  Layout l = layout_blocked(2, s, 128, 4);
  Layout t = layout_transpose(&l);
  cr_assert_eq(t.shape[0], 64);
  cr_assert_eq(t.shape[1], 32);
  for (int r = 0; r < layout_nregs(&l); r++)
    for (int lane = 0; lane < 32; lane++) {
      int32_t a[2], b[2];
      layout_coord(2, l.shape, layout_apply(&l, (uint32_t)r, (uint32_t)lane, 3), a);
      layout_coord(2, t.shape, layout_apply(&t, (uint32_t)r, (uint32_t)lane, 3), b);
      cr_assert(a[0] == b[1] && a[1] == b[0]);
    }
  Layout tt = layout_transpose(&t);
  cr_assert(layout_equal(&l, &tt));
  cr_assert_not(layout_equal(&l, &t));
  Layout l2 = layout_blocked(2, s, 128, 8);
  cr_assert_not(layout_equal(&l, &l2));
  Layout l3 = layout_blocked(2, s, 256, 4);
  cr_assert_not(layout_equal(&l, &l3));
}

Test(layout, printer) {
  Arena *a = arena_new();
  Layout acc = layout_mma_m16n8k16_acc();
  cr_assert_str_eq(layout_str(a, &acc),
                   "[16,8] reg [0,1] [8,0] lane [0,2] [0,4] [1,0] [2,0] [4,0] warp -");
  int32_t s[1] = {64};
  Layout l = layout_blocked(1, s, 64, 4);
  cr_assert_str_eq(layout_str(a, &l),
                   "[64] reg [1] [2] lane [4] [8] [16] [32] [0] warp [0]");
  arena_free(a);
}

Test(layout, assign_shares_and_projects) {
  Arena *a = arena_new();
  TirFunc *f = tir_func_new(a, "k", (SrcLoc){1, 1, 1, 1});
  TileType x16 = {.elem = TY_F16, .rank = 2, .dims = {1, 1000}};
  TileType x32 = {.elem = TY_F32, .rank = 2, .dims = {1, 1000}};
  TileType red = {.elem = TY_F32, .rank = 2, .dims = {1, 1}};
  TileType w = {.elem = TY_F16, .rank = 1, .dims = {1000}};
  TileType sc = {.elem = TY_I32, .rank = 0};
  int r16 = tir_new_reg(f, x16, "x"), r32 = tir_new_reg(f, x32, NULL);
  int rr = tir_new_reg(f, red, NULL), rw = tir_new_reg(f, w, NULL), rs = tir_new_reg(f, sc, NULL);
  Diag d = {0};
  d.out = fopen("/dev/null", "w");
  cr_assert(layout_assign(f, &d));
  Layout *l16 = f->regs[r16].type.layout, *l32 = f->regs[r32].type.layout;
  cr_assert(layout_equal(l16, l32));
  cr_assert_eq(layout_vec_width(l16), 8); /* 16 bytes of f16 */
  Layout s = layout_slice(l16, 1);
  cr_assert(layout_equal(f->regs[rr].type.layout, &s));
  Layout pw = layout_project(l16, 1, (int32_t[]){1024});
  cr_assert(layout_equal(f->regs[rw].type.layout, &pw));
  cr_assert_eq(f->regs[rs].type.layout->rank, 0);
  f->threads = 96;
  cr_assert_not(layout_assign(f, &d));
  cr_assert_eq(d.nerrors, 1);
  fclose(d.out);
  arena_free(a);
}

/* The warps of a 256-row wgmma accumulator from warp 12 on (the fourth warpgroup) hold the rows
 * 192..255: idle for a tile of 192 logical rows, not for 256; a scalar's warps all hold replicas. */
Test(layout, warps_idle_past_the_logical_rows) {
  Layout acc = layout_wgmma_acc(256, 64, 4, 1);
  cr_expect(layout_warps_idle(&acc, (int32_t[]){192, 64}, 12));
  cr_expect(!layout_warps_idle(&acc, (int32_t[]){192, 64}, 8), "warpgroup 2 holds rows 128..191");
  cr_expect(!layout_warps_idle(&acc, (int32_t[]){256, 64}, 12));
  cr_expect(!layout_warps_idle(&acc, (int32_t[]){193, 64}, 12), "row 192 is the fourth warpgroup's");
  Layout one = layout_scalar(512);
  cr_expect(layout_warps_idle(&one, (int32_t[]){1}, 1));
}
