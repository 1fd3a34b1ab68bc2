/* test_support.c — helpers shared by the unit test files (test_support.h). */
#include "test_support.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *PTXAS = "/usr/local/cuda/bin/ptxas";

void ptxas_assert_clean(const char *ptx, GpuArch arch) {
  if (access(PTXAS, X_OK) != 0)
    return;
  char path[] = "/tmp/tilec_test_XXXXXX";
  int fd = mkstemp(path);
  cr_assert_geq(fd, 0);
  FILE *f = fdopen(fd, "w");
  fputs(ptx, f);
  fclose(f);
  char cmd[512];
  snprintf(cmd, sizeof cmd, "%s -arch=%s -v %s -o /dev/null 2>&1", PTXAS, arch_name(arch), path);
  FILE *p = popen(cmd, "r");
  char line[512], all[8192] = "";
  while (fgets(line, sizeof line, p))
    if (strlen(all) + strlen(line) < sizeof all - 1)
      strcat(all, line);
  int rc = pclose(p);
  unlink(path);
  cr_assert_eq(rc, 0, "ptxas failed:\n%s", all);
  cr_assert(strstr(all, "0 bytes spill stores, 0 bytes spill loads"), "spills:\n%s", all);
}
