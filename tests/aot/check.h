/* check.h — the soft assertion of the C test programs in tests/aot/ (aot_test.c, bundle_test.c,
 * gpu_runtime.c): a false condition prints where and why, counts a failure, and the program
 * goes on. */
#ifndef TILEC_TESTS_CHECK_H
#define TILEC_TESTS_CHECK_H

#include <stdio.h>

static int failures;

#define CHECK(cond, ...)                                    \
  do {                                                      \
    if (!(cond)) {                                          \
      failures++;                                           \
      fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);  \
      fprintf(stderr, __VA_ARGS__);                         \
      fputc('\n', stderr);                                  \
    }                                                       \
  } while (0)

/* A call into C from tilec --emit=c: its result, and a substring of what errfn (its NAME_error)
 * then says. Needs the generated header and <string.h>. */
#define EXPECT(call, want, errfn, sub)                                                        \
  do {                                                                                       \
    tilec_result r_ = (call);                                                                \
    CHECK(r_ == (want), "%s gave %s, want %s: %s", #call, tilec_result_name(r_),             \
          tilec_result_name(want), errfn());                                                 \
    CHECK(strstr(errfn(), (sub)) != NULL, "%s: message '%s' lacks '%s'", #call, errfn(), sub); \
  } while (0)

#endif
