/* cross_entropy_main.c — the host program of docs/tutorial.md ("Launching it from C"): the loss
 * of dsl/examples/cross_entropy.tile on random logits, launched through runtime/tilert.h and
 * checked against a float64 loop.
 *
 *   cross_entropy_main KERNEL.ptx KERNEL.tile [M N [ITERS]]
 *
 * On a GPU it loads KERNEL.ptx (made by `tilec KERNEL.tile --emit=ptx`) and, with ITERS > 0,
 * times ITERS launches with events. Without one it falls back to the CPU backend: KERNEL.tile is
 * compiled in-process by the compiler library (build/libtilec.a) and run by its interpreter; the
 * launch code is the same. Exit status 0 only when every loss matches. */
#include "ast.h"
#include "tilec.h"
#include "tilert.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(call)                                                                      \
  do {                                                                                   \
    tilert_status st_ = (call);                                                          \
    if (st_.code != TILERT_OK) {                                                         \
      fprintf(stderr, "%s: %s: %s\n", #call, tilert_code_name(st_.code), st_.message);   \
      return 1;                                                                          \
    }                                                                                    \
  } while (0)

static char *read_text(const char *path) {
  FILE *fp = fopen(path, "rb");
  if (!fp)
    return NULL;
  fseek(fp, 0, SEEK_END);
  long n = ftell(fp);
  fseek(fp, 0, SEEK_SET);
  char *buf = malloc((size_t)n + 1);
  if (buf && fread(buf, 1, (size_t)n, fp) != (size_t)n) {
    free(buf);
    buf = NULL;
  }
  if (buf)
    buf[n] = 0;
  fclose(fp);
  return buf;
}

/* CPU backend only: the kernel compiled from source, run by the interpreter (exec_cpu.c).
 * The arena owns the IR and must outlive the kernel. */
static tilert_status cpu_kernel(tilert_device *dev, Arena *a, const char *tile_path,
                                tilert_kernel **k) {
  tilert_status st = {.code = TILERT_ERROR_INVALID_ARGUMENT};
  char *text = read_text(tile_path);
  if (!text) {
    snprintf(st.message, sizeof st.message, "cannot read %s", tile_path);
    return st;
  }
  SourceFile *src = arena_alloc(a, sizeof *src);
  *src = (SourceFile){arena_strdup(a, tile_path), arena_strdup(a, text), strlen(text)};
  free(text);
  Diag d;
  diag_init(&d, src, stderr);
  AstProgram *p = parse_program(a, src, &d);
  TirFunc *f = p && sema_check(a, p, NULL, 0, ARCH_SM90A, &d) ? lower_tir(a, p->kernels, &d) : NULL;
  if (!f || !tir_fold_constants(f, &d) || !tir_eliminate_dead(f, &d) ||
      !tir_verify(f, &d, "passes")) {
    snprintf(st.message, sizeof st.message, "%s does not compile", tile_path);
    return st;
  }
  return exec_cpu_kernel(dev, a, f, k);
}

/* Random logits in [-4, 4) (f16), labels in [0, N) with every 8th row ignored (-100). */
static void make_inputs(int64_t M, int64_t N, uint16_t *x, int32_t *label) {
  uint64_t s = 0x9E3779B97F4A7C15ull;
  for (int64_t i = 0; i < M * N + M; i++) {
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
    double u = (double)(s >> 11) / 9007199254740992.0;
    if (i < M * N)
      x[i] = f32_to_f16_bits((float)(8 * u - 4));
    else
      label[i - M * N] = (i - M * N) % 8 == 7 ? -100 : (int32_t)(u * (double)N);
  }
}

/* Largest |loss - reference| relative to max(1, |reference|). */
static double max_error(int64_t M, int64_t N, const uint16_t *x, const int32_t *label,
                        const float *loss) {
  double worst = 0;
  for (int64_t m = 0; m < M; m++) {
    double want = 0;
    if (label[m] >= 0 && label[m] < N) {
      double mx = -INFINITY, sum = 0;
      for (int64_t j = 0; j < N; j++)
        mx = fmax(mx, f16_bits_to_f32(x[m * N + j]));
      for (int64_t j = 0; j < N; j++)
        sum += exp(f16_bits_to_f32(x[m * N + j]) - mx);
      want = mx + log(sum) - f16_bits_to_f32(x[m * N + label[m]]);
    }
    double err = fabs(loss[m] - want) / fmax(1.0, fabs(want));
    worst = isnan(err) ? INFINITY : fmax(worst, err);
  }
  return worst;
}

/* ITERS launches between two events: average time and effective bandwidth (2 M N + 10 M bytes). */
static int time_it(tilert_device *dev, tilert_kernel *k, const tilert_arg *args, int64_t M,
                   int64_t N, int iters) {
  tilert_event *t0, *t1;
  CHECK(tilert_event_create(dev, &t0));
  CHECK(tilert_event_create(dev, &t1));
  CHECK(tilert_launch(k, args, 3, NULL)); /* warm-up */
  CHECK(tilert_event_record(t0, NULL));
  for (int i = 0; i < iters; i++)
    CHECK(tilert_launch(k, args, 3, NULL));
  CHECK(tilert_event_record(t1, NULL));
  CHECK(tilert_synchronize(dev));
  float ms;
  CHECK(tilert_event_elapsed_ms(t0, t1, &ms));
  double us = 1e3 * ms / iters, bytes = 2.0 * (double)(M * N) + 10.0 * (double)M;
  printf("%d launches: %.1f us each, %.0f GB/s\n", iters, us, bytes / (us * 1e3));
  tilert_event_destroy(t0);
  tilert_event_destroy(t1);
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s KERNEL.ptx KERNEL.tile [M N [ITERS]]\n", argv[0]);
    return 2;
  }
  int64_t M = argc > 4 ? atoll(argv[3]) : 1000, N = argc > 4 ? atoll(argv[4]) : 32000;
  int iters = argc > 5 ? atoi(argv[5]) : 0;
  uint16_t *x = malloc(sizeof *x * (size_t)(M * N));
  int32_t *label = malloc(sizeof *label * (size_t)M);
  float *loss = malloc(sizeof *loss * (size_t)M);
  make_inputs(M, N, x, label);

  /* tutorial: launch begin */
  tilert_device *dev;
  CHECK(tilert_device_open(TILERT_BACKEND_AUTO, 0, &dev)); /* the GPU if any, else the CPU */
  printf("device: %s\n", tilert_device_name(dev));

  tilert_kernel *k = NULL;
  tilert_module *mod = NULL;
  Arena *arena = arena_new();
  if (tilert_device_backend(dev) == TILERT_BACKEND_GPU) {
    char *ptx = read_text(argv[1]); /* from `tilec cross_entropy.tile --emit=ptx` */
    if (!ptx) {
      fprintf(stderr, "cannot read %s\n", argv[1]);
      return 1;
    }
    CHECK(tilert_module_load_ptx(dev, ptx, &mod));
    CHECK(tilert_module_get_kernel(mod, "cross_entropy", &k));
    free(ptx);
  } else {
    CHECK(cpu_kernel(dev, arena, argv[2], &k)); /* the interpreter runs the .tile */
  }

  void *d_x, *d_label, *d_loss;
  CHECK(tilert_malloc(dev, sizeof *x * (size_t)(M * N), &d_x));
  CHECK(tilert_malloc(dev, sizeof *label * (size_t)M, &d_label));
  CHECK(tilert_malloc(dev, sizeof *loss * (size_t)M, &d_loss));
  CHECK(tilert_memcpy_htod(dev, d_x, x, sizeof *x * (size_t)(M * N)));
  CHECK(tilert_memcpy_htod(dev, d_label, label, sizeof *label * (size_t)M));

  /* Arguments in the kernel's order; dims M and N are bound from the shapes. */
  int64_t x_shape[2] = {M, N}, m_shape[1] = {M};
  tilert_arg args[3] = {
      tilert_arg_tensor(d_x, TILERT_F16, 2, x_shape),
      tilert_arg_tensor(d_label, TILERT_I32, 1, m_shape),
      tilert_arg_tensor(d_loss, TILERT_F32, 1, m_shape),
  };
  CHECK(tilert_launch(k, args, 3, NULL)); /* grid (M) comes from the metadata */
  CHECK(tilert_synchronize(dev));
  CHECK(tilert_memcpy_dtoh(dev, loss, d_loss, sizeof *loss * (size_t)M));
  /* tutorial: launch end */

  double err = max_error(M, N, x, label, loss);
  printf("M=%lld N=%lld: loss[0] = %.6f, loss[7] = %.6f (ignored), max rel error %.2e\n",
         (long long)M, (long long)N, loss[0], M > 7 ? loss[7] : 0.0f, err);
  int rc = err < 1e-5 ? 0 : 1;
  if (rc == 0 && iters > 0 && tilert_device_backend(dev) == TILERT_BACKEND_GPU)
    rc = time_it(dev, k, args, M, N, iters);

  tilert_free(dev, d_x), tilert_free(dev, d_label), tilert_free(dev, d_loss);
  if (mod)
    tilert_module_unload(mod);
  else
    tilert_kernel_destroy_cpu(k);
  tilert_device_close(dev);
  arena_free(arena);
  free(x), free(label), free(loss);
  puts(rc == 0 ? "ok" : "FAILED");
  return rc;
}
