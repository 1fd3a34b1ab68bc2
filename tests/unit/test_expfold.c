/* test_expfold.c — tir_expfold.c: `exp(x - s) * c` and `exp(x - s) / c` (s, c row scalars) become
 * exp(x - (s -+ log c)) under `if (c > 0)`, the original in the ELSE; results agree with the
 * unfolded IR in the interpreter (to rounding where c > 0, bit for bit where it is not). */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "tilec.h"
#include "test_support.h"

/* Y: the product form, Z: the quotient, W: an exponential also summed (read twice: kept). */
static const char *src =
    "kernel scaled<BN = 16, WARPS = 1>(X: f32[M, N], S: f32[M], C: f32[M],\n"
    "    Y: out f32[M, N], Z: out f32[M, N], W: out f32[M, N])\n"
    "  grid (M) threads (WARPS * 32)\n"
    "{\n"
    "  let r = block.x;\n"
    "  let s = S[r];\n"
    "  let c = C[r];\n"
    "  for n0 in 0 .. N step BN {\n"
    "    let x = X[r : +1, n0 : +BN];\n"
    "    Y[r : +1, n0 : +BN] = exp(x - s) * c;\n"
    "    Z[r : +1, n0 : +BN] = exp(x - s) / c;\n"
    "    let e = exp(x - s);\n"
    "    W[r : +1, n0 : +BN] = e * c + e;\n"
    "  }\n"
    "}\n";

enum { M = 9, N = 40 };

typedef struct Out {
  float y[M * N], z[M * N], w[M * N];
} Out;

/* Whether the IF at i holds no MUL or DIV before its ELSE, and has an ELSE. */
static bool folded_branch(const TirFunc *f, int i) {
  for (int k = i + 1; k < f->ninsts; k++) {
    TirOp op = f->insts[k].op;
    if (op == TIR_ELSE)
      return true;
    if (op == TIR_MUL || op == TIR_DIV || op == TIR_ENDIF)
      return false;
  }
  return false;
}

static void run(const char *knob_value, Out *o, int *nfolded) {
  Arena *a = arena_new();
  Diag d;
  TirFunc *f = source_tir_with(a, "scaled.tile", src, ARCH_SM90A, "TILEC_EXP_FOLD", knob_value, &d);
  *nfolded = 0;
  for (int i = 0; i < f->ninsts; i++)
    *nfolded += f->insts[i].op == TIR_IF && folded_branch(f, i);
  static float x[M * N], s[M], c[M];
  for (int i = 0; i < M * N; i++)
    x[i] = (float)((i * 7919) % 23) * 0.25f - 3.0f;
  static const float cs[M] = {0.5f, 3.0f, -2.0f, 0.0f, -0.0f, 1.0f / 4096, -0.25f, 7.0f, 1e-3f};
  for (int m = 0; m < M; m++)
    s[m] = (float)m * 0.5f - 1.0f, c[m] = cs[m];
  InterpArg args[6] = {{.tensor = {x, {M, N}, {N, 1}}}, {.tensor = {s, {M}, {1}}}, {.tensor = {c, {M}, {1}}},
                       {.tensor = {o->y, {M, N}, {N, 1}}}, {.tensor = {o->z, {M, N}, {N, 1}}},
                       {.tensor = {o->w, {M, N}, {N, 1}}}};
  int64_t dims[2] = {M, N};
  int64_t grid[3] = {M, 1, 1};
  char err[256];
  cr_assert(interp_run(f, args, dims, grid, err, sizeof err), "%s", err);
  arena_free(a);
}

static void assert_close(const float *a, const float *b, const char *what) {
  for (int i = 0; i < M * N; i++) {
    float c = (float[M]){0.5f, 3.0f, -2.0f, 0.0f, -0.0f, 1.0f / 4096, -0.25f, 7.0f, 1e-3f}[i / N];
    if (c > 0)
      cr_assert(fabsf(a[i] - b[i]) <= 4e-6f * fabsf(b[i]), "%s %d: %.9g vs %.9g", what, i, a[i], b[i]);
    else /* the ELSE: the original computation */
      cr_assert_eq(memcmp(&a[i], &b[i], sizeof(float)), 0, "%s %d: %g vs %g", what, i, a[i], b[i]);
  }
}

Test(expfold, factor_joins_the_exponent_under_its_sign_test) {
  static Out off, on;
  int n_off, n_on;
  run("0", &off, &n_off);
  run(NULL, &on, &n_on);
  cr_assert_eq(n_off, 0);
  cr_assert_eq(n_on, 2, "the product and the quotient; the exponential read twice stays");
  assert_close(on.y, off.y, "Y");
  assert_close(on.z, off.z, "Z");
  cr_assert_eq(memcmp(on.w, off.w, sizeof on.w), 0, "W is not rewritten");
  source_assembles("scaled.tile", src);
}

/* Cross-entropy backward's dX loop (both kernels): the folded path is ex2 and its FMA alone. */
Test(expfold, cross_entropy_gradient_loses_its_multiply) {
  Arena *a = arena_new();
  Diag d;
  char *text = example_text(a, "cross_entropy_backward");
  for (int k = 0; k < 2; k++) {
    TirFunc *f = source_tir_kernel(a, "cross_entropy_backward.tile", text, NULL, ARCH_SM90A, k, &d);
    int folded = 0;
    for (int i = 0; i < f->ninsts; i++)
      folded += f->insts[i].op == TIR_IF && folded_branch(f, i);
    cr_assert_eq(folded, 1, "kernel %d", k);
  }
  arena_free(a);
}
