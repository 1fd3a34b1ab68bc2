/* cuda_loader.c — finds the CUDA driver at run time.
 *
 * libcuda is dlopen'ed (never linked), so the runtime starts on machines without a driver. Only
 * cuGetProcAddress_v2 comes from dlsym; every other entry point is asked of it, at the ABI version
 * of the cuda.h we were built with (or of the driver, when that is older), which also resolves
 * the versioned names (cuMemAlloc -> cuMemAlloc_v2). TILERT_LIBCUDA overrides the library path:
 * tests point it at a missing file or at the toolkit's stub library to exercise the error paths. */
#include "tilert_internal.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef CUresult (*GetProcFn)(const char *, void **, int, cuuint64_t,
                              CUdriverProcAddressQueryResult *);

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static tilert_driver drv;
static tilert_status load_status;

/* Entry points by base name, where they go in the table, and the ABI version whose signature
 * tilert_internal.h declares (cudaTypedefs.h's PFN_cuX_vNNNN). Asking for the driver's own version
 * instead returns the newest variant, whose signature may differ: CUDA 13's cuCtxSynchronize
 * takes a context argument. */
#define DRIVER_ENTRY(field, abi) {"cu" #field, (void **)&drv.field, abi}
static const struct {
  const char *name;
  void **slot;
  int abi;
} entries[] = {
    DRIVER_ENTRY(Init, 2000),
    DRIVER_ENTRY(GetErrorName, 6000),
    DRIVER_ENTRY(GetErrorString, 6000),
    DRIVER_ENTRY(DeviceGetCount, 2000),
    DRIVER_ENTRY(DeviceGet, 2000),
    DRIVER_ENTRY(DeviceGetName, 2000),
    DRIVER_ENTRY(DeviceGetAttribute, 2000),
    DRIVER_ENTRY(DevicePrimaryCtxRetain, 7000),
    DRIVER_ENTRY(DevicePrimaryCtxRelease, 11000),
    DRIVER_ENTRY(CtxSetCurrent, 4000),
    DRIVER_ENTRY(CtxSynchronize, 2000),
    DRIVER_ENTRY(ModuleLoadDataEx, 2010),
    DRIVER_ENTRY(ModuleUnload, 2000),
    DRIVER_ENTRY(ModuleGetFunction, 2000),
    DRIVER_ENTRY(FuncSetAttribute, 9000),
    DRIVER_ENTRY(FuncGetAttribute, 2020),
    DRIVER_ENTRY(LaunchKernel, 4000),
    DRIVER_ENTRY(StreamCreate, 2000),
    DRIVER_ENTRY(StreamDestroy, 4000),
    DRIVER_ENTRY(StreamSynchronize, 2000),
    DRIVER_ENTRY(EventCreate, 2000),
    DRIVER_ENTRY(EventRecord, 2000),
    DRIVER_ENTRY(EventSynchronize, 2000),
    DRIVER_ENTRY(EventElapsedTime, 2000),
    DRIVER_ENTRY(EventDestroy, 4000),
    DRIVER_ENTRY(MemAlloc, 3020),
    DRIVER_ENTRY(MemFree, 3020),
    DRIVER_ENTRY(MemcpyHtoD, 3020),
    DRIVER_ENTRY(MemcpyDtoH, 3020),
    DRIVER_ENTRY(MemsetD8, 3020),
    DRIVER_ENTRY(OccupancyMaxActiveBlocksPerMultiprocessor, 6050),
    DRIVER_ENTRY(OccupancyMaxActiveClusters, 11070),
    DRIVER_ENTRY(LaunchKernelEx, 11060),
    DRIVER_ENTRY(TensorMapEncodeTiled, 12000),
};

/* Entry points the runtime does without on drivers that lack them (their slot stays NULL). */
static const struct {
  const char *name;
  void **slot;
  int abi;
} optional_entries[] = {
    DRIVER_ENTRY(FuncGetParamInfo, 12040), /* check_params, launch.c */
};

static tilert_status fetch(GetProcFn get, const char *name, void **slot, int version) {
  CUdriverProcAddressQueryResult q = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  CUresult r = get(name, slot, version, CU_GET_PROC_ADDRESS_DEFAULT, &q);
  if (r == CUDA_ERROR_STUB_LIBRARY)
    return tilert__err(TILERT_ERROR_NO_DRIVER,
                       "cuGetProcAddress: CUDA_ERROR_STUB_LIBRARY: this is the CUDA toolkit's "
                       "stub library, not a driver");
  if (r != CUDA_SUCCESS || q != CU_GET_PROC_ADDRESS_SUCCESS || !*slot)
    return tilert__err(TILERT_ERROR_NO_DRIVER,
                       "cuGetProcAddress(%s, %d) failed (CUresult %d, query result %d): the "
                       "driver is too old or broken",
                       name, version, (int)r, (int)q);
  return tilert__ok();
}

static tilert_status load(void) {
  const char *path = getenv("TILERT_LIBCUDA");
  if (!path || !*path)
    path = "libcuda.so.1";
  void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char *why = dlerror();
    return tilert__err(TILERT_ERROR_NO_DRIVER, "no CUDA driver: dlopen(%s) failed: %s", path,
                       why ? why : "?");
  }
  /* dlsym gives a void *; a function pointer is copied out of it bytewise (ISO C has no cast). */
  void *sym = dlsym(lib, "cuGetProcAddress_v2");
  if (!sym)
    return tilert__err(TILERT_ERROR_NO_DRIVER,
                       "%s has no cuGetProcAddress_v2: not a CUDA driver, or one older than 12.0",
                       path);
  GetProcFn get;
  memcpy(&get, &sym, sizeof get);
  tilert_status st = fetch(get, "cuDriverGetVersion", (void **)&drv.DriverGetVersion, 2020);
  if (st.code)
    return st;
  int version = 0;
  CUresult r = drv.DriverGetVersion(&version);
  if (r != CUDA_SUCCESS || version < 12000)
    return tilert__err(TILERT_ERROR_NO_DRIVER,
                       "the CUDA driver reports version %d (CUresult %d); 12.0 or newer is needed",
                       version, (int)r);
  for (size_t i = 0; i < sizeof entries / sizeof entries[0]; i++) {
    st = fetch(get, entries[i].name, entries[i].slot, entries[i].abi);
    if (st.code)
      return st;
  }
  for (size_t i = 0; i < sizeof optional_entries / sizeof optional_entries[0]; i++)
    if (fetch(get, optional_entries[i].name, optional_entries[i].slot, optional_entries[i].abi).code)
      *optional_entries[i].slot = NULL;
  r = drv.Init(0);
  if (r == CUDA_ERROR_NO_DEVICE)
    return tilert__err(TILERT_ERROR_NO_DEVICE, "cuInit: CUDA_ERROR_NO_DEVICE: no CUDA device");
  if (r == CUDA_ERROR_STUB_LIBRARY)
    return tilert__err(TILERT_ERROR_NO_DRIVER,
                       "cuInit: CUDA_ERROR_STUB_LIBRARY: %s is the toolkit's stub, not a driver",
                       path);
  if (r != CUDA_SUCCESS)
    return tilert__drv_err("cuInit", r, NULL);
  return tilert__ok();
}

static void load_once_fn(void) {
  load_status = load();
  if (load_status.code)
    memset(&drv, 0, sizeof drv); /* a half-filled table must never be used */
}

tilert_status tilert__driver_load(const tilert_driver **out) {
  pthread_once(&load_once, load_once_fn);
  *out = load_status.code ? NULL : &drv;
  return load_status;
}

const char *tilert__cu_name(CUresult r) {
  const char *s = NULL;
  if (drv.GetErrorName && drv.GetErrorName(r, &s) == CUDA_SUCCESS && s)
    return s;
  static __thread char buf[32];
  snprintf(buf, sizeof buf, "CUresult %d", (int)r);
  return buf;
}
