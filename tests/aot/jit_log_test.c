/* jit_log_test.c — with tests/aot/fake_libcuda.c as the driver (its JIT fills the whole error
 * log, no NUL): libtilert's module load and the generated AOT loader (vadd.c) report the log
 * without reading past it. Built with AddressSanitizer by tests/check_aot.sh; argv[1] is a PTX
 * file with tilec metadata. Exit status 0 = all checks passed. */
#include "vadd.h"

#include "tilert.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

static char *read_all(const char *path) {
  FILE *fp = fopen(path, "rb");
  if (!fp)
    return NULL;
  static char buf[1 << 20];
  size_t n = fread(buf, 1, sizeof buf - 1, fp);
  fclose(fp);
  buf[n] = '\0';
  return buf;
}

int main(int argc, char **argv) {
  const char *ptx = argc > 1 ? read_all(argv[1]) : NULL;
  CHECK(ptx, "usage: jit_log_test FILE.ptx");
  if (!ptx)
    return 1;
  tilert_device *dev = NULL;
  tilert_status st = tilert_device_open(TILERT_BACKEND_GPU, 0, &dev);
  CHECK(st.code == TILERT_OK, "tilert_device_open on the fake driver: %s", st.message);
  if (dev) {
    tilert_module *m = NULL;
    st = tilert_module_load_ptx(dev, ptx, &m);
    CHECK(st.code == TILERT_ERROR_DRIVER && st.cu_result == 218, "module load: %s: %s",
          tilert_code_name(st.code), st.message);
    CHECK(strstr(st.message, "CUDA_ERROR_INVALID_PTX: xxxx"), "no JIT log in '%s'", st.message);
    tilert_device_close(dev);
  }
  tilec_result r = vadd_load();
  CHECK(r == TILEC_ERROR_DRIVER, "vadd_load gave %s: %s", tilec_result_name(r), vadd_error());
  CHECK(strstr(vadd_error(), "cuModuleLoadDataEx: CUDA_ERROR_INVALID_PTX (218): xxxx"),
        "no JIT log in '%s'", vadd_error());
  vadd_unload();
  if (failures)
    return 1;
  printf("jit_log_test: unterminated JIT logs reported without over-reads\n");
  return 0;
}
