/* ws_test.c — the generated launcher's warp-specialized entry (tests/check_aot.sh), on the fake
 * driver (TILERT_LIBCUDA=fake_libcuda.so, FAKE_LIBCUDA_JIT=ok): dsl/examples/gemm.tile for sm_90a
 * as gw.{h,c}. The fake device is sm_90 with 132 SMs and one block of either entry per SM, so
 * libtilert's rules pick `gemm__ws`: found at load beside `gemm`, launched with a tensor map per
 * TMA operand (A: box 64 x 32, swizzle 64; B: 32 x 64, 128), the producer warpgroup's threads and
 * the persistent 1-D grid (a block per tile up to 132 tiles, 132 walkers beyond; with
 * TILERT_PERSISTENT_WAVES=8 a block per tile past 8 waves); a view TMA cannot take (a base off
 * 16 bytes) and TILERT_WS=0 take `gemm`. Causal attention (dsl/examples/attention.tile, CAUSAL=1,
 * 128 x 128 tiles, as aw.{h,c}) walks in chunks of its rows: folded pairs where a row has an even
 * number of tiles, else whole rows with 3+ rows per walker, else a block per tile;
 * TILERT_WALK_CHUNK forces a chunk.
 * Clusters go through cuLaunchKernelEx: the row split over a cluster of 4
 * (bench/ab/cross_entropy_backward_split.tile, as xc.{h,c}) on its own grid, and a GEMM whose
 * entry walks pairs of tiles along y (TILEC_CLUSTER=1, 128 x 128 tiles, as gc.{h,c}): 66
 * clusters resident, the grid halved along y. A grid x that is not a multiple of the cluster
 * (pc.{h,c}: `grid (cdiv(N, 256)) cluster (2)`) is refused before any launch.
 * Exit status 0 = all checks passed. */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include "aw.h"
#include "gc.h"
#include "gw.h"
#include "pc.h"
#include "xc.h"

#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

static const char *(*calls)(void);

typedef struct Problem {
  tilec_tensor a, b, bias, c;
} Problem;

/* A GEMM of M x K by K x N at fake, 256-byte aligned device addresses (nobody reads them). */
static Problem problem(int64_t m, int64_t n, int64_t k) {
  int64_t mk[2] = {m, k}, kn[2] = {k, n}, mn[2] = {m, n};
  Problem p;
  p.a = tilec_tensor_contiguous(0x10000000ULL, TILEC_F16, 2, mk);
  p.b = tilec_tensor_contiguous(0x20000000ULL, TILEC_F16, 2, kn);
  p.bias = tilec_tensor_contiguous(0x30000000ULL, TILEC_F16, 1, &n);
  p.c = tilec_tensor_contiguous(0x40000000ULL, TILEC_F16, 2, mn);
  return p;
}

#define LAUNCH(p) gw_launch(NULL, &(p).a, &(p).b, &(p).bias, &(p).c)

/* The fake driver's log since the last call of this. */
static const char *since(size_t *mark) {
  const char *all = calls();
  const char *s = all + *mark;
  *mark = strlen(all);
  return s;
}

/* Launches p (which must succeed) and returns what the driver was asked since *mark. */
static const char *launched(Problem p, size_t *mark) {
  EXPECT(LAUNCH(p), TILEC_OK, gw_error, "");
  return since(mark);
}

/* Causal attention of B x H heads of N x 128 at fake device addresses, launched (which must
 * succeed); returns what the driver was asked since *mark, with the walk's four grid
 * parameters (after Q, K, V, O: 16 values, scale, B, H, N). */
static const char *attention(int64_t b, int64_t h, int64_t n, size_t *mark) {
  int64_t shape[4] = {b, h, n, 128};
  tilec_tensor t[4];
  for (int i = 0; i < 4; i++)
    t[i] = tilec_tensor_contiguous(0x10000000ULL * (uint64_t)(i + 1), TILEC_F16, 4, shape);
  setenv("FAKE_LIBCUDA_PARAMS", "20", 1);
  EXPECT(aw_launch(NULL, &t[0], &t[1], &t[2], &t[3], 0.125f), TILEC_OK, aw_error, "");
  unsetenv("FAKE_LIBCUDA_PARAMS");
  return since(mark);
}

int main(void) {
  void *lib = dlopen(getenv("TILERT_LIBCUDA"), RTLD_NOW);
  void *sym = lib ? dlsym(lib, "fake_libcuda_log") : NULL;
  if (!sym) {
    printf("ws_test: TILERT_LIBCUDA is not fake_libcuda.so\n");
    return 1;
  }
  memcpy(&calls, &sym, sizeof calls);
  size_t mark = 0;
  EXPECT(gw_load(), TILEC_OK, gw_error, "");
  const char *s = since(&mark);
  CHECK(!strcmp(s, "load; get gemm; get gemm__ws; "), "load: %s", s);

  /* 512 x 512 output: 8 x 8 tiles of 64 x 64, a block for each; tensor maps for A and B (the
   * ring) and for C (the epilogue's TMA store) */
  Problem p = problem(512, 512, 256);
  s = launched(p, &mark);
  CHECK(!strcmp(s, "tmap 2 32x64 2; tmap 2 64x32 3; tmap 2 64x64 3; launch gemm__ws 64x1x1 256; "), "small: %s", s);

  /* 2048 x 2048: 1024 tiles: walked by 132 blocks, which get the logical
   * grid (32 x 32 x 1) and the raster group (8) after A, B, bias, C (7 values) and M, K, N, then
   * the tensor maps, 128-byte aligned */
  p = problem(2048, 2048, 64);
  setenv("FAKE_LIBCUDA_PARAMS", "10", 1);
  s = launched(p, &mark);
  unsetenv("FAKE_LIBCUDA_PARAMS");
  CHECK(strstr(s, "params 32 32 1 8 map0; launch gemm__ws 132x1x1 256; "), "walked: %s", s);

  /* 8192 x 8192: 16384 tiles, 124 waves: walked too; with TILERT_PERSISTENT_WAVES=8 (read at
   * each launch) a block per tile */
  p = problem(8192, 8192, 64);
  s = launched(p, &mark);
  CHECK(strstr(s, "launch gemm__ws 132x1x1 256; "), "many waves: %s", s);
  setenv("TILERT_PERSISTENT_WAVES", "8", 1);
  s = launched(p, &mark);
  unsetenv("TILERT_PERSISTENT_WAVES");
  CHECK(strstr(s, "launch gemm__ws 16384x1x1 256; "), "many waves, at most 8 walked: %s", s);

  /* A's base 2 bytes off 16: no tensor map, the cp.async entry on the kernel's own grid */
  p = problem(512, 512, 256);
  p.a.data += 2;
  s = launched(p, &mark);
  CHECK(!strcmp(s, "launch gemm 8x8x1 128; "), "unaligned: %s", s);

  /* B's rows 120 bytes apart (N = 60), not a multiple of 16: A's map made, B's refused */
  p = problem(64, 60, 64);
  s = launched(p, &mark);
  CHECK(strstr(s, "launch gemm 1x1x1 128; ") && !strstr(s, "__ws"), "odd stride: %s", s);

  /* Causal attention, 132 walkers. 64 rows of 8 tiles: 256 pairs, 2 per walker (chunk 2). 512
   * rows of 3: no pairs, whole rows (chunk 3). 64 rows of 7: neither, a block per tile (chunk 1,
   * the decode's plain reversed x). TILERT_WALK_CHUNK forces a chunk, 0 a block per tile. */
  EXPECT(aw_load(), TILEC_OK, aw_error, "");
  since(&mark);
  s = attention(4, 128, 384, &mark);
  CHECK(strstr(s, "params 3 512 1 3 map0; launch attention__ws 132x1x1 384; "), "rows: %s", s);
  s = attention(1, 64, 1024, &mark);
  CHECK(strstr(s, "params 8 64 1 2 map0; launch attention__ws 132x1x1 384; "), "pairs: %s", s);
  s = attention(1, 64, 896, &mark);
  CHECK(strstr(s, "params 7 64 1 1 map0; launch attention__ws 448x1x1 384; "), "odd rows: %s", s);
  setenv("TILERT_WALK_CHUNK", "3", 1);
  s = attention(1, 64, 1024, &mark);
  CHECK(strstr(s, "params 8 64 1 3 map0; launch attention__ws 132x1x1 384; "), "chunk 3: %s", s);
  setenv("TILERT_WALK_CHUNK", "0", 1);
  s = attention(1, 64, 1024, &mark);
  unsetenv("TILERT_WALK_CHUNK");
  CHECK(strstr(s, "params 8 64 1 1 map0; launch attention__ws 512x1x1 384; "), "no walk: %s", s);
  aw_unload();
  since(&mark);

  /* Clusters. The row split: grid (4, M) in clusters of 4, M = 5 rows of 1000 columns. */
  int64_t xs[2] = {5, 1000}, m1 = 5;
  tilec_tensor x = tilec_tensor_contiguous(0x10000000ULL, TILEC_F16, 2, xs);
  tilec_tensor label = tilec_tensor_contiguous(0x20000000ULL, TILEC_I32, 1, &m1);
  tilec_tensor dloss = tilec_tensor_contiguous(0x30000000ULL, TILEC_F32, 1, &m1);
  tilec_tensor loss = tilec_tensor_contiguous(0x40000000ULL, TILEC_F32, 1, &m1);
  tilec_tensor dx = tilec_tensor_contiguous(0x50000000ULL, TILEC_F16, 2, xs);
  EXPECT(xc_launch(NULL, &x, &label, &dloss, &loss, &dx), TILEC_OK, xc_error, "");
  s = since(&mark);
  CHECK(strstr(s, "launch cross_entropy_backward 4x5x1 256 cluster 4; "), "split: %s", s);
  xc_unload();
  int64_t n256 = 256, n512 = 512;
  tilec_tensor px = tilec_tensor_contiguous(0x10000000ULL, TILEC_F32, 1, &n256);
  tilec_tensor py = tilec_tensor_contiguous(0x20000000ULL, TILEC_F32, 1, &n256);
  EXPECT(pc_check(&px, &py), TILEC_ERROR_SHAPE, pc_error, "pair_add: grid x is 1, not a multiple of its cluster of 2 blocks");
  EXPECT(pc_launch(NULL, &px, &py), TILEC_ERROR_SHAPE, pc_error, "grid x is 1, not a multiple");
  px.shape[0] = py.shape[0] = n512;
  EXPECT(pc_launch(NULL, &px, &py), TILEC_OK, pc_error, "");
  s = since(&mark);
  CHECK(strstr(s, "launch pair_add 2x1x1 128 cluster 2; "), "pair_add: %s", s);
  pc_unload();
  since(&mark);
  /* The GEMM's pairs along y: 4 x 4 tiles are 8 pairs, a cluster each; 16 x 16 tiles are 128
   * pairs, walked by the 66 resident clusters; 4 x 5 tiles, 3 pairs a column (the last half
   * empty). TILERT_WS=0: the cp.async entry, no cluster. (The warp-specialized entry's ring is
   * 5 stages deep, the cp.async entry's the source's 4: deeper_ring.) */
  EXPECT(gc_load(), TILEC_OK, gc_error, "");
  s = since(&mark);
  CHECK(!strcmp(s, "load; get gemm; attr gemm 8 131072; get gemm__ws; attr gemm__ws 8 163920; "),
        "cluster load: %s", s);
  p = problem(512, 512, 256);
  EXPECT(gc_launch(NULL, &p.a, &p.b, &p.bias, &p.c), TILEC_OK, gc_error, "");
  s = since(&mark);
  CHECK(strstr(s, "launch gemm__ws 16x1x1 384 cluster 2; "), "pairs: %s", s);
  p = problem(2048, 2048, 256);
  EXPECT(gc_launch(NULL, &p.a, &p.b, &p.bias, &p.c), TILEC_OK, gc_error, "");
  s = since(&mark);
  CHECK(strstr(s, "launch gemm__ws 132x1x1 384 cluster 2; "), "pairs walked: %s", s);
  p = problem(640, 512, 256);
  EXPECT(gc_launch(NULL, &p.a, &p.b, &p.bias, &p.c), TILEC_OK, gc_error, "");
  s = since(&mark);
  CHECK(strstr(s, "launch gemm__ws 24x1x1 384 cluster 2; "), "odd pairs: %s", s);
  gc_unload();
  setenv("TILERT_WS", "0", 1);
  EXPECT(gc_load(), TILEC_OK, gc_error, "");
  p = problem(512, 512, 256);
  EXPECT(gc_launch(NULL, &p.a, &p.b, &p.bias, &p.c), TILEC_OK, gc_error, "");
  s = since(&mark);
  CHECK(!strcmp(s, "unload; load; get gemm; attr gemm 8 131072; launch gemm 4x4x1 256; "), "cluster, TILERT_WS=0: %s",
        s);
  unsetenv("TILERT_WS");
  gc_unload();
  since(&mark);

  /* TILERT_WS=0 at load: the warp-specialized entry is not even looked up */
  gw_unload();
  setenv("TILERT_WS", "0", 1);
  EXPECT(gw_load(), TILEC_OK, gw_error, "");
  p = problem(512, 512, 256);
  s = launched(p, &mark);
  CHECK(!strcmp(s, "unload; load; get gemm; launch gemm 8x8x1 128; "), "TILERT_WS=0: %s", s);
  unsetenv("TILERT_WS");
  gw_unload();
  printf("ws_test: %s (%d failures)\n", failures ? "FAILED" : "passed", failures);
  return failures != 0;
}
