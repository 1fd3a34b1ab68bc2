/* tilert_internal.h — private to the runtime sources: object layouts, the driver entry-point table and
 * status helpers. Not installed; users see only tilert.h. */
#ifndef TILERT_INTERNAL_H
#define TILERT_INTERNAL_H

#include "tilert.h"

#include <pthread.h>
#include <stdbool.h>

#include <cuda.h> /* types only: every entry point comes from cuGetProcAddress (cuda_loader.c) */

/* ---------------------------------------------------------------- status */

tilert_status tilert__ok(void);
tilert_status tilert__err(tilert_code code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* "CALL: CUDA_ERROR_NAME" (+ ": extra" when extra is non-empty), code TILERT_ERROR_DRIVER. */
tilert_status tilert__drv_err(const char *call, CUresult r, const char *extra);

/* Evaluates a driver call; on failure returns the status naming the call. */
#define TILERT_CU(call_name, expr)                         \
  do {                                                     \
    CUresult tilert__r = (expr);                           \
    if (tilert__r != CUDA_SUCCESS)                         \
      return tilert__drv_err(call_name, tilert__r, NULL);  \
  } while (0)

/* ---------------------------------------------------------------- driver */

/* Every driver entry point the runtime uses; filled by tilert__driver_load(). Field names drop
 * the "cu" prefix so cuda.h's versioning macros (cuMemAlloc -> cuMemAlloc_v2) never touch them. */
typedef struct tilert_driver {
  CUresult (*Init)(unsigned int);
  CUresult (*DriverGetVersion)(int *);
  CUresult (*GetErrorName)(CUresult, const char **);
  CUresult (*GetErrorString)(CUresult, const char **);
  CUresult (*DeviceGetCount)(int *);
  CUresult (*DeviceGet)(CUdevice *, int);
  CUresult (*DeviceGetName)(char *, int, CUdevice);
  CUresult (*DeviceGetAttribute)(int *, CUdevice_attribute, CUdevice);
  CUresult (*DevicePrimaryCtxRetain)(CUcontext *, CUdevice);
  CUresult (*DevicePrimaryCtxRelease)(CUdevice);
  CUresult (*CtxSetCurrent)(CUcontext);
  CUresult (*CtxSynchronize)(void);
  CUresult (*ModuleLoadDataEx)(CUmodule *, const void *, unsigned int, CUjit_option *, void **);
  CUresult (*ModuleUnload)(CUmodule);
  CUresult (*ModuleGetFunction)(CUfunction *, CUmodule, const char *);
  CUresult (*FuncSetAttribute)(CUfunction, CUfunction_attribute, int);
  CUresult (*FuncGetAttribute)(int *, CUfunction_attribute, CUfunction);
  CUresult (*FuncGetParamInfo)(CUfunction, size_t, size_t *, size_t *); /* NULL before 12.4 */
  CUresult (*LaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                           unsigned, CUstream, void **, void **);
  CUresult (*StreamCreate)(CUstream *, unsigned int);
  CUresult (*StreamDestroy)(CUstream);
  CUresult (*StreamSynchronize)(CUstream);
  CUresult (*EventCreate)(CUevent *, unsigned int);
  CUresult (*EventRecord)(CUevent, CUstream);
  CUresult (*EventSynchronize)(CUevent);
  CUresult (*EventElapsedTime)(float *, CUevent, CUevent);
  CUresult (*EventDestroy)(CUevent);
  CUresult (*MemAlloc)(CUdeviceptr *, size_t);
  CUresult (*MemFree)(CUdeviceptr);
  CUresult (*MemcpyHtoD)(CUdeviceptr, const void *, size_t);
  CUresult (*MemcpyDtoH)(void *, CUdeviceptr, size_t);
  CUresult (*MemsetD8)(CUdeviceptr, unsigned char, size_t);
  CUresult (*OccupancyMaxActiveBlocksPerMultiprocessor)(int *, CUfunction, int, size_t);
  CUresult (*OccupancyMaxActiveClusters)(int *, CUfunction, const CUlaunchConfig *);
  CUresult (*LaunchKernelEx)(const CUlaunchConfig *, CUfunction, void **, void **);
  CUresult (*TensorMapEncodeTiled)(CUtensorMap *, CUtensorMapDataType, cuuint32_t, void *, const cuuint64_t *,
                                   const cuuint64_t *, const cuuint32_t *, const cuuint32_t *,
                                   CUtensorMapInterleave, CUtensorMapSwizzle, CUtensorMapL2promotion,
                                   CUtensorMapFloatOOBfill);
} tilert_driver;

/* Loads libcuda once per process (dlopen of $TILERT_LIBCUDA or "libcuda.so.1", then
 * cuGetProcAddress_v2 for everything) and runs cuInit. Later calls return the first outcome.
 * NO_DRIVER when the library or an entry point is missing or it is the toolkit's stub;
 * NO_DEVICE when cuInit says there is no device. */
tilert_status tilert__driver_load(const tilert_driver **out);
/* The driver table for a GPU device, with the device's context made current on this thread. */
tilert_status tilert__gpu_enter(tilert_device *dev, const tilert_driver **d);
/* "CUDA_ERROR_INVALID_PTX" (or "CUresult 218" when the driver cannot name it). */
const char *tilert__cu_name(CUresult r);

/* ---------------------------------------------------------------- objects */

struct tilert_device {
  tilert_backend backend;      /* GPU or CPU, never AUTO */
  int ordinal;
  CUdevice cu_dev;
  CUcontext ctx;               /* the primary context, retained */
  int cc;                      /* 90 for sm_90 */
  int sms;                     /* multiprocessors */
  int max_smem_optin;          /* bytes per block with the opt-in attribute */
  int max_grid[3];
  char name[160];
  pthread_mutex_t zero_lock;   /* GPU: guards the zeroing kernel's first load */
  CUmodule zero_mod;           /* GPU: the zeroing kernel of `= 0` outputs (zero.c), or NULL */
  CUfunction zero_fn;
};

/* The tensor maps of a warp-specialized entry, cached for the last binding they were built for. */
typedef struct tilert_tmaps {
  pthread_mutex_t lock;        /* held from the binding to the launch: the launch copies map[] */
  CUtensorMap map[TILERT_MAX_TMAPS];
  tilert_tensor key[TILERT_MAX_TMAPS]; /* the views they describe */
  int valid;                   /* 1: map[] describes key[]; -1: key[] cannot be described */
} tilert_tmaps;

struct tilert_kernel {
  tilert_device *dev;
  tilert_kernel_info info;
  CUfunction fn;               /* GPU */
  CUfunction ws_fn;            /* GPU: the warp-specialized entry (info.ws_name), or NULL */
  tilert_tmaps *tmaps;         /* with ws_fn */
  int ws_blocks;               /* persistent ws_fn: blocks to launch at most (resident blocks),
                                  0: one per tile (TILERT_PERSISTENT=0) */
  int tile_group;              /* persistent ws_fn: rows of y per raster group (TILERT_TILE_GROUP) */
  int walk_waves;              /* persistent ws_fn: walks grids of at most this many waves of
                                  ws_blocks (TILERT_PERSISTENT_WAVES), or 0: any grid */
  int walk_chunk;              /* persistent row walk: the chunk TILERT_WALK_CHUNK forces (0: a
                                  block per tile), or -1: chosen per launch */
  struct tilert_kernel *full;  /* GPU: the full-size entry (info.full_name), or NULL */
  int64_t full_dims[TILERT_MAX_DIMS]; /* with full: per dim of info, the value it pins, or -1 */
  tilert_cpu_fn cpu_fn;        /* CPU */
  void *cpu_ctx;
  struct tilert_kernel *next;  /* the module's list */
};

struct tilert_module {
  tilert_device *dev;
  CUmodule mod;
  char *meta;                  /* the "// tilec:" lines of the PTX, kept for kernel lookup */
  char *entries;               /* "NAME COUNT" per entry point: its parameters (check_params) */
  tilert_kernel *kernels;      /* created on demand by tilert_module_get_kernel */
};

struct tilert_stream {
  tilert_device *dev;
  CUstream s;                  /* NULL on the CPU backend */
  bool borrowed;               /* tilert_stream_wrap: someone else's stream, never destroyed */
};

struct tilert_event {
  tilert_device *dev;
  CUevent e;                   /* GPU */
  double host_ms;              /* CPU: CLOCK_MONOTONIC at record, -1 before */
};

/* ---------------------------------------------------------------- TMA (tma.c) */

/* Fills k->tmaps for these arguments (reusing them when the views are the ones they were built
 * for). False when some view cannot be a TMA tensor map (unaligned base or stride, too large):
 * the caller launches the cp.async entry instead. */
bool tilert__tmaps_bind(const tilert_driver *d, tilert_kernel *k, const tilert_arg *args);
/* The sizes of the parameters a launch passes the kernel of info (ws: its warp-specialized entry)
 * into sizes[0 .. n), at most TILERT_MAX_ARGS * TILERT_MAX_RANK + TILERT_MAX_DIMS +
 * TILERT_MAX_TMAPS + 4; n, or -1 out of memory. */
int tilert__launch_params(const tilert_kernel_info *info, bool ws, size_t *sizes);
/* The parameters `.entry NAME(...)` declares in ptx, or -1 when it declares no such entry. */
int tilert__ptx_param_count(const char *ptx, const char *name);

/* ---------------------------------------------------------------- launch (bind.c, launch.c) */

/* The checks of tilert_bind that depend on the values, not the signature (tilert_plan_launch
 * repeats them): an i32 scalar is an integer in range; a tensor's data is aligned to its element
 * and, when need (blocks run), not NULL. */
tilert_status tilert__check_scalar(const tilert_arg_info *ai, const tilert_arg *a);
tilert_status tilert__check_data(const tilert_arg_info *ai, const tilert_tensor *t, bool need);
/* tilert_bind with the kernel's name before the message. */
tilert_status tilert__bind_kernel(const tilert_kernel *k, const tilert_arg *args, int nargs,
                                  int64_t *dims, int64_t grid[3]);
/* tilert_launch after binding: an empty grid launches nothing; else the CPU or the GPU. */
tilert_status tilert__launch_bound(tilert_kernel *k, const tilert_arg *args, int nargs,
                                   const int64_t *dims, const int64_t grid[3],
                                   tilert_stream *stream);

/* The first tensor of args that does not start on a 16-byte boundary or has a stride (but the
 * last) that is not a multiple of 16 bytes, or -1 (launch.c): what an entry with info.aligned
 * cannot take. */
int tilert__first_unaligned(const tilert_kernel_info *info, const tilert_arg *args);
/* The error of an aligned entry launched on argument i, which is not (TILERT_ERROR_SHAPE). */
tilert_status tilert__unaligned_err(const tilert_kernel_info *info, int i);
/* The entry a launch with these dims and args runs (launch.c): k's full-size entry where every
 * dim it pins has its value here and, if that entry is aligned, the tensors are; else k. */
tilert_kernel *tilert__entry_for(tilert_kernel *k, const tilert_arg *args, const int64_t *dims);
/* tilert__bind_kernel, then with the entry the launch runs (tilert__entry_for), which *k becomes:
 * tilert_launch and tilert_plan_create. An aligned plain entry (TILEC_ALIGNED_ARGS=1) refuses
 * other tensors (TILERT_ERROR_SHAPE). */
tilert_status tilert__bind_entry(tilert_kernel **k, const tilert_arg *args, int nargs, int64_t *dims,
                                 int64_t grid[3]);

/* A row walk's chunk (launch.c): the tiles of a row of GX a walker takes per step, for ROWS rows
 * and WALKERS resident blocks, or 0: a block per tile. FORCE >= 0 (TILERT_WALK_CHUNK) wins. */
int64_t tilert__walk_chunk(int64_t gx, int64_t rows, int64_t walkers, int force);

/* ---------------------------------------------------------------- metadata */

/* Makes sure an RPN string is well formed against info's dims (used by the parser). */
tilert_status tilert__check_expr(const tilert_kernel_info *info, const char *rpn);
/* Writes "N = 3000, BLOCK = 1024"-style values of the dims an RPN string names. */
void tilert__expr_dims(const tilert_kernel_info *info, const char *rpn, const int64_t *dim_values,
                       char *buf, size_t len);

/* Out tensors declared `= 0` (zero.c): whether a kernel has any, and their zeroing before its
 * launch, on the host (CPU backend) or as one launch of the runtime's zeroing kernel on s. */
bool tilert__has_zero_init(const tilert_kernel_info *info);
tilert_status tilert__zero_outputs_cpu(const tilert_kernel_info *info, const tilert_arg *args);
tilert_status tilert__zero_outputs_gpu(const tilert_driver *d, tilert_device *dev, const tilert_kernel_info *info,
                                       const tilert_arg *args, CUstream s, bool *launched);
/* The zeroing launch alone, on the GPU (no kernel follows it: a launch of 0 blocks still zeroes
 * its `= 0` tensors). */
tilert_status tilert__zero_outputs_only(tilert_device *dev, const tilert_kernel_info *info, const tilert_arg *args,
                                        tilert_stream *stream);
void tilert__zero_unload(const tilert_driver *d, tilert_device *dev);
/* The zeroing kernel's PTX for compute capability cc (malloc'd; NULL: out of memory). */
char *tilert__zero_ptx(int cc);

#endif
