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
STUB_WEAK char *nvptx_compile(TirFunc *f, const NvptxOptions *o, Diag *d, int *smem) {
  (void)f, (void)o, (void)smem;
  diag_plain(d, DIAG_ERROR, "nvptx backend not built yet");
  return NULL;
}
STUB_WEAK char *meta_emit(Arena *a, const TirFunc *f, int smem) {
  (void)f, (void)smem;
  return arena_strdup(a, "");
}
STUB_WEAK int driver_backend(Arena *a, struct AstProgram *prog, const TilecOptions *o, Diag *d) {
  (void)a, (void)prog, (void)o;
  diag_plain(d, DIAG_ERROR, "backend not built yet");
  return 1;
}
STUB_WEAK void diag_init(Diag *d, const SourceFile *file, FILE *out) {
  d->file = file, d->out = out;
}
STUB_WEAK void diag_vreport(Diag *d, DiagKind kind, SrcLoc loc, const char *fmt, va_list ap) {
  (void)kind, (void)loc;
  vfprintf(d->out ? d->out : stderr, fmt, ap);
  if (kind == DIAG_ERROR)
    d->nerrors++;
}
STUB_WEAK void diag_report(Diag *d, DiagKind kind, SrcLoc loc, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  diag_vreport(d, kind, loc, fmt, ap);
  va_end(ap);
}
STUB_WEAK void diag_plain(Diag *d, DiagKind kind, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  diag_vreport(d, kind, (SrcLoc){0}, fmt, ap);
  va_end(ap);
}
STUB_WEAK bool diag_too_many(const Diag *d) { return d->nerrors >= DIAG_MAX_ERRORS; }
