/* gen.c — drives compiler/emit_c.c without the front end, for tests/check_aot.sh:
 *   gen emit BASE [--cubin] ARCH=FILE.ptx...   (like tilec --emit=c -o BASE, from ready PTX)
 *   gen link BASE HEADER.h...                  (like tilec --link) */
#include "tilec.h"

#include <stdlib.h>
#include <string.h>

static char *slurp(Arena *a, const char *path) {
  FILE *fp = fopen(path, "rb");
  if (!fp) {
    perror(path);
    return NULL;
  }
  fseek(fp, 0, SEEK_END);
  long n = ftell(fp);
  fseek(fp, 0, SEEK_SET);
  char *s = arena_alloc(a, (size_t)n + 1);
  size_t got = fread(s, 1, (size_t)n, fp);
  s[got] = '\0';
  fclose(fp);
  return s;
}

int main(int argc, char **argv) {
  if (argc < 4 || (strcmp(argv[1], "emit") && strcmp(argv[1], "link"))) {
    fprintf(stderr, "usage: gen emit BASE [--cubin] ARCH=FILE.ptx... | gen link BASE H...\n");
    return 2;
  }
  Arena *a = arena_new();
  Diag d;
  diag_init(&d, NULL, stderr);
  bool ok;
  if (!strcmp(argv[1], "link")) {
    ok = emit_c_link(a, argv[2], (const char *const *)argv + 3, argc - 3, &d);
  } else {
    const char *ptx[ARCH_COUNT];
    GpuArch archs[ARCH_COUNT];
    int n = 0;
    bool cubin = false;
    for (int i = 3; i < argc; i++) {
      char *eq = strchr(argv[i], '=');
      if (!strcmp(argv[i], "--cubin")) {
        cubin = true;
        continue;
      }
      if (!eq || n == ARCH_COUNT) {
        fprintf(stderr, "gen: bad argument '%s'\n", argv[i]);
        return 2;
      }
      *eq = '\0';
      if (!arch_from_name(argv[i], &archs[n]) || !(ptx[n] = slurp(a, eq + 1))) {
        fprintf(stderr, "gen: bad arch or file in '%s'\n", argv[i]);
        return 2;
      }
      n++;
    }
    ok = emit_c_files(a, argv[2], ptx, archs, n, cubin, &d);
  }
  arena_free(a);
  return ok ? 0 : 1;
}
