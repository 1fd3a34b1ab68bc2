/* gpu_runtime.c — libtilert on a real GPU, without Criterion or LLVM (they are not on the GPU
 * machine): build with `gcc -Iruntime tests/aot/gpu_runtime.c build/libtilert.a -ldl -lm`, run
 * from the repository root. Loads the hand-written PTX of tests/aot/kernels/, launches through
 * the metadata-driven ABI (1-D, strided 2-D with a scalar, 64 KB dynamic shared memory), times
 * with events on a stream, and checks the error paths (JIT log, unknown kernel, bad shapes).
 * Exit 0 = pass; 77 = skipped (no driver or no device). */
#include "tilert.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

#define OK(expr)                                                           \
  do {                                                                     \
    tilert_status s_ = (expr);                                             \
    CHECK(s_.code == TILERT_OK, "%s: %s: %s", #expr,                       \
          tilert_code_name(s_.code), s_.message);                          \
  } while (0)

static char *slurp(const char *path) {
  FILE *fp = fopen(path, "rb");
  if (!fp)
    return NULL;
  fseek(fp, 0, SEEK_END);
  long n = ftell(fp);
  fseek(fp, 0, SEEK_SET);
  char *s = calloc(1, (size_t)n + 1);
  if (fread(s, 1, (size_t)n, fp) != (size_t)n)
    n = 0;
  fclose(fp);
  return s;
}

static tilert_kernel *load(tilert_device *dev, const char *file, const char *name,
                           tilert_module **m) {
  char path[256];
  snprintf(path, sizeof path, "tests/aot/kernels/%s", file);
  char *ptx = slurp(path);
  tilert_kernel *k = NULL;
  CHECK(ptx != NULL, "cannot read %s", path);
  if (!ptx)
    return NULL;
  tilert_status st = tilert_module_load_ptx(dev, ptx, m);
  CHECK(st.code == TILERT_OK, "load %s: %s", path, st.message);
  if (!st.code) {
    st = tilert_module_get_kernel(*m, name, &k);
    CHECK(st.code == TILERT_OK, "get %s: %s", name, st.message);
  }
  free(ptx);
  return k;
}

int main(void) {
  tilert_device *dev;
  tilert_status st = tilert_device_open(TILERT_BACKEND_GPU, 0, &dev);
  if (st.code == TILERT_ERROR_NO_DRIVER || st.code == TILERT_ERROR_NO_DEVICE) {
    printf("gpu_runtime: skipped: %s\n", st.message);
    return 77;
  }
  if (st.code) {
    fprintf(stderr, "FAIL tilert_device_open: %s\n", st.message);
    return 1;
  }
  printf("gpu_runtime: %s, cc %d\n", tilert_device_name(dev), tilert_device_compute_capability(dev));
  enum { N = 1 << 20, M = 500, D = 128, LD = 160 };
  size_t bytes = sizeof(float) * N;
  float *hx = malloc(bytes), *hy = malloc(bytes), *hz = malloc(bytes);
  for (int i = 0; i < N; i++)
    hx[i] = (float)(i % 1000) * 0.25f, hy[i] = (float)(i % 7);
  void *x, *y, *z;
  OK(tilert_malloc(dev, bytes, &x));
  OK(tilert_malloc(dev, bytes, &y));
  OK(tilert_malloc(dev, bytes, &z));
  OK(tilert_memcpy_htod(dev, x, hx, bytes));
  OK(tilert_memcpy_htod(dev, y, hy, bytes));

  /* vadd on a stream, timed with events. */
  tilert_module *mv = NULL, *ms = NULL, *mk = NULL;
  tilert_kernel *kv = load(dev, "vadd.sm_80.ptx", "vadd", &mv);
  tilert_stream *s;
  tilert_event *e0, *e1;
  OK(tilert_stream_create(dev, &s));
  OK(tilert_event_create(dev, &e0));
  OK(tilert_event_create(dev, &e1));
  if (kv) {
    int64_t n = N - 3;
    tilert_arg a[3] = {tilert_arg_tensor(x, TILERT_F32, 1, &n), tilert_arg_tensor(y, TILERT_F32, 1, &n),
                       tilert_arg_tensor(z, TILERT_F32, 1, &n)};
    OK(tilert_memset8(dev, z, 0, bytes));
    OK(tilert_event_record(e0, s));
    OK(tilert_launch(kv, a, 3, s));
    OK(tilert_event_record(e1, s));
    OK(tilert_stream_synchronize(s));
    float ms_ = -1;
    OK(tilert_event_elapsed_ms(e0, e1, &ms_));
    CHECK(ms_ >= 0 && ms_ < 1000, "elapsed %g ms", ms_);
    OK(tilert_memcpy_dtoh(dev, hz, z, bytes));
    int bad = 0;
    for (int i = 0; i < N; i++)
      bad += hz[i] != (i < N - 3 ? hx[i] + hy[i] : 0.0f);
    CHECK(bad == 0, "vadd: %d wrong elements (tail must stay 0)", bad);
    printf("gpu_runtime: vadd of %d floats: %.3f ms\n", N - 3, ms_);
    /* Argument errors come back before the launch. */
    int64_t n2 = 5;
    a[1] = tilert_arg_tensor(y, TILERT_F32, 1, &n2);
    st = tilert_launch(kv, a, 3, s);
    CHECK(st.code == TILERT_ERROR_SHAPE, "mismatch gave %s", st.message);
    /* Data one element past a 16-byte boundary is fine; half an element is not. */
    a[1] = tilert_arg_tensor((char *)y + 4, TILERT_F32, 1, &n);
    OK(tilert_launch(kv, a, 3, s));
    OK(tilert_stream_synchronize(s));
    OK(tilert_memcpy_dtoh(dev, hz, z, bytes));
    bad = 0;
    for (int i = 0; i < N - 3; i++)
      bad += hz[i] != hx[i] + hy[i + 1];
    CHECK(bad == 0, "vadd with Y one element off: %d wrong elements", bad);
    a[1] = tilert_arg_tensor((char *)y + 2, TILERT_F32, 1, &n);
    st = tilert_launch(kv, a, 3, s);
    CHECK(st.code == TILERT_ERROR_SHAPE && strstr(st.message, "aligned"), "%s", st.message);
    /* An empty problem: 0 blocks, nothing launched, success. */
    int64_t n0 = 0;
    tilert_arg e[3] = {tilert_arg_tensor(NULL, TILERT_F32, 1, &n0), tilert_arg_tensor(NULL, TILERT_F32, 1, &n0),
                       tilert_arg_tensor(NULL, TILERT_F32, 1, &n0)};
    OK(tilert_launch(kv, e, 3, s));
    OK(tilert_stream_synchronize(s));
    st = tilert_module_get_kernel(mv, "nope", &kv);
    CHECK(st.code == TILERT_ERROR_NOT_FOUND, "%s", st.message);
  }

  /* scale: rank-2 strided input (row stride LD), a scalar, a pinned dim. */
  tilert_kernel *ks = load(dev, "scale_d128.sm_80.ptx", "scale", &ms);
  if (ks) {
    int64_t shape[2] = {M, D};
    tilert_arg a[3] = {tilert_arg_tensor(x, TILERT_F32, 2, shape),
                       tilert_arg_tensor(z, TILERT_F32, 2, shape), tilert_arg_scalar(-2.0)};
    a[0].tensor.strides[0] = LD;
    OK(tilert_memset8(dev, z, 0, bytes));
    OK(tilert_launch(ks, a, 3, NULL));
    OK(tilert_synchronize(dev));
    OK(tilert_memcpy_dtoh(dev, hz, z, bytes));
    int bad = 0;
    for (int m = 0; m < M; m++)
      for (int j = 0; j < D; j++)
        bad += hz[m * D + j] != -2.0f * hx[m * LD + j];
    CHECK(bad == 0, "scale: %d wrong elements", bad);
  }

  /* 64 KB of dynamic shared memory: the runtime opts in with cuFuncSetAttribute. */
  tilert_kernel *kk = load(dev, "smem64k.sm_80.ptx", "smem64k", &mk);
  if (kk) {
    int64_t n = 1000;
    tilert_arg a[1] = {tilert_arg_tensor(z, TILERT_F32, 1, &n)};
    OK(tilert_launch(kk, a, 1, NULL));
    OK(tilert_synchronize(dev));
    OK(tilert_memcpy_dtoh(dev, hz, z, sizeof(float) * 1000));
    int bad = 0;
    for (int i = 0; i < 1000; i++)
      bad += hz[i] != (float)i;
    CHECK(bad == 0, "smem64k: %d wrong elements", bad);
  }

  /* Broken PTX: the JIT log reaches the message. */
  tilert_module *mb = NULL;
  st = tilert_module_load_ptx(dev,
                              "// tilec: kernel k\n// tilec: threads 32\n// tilec: grid 1\n"
                              ".version 8.0\n.target sm_80\n.address_size 64\n"
                              ".visible .entry k() { bogus.instruction; }\n",
                              &mb);
  CHECK(st.code == TILERT_ERROR_DRIVER && strstr(st.message, "cuModuleLoadDataEx: CUDA_ERROR_") &&
            st.cu_result != 0,
        "broken PTX gave %s: %s", tilert_code_name(st.code), st.message);
  printf("gpu_runtime: broken PTX -> %s\n", st.message);

  /* Metadata that does not describe its PTX (here vadd's, edited): an error at load, never a
   * launch that reads past its parameters. The count comes from the PTX text; the sizes from
   * cuFuncGetParamInfo (drivers from 12.4: `sizes`, skipped by older ones). */
  static const struct {
    const char *line, *edit, *why;
    bool sizes;
  } lies[] = {
      {"// tilec: arg Z tensor f32 out N\n", "// tilec: arg Z tensor f32 out N\n// tilec: arg S scalar f32\n",
       "takes 4 parameters; its metadata (kernel 'vadd') passes 5", false},
      {"// tilec: arg X tensor f32 in N\n", "// tilec: arg X tensor f32 in N N\n", "passes 5", false},
      {"// tilec: arg Z tensor f32 out N\n", "// tilec: arg Z scalar f32\n", "parameter 2 is 8 bytes in the PTX, 4", true},
  };
  char *vadd = slurp("tests/aot/kernels/vadd.sm_80.ptx");
  for (size_t i = 0; vadd && i < sizeof lies / sizeof lies[0]; i++) {
    char *at = strstr(vadd, lies[i].line), *ptx = calloc(1, strlen(vadd) + 64);
    CHECK(at && ptx, "vadd.sm_80.ptx has no line '%s'", lies[i].line);
    if (!at || !ptx) {
      free(ptx);
      continue;
    }
    size_t head = (size_t)(at - vadd);
    memcpy(ptx, vadd, head);
    strcat(strcpy(ptx + head, lies[i].edit), at + strlen(lies[i].line));
    tilert_module *ml = NULL;
    tilert_kernel *kl = NULL;
    OK(tilert_module_load_ptx(dev, ptx, &ml));
    st = ml ? tilert_module_get_kernel(ml, "vadd", &kl) : st;
    CHECK(ml && (st.code == TILERT_ERROR_BAD_METADATA ? strstr(st.message, lies[i].why) != NULL
                                                       : st.code == TILERT_OK && lies[i].sizes),
          "metadata that lies (%s) gave %s: %s", lies[i].why, tilert_code_name(st.code), st.message);
    printf("gpu_runtime: metadata that lies -> %s\n", st.code ? st.message : "(not checked: driver before 12.4)");
    tilert_module_unload(ml);
    free(ptx);
  }
  free(vadd);

  tilert_event_destroy(e0);
  tilert_event_destroy(e1);
  tilert_stream_destroy(s);
  tilert_module_unload(mv);
  tilert_module_unload(ms);
  tilert_module_unload(mk);
  OK(tilert_free(dev, x));
  OK(tilert_free(dev, y));
  OK(tilert_free(dev, z));
  tilert_device_close(dev);
  free(hx), free(hy), free(hz);
  printf("gpu_runtime: %s (%d failure%s)\n", failures ? "FAILED" : "passed", failures,
         failures == 1 ? "" : "s");
  return failures ? 1 : 0;
}
