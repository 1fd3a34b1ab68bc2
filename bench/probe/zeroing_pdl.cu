// bench/probe/zeroing_pdl.cu — session bb: does a programmatic dependent launch hide the zeroing of an
// accumulating kernel's sums? K reads two 8192 x 4096 f16 tensors, writes one, and adds per-column sums
// into dW, dB with atomics at its end (the shape of layernorm backward); timed (median of 300, each
// after a 256 MB memset) alone, after two cudaMemsetAsync, after one zeroing kernel, and as that
// kernel's programmatic dependent (griddepcontrol.wait before its atomics). Build on the GPU machine:
//   nvcc -O2 -arch=sm_90a -o zeroing_pdl bench/probe/zeroing_pdl.cu && ./zeroing_pdl
#include <cstdio>
#include <cuda_fp16.h>
#include <vector>
#include <algorithm>
#define M 8192
#define N 4096
#define CHUNK 32
__global__ void zero2(float *a, float *b, int n) {
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;");
#endif
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) { a[i] = 0; b[i] = 0; }
}
template <int PDL>
__global__ void __launch_bounds__(256) k(const __half *X, const __half *G, __half *dX, float *dW, float *dB) {
  float dw[16], db[16];
  for (int j = 0; j < 16; j++) dw[j] = db[j] = 0;
  int m0 = blockIdx.x * CHUNK;
  for (int r = m0; r < m0 + CHUNK; r++) {
    const uint4 *x = (const uint4 *)(X + (size_t)r * N), *g = (const uint4 *)(G + (size_t)r * N);
    uint4 *o = (uint4 *)(dX + (size_t)r * N);
    for (int c = 0; c < 2; c++) {
      int i = c * 256 + threadIdx.x;
      uint4 xv = x[i], gv = g[i], ov;
      __half *xh = (__half *)&xv, *gh = (__half *)&gv, *oh = (__half *)&ov;
      for (int j = 0; j < 8; j++) { float xf = __half2float(xh[j]), gf = __half2float(gh[j]);
        dw[c * 8 + j] += xf * gf; db[c * 8 + j] += gf; oh[j] = __float2half(xf * gf + gf); }
      o[i] = ov;
    }
  }
#if __CUDA_ARCH__ >= 900
  if (PDL) asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
  for (int c = 0; c < 2; c++) for (int j = 0; j < 8; j++) {
    int col = (c * 256 + threadIdx.x) * 8 + j; atomicAdd(&dW[col], dw[c * 8 + j]); atomicAdd(&dB[col], db[c * 8 + j]); }
}
int main() {
  __half *X, *G, *dX; float *dW, *dB; char *fl, *cs, *cd;
  cudaMalloc(&X, (size_t)M * N * 2); cudaMalloc(&G, (size_t)M * N * 2); cudaMalloc(&dX, (size_t)M * N * 2);
  cudaMalloc(&dW, N * 4); cudaMalloc(&dB, N * 4); cudaMalloc(&fl, 256 << 20); cudaMalloc(&cs, (size_t)M * N * 3); cudaMalloc(&cd, (size_t)M * N * 3);
  cudaMemset(X, 0, (size_t)M * N * 2); cudaMemset(G, 0, (size_t)M * N * 2);
  cudaStream_t s; cudaStreamCreate(&s);
  cudaLaunchAttribute at; at.id = cudaLaunchAttributeProgrammaticStreamSerialization; at.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t cfg = {}; cfg.gridDim = M / CHUNK; cfg.blockDim = 256; cfg.stream = s; cfg.attrs = &at; cfg.numAttrs = 1;
  const char *names[] = {"K alone", "memset x2 + K", "zero2 kernel + K", "zero2 kernel + K(PDL)", "memset x2 + K(PDL)", "copy 201MB"};
  for (int mode = 0; mode < 6; mode++) {
    std::vector<float> ts;
    for (int rep = 0; rep < 300; rep++) {
      cudaEvent_t a, b; cudaEventCreate(&a); cudaEventCreate(&b);
      cudaMemsetAsync(fl, rep, 256 << 20, s); cudaEventRecord(a, s);
      if (mode == 1 || mode == 4) { cudaMemsetAsync(dW, 0, N * 4, s); cudaMemsetAsync(dB, 0, N * 4, s); }
      if (mode == 2 || mode == 3) zero2<<<4, 256, 0, s>>>(dW, dB, N);
      if (mode == 0 || mode == 1 || mode == 2) k<0><<<M / CHUNK, 256, 0, s>>>(X, G, dX, dW, dB);
      if (mode == 3 || mode == 4) cudaLaunchKernelEx(&cfg, k<1>, (const __half *)X, (const __half *)G, dX, dW, dB);
      if (mode == 5) cudaMemcpyAsync(cd, cs, (size_t)M * N * 3, cudaMemcpyDeviceToDevice, s);
      cudaEventRecord(b, s); cudaStreamSynchronize(s); float ms; cudaEventElapsedTime(&ms, a, b); ts.push_back(ms * 1000);
      cudaEventDestroy(a); cudaEventDestroy(b);
    }
    std::sort(ts.begin(), ts.end());
    printf("%-26s median %.2f us  p10 %.2f\n", names[mode], ts[ts.size() / 2], ts[ts.size() / 10]);
  }
  printf("err: %s\n", cudaGetErrorString(cudaGetLastError()));
}
