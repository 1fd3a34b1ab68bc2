/* test_indexcmp.c — masks that compare two index coordinates (lower_nvptx.c, lower_index_select;
 * on by default, TILEC_INDEX_COMPARE=0 writes the compares as written):
 * where(row_index(m0, BM) >= col_index(n0, BN), x, 0) compares one per-thread difference with an
 * immediate an element, under a range check of m0 and n0 (an ordering; equality needs none, also
 * of one coordinate and a scalar: a one-hot column), and leaves an ordering against a bound
 * (col_index(n0, BN) < N) as written. The GPU cases
 * gqa_window_huge and gqa_ws_window_huge (tests/example_runner.c) run the path the range check
 * takes when the one-difference form would overflow; the _nic cases run the compares as written. */
#include <criterion/criterion.h>
#include <regex.h>
#include <stdlib.h>
#include <string.h>

#include "tilec.h"
#include "test_support.h"

/* OP 0: an ordering of two coordinates; 1: their equality; 2: one coordinate below N; 3: one
 * coordinate equal to a scalar; 4: an ordering against an index of one column (0 in every column
 * once broadcast: not a coordinate) */
static const char *src = "kernel m<BM = 64, BN = 64, OP = 0>(X: f32[M, N], Y: out f32[M, N], a: i32, b: i32)\n"
                         "  grid (cdiv(M, BM), cdiv(N, BN)) threads (128)\n"
                         "{\n"
                         "  let m0 = block.x * BM + a;\n"
                         "  let n0 = block.y * BN + b;\n"
                         "  reg x = X[block.x * BM : +BM, block.y * BN : +BN];\n"
                         "  if OP == 0 { x = where(row_index(m0, BM) >= col_index(n0, BN), x, 0.0); }\n"
                         "  if OP == 1 { x = where(row_index(m0, BM) == col_index(n0, BN), x, 0.0); }\n"
                         "  if OP == 2 { x = where(col_index(n0, BN) < N, x, 0.0); }\n"
                         "  if OP == 3 { x = where(col_index(n0, BN) == a, x, 0.0); }\n"
                         "  if OP == 4 { x = where(row_index(m0, BM) >= col_index(n0, 1), x, 0.0); }\n"
                         "  Y[block.x * BM : +BM, block.y * BN : +BN] = x;\n"
                         "}\n";

/* Lines of ptx that compare a register with an immediate (setp.CMP.s32 %p, %r, IMM). */
static int immediate_compares(const char *ptx) {
  regex_t re;
  cr_assert_eq(regcomp(&re, "setp\\.[a-z]+\\.s32[[:space:]]+%p[0-9]+, %r[0-9]+, -?[0-9]+;", REG_EXTENDED | REG_NOSUB), 0);
  int n = 0;
  for (const char *line = ptx; line && *line;) {
    const char *end = strchr(line, '\n');
    size_t len = end ? (size_t)(end - line) : strlen(line);
    char buf[256];
    snprintf(buf, sizeof buf, "%.*s", (int)(len < sizeof buf ? len : sizeof buf - 1), line);
    n += regexec(&re, buf, 0, NULL, 0) == 0;
    line = end ? end + 1 : NULL;
  }
  regfree(&re);
  return n;
}

/* The PTX of OP with the one-difference compares (on: the default) or as written (knob at 0). */
static char *op_ptx(Arena *a, const char *op, bool on) {
  const char *defs[] = {op, NULL};
  return on ? source_ptx(a, "m.tile", src, defs, ARCH_SM90A)
            : source_ptx_with(a, "m.tile", src, defs, ARCH_SM90A, "TILEC_INDEX_COMPARE", "0");
}

Test(indexcmp, ordering_compares_one_difference_under_a_range_check) {
  Arena *a = arena_new();
  char *on = op_ptx(a, "OP=0", true), *off = op_ptx(a, "OP=0", false);
  /* 32 elements a thread (64 x 64 over 128 threads): one compare with an immediate each at most */
  cr_assert_geq(immediate_compares(on), 16);
  cr_assert_eq(immediate_compares(off), 0);
  cr_assert_eq(occurrences(on, ", 536870912;"), 2, "m0 and n0 each checked to lie within 2^29");
  cr_assert_eq(occurrences(off, ", 536870912;"), 0);
  const char *defs[] = {"OP=0", NULL};
  for (int k = 0; k < 2; k++) {
    GpuArch arch = k ? ARCH_SM90A : ARCH_SM80;
    ptxas_assert_clean(source_ptx(a, "m.tile", src, defs, arch), arch);
  }
  arena_free(a);
}

Test(indexcmp, equality_needs_no_range_check) {
  Arena *a = arena_new();
  for (int k = 0; k < 2; k++) {
    const char *op = k ? "OP=3" : "OP=1";
    char *on = op_ptx(a, op, true);
    /* OP=3: a thread's elements hold 4 distinct columns; LLVM writes the one whose constant is
     * 0 as a compare of the difference's two terms */
    cr_assert_geq(immediate_compares(on), k ? 3 : 16, "%s", op);
    cr_assert_eq(occurrences(on, ", 536870912;"), 0, "%s: equality is exact under wrapping", op);
    cr_assert_eq(immediate_compares(op_ptx(a, op, false)), 0, "%s", op);
  }
  arena_free(a);
}

Test(indexcmp, a_bound_is_compared_as_written) {
  Arena *a = arena_new();
  for (int k = 0; k < 2; k++) {
    const char *op = k ? "OP=4" : "OP=2";
    char *on = op_ptx(a, op, true), *off = op_ptx(a, op, false);
    cr_assert_eq(occurrences(on, ", 536870912;"), 0, "%s", op);
    cr_assert_str_eq(on, off, "%s: one coordinate against a bound: the same PTX either way", op);
  }
  arena_free(a);
}

/* The example itself, at the bench's d64 causal tile (128 x 128, 8 warps, 3 stages): the
 * warp-specialized entry's diagonal mask takes the one-difference form by default, so a change
 * of layouts or broadcasts that stops the rewrite on the real kernel shows here, not only on a
 * GPU's clock. */
Test(indexcmp, causal_attention_example_takes_the_one_difference_form) {
  Arena *a = arena_new();
  const char *text = example_text(a, "attention");
  const char *defs[] = {"CAUSAL=1", "BM=128", "BN=128", "WARPS=8", "STAGES=3", NULL};
  char *on = ptx_entry(a, source_ptx(a, "attention.tile", text, defs, ARCH_SM90A), "attention__ws");
  char *off = ptx_entry(a, source_ptx_with(a, "attention.tile", text, defs, ARCH_SM90A, "TILEC_INDEX_COMPARE", "0"),
                        "attention__ws");
  cr_assert(on && off, "the example has a warp-specialized entry");
  /* a consumer thread's 64 scores of the diagonal block: at least one compare an element pair
   * beyond the entry's other compares with immediates (loop and ring bookkeeping) */
  int extra = immediate_compares(on) - immediate_compares(off);
  cr_assert_geq(extra, 32, "%d more compares with an immediate", extra);
  cr_assert_geq(occurrences(on, ", 536870912;"), 2, "m0 and n0 checked to lie within 2^29");
  arena_free(a);
}
