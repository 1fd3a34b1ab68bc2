/* stubs.c — TEMPORARY weak stand-ins so the tree links while stages are being written.
 * Each owner deletes the stub of a function when the real one lands. This file must be empty
 * (and then removed) before release. */
#include "tilec.h"

#define STUB_WEAK __attribute__((weak))

STUB_WEAK TirFunc *lower_tir(Arena *a, const struct AstKernel *k, Diag *d) {
  (void)a, (void)k;
  diag_plain(d, DIAG_ERROR, "lower_tir: not built yet");
  return NULL;
}
STUB_WEAK void tir_print(FILE *out, const TirFunc *f) { (void)out, (void)f; }
STUB_WEAK bool tir_verify(const TirFunc *f, Diag *d, const char *stage) {
  (void)f, (void)d, (void)stage;
  return true;
}
STUB_WEAK bool tir_fold_constants(TirFunc *f, Diag *d) { (void)f, (void)d; return true; }
STUB_WEAK bool tir_eliminate_dead(TirFunc *f, Diag *d) { (void)f, (void)d; return true; }
STUB_WEAK bool interp_run(const TirFunc *f, const InterpArg *args, const int64_t *dim_values,
                          const int64_t grid[3], char *err, size_t errlen) {
  (void)f, (void)args, (void)dim_values, (void)grid;
  snprintf(err, errlen, "interpreter not built yet");
  return false;
}
