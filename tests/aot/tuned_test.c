/* tuned_test.c — the tuned row-op bundle (`make tuned`, bench/tuned.txt) picks a specialization
 * for every row length up to the largest BLOCK, in f16 and bf16: the pinned winner where the
 * benchmark measured one (its own check accepts the shape), a runtime-N fallback elsewhere, and
 * NO_MATCH past the largest BLOCK. Checks only, no GPU. Built and run by tests/check_tuned.sh. */
#include "add_rmsnorm.h"
#include "layernorm.h"
#include "rmsnorm.h"
#include "softmax.h"
#include "add_rmsnorm_f16_n4096.h"
#include "layernorm_bf16_n16384.h"
#include "rmsnorm_f16_n1024.h"
#include "softmax_bf16_n4096.h"

#include <stdio.h>
#include <string.h>

static int failures;

static void expect(const char *what, long n, tilec_result got, tilec_result want, const char *msg) {
  if (got != want) {
    printf("FAIL %s N=%ld: got %s, want %s (%s)\n", what, n, tilec_result_name(got),
           tilec_result_name(want), msg);
    failures++;
  }
}

/* Fake device addresses, never dereferenced (checks only): one per tensor, far apart, since an
 * output may not overlap another tensor (in place, the very same view as an input, is fine). */
#define PTR(i) (0x10000000ULL * (unsigned long long)(i))

/* Every linked entry point at row length n, dtype dt. */
static void all_kernels(long n, tilec_dtype dt, tilec_result want) {
  int64_t mn[2] = {64, n}, vn[1] = {n};
  tilec_tensor x = tilec_tensor_contiguous(PTR(1), dt, 2, mn);
  tilec_tensor r = tilec_tensor_contiguous(PTR(2), dt, 2, mn);
  tilec_tensor w = tilec_tensor_contiguous(PTR(3), dt, 1, vn);
  expect("softmax", n, softmax_check(&x, &x), want, softmax_error()); /* in place */
  expect("rmsnorm", n, rmsnorm_check(&x, &w, &x, 1e-5f), want, rmsnorm_error());
  expect("layernorm", n, layernorm_check(&x, &w, &w, &x, 1e-5f), want, layernorm_error());
  expect("add_rmsnorm", n, add_rmsnorm_check(&x, &x, &w, &r, 1e-5f), want, add_rmsnorm_error());
}

int main(void) {
  static const long fits[] = {1, 17, 1000, 1024, 1025, 3000, 4096, 8191, 16384};
  for (size_t i = 0; i < sizeof fits / sizeof fits[0]; i++) {
    all_kernels(fits[i], TILEC_F16, TILEC_OK);
    all_kernels(fits[i], TILEC_BF16, TILEC_OK);
  }
  all_kernels(16385, TILEC_F16, TILEC_ERROR_NO_MATCH);
  all_kernels(20000, TILEC_BF16, TILEC_ERROR_NO_MATCH);
  all_kernels(1024, TILEC_F32, TILEC_ERROR_INVALID_ARGUMENT);
  if (!strstr(softmax_error(), "softmax_f16_n1024"))
    printf("FAIL softmax f32: the message does not list the candidates: %s\n", softmax_error()), failures++;

  /* the pinned winners take exactly their row length */
  int64_t m1024[2] = {64, 1024}, m1000[2] = {64, 1000}, m4096[2] = {64, 4096}, m16k[2] = {8, 16384};
  int64_t v1024[1] = {1024}, v1000[1] = {1000}, v4096[1] = {4096}, v16k[1] = {16384};
  tilec_tensor a = tilec_tensor_contiguous(PTR(1), TILEC_F16, 2, m1024), wa = tilec_tensor_contiguous(PTR(3), TILEC_F16, 1, v1024);
  tilec_tensor b = tilec_tensor_contiguous(PTR(1), TILEC_F16, 2, m1000), wb = tilec_tensor_contiguous(PTR(3), TILEC_F16, 1, v1000);
  expect("rmsnorm_f16_n1024", 1024, rmsnorm_f16_n1024_check(&a, &wa, &a, 1e-5f), TILEC_OK, rmsnorm_f16_n1024_error());
  expect("rmsnorm_f16_n1024", 1000, rmsnorm_f16_n1024_check(&b, &wb, &b, 1e-5f), TILEC_ERROR_SHAPE,
         rmsnorm_f16_n1024_error());
  tilec_tensor c = tilec_tensor_contiguous(PTR(1), TILEC_F16, 2, m4096), wc = tilec_tensor_contiguous(PTR(3), TILEC_F16, 1, v4096);
  tilec_tensor rc = tilec_tensor_contiguous(PTR(2), TILEC_F16, 2, m4096);
  expect("add_rmsnorm_f16_n4096", 4096, add_rmsnorm_f16_n4096_check(&c, &c, &wc, &rc, 1e-5f), TILEC_OK,
         add_rmsnorm_f16_n4096_error());
  tilec_tensor cb = tilec_tensor_contiguous(PTR(1), TILEC_BF16, 2, m4096);
  expect("softmax_bf16_n4096", 4096, softmax_bf16_n4096_check(&cb, &cb), TILEC_OK, softmax_bf16_n4096_error());
  expect("softmax_bf16_n4096 (f16)", 4096, softmax_bf16_n4096_check(&c, &c), TILEC_ERROR_INVALID_ARGUMENT,
         softmax_bf16_n4096_error());
  tilec_tensor d = tilec_tensor_contiguous(PTR(1), TILEC_BF16, 2, m16k), wd = tilec_tensor_contiguous(PTR(3), TILEC_BF16, 1, v16k);
  expect("layernorm_bf16_n16384", 16384, layernorm_bf16_n16384_check(&d, &wd, &wd, &d, 1e-5f), TILEC_OK,
         layernorm_bf16_n16384_error());

  printf("tuned_test: %s (%d failures)\n", failures ? "FAILED" : "passed", failures);
  return failures != 0;
}
