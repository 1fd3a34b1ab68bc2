/* exec_cpu.c — plugs the TIR interpreter into the runtime as its CPU backend, so one
 * tilert_launch() call runs a kernel on the GPU or here, and tests, `make demo` and `tilec run`
 * do not care which. */
#include "tilec.h"
#include "tilert.h"

#include <stdio.h>

/* The runtime has already bound the arguments (tilert_bind): dims, grid and requirements are
 * checked, and dim_values follows the metadata's dim order, which is TirFunc.dims order. */
static int exec_cpu_launch(void *ctx, const tilert_cpu_launch *l, char *err, size_t errlen) {
  const TirFunc *f = ctx;
  if (l->nargs != f->nargs || l->info->ndims != f->ndims) {
    snprintf(err, errlen, "kernel '%s': metadata does not match its IR", f->name);
    return 1;
  }
  InterpArg args[TILERT_MAX_ARGS] = {0};
  for (int i = 0; i < f->nargs; i++) {
    const tilert_arg *a = &l->args[i];
    if (f->args[i].kind == ARG_SCALAR) {
      args[i].scalar = a->scalar;
      continue;
    }
    args[i].tensor.data = a->tensor.data;
    for (int d = 0; d < a->tensor.rank; d++) {
      args[i].tensor.shape[d] = a->tensor.shape[d];
      args[i].tensor.strides[d] = a->tensor.strides[d];
    }
  }
  return interp_run(f, args, l->dim_values, l->grid, err, errlen) ? 0 : 1;
}

tilert_status exec_cpu_kernel(struct tilert_device *dev, Arena *a, const TirFunc *f,
                              struct tilert_kernel **out) {
  const char *meta = meta_emit(a, f, 0);
  return tilert_kernel_create_cpu(dev, meta, exec_cpu_launch, (void *)f, out);
}
