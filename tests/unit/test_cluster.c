/* test_cluster.c — clusters (`cluster (K)`, cluster_sum / cluster_max): the interpreter runs a
 * cluster's blocks in lockstep and combines in rank order; the verifier keeps the reductions at
 * the top level; the PTX (sm_90a) meets at cluster barriers and reads peers through mapa; the
 * runtime's metadata carries the cluster size. */
#include "test_support.h"
#include "tilert.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* logsumexp of each row, the row split over a cluster of SPLIT blocks of PART columns */
static const char *LSE =
    "kernel lse<PART = 64, SPLIT = 4>(X: f32[M, N], Y: out f32[M], Z: out f32[M, SPLIT])\n"
    "  grid (SPLIT, M) cluster (SPLIT) threads (32)\n"
    "{\n"
    "  let r = block.y;\n"
    "  let x = fill(X[r, block.x * PART : +PART], -inf);\n"
    "  let m = cluster_max(max(x, 0));\n"
    "  let s = cluster_sum(sum(exp(x - m), 0));\n"
    "  Z[r : +1, block.x : +1] = s;\n"
    "  if block.x == 0 { Y[r : +1] = m + log(s); }\n"
    "}\n";

static InterpTensor tensor(void *data, int64_t rows, int64_t cols) {
  return (InterpTensor){data, {rows, cols}, {cols, 1}};
}

enum { M = 3, N = 230, SPLIT = 4 };

static bool run_lse(TirFunc *f, float *x, float *y, float *z, int64_t gx, char *err) {
  InterpArg args[3] = {{.tensor = tensor(x, M, N)}, {.tensor = {y, {M}, {1}}}, {.tensor = tensor(z, M, SPLIT)}};
  int64_t dims[2] = {M, N}, grid[3] = {gx, M, 1};
  return interp_run(f, args, dims, grid, err, 256);
}

Test(cluster, interpreter_combines_the_blocks_of_a_cluster) {
  Arena *a = arena_new();
  Diag d;
  TirFunc *f = source_tir(a, "lse.tile", LSE, NULL, ARCH_SM90A, &d);
  cr_assert_eq(f->cluster, 4);
  static float x[M * N], y[M], z[M * SPLIT];
  for (int i = 0; i < M * N; i++)
    x[i] = (float)((i * 37) % 101) * 0.07f - 3.0f;
  char err[256];
  cr_assert(run_lse(f, x, y, z, SPLIT, err), "%s", err);
  for (int r = 0; r < M; r++) {
    float m = -INFINITY, s = 0;
    for (int j = 0; j < N; j++)
      m = fmaxf(m, x[r * N + j]);
    /* each block's sum in f32, then the blocks' sums in rank order (the GPU's order) */
    for (int b = 0; b < SPLIT; b++) {
      float p = 0;
      for (int j = b * 64; j < (b + 1) * 64 && j < N; j++)
        p += expf(x[r * N + j] - m);
      s += p;
    }
    for (int b = 0; b < SPLIT; b++)
      cr_assert_float_eq(z[r * SPLIT + b], s, 1e-5f * s, "row %d block %d: every block gets the sum", r, b);
    cr_assert_float_eq(y[r], m + logf(s), 1e-5f, "row %d", r);
  }
  cr_assert_not(run_lse(f, x, y, z, 6, err), "6 blocks along x: not whole clusters of 4");
  cr_assert(strstr(err, "grid x 6 is not a multiple of the cluster size 4"), "%s", err);
  arena_free(a);
}

/* The blocks of a cluster must meet at the same reductions: one that skips it is a fault, not a
 * hang (the verifier keeps reductions at the top level, so only a hand-built function can). */
Test(cluster, verifier_keeps_reductions_at_the_top_level) {
  Arena *a = arena_new();
  Diag d;
  TirFunc *f = source_tir(a, "lse.tile", LSE, NULL, ARCH_SM90A, &d);
  int at = -1;
  for (int i = 0; i < f->ninsts && at < 0; i++)
    if (f->insts[i].op == TIR_CLUSTER_MAX)
      at = i;
  cr_assert_geq(at, 0);
  Diag q;
  char *buf = NULL;
  size_t len = 0;
  FILE *mem = open_memstream(&buf, &len);
  diag_init(&q, d.file, mem);
  f->cluster = 1;
  cr_assert_not(tir_verify(f, &q, "test"));
  f->cluster = 9;
  cr_assert_not(tir_verify(f, &q, "test"));
  f->cluster = 4;
  /* wrap the reduction in an if */
  TirInst *insts = arena_alloc(a, sizeof *insts * (size_t)(f->ninsts + 2));
  memcpy(insts, f->insts, sizeof *insts * (size_t)at);
  int cond = tir_new_reg(f, (TileType){.elem = TY_BOOL}, NULL);
  insts[at] = (TirInst){.op = TIR_CONST, .dst = cond, .args = {-1, -1, -1}, .imm = 1, .loc = f->insts[at].loc};
  insts[at + 1] = (TirInst){.op = TIR_IF, .dst = -1, .args = {cond, -1, -1}, .loc = f->insts[at].loc};
  insts[at + 2] = f->insts[at];
  insts[at + 3] = (TirInst){.op = TIR_ENDIF, .dst = -1, .args = {-1, -1, -1}, .loc = f->insts[at].loc};
  memcpy(insts + at + 4, f->insts + at + 1, sizeof *insts * (size_t)(f->ninsts - at - 1));
  f->insts = insts;
  f->ninsts += 3;
  cr_assert_not(tir_verify(f, &q, "test"));
  fclose(mem);
  cr_assert(strstr(buf, "a cluster reduction in a kernel without a cluster"), "%s", buf);
  cr_assert(strstr(buf, "a cluster of 9 blocks"), "%s", buf);
  cr_assert(strstr(buf, "a cluster reduction inside a loop or branch"), "%s", buf);
  free(buf);
  arena_free(a);
}

Test(cluster, ptx_meets_at_cluster_barriers) {
  Arena *a = arena_new();
  char *ptx = source_ptx(a, "lse.tile", LSE, NULL, ARCH_SM90A);
  char *e = ptx_entry(a, ptx, "lse");
  cr_assert(e);
  /* two reductions and the exit: three barriers; each reduction reads the 4 blocks' slots */
  int bars = 0, reads = 0;
  for (const char *p = e; (p = strstr(p, "barrier.cluster.wait.acquire.aligned")); p++)
    bars++;
  for (const char *p = e; (p = strstr(p, "ld.shared::cluster.f32")); p++)
    reads++;
  cr_assert_eq(bars, 3);
  cr_assert_eq(reads, 8);
  cr_assert(strstr(e, "mapa.shared::cluster.u32"));
  cr_assert(strstr(ptx, "// tilec: cluster 4"));
  tilert_kernel_info info;
  tilert_status st = tilert_parse_kernel_info_named(ptx, "lse", &info);
  cr_assert_eq(st.code, TILERT_OK, "%s", st.message);
  cr_assert_eq(info.cluster, 4);
  ptxas_assert_clean(ptx, ARCH_SM90A);
  arena_free(a);
}

/* The runtime's metadata parser takes a cluster of 2..8 once. */
Test(cluster, metadata_rejects_bad_cluster_lines) {
  static const char *head = "// tilec: kernel k\n// tilec: threads 32\n// tilec: smem 0\n// tilec: grid 4 | 1 | 1\n";
  static const char *bad[] = {"// tilec: cluster 9\n", "// tilec: cluster 1\n", "// tilec: cluster x\n",
                              "// tilec: cluster 2\n// tilec: cluster 2\n"};
  char text[512];
  tilert_kernel_info info;
  for (int i = 0; i < 4; i++) {
    snprintf(text, sizeof text, "%s%s.visible .entry k()\n{\n}\n", head, bad[i]);
    cr_assert_neq(tilert_parse_kernel_info_named(text, "k", &info).code, TILERT_OK, "%s", bad[i]);
  }
  snprintf(text, sizeof text, "%s// tilec: cluster 8\n.visible .entry k()\n{\n}\n", head);
  tilert_status st = tilert_parse_kernel_info_named(text, "k", &info);
  cr_assert_eq(st.code, TILERT_OK, "%s", st.message);
  cr_assert_eq(info.cluster, 8);
}

/* cluster (1): a cluster of one block, whose reductions combine nothing (no instruction, no
 * barrier, no cluster launch). */
Test(cluster, a_cluster_of_one_block_combines_nothing) {
  Arena *a = arena_new();
  Diag d;
  static const char *defs[] = {"SPLIT=1", "PART=256", NULL};
  TirFunc *f = source_tir(a, "lse.tile", LSE, defs, ARCH_SM90A, &d);
  cr_assert_eq(f->cluster, 1);
  for (int i = 0; i < f->ninsts; i++)
    cr_assert(f->insts[i].op != TIR_CLUSTER_SUM && f->insts[i].op != TIR_CLUSTER_MAX);
  static float x[M * N], y[M], z[M];
  for (int i = 0; i < M * N; i++)
    x[i] = (float)(i % 13) * 0.5f;
  InterpArg args[3] = {{.tensor = tensor(x, M, N)}, {.tensor = {y, {M}, {1}}}, {.tensor = tensor(z, M, 1)}};
  int64_t dims[2] = {M, N}, grid[3] = {1, M, 1};
  char err[256];
  cr_assert(interp_run(f, args, dims, grid, err, sizeof err), "%s", err);
  for (int r = 0; r < M; r++) {
    float m = -INFINITY, s = 0;
    for (int j = 0; j < N; j++)
      m = fmaxf(m, x[r * N + j]);
    for (int j = 0; j < N; j++)
      s += expf(x[r * N + j] - m);
    cr_assert_float_eq(y[r], m + logf(s), 1e-4f, "row %d", r);
  }
  char *ptx = source_ptx(a, "lse.tile", LSE, defs, ARCH_SM90A);
  cr_assert_null(strstr(ptx, "barrier.cluster"));
  cr_assert_null(strstr(ptx, "// tilec: cluster"));
  arena_free(a);
}
