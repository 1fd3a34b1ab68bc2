/* fuzz_frontend.c — libFuzzer target over the front end: parse + sema of arbitrary bytes.
 * Built by tests/check_fuzz.sh with clang -fsanitize=fuzzer,address. Any crash, sanitizer report,
 * leak or hang is a bug: every input must end in diagnostics or a checked program. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ast.h"

static FILE *sink;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc, (void)argv;
  sink = fopen("/dev/null", "w");
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  Arena *a = arena_new();
  char *text = arena_strndup(a, (const char *)data, size);
  SourceFile src = {"fuzz.tile", text, size};
  Diag d;
  diag_init(&d, &src, sink);
  AstProgram *prog = parse_program(a, &src, &d);
  if (prog && sema_check(a, prog, NULL, 0, ARCH_SM90A, &d))
    ast_print(sink, prog);
  arena_free(a);
  return 0;
}
