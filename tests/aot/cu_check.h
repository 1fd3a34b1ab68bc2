/* cu_check.h — the error checks of the GPU programs in tests/aot/ (demo_main.c, tuned_gpu.c):
 * a failed driver or generated-library call prints what failed, by name, and returns 1 from the
 * calling function. */
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

#endif
