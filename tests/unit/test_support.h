/* test_support.h — helpers shared by the unit test files (no tests of their own). */
#ifndef TILEC_TEST_SUPPORT_H
#define TILEC_TEST_SUPPORT_H

#include "tilec.h"

#include <stdio.h>

/* Assembles ptx with ptxas for arch when CUDA is installed (else returns): a Criterion assertion
 * fails on a ptxas error and on any register spill. */
void ptxas_assert_clean(const char *ptx, GpuArch arch);
/* Whether the compiler finds a ptxas (ptxas_find): tests of what ptxas decides skip without one. */
bool have_ptxas(void);
/* The same, and no entry has its wgmmas serialized (ptxas C7514 / C7515). */
void ptxas_assert_unserialized(const char *ptx, GpuArch arch);

/* Source text -> checked, folded TIR of its first kernel with -D defs ("NAME=VALUE", NULL-ended)
 * for arch; d reports to stderr. A Criterion assertion fails on any error. */
TirFunc *source_tir(Arena *a, const char *path, const char *text, const char **defs, GpuArch arch, Diag *d);
/* The same for the index-th kernel of the file (from 0). */
TirFunc *source_tir_kernel(Arena *a, const char *path, const char *text, const char **defs, GpuArch arch, int index,
                           Diag *d);
/* Its PTX (-O3) for arch; a Criterion assertion fails when the compile does. */
char *source_ptx(Arena *a, const char *path, const char *text, const char **defs, GpuArch arch);
/* source_ptx with environment setting knob=value for the compile only (a one-knob A/B). */
char *source_ptx_with(Arena *a, const char *path, const char *text, const char **defs, GpuArch arch,
                      const char *knob, const char *value);
/* source_tir with environment setting knob=value for the compile (value NULL: knob unset). */
TirFunc *source_tir_with(Arena *a, const char *path, const char *text, GpuArch arch, const char *knob,
                         const char *value, Diag *d);
/* source_ptx for sm_80 and sm_90a, each assembled by ptxas without spills. */
void source_assembles(const char *path, const char *text);
/* The text of dsl/examples/NAME.tile (tests run from the repository root). */
char *example_text(Arena *a, const char *name);
/* The text of the file at path (relative to the repository root; at most 64 KiB). */
char *file_text(Arena *a, const char *path);

/* How many times `what` occurs in s (overlapping occurrences counted). */
int occurrences(const char *s, const char *what);

/* The index of the first instruction of f at or after `from` with op `op`, or -1. */
int find_op(const TirFunc *f, int from, TirOp op);
/* The index of the k-th (from 0) instruction of f with op `op`, or -1. */
int nth_op(const TirFunc *f, TirOp op, int k);
/* How many instructions of f have op `op`. */
int count_op(const TirFunc *f, TirOp op);

/* How many loops tir_align moved to their row's boundary (one ROW_SHIFT each) in the kernel of
 * text (sm_90a); what names the case when it does not compile (a Criterion assertion). */
int aligned_loops_in(const char *what, const char *text);
/* The kernel of text (X: f16[rows, n] in, S: f32[rows] and Y: f16[rows, n] out, every tensor
 * `off` elements past a 16-byte boundary, `blocks` blocks) in the interpreter with tir_align's
 * `moved` loops moved and with none: S the same to 1e-5, Y equal (y_rel 0) or to y_rel of itself. */
void moved_windows_agree(const char *text, int rows, int n, int off, int64_t blocks, int moved, float y_rel);

/* tir_verify's message for f ("" when f is valid), its locations in from's file. */
char *tir_verify_message(Arena *a, const TirFunc *f, const Diag *from);

/* The module without its warp-specialized entry point (NAME__ws, sm_90a), or ptx itself when
 * it has none: the tests of the cp.async / wgmma protocols count instructions of entry NAME. */
char *ptx_without_ws(Arena *a, const char *ptx);
/* ptx without the entry point named name (the module header and the other entries kept). */
char *ptx_without_entry(Arena *a, const char *ptx, const char *name);
/* The text of entry point `name` (".visible .entry NAME(" to its closing brace), or NULL. */
char *ptx_entry(Arena *a, const char *ptx, const char *name);

#endif
