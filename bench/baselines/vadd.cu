// vadd.cu — Z = X + Y in f32: a grid-stride loop over 16-byte vectors (float4), a scalar tail.
// The grid is a few waves of full blocks so every SM has several blocks with loads in flight.
#include "common.cuh"

namespace {

constexpr int kThreads = 256;
constexpr int kUnroll = 4; // float4s per thread per trip: 64 bytes of each input in flight

__global__ __launch_bounds__(kThreads) void vadd_vec(const float4 *__restrict__ x,
                                                     const float4 *__restrict__ y,
                                                     float4 *__restrict__ z, int64_t nvec) {
  const int64_t stride = (int64_t)gridDim.x * kThreads * kUnroll;
  for (int64_t base = (int64_t)blockIdx.x * kThreads * kUnroll + threadIdx.x; base < nvec;
       base += stride) {
    float4 a[kUnroll], b[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; u++) {
      const int64_t i = base + (int64_t)u * kThreads;
      if (i < nvec) {
        a[u] = __ldcs(x + i); // streamed: read once, evict first
        b[u] = __ldcs(y + i);
      }
    }
#pragma unroll
    for (int u = 0; u < kUnroll; u++) {
      const int64_t i = base + (int64_t)u * kThreads;
      if (i < nvec)
        __stcs(z + i, make_float4(a[u].x + b[u].x, a[u].y + b[u].y, a[u].z + b[u].z, a[u].w + b[u].w));
    }
  }
}

__global__ void vadd_scalar(const float *__restrict__ x, const float *__restrict__ y,
                            float *__restrict__ z, int64_t begin, int64_t n) {
  const int64_t i = begin + (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) z[i] = x[i] + y[i];
}

bool aligned16(const void *p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; }

} // namespace

extern "C" int bl_vadd_f32(const float *x, const float *y, float *z, int64_t n, void *stream) {
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  if (n <= 0) return 0;
  int64_t nvec = (aligned16(x) && aligned16(y) && aligned16(z)) ? n / 4 : 0;
  if (nvec > 0) {
    int dev = 0, sms = 132;
    cudaGetDevice(&dev);
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
    int64_t want = (nvec + kThreads * kUnroll - 1) / (kThreads * kUnroll);
    int64_t cap = (int64_t)sms * 8; // 8 blocks of 256 threads fill an SM (2048 threads)
    int blocks = (int)(want < cap ? want : cap);
    vadd_vec<<<blocks, kThreads, 0, s>>>(reinterpret_cast<const float4 *>(x),
                                         reinterpret_cast<const float4 *>(y),
                                         reinterpret_cast<float4 *>(z), nvec);
    if (int e = bl::check_launch("vadd_vec")) return e;
  }
  const int64_t done = nvec * 4;
  if (done < n) {
    const int64_t rest = n - done;
    vadd_scalar<<<(unsigned)((rest + 255) / 256), 256, 0, s>>>(x, y, z, done, n);
    if (int e = bl::check_launch("vadd_scalar")) return e;
  }
  return 0;
}
