/* test_examples.c — every kernel in dsl/examples, compiled in-process (parse, sema, lower_tir,
 * passes with the verifier after each) and run in the interpreter against its float64
 * reference (tests/ref) at several shapes, ragged ones included.
 *
 * Inputs are random (fixed seed, never zeros); outputs are poisoned with NaN before the run, so
 * an element never written fails like a NaN result does. Bounds (docs/tir.md): relative error
 * ||out - ref|| / ||ref|| below 1e-5 for f32 outputs, 1e-2 for f16/bf16 outputs. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ast.h"
#include "tilec.h"

/* The float64 references are compiled into this translation unit: tests.mk links only
 * tests/unit and tests/support, and this keeps tests/ref free of build wiring. */
#include "../ref/ref.h"
#include "../ref/add_rmsnorm.c"
#include "../ref/attention.c"
#include "../ref/attention_backward.c"
#include "../ref/cross_entropy.c"
#include "../ref/cross_entropy_backward.c"
#include "../ref/gemm.c"
#include "../ref/layernorm.c"
#include "../ref/layernorm_backward.c"
#include "../ref/rmsnorm.c"
#include "../ref/rmsnorm_backward.c"
#include "../ref/softmax.c"
#include "../ref/vadd.c"

enum { MAX_TENSORS = 12 };

/* ------------------------------------------------------------ compiling */

typedef struct Kernel {
  Arena *a;
  TirFunc *f;
} Kernel;

static char *read_file(Arena *a, const char *path, size_t *len) {
  FILE *fp = fopen(path, "rb");
  cr_assert(fp, "cannot open %s (tests run from the repository root)", path);
  fseek(fp, 0, SEEK_END);
  long n = ftell(fp);
  fseek(fp, 0, SEEK_SET);
  char *text = arena_alloc(a, (size_t)n + 1);
  cr_assert_eq(fread(text, 1, (size_t)n, fp), (size_t)n);
  fclose(fp);
  *len = (size_t)n;
  return text;
}

/* defs: "NAME=VALUE" strings, NULL-terminated. src_text: compile this text instead of a file.
 * kernel: which kernel of a multi-kernel file (NULL: the first). */
static Kernel compile_text_kernel(const char *name, const char *text, size_t len, const char **defs,
                                  const char *kernel) {
  Kernel k = {.a = arena_new()};
  SourceFile *src = arena_alloc(k.a, sizeof *src);
  *src = (SourceFile){arena_strdup(k.a, name), arena_strndup(k.a, text, len), len};
  Diag d;
  diag_init(&d, src, stderr);
  int nd = 0;
  Define *dv = arena_alloc(k.a, sizeof *dv * 8);
  for (; defs && defs[nd]; nd++) {
    const char *eq = strchr(defs[nd], '=');
    dv[nd] = (Define){arena_strndup(k.a, defs[nd], (size_t)(eq - defs[nd])), eq + 1, {0}};
  }
  AstProgram *prog = parse_program(k.a, src, &d);
  cr_assert(prog, "%s: parse failed", name);
  cr_assert(sema_check(k.a, prog, dv, nd, ARCH_SM90A, &d), "%s: sema failed", name);
  AstKernel *ak = prog->kernels;
  while (kernel && ak && strcmp(ak->name, kernel) != 0)
    ak = ak->next;
  cr_assert(ak, "%s: no kernel '%s'", name, kernel);
  k.f = lower_tir(k.a, ak, &d);
  cr_assert(k.f, "%s: lower_tir failed", name);
  cr_assert(tir_fold_constants(k.f, &d) && tir_verify(k.f, &d, "tir_fold_constants"));
  cr_assert(tir_eliminate_dead(k.f, &d) && tir_verify(k.f, &d, "tir_eliminate_dead"));
  return k;
}

static Kernel compile_text(const char *name, const char *text, size_t len, const char **defs) {
  return compile_text_kernel(name, text, len, defs, NULL);
}

/* kernel: one of a multi-kernel example (NULL: the first) */
static Kernel compile_kernel(const char *example, const char *kernel, const char **defs) {
  Arena *tmp = arena_new();
  char *path = arena_printf(tmp, "dsl/examples/%s.tile", example);
  size_t len;
  char *text = read_file(tmp, path, &len);
  Kernel k = compile_text_kernel(path, text, len, defs, kernel); /* copies the text into its own arena */
  arena_free(tmp);
  /* -D T=bf16 must reach the tensors (the first argument is T[...] in every T example) */
  for (int i = 0; defs && defs[i]; i++) {
    if (strncmp(defs[i], "T=", 2) != 0)
      continue;
    bool seen = false; /* the first T[...] argument (attention_backward_dq's first one is f32) */
    for (int j = 0; j < k.f->nargs && !seen; j++)
      seen = k.f->args[j].kind != ARG_SCALAR && !strcmp(elem_name(k.f->args[j].elem), defs[i] + 2);
    cr_assert(seen, "%s: -D %s reaches no tensor", example, defs[i]);
  }
  return k;
}

static Kernel compile(const char *example, const char **defs) { return compile_kernel(example, NULL, defs); }

/* ------------------------------------------------------------ launch expressions */

static int64_t dim_lookup(const TirFunc *f, const int64_t *dims, const char *tok, size_t n) {
  for (int i = 0; i < f->ndims; i++)
    if (strlen(f->dims[i].name) == n && !strncmp(f->dims[i].name, tok, n))
      return dims[i];
  cr_assert_fail("unknown dim '%.*s' in a launch expression", (int)n, tok);
  return 0;
}

/* The RPN of TirExpr (docs/tir.md) with C semantics; cdiv rounds up. */
static int64_t eval_rpn(const TirFunc *f, const int64_t *dims, const char *rpn) {
  int64_t st[32];
  int sp = 0;
  for (const char *p = rpn; *p;) {
    while (*p == ' ')
      p++;
    if (!*p)
      break;
    const char *q = p;
    while (*q && *q != ' ')
      q++;
    size_t n = (size_t)(q - p);
    char tok[32];
    snprintf(tok, sizeof tok, "%.*s", (int)n, p);
    p = q;
    if ((tok[0] >= '0' && tok[0] <= '9')) {
      st[sp++] = strtoll(tok, NULL, 10);
      continue;
    }
    if (!strcmp(tok, "!")) {
      st[sp - 1] = !st[sp - 1];
      continue;
    }
    bool is_op = strchr("+-*/%<>=!&|", tok[0]) || !strcmp(tok, "cdiv") || !strcmp(tok, "min") ||
                 !strcmp(tok, "max");
    if (!is_op) {
      st[sp++] = dim_lookup(f, dims, tok, n);
      continue;
    }
    cr_assert_geq(sp, 2, "bad rpn '%s'", rpn);
    int64_t b = st[--sp], a = st[--sp], r = 0;
    if (!strcmp(tok, "+")) r = a + b;
    else if (!strcmp(tok, "-")) r = a - b;
    else if (!strcmp(tok, "*")) r = a * b;
    else if (!strcmp(tok, "/")) r = a / b;
    else if (!strcmp(tok, "%")) r = a % b;
    else if (!strcmp(tok, "cdiv")) r = (a + b - 1) / b;
    else if (!strcmp(tok, "min")) r = a < b ? a : b;
    else if (!strcmp(tok, "max")) r = a > b ? a : b;
    else if (!strcmp(tok, "<")) r = a < b;
    else if (!strcmp(tok, "<=")) r = a <= b;
    else if (!strcmp(tok, ">")) r = a > b;
    else if (!strcmp(tok, ">=")) r = a >= b;
    else if (!strcmp(tok, "==")) r = a == b;
    else if (!strcmp(tok, "!=")) r = a != b;
    else if (!strcmp(tok, "&&")) r = a && b;
    else if (!strcmp(tok, "||")) r = a || b;
    else cr_assert_fail("unknown rpn token '%s'", tok);
    st[sp++] = r;
  }
  cr_assert_eq(sp, 1, "bad rpn '%s'", rpn);
  return st[0];
}

/* ------------------------------------------------------------ buffers */

typedef struct Buf {
  ElemType elem;
  int64_t n;
  void *data;   /* in the argument's element type */
  double *val;  /* inputs: the exact values the kernel reads; outputs: read back after the run */
} Buf;

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static double urand(void) { /* xorshift64*, uniform in [0, 1) */
  rng_state ^= rng_state >> 12, rng_state ^= rng_state << 25, rng_state ^= rng_state >> 27;
  return (double)((rng_state * 0x2545f4914f6cdd1dull) >> 11) / 9007199254740992.0;
}

static Buf buf_new(ElemType e, int64_t n) {
  Buf b = {.elem = e, .n = n};
  b.data = calloc((size_t)(n ? n : 1), (size_t)elem_bytes(e));
  b.val = calloc((size_t)(n ? n : 1), sizeof(double));
  return b;
}

static void buf_set(Buf *b, int64_t i, double v) {
  v = round_to_elem(b->elem, v);
  b->val[i] = v;
  if (b->elem == TY_F32)
    ((float *)b->data)[i] = (float)v;
  else if (b->elem == TY_F16)
    ((uint16_t *)b->data)[i] = f32_to_f16_bits((float)v);
  else if (b->elem == TY_BF16)
    ((uint16_t *)b->data)[i] = f32_to_bf16_bits((float)v);
  else
    ((int32_t *)b->data)[i] = (int32_t)v;
}

static Buf buf_random(ElemType e, int64_t n, double lo, double hi) {
  Buf b = buf_new(e, n);
  for (int64_t i = 0; i < n; i++)
    buf_set(&b, i, lo + (hi - lo) * urand());
  return b;
}

static Buf buf_poisoned(ElemType e, int64_t n) {
  Buf b = buf_new(e, n);
  for (int64_t i = 0; i < n; i++)
    buf_set(&b, i, NAN);
  return b;
}

static void buf_read(Buf *b) {
  for (int64_t i = 0; i < b->n; i++) {
    switch (b->elem) {
    case TY_F32: b->val[i] = ((float *)b->data)[i]; break;
    case TY_F16: b->val[i] = f16_bits_to_f32(((uint16_t *)b->data)[i]); break;
    case TY_BF16: b->val[i] = bf16_bits_to_f32(((uint16_t *)b->data)[i]); break;
    default: b->val[i] = ((int32_t *)b->data)[i]; break;
    }
  }
}

static void buf_free(Buf *b) {
  free(b->data);
  free(b->val);
}

/* ||out - ref|| / ||ref|| under bound, every element finite (NaN poison = never written). */
static void check_close_tol(const char *what, Buf *out, const double *ref, double bound) {
  buf_read(out);
  double num = 0, den = 0;
  for (int64_t i = 0; i < out->n; i++) {
    cr_assert(isfinite(out->val[i]), "%s: element %ld is %g (unwritten or NaN)", what, (long)i,
              out->val[i]);
    num += (out->val[i] - ref[i]) * (out->val[i] - ref[i]);
    den += ref[i] * ref[i];
  }
  double rel = den > 0 ? sqrt(num / den) : sqrt(num);
  cr_assert_lt(rel, bound, "%s: relative error %.3g >= %.0e", what, rel, bound);
}

/* The default bounds: 1e-5 for f32 outputs, 1e-2 for f16/bf16 ones. */
static void check_close(const char *what, Buf *out, const double *ref) {
  check_close_tol(what, out, ref, out->elem == TY_F32 ? 1e-5 : 1e-2);
}

/* ------------------------------------------------------------ running */

/* Binds tensors (in argument order, dense row-major) and scalars, evaluates dims from the
 * tensors' shapes, the grid and the requirements, and runs. shapes[i]: the i-th tensor's dims. */
typedef struct Launch {
  Buf *tensors[MAX_TENSORS];
  int64_t shapes[MAX_TENSORS][TILE_MAX_RANK];
  double scalars[MAX_TENSORS];
} Launch;

static void launch(const Kernel *k, const Launch *l) {
  const TirFunc *f = k->f;
  InterpArg args[MAX_TENSORS];
  memset(args, 0, sizeof args);
  int64_t dims[16];
  for (int i = 0; i < f->ndims; i++)
    dims[i] = -1;
  int ti = 0, si = 0;
  for (int i = 0; i < f->nargs; i++) {
    const TirArg *a = &f->args[i];
    if (a->kind == ARG_SCALAR) {
      args[i].scalar = l->scalars[si++];
      continue;
    }
    Buf *b = l->tensors[ti];
    const int64_t *shape = l->shapes[ti++];
    cr_assert(b && b->elem == a->elem, "tensor %s: wrong buffer", a->name);
    args[i].tensor.data = b->data;
    int64_t stride = 1;
    for (int d = a->rank - 1; d >= 0; d--) {
      args[i].tensor.shape[d] = shape[d];
      args[i].tensor.strides[d] = stride;
      stride *= shape[d];
      int di = a->dims[d];
      cr_assert(dims[di] < 0 || dims[di] == shape[d], "dim %s disagrees", f->dims[di].name);
      dims[di] = shape[d];
      if (f->dims[di].pinned)
        cr_assert_eq(f->dims[di].value, shape[d], "pinned dim %s", f->dims[di].name);
    }
    cr_assert_eq(stride, b->n, "tensor %s: buffer size", a->name);
  }
  for (int i = 0; i < f->nrequires; i++)
    cr_assert(eval_rpn(f, dims, f->requires[i].rpn), "requirement %s fails", f->requires[i].text);
  int64_t grid[3];
  for (int i = 0; i < 3; i++)
    grid[i] = eval_rpn(f, dims, f->grid[i].rpn);
  char err[512];
  cr_assert(interp_run(f, args, dims, grid, err, sizeof err), "interp: %s", err);
}

static void kernel_free(Kernel *k) { arena_free(k->a); }

/* ------------------------------------------------------------ the examples */

static void run_vadd(int64_t n) {
  Kernel k = compile("vadd", NULL);
  Buf x = buf_random(TY_F32, n, -1, 1), y = buf_random(TY_F32, n, -1, 1), z = buf_poisoned(TY_F32, n);
  Launch l = {.tensors = {&x, &y, &z}, .shapes = {{n}, {n}, {n}}};
  launch(&k, &l);
  double *ref = malloc(sizeof(double) * (size_t)n);
  ref_vadd(n, x.val, y.val, ref);
  check_close("vadd", &z, ref);
  free(ref), buf_free(&x), buf_free(&y), buf_free(&z), kernel_free(&k);
}

Test(examples, vadd) {
  run_vadd(1000);
  run_vadd(1);
  run_vadd(17);
  run_vadd(10000);
}

static void run_softmax(const char *example, int64_t M, int64_t N, const char **defs) {
  Kernel k = compile(example, defs);
  ElemType et = k.f->args[0].elem; /* T: f16 by default, bf16 with -D T=bf16 */
  Buf x = buf_random(et, M * N, -4, 4), y = buf_poisoned(et, M * N);
  Launch l = {.tensors = {&x, &y}, .shapes = {{M, N}, {M, N}}};
  launch(&k, &l);
  double *ref = malloc(sizeof(double) * (size_t)(M * N));
  ref_softmax(M, N, x.val, ref);
  check_close(example, &y, ref);
  free(ref), buf_free(&x), buf_free(&y), kernel_free(&k);
}

Test(examples, softmax) {
  run_softmax("softmax", 4, 1000, NULL);
  run_softmax("softmax", 3, 1, NULL);
  run_softmax("softmax", 5, 17, NULL);
  const char *rows[] = {"ROWS=4", "BLOCK=64", NULL};
  run_softmax("softmax", 7, 50, rows);
  const char *pinned[] = {"N=17", "BLOCK=24", NULL}; /* a pinned dim, a non-power-of-two tile */
  run_softmax("softmax", 3, 17, pinned);
}

Test(examples, softmax_online) {
  run_softmax("softmax_online", 3, 1000, NULL);
  run_softmax("softmax_online", 2, 1, NULL);
  run_softmax("softmax_online", 5, 17, NULL);
  run_softmax("softmax_online", 2, 5000, NULL); /* several BN chunks, a ragged last one */
  const char *small[] = {"BN=64", NULL};
  run_softmax("softmax_online", 3, 1000, small);
}

typedef enum { NORM_RMS, NORM_ADD_RMS, NORM_LAYER } NormKind;

static void run_norm(NormKind kind, int64_t M, int64_t N, const char **defs) {
  static const char *names[] = {"rmsnorm", "add_rmsnorm", "layernorm"};
  Kernel k = compile(names[kind], defs);
  ElemType et = k.f->args[0].elem; /* T: f16 by default, bf16 with -D T=bf16 */
  double eps = 1e-5;
  Buf x = buf_random(et, M * N, -2, 2), w = buf_random(et, N, 0.5, 1.5);
  Buf y = buf_poisoned(et, M * N);
  double *ref = malloc(sizeof(double) * (size_t)(M * N));
  if (kind == NORM_RMS) {
    Launch l = {.tensors = {&x, &w, &y}, .shapes = {{M, N}, {N}, {M, N}}, .scalars = {eps}};
    launch(&k, &l);
    ref_rmsnorm(M, N, x.val, w.val, eps, ref);
    check_close("rmsnorm", &y, ref);
  } else if (kind == NORM_LAYER) {
    Buf bias = buf_random(et, N, -1, 1);
    Launch l = {.tensors = {&x, &w, &bias, &y}, .shapes = {{M, N}, {N}, {N}, {M, N}}, .scalars = {eps}};
    launch(&k, &l);
    ref_layernorm(M, N, x.val, w.val, bias.val, eps, ref);
    check_close("layernorm", &y, ref);
    buf_free(&bias);
  } else {
    Buf r = buf_random(et, M * N, -2, 2);
    double *rin = malloc(sizeof(double) * (size_t)(M * N)), *href = malloc(sizeof(double) * (size_t)(M * N));
    memcpy(rin, r.val, sizeof(double) * (size_t)(M * N));
    Launch l = {.tensors = {&x, &r, &w, &y}, .shapes = {{M, N}, {M, N}, {N}, {M, N}}, .scalars = {eps}};
    launch(&k, &l);
    ref_add_rmsnorm(M, N, x.val, rin, w.val, eps, href, ref);
    check_close("add_rmsnorm Y", &y, ref);
    check_close("add_rmsnorm R", &r, href);
    free(rin), free(href), buf_free(&r);
  }
  free(ref), buf_free(&x), buf_free(&w), buf_free(&y), kernel_free(&k);
}

Test(examples, rmsnorm) {
  run_norm(NORM_RMS, 4, 1000, NULL);
  run_norm(NORM_RMS, 3, 1, NULL);
  run_norm(NORM_RMS, 5, 17, NULL);
  const char *rows[] = {"ROWS=2", "BLOCK=32", NULL};
  run_norm(NORM_RMS, 5, 17, rows);
}

Test(examples, add_rmsnorm) {
  run_norm(NORM_ADD_RMS, 4, 1000, NULL);
  run_norm(NORM_ADD_RMS, 3, 1, NULL);
  run_norm(NORM_ADD_RMS, 5, 17, NULL);
}

/* dW is summed across blocks with atomic_add: it starts at 0 (not poisoned); dX is poisoned. */
static void run_rmsnorm_backward(int64_t M, int64_t N, const char **defs) {
  Kernel k = compile("rmsnorm_backward", defs);
  ElemType et = k.f->args[0].elem;
  double eps = 1e-5;
  Buf x = buf_random(et, M * N, -2, 2), w = buf_random(et, N, 0.5, 1.5), dy = buf_random(et, M * N, -1, 1);
  Buf dx = buf_poisoned(et, M * N), dw = buf_new(TY_F32, N);
  Launch l = {.tensors = {&x, &w, &dy, &dx, &dw}, .shapes = {{M, N}, {N}, {M, N}, {M, N}, {N}},
              .scalars = {eps}};
  launch(&k, &l);
  double *rdx = malloc(sizeof(double) * (size_t)(M * N)), *rdw = malloc(sizeof(double) * (size_t)N);
  ref_rmsnorm_backward(M, N, x.val, w.val, dy.val, eps, rdx, rdw);
  check_close("rmsnorm_backward dX", &dx, rdx);
  check_close("rmsnorm_backward dW", &dw, rdw);
  free(rdx), free(rdw), buf_free(&x), buf_free(&w), buf_free(&dy), buf_free(&dx), buf_free(&dw);
  kernel_free(&k);
}

/* The shapes of the norm backward kernels (BLOCK, ROWS, CHUNK, WARPS: the same parameters). */
static void norm_backward_shapes(void (*run)(int64_t M, int64_t N, const char **defs)) {
  run(37, 1000, NULL); /* 3 blocks of 16 rows, the last one short */
  run(1, 1, NULL);
  const char *small[] = {"BLOCK=32", "ROWS=4", "CHUNK=2", "WARPS=1", NULL};
  run(9, 17, small);
  const char *bf[] = {"T=bf16", NULL};
  run(5, 1000, bf);
}

Test(examples, rmsnorm_backward) { norm_backward_shapes(run_rmsnorm_backward); }

Test(examples, layernorm) {
  run_norm(NORM_LAYER, 4, 1000, NULL);
  run_norm(NORM_LAYER, 3, 1, NULL);
  run_norm(NORM_LAYER, 5, 17, NULL);
  const char *rows[] = {"ROWS=3", NULL};
  run_norm(NORM_LAYER, 7, 100, rows);
}

/* type: "T=bf16" or NULL (the default, f16) */
static void run_gemm_t(int64_t M, int64_t N, int64_t K, int act, const char *type) {
  char actdef[16];
  snprintf(actdef, sizeof actdef, "ACT=%d", act);
  const char *defs[] = {actdef, type, NULL};
  Kernel k = compile("gemm", defs);
  ElemType et = k.f->args[0].elem; /* T: f16 by default, bf16 with -D T=bf16 */
  Buf a = buf_random(et, M * K, -1, 1), b = buf_random(et, K * N, -1, 1);
  Buf bias = buf_random(et, N, -0.5, 0.5), c = buf_poisoned(et, M * N);
  Launch l = {.tensors = {&a, &b, &bias, &c}, .shapes = {{M, K}, {K, N}, {N}, {M, N}}};
  launch(&k, &l);
  double *ref = malloc(sizeof(double) * (size_t)(M * N));
  ref_gemm(M, N, K, a.val, b.val, bias.val, act, ref);
  check_close("gemm", &c, ref);
  free(ref), buf_free(&a), buf_free(&b), buf_free(&bias), buf_free(&c), kernel_free(&k);
}

static void run_gemm(int64_t M, int64_t N, int64_t K, int act) { run_gemm_t(M, N, K, act, NULL); }

Test(examples, gemm) {
  run_gemm(100, 70, 50, 0);
  run_gemm(1, 1, 1, 1);
  run_gemm(17, 33, 65, 1);
  run_gemm(130, 64, 96, 2);
  run_gemm(64, 17, 1000, 2);
}

static void run_attention_t(int64_t B, int64_t H, int64_t N, int64_t D, int causal, const char *type) {
  char ddef[16], cdef[16];
  snprintf(ddef, sizeof ddef, "D=%ld", (long)D);
  snprintf(cdef, sizeof cdef, "CAUSAL=%d", causal);
  const char *defs[] = {ddef, cdef, type, NULL};
  Kernel k = compile("attention", defs);
  ElemType et = k.f->args[0].elem; /* T: f16 by default, bf16 with -D T=bf16 */
  int64_t n = B * H * N * D;
  Buf q = buf_random(et, n, -2, 2), kk = buf_random(et, n, -2, 2);
  Buf v = buf_random(et, n, -1, 1), o = buf_poisoned(et, n);
  double scale = 1.0 / sqrt((double)D);
  Launch l = {.tensors = {&q, &kk, &v, &o},
              .shapes = {{B, H, N, D}, {B, H, N, D}, {B, H, N, D}, {B, H, N, D}},
              .scalars = {scale}};
  launch(&k, &l);
  double *ref = malloc(sizeof(double) * (size_t)n);
  ref_attention(B, H, N, D, q.val, kk.val, v.val, (double)(float)scale, causal, ref);
  check_close(causal ? "attention causal" : "attention", &o, ref);
  free(ref), buf_free(&q), buf_free(&kk), buf_free(&v), buf_free(&o), kernel_free(&k);
}

static void run_attention(int64_t B, int64_t H, int64_t N, int64_t D, int causal) {
  run_attention_t(B, H, N, D, causal, NULL);
}

Test(examples, attention_d64) {
  run_attention(1, 2, 1000, 64, 0);
  run_attention(1, 2, 1000, 64, 1);
  run_attention(2, 1, 1, 64, 0);
  run_attention(1, 3, 17, 64, 1);
}

Test(examples, attention_d128) {
  run_attention(1, 1, 1000, 128, 0);
  run_attention(1, 2, 17, 128, 0);
  run_attention(1, 2, 130, 128, 1);
  run_attention(1, 1, 1, 128, 1);
}

/* Labels cover the whole row, its first and last column, and ignored rows (-100 and N: loss 0). */
static void set_labels(Buf *label, int64_t M, int64_t N) {
  for (int64_t m = 0; m < M; m++) {
    int64_t t = (int64_t)(urand() * (double)N);
    if (m % 5 == 1) t = 0;
    if (m % 5 == 2) t = N - 1;
    if (m % 7 == 3) t = -100;
    if (m % 7 == 5) t = N;
    buf_set(label, m, (double)t);
  }
}

static void run_cross_entropy(int64_t M, int64_t N, const char **defs) {
  Kernel k = compile("cross_entropy", defs);
  ElemType et = k.f->args[0].elem; /* T: f16 by default, bf16 with -D T=bf16 */
  Buf x = buf_random(et, M * N, -4, 4), label = buf_new(TY_I32, M), loss = buf_poisoned(TY_F32, M);
  set_labels(&label, M, N);
  Launch l = {.tensors = {&x, &label, &loss}, .shapes = {{M, N}, {M}, {M}}};
  launch(&k, &l);
  double *ref = malloc(sizeof(double) * (size_t)M);
  ref_cross_entropy(M, N, x.val, label.val, ref);
  check_close("cross_entropy", &loss, ref);
  free(ref), buf_free(&x), buf_free(&label), buf_free(&loss), kernel_free(&k);
}

Test(examples, cross_entropy) {
  run_cross_entropy(4, 1000, NULL);
  run_cross_entropy(3, 1, NULL);
  run_cross_entropy(9, 17, NULL);
  run_cross_entropy(8, 5000, NULL); /* three BN chunks, a ragged last one */
  const char *small[] = {"BN=64", "WARPS=2", NULL};
  run_cross_entropy(12, 1000, small);
  const char *pinned[] = {"N=100", "BN=48", NULL}; /* a pinned dim, a non-power-of-two tile */
  run_cross_entropy(5, 100, pinned);
}

/* bf16 (-D T=bf16): the same kernels and references; inputs are rounded to bf16 (8 bits of
 * mantissa) before the reference sees them, outputs are bf16, so the error is a few bf16 ulps
 * (2^-9 relative per element) and stays under the same 1e-2 bound. */
Test(examples, bf16_row_kernels) {
  const char *bf[] = {"T=bf16", NULL};
  run_softmax("softmax", 4, 1000, bf);
  run_softmax("softmax", 5, 17, bf);
  run_softmax("softmax_online", 2, 5000, bf);
  run_norm(NORM_RMS, 4, 1000, bf);
  run_norm(NORM_RMS, 5, 17, bf);
  run_norm(NORM_ADD_RMS, 3, 1000, bf);
  run_norm(NORM_LAYER, 4, 1000, bf);
  const char *rows[] = {"T=bf16", "ROWS=3", NULL};
  run_norm(NORM_LAYER, 7, 100, rows);
  run_cross_entropy(4, 1000, bf);
  run_cross_entropy(9, 17, bf);
}

Test(examples, bf16_gemm) {
  run_gemm_t(100, 70, 50, 0, "T=bf16");
  run_gemm_t(17, 33, 65, 1, "T=bf16");
  run_gemm_t(130, 64, 96, 2, "T=bf16");
}

Test(examples, bf16_attention) {
  run_attention_t(1, 2, 300, 64, 0, "T=bf16");
  run_attention_t(1, 2, 130, 64, 1, "T=bf16");
  run_attention_t(1, 1, 100, 128, 1, "T=bf16");
}

/* layernorm_backward.tile, as a training step runs it: layernorm_train (Y, and the row statistics
 * it saves), then layernorm_backward on those statistics. dW and dB are summed across blocks with
 * atomic_add: they start at 0 (not poisoned). */
static void run_layernorm_backward(int64_t M, int64_t N, const char **defs) {
  Kernel fwd = compile_kernel("layernorm_backward", "layernorm_train", defs);
  Kernel bwd = compile_kernel("layernorm_backward", "layernorm_backward", defs);
  ElemType et = bwd.f->args[0].elem;
  double eps = 1e-5;
  Buf x = buf_random(et, M * N, -2, 2), w = buf_random(et, N, 0.5, 1.5), bias = buf_random(et, N, -0.5, 0.5);
  Buf y = buf_poisoned(et, M * N), mean = buf_poisoned(TY_F32, M), rstd = buf_poisoned(TY_F32, M);
  Launch lf = {.tensors = {&x, &w, &bias, &y, &mean, &rstd}, .shapes = {{M, N}, {N}, {N}, {M, N}, {M}, {M}},
               .scalars = {eps}};
  launch(&fwd, &lf);
  size_t mn = (size_t)(M * N);
  double *ry = malloc(sizeof(double) * mn), *rmean = malloc(sizeof(double) * (size_t)M);
  double *rrstd = malloc(sizeof(double) * (size_t)M);
  ref_layernorm_train(M, N, x.val, w.val, bias.val, eps, ry, rmean, rrstd);
  check_close("layernorm_train Y", &y, ry);
  check_close("layernorm_train Mean", &mean, rmean);
  check_close("layernorm_train Rstd", &rstd, rrstd);
  Buf dy = buf_random(et, M * N, -1, 1), dx = buf_poisoned(et, M * N);
  Buf dw = buf_new(TY_F32, N), db = buf_new(TY_F32, N);
  Launch lb = {.tensors = {&x, &w, &mean, &rstd, &dy, &dx, &dw, &db},
               .shapes = {{M, N}, {N}, {M}, {M}, {M, N}, {M, N}, {N}, {N}}};
  launch(&bwd, &lb);
  double *rdx = malloc(sizeof(double) * mn), *rdw = malloc(sizeof(double) * (size_t)N);
  double *rdb = malloc(sizeof(double) * (size_t)N);
  /* the statistics the backward read: the forward's f32 values (check_close read them back) */
  ref_layernorm_backward(M, N, x.val, w.val, mean.val, rstd.val, dy.val, rdx, rdw, rdb);
  check_close("layernorm_backward dX", &dx, rdx);
  check_close("layernorm_backward dW", &dw, rdw);
  check_close("layernorm_backward dB", &db, rdb);
  free(ry), free(rmean), free(rrstd), free(rdx), free(rdw), free(rdb);
  Buf *bufs[] = {&x, &w, &bias, &y, &mean, &rstd, &dy, &dx, &dw, &db};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
    buf_free(bufs[i]);
  kernel_free(&fwd), kernel_free(&bwd);
}

Test(examples, layernorm_backward) { norm_backward_shapes(run_layernorm_backward); }

/* Labels as in run_cross_entropy (first and last column, ignored rows); dloss random per row. */
static void run_cross_entropy_backward(int64_t M, int64_t N, const char **defs) {
  Kernel k = compile("cross_entropy_backward", defs);
  ElemType et = k.f->args[0].elem;
  Buf x = buf_random(et, M * N, -4, 4), label = buf_new(TY_I32, M), dloss = buf_random(TY_F32, M, 0.5, 2);
  Buf loss = buf_poisoned(TY_F32, M), dx = buf_poisoned(et, M * N);
  set_labels(&label, M, N);
  Launch l = {.tensors = {&x, &label, &dloss, &loss, &dx}, .shapes = {{M, N}, {M}, {M}, {M}, {M, N}}};
  launch(&k, &l);
  double *rloss = malloc(sizeof(double) * (size_t)M), *rdx = malloc(sizeof(double) * (size_t)(M * N));
  ref_cross_entropy_backward(M, N, x.val, label.val, dloss.val, rloss, rdx);
  check_close("cross_entropy_backward loss", &loss, rloss);
  check_close("cross_entropy_backward dX", &dx, rdx);
  free(rloss), free(rdx), buf_free(&x), buf_free(&label), buf_free(&dloss), buf_free(&loss), buf_free(&dx);
  kernel_free(&k);
}

Test(examples, cross_entropy_backward) {
  run_cross_entropy_backward(7, 1000, NULL);
  run_cross_entropy_backward(3, 1, NULL);
  run_cross_entropy_backward(8, 5000, NULL); /* three BN chunks, a ragged last one */
  const char *small[] = {"BN=64", "WARPS=2", NULL};
  run_cross_entropy_backward(12, 1000, small);
  const char *bf[] = {"T=bf16", "BN=256", NULL};
  run_cross_entropy_backward(7, 1000, bf);
}

/* attention_backward.tile's four kernels in training order: attention_lse (O and LSE), prep
 * (Delta, dQacc = 0), the backward (dQacc, dK, dV), dq (dQ in T). Each output against the float64
 * reference fed with what the kernels before it produced. dQacc is f32 but sums f16 products of
 * dS (rounded to T for the tensor cores, as in FlashAttention), so its bound is T's. */
static void run_attention_backward(int64_t B, int64_t H, int64_t N, int64_t D, int causal, const char *type) {
  char ddef[16], cdef[16];
  snprintf(ddef, sizeof ddef, "D=%ld", (long)D);
  snprintf(cdef, sizeof cdef, "CAUSAL=%d", causal);
  const char *defs[] = {ddef, cdef, type, NULL};
  const char *ex = "attention_backward";
  Kernel kl = compile_kernel(ex, "attention_lse", defs), kp = compile_kernel(ex, "attention_backward_prep", defs);
  Kernel kb = compile_kernel(ex, "attention_backward", defs), kd = compile_kernel(ex, "attention_backward_dq", defs);
  ElemType et = kb.f->args[0].elem;
  int64_t n = B * H * N * D, rows = B * H * N;
  int64_t t4[TILE_MAX_RANK] = {B, H, N, D}, t3[TILE_MAX_RANK] = {B, H, N};
  double scale = 1.0 / sqrt((double)D);
  Buf q = buf_random(et, n, -2, 2), k = buf_random(et, n, -2, 2), v = buf_random(et, n, -1, 1);
  Buf o = buf_poisoned(et, n), lse = buf_poisoned(TY_F32, rows);
  Launch ll = {.tensors = {&q, &k, &v, &o, &lse}, .scalars = {scale}};
  for (int i = 0; i < 5; i++)
    memcpy(ll.shapes[i], i < 4 ? t4 : t3, sizeof t4);
  launch(&kl, &ll);
  double *ro = malloc(sizeof(double) * (size_t)n), *rlse = malloc(sizeof(double) * (size_t)rows);
  double fscale = (double)(float)scale;
  ref_attention_lse(B, H, N, D, q.val, k.val, v.val, fscale, causal, ro, rlse);
  check_close("attention_lse O", &o, ro);
  check_close("attention_lse LSE", &lse, rlse);

  Buf g = buf_random(et, n, -1, 1), delta = buf_poisoned(TY_F32, rows), dqacc = buf_poisoned(TY_F32, n);
  Launch lp = {.tensors = {&o, &g, &delta, &dqacc}};
  for (int i = 0; i < 4; i++)
    memcpy(lp.shapes[i], i == 2 ? t3 : t4, sizeof t4);
  launch(&kp, &lp);
  double *rdelta = malloc(sizeof(double) * (size_t)rows);
  ref_attention_backward_prep(B, H, N, D, o.val, g.val, rdelta);
  check_close("attention_backward_prep Delta", &delta, rdelta);
  buf_read(&dqacc);
  for (int64_t i = 0; i < n; i++)
    cr_assert_eq(dqacc.val[i], 0.0, "attention_backward_prep: dQacc[%ld] = %g, not 0", (long)i, dqacc.val[i]);

  Buf dk = buf_poisoned(et, n), dv = buf_poisoned(et, n);
  Launch lb = {.tensors = {&q, &k, &v, &g, &lse, &delta, &dqacc, &dk, &dv}, .scalars = {scale}};
  for (int i = 0; i < 9; i++)
    memcpy(lb.shapes[i], i == 4 || i == 5 ? t3 : t4, sizeof t4);
  launch(&kb, &lb);
  double *rdq = malloc(sizeof(double) * (size_t)n), *rdk = malloc(sizeof(double) * (size_t)n);
  double *rdv = malloc(sizeof(double) * (size_t)n);
  ref_attention_backward(B, H, N, D, q.val, k.val, v.val, g.val, lse.val, delta.val, fscale, causal, rdq, rdk, rdv);
  check_close_tol("attention_backward dQacc", &dqacc, rdq, 1e-2);
  check_close("attention_backward dK", &dk, rdk);
  check_close("attention_backward dV", &dv, rdv);

  Buf dq = buf_poisoned(et, n);
  Launch ld = {.tensors = {&dqacc, &dq}};
  memcpy(ld.shapes[0], t4, sizeof t4), memcpy(ld.shapes[1], t4, sizeof t4);
  launch(&kd, &ld);
  check_close("attention_backward_dq dQ", &dq, rdq);

  /* the scheme without atomics: dK, dV by key blocks, dQ by query blocks */
  Kernel kkv = compile_kernel(ex, "attention_backward_kv", defs), kq = compile_kernel(ex, "attention_backward_q", defs);
  Buf dk2 = buf_poisoned(et, n), dv2 = buf_poisoned(et, n), dq2 = buf_poisoned(et, n);
  Launch lkv = {.tensors = {&q, &k, &v, &g, &lse, &delta, &dk2, &dv2}, .scalars = {scale}};
  Launch lq = {.tensors = {&q, &k, &v, &g, &lse, &delta, &dq2}, .scalars = {scale}};
  for (int i = 0; i < 8; i++)
    memcpy(lkv.shapes[i], i == 4 || i == 5 ? t3 : t4, sizeof t4), memcpy(lq.shapes[i], i == 4 || i == 5 ? t3 : t4, sizeof t4);
  launch(&kkv, &lkv);
  launch(&kq, &lq);
  check_close("attention_backward_kv dK", &dk2, rdk);
  check_close("attention_backward_kv dV", &dv2, rdv);
  check_close("attention_backward_q dQ", &dq2, rdq);
  buf_free(&dk2), buf_free(&dv2), buf_free(&dq2), kernel_free(&kkv), kernel_free(&kq);

  free(ro), free(rlse), free(rdelta), free(rdq), free(rdk), free(rdv);
  Buf *bufs[] = {&q, &k, &v, &o, &lse, &g, &delta, &dqacc, &dk, &dv, &dq};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
    buf_free(bufs[i]);
  kernel_free(&kl), kernel_free(&kp), kernel_free(&kb), kernel_free(&kd);
}

Test(examples, attention_backward_d64) {
  run_attention_backward(1, 2, 130, 64, 0, NULL);
  run_attention_backward(1, 2, 130, 64, 1, NULL);
  run_attention_backward(2, 1, 3, 64, 0, NULL); /* (N = 1 makes dQ and dK exactly 0: no relative error) */
  run_attention_backward(1, 1, 17, 64, 1, "T=bf16");
}

Test(examples, attention_backward_d128) {
  run_attention_backward(1, 1, 100, 128, 0, NULL);
  run_attention_backward(1, 2, 70, 128, 1, NULL);
  run_attention_backward(1, 1, 65, 128, 1, "T=bf16");
}

/* Rows that see only -inf (masked by the kernel itself) come out 0, not NaN: the online-softmax
 * finish rule (docs/language.md). Rows >= LIVE are masked entirely. */
Test(examples, attention_fully_masked_rows_are_zero) {
  static const char src[] =
      "kernel masked<BM = 16, BN = 16, LIVE = 5>(S: f32[M, N], V: f32[N, E], O: out f32[M, E])\n"
      "  grid (cdiv(M, BM)) threads (64)\n"
      "{\n"
      "  require E <= 16;\n"
      "  let m0 = block.x * BM;\n"
      "  reg acc: f32[BM, 16] = 0;\n"
      "  online_softmax st(rows = BM, rescale = acc);\n"
      "  for n0 in 0 .. N step BN {\n"
      "    reg s = fill(S[m0 : +BM, n0 : +BN], -inf);\n"
      "    s = where(row_index(m0, BM) < LIVE, s, -inf);\n"
      "    acc += dot(st.update(s), V[n0 : +BN, 0 : +16]);\n"
      "  }\n"
      "  O[m0 : +BM, 0 : +16] = st.finish(acc);\n"
      "}\n";
  Kernel k = compile_text("masked.tile", src, sizeof src - 1, NULL);
  int64_t M = 20, N = 40, E = 16;
  Buf s = buf_random(TY_F32, M * N, -3, 3), v = buf_random(TY_F32, N * E, -1, 1);
  Buf o = buf_poisoned(TY_F32, M * E);
  Launch l = {.tensors = {&s, &v, &o}, .shapes = {{M, N}, {N, E}, {M, E}}};
  launch(&k, &l);
  buf_read(&o);
  for (int64_t i = 0; i < M; i++)
    for (int64_t j = 0; j < E; j++) {
      double got = o.val[i * E + j];
      cr_assert(!isnan(got), "(%ld,%ld) is NaN", (long)i, (long)j);
      if (i >= 5) {
        cr_assert_eq(got, 0.0, "masked row %ld gives %g", (long)i, got);
      } else { /* live rows: the softmax-weighted sum of V */
        double mx = -INFINITY, sum = 0, acc = 0;
        for (int64_t c = 0; c < N; c++)
          mx = fmax(mx, s.val[i * N + c]);
        for (int64_t c = 0; c < N; c++) {
          double p = exp(s.val[i * N + c] - mx);
          sum += p, acc += p * v.val[c * E + j];
        }
        cr_assert_lt(fabs(got - acc / sum), 1e-5, "(%ld,%ld): %g vs %g", (long)i, (long)j, got, acc / sum);
      }
    }
  buf_free(&s), buf_free(&v), buf_free(&o), kernel_free(&k);
}

/* Language features the examples do not use, against the same computation written in C:
 * run-time ?: (only one side runs), else-if chains, -= /=, to_i32, abs/% on i32, cdiv of a
 * scalar argument, a reduction used in an i32 expression, !, &&, where, exp2/erf/sigmoid. */
Test(lowering, features_against_c) {
  static const char src[] =
      "kernel feat<B = 16>(X: f32[N], Y: out f32[N], I: out i32[N], n: i32, s: f32)\n"
      "  grid (cdiv(N, B)) threads (32)\n"
      "{\n"
      "  let i0 = block.x * B;\n"
      "  reg x = X[i0 : +B];\n"
      "  let big = n > 3 ? x * s : x - s;\n"
      "  reg y = big;\n"
      "  if n > 5 { y -= 1.0; } else if n > 2 { y /= 2.0; } else { y = sigmoid(y) + erf(y) + exp2(y); }\n"
      "  let q = to_i32(y * 10.0);\n"
      "  I[i0 : +B] = abs(q) % 7 + cdiv(n, 3) - min(q, 0, keep) * 0;\n"
      "  Y[i0 : +B] = where(!(y < 0.0) && true, y, 0.0 - y);\n"
      "}\n";
  Kernel k = compile_text("feat.tile", src, sizeof src - 1, NULL);
  int64_t N = 37;
  int ns[] = {1, 3, 7};
  for (int t = 0; t < 3; t++) {
    int n = ns[t];
    float s = 0.75f;
    Buf x = buf_random(TY_F32, N, -3, 3), y = buf_poisoned(TY_F32, N), iv = buf_new(TY_I32, N);
    for (int64_t i = 0; i < N; i++)
      ((int32_t *)iv.data)[i] = -12345;
    Launch l = {.tensors = {&x, &y, &iv}, .shapes = {{N}, {N}, {N}}, .scalars = {n, s}};
    launch(&k, &l);
    buf_read(&y), buf_read(&iv);
    for (int64_t i = 0; i < N; i++) {
      float xv = (float)x.val[i];
      float yv = n > 3 ? xv * s : xv - s;
      if (n > 5)
        yv -= 1.0f;
      else if (n > 2)
        yv /= 2.0f;
      else
        yv = 1.0f / (1.0f + expf(-yv)) + erff(yv) + exp2f(yv);
      int32_t q = (int32_t)(yv * 10.0f);
      int32_t want_i = abs(q) % 7 + (n + 3 - 1) / 3;
      float want_y = !(yv < 0.0f) ? yv : 0.0f - yv;
      cr_assert_eq(iv.val[i], want_i, "n=%d I[%ld] = %g, want %d", n, (long)i, iv.val[i], want_i);
      cr_assert_eq((float)y.val[i], want_y, "n=%d Y[%ld] = %g, want %g", n, (long)i, y.val[i], want_y);
    }
    buf_free(&x), buf_free(&y), buf_free(&iv);
  }
  kernel_free(&k);
}
