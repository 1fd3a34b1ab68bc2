/* fuzz_common.h — what every libFuzzer target of tests/fuzz/ shares: diagnostics go to a sink
 * (/dev/null), and the input bytes are parsed and checked as a .tile file. */
#ifndef TILEC_FUZZ_COMMON_H
#define TILEC_FUZZ_COMMON_H

#include <stdint.h>
#include <stdio.h>

#include "ast.h"

static FILE *sink;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc, (void)argv;
  sink = fopen("/dev/null", "w");
  return 0;
}

/* The input as a checked program (its source and diagnostics in the arena, d reporting to the
 * sink), or NULL when it has errors. */
static AstProgram *fuzz_front_end(Arena *a, const uint8_t *data, size_t size, Diag *d) {
  SourceFile *src = arena_alloc(a, sizeof *src);
  *src = (SourceFile){"fuzz.tile", arena_strndup(a, (const char *)data, size), size};
  diag_init(d, src, sink);
  AstProgram *prog = parse_program(a, src, d);
  return prog && sema_check(a, prog, NULL, 0, ARCH_SM90A, d) ? prog : NULL;
}

#endif
