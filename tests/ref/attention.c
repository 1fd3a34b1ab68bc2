/* attention.c — float64 references of dsl/examples/attention.tile and attention_gqa.tile (plain
 * softmax, no tiling). */
#include "ref.h"

#include <math.h>
#include <stdlib.h>

void ref_attention_gqa(int64_t B, int64_t H, int64_t HKV, int64_t N, int64_t D, const double *q,
                       const double *k, const double *v, double scale, int causal, int64_t window,
                       double *o) {
  double *s = malloc(sizeof(double) * (size_t)(N > 0 ? N : 1));
  int64_t group = HKV > 0 ? H / HKV : 1;
  for (int64_t bh = 0; bh < B * H; bh++) {
    int64_t b = bh / H, h = bh % H, bk = b * HKV + h / group;
    const double *Q = q + bh * N * D, *K = k + bk * N * D, *V = v + bk * N * D;
    double *O = o + bh * N * D;
    for (int64_t i = 0; i < N; i++) {
      int64_t hi = causal ? i + 1 : N, lo = window > 0 && i - window + 1 > 0 ? i - window + 1 : 0;
      double mx = -INFINITY, sum = 0;
      for (int64_t j = lo; j < hi; j++) {
        double dot = 0;
        for (int64_t d = 0; d < D; d++)
          dot += Q[i * D + d] * K[j * D + d];
        s[j] = dot * scale;
        mx = fmax(mx, s[j]);
      }
      for (int64_t j = lo; j < hi; j++)
        sum += s[j] = exp(s[j] - mx);
      for (int64_t d = 0; d < D; d++) {
        double acc = 0;
        for (int64_t j = lo; j < hi; j++)
          acc += s[j] * V[j * D + d];
        O[i * D + d] = hi > lo ? acc / sum : 0;
      }
    }
  }
  free(s);
}

void ref_attention(int64_t B, int64_t H, int64_t N, int64_t D, const double *q, const double *k,
                   const double *v, double scale, int causal, double *o) {
  ref_attention_gqa(B, H, H, N, D, q, k, v, scale, causal, 0, o);
}
