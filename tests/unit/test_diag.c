/* test_diag.c — the diagnostics format: location, source line, caret and range, kinds, limit. */
#include <criterion/criterion.h>
#include <string.h>

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
