/* tilec_api.h — the compiler as a library (libtilec.so; installed by `make install`, found with
 * `pkg-config --cflags --libs tilec`). Source text in, PTX and the kernel's contract out, or a
 * kernel the runtime (tilert.h) runs on the CPU through the interpreter. The Python package
 * (python/tilec) is built on exactly these calls.
 *
 *   tilec_options o = {.arch = "sm_90a", .defines = (const char *[]){"BLOCK=4096"}, .ndefines = 1};
 *   tilec_result *r = tilec_compile(text, strlen(text), "softmax.tile", &o);
 *   if (!tilec_result_ok(r))
 *     fputs(tilec_result_diagnostics(r), stderr);     // as `tilec` prints them: file:line:col + caret
 *   else
 *     tilert_module_load_ptx(dev, tilec_result_ptx(r), &mod);
 *   tilec_result_free(r);
 *
 * Every call is thread-safe: each compilation has its own arena, diagnostics and LLVM context, so
 * several threads may compile at once. Nothing here exits or aborts on bad input. */
#ifndef TILEC_API_H
#define TILEC_API_H

#include <stddef.h>

#include "tilert.h"

#ifdef __cplusplus
extern "C" {
#endif

/* "0.1.0": the release, as `tilec --version` prints it. */
const char *tilec_version(void);
/* A digest of the compiler's sources and the LLVM it was built with: two libraries with the same
 * id give the same PTX for the same input. JIT caches put it in their keys. */
const char *tilec_build_id(void);

enum {
  TILEC_TARGET_PTX = 1, /* LLVM's NVPTX backend: tilec_result_ptx */
  TILEC_TARGET_CPU = 2, /* keep the tile IR for the interpreter: tilec_result_cpu_kernel */
};

typedef struct tilec_options {
  unsigned targets;             /* TILEC_TARGET_* bits; 0 = both */
  const char *arch;             /* "sm_80" ... "sm_90a"; NULL = "sm_90a" (as --arch) */
  int opt_level;                /* 0..3; -1 = the default (3) */
  const char *kernel;           /* the kernel to build in a file of several; NULL = the only one */
  const char *const *defines;   /* "NAME=VALUE", as -D */
  int ndefines;
  int werror;                   /* warnings are errors (-Werror) */
} tilec_options;

typedef struct tilec_result tilec_result;

/* Front end, tile IR and (for TILEC_TARGET_PTX) PTX for one kernel of `source` (len bytes, need
 * not be NUL-terminated; `filename` is only for messages). o may be NULL (defaults). Returns a
 * result whether or not the compile succeeded (NULL only when out of memory). */
tilec_result *tilec_compile(const char *source, size_t len, const char *filename,
                            const tilec_options *o);
int tilec_result_ok(const tilec_result *r);
/* Every error, warning and note, exactly as the command line prints them (no color); "" if none. */
const char *tilec_result_diagnostics(const tilec_result *r);
/* The PTX with its "// tilec:" contract (NULL on failure or without TILEC_TARGET_PTX). */
const char *tilec_result_ptx(const tilec_result *r);
/* The "// tilec:" contract alone (docs/architecture.md §7), for either target; NULL on failure.
 * The shared-memory line is the PTX's when there is PTX, else 0. */
const char *tilec_result_metadata(const tilec_result *r);
/* A CPU kernel (dev from tilert_device_open(TILERT_BACKEND_CPU, ...)) running this result's tile
 * IR; needs TILEC_TARGET_CPU. Destroy it (tilert_kernel_destroy_cpu) before freeing the result. */
tilert_status tilec_result_cpu_kernel(tilec_result *r, tilert_device *dev, tilert_kernel **out);
void tilec_result_free(tilec_result *r);

#ifdef __cplusplus
}
#endif
#endif
