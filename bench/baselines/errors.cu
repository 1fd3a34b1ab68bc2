// errors.cu — the last-error text behind bl_last_error().
#include <stdio.h>

#include "common.cuh"

namespace bl {

static char g_error[512] = "no error";

void set_error_msg(const char *msg) { snprintf(g_error, sizeof g_error, "%s", msg); }

void set_error(const char *what, cudaError_t e) {
  snprintf(g_error, sizeof g_error, "%s: %s (%s)", what, cudaGetErrorName(e), cudaGetErrorString(e));
}

int check_launch(const char *what) {
  cudaError_t e = cudaGetLastError();
  if (e == cudaSuccess) return 0;
  set_error(what, e);
  return static_cast<int>(e);
}

} // namespace bl

extern "C" const char *bl_last_error(void) { return bl::g_error; }
