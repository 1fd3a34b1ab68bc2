/* test_support.c — helpers shared by the unit test files (test_support.h). */
#include "test_support.h"

#include "ast.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *PTXAS = "/usr/local/cuda/bin/ptxas";

/* ptxas -v on ptx (the compiler's report, so a module it already assembled is not assembled
 * again): its exit status, the bytes spilled over all entries, and whether it serialized an
 * entry's wgmmas (C7514 / C7515: a non-wgmma instruction reading or writing an in-flight
 * accumulator, so every wgmma waits for the one before); its report in all. */
static int ptxas_check(const char *ptx, GpuArch arch, long *spilled, bool *serialized, char *all, size_t cap) {
  Arena *a = arena_new();
  int rc;
  const char *report = ptxas_report(a, PTXAS, ptx, arch, &rc);
  cr_assert(report, "ptxas did not run");
  snprintf(all, cap, "%s", report);
  *spilled = strstr(report, "bytes spill stores") ? ptxas_spill_bytes(a, PTXAS, ptx, arch, NULL) : -1;
  *serialized = strstr(report, "C7514") || strstr(report, "C7515") || strstr(report, "are serialized");
  arena_free(a);
  return rc;
}

static void ptxas_assert(const char *ptx, GpuArch arch, bool unserialized) {
  if (access(PTXAS, X_OK) != 0)
    return;
  char all[8192];
  long spilled;
  bool serialized;
  cr_assert_eq(ptxas_check(ptx, arch, &spilled, &serialized, all, sizeof all), 0, "ptxas failed:\n%s", all);
  cr_assert_eq(spilled, 0, "spills:\n%s", all);
  cr_assert(!unserialized || !serialized, "ptxas serialized the wgmmas:\n%s", all);
}

void ptxas_assert_clean(const char *ptx, GpuArch arch) { ptxas_assert(ptx, arch, false); }

bool have_ptxas(void) {
  Arena *a = arena_new();
  bool ok = ptxas_find(a) != NULL;
  arena_free(a);
  return ok;
}

void ptxas_assert_unserialized(const char *ptx, GpuArch arch) { ptxas_assert(ptx, arch, true); }

char *ptx_entry(Arena *a, const char *ptx, const char *name) {
  char *head = arena_printf(a, ".visible .entry %s(", name);
  const char *start = strstr(ptx, head);
  if (!start)
    return NULL;
  const char *end = strstr(start, "\t// .globl"); /* the next function; a "}" line may end an asm block */
  return arena_strndup(a, start, end ? (size_t)(end - start) : strlen(start));
}

/* ptx without the entry that starts at start (a pointer into ptx), up to the next function. */
static char *ptx_cut(Arena *a, const char *ptx, const char *start) {
  while (start > ptx && start[-1] != '\n')
    start--;
  const char *end = strstr(start, "\t// .globl");
  end = end ? end : start + strlen(start);
  size_t n1 = (size_t)(start - ptx);
  char *out = arena_alloc(a, strlen(ptx) + 1);
  memcpy(out, ptx, n1);
  strcpy(out + n1, end);
  return out;
}

char *ptx_without_ws(Arena *a, const char *ptx) {
  const char *start = strstr(ptx, "__ws(\n");
  return start ? ptx_cut(a, ptx, start) : arena_strdup(a, ptx);
}

char *ptx_without_entry(Arena *a, const char *ptx, const char *name) {
  const char *start = strstr(ptx, arena_printf(a, ".visible .entry %s(", name));
  return start ? ptx_cut(a, ptx, start) : arena_strdup(a, ptx);
}

TirFunc *source_tir(Arena *a, const char *path, const char *text, const char **defs, GpuArch arch, Diag *d) {
  return source_tir_kernel(a, path, text, defs, arch, 0, d);
}

TirFunc *source_tir_kernel(Arena *a, const char *path, const char *text, const char **defs, GpuArch arch, int index,
                           Diag *d) {
  size_t len = strlen(text);
  SourceFile *src = arena_alloc(a, sizeof *src);
  *src = (SourceFile){path, arena_strndup(a, text, len), len};
  diag_init(d, src, stderr);
  int nd = 0;
  Define *dv = arena_alloc(a, sizeof *dv * 8);
  for (; defs && defs[nd]; nd++) {
    const char *eq = strchr(defs[nd], '=');
    dv[nd] = (Define){arena_strndup(a, defs[nd], (size_t)(eq - defs[nd])), eq + 1, {0}};
  }
  AstProgram *prog = parse_program(a, src, d);
  cr_assert(prog && sema_check(a, prog, dv, nd, arch, d));
  AstKernel *k = prog->kernels;
  for (int i = 0; i < index && k; i++)
    k = k->next;
  cr_assert(k, "%s has no kernel #%d", path, index);
  TirFunc *f = driver_lower(a, k, d);
  cr_assert(f, "%s: driver_lower failed", path);
  return f;
}

char *source_ptx(Arena *a, const char *path, const char *text, const char **defs, GpuArch arch) {
  Diag d;
  TirFunc *f = source_tir(a, path, text, defs, arch, &d);
  NvptxOptions o = {.arch = arch, .opt_level = 3};
  char *ptx = nvptx_compile(f, &o, &d, NULL);
  cr_assert(ptx, "%s: nvptx_compile failed", path);
  return ptx;
}

char *source_ptx_with(Arena *a, const char *path, const char *text, const char **defs, GpuArch arch,
                      const char *knob, const char *value) {
  setenv(knob, value, 1);
  char *ptx = source_ptx(a, path, text, defs, arch);
  unsetenv(knob);
  return ptx;
}

TirFunc *source_tir_with(Arena *a, const char *path, const char *text, GpuArch arch, const char *knob,
                         const char *value, Diag *d) {
  if (value)
    setenv(knob, value, 1);
  TirFunc *f = source_tir(a, path, text, NULL, arch, d);
  unsetenv(knob);
  return f;
}

void source_assembles(const char *path, const char *text) {
  GpuArch arches[2] = {ARCH_SM80, ARCH_SM90A};
  for (int k = 0; k < 2; k++) {
    Arena *a = arena_new();
    ptxas_assert_clean(source_ptx(a, path, text, NULL, arches[k]), arches[k]);
    arena_free(a);
  }
}

char *example_text(Arena *a, const char *name) { return file_text(a, arena_printf(a, "dsl/examples/%s.tile", name)); }

char *file_text(Arena *a, const char *path) {
  FILE *fp = fopen(path, "rb");
  cr_assert(fp, "cannot open %s (tests run from the repository root)", path);
  char *buf = arena_alloc(a, 1 << 16);
  size_t len = fread(buf, 1, (1 << 16) - 1, fp);
  fclose(fp);
  buf[len] = 0;
  return buf;
}

char *tir_verify_message(Arena *a, const TirFunc *f, const Diag *from) {
  char *buf = NULL;
  size_t len = 0;
  FILE *m = open_memstream(&buf, &len);
  Diag d;
  diag_init(&d, from->file, m);
  bool ok = tir_verify(f, &d, "test");
  fclose(m);
  char *out = arena_strdup(a, ok ? "" : buf);
  free(buf);
  return out;
}

int find_op(const TirFunc *f, int from, TirOp op) {
  for (int j = from; j < f->ninsts; j++)
    if (f->insts[j].op == op)
      return j;
  return -1;
}

int nth_op(const TirFunc *f, TirOp op, int k) {
  for (int i = find_op(f, 0, op); i >= 0; i = find_op(f, i + 1, op))
    if (k-- == 0)
      return i;
  return -1;
}

int count_op(const TirFunc *f, TirOp op) {
  int n = 0;
  for (int i = 0; i < f->ninsts; i++)
    n += f->insts[i].op == op;
  return n;
}

int occurrences(const char *s, const char *what) {
  int n = 0;
  for (const char *p = strstr(s, what); p; p = strstr(p + 1, what))
    n++;
  return n;
}

int aligned_loops_in(const char *what, const char *text) {
  Arena *a = arena_new();
  Diag d;
  TirFunc *f = source_tir_with(a, "k.tile", text, ARCH_SM90A, "TILEC_ALIGN_WINDOWS", NULL, &d);
  cr_assert_not_null(f, "%s", what);
  int n = count_op(f, TIR_ROW_SHIFT);
  arena_free(a);
  return n;
}

void moved_windows_agree(const char *text, int rows, int n, int off, int64_t blocks, int moved, float y_rel) {
  size_t len = (size_t)rows * (size_t)n + 8;
  uint16_t *x = aligned_alloc(16, (len * 2 + 15) / 16 * 16), *y[2];
  float *s[2];
  cr_assert_not_null(x);
  for (int i = 0; i < rows * n; i++)
    elem_store(x + off, i, TY_F16, (float)((i * 7919) % 61) / 8.0f - 3.0f);
  for (int v = 0; v < 2; v++) {
    y[v] = aligned_alloc(16, (len * 2 + 15) / 16 * 16);
    s[v] = calloc((size_t)rows + 1, sizeof(float));
    cr_assert(y[v] && s[v]);
    Arena *a = arena_new();
    Diag d;
    TirFunc *f = source_tir_with(a, "k.tile", text, ARCH_SM90A, "TILEC_ALIGN_WINDOWS", v ? NULL : "0", &d);
    cr_assert_eq(count_op(f, TIR_ROW_SHIFT), v ? moved : 0);
    InterpArg args[3] = {{.tensor = {x + off, {rows, n}, {n, 1}}}, {.tensor = {s[v], {rows}, {1}}},
                         {.tensor = {y[v] + off, {rows, n}, {n, 1}}}};
    int64_t dims[2] = {rows, n}, grid[3] = {blocks, 1, 1};
    char err[256];
    cr_assert(interp_run(f, args, dims, grid, err, sizeof err), "%s", err);
    arena_free(a);
  }
  for (int i = 0; i < rows; i++)
    cr_assert(s[0][i] == s[1][i] || fabsf(s[0][i] - s[1][i]) <= 1e-5f * fabsf(s[0][i]) + 1e-6f,
              "n = %d, row %d: %g vs %g", n, i, s[0][i], s[1][i]);
  for (int i = 0; i < rows * n; i++) {
    float p = elem_load(y[0] + off, i, TY_F16), q = elem_load(y[1] + off, i, TY_F16);
    cr_assert(y_rel == 0 ? p == q : fabsf(p - q) <= y_rel * fabsf(p) + 1e-7f, "element %d: %g vs %g", i, p, q);
  }
  free(x);
  for (int v = 0; v < 2; v++)
    free(y[v]), free(s[v]);
}
