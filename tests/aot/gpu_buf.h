/* gpu_buf.h — host and device copies of a test tensor for the GPU programs in tests/aot/
 * (tuned_gpu.c, bundle_gpu.c, ws_gpu.c, cluster_gpu.c) and the relative error they judge outputs by. elem_load and
 * elem_store come from libtilec.a. */
#ifndef TILEC_TESTS_GPU_BUF_H
#define TILEC_TESTS_GPU_BUF_H

#include <cuda.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "cu_check.h"
#include "tilec.h"

/* A host tensor of n values rounded to t, and its device copy. */
typedef struct Buf {
  double *v;
  void *bits;
  CUdeviceptr d;
  int64_t n;
} Buf;

static double uniform(void) { return (double)rand() / RAND_MAX * 2.0 - 1.0; }

/* Values scale * uniform() (0: zeros). */
static int buf_new(Buf *b, int64_t n, ElemType t, double scale) {
  size_t bytes = (size_t)n * (size_t)elem_bytes(t);
  b->n = n;
  b->v = malloc((size_t)n * sizeof(double));
  b->bits = malloc(bytes);
  for (int64_t i = 0; i < n; i++) {
    elem_store(b->bits, i, t, scale * uniform());
    b->v[i] = elem_load(b->bits, i, t);
  }
  CU(cuMemAlloc(&b->d, bytes));
  CU(cuMemcpyHtoD(b->d, b->bits, bytes));
  return 0;
}

static int buf_fetch(Buf *b, ElemType t) {
  CU(cuMemcpyDtoH(b->bits, b->d, (size_t)b->n * (size_t)elem_bytes(t)));
  for (int64_t i = 0; i < b->n; i++)
    b->v[i] = elem_load(b->bits, i, t);
  return 0;
}

static void buf_free(Buf *b) {
  cuMemFree(b->d);
  free(b->v);
  free(b->bits);
}

static inline void buf_free_all(Buf **all, size_t n) {
  for (size_t i = 0; i < n; i++)
    buf_free(all[i]);
}

/* ||out - ref|| / ||ref||, or INFINITY when out has a non-finite value. */
static double rel_err(const double *out, const double *ref, int64_t n) {
  double num = 0, den = 0;
  for (int64_t i = 0; i < n; i++) {
    if (!isfinite(out[i]))
      return INFINITY;
    num += (out[i] - ref[i]) * (out[i] - ref[i]);
    den += ref[i] * ref[i];
  }
  return sqrt(num / (den > 0 ? den : 1));
}

#endif
