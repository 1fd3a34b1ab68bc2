// common.cuh — helpers shared by the hand-written CUDA baselines: element-type traits for fp16 and
// bf16, 16-byte pack/unpack, cp.async, ldmatrix and mma.sync wrappers, error reporting.
//
// These baselines are what a careful engineer writes by hand (no CUTLASS, no CuTe); they are the
// yardstick the generated kernels are compared against in bench/run.py.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <string.h>
#include <type_traits>

#include "baselines.h"

namespace bl {

// The last error text, for bl_last_error(). One writer at a time is enough for a benchmark driver.
void set_error(const char *what, cudaError_t e);
void set_error_msg(const char *msg);
// Converts the result of the launch just made into the API's return value.
int check_launch(const char *what);

// ---------------------------------------------------------------- element traits
template <typename T> struct Elem;
template <> struct Elem<__half> {
  using T2 = __half2;
  static __device__ __forceinline__ float2 to_f2(T2 v) { return __half22float2(v); }
  static __device__ __forceinline__ T2 from_f2(float a, float b) { return __floats2half2_rn(a, b); }
  static __device__ __forceinline__ float to_f(__half v) { return __half2float(v); }
  static __device__ __forceinline__ __half from_f(float v) { return __float2half_rn(v); }
};
template <> struct Elem<__nv_bfloat16> {
  using T2 = __nv_bfloat162;
  static __device__ __forceinline__ float2 to_f2(T2 v) { return __bfloat1622float2(v); }
  static __device__ __forceinline__ T2 from_f2(float a, float b) { return __floats2bfloat162_rn(a, b); }
  static __device__ __forceinline__ float to_f(__nv_bfloat16 v) { return __bfloat162float(v); }
  static __device__ __forceinline__ __nv_bfloat16 from_f(float v) { return __float2bfloat16_rn(v); }
};

// 8 elements <-> one 16-byte word.
template <typename T> __device__ __forceinline__ void unpack8(uint4 u, float *f) {
  const uint32_t w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
  for (int i = 0; i < 4; i++) {
    typename Elem<T>::T2 t;
    memcpy(&t, &w[i], 4);
    float2 p = Elem<T>::to_f2(t);
    f[2 * i] = p.x;
    f[2 * i + 1] = p.y;
  }
}
template <typename T> __device__ __forceinline__ uint4 pack8(const float *f) {
  uint32_t w[4];
#pragma unroll
  for (int i = 0; i < 4; i++) {
    typename Elem<T>::T2 t = Elem<T>::from_f2(f[2 * i], f[2 * i + 1]);
    memcpy(&w[i], &t, 4);
  }
  return make_uint4(w[0], w[1], w[2], w[3]);
}
template <typename T> __device__ __forceinline__ uint32_t pack2(float a, float b) {
  typename Elem<T>::T2 t = Elem<T>::from_f2(a, b);
  uint32_t w;
  memcpy(&w, &t, 4);
  return w;
}

// ---------------------------------------------------------------- sm_80 async copies and MMA
__device__ __forceinline__ uint32_t smem_addr(const void *p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
// 16-byte global -> shared copy; pred false writes 16 zero bytes (src-size 0) and reads nothing,
// which is how ragged tile edges are handled.
__device__ __forceinline__ void cp_async16(void *smem, const void *gmem, bool pred) {
  const int n = pred ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(smem)), "l"(gmem),
               "r"(n)
               : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N> __device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

// Four 8x8 b16 matrices; lanes 8i..8i+7 give the row addresses of matrix i, register i holds it.
__device__ __forceinline__ void ldmatrix_x4(uint32_t *r, const void *smem) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(smem)));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t *r, const void *smem) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(smem)));
}

// D = A(16x16, row) * B(16x8, col) + D, f32 accumulate. Fragments (g = lane/4, t = lane%4):
//   a[0]: (g, 2t..2t+1)  a[1]: (g+8, 2t..)  a[2]: (g, 2t+8..)  a[3]: (g+8, 2t+8..)
//   b0: (k = 2t..2t+1, n = g)  b1: (k = 2t+8.., n = g)
//   c[0..1]: (g, 2t..2t+1)  c[2..3]: (g+8, 2t..2t+1)
template <typename T>
__device__ __forceinline__ void mma16816(float *c, const uint32_t *a, uint32_t b0, uint32_t b1) {
  if constexpr (std::is_same<T, __half>::value) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
                 "{%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, "
                 "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
}

} // namespace bl
