/* fake_libcuda.c — a stand-in CUDA driver for tests/check_aot.sh (TILERT_LIBCUDA=it): one device
 * (sm_90) whose JIT fails every module load and fills the whole error-log buffer it is given,
 * with no terminating NUL, as a driver may. The runtime and the generated AOT loader must read
 * no byte past the buffer (the test runs under AddressSanitizer). Entry points the test never
 * calls answer CUDA_SUCCESS and touch nothing. */
#include <string.h>

typedef int CUresult;
enum { INVALID_PTX = 218, JIT_ERROR_LOG_BUFFER = 5, JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6 };

static CUresult driver_version(int *v) { *v = 13000; return 0; }
static CUresult init(unsigned flags) { (void)flags; return 0; }
static CUresult error_name(CUresult r, const char **s) {
  *s = r == INVALID_PTX ? "CUDA_ERROR_INVALID_PTX" : "CUDA_ERROR_FAKE";
  return 0;
}
static CUresult device_count(int *n) { *n = 1; return 0; }
static CUresult device_get(int *d, int ordinal) { *d = ordinal; return 0; }
static CUresult device_name(char *s, int len, int d) {
  (void)d;
  strncpy(s, "Fake GPU", (size_t)len);
  return 0;
}
static CUresult device_attribute(int *v, int attr, int d) {
  (void)d;
  *v = attr == 75 ? 9 : attr == 76 ? 0 : attr == 97 ? 232448 : 65535; /* cc major, minor, smem */
  return 0;
}
static int the_ctx;
static void *current;
static CUresult ctx_retain(void **c, int d) { (void)d; *c = &the_ctx; return 0; }
static CUresult ctx_set(void *c) { current = c; return 0; }
static CUresult ctx_get(void **c) { *c = current; return 0; }
static CUresult ctx_device(int *d) { *d = 0; return 0; }
static CUresult module_load(void **m, const void *image, unsigned n, int *opt, void **val) {
  (void)m, (void)image;
  char *log = NULL;
  size_t size = 0;
  for (unsigned i = 0; i < n; i++) {
    if (opt[i] == JIT_ERROR_LOG_BUFFER)
      log = val[i];
    else if (opt[i] == JIT_ERROR_LOG_BUFFER_SIZE_BYTES)
      size = (size_t)val[i];
  }
  if (log)
    memset(log, 'x', size); /* every byte, no NUL */
  return INVALID_PTX;
}
static CUresult success(void) { return 0; }

CUresult cuGetProcAddress_v2(const char *name, void **fn, int version, unsigned long long flags,
                             int *status) {
  static const struct { const char *name; void *fn; } table[] = {
      {"cuDriverGetVersion", (void *)driver_version}, {"cuInit", (void *)init},
      {"cuGetErrorName", (void *)error_name},        {"cuDeviceGetCount", (void *)device_count},
      {"cuDeviceGet", (void *)device_get},            {"cuDeviceGetName", (void *)device_name},
      {"cuDeviceGetAttribute", (void *)device_attribute},
      {"cuDevicePrimaryCtxRetain", (void *)ctx_retain}, {"cuCtxSetCurrent", (void *)ctx_set},
      {"cuCtxGetCurrent", (void *)ctx_get},          {"cuCtxGetDevice", (void *)ctx_device},
      {"cuModuleLoadDataEx", (void *)module_load},
  };
  (void)version, (void)flags;
  *fn = (void *)success;
  for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
    if (!strcmp(name, table[i].name))
      *fn = table[i].fn;
  *status = 0;
  return 0;
}
