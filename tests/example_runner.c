/* example_runner.c — runs every example of dsl/examples on fresh random inputs, on the GPU (PTX
 * made ahead of time by tilec) or in the interpreter, and checks each output against the float64
 * references of tests/ref. It is `make demo` (suite demo) and `make gpu-test` (suite gpu).
 *
 *   example_runner [--suite=demo|gpu|small] [--backend=auto|gpu|cpu] [--ptx-dir DIR]
 *                  [--tilec PATH] [--arch sm_90a] [--case ID] [--json FILE] [--list]
 *                  [--seed N] [--case-timeout S]
 *
 * With --tilec, each case's PTX is compiled first (timed); without it, DIR/ID.ptx must exist.
 * Exit status 0 only if every case ran and passed. A case that runs past S seconds (default 120;
 * 0: no limit) ends the run with its name and status 124: a wrong mbarrier parity hangs rather
 * than fails, and the name says which kernel to look at. */
#include "ast.h"
#include "ref.h"
#include "tilec.h"
#include "tilert.h"

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* ------------------------------------------------------------ the cases */

enum { SUITE_SMALL = 1, SUITE_DEMO = 2, SUITE_GPU = 4, SUITE_ALL = 7 };

typedef struct Case {
  const char *id;         /* file name stem under build/.../ptx */
  const char *example;    /* dsl/examples/<example>.tile */
  const char *defines;    /* "-D D=128 -D CAUSAL=1" */
  const char *shape;      /* "M=17,N=1000" */
  unsigned suites;
  int offset;             /* every tensor starts this many elements past an aligned address */
  const char *kernel;     /* the kernel of a multi-kernel example (NULL: its first) */
  double f32_tol;         /* bound for f32 outputs (0: 1e-5); attention's dQacc sums f16 products */
} Case;

/* The cases whose source is not dsl/examples/<example>.tile (the example names the reference). */
static const struct {
  const char *prefix, *file;
} case_files[] = {{"xent_split_", "bench/ab/cross_entropy_backward_split.tile"},
                  {"xent_rows_", "bench/ab/cross_entropy_backward_rows.tile"},
                  {"xent_stored_", "bench/ab/cross_entropy_backward_stored.tile"},
                  {"xent_splitst_", "bench/ab/cross_entropy_backward_split_stored.tile"},
                  {"wgrad_", "bench/user/wgrad.tile"}};

/* The case's source file. */
static const char *case_file(const Case *c, char *buf, size_t size) {
  for (size_t i = 0; i < sizeof case_files / sizeof case_files[0]; i++)
    if (!strncmp(c->id, case_files[i].prefix, strlen(case_files[i].prefix)))
      return case_files[i].file;
  snprintf(buf, size, "dsl/examples/%s.tile", c->example);
  return buf;
}

/* Ragged sizes everywhere: none of 1, 17, 1000, 4097 is a multiple of any tile. */
static const Case cases[] = {
    {"vadd_n1", "vadd", "", "N=1", SUITE_SMALL | SUITE_GPU, 0, NULL, 0},
    {"vadd_n1000", "vadd", "", "N=1000", SUITE_ALL, 0, NULL, 0},
    {"vadd_n17", "vadd", "", "N=17", SUITE_SMALL | SUITE_GPU, 0, NULL, 0},
    {"vadd_big", "vadd", "", "N=10000019", SUITE_GPU, 0, NULL, 0},
    {"softmax_1000", "softmax", "", "M=7,N=1000", SUITE_ALL, 0, NULL, 0},
    {"softmax_1", "softmax", "", "M=3,N=1", SUITE_SMALL | SUITE_GPU, 0, NULL, 0},
    {"softmax_17r2", "softmax", "-D ROWS=2 -D BLOCK=32 -D WARPS=1", "M=5,N=17", SUITE_SMALL | SUITE_GPU, 0, NULL, 0},
    {"softmax_big", "softmax", "-D BLOCK=8192 -D WARPS=8", "M=4099,N=4097", SUITE_GPU, 0, NULL, 0},
    {"softmax_online_1000", "softmax_online", "-D BN=256", "M=3,N=1000", SUITE_ALL, 0, NULL, 0},
    {"softmax_online_1", "softmax_online", "-D BN=256", "M=2,N=1", SUITE_SMALL | SUITE_GPU, 0, NULL, 0},
    {"softmax_online_big", "softmax_online", "", "M=257,N=20011", SUITE_GPU, 0, NULL, 0},
    {"rmsnorm_1000", "rmsnorm", "", "M=5,N=1000", SUITE_ALL, 0, NULL, 0},
    {"rmsnorm_17", "rmsnorm", "-D BLOCK=32 -D ROWS=4 -D WARPS=1", "M=9,N=17", SUITE_SMALL | SUITE_GPU, 0, NULL, 0},
    {"rmsnorm_1", "rmsnorm", "", "M=2,N=1", SUITE_SMALL | SUITE_GPU, 0, NULL, 0},
    {"rmsnorm_big", "rmsnorm", "-D BLOCK=8192 -D WARPS=8", "M=2049,N=8191", SUITE_GPU, 0, NULL, 0},
    {"layernorm_1000", "layernorm", "", "M=5,N=1000", SUITE_ALL, 0, NULL, 0},
    {"layernorm_17", "layernorm", "-D BLOCK=32 -D ROWS=4 -D WARPS=1", "M=9,N=17", SUITE_SMALL | SUITE_GPU, 0, NULL, 0},
    {"layernorm_1", "layernorm", "", "M=3,N=1", SUITE_SMALL | SUITE_GPU, 0, NULL, 0},
    {"layernorm_big", "layernorm", "-D BLOCK=4096 -D WARPS=8", "M=4097,N=4095", SUITE_GPU, 0, NULL, 0},
    {"add_rmsnorm_1000", "add_rmsnorm", "", "M=5,N=1000", SUITE_ALL, 0, NULL, 0},
    {"add_rmsnorm_17", "add_rmsnorm", "-D BLOCK=32 -D ROWS=2 -D WARPS=1", "M=7,N=17", SUITE_SMALL | SUITE_GPU, 0, NULL, 0},
    {"add_rmsnorm_big", "add_rmsnorm", "-D BLOCK=4096 -D WARPS=8", "M=4097,N=4095", SUITE_GPU, 0, NULL, 0},
    {"gemm_relu", "gemm", "", "M=100,N=72,K=40", SUITE_ALL, 0, NULL, 0},
    {"gemm_none_1", "gemm", "-D ACT=0", "M=1,N=17,K=1", SUITE_SMALL | SUITE_GPU, 0, NULL, 0},
    {"gemm_gelu", "gemm", "-D ACT=2", "M=65,N=130,K=33", SUITE_SMALL | SUITE_GPU, 0, NULL, 0},
    {"gemm_big", "gemm", "", "M=1000,N=1000,K=1000", SUITE_GPU, 0, NULL, 0},
    {"attn_d64", "attention", "", "B=1,H=2,N=100", SUITE_ALL, 0, NULL, 0},
    {"attn_d64_causal", "attention", "-D CAUSAL=1", "B=2,H=1,N=100", SUITE_ALL, 0, NULL, 0},
    {"attn_d128", "attention", "-D D=128", "B=1,H=1,N=17", SUITE_SMALL | SUITE_GPU, 0, NULL, 0},
    {"attn_d128_causal", "attention", "-D D=128 -D CAUSAL=1", "B=1,H=2,N=1", SUITE_SMALL | SUITE_GPU, 0, NULL, 0},
    {"attn_d64_big", "attention", "", "B=2,H=4,N=1000", SUITE_GPU, 0, NULL, 0},
    {"attn_d128_causal_big", "attention", "-D D=128 -D CAUSAL=1", "B=1,H=4,N=2049", SUITE_GPU, 0, NULL, 0},
    /* Bench-sized tiles (sm_90a: warp-specialized TMA entries; ragged edges are TMA's zero fill) */
    {"gemm_ws_128x256", "gemm", "-D BM=128 -D BN=256 -D BK=64 -D WARPS=8 -D STAGES=4 -D ACT=2", "M=1000,N=1000,K=1000",
     SUITE_GPU, 0, NULL, 0},
    {"gemm_ws_128x128_s6", "gemm", "-D BM=128 -D BN=128 -D BK=64 -D WARPS=8 -D STAGES=6", "M=520,N=264,K=2056",
     SUITE_GPU, 0, NULL, 0},
    {"attn_ws_d128", "attention", "-D D=128 -D BM=128 -D BN=128 -D WARPS=8", "B=2,H=2,N=1000", SUITE_GPU, 0, NULL, 0},
    /* More tiles than resident blocks: the persistent entries walk several tiles per block */
    {"gemm_ws_persist", "gemm", "-D BM=128 -D BN=128 -D BK=64 -D WARPS=8 -D STAGES=4", "M=2000,N=2056,K=200", SUITE_GPU, 0, NULL, 0},
    {"attn_ws_persist", "attention", "-D D=128 -D BM=128 -D BN=128 -D WARPS=8 -D CAUSAL=1", "B=1,H=20,N=1000", SUITE_GPU, 0, NULL, 0},
    /* not causal: a persistent walk with two copies of Q (the next tile's loads during this loop) */
    {"attn_ws_persist_d128", "attention", "-D D=128 -D BM=128 -D BN=128 -D WARPS=8", "B=2,H=40,N=1000", SUITE_GPU, 0, NULL, 0},
    /* make gpu-prep compiles these two with TILEC_CLUSTER=1: clusters of 2 with TMA multicast
     * (an odd number of tiles along the pair's axis: the last pair's second tile is past the edge) */
    {"gemm_ws_cluster", "gemm", "-D BM=128 -D BN=128 -D BK=64 -D WARPS=8 -D STAGES=4", "M=2000,N=2056,K=200", SUITE_GPU, 0, NULL, 0},
    {"attn_ws_cluster", "attention", "-D D=128 -D BM=128 -D BN=128 -D WARPS=8", "B=1,H=20,N=1000", SUITE_GPU, 0, NULL, 0},
    {"attn_ws_d64_causal", "attention", "-D D=64 -D CAUSAL=1 -D BM=128 -D BN=64 -D WARPS=8 -D STAGES=3",
     "B=1,H=3,N=1030", SUITE_GPU, 0, NULL, 0},
    /* Rotated loops (sm_90a ws entry, 3+ stages; make gpu-prep compiles attn_rot_* with
     * TILEC_ROTATE=1): S of the next iteration issued before P V of this one */
    {"attn_rot_d128", "attention", "-D D=128 -D BM=128 -D BN=64 -D WARPS=8 -D STAGES=3", "B=2,H=3,N=1000", SUITE_GPU, 0, NULL, 0},
    {"attn_rot_d128_causal", "attention", "-D D=128 -D BM=128 -D BN=64 -D WARPS=8 -D STAGES=4 -D CAUSAL=1",
     "B=1,H=3,N=1030", SUITE_GPU, 0, NULL, 0},
    {"attn_rot_d64_persist", "attention", "-D D=64 -D BM=128 -D BN=128 -D WARPS=8 -D STAGES=3", "B=1,H=40,N=1000", SUITE_GPU, 0, NULL, 0},
    {"attn_rot_bf16_s3", "attention", "-D T=bf16 -D D=128 -D BM=128 -D BN=64 -D WARPS=8 -D STAGES=3", "B=1,H=2,N=300",
     SUITE_GPU, 0, NULL, 0},
    {"attn_rot_gqa_window", "attention_gqa", "-D D=128 -D BM=128 -D BN=64 -D WARPS=8 -D STAGES=3",
     "B=1,H=8,HKV=2,N=1000,window=300", SUITE_GPU, 0, NULL, 0},
    {"attn_rot_d64_causal_nt", "attention", "-D D=64 -D BM=128 -D BN=128 -D WARPS=8 -D STAGES=3 -D CAUSAL=1",
     "B=1,H=5,N=777", SUITE_GPU, 0, NULL, 0},
    {"attn_rot_one_block", "attention", "-D D=128 -D BM=128 -D BN=64 -D WARPS=8 -D STAGES=3", "B=1,H=1,N=64", SUITE_GPU, 0, NULL, 0},
    /* Q freed by the last iteration (BM = BN: its product there takes K's stage as A): one copy
     * of Q at d128, several tiles per block; one iteration per tile (the release in the first);
     * causal; grouped heads with a window */
    {"attn_rot_early_d128", "attention", "-D D=128 -D BM=128 -D BN=128 -D WARPS=8 -D STAGES=3", "B=2,H=40,N=1000",
     SUITE_GPU, 0, NULL, 0},
    {"attn_rot_early_one_iter", "attention", "-D D=128 -D BM=128 -D BN=128 -D WARPS=8 -D STAGES=3", "B=3,H=100,N=100",
     SUITE_GPU, 0, NULL, 0},
    {"attn_rot_early_causal", "attention", "-D D=128 -D BM=128 -D BN=128 -D WARPS=8 -D STAGES=3 -D CAUSAL=1",
     "B=1,H=60,N=1030", SUITE_GPU, 0, NULL, 0},
    {"attn_rot_early_gqa", "attention_gqa", "-D D=128 -D BM=128 -D BN=128 -D WARPS=8 -D STAGES=3",
     "B=1,H=32,HKV=8,N=1000,window=300", SUITE_GPU, 0, NULL, 0},
    /* K apart from V (the early set): 2-stage rotated loops (make gpu-prep compiles *_nostore with
     * TILEC_TMA_STORE=0, which d128 needs to rotate without spilling): several tiles per block with
     * two copies of Q; one iteration per tile (K's last stage freed by the loop's exit only); d64
     * causal; grouped heads with a window (d64: rotated with the TMA store) */
    {"attn_early_rot2_nostore", "attention", "-D D=128 -D BM=128 -D BN=128 -D WARPS=8", "B=2,H=40,N=1000",
     SUITE_GPU, 0, NULL, 0},
    {"attn_early_one_iter_nostore", "attention", "-D D=128 -D BM=128 -D BN=128 -D WARPS=8", "B=3,H=100,N=100",
     SUITE_GPU, 0, NULL, 0},
    {"attn_early_d64_causal", "attention", "-D D=64 -D BM=128 -D BN=128 -D WARPS=8 -D CAUSAL=1", "B=1,H=60,N=1030",
     SUITE_GPU, 0, NULL, 0},
    {"attn_early_gqa_d64", "attention_gqa", "-D D=64 -D BM=128 -D BN=128 -D WARPS=8",
     "B=1,H=32,HKV=8,N=1000,window=300", SUITE_GPU, 0, NULL, 0},
    /* Walks of whole rows (causal: tiles cost what their x says): rows of an odd number of tiles
     * (no pairs), enough rows (y) to share out among the H200's 132 resident blocks (512: 3.9
     * per block, libtilert walks them), ragged last tiles; 2 tiles a row: a pair, the whole row */
    {"attn_rows_d128_causal", "attention", "-D D=128 -D BM=128 -D BN=128 -D WARPS=8 -D CAUSAL=1", "B=4,H=128,N=130",
     SUITE_GPU, 0, NULL, 0},
    {"attn_rows_d64_causal", "attention", "-D D=64 -D BM=128 -D BN=128 -D WARPS=8 -D CAUSAL=1", "B=2,H=256,N=300",
     SUITE_GPU, 0, NULL, 0},
    {"attn_rows_gqa_window", "attention_gqa", "-D D=128 -D BM=128 -D BN=128 -D WARPS=8",
     "B=2,H=256,HKV=64,N=330,window=100", SUITE_GPU, 0, NULL, 0},
    /* d64 with 256-row query tiles: four consumer warpgroups taking turns, 64 keys an iteration;
     * several tiles per block (walked), ragged; causal: pairs (264 of them) */
    {"attn_bm256_d64", "attention", "-D D=64 -D BM=256 -D BN=64 -D WARPS=16 -D STAGES=3", "B=1,H=40,N=1000",
     SUITE_GPU, 0, NULL, 0},
    {"attn_bm256_d64_causal", "attention", "-D D=64 -D BM=256 -D BN=64 -D WARPS=16 -D CAUSAL=1", "B=1,H=132,N=1000",
     SUITE_GPU, 0, NULL, 0},
    /* the same at 3 stages in bf16 and at 4 stages; short rows (N = 200: one tile, its last
     * band of 64 rows empty) and ragged ones */
    {"attn_bm256_d64_causal_s3", "attention", "-D T=bf16 -D D=64 -D BM=256 -D BN=64 -D WARPS=16 -D STAGES=3 -D CAUSAL=1",
     "B=2,H=33,N=777", SUITE_GPU, 0, NULL, 0},
    {"attn_bm256_d64_causal_short", "attention", "-D D=64 -D BM=256 -D BN=64 -D WARPS=16 -D STAGES=4 -D CAUSAL=1",
     "B=3,H=20,N=200", SUITE_GPU, 0, NULL, 0},
    /* 192-row query tiles over 16 warps (FlashAttention-3's d64 tile): the fourth warpgroup holds
     * only padded rows, so the warp-specialized entry runs 3 consumer warpgroups at 160 registers
     * (tir_schedule.c consumer_warpgroups) and Q lands by TMA in the first 192 of its 256 rows;
     * causal and ragged, bf16, key tiles of 192 */
    {"attn_bm192_d64_causal", "attention", "-D D=64 -D BM=192 -D BN=128 -D WARPS=16 -D STAGES=3 -D CAUSAL=1",
     "B=2,H=13,N=1000", SUITE_GPU, 0, NULL, 0},
    {"attn_bm192_d64_bf16", "attention", "-D T=bf16 -D D=64 -D BM=192 -D BN=128 -D WARPS=16", "B=1,H=33,N=777",
     SUITE_GPU, 0, NULL, 0},
    {"attn_bm192_bn192_d64", "attention", "-D D=64 -D BM=192 -D BN=192 -D WARPS=16 -D STAGES=3", "B=2,H=7,N=1234",
     SUITE_GPU, 0, NULL, 0},
    /* d128 over 192-row tiles: the rotated loop's unread last S reads P instead of Q, so Q is freed
     * in each tile's last iteration (session as); 165 tiles, so blocks walk two, the last ragged */
    {"attn_bm192_d128", "attention", "-D D=128 -D BM=192 -D BN=128 -D WARPS=16", "B=1,H=33,N=777", SUITE_GPU, 0,
     NULL, 0},
    {"attn_bm192_d128_causal", "attention", "-D T=bf16 -D D=128 -D BM=192 -D BN=128 -D WARPS=16 -D CAUSAL=1",
     "B=1,H=33,N=777", SUITE_GPU, 0, NULL, 0},
    /* idle bands (session at): the last, ragged tile of each sequence leaves whole warpgroups
     * past N (700 = 2 x 256 + 188: the fourth; causal 600 = 2 x 256 + 88: the third and fourth),
     * which run only the loop's protocol in the warp-specialized entry while the others compute;
     * blocks walk several tiles. _nib: the same without (TILEC_IDLE_BANDS=0) */
    {"attn_bm256_d64_idle", "attention", "-D D=64 -D BM=256 -D BN=64 -D WARPS=16 -D STAGES=3", "B=2,H=35,N=700",
     SUITE_GPU, 0, NULL, 0},
    {"attn_bm256_d64_causal_idle", "attention", "-D T=bf16 -D D=64 -D BM=256 -D BN=64 -D WARPS=16 -D CAUSAL=1",
     "B=1,H=70,N=600", SUITE_GPU, 0, NULL, 0},
    {"attn_bm192_d128_idle_nib", "attention", "-D D=128 -D BM=192 -D BN=128 -D WARPS=16", "B=1,H=33,N=777", SUITE_GPU,
     0, NULL, 0},
    {"gemm_ws_idle", "gemm", "-D BM=128 -D BN=256 -D BK=64 -D WARPS=8 -D STAGES=3 -D ACT=2", "M=1050,N=777,K=520",
     SUITE_GPU, 0, NULL, 0},
    /* rotated, P rounded where the softmax makes it (gpu-prep compiles *_pk0 with TILEC_CVT_PACK=0,
     * where the rotated loop fits 160 registers): turns over 3 warpgroups (barriers 3..5, the
     * third passing to the first); not yet run on a GPU when added (session aj) */
    {"attn_bm192_d64_causal_pk0", "attention", "-D D=64 -D BM=192 -D BN=128 -D WARPS=16 -D STAGES=3 -D CAUSAL=1",
     "B=2,H=11,N=1111", SUITE_GPU, 0, NULL, 0},
    /* the same for a GEMM: A's 192 rows by TMA into a tile laid out in 256, a persistent walk over
     * ragged M and N, 3 consumer warpgroups (not yet run on a GPU when added, session aj) */
    {"gemm_bm192_w16", "gemm", "-D BM=192 -D BN=128 -D BK=64 -D WARPS=16 -D STAGES=4", "M=1000,N=777,K=520",
     SUITE_GPU, 0, NULL, 0},
    /* Key tiles of 176 rows (FlashAttention-3's d128 tile): wgmma.m64n176, K and V tiles of 176
     * rows in shared memory (column blocks 176 rows apart), TMA boxes of 176 rows; ragged N
     * (1000 = 5 x 176 + 120), several tiles per block; causal in bf16; 144 rows at d64 */
    {"attn_bn176_d128", "attention", "-D D=128 -D BM=128 -D BN=176 -D WARPS=8", "B=1,H=40,N=1000", SUITE_GPU, 0,
     NULL, 0},
    {"attn_bn176_d128_causal", "attention", "-D T=bf16 -D D=128 -D BM=128 -D BN=176 -D WARPS=8 -D CAUSAL=1",
     "B=2,H=17,N=777", SUITE_GPU, 0, NULL, 0},
    /* the same rotated (S of the next iteration issued before P V; unpacked P conversion: the
     * packed one spills there; gpu-prep compiles *_pk0 with TILEC_CVT_PACK=0) */
    {"attn_bn176_d128_pk0", "attention", "-D D=128 -D BM=128 -D BN=176 -D WARPS=8", "B=2,H=21,N=1234", SUITE_GPU, 0,
     NULL, 0},
    {"attn_bn144_d64", "attention", "-D D=64 -D BM=128 -D BN=144 -D WARPS=8 -D STAGES=3", "B=1,H=33,N=1000",
     SUITE_GPU, 0, NULL, 0},
    /* Walks of pairs of a row's tiles (its longest with its shortest, ...): 64 rows of 8 tiles, 256
     * pairs for 132 walkers (libtilert walks them), ragged last tiles; grouped heads with a window */
    {"attn_pairs_d128_causal", "attention", "-D D=128 -D BM=128 -D BN=128 -D WARPS=8 -D CAUSAL=1", "B=1,H=64,N=1000",
     SUITE_GPU, 0, NULL, 0},
    {"attn_pairs_d64_causal", "attention", "-D D=64 -D BM=128 -D BN=128 -D WARPS=8 -D CAUSAL=1", "B=2,H=32,N=1000",
     SUITE_GPU, 0, NULL, 0},
    {"attn_pairs_gqa_window", "attention_gqa", "-D D=128 -D BM=128 -D BN=128 -D WARPS=8",
     "B=2,H=32,HKV=8,N=1000,window=300", SUITE_GPU, 0, NULL, 0},
    /* Grouped-query heads (4 query heads over 2 K/V heads) and sliding windows (window in the shape) */
    {"gqa_causal", "attention_gqa", "", "B=1,H=4,HKV=2,N=100,window=0", SUITE_ALL, 0, NULL, 0},
    {"gqa_window", "attention_gqa", "", "B=2,H=4,HKV=1,N=150,window=37", SUITE_ALL, 0, NULL, 0},
    {"gqa_window_noncausal", "attention_gqa", "-D CAUSAL=0", "B=1,H=2,HKV=2,N=130,window=64", SUITE_SMALL | SUITE_GPU, 0,
     NULL, 0},
    {"gqa_bf16_d128", "attention_gqa", "-D T=bf16 -D D=128", "B=1,H=4,HKV=2,N=90,window=20", SUITE_SMALL | SUITE_GPU, 0,
     NULL, 0},
    {"gqa_ws_d128", "attention_gqa", "-D D=128 -D BM=128 -D BN=128 -D WARPS=8", "B=1,H=8,HKV=2,N=1000,window=300",
     SUITE_GPU, 0, NULL, 0},
    {"gqa_ws_d128_nowin", "attention_gqa", "-D D=128 -D BM=128 -D BN=128 -D WARPS=8", "B=2,H=8,HKV=2,N=700,window=0",
     SUITE_GPU, 0, NULL, 0},
    /* dW across blocks with atomic_add: 37 rows are 3 blocks of CHUNK = 16, the last one short */
    {"rmsnorm_bwd_1000", "rmsnorm_backward", "", "M=37,N=1000", SUITE_ALL, 0, NULL, 0},
    {"rmsnorm_bwd_17", "rmsnorm_backward", "-D BLOCK=32 -D ROWS=4 -D CHUNK=2 -D WARPS=1", "M=9,N=17",
     SUITE_SMALL | SUITE_GPU, 0, NULL, 0},
    {"rmsnorm_bwd_bf16", "rmsnorm_backward", "-D T=bf16", "M=5,N=1000", SUITE_SMALL | SUITE_GPU, 0, NULL, 0},
    {"rmsnorm_bwd_big", "rmsnorm_backward", "-D BLOCK=4096 -D WARPS=8", "M=4097,N=4095", SUITE_GPU, 0, NULL, 0},
    /* the bench's shapes of ring: four stages, 32 rows a block (the last block short), several rows a step */
    {"rmsnorm_bwd_s4", "rmsnorm_backward", "-D BLOCK=4096 -D WARPS=8 -D CHUNK=32 -D STAGES=4", "M=1001,N=4096",
     SUITE_GPU, 0, NULL, 0},
    {"rmsnorm_bwd_r4s4", "rmsnorm_backward", "-D ROWS=4 -D STAGES=4", "M=203,N=1000", SUITE_SMALL | SUITE_GPU, 0, NULL,
     0},
    /* The backward examples (issue 14). layernorm_backward.tile: the forward that saves the row
     * statistics, then the backward (dW, dB across blocks with atomic_add) */
    {"ln_train_1000", "layernorm_backward", "", "M=5,N=1000", SUITE_ALL, 0, "layernorm_train", 0},
    {"ln_train_17", "layernorm_backward", "-D BLOCK=32 -D ROWS=4 -D WARPS=1", "M=9,N=17", SUITE_SMALL | SUITE_GPU, 0,
     "layernorm_train", 0},
    {"ln_bwd_1000", "layernorm_backward", "", "M=37,N=1000", SUITE_ALL, 0, "layernorm_backward", 0},
    {"ln_bwd_17", "layernorm_backward", "-D BLOCK=32 -D ROWS=4 -D CHUNK=2 -D WARPS=1", "M=9,N=17",
     SUITE_SMALL | SUITE_GPU, 0, "layernorm_backward", 0},
    {"ln_bwd_bf16", "layernorm_backward", "-D T=bf16", "M=5,N=1000", SUITE_SMALL | SUITE_GPU, 0, "layernorm_backward", 0},
    {"ln_bwd_big", "layernorm_backward", "-D BLOCK=4096 -D WARPS=8", "M=4097,N=4095", SUITE_GPU, 0, "layernorm_backward", 0},
    {"ln_bwd_off1", "layernorm_backward", "", "M=20,N=1000", SUITE_SMALL | SUITE_GPU, 1, "layernorm_backward", 0},
    /* cross_entropy_backward.tile: loss and dX in one kernel */
    {"xent_bwd_1000", "cross_entropy_backward", "-D BN=256", "M=7,N=1000", SUITE_ALL, 0, NULL, 0},
    {"xent_bwd_1", "cross_entropy_backward", "", "M=3,N=1", SUITE_SMALL | SUITE_GPU, 0, NULL, 0},
    {"xent_bwd_bf16", "cross_entropy_backward", "-D T=bf16 -D BN=256", "M=7,N=1000", SUITE_SMALL | SUITE_GPU, 0, NULL, 0},
    {"xent_bwd_big", "cross_entropy_backward", "", "M=1025,N=50257", SUITE_GPU, 0, NULL, 0},
    /* rows that start anywhere (N odd); make gpu-prep compiles *_shift with TILEC_SHIFTED=1: the
     * copies start at the aligned address before each row and the reads shift back (shifted
     * tiles); one row per tile, and two rows of two shifts */
    {"xent_bwd_odd", "cross_entropy_backward", "-D BN=256", "M=9,N=1001", SUITE_SMALL | SUITE_GPU, 0, NULL, 0},
    {"xent_bwd_odd_shift", "cross_entropy_backward", "-D BN=256", "M=9,N=1001", SUITE_GPU, 0, NULL, 0},
    {"xent_bwd_odd_bf16_shift", "cross_entropy_backward", "-D T=bf16 -D BN=512", "M=9,N=1537", SUITE_GPU, 0, NULL, 0},
    {"xent_bwd_big_shift", "cross_entropy_backward", "", "M=1025,N=50257", SUITE_GPU, 0, NULL, 0},
    /* its one-pass kernel: the row in shared memory, read back in windows (`xs[c0 : +C]`) */
    {"xent_bwd_row_1000", "cross_entropy_backward", "-D BLOCK=1024 -D C=256 -D WARPS=2", "M=7,N=1000", SUITE_ALL, 0,
     "cross_entropy_backward_row", 0},
    {"xent_bwd_row_1", "cross_entropy_backward", "", "M=3,N=1", SUITE_SMALL | SUITE_GPU, 0, "cross_entropy_backward_row", 0},
    {"xent_bwd_row_c100", "cross_entropy_backward", "-D BLOCK=1000 -D C=100 -D WARPS=2", "M=5,N=1000",
     SUITE_SMALL | SUITE_GPU, 0, "cross_entropy_backward_row", 0},
    {"xent_bwd_row_ragged", "cross_entropy_backward", "-D T=bf16 -D BLOCK=1000 -D C=128", "M=9,N=999",
     SUITE_SMALL | SUITE_GPU, 1, "cross_entropy_backward_row", 0},
    {"xent_bwd_row_full", "cross_entropy_backward", "-D BLOCK=2048 -D C=512", "M=6,N=2048", SUITE_GPU, 0,
     "cross_entropy_backward_row", 0},
    {"xent_bwd_row_big", "cross_entropy_backward", "-D BLOCK=32768 -D C=4096 -D WARPS=16", "M=300,N=32000", SUITE_GPU, 0,
     "cross_entropy_backward_row", 0},
    /* rows that start anywhere: copied shifted, read in windows where tir_align moved the loops
     * (and, bf16 at C = 100, where it could not: windows at every shift) */
    {"xent_bwd_row_odd", "cross_entropy_backward", "-D BLOCK=50264 -D C=4096 -D WARPS=16", "M=40,N=50257", SUITE_GPU, 0,
     "cross_entropy_backward_row", 0},
    {"xent_bwd_row_odd_bf16", "cross_entropy_backward", "-D T=bf16 -D BLOCK=4104 -D C=512 -D WARPS=4", "M=17,N=4099",
     SUITE_GPU, 0, "cross_entropy_backward_row", 0},
    {"xent_bwd_row_odd_c100", "cross_entropy_backward", "-D T=bf16 -D BLOCK=1008 -D C=100 -D WARPS=2", "M=11,N=1001",
     SUITE_GPU, 0, "cross_entropy_backward_row", 0},
    /* the row split over a cluster (bench/ab/cross_entropy_backward_split.tile, sm_90): the last
     * block's part ragged, or empty (SPLIT 4 x 256 > 700 + 256); bf16 rows that start anywhere;
     * the bench's 50257 (misaligned) and 128256 columns, 4 and 8 blocks a cluster */
    {"xent_split_ragged", "cross_entropy_backward", "-D PART=256 -D C=64 -D WARPS=2 -D SPLIT=4", "M=5,N=1000",
     SUITE_SMALL | SUITE_GPU, 0, NULL, 0},
    {"xent_split_empty", "cross_entropy_backward", "-D PART=256 -D C=128 -D WARPS=2 -D SPLIT=4", "M=4,N=700",
     SUITE_SMALL | SUITE_GPU, 0, NULL, 0},
    {"xent_split_odd_bf16", "cross_entropy_backward", "-D T=bf16 -D PART=512 -D C=128 -D WARPS=2 -D SPLIT=2",
     "M=7,N=1001", SUITE_SMALL | SUITE_GPU, 1, NULL, 0},
    {"xent_split_big", "cross_entropy_backward", "-D PART=16384 -D C=4096 -D WARPS=8 -D SPLIT=4", "M=300,N=50257",
     SUITE_GPU, 0, NULL, 0},
    {"xent_split_8", "cross_entropy_backward", "-D PART=16384 -D C=4096 -D WARPS=8 -D SPLIT=8", "M=64,N=128256",
     SUITE_GPU, 0, NULL, 0},
    /* rows on a ring (bench/ab/cross_entropy_backward_rows.tile): each stage holds a row copied at
     * its own shift, the windows' loops moved to it (tir_align); a block's last rows ragged
     * (M = 40 over 3 rows a block); the bench's 50257 columns, and bf16 at 1001 past an odd offset */
    {"xent_rows_odd", "cross_entropy_backward", "-D BLOCK=50264 -D C=4096 -D WARPS=16 -D RPB=3 -D STAGES=2",
     "M=40,N=50257", SUITE_GPU, 0, NULL, 0},
    {"xent_rows_odd_bf16", "cross_entropy_backward", "-D T=bf16 -D BLOCK=1008 -D C=128 -D WARPS=2 -D RPB=4 -D STAGES=3",
     "M=11,N=1001", SUITE_SMALL | SUITE_GPU, 1, NULL, 0},
    {"xent_rows_aligned", "cross_entropy_backward", "-D BLOCK=4096 -D C=1024 -D WARPS=4 -D RPB=4 -D STAGES=2",
     "M=9,N=4096", SUITE_GPU, 0, NULL, 0},
    /* exponentials written back over the row (bench/ab/cross_entropy_backward_stored.tile, a window
     * store): rows that start anywhere (the moved loops store at each row's shift), bf16 past an
     * odd offset with windows that tir_align cannot move (C = 100), an ignored label */
    {"xent_stored_odd", "cross_entropy_backward", "-D BLOCK=50264 -D C=4096 -D WARPS=16", "M=40,N=50257", SUITE_GPU, 0,
     "cross_entropy_backward_row", 0},
    {"xent_stored_1000", "cross_entropy_backward", "-D BLOCK=1024 -D C=256 -D WARPS=2", "M=7,N=1000",
     SUITE_SMALL | SUITE_GPU, 0, "cross_entropy_backward_row", 0},
    {"xent_stored_odd_bf16", "cross_entropy_backward", "-D T=bf16 -D BLOCK=1008 -D C=100 -D WARPS=2", "M=11,N=1001",
     SUITE_SMALL | SUITE_GPU, 1, "cross_entropy_backward_row", 0},
    /* the same over a cluster (bench/ab/cross_entropy_backward_split_stored.tile): windows whose
     * elements sit in several threads (C = 64: stores fenced, one writer each), an empty last
     * part, bf16 past an odd offset, and the bench's 128256 columns over 8 blocks (owned stores) */
    {"xent_splitst_ragged", "cross_entropy_backward", "-D PART=256 -D C=64 -D WARPS=2 -D SPLIT=4", "M=5,N=1000",
     SUITE_SMALL | SUITE_GPU, 0, NULL, 0},
    {"xent_splitst_empty", "cross_entropy_backward", "-D PART=256 -D C=128 -D WARPS=2 -D SPLIT=4", "M=4,N=700",
     SUITE_GPU, 0, NULL, 0},
    {"xent_splitst_odd_bf16", "cross_entropy_backward", "-D T=bf16 -D PART=512 -D C=128 -D WARPS=2 -D SPLIT=2",
     "M=7,N=1001", SUITE_SMALL | SUITE_GPU, 1, NULL, 0},
    {"xent_splitst_8", "cross_entropy_backward", "-D PART=16384 -D C=4096 -D WARPS=8 -D SPLIT=8", "M=64,N=128256",
     SUITE_GPU, 0, NULL, 0},
    {"ln_bwd_odd", "layernorm_backward", "-D ROWS=2 -D CHUNK=4", "M=37,N=1001", SUITE_SMALL | SUITE_GPU, 0,
     "layernorm_backward", 0},
    {"ln_bwd_odd_shift", "layernorm_backward", "-D ROWS=2 -D CHUNK=4", "M=37,N=1001", SUITE_GPU, 0,
     "layernorm_backward", 0},
    /* thread-private rings (make gpu-prep compiles *_priv with TILEC_PRIVATE_RING=1): one barrier
     * a row, the row sums' slots by parity; odd and even row counts, a ragged and a full tile */
    {"ln_bwd_17_priv", "layernorm_backward", "-D BLOCK=32 -D ROWS=4 -D CHUNK=2 -D WARPS=1", "M=9,N=17",
     SUITE_GPU, 0, "layernorm_backward", 0},
    {"ln_bwd_odd_priv", "layernorm_backward", "-D ROWS=2 -D CHUNK=4", "M=37,N=1001", SUITE_GPU, 0,
     "layernorm_backward", 0},
    {"ln_bwd_big_priv", "layernorm_backward", "-D BLOCK=4096 -D WARPS=8", "M=4097,N=4095", SUITE_GPU, 0,
     "layernorm_backward", 0},
    {"xent_bwd_1000_priv", "cross_entropy_backward", "-D BN=256", "M=7,N=1000", SUITE_GPU, 0, NULL, 0},
    /* attention_backward.tile, kernel by kernel (random LSE and Delta: the reference rebuilds P
     * from them as the kernel does); dQacc sums f16 products of dS, hence T's bound */
    {"attn_lse_d64", "attention_backward", "", "B=1,H=2,N=100", SUITE_ALL, 0, "attention_lse", 0},
    {"attn_lse_d128_causal", "attention_backward", "-D D=128 -D CAUSAL=1 -D BM=16 -D KSTAGES=1", "B=1,H=2,N=130", SUITE_SMALL | SUITE_GPU, 0,
     "attention_lse", 0},
    {"attn_bwd_prep", "attention_backward", "", "B=1,H=2,N=100", SUITE_ALL, 0, "attention_backward_prep", 0},
    {"attn_bwd_d64", "attention_backward", "", "B=1,H=2,N=100", SUITE_ALL, 0, "attention_backward", 1e-2},
    {"attn_bwd_d64_causal", "attention_backward", "-D CAUSAL=1", "B=2,H=1,N=100", SUITE_ALL, 0, "attention_backward", 1e-2},
    {"attn_bwd_d128", "attention_backward", "-D D=128 -D BM=16 -D KSTAGES=1", "B=1,H=1,N=17", SUITE_SMALL | SUITE_GPU, 0, "attention_backward",
     1e-2},
    {"attn_bwd_d128_causal_bf16", "attention_backward", "-D T=bf16 -D D=128 -D CAUSAL=1 -D BM=16 -D KSTAGES=1", "B=1,H=2,N=130",
     SUITE_SMALL | SUITE_GPU, 0, "attention_backward", 1e-2},
    {"attn_bwd_dq", "attention_backward", "", "B=1,H=2,N=100", SUITE_SMALL | SUITE_GPU, 0, "attention_backward_dq", 0},
    {"attn_bwd_d64_big", "attention_backward", "", "B=2,H=4,N=1000", SUITE_GPU, 0, "attention_backward", 1e-2},
    {"attn_bwd_kv_d64_causal", "attention_backward", "-D CAUSAL=1", "B=2,H=1,N=100", SUITE_ALL, 0,
     "attention_backward_kv", 0},
    {"attn_bwd_q_d64_causal", "attention_backward", "-D CAUSAL=1", "B=2,H=1,N=100", SUITE_ALL, 0,
     "attention_backward_q", 0},
    {"attn_bwd_kv_d128", "attention_backward", "-D D=128 -D BM=16 -D KSTAGES=1", "B=1,H=2,N=130",
     SUITE_SMALL | SUITE_GPU, 0, "attention_backward_kv", 0},
    {"attn_bwd_q_d128_causal", "attention_backward", "-D D=128 -D CAUSAL=1 -D BM=16 -D KSTAGES=1", "B=1,H=2,N=130",
     SUITE_SMALL | SUITE_GPU, 0, "attention_backward_q", 0},
    {"attn_bwd_split_d64_big", "attention_backward", "-D KM=128 -D KN=128 -D KWARPS=8 -D QM=128 -D QN=128 -D QWARPS=8",
     "B=2,H=4,N=1000", SUITE_GPU, 0, "attention_backward_kv", 0},
    {"attn_bwd_split_q_d64_1000", "attention_backward", "-D KM=128 -D KN=128 -D KWARPS=8 -D QM=128 -D QN=128 -D QWARPS=8",
     "B=2,H=4,N=1000", SUITE_GPU, 0, "attention_backward_q", 0},
    /* the causal split scheme at the bench's tiles (attnb_*_c1_split: KM = 128 at D = 64, 64 at D = 128) */
    {"attn_bwd_split_kv_d128_2049", "attention_backward",
     "-D D=128 -D CAUSAL=1 -D BM=16 -D KN=128 -D KM=64 -D KWARPS=8 -D QM=128 -D QN=64 -D QWARPS=8", "B=1,H=4,N=2049",
     SUITE_GPU, 0, "attention_backward_kv", 0},
    {"attn_bwd_split_d128_big", "attention_backward",
     "-D D=128 -D CAUSAL=1 -D BM=16 -D KN=128 -D KM=64 -D KWARPS=8 -D QM=128 -D QN=64 -D QWARPS=8", "B=1,H=4,N=2049",
     SUITE_GPU, 0, "attention_backward_q", 0},
    {"attn_bwd_split_kv_d64_causal_1000", "attention_backward",
     "-D CAUSAL=1 -D KM=128 -D KN=128 -D KWARPS=8 -D QM=128 -D QN=128 -D QWARPS=8", "B=2,H=4,N=1000", SUITE_GPU, 0,
     "attention_backward_kv", 0},
    {"attn_bwd_split_d64_causal_big", "attention_backward",
     "-D CAUSAL=1 -D KM=128 -D KN=128 -D KWARPS=8 -D QM=128 -D QN=128 -D QWARPS=8", "B=2,H=4,N=1000", SUITE_GPU, 0,
     "attention_backward_q", 0},
    {"attn_bwd_d64_causal_big", "attention_backward", "-D CAUSAL=1", "B=2,H=4,N=1000", SUITE_GPU, 0, "attention_backward",
     1e-2},
    /* small ragged twins of the two above, for the sanitizers */
    {"attn_bwd_split_kv_d64_causal_300", "attention_backward",
     "-D CAUSAL=1 -D KM=128 -D KN=128 -D KWARPS=8 -D QM=128 -D QN=128 -D QWARPS=8", "B=1,H=2,N=300", SUITE_GPU, 0,
     "attention_backward_kv", 0},
    {"attn_bwd_split_q_d64_causal_300", "attention_backward",
     "-D CAUSAL=1 -D KM=128 -D KN=128 -D KWARPS=8 -D QM=128 -D QN=128 -D QWARPS=8", "B=1,H=2,N=300", SUITE_GPU, 0,
     "attention_backward_q", 0},
    {"attn_bwd_d128_causal_big", "attention_backward", "-D D=128 -D CAUSAL=1 -D BM=16 -D KSTAGES=1", "B=1,H=4,N=2049", SUITE_GPU, 0,
     "attention_backward", 1e-2},
    {"xent_1000", "cross_entropy", "-D BN=256", "M=7,N=1000", SUITE_ALL, 0, NULL, 0},
    {"xent_1", "cross_entropy", "", "M=3,N=1", SUITE_SMALL | SUITE_GPU, 0, NULL, 0},
    {"xent_big", "cross_entropy", "", "M=1025,N=50257", SUITE_GPU, 0, NULL, 0},
    /* bf16 (the T type parameter): same references, inputs rounded to bf16 */
    {"softmax_bf16", "softmax", "-D T=bf16", "M=7,N=1000", SUITE_SMALL | SUITE_GPU, 0, NULL, 0},
    {"softmax_online_bf16", "softmax_online", "-D T=bf16 -D BN=256", "M=3,N=1000", SUITE_SMALL | SUITE_GPU, 0, NULL, 0},
    {"rmsnorm_bf16", "rmsnorm", "-D T=bf16", "M=5,N=1000", SUITE_SMALL | SUITE_GPU, 0, NULL, 0},
    {"layernorm_bf16", "layernorm", "-D T=bf16 -D BLOCK=32 -D ROWS=4 -D WARPS=1", "M=9,N=17", SUITE_SMALL | SUITE_GPU, 0, NULL, 0},
    {"add_rmsnorm_bf16", "add_rmsnorm", "-D T=bf16", "M=5,N=1000", SUITE_SMALL | SUITE_GPU, 0, NULL, 0},
    {"gemm_bf16", "gemm", "-D T=bf16 -D ACT=2", "M=65,N=130,K=33", SUITE_SMALL | SUITE_GPU, 0, NULL, 0},
    {"gemm_bf16_big", "gemm", "-D T=bf16", "M=1000,N=1000,K=1000", SUITE_GPU, 0, NULL, 0},
    {"attn_d64_bf16", "attention", "-D T=bf16", "B=1,H=2,N=100", SUITE_SMALL | SUITE_GPU, 0, NULL, 0},
    {"attn_d128_causal_bf16", "attention", "-D T=bf16 -D D=128 -D CAUSAL=1", "B=1,H=2,N=130", SUITE_SMALL | SUITE_GPU, 0, NULL, 0},
    {"xent_bf16", "cross_entropy", "-D T=bf16 -D BN=256", "M=7,N=1000", SUITE_SMALL | SUITE_GPU, 0, NULL, 0},
    /* Offset views (data one element past a 16-byte boundary: the scalar paths) and empty
     * problems (0 rows: a grid of 0 blocks, launched as a no-op). */
    {"vadd_off1", "vadd", "", "N=1000", SUITE_SMALL | SUITE_GPU, 1, NULL, 0},
    {"softmax_off1", "softmax", "-D ROWS=2 -D WARPS=2", "M=7,N=1000", SUITE_SMALL | SUITE_GPU, 1, NULL, 0},
    {"layernorm_off3", "layernorm", "-D BLOCK=4096 -D WARPS=8", "M=5,N=4095", SUITE_SMALL | SUITE_GPU, 3, NULL, 0},
    /* N == BLOCK: libtilert launches the full-size entry (N pinned, no edge masks); the cases
     * above (N < BLOCK) the kernel as written. Aligned and not, ragged M, both precisions. The
     * _fa cases are compiled with TILEC_FULL_ALIGNED=1 (make gpu-prep): the entry takes its
     * tensors as 16-byte aligned, so only where they start on 16 bytes (off 0); else the kernel
     * as written. */
    {"softmax_full", "softmax", "-D ROWS=2 -D WARPS=4", "M=999,N=1024", SUITE_GPU, 0, NULL, 0},
    {"softmax_full_fa", "softmax", "-D ROWS=2 -D WARPS=4", "M=999,N=1024", SUITE_GPU, 0, NULL, 0},
    {"softmax_full_off1_fa", "softmax", "-D ROWS=2 -D WARPS=4", "M=999,N=1024", SUITE_GPU, 1, NULL, 0},
    {"rmsnorm_bwd_full_fa", "rmsnorm_backward", "", "M=37,N=1024", SUITE_GPU, 0, NULL, 0},
    {"rmsnorm_bwd_full_off2_fa", "rmsnorm_backward", "", "M=37,N=1024", SUITE_GPU, 2, NULL, 0},
    {"rmsnorm_full", "rmsnorm", "-D BLOCK=4096 -D WARPS=8", "M=1001,N=4096", SUITE_GPU, 0, NULL, 0},
    {"layernorm_full", "layernorm", "-D BLOCK=4096 -D ROWS=2 -D WARPS=8", "M=1025,N=4096", SUITE_GPU, 0, NULL, 0},
    {"layernorm_full_bf16_off3", "layernorm", "-D T=bf16 -D BLOCK=1024 -D ROWS=8 -D WARPS=8", "M=77,N=1024",
     SUITE_GPU, 3, NULL, 0},
    {"add_rmsnorm_full", "add_rmsnorm", "", "M=333,N=1024", SUITE_GPU, 0, NULL, 0},
    {"rmsnorm_bwd_full", "rmsnorm_backward", "", "M=37,N=1024", SUITE_GPU, 0, NULL, 0},
    {"ln_train_full", "layernorm_backward", "", "M=21,N=1024", SUITE_GPU, 0, "layernorm_train", 0},
    {"ln_bwd_full", "layernorm_backward", "-D BLOCK=4096 -D WARPS=8", "M=1027,N=4096", SUITE_GPU, 0,
     "layernorm_backward", 0},
    /* the bench's shape (8 warps, 32-row chunks, 4 stages): the aligned entry's chunks take the
     * row's alignment (chunks_plan), and its weight row is converted once (tir_hoist_invariants) */
    {"ln_bwd_full_fa", "layernorm_backward", "-D BLOCK=4096 -D WARPS=8 -D CHUNK=32 -D STAGES=4", "M=1027,N=4096",
     SUITE_GPU, 0, "layernorm_backward", 0},
    {"ln_bwd_full_off1_fa", "layernorm_backward", "-D BLOCK=4096 -D WARPS=8 -D CHUNK=32 -D STAGES=4",
     "M=1027,N=4096", SUITE_GPU, 1, "layernorm_backward", 0},
    /* _xp4: one exponential in four on the FMA pipe (TILEC_EXP_POLY=4): attention at the bench's
     * d64 causal tile, cross-entropy's one-pass kernel at a row that starts anywhere, softmax */
    {"attn_d64_causal_big_xp4", "attention", "-D CAUSAL=1 -D BM=128 -D BN=128 -D WARPS=8 -D STAGES=3",
     "B=2,H=3,N=1000", SUITE_GPU, 0, NULL, 0},
    {"xent_bwd_row_odd_xp4", "cross_entropy_backward", "-D BLOCK=50264 -D C=4096 -D WARPS=16", "M=40,N=50257",
     SUITE_GPU, 0, "cross_entropy_backward_row", 0},
    {"softmax_online_big_xp4", "softmax_online", "", "M=257,N=20011", SUITE_GPU, 0, NULL, 0},
    /* The masks' one-difference compares (lower_index_select, on by default): the causal diagonal
     * at the bench's d64 tile; a window longer than any index (2^31 - 48): m0 - window is below
     * -2^29, so the window's compare takes its form as written at run time, since the
     * one-difference form would overflow (plain and warp-specialized entry). _nic: the compares
     * as written (TILEC_INDEX_COMPARE=0) beside their default twins: causal d128, causal
     * backward, a window with causal on the warp-specialized entry, cross-entropy's one-hot. */
    {"attn_d64_causal_big", "attention", "-D CAUSAL=1 -D BM=128 -D BN=128 -D WARPS=8 -D STAGES=3",
     "B=2,H=3,N=1000", SUITE_GPU, 0, NULL, 0},
    {"attn_d128_causal_nic", "attention", "-D D=128 -D CAUSAL=1", "B=1,H=2,N=130", SUITE_GPU, 0, NULL, 0},
    {"attn_bwd_d64_causal_big_nic", "attention_backward", "-D CAUSAL=1", "B=2,H=4,N=1000", SUITE_GPU, 0,
     "attention_backward", 1e-2},
    {"gqa_ws_d128_nic", "attention_gqa", "-D D=128 -D BM=128 -D BN=128 -D WARPS=8", "B=1,H=8,HKV=2,N=1000,window=300",
     SUITE_GPU, 0, NULL, 0},
    {"xent_bwd_row_odd_nic", "cross_entropy_backward", "-D BLOCK=50264 -D C=4096 -D WARPS=16", "M=40,N=50257",
     SUITE_GPU, 0, "cross_entropy_backward_row", 0},
    {"gqa_window_huge", "attention_gqa", "-D CAUSAL=0", "B=1,H=2,HKV=1,N=300,window=2147483600", SUITE_GPU, 0,
     NULL, 0},
    {"gqa_ws_window_huge", "attention_gqa", "-D CAUSAL=0 -D D=128 -D BM=128 -D BN=128 -D WARPS=8",
     "B=1,H=4,HKV=2,N=1000,window=2147483600", SUITE_GPU, 0, NULL, 0},
    {"add_rmsnorm_off1", "add_rmsnorm", "", "M=5,N=1000", SUITE_SMALL | SUITE_GPU, 1, NULL, 0},
    {"gemm_off1", "gemm", "", "M=65,N=72,K=40", SUITE_SMALL | SUITE_GPU, 1, NULL, 0},
    {"attn_d64_off1", "attention", "", "B=1,H=2,N=100", SUITE_SMALL | SUITE_GPU, 1, NULL, 0},
    {"softmax_empty", "softmax", "", "M=0,N=1000", SUITE_SMALL | SUITE_GPU, 0, NULL, 0},
    {"gemm_empty", "gemm", "", "M=0,N=72,K=40", SUITE_SMALL | SUITE_GPU, 0, NULL, 0},
    /* an overlapped wgmma loop (3 stages) that runs no iteration: C = act(bias) */
    {"gemm_k0_s3", "gemm", "-D BM=128 -D BN=128 -D BK=32 -D WARPS=4 -D STAGES=3", "M=70,N=200,K=0",
     SUITE_SMALL | SUITE_GPU, 0, NULL, 0},
    /* one warpgroup, 128 x 128, 3 stages: the rule takes its cp.async entry (2 blocks an SM) */
    {"gemm_w4_s3", "gemm", "-D BM=128 -D BN=128 -D BK=64 -D WARPS=4 -D STAGES=3 -D ACT=2", "M=300,N=264,K=520",
     SUITE_GPU, 0, NULL, 0},
    /* wgmma's operand A read in place as the transpose of a shared tile (MN-major): a GEMM of few
     * rows turned into C^T = B^T A^T by tir_swap.c (M on wgmma's N: 16 and 32), and a weight
     * gradient X^T dY as a user wrote it (bench/user/wgrad.tile) */
    {"gemm_m16_swap", "gemm", "-D BM=16 -D BN=64 -D BK=128 -D WARPS=4 -D STAGES=6", "M=17,N=1000,K=1000", SUITE_GPU, 0,
     NULL, 0},
    {"gemm_m32_swap_gelu", "gemm", "-D BM=32 -D BN=128 -D WARPS=8 -D STAGES=3 -D ACT=2", "M=40,N=300,K=130", SUITE_GPU,
     0, NULL, 0},
    {"gemm_m16_swap_bf16", "gemm", "-D T=bf16 -D BM=16 -D BN=64 -D BK=128 -D WARPS=4", "M=5,N=200,K=72", SUITE_GPU, 0,
     NULL, 0},
    {"wgrad_ragged", "wgrad", "", "M=1000,I=300,O=520", SUITE_GPU, 0, NULL, 0},
    {"wgrad_w4", "wgrad", "-D BI=64 -D BO=128 -D WARPS=4 -D STAGES=6", "M=333,I=130,O=260", SUITE_GPU, 0, NULL, 0},
    /* one warpgroup, compiled with TILEC_PINGPONG=1 by make gpu-prep: two consumer groups take
     * turns on tiles (ping-pong); last, so that an experimental kernel's failure cannot take the
     * context of the other cases */
    {"gemm_ws_pingpong", "gemm", "-D BM=64 -D BN=256 -D BK=64 -D WARPS=4 -D STAGES=4 -D ACT=2", "M=2000,N=2056,K=200",
     SUITE_GPU, 0, NULL, 0},
};
enum { NCASES = sizeof cases / sizeof cases[0] };

/* ------------------------------------------------------------ options */

typedef struct Options {
  unsigned suite;
  tilert_backend backend;
  const char *ptx_dir, *tilec, *arch, *only, *json;
  bool list;
  uint64_t seed;          /* inputs of every case derive from it; printed, --seed repeats a run */
  unsigned case_timeout;  /* seconds a case may run (its watchdog); 0: no limit */
} Options;

/* Whether text is a whole number of seconds (0 .. 86400). */
static bool whole_seconds(const char *text) {
  char *end;
  long v = strtol(text, &end, 10);
  return *text && !*end && v >= 0 && v <= 86400;
}

static bool parse_args(int argc, char **argv, Options *o) {
  *o = (Options){.suite = SUITE_DEMO, .ptx_dir = "build/ptx", .arch = "sm_90a", .case_timeout = 120};
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *next = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--suite=demo")) o->suite = SUITE_DEMO;
    else if (!strcmp(a, "--suite=gpu")) o->suite = SUITE_GPU;
    else if (!strcmp(a, "--suite=small")) o->suite = SUITE_SMALL;
    else if (!strcmp(a, "--backend=auto")) o->backend = TILERT_BACKEND_AUTO;
    else if (!strcmp(a, "--backend=gpu")) o->backend = TILERT_BACKEND_GPU;
    else if (!strcmp(a, "--backend=cpu")) o->backend = TILERT_BACKEND_CPU;
    else if (!strcmp(a, "--list")) o->list = true;
    else if (next && !strcmp(a, "--ptx-dir")) o->ptx_dir = argv[++i];
    else if (next && !strcmp(a, "--tilec")) o->tilec = argv[++i];
    else if (next && !strcmp(a, "--arch")) o->arch = argv[++i];
    else if (next && !strcmp(a, "--case")) o->only = argv[++i];
    else if (next && !strcmp(a, "--json")) o->json = argv[++i];
    else if (next && !strcmp(a, "--seed")) o->seed = strtoull(argv[++i], NULL, 0);
    else if (next && !strcmp(a, "--case-timeout")) {
      if (!whole_seconds(next)) {
        fprintf(stderr, "example_runner: error: --case-timeout takes whole seconds (0 .. 86400), not '%s'\n", next);
        return false;
      }
      o->case_timeout = (unsigned)atoi(argv[++i]);
    } else {
      fprintf(stderr, "example_runner: error: unknown or incomplete option '%s'\n", a);
      return false;
    }
  }
  return true;
}

/* ------------------------------------------------------------ helpers */

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static char *read_file(const char *path) {
  FILE *fp = fopen(path, "rb");
  if (!fp)
    return NULL;
  fseek(fp, 0, SEEK_END);
  long n = ftell(fp);
  fseek(fp, 0, SEEK_SET);
  char *buf = malloc((size_t)n + 1);
  if (buf && fread(buf, 1, (size_t)n, fp) != (size_t)n) {
    free(buf);
    buf = NULL;
  }
  if (buf)
    buf[n] = 0;
  fclose(fp);
  return buf;
}

/* Splits "-D A=1 -D B=2" into Defines. */
static int parse_defines(Arena *a, const char *spec, Define *out, int max) {
  int n = 0;
  char *s = arena_strdup(a, spec);
  for (char *tok = strtok(s, " "); tok && n < max; tok = strtok(NULL, " ")) {
    if (!strcmp(tok, "-D"))
      continue;
    char *eq = strchr(tok, '=');
    if (!eq)
      continue;
    *eq = 0;
    out[n++] = (Define){.name = tok, .value = eq + 1};
  }
  return n;
}

static int64_t shape_value(const char *shape, const char *name) {
  size_t len = strlen(name);
  for (const char *p = shape; p && *p;) {
    if (!strncmp(p, name, len) && p[len] == '=')
      return atoll(p + len + 1);
    p = strchr(p, ',');
    p = p ? p + 1 : NULL;
  }
  return -1;
}

/* Every dim's value for a case: pinned, from the case's shape, or (a dimension expression,
 * docs/language.md 5.3) its expression over those, evaluated by the runtime as at launch. */
static void case_dims(const TirFunc *f, const tilert_kernel_info *info, const char *shape,
                      int64_t *v) {
  for (int i = 0; i < f->ndims; i++)
    v[i] = f->dims[i].pinned ? f->dims[i].value : shape_value(shape, f->dims[i].name);
  for (int i = 0; i < f->ndims; i++)
    if (f->dims[i].derive && tilert_eval_expr(info, f->dims[i].derive, v, &v[i]).code != TILERT_OK)
      v[i] = -1;
}

static double param_value(const TirFunc *f, const char *name, double dflt) {
  for (int i = 0; i < f->nparams; i++)
    if (!strcmp(f->params[i].name, name))
      return f->params[i].value;
  return dflt;
}

/* xorshift: fresh inputs per case, uniform in [-1, 1). */
static double rnd(uint64_t *s) {
  *s ^= *s << 13, *s ^= *s >> 7, *s ^= *s << 17;
  return (double)(*s >> 11) / 9007199254740992.0 * 2.0 - 1.0;
}

/* Host copy of one tensor argument: bytes as the kernel sees them, and doubles. */
typedef struct HostTensor {
  const TirArg *arg;
  int64_t shape[TILE_MAX_RANK], n;
  void *bytes;
  double *vals;
  void *dev;               /* the allocation */
  void *data;              /* the tensor: dev + the case's offset */
} HostTensor;

/* ------------------------------------------------------------ one case */

typedef struct Result {
  const Case *c;
  const char *backend;
  char params[96];        /* every compile-time parameter, as specialized */
  int64_t grid[3];
  int threads, smem;      /* from the PTX's metadata (-1: no PTX) */
  double compile_ms, run_ms, rel_err, max_err;
  bool ok;
  char note[256];
} Result;

static HostTensor *find_tensor(HostTensor *t, int n, const char *name) {
  for (int i = 0; i < n; i++)
    if (t[i].arg && !strcmp(t[i].arg->name, name))
      return &t[i];
  return NULL;
}

/* Calls the float64 reference; writes expected outputs into `expect` (by tensor index). */
static double scalar_named(const TirFunc *f, const double *scalars, const char *name) {
  for (int i = 0; i < f->nargs; i++)
    if (f->args[i].kind == ARG_SCALAR && !strcmp(f->args[i].name, name))
      return scalars[i];
  return NAN;
}

/* The four kernels of attention_backward.tile, each against its own reference. */
static bool run_attention_backward_ref(const Case *c, const TirFunc *f, HostTensor *t, int nt, double **expect,
                                       const double *scalars) {
#define T(name) find_tensor(t, nt, name)
#define E(name) expect[T(name) - t]
  int64_t B = shape_value(c->shape, "B"), H = shape_value(c->shape, "H"), N = shape_value(c->shape, "N");
  int64_t D = (int64_t)param_value(f, "D", 64), n = B * H * N * D;
  int causal = (int)param_value(f, "CAUSAL", 0);
  const char *k = c->kernel ? c->kernel : "attention_lse";
  if (!strcmp(k, "attention_lse"))
    ref_attention_lse(B, H, N, D, T("Q")->vals, T("K")->vals, T("V")->vals, scalar_named(f, scalars, "scale"), causal,
                      E("O"), E("LSE"));
  else if (!strcmp(k, "attention_backward_prep")) {
    ref_attention_backward_prep(B, H, N, D, T("O")->vals, T("dO")->vals, E("Delta"));
    memset(E("dQacc"), 0, sizeof(double) * (size_t)n);
  } else if (!strcmp(k, "attention_backward"))
    ref_attention_backward(B, H, N, D, T("Q")->vals, T("K")->vals, T("V")->vals, T("dO")->vals, T("LSE")->vals,
                           T("Delta")->vals, scalar_named(f, scalars, "scale"), causal, E("dQacc"), E("dK"), E("dV"));
  else if (!strcmp(k, "attention_backward_dq"))
    memcpy(E("dQ"), T("dQacc")->vals, sizeof(double) * (size_t)n);
  else if (!strcmp(k, "attention_backward_kv") || !strcmp(k, "attention_backward_q")) {
    /* the second scheme: the same gradients, each kernel writing its part */
    bool kv = !strcmp(k, "attention_backward_kv");
    double *dq = malloc(sizeof(double) * (size_t)n), *dk = malloc(sizeof(double) * (size_t)n);
    double *dv = malloc(sizeof(double) * (size_t)n);
    ref_attention_backward(B, H, N, D, T("Q")->vals, T("K")->vals, T("V")->vals, T("dO")->vals, T("LSE")->vals,
                           T("Delta")->vals, scalar_named(f, scalars, "scale"), causal, dq, dk, dv);
    if (kv) {
      memcpy(E("dK"), dk, sizeof(double) * (size_t)n);
      memcpy(E("dV"), dv, sizeof(double) * (size_t)n);
    } else {
      memcpy(E("dQ"), dq, sizeof(double) * (size_t)n);
    }
    free(dq), free(dk), free(dv);
  }
  else
    return false;
  return true;
#undef T
#undef E
}

static bool run_reference(const Case *c, const TirFunc *f, HostTensor *t, int nt,
                          double **expect, const double *scalars) {
#define T(name) find_tensor(t, nt, name)
#define E(name) expect[T(name) - t]
  const char *ex = c->example;
  int64_t M = shape_value(c->shape, "M"), N = shape_value(c->shape, "N");
  if (!strcmp(ex, "vadd"))
    ref_vadd(N, T("X")->vals, T("Y")->vals, E("Z"));
  else if (!strcmp(ex, "softmax") || !strcmp(ex, "softmax_online"))
    ref_softmax(M, N, T("X")->vals, E("Y"));
  else if (!strcmp(ex, "rmsnorm"))
    ref_rmsnorm(M, N, T("X")->vals, T("W")->vals, scalar_named(f, scalars, "eps"), E("Y"));
  else if (!strcmp(ex, "rmsnorm_backward"))
    ref_rmsnorm_backward(M, N, T("X")->vals, T("W")->vals, T("dY")->vals, scalar_named(f, scalars, "eps"),
                         E("dX"), E("dW"));
  else if (!strcmp(ex, "layernorm"))
    ref_layernorm(M, N, T("X")->vals, T("W")->vals, T("Bias")->vals, scalar_named(f, scalars, "eps"), E("Y"));
  else if (!strcmp(ex, "add_rmsnorm"))
    ref_add_rmsnorm(M, N, T("X")->vals, T("R")->vals, T("W")->vals, scalar_named(f, scalars, "eps"), E("R"), E("Y"));
  else if (!strcmp(ex, "gemm"))
    ref_gemm(M, N, shape_value(c->shape, "K"), T("A")->vals, T("B")->vals, T("bias")->vals,
             (int)param_value(f, "ACT", 0), E("C"));
  else if (!strcmp(ex, "wgrad"))
    ref_gemm_tn(M, shape_value(c->shape, "I"), shape_value(c->shape, "O"), T("X")->vals, T("dY")->vals, E("dW"));
  else if (!strcmp(ex, "cross_entropy"))
    ref_cross_entropy(M, N, T("X")->vals, T("label")->vals, E("loss"));
  else if (!strcmp(ex, "layernorm_backward") && c->kernel && !strcmp(c->kernel, "layernorm_train"))
    ref_layernorm_train(M, N, T("X")->vals, T("W")->vals, T("Bias")->vals, scalar_named(f, scalars, "eps"), E("Y"),
                        E("Mean"), E("Rstd"));
  else if (!strcmp(ex, "layernorm_backward"))
    ref_layernorm_backward(M, N, T("X")->vals, T("W")->vals, T("Mean")->vals, T("Rstd")->vals, T("dY")->vals,
                           E("dX"), E("dW"), E("dB"));
  else if (!strcmp(ex, "cross_entropy_backward"))
    ref_cross_entropy_backward(M, N, T("X")->vals, T("label")->vals, T("dloss")->vals, E("loss"), E("dX"));
  else if (!strcmp(ex, "attention_backward"))
    return run_attention_backward_ref(c, f, t, nt, expect, scalars);
  else if (!strcmp(ex, "attention_gqa"))
    ref_attention_gqa(shape_value(c->shape, "B"), shape_value(c->shape, "H"), shape_value(c->shape, "HKV"), N,
                      (int64_t)param_value(f, "D", 64), T("Q")->vals, T("K")->vals, T("V")->vals,
                      scalar_named(f, scalars, "scale"), (int)param_value(f, "CAUSAL", 0),
                      (int64_t)scalar_named(f, scalars, "window"), E("O"));
  else if (!strcmp(ex, "attention"))
    ref_attention(shape_value(c->shape, "B"), shape_value(c->shape, "H"), N,
                  (int64_t)param_value(f, "D", 64), T("Q")->vals, T("K")->vals, T("V")->vals,
                  scalar_named(f, scalars, "scale"), (int)param_value(f, "CAUSAL", 0), E("O"));
  else
    return false;
  return true;
#undef T
#undef E
}

/* The tilec flags of a case: its defines, and `--kernel K` for a case of one kernel of a
 * multi-kernel file (smaller PTX), except the *_big ones, whose whole module
 * tests/gpu/backward_torch.py launches kernel after kernel. */
static const char *case_flags(const Case *c, char *buf, size_t size) {
  size_t n = strlen(c->id);
  bool whole = n >= 4 && !strcmp(c->id + n - 4, "_big");
  snprintf(buf, size, "%s%s%s", c->defines, c->kernel && !whole ? " --kernel " : "", c->kernel && !whole ? c->kernel : "");
  return buf;
}

static bool compile_ptx(const Options *o, const Case *c, const char *ptx_path, Result *r) {
  char cmd[1024], flags[256], file[256];
  snprintf(cmd, sizeof cmd, "%s %s %s --arch=%s --emit=ptx -o %s", o->tilec, case_file(c, file, sizeof file),
           case_flags(c, flags, sizeof flags), o->arch, ptx_path);
  double t0 = now_ms();
  int rc = system(cmd);
  r->compile_ms = now_ms() - t0;
  if (rc != 0) {
    snprintf(r->note, sizeof r->note, "tilec failed (exit %d)", WIFEXITED(rc) ? WEXITSTATUS(rc) : -1);
    return false;
  }
  return true;
}

static void fail(Result *r, const char *what, tilert_status st) {
  snprintf(r->note, sizeof r->note, "%s: %s: %.180s", what, tilert_code_name(st.code), st.message);
}

/* Lowers the example in-process (the interpreter and the argument list need the IR). */
static TirFunc *front_end(Arena *a, const Case *c, Result *r) {
  char buf[256];
  const char *path = case_file(c, buf, sizeof buf);
  static SourceFile src;
  src.name = arena_strdup(a, path);
  char *text = read_file(path);
  if (!text) {
    snprintf(r->note, sizeof r->note, "cannot read %.200s", path);
    return NULL;
  }
  src.text = arena_strdup(a, text);
  src.len = strlen(text);
  free(text);
  Diag d;
  diag_init(&d, &src, stderr);
  Define defs[8];
  int ndefs = parse_defines(a, c->defines, defs, 8);
  AstProgram *p = parse_program(a, &src, &d);
  if (!p || !sema_check(a, p, defs, ndefs, ARCH_SM90A, &d)) {
    snprintf(r->note, sizeof r->note, "front end rejected the example");
    return NULL;
  }
  AstKernel *k = p->kernels;
  while (c->kernel && k && strcmp(k->name, c->kernel) != 0)
    k = k->next;
  if (!k) {
    snprintf(r->note, sizeof r->note, "%.100s has no kernel '%.100s'", path, c->kernel);
    return NULL;
  }
  TirFunc *f = lower_tir(a, k, &d);
  if (!f || !tir_verify(f, &d, "lower_tir") || !tir_fold_constants(f, &d) ||
      !tir_eliminate_dead(f, &d) || !tir_verify(f, &d, "passes")) {
    snprintf(r->note, sizeof r->note, "lowering to TIR failed");
    return NULL;
  }
  return f;
}

static tilert_status make_kernel(const Options *o, tilert_device *dev, Arena *a, const TirFunc *f,
                                 const Case *c, Result *r, tilert_module **mod, tilert_kernel **k) {
  char ptx_path[512];
  snprintf(ptx_path, sizeof ptx_path, "%s/%s.ptx", o->ptx_dir, c->id);
  /* compiled on both backends: the demo shows every example going through tilec */
  if (o->tilec && !compile_ptx(o, c, ptx_path, r))
    return (tilert_status){.code = TILERT_ERROR_NOT_FOUND, .message = "no PTX"};
  char *ptx = read_file(ptx_path);
  tilert_kernel_info info;
  if (ptx && tilert_parse_kernel_info(ptx, &info).code == TILERT_OK)
    r->threads = info.threads, r->smem = info.smem_bytes;
  if (tilert_device_backend(dev) == TILERT_BACKEND_CPU) {
    free(ptx);
    return exec_cpu_kernel(dev, a, f, k);
  }
  if (!ptx) {
    tilert_status st = {.code = TILERT_ERROR_NOT_FOUND};
    snprintf(st.message, sizeof st.message, "cannot read %.400s", ptx_path);
    return st;
  }
  tilert_status st = tilert_module_load_ptx(dev, ptx, mod);
  free(ptx);
  if (st.code == TILERT_OK)
    st = tilert_module_get_kernel(*mod, f->name, k);
  return st;
}

static void run_case(const Options *o, tilert_device *dev, const Case *c, Result *r) {
  memset(r, 0, sizeof *r);
  r->c = c;
  r->backend = tilert_device_backend(dev) == TILERT_BACKEND_GPU ? "gpu" : "cpu";
  r->threads = r->smem = -1;
  Arena *a = arena_new();
  TirFunc *f = front_end(a, c, r);
  for (int i = 0; f && i < f->nparams; i++) {
    size_t used = strlen(r->params);
    snprintf(r->params + used, sizeof r->params - used, "%s%s=%g", used ? " " : "",
             f->params[i].name, f->params[i].value);
  }
  tilert_module *mod = NULL;
  tilert_kernel *k = NULL;
  HostTensor t[TILERT_MAX_ARGS] = {0};
  double *expect[TILERT_MAX_ARGS] = {0}, scalars[TILERT_MAX_ARGS] = {0};
  tilert_arg args[TILERT_MAX_ARGS];
  if (!f)
    goto done;
  tilert_status st = make_kernel(o, dev, a, f, c, r, &mod, &k);
  if (st.code != TILERT_OK) {
    if (!r->note[0])
      fail(r, "load", st);
    goto done;
  }
  uint64_t seed = 0x2545F4914F6CDD1Dull ^ o->seed;
  for (const char *p = c->id; *p; p++) /* per-case stream, independent of the table order */
    seed = (seed ^ (unsigned char)*p) * 0x100000001B3ull;
  int64_t dimv[TILERT_MAX_DIMS];
  case_dims(f, tilert_kernel_get_info(k), c->shape, dimv);
  for (int i = 0; i < f->nargs; i++) {
    const TirArg *arg = &f->args[i];
    if (arg->kind == ARG_SCALAR) {
      /* eps for the norms, 1/sqrt(D) for attention; a value in the case's shape string wins
       * (attention_gqa's window) */
      int64_t given = shape_value(c->shape, arg->name);
      scalars[i] = given >= 0 ? (double)given : !strcmp(arg->name, "scale") ? 1.0 / sqrt(param_value(f, "D", 64)) : 1e-5;
      args[i] = tilert_arg_scalar(scalars[i]);
      continue;
    }
    HostTensor *h = &t[i];
    h->arg = arg;
    h->n = 1;
    for (int d = 0; d < arg->rank; d++) {
      h->shape[d] = dimv[arg->dims[d]];
      h->n *= h->shape[d];
    }
    size_t bytes = (size_t)h->n * (size_t)elem_bytes(arg->elem);
    size_t off = (size_t)c->offset * (size_t)elem_bytes(arg->elem);
    h->bytes = malloc(bytes + 1);
    h->vals = malloc(sizeof(double) * (size_t)(h->n + 1));
    expect[i] = malloc(sizeof(double) * (size_t)(h->n + 1));
    /* inputs random; outputs poisoned with NaN (an in/out tensor keeps its input values; one
     * updated atomically starts at its updates' identity: tir_atomic_start; one declared `= 0`
     * stays NaN: the launch must zero it) */
    bool written_only = arg->is_out && strcmp(c->example, "add_rmsnorm") != 0;
    double poison = arg->zero_init ? NAN : tir_atomic_start(f, i);
    for (int64_t e = 0; e < h->n; e++) {
      /* i32 inputs are indices (cross_entropy's labels): mostly in range, a few negative */
      double v = arg->elem == TY_I32 ? floor((rnd(&seed) + 1.0) * 501.0) - 2.0 : rnd(&seed);
      elem_store(h->bytes, e, arg->elem, written_only ? poison : v);
      h->vals[e] = elem_load(h->bytes, e, arg->elem);
    }
    if ((st = tilert_malloc(dev, bytes + off + 1, &h->dev)).code != TILERT_OK) {
      fail(r, "upload", st);
      goto done;
    }
    h->data = (char *)h->dev + off;
    if ((st = tilert_memcpy_htod(dev, h->data, h->bytes, bytes)).code != TILERT_OK) {
      fail(r, "upload", st);
      goto done;
    }
    args[i] = tilert_arg_tensor(h->data, (tilert_dtype)arg->elem, arg->rank, h->shape);
  }
  if (!run_reference(c, f, t, f->nargs, expect, scalars)) {
    snprintf(r->note, sizeof r->note, "no reference for %s", c->example);
    goto done;
  }
  int64_t dims[TILERT_MAX_DIMS];
  tilert_bind(tilert_kernel_get_info(k), args, f->nargs, dims, r->grid);
  double t0 = now_ms();
  st = tilert_launch(k, args, f->nargs, NULL);
  if (st.code == TILERT_OK)
    st = tilert_synchronize(dev);
  r->run_ms = now_ms() - t0;
  if (st.code != TILERT_OK) {
    fail(r, "launch", st);
    goto done;
  }
  int64_t nan = 0;
  bool close = true;
  for (int i = 0; i < f->nargs; i++) {
    HostTensor *h = &t[i];
    if (!h->arg || !h->arg->is_out)
      continue;
    double err2 = 0, ref2 = 0;
    size_t bytes = (size_t)h->n * (size_t)elem_bytes(h->arg->elem);
    if ((st = tilert_memcpy_dtoh(dev, h->bytes, h->data, bytes)).code != TILERT_OK) {
      fail(r, "download", st);
      goto done;
    }
    for (int64_t e = 0; e < h->n; e++) {
      double got = elem_load(h->bytes, e, h->arg->elem), want = expect[i][e];
      if (isnan(got) || isinf(got)) {
        nan++;
        continue;
      }
      err2 += (got - want) * (got - want);
      ref2 += want * want;
      r->max_err = fmax(r->max_err, fabs(got - want));
    }
    /* Per output: f16/bf16 ones within a few ulps of f16 (2^-11) relative, f32 ones 1e-5
     * (docs/tir.md). The case's error is the largest. */
    double f32_tol = c->f32_tol > 0 ? c->f32_tol : 1e-5;
    double rel = ref2 > 0 ? sqrt(err2 / ref2) : sqrt(err2), tol = h->arg->elem == TY_F32 ? f32_tol : 1e-2;
    r->rel_err = fmax(r->rel_err, rel);
    if (rel >= tol && close) {
      close = false;
      snprintf(r->note, sizeof r->note, "%s: relative error %.3g over %.0e", h->arg->name, rel, tol);
    }
  }
  r->ok = nan == 0 && close;
  if (nan)
    snprintf(r->note, sizeof r->note, "%lld outputs NaN/inf or never written", (long long)nan);
done:
  for (int i = 0; i < TILERT_MAX_ARGS; i++) {
    if (t[i].dev)
      tilert_free(dev, t[i].dev);
    free(t[i].bytes), free(t[i].vals), free(expect[i]);
  }
  if (mod)
    tilert_module_unload(mod);
  else if (k)
    tilert_kernel_destroy_cpu(k);
  arena_free(a);
}

/* ------------------------------------------------------------ report */

static void print_table(const Result *res, int n, const char *device) {
  printf("\n%s\n", device);
  printf("%-20s %-40s %-22s %-20s %7s %-4s %8s %8s %9s  %s\n", "example/case", "parameters",
         "shape", "launch (grid x thr)", "smem B", "on", "tilec ms", "run ms", "rel err",
         "status");
  for (int i = 0; i < n; i++) {
    const Result *r = &res[i];
    char launch[48], smem[16];
    snprintf(launch, sizeof launch, "(%lld,%lld,%lld) x %d", (long long)r->grid[0],
             (long long)r->grid[1], (long long)r->grid[2], r->threads);
    snprintf(smem, sizeof smem, r->smem < 0 ? "-" : "%d", r->smem);
    printf("%-20s %-40s %-22s %-20s %7s %-4s %8.1f %8.2f %9.2e  %s%s%s\n", r->c->id, r->params,
           r->c->shape, launch, smem, r->backend, r->compile_ms, r->run_ms, r->rel_err,
           r->ok ? "ok" : "FAIL", r->note[0] ? ": " : "", r->note);
  }
}

static void write_json(const char *path, const Result *res, int n, const char *device) {
  FILE *fp = fopen(path, "w");
  if (!fp) {
    fprintf(stderr, "example_runner: cannot write %s\n", path);
    return;
  }
  time_t now = time(NULL);
  char date[32];
  strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
  fprintf(fp, "{\"date\": \"%s\", \"device\": \"%s\", \"cases\": [\n", date, device);
  for (int i = 0; i < n; i++) {
    const Result *r = &res[i];
    fprintf(fp,
            "  {\"case\": \"%s\", \"example\": \"%s\", \"defines\": \"%s\", \"shape\": \"%s\", "
            "\"backend\": \"%s\", \"run_ms\": %.4f, \"rel_err\": %.4e, \"max_err\": %.4e, "
            "\"verified\": %s, \"note\": \"",
            r->c->id, r->c->example, r->c->defines, r->c->shape, r->backend, r->run_ms,
            r->rel_err, r->max_err, r->ok ? "true" : "false");
    for (const char *p = r->note; *p; p++)
      if (*p == '"' || *p == '\\')
        fprintf(fp, "\\%c", *p);
      else if ((unsigned char)*p >= 32)
        fputc(*p, fp);
    fprintf(fp, "\"}%s\n", i + 1 < n ? "," : "");
  }
  fprintf(fp, "]}\n");
  fclose(fp);
}

/* The case the watchdog names when it fires (a line written by the signal handler). */
static char watchdog_line[160];

static void watchdog_fired(int sig) {
  (void)sig;
  ssize_t w = write(STDERR_FILENO, watchdog_line, strlen(watchdog_line));
  (void)w;
  _exit(124);
}

/* Arms the watchdog for case c (seconds; 0 disarms). */
static void watchdog_arm(const Case *c, unsigned seconds) {
  snprintf(watchdog_line, sizeof watchdog_line,
           "  %-24s TIMED OUT after %u s (a hang: e.g. an mbarrier wait that never completes)\n", c->id, seconds);
  signal(SIGALRM, watchdog_fired);
  alarm(seconds);
}

int main(int argc, char **argv) {
  Options o;
  if (!parse_args(argc, argv, &o))
    return 2;
  if (o.list) {
    char flags[256], file[256];
    for (int i = 0; i < NCASES; i++)
      if (cases[i].suites & o.suite)
        printf("%s %s %s\n", cases[i].id, case_file(&cases[i], file, sizeof file),
               case_flags(&cases[i], flags, sizeof flags));
    return 0;
  }
  if (!o.seed)
    o.seed = (uint64_t)time(NULL);
  printf("inputs: fresh random values, seed %llu (repeat with --seed %llu)\n",
         (unsigned long long)o.seed, (unsigned long long)o.seed);
  tilert_device *dev = NULL;
  tilert_status st = tilert_device_open(o.backend, 0, &dev);
  if (st.code != TILERT_OK) {
    fprintf(stderr, "example_runner: error: %s: %s\n", tilert_code_name(st.code), st.message);
    return 1;
  }
  static Result res[NCASES];
  int n = 0, failed = 0;
  for (int i = 0; i < NCASES; i++) {
    const Case *c = &cases[i];
    if (o.only ? strcmp(o.only, c->id) != 0 : !(c->suites & o.suite))
      continue;
    watchdog_arm(c, o.case_timeout);
    run_case(&o, dev, c, &res[n]);
    alarm(0);
    failed += !res[n].ok;
    fprintf(stderr, "  %-24s %s\n", c->id, res[n].ok ? "ok" : "FAIL");
    n++;
  }
  print_table(res, n, tilert_device_name(dev));
  if (o.json)
    write_json(o.json, res, n, tilert_device_name(dev));
  printf("\n%d of %d cases passed\n", n - failed, n);
  tilert_device_close(dev);
  return failed || n == 0 ? 1 : 0;
}
