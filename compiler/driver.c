/* driver.c — the pipeline after the front end: lowering to TIR, the passes with the verifier
 * between them, and the outputs (--emit=tir|llvm|ptx|c) or an interpreter run (`tilec run`).
 * Outputs are written to a temporary file and renamed, so a failed run leaves no half file. */
#include "ast.h"
#include "layout.h"
#include "tilec.h"
#include "tilert.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ------------------------------------------------------------ the passes */

/* The runtime's own parser reads back the metadata of every output: sema keeps kernels within
 * the runtime's limits, so a refusal here is a compiler bug, reported now and not at launch. */
static bool driver_check_meta(Arena *a, const TirFunc *f, const char *text, Diag *d) {
  tilert_kernel_info *info = arena_alloc(a, sizeof *info);
  tilert_status st = tilert_parse_kernel_info_named(text, f->name, info);
  if (st.code == TILERT_OK)
    return true;
  diag_report(d, DIAG_ERROR, f->loc, "internal error: the runtime refuses the metadata of kernel "
              "'%s': %s", f->name, st.message);
  return false;
}

/* Lowers one kernel and runs every pass, verifying after each. */
TirFunc *driver_lower(Arena *a, const AstKernel *k, Diag *d) {
  TirFunc *f = lower_tir(a, k, d);
  if (!f || !tir_verify(f, d, "lower_tir"))
    return NULL;
  if (!tir_guard_masks(f, d) || !tir_verify(f, d, "guard_masks"))
    return NULL;
  if (!tir_fold_constants(f, d) || !tir_verify(f, d, "fold_constants"))
    return NULL;
  if (!tir_eliminate_dead(f, d) || !tir_verify(f, d, "eliminate_dead"))
    return NULL;
  if (!tir_align_windows(f, d) || !tir_verify(f, d, "align_windows"))
    return NULL;
  if (!tir_hoist_reduce_operands(f, d) || !tir_verify(f, d, "hoist_reduce_operands"))
    return NULL;
  if (!tir_guard_onehots(f, d) || !tir_verify(f, d, "guard_onehots"))
    return NULL;
  if (!tir_fold_exp_scale(f, d) || !tir_verify(f, d, "fold_exp_scale"))
    return NULL;
  if (!tir_narrow_minmax(f, d) || !tir_verify(f, d, "narrow_minmax"))
    return NULL;
  if (!tir_hoist_invariants(f, d) || !tir_verify(f, d, "hoist_invariants"))
    return NULL;
  if (!driver_check_meta(a, f, meta_emit(a, f, 0), d))
    return NULL;
  return f;
}

/* ------------------------------------------------------------ the full-size entry */

/* Requirement e bounds a run-time dim of f by a constant ("N 1024 <=" or "1024 N >="): its dim
 * and the bound. Derived dims (X$1) are bound through another requirement and left alone. */
static bool full_bound(const TirFunc *f, const TirExpr *e, int *dim, int64_t *bound) {
  char x[64], y[64], op[4], tail;
  if (!e->rpn || sscanf(e->rpn, "%63s %63s %3s %c", x, y, op, &tail) != 3)
    return false;
  bool le = !strcmp(op, "<="), ge = !strcmp(op, ">=");
  const char *name = le ? x : y, *num = le ? y : x;
  char *end;
  long long v = strtoll(num, &end, 10);
  if (!(le || ge) || *end || end == num || v < 1)
    return false;
  for (int i = 0; i < f->ndims; i++)
    if (!f->dims[i].pinned && !f->dims[i].derive && !strcmp(f->dims[i].name, name)) {
      *dim = i, *bound = v;
      return true;
    }
  return false;
}

/* The kernel's -D values (a file's other kernels may take other names), then its bounded dims
 * pinned to their bounds; *nfull counts the latter. */
static Define *full_defines(Arena *a, const AstKernel *k, const TirFunc *f, const Define *defs,
                            int ndefs, int *n, int *nfull) {
  Define *out = arena_alloc(a, sizeof *out * (size_t)(ndefs + f->ndims + 1));
  *n = *nfull = 0;
  for (int i = 0; i < ndefs; i++) {
    bool mine = false;
    for (int j = 0; j < k->nparams && !mine; j++)
      mine = !strcmp(k->params[j].name, defs[i].name);
    for (int j = 0; j < k->ndims && !mine; j++)
      mine = !strcmp(k->dims[j].name, defs[i].name);
    if (mine)
      out[(*n)++] = defs[i];
  }
  int64_t *bound = arena_alloc(a, sizeof *bound * (size_t)(f->ndims + 1)); /* per dim, 0: none */
  for (int i = 0; i < f->nrequires; i++) {
    int dim;
    int64_t b;
    if (full_bound(f, &f->requires[i], &dim, &b) && (!bound[dim] || b < bound[dim]))
      bound[dim] = b; /* two bounds on one dim: the tighter one */
  }
  for (int i = 0; i < f->ndims; i++)
    if (bound[i]) {
      out[(*n)++] = (Define){f->dims[i].name, arena_printf(a, "%lld", (long long)bound[i]), f->loc};
      (*nfull)++;
    }
  return out;
}

TirFunc *driver_full_entry(Arena *a, const AstKernel *k, TirFunc *f, const Define *defs,
                           int ndefs, GpuArch arch, const Diag *d) {
  const char *env = getenv("TILEC_FULL_ENTRY");
  const char *name = arena_printf(a, "%s__full", f->name);
  int n, nfull;
  if ((env && !strcmp(env, "0")) || !d->file || strlen(name) >= TILERT_MAX_KERNEL_NAME)
    return NULL;
  Define *all = full_defines(a, k, f, defs, ndefs, &n, &nfull);
  if (!nfull)
    return NULL;
  /* The source again, this kernel alone, checked with the bounds pinned. Its diagnostics were
   * the first compile's (warnings) or say that the pinned dims contradict another requirement,
   * which no launch can then meet: either way nothing to show, and no entry. */
  char *buf = NULL;
  size_t len = 0;
  FILE *mem = open_memstream(&buf, &len);
  if (!mem)
    return NULL;
  Diag quiet;
  diag_init(&quiet, d->file, mem);
  TirFunc *g = NULL;
  AstProgram *prog = parse_program(a, d->file, &quiet);
  AstKernel *k2 = prog ? prog->kernels : NULL;
  while (k2 && strcmp(k2->name, k->name))
    k2 = k2->next;
  if (k2) {
    k2->next = NULL;
    k2->name = name;
    prog->kernels = k2, prog->nkernels = 1;
    if (sema_check(a, prog, all, n, arch, &quiet) && !quiet.nerrors)
      g = driver_lower(a, k2, &quiet);
  }
  fclose(mem);
  free(buf);
  if (g && !quiet.nerrors) {
    f->full_entry = g->name;
    /* TILEC_FULL_ALIGNED=1: the launches that pin every bounded dim are the production shapes,
     * whose tensors (a framework's contiguous ones) are 16-byte aligned, so the entry may drop
     * its per-row alignment tests and unaligned copy paths (the runtime keeps the plain entry
     * for other views). Opt-in: even on an H100 but for one layernorm-backward form 4% slower
     * (docs/performance.md, "Session ax") */
    g->aligned_args = env_on("TILEC_FULL_ALIGNED");
  }
  return f->full_entry ? g : NULL;
}

/* ------------------------------------------------------------ output files */

/* "dir/softmax.tile" -> "softmax" + ext (in the current directory, like cc -c). */
static const char *default_output(Arena *a, const char *input, const char *ext) {
  const char *base = strrchr(input, '/');
  base = base ? base + 1 : input;
  const char *dot = strrchr(base, '.');
  size_t n = dot ? (size_t)(dot - base) : strlen(base);
  return arena_printf(a, "%.*s%s", (int)n, base, ext);
}

/* ------------------------------------------------------------ emit kinds */

static GpuArch driver_arch(const TilecOptions *o) { return o->narchs ? o->archs[0] : ARCH_SM90A; }

GpuArch driver_sema_arch(const TilecOptions *o) {
  GpuArch best = driver_arch(o);
  for (int i = 1; i < o->narchs; i++)
    if (arch_smem_limit(o->archs[i]) < arch_smem_limit(best))
      best = o->archs[i];
  return best;
}

char *driver_compile(TirFunc **funcs, int n, const NvptxOptions *no, Diag *d) {
  int smem = 0;
  return n == 1 ? nvptx_compile(funcs[0], no, d, &smem) : nvptx_compile_module(funcs, n, no, d);
}

static int emit_tir(Arena *a, TirFunc **funcs, int n, const TilecOptions *o, Diag *d) {
  OutFile out;
  if (!out_open(a, &out, o->output, d))
    return 1;
  for (int i = 0; i < n; i++)
    tir_print(out.fp, funcs[i]);
  return out_commit(&out, 1, true, d) ? 0 : 1;
}

/* --emit=schedule: each kernel's GPU schedule for the --arch (docs/tir.md, "Schedule"): layouts
 * assigned, the scheduled TIR (pipe_wait / pipe_release) and the table as comments. The stages are
 * the ones asked for: nvptx_compile may take fewer when they overflow shared memory. */
static int emit_schedule(Arena *a, TirFunc **funcs, int n, const TilecOptions *o, Diag *d) {
  OutFile out;
  if (!out_open(a, &out, o->output, d))
    return 1;
  bool ok = true;
  GpuArch arch = driver_arch(o);
  for (int i = 0; i < n && ok; i++) {
    TirFunc *f = tir_swap_small_dots(funcs[i], arch, d);
    if (!(ok = f != NULL))
      break;
    bool wgmma = arch == ARCH_SM90A && layout_kernel_uses_wgmma(f);
    /* the warp-specialized entry's schedule where there is one (rotated loops included unless
     * TILEC_ROTATE=0; the compiler drops a rotation ptxas spills on, which this listing does
     * not check) */
    SchedOptions so = {.arch = arch, .wgmma = wgmma, .stage_cap = 8, .ws_entry = true, .rotate = tir_rotation_enabled()};
    TirFunc *g = layout_assign_wgmma(f, d, wgmma) ? tir_schedule(f, &so, d) : NULL;
    ok = g != NULL;
    if (ok) {
      tir_print(out.fp, g);
      tir_print_schedule(out.fp, g);
    }
  }
  return out_commit(&out, 1, ok, d) ? 0 : 1;
}

/* --emit=llvm|ptx: one module with every kernel of the file (each its own metadata block; the
 * runtime picks one by name), or the one --kernel names. */
static int emit_llvm_or_ptx(Arena *a, TirFunc **funcs, int n, const TilecOptions *o, Diag *d) {
  if (o->narchs > 1) {
    diag_plain(d, DIAG_ERROR, "--emit=%s takes one --arch (several are for --emit=c)",
               o->emit == EMIT_LLVM ? "llvm" : "ptx");
    return 1;
  }
  NvptxOptions no = {.arch = driver_arch(o), .opt_level = o->opt_level,
                     .dump_llvm = o->emit == EMIT_LLVM};
  char *text = driver_compile(funcs, n, &no, d);
  if (!text)
    return 1;
  for (int i = 0; i < n && o->emit == EMIT_PTX; i++)
    if (!driver_check_meta(a, funcs[i], text, d))
      return 1;
  const char *path = o->output ? o->output
                               : default_output(a, o->input, o->emit == EMIT_LLVM ? ".ll" : ".ptx");
  OutFile out;
  if (!out_open(a, &out, path, d))
    return 1;
  fputs(text, out.fp);
  return out_commit(&out, 1, true, d) ? 0 : 1;
}

/* --emit=c: NAME.h + NAME.c with the PTX of every --arch embedded (emit_c.c). A file of several
 * kernels gives one pair too: per arch one module with all of them, loaded once (NAME_load),
 * and NAME_<kernel>_launch for each; --kernel picks one. */
static int emit_c(Arena *a, TirFunc **funcs, int n, const TilecOptions *o, Diag *d) {
  const char *base = o->output ? o->output : default_output(a, o->input, "");
  if (!strcmp(base, "-")) {
    diag_plain(d, DIAG_ERROR, "--emit=c writes two files (NAME.h, NAME.c): give -o NAME, not -");
    return 1;
  }
  if (!emit_c_name_ok(base, "--emit=c", d))
    return 1;
  const char *ptx[ARCH_COUNT];
  for (int j = 0; j < o->narchs; j++) {
    NvptxOptions no = {.arch = o->archs[j], .opt_level = o->opt_level};
    if (!(ptx[j] = driver_compile(funcs, n, &no, d)))
      return 1;
  }
  return emit_c_files(a, base, ptx, o->archs, o->narchs, o->cubin, d) ? 0 : 1;
}

/* ------------------------------------------------------------ tilec run */

/* --shape M=4,N=1000,eps=1e-5: binds dims and scalar arguments by name. Sized from the kernel:
 * its counts are within the runtime's limits (sema), but nothing here relies on that. */
typedef struct RunBindings {
  int64_t *dims;           /* per dim */
  bool *dim_set, *dim_given;
  double *scalars;         /* per argument */
  bool *scalar_given;
} RunBindings;

static RunBindings run_bindings(Arena *a, const TirFunc *f) {
  size_t nd = (size_t)f->ndims + 1, na = (size_t)f->nargs + 1;
  return (RunBindings){arena_alloc(a, nd * sizeof(int64_t)), arena_alloc(a, nd), arena_alloc(a, nd),
                       arena_alloc(a, na * sizeof(double)), arena_alloc(a, na)};
}

/* A file of several kernels shares one --shape: each kernel takes the names it has (lenient);
 * driver_backend checks that every name belongs to some kernel. Scalar arguments not named
 * are 1.0 (documented in tilec --help and docs/language.md); a name given twice is an error. */
static bool run_parse_shapes(const TirFunc *f, const char *spec, RunBindings *b, bool lenient,
                             Diag *d) {
  for (int i = 0; i < f->nargs; i++)
    b->scalars[i] = 1.0;
  for (int i = 0; i < f->ndims; i++)
    if (f->dims[i].pinned)
      b->dims[i] = f->dims[i].value, b->dim_set[i] = true;
  bool *dim_given = b->dim_given, *scalar_given = b->scalar_given;
  const char *p = spec ? spec : "";
  while (*p) {
    const char *eq = strchr(p, '='), *comma = strchr(p, ',');
    if (!comma)
      comma = p + strlen(p);
    if (!eq || eq > comma) {
      diag_plain(d, DIAG_ERROR, "--shape expects NAME=VALUE[,NAME=VALUE...], got '%.*s'",
                 (int)(comma - p), p);
      return false;
    }
    char name[64], val[64];
    snprintf(name, sizeof name, "%.*s", (int)(eq - p), p);
    snprintf(val, sizeof val, "%.*s", (int)(comma - eq - 1), eq + 1);
    char *end;
    double v = strtod(val, &end);
    if (!*val || *end) {
      diag_plain(d, DIAG_ERROR, "--shape: '%s' is not a number (for %s)", val, name);
      return false;
    }
    bool found = false;
    for (int i = 0; i < f->ndims && !found; i++)
      if (!strcmp(f->dims[i].name, name)) {
        if (v < 0 || v != floor(v) || v > INT32_MAX) {
          diag_plain(d, DIAG_ERROR, "--shape: dim %s must be a non-negative integer, got %s",
                     name, val);
          return false;
        }
        if (f->dims[i].pinned && (int64_t)v != f->dims[i].value) {
          diag_plain(d, DIAG_ERROR, "--shape: dim %s is pinned to %lld at compile time",
                     name, (long long)f->dims[i].value);
          return false;
        }
        if (dim_given[i]) {
          diag_plain(d, DIAG_ERROR, "--shape: '%s' is given more than once", name);
          return false;
        }
        b->dims[i] = (int64_t)v, b->dim_set[i] = dim_given[i] = found = true;
      }
    for (int i = 0; i < f->nargs && !found; i++)
      if (f->args[i].kind == ARG_SCALAR && !strcmp(f->args[i].name, name)) {
        if (scalar_given[i]) {
          diag_plain(d, DIAG_ERROR, "--shape: '%s' is given more than once", name);
          return false;
        }
        b->scalars[i] = v, scalar_given[i] = found = true;
      }
    if (!found && !lenient) {
      diag_plain(d, DIAG_ERROR, "--shape: kernel '%s' has no dim or scalar argument named '%s'",
                 f->name, name);
      return false;
    }
    p = *comma ? comma + 1 : comma;
  }
  return true;
}

/* Whether the RPN of a derived dim names dim i and, besides it, only dims with values. */
static bool run_rpn_solvable_for(const TirFunc *f, const RunBindings *b, const char *rpn, int i) {
  bool uses = false;
  for (const char *p = rpn; *p;) {
    size_t len = strcspn(p, " ");
    for (int k = 0; k < f->ndims; k++)
      if (strlen(f->dims[k].name) == len && !strncmp(f->dims[k].name, p, len)) {
        if (k == i)
          uses = true;
        else if (!b->dim_set[k])
          return false;
      }
    p += len + (p[len] == ' ');
  }
  return uses;
}

/* Dim i, which no --shape names, from an --in array's axis written as a linear expression of it
 * (`X: f16[M, 2 * D]` and X given: D = X$1 / 2); the launch's requirement then checks it. */
static bool run_solve_dim(const tilert_kernel_info *info, const TirFunc *f, RunBindings *b, int i) {
  for (int j = 0; j < f->ndims; j++) {
    if (!f->dims[j].derive || !b->dim_set[j] || !run_rpn_solvable_for(f, b, f->dims[j].derive, i))
      continue;
    int64_t y[3];
    bool ok = true;
    for (int t = 0; t < 3 && ok; t++) {
      b->dims[i] = t;
      ok = tilert_eval_expr(info, f->dims[j].derive, b->dims, &y[t]).code == TILERT_OK;
    }
    int64_t slope = y[1] - y[0], rest = b->dims[j] - y[0];
    if (ok && slope != 0 && y[2] - y[1] == slope && rest % slope == 0 && rest / slope >= 0) {
      b->dims[i] = rest / slope;
      b->dim_set[i] = true;
      return true;
    }
  }
  b->dims[i] = -1;
  return false;
}

/* Every dim written alone has a value: from --shape, an --in array, or solved (run_solve_dim). */
static bool run_solve_dims(const tilert_kernel_info *info, const TirFunc *f, RunBindings *b, Diag *d) {
  for (int i = 0; i < f->ndims; i++)
    if (!b->dim_set[i] && !f->dims[i].derive && !run_solve_dim(info, f, b, i)) {
      diag_plain(d, DIAG_ERROR, "--shape: no value for dim %s (e.g. --shape %s=1024)",
                 f->dims[i].name, f->dims[i].name);
      return false;
    }
  return true;
}

/* xorshift: deterministic inputs for a given --seed. */
static double run_random(uint64_t *s) {
  *s ^= *s << 13, *s ^= *s >> 7, *s ^= *s << 17;
  return (double)(*s >> 11) / 9007199254740992.0 * 2.0 - 1.0;
}

/* A random input value in [-1, 1) as stored in an argument of type t: i32 inputs are spread
 * over [-100, 100), bools are true for positive draws. NaN (outputs) is kept as is. */
static double run_input(double v, ElemType t) {
  if (t == TY_I32 && isinf(v))
    return v < 0 ? INT32_MIN : INT32_MAX;
  if (t == TY_I32)
    return isnan(v) ? 0 : v * 100;
  if (t == TY_BOOL)
    return v > 0;
  return v;
}

/* The NaN an out tensor starts as, with a payload no arithmetic makes, so that what is still there
 * after the run was never written (a grid that does not cover the tensor): f32, f16 and bf16
 * (other types start as 0, which a write may repeat). */
static bool run_poison_bits(ElemType t, uint32_t *bits) {
  *bits = t == TY_F32 ? 0x7fa0dead : t == TY_F16 ? 0x7d6d : t == TY_BF16 ? 0x7fad : 0;
  return *bits != 0;
}

/* Fills a float tensor with that NaN; false (nothing written) for other types. */
static bool run_poison(void *data, int64_t n, ElemType t) {
  uint32_t bits;
  if (!run_poison_bits(t, &bits))
    return false;
  uint16_t half = (uint16_t)bits;
  for (int64_t e = 0; e < n; e++)
    if (t == TY_F32)
      memcpy((char *)data + 4 * e, &bits, 4);
    else
      memcpy((char *)data + 2 * e, &half, 2);
  return true;
}

/* How many elements still hold the poison of run_poison. */
static int64_t run_unwritten(const void *data, int64_t n, ElemType t) {
  uint32_t bits, v = 0;
  int64_t count = 0;
  int size = elem_bytes(t);
  for (int64_t e = 0; run_poison_bits(t, &bits) && e < n; e++) {
    memcpy(&v, (const char *)data + size * e, (size_t)size);
    count += (size == 4 ? v : (v & 0xffff)) == bits;
  }
  return count;
}

static void run_print_stats(const TirArg *arg, const void *data, int64_t n) {
  double mn = INFINITY, mx = -INFINITY, sum = 0;
  int64_t nan = 0;
  for (int64_t i = 0; i < n; i++) {
    double v = elem_load(data, i, arg->elem);
    if (isnan(v)) {
      nan++;
      continue;
    }
    mn = fmin(mn, v), mx = fmax(mx, v), sum += v;
  }
  printf("  %-10s %-5s %10lld elements  min %-12.6g max %-12.6g mean %-12.6g nan %lld\n",
         arg->name, elem_name(arg->elem), (long long)n, n ? mn : 0, n ? mx : 0,
         n > nan ? sum / (double)(n - nan) : 0, (long long)nan);
}

/* --in NAME=FILE.npy: the arrays of this kernel's tensor arguments; their shapes bind dims (a
 * --shape value may still override one: the shape check in run_kernel then reports it). */
static bool run_load_inputs(Arena *a, const TirFunc *f, const TilecOptions *o, bool lenient,
                            NpyArray **in, RunBindings *b, Diag *d) {
  for (int j = 0; j < o->ninputs; j++) {
    const char *spec = o->inputs[j], *eq = strchr(spec, '=');
    size_t len = (size_t)(eq - spec);
    int i = 0;
    while (i < f->nargs && !(f->args[i].kind == ARG_TENSOR && strlen(f->args[i].name) == len &&
                             !strncmp(f->args[i].name, spec, len)))
      i++;
    if (i == f->nargs) {
      if (lenient)
        continue;
      for (int s = 0; s < f->nargs; s++)
        if (f->args[s].kind == ARG_SCALAR && strlen(f->args[s].name) == len && !strncmp(f->args[s].name, spec, len)) {
          diag_plain(d, DIAG_ERROR, "--in: '%.*s' is a scalar argument of kernel '%s': give its value with "
                     "--shape %.*s=VALUE", (int)len, spec, f->name, (int)len, spec);
          return false;
        }
      diag_plain(d, DIAG_ERROR, "--in: kernel '%s' has no tensor argument named '%.*s'", f->name,
                 (int)len, spec);
      return false;
    }
    const TirArg *arg = &f->args[i];
    if (arg->zero_init) {
      if (lenient)
        continue;
      diag_plain(d, DIAG_ERROR, "--in: argument '%s' of kernel '%s' is declared '= 0': every launch zeroes "
                 "it, so it takes no starting values", arg->name, f->name);
      return false;
    }
    NpyArray *x = arena_alloc(a, sizeof *x);
    if (!npy_read(a, eq + 1, x, d))
      return false;
    if (x->rank != arg->rank) {
      diag_plain(d, DIAG_ERROR, "--in: '%s' has %d dimensions; argument '%s' has rank %d", eq + 1,
                 x->rank, arg->name, arg->rank);
      return false;
    }
    for (int r = 0; r < arg->rank; r++) {
      int di = arg->dims[r];
      if ((b->dim_set[di] && b->dims[di] != x->shape[r]) || x->shape[r] > INT32_MAX) {
        diag_plain(d, DIAG_ERROR, "--in: axis %d of '%s' is %lld, but dim %s is %lld", r, eq + 1,
                   (long long)x->shape[r], f->dims[di].name, (long long)b->dims[di]);
        return false;
      }
      b->dims[di] = x->shape[r], b->dim_set[di] = true;
    }
    in[i] = x;
  }
  return true;
}

/* The FILE of --in NAME=FILE. */
static const char *run_input_path(const TilecOptions *o, const char *name) {
  for (int j = 0; j < o->ninputs; j++) {
    const char *eq = strchr(o->inputs[j], '=');
    if (strlen(name) == (size_t)(eq - o->inputs[j]) && !strncmp(o->inputs[j], name, strlen(name)))
      return eq + 1;
  }
  return "?";
}

/* Copies an --in array into tensor memory, after checking it has the shape the dims say. */
static bool run_fill_input(const TirFunc *f, const TirArg *arg, const NpyArray *x,
                           const int64_t *shape, int64_t numel, void *p, Diag *d) {
  for (int r = 0; r < arg->rank; r++)
    if (x->shape[r] != shape[r]) {
      diag_plain(d, DIAG_ERROR, "--in: axis %d of %s is %lld, but --shape or -D make dim %s %lld",
                 r, arg->name, (long long)x->shape[r], f->dims[arg->dims[r]].name,
                 (long long)shape[r]);
      return false;
    }
  for (int64_t e = 0; e < numel; e++)
    elem_store(p, e, arg->elem, npy_get(x, e, arg->elem));
  return true;
}

/* --out DIR: every out tensor as DIR/NAME.npy, or DIR/KERNEL/NAME.npy when the run has several
 * kernels (two of them may have outputs of one name), all or none. */
static bool run_write_outputs(Arena *a, const TirFunc *f, const TilecOptions *o, bool per_kernel,
                              const tilert_arg *args, Diag *d) {
  const char *paths[TILERT_MAX_ARGS], *texts[TILERT_MAX_ARGS];
  const char *dir = per_kernel ? arena_printf(a, "%s/%s", o->out_dir, f->name) : o->out_dir;
  size_t lens[TILERT_MAX_ARGS];
  int n = 0;
  for (int i = 0; i < f->nargs; i++)
    if (f->args[i].kind == ARG_TENSOR && f->args[i].is_out) {
      paths[n] = arena_printf(a, "%s/%s.npy", dir, f->args[i].name);
      texts[n] = npy_format(a, f->args[i].elem, f->args[i].rank, args[i].tensor.shape,
                            args[i].tensor.data, &lens[n]);
      n++;
    }
  if (!out_make_dir(a, dir, d) || !out_write_files(a, paths, texts, lens, n, d))
    return false;
  for (int i = 0; i < n; i++)
    printf("  wrote %s\n", paths[i]);
  return true;
}

/* The element count of every tensor argument (0 for scalars), checked against overflow and,
 * all together in bytes, against the --max-memory cap. */
static bool run_sizes(const TirFunc *f, const RunBindings *b, int64_t cap, int64_t *numel, Diag *d) {
  int64_t total = 0;
  for (int i = 0; i < f->nargs; i++) {
    const TirArg *arg = &f->args[i];
    int64_t n = 1, bytes;
    for (int r = 0; r < arg->rank && arg->kind == ARG_TENSOR; r++)
      if (__builtin_mul_overflow(n, b->dims[arg->dims[r]], &n)) {
        diag_plain(d, DIAG_ERROR, "run '%s': tensor '%s' has more than 2^63 elements", f->name,
                   arg->name);
        return false;
      }
    numel[i] = arg->kind == ARG_TENSOR ? n : 0;
    if (__builtin_mul_overflow(numel[i], (int64_t)elem_bytes(arg->elem), &bytes) ||
        __builtin_add_overflow(total, bytes, &total))
      total = INT64_MAX;
  }
  if (total <= cap)
    return true;
  diag_plain(d, DIAG_ERROR, "run '%s': the tensors take %lld bytes, more than the %lld that "
             "'tilec run' allows; choose smaller --shape values, or raise the cap with "
             "--max-memory=BYTES", f->name, (long long)total, (long long)cap);
  return false;
}

/* Dims written as expressions (X: f32[N, D / 2]) take the value of their expression, evaluated
 * as the runtime does (its parser and evaluator on the kernel's own metadata); one an --in array
 * gave already keeps it, and the launch's requirement then says whether it fits. */
/* The kernel's launch contract as the runtime reads it (what its dim expressions evaluate in), or
 * NULL, reported. */
static const tilert_kernel_info *run_contract(Arena *a, const TirFunc *f, Diag *d) {
  tilert_kernel_info *info = arena_alloc(a, sizeof *info);
  tilert_status st = tilert_parse_kernel_info(meta_emit(a, f, 0), info);
  if (st.code == TILERT_OK)
    return info;
  diag_plain(d, DIAG_ERROR, "run '%s': %s: %s", f->name, tilert_code_name(st.code), st.message);
  return NULL;
}

static bool run_derive_dims(const tilert_kernel_info *info, const TirFunc *f, RunBindings *b, Diag *d) {
  tilert_status st = {.code = TILERT_OK};
  for (int i = 0; i < f->ndims && st.code == TILERT_OK; i++)
    if (f->dims[i].derive && !b->dim_set[i]) {
      st = tilert_eval_expr(info, f->dims[i].derive, b->dims, &b->dims[i]);
      b->dim_set[i] = true;
      if (st.code == TILERT_OK && b->dims[i] < 0) {
        diag_plain(d, DIAG_ERROR, "run '%s': dim %s ('%s' in RPN) is %lld with these shapes; a "
                   "dimension cannot be negative", f->name, f->dims[i].name, f->dims[i].derive,
                   (long long)b->dims[i]);
        return false;
      }
    }
  if (st.code != TILERT_OK)
    diag_plain(d, DIAG_ERROR, "run '%s': %s: %s", f->name, tilert_code_name(st.code), st.message);
  return st.code == TILERT_OK;
}

static int run_kernel(Arena *a, TirFunc *f, const TilecOptions *o, bool lenient, Diag *d) {
  RunBindings b = run_bindings(a, f);
  NpyArray *in[TILERT_MAX_ARGS] = {0};
  int64_t *numel = arena_alloc(a, sizeof *numel * (size_t)(f->nargs + 1));
  const tilert_kernel_info *info = run_contract(a, f, d);
  if (!info || !run_load_inputs(a, f, o, lenient, in, &b, d) || !run_parse_shapes(f, o->shapes, &b, lenient, d) ||
      !run_solve_dims(info, f, &b, d) || !run_derive_dims(info, f, &b, d) ||
      !run_sizes(f, &b, o->run_max_bytes, numel, d))
    return 1;
  tilert_device *dev = NULL;
  tilert_kernel *k = NULL;
  tilert_status st = tilert_device_open(TILERT_BACKEND_CPU, 0, &dev);
  if (st.code == TILERT_OK)
    st = exec_cpu_kernel(dev, a, f, &k);
  tilert_arg *args = arena_alloc(a, sizeof *args * (size_t)(f->nargs + 1));
  void **bufs = arena_alloc(a, sizeof *bufs * (size_t)(f->nargs + 1)); /* what to free */
  bool *poisoned = arena_alloc(a, sizeof *poisoned * (size_t)(f->nargs + 1)); /* run_poison'ed */
  const char *sources = ""; /* "X random, W from w.npy": what the inputs were */
  uint64_t seed = 0x9E3779B97F4A7C15ull ^ (uint64_t)o->seed;
  for (int i = 0; i < f->nargs && st.code == TILERT_OK; i++) {
    const TirArg *arg = &f->args[i];
    if (arg->kind == ARG_SCALAR) {
      args[i] = tilert_arg_scalar(b.scalars[i]);
      continue;
    }
    int64_t shape[TILE_MAX_RANK];
    for (int r = 0; r < arg->rank; r++)
      shape[r] = b.dims[arg->dims[r]];
    size_t bytes = (size_t)(numel[i] ? numel[i] : 1) * (size_t)elem_bytes(arg->elem);
    st = tilert_malloc(dev, bytes, &bufs[i]);
    if (st.code != TILERT_OK)
      break;
    args[i] = tilert_arg_tensor(bufs[i], (tilert_dtype)arg->elem, arg->rank, shape);
    if (in[i]) {
      if (!run_fill_input(f, arg, in[i], shape, numel[i], bufs[i], d)) {
        st = (tilert_status){.code = TILERT_ERROR_SHAPE};
        break;
      }
      sources = arena_printf(a, "%s%s%s from %s", sources, *sources ? ", " : "", arg->name,
                             run_input_path(o, arg->name));
      continue;
    }
    /* an atomic target starts at its updates' identity: the kernel combines with what is there;
     * other outputs as a NaN that shows what no store reached */
    double start = tir_atomic_start(f, i);
    poisoned[i] = arg->is_out && isnan(start) && run_poison(bufs[i], numel[i], arg->elem);
    for (int64_t e = 0; e < numel[i] && !poisoned[i]; e++)
      elem_store(bufs[i], e, arg->elem, run_input(arg->is_out ? start : run_random(&seed), arg->elem));
    if (!arg->is_out)
      sources = arena_printf(a, "%s%s%s random", sources, *sources ? ", " : "", arg->name);
  }
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  if (st.code == TILERT_OK)
    st = tilert_launch(k, args, f->nargs, NULL);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  int rc = 0;
  if (st.code != TILERT_OK) {
    if (st.message[0]) /* else run_fill_input reported it */
      diag_plain(d, DIAG_ERROR, "run '%s': %s: %s", f->name, tilert_code_name(st.code), st.message);
    rc = 1;
  } else {
    printf("kernel %s: ran in the interpreter in %.1f ms\n", f->name,
           (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6);
    if (*sources)
      printf("  inputs: %s%s\n", sources,
             strstr(sources, " random") ? arena_printf(a, " (seed %u)", o->seed) : "");
    for (int i = 0; i < f->nargs; i++)
      if (f->args[i].kind == ARG_TENSOR && f->args[i].is_out) {
        run_print_stats(&f->args[i], bufs[i], numel[i]);
        int64_t left = poisoned[i] ? run_unwritten(bufs[i], numel[i], f->args[i].elem) : 0;
        if (left)
          printf("  note: %lld of the %lld elements of %s were never written (they hold NaN): the "
                 "grid or the stores do not cover them\n", (long long)left, (long long)numel[i], f->args[i].name);
      }
    if (o->out_dir && !run_write_outputs(a, f, o, lenient, args, d))
      rc = 1;
  }
  for (int i = 0; i < f->nargs; i++)
    if (bufs[i])
      tilert_free(dev, bufs[i]);
  if (k)
    tilert_kernel_destroy_cpu(k);
  tilert_device_close(dev);
  return rc;
}

/* Every NAME of --shape must be a dim or scalar argument of at least one kernel. */
static bool run_names_known(TirFunc **funcs, int n, const char *spec, Diag *d) {
  for (const char *p = spec ? spec : ""; *p;) {
    const char *eq = strchr(p, '='), *comma = strchr(p, ',');
    if (!comma)
      comma = p + strlen(p);
    size_t len = (size_t)((eq && eq < comma ? eq : comma) - p);
    bool found = false;
    for (int k = 0; k < n && !found; k++) {
      for (int i = 0; i < funcs[k]->ndims && !found; i++)
        found = strlen(funcs[k]->dims[i].name) == len && !strncmp(funcs[k]->dims[i].name, p, len);
      for (int i = 0; i < funcs[k]->nargs && !found; i++)
        found = funcs[k]->args[i].kind == ARG_SCALAR && strlen(funcs[k]->args[i].name) == len &&
                !strncmp(funcs[k]->args[i].name, p, len);
    }
    if (!found) {
      diag_plain(d, DIAG_ERROR, "--shape: no kernel of the file has a dim or scalar argument "
                 "named '%.*s'", (int)len, p);
      return false;
    }
    p = *comma ? comma + 1 : comma;
  }
  return true;
}

/* ------------------------------------------------------------ entry */

int driver_backend(Arena *a, AstProgram *prog, const TilecOptions *o, Diag *d) {
  TirFunc **funcs = arena_alloc(a, sizeof *funcs * (size_t)(2 * prog->nkernels + 1));
  int n = 0;
  const char *names = "";
  /* full-size entries go into every module (PTX, LLVM, the AOT C's images) */
  bool full = !o->run && (o->emit == EMIT_PTX || o->emit == EMIT_LLVM || o->emit == EMIT_C);
  for (AstKernel *k = prog->kernels; k; k = k->next) {
    names = arena_printf(a, "%s%s%s", names, *names ? ", " : "", k->name);
    if (o->kernel && strcmp(k->name, o->kernel))
      continue; /* --kernel NAME: only that one */
    TirFunc *f = driver_lower(a, k, d);
    if (!f)
      return 1;
    funcs[n++] = f;
    TirFunc *g = full ? driver_full_entry(a, k, f, o->defines, o->ndefines, driver_sema_arch(o), d) : NULL;
    if (g)
      funcs[n++] = g;
  }
  if (n == 0) {
    diag_plain(d, DIAG_ERROR, "--kernel: '%s' has no kernel '%s' (it has: %s)", o->input,
               o->kernel, names);
    return 1;
  }
  if (o->run) {
    if (n > 1 && !run_names_known(funcs, n, o->shapes, d))
      return 1;
    int rc = 0;
    for (int i = 0; i < n; i++)
      rc |= run_kernel(a, funcs[i], o, n > 1, d);
    return rc;
  }
  switch (o->emit) {
  case EMIT_TIR:
    return emit_tir(a, funcs, n, o, d);
  case EMIT_SCHEDULE:
    return emit_schedule(a, funcs, n, o, d);
  case EMIT_LLVM:
  case EMIT_PTX:
    return emit_llvm_or_ptx(a, funcs, n, o, d);
  case EMIT_C:
    return emit_c(a, funcs, n, o, d);
  default:
    return 0;
  }
}
