/* output.c — output files that appear whole or not at all.
 *
 * A regular file (or a new one) is written to a temporary next to it and renamed into place on
 * success, so a failed run never leaves a half-written output. A target that exists and is not a
 * regular file (/dev/null, a FIFO, a terminal) is written directly: renaming over it would
 * replace the device node. Standard output is "-". */
#include "tilec.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static mode_t output_mode(void) {
  mode_t mask = umask(0);
  umask(mask);
  return 0666 & ~mask;
}

bool out_open(Arena *a, OutFile *o, const char *path, Diag *d) {
  memset(o, 0, sizeof *o);
  if (!path || !strcmp(path, "-")) {
    o->fp = stdout;
    o->shown = "standard output";
    return true;
  }
  o->path = arena_strdup(a, path);
  o->shown = o->path;
  struct stat st;
  if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
    if (S_ISDIR(st.st_mode)) {
      diag_plain(d, DIAG_ERROR, "cannot write '%s': it is a directory", path);
      return false;
    }
    if (!(o->fp = fopen(path, "w"))) {
      diag_plain(d, DIAG_ERROR, "cannot write '%s': %s", path, strerror(errno));
      return false;
    }
    return true;
  }
  o->tmp = arena_printf(a, "%s.tmp.XXXXXX", path);
  int fd = mkstemp(o->tmp);
  if (fd < 0 || fchmod(fd, output_mode()) != 0 || !(o->fp = fdopen(fd, "w"))) {
    diag_plain(d, DIAG_ERROR, "cannot write '%s': %s", path, strerror(errno));
    if (fd >= 0) {
      close(fd);
      unlink(o->tmp);
    }
    return false;
  }
  return true;
}

/* Flushes and closes one file; false (errno set) when any write to it failed. */
static bool out_close(OutFile *o) {
  bool ok = fflush(o->fp) == 0 && !ferror(o->fp);
  int err = errno;
  if (o->fp != stdout)
    ok &= fclose(o->fp) == 0;
  o->fp = NULL;
  if (!ok && errno == 0)
    errno = err ? err : EIO;
  return ok;
}

bool out_commit(OutFile *files, int n, bool ok, Diag *d) {
  for (int i = 0; i < n; i++) {
    if (!files[i].fp)
      continue;
    errno = 0;
    if (!out_close(&files[i]) && ok) {
      diag_plain(d, DIAG_ERROR, "cannot write '%s': %s", files[i].shown, strerror(errno));
      ok = false;
    }
  }
  int renamed = 0;
  for (; ok && renamed < n; renamed++) {
    OutFile *o = &files[renamed];
    if (o->tmp && rename(o->tmp, o->path) != 0) {
      diag_plain(d, DIAG_ERROR, "cannot write '%s': %s", o->path, strerror(errno));
      ok = false;
      break;
    }
  }
  if (!ok) {
    /* all or nothing: undo the files this call already put in place */
    for (int i = 0; i < n; i++)
      if (files[i].tmp)
        unlink(i < renamed ? files[i].path : files[i].tmp);
  }
  return ok;
}

bool out_write_files(Arena *a, const char *const *paths, const char *const *texts,
                     const size_t *lens, int n, Diag *d) {
  OutFile *files = arena_alloc(a, sizeof *files * (size_t)(n ? n : 1));
  bool ok = true;
  int opened = 0;
  for (; opened < n && ok; opened++)
    ok = out_open(a, &files[opened], paths[opened], d);
  if (!ok)
    opened--;
  for (int i = 0; ok && i < n; i++)
    ok = fwrite(texts[i], 1, lens[i], files[i].fp) == lens[i];
  return out_commit(files, opened, ok, d) && ok;
}

bool out_make_dir(Arena *a, const char *path, Diag *d) {
  char *p = arena_strdup(a, path);
  for (char *c = p + 1;; c++) { /* each prefix ending before a '/', then the whole path */
    if (*c && *c != '/')
      continue;
    char saved = *c;
    *c = 0;
    struct stat st;
    if (stat(p, &st) != 0 && mkdir(p, 0777) != 0 && errno != EEXIST) {
      diag_plain(d, DIAG_ERROR, "cannot make directory '%s': %s", p, strerror(errno));
      return false;
    }
    if (stat(p, &st) != 0 || !S_ISDIR(st.st_mode)) {
      diag_plain(d, DIAG_ERROR, "cannot write into '%s': it is not a directory", p);
      return false;
    }
    if (!(*c = saved))
      return true;
  }
}
