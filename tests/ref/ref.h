/* ref.h — plain C float64 references for every kernel in dsl/examples (one file each).
 *
 * Inputs are the values the kernel sees (f16/bf16 inputs already rounded, passed as double);
 * outputs are float64, never rounded to the output type: the tests compare the kernel's output
 * against them with a relative-error bound (docs/tir.md, "Testing against references").
 * Tensors are dense row-major. */
#ifndef TILEC_REF_H
#define TILEC_REF_H

#include <stdint.h>

/* z = x + y; x, y, z: [n] */
void ref_vadd(int64_t n, const double *x, const double *y, double *z);

/* y[m, :] = softmax(x[m, :]); x, y: [M, N] (also the reference of softmax_online) */
void ref_softmax(int64_t M, int64_t N, const double *x, double *y);

/* y = x / sqrt(mean(x^2) + eps) * w; x, y: [M, N]; w: [N] */
void ref_rmsnorm(int64_t M, int64_t N, const double *x, const double *w, double eps, double *y);

/* The gradients of y = rmsnorm(x) * w given dy: dx: [M, N]; dw: [N] (summed over the rows) */
void ref_rmsnorm_backward(int64_t M, int64_t N, const double *x, const double *w, const double *dy,
                          double eps, double *dx, double *dw);

/* h = x + r (the new residual, written to h); y = rmsnorm(h) * w */
void ref_add_rmsnorm(int64_t M, int64_t N, const double *x, const double *r, const double *w,
                     double eps, double *h, double *y);

/* y = (x - mean) / sqrt(var + eps) * w + b (biased variance); x, y: [M, N]; w, b: [N] */
void ref_layernorm(int64_t M, int64_t N, const double *x, const double *w, const double *b,
                   double eps, double *y);

/* c = act(a @ b + bias); a: [M, K], b: [K, N], bias: [N], c: [M, N];
 * act 0 none, 1 relu, 2 gelu (tanh approximation, as in the example) */
void ref_gemm(int64_t M, int64_t N, int64_t K, const double *a, const double *b, const double *bias,
              int act, double *c);

/* o = softmax(q k^T * scale [causal: key j <= query i]) v per (b, h); q, k, v, o: [B, H, N, D] */
void ref_attention(int64_t B, int64_t H, int64_t N, int64_t D, const double *q, const double *k,
                   const double *v, double scale, int causal, double *o);

/* loss[m] = logsumexp(x[m, :]) - x[m, label[m]], 0 where label[m] is outside [0, N);
 * x: [M, N]; label, loss: [M] (labels are integers, passed as double) */
void ref_cross_entropy(int64_t M, int64_t N, const double *x, const double *label, double *loss);

#endif
