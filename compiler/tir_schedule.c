/* tir_schedule.c — the GPU schedule of a kernel: pipelined loops, their rings and the warp roles.
 *
 * Runs in the GPU backend after the layout pass (it needs the layouts: 16-byte runs, swizzled
 * wgmma tiles) on a copy of the function, so that the interpreter and other targets keep the
 * unscheduled IR. What it decides (docs/tir.md, "Schedule"; docs/architecture.md, "Pipelines"):
 *
 *  - pipes: a `for ... pipeline P` loop whose shared-tile LOADs fill a ring of P stages ahead of
 *    the iteration that reads them. The pass inserts PIPE_WAIT at the top of the body (the
 *    iteration's stage has landed) and PIPE_RELEASE after the last reader (the stage may be
 *    refilled); with an overlapped wgmma DOT the release follows that DOT and frees the previous
 *    iteration's stage (imm = 1), whose group the DOT's wait_group 1 retired;
 *  - warp specialization (sm_90a, one pipelined loop at the top level whose loads TMA can make):
 *    one producer warpgroup replays the scalar slice the loads' coordinates need and issues TMA
 *    boxes into the ring; the kernel's own warps are the consumers (setmaxnreg budgets below);
 *  - tensor maps: per ring LOAD, the box TMA copies (the wgmma tile's swizzled layout is what a
 *    box of one swizzle span per row writes, so the tile is `chunks` boxes side by side).
 *
 * A LOAD joins a ring when it sits in the body of the loop (P >= 2, TILEC_PIPELINE not 0)
 * outside any nested if/for; it is the tile's only definition and every read of the tile
 * follows it inside the loop; the tile moves in 16-byte runs; and each index start is
 * computable for a future iteration: the loop variable, a register the loop does not write, or
 * a pure scalar computed once in the body before the load from such values (the chain). */
#include "layout.h"
#include "tilec.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Register budgets (setmaxnreg: 24..256 in steps of 8). setmaxnreg.inc waits for registers in
 * the block's own pool, which holds what the block was launched with (every thread at the most
 * .maxntid allows: 168 at 384 threads) plus what .dec released, so the budgets must fit the
 * launch's registers, not the SM's: producer 24 and two consumer warpgroups at 240 fill 384 x 168
 * exactly. A producer that spills at 24 gets 40 (SchedOptions.wide_producer), the consumers 232. */
enum { PRODUCER_REGS = 24, PRODUCER_REGS_WIDE = 40, CONSUMER_REGS_MAX = 240, SM_REGS = 65536, WARPGROUP = 128 };
/* Registers a thread may hold across the loop for prefetched epilogue loads (GEMM 128 x 256:
 * the bias, 64 halves; the consumers' budget keeps room for them beside the accumulator). */
enum { PREFETCH_REGS = 64 };
/* Registers a thread may hold for a pipe's lookahead loads (ahead + 1 copies each: this
 * iteration's and the ones in flight): per-row scalars, not row tiles. */
enum { LOOKAHEAD_REGS = 16 };

/* The registers a thread of an n-thread block is launched with when `blocks` of them fit an SM
 * (ptxas: at most 255, whole 8-register units). */
static int launch_regs(int n, int blocks) {
  int r = SM_REGS / n / blocks / 8 * 8;
  return r > 248 ? 248 : r;
}

/* The widest DOT result (its last dim): with one consumer warpgroup, a wgmma's N. */
static int widest_dot(const TirFunc *f) {
  int n = 0;
  for (int i = 0; i < f->ninsts; i++)
    if (f->insts[i].op == TIR_DOT) {
      const TileType *t = &f->regs[f->insts[i].dst].type;
      n = t->rank && t->dims[t->rank - 1] > n ? t->dims[t->rank - 1] : n;
    }
  return n;
}

/* Blocks per SM a warp-specialized entry's registers are budgeted for (TirSchedule.launch_blocks):
 * 2 for one consumer warpgroup (a 4-warp kernel: its cp.async entry fits 2 or more, and 2 blocks
 * of the warp-specialized one ran 1.2-1.8x faster than 1 on the H200, run ag1), else 1.
 * ptxas checks each instruction against the launch's registers, not the setmaxnreg budget: an
 * m64n256 wgmma (128 accumulators and its operands, 154) is refused at 128 (C7602), so a DOT
 * wider than 192 keeps 1. TILEC_WS_BLOCKS=1 keeps 1 everywhere. */
enum { WIDEST_DOT_AT_TWO_BLOCKS = 192 };
static int plan_launch_blocks(const SchedOptions *o, const TirFunc *f, int consumers) {
  const char *e = getenv("TILEC_WS_BLOCKS");
  if (o->one_block || (e && !strcmp(e, "1")) || widest_dot(f) > WIDEST_DOT_AT_TWO_BLOCKS)
    return 1;
  return consumers == WARPGROUP ? 2 : 1; /* (all groups' consumers: one warpgroup is one group) */
}

typedef struct Sched {
  const TirFunc *f;
  const SchedOptions *o;
  Diag *d;
  TirSchedule *s;
} Sched;

static bool is_written(const TirInst *in, int r) { return in->dst == r; }

static int count_writes(const TirFunc *f, int r, int lo, int hi) {
  int n = 0;
  for (int i = lo; i < hi; i++)
    n += is_written(&f->insts[i], r);
  return n;
}


/* Nesting depth of instruction j counted from just after `first` (0: the top level there). */
int tir_nest_depth(const TirFunc *f, int first, int j) {
  int depth = 0;
  for (int i = first + 1; i < j; i++) {
    TirOp op = f->insts[i].op;
    depth += op == TIR_FOR || op == TIR_IF;
    depth -= op == TIR_ENDFOR || op == TIR_ENDIF;
  }
  return depth;
}

static bool top_level(const TirFunc *f, int first, int j) { return tir_nest_depth(f, first, j) == 0; }

bool tir_load_moves_16_bytes(const TirFunc *f, const TirInst *in) {
  const TirArg *a = &f->args[in->arg_index];
  const TileType *t = &f->regs[in->dst].type;
  if (!in->index[a->rank - 1].is_range || !t->layout)
    return false;
  return layout_vec_chunk(t->layout, t->elem) * elem_bytes(t->elem) == 16;
}

/* Scalar ops a replay may run; `anywhere` adds DIV/REM (code that runs unconditionally anyway:
 * the producer's slice; a body replay could divide by zero in an iteration that never runs). */
static bool replayable_op(const TirInst *in, bool anywhere) {
  if ((in->op == TIR_DIV || in->op == TIR_REM) && !anywhere)
    return false;
  return in->op == TIR_CONST || in->op == TIR_PARAM || in->op == TIR_DIM || in->op == TIR_BLOCK_ID ||
         tir_op_maps_elements(in->op);
}

/* Whether register r's value for a future iteration is computable at the load `before`;
 * marks the body instructions to replay. */
static bool replayable(const TirFunc *f, const TirPipe *p, int r, int before, int depth, bool *mark) {
  if (r == f->insts[p->first].dst || count_writes(f, r, p->first, p->last + 1) == 0)
    return true;
  if (depth > 16 || count_writes(f, r, 0, f->ninsts) != 1 || f->regs[r].type.rank != 0)
    return false;
  for (int k = p->first + 1; k < before; k++) {
    const TirInst *in = &f->insts[k];
    if (in->dst != r)
      continue;
    if (!top_level(f, p->first, k) || !replayable_op(in, false))
      return false;
    for (int a = 0; a < 3; a++)
      if (in->args[a] >= 0 && !replayable(f, p, in->args[a], k, depth + 1, mark))
        return false;
    mark[k] = true;
    return true;
  }
  return false;
}

/* Whether j is a top-level LOAD of p's body whose tile it alone writes, read only after it inside
 * the loop, with index starts the chain can replay (marking the chain). What ring loads and
 * lookahead loads have in common. */
static bool body_load(const TirFunc *f, const TirPipe *p, int j, bool *mark) {
  const TirInst *in = &f->insts[j];
  if (in->op != TIR_LOAD || !top_level(f, p->first, j) || count_writes(f, in->dst, 0, f->ninsts) != 1)
    return false;
  for (int k = 0; k < f->ninsts; k++)
    if (tir_inst_reads(&f->insts[k], in->dst) && (k <= j || k >= p->last))
      return false;
  for (int d = 0; d < f->args[in->arg_index].rank; d++)
    if (!replayable(f, p, in->index[d].start, j, 0, mark))
      return false;
  return true;
}

static bool ring_load(const TirFunc *f, const TirPipe *p, int j, bool *mark) {
  const TirInst *in = &f->insts[j];
  return in->op == TIR_LOAD && f->regs[in->dst].type.place == PLACE_SHARED && tir_load_moves_16_bytes(f, in) &&
         body_load(f, p, j, mark);
}

/* A lookahead load of p (TirPipe.lookahead): a top-level LOAD of a register tile, its only
 * write, read only after it inside the loop (so its register is free at the top of the body),
 * of a tensor the kernel never writes, with index starts the chain can replay. */
static bool lookahead_load(const TirFunc *f, const TirPipe *p, int j, bool *mark) {
  const TirInst *in = &f->insts[j];
  const TileType *ty = in->op == TIR_LOAD ? &f->regs[in->dst].type : NULL;
  return ty && ty->place != PLACE_SHARED && ty->layout && !tir_arg_written(f, in->arg_index) &&
         body_load(f, p, j, mark);
}

/* Iterations ahead a pipe's lookahead loads are issued (TirPipe.lookahead_dist): TILEC_LOOKAHEAD,
 * at most the ring's `ahead`; 0 none. One by default: on the H200 the ring's distance (3 at 4
 * stages) was no faster at 8192 x 4096 and 10% slower at 16384 x 1024 (run y3; its extra
 * registers left Mean out of the budget), one iteration 3-11% faster than none there (run y2). */
static int lookahead_distance(int ahead) {
  const char *v = getenv("TILEC_LOOKAHEAD");
  int k = v && *v ? atoi(v) : 1;
  return k < 0 ? 0 : k > ahead ? ahead : k;
}

bool tir_pipelining_enabled(void) { return !env_off("TILEC_PIPELINE"); }
bool tir_rotation_enabled(void) { return !env_off("TILEC_ROTATE"); }

/* ---------------------------------------------- wgmma overlap (GEMM main loop)
 *
 * In a loop of P >= 3 stages whose body holds one DOT acc = dot(a, b, acc), that DOT ends with
 * wgmma.wait_group 1: iteration i's wgmmas run on while the loop goes round, and iteration
 * i+1's wait retires them. acc is touched by no other body instruction, both operands are ring
 * tiles of this loop or shared tiles the loop never writes, and A is in shared memory, itself or
 * the TRANS of a tile read in place (a register A would be rewritten while the group reads it).
 * TILEC_WGMMA_OVERLAP=0 turns it off. */

/* The shared tile a wgmma operand register reads (itself, or the source of its one TRANS), or -1. */
static int operand_tile(const TirFunc *f, int r) {
  if (f->regs[r].type.place == PLACE_SHARED)
    return r;
  int src = -1;
  for (int i = 0; i < f->ninsts; i++) {
    const TirInst *in = &f->insts[i];
    if (!is_written(in, r))
      continue;
    if (src >= 0 || in->op != TIR_TRANS || f->regs[in->args[0]].type.place != PLACE_SHARED)
      return -1;
    src = in->args[0];
  }
  return src;
}

static bool in_ring(const TirPipe *p, const TirFunc *f, int tile) {
  for (int l = 0; l < p->nloads; l++)
    if (f->insts[p->loads[l]].dst == tile)
      return true;
  return false;
}

static int plan_overlap(const Sched *S, const TirPipe *p) {
  const TirFunc *f = S->f;
  if (!S->o->wgmma || p->stages < 3 || env_off("TILEC_WGMMA_OVERLAP"))
    return -1;
  int dot = -1;
  for (int j = p->first + 1; j < p->last; j++)
    if (f->insts[j].op == TIR_DOT) {
      if (dot >= 0)
        return -1;
      dot = j;
    }
  if (dot < 0 || !top_level(f, p->first, dot))
    return -1;
  const TirInst *d = &f->insts[dot];
  int acc = d->dst;
  if (d->args[2] != acc || f->regs[acc].type.place == PLACE_SHARED)
    return -1;
  for (int j = p->first + 1; j < p->last; j++)
    if (j != dot && (is_written(&f->insts[j], acc) || tir_inst_reads(&f->insts[j], acc)))
      return -1;
  for (int o = 0; o < 2; o++) {
    int t = operand_tile(f, d->args[o]);
    if (t < 0)
      return -1;
    /* A through a TRANS is read in place only when its tile has the wgmma layout; else it is
     * packed into registers (TILEC_TRANS_A=0), which the next iteration would rewrite */
    if (o == 0 && t != d->args[0] && !layout_trans_a_in_place(f, tir_only_write(f, d->args[0])))
      return -1;
    if (!in_ring(p, f, t) && count_writes(f, t, p->first, p->last + 1) != 0)
      return -1;
  }
  return dot;
}

/* Whether instruction j reads shared tile t, directly or through a register that is a TRANS of
 * it (the emitter reads such a TRANS in place, at its user). */
static bool reads_tile(const TirFunc *f, int j, int t) {
  const TirInst *in = &f->insts[j];
  if (tir_inst_reads(in, t))
    return true;
  for (int a = 0; a < 3; a++)
    if (in->args[a] >= 0 && in->args[a] != t && f->regs[in->args[a]].type.place != PLACE_SHARED &&
        operand_tile(f, in->args[a]) == t)
      return true;
  return false;
}

/* The last top-level body instruction at or after which every read of ring load l's tile is
 * done (p->first when nothing reads it). */
static int load_last_reader(const TirFunc *f, const TirPipe *p, int l) {
  int last = p->first, t = f->insts[p->loads[l]].dst;
  for (int j = p->first + 1; j < p->last; j++)
    if (reads_tile(f, j, t))
      last = j;
  /* Inside a nested if/for: the end of the outermost construct holding it (its ENDFOR / ENDIF,
   * which tir_nest_depth still counts inside the construct: one step, not a loop until top level). */
  if (!top_level(f, p->first, last)) {
    int k = p->first + 1, open = -1;
    for (int depth = 0; k <= last; k++) {
      TirOp op = f->insts[k].op;
      if (depth == 0 && (op == TIR_FOR || op == TIR_IF))
        open = k;
      depth += op == TIR_FOR || op == TIR_IF;
      depth -= op == TIR_ENDFOR || op == TIR_ENDIF;
    }
    last = tir_region_end(f, open);
  }
  return last;
}

/* The last top-level body instruction at or after which every read of p's tiles is done. */
static int last_reader(const TirFunc *f, const TirPipe *p) {
  int last = p->first;
  for (int l = 0; l < p->nloads; l++) {
    int j = load_last_reader(f, p, l);
    last = j > last ? j : last;
  }
  return last;
}

/* Whether ring tile t is read only by the threads that copy it in: the copies write each element
 * from the thread that holds it in the tile's layout, and elementwise ops and conversions read
 * the tile in that layout, so where the layout has no replicas (one thread an element) every
 * element is read by its copier alone (TirPipe.thread_private). */
static bool read_by_its_copiers(const TirFunc *f, int t) {
  const Layout *L = f->regs[t].type.layout;
  if (!L || layout_zero_mask(L, LAY_LANE) || layout_zero_mask(L, LAY_WARP))
    return false;
  for (int j = 0; j < f->ninsts; j++) {
    const TirInst *in = &f->insts[j];
    if (in->dst != t && reads_tile(f, j, t) && !(tir_op_info[in->op].flags & OPF_ELEMWISE) && in->op != TIR_CVT)
      return false;
  }
  return true;
}

/* ... every ring tile of p, in a body with no loop inside (the reductions' slots go by this
 * loop's parity alone: an inner loop would read them by its own). */
static bool ring_is_thread_private(const TirFunc *f, const TirPipe *p) {
  for (int j = p->first + 1; j < p->last; j++)
    if (f->insts[j].op == TIR_FOR)
      return false;
  for (int l = 0; l < p->nloads; l++)
    if (!read_by_its_copiers(f, f->insts[p->loads[l]].dst))
      return false;
  return p->nloads > 0;
}

/* Finds the pipelined loops and their ring loads (on the unscheduled instruction numbering). */
static void find_pipes(Sched *S, TirPipe *pipes, int *npipes) {
  const TirFunc *f = S->f;
  Arena *a = f->arena;
  *npipes = 0;
  if (env_off("TILEC_PIPELINE"))
    return;
  bool *mark = arena_alloc(a, sizeof(bool) * (size_t)(f->ninsts + 1));
  for (int i = 0; i < f->ninsts; i++) {
    const TirInst *fi = &f->insts[i];
    int stages = S->o->ring_stages && fi->pipeline >= 2 ? S->o->ring_stages : fi->pipeline;
    stages = stages < S->o->stage_cap ? stages : S->o->stage_cap;
    if (fi->op != TIR_FOR || stages < 2)
      continue;
    TirPipe *p = &pipes[*npipes];
    *p = (TirPipe){.first = i, .last = tir_region_end(f, i), .stages = stages, .overlap_dot = -1,
                    .turn = -1, .pass = -1, .early_wait = -1, .early_release = -1};
    if (p->last < 0)
      continue;
    memset(mark, 0, sizeof(bool) * (size_t)f->ninsts);
    p->loads = arena_alloc(a, sizeof(int) * (size_t)(p->last - i));
    p->chain = arena_alloc(a, sizeof(int) * (size_t)(p->last - i));
    for (int j = i + 1; j < p->last; j++)
      if (ring_load(f, p, j, mark))
        p->loads[p->nloads++] = j;
    if (!p->nloads)
      continue;
    p->overlap_dot = plan_overlap(S, p);
    p->ahead = p->overlap_dot >= 0 ? stages - 2 : stages - 1;
    p->lookahead = arena_alloc(a, sizeof(int) * (size_t)(p->last - i));
    p->lookahead_dist = lookahead_distance(p->ahead);
    for (int j = i + 1, regs = 0; j < p->last && p->lookahead_dist > 0; j++) {
      const TileType *ty = f->insts[j].dst >= 0 ? &f->regs[f->insts[j].dst].type : NULL;
      int n = ty && ty->layout ? layout_nregs(ty->layout) * (p->lookahead_dist + 1) : 0;
      if (n && regs + n <= LOOKAHEAD_REGS && lookahead_load(f, p, j, mark)) {
        p->lookahead[p->nlookahead++] = j;
        regs += n;
      }
    }
    for (int j = i + 1; j < p->last; j++)
      if (mark[j])
        p->chain[p->nchain++] = j;
    p->release = p->overlap_dot >= 0 ? p->overlap_dot : last_reader(f, p);
    p->thread_private = env_on("TILEC_PRIVATE_RING") && ring_is_thread_private(f, p);
    (*npipes)++;
  }
}

/* ---------------------------------------------- TMA and warp specialization */

/* The tensor map of ring LOAD j, or false when TMA cannot make the tile: a swizzled wgmma
 * tile (TMA writes exactly that layout) of 2-byte elements, zero fill (TMA fills with +0), the
 * innermost tensor dimension a range, two range dimensions whose sizes are the tile's (no
 * padding: a box reads every element it covers), boxes of at most 256 per dimension. */
static bool plan_box(const TirFunc *f, int j, const TileType *t, TirTmap *m);

static bool plan_tmap(const TirFunc *f, int j, TirTmap *m) {
  const TirInst *in = &f->insts[j];
  const TileType *t = &f->regs[in->dst].type;
  if (!t->layout || t->rank != 2 || in->imm != 0 || signbit(in->imm) || !layout_is_wgmma_operand_tile(f, in->dst) ||
      layout_wgmma_tile_rows(f, in->dst) < t->dims[0] || t->layout->shape[1] != t->dims[1])
    return false;
  return plan_box(f, j, t, m);
}

/* The boxes of LOAD or STORE j of a [rows, cols] tile t of 2-byte elements (the layout in shared
 * memory: layout_smem_wgmma's, which TMA reads and writes). */
static bool plan_box(const TirFunc *f, int j, const TileType *t, TirTmap *m) {
  const TirInst *in = &f->insts[j];
  const TirArg *a = &f->args[in->arg_index];
  SmemLayout sl;
  if (t->rank != 2 || elem_bytes(t->elem) != 2 || !layout_smem_wgmma(t->dims[0], t->dims[1], 2, &sl))
    return false;
  if (!in->index[a->rank - 1].is_range || t->dims[0] > 256)
    return false;
  int nranges = 0;
  memset(m, 0, sizeof *m);
  for (int d = 0; d < a->rank; d++) {
    m->box[d] = in->index[d].is_range ? in->index[d].size : 1;
    nranges += in->index[d].is_range;
  }
  if (nranges != 2)
    return false;
  m->load = j;
  m->arg = in->arg_index;
  m->swizzle = sl.swizzle;
  m->row_bytes = sl.swizzle;
  m->rows = t->dims[0];
  m->box[a->rank - 1] = sl.swizzle / 2;
  for (int d = a->rank - 1; d >= 0; d--)
    if (in->index[d].is_range && d != a->rank - 1)
      m->outer = d;
  m->chunks = t->dims[1] / m->box[a->rank - 1];
  return m->chunks >= 1 && m->chunks * m->box[a->rank - 1] == t->dims[1];
}

/* Marks the instructions before `first` (top level, one write each, scalar, replayable) that
 * register r's value needs; false if some cannot be replayed by the producer. */
static bool slice_reg(const TirFunc *f, int first, int r, bool *mark, int depth) {
  if (depth > 32)
    return false;
  int def = tir_only_write(f, r);
  if (def < 0 || def >= first || !top_level(f, -1, def) || f->regs[r].type.rank != 0 ||
      !replayable_op(&f->insts[def], true))
    return false;
  if (mark[def])
    return true;
  mark[def] = true;
  for (int a = 0; a < 3; a++)
    if (f->insts[def].args[a] >= 0 && !slice_reg(f, first, f->insts[def].args[a], mark, depth + 1))
      return false;
  return true;
}

/* Whether register r is produced inside the producer: the loop variable or the chain. */
static bool producer_body_reg(const TirFunc *f, const TirPipe *p, int r) {
  if (r == f->insts[p->first].dst)
    return true;
  for (int c = 0; c < p->nchain; c++)
    if (f->insts[p->chain[c]].dst == r)
      return true;
  return false;
}

static bool need_reg(const TirFunc *f, const TirPipe *p, int r, bool *mark) {
  return producer_body_reg(f, p, r) || slice_reg(f, p->first, r, mark, 0);
}

/* Whether register r (computed by the slice, the chain or the loop) depends on block axis ax. */
static bool uses_block_axis(const TirFunc *f, int r, int ax, int depth) {
  if (depth > 32)
    return true;
  int def = -1;
  for (int k = 0; k < f->ninsts; k++)
    if (f->insts[k].dst == r) {
      if (def >= 0 && f->insts[k].op != TIR_FOR)
        return true; /* written twice: not a value the pass can follow */
      def = k;
    }
  if (def < 0)
    return true;
  const TirInst *in = &f->insts[def];
  if (in->op == TIR_BLOCK_ID)
    return in->axis == ax;
  for (int a = 0; a < 3; a++)
    if (in->args[a] >= 0 && uses_block_axis(f, in->args[a], ax, depth + 1))
      return true;
  return false;
}

/* A persistent block walks its tiles in a fixed order, so the tiles it gets should cost the
 * same: whether the loop's bounds and step depend on the block index along axes from_axis .. 2
 * (a causal attention's key loop ends at the diagonal: block.x). */
static bool uniform_trips(const TirFunc *f, const TirPipe *p, int from_axis) {
  for (int a = 0; a < 3; a++)
    for (int ax = from_axis; ax < 3; ax++)
      if (uses_block_axis(f, f->insts[p->first].args[a], ax, 0))
        return false;
  return true;
}

/* A cluster of 2 along the grid axis whose neighbours share the most ring bytes (a GEMM's
 * blocks along M share B; an attention's query blocks share K and V), multicasting those loads.
 * Only persistent kernels (both blocks of a pair must run the same iterations) whose multicast
 * tiles split into two halves of whole swizzle patterns (rows a multiple of 16). */
/* Whether a coordinate of LOAD j depends on grid axis ax. */
static bool load_follows_axis(const TirFunc *f, int j, int ax) {
  const TirInst *in = &f->insts[j];
  for (int d = 0; d < f->args[in->arg_index].rank; d++)
    if (uses_block_axis(f, in->index[d].start, ax, 0))
      return true;
  return false;
}

/* Ring tile m is the same for two blocks adjacent along grid axis ax (no coordinate depends on
 * it) and splits into two halves of whole swizzle patterns. */
static bool multicastable(const TirFunc *f, const TirTmap *m, int ax) {
  return m->rows % 16 == 0 && !load_follows_axis(f, m->load, ax);
}

static void plan_cluster(const TirFunc *f, TirSchedule *s) {
  const char *on = getenv("TILEC_CLUSTER"); /* opt-in: measured slower so far (docs/performance.md) */
  if (!s->persistent || s->walk_rows || !on || strcmp(on, "1") != 0)
    return;
  int best = -1, best_bytes = 0;
  for (int ax = 1; ax >= 0; ax--) {
    int bytes = 0;
    for (int t = 0; t < s->ntmaps; t++) {
      const TirTmap *m = &s->tmaps[t];
      bytes += multicastable(f, m, ax) ? m->rows * m->row_bytes * m->chunks : 0;
    }
    if (bytes > best_bytes)
      best = ax, best_bytes = bytes;
  }
  if (best < 0)
    return;
  s->cluster = 2;
  s->cluster_axis = best;
  for (int t = 0; t < s->ntmaps; t++) {
    TirTmap *m = &s->tmaps[t];
    if (multicastable(f, m, best)) {
      m->multicast = true;
      m->box[m->outer] = m->rows / 2;
    }
  }
}

/* Ping-pong needs a kernel of one warpgroup whose only shared memory is the ring (each group
 * would need its own copy of any other shared tile). */
static void plan_groups(const TirFunc *f, TirSchedule *s, const TirPipe *p) {
  const char *e = getenv("TILEC_PINGPONG"); /* opt-in until measured on the H200 */
  s->groups = 1;
  if (!s->persistent || s->walk_rows || s->cluster != 1 || f->threads != WARPGROUP || !e || strcmp(e, "1") != 0)
    return;
  for (int r = 0; r < f->nregs; r++)
    if (f->regs[r].type.place == PLACE_SHARED && !in_ring(p, f, r))
      return;
  s->groups = 2;
}

/* The schedule's tensor maps followed by m[0 .. n) (head loads, then stores, after the ring's). */
static void append_tmaps(const TirFunc *f, TirSchedule *s, const TirTmap *m, int n) {
  TirTmap *all = arena_alloc(f->arena, sizeof(TirTmap) * (size_t)(s->ntmaps + n));
  memcpy(all, s->tmaps, sizeof(TirTmap) * (size_t)s->ntmaps);
  memcpy(all + s->ntmaps, m, sizeof(TirTmap) * (size_t)n);
  s->tmaps = all;
  s->ntmaps += n;
}

/* Whether every read of shared tile t is after `after` and either at the top level or inside
 * p's loop; sets *last to the last top-level instruction reading it (p's ENDFOR for the loop). */
static bool head_readers(const TirFunc *f, const TirPipe *p, int t, int after, int *last) {
  for (int j = 0; j < f->ninsts; j++) {
    if (!reads_tile(f, j, t))
      continue;
    bool in_loop = j > p->first && j < p->last;
    if (j <= after || (!in_loop && !top_level(f, -1, j)))
      return false;
    int at = in_loop ? p->last : j;
    if (at > *last)
      *last = at;
  }
  return true;
}

/* Head loads: top-level LOADs before the loop into shared tiles written nowhere else that TMA
 * can make, with coordinates the producer can compute (marked into the slice). Left out with
 * two consumer groups (each would need its own copy) or a cluster, and with TILEC_HEADS=0. */
static void plan_heads(const TirFunc *f, TirSchedule *s, const TirPipe *p, bool *mark) {
  s->head_wait = s->head_release = s->head_release_empty = -1;
  if (s->groups != 1 || s->cluster != 1 || env_off("TILEC_HEADS"))
    return;
  int *heads = arena_alloc(f->arena, sizeof(int) * (size_t)(p->first + 1)), n = 0;
  TirTmap m[TIR_MAX_TMAPS];
  for (int j = 0; j < p->first && p->nloads + n < TIR_MAX_TMAPS; j++) {
    const TirInst *in = &f->insts[j];
    if (in->op != TIR_LOAD || !top_level(f, -1, j) || f->regs[in->dst].type.place != PLACE_SHARED ||
        count_writes(f, in->dst, 0, f->ninsts) != 1 || !plan_tmap(f, j, &m[n]))
      continue;
    bool ok = true;
    for (int d = 0; ok && d < f->args[in->arg_index].rank; d++)
      ok = slice_reg(f, p->first, in->index[d].start, mark, 0);
    if (ok)
      heads[n++] = j;
  }
  int last = -1;
  for (int h = 0; h < n; h++)
    if (!head_readers(f, p, f->insts[heads[h]].dst, heads[n - 1], &last))
      return;
  if (!n || last < 0)
    return;
  append_tmaps(f, s, m, n);
  s->heads = heads;
  s->nheads = n;
  for (int h = 0; h < n; h++)
    s->head_bytes += m[h].rows * m[h].row_bytes * m[h].chunks;
  s->head_wait = heads[n - 1]; /* old numbering until insert_sync: the instructions they follow */
  s->head_release = last;
  s->nslice = 0;
  for (int k = 0; k < p->first; k++)
    if (mark[k])
      s->slice[s->nslice++] = k;
}

/* Bytes of one copy of shared tile r as the emitter lays it out, 1 KB aligned: wgmma operands
 * swizzled, in the rows layout_wgmma_tile_rows gives them (an A operand's padded rows included);
 * other tiles of rank 2+ with 16 bytes of padding per row (at most: the emitter leaves it off
 * tiles read only elementwise, so this bound is safe). */
static int tile_bytes(const TirFunc *f, int r) {
  const TileType *t = &f->regs[r].type;
  bool wgmma = t->rank == 2 && layout_is_wgmma_operand_tile(f, r);
  int n = elem_bytes(t->elem), inner = t->rank ? t->dims[t->rank - 1] : 1;
  for (int d = 0; d < t->rank - 1; d++)
    n *= wgmma ? layout_wgmma_tile_rows(f, r) : t->dims[d];
  n *= inner;
  if (t->rank >= 2 && !wgmma)
    n += n / (inner * elem_bytes(t->elem)) * 16;
  return (n + 1023) & ~1023;
}

/* The scratch slot of a register TRANS after loop p (the swapped GEMM's `acc = trans acc'`,
 * tir_swap.c), which the emitter puts beside the tiles: the source through shared memory at a
 * row pitch padded by 16 bytes (lower_nvptx.c, lower_copyish). Without it the ring and the TMA
 * stores were planned into shared memory that was not there. */
static int epilogue_scratch(const TirFunc *f, const TirPipe *p) {
  int bytes = 0;
  for (int j = p->last + 1; j < f->ninsts; j++) {
    const TirInst *in = &f->insts[j];
    const TileType *t = &f->regs[in->args[0]].type;
    if (in->op != TIR_TRANS || t->place == PLACE_SHARED || t->rank != 2)
      continue;
    int eb = elem_bytes(t->elem), rows = layout_pow2_ceil(t->dims[0]), cols = layout_pow2_ceil(t->dims[1]);
    int b = rows * (cols + 16 / eb) * eb;
    bytes = b > bytes ? b : bytes;
  }
  return (bytes + 127) & ~127;
}

/* The consumers' shared memory in loop p's schedule: the bytes of one ring stage (returned) and
 * the bytes outside the ring, the epilogue's scratch slot included (*fixed). */
static int ring_stage_bytes(const TirFunc *f, const TirPipe *p, int *fixed) {
  int stage = 0;
  *fixed = epilogue_scratch(f, p);
  for (int r = 0; r < f->nregs; r++)
    if (f->regs[r].type.place == PLACE_SHARED)
      *(in_ring(p, f, r) ? &stage : fixed) += tile_bytes(f, r);
  return stage;
}

/* Bytes of shared memory the consumers' tiles take (ring tiles per stage; an upper bound of
 * what the emitter allocates). */
static int shared_bytes(const TirFunc *f, const TirPipe *p) {
  int fixed, stage = ring_stage_bytes(f, p, &fixed);
  return fixed + p->stages * stage;
}

/* The consumer warpgroups a TMA store of register tile t can split into (TirTmap.split): each
 * warpgroup's warp bits select a block of rows/split rows (a multiple of the swizzle's 8) and
 * every other bit of the layout stays inside one block; else 1. */
static int store_split(const Sched *S, const TileType *t) {
  const TirFunc *f = S->f;
  const Layout *L = t->layout;
  int wgs = f->threads / WARPGROUP, wg_bit = layout_log2(WARPGROUP / 32);
  if (wgs < 2 || f->threads % WARPGROUP || L->nbits[LAY_WARP] != wg_bit + layout_log2((uint32_t)wgs) ||
      S->o->whole_stores || env_off("TILEC_STORE_SPLIT"))
    return 1;
  int32_t rows = t->dims[0] / wgs, cols = L->shape[1];
  if (rows % 8 || rows * wgs != L->shape[0])
    return 1;
  for (int kind = 0; kind < LAY_NKINDS; kind++)
    for (int b = 0; b < L->nbits[kind]; b++) {
      uint32_t row = L->basis[kind][b] / (uint32_t)cols;
      bool wg = kind == LAY_WARP && b >= wg_bit;
      if (wg ? L->basis[kind][b] != (uint32_t)(rows << (b - wg_bit)) * (uint32_t)cols : row >= (uint32_t)rows)
        return 1;
    }
  return wgs;
}

/* The staging bytes of a TMA store for STORE j after loop p (its box in *m), or 0 when it cannot
 * have one. */
static int store_staging(const TirFunc *f, const TirPipe *p, int j, TirTmap *m) {
  const TirInst *in = &f->insts[j];
  if (j <= p->last || in->op != TIR_STORE || !top_level(f, -1, j))
    return 0;
  const TileType *t = &f->regs[in->args[0]].type;
  if (t->place == PLACE_SHARED || !t->layout || t->rank != 2 || t->layout->shape[0] != t->dims[0] ||
      t->layout->shape[1] != t->dims[1] || t->elem != f->args[in->arg_index].elem || !plan_box(f, j, t, m))
    return 0;
  return (t->dims[0] * t->dims[1] * 2 + 1023) & ~1023;
}

/* TMA stores: top-level STOREs after the loop of a register tile TMA can write ([rows, cols] of
 * 2-byte elements, the tensor's element type, boxes as for a load), while the staging tiles fit
 * beside the kernel's shared tiles. One consumer group, no cluster. */
static void plan_stores(const Sched *S, TirSchedule *s, const TirPipe *p) {
  const TirFunc *f = S->f;
  if (s->groups != 1 || s->cluster != 1 || env_off("TILEC_TMA_STORE"))
    return;
  int *stores = arena_alloc(f->arena, sizeof(int) * (size_t)(f->ninsts + 1)), n = 0;
  TirTmap m[TIR_MAX_TMAPS];
  int base = shared_bytes(f, p) + 1024, bytes = base; /* the mbarriers, rounded */
  for (int j = p->last + 1; j < f->ninsts && s->ntmaps + n < TIR_MAX_TMAPS; j++) {
    int staging = store_staging(f, p, j, &m[n]);
    if (!staging || bytes + staging > arch_smem_limit(ARCH_SM90A))
      continue;
    const TileType *t = &f->regs[f->insts[j].args[0]].type;
    bytes += staging;
    m[n].store = true;
    m[n].split = store_split(S, t);
    m[n].box[m[n].outer] = t->dims[0] / m[n].split;
    stores[n++] = j;
  }
  if (!n)
    return;
  append_tmaps(f, s, m, n);
  s->stores = stores;
  s->nstores = n;
  s->store_bytes = bytes - base;
}

/* Shared memory a block's schedule may grow into by itself (a second copy of the head tiles, a
 * deeper ring): past it the L1 left beside it shrinks (the SM's 256 KB are both), and on the H200
 * attention d128 (224 KB with the second Q) ran 1.5-5% slower at N >= 4k with it (runs n1, n2),
 * while d64 (176 KB) gained or tied. */
enum { SMEM_WITH_L1 = 200 * 1024 };

/* A second copy of the head tiles (TirSchedule.head_stages) for a persistent walk, where the
 * block's shared memory stays within SMEM_WITH_L1 with it. */

static void plan_head_stages(const TirFunc *f, TirSchedule *s, const TirPipe *p) {
  s->head_stages = 1;
  if (!s->nheads || !s->persistent || env_off("TILEC_HEAD_DOUBLE"))
    return;
  int bytes = shared_bytes(f, p) + s->store_bytes + 1024;
  for (int h = 0; h < s->nheads; h++)
    bytes += tile_bytes(f, f->insts[s->heads[h]].dst);
  if (bytes <= arch_smem_limit(ARCH_SM90A) && bytes <= SMEM_WITH_L1)
    s->head_stages = 2;
}

/* Prefetched loads (TirSchedule.prefetch): each index start defined once, at the top level,
 * before the loop; the tensor never written; registers within the budget. */
static void plan_prefetch(const TirFunc *f, TirSchedule *s, const TirPipe *p) {
  if (env_off("TILEC_PREFETCH"))
    return;
  int *pre = arena_alloc(f->arena, sizeof(int) * (size_t)(f->ninsts + 1)), n = 0, regs = 0;
  for (int j = p->last + 1; j < f->ninsts; j++) {
    const TirInst *in = &f->insts[j];
    const TileType *t = in->op == TIR_LOAD ? &f->regs[in->dst].type : NULL;
    /* the LOAD must be its register's only write: then nothing before it reads the register */
    if (!t || t->place == PLACE_SHARED || !t->layout || !top_level(f, -1, j) || tir_arg_written(f, in->arg_index) ||
        count_writes(f, in->dst, 0, f->ninsts) != 1)
      continue;
    bool ok = regs + layout_nregs(t->layout) <= PREFETCH_REGS;
    for (int d = 0; ok && d < f->args[in->arg_index].rank; d++) {
      int r = in->index[d].start, def = r < 0 ? -1 : tir_only_write(f, r);
      ok = r < 0 || (def >= 0 && def < p->first && top_level(f, -1, def));
    }
    if (!ok)
      continue;
    regs += layout_nregs(t->layout);
    pre[n++] = j;
  }
  s->prefetch = pre;
  s->nprefetch = n;
}

/* A persistent walk's raster group when the ring's loads follow block.x (GEMM: B's columns): the
 * rows of y whose tiles run side by side, so the resident blocks share A's rows and B's columns
 * in L2. libtilert's and the AOT launcher's default for older PTX too. */
enum { TILE_GROUP_ROWS = 8 };

/* The raster group of a persistent walk (TirSchedule.tile_group). */
static int plan_tile_group(const TirFunc *f, const TirSchedule *s) {
  for (int l = 0; l < s->ntmaps; l++)
    if (load_follows_axis(f, s->tmaps[l].load, 0))
      return TILE_GROUP_ROWS;
  return 1;
}

/* Whether the shared tile `in` writes is written by the producer alone: a ring or head load by
 * TMA. */
static bool producer_writes(const TirFunc *f, const TirSchedule *s, const TirInst *in) {
  for (int h = 0; h < s->nheads; h++)
    if (&f->insts[s->heads[h]] == in)
      return true;
  return in->op == TIR_LOAD && s->npipes == 1 && in_ring(&s->pipes[0], f, in->dst);
}


/* Whether `in` reduces along an axis that warp bits from `from_bit` on walk (warp bit 2 on:
 * across warpgroups), so that its partials meet through shared memory and a barrier. */
static bool reduces_across_warps(const TirFunc *f, const TirInst *in, int from_bit) {
  const Layout *L = tir_op_reduces(in->op) ? f->regs[in->args[0]].type.layout : NULL;
  for (int b = from_bit; L && b < L->nbits[LAY_WARP]; b++) {
    int32_t coord[TILE_MAX_RANK];
    layout_coord(L->rank, L->shape, L->basis[LAY_WARP][b], coord);
    if (coord[in->axis])
      return true;
  }
  return false;
}

/* The consumer warpgroups of the warp-specialized entry (TirSchedule.consumer_threads): the
 * kernel's, less those at the end that hold nothing of any register tile the others lack (only
 * padding or replicas: a 192-row wgmma tile over 4 warpgroups leaves the fourth only the padded
 * rows 192..255), while no consumer writes a shared tile (the producer's TMA does) and no
 * reduction crosses warpgroups (its partials would not all be written). FlashAttention-3's d64
 * tile, 192 rows over 3 warpgroups, then gets 160 registers a thread instead of 4 x 120. */
static int consumer_warpgroups(const TirFunc *f, const TirSchedule *s) {
  int wgs = f->threads / WARPGROUP, need = 1, wg_bit = layout_log2(WARPGROUP / 32);
  if (wgs < 2 || s->groups != 1 || s->cluster != 1 || env_off("TILEC_IDLE_WARPGROUPS"))
    return wgs;
  for (int j = 0; j < f->ninsts && need < wgs; j++) {
    const TirInst *in = &f->insts[j];
    if (reduces_across_warps(f, in, wg_bit))
      return wgs;
    if (in->dst < 0 || (in->op == TIR_TRANS && tir_trans_view_ok(f, j))) /* (a view: no registers) */
      continue;
    const TileType *t = &f->regs[in->dst].type;
    if (t->place == PLACE_SHARED ? !producer_writes(f, s, in) : !t->layout)
      return wgs;
    while (t->place != PLACE_SHARED && need < wgs && !layout_warps_idle(t->layout, t->dims, (uint32_t)(need * WARPGROUP / 32)))
      need++;
  }
  return need;
}

static bool plan_ws(Sched *S, const TirPipe *p) {
  const TirFunc *f = S->f;
  TirSchedule *s = S->s;
  if (S->o->arch != ARCH_SM90A || !S->o->wgmma || s->npipes != 1 || S->o->no_ws || env_off("TILEC_WS") ||
      !top_level(f, -1, p->first) || f->threads % WARPGROUP || f->threads + WARPGROUP > 1024 ||
      p->nloads > TIR_MAX_TMAPS)
    return false;
  s->tmaps = arena_alloc(f->arena, sizeof(TirTmap) * (size_t)p->nloads);
  for (int l = 0; l < p->nloads; l++)
    if (!plan_tmap(f, p->loads[l], &s->tmaps[l]))
      return false;
  bool *mark = arena_alloc(f->arena, sizeof(bool) * (size_t)(f->ninsts + 1));
  const TirInst *fi = &f->insts[p->first];
  for (int a = 0; a < 3; a++)
    if (!slice_reg(f, p->first, fi->args[a], mark, 0))
      return false;
  for (int c = 0; c < p->nchain; c++)
    for (int a = 0; a < 3; a++) {
      int r = f->insts[p->chain[c]].args[a];
      if (r >= 0 && !need_reg(f, p, r, mark))
        return false;
    }
  for (int l = 0; l < p->nloads; l++) {
    const TirInst *in = &f->insts[p->loads[l]];
    for (int d = 0; d < f->args[in->arg_index].rank; d++)
      if (!need_reg(f, p, in->index[d].start, mark))
        return false;
  }
  s->slice = arena_alloc(f->arena, sizeof(int) * (size_t)(f->ninsts + 1));
  for (int k = 0; k < p->first; k++)
    if (mark[k])
      s->slice[s->nslice++] = k;
  s->ntmaps = p->nloads;
  for (int l = 0; l < p->nloads; l++)
    s->tx_bytes += s->tmaps[l].rows * s->tmaps[l].row_bytes * s->tmaps[l].chunks;
  s->ws = true;
  bool walk = !env_off("TILEC_PERSISTENT");
  s->persistent = walk && uniform_trips(f, p, 0);
  /* trips that follow block.x only: every row costs the same (a row walk) */
  s->walk_rows = walk && !s->persistent && !env_off("TILEC_WALK_ROWS") && uniform_trips(f, p, 1);
  s->persistent |= s->walk_rows;
  s->tile_group = s->walk_rows ? 1 : s->persistent ? plan_tile_group(f, s) : 0; /* the ring's loads only */
  s->consumer_threads = f->threads;
  s->producer_threads = WARPGROUP;
  s->cluster = 1;
  plan_cluster(f, s);
  plan_groups(f, s, p);
  plan_heads(f, s, p, mark);
  plan_stores(S, s, p);
  plan_head_stages(f, s, p);
  if (S->o->ws_entry) {
    plan_prefetch(f, s, p);
    s->consumer_threads = WARPGROUP * consumer_warpgroups(f, s);
  }
  int consumers = s->consumer_threads * s->groups;
  s->launch_blocks = plan_launch_blocks(S->o, f, consumers);
  int pool = (WARPGROUP + consumers) * launch_regs(WARPGROUP + consumers, s->launch_blocks);
  s->producer_regs = S->o->wide_producer ? PRODUCER_REGS_WIDE : PRODUCER_REGS;
  int c = (pool - WARPGROUP * s->producer_regs) / consumers / 8 * 8;
  s->consumer_regs = c > CONSUMER_REGS_MAX ? CONSUMER_REGS_MAX : c;
  return true;
}

/* FLOPs of the DOTs in one iteration of p's loop (2 M N K each). */
static double dot_flops(const TirFunc *f, const TirPipe *p) {
  double flops = 0;
  for (int j = p->first + 1; j < p->last; j++) {
    const TirInst *in = &f->insts[j];
    if (in->op != TIR_DOT)
      continue;
    const TileType *c = &f->regs[in->dst].type, *a = &f->regs[in->args[0]].type;
    if (c->rank == 2 && a->rank == 2)
      flops += 2.0 * c->dims[0] * c->dims[1] * a->dims[1];
  }
  return flops;
}

/* The warp-specialized entry's ring depth (SchedOptions.ring_stages). The producer fills the
 * stages the consumers are not reading, so P - 1 stages must hold enough of the DOTs' work to
 * cover a load's latency. On the H200 a GEMM's 128 x 128 x 64 tile (2 MFLOP a stage) ran
 * 0.2491 ms at 3 stages and 0.2035 at 4 (4096^3, run ah2), while 128 x 256 x 64 (4 MFLOP) at 3
 * matches cuBLAS. So the ring of an entry that runs 1 block an SM gets stages while P - 1 of them
 * hold less than RING_AHEAD_FLOPS, up to RING_MAX_STAGES, as long as the block stays within
 * SMEM_WITH_L1. With 2 blocks an SM each block's loads land while the other computes, and deeper
 * rings there measured mixed (runs ah3, ah4: GEMM 128 x 64 x 32 0.77-0.96x at 6 or 8 stages
 * instead of 4, 128 x 128 x 32 0.97-1.14x, the d64 attention example 0.985-1.04x). The cp.async
 * entry keeps `pipeline P` (TILEC_DEEP_RING=0: both do). */
enum { RING_AHEAD_FLOPS = 8 << 20, RING_MAX_STAGES = 8 };
/* The warp-specialized entry's mbarriers (lower_nvptx.c): full and empty a stage, and at most
 * 256 bytes for the rest (the head loads' and the ping-pong turns', alignment). An estimate
 * within 1 KB of the emitter's count decides the blocks per SM (attention d128 at its defaults,
 * 2 stages: 114848 bytes, 2 blocks an SM by 1 KB). */
enum { STAGE_MBAR_BYTES = 16, OTHER_MBAR_BYTES = 256 };

static int deeper_ring(const Sched *S, const TirPipe *p) {
  const TirFunc *f = S->f;
  const TirSchedule *s = S->s;
  double flops = dot_flops(f, p);
  if (S->o->ring_stages || !S->o->ws_entry || !s->ws || flops <= 0 || env_off("TILEC_DEEP_RING"))
    return p->stages; /* (ring_stages: this is the schedule at the depth it chose) */
  int fixed, stage_bytes = STAGE_MBAR_BYTES + ring_stage_bytes(f, p, &fixed);
  fixed += s->store_bytes + OTHER_MBAR_BYTES;
  for (int h = 0; h < s->nheads; h++) /* (head tiles are shared tiles: their second copy) */
    fixed += (s->head_stages - 1) * tile_bytes(f, f->insts[s->heads[h]].dst);
  int threads = WARPGROUP + s->consumer_threads * s->groups, n = p->stages;
  if (s->launch_blocks > 1 && arch_blocks_per_sm(S->o->arch, threads, fixed + n * stage_bytes) > 1)
    return n;
  while (n < RING_MAX_STAGES && (n - 1) * flops < RING_AHEAD_FLOPS && fixed + (n + 1) * stage_bytes <= SMEM_WITH_L1)
    n++;
  return n;
}

/* The warp-specialized entry's ring depth when the ring as written leaves no room for the
 * epilogue's TMA stores (plan_stores left them out): the deepest ring of fewer stages beside
 * which they all fit, if its P - 1 stages still hold RING_AHEAD_FLOPS of the loop's DOTs; else
 * the depth as written. A 128 x 256 x 64 tile is 48 KB a stage: at `pipeline 4` (192 KB) the
 * 64 KB staging tile did not fit, and a weight gradient X^T dY ran 9% slower than at 3 stages
 * with its TMA store (run ai2). GEMM main loops only (one overlapped DOT): attention's loops,
 * whose stores are one tile among many iterations, are left as written. TILEC_STORE_RING=0 keeps
 * the depth as written. */
static int store_ring(const Sched *S, const TirPipe *p) {
  const TirFunc *f = S->f;
  const TirSchedule *s = S->s;
  double flops = dot_flops(f, p);
  if (S->o->ring_stages || !S->o->ws_entry || !s->ws || s->nstores || s->groups != 1 || s->cluster != 1 ||
      p->overlap_dot < 0 || flops <= 0 || env_off("TILEC_STORE_RING") || env_off("TILEC_TMA_STORE"))
    return p->stages;
  int staging = 0, fixed, stage_bytes = ring_stage_bytes(f, p, &fixed);
  TirTmap m;
  for (int j = p->last + 1; j < f->ninsts; j++)
    staging += store_staging(f, p, j, &m);
  fixed += 1024 + staging; /* (the mbarriers, rounded, as plan_stores counts them) */
  for (int n = p->stages - 1; staging && n >= 2 && (n - 1) * flops >= RING_AHEAD_FLOPS; n--)
    if (fixed + n * stage_bytes <= arch_smem_limit(ARCH_SM90A))
      return n;
  return p->stages;
}

/* ---------------------------------------------- the scheduled copy */

/* The schedule's instruction lists through map (old index -> new) after a pass renumbered the
 * table: the producer's slice, the head loads, the TMA stores. */
static void remap_roles(TirSchedule *s, const int *map) {
  for (int k = 0; k < s->nslice; k++)
    s->slice[k] = map[s->slice[k]];
  for (int h = 0; h < s->nheads; h++)
    s->heads[h] = map[s->heads[h]];
  for (int k = 0; k < s->nstores; k++)
    s->stores[k] = map[s->stores[k]];
  for (int k = 0; k < s->nprefetch; k++)
    s->prefetch[k] = map[s->prefetch[k]];
  for (int k = 0; k < s->nprogs; k++) {
    s->progs[k].load = map[s->progs[k].load];
    s->progs[k].loop = map[s->progs[k].loop];
  }
}

/* ---------------------------------------------- the early set (warp-specialized entry)
 *
 * One full / empty mbarrier pair per stage holds every tile of the stage until the body's last
 * reader of any of them. Attention reads K in its first product (S = Q K^T) and V in its last
 * (O += P V): with K on barriers of its own, freed right after S, the producer loads K of the
 * iteration two ahead while the body still runs the softmax and P V over V. That is what lets a
 * rotated loop run on 2 stages (with one pair the refill of the next stage waits for the stage
 * still in use; FlashAttention-3 keeps separate K and V pipelines for the same reason). Only
 * a loop that is then rotated keeps the early set (tir_schedule schedules a loop that is not
 * again with one set). TILEC_EARLY_SET=0 keeps one set, for the A/B. */

/* The first instruction of the top-level body statement of p's loop that holds instruction j. */
static int statement_start(const TirFunc *f, const TirPipe *p, int j) {
  for (int o = p->first + 1; o < j; o++)
    if ((f->insts[o].op == TIR_IF || f->insts[o].op == TIR_FOR) && top_level(f, p->first, o) &&
        tir_region_end(f, o) > j)
      return o;
  return j;
}

/* On the unscheduled numbering: the loads whose last reader precedes p->release form the early
 * set, freed after the last of those readers; the others' wait moves down to their first reader
 * (p->wait holds that instruction until insert_sync puts the wait before it). */
static void plan_early_set(const Sched *S, TirPipe *p) {
  const TirFunc *f = S->f;
  if (!S->o->ws_entry || !S->o->rotate || S->o->one_set || !S->s->ws || p->overlap_dot >= 0 ||
      env_off("TILEC_EARLY_SET"))
    return;
  bool *early = arena_alloc(f->arena, sizeof(bool) * (size_t)p->nloads);
  int rel = -1, late_first = p->last;
  for (int l = 0; l < p->nloads; l++) {
    int last = load_last_reader(f, p, l);
    early[l] = last < p->release;
    rel = early[l] && last > rel ? last : rel;
  }
  if (rel < 0)
    return;
  for (int j = p->first + 1; j < p->last && late_first == p->last; j++)
    for (int l = 0; l < p->nloads; l++)
      if (!early[l] && reads_tile(f, j, f->insts[p->loads[l]].dst))
        late_first = statement_start(f, p, j);
  p->early = early;
  p->early_release = rel;
  p->wait = late_first;
  for (int l = 0; l < p->nloads; l++)
    S->s->early_bytes += early[l] ? S->s->tmaps[l].rows * S->s->tmaps[l].row_bytes * S->s->tmaps[l].chunks : 0;
}

/* Copies f's instructions with PIPE_WAIT after each pipe's FOR and PIPE_RELEASE after its last
 * reader, renumbering the table. */
static void insert_sync(TirFunc *g, const TirFunc *f, TirSchedule *s) {
  TirPipe *pipes = s->pipes;
  int npipes = s->npipes;
  int *map = arena_alloc(f->arena, sizeof(int) * (size_t)(f->ninsts + 1));
  /* old numbering: after release / early_release, before late_wait (with an early set) */
  int *release = arena_alloc(f->arena, sizeof(int) * (size_t)(3 * npipes + 1));
  int *early_release = release + npipes, *late_wait = early_release + npipes;
  for (int k = 0; k < npipes; k++) {
    release[k] = pipes[k].release;
    early_release[k] = pipes[k].early ? pipes[k].early_release : -1;
    late_wait[k] = pipes[k].early ? pipes[k].wait : -1;
  }
  int head_wait = s->nheads ? s->head_wait : -1, head_release = s->nheads ? s->head_release : -1;
  g->cap_insts = f->ninsts + 4 * npipes + 3;
  g->insts = arena_alloc(f->arena, sizeof(TirInst) * (size_t)g->cap_insts);
  g->ninsts = 0;
  bool *moved = arena_alloc(f->arena, sizeof(bool) * (size_t)(f->ninsts + 1));
  for (int k = 0; k < s->nprefetch; k++)
    moved[s->prefetch[k]] = true;
  for (int i = 0; i < f->ninsts; i++) {
    if (moved[i])
      continue; /* already copied before the loop */
    if (npipes && i == pipes[0].first)
      for (int k = 0; k < s->nprefetch; k++) {
        map[s->prefetch[k]] = g->ninsts;
        g->insts[g->ninsts++] = f->insts[s->prefetch[k]];
      }
    for (int k = 0; k < npipes; k++)
      if (late_wait[k] == i) {
        pipes[k].wait = g->ninsts;
        g->insts[g->ninsts++] = (TirInst){.op = TIR_PIPE_WAIT, .dst = -1, .args = {-1, -1, -1}, .axis = k,
                                          .arg_index = -1, .loc = f->insts[i].loc};
      }
    map[i] = g->ninsts;
    g->insts[g->ninsts++] = f->insts[i];
    TirInst head = {.op = TIR_HEAD_WAIT, .dst = -1, .args = {-1, -1, -1}, .arg_index = -1, .loc = f->insts[i].loc};
    if (i == head_wait) {
      s->head_wait = g->ninsts;
      g->insts[g->ninsts++] = head;
    }
    if (i == head_release) {
      head.op = TIR_HEAD_RELEASE;
      s->head_release = g->ninsts;
      g->insts[g->ninsts++] = head;
    }
    for (int k = 0; k < npipes; k++) {
      TirInst sync = {.op = TIR_PIPE_WAIT, .dst = -1, .args = {-1, -1, -1}, .axis = k,
                      .arg_index = -1, .early_set = pipes[k].early != NULL, .loc = f->insts[i].loc};
      if (pipes[k].first == i) {
        *(pipes[k].early ? &pipes[k].early_wait : &pipes[k].wait) = g->ninsts;
        g->insts[g->ninsts++] = sync;
      }
      sync.op = TIR_PIPE_RELEASE;
      if (early_release[k] == i) {
        pipes[k].early_release = g->ninsts;
        g->insts[g->ninsts++] = sync;
      }
      if (release[k] == i) {
        sync.early_set = false;
        sync.imm = pipes[k].overlap_dot >= 0 ? 1 : 0;
        pipes[k].release = g->ninsts;
        g->insts[g->ninsts++] = sync;
      }
    }
  }
  map[f->ninsts] = g->ninsts;
  for (int k = 0; k < npipes; k++) {
    TirPipe *p = &pipes[k];
    p->first = map[p->first];
    p->last = map[p->last];
    if (p->overlap_dot >= 0)
      p->overlap_dot = map[p->overlap_dot];
    for (int l = 0; l < p->nloads; l++)
      p->loads[l] = map[p->loads[l]];
    for (int c = 0; c < p->nchain; c++)
      p->chain[c] = map[p->chain[c]];
    for (int l = 0; l < p->nlookahead; l++)
      p->lookahead[l] = map[p->lookahead[l]];
  }
  remap_roles(s, map);
}


/* ---------------------------------------------- rotation (warp-specialized entry)
 *
 * FlashAttention-3's intra-warpgroup overlap, derived from the loop: a body
 *
 *     wait; s = dot(a, b, 0); <softmax of s; acc *= alpha; p = ...>; acc = dot(p, c, acc); release
 *
 * becomes (i: this iteration, first: a flag set before the loop)
 *
 *     wait
 *     if first { s = dot(a, b, 0); first = 0 }           the first iteration's s, synchronously
 *     <the body up to the first read of acc>             runs while P V of i-1 is in flight
 *     dot_wait 0 acc; release (previous stage)           P V of i-1 done, its stage free
 *     <the rest of the body>
 *     if i + step < hi { wait (next stage); s = dot(a, b, 0) async, next stage }
 *     acc = dot(p, c, acc) async                         issued after S of i+1
 *     dot_wait 1 s                                       S of i+1 done, P V of i in flight
 *
 * With two or more consumer warpgroups (one group) the dots of an iteration, from before the
 * next-stage IF to after P V, and the first iteration's S form a turn: wg_turn waits for this
 * warpgroup's turn, wg_pass hands it to the next one (FlashAttention-3's ping-pong: while one
 * warpgroup runs its softmax the tensor cores work through the other's two products, queued in
 * a fixed order instead of racing). TILEC_WG_TURNS=0 leaves them out.
 *
 * The loop exit drains acc and releases the last stage (the overlapped-DOT path). Legal
 * when: both DOTs are at the top level of the body and the only ones; the first has a zero
 * accumulator and a result nothing reads or writes outside the stretch up to the second DOT; its operands
 * are ring tiles of the pipe or shared tiles the loop never writes (views through a TRANS
 * included); the second accumulates into acc in place, acc is untouched before the first DOT
 * and first read at the top level; nothing follows the second DOT but the release; the ring has
 * at least 3 stages.
 *
 * With an early set (the first DOT's ring operands, attention's K), its release right after
 * the first DOT becomes `if i + step < hi { release }`: the stage of iteration i is free at the
 * top of iteration i, but for the last iteration, whose unread product still reads it (the
 * loop's exit frees that one); the next-stage wait is the early set's, and the other set's wait
 * stays right before P V. 2 stages then suffice. */

typedef struct Rotation {
  int d1, d2, acc_read; /* the two DOTs and the body's first read of acc (scheduled numbering) */
} Rotation;

static bool loop_invariant_operand(const TirFunc *f, const TirPipe *p, int r) {
  int t = operand_tile(f, r);
  return t >= 0 && (in_ring(p, f, t) || count_writes(f, t, p->first, p->last + 1) == 0);
}

/* The set of ring tile t: 1 in p's early set, 0 in the other, -1 not a ring tile of p. */
static int ring_set(const TirFunc *f, const TirPipe *p, int t) {
  for (int l = 0; l < p->nloads; l++)
    if (f->insts[p->loads[l]].dst == t)
      return p->early && p->early[l];
  return -1;
}

/* Whether DOT in reads no ring tile of p outside its early set (and some inside it). */
static bool early_operands(const TirFunc *f, const TirPipe *p, const TirInst *in) {
  int n = 0;
  for (int o = 0; o < 2; o++) {
    int set = ring_set(f, p, operand_tile(f, in->args[o]));
    if (set == 0)
      return false;
    n += set == 1;
  }
  return n > 0;
}

/* The ANY of the any-guard (docs/tir.md) at the top level of the loop body from first that
 * holds instruction j (online_softmax's rescale of the accumulator), or j: the accumulator's
 * wait goes before the guard, which reads it only when some row's max moved. */
static int any_guard_around(const TirFunc *f, int first, int j) {
  int outer = -1, depth = 0;
  for (int k = first + 1; k < j; k++) {
    TirOp op = f->insts[k].op;
    if (op == TIR_IF || op == TIR_FOR) {
      if (depth++ == 0)
        outer = k;
    } else if (op == TIR_ENDIF || op == TIR_ENDFOR) {
      depth--;
    }
  }
  bool guard = depth == 1 && f->insts[outer].op == TIR_IF && f->insts[outer - 1].op == TIR_ANY &&
               f->insts[outer - 1].dst == f->insts[outer].args[0];
  return guard ? outer - 1 : j;
}

static bool plan_rotation(const TirFunc *g, const TirPipe *p, Rotation *R) {
  R->d1 = R->d2 = R->acc_read = -1;
  for (int j = p->first + 1; j < p->last; j++)
    if (g->insts[j].op == TIR_DOT) {
      if (R->d2 >= 0 || !top_level(g, p->first, j))
        return false;
      *(R->d1 < 0 ? &R->d1 : &R->d2) = j;
    }
  /* At the end of iteration i the consumers hold stage i (P V reads it) and wait for stage i+1:
   * with 2 stages and one set the producer can refill i+2 only after i's release in iteration
   * i+1, so the loads stop running ahead (measured on the H200: 2-stage rotations were 10-25%
   * slower). With the first DOT's operands in the early set, freed at the top of iteration i,
   * K of i+2 loads during iteration i and V's stage is held no longer than with 3 stages. */
  bool early = p->early && p->early_release == R->d1 + 1 && early_operands(g, p, &g->insts[R->d1]);
  if (R->d2 < 0 || p->stages < (early ? 2 : 3) || p->overlap_dot >= 0 || p->release != R->d2 + 1 ||
      p->release + 1 != p->last || (p->early && !early))
    return false;
  const TirInst *a = &g->insts[R->d1], *b = &g->insts[R->d2];
  int s = a->dst, acc = b->dst;
  if (!tir_is_zero_tile(g, a->args[2]) || b->args[2] != acc ||
      g->regs[acc].type.place == PLACE_SHARED || g->regs[s].type.place == PLACE_SHARED)
    return false;
  for (int o = 0; o < 2; o++)
    if (!loop_invariant_operand(g, p, a->args[o]))
      return false;
  if (!loop_invariant_operand(g, p, b->args[1]))
    return false;
  for (int j = 0; j < g->ninsts; j++) {
    bool uses_s = j != R->d1 && (tir_inst_reads(&g->insts[j], s) || is_written(&g->insts[j], s));
    if (uses_s && (j <= R->d1 || j >= R->d2))
      return false; /* s lives from the first DOT to the second (masks may rewrite it in place) */
    bool touches_acc = j != R->d2 && (tir_inst_reads(&g->insts[j], acc) || is_written(&g->insts[j], acc));
    if (touches_acc && j > p->first && j < p->last) {
      if (j < R->d1)
        return false;
      if (R->acc_read < 0)
        R->acc_read = j;
    }
  }
  if (R->acc_read > R->d1 && !top_level(g, p->first, R->acc_read))
    R->acc_read = any_guard_around(g, p->first, R->acc_read);
  return R->acc_read > R->d1 && top_level(g, p->first, R->acc_read);
}

/* p's instruction numbers through map (old index -> new) after a pass renumbered the table. */
static void remap_pipe(TirPipe *p, const int *map) {
  p->first = map[p->first];
  p->last = map[p->last];
  p->wait = map[p->wait];
  p->release = map[p->release];
  if (p->overlap_dot >= 0)
    p->overlap_dot = map[p->overlap_dot];
  if (p->rotated)
    p->acc_wait = map[p->acc_wait];
  if (p->turn >= 0)
    p->turn = map[p->turn], p->pass = map[p->pass];
  if (p->early)
    p->early_wait = map[p->early_wait], p->early_release = map[p->early_release];
  for (int l = 0; l < p->nloads; l++)
    p->loads[l] = map[p->loads[l]];
  for (int c = 0; c < p->nchain; c++)
    p->chain[c] = map[p->chain[c]];
  for (int l = 0; l < p->nlookahead; l++)
    p->lookahead[l] = map[p->lookahead[l]];
}

typedef struct Emit {
  TirFunc *g;
  TirInst *out;
  int n;
} Emit;

static TirInst *put_inst(Emit *e, TirInst in) {
  e->out[e->n] = in;
  return &e->out[e->n++];
}

static TirInst op_inst(TirOp op, int dst, int a0, int a1, SrcLoc loc) {
  return (TirInst){.op = op, .dst = dst, .args = {a0, a1, -1}, .arg_index = -1, .pipeline = 1, .loc = loc};
}

static int scalar_reg(TirFunc *g, ElemType e, int like) {
  return tir_new_reg(g, (TileType){.elem = e, .layout = g->regs[like].type.layout}, NULL);
}

/* Emits `span = hi - i; more = step < span` for the loop FOR fr (another iteration follows this
 * one: the form is_more_iters recognizes); returns more. */
static int put_more_iters(Emit *e, const TirInst *fr, SrcLoc loc) {
  int span = scalar_reg(e->g, TY_I32, fr->dst), more = scalar_reg(e->g, TY_BOOL, fr->dst);
  put_inst(e, op_inst(TIR_SUB, span, fr->args[1], fr->dst, loc));
  put_inst(e, op_inst(TIR_LT, more, fr->args[2], span, loc));
  return more;
}

/* Rewrites g's only pipe as described above; false (g untouched) when it is not legal. */
static bool rotate(TirFunc *g, TirPipe *p) {
  Rotation R;
  if (!plan_rotation(g, p, &R))
    return false;
  Emit e = {g, arena_alloc(g->arena, sizeof(TirInst) * (size_t)(g->ninsts + 30)), 0};
  TirSchedule *sc = g->sched;
  bool turns = sc->groups == 1 && sc->consumer_threads >= 2 * WARPGROUP && !env_off("TILEC_WG_TURNS");
  sc->turns = turns ? sc->consumer_threads / WARPGROUP : 0;
  const TirInst *fr = &g->insts[p->first];
  SrcLoc loc = g->insts[R.d1].loc;
  int first = scalar_reg(g, TY_BOOL, fr->dst);
  int *map = arena_alloc(g->arena, sizeof(int) * (size_t)(g->ninsts + 1));
  TirInst s_dot = g->insts[R.d1], wait = g->insts[p->early ? p->early_wait : p->wait];
  int acc_wait = -1, turn = -1, pass = -1;
  for (int i = 0; i < g->ninsts; i++) {
    const TirInst *in = &g->insts[i];
    if (i == p->release)
      continue; /* moved after the accumulator's wait (map set there) */
    if (i == p->first)
      put_inst(&e, op_inst(TIR_CONST, first, -1, -1, loc))->imm = 1;
    map[i] = e.n;
    if (i == R.d1) {
      put_inst(&e, op_inst(TIR_IF, -1, first, -1, loc));
      if (turns)
        put_inst(&e, op_inst(TIR_WG_TURN, -1, -1, -1, loc));
      map[i] = e.n;
      put_inst(&e, s_dot);
      if (turns)
        put_inst(&e, op_inst(TIR_WG_PASS, -1, -1, -1, loc));
      put_inst(&e, op_inst(TIR_CONST, first, -1, -1, loc))->imm = 0;
      put_inst(&e, op_inst(TIR_ENDIF, -1, -1, -1, loc));
      continue;
    }
    if (p->early && i == p->early_release) {
      /* the early set's stage is free once S of this iteration is done, except in the last
       * iteration, whose unread product still reads it (the loop's exit frees it) */
      put_inst(&e, op_inst(TIR_IF, -1, put_more_iters(&e, fr, loc), -1, loc));
      map[i] = e.n;
      put_inst(&e, *in);
      put_inst(&e, op_inst(TIR_ENDIF, -1, -1, -1, loc));
      continue;
    }
    if (i == R.acc_read) {
      acc_wait = e.n;
      put_inst(&e, op_inst(TIR_DOT_WAIT, -1, g->insts[R.d2].dst, -1, in->loc))->imm = 0;
      TirInst rel = g->insts[p->release];
      rel.imm = 1;
      map[p->release] = e.n;
      put_inst(&e, rel);
      map[i] = e.n;
    }
    if (i == R.d2) {
      if (turns) {
        turn = e.n;
        put_inst(&e, op_inst(TIR_WG_TURN, -1, -1, -1, loc));
      }
      put_inst(&e, op_inst(TIR_IF, -1, put_more_iters(&e, fr, loc), -1, loc));
      TirInst w = wait;
      w.stage = 1;
      put_inst(&e, w);
      TirInst d = s_dot;
      d.stage = 1;
      d.imm = 1;
      put_inst(&e, d);
      /* The last iteration defines s too, by the same dot over this iteration's stage (still
       * held: P V reads it), whose result nothing reads: s is then in flight on both paths.
       * Left undefined, the old s lives into the merge and ptxas serializes every wgmma of the
       * entry (C7515, session l); so it does when the last iteration writes s otherwise; zeros
       * on every path (TILEC_LAST_DOT=0) cost 64 moves an iteration, which ptxas makes 128
       * instructions: 20% of the d64 attention loop's. The price: one product per tile. */
      put_inst(&e, op_inst(TIR_ELSE, -1, -1, -1, loc));
      if (env_off("TILEC_LAST_DOT")) {
        put_inst(&e, op_inst(TIR_CONST, s_dot.dst, -1, -1, loc))->imm = 0;
      } else {
        TirInst last = s_dot;
        last.imm = 1;
        /* one k16 step defines every register of s as well as all of them: d128's last
         * product costs an eighth of one (TILEC_LAST_DOT_STEPS=0: all) */
        last.k_steps = env_off("TILEC_LAST_DOT_STEPS") ? 0 : 1;
        put_inst(&e, last);
      }
      put_inst(&e, op_inst(TIR_ENDIF, -1, -1, -1, loc));
      map[i] = e.n;
      TirInst pv = *in;
      pv.imm = 1;
      put_inst(&e, pv);
      if (turns) {
        pass = e.n;
        put_inst(&e, op_inst(TIR_WG_PASS, -1, -1, -1, in->loc));
      }
      put_inst(&e, op_inst(TIR_DOT_WAIT, -1, s_dot.dst, -1, in->loc))->imm = 1;
      continue;
    }
    put_inst(&e, *in);
  }
  map[g->ninsts] = e.n;
  p->overlap_dot = R.d2;
  remap_pipe(p, map);
  p->acc_wait = acc_wait, p->turn = turn, p->pass = pass; /* numbered as emitted */
  p->rotated = true;
  p->early_tail = p->early != NULL;
  remap_roles(sc, map);
  if (sc->nheads) {
    sc->head_wait = map[sc->head_wait];
    sc->head_release = map[sc->head_release];
  }
  g->insts = e.out;
  g->ninsts = g->cap_insts = e.n;
  return true;
}

/* ---------------------------------------------- early head release (warp-specialized entry)
 *
 * The head tiles (attention's Q) are freed after the loop unless this pass moves the release
 * into the loop's last iteration, right after the top-level statement that holds their last
 * synchronous reader:
 *
 *     ran = lo < hi                                   before the loop
 *     for i = lo, hi, step {
 *       s = dot(q, k)                                 synchronous (a rotated loop: the first
 *                                                     iteration's, in its IF)
 *       if not(step < hi - i) { head_release }        the last iteration
 *       ...
 *       if step < hi - i { s = dot(q, k') async }     rotated: never in the last iteration, and
 *     }                                               retired by its dot_wait 1 in its own
 *     if not(ran) { head_release }                    a loop of no iteration
 *
 * With one copy of Q the producer then loads the next tile's Q during this tile's last
 * softmax, P V and epilogue instead of after them (at short sequences, tiles of a few
 * iterations, the consumers waited for it at every tile start). Legal when the step is a
 * positive constant, the bounds and the loop variable are written by nothing in the body, and
 * every reader of a head tile is a DOT in the loop: synchronous before the release, or a
 * rotated loop's next-stage dot after it (a rotated loop's last, unread product reads B's ring
 * tile as A instead, where it has A's type). TILEC_EARLY_HEAD=0 leaves the release after the loop. */

/* The instruction that writes register r, when exactly one does; else -1. */
static int only_writer(const TirFunc *f, int r) {
  int at = -1;
  for (int j = 0; j < f->ninsts; j++)
    if (is_written(&f->insts[j], r)) {
      if (at >= 0)
        return -1;
      at = j;
    }
  return at;
}

/* Whether p's loop has a positive constant step, and bounds and variable its body never writes. */
static bool plain_counted_loop(const TirFunc *f, const TirPipe *p) {
  const TirInst *fr = &f->insts[p->first];
  int step = only_writer(f, fr->args[2]);
  for (int a = 0; a < 3; a++)
    if (count_writes(f, fr->args[a], p->first, p->last + 1) != 0)
      return false;
  return step >= 0 && f->insts[step].op == TIR_CONST && f->insts[step].imm > 0 &&
         count_writes(f, fr->dst, p->first + 1, p->last) == 0;
}

/* Whether register r is `step < hi - i` of p's loop (another iteration follows), by its only
 * writers. */
static bool is_more_iters(const TirFunc *f, const TirPipe *p, int r) {
  const TirInst *fr = &f->insts[p->first];
  int lt = only_writer(f, r), sub = lt >= 0 ? only_writer(f, f->insts[lt].args[1]) : -1;
  return sub > p->first && lt < p->last && f->insts[lt].op == TIR_LT && f->insts[lt].args[0] == fr->args[2] &&
         f->insts[sub].op == TIR_SUB && f->insts[sub].args[0] == fr->args[1] && f->insts[sub].args[1] == fr->dst;
}

/* Whether reader r of a head tile is done with it when the last iteration frees it right before
 * instruction rel: a synchronous DOT of the loop before rel, or after it a rotated loop's
 * async next-stage DOT right inside `if step < hi - i` at the top level of the body. */
static bool head_read_done(const TirFunc *f, const TirPipe *p, int r, int rel) {
  const TirInst *in = &f->insts[r];
  if (in->op != TIR_DOT || r <= p->first || r >= p->last)
    return false;
  if (r < rel)
    return in->imm == 0 && r != p->overlap_dot;
  return p->rotated && in->stage == 1 && in->imm == 1 && f->insts[r - 2].op == TIR_IF &&
         top_level(f, p->first, r - 2) && is_more_iters(f, p, f->insts[r - 2].args[0]);
}

/* The end of the top-level body statement of p's loop that holds instruction j. */
static int statement_end(const TirFunc *f, const TirPipe *p, int j) {
  for (int o = p->first + 1; o < j; o++)
    if ((f->insts[o].op == TIR_IF || f->insts[o].op == TIR_FOR) && top_level(f, p->first, o) &&
        tir_region_end(f, o) > j)
      return tir_region_end(f, o);
  return j;
}

/* The instruction after which the last iteration frees the head tiles, or -1 (not legal). */
static int plan_early_release(const TirFunc *g, const TirPipe *p) {
  const TirSchedule *sc = g->sched;
  if (!sc->nheads || sc->head_release != p->last + 1 || !plain_counted_loop(g, p) || env_off("TILEC_EARLY_HEAD"))
    return -1;
  int at = -1;
  for (int h = 0; h < sc->nheads; h++)
    for (int j = p->first + 1; j < p->last; j++)
      if (reads_tile(g, j, g->insts[sc->heads[h]].dst) && g->insts[j].stage == 0 && j > at)
        at = j;
  if (at < 0)
    return -1;
  at = statement_end(g, p, at);
  for (int h = 0; h < sc->nheads; h++)
    for (int j = 0; j < g->ninsts; j++)
      if (j != sc->heads[h] && reads_tile(g, j, g->insts[sc->heads[h]].dst) && !head_read_done(g, p, j, at + 1))
        return -1;
  return at;
}

/* Whether shared tile b has register a's type (rank, dims, element): a wgmma operand's stand-in. */
static bool same_tile_type(const TirFunc *f, int a, int b) {
  const TileType *ta = &f->regs[a].type, *tb = &f->regs[b].type;
  return ta->rank == tb->rank && ta->elem == tb->elem &&
         !memcmp(ta->dims, tb->dims, sizeof ta->dims[0] * (size_t)ta->rank);
}

/* A rotated loop's last, unread product (in the ELSE of the next-stage dot's IF), or -1. */
static int last_product(const TirFunc *f, const TirPipe *p) {
  for (int j = p->first + 1; p->rotated && j + 2 < p->last; j++)
    if (f->insts[j].op == TIR_DOT && f->insts[j].stage == 1 && f->insts[j + 1].op == TIR_ELSE &&
        f->insts[j + 2].op == TIR_DOT)
      return j + 2;
  return -1;
}

/* Whether r may stand in for A (a) in the unread last product at last_dot (in the IF at
 * last_dot - 2; nothing reads its result), so that nothing reads a head tile after its release:
 * B's ring tile where it has A's type (its stage is held: P V reads it), or a register tile of A's
 * type written once, at the top level of p's body before that IF, that is the register A of
 * another DOT of the body, so it has wgmma's A layout (P of P V, where BN = D: a 192-row query
 * tile has no ring tile of its type). */
static bool a_stand_in_ok(const TirFunc *f, const TirPipe *p, int last_dot, int a, int r) {
  int b = f->insts[last_dot].args[1];
  if (r < 0 || r == a || !same_tile_type(f, a, r))
    return false;
  if (r == operand_tile(f, b))
    return r != b && in_ring(p, f, r);
  if (f->regs[r].type.place == PLACE_SHARED || count_writes(f, r, 0, f->ninsts) != 1)
    return false;
  bool written = false, a_of_dot = false;
  for (int k = p->first + 1; k < last_dot - 2; k++)
    written |= is_written(&f->insts[k], r) && top_level(f, p->first, k);
  for (int j = p->first + 1; j < p->last; j++)
    a_of_dot |= j != last_dot && f->insts[j].op == TIR_DOT && f->insts[j].args[0] == r;
  return written && a_of_dot;
}

/* The stand-in a_stand_in_ok takes for A of the last product at last_dot: B's ring tile first,
 * then (unless TILEC_REG_STAND_IN=0) the register A of a DOT of the body; or -1. */
static int a_stand_in(const TirFunc *f, const TirPipe *p, int last_dot) {
  int a = f->insts[last_dot].args[0], b = operand_tile(f, f->insts[last_dot].args[1]);
  if (a_stand_in_ok(f, p, last_dot, a, b))
    return b;
  for (int j = p->first + 1; j < p->last && !env_off("TILEC_REG_STAND_IN"); j++)
    if (f->insts[j].op == TIR_DOT && a_stand_in_ok(f, p, last_dot, a, f->insts[j].args[0]))
      return f->insts[j].args[0];
  return -1;
}

static void release_heads_early(TirFunc *g, TirPipe *p) {
  int last_dot = last_product(g, p), a = last_dot >= 0 ? g->insts[last_dot].args[0] : -1;
  int stand_in = last_dot >= 0 ? a_stand_in(g, p, last_dot) : -1;
  if (stand_in >= 0)
    g->insts[last_dot].args[0] = stand_in;
  int at = plan_early_release(g, p);
  if (at < 0) {
    if (last_dot >= 0)
      g->insts[last_dot].args[0] = a;
    return;
  }
  TirSchedule *sc = g->sched;
  Emit e = {g, arena_alloc(g->arena, sizeof(TirInst) * (size_t)(g->ninsts + 12)), 0};
  int *map = arena_alloc(g->arena, sizeof(int) * (size_t)(g->ninsts + 1));
  const TirInst *fr = &g->insts[p->first];
  int iv = fr->dst, ran = scalar_reg(g, TY_BOOL, iv), none = scalar_reg(g, TY_BOOL, iv);
  int last = scalar_reg(g, TY_BOOL, iv);
  int after_loop = sc->head_release;
  TirInst release = g->insts[after_loop];
  SrcLoc loc = release.loc;
  for (int i = 0; i < g->ninsts; i++) {
    const TirInst *in = &g->insts[i];
    if (i == p->first)
      put_inst(&e, op_inst(TIR_LT, ran, fr->args[0], fr->args[1], loc));
    map[i] = e.n;
    if (i == after_loop) {
      put_inst(&e, op_inst(TIR_NOT, none, ran, -1, loc));
      put_inst(&e, op_inst(TIR_IF, -1, none, -1, loc));
      map[i] = sc->head_release_empty = e.n;
      put_inst(&e, release);
      put_inst(&e, op_inst(TIR_ENDIF, -1, -1, -1, loc));
      continue;
    }
    put_inst(&e, *in);
    if (i == at) {
      put_inst(&e, op_inst(TIR_NOT, last, put_more_iters(&e, fr, loc), -1, loc));
      put_inst(&e, op_inst(TIR_IF, -1, last, -1, loc));
      sc->head_release = e.n;
      put_inst(&e, release);
      put_inst(&e, op_inst(TIR_ENDIF, -1, -1, -1, loc));
    }
  }
  map[g->ninsts] = e.n;
  remap_pipe(p, map);
  remap_roles(sc, map);
  sc->head_wait = map[sc->head_wait];
  g->insts = e.out;
  g->ninsts = g->cap_insts = e.n;
}

/* TirSchedule.head_after; TILEC_HEAD_AFTER=K (one copy) issues the heads after K ring loads
 * instead, for an A/B (any K is free of deadlock: the previous tile's consumers wait for nothing
 * of the next tile). */
static int plan_head_after(const TirSchedule *s, const TirPipe *p) {
  const char *e = getenv("TILEC_HEAD_AFTER");
  if (e && *e && s->head_stages == 1) {
    int k = atoi(e);
    return k < 0 ? 0 : k > p->stages ? p->stages : k;
  }
  return s->head_stages == 1 && s->head_release_empty < 0 ? p->stages : 0;
}

/* ---------------------------------------------- block order
 *
 * The hardware starts a grid's blocks in index order (x fastest). Where the loops run more trips
 * the larger block.x is (causal attention: the key loop ends at the diagonal), block.x is read
 * reversed, nctaid.x - 1 - ctaid.x: the longest blocks start first and the short ones fill the
 * last wave instead of the long ones trailing it (FlashAttention's order). Any permutation of
 * the blocks computes the same (blocks are independent); persistent walks order their own tiles.
 * TILEC_BLOCK_ORDER=0 keeps index order, for the A/B. */

/* How a scalar depends on block.x (as the index grows). */
typedef enum { MONO_NONE, MONO_UP, MONO_DOWN, MONO_ANY } Mono;

static Mono mono_join(Mono a, Mono b) { return a == MONO_NONE ? b : b == MONO_NONE || a == b ? a : MONO_ANY; }

static Mono mono_flip(Mono a) { return a == MONO_UP ? MONO_DOWN : a == MONO_DOWN ? MONO_UP : a; }

/* The analysis state: each register's only writing instruction (< 0: none or several), and the
 * memo of mono_of (-1: not yet known), so every register is looked at once. */
typedef struct MonoCtx {
  const TirFunc *f;
  int *def;
  int *memo;
} MonoCtx;

/* r is written once, by a constant >= 0 or a run-time dimension (never negative). */
static bool nonneg_scalar(const MonoCtx *c, int r) {
  int d = c->def[r];
  return d >= 0 && ((c->f->insts[d].op == TIR_CONST && c->f->insts[d].imm >= 0) || c->f->insts[d].op == TIR_DIM);
}

static Mono mono_of(MonoCtx *c, int r);

static Mono mono_def(MonoCtx *c, const TirInst *in) {
  switch (in->op) {
  case TIR_CONST:
  case TIR_PARAM:
  case TIR_DIM:
    return MONO_NONE;
  case TIR_BLOCK_ID:
    return in->axis == 0 ? MONO_UP : MONO_NONE;
  case TIR_COPY:
  case TIR_CVT:
    return mono_of(c, in->args[0]);
  case TIR_ADD:
  case TIR_MIN:
  case TIR_MAX:
    return mono_join(mono_of(c, in->args[0]), mono_of(c, in->args[1]));
  case TIR_SUB:
    return mono_join(mono_of(c, in->args[0]), mono_flip(mono_of(c, in->args[1])));
  case TIR_MUL:
  case TIR_DIV: { /* by a factor >= 0 (truncating division is monotone too) */
    Mono a = mono_of(c, in->args[0]), b = mono_of(c, in->args[1]);
    if (in->op == TIR_MUL && a == MONO_NONE && nonneg_scalar(c, in->args[0]))
      return b;
    if (b == MONO_NONE && nonneg_scalar(c, in->args[1]))
      return a;
    return a == MONO_NONE && b == MONO_NONE ? MONO_NONE : MONO_ANY;
  }
  case TIR_SELECT:
    return mono_of(c, in->args[0]) == MONO_NONE ? mono_join(mono_of(c, in->args[1]), mono_of(c, in->args[2]))
                                                : MONO_ANY;
  default:
    if (!(tir_op_info[in->op].flags & OPF_ELEMWISE))
      return MONO_ANY;
    for (int k = 0; k < 3 && in->args[k] >= 0; k++)
      if (mono_of(c, in->args[k]) != MONO_NONE)
        return MONO_ANY;
    return MONO_NONE;
  }
}

/* How scalar r depends on block.x. A register not yet known is marked ANY while it is looked
 * at, so a cycle (a loop-carried value) gives ANY. */
static Mono mono_of(MonoCtx *c, int r) {
  if (r < 0 || c->f->regs[r].type.rank != 0 || c->def[r] < 0)
    return MONO_ANY;
  if (c->memo[r] < 0) {
    c->memo[r] = MONO_ANY;
    c->memo[r] = (int)mono_def(c, &c->f->insts[c->def[r]]);
  }
  return (Mono)c->memo[r];
}

static void plan_block_order(const TirFunc *f, TirSchedule *s) {
  if ((s->persistent && !s->walk_rows) || env_off("TILEC_BLOCK_ORDER"))
    return; /* a row walk keeps it for a launch of a block per tile (the walk decodes it) */
  MonoCtx c = {f, arena_alloc(f->arena, sizeof(int) * (size_t)(f->nregs + 1)),
               arena_alloc(f->arena, sizeof(int) * (size_t)(f->nregs + 1))};
  for (int r = 0; r < f->nregs; r++)
    c.def[r] = -1, c.memo[r] = -1;
  for (int j = 0; j < f->ninsts; j++) { /* one pass; -2: written twice (like -1, no definition) */
    int r = f->insts[j].dst;
    if (r >= 0)
      c.def[r] = c.def[r] == -1 ? j : -2;
  }
  Mono trips = MONO_NONE;
  for (int j = 0; j < f->ninsts && trips != MONO_ANY; j++) {
    const TirInst *in = &f->insts[j];
    if (in->op != TIR_FOR)
      continue;
    int step = in->args[2] >= 0 ? c.def[in->args[2]] : -1;
    if (step < 0 || f->insts[step].op != TIR_CONST || f->insts[step].imm <= 0)
      trips = MONO_ANY;
    else
      trips = mono_join(trips, mono_join(mono_of(&c, in->args[1]), mono_flip(mono_of(&c, in->args[0]))));
  }
  s->reverse_x = trips == MONO_UP;
}

/* ---------------------------------------------- progressive copies */

enum { PROGRESSIVE_MAX_PARTS = 8 };

/* The loop that progressive copy `load` of shared tile r would serve: the top-level FOR holding
 * the first instruction after the load that touches r, counting up from a constant >= 0 by a
 * constant step, whose body reads r only through windows that start at its counter and never
 * writes it; else -1. *cols: the widest such window's padded columns. */
static int progressive_loop(const TirFunc *f, int load, int r, int *cols) {
  int first = -1;
  for (int j = load + 1; j < f->ninsts && first < 0; j++)
    if (reads_tile(f, j, r) || f->insts[j].dst == r)
      first = j;
  int loop = -1;
  for (int j = load + 1; first >= 0 && j <= first; j++)
    if (top_level(f, load, j) && f->insts[j].op == TIR_FOR && tir_region_end(f, j) > first)
      loop = j;
  if (loop < 0)
    return -1;
  const TirInst *fo = &f->insts[loop];
  int lo = tir_only_write(f, fo->args[0]), step = tir_only_write(f, fo->args[2]);
  if (lo < 0 || f->insts[lo].op != TIR_CONST || f->insts[lo].imm < 0 || step < 0 ||
      f->insts[step].op != TIR_CONST || f->insts[step].imm < 1)
    return -1;
  *cols = 0;
  for (int j = loop + 1; j < tir_region_end(f, loop); j++) {
    const TirInst *in = &f->insts[j];
    if (in->dst == r || in->dst == fo->dst)
      return -1;
    if (!reads_tile(f, j, r))
      continue;
    if (in->op != TIR_WINDOW || in->args[0] != r || in->args[2] != fo->dst || !f->regs[in->dst].type.layout)
      return -1;
    int w = f->regs[in->dst].type.layout->shape[f->regs[in->dst].type.rank - 1];
    *cols = w > *cols ? w : *cols;
  }
  return *cols ? loop : -1;
}

/* Parts of a progressive copy of a tile of layout L (elem bytes eb) read in windows of `cols`
 * columns: the top register bits of each thread's 16-byte chunks must be the top bits of the
 * column (chunk k of every thread in part k / (chunks / parts)), no other bit may reach them;
 * at most one part per window, at most max_parts; 0 when fewer than two. */
static int progressive_parts(const Layout *L, int eb, int cols, int max_parts) {
  int sbits = layout_log2((uint32_t)L->shape[0]), rbits = L->nbits[LAY_REG];
  int chunk_bits = layout_log2((uint32_t)(16 / eb));
  int parts = 1;
  while (parts * 2 <= max_parts && (int64_t)parts * 2 * cols <= L->shape[0] &&
         layout_log2((uint32_t)parts * 2) <= rbits - chunk_bits)
    parts *= 2;
  int pbits = layout_log2((uint32_t)parts), top = sbits - pbits;
  if (parts < 2)
    return 0;
  for (int kind = 0; kind < LAY_NKINDS; kind++)
    for (int b = 0; b < L->nbits[kind]; b++) {
      bool part_bit = kind == LAY_REG && b >= rbits - pbits;
      uint32_t want = part_bit ? 1u << (top + b - (rbits - pbits)) : 0;
      if ((L->basis[kind][b] >> top << top) != want)
        return 0;
    }
  return parts;
}

/* Progressive copies (TirSchedule.progs): kernels without pipes only (a pipelined loop commits
 * groups of its own at run time); TILEC_PROGRESSIVE=P turns them on with at most P parts. */
static void plan_progressive(const TirFunc *f, TirSchedule *s) {
  const char *env = getenv("TILEC_PROGRESSIVE");
  int max_parts = env ? atoi(env) : 0;
  if (s->npipes || max_parts < 2)
    return;
  max_parts = max_parts > PROGRESSIVE_MAX_PARTS ? PROGRESSIVE_MAX_PARTS : max_parts;
  s->progs = arena_alloc(f->arena, sizeof(TirProgressive) * (size_t)(f->ninsts + 1));
  for (int j = 0; j < f->ninsts; j++) {
    const TirInst *in = &f->insts[j];
    const TileType *t = in->op == TIR_LOAD ? &f->regs[in->dst].type : NULL;
    int cols = 0, loop;
    if (!t || t->place != PLACE_SHARED || t->rank != 1 || !t->layout || !top_level(f, -1, j) ||
        !tir_load_moves_16_bytes(f, in) || (loop = progressive_loop(f, j, in->dst, &cols)) < 0)
      continue;
    int parts = progressive_parts(t->layout, elem_bytes(t->elem), cols, max_parts);
    if (parts)
      s->progs[s->nprogs++] = (TirProgressive){j, loop, parts};
  }
}

/* ---------------------------------------------- early scalar loads */

/* Whether the hoist of scalar load ld stops below top-level statement [i, end]: the statement
 * writes one of ld's operands; or it is a shared tile's copy, or a pipelined loop whose prologue
 * issues copies, which go first (a load whose index waits on another load's value would hold
 * their issue back; the warp-specialized entry prefetches epilogue loads itself, plan_prefetch). */
static bool hoist_stops_at(const TirFunc *f, int i, int end, const TirInst *ld) {
  const TirInst *in = &f->insts[i];
  if ((in->op == TIR_FOR && in->pipeline >= 2) ||
      (in->op == TIR_LOAD && f->regs[in->dst].type.place == PLACE_SHARED))
    return true;
  for (int k = i; k <= end; k++)
    if (f->insts[k].dst >= 0 && tir_inst_reads(ld, f->insts[k].dst))
      return true;
  return false;
}

/* A scalar the kernel loads at the top level from a tensor it never writes, defined there only. */
static bool hoistable_load(const TirFunc *f, int j) {
  const TirInst *in = &f->insts[j];
  return in->op == TIR_LOAD && f->regs[in->dst].type.rank == 0 && !tir_arg_written(f, in->arg_index) &&
         count_writes(f, in->dst, 0, f->ninsts) == 1;
}

/* Early scalar loads: each hoistable top-level scalar load moves up to just below the statement
 * that stops it (hoist_stops_at), so that its latency runs under the loops and block reductions
 * before its first use instead of after them: a row kernel's label or statistics, read after its
 * reductions, stalled every warp of the block for a DRAM round trip (cross-entropy backward:
 * three chained ones, 8% of its stall samples). Returns f, or a copy with the loads moved.
 * TILEC_EARLY_LOADS=0 turns it off. */
static const TirFunc *hoist_scalar_loads(const TirFunc *f) {
  if (env_off("TILEC_EARLY_LOADS") || !f->ninsts)
    return f;
  TirFunc *g = arena_alloc(f->arena, sizeof *g);
  *g = *f;
  g->insts = arena_alloc(f->arena, sizeof(TirInst) * (size_t)(f->ninsts + 1));
  memcpy(g->insts, f->insts, sizeof(TirInst) * (size_t)f->ninsts);
  g->cap_insts = f->ninsts;
  int *starts = arena_alloc(f->arena, sizeof(int) * (size_t)(f->ninsts + 2));
  int n = 0; /* the top-level statements before j: [starts[k], starts[k + 1] - 1], starts[n] = j */
  for (int j = 0; j < g->ninsts; j = starts[n]) {
    starts[n] = j;
    int k = n;
    while (hoistable_load(g, j) && k > 0 && !hoist_stops_at(g, starts[k - 1], starts[k] - 1, &g->insts[j]))
      k--;
    TirOp op = g->insts[j].op;
    int next = (op == TIR_FOR || op == TIR_IF ? tir_region_end(g, j) : j) + 1;
    if (k < n) { /* the load becomes the statement at starts[k]; those from there on move down one */
      TirInst ld = g->insts[j];
      memmove(&g->insts[starts[k] + 1], &g->insts[starts[k]], sizeof(TirInst) * (size_t)(j - starts[k]));
      g->insts[starts[k]] = ld;
      for (int m = n; m > k; m--)
        starts[m] = starts[m - 1] + 1;
    }
    starts[++n] = next;
  }
  return g;
}

/* ---------------------------------------------- idle bands (TirSchedule.band_rows) */

/* Rows per warpgroup where the layout of register tile r holds whole bands of rows by
 * warpgroup: the warpgroup bits of the warp index step through rows by B, 2B, ... and nothing
 * else, and every other basis moves inside a band of B rows (B a power of two); else 0. */
static int32_t warpgroup_band(const TirFunc *f, int r) {
  const TileType *t = &f->regs[r].type;
  const Layout *L = t->layout;
  int wg_bit = layout_log2(WARPGROUP / 32);
  if (t->place == PLACE_SHARED || !L || t->rank != 2 || L->nbits[LAY_WARP] <= wg_bit)
    return 0;
  int32_t c[TILE_MAX_RANK];
  layout_coord(L->rank, L->shape, L->basis[LAY_WARP][wg_bit], c);
  int32_t band = c[0];
  if (band <= 0 || (band & (band - 1)))
    return 0;
  for (int kind = 0; kind < LAY_NKINDS; kind++)
    for (int b = 0; b < L->nbits[kind]; b++) {
      layout_coord(L->rank, L->shape, L->basis[kind][b], c);
      bool wg = kind == LAY_WARP && b >= wg_bit;
      if (wg ? c[0] != band << (b - wg_bit) || c[1] : c[0] >= band)
        return 0;
    }
  return band;
}

/* Whether the skeleton of loop p (its protocol: markers, scalars, waits, releases, turns, head
 * syncs) runs exactly as the whole body does without the rest: no body instruction has an effect
 * outside this thread's registers but the ring's (no stores, atomics, cluster reductions, shared
 * writes, reductions across warps), and every scalar, hence every branch and bound, is computed
 * from scalars only. */
static bool skeleton_runs_alike(const TirFunc *f, const TirPipe *p) {
  for (int j = p->first + 1; j < p->last; j++) {
    const TirInst *in = &f->insts[j];
    if (tir_op_writes_tensor(in->op) || in->op == TIR_CLUSTER_SUM || in->op == TIR_CLUSTER_MAX)
      return false;
    if (in->dst < 0 || (in->op == TIR_TRANS && tir_trans_view_ok(f, j)))
      continue;
    const TileType *t = &f->regs[in->dst].type;
    if (t->place == PLACE_SHARED && !(in->op == TIR_LOAD && in_ring(p, f, in->dst)))
      return false;
    if (reduces_across_warps(f, in, 0))
      return false;
    if (in->op == TIR_ANY) /* an any-guard's IF holds no protocol: the idle loop takes it as false */
      continue;
    for (int a = 0; t->rank == 0 && a < 3; a++)
      if (in->args[a] >= 0 && f->regs[in->args[a]].type.rank != 0)
        return false;
  }
  return true;
}

/* Whether `in`, reading a tile of `rows` rows some of whose warpgroup bands may hold garbage,
 * keeps each row's result in that row: element-wise ops and conversions, broadcasts along the
 * columns, reductions along them. */
static bool keeps_rows(const TirFunc *f, const TirInst *in, int32_t rows) {
  const TileType *t = &f->regs[in->dst].type;
  if (t->rank != 2 || t->dims[0] != rows)
    return false;
  if (tir_op_maps_elements(in->op))
    return true;
  if (in->op == TIR_BCAST)
    return f->regs[in->args[0]].type.rank == 2 && f->regs[in->args[0]].type.dims[0] == rows;
  return tir_op_reduces(in->op) && in->axis == 1;
}

/* The idle-band plan of loop p in the scheduled f (TirSchedule.band_rows): one predicate for the
 * planner and the verifier. Rows per band, or 0; *row0 and *dim as TirSchedule's. */
static int idle_band_plan(const TirFunc *f, const TirPipe *p, int consumer_threads, int *row0, int *dim) {
  if (consumer_threads / WARPGROUP < 2 || !top_level(f, -1, p->first) || !skeleton_runs_alike(f, p))
    return 0;
  bool *taint = arena_alloc(f->arena, sizeof(bool) * (size_t)(f->nregs + 1));
  int32_t band = 0, rows = 0;
  for (int j = p->first + 1; j < p->last; j++) { /* what the loop hands on: its register tiles */
    int r = f->insts[j].dst;
    if (r < 0 || taint[r] || f->regs[r].type.rank == 0 || f->regs[r].type.place == PLACE_SHARED)
      continue;
    bool read_after = false;
    for (int k = p->last + 1; k < f->ninsts && !read_after; k++)
      read_after = tir_inst_reads(&f->insts[k], r);
    if (!read_after)
      continue;
    int32_t b = warpgroup_band(f, r);
    if (!b || (band && b != band) || (rows && f->regs[r].type.dims[0] != rows))
      return 0;
    band = b, rows = f->regs[r].type.dims[0];
    taint[r] = true;
  }
  *row0 = *dim = -1;
  bool grew = band > 0; /* to a fixed point: a loop after this one may carry garbage round */
  while (grew) {
    grew = false;
    for (int k = p->last + 1; k < f->ninsts; k++) {
      const TirInst *in = &f->insts[k];
      bool reads = false;
      for (int a = 0; a < 3; a++)
        reads |= in->args[a] >= 0 && taint[in->args[a]];
      if (!reads)
        continue;
      if (in->op != TIR_STORE) {
        if (in->dst < 0 || !keeps_rows(f, in, rows))
          return 0;
        grew |= !taint[in->dst];
        taint[in->dst] = true;
        continue;
      }
      /* the sink: the value's rows at rows row0 + i of the first range dimension */
      const TirArg *a = &f->args[in->arg_index];
      int d = 0;
      while (d < a->rank && !in->index[d].is_range)
        d++;
      if (d == a->rank || taint[in->index[d].start] || in->index[d].size != rows ||
          f->regs[in->args[0]].type.dims[0] != rows ||
          (*row0 >= 0 && (*row0 != in->index[d].start || *dim != a->dims[d])))
        return 0;
      *row0 = in->index[d].start, *dim = a->dims[d];
    }
  }
  int w = *row0 >= 0 ? tir_only_write(f, *row0) : -1;
  if (w < 0 || w >= p->first || !top_level(f, -1, w) || !tir_is_i32_scalar(f, *row0))
    return 0;
  return band;
}

static void plan_idle_bands(const TirFunc *g, TirSchedule *s, const SchedOptions *o) {
  if (!s->ws || s->groups != 1 || s->cluster != 1 || o->no_idle_bands || env_off("TILEC_IDLE_BANDS"))
    return;
  s->band_rows = idle_band_plan(g, &s->pipes[0], s->consumer_threads, &s->band_row0, &s->band_dim);
  s->rotate_x = s->band_rows && s->persistent && !s->walk_rows && s->tile_group == 1 && !env_off("TILEC_ROTATE_X");
}

TirFunc *tir_schedule(const TirFunc *f0, const SchedOptions *o, Diag *d) {
  const TirFunc *f = hoist_scalar_loads(f0);
  Arena *a = f->arena;
  TirFunc *g = arena_alloc(a, sizeof *g);
  *g = *f;
  /* registers of its own: each schedule of f (the two entries') adds some (tir_new_reg) */
  g->regs = arena_alloc(a, sizeof *g->regs * (size_t)(f->nregs + 1));
  if (f->nregs)
    memcpy(g->regs, f->regs, sizeof *g->regs * (size_t)f->nregs);
  g->cap_regs = f->nregs;
  TirSchedule *s = arena_alloc(a, sizeof *s);
  g->sched = s;
  Sched S = {.f = f, .o = o, .d = d, .s = s};
  TirPipe *pipes = arena_alloc(a, sizeof(TirPipe) * (size_t)(f->ninsts + 1));
  find_pipes(&S, pipes, &s->npipes);
  s->pipes = pipes;
  if (s->npipes == 1 && f->cluster == 1) { /* (a cluster's blocks meet at its reductions: no roles) */
    plan_ws(&S, &pipes[0]);
    int deep = deeper_ring(&S, &pipes[0]), fit = deep == pipes[0].stages ? store_ring(&S, &pipes[0]) : deep;
    if (fit != pipes[0].stages) { /* schedule again: the overlap, the rotation follow the depth */
      SchedOptions again = *o;
      again.ring_stages = fit;
      TirFunc *h = tir_schedule(f, &again, d);
      if (h && fit < pipes[0].stages)
        h->sched->ring_for_stores = true;
      return h;
    }
    plan_early_set(&S, &pipes[0]);
  }
  if (!s->ws)
    s->head_wait = s->head_release = s->head_release_empty = -1;
  for (int k = 0; s->ws && k < s->npipes; k++)
    pipes[k].nlookahead = 0; /* the consumers wait on mbarriers: no pipe_top issues them */
  plan_block_order(f, s);
  plan_progressive(f, s);
  insert_sync(g, f, s);
  if (o->rotate && s->ws)
    rotate(g, &pipes[0]);
  if (s->npipes == 1 && pipes[0].early && !pipes[0].rotated) {
    /* the early set pays in a rotated loop only: in the plain loops of attention d128 and GQA it
     * cost 1-3.5%, at N = 512 causal 9% (H200, run s1); schedule again with one set */
    SchedOptions one = *o;
    one.one_set = true;
    return tir_schedule(f, &one, d);
  }
  if (o->ws_entry && s->ws) {
    release_heads_early(g, &pipes[0]);
    plan_idle_bands(g, s, o);
  }
  if (s->nheads)
    s->head_after = plan_head_after(s, &pipes[0]);
  for (int t = 0; t < s->ntmaps; t++) {
    int h = t - pipes[0].nloads;
    s->tmaps[t].load = h < 0 ? pipes[0].loads[t] : h < s->nheads ? s->heads[h] : s->stores[h - s->nheads];
  }
  if (!tir_verify(g, d, "schedule") || !tir_verify_schedule(g, d))
    return NULL;
  return g;
}

/* ---------------------------------------------- verifier */

typedef struct SchedVerifier {
  const TirFunc *f;
  Diag *d;
} SchedVerifier;

__attribute__((format(printf, 3, 4))) static bool sfail(const SchedVerifier *v, int at, const char *fmt, ...) {
  char msg[400];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  SrcLoc loc = at >= 0 && at < v->f->ninsts ? v->f->insts[at].loc : v->f->loc;
  diag_report(v->d, DIAG_ERROR, loc, "internal error: invalid schedule: instruction %d: %s", at, msg);
  return false;
}


/* A rotated loop: the previous stage is released right after the accumulator's dot_wait 0,
 * which precedes every other touch of the accumulator in the body; a next-stage dot sits in an
 * IF right after a next-stage wait, is async, and its result is read only after a dot_wait 1
 * that follows the overlapped dot (so only that dot may still be in flight). */
static bool verify_rotation(const SchedVerifier *v, const TirPipe *p) {
  const TirFunc *f = v->f;
  int acc = f->insts[p->overlap_dot].dst;
  if (p->acc_wait <= p->first || f->insts[p->acc_wait].op != TIR_DOT_WAIT || f->insts[p->acc_wait].imm != 0 ||
      f->insts[p->acc_wait].args[0] != acc || p->release != p->acc_wait + 1 || !top_level(f, p->first, p->acc_wait))
    return sfail(v, p->acc_wait, "rotated pipe: no dot_wait 0 of the accumulator before the release");
  const TirInst *ov = &f->insts[p->overlap_dot];
  int wait1 = p->overlap_dot + 1 + (p->pass == p->overlap_dot + 1); /* past the turn's wg_pass */
  if (ov->imm != 1 || wait1 >= p->last || f->insts[wait1].op != TIR_DOT_WAIT || f->insts[wait1].imm != 1)
    return sfail(v, p->overlap_dot, "rotated pipe: the overlapped dot is not async and followed by dot_wait 1");
  for (int j = p->first + 1; j < p->acc_wait; j++)
    if (j != p->wait && (tir_inst_reads(&f->insts[j], acc) || is_written(&f->insts[j], acc)))
      return sfail(v, j, "rotated pipe: touches the accumulator before its dot_wait");
  for (int j = p->first + 1; j < p->last; j++) {
    const TirInst *in = &f->insts[j];
    if (in->op != TIR_DOT || in->stage == 0)
      continue;
    const TirInst *w = &f->insts[j - 1];
    if (in->imm != 1 || w->op != TIR_PIPE_WAIT || w->stage != 1 || f->insts[j - 2].op != TIR_IF ||
        (p->early && (!w->early_set || !early_operands(f, p, in))) ||
        f->insts[j + 1].op != TIR_ELSE || f->insts[j + 3].op != TIR_ENDIF || j + 4 != p->overlap_dot)
      return sfail(v, j, "rotated pipe: a next-stage dot without its wait, or not right before the overlapped dot");
    if (f->insts[wait1].args[0] != in->dst)
      return sfail(v, wait1, "rotated pipe: the dot_wait 1 does not retire the next-stage dot's result");
    const TirInst *last = &f->insts[j + 2]; /* the last iteration's s: zeros, or this stage's dot */
    /* A may be a stand-in of A's type (release_heads_early): nothing reads the result */
    int a = last->args[0];
    bool a_ok = a == in->args[0] || a_stand_in_ok(f, p, j + 2, in->args[0], a);
    bool same_dot = last->op == TIR_DOT && last->stage == 0 && last->imm == 1 && a_ok &&
                    last->args[1] == in->args[1] && last->args[2] == in->args[2];
    if (last->dst != in->dst || (!same_dot && !(last->op == TIR_CONST && last->imm == 0)))
      return sfail(v, j + 2, "rotated pipe: the last iteration's s is neither zeros nor the same dot of this stage");
  }
  return true;
}

/* What may run between a wg_turn and its wg_pass: nothing that waits for the other warpgroups
 * (a consumer-wide barrier there deadlocks: they wait for this turn's pass) or for a dot (the
 * turn is for issuing): scalars, control flow, the next stage's wait, dots and constants into
 * registers. */
static bool turn_safe(const TirFunc *f, const TirInst *in) {
  switch (in->op) {
  case TIR_IF:
  case TIR_ELSE:
  case TIR_ENDIF:
  case TIR_PIPE_WAIT:
    return true;
  case TIR_DOT:
  case TIR_CONST:
    return f->regs[in->dst].type.place != PLACE_SHARED;
  default:
    return in->dst >= 0 && f->regs[in->dst].type.rank == 0 && replayable_op(in, false);
  }
}

/* Turns: wg_turn / wg_pass pairs only inside the rotated loop, each pair at one nesting level
 * with only turn-safe instructions between; the loop's own pair at its top level around every
 * dot issued at the end of the iteration. Every warpgroup runs the same pairs (the conditions
 * around them are scalars, uniform over the block), so the turns go round in order; the next
 * stage's wait inside a turn needs the stage the producer refills released by the warpgroup one
 * turn behind: with a set freed after P V (its lagged release), 3+ stages; the early set, freed
 * at the top of each iteration (before that warpgroup's previous turn), needs 2. */
static bool verify_turns(const SchedVerifier *v) {
  const TirFunc *f = v->f;
  const TirSchedule *s = f->sched;
  const TirPipe *p = &s->pipes[0];
  int open = -1, depth = 0, open_depth = 0;
  for (int j = 0; j < f->ninsts; j++) {
    const TirInst *in = &f->insts[j];
    depth += in->op == TIR_IF || in->op == TIR_FOR;
    depth -= in->op == TIR_ENDIF || in->op == TIR_ENDFOR;
    /* the end or the ELSE of the block the turn started in */
    if (open >= 0 && (depth < open_depth || (in->op == TIR_ELSE && depth == open_depth)))
      return sfail(v, j, "a turn (wg_turn @%d) leaves the block it started in", open);
    if (in->op != TIR_WG_TURN && in->op != TIR_WG_PASS) {
      if (open >= 0 && !turn_safe(f, in))
        return sfail(v, j, "%s inside a turn (between wg_turn @%d and its wg_pass)", tir_op_info[in->op].name, open);
      if (open >= 0 && in->op == TIR_PIPE_WAIT && !in->early_set && p->stages < 3)
        return sfail(v, j, "a wait inside a turn for a set freed after P V, with %d stages (3+)", p->stages);
      continue;
    }
    if (!s->turns || !s->ws || s->npipes != 1 || s->groups != 1 || !p->rotated || s->turns < 2 ||
        s->turns * 128 != s->consumer_threads)
      return sfail(v, j, "%s without turns over 2+ warpgroups of a rotated loop", tir_op_info[in->op].name);
    if (j <= p->first || j >= p->last)
      return sfail(v, j, "%s outside the rotated loop", tir_op_info[in->op].name);
    if (in->op == TIR_WG_TURN) {
      if (open >= 0)
        return sfail(v, j, "wg_turn before the wg_pass of the turn at @%d", open);
      open = j, open_depth = depth;
      for (int k = j - 1, d = 0; k > p->first; k--) { /* the IFs around it test scalars */
        if (f->insts[k].op == TIR_ENDIF)
          d++;
        else if (f->insts[k].op == TIR_IF && d > 0)
          d--;
        else if (f->insts[k].op == TIR_IF && f->regs[f->insts[k].args[0]].type.rank != 0)
          return sfail(v, j, "wg_turn under a condition that is not a scalar");
      }
    } else {
      if (open < 0)
        return sfail(v, j, "wg_pass without a wg_turn");
      if (depth != open_depth)
        return sfail(v, j, "wg_pass at another nesting level than its wg_turn @%d", open);
      open = -1;
    }
  }
  if (open >= 0)
    return sfail(v, open, "wg_turn without a wg_pass");
  if (!s->turns)
    return true;
  if (s->npipes != 1 || !p->rotated)
    return sfail(v, -1, "turns without a rotated loop");
  if (p->turn < 0 || p->pass < 0 || f->insts[p->turn].op != TIR_WG_TURN || f->insts[p->pass].op != TIR_WG_PASS ||
      !top_level(f, p->first, p->turn) || !top_level(f, p->first, p->pass))
    return sfail(v, p->turn, "turns, but the rotated loop has no wg_turn / wg_pass at its top level");
  for (int j = p->first + 1; j < p->last; j++) {
    const TirInst *in = &f->insts[j];
    if ((j == p->overlap_dot || (in->op == TIR_DOT && in->stage == 1)) && (j < p->turn || j > p->pass))
      return sfail(v, j, "a dot of the iteration's end issued outside its turn");
  }
  return true;
}

/* The IF whose ELSE is instruction j, or -1. */
static int if_of_else(const TirFunc *f, int j) {
  for (int k = j - 1, depth = 0; k >= 0; k--) {
    TirOp op = f->insts[k].op;
    if (op == TIR_ENDIF || op == TIR_ENDFOR)
      depth++;
    else if ((op == TIR_IF || op == TIR_FOR) && depth-- == 0)
      return op == TIR_IF ? k : -1;
  }
  return -1;
}

/* Whether instruction r of p's loop runs only in its last iteration: alone in the ELSE of an
 * `if step < hi - i` at the top level of the body. */
static bool last_iteration_only(const TirFunc *f, const TirPipe *p, int r) {
  int cond = r > p->first + 1 && f->insts[r - 1].op == TIR_ELSE ? if_of_else(f, r - 1) : -1;
  return cond > p->first && f->insts[r + 1].op == TIR_ENDIF && top_level(f, p->first, cond) &&
         is_more_iters(f, p, f->insts[cond].args[0]);
}

/* A set's wait (PIPE_WAIT of this stage at the top level of the loop) and release: at the top
 * level, or (a rotated loop's early set) alone inside `if step < hi - i` at the top level. */
static bool verify_set_sync(const SchedVerifier *v, const TirPipe *p, int k, bool early) {
  const TirFunc *f = v->f;
  for (int at = 0; at < 2; at++) {
    int j = at ? (early ? p->early_release : p->release) : (early ? p->early_wait : p->wait);
    TirOp op = at ? TIR_PIPE_RELEASE : TIR_PIPE_WAIT;
    bool conditional = at && early && p->early_tail;
    bool placed = conditional ? j - 1 > p->first && f->insts[j - 1].op == TIR_IF && f->insts[j + 1].op == TIR_ENDIF &&
                                    top_level(f, p->first, j - 1) && is_more_iters(f, p, f->insts[j - 1].args[0])
                              : top_level(f, p->first, j);
    if (j <= p->first || j >= p->last || f->insts[j].op != op || f->insts[j].axis != k ||
        f->insts[j].early_set != early || f->insts[j].stage != 0 || !placed)
      return sfail(v, j, "pipe %d has no %s%s %s", k, tir_op_info[op].name, early ? " of its early set" : "",
                   conditional ? "right inside `if step < hi - i` at the top level of its loop"
                               : "at the top level of its loop");
  }
  if (early && (f->insts[p->early_release].imm != 0 || (p->early_tail && !p->rotated)))
    return sfail(v, p->early_release, "pipe %d: its early set is released late or after the loop without a rotation", k);
  return true;
}

static bool verify_pipe(const SchedVerifier *v, int k) {
  const TirFunc *f = v->f;
  const TirPipe *p = &f->sched->pipes[k];
  if (p->first < 0 || p->first >= f->ninsts || f->insts[p->first].op != TIR_FOR ||
      tir_region_end(f, p->first) != p->last || p->stages < 2)
    return sfail(v, p->first, "pipe %d is not a for loop of at least 2 stages", k);
  if (!verify_set_sync(v, p, k, false) || (p->early && !verify_set_sync(v, p, k, true)))
    return false;
  if (p->early && !f->sched->ws)
    return sfail(v, p->early_wait, "pipe %d: an early set without warp specialization", k);
  bool lagged = f->insts[p->release].imm == 1;
  if (lagged && !p->rotated && p->release != p->overlap_dot + 1)
    return sfail(v, p->release, "pipe %d releases the previous stage away from its overlapped dot", k);
  if (p->rotated && !verify_rotation(v, p))
    return false;
  if (p->thread_private && !ring_is_thread_private(f, p))
    return sfail(v, p->first, "pipe %d is thread-private but a thread reads ring elements another copies", k);
  if (p->nlookahead && (p->lookahead_dist < 1 || p->lookahead_dist > p->ahead))
    return sfail(v, p->first, "pipe %d: lookahead loads %d iterations ahead (1 .. %d)", k, p->lookahead_dist, p->ahead);
  for (int l = 0; l < p->nlookahead; l++) {
    int j = p->lookahead[l], t = f->insts[j].dst;
    if (f->sched->ws)
      return sfail(v, j, "pipe %d: a lookahead load in the warp-specialized entry", k);
    if (j <= p->first || j >= p->last || f->insts[j].op != TIR_LOAD || !top_level(f, p->first, j) ||
        f->regs[t].type.place == PLACE_SHARED || count_writes(f, t, 0, f->ninsts) != 1)
      return sfail(v, j, "pipe %d: lookahead load is not the only top-level write of its register tile", k);
    if (tir_arg_written(f, f->insts[j].arg_index))
      return sfail(v, j, "pipe %d: lookahead load of a tensor the kernel writes", k);
    for (int r = 0; r < f->ninsts; r++)
      if (tir_inst_reads(&f->insts[r], t) && (r <= j || r >= p->last))
        return sfail(v, r, "reads lookahead register %%%d before its load or outside its loop", t);
  }
  for (int l = 0; l < p->nloads; l++) {
    int j = p->loads[l], t = f->insts[j].dst;
    bool early = p->early && p->early[l];
    int wait = early ? p->early_wait : p->wait, release = early ? p->early_release : p->release;
    if (j <= p->first || j >= p->last || f->insts[j].op != TIR_LOAD || !top_level(f, p->first, j) ||
        count_writes(f, t, 0, f->ninsts) != 1)
      return sfail(v, j, "pipe %d: ring load is not the only top-level write of its tile", k);
    for (int r = 0; r < f->ninsts; r++) {
      if (r == j || !reads_tile(f, r, t))
        continue;
      if (r <= p->first || r >= p->last)
        return sfail(v, r, "reads ring tile %%%d outside its loop", t);
      if (r < wait)
        return sfail(v, r, "reads ring tile %%%d before its stage is waited for (pipe_wait)", t);
      /* after a release of this iteration's stage: only a next-stage dot (verify_rotation: right
       * after its own wait), or the last iteration's product where that release skips the last */
      bool next_stage = f->insts[r].op == TIR_DOT && f->insts[r].stage == 1 && p->rotated;
      bool kept = early && p->early_tail && last_iteration_only(f, p, r);
      if (!(early ? false : lagged) && r > release && !next_stage && !kept)
        return sfail(v, r, "reads ring tile %%%d after its stage is released (pipe_release)", t);
    }
  }
  return true;
}

static bool slice_computes(const TirSchedule *s, const TirFunc *f, int r) {
  for (int k = 0; k < s->nslice; k++)
    if (f->insts[s->slice[k]].dst == r)
      return true;
  return false;
}

/* An early release (release_heads_early): `if not(step < hi - i) { head_release }` at the top
 * level of the loop, every reader of a head tile done with it there (head_read_done); `ran =
 * lo < hi` right before the loop and `if not(ran) { head_release }` at the top level after it. */
static bool verify_early_heads(const SchedVerifier *v, const TirPipe *p) {
  const TirFunc *f = v->f;
  const TirSchedule *s = f->sched;
  const TirInst *fr = &f->insts[p->first];
  int rel = s->head_release, empty = s->head_release_empty;
  bool in_if = rel - 1 > p->first && rel < p->last && f->insts[rel - 1].op == TIR_IF &&
               top_level(f, p->first, rel - 1) && f->insts[rel + 1].op == TIR_ENDIF;
  int not = in_if ? only_writer(f, f->insts[rel - 1].args[0]) : -1;
  if (!plain_counted_loop(f, p) || not <= p->first || not > rel || f->insts[not].op != TIR_NOT ||
      !is_more_iters(f, p, f->insts[not].args[0]))
    return sfail(v, rel, "an early head_release not under `if not(step < hi - i)` at the top level of the loop");
  const TirInst *ran = &f->insts[p->first - 1];
  int none = empty > p->last && f->insts[empty - 1].op == TIR_IF ? only_writer(f, f->insts[empty - 1].args[0]) : -1;
  if (ran->op != TIR_LT || ran->args[0] != fr->args[0] || ran->args[1] != fr->args[1] ||
      only_writer(f, ran->dst) != p->first - 1 || none < 0 || f->insts[none].op != TIR_NOT ||
      f->insts[none].args[0] != ran->dst || !top_level(f, -1, empty - 1) || f->insts[empty + 1].op != TIR_ENDIF)
    return sfail(v, empty, "no release after a loop of no iteration (`ran = lo < hi` before it, `if not(ran)` after it)");
  for (int h = 0; h < s->nheads; h++) {
    int t = f->insts[s->heads[h]].dst;
    for (int r = 0; r < f->ninsts; r++)
      if (r != s->heads[h] && reads_tile(f, r, t) && (r < s->head_wait || !head_read_done(f, p, r, rel)))
        return sfail(v, r, "reads head tile %%%d where the last iteration's head_release may have freed it", t);
  }
  return true;
}

/* Head loads: each the only write of its tile, at the top level before the loop, coordinates
 * from the producer's slice; one head_wait after the last of them and before any reader of
 * their tiles, one head_release at the top level after every reader. */
static bool verify_heads(const SchedVerifier *v) {
  const TirFunc *f = v->f;
  const TirSchedule *s = f->sched;
  const TirPipe *p = &s->pipes[0];
  int waits = 0, releases = 0;
  for (int j = 0; j < f->ninsts; j++) {
    waits += f->insts[j].op == TIR_HEAD_WAIT;
    releases += f->insts[j].op == TIR_HEAD_RELEASE;
  }
  if (!s->nheads)
    return waits + releases == 0 ? true : sfail(v, -1, "head_wait / head_release without head loads");
  if (s->groups != 1 || s->cluster != 1)
    return sfail(v, -1, "head loads with %d consumer groups, a cluster of %d", s->groups, s->cluster);
  if (s->head_stages != 1 && (s->head_stages != 2 || !s->persistent))
    return sfail(v, -1, "%d copies of the head tiles (1, or 2 with a persistent walk)", s->head_stages);
  int w = s->head_wait, rel = s->head_release;
  bool early = s->head_release_empty >= 0;
  if (waits != 1 || releases != 1 + early || w < 0 || rel <= w || f->insts[w].op != TIR_HEAD_WAIT ||
      f->insts[rel].op != TIR_HEAD_RELEASE || !top_level(f, -1, w) || (!early && !top_level(f, -1, rel)) ||
      w > p->first)
    return sfail(v, w, "head loads need one top-level head_wait before the loop and one head_release after it");
  if (early)
    return verify_early_heads(v, p);
  for (int h = 0; h < s->nheads; h++) {
    int j = s->heads[h], t = f->insts[j].dst;
    if (f->insts[j].op != TIR_LOAD || j > w || !top_level(f, -1, j) || count_writes(f, t, 0, f->ninsts) != 1)
      return sfail(v, j, "head load %d is not the only top-level write of its tile before the head_wait", h);
    for (int d = 0; d < f->args[f->insts[j].arg_index].rank; d++)
      if (!slice_computes(s, f, f->insts[j].index[d].start))
        return sfail(v, j, "the producer cannot compute head load %d's coordinates", h);
    for (int r = 0; r < f->ninsts; r++)
      if (r != j && reads_tile(f, r, t) && (r < w || r > rel))
        return sfail(v, r, "reads head tile %%%d %s", t, r < w ? "before its head_wait" : "after its head_release");
  }
  return true;
}

static bool verify_ws(const SchedVerifier *v) {
  const TirFunc *f = v->f;
  const TirSchedule *s = f->sched;
  if (s->npipes != 1 || !top_level(f, -1, s->pipes[0].first))
    return sfail(v, -1, "warp specialization needs exactly one pipelined loop, at the top level");
  if (s->producer_threads != 128 || s->consumer_threads > f->threads || s->consumer_threads % 128)
    return sfail(v, -1, "roles: %d producer and %d consumer threads are not whole warpgroups",
                 s->producer_threads, s->consumer_threads);
  if (s->consumer_threads < WARPGROUP * consumer_warpgroups(f, s))
    return sfail(v, -1, "%d consumer threads, yet the warpgroups past them hold tile elements, write shared "
                 "tiles or reduce with the others", s->consumer_threads);
  if (s->groups != 1 && (s->groups != 2 || !s->persistent || s->cluster != 1 || s->consumer_threads != 128))
    return sfail(v, -1, "%d consumer groups (1, or 2 warpgroups taking turns in a persistent walk)", s->groups);
  if (s->walk_rows && (!s->persistent || s->groups != 1 || s->cluster != 1 || s->tile_group != 1))
    return sfail(v, -1, "a row walk is a persistent walk of one group, no cluster, x first");
  int threads = s->producer_threads + s->consumer_threads * s->groups;
  if (s->launch_blocks < 1 || s->launch_blocks > 2)
    return sfail(v, -1, "the block is launched for %d blocks an SM (1 or 2)", s->launch_blocks);
  if (s->producer_regs < 24 || s->consumer_regs > 256 || s->producer_regs % 8 || s->consumer_regs % 8 ||
      s->producer_regs * s->producer_threads + s->consumer_regs * s->consumer_threads * s->groups >
          threads * launch_regs(threads, s->launch_blocks))
    return sfail(v, -1, "register budgets %d / %d do not fit the %d x %d registers the block is launched with",
                 s->producer_regs, s->consumer_regs, threads, launch_regs(threads, s->launch_blocks));
  const TirPipe *p = &s->pipes[0];
  if (s->ntmaps != p->nloads + s->nheads + s->nstores)
    return sfail(v, -1, "%d tensor maps for %d ring loads, %d head loads and %d stores", s->ntmaps, p->nloads,
                 s->nheads, s->nstores);
  for (int t = 0; t < s->ntmaps; t++) {
    const TirTmap *m = &s->tmaps[t];
    const TirArg *a = &f->args[m->arg];
    int h = t - p->nloads, load = h < 0 ? p->loads[t] : h < s->nheads ? s->heads[h] : s->stores[h - s->nheads];
    bool store = h >= s->nheads;
    if (m->load != load || f->insts[m->load].arg_index != m->arg || m->store != store)
      return sfail(v, m->load, "tensor map %d does not describe its %s", t, store ? "store" : "load");
    /* a staging tile is rewritten per tile: only after the loop, at the top level, once per tile */
    if (store && (f->insts[m->load].op != TIR_STORE || m->load < p->last || !top_level(f, -1, m->load) ||
                  s->groups != 1 || s->cluster != 1))
      return sfail(v, m->load, "TMA store %d: not a top-level STORE after the loop of one consumer group", t);
    if (store && (m->split < 1 || m->box[m->outer] * m->split != m->rows || m->box[m->outer] % 8 ||
                  (m->split > 1 && m->split * WARPGROUP != s->consumer_threads)))
      return sfail(v, m->load, "TMA store %d: %d warpgroups do not each store a block of whole swizzle patterns", t,
                   m->split);
    if ((m->swizzle != 32 && m->swizzle != 64 && m->swizzle != 128) ||
        m->box[a->rank - 1] * elem_bytes(a->elem) != m->swizzle || m->rows > 256 || m->chunks < 1 || m->rows % 8)
      return sfail(v, m->load, "tensor map %d: box or swizzle out of TMA's range", t);
    if (m->multicast && (s->cluster != 2 || m->rows % 16 || m->box[m->outer] * 2 != m->rows))
      return sfail(v, m->load, "tensor map %d: a multicast half is not half of whole swizzle patterns", t);
    if (m->multicast && uses_block_axis(f, f->insts[m->load].index[m->outer].start, s->cluster_axis, 0))
      return sfail(v, m->load, "tensor map %d: multicast, yet its rows depend on the cluster's axis", t);
  }
  for (int k = 0; k < s->nprefetch; k++) {
    int j = s->prefetch[k];
    if (j >= p->first || f->insts[j].op != TIR_LOAD || !top_level(f, -1, j))
      return sfail(v, j, "a prefetched load is not a top-level LOAD before the loop");
  }
  for (int k = 0; k < s->nslice; k++) {
    int j = s->slice[k];
    if (j >= p->first || !top_level(f, -1, j) || f->regs[f->insts[j].dst].type.rank != 0 ||
        !replayable_op(&f->insts[j], true))
      return sfail(v, j, "the producer's slice holds an instruction it cannot replay");
  }
  /* Every register the producer reads is the loop variable, a chain result, or a slice result. */
  for (int k = 0; k < s->nslice; k++)
    for (int a = 0; a < 3; a++) {
      int r = f->insts[s->slice[k]].args[a];
      bool ok = r < 0;
      for (int m = 0; !ok && m < k; m++)
        ok = f->insts[s->slice[m]].dst == r;
      if (!ok)
        return sfail(v, s->slice[k], "the producer's slice reads %%%d before computing it", r);
    }
  for (int a = 0; a < 3; a++)
    if (!slice_computes(s, f, f->insts[p->first].args[a]))
      return sfail(v, p->first, "the producer cannot compute the loop bound %%%d", f->insts[p->first].args[a]);
  int row0, dim;
  if (s->rotate_x && (!s->band_rows || !s->persistent || s->walk_rows || s->tile_group != 1))
    return sfail(v, -1, "x rotated in a walk that is not persistent and x first with idle bands");
  if (s->band_rows && (s->groups != 1 || s->cluster != 1 ||
                       idle_band_plan(f, p, s->consumer_threads, &row0, &dim) != s->band_rows ||
                       row0 != s->band_row0 || dim != s->band_dim))
    return sfail(v, p->first, "idle bands of %d rows, yet the loop's protocol is not all a warpgroup past %%%d "
                 "must run, or what the loop hands on does not keep its rows until stores at them", s->band_rows,
                 s->band_row0);
  return verify_heads(v);
}

/* A progressive copy: a top-level shared rank-1 LOAD in no pipe's kernel, its parts a power of
 * two dividing the tile, read first by its loop and there only through windows at the counter. */
static bool verify_progressive(const SchedVerifier *v, const TirProgressive *pg) {
  const TirFunc *f = v->f;
  const TirInst *in = pg->load >= 0 && pg->load < f->ninsts ? &f->insts[pg->load] : NULL;
  const TileType *t = in && in->op == TIR_LOAD ? &f->regs[in->dst].type : NULL;
  if (!t || t->place != PLACE_SHARED || t->rank != 1 || !t->layout || !top_level(f, -1, pg->load))
    return sfail(v, pg->load, "a progressive copy is not a top-level LOAD of a rank-1 shared tile");
  if (f->sched->npipes)
    return sfail(v, pg->load, "a progressive copy in a kernel with pipes");
  if (pg->parts < 2 || (pg->parts & (pg->parts - 1)) || t->layout->shape[0] % pg->parts)
    return sfail(v, pg->load, "a progressive copy in %d parts", pg->parts);
  int cols;
  if (progressive_loop(f, pg->load, in->dst, &cols) != pg->loop)
    return sfail(v, pg->loop, "the progressive copy @%d is not read first by this loop, through windows at its counter only",
                 pg->load);
  return true;
}

bool tir_verify_schedule(const TirFunc *f, Diag *d) {
  SchedVerifier v = {f, d};
  if (!f->sched)
    return sfail(&v, -1, "no schedule");
  if (f->sched->persistent && !f->sched->ws)
    return sfail(&v, -1, "a persistent grid needs the warp-specialized ring");
  if (f->sched->ws && (f->sched->cluster != 1 && (f->sched->cluster != 2 || !f->sched->persistent)))
    return sfail(&v, -1, "a cluster of %d blocks (1, or 2 with a persistent grid)", f->sched->cluster);
  for (int j = 0; j < f->ninsts; j++) {
    TirOp op = f->insts[j].op;
    if ((op == TIR_PIPE_WAIT || op == TIR_PIPE_RELEASE) &&
        (f->insts[j].axis < 0 || f->insts[j].axis >= f->sched->npipes))
      return sfail(&v, j, "%s of no pipe", tir_op_info[op].name);
  }
  if (!verify_turns(&v))
    return false;
  for (int k = 0; k < f->sched->npipes; k++)
    if (!verify_pipe(&v, k))
      return false;
  if (!f->sched->ws && f->sched->nheads)
    return sfail(&v, -1, "head loads without warp specialization");
  for (int k = 0; k < f->sched->nprogs; k++)
    if (!verify_progressive(&v, &f->sched->progs[k]))
      return false;
  return !f->sched->ws || verify_ws(&v);
}

/* ---------------------------------------------- printer (--emit=tir with a schedule) */

void tir_print_schedule(FILE *out, const TirFunc *f) {
  const TirSchedule *s = f->sched;
  if (!s)
    return;
  for (int k = 0; k < s->npipes; k++) {
    const TirPipe *p = &s->pipes[k];
    fprintf(out, "// pipe %d: for @%d, %d stages", k, p->first, p->stages);
    int asked = f->insts[p->first].pipeline; /* fewer where shared memory ran out; more: deeper_ring */
    if (asked != p->stages)
      fprintf(out, " (pipeline %d: %s)", asked,
              asked < p->stages      ? "a deeper ring"
              : s->ring_for_stores ? "room for the TMA stores"
                                   : "what fits shared memory");
    fprintf(out, ", loads");
    for (int l = 0; l < p->nloads; l++)
      fprintf(out, " @%d", p->loads[l]);
    fprintf(out, ", wait @%d, release @%d", p->wait, p->release);
    if (p->early) {
      fputs(", early set (loads", out);
      for (int l = 0; l < p->nloads; l++)
        if (p->early[l])
          fprintf(out, " @%d", p->loads[l]);
      fprintf(out, "; wait @%d, release @%d%s)", p->early_wait, p->early_release,
              p->early_tail ? ", the last iteration's after the loop" : "");
    }
    if (p->overlap_dot >= 0)
      fprintf(out, ", overlapped dot @%d", p->overlap_dot);
    if (p->rotated)
      fprintf(out, ", rotated (accumulator wait @%d)", p->acc_wait);
    if (p->turn >= 0)
      fprintf(out, ", turn @%d .. @%d", p->turn, p->pass);
    if (p->nlookahead) {
      fputs(", lookahead loads:", out);
      for (int l = 0; l < p->nlookahead; l++)
        fprintf(out, " @%d", p->lookahead[l]);
      fprintf(out, " (%d ahead)", p->lookahead_dist);
    }
    if (p->thread_private && !s->ws)
      fputs(", thread-private (no barrier at the wait)", out);
    fputc('\n', out);
  }
  for (int k = 0; k < s->nprogs; k++)
    fprintf(out, "// progressive copy @%d in %d parts, read by the loop @%d\n", s->progs[k].load, s->progs[k].parts,
            s->progs[k].loop);
  if (s->reverse_x)
    fprintf(out, "// block order: block.x reversed, longest first (the loops run longer as it grows)\n");
  if (!s->ws)
    return;
  fprintf(out, "// roles: producer warpgroup (%d threads, %d registers) issues TMA; %d consumer threads (%d registers)",
          s->producer_threads, s->producer_regs, s->consumer_threads, s->consumer_regs);
  if (s->launch_blocks > 1)
    fprintf(out, "; registers for %d blocks an SM", s->launch_blocks);
  if (s->walk_rows)
    fprintf(out, "; persistent grid, a row walk (the trips follow block.x: chunks of a row's tiles)");
  else if (s->persistent)
    fprintf(out, "; persistent grid, raster group %d%s", s->tile_group,
            s->tile_group == 1 ? " (no ring load follows block.x: x first)" : "");
  fputc('\n', out);
  if (s->cluster == 2)
    fprintf(out, "// cluster of 2 along grid axis %c\n", "xyz"[s->cluster_axis]);
  if (s->groups == 2)
    fprintf(out, "// ping-pong: 2 consumer groups on alternate tiles\n");
  if (s->turns)
    fprintf(out, "// turns: %d consumer warpgroups issue their dots in turn\n", s->turns);
  if (s->band_rows)
    fprintf(out, "// idle bands: a warpgroup whose %d rows start at or past %s (from %%%d) runs the loop's protocol only%s\n",
            s->band_rows, f->dims[s->band_dim].name, s->band_row0,
            s->rotate_x ? "; the walk rotates x by y" : "");
  fputs("// producer slice:", out);
  for (int k = 0; k < s->nslice; k++)
    fprintf(out, " @%d", s->slice[k]);
  fputc('\n', out);
  for (int t = 0; t < s->ntmaps; t++) {
    const TirTmap *m = &s->tmaps[t];
    fprintf(out, "// tmap %d: %s @%d, %s box [", t, m->store ? "store" : "load", m->load, f->args[m->arg].name);
    for (int dd = 0; dd < f->args[m->arg].rank; dd++)
      fprintf(out, dd ? ", %d" : "%d", m->box[dd]);
    fprintf(out, "] x %d, swizzle %d%s", m->chunks, m->swizzle, m->multicast ? ", multicast" : "");
    fprintf(out, m->split > 1 ? ", one per warpgroup (%d)\n" : "\n", m->split);
  }
  fprintf(out, "// %d bytes per stage", s->tx_bytes);
  fprintf(out, s->early_bytes ? " (%d of the early set)\n" : "\n", s->early_bytes);
  if (s->nprefetch) {
    fputs("// prefetched before the loop:", out);
    for (int k = 0; k < s->nprefetch; k++)
      fprintf(out, " @%d", s->prefetch[k]);
    fputc('\n', out);
  }
  if (s->nheads) {
    fputs("// head loads:", out);
    for (int h = 0; h < s->nheads; h++)
      fprintf(out, " @%d", s->heads[h]);
    fprintf(out, " (%d bytes%s), wait @%d, release @%d", s->head_bytes, s->head_stages == 2 ? ", 2 copies" : "",
            s->head_wait, s->head_release);
    if (s->head_release_empty >= 0)
      fprintf(out, " (the last iteration; @%d after a loop of no iteration)", s->head_release_empty);
    fprintf(out, "; issued after %d ring loads\n", s->head_after);
  }
}
