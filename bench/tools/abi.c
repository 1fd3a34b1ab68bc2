/* bench/tools/abi.c — prints the layout of runtime/tilert.h's structs in the format of
 * `python3 bench/run.py --abi`, so tests/check_bench.sh can prove the ctypes mirrors match. */
#include <stddef.h>
#include <stdio.h>

#include "tilert.h"

int main(void) {
  printf("status %zu %zu\n", sizeof(tilert_status), offsetof(tilert_status, message));
  printf("tensor %zu %zu %zu\n", sizeof(tilert_tensor), offsetof(tilert_tensor, shape),
         offsetof(tilert_tensor, strides));
  printf("arg %zu %zu %zu\n", sizeof(tilert_arg), offsetof(tilert_arg, tensor), offsetof(tilert_arg, scalar));
  printf("arginfo %zu\n", sizeof(tilert_arg_info));
  printf("diminfo %zu %zu\n", sizeof(tilert_dim_info), offsetof(tilert_dim_info, value));
  printf("kernelinfo %zu %zu %zu %zu %zu %zu %zu\n", sizeof(tilert_kernel_info),
         offsetof(tilert_kernel_info, nargs), offsetof(tilert_kernel_info, args),
         offsetof(tilert_kernel_info, ndims), offsetof(tilert_kernel_info, dims),
         offsetof(tilert_kernel_info, grid), offsetof(tilert_kernel_info, nrequires));
  printf("enums %d %d %d %d %d %d\n", (int)TILERT_BACKEND_GPU, (int)TILERT_I32, (int)TILERT_F16,
         (int)TILERT_BF16, (int)TILERT_F32, (int)TILERT_ARG_SCALAR);
  return 0;
}
