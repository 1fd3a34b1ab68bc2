// gemm.cu — C = act(A @ B + bias), A[M, K], B[K, N] row-major, fp16 or bf16, f32 accumulate.
// sm_80-style tensor-core GEMM as written by hand: block tile BM x BN x BK, a STAGES-deep cp.async
// pipeline into padded shared memory (rows padded by 16 bytes: ldmatrix rows fall in distinct
// banks), ldmatrix (A plain, B transposed) feeding mma.sync m16n8k16, a register accumulator per
// warp tile WM x WN, bias + relu fused into the epilogue. Ragged M and N edges: zero-filled loads
// (cp.async src-size 0) and masked stores; K must be a multiple of 64 (the largest BK).
#include "common.cuh"

namespace {

constexpr int kPad = 8; // elements of padding per shared row (16 bytes)

template <int BM, int BN, int BK, int WM, int WN, int STAGES> struct Cfg {
  static constexpr int kWarpsM = BM / WM, kWarpsN = BN / WN;
  static constexpr int kThreads = 32 * kWarpsM * kWarpsN;
  static constexpr int kMT = WM / 16, kNT = WN / 8; // mma tiles per warp
  static constexpr int kLdA = BK + kPad, kLdB = BN + kPad;
  static constexpr int kStageElems = BM * kLdA + BK * kLdB;
  template <typename T> static constexpr int smem_bytes() { return STAGES * kStageElems * (int)sizeof(T); }
  static_assert(WM % 16 == 0 && WN % 16 == 0 && BK % 16 == 0, "tile shapes");
  static_assert(BM % WM == 0 && BN % WN == 0, "warp tiling");
};

template <typename T, int BM, int BN, int BK, int WM, int WN, int STAGES>
__global__ __launch_bounds__(Cfg<BM, BN, BK, WM, WN, STAGES>::kThreads) void gemm_kernel(
    const T *__restrict__ A, const T *__restrict__ B, const T *__restrict__ bias, T *__restrict__ C,
    int M, int N, int K, int act) {
  using G = Cfg<BM, BN, BK, WM, WN, STAGES>;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  T *smem = reinterpret_cast<T *>(smem_raw);
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int wm0 = (warp / G::kWarpsN) * WM, wn0 = (warp % G::kWarpsN) * WN;
  const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
  const int ktiles = K / BK;

  auto sA = [&](int stage) { return smem + stage * G::kStageElems; };
  auto sB = [&](int stage) { return smem + stage * G::kStageElems + BM * G::kLdA; };

  auto load_tile = [&](int stage, int kt) {
    const int k0 = kt * BK;
    T *a = sA(stage), *b = sB(stage);
    for (int c = tid; c < BM * BK / 8; c += G::kThreads) {
      const int r = c / (BK / 8), cc = (c % (BK / 8)) * 8;
      const bool p = m0 + r < M;
      bl::cp_async16(a + r * G::kLdA + cc, p ? A + (int64_t)(m0 + r) * K + k0 + cc : A, p);
    }
    for (int c = tid; c < BK * BN / 8; c += G::kThreads) {
      const int r = c / (BN / 8), cc = (c % (BN / 8)) * 8;
      const bool p = n0 + cc < N;
      bl::cp_async16(b + r * G::kLdB + cc, p ? B + (int64_t)(k0 + r) * N + n0 + cc : B, p);
    }
  };

  float acc[G::kMT][G::kNT][4];
#pragma unroll
  for (int i = 0; i < G::kMT; i++)
#pragma unroll
    for (int j = 0; j < G::kNT; j++)
#pragma unroll
      for (int e = 0; e < 4; e++) acc[i][j][e] = 0.f;

#pragma unroll
  for (int s = 0; s < STAGES - 1; s++) {
    if (s < ktiles) load_tile(s, s);
    bl::cp_async_commit();
  }

  for (int kt = 0; kt < ktiles; kt++) {
    // Group kt (tile kt) is complete once at most STAGES-2 younger groups are pending.
    bl::cp_async_wait<STAGES - 2>();
    __syncthreads(); // tile kt visible to all; everyone is done with tile kt-1's stage
    const int nk = kt + STAGES - 1;
    if (nk < ktiles) load_tile(nk % STAGES, nk);
    bl::cp_async_commit();

    const T *a = sA(kt % STAGES), *b = sB(kt % STAGES);
#pragma unroll
    for (int kk = 0; kk < BK; kk += 16) {
      uint32_t af[G::kMT][4], bf[G::kNT][2];
#pragma unroll
      for (int i = 0; i < G::kMT; i++)
        bl::ldmatrix_x4(af[i], a + (wm0 + i * 16 + (lane % 16)) * G::kLdA + kk + (lane / 16) * 8);
#pragma unroll
      for (int j = 0; j < G::kNT; j += 2) {
        uint32_t r[4];
        bl::ldmatrix_x4_trans(r, b + (kk + (lane % 16)) * G::kLdB + wn0 + j * 8 + (lane / 16) * 8);
        bf[j][0] = r[0];
        bf[j][1] = r[1];
        bf[j + 1][0] = r[2];
        bf[j + 1][1] = r[3];
      }
#pragma unroll
      for (int i = 0; i < G::kMT; i++)
#pragma unroll
        for (int j = 0; j < G::kNT; j++) bl::mma16816<T>(acc[i][j], af[i], bf[j][0], bf[j][1]);
    }
  }
  bl::cp_async_wait<0>(); // nothing may still write shared memory when the block exits

  const int g = lane / 4, t = lane % 4;
#pragma unroll
  for (int j = 0; j < G::kNT; j++) {
    const int col = n0 + wn0 + j * 8 + 2 * t;
    if (col >= N) continue; // N % 8 == 0: col < N implies col + 1 < N
    float b0 = 0.f, b1 = 0.f;
    if (bias) {
      b0 = bl::Elem<T>::to_f(bias[col]);
      b1 = bl::Elem<T>::to_f(bias[col + 1]);
    }
#pragma unroll
    for (int i = 0; i < G::kMT; i++)
#pragma unroll
      for (int h = 0; h < 2; h++) {
        const int row = m0 + wm0 + i * 16 + g + h * 8;
        if (row >= M) continue;
        float v0 = acc[i][j][2 * h] + b0, v1 = acc[i][j][2 * h + 1] + b1;
        if (act == 1) {
          v0 = fmaxf(v0, 0.f);
          v1 = fmaxf(v1, 0.f);
        }
        *reinterpret_cast<uint32_t *>(C + (int64_t)row * N + col) = bl::pack2<T>(v0, v1);
      }
  }
}

template <typename T, int BM, int BN, int BK, int WM, int WN, int STAGES>
int launch(const void *a, const void *b, const void *bias, void *c, int m, int n, int k, int act,
           cudaStream_t s) {
  using G = Cfg<BM, BN, BK, WM, WN, STAGES>;
  auto kern = gemm_kernel<T, BM, BN, BK, WM, WN, STAGES>;
  constexpr int smem = G::template smem_bytes<T>();
  static bool attr_set = false; // once per instantiation
  if (!attr_set) {
    cudaError_t e = cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    if (e != cudaSuccess) {
      bl::set_error("gemm: cudaFuncSetAttribute", e);
      return (int)e;
    }
    attr_set = true;
  }
  dim3 grid((n + BN - 1) / BN, (m + BM - 1) / BM);
  kern<<<grid, G::kThreads, smem, s>>>(static_cast<const T *>(a), static_cast<const T *>(b),
                                        static_cast<const T *>(bias), static_cast<T *>(c), m, n, k, act);
  return bl::check_launch("gemm_kernel");
}

// Tile choice by shape: big tiles when they still give at least one wave of blocks, 64 x 64
// otherwise, and 16-row tiles for skinny (decode-like) M so no tensor-core work is wasted.
template <typename T>
int dispatch(const void *a, const void *b, const void *bias, void *c, int m, int n, int k, int act,
             cudaStream_t s) {
  int dev = 0, sms = 132;
  cudaGetDevice(&dev);
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
  if (m <= 16) return launch<T, 16, 64, 64, 16, 16, 6>(a, b, bias, c, m, n, k, act, s);
  const long big = (long)((m + 127) / 128) * ((n + 127) / 128);
  if (big >= sms) return launch<T, 128, 128, 32, 64, 32, 4>(a, b, bias, c, m, n, k, act, s);
  return launch<T, 64, 64, 32, 32, 32, 4>(a, b, bias, c, m, n, k, act, s);
}

} // namespace

extern "C" int bl_gemm(int dtype, const void *a, const void *b, const void *bias, void *c, int64_t m,
                       int64_t n, int64_t k, int act, void *stream) {
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  if (m <= 0 || n <= 0 || k <= 0 || m > 0x7fffffff || n > 0x7fffffff || k > 0x7fffffff ||
      n % 8 != 0 || k % 64 != 0) {
    bl::set_error_msg("gemm: needs N % 8 == 0 and K % 64 == 0");
    return BL_UNSUPPORTED;
  }
  if (act != 0 && act != 1) {
    bl::set_error_msg("gemm: act must be 0 (none) or 1 (relu)");
    return BL_UNSUPPORTED;
  }
  if (dtype == BL_F16) return dispatch<__half>(a, b, bias, c, (int)m, (int)n, (int)k, act, s);
  if (dtype == BL_BF16) return dispatch<__nv_bfloat16>(a, b, bias, c, (int)m, (int)n, (int)k, act, s);
  bl::set_error_msg("gemm: dtype must be BL_F16 or BL_BF16");
  return BL_UNSUPPORTED;
}
