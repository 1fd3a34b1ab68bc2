/* test_exppoly.c — TILEC_EXP_POLY=K (lower_nvptx.c, exp_on_fma): one in K exponentials of a block
 * computed on the FMA pipe instead of ex2.approx. The emitted PTX itself is evaluated: the
 * instructions that follow from the replaced exponential's input are run here in float
 * arithmetic (each PTX instruction is one correctly rounded C operation), so the test checks the
 * code the GPU runs, not a copy of its algorithm. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tilec.h"
#include "test_support.h"

/* 8 exponentials a thread (BN = 256 over 32 threads) in one block */
static const char *src = "kernel e2<BN = 256>(X: f32[N], Y: out f32[N])\n"
                         "  grid (cdiv(N, BN)) threads (32)\n"
                         "{\n"
                         "  let n0 = block.x * BN;\n"
                         "  Y[n0 : +BN] = exp2(X[n0 : +BN]);\n"
                         "}\n";

/* The registers of a straight-line PTX run: name -> 32-bit value. */
typedef struct Regs {
  int n;
  char name[64][16];
  uint32_t v[64];
} Regs;

static int reg_find(const Regs *r, const char *name) {
  for (int i = 0; i < r->n; i++)
    if (!strcmp(r->name[i], name))
      return i;
  return -1;
}

/* An operand's value: a register this run computed (*path set), a 0fXXXXXXXX float or a decimal
 * integer; false for anything else (another register, an address). */
static bool operand(const Regs *r, const char *s, uint32_t *v, bool *path) {
  if (s[0] == '%') {
    int i = reg_find(r, s);
    if (i >= 0)
      *v = r->v[i], *path = true;
    return i >= 0;
  }
  if (s[0] == '0' && s[1] == 'f') {
    *v = (uint32_t)strtoul(s + 2, NULL, 16);
    return true;
  }
  char *end;
  *v = (uint32_t)strtol(s, &end, 10);
  return end != s && *end == 0;
}

static float ptx_max_nan(float a, float b) { return isnan(a) || isnan(b) ? NAN : fmaxf(a, b); }
static float ptx_min_nan(float a, float b) { return isnan(a) || isnan(b) ? NAN : fminf(a, b); }

/* Runs the instructions of the PTX from line `start` on that read the input register `in` (= x)
 * or a result of one, until the first mul.rn.f32 among them: its result. */
static float run_poly(const char *start, const char *in, float x) {
  Regs r = {.n = 1};
  snprintf(r.name[0], sizeof r.name[0], "%s", in);
  r.v[0] = f32_bits(x);
  for (const char *ln = start; ln && *ln; ln = strchr(ln, '\n') ? strchr(ln, '\n') + 1 : NULL) {
    char op[32], d[16], s[3][24];
    int k = sscanf(ln, " %31s %15[^,], %23[^,;], %23[^,;], %23[^,;];", op, d, s[0], s[1], s[2]);
    if (k < 3)
      continue;
    uint32_t a[3] = {0, 0, 0};
    bool ok = true, path = false;
    for (int i = 0; i < k - 2; i++)
      ok = operand(&r, s[i], &a[i], &path) && ok;
    if (!path)
      continue; /* not on the path from the input */
    cr_assert(ok && r.n < 64, "the FMA path reads another value: %.60s", ln);
    float fa = bits_f32(a[0]), fb = bits_f32(a[1]), fc = bits_f32(a[2]);
    uint32_t out;
    if (!strcmp(op, "max.NaN.f32"))
      out = f32_bits(ptx_max_nan(fa, fb));
    else if (!strcmp(op, "min.NaN.f32"))
      out = f32_bits(ptx_min_nan(fa, fb));
    else if (!strcmp(op, "add.rn.f32"))
      out = f32_bits(fa + fb);
    else if (!strcmp(op, "sub.rn.f32"))
      out = f32_bits(fa - fb);
    else if (!strcmp(op, "fma.rn.f32"))
      out = f32_bits(fmaf(fa, fb, fc));
    else if (!strcmp(op, "mov.b32"))
      out = a[0];
    else if (!strcmp(op, "shl.b32"))
      out = a[0] << a[1];
    else if (!strcmp(op, "add.s32"))
      out = a[0] + a[1];
    else if (!strcmp(op, "mul.rn.f32"))
      return fa * fb;
    else
      cr_assert_fail("unexpected instruction on the FMA path: %.60s", ln);
    snprintf(r.name[r.n], sizeof r.name[r.n], "%s", d);
    r.v[r.n++] = out;
  }
  cr_assert_fail("no mul.rn.f32 ends the FMA path");
  return 0;
}

Test(exppoly, one_in_k_exponentials_leave_mufu) {
  Arena *a = arena_new();
  char *plain = source_ptx(a, "e2.tile", src, NULL, ARCH_SM90A);
  char *poly = source_ptx_with(a, "e2.tile", src, NULL, ARCH_SM90A, "TILEC_EXP_POLY", "4");
  int n = occurrences(plain, "ex2.approx");
  cr_assert_geq(n, 8);
  cr_assert_eq(occurrences(plain, "max.NaN.f32"), 0);
  cr_assert_eq(occurrences(poly, "max.NaN.f32"), 2, "two of the block's eight");
  cr_assert_eq(occurrences(poly, "ex2.approx"), n - 2);
  for (int k = 0; k < 2; k++) {
    GpuArch arch = k ? ARCH_SM90A : ARCH_SM80;
    ptxas_assert_clean(source_ptx_with(a, "e2.tile", src, NULL, arch, "TILEC_EXP_POLY", "4"), arch);
  }
  char *off = source_ptx_with(a, "e2.tile", src, NULL, ARCH_SM90A, "TILEC_EXP_POLY", "9");
  cr_assert_eq(occurrences(off, "max.NaN.f32"), 0, "a block of fewer than K keeps ex2.approx");
  arena_free(a);
}

Test(exppoly, emitted_code_is_exp2_to_five_ulp) {
  Arena *a = arena_new();
  char *ptx = source_ptx_with(a, "e2.tile", src, NULL, ARCH_SM90A, "TILEC_EXP_POLY", "4");
  const char *at = strstr(ptx, "max.NaN.f32");
  cr_assert(at);
  char in[16];
  cr_assert_eq(sscanf(at, "max.NaN.f32 %*[^,], %15[^,]", in), 1);
  const char *line = at;
  while (line > ptx && line[-1] != '\n')
    line--;
  double worst = 0;
  for (int i = -1260000; i <= 1270000; i += 7) { /* x in [-126, 127] */
    float x = (float)i * 1e-4f;
    double want = exp2((double)x), got = run_poly(line, in, x);
    double rel = fabs(got - want) / want;
    if (rel > worst)
      worst = rel;
  }
  cr_assert_leq(worst, 5e-7, "max relative error %g", worst);
  for (int j = -126; j <= 127; j++)
    cr_assert_eq(run_poly(line, in, (float)j), ldexpf(1.0f, j), "2^%d exactly", j);
  cr_assert_eq(run_poly(line, in, -INFINITY), 0.0f);
  cr_assert_eq(run_poly(line, in, -127.0f), 0.0f, "below 2^-126.5: 0, as ex2.approx.ftz flushes");
  cr_assert_eq(run_poly(line, in, INFINITY), INFINITY);
  cr_assert_eq(run_poly(line, in, 200.0f), INFINITY);
  cr_assert(isnan(run_poly(line, in, NAN)));
  arena_free(a);
}
