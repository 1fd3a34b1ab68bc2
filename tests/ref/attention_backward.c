/* attention_backward.c — float64 references of the kernels of dsl/examples/attention_backward.tile.
 * P is rebuilt from the given row statistics (lse), as the kernel does, so the backward can be
 * checked on its own with any lse and delta (the example runner draws them at random); with the
 * lse of ref_attention_lse and the delta of ref_attention_backward_prep it is the exact gradient. */
#include "ref.h"

#include <math.h>
#include <stdlib.h>

void ref_attention_lse(int64_t B, int64_t H, int64_t N, int64_t D, const double *q, const double *k,
                       const double *v, double scale, int causal, double *o, double *lse) {
  ref_attention(B, H, N, D, q, k, v, scale, causal, o);
  for (int64_t bh = 0; bh < B * H; bh++) {
    const double *Q = q + bh * N * D, *K = k + bh * N * D;
    for (int64_t i = 0; i < N; i++) {
      int64_t nkeys = causal ? i + 1 : N;
      double mx = -INFINITY, sum = 0;
      for (int pass = 0; pass < 2; pass++)
        for (int64_t j = 0; j < nkeys; j++) {
          double dot = 0;
          for (int64_t d = 0; d < D; d++)
            dot += Q[i * D + d] * K[j * D + d];
          if (pass == 0)
            mx = fmax(mx, dot * scale);
          else
            sum += exp(dot * scale - mx);
        }
      lse[bh * N + i] = mx + log(sum);
    }
  }
}

void ref_attention_backward_prep(int64_t B, int64_t H, int64_t N, int64_t D, const double *o,
                                 const double *dout, double *delta) {
  for (int64_t r = 0; r < B * H * N; r++) {
    double s = 0;
    for (int64_t d = 0; d < D; d++)
      s += o[r * D + d] * dout[r * D + d];
    delta[r] = s;
  }
}

void ref_attention_backward(int64_t B, int64_t H, int64_t N, int64_t D, const double *q, const double *k,
                            const double *v, const double *dout, const double *lse, const double *delta,
                            double scale, int causal, double *dq, double *dk, double *dv) {
  for (int64_t e = 0; e < B * H * N * D; e++)
    dq[e] = dk[e] = dv[e] = 0;
  for (int64_t bh = 0; bh < B * H; bh++) {
    const double *Q = q + bh * N * D, *K = k + bh * N * D, *V = v + bh * N * D, *G = dout + bh * N * D;
    double *dQ = dq + bh * N * D, *dK = dk + bh * N * D, *dV = dv + bh * N * D;
    for (int64_t i = 0; i < N; i++) {
      int64_t nkeys = causal ? i + 1 : N;
      for (int64_t j = 0; j < nkeys; j++) {
        double s = 0, dp = 0;
        for (int64_t d = 0; d < D; d++) {
          s += Q[i * D + d] * K[j * D + d];
          dp += G[i * D + d] * V[j * D + d];
        }
        double p = exp(s * scale - lse[bh * N + i]);
        double ds = p * (dp - delta[bh * N + i]);
        for (int64_t d = 0; d < D; d++) {
          dV[j * D + d] += p * G[i * D + d];
          dK[j * D + d] += ds * Q[i * D + d] * scale;
          dQ[i * D + d] += ds * K[j * D + d] * scale;
        }
      }
    }
  }
}
