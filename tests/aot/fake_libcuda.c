/* fake_libcuda.c — a stand-in CUDA driver for tests/check_aot.sh (TILERT_LIBCUDA=it): one device
 * (sm_90) whose JIT fails every module load and fills the whole error-log buffer it is given,
 * with no terminating NUL, as a driver may. The runtime and the generated AOT loader must read
 * no byte past the buffer (the test runs under AddressSanitizer). Entry points the test never
 * calls answer CUDA_SUCCESS and touch nothing.
 *
 * With FAKE_LIBCUDA_JIT=ok its JIT accepts PTX instead, finds a function only when the loaded
 * image has an entry of that name, and logs what the caller did, for bundle_test.c and
 * ws_test.c to read with fake_libcuda_log(): "load; get NAME; launch NAME GXxGYxGZ THREADS;
 * unload; " and so on, "tmap RANK BOX0xBOX1 SWIZZLE; " for a tensor map, "launch NAME GXxGYxGZ
 * THREADS cluster K; " for cuLaunchKernelEx (132 SMs, any kernel one block per SM and up to 1024
 * threads; clusters of K blocks: 132 / K of them resident). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int CUresult;
enum { INVALID_PTX = 218, NOT_FOUND = 500, JIT_ERROR_LOG_BUFFER = 5, JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6 };

static char calls[8192];

const char *fake_libcuda_log(void) { return calls; }

static void note(const char *fmt, const char *name, unsigned a, unsigned b, unsigned c, unsigned d) {
  size_t used = strlen(calls);
  snprintf(calls + used, sizeof calls - used, fmt, name, a, b, c, d);
}

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
  /* cc major, minor, smem, SMs */
  *v = attr == 75 ? 9 : attr == 76 ? 0 : attr == 97 ? 232448 : attr == 16 ? 132 : 65535;
  return 0;
}
static int the_ctx;
static void *current;
static CUresult ctx_retain(void **c, int d) { (void)d; *c = &the_ctx; return 0; }
static CUresult ctx_set(void *c) { current = c; return 0; }
static CUresult ctx_get(void **c) { *c = current; return 0; }
static CUresult ctx_device(int *d) { *d = 0; return 0; }
static const char *loaded;  /* the PTX of the module loaded last (the handle is its address) */
static char functions[16][128];

static CUresult module_load(void **m, const void *image, unsigned n, int *opt, void **val) {
  const char *jit = getenv("FAKE_LIBCUDA_JIT");
  if (jit && !strcmp(jit, "ok")) {
    loaded = image;
    *m = (void *)&loaded;
    note("load; ", "", 0, 0, 0, 0);
    return 0;
  }
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
static CUresult module_unload(void *m) {
  (void)m;
  note("unload; ", "", 0, 0, 0, 0);
  return 0;
}
static CUresult get_function(void **f, void *m, const char *name) {
  char entry[160];
  (void)m;
  snprintf(entry, sizeof entry, ".entry %s(", name);
  if (!loaded || !strstr(loaded, entry))
    return NOT_FOUND;
  for (int i = 0; i < 16; i++)
    if (!functions[i][0] || !strcmp(functions[i], name)) {
      snprintf(functions[i], sizeof functions[i], "%s", name);
      *f = functions[i];
      note("get %s; ", name, 0, 0, 0, 0);
      return 0;
    }
  return NOT_FOUND;
}
static CUresult func_attribute(void *f, int attr, int value) {
  note("attr %s %u %u; ", f, (unsigned)attr, (unsigned)value, 0, 0);
  return 0;
}
static CUresult launch(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                       unsigned bz, unsigned smem, void *stream, void **params, void **extra) {
  (void)by, (void)bz, (void)smem, (void)stream, (void)extra;
  /* FAKE_LIBCUDA_PARAMS=K (the caller knows the launch has K + 5 parameters): log parameters
   * K .. K+3 as 32-bit integers and whether K+4 is 128-byte aligned (a tensor map) */
  const char *pk = getenv("FAKE_LIBCUDA_PARAMS");
  if (pk) {
    int k = atoi(pk);
    unsigned v[4];
    for (int i = 0; i < 4; i++)
      memcpy(&v[i], params[k + i], 4);
    note("params %s%u %u %u %u ", "", v[0], v[1], v[2], v[3]);
    note("%smap%u; ", "", ((size_t)params[k + 4] & 127) == 0 ? 0 : 1, 0, 0, 0);
  }
  note("launch %s %ux%ux%u %u; ", f, gx, gy, gz, bx);
  return 0;
}
/* The part of CUlaunchConfig and CUlaunchAttribute read here (cuda.h's layout). */
typedef struct LaunchAttribute {
  int id;
  char pad[4];
  union {
    char pad[64];
    unsigned long long align;
    unsigned dim[3];
  } value;
} LaunchAttribute;
typedef struct LaunchConfig {
  unsigned grid[3], block[3], smem;
  void *stream;
  LaunchAttribute *attrs;
  unsigned nattrs;
} LaunchConfig;

/* The cluster size along x a configuration asks for (attribute 4), or 1. */
static unsigned config_cluster(const LaunchConfig *c) {
  for (unsigned i = 0; i < c->nattrs; i++)
    if (c->attrs[i].id == 4)
      return c->attrs[i].value.dim[0];
  return 1;
}
static CUresult launch_ex(const LaunchConfig *c, void *f, void **params, void **extra) {
  CUresult r = launch(f, c->grid[0], c->grid[1], c->grid[2], c->block[0], c->block[1], c->block[2], c->smem,
                      c->stream, params, extra);
  calls[strlen(calls) - 2] = 0; /* "; " of the launch: the cluster joins it */
  note("%s cluster %u; ", "", config_cluster(c), 0, 0, 0);
  return r;
}
static CUresult occupancy_clusters(int *n, void *f, const LaunchConfig *c) {
  (void)f;
  *n = (int)(132 / config_cluster(c));
  return 0;
}
static CUresult func_get_attribute(int *v, int attr, void *f) {
  (void)f;
  *v = attr == 0 ? 1024 : 0; /* max threads per block */
  return 0;
}
static CUresult occupancy(int *blocks, void *f, int threads, size_t smem) {
  (void)f, (void)threads, (void)smem;
  *blocks = 1;
  return 0;
}
static CUresult encode_tiled(void *map, int dtype, unsigned rank, void *base, const unsigned long long *dims,
                             const unsigned long long *strides, const unsigned *box, const unsigned *estride,
                             int interleave, int swizzle, int l2, int oob) {
  (void)dtype, (void)base, (void)dims, (void)strides, (void)estride, (void)interleave, (void)l2, (void)oob;
  memset(map, 0, 128);
  note("tmap %s%u %ux%u %u; ", "", rank, box[0], box[1], (unsigned)swizzle);
  return 0;
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
      {"cuModuleLoadDataEx", (void *)module_load},  {"cuModuleUnload", (void *)module_unload},
      {"cuModuleGetFunction", (void *)get_function}, {"cuFuncSetAttribute", (void *)func_attribute},
      {"cuLaunchKernel", (void *)launch},            {"cuFuncGetAttribute", (void *)func_get_attribute},
      {"cuOccupancyMaxActiveBlocksPerMultiprocessor", (void *)occupancy},
      {"cuTensorMapEncodeTiled", (void *)encode_tiled},
      {"cuLaunchKernelEx", (void *)launch_ex},       {"cuOccupancyMaxActiveClusters", (void *)occupancy_clusters},
  };
  (void)version, (void)flags;
  *fn = (void *)success;
  for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
    if (!strcmp(name, table[i].name))
      *fn = table[i].fn;
  *status = 0;
  return 0;
}
