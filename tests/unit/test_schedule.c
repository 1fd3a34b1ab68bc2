/* test_schedule.c — the GPU schedule pass (tir_schedule.c), its verifier, and the warp-specialized
 * entry points it leads to: TMA, mbarriers and setmaxnreg on sm_90a, none of them on sm_80. */
#include "layout.h"
#include "test_support.h"
#include "tilert.h"

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

static int count(const char *s, const char *needle) {
  int n = 0;
  for (const char *p = s; (p = strstr(p, needle)); p++)
    n++;
  return n;
}

static const SourceFile *g_src; /* of the last scheduled(): diagnostics quote it */

/* The scheduled TIR of an example (layouts assigned as the GPU backend does). */
static TirFunc *scheduled_as(Arena *a, const char *example, const char **defs, GpuArch arch, bool rotate, Diag *d) {
  TirFunc *f = source_tir(a, example, example_text(a, example), defs, arch, d);
  bool wgmma = arch == ARCH_SM90A && layout_kernel_uses_wgmma(f);
  cr_assert(layout_assign_wgmma(f, d, wgmma));
  SchedOptions o = {.arch = arch, .wgmma = wgmma, .stage_cap = 8, .ws_entry = rotate, .rotate = rotate};
  TirFunc *g = tir_schedule(f, &o, d);
  cr_assert(g, "%s: tir_schedule failed", example);
  g_src = d->file;
  return g;
}

static TirFunc *scheduled(Arena *a, const char *example, const char **defs, GpuArch arch, Diag *d) {
  return scheduled_as(a, example, defs, arch, false, d);
}

/* scheduled_as() with one TILEC_* knob set to value for the scheduling (the A/B of a pass). */
static TirFunc *scheduled_as_with(Arena *a, const char *example, const char **defs, GpuArch arch, bool rotate,
                                  const char *knob, const char *value, Diag *d) {
  setenv(knob, value, 1);
  TirFunc *f = scheduled_as(a, example, defs, arch, rotate, d);
  unsetenv(knob);
  return f;
}

static TirFunc *scheduled_with(Arena *a, const char *example, const char **defs, GpuArch arch, const char *knob,
                               const char *value, Diag *d) {
  return scheduled_as_with(a, example, defs, arch, false, knob, value, d);
}

static char *module_ptx(Arena *a, const char *example, const char **defs, GpuArch arch);

static const char *GEMM_BIG[] = {"BM=128", "BN=256", "BK=64", "WARPS=8", "STAGES=4", NULL};
static const char *ATTN_D128[] = {"D=128", "BM=128", "BN=128", "WARPS=8", NULL};
static const char *GEMM_S3[] = {"BM=128", "BN=256", "BK=64", "WARPS=8", "STAGES=3", NULL};
static const char *ATTN_D64_S4[] = {"D=64", "BM=128", "BN=128", "WARPS=8", "STAGES=4", NULL};

Test(schedule, gemm_is_warp_specialized_on_sm90a) {
  Arena *a = arena_new();
  Diag d;
  TirFunc *f = scheduled(a, "gemm", GEMM_BIG, ARCH_SM90A, &d);
  const TirSchedule *s = f->sched;
  cr_assert_eq(s->npipes, 1);
  const TirPipe *p = &s->pipes[0];
  cr_assert_eq(p->stages, 4);
  cr_assert_eq(p->nloads, 2);
  cr_assert_eq(f->insts[p->wait].op, TIR_PIPE_WAIT);
  cr_assert_eq(p->wait, p->first + 1, "the wait opens the body");
  cr_assert_geq(p->overlap_dot, 0, "k64 s4: the dot stays in flight");
  cr_assert_eq(f->insts[p->release].op, TIR_PIPE_RELEASE);
  cr_assert_eq(p->release, p->overlap_dot + 1);
  cr_assert_eq(f->insts[p->release].imm, 1, "it frees the previous iteration's stage");
  cr_assert(s->ws);
  cr_assert_eq(s->consumer_threads, 256);
  cr_assert_eq(s->producer_threads, 128);
  cr_assert_eq(s->consumer_regs, 240);
  cr_assert_eq(s->producer_regs, 24, "with two consumer warpgroups at 240: the 384 x 168 registers of the launch");
  cr_assert_gt(s->nslice, 0, "the producer computes m0, n0 and the bounds itself");
  cr_assert_eq(s->ntmaps, 2);
  /* A[m0 : +128, k0 : +64]: one 128-byte box row; B[k0 : +64, n0 : +256]: four boxes of 64 columns */
  cr_assert_eq(s->tmaps[0].box[0], 128);
  cr_assert_eq(s->tmaps[0].box[1], 64);
  cr_assert_eq(s->tmaps[0].chunks, 1);
  cr_assert_eq(s->tmaps[1].box[1], 64);
  cr_assert_eq(s->tmaps[1].chunks, 4);
  cr_assert_eq(s->tx_bytes, 128 * 64 * 2 + 64 * 256 * 2);
  cr_assert(s->persistent, "every tile runs the same loop");
  cr_assert_eq(s->tile_group, 8, "B's columns follow block.x: grouped rows share them in L2");
  cr_assert_eq(s->cluster, 1, "clusters are opt-in (TILEC_CLUSTER=1)");
  cr_assert_eq(s->tmaps[1].box[0], 64);
  arena_free(a);
  /* opt-in: a cluster of 2 along y (blocks along M share B: B is multicast, half each) */
  setenv("TILEC_CLUSTER", "1", 1);
  a = arena_new();
  f = scheduled(a, "gemm", GEMM_BIG, ARCH_SM90A, &d);
  unsetenv("TILEC_CLUSTER");
  s = f->sched;
  cr_assert_eq(s->cluster, 2);
  cr_assert_eq(s->cluster_axis, 1);
  cr_assert_not(s->tmaps[0].multicast);
  cr_assert(s->tmaps[1].multicast);
  cr_assert_eq(s->tmaps[1].box[0], 32, "half of BK's rows per block");
  arena_free(a);
}

Test(schedule, attention_releases_after_its_last_reader) {
  Arena *a = arena_new();
  Diag d;
  setenv("TILEC_CLUSTER", "1", 1);
  TirFunc *f = scheduled(a, "attention", ATTN_D128, ARCH_SM90A, &d);
  unsetenv("TILEC_CLUSTER");
  const TirSchedule *s = f->sched;
  const TirPipe *p = &s->pipes[0];
  cr_assert(s->ws);
  cr_assert_eq(p->overlap_dot, -1, "two dots: no overlap");
  cr_assert_eq(f->insts[p->release].imm, 0);
  int last_dot = -1;
  for (int j = p->first; j < p->last; j++)
    if (f->insts[j].op == TIR_DOT)
      last_dot = j;
  cr_assert_gt(p->release, last_dot, "V is read by the second dot: the release follows it");
  /* K[b, h, n0 : +128, :] with D = 128: boxes {1, 1, 128, 64}, two per stage; query blocks of one
   * head share K and V: a cluster along x, each block copying half the rows */
  cr_assert_eq(s->ntmaps, 2);
  cr_assert_eq(s->cluster, 2);
  cr_assert_eq(s->cluster_axis, 0);
  cr_assert(s->tmaps[0].multicast && s->tmaps[1].multicast);
  int want[4] = {1, 1, 64, 64};
  for (int k = 0; k < 4; k++)
    cr_assert_eq(s->tmaps[0].box[k], want[k]);
  cr_assert_eq(s->tmaps[0].chunks, 2);
  arena_free(a);
}

/* A GEMM of one warpgroup: two consumer groups take turns on the block's tiles (ping-pong). */
Test(schedule, one_warpgroup_gemm_ping_pongs) {
  const char *w4[] = {"BM=64", "BN=256", "BK=64", "WARPS=4", "STAGES=4", "ACT=2", NULL};
  Arena *a = arena_new();
  Diag d;
  TirFunc *f = scheduled(a, "gemm", w4, ARCH_SM90A, &d);
  cr_assert_eq(f->sched->groups, 1, "opt-in (TILEC_PINGPONG=1)");
  setenv("TILEC_PINGPONG", "1", 1);
  f = scheduled(a, "gemm", w4, ARCH_SM90A, &d);
  const TirSchedule *s = f->sched;
  cr_assert(s->ws && s->persistent);
  cr_assert_eq(s->groups, 2);
  cr_assert_eq(s->consumer_threads, 128);
  cr_assert_eq(s->consumer_regs, 240);
  char *ptx = module_ptx(a, "gemm", w4, ARCH_SM90A);
  cr_assert(strstr(ptx, "// tilec: ws gemm__ws threads 384 smem "));
  cr_assert(strstr(ptx, " persistent group 8 pingpong\n"));
  char *ws = ptx_entry(a, ptx, "gemm__ws");
  cr_assert(ws);
  cr_assert_eq(count(ws, "setmaxnreg.inc.sync.aligned.u32 240;"), 1);
  cr_assert_eq(count(ws, "mbarrier.init.shared::cta.b64"), 2 * 4 + 2, "full, empty per stage; two turns");
  ptxas_assert_clean(ptx, ARCH_SM90A);
  tilert_kernel_info *k = arena_alloc(a, sizeof *k);
  tilert_status st = tilert_parse_kernel_info(ptx, k);
  cr_assert_eq(st.code, TILERT_OK, "%s", st.message);
  cr_assert_eq(k->ws_groups, 2);
  cr_assert_eq(k->ws_threads, 384);
  /* attention has a shared Q outside the ring: no ping-pong */
  const char *aw4[] = {"D=64", "BM=128", "BN=64", "WARPS=4", NULL};
  f = scheduled(a, "attention", aw4, ARCH_SM90A, &d);
  unsetenv("TILEC_PINGPONG");
  cr_assert_eq(f->sched->groups, 1);
  arena_free(a);
}

/* Causal attention's key loop ends at the diagonal: tiles differ in cost along x, but every row
 * of x costs the same, so the persistent walk takes whole rows (no cluster, no raster group; the
 * block order stays reversed for a launch of a block per tile), and says so in the metadata;
 * TILEC_WALK_ROWS=0 leaves such kernels to the hardware's block scheduler. Non-causal tiles
 * walk tile by tile. */
Test(schedule, uneven_tiles_walk_whole_rows) {
  const char *causal[] = {"D=128", "BM=128", "BN=128", "WARPS=8", "CAUSAL=1", NULL};
  Arena *a = arena_new();
  Diag d;
  TirFunc *f = scheduled(a, "attention", causal, ARCH_SM90A, &d);
  cr_assert(f->sched->ws);
  cr_assert(f->sched->persistent && f->sched->walk_rows);
  cr_assert_eq(f->sched->tile_group, 1);
  cr_assert(f->sched->reverse_x);
  cr_assert_eq(f->sched->cluster, 1);
  cr_assert_not(f->sched->tmaps[0].multicast);
  char *ptx = module_ptx(a, "attention", causal, ARCH_SM90A);
  cr_assert(strstr(ptx, " persistent group 1 rows\n"));
  tilert_kernel_info *k = arena_alloc(a, sizeof *k);
  tilert_status st = tilert_parse_kernel_info(ptx, k);
  cr_assert_eq(st.code, TILERT_OK, "%s", st.message);
  cr_assert(k->ws_persistent && k->ws_walk_rows);
  setenv("TILEC_WALK_ROWS", "0", 1);
  f = scheduled(a, "attention", causal, ARCH_SM90A, &d);
  unsetenv("TILEC_WALK_ROWS");
  cr_assert_not(f->sched->persistent);
  const char *plain[] = {"D=128", "BM=128", "BN=128", "WARPS=8", NULL};
  f = scheduled(a, "attention", plain, ARCH_SM90A, &d);
  cr_assert(f->sched->persistent);
  cr_assert_not(f->sched->walk_rows);
  arena_free(a);
}

Test(schedule, no_warp_specialization_on_sm80) {
  Arena *a = arena_new();
  Diag d;
  TirFunc *f = scheduled(a, "gemm", GEMM_BIG, ARCH_SM80, &d);
  cr_assert_eq(f->sched->npipes, 1, "cp.async rings still");
  cr_assert_not(f->sched->ws);
  cr_assert_eq(f->sched->ntmaps, 0);
  arena_free(a);
}

/* The verifier's failures, with the message captured. */
static char *verify_msg(Arena *a, TirFunc *f) {
  char *buf = NULL;
  size_t len = 0;
  FILE *m = open_memstream(&buf, &len);
  Diag d;
  diag_init(&d, g_src, m);
  bool ok = tir_verify_schedule(f, &d);
  fclose(m);
  char *out = arena_strdup(a, ok ? "" : buf);
  free(buf);
  return out;
}

static void swap_insts(TirFunc *f, int i, int j) {
  TirInst t = f->insts[i];
  f->insts[i] = f->insts[j];
  f->insts[j] = t;
}

/* A row walk decodes tiles x first, one group of consumers, no cluster: a raster group of 8
 * (rows of y interleaved) would hand a block tiles of several rows. */
Test(schedule, verifier_rejects_a_row_walk_with_a_raster_group) {
  const char *causal[] = {"D=128", "BM=128", "BN=128", "WARPS=8", "CAUSAL=1", NULL};
  Arena *a = arena_new();
  Diag d;
  TirFunc *f = scheduled(a, "attention", causal, ARCH_SM90A, &d);
  cr_assert_str_eq(verify_msg(a, f), "");
  f->sched->tile_group = 8;
  char *msg = verify_msg(a, f);
  cr_assert(strstr(msg, "a row walk is a persistent walk"), "%s", msg);
  arena_free(a);
}

Test(schedule, verifier_rejects_a_read_before_the_wait) {
  Arena *a = arena_new();
  Diag d;
  TirFunc *f = scheduled(a, "attention", ATTN_D128, ARCH_SM90A, &d);
  cr_assert_str_eq(verify_msg(a, f), "");
  TirPipe *p = &f->sched->pipes[0];
  int first_dot = p->wait;
  while (f->insts[first_dot].op != TIR_DOT)
    first_dot++;
  /* the wait moves past S = Q K^T, which reads the K stage */
  TirInst w = f->insts[p->wait];
  memmove(&f->insts[p->wait], &f->insts[p->wait + 1], sizeof(TirInst) * (size_t)(first_dot - p->wait));
  f->insts[first_dot] = w;
  p->wait = first_dot;
  for (int l = 0; l < p->nloads; l++)
    if (p->loads[l] <= first_dot)
      p->loads[l]--;
  char *msg = verify_msg(a, f);
  cr_assert(strstr(msg, "before its stage is waited for"), "%s", msg);
  arena_free(a);
}

/* The pipe's release moved one instruction up (swapped with the one before it) must be refused. */
static void check_early_release(const char *example, const char **defs, const char *want) {
  Arena *a = arena_new();
  Diag d;
  TirFunc *f = scheduled(a, example, defs, ARCH_SM90A, &d);
  TirPipe *p = &f->sched->pipes[0];
  swap_insts(f, p->release, p->release - 1);
  p->release--;
  char *msg = verify_msg(a, f);
  cr_assert(strstr(msg, want), "%s: %s", example, msg);
  arena_free(a);
}

/* attention: the release would precede the last reader of V */
Test(schedule, verifier_rejects_a_read_after_the_release) {
  check_early_release("attention", ATTN_D128, "after its stage is released");
}

Test(schedule, verifier_rejects_a_lagged_release_away_from_the_overlapped_dot) {
  check_early_release("gemm", GEMM_BIG, "away from its overlapped dot");
}

static const char *ATTN_ROT[] = {"D=64", "BM=128", "BN=128", "WARPS=8", "STAGES=3", NULL};

/* The wait that opens p's body: its early set's when it has one. */
static int top_wait(const TirPipe *p) { return p->early ? p->early_wait : p->wait; }

/* The warp-specialized copy of attention with 3 stages: S of the next iteration is issued
 * before P V of this one (FlashAttention-3's intra-warpgroup overlap), in this order. */
Test(schedule, attention_loop_is_rotated) {
  Arena *a = arena_new();
  Diag d;
  TirFunc *f = scheduled_as(a, "attention", ATTN_ROT, ARCH_SM90A, true, &d);
  const TirPipe *p = &f->sched->pipes[0];
  cr_assert(p->rotated);
  int first_if = find_op(f, top_wait(p), TIR_IF), d1 = find_op(f, top_wait(p), TIR_DOT);
  cr_assert_eq(d1, first_if + 2, "the first iteration's S sits in an IF of its own, in a turn");
  cr_assert_eq(f->insts[d1 - 1].op, TIR_WG_TURN);
  cr_assert_eq(f->insts[d1 + 1].op, TIR_WG_PASS);
  cr_assert_eq(f->insts[d1].stage, 0);
  cr_assert_eq(f->insts[d1].imm, 0, "synchronous");
  cr_assert_eq(f->insts[p->acc_wait].op, TIR_DOT_WAIT);
  cr_assert_eq(f->insts[p->acc_wait].imm, 0);
  cr_assert_eq(p->release, p->acc_wait + 1, "the previous stage is free once P V retired");
  cr_assert_eq(f->insts[p->release].imm, 1);
  int next = find_op(f, d1 + 1, TIR_DOT);
  cr_assert_eq(f->insts[next - 1].op, TIR_PIPE_WAIT);
  cr_assert_eq(f->insts[next - 1].stage, 1, "the next stage's wait");
  cr_assert_eq(f->insts[next].stage, 1);
  cr_assert_eq(f->insts[next].imm, 1, "async");
  cr_assert_eq(f->insts[next + 1].op, TIR_ELSE);
  /* the last iteration issues the same S over its own stage (not undef, not zeros: C7515, and
   * 64 moves an iteration) */
  const TirInst *last = &f->insts[next + 2];
  cr_assert_eq(last->op, TIR_DOT);
  cr_assert_eq(last->stage, 0);
  cr_assert_eq(last->imm, 1, "async, like the next-stage one");
  cr_assert_eq(last->k_steps, 1, "one k16 step defines s: nothing reads it");
  cr_assert_eq(f->insts[next].k_steps, 0);
  cr_assert_eq(last->dst, f->insts[next].dst);
  cr_assert_eq(last->args[1], f->insts[next].args[1]);
  /* ... with K's stage as A too: Q (a head load) is freed at the top of the last iteration */
  const TirSchedule *sc = f->sched;
  int k = f->insts[p->loads[0]].dst, q = f->insts[sc->heads[0]].dst;
  cr_assert_eq(f->insts[next].args[0], q);
  cr_assert_eq(last->args[0], k);
  int rel = sc->head_release, empty = sc->head_release_empty;
  cr_assert_eq(f->insts[rel].op, TIR_HEAD_RELEASE);
  cr_assert_eq(f->insts[rel - 1].op, TIR_IF);
  cr_assert_eq(f->insts[rel - 2].op, TIR_NOT, "if not(step < hi - i): the last iteration");
  cr_assert_eq(f->insts[rel - 3].op, TIR_LT);
  cr_assert_eq(f->insts[rel - 4].op, TIR_SUB);
  cr_assert_eq(f->insts[rel - 5].op, TIR_ENDIF, "right after the first iteration's S (its IF)");
  cr_assert_eq(tir_nest_depth(f, first_if, rel - 5), 0);
  cr_assert_lt(rel, p->acc_wait, "before the softmax, not after the loop");
  cr_assert_eq(f->insts[empty].op, TIR_HEAD_RELEASE);
  cr_assert_gt(empty, p->last);
  cr_assert_eq(f->insts[empty - 2].op, TIR_NOT, "if not(lo < hi): the loop ran no iteration");
  cr_assert_eq(f->insts[empty - 2].args[0], f->insts[p->first - 1].dst);
  cr_assert_eq(sc->head_after, 0, "two copies of Q at d64");
  cr_assert_eq(p->overlap_dot, next + 4, "P V right after the IF");
  cr_assert_eq(f->insts[p->overlap_dot].imm, 1);
  /* two consumer warpgroups take turns issuing: wg_turn before the next-stage IF, wg_pass after
   * P V, before any wait */
  cr_assert_eq(f->sched->turns, 2);
  cr_assert_eq(f->insts[p->turn].op, TIR_WG_TURN);
  cr_assert_eq(p->turn, next - 5, "the turn opens before the next-stage IF (span, has, if, wait)");
  cr_assert_eq(p->pass, p->overlap_dot + 1);
  cr_assert_eq(f->insts[p->pass].op, TIR_WG_PASS);
  cr_assert_eq(f->insts[p->overlap_dot + 2].op, TIR_DOT_WAIT);
  cr_assert_eq(f->insts[p->overlap_dot + 2].imm, 1, "S of the next iteration done, P V in flight");
  cr_assert_eq(f->insts[p->overlap_dot + 2].args[0], f->insts[next].dst);
  cr_assert_gt(p->acc_wait, d1);
  cr_assert_lt(p->acc_wait, next);
  cr_assert_str_eq(verify_msg(a, f), "");
  arena_free(a);
  /* 2 stages and one barrier set: no rotation (the refill would wait for the release of the
   * stage in use) */
  a = arena_new();
  f = scheduled_as_with(a, "attention", ATTN_D128, ARCH_SM90A, true, "TILEC_EARLY_SET", "0", &d);
  cr_assert_not(f->sched->pipes[0].rotated);
  cr_assert_null(f->sched->pipes[0].early);
  arena_free(a);
}

/* A 192-row d128 query tile has no ring tile of Q's type ([192, 128]; K's stage is [128, 128]),
 * so the rotated loop's unread last S reads P (the register A of P V, [192, 128] where BN = D)
 * instead of Q, and Q is freed in the last iteration as with square tiles; TILEC_REG_STAND_IN=0
 * keeps Q there and frees it after the loop. */
Test(schedule, attention_bm192_last_product_reads_p_not_q) {
  static const char *defs[] = {"D=128", "BM=192", "BN=128", "WARPS=16", NULL};
  Arena *a = arena_new();
  Diag d;
  TirFunc *f = scheduled_as(a, "attention", defs, ARCH_SM90A, true, &d);
  const TirPipe *p = &f->sched->pipes[0];
  const TirSchedule *sc = f->sched;
  cr_assert(p->rotated);
  int q = f->insts[sc->heads[0]].dst, pv_a = f->insts[p->overlap_dot].args[0];
  int next = find_op(f, find_op(f, top_wait(p), TIR_DOT) + 1, TIR_DOT);
  const TirInst *last = &f->insts[next + 2];
  cr_assert_eq(f->insts[next].args[0], q, "the next iteration's S reads Q");
  cr_assert_eq(last->op, TIR_DOT);
  cr_assert_eq(last->args[0], pv_a, "the unread last S reads P, the A of P V");
  cr_assert_neq(f->regs[pv_a].type.place, PLACE_SHARED);
  cr_assert_lt(sc->head_release, p->acc_wait, "Q freed before the softmax of the last iteration");
  cr_assert_eq(sc->head_after, 0, "the next tile's Q goes before its ring loads");
  cr_assert_str_eq(verify_msg(a, f), "");
  arena_free(a);
  a = arena_new();
  f = scheduled_as_with(a, "attention", defs, ARCH_SM90A, true, "TILEC_REG_STAND_IN", "0", &d);
  p = &f->sched->pipes[0];
  cr_assert_eq(f->insts[find_op(f, find_op(f, top_wait(p), TIR_DOT) + 1, TIR_DOT) + 2].args[0], f->insts[f->sched->heads[0]].dst);
  cr_assert_gt(f->sched->head_release, p->last, "Q freed after the loop");
  arena_free(a);
}

/* K (read by S = Q K^T) and V (read by P V) have barriers of their own in the warp-specialized
 * entry: K's stage is free at the top of each iteration but the last, and the loop rotates at 2
 * stages. */
Test(schedule, attention_k_is_freed_apart_from_v) {
  Arena *a = arena_new();
  Diag d;
  TirFunc *f = scheduled_as(a, "attention", ATTN_D128, ARCH_SM90A, true, &d);
  const TirSchedule *s = f->sched;
  const TirPipe *p = &s->pipes[0];
  cr_assert_eq(p->stages, 2);
  cr_assert(p->rotated, "2 stages rotate with K apart from V");
  cr_assert(p->early && p->early[0] && !p->early[1], "K early, V not");
  cr_assert_eq(s->early_bytes, 128 * 128 * 2);
  cr_assert_eq(s->tx_bytes, 2 * 128 * 128 * 2);
  cr_assert_eq(p->early_wait, p->first + 1, "K's wait opens the body");
  cr_assert(f->insts[p->early_wait].early_set);
  int d1 = find_op(f, p->early_wait, TIR_DOT), rel = p->early_release;
  cr_assert_eq(f->insts[rel].op, TIR_PIPE_RELEASE);
  cr_assert(f->insts[rel].early_set);
  cr_assert_eq(f->insts[rel].imm, 0, "this iteration's stage");
  cr_assert_eq(f->insts[rel - 1].op, TIR_IF, "if step < hi - i: not in the last iteration");
  cr_assert_eq(f->insts[rel - 2].op, TIR_LT);
  cr_assert_eq(f->insts[rel + 1].op, TIR_ENDIF);
  cr_assert_gt(rel, d1);
  cr_assert_lt(rel, p->acc_wait, "before the softmax");
  cr_assert(p->early_tail, "the loop's exit frees the last iteration's K");
  /* V: waited for right before the turn of P V, freed after P V retired (the previous stage) */
  cr_assert_not(f->insts[p->wait].early_set);
  cr_assert_eq(p->wait, p->turn - 1);
  cr_assert_eq(p->release, p->acc_wait + 1);
  cr_assert_not(f->insts[p->release].early_set);
  int next = find_op(f, d1 + 1, TIR_DOT);
  cr_assert(f->insts[next - 1].early_set, "the next stage's wait is K's");
  cr_assert_str_eq(verify_msg(a, f), "");
  /* the verifier: K read after its release by anything but the next stage's dot or the last
   * iteration's product */
  f->insts[p->overlap_dot].args[1] = f->insts[p->loads[0]].dst; /* P V reading K */
  char *msg = verify_msg(a, f);
  cr_assert(strstr(msg, "after its stage is released"), "%s", msg);
  arena_free(a);
  /* ... released unconditionally: the last iteration's product would read a freed stage */
  a = arena_new();
  f = scheduled_as(a, "attention", ATTN_D128, ARCH_SM90A, true, &d);
  p = &f->sched->pipes[0];
  f->insts[p->early_release - 1].args[0] = f->insts[p->first - 1].dst; /* `ran`, not `more` */
  msg = verify_msg(a, f);
  cr_assert(strstr(msg, "right inside `if step < hi - i`"), "%s", msg);
  arena_free(a);
  /* ... V's wait inside the turn: with 2 stages the refill of V's stage waits for the other
   * warpgroup's P V */
  a = arena_new();
  f = scheduled_as(a, "attention", ATTN_D128, ARCH_SM90A, true, &d);
  TirPipe *q = &f->sched->pipes[0];
  swap_insts(f, q->turn - 1, q->turn);
  q->turn--, q->wait++;
  msg = verify_msg(a, f);
  cr_assert(strstr(msg, "a wait inside a turn for a set freed after P V"), "%s", msg);
  arena_free(a);
  /* one set (TILEC_EARLY_SET=0) at 3 stages: the old schedule */
  a = arena_new();
  f = scheduled_as_with(a, "attention", ATTN_ROT, ARCH_SM90A, true, "TILEC_EARLY_SET", "0", &d);
  cr_assert(f->sched->pipes[0].rotated);
  cr_assert_null(f->sched->pipes[0].early);
  cr_assert_eq(f->sched->early_bytes, 0);
  arena_free(a);
}

Test(schedule, verifier_rejects_broken_rotations) {
  Arena *a = arena_new();
  Diag d;
  /* the accumulator's wait after its first use */
  TirFunc *f = scheduled_as(a, "attention", ATTN_ROT, ARCH_SM90A, true, &d);
  TirPipe *p = &f->sched->pipes[0];
  swap_insts(f, p->acc_wait, p->acc_wait + 2); /* past the release and the rescale */
  char *msg = verify_msg(a, f);
  cr_assert(strstr(msg, "rotated pipe"), "%s", msg);
  arena_free(a);
  /* the next-stage dot without its next-stage wait */
  a = arena_new();
  f = scheduled_as(a, "attention", ATTN_ROT, ARCH_SM90A, true, &d);
  p = &f->sched->pipes[0];
  int next = find_op(f, find_op(f, top_wait(p), TIR_DOT) + 1, TIR_DOT);
  f->insts[next - 1].stage = 0;
  msg = verify_msg(a, f);
  cr_assert(strstr(msg, "next-stage dot without its wait"), "%s", msg);
  arena_free(a);
  /* the last iteration's s from another product */
  a = arena_new();
  f = scheduled_as(a, "attention", ATTN_ROT, ARCH_SM90A, true, &d);
  p = &f->sched->pipes[0];
  next = find_op(f, find_op(f, top_wait(p), TIR_DOT) + 1, TIR_DOT);
  f->insts[next + 2].args[1] = f->insts[next + 2].args[0];
  msg = verify_msg(a, f);
  cr_assert(strstr(msg, "neither zeros nor the same dot"), "%s", msg);
  arena_free(a);
  /* the final dot_wait retiring the wrong register */
  a = arena_new();
  f = scheduled_as(a, "attention", ATTN_ROT, ARCH_SM90A, true, &d);
  p = &f->sched->pipes[0];
  f->insts[p->overlap_dot + 2].args[0] = f->insts[p->overlap_dot].dst;
  msg = verify_msg(a, f);
  cr_assert(strstr(msg, "does not retire the next-stage dot"), "%s", msg);
  arena_free(a);
  /* an early head release: the last iteration's product reading Q after it */
  a = arena_new();
  f = scheduled_as(a, "attention", ATTN_ROT, ARCH_SM90A, true, &d);
  p = &f->sched->pipes[0];
  next = find_op(f, find_op(f, top_wait(p), TIR_DOT) + 1, TIR_DOT);
  f->insts[next + 2].args[0] = f->insts[next].args[0];
  msg = verify_msg(a, f);
  cr_assert(strstr(msg, "may have freed it"), "%s", msg);
  /* ... under `if has` instead of `if not(has)`: it would free Q before the next-stage dot */
  f->insts[next + 2].args[0] = f->insts[p->loads[0]].dst;
  cr_assert_str_eq(verify_msg(a, f), "");
  int rel = f->sched->head_release, cond = f->insts[rel - 1].args[0];
  f->insts[rel - 1].args[0] = f->insts[next - 2].args[0];
  msg = verify_msg(a, f);
  cr_assert(strstr(msg, "early head_release not under"), "%s", msg);
  f->insts[rel - 1].args[0] = cond;
  /* ... and the release after a loop of no iteration under another condition */
  int empty = f->sched->head_release_empty;
  f->insts[empty - 1].args[0] = cond;
  msg = verify_msg(a, f);
  cr_assert(strstr(msg, "loop of no iteration"), "%s", msg);
  arena_free(a);
}

/* The warp-specialized entry frees Q in the last iteration, right after its S = Q K^T (a plain
 * loop: synchronous), and after a loop of no iteration; the producer loads the next tile's Q
 * before its ring loads. */
Test(schedule, attention_q_is_freed_by_the_last_iteration) {
  Arena *a = arena_new();
  Diag d;
  /* one barrier set: 2 stages are not rotated */
  TirFunc *f = scheduled_as_with(a, "attention", ATTN_D128, ARCH_SM90A, true, "TILEC_EARLY_SET", "0", &d);
  const TirSchedule *s = f->sched;
  const TirPipe *p = &s->pipes[0];
  cr_assert_not(p->rotated, "2 stages");
  int sdot = find_op(f, p->wait, TIR_DOT), rel = s->head_release, empty = s->head_release_empty;
  cr_assert_eq(f->insts[sdot].args[0], f->insts[s->heads[0]].dst, "S reads Q");
  cr_assert_eq(rel, sdot + 5, "sub, lt, not, if");
  cr_assert_eq(f->insts[rel].op, TIR_HEAD_RELEASE);
  cr_assert_eq(f->insts[rel - 1].op, TIR_IF);
  cr_assert_eq(f->insts[rel - 2].op, TIR_NOT);
  cr_assert_eq(f->insts[p->first - 1].op, TIR_LT, "ran = lo < hi before the loop");
  cr_assert_eq(f->insts[empty].op, TIR_HEAD_RELEASE);
  cr_assert_eq(empty, p->last + 3, "not, if");
  cr_assert_eq(s->head_after, 0);
  cr_assert_str_eq(verify_msg(a, f), "");
  /* the verifier: freed before S reads Q */
  swap_insts(f, sdot, rel - 4);
  swap_insts(f, rel - 4, rel - 3);
  swap_insts(f, rel - 3, rel - 2);
  swap_insts(f, rel - 2, rel - 1);
  swap_insts(f, rel - 1, rel);
  swap_insts(f, rel, rel + 1);
  f->sched->head_release = rel - 1;
  char *msg = verify_msg(a, f);
  cr_assert(strstr(msg, "may have freed it"), "%s", msg);
  arena_free(a);
  /* TILEC_EARLY_HEAD=0: after the loop, the next Q after a full ring of loads */
  a = arena_new();
  setenv("TILEC_EARLY_HEAD", "0", 1);
  setenv("TILEC_EARLY_SET", "0", 1);
  f = scheduled_as(a, "attention", ATTN_D128, ARCH_SM90A, true, &d);
  unsetenv("TILEC_EARLY_HEAD");
  unsetenv("TILEC_EARLY_SET");
  cr_assert_eq(f->sched->head_release, f->sched->pipes[0].last + 1);
  cr_assert_eq(f->sched->head_release_empty, -1);
  cr_assert_eq(f->sched->head_after, 2);
  cr_assert_str_eq(verify_msg(a, f), "");
  arena_free(a);
}

/* Attention's Q, loaded once before the loop, is a head load: the producer's TMA, waited for
 * right after the load, freed after the loop (its last reader) in the cp.async entry's copy. */
Test(schedule, attention_q_is_a_head_load) {
  Arena *a = arena_new();
  Diag d;
  TirFunc *f = scheduled(a, "attention", ATTN_D128, ARCH_SM90A, &d);
  const TirSchedule *s = f->sched;
  const TirPipe *p = &s->pipes[0];
  cr_assert_eq(s->nheads, 1);
  cr_assert_eq(f->insts[s->heads[0]].op, TIR_LOAD);
  cr_assert_str_eq(f->args[f->insts[s->heads[0]].arg_index].name, "Q");
  cr_assert_eq(s->head_wait, s->heads[0] + 1, "waited for right after its load");
  cr_assert_eq(s->head_release, p->last + 1, "freed after the loop");
  cr_assert_eq(s->ntmaps, p->nloads + 1 + 1, "the ring's, Q's, and O's (a TMA store)");
  cr_assert_eq(s->tmaps[p->nloads].load, s->heads[0]);
  cr_assert_eq(s->head_bytes, 128 * 128 * 2);
  /* a persistent walk; a second Q would take the block to 224 KB, past the 200 that leave L1
   * room (measured slower at long sequences): one copy */
  cr_assert(s->persistent);
  cr_assert_eq(s->head_stages, 1);
  cr_assert_eq(s->nstores, 1);
  cr_assert(s->tmaps[p->nloads + 1].store);
  cr_assert_eq(s->tmaps[p->nloads + 1].load, s->stores[0]);
  cr_assert_eq(f->insts[s->stores[0]].op, TIR_STORE);
  cr_assert_str_eq(f->args[s->tmaps[p->nloads + 1].arg].name, "O");
  cr_assert_gt(s->stores[0], p->last, "after the loop");
  /* the verifier: a TMA store inside the loop would rewrite the staging tile per iteration */
  int store = s->stores[0];
  f->sched->stores[0] = f->sched->tmaps[p->nloads + 1].load = p->loads[0];
  char *bad = verify_msg(a, f);
  cr_assert(strstr(bad, "does not describe its store") || strstr(bad, "TMA store"), "%s", bad);
  f->sched->stores[0] = f->sched->tmaps[p->nloads + 1].load = store;
  cr_assert_str_eq(verify_msg(a, f), "");
  /* the verifier: two copies without a persistent walk (nothing would reuse the second) */
  f->sched->head_stages = 2;
  cr_assert_str_eq(verify_msg(a, f), "");
  f->sched->persistent = false;
  cr_assert(strstr(verify_msg(a, f), "copies of the head tiles"));
  f->sched->persistent = true;
  f->sched->head_stages = 3;
  cr_assert(strstr(verify_msg(a, f), "3 copies of the head tiles"));
  f->sched->head_stages = 2;
  cr_assert_str_eq(verify_msg(a, f), "");
  /* the verifier: no wait, a release before the last reader */
  f->insts[s->head_wait].op = TIR_HEAD_RELEASE;
  char *msg = verify_msg(a, f);
  cr_assert(strstr(msg, "one top-level head_wait"), "%s", msg);
  arena_free(a);
  a = arena_new();
  f = scheduled(a, "attention", ATTN_D128, ARCH_SM90A, &d);
  swap_insts(f, f->sched->head_release, f->sched->head_release - 1); /* before the loop's ENDFOR */
  f->sched->head_release--;
  f->sched->pipes[0].last++;
  msg = verify_msg(a, f);
  cr_assert(strstr(msg, "head_release"), "%s", msg);
  arena_free(a);
  /* off: TILEC_HEADS=0 */
  a = arena_new();
  f = scheduled_with(a, "attention", ATTN_D128, ARCH_SM90A, "TILEC_HEADS", "0", &d);
  cr_assert_eq(f->sched->nheads, 0);
  cr_assert_eq(f->sched->ntmaps, f->sched->pipes[0].nloads + f->sched->nstores);
  cr_assert_str_eq(verify_msg(a, f), "");
  arena_free(a);
  /* two copies at d64 (176 KB with the 4-stage ring and O's staging: the next tile's Q loads
   * during this tile's loop); one with TILEC_HEAD_DOUBLE=0, and where a second does not fit (the
   * 3-stage d128 loop) */
  a = arena_new();
  f = scheduled(a, "attention", ATTN_D64_S4, ARCH_SM90A, &d);
  cr_assert_eq(f->sched->head_stages, 2);
  cr_assert_str_eq(verify_msg(a, f), "");
  f = scheduled_with(a, "attention", ATTN_D64_S4, ARCH_SM90A, "TILEC_HEAD_DOUBLE", "0", &d);
  cr_assert_eq(f->sched->head_stages, 1);
  cr_assert_str_eq(verify_msg(a, f), "");
  static const char *d128_s3[] = {"D=128", "BM=128", "BN=128", "WARPS=8", "STAGES=3", NULL};
  f = scheduled_as(a, "attention", d128_s3, ARCH_SM90A, true, &d);
  cr_assert_eq(f->sched->head_stages, 1);
  cr_assert_eq(f->sched->nstores, 0);
  arena_free(a);
  /* TILEC_TMA_STORE=0: the epilogue stores from registers */
  a = arena_new();
  f = scheduled_with(a, "attention", ATTN_D128, ARCH_SM90A, "TILEC_TMA_STORE", "0", &d);
  cr_assert_eq(f->sched->nstores, 0);
  cr_assert_eq(f->sched->ntmaps, f->sched->pipes[0].nloads + 1);
  arena_free(a);
}

/* Without turns (TILEC_WG_TURNS=0, or one consumer warpgroup) the rotated loop has none. */
Test(schedule, turns_are_optional) {
  Arena *a = arena_new();
  Diag d;
  setenv("TILEC_WG_TURNS", "0", 1);
  TirFunc *f = scheduled_as(a, "attention", ATTN_ROT, ARCH_SM90A, true, &d);
  unsetenv("TILEC_WG_TURNS");
  const TirPipe *p = &f->sched->pipes[0];
  cr_assert(p->rotated);
  cr_assert_eq(f->sched->turns, 0);
  cr_assert_eq(p->turn, -1);
  for (int j = 0; j < f->ninsts; j++)
    cr_assert(f->insts[j].op != TIR_WG_TURN && f->insts[j].op != TIR_WG_PASS);
  cr_assert_eq(f->insts[p->overlap_dot + 1].op, TIR_DOT_WAIT);
  cr_assert_str_eq(verify_msg(a, f), "");
  arena_free(a);
}

/* A wait inside a turn would stall the other warpgroup's products (a consumer-wide barrier
 * there would deadlock); a turn must close where it opened; the loop's dots sit inside it. */
Test(schedule, verifier_rejects_broken_turns) {
  Arena *a = arena_new();
  Diag d;
  TirFunc *f = scheduled_as(a, "attention", ATTN_ROT, ARCH_SM90A, true, &d);
  TirPipe *p = &f->sched->pipes[0];
  swap_insts(f, p->turn - 2, p->turn); /* the softmax's last tile op inside the turn (V's wait */
  p->turn -= 2;                         /* before the turn is allowed there: 3 stages) */
  char *msg = verify_msg(a, f);
  cr_assert(strstr(msg, "inside a turn"), "%s", msg);
  arena_free(a);
  a = arena_new();
  f = scheduled_as(a, "attention", ATTN_ROT, ARCH_SM90A, true, &d);
  p = &f->sched->pipes[0];
  f->insts[p->pass].op = TIR_WG_TURN;
  msg = verify_msg(a, f);
  cr_assert(strstr(msg, "wg_turn before the wg_pass"), "%s", msg);
  arena_free(a);
  a = arena_new();
  f = scheduled_as(a, "attention", ATTN_ROT, ARCH_SM90A, true, &d);
  p = &f->sched->pipes[0];
  int first_pass = find_op(f, top_wait(p), TIR_WG_PASS); /* in the first iteration's IF */
  swap_insts(f, first_pass, first_pass + 2);          /* past the IF's end */
  msg = verify_msg(a, f);
  cr_assert(strstr(msg, "leaves the block it started in"), "%s", msg);
  arena_free(a);
  a = arena_new();
  f = scheduled_as(a, "attention", ATTN_ROT, ARCH_SM90A, true, &d);
  p = &f->sched->pipes[0];
  swap_insts(f, p->pass, p->overlap_dot); /* P V after the pass */
  p->pass--;
  p->overlap_dot++;
  msg = verify_msg(a, f);
  cr_assert(strstr(msg, "outside its turn"), "%s", msg);
  arena_free(a);
  a = arena_new();
  f = scheduled_as(a, "attention", ATTN_ROT, ARCH_SM90A, true, &d);
  f->sched->turns = 0;
  msg = verify_msg(a, f);
  cr_assert(strstr(msg, "without turns"), "%s", msg);
  arena_free(a);
}

/* The warp-specialized entry as a string of one letter per schedule-relevant PTX instruction,
 * so tests can pin the order of issues, waits and barriers: M wgmma, F wgmma.fence, C commit,
 * 0 / 1 wgmma.wait_group 0 / 1, T turn (bar.sync on a named barrier), P pass (bar.arrive),
 * W mbarrier wait, X arrive.expect_tx, R release (mbarrier.arrive), L TMA, S setmaxnreg,
 * | a basic block's label. */
static char *schedule_letters(Arena *a, const char *ptx) {
  static const struct { const char *text; char letter; } map[] = {
      {"wgmma.mma_async", 'M'}, {"wgmma.fence", 'F'}, {"wgmma.commit_group", 'C'},
      {"wgmma.wait_group.sync.aligned 0;", '0'}, {"wgmma.wait_group.sync.aligned 1;", '1'},
      {"bar.sync \t%r", 'T'}, {"bar.sync %r", 'T'}, {"bar.arrive", 'P'}, {"mbarrier.try_wait", 'W'},
      {"mbarrier.arrive.expect_tx", 'X'}, {"mbarrier.arrive", 'R'}, {"cp.async.bulk.tensor", 'L'},
      {"setmaxnreg", 'S'}, {"$L__BB", '|'},
  };
  char *out = arena_alloc(a, strlen(ptx) + 1), *o = out;
  for (const char *line = ptx; *line;) {
    const char *end = strchr(line, '\n');
    size_t n = end ? (size_t)(end - line) : strlen(line);
    for (size_t k = 0; k < sizeof map / sizeof map[0]; k++) {
      const char *hit = strstr(line, map[k].text);
      if (hit && hit < line + n && (map[k].letter != '|' || hit == line)) {
        *o++ = map[k].letter;
        break;
      }
    }
    line += n + (end ? 1 : 0);
  }
  *o = 0;
  return out;
}

/* Golden schedule of the rotated, turn-taking attention loop (FlashAttention-3's order) in the
 * PTX itself, so a regression in the passes or the emitter shows in CI. */
Test(schedule, rotated_loop_order_in_the_ptx) {
  Arena *a = arena_new();
  setenv("TILEC_ROTATE", "1", 1);
  char *ptx = module_ptx(a, "attention", ATTN_ROT, ARCH_SM90A);
  unsetenv("TILEC_ROTATE");
  char *ws = schedule_letters(a, ptx_entry(a, ptx, "attention__ws"));
  /* the first iteration's S = Q K^T (D/16 = 4 wgmmas) in a turn of its own, waited for at once */
  cr_assert(strstr(ws, "TFMMMMC0P"), "%s", ws);
  /* P V of the previous iteration retired, then its stage released */
  cr_assert(strstr(ws, "0R"), "%s", ws);
  /* the turn opens, the next stage's full barrier, S of the next iteration issued, not waited */
  cr_assert(strstr(ws, "TWFMMMMC|"), "%s", ws);
  /* P V (BN/16 = 8 wgmmas) issued after it, the turn passed on, then only S waited for */
  cr_assert(strstr(ws, "FMMMMMMMMCP1"), "%s", ws);
  /* the last iteration's S over its own stage, one k16 step, in the other branch, falling
   * into P V */
  cr_assert(strstr(ws, "|FMC|FMMMMMMMMCP1"), "%s", ws);
  /* the producer: per stage, K's empty barrier, expect_tx on its full one, K by TMA; then V's */
  cr_assert(strstr(ws, "WXLWXL"), "%s", ws);
  /* and ptxas keeps the wgmmas asynchronous (an accumulator live across the next-stage IF's
   * merge serializes every one of them: C7515) */
  ptxas_assert_unserialized(ptx, ARCH_SM90A);
  static const char *d128[] = {"D=128", "BM=128", "BN=128", "WARPS=8", "STAGES=3", NULL};
  setenv("TILEC_ROTATE", "1", 1);
  ptxas_assert_unserialized(module_ptx(a, "attention", d128, ARCH_SM90A), ARCH_SM90A);
  unsetenv("TILEC_ROTATE");
  arena_free(a);
}

/* In the PTX: warpgroup w waits on named barrier 3 + w and arrives on the next one's. */
Test(schedule, turns_in_the_ptx) {
  Arena *a = arena_new();
  setenv("TILEC_ROTATE", "1", 1);
  setenv("TILEC_IDLE_BANDS", "0", 1); /* (an idle warpgroup's loop repeats them: idle_bands_in_the_ptx) */
  char *ptx = module_ptx(a, "attention", ATTN_ROT, ARCH_SM90A);
  unsetenv("TILEC_IDLE_BANDS");
  unsetenv("TILEC_ROTATE");
  char *ws = ptx_entry(a, ptx, "attention__ws");
  cr_assert(ws);
  cr_assert_eq(count(ws, "bar.sync %r"), 2, "the first iteration's turn and the loop's");
  cr_assert_eq(count(ws, "bar.arrive"), 3, "their passes, and the last warpgroup's up front");
  cr_assert_eq(count(ptx_entry(a, ptx, "attention"), "bar.arrive"), 0, "the cp.async entry has no turns");
  ptxas_assert_clean(ptx, ARCH_SM90A);
  arena_free(a);
}

Test(schedule, verifier_checks_roles_and_budgets) {
  Arena *a = arena_new();
  Diag d;
  TirFunc *f = scheduled(a, "gemm", GEMM_BIG, ARCH_SM90A, &d);
  TirSchedule *s = f->sched;
  s->consumer_regs = 256; /* 256 x 256 + 128 x 24 > 64K */
  cr_assert(strstr(verify_msg(a, f), "do not fit the 384 x 168 registers the block is launched with"));
  /* fits the SM's 64K, but not the block's 384 x 168: the consumers' setmaxnreg.inc would wait
   * for ever on registers the producer never released */
  s->consumer_regs = 240;
  s->producer_regs = 32;
  cr_assert(strstr(verify_msg(a, f), "do not fit the 384 x 168"));
  s->producer_regs = 40;
  s->consumer_regs = 232;
  cr_assert_str_eq(verify_msg(a, f), "", "the wide producer's budgets");
  s->producer_regs = 24;
  s->producer_threads = 96;
  cr_assert(strstr(verify_msg(a, f), "not whole warpgroups"));
  s->producer_threads = 128;
  /* the slice must hold only scalars computed before the loop: put the loop's dot in it */
  int saved = s->slice[0];
  s->slice[0] = s->pipes[0].overlap_dot;
  cr_assert(strstr(verify_msg(a, f), "cannot replay"));
  s->slice[0] = saved;
  s->tmaps[1].swizzle = 256;
  cr_assert(strstr(verify_msg(a, f), "out of TMA's range"));
  arena_free(a);
}

/* The whole module for an example (both entry points). */
static char *module_ptx(Arena *a, const char *example, const char **defs, GpuArch arch) {
  Diag d;
  TirFunc *f = source_tir(a, example, example_text(a, example), defs, arch, &d);
  NvptxOptions o = {.arch = arch, .opt_level = 3};
  char *ptx = nvptx_compile(f, &o, &d, NULL);
  cr_assert(ptx);
  return ptx;
}

/* Entry `entry` of the sm_90a module with one TILEC_* knob set (the A/B of a pass in the PTX). */
static char *module_entry_with(Arena *a, const char *example, const char **defs, const char *entry,
                               const char *knob, const char *value) {
  setenv(knob, value, 1);
  char *e = ptx_entry(a, module_ptx(a, example, defs, ARCH_SM90A), entry);
  unsetenv(knob);
  cr_assert(e, "%s: no entry %s", example, entry);
  return e;
}

/* A producer that spills at 24 registers (attention d64 x 128 without its TMA-store epilogue,
 * one copy of Q: the ring's loads and the head loads after them) is compiled again at 40, its
 * consumers at 232 (the launch's 384 x 168 registers). */
Test(schedule, a_spilling_producer_gets_wider_budgets) {
  if (!have_ptxas())
    return; /* the retry needs ptxas's word */
  Arena *a = arena_new();
  const char *ptxas = ptxas_find(a);
  static const char *defs[] = {"D=64", "BM=128", "BN=128", "WARPS=8", NULL};
  setenv("TILEC_TMA_STORE", "0", 1); /* with its TMA-store epilogue the producer fits 24 */
  setenv("TILEC_HEAD_DOUBLE", "0", 1); /* so it does with Q's loads before the ring's */
  setenv("TILEC_EARLY_HEAD", "0", 1);  /* (as Q freed by the last iteration has them) */
  setenv("TILEC_EARLY_SET", "0", 1);   /* one set: the 2-stage loop is not rotated */
  setenv("TILEC_DEEP_RING", "0", 1);   /* (3 stages would rotate it) */
  char *ptx = module_ptx(a, "attention", defs, ARCH_SM90A);
  unsetenv("TILEC_DEEP_RING");
  unsetenv("TILEC_EARLY_SET");
  unsetenv("TILEC_TMA_STORE");
  unsetenv("TILEC_HEAD_DOUBLE");
  unsetenv("TILEC_EARLY_HEAD");
  char *ws = ptx_entry(a, ptx, "attention__ws");
  cr_assert(ws);
  cr_assert_eq(count(ws, "setmaxnreg.dec.sync.aligned.u32 40;"), 1);
  cr_assert_eq(count(ws, "setmaxnreg.inc.sync.aligned.u32 232;"), 1);
  cr_assert_eq(ptxas_spill_bytes(a, ptxas, ptx, ARCH_SM90A, "__ws"), 0);
  ptxas_assert_clean(ptx, ARCH_SM90A);
  /* the GEMM's producer fits: the narrow budgets stay */
  ptx = module_ptx(a, "gemm", GEMM_BIG, ARCH_SM90A);
  cr_assert_eq(count(ptx_entry(a, ptx, "gemm__ws"), "setmaxnreg.dec.sync.aligned.u32 24;"), 1);
  arena_free(a);
}

static void check_ws_entry(const char *example, const char **defs, const char *name, int stages, int boxes_per_stage,
                           int boxes_multicast, int head_boxes, int head_stages, bool heads_first, int store_boxes) {
  Arena *a = arena_new();
  char *ptx = module_ptx(a, example, defs, ARCH_SM90A);
  char *ws = ptx_entry(a, ptx, arena_printf(a, "%s__ws", name));
  char *cp = ptx_entry(a, ptx, name);
  cr_assert(ws && cp, "%s: both entry points", example);
  /* one copy freed after the loop: the head boxes twice, issued after the ring's first stages,
   * or after the loop when shorter; two copies, or one freed by the last iteration: once, before
   * the tile's ring loads (TirSchedule.head_after) */
  int boxes = boxes_per_stage + (heads_first ? 1 : 2) * head_boxes + store_boxes;
  cr_assert_eq(count(ws, "cp.async.bulk.tensor"), boxes,
               "%s: TMA boxes per stage, head and store", example);
  cr_assert_eq(count(ws, ".global.shared::cta.bulk_group"), store_boxes, "%s: the epilogue's TMA store", example);
  cr_assert_eq(count(ws, "cp.async.bulk.commit_group;"), store_boxes > 0, "%s: one bulk group per tile", example);
  cr_assert_eq(count(ws, "setmaxnreg.dec.sync.aligned.u32 24;"), 1);
  cr_assert_eq(count(ws, "setmaxnreg.inc.sync.aligned.u32"), 1);
  /* a rotated loop (more products in the ws entry than in the cp.async one) has K apart from V */
  int sets = count(ws, "wgmma.mma_async") > count(cp, "wgmma.mma_async") && !env_off("TILEC_EARLY_SET") ? 2 : 1;
  cr_assert_eq(count(ws, "mbarrier.init.shared::cta.b64"), 2 * stages * sets + (head_boxes ? 2 * head_stages : 0),
               "%s: full and empty per stage and set (and per copy of the head tiles)", example);
  cr_assert_geq(count(ws, "mbarrier.try_wait.parity"), 2, "%s: consumers wait full, the producer empty", example);
  cr_assert_geq(count(ws, ", 10000000;"), 1, "%s: the producer's wait for a free stage sleeps (suspend-time hint)",
                example);
  cr_assert_lt(count(ws, ", 10000000;"), count(ws, "mbarrier.try_wait.parity"), "%s: the consumers' spin", example);
  cr_assert_geq(count(ws, "mbarrier.arrive.expect_tx"), 1);
  cr_assert_geq(count(ws, "mbarrier.arrive.shared::cta.b64"), 1, "%s: the release", example);
  cr_assert_eq(count(ws, "cvta.param.u64"), 2 + (head_boxes > 0) + (store_boxes > 0),
               "%s: tensor maps read in place (grid_constant)", example);
  cr_assert_not(strstr(ws, ".local"), "%s: no copy of a tensor map to local memory", example);
  /* the one block-wide (with a cluster: cluster-wide) barrier is the mbarrier initialization's;
   * the rest are role-scoped */
  int cluster = boxes_multicast > 0;
  cr_assert_eq(count(ws, "bar.sync \t0;") + count(ws, "barrier.sync \t0;"), 1 - cluster, "%s", example);
  cr_assert_eq(count(ws, "barrier.cluster.wait.acquire.aligned;"), cluster, "%s", example);
  cr_assert_eq(count(ws, ".multicast::cluster"), boxes_multicast, "%s: multicast boxes", example);
  cr_assert_eq(count(ws, "mapa.shared::cluster.u32") > 0, cluster, "%s: the release reaches the peer", example);
  cr_assert_eq(count(ws, "cp.async.wait_group"), 0, "%s: the ring has no cp.async", example);
  cr_assert_eq(count(cp, "mbarrier"), 0, "%s: the cp.async entry is unchanged", example);
  cr_assert(strstr(ptx, arena_printf(a, "// tilec: ws %s__ws threads 384 smem ", name)));
  /* attention's ring loads (K, V) follow the loop and the head, not block.x: x first */
  const char *group = strcmp(example, "gemm") == 0 ? " persistent group 8" : " persistent group 1";
  cr_assert(strstr(ptx, arena_printf(a, cluster ? "%s cluster 2 " : "%s\n", group)), "%s", example);
  ptxas_assert_clean(ptx, ARCH_SM90A);
  /* sm_80: one entry, no Hopper instructions */
  char *p80 = module_ptx(a, example, defs, ARCH_SM80);
  cr_assert_not(strstr(p80, "__ws"));
  cr_assert_eq(count(p80, "cp.async.bulk"), 0);
  cr_assert_eq(count(p80, "setmaxnreg"), 0);
  cr_assert_eq(count(p80, "mbarrier"), 0);
  ptxas_assert_clean(p80, ARCH_SM80);
  arena_free(a);
}

Test(schedule, ws_entry_points_in_the_ptx) {
  /* 4 stages of 128 x 256 leave no room for the 64 KB staging tile; 3 stages do, so the ws entry
   * takes 3 (store_ring; TILEC_STORE_RING=0: 4 and no TMA store) */
  check_ws_entry("gemm", GEMM_BIG, "gemm", 3, 1 + 4, 0, 0, 0, false, 4);
  setenv("TILEC_STORE_RING", "0", 1);
  check_ws_entry("gemm", GEMM_BIG, "gemm", 4, 1 + 4, 0, 0, 0, false, 0);
  unsetenv("TILEC_STORE_RING");
  check_ws_entry("gemm", GEMM_S3, "gemm", 3, 1 + 4, 0, 0, 0, false, 4);
  /* Q: a head load; O[b, h, m0 : +128, 0 : +128]: a TMA store of two boxes; at d64 two copies of
   * Q; one copy is freed by the loop's last iteration (TILEC_EARLY_HEAD=0: after the loop) */
  check_ws_entry("attention", ATTN_D128, "attention", 2, 2 + 2, 0, 2, 1, true, 2);
  check_ws_entry("attention", ATTN_D64_S4, "attention", 4, 1 + 1, 0, 1, 2, true, 1);
  setenv("TILEC_HEAD_DOUBLE", "0", 1);
  check_ws_entry("attention", ATTN_D64_S4, "attention", 4, 1 + 1, 0, 1, 1, true, 1);
  setenv("TILEC_EARLY_HEAD", "0", 1);
  check_ws_entry("attention", ATTN_D64_S4, "attention", 4, 1 + 1, 0, 1, 1, false, 1);
  unsetenv("TILEC_EARLY_HEAD");
  unsetenv("TILEC_HEAD_DOUBLE");
  setenv("TILEC_CLUSTER", "1", 1);
  check_ws_entry("gemm", GEMM_BIG, "gemm", 4, 1 + 4, 4, 0, 0, false, 0);
  check_ws_entry("attention", ATTN_D128, "attention", 2, 2 + 2, 4, 0, 0, false, 0); /* no head loads or stores in a cluster */
  unsetenv("TILEC_CLUSTER");
}

/* One consumer warpgroup (a 4-warp kernel): its warp-specialized entry is launched for 2 blocks an
 * SM (`.minnctapersm 2`: 128 registers a thread, budgets 24 / 232) where every DOT is at most 192
 * wide; an m64n256 wgmma needs 154 registers at the launch's count (ptxas C7602), so BN = 256
 * keeps 1 block (no hint, budgets 24 / 240). Both assemble without spills; TILEC_WS_BLOCKS=1
 * keeps 1 block everywhere. */
Test(schedule, one_warpgroup_ws_entry_fits_two_blocks) {
  static struct {
    const char *defs[6];
    bool two;
  } cases[] = {{{"BM=128", "BN=128", "BK=64", "WARPS=4", "STAGES=3", NULL}, true},
               {{"BM=64", "BN=256", "BK=64", "WARPS=4", "STAGES=4", NULL}, false}};
  for (int c = 0; c < 2; c++)
    for (int off = 0; off < 2; off++) {
      Arena *a = arena_new();
      if (off)
        setenv("TILEC_WS_BLOCKS", "1", 1);
      char *ptx = source_ptx(a, "dsl/examples/gemm.tile", example_text(a, "gemm"), cases[c].defs, ARCH_SM90A);
      unsetenv("TILEC_WS_BLOCKS");
      char *ws = ptx_entry(a, ptx, "gemm__ws");
      cr_assert(ws, "case %d", c);
      bool two = cases[c].two && !off;
      cr_expect_eq(strstr(ws, ".minnctapersm 2") != NULL, two, "case %d off %d", c, off);
      cr_expect(strstr(ws, two ? "setmaxnreg.inc.sync.aligned.u32 232;" : "setmaxnreg.inc.sync.aligned.u32 240;"),
                "case %d off %d", c, off);
      ptxas_assert_clean(ptx, ARCH_SM90A);
      arena_free(a);
    }
}

/* A warp-specialized entry of 1 block an SM whose ring holds too little of the DOTs' work ahead
 * gets stages (deeper_ring: while P - 1 stages hold under 8 MFLOP and the block stays within
 * 200 KB). GEMM 128 x 128 x 64 with 4 warps and 3 stages (2 MFLOP a stage, one block an SM by
 * shared memory): 5 stages; 128 x 64 x 32 at 4 (two blocks an SM) keeps 4; 128 x 256 x 64 at 3
 * (4 MFLOP a stage) keeps 3. The cp.async entry keeps `pipeline P`; so does everything with
 * TILEC_DEEP_RING=0. The deeper module assembles without spills. */
Test(schedule, deeper_ring_for_thin_stages) {
  static struct {
    const char *defs[6];
    int written, deep;
  } cases[] = {{{"BM=128", "BN=128", "BK=64", "WARPS=4", "STAGES=3", NULL}, 3, 5},
               {{"BM=128", "BN=64", "BK=32", "WARPS=4", "STAGES=4", NULL}, 4, 4},
               {{"BM=128", "BN=256", "BK=64", "WARPS=8", "STAGES=3", NULL}, 3, 3}};
  for (int c = 0; c < 3; c++) {
    Arena *a = arena_new();
    Diag d;
    cr_expect_eq(scheduled_as(a, "gemm", cases[c].defs, ARCH_SM90A, true, &d)->sched->pipes[0].stages, cases[c].deep,
                 "case %d", c);
    cr_expect_eq(scheduled(a, "gemm", cases[c].defs, ARCH_SM90A, &d)->sched->pipes[0].stages, cases[c].written,
                 "case %d: the cp.async entry", c);
    TirFunc *off = scheduled_as_with(a, "gemm", cases[c].defs, ARCH_SM90A, true, "TILEC_DEEP_RING", "0", &d);
    cr_expect_eq(off->sched->pipes[0].stages, cases[c].written, "case %d: TILEC_DEEP_RING=0", c);
    arena_free(a);
  }
  Arena *a = arena_new();
  Diag d;
  char *dump = NULL;
  size_t len = 0;
  FILE *out = open_memstream(&dump, &len);
  tir_print_schedule(out, scheduled_as(a, "gemm", cases[0].defs, ARCH_SM90A, true, &d));
  fclose(out);
  cr_expect(strstr(dump, ", 5 stages (pipeline 3: a deeper ring), loads"), "%s", dump);
  free(dump);
  char *ptx = module_ptx(a, "gemm", cases[0].defs, ARCH_SM90A);
  cr_assert(strstr(ptx, "// tilec: ws gemm__ws threads 256 smem 196688 "), "5 stages of 32 KB and the 32 KB staging tile");
  ptxas_assert_clean(ptx, ARCH_SM90A);
  arena_free(a);
}

/* A key tile of 176 rows at d128 (FlashAttention-3's): S = Q K^T on wgmma.m64n176, never the
 * padded n256; K and V tiles of 176 rows in shared memory (TMA boxes of 176 rows: 2 x 45056
 * bytes a stage, so two stages fit beside Q and the warp-specialized entry exists); clean on
 * sm_90a (no spills). TILEC_TILE_ROWS=0 pads the tiles to 256 rows: no TMA entry. (sm_80's
 * mma.sync tiles pad to 256 rows: the kernel does not fit its shared memory there.) */
Test(schedule, key_tiles_of_176_rows) {
  Arena *a = arena_new();
  static const char *defs[] = {"D=128", "BM=128", "BN=176", "WARPS=8", NULL};
  char *ptx = module_ptx(a, "attention", defs, ARCH_SM90A);
  char *ws = ptx_entry(a, ptx, "attention__ws");
  cr_assert(ws);
  cr_assert_gt(count(ws, "wgmma.mma_async.sync.aligned.m64n176k16"), 0);
  cr_assert_gt(count(ptx_entry(a, ptx, "attention"), "wgmma.mma_async.sync.aligned.m64n176k16"), 0);
  cr_assert_eq(count(ptx, "m64n256k16"), 0);
  cr_assert(strstr(ptx, "// tilec: tmap K swizzle 128 box 1 1 176 64\n"));
  cr_assert(strstr(ptx, "// tilec: tmap V swizzle 128 box 1 1 176 64\n"));
  cr_assert(strstr(ptx, "// tilec: smem 212992\n"), "Q, and two stages of K and V at 176 x 128 x 2 bytes");
  ptxas_assert_clean(ptx, ARCH_SM90A);
  /* plain (as many products as the cp.async entry: the rotated loop spills with P packed); with
   * TILEC_UNPACKED_PLAN=1 rotated (the first S product peeled: more products), which fits only
   * with P rounded where the softmax makes it (WsPlan.unpacked) */
  char *cp = ptx_entry(a, ptx, "attention");
  cr_assert_eq(count(ws, "m64n176k16"), count(cp, "m64n176k16"));
  setenv("TILEC_UNPACKED_PLAN", "1", 1);
  char *unpacked = module_ptx(a, "attention", defs, ARCH_SM90A);
  unsetenv("TILEC_UNPACKED_PLAN");
  cr_assert_gt(count(ptx_entry(a, unpacked, "attention__ws"), "m64n176k16"), count(cp, "m64n176k16"));
  setenv("TILEC_TILE_ROWS", "0", 1);
  ptx = module_ptx(a, "attention", defs, ARCH_SM90A);
  unsetenv("TILEC_TILE_ROWS");
  cr_assert_not(strstr(ptx, "attention__ws"), "padded to 256 rows, two stages do not fit");
  arena_free(a);
}

/* The runtime reads the entry and its tensor maps back with its own parser. */
Test(schedule, metadata_round_trip) {
  Arena *a = arena_new();
  setenv("TILEC_CLUSTER", "1", 1);
  char *ptx = module_ptx(a, "gemm", GEMM_BIG, ARCH_SM90A);
  unsetenv("TILEC_CLUSTER");
  tilert_kernel_info *k = arena_alloc(a, sizeof *k);
  tilert_status st = tilert_parse_kernel_info(ptx, k);
  cr_assert_eq(st.code, TILERT_OK, "%s", st.message);
  cr_assert_str_eq(k->ws_name, "gemm__ws");
  cr_assert_eq(k->ws_threads, 384);
  cr_assert_eq(k->threads, 256);
  cr_assert_gt(k->ws_smem_bytes, k->smem_bytes, "the mbarriers");
  cr_assert_eq(k->ntmaps, 2);
  cr_assert_eq(k->tmaps[0].arg, 0);
  cr_assert_eq(k->tmaps[1].arg, 1);
  cr_assert_eq(k->tmaps[1].swizzle, 128);
  cr_assert_eq(k->tmaps[1].box[0], 32);
  cr_assert_eq(k->tmaps[1].box[1], 64);
  cr_assert(k->tmaps[1].multicast);
  cr_assert_not(k->tmaps[0].multicast);
  cr_assert(k->ws_persistent);
  cr_assert_eq(k->ws_tile_group, 8);
  cr_assert_eq(k->ws_cluster, 2);
  cr_assert_eq(k->ws_cluster_axis, 1);
  arena_free(a);
}

Test(schedule, metadata_rejects_bad_ws_lines) {
  const char *base = "// tilec: kernel k\n// tilec: threads 128\n// tilec: smem 0\n// tilec: dim N\n"
                     "// tilec: arg X tensor f16 in N\n// tilec: arg s scalar f32\n// tilec: grid N | 1 | 1\n";
  const char *bad[] = {
      "// tilec: tmap X swizzle 128 box 64\n",                                   /* before ws */
      "// tilec: ws k__ws threads 256\n",                                        /* no smem */
      "// tilec: ws k__ws threads 256 smem 0\n// tilec: tmap s swizzle 128 box 64\n",  /* a scalar */
      "// tilec: ws k__ws threads 256 smem 0\n// tilec: tmap X swizzle 96 box 64\n",   /* swizzle */
      "// tilec: ws k__ws threads 256 smem 0\n// tilec: tmap X swizzle 128 box 512\n", /* box > 256 */
      "// tilec: ws k__ws threads 256 smem 0\n// tilec: tmap X swizzle 128 box 64 1\n", /* rank */
      "// tilec: ws k__ws threads 256 smem 0\n// tilec: tmap X swizzle 128 box 64 multicast\n", /* no cluster */
      "// tilec: ws k__ws threads 256 smem 0 persistent cluster 3 x\n",                     /* size 3 */
      "// tilec: ws k__ws threads 256 smem 0 cluster 2 x\n",                                /* not persistent */
      "// tilec: ws k__ws threads 256 smem 0 persistent group 0\n",                        /* group < 1 */
      "// tilec: ws k__ws threads 256 smem 0 persistent group\n",                          /* no size */
      "// tilec: ws k__ws threads 256 smem 0 group 1\n",                                   /* not persistent */
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    char text[1024];
    snprintf(text, sizeof text, "%s%s", base, bad[i]);
    tilert_kernel_info k;
    tilert_status st = tilert_parse_kernel_info(text, &k);
    cr_assert_eq(st.code, TILERT_ERROR_BAD_METADATA, "case %zu", i);
  }
  char text[1024];
  snprintf(text, sizeof text, "%s// tilec: ws k__ws threads 256 smem 64\n// tilec: tmap X swizzle 64 box 32\n", base);
  tilert_kernel_info k;
  tilert_status st = tilert_parse_kernel_info(text, &k);
  cr_assert_eq(st.code, TILERT_OK, "%s", st.message);
  cr_assert_eq(k.ntmaps, 1);
}

/* Every kernel of a file in one module: each entry (with its warp-specialized twin) and its own
 * metadata block, which the runtime finds by name. */
Test(schedule, several_kernels_in_one_module) {
  static const char src[] =
      "kernel mm<BM = 128, BN = 256, BK = 64, WARPS = 8, STAGES = 4>(A: f16[M, K], B: f16[K, N], C: out f16[M, N])\n"
      "  grid (cdiv(N, BN), cdiv(M, BM)) threads (WARPS * 32)\n"
      "{\n"
      "  let m0 = block.y * BM;\n"
      "  let n0 = block.x * BN;\n"
      "  reg acc: f32[BM, BN] = 0;\n"
      "  for k0 in 0 .. K step BK pipeline STAGES {\n"
      "    shared a = A[m0 : +BM, k0 : +BK];\n"
      "    shared b = B[k0 : +BK, n0 : +BN];\n"
      "    acc += dot(a, b);\n"
      "  }\n"
      "  C[m0 : +BM, n0 : +BN] = to_f16(acc);\n"
      "}\n"
      "kernel scale<BLOCK = 1024>(X: f16[N], Y: out f16[N], s: f32)\n"
      "  grid (cdiv(N, BLOCK)) threads (128)\n"
      "{\n"
      "  let i0 = block.x * BLOCK;\n"
      "  Y[i0 : +BLOCK] = to_f16(to_f32(X[i0 : +BLOCK]) * s);\n"
      "}\n";
  GpuArch arches[2] = {ARCH_SM80, ARCH_SM90A};
  for (int i = 0; i < 2; i++) {
    Arena *a = arena_new();
    Diag d;
    TirFunc *fs[2];
    fs[0] = source_tir(a, "two.tile", src, NULL, arches[i], &d);
    fs[1] = source_tir_kernel(a, "two.tile", src, NULL, arches[i], 1, &d);
    NvptxOptions o = {.arch = arches[i], .opt_level = 3};
    char *ptx = nvptx_compile_module(fs, 2, &o, &d);
    cr_assert(ptx);
    cr_assert(ptx_entry(a, ptx, "mm") && ptx_entry(a, ptx, "scale"));
    cr_assert_eq(ptx_entry(a, ptx, "mm__ws") != NULL, arches[i] == ARCH_SM90A);
    tilert_kernel_info *k = arena_alloc(a, sizeof *k);
    tilert_status st = tilert_parse_kernel_info_named(ptx, "scale", k);
    cr_assert_eq(st.code, TILERT_OK, "%s", st.message);
    cr_assert_eq(k->nargs, 3);
    cr_assert_str_eq(k->ws_name, "", "scale has no ring");
    st = tilert_parse_kernel_info_named(ptx, "mm", k);
    cr_assert_eq(st.code, TILERT_OK, "%s", st.message);
    cr_assert_str_eq(k->ws_name, arches[i] == ARCH_SM90A ? "mm__ws" : "");
    ptxas_assert_clean(ptx, arches[i]);
    arena_free(a);
  }
}

/* GEMM's bias is loaded before the K loop in the warp-specialized entry (its latency under the
 * loop, not after the drain); the cp.async entry, whose registers it would spill, keeps it after. */
Test(schedule, epilogue_loads_are_prefetched) {
  Arena *a = arena_new();
  char *ptx = module_ptx(a, "gemm", GEMM_S3, ARCH_SM90A);
  char *ws = ptx_entry(a, ptx, "gemm__ws"), *cp = ptx_entry(a, ptx, "gemm");
  cr_assert(ws && cp);
  cr_assert(strstr(ws, "ld.global") && strstr(ws, "ld.global") < strstr(ws, "wgmma.mma_async"), "ws: bias first");
  ptxas_assert_clean(ptx, ARCH_SM90A);
  ws = module_entry_with(a, "gemm", GEMM_S3, "gemm__ws", "TILEC_PREFETCH", "0");
  cr_assert(strstr(ws, "ld.global") > strstr(ws, "wgmma.mma_async"), "TILEC_PREFETCH=0: in place");
  arena_free(a);
}

/* A plain GEMM (bench/probe/matmul.tile) whose epilogue converts the accumulator straight to f16
 * (`C = to_f16(acc)`): the drain after the overlapped loop copies the values out of the wgmma
 * registers, or ptxas serializes every wgmma of the warp-specialized entry (C7514) at 3 stages
 * and more. The cp.async entry's loop that runs no iteration skips the drain, or its zeroed
 * accumulator meets the in-flight group before the wait (C7515 in that entry). */
Test(schedule, plain_gemm_epilogue_keeps_wgmma_async) {
  static const char *stages[] = {"3", "4", "5"};
  for (int i = 0; i < 3; i++) {
    Arena *a = arena_new();
    const char *path = "bench/probe/matmul.tile", *defs[] = {arena_printf(a, "STAGES=%s", stages[i]), NULL};
    Diag d;
    TirFunc *f = source_tir(a, path, file_text(a, path), defs, ARCH_SM90A, &d);
    cr_assert(f);
    NvptxOptions o = {.arch = ARCH_SM90A, .opt_level = 3};
    char *ptx = nvptx_compile_module(&f, 1, &o, &d);
    cr_assert(ptx && ptx_entry(a, ptx, "matmul__ws"), "STAGES=%s", stages[i]);
    ptxas_assert_unserialized(ptx, ARCH_SM90A);
    arena_free(a);
  }
}

/* The GEMM a new user wrote first (bench/user/gemm_silu.tile: 128 x 128, one warpgroup, BK 64,
 * 3 stages) runs its cp.async entry (2 blocks an SM against the warp-specialized entry's 1);
 * that entry's wgmmas were serialized (C7515) by the zeros of a loop that runs no iteration. */
Test(schedule, one_warpgroup_cp_async_gemm_keeps_wgmma_async) {
  Arena *a = arena_new();
  const char *path = "bench/user/gemm_silu.tile", *defs[] = {NULL};
  Diag d;
  TirFunc *f = source_tir(a, path, file_text(a, path), defs, ARCH_SM90A, &d);
  cr_assert(f);
  NvptxOptions o = {.arch = ARCH_SM90A, .opt_level = 3};
  char *ptx = nvptx_compile_module(&f, 1, &o, &d);
  cr_assert(ptx && ptx_entry(a, ptx, "gemm_silu"));
  ptxas_assert_unserialized(ptx_without_ws(a, ptx), ARCH_SM90A);
  arena_free(a);
}

/* attention_gqa's `window > 0 ? window : N + BM` is a run-time scalar ?:, lowered to a SELECT
 * (both sides cheap, neither can fault), so the producer can replay the loop's lower bound and
 * the kernel keeps its warp-specialized entry; an integer division on a side keeps the IF. */
Test(schedule, runtime_scalar_ternary_is_a_select) {
  Arena *a = arena_new();
  Diag d;
  const char *defs[] = {"D=128", "BM=128", "BN=128", "WARPS=8", NULL};
  TirFunc *f = scheduled(a, "attention_gqa", defs, ARCH_SM90A, &d);
  cr_assert(f->sched->ws, "the loop bound is replayable");
  arena_free(a);
  a = arena_new();
  static const char *text =
      "kernel k<BLOCK = 128>(X: f32[N], Y: out f32[N], w: i32)\n"
      "  grid (cdiv(N, BLOCK)) threads (128)\n{\n"
      "  let s = w > 0 ? N / w : 0;\n"
      "  let t = w > 0 ? w : N + 1;\n"
      "  Y[s : +BLOCK] = X[t : +BLOCK];\n}\n";
  f = source_tir(a, "ternary.tile", text, NULL, ARCH_SM90A, &d);
  int ifs = 0, selects = 0;
  for (int i = 0; i < f->ninsts; i++) {
    ifs += f->insts[i].op == TIR_IF;
    selects += f->insts[i].op == TIR_SELECT && f->regs[f->insts[i].dst].type.rank == 0;
  }
  cr_assert_eq(ifs, 1, "N / w may divide by zero: only the taken side runs");
  cr_assert_eq(selects, 1);
  arena_free(a);
}

/* The scheduled copy of the index-th kernel of an example, on sm_80 (no warp roles). */
static const TirSchedule *sched_of_kernel(Arena *a, const char *example, const char **defs, int index) {
  Diag d;
  TirFunc *f = source_tir_kernel(a, example, example_text(a, example), defs, ARCH_SM80, index, &d);
  cr_assert(layout_assign_wgmma(f, &d, false));
  SchedOptions o = {.arch = ARCH_SM80, .stage_cap = 8};
  TirFunc *g = tir_schedule(f, &o, &d);
  cr_assert(g, "%s: tir_schedule failed", example);
  return g->sched;
}

/* A loop that is not rotated keeps one barrier set (the early set measured slower there): the
 * backward dK/dV kernel (five products a step) in its warp-specialized entry; its forward
 * companion (attention_lse, kernel 0) rotates at 2 stages with K apart from V (as written: its
 * deeper ring, 4 stages, is rotated anyway). */
Test(schedule, only_rotated_loops_get_an_early_set) {
  Arena *a = arena_new();
  Diag d;
  setenv("TILEC_DEEP_RING", "0", 1);
  static const char *defs[] = {"D=64", "CAUSAL=0", "KM=128", "KN=128", "KWARPS=8", "QM=128", "QN=128", "QWARPS=8", NULL};
  for (int k = 0; k < 6; k++) {
    TirFunc *f = source_tir_kernel(a, "attention_backward", example_text(a, "attention_backward"), defs, ARCH_SM90A, k, &d);
    bool wgmma = layout_kernel_uses_wgmma(f);
    cr_assert(layout_assign_wgmma(f, &d, wgmma));
    SchedOptions o = {.arch = ARCH_SM90A, .wgmma = wgmma, .stage_cap = 8, .ws_entry = true, .rotate = true};
    TirFunc *g = tir_schedule(f, &o, &d);
    cr_assert(g);
    for (int p = 0; p < g->sched->npipes; p++) {
      const TirPipe *pp = &g->sched->pipes[p];
      cr_assert_eq(pp->early != NULL, pp->rotated, "kernel %s: an early set exactly where the loop is rotated", f->name);
      if (strcmp(f->name, "attention_lse") == 0)
        cr_assert(pp->rotated && pp->stages == 2);
      if (strcmp(f->name, "attention_backward_kv") == 0)
        cr_assert(g->sched->ws && !pp->rotated);
    }
  }
  unsetenv("TILEC_DEEP_RING");
  arena_free(a);
}

/* Causal attention's key loop ends at the diagonal, so it runs longer as block.x grows: block.x
 * is read reversed and the longest blocks start first. Loops of fixed length (non-causal), loops
 * that shrink as block.x grows (the dK/dV kernel starts at the diagonal) or whose length is not
 * monotone in it (a window moves both bounds) keep the index order. */
Test(schedule, causal_blocks_run_longest_first) {
  Arena *a = arena_new();
  static const char *causal[] = {"CAUSAL=1", NULL}, *plain[] = {"CAUSAL=0", NULL};
  cr_assert(sched_of_kernel(a, "attention", causal, 0)->reverse_x);
  cr_assert_not(sched_of_kernel(a, "attention", plain, 0)->reverse_x);
  cr_assert_not(sched_of_kernel(a, "attention_gqa", causal, 0)->reverse_x, "the window's start moves with block.x");
  cr_assert_not(sched_of_kernel(a, "attention_backward", causal, 4)->reverse_x, "dK/dV: shortest last already");
  cr_assert(sched_of_kernel(a, "attention_backward", causal, 5)->reverse_x, "dQ: its loop ends at the diagonal");
  cr_assert_not(sched_of_kernel(a, "gemm", NULL, 0)->reverse_x);
  setenv("TILEC_BLOCK_ORDER", "0", 1);
  cr_assert_not(sched_of_kernel(a, "attention", causal, 0)->reverse_x, "TILEC_BLOCK_ORDER=0: index order");
  unsetenv("TILEC_BLOCK_ORDER");
  /* in the PTX: both entries read nctaid.x for block.x; the persistent (non-causal) walk orders its tiles */
  static const char *causal_d128[] = {"D=128", "BM=128", "BN=128", "WARPS=8", "CAUSAL=1", NULL};
  char *ptx = module_ptx(a, "attention", causal_d128, ARCH_SM90A);
  cr_assert_geq(count(ptx_entry(a, ptx, "attention"), "%nctaid.x"), 1);
  cr_assert_geq(count(ptx_entry(a, ptx, "attention__ws"), "%nctaid.x"), 1);
  char *plain_ptx = module_ptx(a, "attention", ATTN_D128, ARCH_SM90A);
  cr_assert_eq(count(ptx_entry(a, plain_ptx, "attention"), "%nctaid.x"), 0);
  arena_free(a);
}

/* A TMA store whose rows split by consumer warpgroup (attention's O: each warpgroup's wgmma
 * accumulator holds 64 of the 128 rows) is issued per warpgroup: boxes of 64 rows, the
 * warpgroup's own named barrier (128 threads), so the warpgroups leave the epilogue out of
 * lockstep. The verifier rejects a split whose blocks are not the warpgroups'. */
Test(schedule, tma_store_per_warpgroup) {
  Arena *a = arena_new();
  Diag d;
  TirFunc *f = scheduled(a, "attention", ATTN_D128, ARCH_SM90A, &d);
  TirSchedule *s = f->sched;
  TirTmap *m = &s->tmaps[s->ntmaps - 1];
  cr_assert(m->store);
  cr_assert_eq(m->split, 2);
  cr_assert_eq(m->box[m->outer], 64);
  cr_assert_eq(m->rows, 128, "the staging tile stays whole");
  cr_assert_str_eq(verify_msg(a, f), "");
  m->split = 4;
  cr_assert(strstr(verify_msg(a, f), "do not each store a block"));
  m->split = 2;
  m->box[m->outer] = 128;
  cr_assert(strstr(verify_msg(a, f), "do not each store a block"));
  arena_free(a);
  a = arena_new();
  char *ws = ptx_entry(a, module_ptx(a, "attention", ATTN_D128, ARCH_SM90A), "attention__ws");
  /* the warpgroup's barrier before and after its staging writes, and no barrier of both */
  cr_assert_eq(count(ws, "barrier.sync"), 2);
  cr_assert_eq(count(ws, "barrier.sync \t%r"), 2);
  cr_assert_eq(count(ws, ".global.shared::cta.bulk_group"), 2, "two 64-column boxes of the warpgroup's rows");
  /* one warpgroup: the whole tile, the consumers' barrier (TILEC_STORE_SPLIT=0 too) */
  f = scheduled_with(a, "attention", ATTN_D128, ARCH_SM90A, "TILEC_STORE_SPLIT", "0", &d);
  cr_assert_eq(f->sched->tmaps[f->sched->ntmaps - 1].split, 1);
  cr_assert_eq(f->sched->tmaps[f->sched->ntmaps - 1].box[2], 128);
  static const char *gemm_one_wg[] = {"BM=64", "BN=128", "BK=64", "WARPS=4", "STAGES=3", NULL};
  f = scheduled(a, "gemm", gemm_one_wg, ARCH_SM90A, &d);
  for (int t = 0; t < f->sched->ntmaps; t++)
    cr_assert_eq(f->sched->tmaps[t].store ? f->sched->tmaps[t].split : 1, 1);
  arena_free(a);
}

/* The split store's few registers made GEMM + GELU's 128 x 256 entry spill 8 bytes: where ptxas
 * says so the module is compiled again with whole-tile stores (the box of all 128 rows); the
 * bias + relu GEMM keeps its split (64-row boxes). */
Test(schedule, a_spilling_split_store_goes_whole) {
  if (!have_ptxas())
    return; /* the retry needs ptxas's word */
  Arena *a = arena_new();
  static const char *gelu[] = {"BM=128", "BN=256", "BK=64", "WARPS=8", "STAGES=3", "ACT=2", NULL};
  /* (with idle bands, whose second copy of the loop moves ptxas's allocation, the split store
   * fits: the retry is shown without them) */
  setenv("TILEC_IDLE_BANDS", "0", 1);
  char *ptx = module_ptx(a, "gemm", gelu, ARCH_SM90A);
  unsetenv("TILEC_IDLE_BANDS");
  cr_assert(strstr(ptx, "// tilec: tmap C swizzle 128 box 128 64"), "whole-tile store");
  cr_assert_eq(ptxas_spill_bytes(a, ptxas_find(a), ptx, ARCH_SM90A, "__ws"), 0);
  ptx = module_ptx(a, "gemm", GEMM_S3, ARCH_SM90A);
  cr_assert(strstr(ptx, "// tilec: tmap C swizzle 128 box 64 64"), "a store per warpgroup");
  /* in bf16 every plan with idle bands spills 4 bytes: the plans again without them */
  static const char *gelu_bf16[] = {"T=bf16", "BM=128", "BN=256", "BK=64", "WARPS=8", "STAGES=3", "ACT=2", NULL};
  cr_assert_eq(ptxas_spill_bytes(a, ptxas_find(a), module_ptx(a, "gemm", gelu_bf16, ARCH_SM90A), ARCH_SM90A, "__ws"), 0);
  arena_free(a);
}

/* Layernorm backward reads a row's Mean and Rstd from global memory in its loop body: they are
 * lookahead loads (TirPipe.lookahead), issued one iteration ahead at the top of the body, so the
 * first reaches the PTX before the loop's first stage wait; TILEC_LOOKAHEAD=0 leaves them where
 * the body reads them. The ring tiles X and dY stay ring loads. */
static const char *LNB_R1[] = {"BLOCK=4096", "ROWS=1", "CHUNK=32", "WARPS=8", "STAGES=4", NULL};

Test(schedule, row_statistics_load_one_iteration_ahead) {
  Arena *a = arena_new();
  Diag d;
  TirFunc *f = scheduled(a, "layernorm_backward", LNB_R1, ARCH_SM90A, &d);
  const TirPipe *p = &f->sched->pipes[0];
  cr_assert_eq(p->nloads, 2);
  cr_assert_eq(p->nlookahead, 2);
  for (int l = 0; l < 2; l++) {
    const TirInst *in = &f->insts[p->lookahead[l]];
    cr_assert_eq(in->op, TIR_LOAD);
    cr_assert_neq(f->regs[in->dst].type.place, PLACE_SHARED);
  }
  cr_assert_str_eq(f->args[f->insts[p->lookahead[0]].arg_index].name, "Rstd");
  cr_assert_str_eq(f->args[f->insts[p->lookahead[1]].arg_index].name, "Mean");
  cr_assert_str_eq(verify_msg(a, f), "");
  cr_assert_eq(p->lookahead_dist, 1, "one iteration ahead by default");
  f = scheduled_with(a, "layernorm_backward", LNB_R1, ARCH_SM90A, "TILEC_LOOKAHEAD", "0", &d);
  cr_assert_eq(f->sched->pipes[0].nlookahead, 0);
  f = scheduled_with(a, "layernorm_backward", LNB_R1, ARCH_SM90A, "TILEC_LOOKAHEAD", "9", &d);
  cr_assert_eq(f->sched->pipes[0].lookahead_dist, 3, "at most as far as the ring's copies (4 stages)");
  cr_assert_eq(f->sched->pipes[0].nlookahead, 2);
  f->sched->pipes[0].lookahead_dist = 4;
  cr_assert(strstr(verify_msg(a, f), "lookahead loads 4 iterations ahead"));

  char *ptx = module_ptx(a, "layernorm_backward", LNB_R1, ARCH_SM90A), *e = ptx_entry(a, ptx, "layernorm_backward");
  cr_assert(e && strstr(e, "ld.global.f32") && strstr(e, "ld.global.f32") < strstr(e, "cp.async.wait_group"),
            "the first row's statistics load before the loop");
  ptxas_assert_clean(ptx, ARCH_SM90A);
  e = module_entry_with(a, "layernorm_backward", LNB_R1, "layernorm_backward", "TILEC_LOOKAHEAD", "0");
  cr_assert(strstr(e, "ld.global.f32") > strstr(e, "cp.async.wait_group"), "TILEC_LOOKAHEAD=0: in the body");
  arena_free(a);
}

/* The verifier's rules for lookahead loads: a register tile's only write, of a tensor the kernel
 * never writes, read only after it inside its loop. */
Test(schedule, verifier_rejects_broken_lookahead_loads) {
  Arena *a = arena_new();
  Diag d;
  TirFunc *f = scheduled(a, "layernorm_backward", LNB_R1, ARCH_SM90A, &d);
  TirPipe *p = &f->sched->pipes[0];
  int mean = p->lookahead[1];
  p->lookahead[1] = p->loads[0]; /* X's ring tile is shared */
  cr_assert(strstr(verify_msg(a, f), "not the only top-level write of its register tile"));
  p->lookahead[1] = mean;
  int arg = f->insts[mean].arg_index;
  for (int k = 0; k < f->nargs; k++)
    if (!strcmp(f->args[k].name, "dX"))
      f->insts[mean].arg_index = k;
  cr_assert(strstr(verify_msg(a, f), "a tensor the kernel writes"));
  f->insts[mean].arg_index = arg;
  f->insts[p->lookahead[0]].dst = f->insts[mean].dst; /* a second write of Mean's register */
  cr_assert(strstr(verify_msg(a, f), "not the only top-level write"));
  arena_free(a);
}

/* Early scalar loads (hoist_scalar_loads): a top-level scalar load of a tensor the kernel never
 * writes moves up to just below the last statement writing one of its operands, or the shared
 * copy before it; a load of a written tensor, and one whose index a loop computes, stay. */
static const char *HOIST_SRC =
    "kernel hoist(X: f32[M, N], idx: i32[M], w: f32[M], Y: out f32[M], Z: out f32[M])\n"
    "  grid (M) threads (128)\n"
    "{\n"
    "  require N <= 1024;\n"
    "  let r = block.x;\n"
    "  shared xs = X[r, 0 : +1024];\n"
    "  reg acc: f32[256] = 0;\n"
    "  for c0 in 0 .. N step 256 { acc += xs[c0 : +256]; }\n"
    "  let s = sum(acc, 0);\n"
    "  Y[r : +1] = s;\n"
    "  let i = idx[r];\n"
    "  let xi = X[r, i];\n"
    "  let k = to(i32, s);\n"
    "  let wk = w[k];\n"
    "  let y = Y[r];\n"
    "  Z[r : +1] = xi + wk + y;\n"
    "}\n";

static int find_load_of(const TirFunc *f, const char *arg) {
  for (int j = 0; j < f->ninsts; j++)
    if (f->insts[j].op == TIR_LOAD && !strcmp(f->args[f->insts[j].arg_index].name, arg))
      return j;
  return -1;
}

/* f scheduled for sm_90a's cp.async entry, on wgmma where every DOT allows it. */
static TirFunc *sm90a_scheduled(TirFunc *f, Diag *d) {
  bool wgmma = layout_kernel_uses_wgmma(f);
  cr_assert(layout_assign_wgmma(f, d, wgmma));
  SchedOptions o = {.arch = ARCH_SM90A, .wgmma = wgmma, .stage_cap = 8};
  TirFunc *g = tir_schedule(f, &o, d);
  cr_assert(g);
  return g;
}

static TirFunc *hoist_scheduled(Arena *a, Diag *d) {
  return sm90a_scheduled(source_tir(a, "hoist.tile", HOIST_SRC, NULL, ARCH_SM90A, d), d);
}

Test(schedule, scalar_loads_move_up_to_their_operands) {
  Arena *a = arena_new();
  Diag d;
  TirFunc *f = hoist_scheduled(a, &d);
  int copy = find_load_of(f, "X"), idx = find_load_of(f, "idx"), first_for = find_op(f, 0, TIR_FOR);
  cr_assert_eq(f->regs[f->insts[copy].dst].type.place, PLACE_SHARED, "X's first load is the row's copy");
  cr_assert_eq(idx, copy + 1, "idx[r] right below the copy");
  const TirInst *xi = &f->insts[idx + 1];
  cr_assert(xi->op == TIR_LOAD && !strcmp(f->args[xi->arg_index].name, "X") && tir_inst_reads(xi, f->insts[idx].dst),
            "X[r, i] right below the load of i");
  cr_assert_lt(idx + 1, first_for, "both above the loop");
  int w = find_load_of(f, "w"), y = find_load_of(f, "Y"), endfor = find_op(f, first_for, TIR_ENDFOR);
  cr_assert_gt(w, endfor, "w[k]: k comes from the loop's sum");
  cr_assert_gt(y, endfor, "Y is written by the kernel");
  cr_assert_eq(tir_only_write(f, f->insts[w].index[0].start), w - 1, "w[k] right below the conversion making k");
  cr_assert_str_eq(tir_verify_message(a, f, &d), "");

  /* the two-pass kernel's label follows a pipelined loop: it stays below it */
  TirFunc *two = scheduled(a, "cross_entropy_backward", NULL, ARCH_SM90A, &d);
  cr_assert_gt(find_load_of(two, "label"), find_op(two, find_op(two, 0, TIR_FOR), TIR_ENDFOR));

  setenv("TILEC_EARLY_LOADS", "0", 1);
  TirFunc *g = hoist_scheduled(a, &d);
  unsetenv("TILEC_EARLY_LOADS");
  cr_assert_gt(find_load_of(g, "idx"), find_op(g, 0, TIR_ENDFOR), "TILEC_EARLY_LOADS=0: where the source has it");
  arena_free(a);
}

/* In the PTX: cross-entropy backward's label load issues before the wait for the row's copy. */
Test(schedule, cross_entropy_label_loads_before_the_copy_wait) {
  Arena *a = arena_new();
  static const char *defs[] = {"BLOCK=4096", "C=1024", "WARPS=4", NULL};
  Diag d;
  TirFunc *f = source_tir_kernel(a, "cross_entropy_backward", example_text(a, "cross_entropy_backward"), defs,
                                 ARCH_SM90A, 1, &d);
  NvptxOptions o = {.arch = ARCH_SM90A, .opt_level = 3};
  char *ptx = nvptx_compile(f, &o, &d, NULL);
  cr_assert(ptx);
  char *e = ptx_entry(a, ptx, "cross_entropy_backward_row");
  cr_assert(e && strstr(e, "ld.global.u32") && strstr(e, "cp.async.wait"));
  cr_assert_lt(strstr(e, "ld.global.u32"), strstr(e, "cp.async.wait"));
  ptxas_assert_clean(ptx, ARCH_SM90A);
  arena_free(a);
}

/* Progressive copies (TirSchedule.progs): cross-entropy backward's row copy is committed in 8
 * parts of 4096 columns, one per window of its first loop, which waits for each as it goes. */
static const char *XENT_ROW[] = {"BLOCK=32768", "C=4096", "WARPS=8", NULL};

/* Progressive copies wait for parts by the loop's constant start: with the loops as written
 * (tir_align moves them to the row's boundary, a start it cannot know). */
static TirFunc *xent_row_scheduled(Arena *a, Diag *d) {
  setenv("TILEC_PROGRESSIVE", "8", 1);
  setenv("TILEC_ALIGN_WINDOWS", "0", 1);
  TirFunc *f = source_tir_kernel(a, "cross_entropy_backward", example_text(a, "cross_entropy_backward"), XENT_ROW,
                                 ARCH_SM90A, 1, d);
  unsetenv("TILEC_ALIGN_WINDOWS");
  cr_assert(layout_assign_wgmma(f, d, false));
  SchedOptions o = {.arch = ARCH_SM90A, .stage_cap = 8};
  TirFunc *g = tir_schedule(f, &o, d);
  unsetenv("TILEC_PROGRESSIVE");
  cr_assert(g);
  g_src = d->file;
  return g;
}

/* (Opt-in, TILEC_PROGRESSIVE=P: no faster on the H200, runs ab2, ab3.) */
Test(schedule, row_copy_lands_in_parts) {
  Arena *a = arena_new();
  Diag d;
  TirFunc *f = xent_row_scheduled(a, &d);
  const TirSchedule *s = f->sched;
  cr_assert_eq(s->nprogs, 1);
  const TirProgressive *pg = &s->progs[0];
  cr_assert_eq(pg->parts, 8, "32768 columns in windows of 4096");
  cr_assert_eq(f->regs[f->insts[pg->load].dst].type.place, PLACE_SHARED);
  cr_assert_eq(pg->loop, find_op(f, 0, TIR_FOR), "the first loop (the running max)");
  cr_assert_str_eq(verify_msg(a, f), "");

  TirFunc *k = source_tir_kernel(a, "cross_entropy_backward", example_text(a, "cross_entropy_backward"), XENT_ROW,
                                 ARCH_SM90A, 1, &d);
  cr_assert(layout_assign_wgmma(k, &d, false));
  SchedOptions so = {.arch = ARCH_SM90A, .stage_cap = 8};
  cr_assert_eq(tir_schedule(k, &so, &d)->sched->nprogs, 0, "off by default: one group");

  NvptxOptions o = {.arch = ARCH_SM90A, .opt_level = 3};
  setenv("TILEC_ALIGN_WINDOWS", "0", 1);
  k = source_tir_kernel(a, "cross_entropy_backward", example_text(a, "cross_entropy_backward"), XENT_ROW, ARCH_SM90A,
                        1, &d);
  unsetenv("TILEC_ALIGN_WINDOWS");
  setenv("TILEC_PROGRESSIVE", "8", 1);
  char *ptx = nvptx_compile(k, &o, &d, NULL), *e = ptx_entry(a, ptx, "cross_entropy_backward_row");
  unsetenv("TILEC_PROGRESSIVE");
  cr_assert(e);
  cr_assert_eq(count(e, "cp.async.commit_group"), 8);
  for (int n = 0; n < 8; n++)
    cr_assert(strstr(e, arena_printf(a, "cp.async.wait_group %d;", n)), "a wait for part %d", 7 - n);
  cr_assert_lt(strstr(e, "cp.async.wait_group 7;"), strstr(e, "cp.async.wait_all"), "in the first loop, before the second's");
  ptxas_assert_clean(ptx, ARCH_SM90A);
  arena_free(a);
}

/* The verifier's rules for progressive copies. */
Test(schedule, verifier_rejects_broken_progressive_copies) {
  Arena *a = arena_new();
  Diag d;
  TirFunc *f = xent_row_scheduled(a, &d);
  TirProgressive *pg = &f->sched->progs[0];
  pg->parts = 3;
  cr_assert(strstr(verify_msg(a, f), "a progressive copy in 3 parts"));
  pg->parts = 8;
  int loop = pg->loop;
  pg->loop = find_op(f, tir_region_end(f, loop), TIR_FOR); /* the second loop: not the first reader */
  cr_assert(strstr(verify_msg(a, f), "is not read first by this loop"));
  pg->loop = loop;
  pg->load = loop;
  cr_assert(strstr(verify_msg(a, f), "not a top-level LOAD of a rank-1 shared tile"));
  arena_free(a);
}

/* A shared tile whose first reader reads it whole (not through windows at a loop counter) is
 * copied in one group. */
Test(schedule, whole_tile_reads_are_not_progressive) {
  Arena *a = arena_new();
  Diag d;
  static const char *src =
      "kernel whole(X: f32[M, N], Y: out f32[M]) grid (M) threads (128)\n"
      "{\n"
      "  require N <= 4096;\n"
      "  let r = block.x;\n"
      "  shared xs = X[r, 0 : +4096];\n"
      "  reg acc: f32[512] = 0;\n"
      "  for c0 in 0 .. N step 512 { acc += xs[c0 : +512] + xs[0 : +512]; }\n"
      "  Y[r : +1] = sum(acc, 0);\n"
      "}\n";
  TirFunc *f = source_tir(a, "whole.tile", src, NULL, ARCH_SM90A, &d);
  cr_assert(layout_assign_wgmma(f, &d, false));
  SchedOptions o = {.arch = ARCH_SM90A, .stage_cap = 8};
  setenv("TILEC_PROGRESSIVE", "8", 1);
  cr_assert_eq(tir_schedule(f, &o, &d)->sched->nprogs, 0, "a window at 0 in every iteration");
  unsetenv("TILEC_PROGRESSIVE");
  arena_free(a);
}

/* A weight gradient X^T dY (bench/user/wgrad.tile): X's tile read in place as wgmma's MN-major
 * operand A keeps the GEMM loop's overlap and gets the warp-specialized entry; with
 * TILEC_TRANS_A=0 the TRANS goes through registers, which the next iteration would rewrite while
 * the previous group reads them: no overlap (run ai1 measured NaNs with it, 8192 x 4096 x 4096). */
static TirFunc *wgrad_scheduled(Arena *a, Diag *d) {
  TirFunc *f = source_tir(a, "bench/user/wgrad.tile", file_text(a, "bench/user/wgrad.tile"), NULL, ARCH_SM90A, d);
  cr_assert(layout_kernel_uses_wgmma(f), "a transposed A keeps the kernel on wgmma");
  return sm90a_scheduled(f, d);
}

Test(schedule, transposed_a_in_place_overlaps_and_through_registers_does_not) {
  Arena *a = arena_new();
  Diag d;
  TirFunc *f = wgrad_scheduled(a, &d);
  cr_assert_geq(f->sched->pipes[0].overlap_dot, 0, "in place: the dot stays in flight");
  cr_assert(f->sched->ws, "in place: TMA boxes for both tiles");
  setenv("TILEC_TRANS_A", "0", 1);
  TirFunc *g = wgrad_scheduled(a, &d);
  unsetenv("TILEC_TRANS_A");
  cr_assert_eq(g->sched->pipes[0].overlap_dot, -1, "A in registers: no overlap");
  cr_assert(!g->sched->ws);
  arena_free(a);
}

/* The warp-specialized entry trades a ring stage for the epilogue's TMA store: a 128 x 256 x 64
 * GEMM at `pipeline 4` (4 x 48 KB) has no room for its 64 KB staging tile; at 3 stages it does
 * (a weight gradient ran 9% faster so, run ai2). Attention's loops (two DOTs) are left alone. */
Test(schedule, a_ring_stage_traded_for_the_tma_store) {
  Arena *a = arena_new();
  Diag d;
  static const char *s4[] = {"BM=128", "BN=256", "BK=64", "WARPS=8", "STAGES=4", NULL};
  TirFunc *f = scheduled_as(a, "gemm", s4, ARCH_SM90A, true, &d);
  cr_assert_eq(f->sched->pipes[0].stages, 3);
  cr_assert_eq(f->sched->nstores, 1);
  cr_assert(f->sched->ring_for_stores);
  TirFunc *g = scheduled_as_with(a, "gemm", s4, ARCH_SM90A, true, "TILEC_STORE_RING", "0", &d);
  cr_assert_eq(g->sched->pipes[0].stages, 4);
  cr_assert_eq(g->sched->nstores, 0, "as written: no room for the staging tile");
  TirFunc *h = scheduled(a, "gemm", s4, ARCH_SM90A, &d);
  cr_assert_eq(h->sched->pipes[0].stages, 4, "the cp.async entry keeps its ring");
  /* the metadata lists the ws entry's own tensor maps: C's too (run ai3 launched it with two, as
   * the cp.async entry's schedule has, and the launch failed) */
  char *ptx = module_ptx(a, "gemm", s4, ARCH_SM90A);
  cr_assert(strstr(ptx, "// tilec: tmap C swizzle 128 box 64 64\n"));
  cr_assert_eq(count(ptx_entry(a, ptx, "gemm__ws"), ".param .align 64 .b8"), 3, "three tensor maps");
  static const char *attn[] = {"D=128", "BM=128", "BN=128", "WARPS=8", "STAGES=3", NULL};
  TirFunc *t = scheduled_as(a, "attention", attn, ARCH_SM90A, true, &d);
  cr_assert_eq(t->sched->pipes[0].stages, 3);
  cr_assert(!t->sched->ring_for_stores);
  arena_free(a);
}

/* Where trans(x) cannot be read in place as operand A, it goes through registers and the kernel
 * stays on wgmma, without the overlap: the TRANS before the loop that reads it (not a view: a
 * loop boundary lies between), the transpose of a register tile, of a shared tile the kernel
 * computes. Before these rules the first read a swizzled tile at a zero row pitch and the other
 * two left wgmma (review of session ai). */
static const char *TRANS_A_OUTSIDE =
    "kernel k(X: f16[K, M], Y: f16[K, N], C: out f32[M, N])\n"
    "  grid (cdiv(N, 64), cdiv(M, 64)) threads (128)\n"
    "{\n"
    "  shared x = X[0 : +64, block.y * 64 : +64];\n"
    "  reg xt = trans(x);\n"
    "  reg acc: f32[64, 64] = 0;\n"
    "  for n0 in 0 .. N step 64 pipeline 3 { shared y = Y[0 : +64, n0 : +64]; acc += dot(xt, y); }\n"
    "  C[block.y * 64 : +64, block.x * 64 : +64] = acc;\n"
    "}\n";
static const char *TRANS_A_OF_REGS =
    "kernel k(X: f16[T, M], Y: f16[T, N], C: out f32[M, N])\n"
    "  grid (cdiv(N, 64), cdiv(M, 64)) threads (128)\n"
    "{\n"
    "  reg acc: f32[64, 64] = 0;\n"
    "  for t0 in 0 .. T step 64 pipeline 3 {\n"
    "    reg xr = X[t0 : +64, block.y * 64 : +64];\n"
    "    %s x%s = xr * xr;\n"
    "    shared y = Y[t0 : +64, block.x * 64 : +64];\n"
    "    acc += dot(trans(x), y);\n"
    "  }\n"
    "  C[block.y * 64 : +64, block.x * 64 : +64] = acc;\n"
    "}\n";

Test(schedule, transposed_a_not_in_place_goes_through_registers_on_wgmma) {
  Arena *a = arena_new();
  Diag d;
  const char *srcs[3] = {TRANS_A_OUTSIDE, arena_printf(a, TRANS_A_OF_REGS, "reg", ""),
                         arena_printf(a, TRANS_A_OF_REGS, "shared", ": f16[64, 64]")};
  for (int k = 0; k < 3; k++) {
    TirFunc *f = source_tir(a, "k.tile", srcs[k], NULL, ARCH_SM90A, &d);
    cr_assert(layout_kernel_uses_wgmma(f), "source %d stays on wgmma", k);
    int tr = find_op(f, 0, TIR_TRANS);
    cr_assert(!layout_trans_a_in_place(f, tr), "source %d: A through registers", k);
    TirFunc *g = sm90a_scheduled(f, &d);
    cr_assert_eq(g->sched->pipes[0].overlap_dot, -1, "source %d: registers the next iteration rewrites", k);
    char *ptx = source_ptx(a, "k.tile", srcs[k], NULL, ARCH_SM90A);
    cr_assert(strstr(ptx, "wgmma.mma_async"), "source %d", k);
    cr_assert(!strstr(ptx, "mma.sync"), "source %d", k);
  }
  arena_free(a);
}

/* A 192-row query tile over 16 warps (FlashAttention-3's d64 tile): the wgmma rows pad to 256, so
 * the fourth warpgroup holds only padding. The warp-specialized entry leaves it out: 3 consumer
 * warpgroups at 160 registers (not 4 at 120: 128 x 24 + 384 x 160 fit the 512 x 128 the block is
 * launched with), turns over 3, Q by TMA into the first 192 of its 256 rows. The cp.async entry
 * keeps the kernel's 512 threads; a 256-row tile keeps 4 warpgroups; TILEC_IDLE_WARPGROUPS=0
 * keeps them all; and the verifier refuses a schedule that leaves out a warpgroup holding rows. */
Test(schedule, idle_warpgroups_left_out) {
  static const char *bm192[] = {"D=64", "BM=192", "BN=128", "WARPS=16", "STAGES=3", "CAUSAL=1", NULL};
  static const char *bm256[] = {"D=64", "BM=256", "BN=64", "WARPS=16", "STAGES=3", "CAUSAL=1", NULL};
  Arena *a = arena_new();
  Diag d;
  TirFunc *f = scheduled_as(a, "attention", bm192, ARCH_SM90A, true, &d);
  const TirSchedule *s = f->sched;
  cr_assert(s->ws);
  cr_expect_eq(s->consumer_threads, 384);
  cr_expect_eq(s->consumer_regs, 160);
  cr_expect_eq(s->producer_regs, 24);
  cr_expect_eq(s->turns, s->pipes[0].rotated ? 3 : 0);
  cr_assert_eq(s->nheads, 1, "Q lands by TMA");
  cr_expect_eq(s->tmaps[s->pipes[0].nloads].rows, 192, "the box fills 192 of Q's 256 rows");
  cr_expect_str_eq(verify_msg(a, f), "");
  cr_expect_eq(scheduled(a, "attention", bm192, ARCH_SM90A, &d)->sched->consumer_threads, 512, "the cp.async entry");
  TirFunc *all = scheduled_as_with(a, "attention", bm192, ARCH_SM90A, true, "TILEC_IDLE_WARPGROUPS", "0", &d);
  cr_expect_eq(all->sched->consumer_threads, 512);
  TirFunc *g = scheduled_as(a, "attention", bm256, ARCH_SM90A, true, &d);
  cr_expect_eq(g->sched->consumer_threads, 512, "256 rows: every warpgroup holds 64");
  g->sched->consumer_threads = 384;
  g->sched->turns = 3;
  const char *msg = verify_msg(a, g);
  cr_expect(strstr(msg, "384 consumer threads, yet the warpgroups past them hold tile elements"), "%s", msg);
  char *ptx = module_ptx(a, "attention", bm192, ARCH_SM90A);
  cr_expect(strstr(ptx, "// tilec: ws attention__ws threads 512 "), "3 consumer warpgroups and the producer");
  cr_expect(strstr(ptx, "setmaxnreg.inc.sync.aligned.u32 160;"));
  /* P rounded where the softmax makes it: the rotated loop fits 160 registers, and its turns pass
   * over 3 warpgroups */
  setenv("TILEC_CVT_PACK", "0", 1);
  char *mod = module_ptx(a, "attention", bm192, ARCH_SM90A), *rot = ptx_entry(a, mod, "attention__ws");
  unsetenv("TILEC_CVT_PACK");
  cr_assert(rot);
  cr_expect(strstr(rot, "bar.arrive"), "the rotated loop's turns");
  ptxas_assert_clean(mod, ARCH_SM90A);
  arena_free(a);
}

/* A warp-specialized entry ptxas refuses under every plan (4 consumer warpgroups and the producer,
 * 640 threads, launch with 96 registers; m64n192 needs 122: C7602) is left out, so the module
 * still loads and runs its cp.async entry (3 consumers keep theirs: idle_warpgroups_left_out). */
Test(schedule, an_entry_ptxas_refuses_is_left_out) {
  if (!have_ptxas())
    return; /* the refusal is ptxas's word */
  Arena *a = arena_new();
  static const char *wide[] = {"D=64", "BM=256", "BN=192", "WARPS=16", NULL};
  char *ptx = module_ptx(a, "attention", wide, ARCH_SM90A);
  cr_expect(!strstr(ptx, "// tilec: ws "));
  char *why = ptxas_refusal(a, ptxas_find(a), ptx, ARCH_SM90A);
  cr_expect(!why, "ptxas refuses the module: %s", why); /* (the cp.async entry spills: a tile for wgmma) */
  arena_free(a);
}

/* A ring whose every element is read by the thread that copies it in (layernorm backward's X and
 * dY rows: no replicas in their layout, read only by conversions) is thread-private where
 * TILEC_PRIVATE_RING=1 asks: its wait is the thread's own cp.async wait, and the row's two sums,
 * whose slots alternate by iteration, are the loop's one barrier. A DOT reads its operands
 * across threads: GEMM's ring is not, and the verifier refuses the claim. */
Test(schedule, a_ring_read_by_its_copiers_has_no_barrier_at_its_wait) {
  Arena *a = arena_new();
  Diag d;
  TirFunc *f = scheduled_with(a, "layernorm_backward", LNB_R1, ARCH_SM90A, "TILEC_PRIVATE_RING", "1", &d);
  cr_assert(f->sched->pipes[0].thread_private);
  cr_assert_str_eq(verify_msg(a, f), "");
  f = scheduled(a, "layernorm_backward", LNB_R1, ARCH_SM90A, &d);
  cr_assert_not(f->sched->pipes[0].thread_private, "opt-in");
  setenv("TILEC_PRIVATE_RING", "1", 1);
  TirFunc *gemm = scheduled(a, "gemm", GEMM_BIG, ARCH_SM80, &d);
  unsetenv("TILEC_PRIVATE_RING");
  cr_assert_not(gemm->sched->pipes[0].thread_private, "the dot reads other threads' copies");
  gemm->sched->pipes[0].thread_private = true;
  cr_assert(strstr(verify_msg(a, gemm), "thread-private but a thread reads ring elements another copies"));

  setenv("TILEC_LOOP_VERSIONS", "0", 1); /* one loop, so the barriers counted are its */
  char *e = module_entry_with(a, "layernorm_backward", LNB_R1, "layernorm_backward", "TILEC_PRIVATE_RING", "1");
  char *shared = module_entry_with(a, "layernorm_backward", LNB_R1, "layernorm_backward", "TILEC_PRIVATE_RING", "0");
  unsetenv("TILEC_LOOP_VERSIONS");
  cr_assert_eq(count(e, "bar.sync"), count(shared, "bar.sync") - 1, "the ring's barrier is gone");
  char *wait = strstr(e, "cp.async.wait_group"), *sums = wait ? strstr(wait, "shfl.sync.bfly") : NULL;
  char *bar = wait ? strstr(wait, "bar.sync") : NULL;
  cr_assert(sums && bar > sums, "no barrier between the wait and the sums");
  cr_assert(strstr(e, "selp.b64"), "the sums' slots by the iteration's parity");
  if (have_ptxas()) {
    setenv("TILEC_PRIVATE_RING", "1", 1);
    char *ptx = module_ptx(a, "layernorm_backward", LNB_R1, ARCH_SM90A);
    unsetenv("TILEC_PRIVATE_RING");
    ptxas_assert_clean(ptx, ARCH_SM90A);
  }
  arena_free(a);
}

/* A pipelined loop with a loop inside is never thread-private (its reductions' slots go by its
 * own parity, which an inner loop's would overlap); the inner loop, with none inside, may be. */
static const char *NESTED_RINGS_SRC =
    "kernel nested<BN = 1024, WARPS = 4>(X: f16[M, N], Y: f16[M, N], O: out f32[M], P: out f32[M])\n"
    "  grid (1) threads (WARPS * 32)\n"
    "{\n"
    "  for r in 0 .. M step 1 pipeline 2 {\n"
    "    shared xs = X[r : +1, 0 : +BN];\n"
    "    O[r : +1] = sum(to_f32(xs), 1);\n"
    "    reg acc: f32[1, BN] = 0;\n"
    "    for c in 0 .. N step BN pipeline 2 {\n"
    "      shared ys = Y[r : +1, c : +BN];\n"
    "      acc += to_f32(ys);\n"
    "    }\n"
    "    P[r : +1] = sum(acc, 1);\n"
    "  }\n"
    "}\n";

Test(schedule, a_ring_around_a_loop_keeps_its_barrier) {
  Arena *a = arena_new();
  Diag d;
  setenv("TILEC_PRIVATE_RING", "1", 1);
  TirFunc *f = sm90a_scheduled(source_tir(a, "nested.tile", NESTED_RINGS_SRC, NULL, ARCH_SM90A, &d), &d);
  unsetenv("TILEC_PRIVATE_RING");
  cr_assert_eq(f->sched->npipes, 2);
  cr_assert_not(f->sched->pipes[0].thread_private, "the outer loop holds a loop");
  cr_assert(f->sched->pipes[1].thread_private);
  cr_assert_str_eq(verify_msg(a, f), "");
  f->sched->pipes[0].thread_private = true;
  cr_assert(strstr(verify_msg(a, f), "pipe 0 is thread-private"));
  arena_free(a);
}

/* Idle bands (TirSchedule.band_rows): a 192-row d128 query tile hands O's accumulator and the
 * row statistics on in bands of 64 rows, one per consumer warpgroup, to the epilogue, which keeps
 * rows apart and stores at rows m0 + i of N; so a warpgroup whose band starts at or past N runs
 * only the loop's protocol. The verifier recomputes the plan; TILEC_IDLE_BANDS=0: none. */
Test(schedule, attention_bm192_idle_bands) {
  static const char *defs[] = {"D=128", "BM=192", "BN=128", "WARPS=16", NULL};
  Arena *a = arena_new();
  Diag d;
  TirFunc *f = scheduled_as(a, "attention", defs, ARCH_SM90A, true, &d);
  TirSchedule *s = f->sched;
  cr_assert_eq(s->consumer_threads, 384);
  cr_assert_eq(s->band_rows, 64);
  cr_assert_str_eq(f->dims[s->band_dim].name, "N");
  cr_assert_str_eq(f->regs[s->band_row0].name, "m0");
  cr_assert(s->rotate_x, "a persistent walk x first: x rotated by y");
  cr_assert_str_eq(verify_msg(a, f), "");
  s->band_rows = 32;
  cr_assert(strstr(verify_msg(a, f), "idle bands of 32 rows"), "the verifier recomputes the plan");
  arena_free(a);
  a = arena_new();
  f = scheduled_as_with(a, "attention", defs, ARCH_SM90A, true, "TILEC_IDLE_BANDS", "0", &d);
  cr_assert_eq(f->sched->band_rows, 0);
  cr_assert(!f->sched->rotate_x);
  static const char *causal[] = {"D=128", "BM=192", "BN=128", "WARPS=16", "CAUSAL=1", NULL};
  f = scheduled_as(a, "attention", causal, ARCH_SM90A, true, &d);
  cr_assert(f->sched->walk_rows && f->sched->band_rows == 64 && !f->sched->rotate_x, "a row walk keeps its order");
  arena_free(a);
}

/* A GEMM whose epilogue also sums the accumulator's columns (across rows, so across the
 * warpgroups' bands) keeps every warpgroup on the whole loop: an idle one's rows would reach the
 * sums. Without the sums its ragged last tiles get idle bands (M rows from m0). */
static const char *COLSUM_SRC =
    "kernel colsum<BM = 128, BN = 128, BK = 64, WARPS = 8, SUMS = 1>(\n"
    "    A: f16[M, K], B: f16[K, N], C: out f32[M, N], S: out f32[N])\n"
    "  grid (cdiv(N, BN), cdiv(M, BM)) threads (WARPS * 32)\n"
    "{\n"
    "  let m0 = block.y * BM;\n"
    "  let n0 = block.x * BN;\n"
    "  reg acc: f32[BM, BN] = 0;\n"
    "  for k0 in 0 .. K step BK pipeline 3 {\n"
    "    shared a = A[m0 : +BM, k0 : +BK];\n"
    "    shared b = B[k0 : +BK, n0 : +BN];\n"
    "    acc += dot(a, b);\n"
    "  }\n"
    "  C[m0 : +BM, n0 : +BN] = acc;\n"
    "  if SUMS == 1 { atomic_add(S[n0 : +BN], sum(acc, 0)); }\n"
    "}\n";

Test(schedule, idle_bands_stop_at_sums_across_rows) {
  static const char *sums[] = {"SUMS=1", NULL}, *plain[] = {"SUMS=0", NULL};
  Arena *a = arena_new();
  Diag d;
  TirFunc *f = source_tir(a, "colsum.tile", COLSUM_SRC, sums, ARCH_SM90A, &d);
  cr_assert(layout_assign_wgmma(f, &d, layout_kernel_uses_wgmma(f)));
  SchedOptions o = {.arch = ARCH_SM90A, .wgmma = true, .stage_cap = 8, .ws_entry = true, .rotate = true};
  TirFunc *g = tir_schedule(f, &o, &d);
  cr_assert(g && g->sched->ws);
  cr_assert_eq(g->sched->band_rows, 0, "column sums mix the bands");
  f = source_tir(a, "colsum.tile", COLSUM_SRC, plain, ARCH_SM90A, &d);
  cr_assert(layout_assign_wgmma(f, &d, layout_kernel_uses_wgmma(f)));
  g = tir_schedule(f, &o, &d);
  cr_assert(g && g->sched->ws);
  cr_assert_eq(g->sched->band_rows, 64);
  cr_assert_str_eq(g->dims[g->sched->band_dim].name, "M");
  arena_free(a);
}

/* In the PTX: the idle warpgroups' copy of the loop waits, releases and takes its turns like the
 * whole loop (more of each), issues no wgmma of its own, and ptxas keeps the others' wgmmas
 * asynchronous behind the branch (its condition comes through lane 0's shuffle: warp-uniform). */
Test(schedule, idle_bands_in_the_ptx) {
  Arena *a = arena_new();
  setenv("TILEC_ROTATE", "1", 1);
  setenv("TILEC_IDLE_BANDS", "0", 1);
  char *plain = ptx_entry(a, module_ptx(a, "attention", ATTN_ROT, ARCH_SM90A), "attention__ws");
  unsetenv("TILEC_IDLE_BANDS");
  char *ptx = module_ptx(a, "attention", ATTN_ROT, ARCH_SM90A);
  unsetenv("TILEC_ROTATE");
  char *ws = ptx_entry(a, ptx, "attention__ws");
  cr_assert(plain && ws);
  cr_assert_eq(count(ws, "wgmma.mma_async"), count(plain, "wgmma.mma_async"));
  cr_assert_gt(count(ws, "mbarrier.try_wait"), count(plain, "mbarrier.try_wait"));
  cr_assert_gt(count(ws, "mbarrier.arrive.shared"), count(plain, "mbarrier.arrive.shared"));
  cr_assert_gt(count(ws, "bar.sync %r"), count(plain, "bar.sync %r"));
  cr_assert_gt(count(ws, "bar.arrive"), count(plain, "bar.arrive"));
  cr_assert_eq(count(ws, "shfl.sync.idx"), count(plain, "shfl.sync.idx") + 1, "the warpgroup index, uniform");
  ptxas_assert_unserialized(ptx, ARCH_SM90A);
  ptxas_assert_clean(ptx, ARCH_SM90A);
  arena_free(a);
}
