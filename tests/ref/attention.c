/* attention.c — float64 reference of dsl/examples/attention.tile (plain softmax, no tiling). */
#include "ref.h"

#include <math.h>
#include <stdlib.h>

void ref_attention(int64_t B, int64_t H, int64_t N, int64_t D, const double *q, const double *k,
                   const double *v, double scale, int causal, double *o) {
  double *s = malloc(sizeof(double) * (size_t)(N > 0 ? N : 1));
  for (int64_t bh = 0; bh < B * H; bh++) {
    const double *Q = q + bh * N * D, *K = k + bh * N * D, *V = v + bh * N * D;
    double *O = o + bh * N * D;
    for (int64_t i = 0; i < N; i++) {
      int64_t nkeys = causal ? i + 1 : N;
      double mx = -INFINITY, sum = 0;
      for (int64_t j = 0; j < nkeys; j++) {
        double dot = 0;
        for (int64_t d = 0; d < D; d++)
          dot += Q[i * D + d] * K[j * D + d];
        s[j] = dot * scale;
        mx = fmax(mx, s[j]);
      }
      for (int64_t j = 0; j < nkeys; j++)
        sum += s[j] = exp(s[j] - mx);
      for (int64_t d = 0; d < D; d++) {
        double acc = 0;
        for (int64_t j = 0; j < nkeys; j++)
          acc += s[j] * V[j * D + d];
        O[i * D + d] = acc / sum;
      }
    }
  }
  free(s);
}
