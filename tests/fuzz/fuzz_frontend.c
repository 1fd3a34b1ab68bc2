/* fuzz_frontend.c — libFuzzer target over the front end: parse + sema of arbitrary bytes.
 * Built by tests/check_fuzz.sh with clang -fsanitize=fuzzer,address. Any crash, sanitizer report,
 * leak or hang is a bug: every input must end in diagnostics or a checked program. */
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  Arena *a = arena_new();
  Diag d;
  AstProgram *prog = fuzz_front_end(a, data, size, &d);
  if (prog)
    ast_print(sink, prog);
  arena_free(a);
  return 0;
}
