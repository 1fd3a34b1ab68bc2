/* bind.c — checks launch arguments against a kernel's contract, binds the run-time dims from the
 * tensor shapes, evaluates the grid and the requirements. Every backend launches through it.
 *
 * Memory: every element offset of a tensor (and its byte offset from the data pointer) fits in
 * int64, so the kernels' and the interpreter's 64-bit address arithmetic never overflows; an
 * `out` tensor is a view whose elements are distinct and it shares no byte with any other tensor
 * argument, unless it is exactly the same view as an `in` tensor (in place), so no two blocks
 * race on an element through different names. Views are compared by their byte ranges: two
 * interleaved views that share no element are refused too. */
#include "tilert_internal.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

enum { GRID_MAX_X = 2147483647, GRID_MAX_YZ = 65535 };

/* Which tensor (and axis) first gave each dim its value, for mismatch messages. */
typedef struct Binder {
  const tilert_kernel_info *info;
  int64_t *dims;
  int src_arg[TILERT_MAX_DIMS];
  int src_axis[TILERT_MAX_DIMS];
} Binder;

tilert_status tilert__check_scalar(const tilert_arg_info *ai, const tilert_arg *a) {
  if (ai->dtype == TILERT_I32) {
    if (!(a->scalar >= INT32_MIN && a->scalar <= INT32_MAX) || a->scalar != floor(a->scalar))
      return tilert__err(TILERT_ERROR_INVALID_ARGUMENT,
                         "argument '%s' is an i32 scalar; %.17g is not an integer in range "
                         "(-2147483648 to 2147483647)", ai->name, a->scalar);
  }
  return tilert__ok();
}

/* NULL data is allowed for an empty tensor (torch gives them NULL), as long as the launch
 * turns out empty too (tilert_bind checks that once the grid is known). The kernels test every
 * 16-byte chunk's alignment themselves and take scalar accesses where it fails, so the data
 * only has to be aligned to its element. */
tilert_status tilert__check_data(const tilert_arg_info *ai, const tilert_tensor *t, bool need) {
  if (!t->data && need)
    return tilert__err(TILERT_ERROR_INVALID_ARGUMENT, "argument '%s': data pointer is NULL",
                       ai->name);
  size_t esize = tilert_dtype_size(t->dtype);
  if (esize > 1 && (uintptr_t)t->data % esize != 0)
    return tilert__err(TILERT_ERROR_SHAPE,
                       "argument '%s': data pointer %p is not aligned to its element size (%zu bytes)",
                       ai->name, t->data, esize);
  return tilert__ok();
}

/* The bytes from t->data to the end of its last element (0 when empty); false when that does not
 * fit in int64 or wraps the address space. Strides are positive (checked before). */
static bool tensor_bytes(const tilert_tensor *t, int64_t *bytes) {
  int64_t last = 0;
  *bytes = 0;
  for (int i = 0; i < t->rank; i++) {
    int64_t step;
    if (t->shape[i] == 0)
      return true;
    if (__builtin_mul_overflow(t->shape[i] - 1, t->strides[i], &step) ||
        __builtin_add_overflow(last, step, &last))
      return false;
  }
  int64_t esize = (int64_t)tilert_dtype_size(t->dtype);
  uintptr_t end;
  return !__builtin_mul_overflow(last + 1, esize, bytes) &&
         !__builtin_add_overflow((uintptr_t)t->data, (uintptr_t)*bytes, &end);
}

static tilert_status check_tensor_layout(const tilert_arg_info *ai, const tilert_tensor *t) {
  if (t->dtype != ai->dtype)
    return tilert__err(TILERT_ERROR_INVALID_ARGUMENT, "argument '%s' must be %s, got %s", ai->name,
                       tilert_dtype_name(ai->dtype), tilert_dtype_name(t->dtype));
  if (t->rank != ai->rank)
    return tilert__err(TILERT_ERROR_SHAPE, "argument '%s' must have rank %d, got rank %d",
                       ai->name, ai->rank, t->rank);
  bool empty = false;
  for (int i = 0; i < t->rank; i++) {
    if (t->shape[i] < 0 || t->shape[i] > INT32_MAX)
      return tilert__err(TILERT_ERROR_SHAPE,
                         "argument '%s': size %lld of axis %d is out of range (0..%d)", ai->name,
                         (long long)t->shape[i], i, INT32_MAX);
    empty |= t->shape[i] == 0;
  }
  tilert_status st = tilert__check_data(ai, t, !empty);
  if (st.code)
    return st;
  if (t->strides[t->rank - 1] != 1)
    return tilert__err(TILERT_ERROR_SHAPE,
                       "argument '%s': the innermost stride must be 1 (contiguous), got %lld",
                       ai->name, (long long)t->strides[t->rank - 1]);
  for (int i = 0; i < t->rank - 1; i++)
    if (t->strides[i] <= 0)
      return tilert__err(TILERT_ERROR_SHAPE, "argument '%s': stride %lld of axis %d must be > 0",
                         ai->name, (long long)t->strides[i], i);
  int64_t bytes;
  if (!tensor_bytes(t, &bytes))
    return tilert__err(TILERT_ERROR_SHAPE,
                       "argument '%s': its shape and strides reach past 2^63 bytes (an element "
                       "offset overflows)", ai->name);
  return tilert__ok();
}

static tilert_status bind_dims(Binder *b, int arg, const tilert_tensor *t) {
  const tilert_kernel_info *info = b->info;
  const tilert_arg_info *ai = &info->args[arg];
  for (int i = 0; i < ai->rank; i++) {
    int d = ai->dims[i];
    const tilert_dim_info *di = &info->dims[d];
    if (di->pinned) {
      if (t->shape[i] != di->value)
        return tilert__err(TILERT_ERROR_SHAPE,
                           "argument '%s': axis %d (%s) is %lld, but the kernel was compiled "
                           "for %s = %lld",
                           ai->name, i, di->name, (long long)t->shape[i], di->name,
                           (long long)di->value);
    } else if (b->src_arg[d] < 0) {
      b->dims[d] = t->shape[i];
      b->src_arg[d] = arg;
      b->src_axis[d] = i;
    } else if (b->dims[d] != t->shape[i]) {
      return tilert__err(TILERT_ERROR_SHAPE,
                         "dim %s: argument '%s' has %lld (axis %d) but argument '%s' has %lld "
                         "(axis %d)",
                         di->name, info->args[b->src_arg[d]].name, (long long)b->dims[d],
                         b->src_axis[d], ai->name, (long long)t->shape[i], i);
    }
  }
  return tilert__ok();
}

/* Whether two elements of t share an address: sorted by stride, each axis must step over the
 * whole extent of the axes inside it (a sufficient test; axes of size 1 do not count). */
static bool self_overlapping(const tilert_tensor *t) {
  int order[TILERT_MAX_RANK], n = 0;
  for (int i = 0; i < t->rank; i++)
    if (t->shape[i] > 1) {
      int j = n++;
      for (; j > 0 && t->strides[order[j - 1]] > t->strides[i]; j--)
        order[j] = order[j - 1];
      order[j] = i;
    }
  int64_t extent = 1; /* elements covered by the axes so far; fits: tensor_bytes checked it */
  for (int k = 0; k < n; k++) {
    const int i = order[k];
    if (t->strides[i] < extent)
      return true;
    extent = t->strides[i] * (t->shape[i] - 1) + extent;
  }
  return false;
}

static bool same_view(const tilert_tensor *a, const tilert_tensor *b) {
  if (a->data != b->data || a->dtype != b->dtype || a->rank != b->rank)
    return false;
  for (int i = 0; i < a->rank; i++)
    if (a->shape[i] != b->shape[i] || (a->shape[i] > 1 && a->strides[i] != b->strides[i]))
      return false;
  return true;
}

/* Output views must be race-free (see the top of the file). Empty tensors hold no bytes. */
static tilert_status check_outputs(const tilert_kernel_info *info, const tilert_arg *args) {
  for (int i = 0; i < info->nargs; i++) {
    const tilert_tensor *t = &args[i].tensor;
    int64_t ti;
    if (info->args[i].kind != TILERT_ARG_TENSOR || !info->args[i].is_out ||
        !tensor_bytes(t, &ti) || ti == 0)
      continue;
    if (self_overlapping(t))
      return tilert__err(TILERT_ERROR_SHAPE, "output '%s': its strides make several elements share "
                         "an address (blocks would race on them)", info->args[i].name);
    for (int j = 0; j < info->nargs; j++) {
      const tilert_tensor *u = &args[j].tensor;
      int64_t uj;
      if (j == i || info->args[j].kind != TILERT_ARG_TENSOR || !tensor_bytes(u, &uj) || uj == 0)
        continue;
      uintptr_t a0 = (uintptr_t)t->data, b0 = (uintptr_t)u->data;
      if (a0 >= b0 + (uintptr_t)uj || b0 >= a0 + (uintptr_t)ti)
        continue;
      if (!info->args[j].is_out && same_view(t, u)) {
        if (info->args[i].zero_init)
          return tilert__err(TILERT_ERROR_SHAPE, "output '%s' is declared '= 0' and is the same view as "
                             "input '%s': the launch zeroes it before the kernel reads the input",
                             info->args[i].name, info->args[j].name);
        continue; /* in place */
      }
      return tilert__err(TILERT_ERROR_SHAPE, "output '%s' overlaps %s '%s' in memory (only the very "
                         "same view of an input may be written in place)", info->args[i].name,
                         info->args[j].is_out ? "output" : "input", info->args[j].name);
    }
  }
  return tilert__ok();
}

/* A grid of 0 blocks is an empty launch (a no-op) only for an empty problem, some tensor with a
 * 0-size axis; otherwise it is an error, as is a grid larger than the GPU's. */
static tilert_status eval_grid(const tilert_kernel_info *info, const int64_t *dims, bool empty,
                               int64_t grid[3]) {
  static const int64_t limit[3] = {GRID_MAX_X, GRID_MAX_YZ, GRID_MAX_YZ};
  for (int ax = 0; ax < 3; ax++) {
    tilert_status st = tilert_eval_expr(info, info->grid[ax], dims, &grid[ax]);
    if (st.code) {
      tilert_status e = tilert__err(st.code, "grid axis %c: %s", "xyz"[ax], st.message);
      return e;
    }
    if (grid[ax] < !empty || grid[ax] > limit[ax]) {
      char vals[256];
      tilert__expr_dims(info, info->grid[ax], dims, vals, sizeof vals);
      return tilert__err(TILERT_ERROR_SHAPE,
                         "grid axis %c ('%s') is %lld, outside %d..%lld%s%s", "xyz"[ax],
                         info->grid[ax], (long long)grid[ax], !empty, (long long)limit[ax],
                         vals[0] ? " with " : "", vals);
    }
  }
  return tilert__ok();
}

static tilert_status check_requires(const tilert_kernel_info *info, const int64_t *dims) {
  for (int r = 0; r < info->nrequires; r++) {
    int64_t v;
    tilert_status st = tilert_eval_expr(info, info->requires[r], dims, &v);
    if (st.code)
      return tilert__err(st.code, "requirement '%s': %s", info->requires_text[r], st.message);
    if (!v) {
      char vals[256];
      tilert__expr_dims(info, info->requires[r], dims, vals, sizeof vals);
      return tilert__err(TILERT_ERROR_REQUIREMENT, "requirement '%s' failed%s%s",
                         info->requires_text[r], vals[0] ? ": " : "", vals);
    }
  }
  return tilert__ok();
}

tilert_status tilert_bind(const tilert_kernel_info *info, const tilert_arg *args, int nargs,
                          int64_t *dim_values, int64_t grid[3]) {
  if (!info || !dim_values || !grid || (nargs > 0 && !args))
    return tilert__err(TILERT_ERROR_INVALID_ARGUMENT, "tilert_bind: NULL argument");
  if (nargs != info->nargs)
    return tilert__err(TILERT_ERROR_INVALID_ARGUMENT, "kernel '%s' takes %d arguments, got %d",
                       info->name, info->nargs, nargs);
  Binder b = {.info = info, .dims = dim_values};
  for (int d = 0; d < info->ndims; d++) {
    b.src_arg[d] = -1;
    dim_values[d] = info->dims[d].pinned ? info->dims[d].value : -1;
  }
  for (int i = 0; i < nargs; i++) {
    const tilert_arg_info *ai = &info->args[i];
    if (args[i].kind != ai->kind)
      return tilert__err(TILERT_ERROR_INVALID_ARGUMENT, "argument %d ('%s') must be a %s, got a %s",
                         i, ai->name, ai->kind == TILERT_ARG_TENSOR ? "tensor" : "scalar",
                         args[i].kind == TILERT_ARG_TENSOR ? "tensor" : "scalar");
    tilert_status st = ai->kind == TILERT_ARG_SCALAR ? tilert__check_scalar(ai, &args[i])
                                                     : check_tensor_layout(ai, &args[i].tensor);
    if (!st.code && ai->kind == TILERT_ARG_TENSOR)
      st = bind_dims(&b, i, &args[i].tensor);
    if (st.code)
      return st;
  }
  tilert_status st = check_outputs(info, args);
  if (st.code)
    return st;
  /* The kernel author's own conditions first: they explain a degenerate grid best. */
  st = check_requires(info, dim_values);
  if (st.code)
    return st;
  bool empty = false;
  int null_arg = -1;
  for (int i = 0; i < nargs; i++) {
    if (args[i].kind != TILERT_ARG_TENSOR)
      continue;
    for (int ax = 0; ax < args[i].tensor.rank; ax++)
      empty |= args[i].tensor.shape[ax] == 0;
    if (!args[i].tensor.data && null_arg < 0)
      null_arg = i;
  }
  st = eval_grid(info, dim_values, empty, grid);
  if (st.code)
    return st;
  if (null_arg >= 0 && grid[0] && grid[1] && grid[2]) /* blocks run: every tensor needs data */
    return tilert__err(TILERT_ERROR_INVALID_ARGUMENT,
                       "argument '%s': data pointer is NULL (allowed only when the launch is empty)",
                       info->args[null_arg].name);
  return tilert__ok();
}
