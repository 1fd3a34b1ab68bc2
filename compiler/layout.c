/* layout.c — linear layouts over GF(2) (see layout.h) and the layout pass. */
#include "layout.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

int32_t layout_pow2_ceil(int32_t n) {
  int32_t p = 1;
  while (p < n)
    p <<= 1;
  return p;
}

int layout_log2(uint32_t n) {
  int k = 0;
  while ((1u << k) < n)
    k++;
  return k;
}

void layout_pad_shape(int rank, const int32_t *dims, int32_t *out) {
  for (int i = 0; i < rank; i++)
    out[i] = layout_pow2_ceil(dims[i]);
}

/* Bit position of dimension d's coordinate inside the flat coordinate. */
static int dim_shift(int rank, const int32_t *shape, int d) {
  int s = 0;
  for (int e = d + 1; e < rank; e++)
    s += layout_log2((uint32_t)shape[e]);
  return s;
}

uint32_t layout_flat(int rank, const int32_t *shape, const int32_t *coord) {
  uint32_t f = 0;
  for (int d = 0; d < rank; d++)
    f |= (uint32_t)coord[d] << dim_shift(rank, shape, d);
  return f;
}

void layout_coord(int rank, const int32_t *shape, uint32_t flat, int32_t *coord) {
  for (int d = 0; d < rank; d++)
    coord[d] = (int32_t)((flat >> dim_shift(rank, shape, d)) & (uint32_t)(shape[d] - 1));
}

uint32_t layout_numel(const Layout *l) {
  uint32_t n = 1;
  for (int d = 0; d < l->rank; d++)
    n *= (uint32_t)l->shape[d];
  return n;
}

int layout_nregs(const Layout *l) { return 1 << l->nbits[LAY_REG]; }
int layout_threads(const Layout *l) { return 32 << l->nbits[LAY_WARP]; }

uint32_t layout_apply_kind(const Layout *l, int kind, uint32_t index) {
  uint32_t f = 0;
  for (int b = 0; b < l->nbits[kind]; b++)
    if (index >> b & 1)
      f ^= l->basis[kind][b];
  return f;
}

/* Whether the element at flat coordinate flat lies inside the logical dims. */
static bool flat_inside(const Layout *l, const int32_t *dims, uint32_t flat) {
  int32_t coord[TILE_MAX_RANK];
  layout_coord(l->rank, l->shape, flat, coord);
  bool inside = true;
  for (int d = 0; d < l->rank; d++)
    inside &= coord[d] < dims[d];
  return inside;
}

bool layout_reg_is_padding(const Layout *l, const int32_t *dims, uint32_t r) {
  int nlw = LAYOUT_LANE_BITS + l->nbits[LAY_WARP];
  bool pad = false;
  for (int d = 0; d < l->rank; d++)
    pad |= dims[d] < l->shape[d];
  if (!pad || nlw > 12)
    return false;
  uint32_t c = layout_apply_kind(l, LAY_REG, r);
  for (uint32_t x = 0; x < 1u << nlw; x++) {
    if (flat_inside(l, dims, c ^ layout_apply_kind(l, LAY_LANE, x & 31) ^ layout_apply_kind(l, LAY_WARP, x >> LAYOUT_LANE_BITS)))
      return false;
  }
  return true;
}

bool layout_warps_idle(const Layout *l, const int32_t *dims, uint32_t first_warp) {
  uint32_t warps = 1u << l->nbits[LAY_WARP], nregs = 1u << l->nbits[LAY_REG];
  for (uint32_t w = first_warp; w < warps; w++) {
    uint32_t hw = layout_apply_kind(l, LAY_WARP, w);
    bool replica = false;
    for (uint32_t k = 0; k < first_warp && !replica; k++)
      replica = layout_apply_kind(l, LAY_WARP, k) == hw;
    for (uint32_t x = 0; x < nregs * 32 && !replica; x++)
      if (flat_inside(l, dims, hw ^ layout_apply_kind(l, LAY_REG, x >> LAYOUT_LANE_BITS) ^ layout_apply_kind(l, LAY_LANE, x & 31)))
        return false;
  }
  return true;
}

uint32_t layout_apply(const Layout *l, uint32_t reg, uint32_t lane, uint32_t warp) {
  return layout_apply_kind(l, LAY_REG, reg) ^ layout_apply_kind(l, LAY_LANE, lane) ^
         layout_apply_kind(l, LAY_WARP, warp);
}

static Layout empty_layout(int rank, const int32_t *shape, int threads) {
  Layout l;
  memset(&l, 0, sizeof l);
  l.rank = rank;
  for (int d = 0; d < rank; d++)
    l.shape[d] = shape[d];
  l.nbits[LAY_LANE] = LAYOUT_LANE_BITS;
  l.nbits[LAY_WARP] = layout_log2((uint32_t)(threads / 32));
  return l;
}

Layout layout_scalar(int threads) { return empty_layout(0, NULL, threads); }

/* Hands out unit coordinates, fastest dim first, lowest bit first; 0 once the tile is used up. */
typedef struct BitCursor {
  const Layout *l;
  int dim, bit;
} BitCursor;

static uint32_t cursor_next(BitCursor *c) {
  while (c->dim >= 0 && (1 << c->bit) >= c->l->shape[c->dim]) {
    c->dim--;
    c->bit = 0;
  }
  if (c->dim < 0)
    return 0;
  uint32_t f = 1u << (dim_shift(c->l->rank, c->l->shape, c->dim) + c->bit);
  c->bit++;
  return f;
}

Layout layout_blocked(int rank, const int32_t *shape, int threads, int vec) {
  Layout l = empty_layout(rank, shape, threads);
  if (rank == 0)
    return l;
  while (vec > shape[rank - 1])
    vec >>= 1;
  BitCursor c = {&l, rank - 1, 0};
  for (int b = 0; (1 << b) < vec; b++)
    l.basis[LAY_REG][l.nbits[LAY_REG]++] = cursor_next(&c);
  for (int b = 0; b < l.nbits[LAY_LANE]; b++)
    l.basis[LAY_LANE][b] = cursor_next(&c);
  for (int b = 0; b < l.nbits[LAY_WARP]; b++)
    l.basis[LAY_WARP][b] = cursor_next(&c);
  for (uint32_t f; (f = cursor_next(&c)) != 0;)
    l.basis[LAY_REG][l.nbits[LAY_REG]++] = f;
  return l;
}

/* Lowest bit of the flat coordinate not yet handed out, in dims from_dim, from_dim - 1, ..., 0
 * (lowest bit first within a dim); marks it used. 0 when none is left. */
static uint32_t take_bit(const Layout *l, uint32_t *used, int from_dim) {
  for (int d = from_dim; d >= 0; d--)
    for (int b = 0; (1 << b) < l->shape[d]; b++) {
      uint32_t f = 1u << (dim_shift(l->rank, l->shape, d) + b);
      if (!(*used & f)) {
        *used |= f;
        return f;
      }
    }
  return 0;
}

Layout layout_blocked_rows(int rank, const int32_t *shape, int threads, int vec) {
  if (rank < 2)
    return layout_blocked(rank, shape, threads, vec);
  Layout l = empty_layout(rank, shape, threads);
  uint32_t used = 0, f;
  while (vec > shape[rank - 1])
    vec >>= 1;
  for (int b = 0; (1 << b) < vec; b++)
    l.basis[LAY_REG][l.nbits[LAY_REG]++] = take_bit(&l, &used, rank - 1);
  for (int b = 0; b < l.nbits[LAY_LANE]; b++)
    l.basis[LAY_LANE][b] = take_bit(&l, &used, rank - 1);
  for (int b = 0; b < l.nbits[LAY_WARP]; b++) {
    f = take_bit(&l, &used, rank - 2);
    l.basis[LAY_WARP][b] = f ? f : take_bit(&l, &used, rank - 1);
  }
  while ((f = take_bit(&l, &used, rank - 1)) != 0)
    l.basis[LAY_REG][l.nbits[LAY_REG]++] = f;
  return l;
}

/* Fragment tables of the PTX ISA, mma.m16n8k16 (groupID = lane >> 2, tig = lane % 4):
 *   C/D f32: c_i at row groupID + 8 * (i >= 2), col 2 * tig + (i & 1).
 *   A f16:   a_i at row groupID + 8 * (i % 4 >= 2), col 2 * tig + (i & 1) + 8 * (i >= 4). */
static uint32_t rc(const Layout *l, int r, int c) {
  int32_t coord[2] = {r, c};
  return layout_flat(2, l->shape, coord);
}

Layout layout_mma_m16n8k16_acc(void) {
  int32_t shape[2] = {16, 8};
  Layout l = empty_layout(2, shape, 32);
  l.nbits[LAY_REG] = 2;
  l.basis[LAY_REG][0] = rc(&l, 0, 1);
  l.basis[LAY_REG][1] = rc(&l, 8, 0);
  uint32_t lanes[5] = {rc(&l, 0, 2), rc(&l, 0, 4), rc(&l, 1, 0), rc(&l, 2, 0), rc(&l, 4, 0)};
  memcpy(l.basis[LAY_LANE], lanes, sizeof lanes);
  return l;
}

Layout layout_mma_m16n8k16_a(void) {
  int32_t shape[2] = {16, 16};
  Layout l = empty_layout(2, shape, 32);
  l.nbits[LAY_REG] = 3;
  l.basis[LAY_REG][0] = rc(&l, 0, 1);
  l.basis[LAY_REG][1] = rc(&l, 8, 0);
  l.basis[LAY_REG][2] = rc(&l, 0, 8);
  uint32_t lanes[5] = {rc(&l, 0, 2), rc(&l, 0, 4), rc(&l, 1, 0), rc(&l, 2, 0), rc(&l, 4, 0)};
  memcpy(l.basis[LAY_LANE], lanes, sizeof lanes);
  return l;
}

Layout layout_mma_m16n8k16_b(void) {
  int32_t shape[2] = {16, 8};
  Layout l = empty_layout(2, shape, 32);
  l.nbits[LAY_REG] = 2;
  l.basis[LAY_REG][0] = rc(&l, 1, 0);
  l.basis[LAY_REG][1] = rc(&l, 8, 0);
  uint32_t lanes[5] = {rc(&l, 2, 0), rc(&l, 4, 0), rc(&l, 0, 1), rc(&l, 0, 2), rc(&l, 0, 4)};
  memcpy(l.basis[LAY_LANE], lanes, sizeof lanes);
  return l;
}

bool layout_mma_warps(int32_t M, int32_t N, int warps, int *wm, int *wn) {
  if (M < 16 || N < 8 || warps < 1)
    return false;
  int m = 1;
  while (m < warps && M / (m * 2) >= 16)
    m *= 2;
  int n = warps / m;
  if (N / n < 8)
    return false;
  *wm = m;
  *wn = n;
  return true;
}

bool layout_mma_warps_2d(int32_t M, int32_t N, int warps, int *wm, int *wn) {
  int best = -1;
  for (int m = 1; m <= warps; m *= 2) {
    int n = warps / m;
    if (M / m < 16 || N / n < 8)
      continue;
    /* ldmatrix.x4 per warp and k16 step: one per m16 tile of A, one per two n8 tiles of B. The
     * mma count per warp is the same for every tiling; ties go to more warps along M. */
    int MT = M / m / 16, NT = N / n / 8, loads = MT + (NT + 1) / 2;
    if (best < 0 || loads <= best) {
      best = loads;
      *wm = m;
      *wn = n;
    }
  }
  return best >= 0;
}

/* Appends register bases walking `dim` of a 2-D layout from `from` (a power of two) below `to`. */
static void add_reg_run(Layout *l, int dim, int32_t from, int32_t to) {
  for (int32_t v = from; v < to; v *= 2)
    l->basis[LAY_REG][l->nbits[LAY_REG]++] = dim ? rc(l, 0, v) : rc(l, v, 0);
}

/* Warp bases: log2(wm) bits walking dim 0 by `mstep` (or replicas when mstep is 0), then
 * log2(wn) bits walking dim 1 by `nstep` (or replicas). */
static void set_warps(Layout *l, int wm, int32_t mstep, int wn, int32_t nstep) {
  int k = 0;
  for (int v = 1; v < wm; v *= 2)
    l->basis[LAY_WARP][k++] = mstep ? rc(l, mstep * v, 0) : 0;
  for (int v = 1; v < wn; v *= 2)
    l->basis[LAY_WARP][k++] = nstep ? rc(l, 0, nstep * v) : 0;
}

Layout layout_mma_acc(int32_t M, int32_t N, int wm, int wn) {
  int32_t shape[2] = {M, N};
  Layout l = empty_layout(2, shape, 32 * wm * wn);
  Layout f = layout_mma_m16n8k16_acc();
  l.nbits[LAY_REG] = 2;
  l.basis[LAY_REG][0] = rc(&l, 0, 1);
  l.basis[LAY_REG][1] = rc(&l, 8, 0);
  add_reg_run(&l, 1, 8, N / wn);
  add_reg_run(&l, 0, 16, M / wm);
  for (int b = 0; b < LAYOUT_LANE_BITS; b++) {
    int32_t c[2];
    layout_coord(2, f.shape, f.basis[LAY_LANE][b], c);
    l.basis[LAY_LANE][b] = rc(&l, c[0], c[1]);
  }
  set_warps(&l, wm, M / wm, wn, N / wn);
  return l;
}

Layout layout_mma_operand_a(int32_t M, int32_t K, int wm, int wn) {
  int32_t shape[2] = {M, K};
  Layout l = empty_layout(2, shape, 32 * wm * wn);
  l.nbits[LAY_REG] = 3;
  l.basis[LAY_REG][0] = rc(&l, 0, 1);
  l.basis[LAY_REG][1] = rc(&l, 8, 0);
  l.basis[LAY_REG][2] = rc(&l, 0, 8);
  add_reg_run(&l, 1, 16, K);
  add_reg_run(&l, 0, 16, M / wm);
  uint32_t lanes[5] = {rc(&l, 0, 2), rc(&l, 0, 4), rc(&l, 1, 0), rc(&l, 2, 0), rc(&l, 4, 0)};
  memcpy(l.basis[LAY_LANE], lanes, sizeof lanes);
  set_warps(&l, wm, M / wm, wn, 0);
  return l;
}

Layout layout_mma_operand_b(int32_t K, int32_t N, int wm, int wn) {
  int32_t shape[2] = {K, N};
  Layout l = empty_layout(2, shape, 32 * wm * wn);
  l.nbits[LAY_REG] = 2;
  l.basis[LAY_REG][0] = rc(&l, 1, 0);
  l.basis[LAY_REG][1] = rc(&l, 8, 0);
  add_reg_run(&l, 1, 8, N / wn);
  add_reg_run(&l, 0, 16, K);
  uint32_t lanes[5] = {rc(&l, 2, 0), rc(&l, 4, 0), rc(&l, 0, 1), rc(&l, 0, 2), rc(&l, 0, 4)};
  memcpy(l.basis[LAY_LANE], lanes, sizeof lanes);
  set_warps(&l, wm, 0, wn, N / wn);
  return l;
}


static bool mma_disabled(void) { return env_off("TILEC_MMA"); }

/* Whether a DOT result of f should keep whole rows in a warp (layout_mma_warps): f reduces a tile
 * (the online softmax's row statistics stay shuffles) or feeds a register tile to a dot as operand
 * A (the accumulator is operand A only with the warps along M). Otherwise (a plain GEMM) the warps
 * take 2-D tiles (layout_mma_warps_2d), unless TILEC_MMA_2D=0. */
static bool rows_in_warps(const TirFunc *f) {
  if (env_off("TILEC_MMA_2D"))
    return true;
  for (int i = 0; i < f->ninsts; i++) {
    const TirInst *in = &f->insts[i];
    if (tir_op_reduces(in->op))
      return true;
    if (in->op == TIR_DOT && f->regs[in->args[0]].type.place != PLACE_SHARED)
      return true;
  }
  return false;
}

bool layout_dot_uses_mma(const TirFunc *f, const TirInst *in, int *wm, int *wn) {
  if (in->op != TIR_DOT || mma_disabled())
    return false;
  const TileType *a = &f->regs[in->args[0]].type, *b = &f->regs[in->args[1]].type;
  const TileType *d = &f->regs[in->dst].type;
  if (a->rank != 2 || b->rank != 2 || d->rank != 2 || d->place != PLACE_REG || d->elem != TY_F32)
    return false;
  if ((a->elem != TY_F16 && a->elem != TY_BF16) || b->elem != a->elem)
    return false;
  int32_t K = a->dims[1];
  if (K < 16 || K % 16 || b->dims[0] != K)
    return false;
  int32_t M = layout_pow2_ceil(d->dims[0]), N = layout_pow2_ceil(d->dims[1]);
  return (rows_in_warps(f) ? layout_mma_warps : layout_mma_warps_2d)(M, N, f->threads / 32, wm, wn) &&
         M / *wm / 16 <= LAYOUT_MMA_MAX_MT && N / *wn / 8 <= LAYOUT_MMA_MAX_NT;
}

void layout_ldmatrix_lane_bases(int row_dim, int nmat, int32_t base[LAYOUT_LANE_BITS][2]) {
  for (int b = 0; b < LAYOUT_LANE_BITS; b++) {
    int lane = 1 << b, r = lane % 8, j = (lane / 8) % nmat;
    base[b][0] = 8 * (j & 1) + (row_dim == 0 ? r : 0);
    base[b][1] = 8 * (j >> 1) + (row_dim == 1 ? r : 0);
  }
}

/* ------------------------------------------------------------ wgmma */

bool layout_wgmma_warpgroups(int32_t M, int32_t N, int warpgroups, bool rows_whole, int *wgm, int *wgn) {
  if (M < 64 || N < 8 || warpgroups < 1)
    return false;
  int m = 1;
  while (m < warpgroups && M / (m * 2) >= 64)
    m *= 2;
  int n = warpgroups / m;
  if ((rows_whole && n != 1) || N / n < 8 || N / n > 256)
    return false;
  *wgm = m;
  *wgn = n;
  return true;
}

/* Warp bases of a warpgroup tiling: the 2 bits of the warp in its warpgroup walk rows 16, 32;
 * then log2(wgm) bits along M by M/wgm, log2(wgn) along N by `nstep` (0: replicas). */
static void set_warpgroups(Layout *l, int wgm, int32_t mstep, int wgn, int32_t nstep) {
  int k = 0;
  l->basis[LAY_WARP][k++] = rc(l, 16, 0);
  l->basis[LAY_WARP][k++] = rc(l, 32, 0);
  for (int v = 1; v < wgm; v *= 2)
    l->basis[LAY_WARP][k++] = rc(l, mstep * v, 0);
  for (int v = 1; v < wgn; v *= 2)
    l->basis[LAY_WARP][k++] = nstep ? rc(l, 0, nstep * v) : 0;
}

static void set_frag_lanes(Layout *l) {
  uint32_t lanes[5] = {rc(l, 0, 2), rc(l, 0, 4), rc(l, 1, 0), rc(l, 2, 0), rc(l, 4, 0)};
  memcpy(l->basis[LAY_LANE], lanes, sizeof lanes);
}

Layout layout_wgmma_acc(int32_t M, int32_t N, int wgm, int wgn) {
  int32_t shape[2] = {M, N};
  Layout l = empty_layout(2, shape, 128 * wgm * wgn);
  l.nbits[LAY_REG] = 2;
  l.basis[LAY_REG][0] = rc(&l, 0, 1);
  l.basis[LAY_REG][1] = rc(&l, 8, 0);
  add_reg_run(&l, 1, 8, N / wgn);
  add_reg_run(&l, 0, 64, M / wgm);
  set_frag_lanes(&l);
  set_warpgroups(&l, wgm, M / wgm, wgn, N / wgn);
  return l;
}

Layout layout_wgmma_operand_a(int32_t M, int32_t K, int wgm, int wgn) {
  int32_t shape[2] = {M, K};
  Layout l = empty_layout(2, shape, 128 * wgm * wgn);
  l.nbits[LAY_REG] = 3;
  l.basis[LAY_REG][0] = rc(&l, 0, 1);
  l.basis[LAY_REG][1] = rc(&l, 8, 0);
  l.basis[LAY_REG][2] = rc(&l, 0, 8);
  add_reg_run(&l, 1, 16, K);
  add_reg_run(&l, 0, 64, M / wgm);
  set_frag_lanes(&l);
  set_warpgroups(&l, wgm, M / wgm, wgn, 0);
  return l;
}

uint32_t layout_swizzle(uint32_t off, int swizzle) {
  uint32_t mask = (uint32_t)swizzle / 16 - 1;
  return off ^ (((off >> 7) & mask) << 4);
}

bool layout_smem_wgmma(int32_t rows, int32_t cols, int elem_bytes, SmemLayout *out) {
  int32_t row_bytes = cols * elem_bytes;
  if (row_bytes < 32 || rows < 8 || (cols & (cols - 1)) || ((rows & (rows - 1)) && rows % 8))
    return false;
  memset(out, 0, sizeof *out);
  out->rows = rows;
  out->cols = cols;
  out->elem_bytes = elem_bytes;
  out->swizzle = row_bytes < 128 ? (int)row_bytes : 128;
  int lc = layout_log2((uint32_t)cols);
  out->nbits = lc + layout_log2((uint32_t)rows);
  uint32_t W = (uint32_t)out->swizzle, T = W / (uint32_t)elem_bytes;
  for (int b = 0; b < out->nbits; b++) {
    uint32_t f = 1u << b, col = f & ((uint32_t)cols - 1), row = f >> lc;
    /* In a block the terms occupy disjoint bits, and the swizzle is an XOR of bits; a block
     * starts at a multiple of 8 rows (1024 bytes at 128B), which the swizzle leaves alone. */
    uint32_t plain = col / T * (uint32_t)rows * W + row * W + col % T * (uint32_t)elem_bytes;
    out->basis[b] = layout_swizzle(plain, out->swizzle);
    if (col >= T)
      out->block_bits |= f;
  }
  return true;
}

uint32_t layout_smem_bytes(const SmemLayout *s) { return (uint32_t)s->rows * (uint32_t)s->cols * (uint32_t)s->elem_bytes; }

uint32_t layout_smem_split(const SmemLayout *s, uint32_t flat, uint32_t *block) {
  uint32_t off = 0;
  for (int b = 0; b < s->nbits; b++)
    if ((flat >> b & 1) && !(s->block_bits >> b & 1))
      off ^= s->basis[b];
  int tb = layout_log2((uint32_t)s->swizzle / (uint32_t)s->elem_bytes);
  *block = (flat & s->block_bits) >> tb;
  return off;
}

uint32_t layout_smem_offset(const SmemLayout *s, uint32_t flat) {
  uint32_t block, off = layout_smem_split(s, flat, &block);
  return off + block * (uint32_t)s->rows * (uint32_t)s->swizzle;
}

WgmmaDesc layout_wgmma_desc(const SmemLayout *s, bool k_major, int32_t mn0, int32_t k0) {
  int32_t row = k_major ? mn0 : k0, col = k_major ? k0 : mn0;
  uint32_t flat = (uint32_t)row << layout_log2((uint32_t)s->cols) | (uint32_t)col;
  WgmmaDesc w;
  w.start = layout_smem_offset(s, flat);
  /* Core matrices (8 rows of 16 bytes) 8 rows apart along the stored rows. */
  w.sbo = 8u * (uint32_t)s->swizzle;
  /* MN-major: the next block of T columns; K-major with a swizzle: not used (16, i.e. 1). */
  w.lbo = k_major ? 16u : (uint32_t)s->rows * (uint32_t)s->swizzle;
  w.mode = s->swizzle == 128 ? 1 : s->swizzle == 64 ? 2 : 3;
  return w;
}

uint64_t layout_wgmma_desc_bits(const WgmmaDesc *w, uint32_t addr) {
  return (uint64_t)((addr >> 4) & 0x3fff) | (uint64_t)((w->lbo >> 4) & 0x3fff) << 16 |
         (uint64_t)((w->sbo >> 4) & 0x3fff) << 32 | (uint64_t)w->mode << 62;
}

/* The K of a DOT that tensor cores can run (f16/bf16 operands of one type, f32 register result,
 * rank 2, K a multiple of 16), else 0. */
static int32_t dot_tensor_k(const TirFunc *f, const TirInst *in) {
  const TileType *a = &f->regs[in->args[0]].type, *b = &f->regs[in->args[1]].type;
  const TileType *d = &f->regs[in->dst].type;
  if (a->rank != 2 || b->rank != 2 || d->rank != 2 || d->place != PLACE_REG || d->elem != TY_F32)
    return 0;
  if ((a->elem != TY_F16 && a->elem != TY_BF16) || b->elem != a->elem)
    return 0;
  int32_t K = a->dims[1];
  if (K < 16 || K % 16 || b->dims[0] != K)
    return 0;
  return K;
}

static bool rows_in_warps(const TirFunc *f);
static bool mma_disabled(void);

bool layout_dot_wgmma_tiling(const TirFunc *f, const TirInst *in, int *wgm, int *wgn) {
  if (in->op != TIR_DOT || !dot_tensor_k(f, in) || f->threads % 128)
    return false;
  const TileType *d = &f->regs[in->dst].type;
  int32_t M = layout_pow2_ceil(d->dims[0]), N = layout_pow2_ceil(d->dims[1]);
  return layout_wgmma_warpgroups(M, N, f->threads / 128, rows_in_warps(f), wgm, wgn);
}

/* Every read of t is as operand B of a DOT, or as operand A or B: a TRANS result that wgmma reads
 * in place, K-major as B, MN-major as A ("transposed", dot(trans(x), y) with x a shared [K, M]
 * tile: a weight gradient X^T dY, or C^T = B^T A^T for a GEMM of few rows). */
static bool only_dot_operand(const TirFunc *f, int t, bool as_a) {
  bool any = false;
  for (int i = 0; i < f->ninsts; i++) {
    const TirInst *in = &f->insts[i];
    if (!tir_inst_reads(in, t))
      continue;
    if (in->op != TIR_DOT || in->args[2] == t || (in->args[0] == t && (!as_a || in->args[1] == t)))
      return false;
    any = true;
  }
  return any;
}

int32_t layout_dot_wgmma_n(const TirFunc *f, const TirInst *in, int wgn) {
  int32_t N = f->regs[in->dst].type.dims[1];
  /* K-major B only (the trans of a shared [N, K] tile): an MN-major B (a shared [K, N] tile) would
   * be read in part of its last swizzle atom, which no GPU test covers yet */
  bool k_major = f->regs[in->args[1]].type.place != PLACE_SHARED;
  if (wgn == 1 && N % 8 == 0 && k_major)
    return N;
  return layout_pow2_ceil(N) / wgn;
}

/* Whether every wgmma reading the TRANS result v (as B) computes exactly n columns. */
static bool trans_rows_logical(const TirFunc *f, int v, int32_t n) {
  for (int i = 0; i < f->ninsts; i++) {
    const TirInst *in = &f->insts[i];
    int wgm, wgn;
    if (!tir_inst_reads(in, v))
      continue;
    if (in->op != TIR_DOT || in->args[1] != v || !layout_dot_wgmma_tiling(f, in, &wgm, &wgn) ||
        layout_dot_wgmma_n(f, in, wgn) != n)
      return false;
  }
  return true;
}

int32_t layout_wgmma_tile_rows(const TirFunc *f, int r) {
  const TileType *t = &f->regs[r].type;
  int32_t padded = layout_pow2_ceil(t->dims[0]);
  if (t->rank != 2 || t->dims[0] == padded || t->dims[0] % 8 || env_off("TILEC_TILE_ROWS"))
    return padded;
  for (int i = 0; i < f->ninsts; i++) {
    const TirInst *in = &f->insts[i];
    if (!tir_inst_reads(in, r))
      continue;
    if (in->op == TIR_DOT && in->args[1] == r && in->args[0] != r && in->args[2] != r)
      continue; /* operand B [K, N]: the k16 steps stop at the logical K */
    if (in->op == TIR_TRANS && trans_rows_logical(f, in->dst, t->dims[0]))
      continue;
    return padded;
  }
  return t->dims[0];
}

static bool trans_a_fits(const TirFunc *f, int tr);

/* A TRANS at i whose result is read in place as a DOT operand: only as B (the old rule), or as A
 * too (trans_a_fits); TILEC_TRANS_A=0 reads such an A into registers. */
static bool trans_read_in_place(const TirFunc *f, int i) {
  int dst = f->insts[i].dst;
  if (f->regs[dst].type.place == PLACE_SHARED || tir_only_write(f, dst) != i)
    return false;
  return only_dot_operand(f, dst, false) || (!env_off("TILEC_TRANS_A") && trans_a_fits(f, i));
}

/* A shared operand tile: written by LOADs only, read only by DOTs (A or B) and by TRANSes read in
 * place (trans_read_in_place). */
static bool operand_tile_exclusive(const TirFunc *f, int r) {
  for (int i = 0; i < f->ninsts; i++) {
    const TirInst *in = &f->insts[i];
    if (in->dst == r && in->op != TIR_LOAD)
      return false;
    if (!tir_inst_reads(in, r))
      continue;
    if (in->op == TIR_DOT && in->args[2] != r)
      continue;
    if (in->op == TIR_TRANS && trans_read_in_place(f, i))
      continue;
    return false;
  }
  return true;
}

static bool smem_ok(const TileType *t, int32_t *T) {
  SmemLayout s;
  if (!layout_smem_wgmma(layout_pow2_ceil(t->dims[0]), layout_pow2_ceil(t->dims[1]), elem_bytes(t->elem), &s))
    return false;
  *T = s.swizzle / s.elem_bytes;
  return true;
}

/* TRANS tr as an in-place MN-major A, but for its source's other uses (operand_tile_exclusive). */
static bool trans_a_fits(const TirFunc *f, int tr) {
  const TirInst *t = &f->insts[tr];
  if (t->op != TIR_TRANS || !tir_trans_view_ok(f, tr) || !only_dot_operand(f, t->dst, true))
    return false;
  int32_t T;
  if (!smem_ok(&f->regs[t->args[0]].type, &T))
    return false;
  bool as_a = false;
  for (int i = 0; i < f->ninsts; i++) { /* a warpgroup starts at a block of T rows of M */
    const TirInst *in = &f->insts[i];
    int wgm, wgn;
    if (in->op != TIR_DOT || in->args[0] != t->dst)
      continue;
    if (!layout_dot_wgmma_tiling(f, in, &wgm, &wgn) ||
        (wgm != 1 && (layout_pow2_ceil(f->regs[in->dst].type.dims[0]) / wgm) % T))
      return false;
    as_a = true;
  }
  return as_a;
}

bool layout_trans_a_in_place(const TirFunc *f, int tr) {
  return !env_off("TILEC_TRANS_A") && trans_a_fits(f, tr) && operand_tile_exclusive(f, f->insts[tr].args[0]);
}

bool layout_is_wgmma_operand_tile(const TirFunc *f, int r) {
  if (f->regs[r].type.place != PLACE_SHARED)
    return false;
  for (int i = 0; i < f->ninsts; i++) {
    const TirInst *in = &f->insts[i];
    if (in->op == TIR_DOT && (in->args[0] == r || in->args[1] == r))
      return true;
    if (in->op == TIR_TRANS && in->args[0] == r &&
        (only_dot_operand(f, in->dst, false) || layout_trans_a_in_place(f, i)))
      return true;
  }
  return false;
}

static bool dot_wgmma_ok(const TirFunc *f, const TirInst *in) {
  int wgm, wgn;
  int32_t T;
  if (!layout_dot_wgmma_tiling(f, in, &wgm, &wgn))
    return false;
  const TileType *a = &f->regs[in->args[0]].type, *b = &f->regs[in->args[1]].type;
  if (a->place == PLACE_SHARED && !smem_ok(a, &T))
    return false;
  int32_t Mw = layout_pow2_ceil(f->regs[in->dst].type.dims[0]) / wgm;
  int def_a = a->place == PLACE_SHARED ? -1 : tir_only_write(f, in->args[0]);
  bool a_in_place = def_a >= 0 && layout_trans_a_in_place(f, def_a); /* else registers */
  if (!a_in_place && a->place != PLACE_SHARED && (Mw / 64) * (a->dims[1] / 16) > LAYOUT_WGMMA_MAX_A_FRAGS)
    return false;
  int32_t Nw = layout_pow2_ceil(f->regs[in->dst].type.dims[1]) / wgn;
  if (b->place == PLACE_SHARED) /* [K, N], MN-major: a warpgroup starts at a block of T columns */
    return smem_ok(b, &T) && (wgn == 1 || Nw % T == 0);
  int def = tir_only_write(f, in->args[1]);
  if (def < 0 || f->insts[def].op != TIR_TRANS)
    return false;
  const TileType *s = &f->regs[f->insts[def].args[0]].type;
  return s->place == PLACE_SHARED && smem_ok(s, &T);
}

bool layout_kernel_uses_wgmma(const TirFunc *f) {
  if (env_off("TILEC_WGMMA") || mma_disabled())
    return false;
  int ndots = 0;
  for (int i = 0; i < f->ninsts; i++) {
    if (f->insts[i].op != TIR_DOT)
      continue;
    if (!dot_wgmma_ok(f, &f->insts[i]))
      return false;
    ndots++;
  }
  for (int r = 0; r < f->nregs; r++)
    if (layout_is_wgmma_operand_tile(f, r) && !operand_tile_exclusive(f, r))
      return false;
  return ndots > 0;
}

/* A linear map of flat coordinates from one padded shape to another, given per destination
 * dim the source dim it copies (or -1 for "always 0"). Linear because dims are powers of two. */
static uint32_t map_flat(const Layout *src, uint32_t f, int rank, const int32_t *shape,
                         const int *from) {
  int32_t sc[TILE_MAX_RANK], dc[TILE_MAX_RANK];
  layout_coord(src->rank, src->shape, f, sc);
  for (int d = 0; d < rank; d++)
    dc[d] = from[d] < 0 ? 0 : sc[from[d]];
  return layout_flat(rank, shape, dc);
}

static Layout map_layout(const Layout *src, int rank, const int32_t *shape, const int *from) {
  Layout l = empty_layout(rank, shape, layout_threads(src));
  for (int k = LAY_LANE; k < LAY_NKINDS; k++)
    for (int b = 0; b < src->nbits[k]; b++)
      l.basis[k][b] = map_flat(src, src->basis[k][b], rank, shape, from);
  for (int b = 0; b < src->nbits[LAY_REG]; b++) {
    uint32_t f = map_flat(src, src->basis[LAY_REG][b], rank, shape, from);
    if (f)
      l.basis[LAY_REG][l.nbits[LAY_REG]++] = f;
  }
  return l;
}

Layout layout_project(const Layout *parent, int rank, const int32_t *shape) {
  int from[TILE_MAX_RANK];
  int off = parent->rank - rank;
  for (int d = 0; d < rank; d++)
    from[d] = shape[d] == 1 && parent->shape[d + off] != 1 ? -1 : d + off;
  return map_layout(parent, rank, shape, from);
}

Layout layout_slice(const Layout *l, int axis) {
  int32_t shape[TILE_MAX_RANK];
  memcpy(shape, l->shape, sizeof shape);
  shape[axis] = 1;
  return layout_project(l, l->rank, shape);
}

Layout layout_transpose(const Layout *l) {
  int32_t shape[2] = {l->shape[1], l->shape[0]};
  int from[2] = {1, 0};
  Layout t = map_layout(l, 2, shape, from);
  return t;
}

bool layout_equal(const Layout *a, const Layout *b) {
  if (a->rank != b->rank)
    return false;
  for (int d = 0; d < a->rank; d++)
    if (a->shape[d] != b->shape[d])
      return false;
  for (int k = 0; k < LAY_NKINDS; k++) {
    if (a->nbits[k] != b->nbits[k])
      return false;
    for (int i = 0; i < a->nbits[k]; i++)
      if (a->basis[k][i] != b->basis[k][i])
        return false;
  }
  return true;
}

int layout_vec_chunk(const Layout *l, ElemType e) {
  int v = layout_vec_width(l), max = 16 / elem_bytes(e);
  if (e == TY_BOOL)
    return 1;
  return v < max ? v : max;
}

int layout_vec_width(const Layout *l) {
  if (l->rank == 0)
    return 1;
  int k = 0;
  while (k < l->nbits[LAY_REG] && l->basis[LAY_REG][k] == 1u << k && (1 << (k + 1)) <= l->shape[l->rank - 1])
    k++;
  /* No other basis may touch the low k bits, or the run would be permuted or shared. */
  uint32_t low = (1u << k) - 1;
  for (;;) {
    bool clash = false;
    for (int kind = 0; kind < LAY_NKINDS; kind++)
      for (int b = kind == LAY_REG ? k : 0; b < l->nbits[kind]; b++)
        if (l->basis[kind][b] & low)
          clash = true;
    if (!clash || k == 0)
      break;
    k--;
    low >>= 1;
  }
  return 1 << k;
}

/* Gaussian elimination over GF(2): the rank of the set of nonzero bases. */
static int span_rank(const Layout *l, bool skip_zero_check) {
  uint32_t rows[3 * LAYOUT_MAX_BITS];
  int n = 0;
  for (int k = 0; k < LAY_NKINDS; k++)
    for (int b = 0; b < l->nbits[k]; b++)
      if (l->basis[k][b] || skip_zero_check)
        rows[n++] = l->basis[k][b];
  int r = 0;
  for (int bit = 31; bit >= 0; bit--) {
    int p = -1;
    for (int i = r; i < n; i++)
      if (rows[i] >> bit & 1) {
        p = i;
        break;
      }
    if (p < 0)
      continue;
    uint32_t t = rows[p];
    rows[p] = rows[r];
    rows[r] = t;
    for (int i = 0; i < n; i++)
      if (i != r && (rows[i] >> bit & 1))
        rows[i] ^= t;
    r++;
  }
  return r;
}

bool layout_is_surjective(const Layout *l) {
  return span_rank(l, false) == layout_log2(layout_numel(l));
}

bool layout_is_injective_mod_broadcast(const Layout *l) {
  int nonzero = 0;
  for (int k = 0; k < LAY_NKINDS; k++)
    for (int b = 0; b < l->nbits[k]; b++)
      nonzero += l->basis[k][b] != 0;
  return span_rank(l, false) == nonzero;
}

uint32_t layout_zero_mask(const Layout *l, int kind) {
  uint32_t m = 0;
  for (int b = 0; b < l->nbits[kind]; b++)
    if (!l->basis[kind][b])
      m |= 1u << b;
  return m;
}

static void print_coord(FILE *out, const Layout *l, uint32_t f) {
  int32_t c[TILE_MAX_RANK];
  layout_coord(l->rank, l->shape, f, c);
  fputc('[', out);
  for (int d = 0; d < l->rank; d++)
    fprintf(out, "%s%d", d ? "," : "", c[d]);
  fputc(']', out);
}

void layout_print(FILE *out, const Layout *l) {
  static const char *kinds[LAY_NKINDS] = {"reg", "lane", "warp"};
  fputc('[', out);
  for (int d = 0; d < l->rank; d++)
    fprintf(out, "%s%d", d ? "," : "", l->shape[d]);
  fputc(']', out);
  for (int k = 0; k < LAY_NKINDS; k++) {
    fprintf(out, " %s", kinds[k]);
    if (!l->nbits[k])
      fputs(" -", out);
    for (int b = 0; b < l->nbits[k]; b++) {
      fputc(' ', out);
      print_coord(out, l, l->basis[k][b]);
    }
  }
}

char *layout_str(Arena *a, const Layout *l) {
  char *buf = NULL;
  size_t len = 0;
  FILE *m = open_memstream(&buf, &len);
  if (!m)
    return arena_strdup(a, "<layout>");
  layout_print(m, l);
  fclose(m);
  char *s = arena_strdup(a, buf);
  free(buf);
  return s;
}

/* ------------------------------------------------------------ layout pass */

typedef struct ShapeInfo {
  int rank;
  int32_t shape[TILE_MAX_RANK]; /* padded */
  int min_bytes;                /* smallest element among its tiles (bool ignored) */
  int parent;                   /* shape index it takes its layout from, or itself */
  bool split;                   /* shared tiles of an mma result shape: their own (blocked) group */
  int mma_wm, mma_wn;           /* a DOT result on tensor cores: its warp tiling (0: none) */
  bool wgmma;                   /* that tiling is in warpgroups (layout_wgmma_acc) */
  Layout *layout;
} ShapeInfo;

static bool broadcasts_into(const ShapeInfo *s, const ShapeInfo *p) {
  if (s->rank > p->rank)
    return false;
  int off = p->rank - s->rank;
  for (int d = 0; d < s->rank; d++)
    if (s->shape[d] != 1 && s->shape[d] != p->shape[d + off])
      return false;
  return true;
}

static uint32_t shape_numel(const ShapeInfo *s) {
  uint32_t n = 1;
  for (int d = 0; d < s->rank; d++)
    n *= (uint32_t)s->shape[d];
  return n;
}

static int find_shape(ShapeInfo *v, int n, int rank, const int32_t *shape, bool split) {
  for (int i = 0; i < n; i++)
    if (v[i].rank == rank && v[i].split == split &&
        !memcmp(v[i].shape, shape, sizeof(int32_t) * (size_t)rank))
      return i;
  return -1;
}

/* The padded [M, N] of every DOT lowered to tensor cores, with its warp tiling. */
typedef struct MmaShape {
  int32_t shape[2];
  int wm, wn;                   /* warps, or warpgroups (wgmma) */
} MmaShape;

static int collect_mma_shapes(const TirFunc *f, bool wgmma, MmaShape *out) {
  int n = 0;
  for (int i = 0; i < f->ninsts; i++) {
    int wm, wn;
    if (wgmma ? !layout_dot_wgmma_tiling(f, &f->insts[i], &wm, &wn) : !layout_dot_uses_mma(f, &f->insts[i], &wm, &wn))
      continue;
    const TileType *d = &f->regs[f->insts[i].dst].type;
    int32_t s[2];
    layout_pad_shape(2, d->dims, s);
    bool seen = false;
    for (int k = 0; k < n; k++)
      seen |= out[k].shape[0] == s[0] && out[k].shape[1] == s[1];
    if (!seen)
      out[n++] = (MmaShape){{s[0], s[1]}, wm, wn};
  }
  return n;
}

static const MmaShape *find_mma(const MmaShape *m, int n, int rank, const int32_t *shape) {
  for (int k = 0; k < n && rank == 2; k++)
    if (m[k].shape[0] == shape[0] && m[k].shape[1] == shape[1])
      return &m[k];
  return NULL;
}

bool layout_assign(TirFunc *f, Diag *d) { return layout_assign_wgmma(f, d, false); }

bool layout_assign_wgmma(TirFunc *f, Diag *d, bool wgmma) {
  int t = f->threads;
  if (t < 32 || t > 1024 || (t & (t - 1))) {
    diag_report(d, DIAG_ERROR, f->loc,
                "the GPU backend needs threads per block to be a power of two from 32 to 1024, "
                "not %d", t);
    return false;
  }
  ShapeInfo *v = arena_alloc(f->arena, sizeof *v * (size_t)(f->nregs + 1));
  int n = 0;
  int *of_reg = arena_alloc(f->arena, sizeof(int) * (size_t)(f->nregs + 1));
  MmaShape *mma = arena_alloc(f->arena, sizeof *mma * (size_t)(f->ninsts + 1));
  int nmma = collect_mma_shapes(f, wgmma, mma);
  for (int r = 0; r < f->nregs; r++) {
    TileType *ty = &f->regs[r].type;
    int32_t padded[TILE_MAX_RANK] = {0};
    layout_pad_shape(ty->rank, ty->dims, padded);
    int64_t numel = 1;
    for (int k = 0; k < ty->rank; k++)
      numel *= padded[k];
    if (numel > TILE_MAX_ELEMS) {
      diag_report(d, DIAG_ERROR, f->loc,
                  "tile of %" PRId64 " elements is too large for the GPU backend", tile_numel(ty));
      return false;
    }
    /* Shared tiles of an mma result shape keep a blocked layout: it only decides how they are
     * filled from global memory (16-byte vectors), and DOT reads them with ldmatrix. */
    const MmaShape *ms = find_mma(mma, nmma, ty->rank, padded);
    bool split = ms && ty->place == PLACE_SHARED;
    int i = find_shape(v, n, ty->rank, padded, split);
    if (i < 0) {
      i = n++;
      v[i].rank = ty->rank;
      memcpy(v[i].shape, padded, sizeof padded);
      v[i].min_bytes = 16;
      v[i].split = split;
      v[i].mma_wm = ms && !split ? ms->wm : 0;
      v[i].mma_wn = ms && !split ? ms->wn : 0;
      v[i].wgmma = wgmma;
    }
    if (ty->elem != TY_BOOL && elem_bytes(ty->elem) < v[i].min_bytes)
      v[i].min_bytes = elem_bytes(ty->elem);
    of_reg[r] = i;
  }
  /* Per shape: reduced along its last axis (bit 0), along another axis (bit 1). Shapes reduced
   * only along rows get warps across rows (layout_blocked_rows): the reductions stay in warps. */
  int *reduced = arena_alloc(f->arena, sizeof(int) * (size_t)(n + 1));
  memset(reduced, 0, sizeof(int) * (size_t)(n + 1));
  for (int k = 0; k < f->ninsts; k++) {
    const TirInst *in = &f->insts[k];
    if (tir_op_reduces(in->op))
      reduced[of_reg[in->args[0]]] |= in->axis == v[of_reg[in->args[0]]].rank - 1 ? 1 : 2;
  }
  /* Parent: the largest shape this one broadcasts into (a root, by transitivity). */
  for (int i = 0; i < n; i++) {
    v[i].parent = i;
    if (v[i].split || v[i].mma_wm)
      continue; /* roots */
    for (int j = 0; j < n; j++)
      if (j != i && !v[j].split && broadcasts_into(&v[i], &v[j]) &&
          shape_numel(&v[j]) > shape_numel(&v[v[i].parent]))
        v[i].parent = j;
  }
  for (int i = 0; i < n; i++) {
    ShapeInfo *p = &v[v[i].parent];
    if (v[i].min_bytes < p->min_bytes)
      p->min_bytes = v[i].min_bytes;
  }
  for (int i = 0; i < n; i++)
    if (v[i].parent == i) {
      int bytes = v[i].min_bytes > 4 ? 4 : v[i].min_bytes;
      v[i].layout = arena_alloc(f->arena, sizeof(Layout));
      if (v[i].mma_wm && v[i].wgmma)
        *v[i].layout = layout_wgmma_acc(v[i].shape[0], v[i].shape[1], v[i].mma_wm, v[i].mma_wn);
      else if (v[i].mma_wm)
        *v[i].layout = layout_mma_acc(v[i].shape[0], v[i].shape[1], v[i].mma_wm, v[i].mma_wn);
      else
        *v[i].layout = (reduced[i] == 1 ? layout_blocked_rows : layout_blocked)(v[i].rank, v[i].shape, t,
                                                                                16 / bytes);
    }
  for (int i = 0; i < n; i++)
    if (v[i].parent != i) {
      v[i].layout = arena_alloc(f->arena, sizeof(Layout));
      *v[i].layout = layout_project(v[v[i].parent].layout, v[i].rank, v[i].shape);
    }
  for (int r = 0; r < f->nregs; r++)
    f->regs[r].type.layout = v[of_reg[r]].layout;
  return true;
}
