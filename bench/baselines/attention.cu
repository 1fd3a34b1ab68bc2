// attention.cu — FlashAttention-2-style forward, O = softmax(Q K^T * scale [causal]) V, Q, K, V, O
// of shape [B, H, N, D] (contiguous), fp16 or bf16, D = 64 or 128, any N.
//
// A block owns BM = 16 * WARPS query rows of one (b, h); warp w owns rows 16w..16w+15 and keeps
// its Q fragments, its O accumulator (16 x D, f32) and the running max / sum of its rows in
// registers. K and V tiles of BN rows stream through a two-stage cp.async ring in padded shared
// memory. Per tile: S = Q K^T (ldmatrix + mma.sync), masking only on edge / diagonal tiles,
// online softmax in base 2 with the scale folded into log2(e), P re-packed from the S accumulator
// registers straight into A fragments (no shared-memory round trip), O += P V (V via
// ldmatrix.trans). Causal grids run the longest query blocks first.
#include <math.h>

#include "common.cuh"

namespace {

constexpr int kPad = 8;

template <int D, int BM, int BN> struct AttnCfg {
  static constexpr int kLd = D + kPad;
  static constexpr int kWarps = BM / 16;
  static constexpr int kThreads = kWarps * 32;
  template <typename T> static constexpr int smem_bytes() {
    return (BM + 4 * BN) * kLd * (int)sizeof(T); // Q, K[2], V[2]
  }
};

template <typename T, int D, int BM, int BN>
__global__ __launch_bounds__(AttnCfg<D, BM, BN>::kThreads) void attn_fwd(
    const T *__restrict__ Q, const T *__restrict__ K, const T *__restrict__ V, T *__restrict__ O,
    int N, float scale_log2, int causal) {
  using C = AttnCfg<D, BM, BN>;
  constexpr int kLd = C::kLd;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  T *sQ = reinterpret_cast<T *>(smem_raw);
  T *sK = sQ + BM * kLd; // two stages of BN x kLd
  T *sV = sK + 2 * BN * kLd;

  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int g = lane / 4, t = lane % 4;
  const int mblk = causal ? (int)gridDim.x - 1 - (int)blockIdx.x : (int)blockIdx.x;
  const int m0 = mblk * BM;
  const int64_t head = (int64_t)blockIdx.y * N * D;
  const T *q = Q + head, *k = K + head, *v = V + head;
  T *o = O + head;

  // Q tile, then K/V tile 0. Rows past N are zero-filled.
  for (int c = tid; c < BM * D / 8; c += C::kThreads) {
    const int r = c / (D / 8), cc = (c % (D / 8)) * 8;
    const bool p = m0 + r < N;
    bl::cp_async16(sQ + r * kLd + cc, p ? q + (int64_t)(m0 + r) * D + cc : q, p);
  }
  bl::cp_async_commit();
  auto load_kv = [&](int stage, int n0) {
    T *dk = sK + stage * BN * kLd, *dv = sV + stage * BN * kLd;
    for (int c = tid; c < BN * D / 8; c += C::kThreads) {
      const int r = c / (D / 8), cc = (c % (D / 8)) * 8;
      const bool p = n0 + r < N;
      const int64_t off = (int64_t)(n0 + r) * D + cc;
      bl::cp_async16(dk + r * kLd + cc, p ? k + off : k, p);
      bl::cp_async16(dv + r * kLd + cc, p ? v + off : v, p);
    }
  };
  load_kv(0, 0);
  bl::cp_async_commit();

  int nblocks = (N + BN - 1) / BN;
  if (causal) {
    const int last = (m0 + BM + BN - 1) / BN; // tiles holding a column <= the block's last row
    nblocks = last < nblocks ? last : nblocks;
  }

  float acc[D / 8][4];
#pragma unroll
  for (int i = 0; i < D / 8; i++)
#pragma unroll
    for (int e = 0; e < 4; e++) acc[i][e] = 0.f;
  float row_max[2] = {-INFINITY, -INFINITY}; // rows g and g+8, in scaled log2 units
  float row_sum[2] = {0.f, 0.f};             // this thread's partial; quad-reduced at the end
  uint32_t qf[D / 16][4];
  const int qrow0 = m0 + warp * 16; // first query row of this warp

  for (int j = 0; j < nblocks; j++) {
    if (j + 1 < nblocks) load_kv((j + 1) & 1, (j + 1) * BN);
    bl::cp_async_commit();
    bl::cp_async_wait<1>(); // Q and tile j have landed
    __syncthreads();
    if (j == 0) {
#pragma unroll
      for (int kk = 0; kk < D / 16; kk++)
        bl::ldmatrix_x4(qf[kk], sQ + (warp * 16 + (lane % 16)) * kLd + kk * 16 + (lane / 16) * 8);
    }
    const T *tk = sK + (j & 1) * BN * kLd, *tv = sV + (j & 1) * BN * kLd;
    const int n0 = j * BN;

    // S = Q K^T: 16 x BN per warp. K is [n][d] (d contiguous) = the "col" B operand as stored.
    float s[BN / 8][4];
#pragma unroll
    for (int i = 0; i < BN / 8; i++)
#pragma unroll
      for (int e = 0; e < 4; e++) s[i][e] = 0.f;
#pragma unroll
    for (int kk = 0; kk < D / 16; kk++) {
#pragma unroll
      for (int np = 0; np < BN / 16; np++) {
        uint32_t r[4];
        bl::ldmatrix_x4(r, tk + (np * 16 + (lane % 8) + (lane / 16) * 8) * kLd + kk * 16 +
                               ((lane / 8) % 2) * 8);
        bl::mma16816<T>(s[2 * np], qf[kk], r[0], r[1]);
        bl::mma16816<T>(s[2 * np + 1], qf[kk], r[2], r[3]);
      }
    }

    // Masks: columns past N, and (causal) columns after the row. Only edge/diagonal tiles.
    if (n0 + BN > N || (causal && n0 + BN - 1 > qrow0)) {
#pragma unroll
      for (int i = 0; i < BN / 8; i++)
#pragma unroll
        for (int e = 0; e < 4; e++) {
          const int col = n0 + i * 8 + 2 * t + (e & 1);
          const int row = qrow0 + g + (e >> 1) * 8;
          if (col >= N || (causal && col > row)) s[i][e] = -INFINITY;
        }
    }

    // Online softmax per row (h = 0: row g, h = 1: row g + 8); a row lives in one quad.
#pragma unroll
    for (int h = 0; h < 2; h++) {
      float mx = -INFINITY;
#pragma unroll
      for (int i = 0; i < BN / 8; i++) mx = fmaxf(mx, fmaxf(s[i][2 * h], s[i][2 * h + 1]));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      const float m_new = fmaxf(row_max[h], mx * scale_log2);
      const float base = m_new == -INFINITY ? 0.f : m_new; // a row masked so far stays at p = 0
      const float alpha = exp2f(row_max[h] - base);
      row_max[h] = m_new;
      float ps = 0.f;
#pragma unroll
      for (int i = 0; i < BN / 8; i++)
#pragma unroll
        for (int e = 2 * h; e < 2 * h + 2; e++) {
          s[i][e] = exp2f(fmaf(s[i][e], scale_log2, -base));
          ps += s[i][e];
        }
      row_sum[h] = row_sum[h] * alpha + ps;
#pragma unroll
      for (int i = 0; i < D / 8; i++) {
        acc[i][2 * h] *= alpha;
        acc[i][2 * h + 1] *= alpha;
      }
    }

    // O += P V. The S accumulators of n-tiles 2kt and 2kt+1 are exactly the A fragment of
    // k-step kt. V is [n][d]: rows are the k dimension, so B fragments come from ldmatrix.trans.
#pragma unroll
    for (int kt = 0; kt < BN / 16; kt++) {
      uint32_t pa[4];
      pa[0] = bl::pack2<T>(s[2 * kt][0], s[2 * kt][1]);
      pa[1] = bl::pack2<T>(s[2 * kt][2], s[2 * kt][3]);
      pa[2] = bl::pack2<T>(s[2 * kt + 1][0], s[2 * kt + 1][1]);
      pa[3] = bl::pack2<T>(s[2 * kt + 1][2], s[2 * kt + 1][3]);
#pragma unroll
      for (int dp = 0; dp < D / 16; dp++) {
        uint32_t r[4];
        bl::ldmatrix_x4_trans(r, tv + (kt * 16 + (lane % 16)) * kLd + dp * 16 + (lane / 16) * 8);
        bl::mma16816<T>(acc[2 * dp], pa, r[0], r[1]);
        bl::mma16816<T>(acc[2 * dp + 1], pa, r[2], r[3]);
      }
    }
    __syncthreads(); // the next iteration's prefetch overwrites this stage
  }
  bl::cp_async_wait<0>();

#pragma unroll
  for (int h = 0; h < 2; h++) {
    float l = row_sum[h];
    l += __shfl_xor_sync(0xffffffffu, l, 1);
    l += __shfl_xor_sync(0xffffffffu, l, 2);
    const float inv = l > 0.f ? 1.f / l : 0.f;
    const int row = qrow0 + g + h * 8;
    if (row >= N) continue;
    T *orow = o + (int64_t)row * D;
#pragma unroll
    for (int i = 0; i < D / 8; i++)
      *reinterpret_cast<uint32_t *>(orow + i * 8 + 2 * t) =
          bl::pack2<T>(acc[i][2 * h] * inv, acc[i][2 * h + 1] * inv);
  }
}

template <typename T, int D, int BM, int BN>
int launch(const void *q, const void *k, const void *v, void *o, int64_t bh, int n, float scale,
           int causal, cudaStream_t s) {
  using C = AttnCfg<D, BM, BN>;
  auto kern = attn_fwd<T, D, BM, BN>;
  constexpr int smem = C::template smem_bytes<T>();
  static bool attr_set = false;
  if (!attr_set) {
    cudaError_t e = cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    if (e != cudaSuccess) {
      bl::set_error("attention: cudaFuncSetAttribute", e);
      return (int)e;
    }
    attr_set = true;
  }
  if (bh > 65535) {
    bl::set_error_msg("attention: batch * heads must be <= 65535");
    return BL_UNSUPPORTED;
  }
  dim3 grid((n + BM - 1) / BM, (unsigned)bh);
  const float scale_log2 = scale * 1.4426950408889634f;
  kern<<<grid, C::kThreads, smem, s>>>(static_cast<const T *>(q), static_cast<const T *>(k),
                                        static_cast<const T *>(v), static_cast<T *>(o), n,
                                        scale_log2, causal);
  return bl::check_launch("attn_fwd");
}

template <typename T>
int dispatch(const void *q, const void *k, const void *v, void *o, int64_t bh, int n, int d,
             float scale, int causal, cudaStream_t s) {
  if (d == 64) return launch<T, 64, 128, 64>(q, k, v, o, bh, n, scale, causal, s);
  if (d == 128) return launch<T, 128, 128, 64>(q, k, v, o, bh, n, scale, causal, s);
  bl::set_error_msg("attention: head dim must be 64 or 128");
  return BL_UNSUPPORTED;
}

} // namespace

extern "C" int bl_attention(int dtype, const void *q, const void *k, const void *v, void *o,
                            int64_t batch, int64_t heads, int64_t n, int64_t d, float scale,
                            int causal, void *stream) {
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  if (batch <= 0 || heads <= 0 || n <= 0 || n > (1 << 30)) {
    bl::set_error_msg("attention: bad shape");
    return BL_UNSUPPORTED;
  }
  const int64_t bh = batch * heads;
  if (dtype == BL_F16) return dispatch<__half>(q, k, v, o, bh, (int)n, (int)d, scale, causal != 0, s);
  if (dtype == BL_BF16)
    return dispatch<__nv_bfloat16>(q, k, v, o, bh, (int)n, (int)d, scale, causal != 0, s);
  bl::set_error_msg("attention: dtype must be BL_F16 or BL_BF16");
  return BL_UNSUPPORTED;
}
