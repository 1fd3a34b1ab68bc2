/* status.c — status values, names of codes and element types, argument constructors. */
#include "tilert_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

tilert_status tilert__ok(void) {
  tilert_status s;
  memset(&s, 0, sizeof s);
  return s;
}

tilert_status tilert__err(tilert_code code, const char *fmt, ...) {
  tilert_status s = tilert__ok();
  s.code = code;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(s.message, sizeof s.message, fmt, ap);
  va_end(ap);
  return s;
}

tilert_status tilert__drv_err(const char *call, CUresult r, const char *extra) {
  tilert_status s;
  if (extra && *extra)
    s = tilert__err(TILERT_ERROR_DRIVER, "%s: %s: %s", call, tilert__cu_name(r), extra);
  else
    s = tilert__err(TILERT_ERROR_DRIVER, "%s: %s", call, tilert__cu_name(r));
  s.cu_result = (int)r;
  return s;
}

const char *tilert_code_name(tilert_code c) {
  switch (c) {
  case TILERT_OK: return "TILERT_OK";
  case TILERT_ERROR_NO_DRIVER: return "TILERT_ERROR_NO_DRIVER";
  case TILERT_ERROR_NO_DEVICE: return "TILERT_ERROR_NO_DEVICE";
  case TILERT_ERROR_DRIVER: return "TILERT_ERROR_DRIVER";
  case TILERT_ERROR_INVALID_ARGUMENT: return "TILERT_ERROR_INVALID_ARGUMENT";
  case TILERT_ERROR_SHAPE: return "TILERT_ERROR_SHAPE";
  case TILERT_ERROR_REQUIREMENT: return "TILERT_ERROR_REQUIREMENT";
  case TILERT_ERROR_BAD_METADATA: return "TILERT_ERROR_BAD_METADATA";
  case TILERT_ERROR_NOT_FOUND: return "TILERT_ERROR_NOT_FOUND";
  case TILERT_ERROR_OUT_OF_MEMORY: return "TILERT_ERROR_OUT_OF_MEMORY";
  case TILERT_ERROR_EXECUTION: return "TILERT_ERROR_EXECUTION";
  case TILERT_ERROR_UNSUPPORTED: return "TILERT_ERROR_UNSUPPORTED";
  }
  return "TILERT_ERROR_UNKNOWN";
}

/* Same order and spelling as the compiler's TILEC_ELEM_TYPES. */
static const struct {
  const char *name;
  size_t size;
} dtype_table[] = {
    [TILERT_BOOL] = {"bool", 1}, [TILERT_I32] = {"i32", 4}, [TILERT_F16] = {"f16", 2},
    [TILERT_BF16] = {"bf16", 2}, [TILERT_F32] = {"f32", 4},
};
enum { DTYPE_COUNT = sizeof dtype_table / sizeof dtype_table[0] };

const char *tilert_dtype_name(tilert_dtype t) {
  return (unsigned)t < DTYPE_COUNT ? dtype_table[t].name : "?";
}

size_t tilert_dtype_size(tilert_dtype t) {
  return (unsigned)t < DTYPE_COUNT ? dtype_table[t].size : 0;
}

tilert_arg tilert_arg_tensor(void *data, tilert_dtype dtype, int rank, const int64_t *shape) {
  tilert_arg a;
  memset(&a, 0, sizeof a);
  a.kind = TILERT_ARG_TENSOR;
  a.tensor.data = data;
  a.tensor.dtype = dtype;
  a.tensor.rank = rank;
  if (rank < 0 || rank > TILERT_MAX_RANK || !shape)
    return a; /* tilert_bind reports the bad rank */
  int64_t stride = 1;
  for (int i = rank - 1; i >= 0; i--) {
    a.tensor.shape[i] = shape[i];
    a.tensor.strides[i] = stride;
    /* saturates instead of overflowing: tilert_bind then refuses the tensor as too large */
    if (__builtin_mul_overflow(stride, shape[i] > 0 ? shape[i] : 1, &stride))
      stride = INT64_MAX;
  }
  return a;
}

tilert_arg tilert_arg_scalar(double value) {
  tilert_arg a;
  memset(&a, 0, sizeof a);
  a.kind = TILERT_ARG_SCALAR;
  a.scalar = value;
  return a;
}
