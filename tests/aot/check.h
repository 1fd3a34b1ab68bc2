/* check.h — the soft assertion of the C test programs in tests/aot/ (aot_test.c, gpu_runtime.c):
 * a false condition prints where and why, counts a failure, and the program goes on. */
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

#endif
