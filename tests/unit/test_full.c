/* test_full.c — full-size entries (driver_full_entry): which requirements bound a run-time dim,
 * the dims the entry pins (the tighter of two bounds), the kernel's own -D values kept, no entry
 * where the pinned kernel cannot launch or TILEC_FULL_ENTRY=0, and the metadata line that names
 * the entry. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "ast.h"
#include "tilec.h"
#include "tilert.h"

/* The full-size entry of the first kernel of text (NULL: none) and, through *f, that kernel. */
static TirFunc *full_of(Arena *a, const char *text, const char *def, TirFunc **f) {
  SourceFile *src = arena_alloc(a, sizeof *src);
  *src = (SourceFile){"full.tile", arena_strdup(a, text), strlen(text)};
  Diag *d = arena_alloc(a, sizeof *d);
  diag_init(d, src, stderr);
  Define dv[1];
  int nd = 0;
  if (def) {
    const char *eq = strchr(def, '=');
    dv[nd++] = (Define){arena_strndup(a, def, (size_t)(eq - def)), eq + 1, {0}};
  }
  AstProgram *prog = parse_program(a, src, d);
  cr_assert(prog && sema_check(a, prog, dv, nd, ARCH_SM90A, d));
  *f = driver_lower(a, prog->kernels, d);
  cr_assert(*f);
  return driver_full_entry(a, prog->kernels, *f, dv, nd, ARCH_SM90A, d);
}

static const char *row =
    "kernel row<BLOCK = 64>(X: f32[M, N], Y: out f32[M, N]) grid (M) threads (32) {\n"
    "  require N <= BLOCK;\n"
    "  Y[block.x, 0 : +BLOCK] = X[block.x, 0 : +BLOCK] * 2.0;\n"
    "}\n";

static int64_t pinned(const TirFunc *g, const char *dim) {
  for (int i = 0; i < g->ndims; i++)
    if (!strcmp(g->dims[i].name, dim))
      return g->dims[i].pinned ? g->dims[i].value : -1;
  return -2;
}

Test(full, pins_the_bounded_dim) {
  Arena *a = arena_new();
  TirFunc *f, *g = full_of(a, row, NULL, &f);
  cr_assert(g);
  cr_expect_str_eq(g->name, "row__full");
  cr_expect_str_eq(f->full_entry, "row__full");
  cr_expect_eq(pinned(g, "N"), 64);
  cr_expect_eq(pinned(g, "M"), -1);
  cr_expect_null(g->full_entry);
  cr_expect(strstr(meta_emit(a, f, 0), "// tilec: full row__full\n"));
  arena_free(a);
}

Test(full, keeps_the_kernels_defines) {
  Arena *a = arena_new();
  TirFunc *f, *g = full_of(a, row, "BLOCK=128", &f);
  cr_assert(g);
  cr_expect_eq(pinned(g, "N"), 128);
  arena_free(a);
}

Test(full, the_tighter_of_two_bounds) {
  Arena *a = arena_new();
  TirFunc *f, *g = full_of(a,
                           "kernel row<BLOCK = 64>(X: f32[N], Y: out f32[N]) grid (1) threads (32) {\n"
                           "  require N <= BLOCK;\n  require 48 >= N;\n"
                           "  Y[0 : +BLOCK] = X[0 : +BLOCK];\n}\n",
                           NULL, &f);
  cr_assert(g);
  cr_expect_eq(pinned(g, "N"), 48);
  arena_free(a);
}

Test(full, none_without_a_constant_bound) {
  const char *texts[] = {
      /* no requirement */
      "kernel k(X: f32[N], Y: out f32[N]) grid (1) threads (32) {\n  Y[0 : +32] = X[0 : +32];\n}\n",
      /* a bound by another dim, and a compound condition */
      "kernel k(X: f32[N], Y: out f32[M]) grid (1) threads (32) {\n  require N <= M;\n"
      "  require N <= 32 && N > 0;\n  Y[0 : +32] = X[0 : +32];\n}\n",
      /* pinned at N = 64, the second requirement is false: no launch could take the entry */
      "kernel k(X: f32[N], Y: out f32[N]) grid (1) threads (32) {\n  require N <= 64;\n"
      "  require N % 3 == 0;\n  Y[0 : +64] = X[0 : +64];\n}\n",
  };
  for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
    Arena *a = arena_new();
    TirFunc *f, *g = full_of(a, texts[i], NULL, &f);
    cr_expect_null(g, "text %zu has a full-size entry", i);
    cr_expect_null(f->full_entry);
    cr_expect_null(strstr(meta_emit(a, f, 0), "tilec: full"));
    arena_free(a);
  }
}

Test(full, turned_off) {
  Arena *a = arena_new();
  setenv("TILEC_FULL_ENTRY", "0", 1);
  TirFunc *f, *g = full_of(a, row, NULL, &f);
  unsetenv("TILEC_FULL_ENTRY");
  cr_expect_null(g);
  arena_free(a);
}

/* The module of text's first kernel and its full-size entry, for sm_90a. */
static char *module_of(Arena *a, const char *text) {
  TirFunc *f, *g = full_of(a, text, NULL, &f);
  cr_assert(g);
  TirFunc *fs[2] = {f, g};
  Diag d;
  diag_init(&d, NULL, stderr);
  NvptxOptions o = {.arch = ARCH_SM90A, .opt_level = 3};
  char *ptx = nvptx_compile_module(fs, 2, &o, &d);
  cr_assert(ptx);
  return ptx;
}

/* The module holds both entries, and the runtime's parser links them by name. */
Test(full, in_the_module) {
  Arena *a = arena_new();
  char *ptx = module_of(a, row);
  cr_expect(strstr(ptx, ".entry row(") && strstr(ptx, ".entry row__full("));
  tilert_kernel_info info;
  tilert_status st = tilert_parse_kernel_info_named(ptx, "row", &info);
  cr_assert_eq(st.code, TILERT_OK, "%s", st.message);
  cr_expect_str_eq(info.full_name, "row__full");
  cr_expect_eq(info.aligned, 0);
  st = tilert_parse_kernel_info_named(ptx, "row__full", &info);
  cr_assert_eq(st.code, TILERT_OK, "%s", st.message);
  cr_expect(info.dims[1].pinned && info.dims[1].value == 64);
  cr_expect_eq(info.aligned, 0);
  arena_free(a);
}

/* With TILEC_FULL_ALIGNED=1 the full-size entry takes its tensors as 16-byte aligned (the
 * runtime launches it only on such tensors, `aligned 16`): its row copies lose their alignment
 * tests and unaligned paths, so its PTX is shorter than the plain entry's; by default it is
 * compiled like the plain one. */
static size_t entry_lines(const char *ptx, const char *entry) {
  const char *p = strstr(ptx, entry), *end = p ? strstr(p + 1, ".entry ") : NULL;
  size_t n = 0;
  for (; p && *p && (!end || p < end); p++)
    n += *p == '\n';
  return n;
}

static const char *row16 =
    "kernel row<BLOCK = 64>(X: f16[M, N], Y: out f16[M, N]) grid (M) threads (32) {\n"
    "  require N <= BLOCK;\n"
    "  Y[block.x, 0 : +BLOCK] = X[block.x, 0 : +BLOCK] * 2.0;\n"
    "}\n";

/* module_of with the full-size entry compiled for aligned tensors (TILEC_FULL_ALIGNED=1). */
static char *aligned_module_of(Arena *a, const char *text) {
  setenv("TILEC_FULL_ALIGNED", "1", 1);
  char *ptx = module_of(a, text);
  unsetenv("TILEC_FULL_ALIGNED");
  return ptx;
}

Test(full, aligned_tensors) {
  Arena *a = arena_new();
  char *ptx = aligned_module_of(a, row16);
  size_t plain = entry_lines(ptx, ".entry row("), full = entry_lines(ptx, ".entry row__full(");
  cr_expect(full < plain, "full-size entry %zu lines, plain %zu", full, plain);
  cr_expect(strstr(ptx, "// tilec: aligned 16\n"));
  tilert_kernel_info info;
  cr_assert_eq(tilert_parse_kernel_info_named(ptx, "row__full", &info).code, TILERT_OK);
  cr_expect_eq(info.aligned, 16);
  ptx = module_of(a, row16);
  cr_expect_null(strstr(ptx, "// tilec: aligned"));
  arena_free(a);
}

/* The address tests of an entry's copies: `and.b64 %rd, %rd, 15` (or 14, the f16 form LLVM
 * narrows it to) between `entry` and the next entry. */
static int alignment_masks(const char *ptx, const char *entry) {
  const char *p = strstr(ptx, entry), *end = p ? strstr(p + 1, ".entry ") : NULL;
  int n = 0;
  for (const char *q = p; q && (q = strstr(q, "and.b64")) && (!end || q < end); q++) {
    const char *eol = strchr(q, '\n');
    n += eol && eol - q > 5 && (!strncmp(eol - 5, ", 15;", 5) || !strncmp(eol - 5, ", 14;", 5));
  }
  return n;
}

/* A row walk whose columns spread over 8 warps (4096 f16 a row): the chunks' addresses are
 * deeper arithmetic than LLVM's known-bits analysis follows, so the aligned entry drops its
 * tests only because chunks_plan takes a chunk's alignment from its row's under the contract;
 * the plain entry keeps testing every chunk. */
static const char *walk4096 =
    "kernel walk<BLOCK = 4096, CHUNK = 4>(X: f16[M, N], Y: out f16[M, N])\n"
    "  grid (cdiv(M, CHUNK)) threads (256) {\n"
    "  require N <= BLOCK;\n"
    "  let m0 = block.x * CHUNK;\n"
    "  for r in m0 .. minimum(m0 + CHUNK, M) pipeline 2 {\n"
    "    shared xs = X[r : +1, 0 : +BLOCK];\n"
    "    Y[r : +1, 0 : +BLOCK] = to(f16, to_f32(xs) * 2.0);\n"
    "  }\n"
    "}\n";

Test(full, aligned_entry_tests_no_chunk_alignment) {
  Arena *a = arena_new();
  char *ptx = aligned_module_of(a, walk4096);
  cr_expect_gt(alignment_masks(ptx, ".entry walk("), 0);
  cr_expect_eq(alignment_masks(ptx, ".entry walk__full("), 0, "%d address tests left in the aligned entry",
               alignment_masks(ptx, ".entry walk__full("));
  arena_free(a);
}
