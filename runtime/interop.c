/* interop.c — what callers from other runtimes need: their streams (torch's current stream,
 * cupy's) and launches whose arguments were checked once per signature (the Python package
 * launches through these; the launch overhead target is a few microseconds per call). */
#include "tilert_internal.h"

#include <stdlib.h>
#include <string.h>

tilert_status tilert_stream_wrap(tilert_device *dev, void *cu_stream, tilert_stream **out) {
  if (!dev || !out)
    return tilert__err(TILERT_ERROR_INVALID_ARGUMENT, "tilert_stream_wrap: NULL argument");
  *out = NULL;
  if (dev->backend != TILERT_BACKEND_GPU && cu_stream)
    return tilert__err(TILERT_ERROR_UNSUPPORTED,
                       "tilert_stream_wrap: a CUDA stream given to the CPU backend");
  tilert_stream *s = calloc(1, sizeof *s);
  if (!s)
    return tilert__err(TILERT_ERROR_OUT_OF_MEMORY, "out of host memory");
  s->dev = dev;
  s->s = (CUstream)cu_stream;
  s->borrowed = true;
  *out = s;
  return tilert__ok();
}

struct tilert_plan {
  tilert_kernel *k;
  int nargs;
  bool runs;                   /* the grid has blocks (else every launch is a no-op) */
  int64_t dims[TILERT_MAX_DIMS];
  int64_t grid[3];
  /* k an aligned full-size entry: the entry (and its binding) a launch whose data pointers are
   * not all on 16-byte boundaries runs instead (the strides are the plan's, already checked) */
  tilert_kernel *unaligned;
  int64_t unaligned_dims[TILERT_MAX_DIMS];
  int64_t unaligned_grid[3];
  tilert_arg args[];           /* the signature; data and scalars are replaced per launch */
};

tilert_status tilert_plan_create(tilert_kernel *k, const tilert_arg *args, int nargs,
                                 tilert_plan **out) {
  if (!k || !out || nargs < 0 || nargs > TILERT_MAX_ARGS || (nargs && !args))
    return tilert__err(TILERT_ERROR_INVALID_ARGUMENT, "tilert_plan_create: bad argument");
  *out = NULL;
  tilert_plan *p = calloc(1, sizeof *p + sizeof(tilert_arg) * (size_t)(nargs ? nargs : 1));
  if (!p)
    return tilert__err(TILERT_ERROR_OUT_OF_MEMORY, "out of host memory");
  tilert_kernel *plain = k;
  tilert_status st = tilert__bind_entry(&k, args, nargs, p->dims, p->grid);
  if (!st.code && k != plain && k->info.aligned) {
    p->unaligned = plain;
    st = tilert__bind_kernel(plain, args, nargs, p->unaligned_dims, p->unaligned_grid);
  }
  if (st.code) {
    free(p);
    return st;
  }
  p->k = k;
  p->nargs = nargs;
  p->runs = p->grid[0] && p->grid[1] && p->grid[2];
  if (nargs)
    memcpy(p->args, args, sizeof *args * (size_t)nargs);
  *out = p;
  return st;
}

/* The plan's arguments with this launch's values, checked. */
static tilert_status plan_values(const tilert_plan *p, void *const *data, const double *scalars,
                                 tilert_arg *args) {
  const tilert_kernel_info *info = &p->k->info;
  for (int i = 0; i < p->nargs; i++) {
    args[i] = p->args[i];
    const tilert_arg_info *ai = &info->args[i];
    /* The full checks (which build a status) only where a cheap test says they may fail: this
     * runs on every launch. */
    bool suspect;
    if (ai->kind == TILERT_ARG_TENSOR) {
      void *p = args[i].tensor.data = data ? data[i] : NULL;
      suspect = !p || (uintptr_t)p % tilert_dtype_size(ai->dtype);
    } else {
      args[i].scalar = scalars ? scalars[i] : 0;
      suspect = ai->dtype == TILERT_I32;
    }
    if (!suspect)
      continue;
    tilert_status st = ai->kind == TILERT_ARG_TENSOR ? tilert__check_data(ai, &args[i].tensor, true)
                                                     : tilert__check_scalar(ai, &args[i]);
    if (st.code)
      return tilert__err(st.code, "%s: %s", info->name, st.message);
  }
  return tilert__ok();
}

tilert_code tilert_plan_launch(const tilert_plan *p, void *const *data, const double *scalars,
                               tilert_stream *stream, tilert_status *err) {
  tilert_status st;
  tilert_arg args[TILERT_MAX_ARGS];
  if (!p)
    st = tilert__err(TILERT_ERROR_INVALID_ARGUMENT, "tilert_plan_launch: plan is NULL");
  else if (!p->runs)
    return TILERT_OK; /* an empty problem: nothing to check or launch */
  else if (!(st = plan_values(p, data, scalars, args)).code) {
    int bad = p->k->info.aligned ? tilert__first_unaligned(&p->k->info, args) : -1;
    if (bad < 0)
      st = tilert__launch_bound(p->k, args, p->nargs, p->dims, p->grid, stream);
    else if (p->unaligned)
      st = tilert__launch_bound(p->unaligned, args, p->nargs, p->unaligned_dims, p->unaligned_grid, stream);
    else
      st = tilert__unaligned_err(&p->k->info, bad);
  }
  if (st.code && err)
    *err = st;
  return st.code;
}

void tilert_plan_grid(const tilert_plan *p, int64_t grid[3]) {
  for (int ax = 0; ax < 3; ax++)
    grid[ax] = p ? p->grid[ax] : 0;
}

void tilert_plan_destroy(tilert_plan *p) { free(p); }
