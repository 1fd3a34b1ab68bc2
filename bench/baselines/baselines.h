/* baselines.h — C API of build/bench/libbaselines.so, the hand-written CUDA baselines.
 *
 * Every function takes device pointers (contiguous, row-major), shapes and a cudaStream_t (passed
 * as void * so C callers and ctypes need no CUDA headers), enqueues the work and returns 0, or a
 * non-zero code with the reason in bl_last_error(): BL_UNSUPPORTED for shapes the kernel does not
 * handle (it launches nothing), or the cudaError_t of a failed launch.
 *
 * dtype: BL_F16 or BL_BF16 (vadd is f32 only). */
#ifndef BENCH_BASELINES_H
#define BENCH_BASELINES_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum { BL_F16 = 0, BL_BF16 = 1 };
enum { BL_UNSUPPORTED = -1 };

const char *bl_last_error(void);

/* Z = X + Y, f32, n elements (any n; 16-byte vectors when the pointers allow). */
int bl_vadd_f32(const float *x, const float *y, float *z, int64_t n, void *stream);

/* Row ops over X[M, N] (N % 8 == 0, N <= 65536). W, Bias: [N]. eps as in the tile examples. */
int bl_softmax(int dtype, const void *x, void *y, int64_t m, int64_t n, void *stream);
int bl_rmsnorm(int dtype, const void *x, const void *w, void *y, int64_t m, int64_t n, float eps,
               void *stream);
int bl_layernorm(int dtype, const void *x, const void *w, const void *bias, void *y, int64_t m,
                 int64_t n, float eps, void *stream);
/* H = X + R (f32), R <- H (rounded), Y = H * rsqrt(mean(H^2) + eps) * W. */
int bl_add_rmsnorm(int dtype, const void *x, void *r, const void *w, void *y, int64_t m, int64_t n,
                   float eps, void *stream);

/* C[M, N] = act(A[M, K] @ B[K, N] + bias[N]), f32 accumulate; act 0 none, 1 relu.
 * Needs K % 64 == 0 and N % 8 == 0; M is free. bias may be NULL. */
int bl_gemm(int dtype, const void *a, const void *b, const void *bias, void *c, int64_t m,
            int64_t n, int64_t k, int act, void *stream);

/* FlashAttention-2-style forward. Q, K, V, O: [B, H, N, D], D in {64, 128}; any N.
 * O = softmax(Q K^T * scale [causal: col <= row]) V. */
int bl_attention(int dtype, const void *q, const void *k, const void *v, void *o, int64_t batch,
                 int64_t heads, int64_t n, int64_t d, float scale, int causal, void *stream);

#ifdef __cplusplus
}
#endif
#endif
