/* cu_check.h — shared by the GPU programs in tests/aot/ (demo_main.c, tuned_gpu.c,
 * bundle_gpu.c, ws_gpu.c): error checks (a failed driver or generated-library call prints what failed, by
 * name, and returns 1 from the calling function) and the context they run in. Include after
 * cuda.h. */
#ifndef TILEC_TESTS_CU_CHECK_H
#define TILEC_TESTS_CU_CHECK_H

#define CU(call)                                                         \
  do {                                                                   \
    CUresult r_ = (call);                                                \
    if (r_ != CUDA_SUCCESS) {                                            \
      const char *name_ = "?";                                           \
      cuGetErrorName(r_, &name_);                                        \
      fprintf(stderr, "%s: %s\n", #call, name_);                         \
      return 1;                                                          \
    }                                                                    \
  } while (0)

#define TK(call, error_fn)                                               \
  do {                                                                   \
    tilec_result r_ = (call);                                            \
    if (r_ != TILEC_OK) {                                                \
      fprintf(stderr, "%s: %s: %s\n", #call, tilec_result_name(r_),      \
              error_fn());                                               \
      return 1;                                                          \
    }                                                                    \
  } while (0)

/* True, after saying so, when there is no GPU to run on: the program then skips (exit 0). */
static inline int cu_no_device(const char *prog) {
  int count = 0;
  if (cuInit(0) == CUDA_ERROR_NO_DEVICE || (cuDeviceGetCount(&count) == CUDA_SUCCESS && !count)) {
    printf("%s: SKIP (no GPU)\n", prog);
    return 1;
  }
  return 0;
}

static int cu_primary_context(void) {
  CUdevice dev;
  CUcontext ctx;
  CU(cuInit(0));
  CU(cuDeviceGet(&dev, 0));
  CU(cuDevicePrimaryCtxRetain(&ctx, dev));
  CU(cuCtxSetCurrent(ctx));
  return 0;
}

#endif
