/* tilert.h — the tilec runtime: load generated kernels and launch them, on the GPU through the
 * CUDA driver API (libcuda is dlopen'ed: a machine with no driver gets an error value, not a
 * crash), or on the CPU through the tile-IR interpreter. One launch call for both.
 *
 * Nothing here exits or aborts: every call returns a tilert_status. */
#ifndef TILERT_H
#define TILERT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The limits of a kernel's launch contract, one set for the compiler and the runtime: tilec's
 * sema refuses a kernel beyond them with a located error, and the metadata parser below refuses
 * metadata beyond them (docs/language.md, "Limits"). Byte counts include the terminating NUL. */
#define TILERT_MAX_RANK 4              /* dimensions of a tensor argument */
#define TILERT_MAX_ARGS 32             /* arguments of a kernel */
#define TILERT_MAX_DIMS 64             /* shape dims of a kernel, run-time and pinned */
#define TILERT_MAX_REQUIRES 8          /* `require` conditions of a kernel */
#define TILERT_MAX_NAME 64             /* bytes of an argument, dim or parameter name */
#define TILERT_MAX_KERNEL_NAME 128     /* bytes of a kernel name */
#define TILERT_MAX_EXPR 256            /* bytes of a grid or require expression (RPN), and of a
                                          requirement's source text */
#define TILERT_MAX_EXPR_TOKENS 80      /* tokens of one grid or require expression (RPN) */
#define TILERT_MAX_THREADS 1024        /* threads per block */
#define TILERT_MAX_CLUSTER 8           /* blocks per cluster (the portable size on sm_90) */

typedef enum {
  TILERT_OK = 0,
  TILERT_ERROR_NO_DRIVER,        /* libcuda.so.1 could not be loaded */
  TILERT_ERROR_NO_DEVICE,        /* driver present, no CUDA device */
  TILERT_ERROR_DRIVER,           /* a driver call failed; status.cu_result holds the CUresult */
  TILERT_ERROR_INVALID_ARGUMENT, /* NULL pointer, wrong argument count or kind, bad dtype */
  TILERT_ERROR_SHAPE,            /* tensor shapes/strides/alignment break the kernel contract */
  TILERT_ERROR_REQUIREMENT,      /* a `require` of the kernel is false for these shapes */
  TILERT_ERROR_BAD_METADATA,     /* the PTX has no or malformed "// tilec:" metadata */
  TILERT_ERROR_NOT_FOUND,        /* no kernel of that name in the module */
  TILERT_ERROR_OUT_OF_MEMORY,
  TILERT_ERROR_EXECUTION,        /* the CPU executor reported a fault */
  TILERT_ERROR_UNSUPPORTED,      /* operation not available on this backend */
} tilert_code;

typedef struct tilert_status {
  tilert_code code;
  int cu_result;                 /* CUresult of the failing driver call, 0 otherwise */
  char message[512];             /* "cuModuleLoadDataEx: CUDA_ERROR_INVALID_PTX: <jit log>" */
} tilert_status;

const char *tilert_code_name(tilert_code c); /* "TILERT_ERROR_SHAPE" */

typedef enum {
  TILERT_BOOL, TILERT_I32, TILERT_F16, TILERT_BF16, TILERT_F32
} tilert_dtype;                  /* same order as the compiler's element types */
const char *tilert_dtype_name(tilert_dtype t);
size_t tilert_dtype_size(tilert_dtype t);

typedef enum { TILERT_BACKEND_AUTO, TILERT_BACKEND_GPU, TILERT_BACKEND_CPU } tilert_backend;

typedef struct tilert_device tilert_device;
typedef struct tilert_module tilert_module;
typedef struct tilert_kernel tilert_kernel;
typedef struct tilert_stream tilert_stream;
typedef struct tilert_event tilert_event;

/* AUTO: the GPU when a driver and a device are present, else the CPU. */
tilert_status tilert_device_open(tilert_backend want, int ordinal, tilert_device **out);
void tilert_device_close(tilert_device *dev);
tilert_backend tilert_device_backend(const tilert_device *dev);
/* "NVIDIA H200 (sm_90, 132 SMs)" or "CPU interpreter" */
const char *tilert_device_name(const tilert_device *dev);
/* 90 for sm_90; 0 on the CPU */
int tilert_device_compute_capability(const tilert_device *dev);

/* Device memory (host memory on the CPU backend). Pointers are device addresses. */
tilert_status tilert_malloc(tilert_device *dev, size_t bytes, void **ptr);
tilert_status tilert_free(tilert_device *dev, void *ptr);
tilert_status tilert_memcpy_htod(tilert_device *dev, void *dst, const void *src, size_t bytes);
tilert_status tilert_memcpy_dtoh(tilert_device *dev, void *dst, const void *src, size_t bytes);
tilert_status tilert_memset8(tilert_device *dev, void *dst, uint8_t value, size_t bytes);
tilert_status tilert_synchronize(tilert_device *dev);

typedef struct tilert_tensor {
  void *data;                    /* device address, aligned to the element (NULL: see tilert_launch) */
  tilert_dtype dtype;
  int rank;
  int64_t shape[TILERT_MAX_RANK];
  int64_t strides[TILERT_MAX_RANK]; /* elements; the innermost must be 1 */
} tilert_tensor;

typedef enum { TILERT_ARG_TENSOR, TILERT_ARG_SCALAR } tilert_arg_kind;

typedef struct tilert_arg {
  tilert_arg_kind kind;
  tilert_tensor tensor;
  double scalar;                 /* converted to the kernel's scalar type */
} tilert_arg;

/* A contiguous (row-major) tensor argument. */
tilert_arg tilert_arg_tensor(void *data, tilert_dtype dtype, int rank, const int64_t *shape);
tilert_arg tilert_arg_scalar(double value);

/* What a kernel expects, parsed from the "// tilec:" lines of its PTX (docs/architecture.md). */
typedef struct tilert_arg_info {
  char name[TILERT_MAX_NAME];
  tilert_arg_kind kind;
  tilert_dtype dtype;
  int is_out;
  int rank;
  int dims[TILERT_MAX_RANK];     /* index into tilert_kernel_info.dims */
  int zero_init;                 /* out tensor declared `= 0`: every launch zeroes it first */
} tilert_arg_info;

typedef struct tilert_dim_info {
  char name[TILERT_MAX_NAME];
  int pinned;                    /* compile-time value, not passed at launch */
  int64_t value;
} tilert_dim_info;

/* A TMA tensor map the warp-specialized entry point takes (after the ordinary parameters): the
 * box a copy moves, per dimension of the tensor argument (outermost first), and the swizzle. */
#define TILERT_MAX_TMAPS 8
typedef struct tilert_tmap_info {
  int arg;                       /* index into tilert_kernel_info.args */
  int swizzle;                   /* bytes: 32, 64 or 128 */
  int box[TILERT_MAX_RANK];
  int multicast;                 /* cluster: each block copies half the rows (box) for both */
} tilert_tmap_info;

typedef struct tilert_kernel_info {
  char name[TILERT_MAX_KERNEL_NAME];
  int threads;                   /* per block */
  int smem_bytes;                /* dynamic shared memory per block */
  int nargs;
  tilert_arg_info args[TILERT_MAX_ARGS];
  int ndims;
  tilert_dim_info dims[TILERT_MAX_DIMS];
  char grid[3][TILERT_MAX_EXPR]; /* RPN over dim names */
  int nrequires;
  char requires[TILERT_MAX_REQUIRES][TILERT_MAX_EXPR];      /* RPN */
  char requires_text[TILERT_MAX_REQUIRES][TILERT_MAX_EXPR]; /* as written (comments and line
                                                               breaks dropped), for messages */
  /* The warp-specialized entry point (sm_90a, TMA + mbarriers; "" if none). tilert_launch takes
   * it when the tensors suit TMA (16-byte aligned bases and strides), else the entry above. */
  char ws_name[128];
  int ws_threads, ws_smem_bytes;
  int ntmaps;
  tilert_tmap_info tmaps[TILERT_MAX_TMAPS];
  int ws_persistent;             /* the ws entry walks tiles: launched on at most the resident
                                    blocks, it takes the logical grid and the raster group size as
                                    4 more s32 parameters (before the tensor maps) */
  int ws_cluster;                /* 1, or 2: launched as clusters of 2 along x (cuLaunchKernelEx) */
  int ws_cluster_axis;           /* 2: the logical grid axis the pair's tiles are adjacent on */
  int ws_groups;                 /* 1, or 2: two copies of `threads` take turns on tiles */
  int ws_tile_group;             /* persistent: the raster group the walk takes by default (rows of
                                    y per group; 1: x first), TILERT_TILE_GROUP overrides */
  int ws_walk_rows;              /* persistent: a row walk (tiles cost what their x says: causal
                                    attention): walked in chunks of a row's tiles (pairs, or
                                    whole rows) where they share out evenly, else launched a
                                    block per tile */
  /* The full-size entry ("" if none): the same kernel compiled with each run-time dim that has a
   * constant bound (`require N <= BLOCK`) pinned to it. tilert_launch takes it when the launch's
   * dims equal the dims that entry pins (TILERT_FULL=0: never). */
  char full_name[TILERT_MAX_KERNEL_NAME];
  int cluster;                   /* blocks per cluster along grid x (`cluster (K)`; 0 or 1: none):
                                    launched with cuLaunchKernelEx, grid x a multiple of it */
  /* 16: the entry was compiled for tensors whose base addresses and strides (but the last) are
   * multiples of 16 bytes (a full-size entry built with TILEC_FULL_ALIGNED=1; every entry built
   * with TILEC_ALIGNED_ARGS=1), 0: any. tilert_launch takes such a full-size entry only for such
   * tensors, and refuses other tensors for such a plain entry. */
  int aligned;
  /* 1: the kernel waits (griddepcontrol.wait, sm_90) before it touches an out tensor declared
   * `= 0`, so tilert_launch starts it as a programmatic dependent of the launch that zeroes them
   * (it overlaps that launch); 0: it is started after that launch completes. */
  int zero_wait;
} tilert_kernel_info;

/* Parses metadata text (the whole PTX or just the comment lines). */
tilert_status tilert_parse_kernel_info(const char *text, tilert_kernel_info *out);
/* The same for the kernel called `name` in a module of several (NULL: the first kernel, which is
 * also what tilert_parse_kernel_info gives); TILERT_ERROR_NOT_FOUND lists the names present. */
tilert_status tilert_parse_kernel_info_named(const char *text, const char *name,
                                             tilert_kernel_info *out);
/* Evaluates an RPN expression with the given dim values (by index into info->dims).
 * TILERT_ERROR_BAD_METADATA for a malformed expression; TILERT_ERROR_SHAPE for a division by
 * zero or an overflow (they depend on the shapes), never a crash. */
tilert_status tilert_eval_expr(const tilert_kernel_info *info, const char *rpn,
                               const int64_t *dim_values, int64_t *result);
/* Checks args against the contract, binds every dim, evaluates grid and requirements.
 * Shared by the GPU launch, the CPU executor and generated AOT code. */
tilert_status tilert_bind(const tilert_kernel_info *info, const tilert_arg *args, int nargs,
                          int64_t *dim_values, int64_t grid[3]);

/* GPU: load PTX text (NUL-terminated) holding one or more kernels; the JIT log is in the
 * status message on failure. */
tilert_status tilert_module_load_ptx(tilert_device *dev, const char *ptx, tilert_module **out);
/* TILERT_ERROR_BAD_METADATA when the kernel's metadata describes parameters its entry point does
 * not take (their count, from the PTX; their sizes, with cuFuncGetParamInfo on drivers from 12.4). */
tilert_status tilert_module_get_kernel(tilert_module *m, const char *name, tilert_kernel **out);
void tilert_module_unload(tilert_module *m);

/* CPU: a kernel run by a host function (the compiler library's interpreter provides one). */
typedef struct tilert_cpu_launch {
  const tilert_kernel_info *info;
  const tilert_arg *args;
  int nargs;
  const int64_t *dim_values;     /* info->ndims entries */
  int64_t grid[3];
} tilert_cpu_launch;
/* Returns 0 on success; non-zero with a message in err on a fault. */
/* Returns 0 on success; nonzero after writing a message to err, which tilert_launch reports as
 * TILERT_ERROR_EXECUTION. Called after tilert_bind has checked the arguments. */
typedef int (*tilert_cpu_fn)(void *ctx, const tilert_cpu_launch *launch, char *err, size_t errlen);
tilert_status tilert_kernel_create_cpu(tilert_device *dev, const char *metadata,
                                       tilert_cpu_fn fn, void *ctx, tilert_kernel **out);
void tilert_kernel_destroy_cpu(tilert_kernel *k);

const tilert_kernel_info *tilert_kernel_get_info(const tilert_kernel *k);

/* Launch (asynchronous on the GPU; the CPU backend runs to completion). stream may be NULL. An
 * empty problem (some tensor axis is 0 and the grid has 0 blocks) succeeds without launching;
 * its empty tensors may have NULL data. */
tilert_status tilert_launch(tilert_kernel *k, const tilert_arg *args, int nargs,
                            tilert_stream *stream);

tilert_status tilert_stream_create(tilert_device *dev, tilert_stream **out);
/* A stream made by someone else (a CUstream from torch or cupy; NULL = the legacy default
 * stream) for tilert_launch and tilert_event_record. tilert_stream_destroy frees the wrapper only. */
tilert_status tilert_stream_wrap(tilert_device *dev, void *cu_stream, tilert_stream **out);
tilert_status tilert_stream_synchronize(tilert_stream *s);
void tilert_stream_destroy(tilert_stream *s);

/* Launching one signature many times (the Python package: new tensors of the same dtypes, shapes
 * and strides on every call). tilert_plan_create checks and binds args once, as tilert_launch does
 * (contract, dims, grid, requirements); each tilert_plan_launch passes only what may change:
 * data[i], the data pointer of argument i when it is a tensor, and scalars[i], its value when it
 * is a scalar (either array may be NULL when the kernel has no argument of that kind). It checks
 * those again (NULL or misaligned data, i32 range), then launches like tilert_launch. It returns
 * the code and, on failure, writes the status to *err unless err is NULL: a caller through an FFI
 * makes no 520-byte status per call. A plan is read-only after creation (launch it from any
 * thread) and must be destroyed before its kernel. */
typedef struct tilert_plan tilert_plan;
tilert_status tilert_plan_create(tilert_kernel *k, const tilert_arg *args, int nargs,
                                 tilert_plan **out);
tilert_code tilert_plan_launch(const tilert_plan *p, void *const *data, const double *scalars,
                               tilert_stream *stream, tilert_status *err);
/* The grid the plan launches (x, y, z). */
void tilert_plan_grid(const tilert_plan *p, int64_t grid[3]);
void tilert_plan_destroy(tilert_plan *p);

/* Timing with CUDA events (host clock on the CPU backend). */
tilert_status tilert_event_create(tilert_device *dev, tilert_event **out);
tilert_status tilert_event_record(tilert_event *e, tilert_stream *stream);
tilert_status tilert_event_elapsed_ms(tilert_event *start, tilert_event *end, float *ms);
void tilert_event_destroy(tilert_event *e);

#ifdef __cplusplus
}
#endif
#endif
