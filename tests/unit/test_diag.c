/* test_diag.c — the diagnostics format: location, source line, caret and range, kinds, limit. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tilec.h"

typedef struct Out {
  char *buf;
  size_t len;
  FILE *f;
  Diag d;
  SourceFile src;
} Out;

static void open_out(Out *o, const char *text) {
  memset(o, 0, sizeof *o);
  o->src = (SourceFile){"dir/x.tile", text, strlen(text)};
  o->f = open_memstream(&o->buf, &o->len);
  diag_init(&o->d, &o->src, o->f);
}

static const char *close_out(Out *o) {
  fflush(o->f);
  return o->buf;
}

static void free_out(Out *o) {
  fclose(o->f);
  free(o->buf);
}

Test(diag, error_with_range) {
  Out o;
  open_out(&o, "line one\n  let abc = 1;\n");
  diag_report(&o.d, DIAG_ERROR, (SrcLoc){2, 7, 2, 10}, "bad name '%s'", "abc");
  cr_assert_str_eq(close_out(&o), "dir/x.tile:2:7: error: bad name 'abc'\n  let abc = 1;\n      ^~~\n");
  cr_assert_eq(o.d.nerrors, 1);
  free_out(&o);
}

Test(diag, single_column_and_kinds) {
  Out o;
  open_out(&o, "abc");
  diag_report(&o.d, DIAG_WARNING, (SrcLoc){1, 2, 1, 3}, "w");
  diag_report(&o.d, DIAG_NOTE, (SrcLoc){1, 1, 1, 1}, "n");
  cr_assert_str_eq(close_out(&o), "dir/x.tile:1:2: warning: w\nabc\n ^\ndir/x.tile:1:1: note: n\nabc\n^\n");
  cr_assert_eq(o.d.nerrors, 0);
  cr_assert_eq(o.d.nwarnings, 1);
  free_out(&o);
}

Test(diag, multi_line_range_gets_only_a_caret) {
  Out o;
  open_out(&o, "ab\ncd\n");
  diag_report(&o.d, DIAG_ERROR, (SrcLoc){1, 1, 2, 2}, "m");
  cr_assert_str_eq(close_out(&o), "dir/x.tile:1:1: error: m\nab\n^\n");
  free_out(&o);
}

Test(diag, tabs_are_kept_in_the_caret_line) {
  Out o;
  open_out(&o, "\tx =\ty;");
  diag_report(&o.d, DIAG_ERROR, (SrcLoc){1, 6, 1, 7}, "m");
  cr_assert_str_eq(close_out(&o), "dir/x.tile:1:6: error: m\n\tx =\ty;\n\t   \t^\n");
  free_out(&o);
}

Test(diag, location_past_end_of_line) {
  Out o;
  open_out(&o, "ab");
  diag_report(&o.d, DIAG_ERROR, (SrcLoc){1, 3, 1, 4}, "eof");
  cr_assert_str_eq(close_out(&o), "dir/x.tile:1:3: error: eof\nab\n  ^\n");
  free_out(&o);
}

Test(diag, plain_messages) {
  Out o;
  open_out(&o, "");
  diag_plain(&o.d, DIAG_ERROR, "cannot open '%s'", "f");
  cr_assert_str_eq(close_out(&o), "tilec: error: cannot open 'f'\n");
  cr_assert_eq(o.d.nerrors, 1);
  free_out(&o);
}

Test(diag, error_limit) {
  Out o;
  open_out(&o, "x\n");
  for (int i = 0; i < DIAG_MAX_ERRORS; i++)
    diag_report(&o.d, DIAG_ERROR, (SrcLoc){1, 1, 1, 2}, "e%d", i);
  cr_assert(!diag_too_many(&o.d));
  diag_report(&o.d, DIAG_ERROR, (SrcLoc){1, 1, 1, 2}, "one too many");
  diag_report(&o.d, DIAG_NOTE, (SrcLoc){1, 1, 1, 2}, "dropped note");
  diag_report(&o.d, DIAG_ERROR, (SrcLoc){1, 1, 1, 2}, "dropped");
  cr_assert(diag_too_many(&o.d));
  const char *s = close_out(&o);
  cr_assert(strstr(s, "e19\n"));
  cr_assert_null(strstr(s, "one too many"));
  cr_assert_null(strstr(s, "dropped"));
  const char *tail = "tilec: error: too many errors, stopping\n";
  cr_assert_str_eq(s + strlen(s) - strlen(tail), tail);
  free_out(&o);
}

Test(diag, werror_turns_warnings_into_errors) {
  Out o;
  open_out(&o, "x");
  o.d.werror = true;
  diag_report(&o.d, DIAG_WARNING, (SrcLoc){1, 1, 1, 2}, "w");
  cr_assert(strstr(close_out(&o), "error: w"));
  cr_assert_eq(o.d.nerrors, 1);
  free_out(&o);
}

Test(diag, color_only_when_asked) {
  Out o;
  open_out(&o, "x");
  diag_report(&o.d, DIAG_ERROR, (SrcLoc){1, 1, 1, 2}, "m");
  cr_assert_null(strchr(close_out(&o), '\033'));
  free_out(&o);
  open_out(&o, "x");
  o.d.color = true;
  diag_report(&o.d, DIAG_ERROR, (SrcLoc){1, 1, 1, 2}, "m");
  cr_assert_not_null(strchr(close_out(&o), '\033'));
  free_out(&o);
}

Test(diag, very_long_line_is_windowed) {
  static char text[5000];
  memset(text, 'a', sizeof text - 1);
  Out o;
  open_out(&o, text);
  diag_report(&o.d, DIAG_ERROR, (SrcLoc){1, 3000, 1, 3001}, "m");
  const char *s = close_out(&o);
  cr_assert_lt(strlen(s), 1000);
  cr_assert(strstr(s, "^\n"));
  free_out(&o);
}

/* A long line is cut to a 200-column window with "..." on the cut sides; the caret still sits
 * under the reported column (the "..." shifts it by 3). */
Test(diag, long_line_window_has_markers_and_a_true_caret) {
  static char text[5001];
  memset(text, '.', 5000);
  memcpy(text + 2999, "bad", 3); /* columns 3000..3002 */
  Out o;
  open_out(&o, text);
  diag_report(&o.d, DIAG_ERROR, (SrcLoc){1, 3000, 1, 3003}, "m");
  const char *s = close_out(&o);
  const char *src = strchr(s, '\n') + 1, *caret = strchr(src, '\n') + 1;
  size_t srclen = (size_t)(caret - src - 1);
  cr_assert_eq(srclen, 3 + 200 + 3, "%s", s);
  cr_assert(!strncmp(src, "...", 3) && !strncmp(src + srclen - 3, "...", 3), "%s", s);
  size_t at = strcspn(caret, "^");
  cr_assert(!strncmp(src + at, "bad", 3), "caret under '%.3s'", src + at);
  cr_assert(!strncmp(caret + at, "^~~\n", 4), "%s", caret);
  free_out(&o);
  /* near the start: no leading marker, the caret where it would be */
  open_out(&o, text);
  diag_report(&o.d, DIAG_ERROR, (SrcLoc){1, 5, 1, 6}, "m");
  s = close_out(&o);
  cr_assert(strstr(s, "\n" ".........."), "%s", s);
  cr_assert(strstr(s, "...\n    ^\n"), "%s", s);
  free_out(&o);
  /* a line of exactly the limit is printed whole */
  text[200] = 0;
  open_out(&o, text);
  diag_report(&o.d, DIAG_ERROR, (SrcLoc){1, 200, 1, 201}, "m");
  s = close_out(&o);
  src = strchr(s, '\n') + 1;
  cr_assert_eq(strcspn(src, "\n"), 200, "%s", s);
  free_out(&o);
}

/* Out of memory is an error like any other: "tilec: error: out of memory", exit status 1. */
Test(diag, arena_out_of_memory_exits_1_with_an_error) {
  int fds[2];
  cr_assert_eq(pipe(fds), 0);
  pid_t pid = fork();
  cr_assert_geq(pid, 0);
  if (pid == 0) {
    dup2(fds[1], 2);
    Arena *a = arena_new();
    arena_alloc(a, (size_t)1 << 62); /* no machine has 4 EiB */
    _exit(0);
  }
  close(fds[1]);
  char buf[256] = "";
  ssize_t n = read(fds[0], buf, sizeof buf - 1);
  buf[n > 0 ? n : 0] = 0;
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 1, "status %d", status);
  cr_assert_str_eq(buf, "tilec: error: out of memory\n");
}

/* The command line's `tilec run` checks (main.c), through the built tilec: skipped when absent. */
static int run_tilec(const char *args, char *out, size_t cap) {
  const char *b = getenv("B");
  char cmd[512];
  snprintf(cmd, sizeof cmd, "%s/tilec %s 2>&1", b && *b ? b : "build", args);
  FILE *p = popen(cmd, "r");
  size_t n = p ? fread(out, 1, cap - 1, p) : 0;
  out[n] = 0;
  int st = p ? pclose(p) : -1;
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

Test(diag, cli_run_option_errors) {
  const char *b = getenv("B");
  char path[256];
  snprintf(path, sizeof path, "%s/tilec", b && *b ? b : "build");
  if (access(path, X_OK) != 0)
    cr_skip_test("%s not built", path);
  char out[4096];
  cr_assert_eq(run_tilec("run dsl/examples/vadd.tile --shape N=4,N=5", out, sizeof out), 1, "%s", out);
  cr_assert(strstr(out, "tilec: error: --shape: 'N' is given more than once"), "%s", out);
  cr_assert_eq(run_tilec("run dsl/examples/vadd.tile --shape N=4 --shape N=4", out, sizeof out), 1, "%s", out);
  cr_assert(strstr(out, "'N' is given more than once"), "%s", out);
  cr_assert_eq(run_tilec("run dsl/examples/rmsnorm.tile --shape M=3 --shape N=17,eps=0.5", out, sizeof out), 0, "%s", out);
  cr_assert_eq(run_tilec("run dsl/examples/vadd.tile --shape N=4 -o /dev/null", out, sizeof out), 1, "%s", out);
  cr_assert(strstr(out, "'tilec run' writes no output file, so '-o' does not apply"), "%s", out);
  cr_assert_eq(run_tilec("run dsl/examples/vadd.tile --emit=tir --shape N=4", out, sizeof out), 1, "%s", out);
  cr_assert(strstr(out, "so '--emit' does not apply"), "%s", out);
  cr_assert_eq(run_tilec("--help", out, sizeof out), 0, "%s", out);
  cr_assert(strstr(out, "a scalar not given is 1.0"), "%s", out);
}
