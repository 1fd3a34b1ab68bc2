/* demo_main.c — the program of docs/aot.md: two kernels compiled ahead of time by
 * `tilec --emit=c` (vadd and softmax), launched from plain C with the CUDA driver API for memory.
 *
 *   tilec dsl/examples/vadd.tile    --emit=c --arch=sm_80 --arch=sm_90a -o aot/vadd
 *   tilec dsl/examples/softmax.tile --emit=c --arch=sm_90a -o aot/softmax
 *   gcc -std=c99 -O2 -Iaot -I/usr/local/cuda/include tests/aot/demo_main.c aot/vadd.c \
 *       aot/softmax.c -L/usr/local/cuda/lib64/stubs -lcuda -ldl -lm -o demo && ./demo */
#include <cuda.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "softmax.h"
#include "vadd.h"

#include "cu_check.h"

/* IEEE half <-> float for the host side (round to nearest even; no subnormal outputs). */
static uint16_t to_half(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000, exp = (x >> 23) & 0xff, man = x & 0x7fffff;
  if (exp == 0xff)
    return (uint16_t)(sign | 0x7c00 | (man ? 0x200 : 0));
  int e = (int)exp - 127 + 15;
  if (e >= 31)
    return (uint16_t)(sign | 0x7c00);
  if (e <= 0)
    return (uint16_t)sign;
  uint32_t h = sign | (uint32_t)e << 10 | man >> 13, rest = man & 0x1fff;
  if (rest > 0x1000 || (rest == 0x1000 && (h & 1)))
    h++;
  return (uint16_t)h;
}

static float from_half(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff, x;
  if (exp == 0)
    return (sign ? -1.0f : 1.0f) * ldexpf((float)man, -24);
  x = sign | (exp == 31 ? 0x7f800000 | man << 13 : (exp - 15 + 127) << 23 | man << 13);
  float f;
  memcpy(&f, &x, 4);
  return f;
}

int main(void) {
  if (cu_primary_context()) /* device 0's primary context, current: what the generated code uses */
    return 1;
  TK(vadd_load(), vadd_error);       /* picks the image for this GPU, JIT-compiles PTX if needed */
  TK(softmax_load(), softmax_error);

  /* vadd: z = x + y on a ragged size. */
  enum { N = 1000003 };
  float *x = (float *)malloc(N * 4), *y = (float *)malloc(N * 4), *z = (float *)malloc(N * 4);
  for (int i = 0; i < N; i++)
    x[i] = (float)i, y[i] = 0.5f * (float)(i % 100);
  CUdeviceptr dx, dy, dz;
  CU(cuMemAlloc(&dx, N * 4));
  CU(cuMemAlloc(&dy, N * 4));
  CU(cuMemAlloc(&dz, N * 4));
  CU(cuMemcpyHtoD(dx, x, N * 4));
  CU(cuMemcpyHtoD(dy, y, N * 4));
  int64_t n = N;
  tilec_tensor tx = tilec_tensor_contiguous(dx, TILEC_F32, 1, &n);
  tilec_tensor ty = tilec_tensor_contiguous(dy, TILEC_F32, 1, &n);
  tilec_tensor tz = tilec_tensor_contiguous(dz, TILEC_F32, 1, &n);
  TK(vadd_launch(NULL, &tx, &ty, &tz), vadd_error);
  CU(cuCtxSynchronize());
  CU(cuMemcpyDtoH(z, dz, N * 4));
  int bad = 0;
  for (int i = 0; i < N; i++)
    bad += z[i] != x[i] + y[i];
  printf("vadd:    %d elements, %d wrong\n", N, bad);

  /* softmax over 4096 rows of 1000 f16 values. */
  enum { ROWS = 4096, COLS = 1000 };
  uint16_t *h = (uint16_t *)malloc(ROWS * COLS * 2), *o = (uint16_t *)malloc(ROWS * COLS * 2);
  for (int i = 0; i < ROWS * COLS; i++)
    h[i] = to_half((float)(((long)i * 7919) % 1000) / 250.0f - 2.0f);
  CUdeviceptr dh, dout;
  CU(cuMemAlloc(&dh, ROWS * COLS * 2));
  CU(cuMemAlloc(&dout, ROWS * COLS * 2));
  CU(cuMemcpyHtoD(dh, h, ROWS * COLS * 2));
  int64_t shape[2] = {ROWS, COLS};
  tilec_tensor th = tilec_tensor_contiguous(dh, TILEC_F16, 2, shape);
  tilec_tensor to = tilec_tensor_contiguous(dout, TILEC_F16, 2, shape);
  TK(softmax_launch(NULL, &th, &to), softmax_error);
  CU(cuCtxSynchronize());
  CU(cuMemcpyDtoH(o, dout, ROWS * COLS * 2));
  double worst = 0;
  for (int r = 0; r < ROWS; r++) {
    double mx = -INFINITY, sum = 0;
    for (int c = 0; c < COLS; c++)
      mx = fmax(mx, from_half(h[r * COLS + c]));
    for (int c = 0; c < COLS; c++)
      sum += exp(from_half(h[r * COLS + c]) - mx);
    for (int c = 0; c < COLS; c++) {
      double ref = exp(from_half(h[r * COLS + c]) - mx) / sum;
      worst = fmax(worst, fabs(from_half(o[r * COLS + c]) - ref) / ref);
    }
  }
  printf("softmax: %d x %d, max relative error %.2e\n", ROWS, COLS, worst);

  /* A contract violation is an error code and a message, never a crash. */
  shape[1] = 3000;
  th = tilec_tensor_contiguous(dh, TILEC_F16, 2, shape);
  tilec_result r = softmax_launch(NULL, &th, &th);
  printf("softmax with 3000 columns: %s: %s\n", tilec_result_name(r), softmax_error());

  vadd_unload();
  softmax_unload();
  cuMemFree(dx), cuMemFree(dy), cuMemFree(dz), cuMemFree(dh), cuMemFree(dout);
  free(x), free(y), free(z), free(h), free(o);
  return bad == 0 && worst < 1e-2 && r == TILEC_ERROR_REQUIREMENT ? 0 : 1;
}
