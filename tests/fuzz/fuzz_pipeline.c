/* fuzz_pipeline.c — libFuzzer target over the whole pipeline but the GPU backend: parse, sema,
 * lower_tir, the TIR passes with the verifier after each, the TIR printer, the metadata round
 * trip through the runtime's own parser, tilert_bind with tiny shapes, and the interpreter.
 * Built by tests/check_fuzz.sh with clang -fsanitize=fuzzer,address,undefined. Any crash,
 * sanitizer report, leak or hang is a bug, and so is a contract the runtime refuses (sema keeps
 * kernels within its limits) or a bind that does not bind the dims it was given.
 *
 * Kernels that could run long are not interpreted: more than 64 blocks, a tile of more than
 * 2^16 elements, or loops whose bounds are not constants or dims (or whose nest could take more
 * than 4096 iterations with dims of at most 8). */
#include <stdlib.h>
#include <string.h>

#include "fuzz_common.h"
#include "tilert.h"

enum { MAX_DIM = 8, MAX_BLOCKS = 64, MAX_TILE = 1 << 16, MAX_TRIPS = 4096 };

/* The one instruction writing register r, or NULL. */
static const TirInst *sole_def(const TirFunc *f, int r) {
  const TirInst *def = NULL;
  for (int i = 0; i < f->ninsts; i++)
    if (f->insts[i].dst == r) {
      if (def)
        return NULL;
      def = &f->insts[i];
    }
  return def;
}

/* A bound on the values of a loop bound register: a constant, or a dim (0..MAX_DIM). */
static bool bound_range(const TirFunc *f, int r, int64_t *lo, int64_t *hi) {
  const TirInst *def = sole_def(f, r);
  if (def && def->op == TIR_CONST && def->imm >= -MAX_TRIPS && def->imm <= MAX_TRIPS)
    return *lo = *hi = (int64_t)def->imm, true;
  if (def && def->op == TIR_DIM)
    return *lo = 0, *hi = MAX_DIM, true;
  return false;
}

static bool cheap_to_run(const TirFunc *f) {
  for (int r = 0; r < f->nregs; r++)
    if (tile_numel(&f->regs[r].type) > MAX_TILE)
      return false;
  int64_t trips[64] = {1};
  int depth = 0;
  for (int i = 0; i < f->ninsts; i++) {
    const TirInst *in = &f->insts[i];
    if (in->op == TIR_ENDFOR && depth > 0)
      depth--;
    if (in->op != TIR_FOR)
      continue;
    int64_t l0, l1, h0, h1, s0, s1;
    if (depth == 63 || !bound_range(f, in->args[0], &l0, &l1) ||
        !bound_range(f, in->args[1], &h0, &h1) || !bound_range(f, in->args[2], &s0, &s1) || s0 < 1)
      return false;
    int64_t n = h1 > l0 ? (h1 - l0 + s0 - 1) / s0 : 0;
    trips[depth + 1] = trips[depth] * (n > 0 ? n : 1);
    if (trips[++depth] > MAX_TRIPS)
      return false;
  }
  return true;
}

/* The metadata of f read back by the runtime's parser must describe f. */
static void check_meta(Arena *a, const TirFunc *f, tilert_kernel_info *k) {
  tilert_status st = tilert_parse_kernel_info_named(meta_emit(a, f, 0), f->name, k);
  if (st.code != TILERT_OK) {
    fprintf(stderr, "metadata of '%s' refused by the runtime: %s\n", f->name, st.message);
    abort();
  }
  if (k->nargs != f->nargs || k->ndims != f->ndims || k->threads != f->threads ||
      k->nrequires != f->nrequires)
    abort();
  for (int i = 0; i < f->nargs; i++)
    if (strcmp(k->args[i].name, f->args[i].name) || (int)k->args[i].kind != (int)f->args[i].kind)
      abort();
}

/* Binds tiny tensors (dims from the input's bytes) and runs f when that is cheap. */
static void bind_and_run(const TirFunc *f, const tilert_kernel_info *k, const uint8_t *data,
                         size_t size) {
  int64_t dims[TILERT_MAX_DIMS], bound[TILERT_MAX_DIMS], grid[3];
  for (int d = 0; d < f->ndims; d++)
    dims[d] = f->dims[d].pinned ? f->dims[d].value : size ? data[d % size] % (MAX_DIM + 1) : 1;
  tilert_arg args[TILERT_MAX_ARGS];
  InterpArg iargs[TILERT_MAX_ARGS];
  void *bufs[TILERT_MAX_ARGS] = {0};
  memset(iargs, 0, sizeof iargs);
  for (int i = 0; i < f->nargs; i++) {
    const TirArg *a = &f->args[i];
    if (a->kind == ARG_SCALAR) {
      args[i] = tilert_arg_scalar(i % 2 ? 3 : 1.5);
      iargs[i].scalar = args[i].scalar;
      continue;
    }
    int64_t shape[TILE_MAX_RANK], n = 1;
    bool big = false;
    for (int r = 0; r < a->rank; r++)
      big |= __builtin_mul_overflow(n, shape[r] = dims[a->dims[r]], &n);
    /* pinned dims may be large: such a tensor gets no buffer, and bind sees no data */
    bufs[i] = !big && n <= MAX_TILE ? calloc((size_t)(n ? n : 1), 4) : NULL;
    for (int64_t e = 0; bufs[i] && e < n; e++)
      elem_store(bufs[i], e, a->elem, (double)(int)((e * 7 + i) % 11) - 5);
    args[i] = tilert_arg_tensor(bufs[i], (tilert_dtype)a->elem, a->rank, shape);
    iargs[i].tensor.data = bufs[i];
    for (int r = 0; r < a->rank; r++) {
      iargs[i].tensor.shape[r] = args[i].tensor.shape[r];
      iargs[i].tensor.strides[r] = args[i].tensor.strides[r];
    }
  }
  tilert_status st = tilert_bind(k, args, f->nargs, bound, grid);
  if (st.code == TILERT_OK) {
    for (int d = 0; d < f->ndims; d++)
      if (bound[d] != dims[d] && !f->dims[d].pinned)
        abort();
    char err[400];
    if (grid[0] * grid[1] * grid[2] <= MAX_BLOCKS && cheap_to_run(f))
      interp_run(f, iargs, bound, grid, err, sizeof err);
  }
  for (int i = 0; i < f->nargs; i++)
    free(bufs[i]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  Arena *a = arena_new();
  Diag d;
  AstProgram *prog = fuzz_front_end(a, data, size, &d);
  if (prog) {
    tilert_kernel_info *k = arena_alloc(a, sizeof *k);
    for (AstKernel *ak = prog->kernels; ak; ak = ak->next) {
      TirFunc *f = lower_tir(a, ak, &d);
      if (!f || !tir_fold_constants(f, &d) || !tir_verify(f, &d, "fold_constants") ||
          !tir_eliminate_dead(f, &d) || !tir_verify(f, &d, "eliminate_dead")) {
        fprintf(stderr, "a kernel sema accepted failed to lower or verify\n");
        abort();
      }
      tir_print(sink, f);
      check_meta(a, f, k);
      bind_and_run(f, k, data, size);
    }
  }
  arena_free(a);
  return 0;
}
