/* emit_c.c — ahead-of-time deployment: `tilec --emit=c -o NAME` writes NAME.h and NAME.c.
 *
 * The generated pair embeds the kernel's PTX for every --arch (and, with --cubin, the ptxas
 * output), carries its launch contract as C tables, and exposes NAME_load / NAME_unload /
 * NAME_check / NAME_launch / NAME_error. It depends only on libcuda, dlopen'ed at run time the
 * way libtilert does it (a small loader is emitted into every file, all static). `--link` writes
 * one entry point over several such specializations that picks the first whose contract accepts
 * the arguments. docs/aot.md is the user's guide.
 *
 * The contract comes from the "// tilec:" metadata lines of the PTX, parsed by the runtime's own
 * parser, so the generated checks and the runtime's can never disagree on the format. */
#include "tilec.h"
#include "tilert.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <stddef.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* The static loader and checker every generated .c starts with (see emit_runtime below). */
static const char tk_runtime_src[] =
    "/* ------------------------------------------------------------ loader and checks\n"
    " * The same in every file tilec generates; everything is static, so several generated files\n"
    " * link into one program. Only libcuda is needed, and only at run time: it is dlopen'ed and\n"
    " * every entry point comes from cuGetProcAddress (ABI of CUDA 12.0, which the driver keeps). */\n"
    "#include <dlfcn.h>\n"
    "#include <stdarg.h>\n"
    "#include <stddef.h>\n"
    "#include <stdio.h>\n"
    "#include <stdlib.h>\n"
    "#include <string.h>\n"
    "\n"
    "#if defined(__cplusplus) && __cplusplus >= 201103L\n"
    "#define TK_TLS thread_local\n"
    "#elif defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L\n"
    "#define TK_TLS _Thread_local\n"
    "#elif defined(__GNUC__)\n"
    "#define TK_TLS __thread\n"
    "#else\n"
    "#define TK_TLS\n"
    "#endif\n"
    "\n"
    "/* Driver types and constants with the values of cuda.h, which this file does not include. */\n"
    "typedef int tk_CUresult;\n"
    "typedef struct CUctx_st *tk_CUcontext;\n"
    "typedef struct CUmod_st *tk_CUmodule;\n"
    "typedef struct CUfunc_st *tk_CUfunction;\n"
    "/* CUtensorMap: 128 opaque bytes, 128-byte aligned (TMA reads it from the kernel's parameters). */\n"
    "#if defined(__cplusplus) && __cplusplus >= 201103L\n"
    "#define TK_ALIGN128 alignas(128)\n"
    "#elif defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L\n"
    "#define TK_ALIGN128 _Alignas(128)\n"
    "#elif defined(__GNUC__)\n"
    "#define TK_ALIGN128 __attribute__((aligned(128)))\n"
    "#else\n"
    "#define TK_ALIGN128\n"
    "#endif\n"
    "typedef struct tk_CUtensorMap {\n"
    "  TK_ALIGN128 unsigned long long opaque[16];\n"
    "} tk_CUtensorMap;\n"
    "/* CUlaunchAttribute and CUlaunchConfig (cuLaunchKernelEx), for clusters: the id, padding to 8\n"
    " * bytes, a 64-byte union of values (of which only the cluster's dimensions are used here). */\n"
    "typedef struct tk_CUlaunchAttribute {\n"
    "  int id;\n"
    "  char pad[4];\n"
    "  union {\n"
    "    char pad[64];\n"
    "    unsigned long long align;\n"
    "    unsigned cluster_dim[3];\n"
    "  } value;\n"
    "} tk_CUlaunchAttribute;\n"
    "typedef struct tk_CUlaunchConfig {\n"
    "  unsigned grid[3], block[3], smem;\n"
    "  struct CUstream_st *stream;\n"
    "  tk_CUlaunchAttribute *attrs;\n"
    "  unsigned nattrs;\n"
    "} tk_CUlaunchConfig;\n"
    "enum {\n"
    "  TK_CUDA_ERROR_STUB_LIBRARY = 34,\n"
    "  TK_CUDA_ERROR_NO_DEVICE = 100,\n"
    "  TK_CU_JIT_ERROR_LOG_BUFFER = 5,\n"
    "  TK_CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6,\n"
    "  TK_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75,\n"
    "  TK_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76,\n"
    "  TK_CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8,\n"
    "  TK_ABI_VERSION = 12000,\n"
    "  TK_DEFAULT_SMEM = 48 * 1024,\n"
    "  /* the warp-specialized entry (sm_90a): occupancy, TMA tensor maps, the persistent walk */\n"
    "  TK_CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16,\n"
    "  TK_CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 0,\n"
    "  TK_CU_TENSOR_MAP_DATA_TYPE_FLOAT16 = 6,\n"
    "  TK_CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 = 9,\n"
    "  TK_CU_TENSOR_MAP_INTERLEAVE_NONE = 0,\n"
    "  TK_CU_TENSOR_MAP_SWIZZLE_32B = 1,\n"
    "  TK_CU_TENSOR_MAP_SWIZZLE_64B = 2,\n"
    "  TK_CU_TENSOR_MAP_SWIZZLE_128B = 3,\n"
    "  TK_CU_TENSOR_MAP_L2_PROMOTION_L2_256B = 3,\n"
    "  TK_CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE = 0,\n"
    "  TK_MAX_TMAPS = 8,\n"
    "  /* clusters (sm_90): launched with cuLaunchKernelEx */\n"
    "  TK_CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION = 4\n"
    "};\n"
    "#ifdef CUDA_VERSION /* compiled with cuda.h in sight: prove the copies above match it */\n"
    "typedef char tk_constants_match_cuda_h[\n"
    "    ((int)TK_CUDA_ERROR_STUB_LIBRARY == (int)CUDA_ERROR_STUB_LIBRARY &&\n"
    "     (int)TK_CUDA_ERROR_NO_DEVICE == (int)CUDA_ERROR_NO_DEVICE &&\n"
    "     (int)TK_CU_JIT_ERROR_LOG_BUFFER == (int)CU_JIT_ERROR_LOG_BUFFER &&\n"
    "     (int)TK_CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES == (int)CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES &&\n"
    "     (int)TK_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR ==\n"
    "         (int)CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR &&\n"
    "     (int)TK_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR ==\n"
    "         (int)CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR &&\n"
    "     (int)TK_CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES ==\n"
    "         (int)CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES &&\n"
    "     (int)TK_CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT ==\n"
    "         (int)CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT &&\n"
    "     (int)TK_CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK == (int)CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK &&\n"
    "     (int)TK_CU_TENSOR_MAP_DATA_TYPE_FLOAT16 == (int)CU_TENSOR_MAP_DATA_TYPE_FLOAT16 &&\n"
    "     (int)TK_CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 == (int)CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 &&\n"
    "     (int)TK_CU_TENSOR_MAP_INTERLEAVE_NONE == (int)CU_TENSOR_MAP_INTERLEAVE_NONE &&\n"
    "     (int)TK_CU_TENSOR_MAP_SWIZZLE_32B == (int)CU_TENSOR_MAP_SWIZZLE_32B &&\n"
    "     (int)TK_CU_TENSOR_MAP_SWIZZLE_64B == (int)CU_TENSOR_MAP_SWIZZLE_64B &&\n"
    "     (int)TK_CU_TENSOR_MAP_SWIZZLE_128B == (int)CU_TENSOR_MAP_SWIZZLE_128B &&\n"
    "     (int)TK_CU_TENSOR_MAP_L2_PROMOTION_L2_256B == (int)CU_TENSOR_MAP_L2_PROMOTION_L2_256B &&\n"
    "     (int)TK_CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE == (int)CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE &&\n"
    "     (int)TK_CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION == (int)CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION &&\n"
    "     sizeof(CUtensorMap) == 128 && sizeof(tk_CUlaunchAttribute) == sizeof(CUlaunchAttribute) &&\n"
    "     offsetof(tk_CUlaunchAttribute, value) == offsetof(CUlaunchAttribute, value) &&\n"
    "     sizeof(tk_CUlaunchConfig) == sizeof(CUlaunchConfig) &&\n"
    "     offsetof(tk_CUlaunchConfig, smem) == offsetof(CUlaunchConfig, sharedMemBytes) &&\n"
    "     offsetof(tk_CUlaunchConfig, stream) == offsetof(CUlaunchConfig, hStream) &&\n"
    "     offsetof(tk_CUlaunchConfig, attrs) == offsetof(CUlaunchConfig, attrs) &&\n"
    "     offsetof(tk_CUlaunchConfig, nattrs) == offsetof(CUlaunchConfig, numAttrs)) ? 1 : -1];\n"
    "#endif\n"
    "\n"
    "typedef struct tk_driver {\n"
    "  tk_CUresult (*Init)(unsigned);\n"
    "  tk_CUresult (*GetErrorName)(tk_CUresult, const char **);\n"
    "  tk_CUresult (*CtxGetCurrent)(tk_CUcontext *);\n"
    "  tk_CUresult (*CtxSetCurrent)(tk_CUcontext);\n"
    "  tk_CUresult (*CtxGetDevice)(int *);\n"
    "  tk_CUresult (*DeviceGet)(int *, int);\n"
    "  tk_CUresult (*DeviceGetAttribute)(int *, int, int);\n"
    "  tk_CUresult (*DevicePrimaryCtxRetain)(tk_CUcontext *, int);\n"
    "  tk_CUresult (*DevicePrimaryCtxRelease)(int);\n"
    "  tk_CUresult (*ModuleLoadDataEx)(tk_CUmodule *, const void *, unsigned, int *, void **);\n"
    "  tk_CUresult (*ModuleUnload)(tk_CUmodule);\n"
    "  tk_CUresult (*ModuleGetFunction)(tk_CUfunction *, tk_CUmodule, const char *);\n"
    "  tk_CUresult (*FuncSetAttribute)(tk_CUfunction, int, int);\n"
    "  tk_CUresult (*FuncGetAttribute)(int *, int, tk_CUfunction);\n"
    "  tk_CUresult (*OccupancyMaxActiveBlocksPerMultiprocessor)(int *, tk_CUfunction, int, size_t);\n"
    "  tk_CUresult (*TensorMapEncodeTiled)(struct tk_CUtensorMap *, int, unsigned, void *,\n"
    "                                      const unsigned long long *, const unsigned long long *,\n"
    "                                      const unsigned *, const unsigned *, int, int, int, int);\n"
    "  tk_CUresult (*LaunchKernel)(tk_CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,\n"
    "                              unsigned, unsigned, struct CUstream_st *, void **, void **);\n"
    "  tk_CUresult (*LaunchKernelEx)(const tk_CUlaunchConfig *, tk_CUfunction, void **, void **);\n"
    "  tk_CUresult (*OccupancyMaxActiveClusters)(int *, tk_CUfunction, const tk_CUlaunchConfig *);\n"
    "  tk_CUresult (*MemsetD2D8Async)(unsigned long long, size_t, unsigned char, size_t, size_t,\n"
    "                                 struct CUstream_st *);\n"
    "} tk_driver;\n"
    "typedef tk_CUresult (*tk_getproc)(const char *, void **, int, unsigned long long, int *);\n"
    "\n"
    "static tk_driver tk_drv;\n"
    "static int tk_drv_state;           /* 0: not tried; 1: loaded; -1: failed with tk_drv_result */\n"
    "static tilec_result tk_drv_result;\n"
    "static char tk_drv_err[512];       /* the message of that failure, repeated to later callers */\n"
    "static TK_TLS char tk_msg[512];    /* the last failure on this thread */\n"
    "\n"
    "#if defined(__GNUC__)\n"
    "__attribute__((format(printf, 2, 3)))\n"
    "#endif\n"
    "static tilec_result tk_fail(tilec_result r, const char *fmt, ...) {\n"
    "  va_list ap;\n"
    "  va_start(ap, fmt);\n"
    "  vsnprintf(tk_msg, sizeof tk_msg, fmt, ap);\n"
    "  va_end(ap);\n"
    "  return r;\n"
    "}\n"
    "\n"
    "static tilec_result tk_cu_fail(const char *call, tk_CUresult r, const char *extra) {\n"
    "  const char *name = NULL;\n"
    "  if (!tk_drv.GetErrorName || tk_drv.GetErrorName(r, &name) != 0 || !name)\n"
    "    name = \"unknown CUresult\";\n"
    "  return tk_fail(TILEC_ERROR_DRIVER, \"%s: %s (%d)%s%s\", call, name, r, extra[0] ? \": \" : \"\",\n"
    "                 extra);\n"
    "}\n"
    "\n"
    "#define TK_CALL(name, expr)                        \\\n"
    "  do {                                             \\\n"
    "    tk_CUresult tk_r_ = (expr);                    \\\n"
    "    if (tk_r_ != 0)                                \\\n"
    "      return tk_cu_fail(name, tk_r_, \"\");          \\\n"
    "  } while (0)\n"
    "\n"
    "static tilec_result tk_driver_open(void) {\n"
    "  const char *path = getenv(\"TILERT_LIBCUDA\"); /* tests point it at a missing library */\n"
    "  if (!path || !*path)\n"
    "    path = \"libcuda.so.1\";\n"
    "  void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);\n"
    "  if (!lib) {\n"
    "    const char *why = dlerror();\n"
    "    return tk_fail(TILEC_ERROR_NO_DRIVER, \"no CUDA driver: dlopen(%s) failed: %s\", path,\n"
    "                   why ? why : \"?\");\n"
    "  }\n"
    "  void *sym = dlsym(lib, \"cuGetProcAddress_v2\");\n"
    "  if (!sym)\n"
    "    return tk_fail(TILEC_ERROR_NO_DRIVER, \"%s has no cuGetProcAddress_v2 (not a CUDA 12+ driver)\",\n"
    "                   path);\n"
    "  tk_getproc get;\n"
    "  memcpy(&get, &sym, sizeof get); /* ISO C has no cast from void * to a function pointer */\n"
    "  static const struct {\n"
    "    const char *name;\n"
    "    void *slot;\n"
    "  } syms[] = {\n"
    "      {\"cuInit\", (void *)&tk_drv.Init},\n"
    "      {\"cuGetErrorName\", (void *)&tk_drv.GetErrorName},\n"
    "      {\"cuCtxGetCurrent\", (void *)&tk_drv.CtxGetCurrent},\n"
    "      {\"cuCtxSetCurrent\", (void *)&tk_drv.CtxSetCurrent},\n"
    "      {\"cuCtxGetDevice\", (void *)&tk_drv.CtxGetDevice},\n"
    "      {\"cuDeviceGet\", (void *)&tk_drv.DeviceGet},\n"
    "      {\"cuDeviceGetAttribute\", (void *)&tk_drv.DeviceGetAttribute},\n"
    "      {\"cuDevicePrimaryCtxRetain\", (void *)&tk_drv.DevicePrimaryCtxRetain},\n"
    "      {\"cuDevicePrimaryCtxRelease\", (void *)&tk_drv.DevicePrimaryCtxRelease},\n"
    "      {\"cuModuleLoadDataEx\", (void *)&tk_drv.ModuleLoadDataEx},\n"
    "      {\"cuModuleUnload\", (void *)&tk_drv.ModuleUnload},\n"
    "      {\"cuModuleGetFunction\", (void *)&tk_drv.ModuleGetFunction},\n"
    "      {\"cuFuncSetAttribute\", (void *)&tk_drv.FuncSetAttribute},\n"
    "      {\"cuFuncGetAttribute\", (void *)&tk_drv.FuncGetAttribute},\n"
    "      {\"cuOccupancyMaxActiveBlocksPerMultiprocessor\",\n"
    "       (void *)&tk_drv.OccupancyMaxActiveBlocksPerMultiprocessor},\n"
    "      {\"cuTensorMapEncodeTiled\", (void *)&tk_drv.TensorMapEncodeTiled},\n"
    "      {\"cuLaunchKernel\", (void *)&tk_drv.LaunchKernel},\n"
    "      {\"cuLaunchKernelEx\", (void *)&tk_drv.LaunchKernelEx},\n"
    "      {\"cuOccupancyMaxActiveClusters\", (void *)&tk_drv.OccupancyMaxActiveClusters},\n"
    "      {\"cuMemsetD2D8Async\", (void *)&tk_drv.MemsetD2D8Async},\n"
    "  };\n"
    "  for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++) {\n"
    "    void *p = NULL;\n"
    "    int found = -1;\n"
    "    tk_CUresult r = get(syms[i].name, &p, TK_ABI_VERSION, 0, &found);\n"
    "    if (r == TK_CUDA_ERROR_STUB_LIBRARY)\n"
    "      return tk_fail(TILEC_ERROR_NO_DRIVER, \"%s is the CUDA toolkit's stub library, not a driver\",\n"
    "                     path);\n"
    "    if (r != 0 || found != 0 || !p)\n"
    "      return tk_fail(TILEC_ERROR_NO_DRIVER, \"cuGetProcAddress(%s) failed (%d): driver too old?\",\n"
    "                     syms[i].name, r);\n"
    "    memcpy(syms[i].slot, &p, sizeof p);\n"
    "  }\n"
    "  tk_CUresult r = tk_drv.Init(0);\n"
    "  if (r == TK_CUDA_ERROR_NO_DEVICE)\n"
    "    return tk_fail(TILEC_ERROR_NO_DEVICE, \"cuInit: CUDA_ERROR_NO_DEVICE: no CUDA device\");\n"
    "  if (r == TK_CUDA_ERROR_STUB_LIBRARY)\n"
    "    return tk_fail(TILEC_ERROR_NO_DRIVER, \"%s is the CUDA toolkit's stub library, not a driver\",\n"
    "                   path);\n"
    "  TK_CALL(\"cuInit\", r);\n"
    "  return TILEC_OK;\n"
    "}\n"
    "\n"
    "static tilec_result tk_driver_load(void) {\n"
    "  if (tk_drv_state == 1)\n"
    "    return TILEC_OK;\n"
    "  if (tk_drv_state != 0)\n"
    "    return tk_fail(tk_drv_result, \"%s\", tk_drv_err);\n"
    "  tilec_result r = tk_driver_open();\n"
    "  if (r != TILEC_OK) {\n"
    "    memcpy(tk_drv_err, tk_msg, sizeof tk_drv_err);\n"
    "    tk_drv_state = -1;\n"
    "    tk_drv_result = r;\n"
    "    memset(&tk_drv, 0, sizeof tk_drv);\n"
    "    return r;\n"
    "  }\n"
    "  tk_drv_state = 1;\n"
    "  return TILEC_OK;\n"
    "}\n"
    "\n"
    "/* ------------------------------------------------------------ the kernel's contract */\n"
    "\n"
    "typedef int64_t (*tk_expr)(const int64_t *d, int *bad);\n"
    "\n"
    "/* A TMA tensor map the warp-specialized entry takes: the tensor argument, the swizzle (bytes)\n"
    " * and the box one copy moves (outermost dimension first). */\n"
    "typedef struct tk_tmap {\n"
    "  int arg;\n"
    "  int swizzle;\n"
    "  int box[4];\n"
    "} tk_tmap;\n"
    "\n"
    "/* An image's warp-specialized entry point of a kernel (sm_90a: TMA, mbarrier rings, a producer\n"
    " * warpgroup; name NULL where there is none). libtilert's rules pick it: docs/aot.md. */\n"
    "typedef struct tk_ws {\n"
    "  const char *name;\n"
    "  int threads, smem;\n"
    "  int persistent;                  /* walks tiles: the logical grid and the raster group follow\n"
    "                                      the dims as 4 more 32-bit parameters */\n"
    "  int groups;                      /* consumer groups taking turns on tiles */\n"
    "  int tile_group;                  /* persistent: rows of y per raster group (TILERT_TILE_GROUP\n"
    "                                      overrides) */\n"
    "  int walk_rows;                   /* persistent: a row walk, in chunks (tk_walk_chunk) */\n"
    "  int cluster;                     /* persistent: 2 walks pairs of tiles, a cluster of two blocks\n"
    "                                      multicasting their shared loads (1: none) */\n"
    "  int cluster_axis;                /* the pair's grid axis (0: x, 1: y) */\n"
    "  int ntmaps;\n"
    "  const tk_tmap *tmaps;            /* passed by value after every other parameter */\n"
    "} tk_ws;\n"
    "\n"
    "typedef struct tk_arg {\n"
    "  const char *name;\n"
    "  int is_tensor;\n"
    "  int is_out;\n"
    "  int dtype;                       /* tilec_dtype */\n"
    "  int rank;\n"
    "  int dims[4];                     /* index into the kernel's dims */\n"
    "  int zero_init;                   /* out tensor declared `= 0`: zeroed before each launch */\n"
    "} tk_arg;\n"
    "\n"
    "typedef struct tk_dim {\n"
    "  const char *name;\n"
    "  int pinned;\n"
    "  int64_t value;\n"
    "} tk_dim;\n"
    "\n"
    "typedef struct tk_image {\n"
    "  const char *arch;                /* \"sm_90a\" */\n"
    "  int cc;                          /* 90 */\n"
    "  int arch_specific;               /* sm_90a: runs on exactly that compute capability */\n"
    "  int is_cubin;\n"
    "  const void *data;\n"
    "} tk_image;\n"
    "\n"
    "typedef struct tk_kernel {\n"
    "  const char *name;\n"
    "  int threads;\n"
    "  const tk_arg *args;\n"
    "  int nargs;\n"
    "  const tk_dim *dims;\n"
    "  int ndims;\n"
    "  tk_expr grid[3];\n"
    "  const char *grid_text[3];\n"
    "  const tk_expr *reqs;\n"
    "  const char *const *req_text;\n"
    "  const unsigned long long *req_dims; /* bit i: the requirement names dim i */\n"
    "  int nreqs;\n"
    "  const int *smem;                    /* dynamic shared bytes per block, per module image */\n"
    "  const struct tk_ws *ws;             /* the warp-specialized entry, per module image */\n"
    "  int full;                           /* its full-size entry's index in the module, or -1 */\n"
    "  int cluster;                        /* blocks per cluster along x (`cluster (K)`; 1: none) */\n"
    "  int aligned;                        /* 16: compiled for tensors on 16-byte boundaries whose\n"
    "                                         strides (but the last) are multiples of 16 bytes */\n"
    "} tk_kernel;\n"
    "\n"
    "/* The file's one module: an image per arch (PTX, and cubin), each with every kernel. */\n"
    "typedef struct tk_module {\n"
    "  const char *name;                /* its kernels' names, for messages */\n"
    "  const tk_image *images;\n"
    "  int nimages;\n"
    "  const char *image_list;          /* \"sm_90a (cubin), sm_90a (PTX)\" */\n"
    "  const tk_kernel *const *kernels;\n"
    "  int nkernels;\n"
    "} tk_module;\n"
    "\n"
    "typedef struct tk_state {\n"
    "  tk_CUcontext ctx;                /* where the module was loaded */\n"
    "  tk_CUmodule mod;\n"
    "  int image;                       /* the loaded one, an index into the module's images */\n"
    "  int retained_dev;                /* >= 0: P_load retained this device's primary context */\n"
    "  tk_CUfunction *fn;               /* per kernel of the module, found by name at load */\n"
    "  tk_CUfunction *ws_fn;            /* its warp-specialized entry where it runs, else NULL */\n"
    "  long long *ws_walkers;           /* blocks a persistent entry walks tiles with (0: none) */\n"
    "} tk_state;\n"
    "\n"
    "static const char *const tk_dtype_names[] = {\"bool\", \"i32\", \"f16\", \"bf16\", \"f32\"};\n"
    "static const int tk_dtype_size[] = {1, 4, 2, 2, 4};\n"
    "\n"
    "static const char *tk_dtype_name(int t) {\n"
    "  return t >= 0 && t < 5 ? tk_dtype_names[t] : \"?\";\n"
    "}\n"
    "\n"
    "/* Checked integer arithmetic for grid and requirement expressions. */\n"
    "static int64_t tk_op(char op, int64_t a, int64_t b, int *bad) {\n"
    "  const int64_t mx = INT64_MAX, mn = INT64_MIN;\n"
    "  switch (op) {\n"
    "  case '+':\n"
    "    if ((b > 0 && a > mx - b) || (b < 0 && a < mn - b))\n"
    "      break;\n"
    "    return a + b;\n"
    "  case '-':\n"
    "    if ((b < 0 && a > mx + b) || (b > 0 && a < mn + b))\n"
    "      break;\n"
    "    return a - b;\n"
    "  case '*':\n"
    "    if ((a > 0 && b > 0 && a > mx / b) || (a > 0 && b < 0 && b < mn / a) ||\n"
    "        (a < 0 && b > 0 && a < mn / b) || (a < 0 && b < 0 && a < mx / b))\n"
    "      break;\n"
    "    return a * b;\n"
    "  case '/':\n"
    "  case '%':\n"
    "  case 'c':\n"
    "    if (b == 0 || (a == mn && b == -1))\n"
    "      break;\n"
    "    if (op == '/')\n"
    "      return a / b;\n"
    "    if (op == '%')\n"
    "      return a % b;\n"
    "    return a / b + (a % b != 0 && (a < 0) == (b < 0));\n"
    "  case 'm':\n"
    "    return a < b ? a : b;\n"
    "  case 'M':\n"
    "    return a > b ? a : b;\n"
    "  }\n"
    "  *bad = 1;\n"
    "  return 0;\n"
    "}\n"
    "\n"
    "/* \"N = 3000, M = 4\" for the dims in mask. */\n"
    "static void tk_dim_values(const tk_kernel *k, unsigned long long mask, const int64_t *d, char *buf,\n"
    "                          size_t len) {\n"
    "  size_t used = 0;\n"
    "  buf[0] = 0;\n"
    "  for (int i = 0; i < k->ndims && i < 64; i++) {\n"
    "    if (!(mask >> i & 1))\n"
    "      continue;\n"
    "    int w = snprintf(buf + used, len - used, \"%s%s = %lld\", used ? \", \" : \"\", k->dims[i].name,\n"
    "                     (long long)d[i]);\n"
    "    if (w < 0 || (size_t)w >= len - used)\n"
    "      return;\n"
    "    used += (size_t)w;\n"
    "  }\n"
    "}\n"
    "\n"
    "/* Bytes from t->data to the end of its last element (0 when empty); -1 when an element offset\n"
    " * overflows int64 or the address space. Strides are positive (checked before). */\n"
    "static int64_t tk_bytes(const tilec_tensor *t) {\n"
    "  int64_t last = 0, esize = tk_dtype_size[t->dtype];\n"
    "  for (int i = 0; i < t->rank; i++) {\n"
    "    if (t->shape[i] == 0)\n"
    "      return 0;\n"
    "    if (t->shape[i] - 1 > (INT64_MAX - last) / t->strides[i])\n"
    "      return -1;\n"
    "    last += (t->shape[i] - 1) * t->strides[i];\n"
    "  }\n"
    "  if (last >= INT64_MAX / esize || t->data > ~0ULL - (unsigned long long)((last + 1) * esize))\n"
    "    return -1;\n"
    "  return (last + 1) * esize;\n"
    "}\n"
    "\n"
    "/* Whether two elements of t share an address: sorted by stride, each axis must step over the\n"
    " * whole extent of the axes inside it (axes of size 1 do not count). */\n"
    "static int tk_self_overlapping(const tilec_tensor *t) {\n"
    "  int order[4], n = 0;\n"
    "  int64_t extent = 1;\n"
    "  for (int i = 0; i < t->rank; i++)\n"
    "    if (t->shape[i] > 1) {\n"
    "      int j = n++;\n"
    "      for (; j > 0 && t->strides[order[j - 1]] > t->strides[i]; j--)\n"
    "        order[j] = order[j - 1];\n"
    "      order[j] = i;\n"
    "    }\n"
    "  for (int k = 0; k < n; k++) {\n"
    "    if (t->strides[order[k]] < extent)\n"
    "      return 1;\n"
    "    extent += t->strides[order[k]] * (t->shape[order[k]] - 1);\n"
    "  }\n"
    "  return 0;\n"
    "}\n"
    "\n"
    "static int tk_same_view(const tilec_tensor *a, const tilec_tensor *b) {\n"
    "  if (a->data != b->data || a->dtype != b->dtype || a->rank != b->rank)\n"
    "    return 0;\n"
    "  for (int i = 0; i < a->rank; i++)\n"
    "    if (a->shape[i] != b->shape[i] || (a->shape[i] > 1 && a->strides[i] != b->strides[i]))\n"
    "      return 0;\n"
    "  return 1;\n"
    "}\n"
    "\n"
    "/* An output's elements are distinct and share no byte with another tensor, except the very same\n"
    " * view of an input (in place): otherwise blocks race on the GPU. */\n"
    "static tilec_result tk_check_outputs(const tk_kernel *k, const tilec_tensor *const *t) {\n"
    "  for (int i = 0; i < k->nargs; i++) {\n"
    "    int64_t ti = k->args[i].is_tensor && k->args[i].is_out ? tk_bytes(t[i]) : 0;\n"
    "    if (ti <= 0)\n"
    "      continue;\n"
    "    if (tk_self_overlapping(t[i]))\n"
    "      return tk_fail(TILEC_ERROR_SHAPE,\n"
    "                     \"output '%s': its strides make several elements share an address\",\n"
    "                     k->args[i].name);\n"
    "    for (int j = 0; j < k->nargs; j++) {\n"
    "      int64_t tj = j != i && k->args[j].is_tensor ? tk_bytes(t[j]) : 0;\n"
    "      if (tj <= 0 || t[i]->data >= t[j]->data + (unsigned long long)tj ||\n"
    "          t[j]->data >= t[i]->data + (unsigned long long)ti)\n"
    "        continue;\n"
    "      if (!k->args[j].is_out && tk_same_view(t[i], t[j])) {\n"
    "        if (k->args[i].zero_init)\n"
    "          return tk_fail(TILEC_ERROR_SHAPE, \"output '%s' is declared '= 0' and is the same view as \"\n"
    "                         \"input '%s': the launch zeroes it before the kernel reads the input\",\n"
    "                         k->args[i].name, k->args[j].name);\n"
    "        continue; /* in place */\n"
    "      }\n"
    "      return tk_fail(TILEC_ERROR_SHAPE, \"output '%s' overlaps %s '%s' in memory (only the very \"\n"
    "                     \"same view of an input may be written in place)\", k->args[i].name,\n"
    "                     k->args[j].is_out ? \"output\" : \"input\", k->args[j].name);\n"
    "    }\n"
    "  }\n"
    "  return TILEC_OK;\n"
    "}\n"
    "\n"
    "static tilec_result tk_check_tensor(const tk_arg *a, const tilec_tensor *t) {\n"
    "  if (!t)\n"
    "    return tk_fail(TILEC_ERROR_INVALID_ARGUMENT, \"argument '%s': tensor pointer is NULL\", a->name);\n"
    "  if ((int)t->dtype != a->dtype)\n"
    "    return tk_fail(TILEC_ERROR_INVALID_ARGUMENT, \"argument '%s' must be %s, got %s\", a->name,\n"
    "                   tk_dtype_name(a->dtype), tk_dtype_name((int)t->dtype));\n"
    "  if (t->rank != a->rank)\n"
    "    return tk_fail(TILEC_ERROR_SHAPE, \"argument '%s' must have rank %d, got rank %d\", a->name,\n"
    "                   a->rank, t->rank);\n"
    "  int empty = 0;\n"
    "  for (int i = 0; i < t->rank; i++) {\n"
    "    if (t->shape[i] < 0 || t->shape[i] > 2147483647)\n"
    "      return tk_fail(TILEC_ERROR_SHAPE, \"argument '%s': size %lld of axis %d is out of range\",\n"
    "                     a->name, (long long)t->shape[i], i);\n"
    "    empty |= t->shape[i] == 0;\n"
    "  }\n"
    "  if (!t->data && !empty)\n"
    "    return tk_fail(TILEC_ERROR_INVALID_ARGUMENT, \"argument '%s': data pointer is NULL\", a->name);\n"
    "  if (t->data % tk_dtype_size[a->dtype] != 0)\n"
    "    return tk_fail(TILEC_ERROR_SHAPE,\n"
    "                   \"argument '%s': data pointer 0x%llx is not aligned to its element size (%d bytes)\",\n"
    "                   a->name, t->data, tk_dtype_size[a->dtype]);\n"
    "  if (t->strides[t->rank - 1] != 1)\n"
    "    return tk_fail(TILEC_ERROR_SHAPE,\n"
    "                   \"argument '%s': the innermost stride must be 1 (contiguous), got %lld\", a->name,\n"
    "                   (long long)t->strides[t->rank - 1]);\n"
    "  for (int i = 0; i < t->rank - 1; i++)\n"
    "    if (t->strides[i] <= 0)\n"
    "      return tk_fail(TILEC_ERROR_SHAPE, \"argument '%s': stride %lld of axis %d must be > 0\",\n"
    "                     a->name, (long long)t->strides[i], i);\n"
    "  if (tk_bytes(t) < 0)\n"
    "    return tk_fail(TILEC_ERROR_SHAPE,\n"
    "                   \"argument '%s': its shape and strides reach past 2^63 bytes (an element \"\n"
    "                   \"offset overflows)\", a->name);\n"
    "  return TILEC_OK;\n"
    "}\n"
    "\n"
    "/* Checks every argument, binds the dims and computes the grid (the launch contract). */\n"
    "static tilec_result tk_bind(const tk_kernel *k, const tilec_tensor *const *t, int64_t *d,\n"
    "                            int64_t grid[3]) {\n"
    "  int src[65];\n"
    "  (void)tk_op; /* used by the expressions of most kernels, not all */\n"
    "  for (int i = 0; i < k->ndims; i++) {\n"
    "    d[i] = k->dims[i].pinned ? k->dims[i].value : -1;\n"
    "    src[i] = -1;\n"
    "  }\n"
    "  for (int i = 0; i < k->nargs; i++) {\n"
    "    const tk_arg *a = &k->args[i];\n"
    "    if (!a->is_tensor)\n"
    "      continue;\n"
    "    tilec_result r = tk_check_tensor(a, t[i]);\n"
    "    if (r != TILEC_OK)\n"
    "      return r;\n"
    "    for (int ax = 0; ax < a->rank; ax++) {\n"
    "      const tk_dim *dim = &k->dims[a->dims[ax]];\n"
    "      int64_t n = t[i]->shape[ax];\n"
    "      int di = a->dims[ax];\n"
    "      if (dim->pinned && n != dim->value)\n"
    "        return tk_fail(TILEC_ERROR_SHAPE,\n"
    "                       \"argument '%s': axis %d (%s) is %lld, but the kernel was compiled for \"\n"
    "                       \"%s = %lld\",\n"
    "                       a->name, ax, dim->name, (long long)n, dim->name, (long long)dim->value);\n"
    "      if (dim->pinned)\n"
    "        continue;\n"
    "      if (src[di] < 0) {\n"
    "        d[di] = n;\n"
    "        src[di] = i;\n"
    "      } else if (d[di] != n) {\n"
    "        return tk_fail(TILEC_ERROR_SHAPE, \"dim %s: argument '%s' has %lld but argument '%s' has %lld\",\n"
    "                       dim->name, k->args[src[di]].name, (long long)d[di], a->name, (long long)n);\n"
    "      }\n"
    "    }\n"
    "  }\n"
    "  tilec_result out = tk_check_outputs(k, t);\n"
    "  if (out != TILEC_OK)\n"
    "    return out;\n"
    "  for (int r = 0; r < k->nreqs; r++) {\n"
    "    int bad = 0;\n"
    "    int64_t v = k->reqs[r](d, &bad);\n"
    "    char vals[256];\n"
    "    tk_dim_values(k, k->req_dims[r], d, vals, sizeof vals);\n"
    "    if (bad)\n"
    "      return tk_fail(TILEC_ERROR_SHAPE,\n"
    "                     \"requirement '%s': division by zero or overflow (%s)\", k->req_text[r], vals);\n"
    "    if (!v)\n"
    "      return tk_fail(TILEC_ERROR_REQUIREMENT, \"requirement '%s' failed%s%s\", k->req_text[r],\n"
    "                     vals[0] ? \": \" : \"\", vals);\n"
    "  }\n"
    "  /* 0 blocks: an empty launch (a no-op), only for an empty problem; NULL data only then */\n"
    "  int empty = 0, null_arg = -1;\n"
    "  for (int i = 0; i < k->nargs; i++) {\n"
    "    if (!k->args[i].is_tensor)\n"
    "      continue;\n"
    "    for (int ax = 0; ax < t[i]->rank; ax++)\n"
    "      empty |= t[i]->shape[ax] == 0;\n"
    "    if (!t[i]->data && null_arg < 0)\n"
    "      null_arg = i;\n"
    "  }\n"
    "  for (int ax = 0; ax < 3; ax++) {\n"
    "    int bad = 0;\n"
    "    grid[ax] = k->grid[ax](d, &bad);\n"
    "    int64_t limit = ax == 0 ? 2147483647 : 65535;\n"
    "    if (bad)\n"
    "      return tk_fail(TILEC_ERROR_SHAPE, \"grid axis %c (%s): division by zero or overflow\",\n"
    "                     \"xyz\"[ax], k->grid_text[ax]);\n"
    "    if (grid[ax] < !empty || grid[ax] > limit)\n"
    "      return tk_fail(TILEC_ERROR_SHAPE, \"grid axis %c (%s) is %lld, outside %d..%lld\", \"xyz\"[ax],\n"
    "                     k->grid_text[ax], (long long)grid[ax], !empty, (long long)limit);\n"
    "  }\n"
    "  if (grid[0] % k->cluster)\n"
    "    return tk_fail(TILEC_ERROR_SHAPE, \"%s: grid x is %lld, not a multiple of its cluster of %d blocks\",\n"
    "                   k->name, (long long)grid[0], k->cluster);\n"
    "  if (null_arg >= 0 && grid[0] && grid[1] && grid[2])\n"
    "    return tk_fail(TILEC_ERROR_INVALID_ARGUMENT,\n"
    "                   \"argument '%s': data pointer is NULL (allowed only when the launch is empty)\",\n"
    "                   k->args[null_arg].name);\n"
    "  return TILEC_OK;\n"
    "}\n"
    "\n"
    "/* The best image for compute capability cc: a cubin built for it (same major, not newer), else\n"
    " * the newest PTX not newer than the device (the driver JIT-compiles it). */\n"
    "static int tk_pick(const tk_module *mod, int cc) {\n"
    "  int best = -1;\n"
    "  for (int i = 0; i < mod->nimages; i++) {\n"
    "    const tk_image *m = &mod->images[i], *b = best < 0 ? NULL : &mod->images[best];\n"
    "    int ok = m->arch_specific ? m->cc == cc\n"
    "                              : (m->is_cubin ? m->cc / 10 == cc / 10 && m->cc <= cc : m->cc <= cc);\n"
    "    if (!ok)\n"
    "      continue;\n"
    "    if (!b || m->is_cubin > b->is_cubin || (m->is_cubin == b->is_cubin && m->cc > b->cc))\n"
    "      best = i;\n"
    "  }\n"
    "  return best;\n"
    "}\n"
    "\n"
    "/* A launch in clusters of `cluster` blocks along x, for cuLaunchKernelEx and\n"
    " * cuOccupancyMaxActiveClusters. */\n"
    "static void tk_cluster_config(tk_CUlaunchConfig *cfg, tk_CUlaunchAttribute *at, int cluster,\n"
    "                              unsigned gx, unsigned gy, unsigned gz, unsigned threads,\n"
    "                              unsigned smem, struct CUstream_st *stream) {\n"
    "  memset(at, 0, sizeof *at);\n"
    "  at->id = TK_CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;\n"
    "  at->value.cluster_dim[0] = (unsigned)cluster;\n"
    "  at->value.cluster_dim[1] = at->value.cluster_dim[2] = 1;\n"
    "  memset(cfg, 0, sizeof *cfg);\n"
    "  cfg->grid[0] = gx, cfg->grid[1] = gy, cfg->grid[2] = gz;\n"
    "  cfg->block[0] = threads, cfg->block[1] = cfg->block[2] = 1;\n"
    "  cfg->smem = smem;\n"
    "  cfg->stream = stream;\n"
    "  cfg->attrs = at;\n"
    "  cfg->nattrs = 1;\n"
    "}\n"
    "\n"
    "/* Kernel i's warp-specialized entry (ws[img]), as libtilert picks it: where the device runs\n"
    " * sm_90a code, TILERT_WS is not 0, the entry fits the block's threads, and the cp.async entry\n"
    " * keeps at most 2.5 times as many of the kernel's blocks resident (TILERT_WS=1: regardless).\n"
    " * Anything else, a failing driver call included, leaves the cp.async entry, which computes\n"
    " * the same. */\n"
    "static void tk_prepare_ws(tk_state *s, const tk_kernel *k, int i, int img, int cc) {\n"
    "  const tk_ws *w = &k->ws[img];\n"
    "  const char *env = getenv(\"TILERT_WS\");\n"
    "  int max_threads = 0, ws_per_sm = 0, cp_per_sm = 0, sms = 0, dev = 0;\n"
    "  tk_CUfunction fn = NULL;\n"
    "  s->ws_fn[i] = NULL;\n"
    "  s->ws_walkers[i] = 0;\n"
    "  if (!w->name || cc != 90 || (env && !strcmp(env, \"0\")))\n"
    "    return;\n"
    "  if (tk_drv.ModuleGetFunction(&fn, s->mod, w->name) != 0 ||\n"
    "      (w->smem > TK_DEFAULT_SMEM &&\n"
    "       tk_drv.FuncSetAttribute(fn, TK_CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, w->smem) != 0) ||\n"
    "      tk_drv.FuncGetAttribute(&max_threads, TK_CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, fn) != 0 ||\n"
    "      max_threads < w->threads)\n"
    "    return;\n"
    "  if (tk_drv.OccupancyMaxActiveBlocksPerMultiprocessor(&ws_per_sm, fn, w->threads, (size_t)w->smem) != 0 ||\n"
    "      tk_drv.OccupancyMaxActiveBlocksPerMultiprocessor(&cp_per_sm, s->fn[i], k->threads,\n"
    "                                                       (size_t)k->smem[img]) != 0 ||\n"
    "      ws_per_sm < 1 || (5 * ws_per_sm * w->groups < 2 * cp_per_sm && !(env && !strcmp(env, \"1\"))))\n"
    "    return;\n"
    "  if (w->persistent) {\n"
    "    const char *pe = getenv(\"TILERT_PERSISTENT\");\n"
    "    if (tk_drv.CtxGetDevice(&dev) != 0 ||\n"
    "        tk_drv.DeviceGetAttribute(&sms, TK_CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev) != 0)\n"
    "      return;\n"
    "    long long resident = (long long)ws_per_sm * sms;\n"
    "    if (w->cluster == 2) { /* as libtilert: pairs fit the GPCs, not just the SMs */\n"
    "      int clusters = 0;\n"
    "      tk_CUlaunchAttribute at;\n"
    "      tk_CUlaunchConfig cfg;\n"
    "      tk_cluster_config(&cfg, &at, 2, (unsigned)(2 * resident), 1, 1, (unsigned)w->threads,\n"
    "                        (unsigned)w->smem, NULL);\n"
    "      if (tk_drv.OccupancyMaxActiveClusters(&clusters, fn, &cfg) != 0 || clusters < 1)\n"
    "        return;\n"
    "      resident = 2LL * clusters;\n"
    "    }\n"
    "    s->ws_walkers[i] = pe && !strcmp(pe, \"0\") ? 0 : resident;\n"
    "  }\n"
    "  s->ws_fn[i] = fn;\n"
    "}\n"
    "\n"
    "/* Loads the module once and finds every kernel of it by name. */\n"
    "static tilec_result tk_load(tk_state *s, const tk_module *m) {\n"
    "  if (s->mod)\n"
    "    return TILEC_OK;\n"
    "  tilec_result res = tk_driver_load();\n"
    "  if (res != TILEC_OK)\n"
    "    return res;\n"
    "  tk_CUcontext ctx = NULL;\n"
    "  TK_CALL(\"cuCtxGetCurrent\", tk_drv.CtxGetCurrent(&ctx));\n"
    "  if (!ctx) { /* nobody made a context current: use device 0's primary context */\n"
    "    int dev0 = 0;\n"
    "    TK_CALL(\"cuDeviceGet\", tk_drv.DeviceGet(&dev0, 0));\n"
    "    TK_CALL(\"cuDevicePrimaryCtxRetain\", tk_drv.DevicePrimaryCtxRetain(&ctx, dev0));\n"
    "    s->retained_dev = dev0;\n"
    "    TK_CALL(\"cuCtxSetCurrent\", tk_drv.CtxSetCurrent(ctx));\n"
    "  }\n"
    "  int dev = 0, major = 0, minor = 0;\n"
    "  TK_CALL(\"cuCtxGetDevice\", tk_drv.CtxGetDevice(&dev));\n"
    "  TK_CALL(\"cuDeviceGetAttribute\",\n"
    "          tk_drv.DeviceGetAttribute(&major, TK_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev));\n"
    "  TK_CALL(\"cuDeviceGetAttribute\",\n"
    "          tk_drv.DeviceGetAttribute(&minor, TK_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev));\n"
    "  int img = tk_pick(m, major * 10 + minor);\n"
    "  if (img < 0)\n"
    "    return tk_fail(TILEC_ERROR_UNSUPPORTED, \"%s: no embedded image runs on sm_%d%d (embedded: %s)\",\n"
    "                   m->name, major, minor, m->image_list);\n"
    "  static char log[8192]; /* loads are not concurrent (see the header) */\n"
    "  log[0] = 0;\n"
    "  /* the driver may fill every byte it is given with no NUL: the last one stays the NUL */\n"
    "  int opt[2] = {TK_CU_JIT_ERROR_LOG_BUFFER, TK_CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};\n"
    "  void *val[2] = {log, (void *)(size_t)(sizeof log - 1)};\n"
    "  tk_CUresult r = tk_drv.ModuleLoadDataEx(&s->mod, m->images[img].data, 2, opt, val);\n"
    "  if (r != 0)\n"
    "    return tk_cu_fail(\"cuModuleLoadDataEx\", r, log);\n"
    "  for (int i = 0; i < m->nkernels; i++) {\n"
    "    const tk_kernel *k = m->kernels[i];\n"
    "    const char *call = \"cuModuleGetFunction\";\n"
    "    r = tk_drv.ModuleGetFunction(&s->fn[i], s->mod, k->name);\n"
    "    if (r == 0 && k->smem[img] > TK_DEFAULT_SMEM) {\n"
    "      call = \"cuFuncSetAttribute\";\n"
    "      r = tk_drv.FuncSetAttribute(s->fn[i], TK_CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,\n"
    "                                  k->smem[img]);\n"
    "    }\n"
    "    if (r != 0) {\n"
    "      tk_drv.ModuleUnload(s->mod);\n"
    "      s->mod = NULL;\n"
    "      return tk_cu_fail(call, r, k->name);\n"
    "    }\n"
    "    tk_prepare_ws(s, k, i, img, major * 10 + minor);\n"
    "  }\n"
    "  s->ctx = ctx;\n"
    "  s->image = img;\n"
    "  return TILEC_OK;\n"
    "}\n"
    "\n"
    "static void tk_unload(tk_state *s) {\n"
    "  if (s->mod && tk_drv.ModuleUnload)\n"
    "    tk_drv.ModuleUnload(s->mod);\n"
    "  if (s->retained_dev >= 0 && tk_drv.DevicePrimaryCtxRelease)\n"
    "    tk_drv.DevicePrimaryCtxRelease(s->retained_dev);\n"
    "  s->mod = NULL;\n"
    "  s->ctx = NULL;\n"
    "  s->image = -1;\n"
    "  s->retained_dev = -1;\n"
    "}\n"
    "\n"
    "/* As libtilert's tilert__walk_chunk (runtime/launch.c): a row walk's chunk, or 0 (a block per tile). */\n"
    "static int tk_shares_out(long long units, long long walkers) {\n"
    "  long long per = (units + walkers - 1) / walkers;\n"
    "  return units > walkers && units * 20 >= per * walkers * 19;\n"
    "}\n"
    "\n"
    "static long long tk_walk_chunk(long long gx, long long rows, long long walkers, int force) {\n"
    "  long long c = 0;\n"
    "  if (force >= 0)\n"
    "    c = force < gx ? force : gx;\n"
    "  else if (walkers && gx % 2 == 0 && tk_shares_out(rows * (gx / 2), walkers))\n"
    "    c = 2;\n"
    "  else if (walkers && rows >= 3 * walkers && tk_shares_out(rows, walkers))\n"
    "    c = gx;\n"
    "  return c && gx * rows + walkers * c > 2147483647LL ? 0 : c;\n"
    "}\n"
    "\n"
    "/* The TMA tensor map of tensor t for map m, under libtilert's rules (f16 or bf16, a 16-byte\n"
    " * aligned base, strides multiples of 16 bytes below 2^40, dims below 2^32; out-of-bounds\n"
    " * elements read as the zero the loads fill with); 0 when t breaks them or the driver refuses. */\n"
    "static int tk_encode(const tk_tmap *m, const tilec_tensor *t, tk_CUtensorMap *out) {\n"
    "  unsigned long long dims[4], strides[4];\n"
    "  unsigned box[4], estride[4];\n"
    "  int r = t->rank;\n"
    "  if ((t->dtype != TILEC_F16 && t->dtype != TILEC_BF16) || (t->data & 15) || r < 1 || r > 4 ||\n"
    "      t->strides[r - 1] != 1)\n"
    "    return 0;\n"
    "  for (int i = 0; i < r; i++) { /* innermost first */\n"
    "    int64_t e = t->shape[r - 1 - i];\n"
    "    if (e < 1 || e > ((int64_t)1 << 32))\n"
    "      return 0;\n"
    "    dims[i] = (unsigned long long)e;\n"
    "    box[i] = (unsigned)m->box[r - 1 - i];\n"
    "    estride[i] = 1;\n"
    "    if (i > 0) {\n"
    "      int64_t st = t->strides[r - 1 - i];\n"
    "      if (st < 1 || st > ((int64_t)1 << 39) || (st * 2) % 16)\n"
    "        return 0;\n"
    "      strides[i - 1] = (unsigned long long)(st * 2);\n"
    "    }\n"
    "  }\n"
    "  int sw = m->swizzle == 128 ? TK_CU_TENSOR_MAP_SWIZZLE_128B\n"
    "           : m->swizzle == 64 ? TK_CU_TENSOR_MAP_SWIZZLE_64B\n"
    "                              : TK_CU_TENSOR_MAP_SWIZZLE_32B;\n"
    "  int dt = t->dtype == TILEC_F16 ? TK_CU_TENSOR_MAP_DATA_TYPE_FLOAT16 : TK_CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;\n"
    "  void *base = (void *)(size_t)t->data;\n"
    "  return tk_drv.TensorMapEncodeTiled(out, dt, (unsigned)r, base, dims, strides, box, estride,\n"
    "                                     TK_CU_TENSOR_MAP_INTERLEAVE_NONE, sw,\n"
    "                                     TK_CU_TENSOR_MAP_L2_PROMOTION_L2_256B,\n"
    "                                     TK_CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == 0;\n"
    "}\n"
    "\n"
    "/* As libtilert: the first tensor of t that an aligned entry k cannot take (its base or a\n"
    " * stride but the last not in 16-byte steps), or -1. */\n"
    "static int tk_first_unaligned(const tk_kernel *k, const tilec_tensor *const *t) {\n"
    "  for (int i = 0; i < k->nargs; i++) {\n"
    "    if (!k->args[i].is_tensor)\n"
    "      continue;\n"
    "    int bad = t[i]->data % 16 != 0;\n"
    "    for (int ax = 0; ax + 1 < t[i]->rank && !bad; ax++)\n"
    "      bad = t[i]->strides[ax] * tk_dtype_size[t[i]->dtype] % 16 != 0;\n"
    "    if (bad)\n"
    "      return i;\n"
    "  }\n"
    "  return -1;\n"
    "}\n"
    "\n"
    "/* As libtilert: a kernel's full-size entry f runs a launch whose dims d (the kernel's, in the\n"
    " * same order as f's) have every value f pins and, if f is aligned, whose tensors t suit it,\n"
    " * unless TILERT_FULL is 0. */\n"
    "static int tk_full_fits(const tk_kernel *f, const int64_t *d, const tilec_tensor *const *t) {\n"
    "  const char *env = getenv(\"TILERT_FULL\");\n"
    "  if (env && !strcmp(env, \"0\"))\n"
    "    return 0;\n"
    "  for (int i = 0; i < f->ndims; i++)\n"
    "    if (f->dims[i].pinned && d[i] != f->dims[i].value)\n"
    "      return 0;\n"
    "  return !f->aligned || tk_first_unaligned(f, t) < 0;\n"
    "}\n"
    "\n"
    "/* Out tensors declared `= 0`, zeroed on the stream before the kernel: per tensor, its contiguous\n"
    " * inner dims make a row, the next dims whose strides nest make the rows of one\n"
    " * cuMemsetD2D8Async, and each index of the dims outside those one more. (libtilert zeroes them\n"
    " * with a kernel that the next one overlaps on sm_90: runtime/zero.c.) */\n"
    "static tilec_result tk_zero_outputs(const tk_kernel *k, const tilec_tensor *const *t,\n"
    "                                    struct CUstream_st *stream) {\n"
    "  for (int i = 0; i < k->nargs; i++) {\n"
    "    const tilec_tensor *x = t[i];\n"
    "    if (!k->args[i].zero_init || tk_bytes(x) <= 0)\n"
    "      continue;\n"
    "    int64_t eb = tk_dtype_size[x->dtype], d = x->rank - 1, outer = 1, idx[4] = {0, 0, 0, 0};\n"
    "    int64_t row = x->shape[d] * eb, rows = 1, pitch;\n"
    "    for (d--; d >= 0 && x->strides[d] * eb == row; d--)\n"
    "      row *= x->shape[d];\n"
    "    pitch = row;\n"
    "    if (d >= 0) {\n"
    "      rows = x->shape[d], pitch = x->strides[d] * eb;\n"
    "      for (d--; d >= 0 && x->strides[d] == x->strides[d + 1] * x->shape[d + 1]; d--)\n"
    "        rows *= x->shape[d];\n"
    "    }\n"
    "    if (rows == 1)\n"
    "      pitch = row; /* unused by one row; never below the width */\n"
    "    for (int j = 0; j <= d; j++)\n"
    "      outer *= x->shape[j];\n"
    "    for (int64_t o = 0; o < outer; o++) {\n"
    "      unsigned long long at = x->data;\n"
    "      for (int j = 0; j <= d; j++)\n"
    "        at += (unsigned long long)(idx[j] * x->strides[j] * eb);\n"
    "      TK_CALL(\"cuMemsetD2D8Async\", tk_drv.MemsetD2D8Async(at, (size_t)pitch, 0, (size_t)row,\n"
    "                                                           (size_t)rows, stream));\n"
    "      for (int j = (int)d; j >= 0 && ++idx[j] == x->shape[j]; j--)\n"
    "        idx[j] = 0;\n"
    "    }\n"
    "  }\n"
    "  return TILEC_OK;\n"
    "}\n"
    "\n"
    "/* Kernel parameters in the ABI order: per tensor its address and the strides of all axes but\n"
    " * the innermost, per scalar its value, then each run-time dim as a 32-bit integer; the\n"
    " * warp-specialized entry takes, after those, the logical grid and the raster group (persistent\n"
    " * entries) and its tensor maps by value. It runs when the kernel has one (tk_prepare_ws) and\n"
    " * every tensor it maps suits TMA; else the cp.async entry. */\n"
    "static tilec_result tk_launch(tk_state *s, const tk_module *m, int ki, struct CUstream_st *stream,\n"
    "                              const tilec_tensor *const *t, const double *sc, const int64_t *d,\n"
    "                              const int64_t grid[3]) {\n"
    "  const tk_kernel *k = m->kernels[ki];\n"
    "  if (k->full >= 0 && tk_full_fits(m->kernels[k->full], d, t))\n"
    "    k = m->kernels[ki = k->full];\n"
    "  int bad = k->aligned ? tk_first_unaligned(k, t) : -1;\n"
    "  if (bad >= 0)\n"
    "    return tk_fail(TILEC_ERROR_SHAPE, \"%s: compiled for tensors on 16-byte boundaries whose strides \"\n"
    "                   \"are multiples of 16 bytes (TILEC_ALIGNED_ARGS=1); argument '%s' is not\",\n"
    "                   k->name, k->args[bad].name);\n"
    "  int empty = !grid[0] || !grid[1] || !grid[2], zeroes = 0;\n"
    "  for (int i = 0; i < k->nargs; i++)\n"
    "    zeroes |= k->args[i].zero_init && tk_bytes(t[i]) > 0;\n"
    "  if (empty && !zeroes)\n"
    "    return TILEC_OK; /* an empty problem: no block has anything to do (nor `= 0` output to zero) */\n"
    "  tilec_result res = tk_load(s, m);\n"
    "  if (res != TILEC_OK)\n"
    "    return res;\n"
    "  tk_CUcontext cur = NULL;\n"
    "  TK_CALL(\"cuCtxGetCurrent\", tk_drv.CtxGetCurrent(&cur));\n"
    "  if (!cur)\n"
    "    TK_CALL(\"cuCtxSetCurrent\", tk_drv.CtxSetCurrent(s->ctx));\n"
    "  else if (cur != s->ctx)\n"
    "    return tk_fail(TILEC_ERROR_INVALID_ARGUMENT,\n"
    "                   \"%s was loaded in another CUDA context than the current one\", k->name);\n"
    "  res = tk_zero_outputs(k, t, stream);\n"
    "  if (res != TILEC_OK || empty)\n"
    "    return res;\n"
    "  unsigned long long slot[4 * 32 + 64 + 4];\n"
    "  void *ptr[4 * 32 + 64 + 4 + TK_MAX_TMAPS];\n"
    "  tk_CUtensorMap maps[TK_MAX_TMAPS];\n"
    "  int n = 0;\n"
    "  for (int i = 0; i < k->nargs; i++) {\n"
    "    const tk_arg *a = &k->args[i];\n"
    "    if (a->is_tensor) {\n"
    "      slot[n] = t[i]->data, ptr[n] = &slot[n], n++;\n"
    "      for (int ax = 0; ax < a->rank - 1; ax++)\n"
    "        memcpy(&slot[n], &t[i]->strides[ax], 8), ptr[n] = &slot[n], n++;\n"
    "    } else if (a->dtype == TILEC_I32) {\n"
    "      int32_t v = (int32_t)sc[i];\n"
    "      slot[n] = 0, memcpy(&slot[n], &v, 4), ptr[n] = &slot[n], n++;\n"
    "    } else {\n"
    "      float v = (float)sc[i];\n"
    "      slot[n] = 0, memcpy(&slot[n], &v, 4), ptr[n] = &slot[n], n++;\n"
    "    }\n"
    "  }\n"
    "  for (int i = 0; i < k->ndims; i++)\n"
    "    if (!k->dims[i].pinned) {\n"
    "      int32_t v = (int32_t)d[i];\n"
    "      slot[n] = 0, memcpy(&slot[n], &v, 4), ptr[n] = &slot[n], n++;\n"
    "    }\n"
    "  tk_CUfunction fn = s->fn[ki];\n"
    "  unsigned threads = (unsigned)k->threads, smem = (unsigned)k->smem[s->image];\n"
    "  int cluster = k->cluster;\n"
    "  long long launch[3] = {grid[0], grid[1], grid[2]}, total = grid[0] * grid[1] * grid[2];\n"
    "  const tk_ws *w = &k->ws[s->image];\n"
    "  int ws = s->ws_fn[ki] && (!w->persistent || total <= 2147483647LL); /* tiles decode in 32 bits */\n"
    "  for (int i = 0; ws && i < w->ntmaps; i++)\n"
    "    ws = tk_encode(&w->tmaps[i], t[w->tmaps[i].arg], &maps[i]);\n"
    "  if (ws) {\n"
    "    fn = s->ws_fn[ki], threads = (unsigned)w->threads, smem = (unsigned)w->smem;\n"
    "    if (w->persistent) {\n"
    "      const char *ge = getenv(\"TILERT_TILE_GROUP\"), *we = getenv(\"TILERT_PERSISTENT_WAVES\");\n"
    "      const char *ce = getenv(\"TILERT_WALK_CHUNK\");\n"
    "      int32_t v[4] = {(int32_t)grid[0], (int32_t)grid[1], (int32_t)grid[2], w->tile_group};\n"
    "      long long walkers = s->ws_walkers[ki] / w->cluster, waves = we && atoi(we) >= 1 ? atoi(we) : 0;\n"
    "      long long chunk = !w->walk_rows ? 1 : tk_walk_chunk(grid[0], grid[1] * grid[2], walkers,\n"
    "                                                          ce && *ce ? (atoi(ce) > 0 ? atoi(ce) : 0) : -1);\n"
    "      /* as libtilert: the resident blocks walk any grid of more tiles than they are\n"
    "       * (TILERT_PERSISTENT_WAVES = n: grids of at most n waves only); a row walk in chunks */\n"
    "      int walk;\n"
    "      cluster = w->cluster;\n"
    "      if (cluster == 2) /* the kernel walks pairs: the grid halved along the pair's axis */\n"
    "        total = total / grid[w->cluster_axis] * ((grid[w->cluster_axis] + 1) / 2);\n"
    "      walk = walkers && total > walkers && chunk && (!waves || total <= waves * walkers);\n"
    "      if (ge && atoi(ge) >= 1)\n"
    "        v[3] = atoi(ge);\n"
    "      if (w->walk_rows)\n"
    "        v[3] = (int32_t)(walk ? chunk : 1);\n"
    "      for (int i = 0; i < 4; i++)\n"
    "        slot[n] = 0, memcpy(&slot[n], &v[i], 4), ptr[n] = &slot[n], n++;\n"
    "      launch[0] = cluster * (walk ? walkers : total);\n"
    "      launch[1] = launch[2] = 1;\n"
    "    }\n"
    "    for (int i = 0; i < w->ntmaps; i++)\n"
    "      ptr[n++] = &maps[i];\n"
    "  }\n"
    "  tk_CUresult r;\n"
    "  if (cluster > 1) {\n"
    "    tk_CUlaunchAttribute at;\n"
    "    tk_CUlaunchConfig cfg;\n"
    "    tk_cluster_config(&cfg, &at, cluster, (unsigned)launch[0], (unsigned)launch[1],\n"
    "                      (unsigned)launch[2], threads, smem, stream);\n"
    "    r = tk_drv.LaunchKernelEx(&cfg, fn, ptr, NULL);\n"
    "  } else {\n"
    "    r = tk_drv.LaunchKernel(fn, (unsigned)launch[0], (unsigned)launch[1], (unsigned)launch[2],\n"
    "                            threads, 1, 1, smem, stream, ptr, NULL);\n"
    "  }\n"
    "  if (r != 0)\n"
    "    return tk_cu_fail(cluster > 1 ? \"cuLaunchKernelEx\" : \"cuLaunchKernel\", r, k->name);\n"
    "  return TILEC_OK;\n"
    "}\n";

/* Types and helpers shared by every generated header; guarded so headers of several kernels
 * can be included together. Values of tilec_result match tilert_code where both exist. */
static const char common_header[] =
    "#ifndef TILEC_AOT_COMMON\n"
    "#define TILEC_AOT_COMMON 1\n"
    "#include <stdint.h>\n"
    "#ifdef __cplusplus\n"
    "extern \"C\" {\n"
    "#endif\n"
    "\n"
    "struct CUstream_st; /* CUstream of cuda.h: pass a CUstream, or NULL for the default stream */\n"
    "\n"
    "typedef enum tilec_dtype { TILEC_BOOL, TILEC_I32, TILEC_F16, TILEC_BF16, TILEC_F32 } tilec_dtype;\n"
    "\n"
    "typedef enum tilec_result {\n"
    "  TILEC_OK = 0,\n"
    "  TILEC_ERROR_NO_DRIVER = 1,        /* libcuda.so.1 missing, not a driver, or older than 12.0 */\n"
    "  TILEC_ERROR_NO_DEVICE = 2,        /* driver present, no CUDA device */\n"
    "  TILEC_ERROR_DRIVER = 3,           /* a driver call failed; the message names it */\n"
    "  TILEC_ERROR_INVALID_ARGUMENT = 4, /* NULL tensor or data pointer, wrong dtype */\n"
    "  TILEC_ERROR_SHAPE = 5,            /* shape, stride or alignment breaks the contract */\n"
    "  TILEC_ERROR_REQUIREMENT = 6,      /* a `require` of the kernel is false */\n"
    "  TILEC_ERROR_UNSUPPORTED = 11,     /* no embedded image runs on this GPU */\n"
    "  TILEC_ERROR_NO_MATCH = 12         /* linked entry point: no specialization fits */\n"
    "} tilec_result;\n"
    "\n"
    "/* A tensor argument: device memory viewed with strides (in elements; innermost 1). */\n"
    "typedef struct tilec_tensor {\n"
    "  unsigned long long data; /* CUdeviceptr, aligned to the element size (NULL if empty) */\n"
    "  tilec_dtype dtype;\n"
    "  int rank;\n"
    "  int64_t shape[4];\n"
    "  int64_t strides[4];\n"
    "} tilec_tensor;\n"
    "\n"
    "/* A row-major (contiguous) tensor. Strides saturate at INT64_MAX rather than overflow (the\n"
    " * check then refuses the tensor as too large). */\n"
    "static inline tilec_tensor tilec_tensor_contiguous(unsigned long long data, tilec_dtype dtype,\n"
    "                                                   int rank, const int64_t *shape) {\n"
    "  tilec_tensor t;\n"
    "  int64_t stride = 1;\n"
    "  int i;\n"
    "  t.data = data;\n"
    "  t.dtype = dtype;\n"
    "  t.rank = rank;\n"
    "  for (i = 0; i < 4; i++)\n"
    "    t.shape[i] = 0, t.strides[i] = 0;\n"
    "  for (i = rank - 1; i >= 0 && i < 4; i--) {\n"
    "    t.shape[i] = shape[i];\n"
    "    t.strides[i] = stride;\n"
    "    stride = shape[i] > 1 && stride > INT64_MAX / shape[i] ? INT64_MAX\n"
    "             : stride * (shape[i] > 0 ? shape[i] : 1);\n"
    "  }\n"
    "  return t;\n"
    "}\n"
    "\n"
    "static inline const char *tilec_result_name(tilec_result r) {\n"
    "  switch (r) {\n"
    "  case TILEC_OK: return \"TILEC_OK\";\n"
    "  case TILEC_ERROR_NO_DRIVER: return \"TILEC_ERROR_NO_DRIVER\";\n"
    "  case TILEC_ERROR_NO_DEVICE: return \"TILEC_ERROR_NO_DEVICE\";\n"
    "  case TILEC_ERROR_DRIVER: return \"TILEC_ERROR_DRIVER\";\n"
    "  case TILEC_ERROR_INVALID_ARGUMENT: return \"TILEC_ERROR_INVALID_ARGUMENT\";\n"
    "  case TILEC_ERROR_SHAPE: return \"TILEC_ERROR_SHAPE\";\n"
    "  case TILEC_ERROR_REQUIREMENT: return \"TILEC_ERROR_REQUIREMENT\";\n"
    "  case TILEC_ERROR_UNSUPPORTED: return \"TILEC_ERROR_UNSUPPORTED\";\n"
    "  case TILEC_ERROR_NO_MATCH: return \"TILEC_ERROR_NO_MATCH\";\n"
    "  }\n"
    "  return \"TILEC_ERROR_UNKNOWN\";\n"
    "}\n"
    "\n"
    "#ifdef __cplusplus\n"
    "}\n"
    "#endif\n"
    "#endif /* TILEC_AOT_COMMON */\n";

/* ---------------------------------------------------------------- names */

/* Words an argument may not be called in C or C++ (and our own parameter name). */
static const char *const reserved[] = {
    "auto", "bool", "break", "case", "catch", "char", "class", "const", "continue", "default",
    "delete", "do", "double", "else", "enum", "explicit", "extern", "false", "float", "for",
    "friend", "goto", "if", "inline", "int", "long", "mutable", "namespace", "new", "operator",
    "private", "protected", "public", "register", "restrict", "return", "short", "signed",
    "sizeof", "static", "struct", "switch", "template", "this", "throw", "true", "try",
    "typedef", "typename", "union", "unsigned", "using", "virtual", "void", "volatile", "while",
    "stream", "t", "sc", "d", "grid", "r", "why", NULL};

static const char *c_arg_name(Arena *a, const char *name) {
  for (int i = 0; reserved[i]; i++)
    if (!strcmp(name, reserved[i]))
      return arena_printf(a, "%s_", name);
  if (!strncmp(name, "tk_", 3))
    return arena_printf(a, "%s_", name);
  return name;
}

/* The last path component of a file name. */
static const char *file_part(const char *path) {
  const char *slash = strrchr(path, '/');
  return slash ? slash + 1 : path;
}

bool emit_c_name_ok(const char *base, const char *what, Diag *d) {
  const char *f = file_part(base);
  if (!*f || !strcmp(f, ".") || !strcmp(f, "..")) {
    diag_plain(d, DIAG_ERROR, "%s: '%s' names a directory; give a file name such as '%s%sNAME'",
               what, base, base, *f ? "/" : "");
    return false;
  }
  for (const char *p = f; *p; p++)
    if (*p == '"' || *p == '\\' || (unsigned char)*p < 32 || *p == 127) {
      diag_plain(d, DIAG_ERROR, "%s: the file name '%s' cannot be #included (it holds '\"', '\\' "
                 "or a control character)", what, f);
      return false;
    }
  return true;
}

/* The C prefix: the last path component of base (without ".h"), made an identifier; the files
 * keep their names (softmax-f16.h declares softmax_f16_launch). */
static char *c_prefix(Arena *a, const char *base) {
  const char *s = file_part(base);
  size_t n = strlen(s);
  if (n > 2 && !strcmp(s + n - 2, ".h"))
    n -= 2;
  char *p = arena_alloc(a, n + 2);
  size_t j = 0;
  if (n == 0 || isdigit((unsigned char)s[0]))
    p[j++] = '_';
  for (size_t i = 0; i < n; i++)
    p[j++] = isalnum((unsigned char)s[i]) ? s[i] : '_';
  p[j] = '\0';
  return p;
}

/* The C prefix of a kernel in a file of nk kernels whose prefix is p: p itself when it is the only
 * one, else p_KERNEL (functions p_KERNEL_check, p_KERNEL_launch). What it adds to p ("" or
 * "_KERNEL") also ends the names of the kernel's tables in the .c. */
static const char *kernel_prefix(Arena *a, const char *p, int nk, const char *name) {
  return nk == 1 ? p : arena_printf(a, "%s_%s", p, name);
}

static const char *dtype_c_enum(tilert_dtype t) {
  static const char *const e[] = {"TILEC_BOOL", "TILEC_I32", "TILEC_F16", "TILEC_BF16",
                                  "TILEC_F32"};
  return (unsigned)t < 5 ? e[t] : "TILEC_F32";
}

/* ---------------------------------------------------------------- output */

/* A memory stream for building a file. */
typedef struct Buf {
  FILE *fp;
  char *data;
  size_t len;
} Buf;

static bool buf_open(Buf *b, Diag *d) {
  b->data = NULL, b->len = 0;
  b->fp = open_memstream(&b->data, &b->len);
  if (!b->fp)
    diag_plain(d, DIAG_ERROR, "out of memory");
  return b->fp != NULL;
}

/* Writes BASE.h and BASE.c from their buffers, both or neither. */
static bool buf_commit_pair(Arena *a, Buf *h, Buf *c, const char *base, Diag *d) {
  bool ok = fclose(h->fp) == 0;
  ok &= fclose(c->fp) == 0;
  const char *paths[2] = {arena_printf(a, "%s.h", base), arena_printf(a, "%s.c", base)};
  const char *texts[2] = {h->data, c->data};
  size_t lens[2] = {h->len, c->len};
  if (!ok)
    diag_plain(d, DIAG_ERROR, "out of memory");
  ok = ok && out_write_files(a, paths, texts, lens, 2, d);
  free(h->data);
  free(c->data);
  return ok;
}

/* A C string literal, one source line per PTX line. */
static void put_c_string(FILE *fp, const char *s) {
  fputs("    \"", fp);
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '\n') {
      fputs(s[1] ? "\\n\"\n    \"" : "\\n", fp);
    } else if (c == '\\' || c == '"') {
      fprintf(fp, "\\%c", c);
    } else if (c == '?') {
      fputs("\\?", fp); /* no trigraphs in -std=c99 */
    } else if (c == '\t') {
      fputs("\\t", fp);
    } else if (c < 32 || c >= 127) {
      fprintf(fp, "\\%03o", c);
    } else {
      fputc(c, fp);
    }
  }
  fputc('"', fp);
}

/* ---------------------------------------------------------------- contract -> C */

/* An RPN expression as a C expression over d[] (dims) with checked arithmetic (tk_op). */
static char *rpn_to_c(Arena *a, const tilert_kernel_info *k, const char *rpn) {
  char *stack[160];
  int sp = 0;
  char *copy = arena_strdup(a, rpn);
  for (char *tok = strtok(copy, " "); tok; tok = strtok(NULL, " ")) {
    static const struct {
      const char *tok, *c;
    } bin[] = {{"+", "tk_op('+', %s, %s, bad)"}, {"-", "tk_op('-', %s, %s, bad)"},
               {"*", "tk_op('*', %s, %s, bad)"}, {"/", "tk_op('/', %s, %s, bad)"},
               {"%", "tk_op('%%', %s, %s, bad)"}, {"cdiv", "tk_op('c', %s, %s, bad)"},
               {"min", "tk_op('m', %s, %s, bad)"}, {"max", "tk_op('M', %s, %s, bad)"},
               {"<", "(int64_t)(%s < %s)"},      {"<=", "(int64_t)(%s <= %s)"},
               {">", "(int64_t)(%s > %s)"},      {">=", "(int64_t)(%s >= %s)"},
               {"==", "(int64_t)(%s == %s)"},    {"!=", "(int64_t)(%s != %s)"},
               {"&&", "(int64_t)(%s != 0 && %s != 0)"}, {"||", "(int64_t)(%s != 0 || %s != 0)"}};
    bool done = false;
    for (size_t i = 0; i < sizeof bin / sizeof bin[0] && !done; i++)
      if (!strcmp(tok, bin[i].tok)) {
        char *r = arena_printf(a, bin[i].c, stack[sp - 2], stack[sp - 1]);
        sp--;
        stack[sp - 1] = r;
        done = true;
      }
    if (done)
      continue;
    if (!strcmp(tok, "!")) {
      stack[sp - 1] = arena_printf(a, "(int64_t)(%s == 0)", stack[sp - 1]);
      continue;
    }
    int dim = -1;
    for (int i = 0; i < k->ndims; i++)
      if (!strcmp(k->dims[i].name, tok))
        dim = i;
    long long v = strtoll(tok, NULL, 10);
    stack[sp++] = dim >= 0 ? arena_printf(a, "d[%d]", dim)
                           : v == INT64_MIN ? arena_strdup(a, "INT64_MIN")
                                            : arena_printf(a, "(int64_t)%lldLL", v);
  }
  return stack[0]; /* the metadata parser has checked the stack discipline */
}

static unsigned long long rpn_dims_mask(const tilert_kernel_info *k, const char *rpn) {
  unsigned long long m = 0;
  char buf[512];
  snprintf(buf, sizeof buf, "%s", rpn);
  for (char *tok = strtok(buf, " "); tok; tok = strtok(NULL, " "))
    for (int i = 0; i < k->ndims && i < 64; i++)
      if (!strcmp(k->dims[i].name, tok))
        m |= 1ull << i;
  return m;
}

static void put_expr_fn(Arena *a, FILE *fp, const tilert_kernel_info *k, const char *name,
                        const char *rpn) {
  fprintf(fp, "static int64_t %s(const int64_t *d, int *bad) { /* %s */\n", name, rpn);
  fprintf(fp, "  (void)d;\n  (void)bad;\n  return %s;\n}\n", rpn_to_c(a, k, rpn));
}

/* "X: f16[M, N] in" */
static char *arg_doc(Arena *a, const tilert_kernel_info *k, const tilert_arg_info *ai) {
  if (ai->kind == TILERT_ARG_SCALAR)
    return arena_printf(a, "%s: %s", ai->name, tilert_dtype_name(ai->dtype));
  char *s = arena_printf(a, "%s: %s%s[", ai->name, ai->is_out ? "out " : "",
                         tilert_dtype_name(ai->dtype));
  for (int i = 0; i < ai->rank; i++)
    s = arena_printf(a, "%s%s%s", s, i ? ", " : "", k->dims[ai->dims[i]].name);
  return arena_printf(a, "%s]%s", s, ai->zero_init ? " = 0" : "");
}

/* ", const tilec_tensor *X, float eps" — the typed parameters after the stream. */
static char *params_decl(Arena *a, const tilert_kernel_info *k) {
  char *s = arena_strdup(a, "");
  for (int i = 0; i < k->nargs; i++) {
    const tilert_arg_info *ai = &k->args[i];
    const char *type = ai->kind == TILERT_ARG_TENSOR ? "const tilec_tensor *"
                       : ai->dtype == TILERT_I32     ? "int32_t "
                                                     : "float ";
    s = arena_printf(a, "%s%s%s%s", s, i ? ", " : "", type, c_arg_name(a, ai->name));
  }
  return s;
}

static char *params_call(Arena *a, const tilert_kernel_info *k) {
  char *s = arena_strdup(a, "");
  for (int i = 0; i < k->nargs; i++)
    s = arena_printf(a, "%s%s%s", s, i ? ", " : "", c_arg_name(a, k->args[i].name));
  return s;
}

/* The public part of a header, in three pieces: the file's functions (load, unload), each
 * kernel's (check, launch), the file's error. A single kernel, a linked entry point and a
 * multi-kernel file all declare through them. several: what P_load loads when there are
 * several kernels ("every kernel of the file"), else NULL. */
static void put_decls_open(FILE *fp, const char *p, const char *several) {
  fputs("#ifdef __cplusplus\nextern \"C\" {\n#endif\n\n", fp);
  if (several)
    fprintf(fp, "/* Loads %s into the current CUDA context\n"
                " * (when none is current: device 0's primary context, which it then makes current).\n"
                " * The first launch of any of them loads them if needed; call it once before\n"
                " * launching from several threads. */\n",
            several);
  else
    fputs("/* Loads the kernel into the current CUDA context (when none is current: device 0's\n"
          " * primary context, which it then makes current). The first launch loads it if needed;\n"
          " * call it once before launching from several threads. */\n",
          fp);
  fprintf(fp, "tilec_result %s_load(void);\nvoid %s_unload(void);\n\n", p, p);
}

/* pk: the kernel's C prefix (the file's, or FILE_KERNEL in a file of several kernels). */
static void put_kernel_decls(Arena *a, FILE *fp, const char *pk, const tilert_kernel_info *k) {
  const char *params = params_decl(a, k);
  fprintf(fp,
          "/* Checks the arguments against the kernel's contract; no GPU needed. */\n"
          "tilec_result %s_check(%s);\n\n"
          "/* Checks, computes the grid and launches (asynchronous, on stream). */\n"
          "tilec_result %s_launch(struct CUstream_st *stream%s);\n\n",
          pk, k->nargs ? params : "void", pk, k->nargs ? arena_printf(a, ", %s", params) : "");
}

static void put_decls_close(FILE *fp, const char *p) {
  fprintf(fp,
          "/* What the last failing %s_ call on this thread said (\"\" after a success). */\n"
          "const char *%s_error(void);\n\n"
          "#ifdef __cplusplus\n}\n#endif\n",
          p, p);
}

/* Everything after the header's comments: the guard, the shared types and the declarations of
 * the nk kernels ks. several: what P_load loads when nk > 1. */
static void put_guarded_decls(Arena *a, FILE *fp, const char *p, const char *several,
                              const tilert_kernel_info *const *ks, int nk) {
  fprintf(fp, "#ifndef TILEC_AOT_%s_H\n#define TILEC_AOT_%s_H\n\n", p, p);
  fputs(common_header, fp);
  fputc('\n', fp);
  put_decls_open(fp, p, nk > 1 ? several : NULL);
  for (int i = 0; i < nk; i++)
    put_kernel_decls(a, fp, kernel_prefix(a, p, nk, ks[i]->name), ks[i]);
  put_decls_close(fp, p);
  fprintf(fp, "#endif /* TILEC_AOT_%s_H */\n", p);
}

/* Text inside a block comment: a "*" never meets a "/" (tilec's own requirement texts hold no
 * comments, but --link reads headers a user may have edited). */
static void put_comment_text(FILE *fp, const char *s) {
  for (; *s; s++) {
    fputc(*s, fp);
    if (s[0] == '*' && s[1] == '/')
      fputc(' ', fp);
  }
}

/* The first line of a header's comment; name: the header's file name without ".h". The
 * kernels' signatures follow (put_signature), then " * /". */
static void put_header_intro(FILE *fp, const char *name, const char *what) {
  fprintf(fp, "/* %s.h — generated by tilec --emit=c (%s); do not edit. docs/aot.md.\n", name, what);
}

static void put_signature(Arena *a, FILE *fp, const tilert_kernel_info *k) {
  fprintf(fp, " *\n * %s(", k->name);
  for (int i = 0; i < k->nargs; i++)
    fprintf(fp, "%s%s", i ? ", " : "", arg_doc(a, k, &k->args[i]));
  fprintf(fp, ")\n *   grid (");
  for (int i = 0; i < 3; i++)
    fprintf(fp, "%s%s", i ? " | " : "", k->grid[i]);
  fprintf(fp, "), %d threads", k->threads);
  for (int i = 0; i < k->nrequires; i++) {
    fputs("; require ", fp);
    put_comment_text(fp, k->requires_text[i]);
  }
  fputc('\n', fp);
}

/* ---------------------------------------------------------------- metadata lines */

static const char meta_tag[] = "// tilec: ";
enum { META_TAG_LEN = sizeof meta_tag - 1 };

/* The next "// tilec: " line at or after *cur (its start and length; *cur moves past it), or
 * false at the end of the text. */
static bool next_meta_line(const char **cur, const char **line, size_t *len) {
  while (**cur) {
    const char *start = *cur, *end = strchr(start, '\n');
    size_t n = end ? (size_t)(end - start) : strlen(start);
    *cur = start + n + (end != NULL);
    if (n >= META_TAG_LEN && !memcmp(start, meta_tag, META_TAG_LEN)) {
      *line = start, *len = n;
      return true;
    }
  }
  return false;
}

/* The NAME of a "kernel NAME" line (its length in *n), or NULL for any other line. */
static const char *meta_kernel_name(const char *line, size_t len, size_t *n) {
  const char *rest = line + META_TAG_LEN;
  if (len < META_TAG_LEN + 7 || strncmp(rest, "kernel ", 7))
    return NULL;
  *n = len - META_TAG_LEN - 7;
  return rest + 7;
}

/* The names of the kernels the metadata of text describes, in order (*n of them). */
static const char **meta_kernel_names(Arena *a, const char *text, int *n) {
  const char *line, *name;
  size_t len, nlen;
  *n = 0;
  for (const char *cur = text; next_meta_line(&cur, &line, &len);)
    *n += meta_kernel_name(line, len, &nlen) != NULL;
  const char **names = arena_alloc(a, sizeof *names * (size_t)(*n + 1));
  int i = 0;
  for (const char *cur = text; next_meta_line(&cur, &line, &len);)
    if ((name = meta_kernel_name(line, len, &nlen)))
      names[i++] = arena_strndup(a, name, nlen);
  return names;
}

/* "a, b, c" */
static char *join_names(Arena *a, const char *const *names, int n) {
  char *s = arena_strdup(a, "");
  for (int i = 0; i < n; i++)
    s = arena_printf(a, "%s%s%s", s, i ? ", " : "", names[i]);
  return s;
}

/* The contract as "// tilec:" lines (valid C comments), read back by `tilec --link`: the kernel's
 * own lines of the PTX, copied, so meta.c stays the one writer of the format. */
static void put_meta_comment(FILE *fp, const char *ptx, const char *kernel) {
  const char *line, *name;
  size_t len, nlen;
  bool mine = false;
  for (const char *cur = ptx; next_meta_line(&cur, &line, &len);) {
    if ((name = meta_kernel_name(line, len, &nlen)))
      mine = nlen == strlen(kernel) && !strncmp(name, kernel, nlen);
    if (mine)
      fprintf(fp, "%.*s\n", (int)len, line);
  }
}

/* ---------------------------------------------------------------- ptxas */

/* Assembles ptx for arch with ptxas; the cubin bytes come back arena-allocated. */
static bool run_ptxas(Arena *a, const char *ptxas, const char *ptx, GpuArch arch,
                      unsigned char **out, size_t *size, Diag *d) {
  const char *tmpdir = getenv("TMPDIR");
  char *dir = arena_printf(a, "%s/tilec-cubin-XXXXXX", tmpdir && *tmpdir ? tmpdir : "/tmp");
  if (!mkdtemp(dir)) {
    diag_plain(d, DIAG_ERROR, "--cubin: cannot make a temporary directory: %s", strerror(errno));
    return false;
  }
  char *in = arena_printf(a, "%s/k.ptx", dir), *outp = arena_printf(a, "%s/k.cubin", dir);
  char *archarg = arena_printf(a, "-arch=%s", arch_name(arch));
  size_t ptx_len = strlen(ptx);
  bool ok = out_write_files(a, (const char *const[]){in}, (const char *const[]){ptx}, &ptx_len, 1, d);
  int status = -1;
  if (ok) {
    pid_t pid = fork();
    if (pid == 0) {
      execl(ptxas, ptxas, archarg, "-O3", "-o", outp, in, (char *)NULL);
      _exit(127);
    }
    ok = pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
         WEXITSTATUS(status) == 0;
    if (!ok)
      diag_plain(d, DIAG_ERROR, "--cubin: %s %s failed (status %d)", ptxas, archarg, status);
  }
  FILE *fp = ok ? fopen(outp, "rb") : NULL;
  if (fp) {
    fseek(fp, 0, SEEK_END);
    long n = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    *out = arena_alloc(a, (size_t)(n > 0 ? n : 1));
    ok = n > 0 && fread(*out, 1, (size_t)n, fp) == (size_t)n;
    *size = (size_t)n;
    fclose(fp);
    if (!ok)
      diag_plain(d, DIAG_ERROR, "--cubin: cannot read the output of ptxas");
  } else if (ok) {
    diag_plain(d, DIAG_ERROR, "--cubin: ptxas wrote no cubin");
    ok = false;
  }
  unlink(in), unlink(outp), rmdir(dir);
  return ok;
}

/* ---------------------------------------------------------------- the generated pair */

typedef struct Image {
  GpuArch arch;
  const char *ptx;
  unsigned char *cubin;
  size_t cubin_size;
} Image;

/* One kernel of the module. Its tables in the .c end in sfx: "" when it is the file's only
 * kernel, "_NAME" in a file of several, whose functions are PREFIX_NAME_check/_launch. */
typedef struct Kernel {
  tilert_kernel_info info;         /* the contract, from the first arch's PTX */
  int smem[ARCH_COUNT];            /* dynamic shared bytes per block, per arch */
  tilert_kernel_info *ws[ARCH_COUNT]; /* per arch: its warp-specialized entry (ws_name "" if none) */
  const char *full_name;           /* its full-size entry's name, "" if none */
  int full;                        /* that entry's index in the module, or -1 */
  bool internal;                   /* a full-size entry: launched through its kernel, no functions */
  const char *prefix, *sfx;
} Kernel;

static void put_images(FILE *fp, const Image *im, int n) {
  for (int i = 0; i < n; i++) {
    const char *an = arch_name(im[i].arch);
    fprintf(fp, "\nstatic const char tk_ptx_%s[] =\n", an);
    put_c_string(fp, im[i].ptx);
    fputs(";\n", fp);
    if (!im[i].cubin)
      continue;
    /* 64-bit words keep the ELF image 8-byte aligned without compiler extensions. */
    size_t words = (im[i].cubin_size + 7) / 8;
    fprintf(fp, "\nstatic const unsigned long long tk_cubin_%s[%zu] = {", an, words);
    for (size_t w = 0; w < words; w++) {
      unsigned long long v = 0;
      for (int b = 7; b >= 0; b--) {
        size_t at = w * 8 + (size_t)b;
        v = v << 8 | (at < im[i].cubin_size ? im[i].cubin[at] : 0);
      }
      fprintf(fp, "%s0x%llxULL,", w % 6 ? " " : "\n    ", v);
    }
    fputs("\n};\n", fp);
  }
  fputs("\nstatic const tk_image tk_images[] = {\n", fp);
  for (int i = 0; i < n; i++) {
    const char *an = arch_name(im[i].arch);
    int cc = atoi(an + 3);
    int specific = an[strlen(an) - 1] == 'a';
    if (im[i].cubin)
      fprintf(fp, "    {\"%s\", %d, %d, 1, tk_cubin_%s},\n", an, cc, specific, an);
    fprintf(fp, "    {\"%s\", %d, %d, 0, tk_ptx_%s},\n", an, cc, specific, an);
  }
  fputs("};\n", fp);
}

static void put_contract(Arena *a, FILE *fp, const Kernel *kn) {
  const tilert_kernel_info *k = &kn->info;
  const char *sfx = kn->sfx;
  if (*sfx)
    fprintf(fp, "\n/* ------------------------------------------------------------ kernel %s */\n\n",
            k->name);
  else
    fputs("\n/* ------------------------------------------------------------ this kernel */\n\n",
          fp);
  fprintf(fp, "static const tk_arg tk_args%s[%d] = {\n", sfx, k->nargs + 1);
  for (int i = 0; i < k->nargs; i++) {
    const tilert_arg_info *ai = &k->args[i];
    int dims[4] = {0, 0, 0, 0};
    for (int r = 0; r < ai->rank; r++)
      dims[r] = ai->dims[r];
    fprintf(fp, "    {\"%s\", %d, %d, %s, %d, {%d, %d, %d, %d}, %d}, /* %s */\n", ai->name,
            ai->kind == TILERT_ARG_TENSOR, ai->is_out, dtype_c_enum(ai->dtype),
            ai->kind == TILERT_ARG_TENSOR ? ai->rank : 0, dims[0], dims[1], dims[2], dims[3],
            ai->zero_init, arg_doc(a, k, ai));
  }
  fputs("    {\"\", 0, 0, 0, 0, {0, 0, 0, 0}, 0}};\n", fp);
  fprintf(fp, "static const tk_dim tk_dims%s[%d] = {\n", sfx, k->ndims + 1);
  for (int i = 0; i < k->ndims; i++)
    fprintf(fp, "    {\"%s\", %d, %lld},\n", k->dims[i].name, k->dims[i].pinned,
            (long long)k->dims[i].value);
  fputs("    {\"\", 0, 0}};\n\n", fp);
  for (int i = 0; i < 3; i++)
    put_expr_fn(a, fp, k, arena_printf(a, "tk_grid%d%s", i, sfx), k->grid[i]);
  for (int i = 0; i < k->nrequires; i++)
    put_expr_fn(a, fp, k, arena_printf(a, "tk_req%d%s", i, sfx), k->requires[i]);
  fprintf(fp, "static const tk_expr tk_reqs%s[%d] = {", sfx, k->nrequires + 1);
  for (int i = 0; i < k->nrequires; i++)
    fprintf(fp, "tk_req%d%s, ", i, sfx);
  fprintf(fp, "NULL};\nstatic const char *const tk_req_text%s[%d] = {", sfx, k->nrequires + 1);
  for (int i = 0; i < k->nrequires; i++) {
    put_c_string(fp, k->requires_text[i]);
    fputs(", ", fp);
  }
  fprintf(fp, "NULL};\nstatic const unsigned long long tk_req_dims%s[%d] = {", sfx,
          k->nrequires + 1);
  for (int i = 0; i < k->nrequires; i++)
    fprintf(fp, "0x%llxULL, ", rpn_dims_mask(k, k->requires[i]));
  fputs("0};\n", fp);
}

/* One image's tk_ws initializer for kernel kn (arch i). */
static void put_ws_entry(FILE *fp, const Kernel *kn, const Image *im, int i) {
  const tilert_kernel_info *w = kn->ws[i];
  if (!w->ws_name[0]) {
    fputs("    {NULL, 0, 0, 0, 0, 0, 0, 1, 0, 0, NULL},\n", fp);
    return;
  }
  fprintf(fp, "    {\"%s\", %d, %d, %d, %d, %d, %d, %d, %d, %d, tk_tmaps%s_%s},\n", w->ws_name, w->ws_threads,
          w->ws_smem_bytes, w->ws_persistent, w->ws_groups, w->ws_tile_group, w->ws_walk_rows, w->ws_cluster,
          w->ws_cluster_axis, w->ntmaps, kn->sfx, arch_name(im[i].arch));
}

/* The kernel's warp-specialized entries, per image in tk_images' order (with their tensor maps). */
static void put_ws_table(FILE *fp, const Kernel *kn, const Image *im, int n) {
  for (int i = 0; i < n; i++) {
    const tilert_kernel_info *w = kn->ws[i];
    if (!w->ws_name[0])
      continue;
    fprintf(fp, "\nstatic const tk_tmap tk_tmaps%s_%s[%d] = {\n", kn->sfx, arch_name(im[i].arch), w->ntmaps);
    for (int t = 0; t < w->ntmaps; t++) {
      const tilert_tmap_info *m = &w->tmaps[t];
      int rank = w->args[m->arg].rank, box[4] = {0, 0, 0, 0};
      for (int d = 0; d < rank && d < 4; d++)
        box[d] = m->box[d];
      fprintf(fp, "    {%d, %d, {%d, %d, %d, %d}}, /* %s */\n", m->arg, m->swizzle, box[0], box[1], box[2], box[3],
              w->args[m->arg].name);
    }
    fputs("};\n", fp);
  }
  fprintf(fp, "\nstatic const tk_ws tk_wsentry%s[] = {\n", kn->sfx);
  for (int i = 0; i < n; i++) {
    if (im[i].cubin)
      put_ws_entry(fp, kn, im, i);
    put_ws_entry(fp, kn, im, i);
  }
  fputs("};\n", fp);
}

/* The kernel's table, with its shared memory and warp-specialized entry per image in
 * tk_images' order. */
static void put_kernel_table(FILE *fp, const Kernel *kn, const Image *im, int n) {
  const tilert_kernel_info *k = &kn->info;
  const char *sfx = kn->sfx;
  put_ws_table(fp, kn, im, n);
  fprintf(fp, "\nstatic const int tk_smem%s[] = {", sfx);
  for (int i = 0; i < n; i++)
    fprintf(fp, im[i].cubin ? "%s%d, %d" : "%s%d", i ? ", " : "", kn->smem[i], kn->smem[i]);
  fprintf(fp, "};\n\nstatic const tk_kernel tk_k%s = {\n", sfx);
  fprintf(fp, "    \"%s\", %d, tk_args%s, %d, tk_dims%s, %d,\n", k->name, k->threads, sfx,
          k->nargs, sfx, k->ndims);
  fprintf(fp, "    {tk_grid0%s, tk_grid1%s, tk_grid2%s},\n    {\"%s\", \"%s\", \"%s\"},\n", sfx,
          sfx, sfx, k->grid[0], k->grid[1], k->grid[2]);
  fprintf(fp, "    tk_reqs%s, tk_req_text%s, tk_req_dims%s, %d, tk_smem%s, tk_wsentry%s, %d, %d, %d};\n", sfx,
          sfx, sfx, k->nrequires, sfx, sfx, kn->full, k->cluster > 1 ? k->cluster : 1, k->aligned);
}

/* The module: its images, its kernels, and the load state they share. */
static void put_module(Arena *a, FILE *fp, const Kernel *ks, int nk, const Image *im, int n) {
  const char **names = arena_alloc(a, sizeof *names * (size_t)nk);
  fprintf(fp, "\nstatic const tk_kernel *const tk_kernels[%d] = {", nk);
  for (int i = 0; i < nk; i++) {
    names[i] = ks[i].info.name;
    fprintf(fp, "%s&tk_k%s", i ? ", " : "", ks[i].sfx);
  }
  int nimg = 0;
  for (int i = 0; i < n; i++)
    nimg += 1 + (im[i].cubin != NULL);
  fprintf(fp, "};\n\nstatic const tk_module tk_m = {\n    \"%s\", tk_images, %d, \"",
          join_names(a, names, nk), nimg);
  for (int i = 0; i < n; i++) {
    const char *an = arch_name(im[i].arch);
    if (im[i].cubin)
      fprintf(fp, "%s%s (cubin), %s (PTX)", i ? ", " : "", an, an);
    else
      fprintf(fp, "%s%s (PTX)", i ? ", " : "", an);
  }
  fprintf(fp, "\", tk_kernels, %d};\n\nstatic tk_CUfunction tk_fn[%d], tk_ws_fn[%d];\n"
              "static long long tk_ws_walkers[%d];\n"
              "static tk_state tk_st = {NULL, NULL, -1, -1, tk_fn, tk_ws_fn, tk_ws_walkers};\n",
          nk, nk, nk, nk);
}

/* The file's public functions: one load, unload and error for the module. */
static void put_module_entries(FILE *fp, const char *p) {
  fputs("\n/* ------------------------------------------------------------ entry points */\n", fp);
  fprintf(fp,
          "\ntilec_result %s_load(void) {\n  tk_msg[0] = 0;\n  return tk_load(&tk_st, &tk_m);\n}\n"
          "\nvoid %s_unload(void) { tk_unload(&tk_st); }\n"
          "\nconst char *%s_error(void) { return tk_msg; }\n",
          p, p, p);
}

/* A kernel's public functions (check and launch); ki: its index in the module. */
static void put_kernel_entries(Arena *a, FILE *fp, const Kernel *kn, int ki) {
  const tilert_kernel_info *k = &kn->info;
  const char *params = params_decl(a, k), *pk = kn->prefix;
  /* Arrays of the arguments in contract order: tensors in t[], scalars in sc[]. */
  char *tens = arena_strdup(a, ""), *scal = arena_strdup(a, "");
  for (int i = 0; i < k->nargs; i++) {
    const char *n = c_arg_name(a, k->args[i].name);
    bool is_t = k->args[i].kind == TILERT_ARG_TENSOR;
    tens = arena_printf(a, "%s%s, ", tens, is_t ? n : "NULL");
    scal = arena_printf(a, "%s%s, ", scal, is_t ? "0" : arena_printf(a, "(double)%s", n));
  }
  const char *gather = arena_printf(a,
                                    "  const tilec_tensor *t[%d] = {%sNULL};\n"
                                    "  double sc[%d] = {%s0};\n"
                                    "  int64_t d[%d], grid[3];\n"
                                    "  tilec_result r;\n"
                                    "  (void)sc;\n"
                                    "  tk_msg[0] = 0;\n"
                                    "  r = tk_bind(&tk_k%s, t, d, grid);\n",
                                    k->nargs + 1, tens, k->nargs + 1, scal, k->ndims + 1, kn->sfx);
  fprintf(fp, "\ntilec_result %s_check(%s) {\n%s  return r;\n}\n", pk, k->nargs ? params : "void",
          gather);
  fprintf(fp,
          "\ntilec_result %s_launch(struct CUstream_st *stream%s%s) {\n%s"
          "  if (r != TILEC_OK)\n    return r;\n"
          "  return tk_launch(&tk_st, &tk_m, %d, stream, t, sc, d, grid);\n}\n",
          pk, k->nargs ? ", " : "", params, gather, ki);
}

static void put_header(Arena *a, FILE *fp, const char *base, const Kernel *all, int nall,
                       const Image *im, int n) {
  const char **names = arena_alloc(a, sizeof *names * (size_t)nall);
  const tilert_kernel_info **infos = arena_alloc(a, sizeof *infos * (size_t)nall);
  const Kernel **ks = arena_alloc(a, sizeof *ks * (size_t)nall);
  int nk = 0;
  for (int i = 0; i < nall; i++) /* the public kernels: full-size entries stay inside */
    if (!all[i].internal)
      ks[nk] = &all[i], names[nk] = all[i].info.name, infos[nk++] = &all[i].info;
  char *arches = arena_strdup(a, "");
  for (int i = 0; i < n; i++)
    arches = arena_printf(a, "%s%s%s%s", arches, i ? ", " : "", arch_name(im[i].arch),
                          im[i].cubin ? " +cubin" : "");
  put_header_intro(fp, file_part(base),
                   nk == 1 ? arena_printf(a, "kernel %s, %s", names[0], arches)
                           : arena_printf(a, "%d kernels, %s", nk, arches));
  for (int i = 0; i < nk; i++)
    put_signature(a, fp, &ks[i]->info);
  fputs(" */\n", fp);
  for (int i = 0; i < nk; i++)
    put_meta_comment(fp, im[0].ptx, names[i]);
  put_guarded_decls(a, fp, c_prefix(a, base), "every kernel of the file (one module, loaded once)",
                    infos, nk);
}

static bool write_pair(Arena *a, const char *base, const Kernel *ks, int nk, const Image *im,
                       int n, Diag *d) {
  Buf h, c;
  if (!buf_open(&h, d))
    return false;
  put_header(a, h.fp, base, ks, nk, im, n);
  if (!buf_open(&c, d)) {
    fclose(h.fp);
    free(h.data);
    return false;
  }
  fprintf(c.fp,
          "/* %s.c — generated by tilec --emit=c; do not edit. Needs libcuda.so.1 at run time\n"
          " * only (dlopen; link with -ldl on glibc older than 2.34). docs/aot.md. */\n"
          "#include \"%s.h\"\n\n",
          file_part(base), file_part(base));
  fputs(tk_runtime_src, c.fp);
  for (int i = 0; i < nk; i++)
    put_contract(a, c.fp, &ks[i]);
  put_images(c.fp, im, n);
  for (int i = 0; i < nk; i++)
    put_kernel_table(c.fp, &ks[i], im, n);
  put_module(a, c.fp, ks, nk, im, n);
  put_module_entries(c.fp, c_prefix(a, base));
  for (int i = 0; i < nk; i++)
    if (!ks[i].internal)
      put_kernel_entries(a, c.fp, &ks[i], i);
  return buf_commit_pair(a, &h, &c, base, d);
}

/* Metadata lines are C comments in the header: a trailing backslash (or the trigraph of one,
 * which -std=c99 honours) would swallow the next line; refuse it. */
static bool meta_is_c_safe(const tilert_kernel_info *k, Diag *d) {
  for (int i = 0; i < k->nrequires; i++) {
    const char *t = k->requires_text[i];
    size_t n = strlen(t);
    if ((n && t[n - 1] == '\\') || (n >= 3 && !strcmp(t + n - 3, "?\?/")) || strchr(t, '\n')) {
      diag_plain(d, DIAG_ERROR, "--emit=c: requirement text '%s' cannot be embedded", t);
      return false;
    }
  }
  return true;
}

/* Reads the contract of every kernel from the PTX of arch i into ks (i == 0) or checks that it
 * is the one arch 0 gave (only shared memory may differ per arch). */
static bool read_contracts(Arena *a, Kernel *ks, const char *const *names, int nk,
                           const Image *im, int i, Diag *d) {
  tilert_kernel_info *other = arena_alloc(a, sizeof *other);
  int found = 0;
  meta_kernel_names(a, im[i].ptx, &found);
  for (int j = 0; j < nk; j++) {
    tilert_kernel_info *ki = i == 0 ? &ks[j].info : other;
    tilert_status st = tilert_parse_kernel_info_named(im[i].ptx, names[j], ki);
    if (st.code != TILERT_OK) {
      diag_plain(d, DIAG_ERROR, "--emit=c: PTX for %s: %s", arch_name(im[i].arch), st.message);
      return false;
    }
    /* A warp-specialized entry (sm_90a) is per image, picked per launch (tensor maps of the
     * launch's views): not part of the contract, which must agree across arches. */
    tilert_kernel_info *ws = arena_alloc(a, sizeof *ws);
    *ws = *ki;
    ks[j].ws[i] = ws;
    if (i == 0)
      ks[j].full_name = arena_strdup(a, ki->full_name);
    int cluster = ki->cluster, aligned = ki->aligned; /* the contract's, behind the per-image fields */
    memset(ki->ws_name, 0, sizeof *ki - offsetof(tilert_kernel_info, ws_name)); /* ws_name .. the end */
    ki->cluster = cluster, ki->aligned = aligned;
    ks[j].smem[i] = ki->smem_bytes;
    other->smem_bytes = ks[j].info.smem_bytes;
    if (i > 0 && (found != nk || memcmp(&ks[j].info, other, sizeof *other) != 0)) {
      diag_plain(d, DIAG_ERROR, "--emit=c: the PTX for %s has a different launch contract "
                                "than the one for %s", arch_name(im[i].arch), arch_name(im[0].arch));
      return false;
    }
  }
  return true;
}

/* Each kernel's full-size entry, where the module has it with the kernel's dims in the same
 * order (tk_full_fits compares them by index): found, and marked internal. The public kernels
 * are the rest; returns their number. */
static int link_full_entries(Kernel *ks, int nk) {
  for (int j = 0; j < nk; j++)
    ks[j].full = -1;
  for (int j = 0; j < nk; j++)
    for (int f = 0; f < nk && ks[j].full_name && ks[j].full_name[0]; f++) {
      const tilert_kernel_info *x = &ks[j].info, *y = &ks[f].info;
      bool same = f != j && !strcmp(y->name, ks[j].full_name) && x->ndims == y->ndims &&
                  x->nargs == y->nargs;
      for (int i = 0; same && i < x->ndims; i++)
        same = !strcmp(x->dims[i].name, y->dims[i].name);
      if (same)
        ks[j].full = f, ks[f].internal = true;
    }
  int npub = 0;
  for (int j = 0; j < nk; j++)
    npub += !ks[j].internal;
  return npub;
}

bool emit_c_files(Arena *a, const char *base, const char *const *ptx_per_arch,
                  const GpuArch *archs, int narchs, bool cubin, Diag *d) {
  if (narchs < 1 || narchs > ARCH_COUNT) {
    diag_plain(d, DIAG_ERROR, "--emit=c needs between 1 and %d --arch values", ARCH_COUNT);
    return false;
  }
  if (!emit_c_name_ok(base, "--emit=c", d))
    return false;
  int nk = 0;
  const char **names = meta_kernel_names(a, ptx_per_arch[0], &nk);
  if (nk == 0) /* no kernel: the parser says what is missing */
    names[0] = NULL, nk = 1;
  Kernel *ks = arena_alloc(a, sizeof *ks * (size_t)nk);
  Image *im = arena_alloc(a, sizeof *im * (size_t)narchs);
  const char *ptxas = cubin ? ptxas_find(a) : NULL;
  if (cubin && !ptxas)
    diag_plain(d, DIAG_WARNING, "--cubin: no ptxas found (PATH, TILEC_PTXAS, "
                                "/usr/local/cuda/bin): embedding PTX only");
  for (int i = 0; i < narchs; i++) {
    for (int j = 0; j < i; j++)
      if (im[j].arch == archs[i]) {
        diag_plain(d, DIAG_ERROR, "--emit=c: --arch=%s given twice", arch_name(archs[i]));
        return false;
      }
    im[i] = (Image){.arch = archs[i], .ptx = ptx_per_arch[i]};
    if (!read_contracts(a, ks, names, nk, im, i, d))
      return false;
    if (ptxas && !run_ptxas(a, ptxas, ptx_per_arch[i], archs[i], &im[i].cubin,
                            &im[i].cubin_size, d))
      return false;
  }
  const char *p = c_prefix(a, base);
  int npub = link_full_entries(ks, nk);
  for (int j = 0; j < nk; j++) {
    if (!meta_is_c_safe(&ks[j].info, d))
      return false;
    ks[j].prefix = ks[j].internal ? arena_printf(a, "%s_%s", p, ks[j].info.name)
                                  : kernel_prefix(a, p, npub, ks[j].info.name);
    ks[j].sfx = ks[j].prefix + strlen(p);
  }
  return write_pair(a, base, ks, nk, im, narchs, d);
}

/* ---------------------------------------------------------------- --link */

static char *read_text(Arena *a, const char *path, Diag *d) {
  FILE *fp = fopen(path, "rb");
  if (!fp) {
    diag_plain(d, DIAG_ERROR, "--link: cannot read '%s': %s", path, strerror(errno));
    return NULL;
  }
  fseek(fp, 0, SEEK_END);
  long n = ftell(fp);
  fseek(fp, 0, SEEK_SET);
  char *s = arena_alloc(a, (size_t)(n > 0 ? n : 0) + 1);
  size_t got = n > 0 ? fread(s, 1, (size_t)n, fp) : 0;
  fclose(fp);
  s[got] = '\0';
  return s;
}

/* Specializations link when their signatures are the same C function type: same argument
 * count, kinds, ranks and scalar types (tensor element types and pinned sizes may differ). */
static bool same_signature(const tilert_kernel_info *x, const tilert_kernel_info *y,
                           const char *xn, const char *yn, Diag *d) {
  bool ok = x->nargs == y->nargs;
  for (int i = 0; ok && i < x->nargs; i++) {
    const tilert_arg_info *p = &x->args[i], *q = &y->args[i];
    ok = p->kind == q->kind && (p->kind == TILERT_ARG_TENSOR ? p->rank == q->rank
                                                             : p->dtype == q->dtype);
  }
  if (!ok)
    diag_plain(d, DIAG_ERROR, "--link: %s and %s have different argument lists; only "
                              "specializations of one kernel can be linked", xn, yn);
  return ok;
}

/* One --link input: a header from --emit=c, of one kernel or of a file of several. */
typedef struct LinkInput {
  const char *pre;                 /* its C prefix: PRE_load, PRE_unload, PRE_error */
  const char **names;              /* its kernels, in order */
  int nk;
  tilert_kernel_info *k;           /* their contracts */
} LinkInput;

static bool link_read(Arena *a, const char *header, const char *p, LinkInput *in, Diag *d) {
  char *text = emit_c_name_ok(header, "--link", d) ? read_text(a, header, d) : NULL;
  if (!text)
    return false;
  in->names = meta_kernel_names(a, text, &in->nk);
  if (in->nk == 0) /* no kernel: the parser says what is missing */
    in->names[0] = NULL, in->nk = 1;
  in->k = arena_alloc(a, sizeof *in->k * (size_t)in->nk);
  for (int j = 0; j < in->nk; j++) {
    tilert_status st = tilert_parse_kernel_info_named(text, in->names[j], &in->k[j]);
    if (st.code != TILERT_OK) {
      diag_plain(d, DIAG_ERROR, "--link: '%s' is not a header from tilec --emit=c: %s", header,
                 st.message);
      return false;
    }
  }
  in->pre = c_prefix(a, header);
  if (!strcmp(in->pre, p)) {
    diag_plain(d, DIAG_ERROR, "--link: the output name '%s' is also an input", p);
    return false;
  }
  return true;
}

/* Inputs link kernel by kernel: the same kernels, in the same order, each with one signature. */
static bool link_compatible(Arena *a, const LinkInput *x, const LinkInput *y, Diag *d) {
  bool same = x->nk == y->nk;
  for (int j = 0; same && j < x->nk; j++)
    same = !strcmp(x->k[j].name, y->k[j].name);
  if (!same && (x->nk > 1 || y->nk > 1)) {
    diag_plain(d, DIAG_ERROR, "--link: %s has the kernels %s but %s has %s; files of several "
               "kernels link with builds of the same file", x->pre, join_names(a, x->names, x->nk),
               y->pre, join_names(a, y->names, y->nk));
    return false;
  }
  for (int j = 0; j < x->nk; j++)
    if (!same_signature(&x->k[j], &y->k[j], x->pre, y->pre, d))
      return false;
  return true;
}

/* The linked entry points of kernel j: the first input whose check accepts the arguments. */
static void link_put_kernel(Arena *a, FILE *fp, const char *p, const LinkInput *in, int n, int j) {
  const tilert_kernel_info *k = &in[0].k[j];
  const char *params = params_decl(a, k), *call = params_call(a, k);
  const char *pk = kernel_prefix(a, p, in[0].nk, k->name), *sfx = pk + strlen(p);
  const char *comma = k->nargs ? ", " : "", *why = k->nargs ? ", &" : "&";
  /* The choice: first specialization whose check passes. When every one rejects the arguments
   * as invalid (NULL, dtype), that is the caller's error, not a missing specialization. */
  fprintf(fp, "\n/* Index of the first specialization that accepts the arguments, or -1. */\n"
              "static int tk_choose%s(%s%stilec_result *why) {\n"
              "  int all_invalid = 1;\n  tilec_result r;\n"
              "  snprintf(tk_msg, sizeof tk_msg, \"no specialization of %s fits: \");\n",
          sfx, k->nargs ? params : "", comma, pk);
  for (int i = 0; i < n; i++) {
    const char *ki = kernel_prefix(a, in[i].pre, in[i].nk, k->name);
    fprintf(fp, "  if ((r = %s_check(%s)) == TILEC_OK)\n    return %d;\n"
                "  all_invalid &= r == TILEC_ERROR_INVALID_ARGUMENT;\n"
                "  tk_note(\"%s\", %s_error());\n",
            ki, call, i, in[i].pre, in[i].pre);
  }
  fprintf(fp, "  *why = all_invalid ? TILEC_ERROR_INVALID_ARGUMENT : TILEC_ERROR_NO_MATCH;\n"
              "  return -1;\n}\n");
  fprintf(fp, "\ntilec_result %s_check(%s) {\n  tilec_result why = TILEC_OK;\n"
              "  return tk_choose%s(%s%swhy) >= 0 ? TILEC_OK : why;\n}\n",
          pk, k->nargs ? params : "void", sfx, call, why);
  fprintf(fp, "\ntilec_result %s_launch(struct CUstream_st *stream%s%s) {\n"
              "  tilec_result r = TILEC_OK;\n  switch (tk_choose%s(%s%sr)) {\n",
          pk, comma, k->nargs ? params : "", sfx, call, why);
  for (int i = 0; i < n; i++)
    fprintf(fp, "  case %d:\n    tk_msg[0] = 0;\n    r = %s_launch(stream%s%s);\n"
                "    if (r != TILEC_OK)\n      tk_note(\"%s\", %s_error());\n    return r;\n",
            i, kernel_prefix(a, in[i].pre, in[i].nk, k->name), comma, call, in[i].pre,
            in[i].pre);
  fputs("  default:\n    return r;\n  }\n}\n", fp);
}

/* The linked header declares what the first input does, under the output's prefix. */
static void link_put_header(Arena *a, FILE *fp, const char *base, const LinkInput *in,
                            const char *list) {
  put_header_intro(fp, file_part(base), arena_printf(a, "--link of %s", list));
  for (int j = 0; j < in[0].nk; j++)
    put_signature(a, fp, &in[0].k[j]);
  fputs(" */\n", fp);
  fprintf(fp, " /* Specializations, tried in this order: %s. */\n", list);
  const tilert_kernel_info **infos = arena_alloc(a, sizeof *infos * (size_t)in[0].nk);
  for (int j = 0; j < in[0].nk; j++)
    infos[j] = &in[0].k[j];
  put_guarded_decls(a, fp, c_prefix(a, base), "every kernel of every specialization", infos,
                    in[0].nk);
}

static void link_put_source(Arena *a, FILE *fp, const char *base, const char *const *headers,
                            const LinkInput *in, int n, const char *list) {
  const char *p = c_prefix(a, base);
  fprintf(fp, "/* %s.c — generated by tilec --link; do not edit. Picks the first of %s whose\n"
              " * contract accepts the arguments. docs/aot.md. */\n#include \"%s.h\"\n",
          file_part(base), list, file_part(base));
  for (int i = 0; i < n; i++)
    fprintf(fp, "#include \"%s\"\n", file_part(headers[i]));
  fputs("\n#include <stdio.h>\n#include <string.h>\n\n"
        "#if defined(__cplusplus) && __cplusplus >= 201103L\n#define TK_TLS thread_local\n"
        "#elif defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L\n"
        "#define TK_TLS _Thread_local\n#elif defined(__GNUC__)\n#define TK_TLS __thread\n"
        "#else\n#define TK_TLS\n#endif\n\nstatic TK_TLS char tk_msg[1024];\n\n"
        "static void tk_note(const char *name, const char *why) {\n"
        "  size_t used = strlen(tk_msg);\n"
        "  snprintf(tk_msg + used, sizeof tk_msg - used, \"%s%s: %s\",\n"
        "           used && tk_msg[used - 1] != ' ' ? \"; \" : \"\", name, why);\n}\n",
        fp);
  fprintf(fp, "\ntilec_result %s_load(void) {\n  tilec_result r;\n  tk_msg[0] = 0;\n", p);
  for (int i = 0; i < n; i++)
    fprintf(fp, "  if ((r = %s_load()) != TILEC_OK) {\n    tk_note(\"%s\", %s_error());\n"
                "    return r;\n  }\n",
            in[i].pre, in[i].pre, in[i].pre);
  fprintf(fp, "  return TILEC_OK;\n}\n\nvoid %s_unload(void) {\n", p);
  for (int i = 0; i < n; i++)
    fprintf(fp, "  %s_unload();\n", in[i].pre);
  fprintf(fp, "}\n\nconst char *%s_error(void) { return tk_msg; }\n", p);
  for (int j = 0; j < in[0].nk; j++)
    link_put_kernel(a, fp, p, in, n, j);
}

bool emit_c_link(Arena *a, const char *base, const char *const *headers, int n, Diag *d) {
  if (n < 1) {
    diag_plain(d, DIAG_ERROR, "--link needs at least one generated header");
    return false;
  }
  LinkInput *in = arena_alloc(a, sizeof *in * (size_t)n);
  const char **pre = arena_alloc(a, sizeof *pre * (size_t)n);
  const char *p = c_prefix(a, base);
  if (!emit_c_name_ok(base, "--link", d))
    return false;
  for (int i = 0; i < n; i++) {
    if (!link_read(a, headers[i], p, &in[i], d) || (i > 0 && !link_compatible(a, &in[0], &in[i], d)))
      return false;
    pre[i] = in[i].pre;
  }
  const char *list = join_names(a, pre, n);
  Buf h, c;
  if (!buf_open(&h, d))
    return false;
  link_put_header(a, h.fp, base, in, list);
  if (!buf_open(&c, d)) {
    fclose(h.fp);
    free(h.data);
    return false;
  }
  link_put_source(a, c.fp, base, headers, in, n, list);
  return buf_commit_pair(a, &h, &c, base, d);
}
