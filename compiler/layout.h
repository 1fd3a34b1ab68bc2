/* layout.h — linear layouts: which thread of a block holds which element of a tile.
 *
 * A tile is padded to power-of-two dims; its elements are numbered by a *flat coordinate*:
 * row-major over the padded shape, so the bits of the flat coordinate are the bits of the
 * per-dimension coordinates side by side, and XOR of flat coordinates is XOR per dimension.
 *
 * A distributed layout is a linear map over GF(2) from hardware index bits to flat coordinates,
 * stored as one basis vector per bit: register index bits (within a thread), the 5 lane bits and
 * the warp bits. The element held by (reg, lane, warp) is the XOR of the bases of the set bits.
 * A zero basis means the bit does not move through the tile: that hardware bit holds replicas
 * (broadcast). Blocked layouts, slices, mma.sync fragments and swizzled shared layouts are all
 * instances (see docs/architecture.md, "Layouts").
 */
#ifndef TILEC_LAYOUT_H
#define TILEC_LAYOUT_H

#include "tilec.h"

#define LAYOUT_MAX_BITS 24
#define LAYOUT_LANE_BITS 5

enum { LAY_REG, LAY_LANE, LAY_WARP, LAY_NKINDS };

typedef struct Layout {
  int rank;
  int32_t shape[TILE_MAX_RANK];                 /* padded, powers of two */
  int nbits[LAY_NKINDS];                        /* lane bits: always 5 */
  uint32_t basis[LAY_NKINDS][LAYOUT_MAX_BITS];  /* flat coordinates */
} Layout;

int32_t layout_pow2_ceil(int32_t n);
int layout_log2(uint32_t n);                    /* n a power of two */
void layout_pad_shape(int rank, const int32_t *dims, int32_t *out);

/* Flat coordinate <-> per-dimension coordinates for a padded shape. */
uint32_t layout_flat(int rank, const int32_t *shape, const int32_t *coord);
void layout_coord(int rank, const int32_t *shape, uint32_t flat, int32_t *coord);
uint32_t layout_numel(const Layout *l);         /* of the padded shape */
int layout_nregs(const Layout *l);              /* registers per thread = 2^reg bits */
int layout_threads(const Layout *l);            /* 32 << warp bits */

/* XOR of the bases of the set bits of `index` in one kind. */
uint32_t layout_apply_kind(const Layout *l, int kind, uint32_t index);
uint32_t layout_apply(const Layout *l, uint32_t reg, uint32_t lane, uint32_t warp);

/* Constructors. */
Layout layout_scalar(int threads);              /* rank 0: one register, replicated */
/* Fastest dim contiguous per thread (vec elements, clamped to the dim), then lanes, then warps,
 * fastest dim first; the rest in registers. Threads beyond the tile hold replicas. */
Layout layout_blocked(int rank, const int32_t *shape, int threads, int vec);
/* The same, except that warps go across the outer dims first (then along the last dim when the
 * outer dims are used up) and registers take the rest of the last dim: for tiles reduced along
 * rows, a warp holds whole rows when there are as many rows as warps (shuffles only, no shared
 * memory step). Equal to layout_blocked when the lanes already cover the last dim. */
Layout layout_blocked_rows(int rank, const int32_t *shape, int threads, int vec);
/* mma.sync m16n8k16 fragments of one warp (PTX ISA "Matrix Fragments for mma.m16n8k16"):
 * the f32 accumulator C/D (f32[16, 8], 4 registers) and the f16/bf16 operand A (f16[16, 16],
 * 8 halves). Larger tiles repeat them over warps and registers. */
Layout layout_mma_m16n8k16_acc(void);
Layout layout_mma_m16n8k16_a(void);
/* Operand B of mma.m16n8k16 (f16/bf16[16, 8] as K x N, 4 halves): b_i at row (k)
 * 2 * tig + (i & 1) + 8 * (i >= 2), col (n) groupID. */
Layout layout_mma_m16n8k16_b(void);

/* Tensor-core tiling of a dot's [M, N] result (padded dims) over `warps` warps: wm warps along M
 * times wn along N, each warp a contiguous block of M/wm rows (a multiple of 16) and N/wn columns
 * (a multiple of 8). M is preferred (row reductions then stay inside a warp, and the result can
 * feed the next dot's operand A in registers). False when the tile is too small. */
bool layout_mma_warps(int32_t M, int32_t N, int warps, int *wm, int *wn);
/* The same tiling for a dot whose rows need not stay in one warp (a GEMM): wm x wn warps chosen
 * for the fewest ldmatrix per k16 step (2-D warp tiles, each A / B fragment reused by several
 * mma); ties go to more warps along M. 128 x 128 over 8 warps: 4 x 2 warps of 32 x 64. */
bool layout_mma_warps_2d(int32_t M, int32_t N, int warps, int *wm, int *wn);
/* Whole-tile mma layouts for that tiling (register order: the fragment's bits, then the n8 (or
 * k16) tiles, then the m16 (or k16) tiles; warp bits: M first, then N; an operand's warp bits
 * along the other output dim are replicas):
 *   acc f32[M, N]: register r = i + 4 * (nt + NT * mt)     (i: c0..c3)
 *   A   [M, K]:    register r = i + 8 * (kt + KT * mt)     (i: a0..a7)
 *   B   [K, N]:    register r = i + 4 * (nt + NT * kt)     (i: b0..b3)
 * Two adjacent n8 accumulator tiles hold exactly operand A's k16 tile (FlashAttention-2's
 * register reuse): layout_mma_acc(M, N) equals layout_mma_operand_a(M, N) for the same warps. */
Layout layout_mma_acc(int32_t M, int32_t N, int wm, int wn);
Layout layout_mma_operand_a(int32_t M, int32_t K, int wm, int wn);
Layout layout_mma_operand_b(int32_t K, int32_t N, int wm, int wn);
/* The fragments a warp's tensor-core code holds at once (lower_nvptx_mma.c, _wgmma.c): m16 and
 * n8 tiles of an mma.sync warp tile, k16 x m64 A fragments of a wgmma from registers. A dot
 * whose tiling needs more takes the FMA path (larger dots than any kernel of ours; they used
 * to stop with an internal error). */
enum { LAYOUT_MMA_MAX_MT = 16, LAYOUT_MMA_MAX_NT = 32, LAYOUT_WGMMA_MAX_A_FRAGS = 256 };
/* Whether the backend lowers this DOT to mma.sync (f16/bf16 operands of one type, register f32
 * result, padded M >= 16, N >= 8, logical K a multiple of 16, a warp tiling exists within the
 * limits above; not disabled by TILEC_MMA=0 in the environment); the warp tiling when it does:
 * layout_mma_warps when the kernel reduces a tile or feeds a register tile to a dot as operand A
 * (attention), else layout_mma_warps_2d (TILEC_MMA_2D=0: layout_mma_warps always). */
bool layout_dot_uses_mma(const TirFunc *f, const TirInst *in, int *wm, int *wn);
/* ldmatrix.x4 (x2: nmat = 2) of a 16x16 operand block whose 8x8 matrix j has its origin at
 * (8 * (j & 1), 8 * (j >> 1)) in operand coordinates (A: [m, k], B: [k, n]): lane l gives the
 * address of row l % 8 of matrix l / 8. The operand coordinate it points at is linear in the
 * lane bits: base[b] = the coordinate for lane 1 << b. row_dim: the operand dim along which the
 * stored rows advance (0 when the operand is stored row-major, 1 when transposed). */
void layout_ldmatrix_lane_bases(int row_dim, int nmat, int32_t base[LAYOUT_LANE_BITS][2]);

/* ---- Hopper wgmma (sm_90a; docs/architecture.md, "DOT on wgmma").
 * A warpgroup is 4 consecutive warps (128 threads). wgm x wgn warpgroups tile the [M, N] result,
 * each a block of M/wgm rows (a multiple of 64) and N/wgn columns (a multiple of 8, at most 256),
 * computed by one wgmma.m64nNk16 per 64 rows (mt) and k16 step. */
bool layout_wgmma_warpgroups(int32_t M, int32_t N, int warpgroups, bool rows_whole, int *wgm, int *wgn);
/* The accumulator D of the warpgroups (PTX ISA "Register fragment of wgmma .m64nNk16", f32):
 * d_i of warp w (in its warpgroup) at row 16 w + groupID + 8 * ((i >> 1) & 1), column
 * 8 * (i >> 2) + 2 * tig + (i & 1) -- the mma.m16n8 C fragment repeated over N/8 -- then the m64
 * tiles: register r = i + (N/wgn / 2) * mt. With M/wgm == 64 this is layout_mma_acc(M, N,
 * 4 wgm, wgn). */
Layout layout_wgmma_acc(int32_t M, int32_t N, int wgm, int wgn);
/* Operand A from registers (f16/bf16 [M, K]): per warp the mma.m16n8k16 A fragment over rows
 * 16 w .. 16 w + 15 of each m64 tile; register r = i + 8 * (kt + K/16 * mt); warpgroups along N
 * hold replicas. Equal to layout_wgmma_acc(M, K, wgm, 1) on the non-replica bits (the
 * accumulator of one dot is operand A of the next for free). */
Layout layout_wgmma_operand_a(int32_t M, int32_t K, int wgm, int wgn);

/* A shared-memory layout: the byte offset of each element of a tile of shape [rows, cols]
 * (cols contiguous, a power of two; rows a power of two or a multiple of 8) as a map of its flat
 * coordinate (rows padded to a power of two): basis[b] = offset of the element whose flat
 * coordinate is 1 << b, the offset of any element the XOR over its set bits -- except the bits
 * that pick a block of columns (block_bits), which add: block j starts at j * rows * swizzle
 * bytes, not a power of two when rows is not (a 176-row tile takes 176 rows, not 256).
 * The wgmma operand layout ("canonical" layouts of the PTX ISA, CuTe's GMMA Layout_*_SW*_Atom):
 * the columns cut in blocks of T = swizzle / elem_bytes elements; block j holds rows 0..rows-1
 * at a pitch of `swizzle` bytes from j * rows * swizzle; then the hardware's swizzle on the
 * offset (CuTe Swizzle<log2(swizzle/16), 4, 3>): bits [4, 4 + log2(swizzle/16)) ^= the same
 * number of bits from bit 7. The tile base must be aligned to 8 * swizzle bytes (the repeat). */
typedef struct SmemLayout {
  int32_t rows, cols;                 /* cols a power of two; rows too, or a multiple of 8 */
  int elem_bytes;                     /* 2 */
  int swizzle;                        /* bytes: 32, 64 or 128 */
  int nbits;                          /* log2(cols) + log2 of rows rounded up to a power of two */
  uint32_t block_bits;                /* flat bits of the column block: added, not XORed */
  uint32_t basis[LAYOUT_MAX_BITS];
} SmemLayout;

/* False when the tile cannot be a wgmma operand (cols * elem_bytes < 32, rows < 8, rows neither
 * a power of two nor a multiple of 8, or cols not a power of two). */
bool layout_smem_wgmma(int32_t rows, int32_t cols, int elem_bytes, SmemLayout *out);
/* Bytes of the tile: rows * cols * elem_bytes. */
uint32_t layout_smem_bytes(const SmemLayout *s);
uint32_t layout_smem_offset(const SmemLayout *s, uint32_t flat);
/* The offset of flat as its two parts: the XOR of the in-block bases (returned) and the column
 * block (*block); the offset is the first plus *block * rows * swizzle. */
uint32_t layout_smem_split(const SmemLayout *s, uint32_t flat, uint32_t *block);
/* The hardware's swizzle of a byte offset (from an 8 * swizzle aligned base). */
uint32_t layout_swizzle(uint32_t off, int swizzle);

/* The matrix descriptor fields of one wgmma operand slice read from a tile of layout s:
 * k_major: the stored rows run along M (operand A) or N (operand B) and K along the columns;
 * else K runs along the rows (an MN-major operand, "transposed" for wgmma). (mn0, k0): the
 * slice's origin in operand coordinates, mn0 a multiple of 8 (k_major) or of the block width T
 * (else), k0 a multiple of 16. start: its byte offset in the tile (before the base is added);
 * lbo / sbo: leading / stride byte offsets; mode: 1 (128B), 2 (64B), 3 (32B). */
typedef struct WgmmaDesc {
  uint32_t start, lbo, sbo;
  int mode;
} WgmmaDesc;
WgmmaDesc layout_wgmma_desc(const SmemLayout *s, bool k_major, int32_t mn0, int32_t k0);
/* The 64-bit descriptor for a shared-window byte address of the slice. */
uint64_t layout_wgmma_desc_bits(const WgmmaDesc *w, uint32_t addr);

/* Whether every DOT of f runs on wgmma (kernel-wide: the shared operand tiles then take the
 * swizzled layout): arch sm_90a is the caller's test; TILEC_WGMMA=0 or TILEC_MMA=0 in the
 * environment turn it off; threads a multiple of 128; each DOT f16/bf16 with an f32 register
 * result, logical K a multiple of 16, a warpgroup tiling (rows whole in a warpgroup when f
 * reduces or feeds a register operand A), operand B a shared tile ([K, N], N >= 16) or TRANS
 * of one ([N, K]); every shared tile a DOT reads is written only by LOADs and read only by
 * DOTs (as A or B) or by TRANSes read only as a DOT's B. */
bool layout_kernel_uses_wgmma(const TirFunc *f);
/* A DOT's warpgroup tiling in a kernel that uses wgmma. */
bool layout_dot_wgmma_tiling(const TirFunc *f, const TirInst *in, int *wgm, int *wgn);
/* The columns one warpgroup's wgmma computes for a DOT of tiling wgm x wgn: the result's
 * logical N when one warpgroup spans it, it is a multiple of 8 and B is K-major (the trans of a
 * shared [N, K] tile: 176 keys, wgmma.m64n176), else the padded N / wgn. */
int32_t layout_dot_wgmma_n(const TirFunc *f, const TirInst *in, int wgn);
/* The rows shared wgmma operand tile r takes in shared memory (SmemLayout.rows): its logical
 * rows where they are a multiple of 8 and every DOT reads only those (operand B as [K, N], or
 * as the TRANS [N, K] of a DOT whose wgmma computes exactly N columns), else the padded rows. */
int32_t layout_wgmma_tile_rows(const TirFunc *f, int r);
/* TRANS tr of a shared [K, M] tile read in place as wgmma's MN-major operand A: a view
 * (tir_trans_view_ok) read only as DOT operands, its source written only by LOADs and read only by
 * DOTs and such TRANSes, the warpgroups along M starting at column blocks; TILEC_TRANS_A=0: never
 * (such an A is read into registers). */
bool layout_trans_a_in_place(const TirFunc *f, int tr);
/* Whether register r is a shared tile read by the DOTs of a wgmma kernel (swizzled layout). */
bool layout_is_wgmma_operand_tile(const TirFunc *f, int r);

/* The layout of a tile of `shape` that broadcasts into the parent's tile (numpy rules: trailing
 * alignment, dims 1 or equal): each basis projected, register bits that become zero dropped.
 * With shape = parent's shape with one axis set to 1 this is the slice (reduction result). */
Layout layout_project(const Layout *parent, int rank, const int32_t *shape);
Layout layout_slice(const Layout *l, int axis);
/* 2-D transpose: the same hardware bits, coordinates swapped. */
Layout layout_transpose(const Layout *l);

/* Whether register r holds only padding: for every lane and warp, its element lies outside the
 * logical dims (a tile's padded columns in registers of their own, e.g. the columns 176..255 of
 * a wgmma accumulator of logical N 176). */
bool layout_reg_is_padding(const Layout *l, const int32_t *dims, uint32_t r);
/* Whether the warps from first_warp on hold nothing the warps before them lack: each either holds
 * what one of them holds (its warp bases combine to theirs: a replica) or only padding (elements
 * outside the logical dims, as the rows 192..255 of a 192-row wgmma tile over 4 warpgroups). */
bool layout_warps_idle(const Layout *l, const int32_t *dims, uint32_t first_warp);

bool layout_equal(const Layout *a, const Layout *b);
/* Number of contiguous elements along the last dim per thread: 2^k where register bases 0..k-1
 * are 1, 2, 4, ... in the last dim and no other basis touches those bits. */
int layout_vec_width(const Layout *l);
/* Elements of type e one vector access moves: the vector width, at most 16 bytes (bool: 1). */
int layout_vec_chunk(const Layout *l, ElemType e);
/* Every element held by some (reg, lane, warp) (the bases span the whole tile). */
bool layout_is_surjective(const Layout *l);
/* No two distinct (reg, lane, warp) hold the same element except through zero bases. */
bool layout_is_injective_mod_broadcast(const Layout *l);
/* Bit mask over the kind's bits whose basis is zero (replica bits). */
uint32_t layout_zero_mask(const Layout *l, int kind);

void layout_print(FILE *out, const Layout *l);  /* one line: shape, then bases per kind */
char *layout_str(Arena *a, const Layout *l);

/* The layout pass: gives every TIR register a layout (TileType.layout). Tiles of one padded
 * shape share one layout; a tile whose shape broadcasts into a larger tile of the kernel takes
 * that tile's layout projected, so BCAST and REDUCE results need no data movement. */
bool layout_assign(TirFunc *f, Diag *d);
/* The same; wgmma: f's DOTs run on wgmma (layout_kernel_uses_wgmma, sm_90a), their results and
 * the shapes tied to them take layout_wgmma_acc. */
bool layout_assign_wgmma(TirFunc *f, Diag *d, bool wgmma);

#endif
