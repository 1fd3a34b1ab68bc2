/* bundle_test.c — the C that `tilec --emit=c` writes for a file of several kernels
 * (tests/check_aot.sh): dsl/examples/layernorm_backward.tile as ln.{h,c} (layernorm_backward and
 * layernorm_train in one module, BLOCK = 1024), the same with BLOCK = 4096 as ln_4k, and the two
 * linked kernel by kernel as ln_any. Checks each kernel's contract without a GPU; then, by the
 * environment:
 *   FAKE_LIBCUDA_JIT=ok (TILERT_LIBCUDA=fake_libcuda.so): one module load serves both kernels,
 *     each found by name in it and launched with its own grid (the full-size entry where N ==
 *     BLOCK, unless TILERT_FULL=0); unload and a later launch reload;
 *   otherwise (TILERT_LIBCUDA=/nonexistent): launches report the missing driver.
 * Exit status 0 = all checks passed. */
#define _POSIX_C_SOURCE 200809L /* setenv under -std=c99 */
#include "ln.h"
#include "ln_any.h"

#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

/* Tensors of one problem of M rows of N, at fake device addresses (the checks never read them;
 * neither does the fake driver). */
typedef struct Problem {
  tilec_tensor x, w, bias, y, mean, rstd, dy, dx, dw, db;
} Problem;

static Problem problem(int64_t m, int64_t n) {
  int64_t mn[2] = {m, n};
  unsigned long long at = 0x100000, step = 0x1000000;
  Problem p;
  p.x = tilec_tensor_contiguous(at += step, TILEC_F16, 2, mn);
  p.w = tilec_tensor_contiguous(at += step, TILEC_F16, 1, &n);
  p.bias = tilec_tensor_contiguous(at += step, TILEC_F16, 1, &n);
  p.y = tilec_tensor_contiguous(at += step, TILEC_F16, 2, mn);
  p.mean = tilec_tensor_contiguous(at += step, TILEC_F32, 1, &m);
  p.rstd = tilec_tensor_contiguous(at += step, TILEC_F32, 1, &m);
  p.dy = tilec_tensor_contiguous(at += step, TILEC_F16, 2, mn);
  p.dx = tilec_tensor_contiguous(at += step, TILEC_F16, 2, mn);
  p.dw = tilec_tensor_contiguous(at += step, TILEC_F32, 1, &n);
  p.db = tilec_tensor_contiguous(at += step, TILEC_F32, 1, &n);
  return p;
}

#define TRAIN(fn, p) fn(&(p).x, &(p).w, &(p).bias, &(p).y, &(p).mean, &(p).rstd, 1e-5f)
#define BACKWARD(fn, p) \
  fn(&(p).x, &(p).w, &(p).mean, &(p).rstd, &(p).dy, &(p).dx, &(p).dw, &(p).db)
#define LAUNCH_TRAIN(fn, p) \
  fn(NULL, &(p).x, &(p).w, &(p).bias, &(p).y, &(p).mean, &(p).rstd, 1e-5f)
#define LAUNCH_BACKWARD(fn, p) \
  fn(NULL, &(p).x, &(p).w, &(p).mean, &(p).rstd, &(p).dy, &(p).dx, &(p).dw, &(p).db)

static void contracts(void) {
  Problem p = problem(40, 1000), wide = problem(40, 3000), huge = problem(40, 5000);
  EXPECT(TRAIN(ln_layernorm_train_check, p), TILEC_OK, ln_error, "");
  EXPECT(BACKWARD(ln_layernorm_backward_check, p), TILEC_OK, ln_error, "");
  EXPECT(TRAIN(ln_layernorm_train_check, wide), TILEC_ERROR_REQUIREMENT, ln_error,
         "requirement 'N <= BLOCK' failed: N = 3000");
  EXPECT(BACKWARD(ln_layernorm_backward_check, wide), TILEC_ERROR_REQUIREMENT, ln_error,
         "requirement 'N <= BLOCK' failed: N = 3000");
  Problem bad = p;
  bad.mean.dtype = TILEC_F16;
  EXPECT(BACKWARD(ln_layernorm_backward_check, bad), TILEC_ERROR_INVALID_ARGUMENT, ln_error,
         "argument 'Mean' must be f32, got f16");
  bad = p;
  bad.rstd = problem(39, 1000).rstd;
  EXPECT(TRAIN(ln_layernorm_train_check, bad), TILEC_ERROR_SHAPE, ln_error, "dim M");
  /* linked kernel by kernel: the first build whose contract fits, else every one's reason */
  EXPECT(TRAIN(ln_any_layernorm_train_check, wide), TILEC_OK, ln_any_error, "");
  EXPECT(BACKWARD(ln_any_layernorm_backward_check, wide), TILEC_OK, ln_any_error, "");
  EXPECT(TRAIN(ln_any_layernorm_train_check, huge), TILEC_ERROR_NO_MATCH, ln_any_error,
         "no specialization of ln_any_layernorm_train fits: ln: requirement 'N <= BLOCK' failed: "
         "N = 5000; ln_4k: requirement 'N <= BLOCK' failed: N = 5000");
}

/* How many entries of the fake driver's log s start with entry ("load; " is not "unload; "). */
static int count(const char *s, const char *entry) {
  int n = 0;
  for (const char *p = strstr(s, entry); p; p = strstr(p + 1, entry))
    n += p == s || p[-1] == ' ';
  return n;
}

static int ends_with(const char *s, const char *tail) {
  size_t n = strlen(s), m = strlen(tail);
  return n >= m && !strcmp(s + n - m, tail);
}

static void fake_driver(void) {
  void *lib = dlopen(getenv("TILERT_LIBCUDA"), RTLD_NOW);
  void *sym = lib ? dlsym(lib, "fake_libcuda_log") : NULL;
  const char *(*calls)(void);
  CHECK(sym, "TILERT_LIBCUDA is not fake_libcuda.so");
  if (!sym)
    return;
  memcpy(&calls, &sym, sizeof calls);
  Problem p = problem(40, 1000), wide = problem(40, 3000);
  EXPECT(ln_load(), TILEC_OK, ln_error, "");
  EXPECT(LAUNCH_TRAIN(ln_layernorm_train_launch, p), TILEC_OK, ln_error, "");
  EXPECT(LAUNCH_BACKWARD(ln_layernorm_backward_launch, p), TILEC_OK, ln_error, "");
  /* one module with both kernels and their full-size entries, each found by name; grids
   * cdiv(M, ROWS) and cdiv(M, 16) */
  CHECK(!strcmp(calls(), "load; get layernorm_backward; get layernorm_backward__full; get layernorm_train; "
                         "get layernorm_train__full; launch layernorm_train 40x1x1 128; launch "
                         "layernorm_backward 3x1x1 128; "),
        "driver calls: %s", calls());
  /* N == BLOCK: the full-size entries (N pinned); TILERT_FULL=0: the kernels as written */
  Problem full = problem(40, 1024);
  EXPECT(LAUNCH_TRAIN(ln_layernorm_train_launch, full), TILEC_OK, ln_error, "");
  EXPECT(LAUNCH_BACKWARD(ln_layernorm_backward_launch, full), TILEC_OK, ln_error, "");
  CHECK(ends_with(calls(), "launch layernorm_train__full 40x1x1 128; launch layernorm_backward__full 3x1x1 128; "),
        "full-size launches: %s", calls());
  setenv("TILERT_FULL", "0", 1);
  EXPECT(LAUNCH_TRAIN(ln_layernorm_train_launch, full), TILEC_OK, ln_error, "");
  unsetenv("TILERT_FULL");
  CHECK(ends_with(calls(), "launch layernorm_train 40x1x1 128; "), "TILERT_FULL=0: %s", calls());
  /* the full-size entries take their tensors as 16-byte aligned (ln is compiled with
   * TILEC_FULL_ALIGNED=1): X one element past a boundary, or its rows 2056 bytes apart, runs
   * the kernel as written */
  Problem off = full;
  off.x.data += 2;
  EXPECT(LAUNCH_TRAIN(ln_layernorm_train_launch, off), TILEC_OK, ln_error, "");
  CHECK(ends_with(calls(), "launch layernorm_train 40x1x1 128; "), "X off its boundary: %s", calls());
  off = full;
  off.x.strides[0] = 1028;
  off.x.shape[0] = 39; /* the same bytes */
  off.y.shape[0] = off.mean.shape[0] = off.rstd.shape[0] = 39;
  EXPECT(LAUNCH_TRAIN(ln_layernorm_train_launch, off), TILEC_OK, ln_error, "");
  CHECK(ends_with(calls(), "launch layernorm_train 39x1x1 128; "), "rows off their boundary: %s", calls());
  EXPECT(LAUNCH_TRAIN(ln_layernorm_train_launch, wide), TILEC_ERROR_REQUIREMENT, ln_error,
         "N = 3000");
  ln_unload();
  EXPECT(LAUNCH_BACKWARD(ln_layernorm_backward_launch, p), TILEC_OK, ln_error, "");
  CHECK(count(calls(), "load; ") == 2 && count(calls(), "unload; ") == 1 &&
            ends_with(calls(), "unload; load; get layernorm_backward; get layernorm_backward__full; get "
                               "layernorm_train; get layernorm_train__full; launch layernorm_backward 3x1x1 128; "),
        "after unload: %s", calls());
  /* the linked entry point launches the build that fits, loading only its module; there
   * layernorm_backward (BLOCK = 4096, STAGES = 4) and its full-size entry need more than 48 KB of
   * shared memory, and only they get the opt-in */
  EXPECT(LAUNCH_TRAIN(ln_any_layernorm_train_launch, wide), TILEC_OK, ln_any_error, "");
  CHECK(count(calls(), "load; ") == 3 && count(calls(), "attr ") == 2 &&
            strstr(calls(), "get layernorm_train__full; launch layernorm_backward 3x1x1 128; load; get "
                            "layernorm_backward; attr layernorm_backward 8 ") &&
            ends_with(calls(), "; get layernorm_train__full; launch layernorm_train 40x1x1 128; "),
        "linked launch: %s", calls());
  ln_unload();
  ln_any_unload();
}

int main(void) {
  contracts();
  const char *jit = getenv("FAKE_LIBCUDA_JIT");
  if (jit && !strcmp(jit, "ok")) {
    fake_driver();
  } else {
    Problem p = problem(40, 1000);
    EXPECT(LAUNCH_TRAIN(ln_layernorm_train_launch, p), TILEC_ERROR_NO_DRIVER, ln_error,
           "no CUDA driver");
    EXPECT(LAUNCH_BACKWARD(ln_any_layernorm_backward_launch, p), TILEC_ERROR_NO_DRIVER,
           ln_any_error, "ln: no CUDA driver");
  }
  printf("bundle_test: %s (%d failures)\n", failures ? "FAILED" : "passed", failures);
  return failures != 0;
}
