/* test_atomic.c — atomic_add / atomic_max: interpreter semantics (every in-range element
 * combined once, in block order, out-of-range ones dropped; exact for i32), TIR text, and the
 * GPU lowering (red/atom in the PTX, ptxas clean for sm_80 and sm_90a). */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "tilec.h"
#include "test_support.h"

/* Column sums / maxima of X: each block folds ROWS rows of a BLOCK-column strip into row 0 of
 * Y. The grid has more columns than N (ragged) and Y a guard row after row 0. */
static const char *src =
    "kernel colsum<T: type = f32, ROWS = 4, BLOCK = 128, WARPS = 4>(X: T[M, N], Y: out T[K, N])\n"
    "  grid (cdiv(M, ROWS), cdiv(N, BLOCK)) threads (WARPS * 32)\n"
    "{\n"
    "  let r0 = block.x * ROWS;\n"
    "  let c0 = block.y * BLOCK;\n"
    "  atomic_add(Y[0 : +1, c0 : +BLOCK], sum(X[r0 : +ROWS, c0 : +BLOCK], 0, keep));\n"
    "}\n";

static const char *src_max =
    "kernel colmax<T: type = f32, ROWS = 4, BLOCK = 128, WARPS = 4>(X: T[M, N], Y: out T[K, N])\n"
    "  grid (cdiv(M, ROWS), cdiv(N, BLOCK)) threads (WARPS * 32)\n"
    "{\n"
    "  let r0 = block.x * ROWS;\n"
    "  let c0 = block.y * BLOCK;\n"
    "  atomic_max(Y[0 : +1, c0 : +BLOCK], max(X[r0 : +ROWS, c0 : +BLOCK], 0, keep));\n"
    "}\n";

enum { M = 10, N = 200, K = 2 };

static InterpTensor tensor(void *data, int64_t rows, int64_t cols) {
  return (InterpTensor){data, {rows, cols}, {cols, 1}};
}

/* Runs the kernel of text (T = type) on X and Y in the interpreter. */
static void run(const char *text, const char *type, void *x, void *y) {
  Arena *a = arena_new();
  Diag d;
  const char *defs[] = {arena_printf(a, "T=%s", type), NULL};
  TirFunc *f = source_tir(a, "atomic.tile", text, defs, ARCH_SM90A, &d);
  InterpArg args[2] = {{.tensor = tensor(x, M, N)}, {.tensor = tensor(y, K, N)}};
  int64_t dims[3] = {M, N, K}; /* order of first appearance: M, N, K */
  int64_t grid[3] = {(M + 3) / 4, (N + 127) / 128, 1};
  char err[256];
  cr_assert(interp_run(f, args, dims, grid, err, sizeof err), "%s", err);
  arena_free(a);
}

Test(atomic, i32_add_is_exact_and_masked) {
  static int32_t x[M * N], y[K * N];
  for (int i = 0; i < M * N; i++)
    x[i] = (i * 7919) % 2001 - 1000 + (i % 3 == 0 ? 2000000000 : 0); /* sums wrap */
  for (int j = 0; j < K * N; j++)
    y[j] = j < N ? j : -7; /* row 0 starts non-zero; row 1 is a guard */
  run(src, "i32", x, y);
  for (int j = 0; j < N; j++) {
    uint32_t want = (uint32_t)j;
    for (int i = 0; i < M; i++)
      want += (uint32_t)x[i * N + j];
    cr_assert_eq(y[j], (int32_t)want, "column %d", j);
    cr_assert_eq(y[N + j], -7, "guard row written at column %d", j);
  }
}

Test(atomic, f32_add_and_max_in_block_order) {
  static float x[M * N], y[K * N], z[K * N];
  for (int i = 0; i < M * N; i++)
    x[i] = (float)((i * 37) % 101) * 0.25f - 12.0f;
  for (int j = 0; j < K * N; j++)
    y[j] = z[j] = j < N ? 1.5f : NAN;
  run(src, "f32", x, y);
  run(src_max, "f32", x, z);
  for (int j = 0; j < N; j++) {
    /* Block bx adds the f32 sum of its rows (index order), blocks in order. */
    float want = 1.5f, mx = 1.5f;
    for (int b = 0; b < M; b += 4) {
      float s = x[b * N + j];
      for (int i = b + 1; i < b + 4 && i < M; i++)
        s += x[i * N + j];
      want += s;
    }
    for (int i = 0; i < M; i++)
      mx = fmaxf(mx, x[i * N + j]);
    cr_assert_eq(y[j], want, "sum column %d: %g vs %g", j, y[j], want);
    cr_assert_eq(z[j], mx, "max column %d", j);
    cr_assert(isnan(y[N + j]) && isnan(z[N + j]), "guard row written at column %d", j);
  }
}

Test(atomic, f16_add_rounds_each_update) {
  static uint16_t x[M * N], y[K * N];
  for (int i = 0; i < M * N; i++)
    x[i] = f32_to_f16_bits(1.0f / 3.0f);
  for (int j = 0; j < K * N; j++)
    y[j] = f32_to_f16_bits(j < N ? 1000.0f : -1.0f);
  run(src, "f16", x, y);
  /* Each block's sum (f32, rounded to f16 by the reduction) is added to the f16 total and
   * rounded again: 1000 + 4/3 rounds to 1001.0 in f16 (ulp 0.5), and so on. */
  float s4 = f16_bits_to_f32(f32_to_f16_bits(4.0f / 3.0f)), s2 = f16_bits_to_f32(f32_to_f16_bits(2.0f / 3.0f));
  float want = 1000.0f;
  want = f16_bits_to_f32(f32_to_f16_bits(want + s4));
  want = f16_bits_to_f32(f32_to_f16_bits(want + s4));
  want = f16_bits_to_f32(f32_to_f16_bits(want + s2));
  for (int j = 0; j < N; j++) {
    cr_assert_eq(f16_bits_to_f32(y[j]), want, "column %d", j);
    cr_assert_eq(f16_bits_to_f32(y[N + j]), -1.0f);
  }
}


Test(atomic, tir_text) {
  Arena *a = arena_new();
  Diag d;
  TirFunc *f = source_tir(a, "atomic.tile", src, NULL, ARCH_SM90A, &d);
  char *buf = NULL;
  size_t len = 0;
  FILE *out = open_memstream(&buf, &len);
  tir_print(out, f);
  fclose(out);
  cr_assert(strstr(buf, "  atomic_add Y[%"), "%s", buf);
  cr_assert(strstr(buf, " : +128], %"), "%s", buf);
  free(buf);
  /* The verifier: only out tensors, and atomic_max not on bool. */
  for (int i = 0; i < f->ninsts; i++)
    if (f->insts[i].op == TIR_ATOMIC_ADD) {
      TirArg *y = &f->args[f->insts[i].arg_index];
      cr_assert_str_eq(tir_verify_message(a, f, &d), "");
      y->is_out = false;
      cr_assert(strstr(tir_verify_message(a, f, &d), "atomic_add to Y, which is not an out tensor"));
      y->is_out = true;
      f->insts[i].op = TIR_ATOMIC_MAX;
      y->elem = TY_BOOL;
      cr_assert(strstr(tir_verify_message(a, f, &d), "atomic_max on bool elements"));
    }
  arena_free(a);
}

/* PTX for each element type and arch: the update instruction is there and ptxas takes it. */
static void check_ptx(const char *text, const char *type, GpuArch arch, const char *want) {
  Arena *a = arena_new();
  Diag d;
  const char *defs[] = {arena_printf(a, "T=%s", type), NULL};
  TirFunc *f = source_tir(a, "atomic.tile", text, defs, arch, &d);
  NvptxOptions o = {.arch = arch, .opt_level = 3};
  char *ptx = nvptx_compile(f, &o, &d, NULL);
  cr_assert(ptx);
  cr_assert(strstr(ptx, want), "%s %s: no '%s' in\n%s", type, arch_name(arch), want, ptx);
  ptxas_assert_clean(ptx, arch);
  arena_free(a);
}

Test(atomic, ptx_add_every_type) {
  for (int k = 0; k < 2; k++) {
    GpuArch arch = k ? ARCH_SM90A : ARCH_SM80;
    check_ptx(src, "f32", arch, ".global.add.f32");
    check_ptx(src, "i32", arch, ".global.add.u32");
    check_ptx(src, "f16", arch, ".global.add.noftz.f16");
    /* bf16 adds in place from sm_90; before, a compare-and-swap loop. */
    check_ptx(src, "bf16", arch, k ? ".global.add.noftz.bf16" : ".global.cas.b32");
  }
}

/* sm_90a: a thread's four contiguous f32 columns go as one red.global.add.v4.f32 where they are
 * in bounds and aligned (a ragged or misaligned run element by element); sm_80 has no vector red. */
Test(atomic, ptx_f32_add_vectors_on_sm90) {
  Arena *a = arena_new();
  char *text = arena_printf(a, "%s", src);
  char *at = strstr(text, "BLOCK = 128");
  memcpy(at, "BLOCK = 512", 11);
  check_ptx(text, "f32", ARCH_SM90A, "red.relaxed.gpu.global.add.v4.f32");
  check_ptx(text, "f32", ARCH_SM90A, "atom.global.add.f32"); /* the ragged path */
  const char *defs[] = {"T=f32", NULL};
  char *sm80 = source_ptx(a, "atomic.tile", text, defs, ARCH_SM80);
  char *off = source_ptx_with(a, "atomic.tile", text, defs, ARCH_SM90A, "TILEC_VEC_ATOMICS", "0");
  cr_assert(!strstr(sm80, ".v4.f32"), "%s", sm80);
  cr_assert(!strstr(off, ".v4.f32"), "%s", off);
  arena_free(a);
}

Test(atomic, ptx_max) {
  for (int k = 0; k < 2; k++) {
    GpuArch arch = k ? ARCH_SM90A : ARCH_SM80;
    check_ptx(src_max, "i32", arch, ".global.max.s32");
    check_ptx(src_max, "f32", arch, ".global.cas.b32");
  }
}
