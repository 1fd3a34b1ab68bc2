/* test_dims.c — dimension expressions in tensor types (X: f32[M, D / 2]): sema's hidden dims and
 * requirements, constants as pinned dims, -D for a dim used only in expressions, and the launch
 * through the runtime's CPU backend (tilert_bind): a fitting shape runs, a wrong one is
 * TILERT_ERROR_REQUIREMENT naming the axis and the expression. */
#include <criterion/criterion.h>
#include <string.h>

#include "tilec.h"
#include "tilert.h"
#include "test_support.h"

static const char *src =
    "kernel halves<BLOCK = 64>(X: f32[M, D], Y: out f32[M, D / 2], Z: out f32[2 * M],\n"
    "                           W: out f32[BLOCK / 16], V: out f32[D / 2])\n"
    "  grid (M) threads (32)\n"
    "{\n"
    "  require D <= 2 * BLOCK;\n"
    "  let r = block.x;\n"
    "  let x = X[r, 0 : +(2 * BLOCK)];\n"
    "  Y[r, 0 : +BLOCK] = x[0 : +BLOCK] + x[BLOCK : +BLOCK];\n"
    "  Z[2 * r : +2] = sum(x, 0);\n"
    "  W[0 : +4] = to_f32(index(r, 4));\n"
    "  V[0 : +BLOCK] = x[0 : +BLOCK];\n"
    "}\n";

Test(dims, contract) {
  Arena *a = arena_new();
  Diag d;
  TirFunc *f = source_tir(a, "dims.tile", src, NULL, ARCH_SM90A, &d);
  cr_assert_eq(f->ndims, 5); /* M D Y$1 Z$0 W$0; V shares Y's D / 2 */
  cr_assert_str_eq(f->dims[2].name, "Y$1");
  cr_assert_str_eq(f->dims[2].derive, "D 2 /");
  cr_assert_str_eq(f->dims[3].derive, "2 M *");
  cr_assert(f->dims[4].pinned && f->dims[4].value == 4 && !f->dims[4].derive);
  cr_assert_eq(f->args[4].dims[0], 2);
  cr_assert_eq(f->nrequires, 3); /* two implied, then the kernel's own */
  cr_assert_str_eq(f->requires[0].rpn, "Y$1 D 2 / ==");
  cr_assert_str_eq(f->requires[0].text, "axis 1 of Y == D / 2");
  arena_free(a);
}

Test(dims, pinned_by_define) {
  Arena *a = arena_new();
  Diag d;
  const char *defs[] = {"N=64", NULL};
  TirFunc *f = source_tir(a, "dims.tile",
                          "kernel k(X: f32[N / 2], Y: out f32[N / 2]) grid (1) threads (32) {\n"
                          "  Y[0 : +32] = X[0 : +32];\n}\n",
                          defs, ARCH_SM90A, &d);
  cr_assert(f->dims[0].pinned && f->dims[0].value == 64);
  cr_assert(f->dims[1].pinned && f->dims[1].value == 32); /* constant once N is */
  arena_free(a);
}

static tilert_status launch(tilert_kernel *k, float *x, float *y, float *z, float *w, int64_t m,
                            int64_t dx, int64_t dy) {
  int64_t sx[2] = {m, dx}, sy[2] = {m, dy}, sz = 2 * m, sw = 4, sv = dy;
  tilert_arg args[5] = {tilert_arg_tensor(x, TILERT_F32, 2, sx), tilert_arg_tensor(y, TILERT_F32, 2, sy),
                        tilert_arg_tensor(z, TILERT_F32, 1, &sz), tilert_arg_tensor(w, TILERT_F32, 1, &sw),
                        tilert_arg_tensor(y + 64 * 32, TILERT_F32, 1, &sv)};
  return tilert_launch(k, args, 5, NULL);
}

Test(dims, launch) {
  Arena *a = arena_new();
  Diag d;
  TirFunc *f = source_tir(a, "dims.tile", src, NULL, ARCH_SM90A, &d);
  tilert_device *dev;
  cr_assert_eq(tilert_device_open(TILERT_BACKEND_CPU, 0, &dev).code, TILERT_OK);
  tilert_kernel *k;
  tilert_status st = exec_cpu_kernel(dev, a, f, &k);
  cr_assert_eq(st.code, TILERT_OK, "%s", st.message);
  enum { M = 3, D = 100 };
  static float x[M * D], y[64 * 64], z[2 * M], w[4];
  for (int i = 0; i < M * D; i++)
    x[i] = (float)(i % 37);
  st = launch(k, x, y, z, w, M, D, D / 2);
  cr_assert_eq(st.code, TILERT_OK, "%s", st.message);
  for (int r = 0; r < M; r++)
    for (int j = 0; j < D / 2; j++)
      cr_assert_eq(y[r * (D / 2) + j], x[r * D + j] + (j + 64 < D ? x[r * D + j + 64] : 0.0f));
  st = launch(k, x, y, z, w, M, D, D / 2 + 1);
  cr_assert_eq(st.code, TILERT_ERROR_REQUIREMENT);
  cr_assert(strstr(st.message, "requirement 'axis 1 of Y == D / 2' failed: Y$1 = 51, D = 100"), "%s",
            st.message);
  tilert_kernel_destroy_cpu(k);
  tilert_device_close(dev);
  arena_free(a);
}

Test(dims, ptx) {
  Arena *a = arena_new();
  char *ptx = source_ptx(a, "dims.tile", src, NULL, ARCH_SM80);
  cr_assert(strstr(ptx, "// tilec: require Y$1 D 2 / == | axis 1 of Y == D / 2"));
  tilert_kernel_info info;
  tilert_status st = tilert_parse_kernel_info(ptx, &info);
  cr_assert_eq(st.code, TILERT_OK, "%s", st.message);
  ptxas_assert_clean(ptx, ARCH_SM80);
  arena_free(a);
}
