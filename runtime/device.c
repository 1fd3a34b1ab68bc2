/* device.c — devices, memory, streams and events for both backends.
 *
 * GPU: the device's primary context (cuCtxCreate changed its signature in CUDA 13; the primary
 * context is also what the CUDA runtime and other libraries share). Every call that may run on
 * another thread makes the context current first. CPU: host memory and a host clock. */
#include "tilert_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const tilert_driver *drv_or_null(void) {
  const tilert_driver *d = NULL;
  tilert__driver_load(&d);
  return d;
}

tilert_status tilert__gpu_enter(tilert_device *dev, const tilert_driver **d) {
  *d = drv_or_null();
  if (!*d)
    return tilert__err(TILERT_ERROR_NO_DRIVER, "the CUDA driver is not loaded");
  TILERT_CU("cuCtxSetCurrent", (*d)->CtxSetCurrent(dev->ctx));
  return tilert__ok();
}

static tilert_status cpu_open(tilert_device **out) {
  tilert_device *dev = calloc(1, sizeof *dev);
  if (!dev)
    return tilert__err(TILERT_ERROR_OUT_OF_MEMORY, "out of host memory");
  dev->backend = TILERT_BACKEND_CPU;
  snprintf(dev->name, sizeof dev->name, "CPU interpreter");
  *out = dev;
  return tilert__ok();
}

static tilert_status gpu_query(const tilert_driver *d, tilert_device *dev) {
  int major = 0, minor = 0, sms = 0;
  char name[100] = "";
  TILERT_CU("cuDeviceGetName", d->DeviceGetName(name, (int)sizeof name - 1, dev->cu_dev));
  TILERT_CU("cuDeviceGetAttribute",
            d->DeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev->cu_dev));
  TILERT_CU("cuDeviceGetAttribute",
            d->DeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev->cu_dev));
  TILERT_CU("cuDeviceGetAttribute",
            d->DeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev->cu_dev));
  TILERT_CU("cuDeviceGetAttribute",
            d->DeviceGetAttribute(&dev->max_smem_optin,
                                  CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
                                  dev->cu_dev));
  static const CUdevice_attribute grid_attr[3] = {CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X,
                                                  CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y,
                                                  CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z};
  for (int i = 0; i < 3; i++)
    TILERT_CU("cuDeviceGetAttribute",
              d->DeviceGetAttribute(&dev->max_grid[i], grid_attr[i], dev->cu_dev));
  dev->cc = major * 10 + minor;
  dev->sms = sms;
  snprintf(dev->name, sizeof dev->name, "%s (sm_%d%d, %d SMs)", name, major, minor, sms);
  return tilert__ok();
}

static tilert_status gpu_open(int ordinal, tilert_device **out) {
  const tilert_driver *d;
  tilert_status st = tilert__driver_load(&d);
  if (st.code)
    return st;
  int count = 0;
  TILERT_CU("cuDeviceGetCount", d->DeviceGetCount(&count));
  if (count == 0)
    return tilert__err(TILERT_ERROR_NO_DEVICE, "the CUDA driver sees no device");
  if (ordinal < 0 || ordinal >= count)
    return tilert__err(TILERT_ERROR_NO_DEVICE, "no CUDA device %d (there are %d)", ordinal, count);
  tilert_device *dev = calloc(1, sizeof *dev);
  if (!dev)
    return tilert__err(TILERT_ERROR_OUT_OF_MEMORY, "out of host memory");
  dev->backend = TILERT_BACKEND_GPU;
  dev->ordinal = ordinal;
  pthread_mutex_init(&dev->zero_lock, NULL);
  const char *call = "cuDeviceGet";
  CUresult r = d->DeviceGet(&dev->cu_dev, ordinal);
  if (r == CUDA_SUCCESS) {
    call = "cuDevicePrimaryCtxRetain";
    r = d->DevicePrimaryCtxRetain(&dev->ctx, dev->cu_dev);
  }
  if (r != CUDA_SUCCESS) {
    pthread_mutex_destroy(&dev->zero_lock);
    free(dev);
    return tilert__drv_err(call, r, NULL);
  }
  st = tilert__ok();
  r = d->CtxSetCurrent(dev->ctx);
  if (r != CUDA_SUCCESS)
    st = tilert__drv_err("cuCtxSetCurrent", r, NULL);
  if (!st.code)
    st = gpu_query(d, dev);
  if (st.code) {
    d->DevicePrimaryCtxRelease(dev->cu_dev);
    pthread_mutex_destroy(&dev->zero_lock);
    free(dev);
    return st;
  }
  *out = dev;
  return st;
}

tilert_status tilert_device_open(tilert_backend want, int ordinal, tilert_device **out) {
  if (!out)
    return tilert__err(TILERT_ERROR_INVALID_ARGUMENT, "tilert_device_open: out is NULL");
  *out = NULL;
  switch (want) {
  case TILERT_BACKEND_CPU:
    return cpu_open(out);
  case TILERT_BACKEND_GPU:
    return gpu_open(ordinal, out);
  case TILERT_BACKEND_AUTO: {
    tilert_status st = gpu_open(ordinal, out);
    if (st.code == TILERT_ERROR_NO_DRIVER || st.code == TILERT_ERROR_NO_DEVICE)
      return cpu_open(out);
    return st;
  }
  }
  return tilert__err(TILERT_ERROR_INVALID_ARGUMENT, "unknown backend %d", (int)want);
}

void tilert_device_close(tilert_device *dev) {
  if (!dev)
    return;
  const tilert_driver *d = drv_or_null();
  if (dev->backend == TILERT_BACKEND_GPU) {
    if (d && dev->zero_mod && d->CtxSetCurrent(dev->ctx) == CUDA_SUCCESS)
      tilert__zero_unload(d, dev);
    if (d)
      d->DevicePrimaryCtxRelease(dev->cu_dev);
    pthread_mutex_destroy(&dev->zero_lock);
  }
  free(dev);
}

tilert_backend tilert_device_backend(const tilert_device *dev) {
  return dev ? dev->backend : TILERT_BACKEND_AUTO;
}

const char *tilert_device_name(const tilert_device *dev) { return dev ? dev->name : "(null)"; }

int tilert_device_compute_capability(const tilert_device *dev) { return dev ? dev->cc : 0; }

/* ---------------------------------------------------------------- memory */

#define CHECK_DEV(dev, what)                                                              \
  do {                                                                                    \
    if (!(dev))                                                                           \
      return tilert__err(TILERT_ERROR_INVALID_ARGUMENT, "%s: device is NULL", what);      \
  } while (0)

tilert_status tilert_malloc(tilert_device *dev, size_t bytes, void **ptr) {
  CHECK_DEV(dev, "tilert_malloc");
  if (!ptr)
    return tilert__err(TILERT_ERROR_INVALID_ARGUMENT, "tilert_malloc: ptr is NULL");
  *ptr = NULL;
  if (dev->backend == TILERT_BACKEND_CPU) {
    /* 256-byte aligned like cuMemAlloc, so alignment checks behave the same on both backends. */
    if (posix_memalign(ptr, 256, bytes ? bytes : 1) != 0)
      return tilert__err(TILERT_ERROR_OUT_OF_MEMORY, "out of host memory (%zu bytes)", bytes);
    return tilert__ok();
  }
  const tilert_driver *d;
  tilert_status st = tilert__gpu_enter(dev, &d);
  if (st.code)
    return st;
  CUdeviceptr p = 0;
  CUresult r = d->MemAlloc(&p, bytes ? bytes : 1);
  if (r == CUDA_ERROR_OUT_OF_MEMORY) {
    st = tilert__drv_err("cuMemAlloc", r, NULL);
    st.code = TILERT_ERROR_OUT_OF_MEMORY;
    return st;
  }
  TILERT_CU("cuMemAlloc", r);
  *ptr = (void *)(uintptr_t)p;
  return tilert__ok();
}

tilert_status tilert_free(tilert_device *dev, void *ptr) {
  CHECK_DEV(dev, "tilert_free");
  if (!ptr)
    return tilert__ok();
  if (dev->backend == TILERT_BACKEND_CPU) {
    free(ptr);
    return tilert__ok();
  }
  const tilert_driver *d;
  tilert_status st = tilert__gpu_enter(dev, &d);
  if (st.code)
    return st;
  TILERT_CU("cuMemFree", d->MemFree((CUdeviceptr)(uintptr_t)ptr));
  return tilert__ok();
}

static tilert_status check_copy(tilert_device *dev, const void *dst, const void *src,
                                size_t bytes, const char *what) {
  CHECK_DEV(dev, what);
  if (bytes && (!dst || !src))
    return tilert__err(TILERT_ERROR_INVALID_ARGUMENT, "%s: NULL pointer", what);
  return tilert__ok();
}

tilert_status tilert_memcpy_htod(tilert_device *dev, void *dst, const void *src, size_t bytes) {
  tilert_status st = check_copy(dev, dst, src, bytes, "tilert_memcpy_htod");
  if (st.code || !bytes)
    return st;
  if (dev->backend == TILERT_BACKEND_CPU) {
    memcpy(dst, src, bytes);
    return st;
  }
  const tilert_driver *d;
  if ((st = tilert__gpu_enter(dev, &d)).code)
    return st;
  TILERT_CU("cuMemcpyHtoD", d->MemcpyHtoD((CUdeviceptr)(uintptr_t)dst, src, bytes));
  return st;
}

tilert_status tilert_memcpy_dtoh(tilert_device *dev, void *dst, const void *src, size_t bytes) {
  tilert_status st = check_copy(dev, dst, src, bytes, "tilert_memcpy_dtoh");
  if (st.code || !bytes)
    return st;
  if (dev->backend == TILERT_BACKEND_CPU) {
    memcpy(dst, src, bytes);
    return st;
  }
  const tilert_driver *d;
  if ((st = tilert__gpu_enter(dev, &d)).code)
    return st;
  TILERT_CU("cuMemcpyDtoH", d->MemcpyDtoH(dst, (CUdeviceptr)(uintptr_t)src, bytes));
  return st;
}

tilert_status tilert_memset8(tilert_device *dev, void *dst, uint8_t value, size_t bytes) {
  tilert_status st = check_copy(dev, dst, dst, bytes, "tilert_memset8");
  if (st.code || !bytes)
    return st;
  if (dev->backend == TILERT_BACKEND_CPU) {
    memset(dst, value, bytes);
    return st;
  }
  const tilert_driver *d;
  if ((st = tilert__gpu_enter(dev, &d)).code)
    return st;
  TILERT_CU("cuMemsetD8", d->MemsetD8((CUdeviceptr)(uintptr_t)dst, value, bytes));
  return st;
}

tilert_status tilert_synchronize(tilert_device *dev) {
  CHECK_DEV(dev, "tilert_synchronize");
  if (dev->backend == TILERT_BACKEND_CPU)
    return tilert__ok();
  const tilert_driver *d;
  tilert_status st = tilert__gpu_enter(dev, &d);
  if (st.code)
    return st;
  TILERT_CU("cuCtxSynchronize", d->CtxSynchronize());
  return st;
}

/* ---------------------------------------------------------------- streams */

tilert_status tilert_stream_create(tilert_device *dev, tilert_stream **out) {
  CHECK_DEV(dev, "tilert_stream_create");
  if (!out)
    return tilert__err(TILERT_ERROR_INVALID_ARGUMENT, "tilert_stream_create: out is NULL");
  *out = NULL;
  tilert_stream *s = calloc(1, sizeof *s);
  if (!s)
    return tilert__err(TILERT_ERROR_OUT_OF_MEMORY, "out of host memory");
  s->dev = dev;
  if (dev->backend == TILERT_BACKEND_GPU) {
    const tilert_driver *d;
    tilert_status st = tilert__gpu_enter(dev, &d);
    CUresult r = st.code ? CUDA_SUCCESS : d->StreamCreate(&s->s, CU_STREAM_NON_BLOCKING);
    if (!st.code && r != CUDA_SUCCESS)
      st = tilert__drv_err("cuStreamCreate", r, NULL);
    if (st.code) {
      free(s);
      return st;
    }
  }
  *out = s;
  return tilert__ok();
}

tilert_status tilert_stream_synchronize(tilert_stream *s) {
  if (!s)
    return tilert__err(TILERT_ERROR_INVALID_ARGUMENT, "tilert_stream_synchronize: NULL stream");
  if (s->dev->backend == TILERT_BACKEND_CPU)
    return tilert__ok();
  const tilert_driver *d;
  tilert_status st = tilert__gpu_enter(s->dev, &d);
  if (st.code)
    return st;
  TILERT_CU("cuStreamSynchronize", d->StreamSynchronize(s->s));
  return st;
}

void tilert_stream_destroy(tilert_stream *s) {
  if (!s)
    return;
  const tilert_driver *d;
  if (s->s && !s->borrowed && !tilert__gpu_enter(s->dev, &d).code)
    d->StreamDestroy(s->s);
  free(s);
}

/* ---------------------------------------------------------------- events */

static double host_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

tilert_status tilert_event_create(tilert_device *dev, tilert_event **out) {
  CHECK_DEV(dev, "tilert_event_create");
  if (!out)
    return tilert__err(TILERT_ERROR_INVALID_ARGUMENT, "tilert_event_create: out is NULL");
  *out = NULL;
  tilert_event *e = calloc(1, sizeof *e);
  if (!e)
    return tilert__err(TILERT_ERROR_OUT_OF_MEMORY, "out of host memory");
  e->dev = dev;
  e->host_ms = -1;
  if (dev->backend == TILERT_BACKEND_GPU) {
    const tilert_driver *d;
    tilert_status st = tilert__gpu_enter(dev, &d);
    CUresult r = st.code ? CUDA_SUCCESS : d->EventCreate(&e->e, CU_EVENT_DEFAULT);
    if (!st.code && r != CUDA_SUCCESS)
      st = tilert__drv_err("cuEventCreate", r, NULL);
    if (st.code) {
      free(e);
      return st;
    }
  }
  *out = e;
  return tilert__ok();
}

tilert_status tilert_event_record(tilert_event *e, tilert_stream *stream) {
  if (!e)
    return tilert__err(TILERT_ERROR_INVALID_ARGUMENT, "tilert_event_record: NULL event");
  if (stream && stream->dev != e->dev)
    return tilert__err(TILERT_ERROR_INVALID_ARGUMENT,
                       "tilert_event_record: stream and event belong to different devices");
  if (e->dev->backend == TILERT_BACKEND_CPU) {
    e->host_ms = host_ms(); /* the CPU backend runs launches to completion: now is exact */
    return tilert__ok();
  }
  const tilert_driver *d;
  tilert_status st = tilert__gpu_enter(e->dev, &d);
  if (st.code)
    return st;
  TILERT_CU("cuEventRecord", d->EventRecord(e->e, stream ? stream->s : NULL));
  return st;
}

tilert_status tilert_event_elapsed_ms(tilert_event *start, tilert_event *end, float *ms) {
  if (!start || !end || !ms)
    return tilert__err(TILERT_ERROR_INVALID_ARGUMENT, "tilert_event_elapsed_ms: NULL argument");
  if (start->dev != end->dev)
    return tilert__err(TILERT_ERROR_INVALID_ARGUMENT,
                       "tilert_event_elapsed_ms: events of different devices");
  if (start->dev->backend == TILERT_BACKEND_CPU) {
    if (start->host_ms < 0 || end->host_ms < 0)
      return tilert__err(TILERT_ERROR_INVALID_ARGUMENT,
                         "tilert_event_elapsed_ms: an event was never recorded");
    *ms = (float)(end->host_ms - start->host_ms);
    return tilert__ok();
  }
  const tilert_driver *d;
  tilert_status st = tilert__gpu_enter(start->dev, &d);
  if (st.code)
    return st;
  TILERT_CU("cuEventSynchronize", d->EventSynchronize(end->e));
  TILERT_CU("cuEventElapsedTime", d->EventElapsedTime(ms, start->e, end->e));
  return st;
}

void tilert_event_destroy(tilert_event *e) {
  if (!e)
    return;
  const tilert_driver *d;
  if (e->e && !tilert__gpu_enter(e->dev, &d).code)
    d->EventDestroy(e->e);
  free(e);
}
