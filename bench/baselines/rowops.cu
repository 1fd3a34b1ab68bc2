// rowops.cu — softmax, rmsnorm, layernorm and residual-add + rmsnorm over rows of X[M, N], fp16
// or bf16 in and out, f32 math. One pass over memory: a row is read with 16-byte loads into
// registers, reduced (warp shuffles, then one shared-memory step across the warps of a row),
// transformed and written back with 16-byte stores.
//
// A row is owned by a group of TPR threads (a warp for short rows, up to the whole block for long
// ones); each thread holds VPT 16-byte vectors of it (8 elements each), vector i of thread l at
// columns (i * TPR + l) * 8 so that a warp's loads are contiguous. Short rows put several groups
// (rows) in one 256-thread block.
#include <math.h>

#include "common.cuh"

namespace {

using bl::Elem;

constexpr int kMinThreads = 256;

enum class Op { Softmax, RmsNorm, LayerNorm, AddRmsNorm };

struct RowArgs {
  const void *x;
  void *r; // add_rmsnorm: residual, read and overwritten
  const void *w;
  const void *b;
  void *y;
  int64_t m;
  int n;
  float eps;
};

struct MaxOp {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};
struct SumOp {
  __device__ float operator()(float a, float b) const { return a + b; }
};

// Reduces v over the TPR threads of this thread's row group; every thread gets the result.
// red holds one float per warp of the block. Ends with a barrier so red can be reused.
template <int TPR, typename F> __device__ __forceinline__ float group_reduce(float v, float *red, F f) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = f(v, __shfl_xor_sync(0xffffffffu, v, o));
  if constexpr (TPR > 32) {
    constexpr int kWarpsPerGroup = TPR / 32;
    const int warp = threadIdx.x / 32;
    if (threadIdx.x % 32 == 0) red[warp] = v;
    __syncthreads();
    const int first = (threadIdx.x / TPR) * kWarpsPerGroup;
    float r = red[first];
#pragma unroll
    for (int i = 1; i < kWarpsPerGroup; i++) r = f(r, red[first + i]);
    __syncthreads();
    return r;
  }
  return v;
}

template <typename T, Op OP, int VPT, int TPR, int THREADS>
__global__ __launch_bounds__(THREADS) void row_kernel(RowArgs a) {
  constexpr int kRowsPerBlock = THREADS / TPR;
  __shared__ float red[THREADS / 32];
  const int lane_g = threadIdx.x % TPR;
  const int64_t row = (int64_t)blockIdx.x * kRowsPerBlock + threadIdx.x / TPR;
  const bool row_ok = row < a.m; // rows past M still take part in the barriers
  const int n = a.n;
  const T *x = static_cast<const T *>(a.x) + row * n;

  float v[VPT][8];
  bool ok[VPT];
  // All loads first: VPT independent 16-byte loads in flight per thread.
#pragma unroll
  for (int i = 0; i < VPT; i++) {
    const int col = (i * TPR + lane_g) * 8;
    ok[i] = row_ok && col < n;
    uint4 u = make_uint4(0, 0, 0, 0);
    if (ok[i]) u = __ldcs(reinterpret_cast<const uint4 *>(x + col));
    bl::unpack8<T>(u, v[i]);
  }
  if constexpr (OP == Op::AddRmsNorm) {
    T *r = static_cast<T *>(a.r) + row * n;
#pragma unroll
    for (int i = 0; i < VPT; i++) {
      const int col = (i * TPR + lane_g) * 8;
      if (ok[i]) {
        float rv[8];
        bl::unpack8<T>(__ldcs(reinterpret_cast<const uint4 *>(r + col)), rv);
#pragma unroll
        for (int j = 0; j < 8; j++) v[i][j] += rv[j];
        __stcs(reinterpret_cast<uint4 *>(r + col), bl::pack8<T>(v[i]));
      }
    }
  }

  T *y = static_cast<T *>(a.y) + row * n;
  if constexpr (OP == Op::Softmax) {
    float mx = -INFINITY;
#pragma unroll
    for (int i = 0; i < VPT; i++)
      if (ok[i])
#pragma unroll
        for (int j = 0; j < 8; j++) mx = fmaxf(mx, v[i][j]);
    mx = group_reduce<TPR>(mx, red, MaxOp());
    constexpr float kLog2e = 1.4426950408889634f;
    const float base = mx * kLog2e;
    float s = 0.f;
#pragma unroll
    for (int i = 0; i < VPT; i++)
#pragma unroll
      for (int j = 0; j < 8; j++) {
        v[i][j] = ok[i] ? exp2f(fmaf(v[i][j], kLog2e, -base)) : 0.f;
        s += v[i][j];
      }
    s = group_reduce<TPR>(s, red, SumOp());
    const float inv = 1.f / s;
#pragma unroll
    for (int i = 0; i < VPT; i++) {
      if (!ok[i]) continue;
#pragma unroll
      for (int j = 0; j < 8; j++) v[i][j] *= inv;
      __stcs(reinterpret_cast<uint4 *>(y + (i * TPR + lane_g) * 8), bl::pack8<T>(v[i]));
    }
  } else {
    // Norms. Padding lanes hold 0 so they add nothing to the sums.
    float mean = 0.f;
    if constexpr (OP == Op::LayerNorm) {
      float s = 0.f;
#pragma unroll
      for (int i = 0; i < VPT; i++)
#pragma unroll
        for (int j = 0; j < 8; j++) s += v[i][j];
      mean = group_reduce<TPR>(s, red, SumOp()) / (float)n;
    }
    float ss = 0.f;
#pragma unroll
    for (int i = 0; i < VPT; i++)
#pragma unroll
      for (int j = 0; j < 8; j++) {
        const float d = ok[i] ? v[i][j] - mean : 0.f;
        ss = fmaf(d, d, ss);
      }
    const float inv = rsqrtf(group_reduce<TPR>(ss, red, SumOp()) / (float)n + a.eps);
    const T *w = static_cast<const T *>(a.w);
#pragma unroll
    for (int i = 0; i < VPT; i++) {
      if (!ok[i]) continue;
      const int col = (i * TPR + lane_g) * 8;
      float wv[8];
      bl::unpack8<T>(__ldg(reinterpret_cast<const uint4 *>(w + col)), wv); // reused by every row
      if constexpr (OP == Op::LayerNorm) {
        float bv[8];
        bl::unpack8<T>(__ldg(reinterpret_cast<const uint4 *>(static_cast<const T *>(a.b) + col)), bv);
#pragma unroll
        for (int j = 0; j < 8; j++) v[i][j] = fmaf((v[i][j] - mean) * inv, wv[j], bv[j]);
      } else {
#pragma unroll
        for (int j = 0; j < 8; j++) v[i][j] = v[i][j] * inv * wv[j];
      }
      __stcs(reinterpret_cast<uint4 *>(y + col), bl::pack8<T>(v[i]));
    }
  }
}

template <typename T, Op OP, int VPT, int TPR> int launch(const RowArgs &a, cudaStream_t s) {
  constexpr int kThreads = TPR > kMinThreads ? TPR : kMinThreads;
  constexpr int kRows = kThreads / TPR;
  const int64_t blocks = (a.m + kRows - 1) / kRows;
  if (blocks > 0x7fffffff) {
    bl::set_error_msg("row op: too many rows");
    return BL_UNSUPPORTED;
  }
  row_kernel<T, OP, VPT, TPR, kThreads><<<(unsigned)blocks, kThreads, 0, s>>>(a);
  return bl::check_launch("row_kernel");
}

// Picks (VPT, TPR): the fewest threads per row with at most 4 vectors each (64 bytes of the row in
// flight per thread), a warp at least; 8 vectors per thread above 32768 columns.
template <typename T, Op OP> int dispatch(const RowArgs &a, cudaStream_t s) {
  if (a.n <= 0 || a.n % 8 != 0 || a.n > 65536) {
    bl::set_error_msg("row op: needs N % 8 == 0 and 0 < N <= 65536");
    return BL_UNSUPPORTED;
  }
  if (a.m <= 0) return 0;
  const int vecs = a.n / 8;
  if (vecs <= 32) return launch<T, OP, 1, 32>(a, s);
  if (vecs <= 64) return launch<T, OP, 2, 32>(a, s);
  if (vecs <= 128) return launch<T, OP, 4, 32>(a, s);
  if (vecs <= 256) return launch<T, OP, 4, 64>(a, s);
  if (vecs <= 512) return launch<T, OP, 4, 128>(a, s);
  if (vecs <= 1024) return launch<T, OP, 4, 256>(a, s);
  if (vecs <= 2048) return launch<T, OP, 4, 512>(a, s);
  if (vecs <= 4096) return launch<T, OP, 4, 1024>(a, s);
  return launch<T, OP, 8, 1024>(a, s);
}

template <Op OP> int run(int dtype, const RowArgs &a, void *stream) {
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  if (dtype == BL_F16) return dispatch<__half, OP>(a, s);
  if (dtype == BL_BF16) return dispatch<__nv_bfloat16, OP>(a, s);
  bl::set_error_msg("row op: dtype must be BL_F16 or BL_BF16");
  return BL_UNSUPPORTED;
}

RowArgs make_args(const void *x, void *r, const void *w, const void *b, void *y, int64_t m,
                  int64_t n, float eps) {
  RowArgs a;
  a.x = x;
  a.r = r;
  a.w = w;
  a.b = b;
  a.y = y;
  a.m = m;
  a.n = n > 0x7fffffff ? -1 : (int)n;
  a.eps = eps;
  return a;
}

} // namespace

extern "C" int bl_softmax(int dtype, const void *x, void *y, int64_t m, int64_t n, void *stream) {
  return run<Op::Softmax>(dtype, make_args(x, nullptr, nullptr, nullptr, y, m, n, 0.f), stream);
}

extern "C" int bl_rmsnorm(int dtype, const void *x, const void *w, void *y, int64_t m, int64_t n,
                          float eps, void *stream) {
  return run<Op::RmsNorm>(dtype, make_args(x, nullptr, w, nullptr, y, m, n, eps), stream);
}

extern "C" int bl_layernorm(int dtype, const void *x, const void *w, const void *bias, void *y,
                            int64_t m, int64_t n, float eps, void *stream) {
  return run<Op::LayerNorm>(dtype, make_args(x, nullptr, w, bias, y, m, n, eps), stream);
}

extern "C" int bl_add_rmsnorm(int dtype, const void *x, void *r, const void *w, void *y, int64_t m,
                              int64_t n, float eps, void *stream) {
  return run<Op::AddRmsNorm>(dtype, make_args(x, r, w, nullptr, y, m, n, eps), stream);
}
