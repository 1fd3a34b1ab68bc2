/* ref.h — plain C float64 references for every kernel in dsl/examples (one file each).
 *
 * Inputs are the values the kernel sees (f16/bf16 inputs already rounded, passed as double);
 * outputs are float64, never rounded to the output type: the tests compare the kernel's output
 * against them with a relative-error bound (docs/tir.md, "Testing against references").
 * Tensors are dense row-major. */
#ifndef TILEC_REF_H
#define TILEC_REF_H

#include <stdbool.h>
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
/* the mean and 1 / sqrt(var + eps) of one row xr[0 .. N) (biased variance) */
void ref_layernorm_stats(const double *xr, int64_t N, double eps, double *mean, double *rstd);

/* c = act(a @ b + bias); a: [M, K], b: [K, N], bias: [N], c: [M, N];
 * act 0 none, 1 relu, 2 gelu (tanh approximation, as in the example) */
void ref_gemm(int64_t M, int64_t N, int64_t K, const double *a, const double *b, const double *bias,
              int act, double *c);
/* bench/user/wgrad.tile: dW[i, o] = sum over m of X[m, i] dY[m, o] (X: [M, I], dY: [M, O]). */
void ref_gemm_tn(int64_t M, int64_t I, int64_t O, const double *x, const double *dy, double *dw);

/* o = softmax(q k^T * scale [causal: key j <= query i]) v per (b, h); q, k, v, o: [B, H, N, D] */
/* attention_gqa: query head h reads K/V head h / (H / HKV); with window > 0, query i sees keys
 * i - window < j (and j <= i when causal). */
void ref_attention_gqa(int64_t B, int64_t H, int64_t HKV, int64_t N, int64_t D, const double *q,
                       const double *k, const double *v, double scale, int causal, int64_t window,
                       double *o);
void ref_attention(int64_t B, int64_t H, int64_t N, int64_t D, const double *q, const double *k,
                   const double *v, double scale, int causal, double *o);

/* loss[m] = logsumexp(x[m, :]) - x[m, label[m]], 0 where label[m] is outside [0, N);
 * x: [M, N]; label, loss: [M] (labels are integers, passed as double) */
void ref_cross_entropy(int64_t M, int64_t N, const double *x, const double *label, double *loss);

/* layernorm_backward.tile: the forward that saves the row statistics (layernorm_train: y as
 * ref_layernorm, mean, rstd = 1 / sqrt(var + eps): [M]) and the gradients given dy:
 * dx: [M, N]; dw, db: [N] (summed over the rows) */
void ref_layernorm_train(int64_t M, int64_t N, const double *x, const double *w, const double *b,
                         double eps, double *y, double *mean, double *rstd);
void ref_layernorm_backward(int64_t M, int64_t N, const double *x, const double *w, const double *mean,
                            const double *rstd, const double *dy, double *dx, double *dw, double *db);

/* The loss of ref_cross_entropy and dx[m, :] = (softmax(x[m, :]) - onehot(label[m])) * dloss[m],
 * 0 on ignored rows; dloss, loss: [M]; dx: [M, N] */
void ref_cross_entropy_backward(int64_t M, int64_t N, const double *x, const double *label,
                                const double *dloss, double *loss, double *dx);

/* attention_backward.tile (tensors [B, H, N, D], row statistics [B, H, N]):
 * attention_lse: o as ref_attention and lse = the logsumexp of each row of the scaled, masked scores;
 * attention_backward_prep: delta = rowsum(dout * o);
 * attention_backward: with p = exp(q k^T * scale - lse) (masked: 0), ds = p * (dout v^T - delta):
 * dq = ds k * scale, dk = ds^T q * scale, dv = p^T dout */
void ref_attention_lse(int64_t B, int64_t H, int64_t N, int64_t D, const double *q, const double *k,
                       const double *v, double scale, int causal, double *o, double *lse);
void ref_attention_backward_prep(int64_t B, int64_t H, int64_t N, int64_t D, const double *o,
                                 const double *dout, double *delta);
void ref_attention_backward(int64_t B, int64_t H, int64_t N, int64_t D, const double *q, const double *k,
                            const double *v, const double *dout, const double *lse, const double *delta,
                            double scale, int causal, double *dq, double *dk, double *dv);

#endif
