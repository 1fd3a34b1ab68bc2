/* zero.c — out tensors declared `= 0` (docs/language.md 5.3): every launch zeroes them before the
 * kernel writes them, so a kernel that accumulates with atomics (layernorm backward's dW and dB)
 * needs no zeroing launch of the caller's. On the GPU the zeroing is one launch of a small kernel
 * of our own for all of a launch's `= 0` tensors (two cudaMemsets before a kernel cost 4-5 us on an
 * H100, as much as a tenth of a memory-bound backward kernel; docs/performance.md, session bb),
 * and on sm_90 the kernel that follows is started as its programmatic dependent: it starts while
 * the zeroing runs and waits for it (griddepcontrol.wait) only where it first touches such a
 * tensor (the compiler's `zero_wait`). */
#include "tilert_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A tensor's bytes as rows of contiguous bytes: rows x row_bytes, rows pitch bytes apart. */
typedef struct ZeroRegion {
  uint64_t ptr, rows, pitch, row_bytes;
} ZeroRegion;

enum { ZERO_REGIONS = 8 }; /* per launch of the zeroing kernel (its grid's y) */

/* Appends the regions of tensor t (innermost stride 1): its inner dims that are contiguous make
 * a row, the next dims whose strides nest make the rows, and every index of the dims outside
 * those is a region of its own. Returns false past cap. */
static bool tensor_regions(const tilert_tensor *t, ZeroRegion *r, int *n, int cap) {
  size_t eb = tilert_dtype_size(t->dtype);
  int d = t->rank - 1;
  for (int i = 0; i < t->rank; i++)
    if (t->shape[i] == 0)
      return true;
  uint64_t row_bytes = (uint64_t)t->shape[d] * eb, rows = 1, pitch = row_bytes;
  for (d--; d >= 0 && (uint64_t)t->strides[d] * eb == row_bytes; d--)
    row_bytes *= (uint64_t)t->shape[d];
  if (d >= 0) {
    rows = (uint64_t)t->shape[d], pitch = (uint64_t)t->strides[d] * eb;
    for (d--; d >= 0 && t->strides[d] == t->strides[d + 1] * t->shape[d + 1]; d--)
      rows *= (uint64_t)t->shape[d];
  }
  int64_t outer = 1, idx[TILERT_MAX_RANK] = {0};
  for (int i = 0; i <= d; i++)
    outer *= t->shape[i];
  for (int64_t o = 0; o < outer; o++) {
    uint64_t off = 0;
    for (int i = 0; i <= d; i++)
      off += (uint64_t)idx[i] * (uint64_t)t->strides[i] * eb;
    if (*n >= cap)
      return false;
    r[(*n)++] = (ZeroRegion){(uint64_t)(uintptr_t)t->data + off, rows, pitch, row_bytes};
    for (int i = d; i >= 0 && ++idx[i] == t->shape[i]; i--)
      idx[i] = 0;
  }
  return true;
}

/* ---------------------------------------------------------------- the CPU */

static void zero_region_host(const ZeroRegion *r) {
  for (uint64_t i = 0; i < r->rows; i++)
    memset((char *)(uintptr_t)(r->ptr + i * r->pitch), 0, r->row_bytes);
}

/* The GPU's zeroing kernel: region y of its grid, each thread storing units of 2^unit bytes
 * (the widest that the region's address, pitch and row length allow) a grid-stride apart.
 * Parameters per region: ptr, rows, pitch, units a row (u64), log2 of the unit (u32). sm_90
 * lets the kernel launched after it start at once (griddepcontrol.launch_dependents); that
 * kernel still waits for this one's stores with griddepcontrol.wait. */
char *tilert__zero_ptx(int cc) {
  size_t cap = 16384, len = 0;
  char *s = malloc(cap);
  if (!s)
    return NULL;
#define ADD(...) (len += (size_t)snprintf(s + len, cap - len, __VA_ARGS__))
  ADD(".version 7.8\n.target sm_%d\n.address_size 64\n.visible .entry tilert_zero(", cc >= 90 ? 90 : 70);
  for (int i = 0; i < ZERO_REGIONS; i++)
    ADD("%s.param .u64 p%d, .param .u64 r%d, .param .u64 s%d, .param .u64 n%d, .param .u32 u%d",
        i ? ", " : "", i, i, i, i, i);
  ADD(")\n{\n  .reg .pred %%p<3>;\n  .reg .b16 %%h0;\n  .reg .b32 %%r<8>;\n  .reg .b64 %%rd<16>;\n");
  if (cc >= 90)
    ADD("  griddepcontrol.launch_dependents;\n");
  ADD("  mov.u32 %%r0, %%ctaid.y;\n");
  for (int i = 0; i < ZERO_REGIONS; i++)
    ADD("  setp.eq.u32 %%p0, %%r0, %d;\n  @%%p0 ld.param.u64 %%rd1, [p%d];\n  @%%p0 ld.param.u64 %%rd2, [r%d];\n"
        "  @%%p0 ld.param.u64 %%rd3, [s%d];\n  @%%p0 ld.param.u64 %%rd4, [n%d];\n  @%%p0 ld.param.u32 %%r1, [u%d];\n",
        i, i, i, i, i, i);
  ADD("  mul.lo.u64 %%rd5, %%rd2, %%rd4;\n"
      "  mov.u32 %%r2, %%ctaid.x;\n  mov.u32 %%r3, %%ntid.x;\n  mov.u32 %%r4, %%tid.x;\n  mov.u32 %%r5, %%nctaid.x;\n"
      "  mul.wide.u32 %%rd6, %%r2, %%r3;\n  cvt.u64.u32 %%rd8, %%r4;\n  add.u64 %%rd6, %%rd6, %%rd8;\n"
      "  mul.wide.u32 %%rd7, %%r5, %%r3;\n  mov.u32 %%r6, 0;\n  mov.b16 %%h0, 0;\n"
      "LOOP:\n  setp.ge.u64 %%p1, %%rd6, %%rd5;\n  @%%p1 bra DONE;\n"
      "  div.u64 %%rd8, %%rd6, %%rd4;\n  mul.lo.u64 %%rd9, %%rd8, %%rd4;\n  sub.u64 %%rd10, %%rd6, %%rd9;\n"
      "  mad.lo.u64 %%rd11, %%rd8, %%rd3, %%rd1;\n  shl.b64 %%rd12, %%rd10, %%r1;\n  add.u64 %%rd11, %%rd11, %%rd12;\n"
      "  setp.eq.u32 %%p2, %%r1, 4;\n  @%%p2 st.global.v4.u32 [%%rd11], {%%r6, %%r6, %%r6, %%r6};\n"
      "  setp.eq.u32 %%p2, %%r1, 3;\n  @%%p2 st.global.v2.u32 [%%rd11], {%%r6, %%r6};\n"
      "  setp.eq.u32 %%p2, %%r1, 2;\n  @%%p2 st.global.u32 [%%rd11], %%r6;\n"
      "  setp.eq.u32 %%p2, %%r1, 1;\n  @%%p2 st.global.u16 [%%rd11], %%h0;\n"
      "  setp.eq.u32 %%p2, %%r1, 0;\n  @%%p2 st.global.u8 [%%rd11], %%h0;\n"
      "  add.u64 %%rd6, %%rd6, %%rd7;\n  bra LOOP;\nDONE:\n  ret;\n}\n");
#undef ADD
  if (len >= cap) {
    free(s);
    return NULL;
  }
  return s;
}

/* The zeroing kernel of dev, loaded at its first use (under dev->zero_lock). */
static tilert_status zero_function(const tilert_driver *d, tilert_device *dev, CUfunction *fn) {
  pthread_mutex_lock(&dev->zero_lock);
  tilert_status st = tilert__ok();
  if (!dev->zero_fn) {
    char *ptx = tilert__zero_ptx(dev->cc);
    CUresult r = CUDA_ERROR_OUT_OF_MEMORY;
    if (ptx && (r = d->ModuleLoadDataEx(&dev->zero_mod, ptx, 0, NULL, NULL)) == CUDA_SUCCESS &&
        (r = d->ModuleGetFunction(&dev->zero_fn, dev->zero_mod, "tilert_zero")) != CUDA_SUCCESS) {
      d->ModuleUnload(dev->zero_mod);
      dev->zero_mod = NULL;
    }
    free(ptx);
    if (r != CUDA_SUCCESS)
      st = tilert__drv_err(dev->zero_mod || r == CUDA_ERROR_NOT_FOUND ? "cuModuleGetFunction" : "cuModuleLoadDataEx",
                           r, "the runtime's zeroing kernel");
  }
  *fn = dev->zero_fn;
  pthread_mutex_unlock(&dev->zero_lock);
  return st;
}

/* The widest store the region's address, row length and (with several rows) pitch allow. */
static int unit_log2(const ZeroRegion *r) {
  uint64_t bits = r->ptr | r->row_bytes | (r->rows > 1 ? r->pitch : 0);
  int u = 4;
  while (u && (bits & ((1u << u) - 1)))
    u--;
  return u;
}

static tilert_status zero_launch(const tilert_driver *d, tilert_device *dev, CUfunction fn,
                                 const ZeroRegion *r, int n, CUstream s) {
  uint64_t u64[ZERO_REGIONS][4];
  uint32_t u32[ZERO_REGIONS];
  void *params[ZERO_REGIONS * 5];
  uint64_t most = 1;
  for (int i = 0; i < ZERO_REGIONS; i++) {
    const ZeroRegion *g = &r[i < n ? i : 0];
    u32[i] = (uint32_t)unit_log2(g);
    uint64_t units = g->row_bytes >> u32[i];
    u64[i][0] = g->ptr, u64[i][1] = g->rows, u64[i][2] = g->pitch, u64[i][3] = units;
    if (i < n && g->rows * units > most)
      most = g->rows * units;
    for (int k = 0; k < 4; k++)
      params[i * 5 + k] = &u64[i][k];
    params[i * 5 + 4] = &u32[i];
  }
  uint64_t blocks = (most + 1023) / 1024; /* about 4 units a thread, at most 2 blocks an SM */
  if (blocks > (uint64_t)(2 * (dev->sms > 0 ? dev->sms : 1)))
    blocks = (uint64_t)(2 * (dev->sms > 0 ? dev->sms : 1));
  CUresult res = d->LaunchKernel(fn, (unsigned)blocks, (unsigned)n, 1, 256, 1, 1, 0, s, params, NULL);
  return res == CUDA_SUCCESS ? tilert__ok() : tilert__drv_err("cuLaunchKernel", res, "the runtime's zeroing kernel");
}

static tilert_status collect(const tilert_kernel_info *info, const tilert_arg *args, ZeroRegion **r, int *n) {
  int cap = 0;
  *n = 0, *r = NULL;
  for (int i = 0; i < info->nargs; i++) {
    if (info->args[i].kind != TILERT_ARG_TENSOR || !info->args[i].zero_init)
      continue;
    for (;;) {
      int before = *n;
      if (tensor_regions(&args[i].tensor, *r, n, cap))
        break;
      *n = before;
      cap = cap ? 2 * cap : 16;
      ZeroRegion *g = realloc(*r, sizeof *g * (size_t)cap);
      if (!g) {
        free(*r);
        *r = NULL;
        return tilert__err(TILERT_ERROR_OUT_OF_MEMORY, "out of host memory");
      }
      *r = g;
    }
  }
  return tilert__ok();
}

bool tilert__has_zero_init(const tilert_kernel_info *info) {
  for (int i = 0; i < info->nargs; i++)
    if (info->args[i].kind == TILERT_ARG_TENSOR && info->args[i].zero_init)
      return true;
  return false;
}

tilert_status tilert__zero_outputs_cpu(const tilert_kernel_info *info, const tilert_arg *args) {
  ZeroRegion *r;
  int n;
  tilert_status st = collect(info, args, &r, &n);
  for (int i = 0; !st.code && i < n; i++)
    zero_region_host(&r[i]);
  free(r);
  return st;
}

tilert_status tilert__zero_outputs_gpu(const tilert_driver *d, tilert_device *dev, const tilert_kernel_info *info,
                                       const tilert_arg *args, CUstream s, bool *launched) {
  ZeroRegion *r;
  int n;
  CUfunction fn = NULL;
  tilert_status st = collect(info, args, &r, &n);
  *launched = !st.code && n > 0;
  if (!st.code && n)
    st = zero_function(d, dev, &fn);
  for (int i = 0; !st.code && i < n; i += ZERO_REGIONS)
    st = zero_launch(d, dev, fn, r + i, n - i < ZERO_REGIONS ? n - i : ZERO_REGIONS, s);
  free(r);
  return st;
}

void tilert__zero_unload(const tilert_driver *d, tilert_device *dev) {
  if (dev->zero_mod && d)
    d->ModuleUnload(dev->zero_mod);
  dev->zero_mod = NULL, dev->zero_fn = NULL;
}

tilert_status tilert__zero_outputs_only(tilert_device *dev, const tilert_kernel_info *info, const tilert_arg *args,
                                        tilert_stream *stream) {
  const tilert_driver *d;
  tilert_status st = tilert__gpu_enter(dev, &d);
  bool launched;
  return st.code ? st : tilert__zero_outputs_gpu(d, dev, info, args, stream ? stream->s : NULL, &launched);
}
