/* api_test.c — the installed compile API (tilec_api.h + libtilec.so, found with pkg-config, as a
 * user builds against it): diagnostics as the command line prints them, PTX with its contract,
 * a CPU kernel run through the runtime, and compiles in several threads at once giving the PTX
 * of one. tests/check_python.sh builds it against `make install PREFIX=<tmp>`. */
#include <tilec_api.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures;
#define CHECK(cond, ...)                                                     \
  do {                                                                       \
    if (!(cond)) {                                                           \
      fprintf(stderr, "api_test: FAIL line %d: %s: ", __LINE__, #cond);      \
      fprintf(stderr, __VA_ARGS__);                                          \
      fputc('\n', stderr);                                                   \
      failures++;                                                            \
    }                                                                        \
  } while (0)

static const char bad[] = "kernel k(X: f32[N]) grid (1) threads (32) {\n  let z = q;\n}\n";
static const char good[] =
    "kernel twice<B = 64>(X: f32[N], Y: out f32[N], s: f32) grid (cdiv(N, B)) threads (32) {\n"
    "  Y[block.x * B : +B] = X[block.x * B : +B] * s;\n}\n";

static void test_diagnostics(void) {
  tilec_result *r = tilec_compile(bad, sizeof bad - 1, "bad.tile", NULL);
  CHECK(!tilec_result_ok(r), "a bad kernel compiled");
  const char *want = "bad.tile:2:11: error: undeclared name 'q'\n  let z = q;\n          ^\n";
  CHECK(!strcmp(tilec_result_diagnostics(r), want), "[%s]", tilec_result_diagnostics(r));
  CHECK(!tilec_result_ptx(r) && !tilec_result_metadata(r), "outputs of a failed compile");
  tilec_result_free(r);
  tilec_options o = {.arch = "sm_70", .opt_level = -1};
  r = tilec_compile(good, sizeof good - 1, "good.tile", &o);
  CHECK(strstr(tilec_result_diagnostics(r), "unknown architecture 'sm_70'"), "[%s]",
        tilec_result_diagnostics(r));
  tilec_result_free(r);
}

static void test_ptx_and_cpu(void) {
  const char *defs[] = {"B=128"};
  tilec_options o = {.arch = "sm_80", .opt_level = -1, .defines = defs, .ndefines = 1};
  tilec_result *r = tilec_compile(good, sizeof good - 1, "good.tile", &o);
  CHECK(tilec_result_ok(r), "%s", tilec_result_diagnostics(r));
  const char *ptx = tilec_result_ptx(r);
  CHECK(ptx && strstr(ptx, ".entry twice") && strstr(ptx, ".target sm_80"), "no kernel in PTX");
  CHECK(ptx && strstr(ptx, "// tilec: grid N 128 cdiv"), "no contract in the PTX");
  CHECK(strstr(tilec_result_metadata(r), "// tilec: param B = 128"), "metadata");
  tilert_device *dev = NULL;
  tilert_kernel *k = NULL;
  tilert_status st = tilert_device_open(TILERT_BACKEND_CPU, 0, &dev);
  if (!st.code)
    st = tilec_result_cpu_kernel(r, dev, &k);
  CHECK(!st.code, "%s", st.message);
  float x[300], y[300];
  for (int i = 0; i < 300; i++)
    x[i] = (float)i, y[i] = -1;
  int64_t n = 300;
  tilert_arg args[3] = {tilert_arg_tensor(x, TILERT_F32, 1, &n), tilert_arg_tensor(y, TILERT_F32, 1, &n),
                        tilert_arg_scalar(2.5)};
  if (!st.code)
    st = tilert_launch(k, args, 3, NULL);
  CHECK(!st.code, "%s", st.message);
  for (int i = 0; i < 300 && !st.code; i++)
    CHECK(y[i] == 2.5f * (float)i, "y[%d] = %g", i, y[i]);
  tilert_kernel_destroy_cpu(k);
  tilert_device_close(dev);
  tilec_result_free(r);
}

enum { THREADS = 4 };
static char *thread_ptx[THREADS];

static void *compile_thread(void *arg) {
  tilec_options o = {.arch = "sm_90a", .opt_level = -1, .targets = TILEC_TARGET_PTX};
  tilec_result *r = tilec_compile(good, sizeof good - 1, "good.tile", &o);
  thread_ptx[(long)arg] = tilec_result_ok(r) ? strdup(tilec_result_ptx(r)) : NULL;
  tilec_result_free(r);
  return NULL;
}

static void test_threads(void) {
  pthread_t t[THREADS];
  for (long i = 0; i < THREADS; i++)
    pthread_create(&t[i], NULL, compile_thread, (void *)i);
  for (int i = 0; i < THREADS; i++)
    pthread_join(t[i], NULL);
  for (int i = 0; i < THREADS; i++)
    CHECK(thread_ptx[i] && !strcmp(thread_ptx[i], thread_ptx[0]), "thread %d's PTX differs", i);
  for (int i = 0; i < THREADS; i++)
    free(thread_ptx[i]);
}

int main(void) {
  CHECK(*tilec_version() && strlen(tilec_build_id()) == 16, "version %s id %s", tilec_version(),
        tilec_build_id());
  test_threads(); /* first: the LLVM targets are initialized by several threads at once */
  test_diagnostics();
  test_ptx_and_cpu();
  printf("api_test: %s\n", failures ? "FAILED" : "passed");
  return failures != 0;
}
