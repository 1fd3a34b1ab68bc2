/* test_support.h — helpers shared by the unit test files (no tests of their own). */
#ifndef TILEC_TEST_SUPPORT_H
#define TILEC_TEST_SUPPORT_H

#include "tilec.h"

/* Assembles ptx with ptxas for arch when CUDA is installed (else returns): a Criterion assertion
 * fails on a ptxas error and on any register spill. */
void ptxas_assert_clean(const char *ptx, GpuArch arch);

#endif
