/* test_zero.c — out tensors declared `= 0` (docs/language.md 5.3): the flag through TIR and the
 * metadata, the GPU lowering's waits (griddepcontrol.wait before the first update on sm_90a, none
 * on sm_80), the runtime's parse, its zeroing of strided views on the host before the kernel, and
 * the PTX of its zeroing kernel. */
#include <criterion/criterion.h>
#include <string.h>

#include "test_support.h"
#include "tilec.h"
#include "tilert_internal.h"

/* Column sums of X into Y (zeroed by the launch): the layernorm-backward dW pattern. */
static const char *colsum =
    "kernel colsum<ROWS = 4, BLOCK = 128>(X: f32[M, N], Y: out f32[N] = 0)\n"
    "  grid (cdiv(M, ROWS), cdiv(N, BLOCK)) threads (128)\n"
    "{\n"
    "  atomic_add(Y[block.y * BLOCK : +BLOCK], squeeze(sum(X[block.x * ROWS : +ROWS, block.y * BLOCK : +BLOCK], 0, keep), 0));\n"
    "}\n";

/* A kernel that reads its `= 0` tensor before adding to it. */
static const char *reads =
    "kernel bump<BLOCK = 128>(X: f32[N], Y: out f32[N] = 0)\n"
    "  grid (cdiv(N, BLOCK)) threads (128)\n"
    "{\n"
    "  let c = block.x * BLOCK;\n"
    "  atomic_add(Y[c : +BLOCK], X[c : +BLOCK] + Y[c : +BLOCK]);\n"
    "}\n";

Test(zero, flag_through_tir_and_metadata) {
  Arena *a = arena_new();
  Diag d;
  TirFunc *f = source_tir(a, "zero.tile", colsum, NULL, ARCH_SM90A, &d);
  cr_expect(!f->args[0].zero_init);
  cr_expect(f->args[1].zero_init && f->args[1].is_out);
  char *meta = meta_emit(a, f, 0);
  cr_expect(strstr(meta, "// tilec: arg Y tensor f32 out=0 N\n"), "%s", meta);
  cr_expect(strstr(meta, "// tilec: arg X tensor f32 in M N\n"), "%s", meta);
  /* `tilec run` and the tests start it at 0 whatever writes it */
  cr_expect_eq(tir_atomic_start(f, 1), 0.0);
  arena_free(a);
}

Test(zero, knob_drops_it_for_an_ab) {
  Arena *a = arena_new();
  Diag d;
  TirFunc *f = source_tir_with(a, "zero.tile", colsum, ARCH_SM90A, "TILEC_ZERO_INIT", "0", &d);
  cr_expect(!f->args[1].zero_init);
  cr_expect(!strstr(meta_emit(a, f, 0), "out=0"));
  arena_free(a);
}

/* sm_90a: a wait before the block's update, after the sums, and one before the exit (the
 * kernel never completes before the zeroing); sm_80: none (its launches are ordered by the
 * stream). Both assemble without spills. */
Test(zero, waits_before_the_update_on_sm90a_only) {
  Arena *a = arena_new();
  char *p90 = source_ptx(a, "zero.tile", colsum, NULL, ARCH_SM90A);
  char *p80 = source_ptx(a, "zero.tile", colsum, NULL, ARCH_SM80);
  cr_expect_eq(occurrences(p90, "griddepcontrol.wait;"), 2, "%s", p90);
  cr_expect(strstr(p90, "griddepcontrol.wait;") < strstr(p90, "global.add"), "%s", p90);
  const char *last = p90;
  for (const char *w = p90; (w = strstr(w, "griddepcontrol.wait;")); w++)
    last = w;
  cr_expect(strstr(last, "ret;") && !strstr(last, "global.add"), "%s", p90);
  cr_expect_eq(occurrences(p80, "griddepcontrol"), 0);
  ptxas_assert_clean(p90, ARCH_SM90A);
  ptxas_assert_clean(p80, ARCH_SM80);
  arena_free(a);
}

/* The metadata says `zero_wait` where the kernel waits, so the runtime may overlap it. */
Test(zero, metadata_says_zero_wait_on_sm90a) {
  Arena *a = arena_new();
  Diag d;
  for (int k = 0; k < 2; k++) {
    GpuArch arch = k ? ARCH_SM90A : ARCH_SM80;
    TirFunc *f = source_tir(a, "zero.tile", colsum, NULL, arch, &d);
    TirFunc *fs[1] = {f};
    NvptxOptions o = {.arch = arch, .opt_level = 3};
    char *ptx = nvptx_compile_module(fs, 1, &o, &d);
    cr_assert(ptx);
    tilert_kernel_info info;
    tilert_status st = tilert_parse_kernel_info(ptx, &info);
    cr_assert_eq(st.code, TILERT_OK, "%s", st.message);
    cr_expect_eq(info.zero_wait, k, "%s", arch_name(arch));
    cr_expect(info.args[1].zero_init && info.args[1].is_out && !info.args[0].zero_init);
  }
  arena_free(a);
}

/* A kernel that reads the tensor waits at its start, before any of its loads (and at its exit). */
Test(zero, a_kernel_that_reads_it_waits_at_its_start) {
  Arena *a = arena_new();
  char *ptx = source_ptx(a, "zero.tile", reads, NULL, ARCH_SM90A);
  cr_expect_eq(occurrences(ptx, "griddepcontrol.wait;"), 2, "%s", ptx);
  cr_expect(strstr(ptx, "griddepcontrol.wait;") < strstr(ptx, "ld.global"), "%s", ptx);
  ptxas_assert_clean(ptx, ARCH_SM90A);
  arena_free(a);
}

Test(zero, runtime_metadata_errors) {
  tilert_kernel_info info;
  const char *twice = "// tilec: kernel k\n// tilec: threads 32\n// tilec: dim N\n"
                      "// tilec: arg Y tensor f32 out=0 N\n// tilec: grid 1 | 1 | 1\n"
                      "// tilec: zero_wait\n// tilec: zero_wait\n";
  tilert_status st = tilert_parse_kernel_info(twice, &info);
  cr_expect_eq(st.code, TILERT_ERROR_BAD_METADATA);
  cr_expect(strstr(st.message, "expected one 'zero_wait'"), "%s", st.message);
  const char *bad = "// tilec: kernel k\n// tilec: threads 32\n// tilec: dim N\n"
                    "// tilec: arg Y tensor f32 out=1 N\n// tilec: grid 1 | 1 | 1\n";
  st = tilert_parse_kernel_info(bad, &info);
  cr_expect_eq(st.code, TILERT_ERROR_BAD_METADATA);
  cr_expect(strstr(st.message, "'out=0'"), "%s", st.message);
}

/* The host function sees the view zeroed and the bytes between its rows as they were. */
typedef struct Seen {
  int calls, view_zero, gaps_kept;
} Seen;

enum { ROWS = 5, COLS = 3, PITCH = 8, PLANES = 2, PLANE = 64 };

static int cpu_check(void *ctx, const tilert_cpu_launch *l, char *err, size_t errlen) {
  (void)err, (void)errlen;
  Seen *s = ctx;
  const float *y = l->args[0].tensor.data;
  s->calls++;
  s->view_zero = s->gaps_kept = 1;
  for (int p = 0; p < PLANES; p++)
    for (int r = 0; r < ROWS; r++)
      for (int c = 0; c < PITCH; c++) {
        float v = y[p * PLANE + r * PITCH + c];
        if (c < COLS && v != 0)
          s->view_zero = 0;
        if (c >= COLS && v != 7)
          s->gaps_kept = 0;
      }
  return 0;
}

Test(zero, host_launch_zeroes_a_strided_view_first) {
  static const char *meta = "// tilec: kernel k\n// tilec: threads 32\n// tilec: dim P\n// tilec: dim R\n"
                            "// tilec: dim C\n// tilec: arg Y tensor f32 out=0 P R C\n// tilec: grid 1 | 1 | 1\n";
  tilert_device *dev;
  cr_assert_eq(tilert_device_open(TILERT_BACKEND_CPU, 0, &dev).code, TILERT_OK);
  static float y[PLANES * PLANE];
  for (int i = 0; i < PLANES * PLANE; i++)
    y[i] = 7;
  Seen seen = {0};
  tilert_kernel *k;
  tilert_status st = tilert_kernel_create_cpu(dev, meta, cpu_check, &seen, &k);
  cr_assert_eq(st.code, TILERT_OK, "%s", st.message);
  tilert_arg arg = {.kind = TILERT_ARG_TENSOR};
  arg.tensor = (tilert_tensor){.data = y, .dtype = TILERT_F32, .rank = 3, .shape = {PLANES, ROWS, COLS},
                               .strides = {PLANE, PITCH, 1}};
  st = tilert_launch(k, &arg, 1, NULL);
  cr_assert_eq(st.code, TILERT_OK, "%s", st.message);
  cr_expect_eq(seen.calls, 1);
  cr_expect(seen.view_zero);
  cr_expect(seen.gaps_kept);
  /* past the view (plane 0's rows 5..7) untouched too */
  cr_expect_eq(y[ROWS * PITCH], 7.0f);
  tilert_kernel_destroy_cpu(k);
  tilert_device_close(dev);
}

/* A launch of 0 blocks (M = 0 rows) still zeroes an `= 0` tensor that is not empty, and runs
 * nothing else. */
Test(zero, empty_launch_still_zeroes) {
  static const char *meta = "// tilec: kernel k\n// tilec: threads 32\n// tilec: dim M\n// tilec: dim N\n"
                            "// tilec: arg X tensor f32 in M N\n// tilec: arg Y tensor f32 out=0 N\n"
                            "// tilec: grid M | 1 | 1\n";
  tilert_device *dev;
  cr_assert_eq(tilert_device_open(TILERT_BACKEND_CPU, 0, &dev).code, TILERT_OK);
  float y[8], x[1];
  for (int i = 0; i < 8; i++)
    y[i] = 7;
  Seen seen = {0};
  tilert_kernel *k;
  cr_assert_eq(tilert_kernel_create_cpu(dev, meta, cpu_check, &seen, &k).code, TILERT_OK);
  tilert_arg args[2] = {tilert_arg_tensor(x, TILERT_F32, 2, (int64_t[]){0, 8}),
                        tilert_arg_tensor(y, TILERT_F32, 1, (int64_t[]){8})};
  tilert_status st = tilert_launch(k, args, 2, NULL);
  cr_assert_eq(st.code, TILERT_OK, "%s", st.message);
  cr_expect_eq(seen.calls, 0);
  for (int i = 0; i < 8; i++)
    cr_expect_eq(y[i], 0.0f);
  args[1].tensor.data = NULL; /* not empty: it needs its data even when no block runs */
  st = tilert_launch(k, args, 2, NULL);
  cr_expect_eq(st.code, TILERT_ERROR_INVALID_ARGUMENT);
  cr_expect(strstr(st.message, "argument 'Y': data pointer is NULL"), "%s", st.message);
  tilert_kernel_destroy_cpu(k);
  tilert_device_close(dev);
}

/* The launch zeroes the output before the kernel reads the input: no in place. */
Test(zero, not_in_place_of_an_input) {
  static const char *meta = "// tilec: kernel k\n// tilec: threads 32\n// tilec: dim N\n"
                            "// tilec: arg X tensor f32 in N\n// tilec: arg Y tensor f32 out=0 N\n"
                            "// tilec: grid 1 | 1 | 1\n";
  tilert_kernel_info info;
  cr_assert_eq(tilert_parse_kernel_info(meta, &info).code, TILERT_OK);
  float x[8];
  tilert_arg args[2] = {tilert_arg_tensor(x, TILERT_F32, 1, (int64_t[]){8}),
                        tilert_arg_tensor(x, TILERT_F32, 1, (int64_t[]){8})};
  int64_t dims[1], grid[3];
  tilert_status st = tilert_bind(&info, args, 2, dims, grid);
  cr_expect_eq(st.code, TILERT_ERROR_SHAPE);
  cr_expect(strstr(st.message, "output 'Y' is declared '= 0' and is the same view as input 'X'"), "%s",
            st.message);
  info.args[1].zero_init = 0; /* in place is fine otherwise */
  cr_expect_eq(tilert_bind(&info, args, 2, dims, grid).code, TILERT_OK);
}

/* The runtime's zeroing kernel is PTX it writes itself: ptxas takes both forms. */
Test(zero, zeroing_kernel_assembles) {
  char *p90 = tilert__zero_ptx(90), *p80 = tilert__zero_ptx(80);
  cr_assert(p90 && p80);
  cr_expect(strstr(p90, "griddepcontrol.launch_dependents;"));
  cr_expect(!strstr(p80, "griddepcontrol"));
  ptxas_assert_clean(p90, ARCH_SM90A);
  ptxas_assert_clean(p80, ARCH_SM80);
  free(p90);
  free(p80);
}
