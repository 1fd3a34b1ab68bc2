/* diag.c — diagnostics: `file:line:col: kind: message`, the source line, a caret line.
 *
 * Format (clang-like, no color unless d->color):
 *
 *   dsl/x.tile:7:12: error: undeclared name 'q'
 *     reg s = q * 2;
 *             ^
 *
 * The caret sits under the first column of the range and '~' under the rest of it when the range
 * stays on one line. Tabs in the source line are copied into the caret line so columns align.
 * After DIAG_MAX_ERRORS errors the next error prints "tilec: error: too many errors, stopping"
 * once and everything after it (errors, warnings, notes) is dropped. A warning format seen
 * DIAG_MAX_SAME_WARNINGS times prints one note that the rest of its kind are suppressed: 40,000
 * unused variables are 20 warnings, not 40,000. Lines are found through an index built once
 * (diag_index_lines), so the cost of a diagnostic does not grow with its line number. */
#include "tilec.h"

#include <stdbool.h>
#include <string.h>

/* ANSI colors, used only when d->color. */
#define C_BOLD "\033[1m"
#define C_RED "\033[1;31m"
#define C_MAGENTA "\033[1;35m"
#define C_CYAN "\033[1;36m"
#define C_GREEN "\033[1;32m"
#define C_RESET "\033[0m"

void diag_init(Diag *d, const SourceFile *file, FILE *out) {
  memset(d, 0, sizeof *d);
  d->file = file;
  d->out = out ? out : stderr;
}

static FILE *diag_out(const Diag *d) { return d->out ? d->out : stderr; }

static const char *kind_name(DiagKind k) {
  return k == DIAG_ERROR ? "error" : k == DIAG_WARNING ? "warning" : "note";
}

static const char *kind_color(DiagKind k) {
  return k == DIAG_ERROR ? C_RED : k == DIAG_WARNING ? C_MAGENTA : C_CYAN;
}

void diag_index_lines(Diag *d, Arena *a) {
  const SourceFile *f = d->file;
  if (!f || !f->text || d->line_start)
    return;
  int n = 1;
  for (const char *p = f->text, *end = p + f->len; (p = memchr(p, '\n', (size_t)(end - p))); p++)
    n++;
  size_t *start = arena_alloc(a, sizeof *start * (size_t)n);
  n = 1;
  for (const char *p = f->text, *end = p + f->len; (p = memchr(p, '\n', (size_t)(end - p))); p++)
    start[n++] = (size_t)(p + 1 - f->text);
  d->line_start = start;
  d->nlines = n;
}

/* The first byte of line `line` (1-based), or NULL past the end: from the index when there is
 * one, else by scanning (diagnostics built by hand in unit tests). */
static const char *line_begin(const Diag *d, int line) {
  const SourceFile *f = d->file;
  if (!f || !f->text || line < 1)
    return NULL;
  if (d->line_start)
    return line <= d->nlines ? f->text + d->line_start[line - 1] : NULL;
  const char *p = f->text, *end = f->text + f->len;
  for (int l = 1; l < line; l++) {
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    if (!nl)
      return NULL;
    p = nl + 1;
  }
  return p;
}

/* Finds line `line` (1-based) of the source; returns its start and sets *len (no newline). */
static const char *find_line(const Diag *d, int line, size_t *len) {
  const char *p = line_begin(d, line);
  if (!p)
    return NULL;
  const char *end = d->file->text + d->file->len;
  const char *nl = memchr(p, '\n', (size_t)(end - p));
  size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);
  if (n > 0 && p[n - 1] == '\r')
    n--;
  *len = n;
  return p;
}

const char *diag_span(const Diag *d, SrcLoc loc, size_t *len) {
  const char *first = line_begin(d, loc.line), *last = line_begin(d, loc.end_line);
  if (!first || !last || loc.col < 1 || loc.end_col < 1)
    return NULL;
  const char *end = d->file->text + d->file->len;
  const char *a = first + loc.col - 1, *b = last + loc.end_col - 1;
  if (a > end || b > end || b < a)
    return NULL;
  *len = (size_t)(b - a);
  return a;
}

/* Prints the source line and the caret line under loc. A line longer than DIAG_MAX_LINE bytes
 * is cut to a window of that many around the column, with "..." where text was cut, so a 1 MB
 * single-line file does not print 1 MB per diagnostic; the caret keeps pointing at the column. */
enum { DIAG_MAX_LINE = 200 };

static bool utf8_continuation(char c) { return ((unsigned char)c & 0xC0) == 0x80; }

static void print_caret(const Diag *d, SrcLoc loc) {
  size_t len;
  const char *line = find_line(d, loc.line, &len);
  if (!line)
    return;
  FILE *o = diag_out(d);
  size_t col = loc.col >= 1 ? (size_t)loc.col - 1 : 0;
  if (col > len)
    col = len;
  size_t start = 0, end = len;
  if (len > DIAG_MAX_LINE) {
    start = col > DIAG_MAX_LINE / 2 ? col - DIAG_MAX_LINE / 2 : 0;
    if (start + DIAG_MAX_LINE > len)
      start = len - DIAG_MAX_LINE;
    end = start + DIAG_MAX_LINE;
    while (start < col && utf8_continuation(line[start])) /* never cut a character in two */
      start++;
    while (end < len && end > col + 1 && utf8_continuation(line[end]))
      end--;
  }
  const char *pre = start > 0 ? "..." : "", *post = end < len ? "..." : "";
  fprintf(o, "%s%.*s%s\n", pre, (int)(end - start), line + start, post);
  size_t endcol = col + 1;
  if (loc.end_line == loc.line && loc.end_col - 1 > loc.col)
    endcol = (size_t)loc.end_col - 1;
  if (endcol > end && end > col)
    endcol = end;
  if (endcol <= col)
    endcol = col + 1;
  fputs(pre[0] ? "   " : "", o);
  for (size_t i = start; i < col; i++)
    fputc(line[i] == '\t' ? '\t' : ' ', o);
  if (d->color)
    fputs(C_GREEN, o);
  fputc('^', o);
  for (size_t i = col + 1; i < endcol; i++)
    fputc('~', o);
  if (d->color)
    fputs(C_RESET, o);
  fputc('\n', o);
}

/* Whether one more warning of format fmt may be printed; the first one over the limit prints
 * the note that says so. */
static bool warning_shown(Diag *d, const char *fmt) {
  int i = 0;
  while (i < d->nsame && d->same[i].fmt != fmt)
    i++;
  if (i == d->nsame) {
    if (d->nsame == (int)(sizeof d->same / sizeof d->same[0]))
      return true; /* more kinds than slots: shown uncapped */
    d->same[d->nsame++].fmt = fmt;
  }
  int n = ++d->same[i].n;
  if (n == DIAG_MAX_SAME_WARNINGS + 1) {
    const char *name = d->file && d->file->name ? d->file->name : "tilec";
    fprintf(diag_out(d), "%s%s: %snote:%s %d warnings like the ones above were shown; further ones "
            "are suppressed\n", d->color ? C_BOLD : "", name, d->color ? C_CYAN : "",
            d->color ? C_RESET : "", DIAG_MAX_SAME_WARNINGS);
  }
  return n <= DIAG_MAX_SAME_WARNINGS;
}

/* True when this diagnostic must be dropped; also emits the one "too many errors" line. */
static bool suppressed(Diag *d, DiagKind kind, const char *fmt) {
  if (kind == DIAG_NOTE)
    return d->dropping || d->nerrors > DIAG_MAX_ERRORS;
  if (kind == DIAG_ERROR) {
    d->nerrors++;
    if (d->nerrors == DIAG_MAX_ERRORS + 1) {
      FILE *o = diag_out(d);
      fprintf(o, "%stilec: %serror:%s too many errors, stopping\n", d->color ? C_BOLD : "",
              d->color ? C_RED : "", d->color ? C_RESET : "");
    }
    d->dropping = d->nerrors > DIAG_MAX_ERRORS;
    return d->dropping;
  }
  d->nwarnings++;
  d->dropping = d->nerrors > DIAG_MAX_ERRORS || !warning_shown(d, fmt);
  return d->dropping;
}

void diag_vreport(Diag *d, DiagKind kind, SrcLoc loc, const char *fmt, va_list ap) {
  if (kind == DIAG_WARNING && d->werror)
    kind = DIAG_ERROR;
  if (suppressed(d, kind, fmt))
    return;
  FILE *o = diag_out(d);
  const char *name = d->file && d->file->name ? d->file->name : "tilec";
  if (d->color)
    fputs(C_BOLD, o);
  if (loc.line > 0)
    fprintf(o, "%s:%d:%d: ", name, loc.line, loc.col > 0 ? loc.col : 1);
  else
    fprintf(o, "%s: ", name);
  fprintf(o, "%s%s:%s%s ", d->color ? kind_color(kind) : "", kind_name(kind),
          d->color ? C_RESET : "", d->color ? C_BOLD : "");
  vfprintf(o, fmt, ap);
  if (d->color)
    fputs(C_RESET, o);
  fputc('\n', o);
  if (loc.line > 0)
    print_caret(d, loc);
}

void diag_report(Diag *d, DiagKind kind, SrcLoc loc, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  diag_vreport(d, kind, loc, fmt, ap);
  va_end(ap);
}

void diag_plain(Diag *d, DiagKind kind, const char *fmt, ...) {
  if (kind == DIAG_WARNING && d->werror)
    kind = DIAG_ERROR;
  if (suppressed(d, kind, fmt))
    return;
  FILE *o = diag_out(d);
  va_list ap;
  va_start(ap, fmt);
  fprintf(o, "%stilec: %s%s:%s ", d->color ? C_BOLD : "", d->color ? kind_color(kind) : "",
          kind_name(kind), d->color ? C_RESET : "");
  vfprintf(o, fmt, ap);
  fputc('\n', o);
  va_end(ap);
}

/* True once the error limit was passed: callers stop checking and unwind. */
bool diag_too_many(const Diag *d) { return d->nerrors > DIAG_MAX_ERRORS; }
