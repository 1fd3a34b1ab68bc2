/* test_lexer.c — the scanner: tokens, values, locations (byte columns), comments, errors. */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "ast.h"
#include "parser.h"
#include "lexer.h"

typedef struct Lexed {
  int tok[64];
  YYSTYPE val[64];
  SrcLoc loc[64];
  int n;
  int nerrors;
  char diag_text[2048];
} Lexed;

/* Scans `text` to the end; records every token. */
static void lex_all(const char *text, Lexed *out) {
  Arena *a = arena_new();
  SourceFile src = {"t.tile", text, strlen(text)};
  char *buf = NULL;
  size_t len = 0;
  FILE *mem = open_memstream(&buf, &len);
  Diag d;
  diag_init(&d, &src, mem);
  ParseCtx ctx = {.arena = a, .diag = &d, .line = 1, .col = 1};
  yyscan_t sc;
  cr_assert_eq(yylex_init_extra(&ctx, &sc), 0);
  YY_BUFFER_STATE b = yy_scan_bytes(text, (int)strlen(text), sc);
  memset(out, 0, sizeof *out);
  for (;;) {
    YYSTYPE v;
    SrcLoc l;
    int t = yylex(&v, &l, sc);
    if (t == 0 || out->n == 64)
      break;
    out->tok[out->n] = t;
    out->val[out->n] = v;
    out->loc[out->n] = l;
    if (t == IDENT) /* the arena dies below: keep nothing pointing in it */
      out->val[out->n].str = NULL;
    out->n++;
  }
  yy_delete_buffer(b, sc);
  yylex_destroy(sc);
  fclose(mem);
  out->nerrors = ctx.nerrors;
  snprintf(out->diag_text, sizeof out->diag_text, "%s", buf ? buf : "");
  free(buf);
  arena_free(a);
}

Test(lexer, keywords_and_punctuation) {
  Lexed L;
  lex_all("kernel grid threads let reg shared out for in step pipeline if else require "
          "online_softmax block true false inf", &L);
  int want[] = {KW_KERNEL, KW_GRID, KW_THREADS, KW_LET, KW_REG, KW_SHARED, KW_OUT, KW_FOR, KW_IN,
                KW_STEP, KW_PIPELINE, KW_IF, KW_ELSE, KW_REQUIRE, KW_ONLINE_SOFTMAX, KW_BLOCK,
                KW_TRUE, KW_FALSE, KW_INF};
  cr_assert_eq(L.n, (int)(sizeof want / sizeof *want));
  for (int i = 0; i < L.n; i++)
    cr_assert_eq(L.tok[i], want[i], "token %d", i);
  cr_assert(isinf(L.val[18].num));
}

Test(lexer, operators) {
  Lexed L;
  lex_all(".. += -= *= /= == != <= >= && || + - * / % < > = ! ? : ; , . ( ) [ ] { }", &L);
  int want[] = {DOTDOT, ADD_ASSIGN, SUB_ASSIGN, MUL_ASSIGN, DIV_ASSIGN, EQ, NE, LE, GE, ANDAND, OROR,
                '+', '-', '*', '/', '%', '<', '>', '=', '!', '?', ':', ';', ',', '.', '(', ')',
                '[', ']', '{', '}'};
  cr_assert_eq(L.n, (int)(sizeof want / sizeof *want));
  for (int i = 0; i < L.n; i++)
    cr_assert_eq(L.tok[i], want[i], "token %d", i);
  cr_assert_eq(L.nerrors, 0);
}

Test(lexer, numbers) {
  Lexed L;
  lex_all("12 1.5 1e-6 2.5E3 0..N", &L);
  cr_assert_eq(L.n, 7);
  cr_assert_eq(L.tok[0], INT_LIT);
  cr_assert_eq(L.val[0].num, 12);
  cr_assert_eq(L.tok[1], FLOAT_LIT);
  cr_assert_eq(L.val[1].num, 1.5);
  cr_assert_eq(L.tok[2], FLOAT_LIT);
  cr_assert_float_eq(L.val[2].num, 1e-6, 1e-18);
  cr_assert_eq(L.val[3].num, 2500);
  /* `0..N` is a range, not the float `0.` */
  cr_assert_eq(L.tok[4], INT_LIT);
  cr_assert_eq(L.tok[5], DOTDOT);
  cr_assert_eq(L.tok[6], IDENT);
}

Test(lexer, locations_track_lines_and_columns) {
  Lexed L;
  lex_all("let  abc\n\t= 42; // comment\n/* multi\nline */ x", &L);
  cr_assert_eq(L.n, 6);
  cr_assert_eq(L.loc[0].line, 1);
  cr_assert_eq(L.loc[0].col, 1);
  cr_assert_eq(L.loc[0].end_col, 4);
  cr_assert_eq(L.loc[1].col, 6);
  cr_assert_eq(L.loc[1].end_col, 9);
  cr_assert_eq(L.loc[2].line, 2);
  cr_assert_eq(L.loc[2].col, 2); /* a tab is one byte */
  cr_assert_eq(L.loc[3].col, 4);
  cr_assert_eq(L.loc[5].line, 4);
  cr_assert_eq(L.loc[5].col, 9);
}

Test(lexer, identifiers_are_not_keywords) {
  Lexed L;
  lex_all("kernels _x reg2 f16 online_softmax2", &L);
  cr_assert_eq(L.n, 5);
  for (int i = 0; i < L.n; i++)
    cr_assert_eq(L.tok[i], IDENT);
}

Test(lexer, stray_character_is_reported_and_skipped) {
  Lexed L;
  lex_all("a @ b", &L);
  cr_assert_eq(L.n, 2);
  cr_assert_eq(L.nerrors, 1);
  cr_assert(strstr(L.diag_text, "t.tile:1:3: error: stray character in program: '@'"));
}

Test(lexer, nonprintable_byte_is_escaped) {
  Lexed L;
  lex_all("a \x01 b", &L);
  cr_assert_eq(L.nerrors, 1);
  cr_assert(strstr(L.diag_text, "'\\x01'"), "%s", L.diag_text);
}

Test(lexer, unterminated_comment) {
  Lexed L;
  lex_all("a /* never closed", &L);
  cr_assert_eq(L.n, 1);
  cr_assert_eq(L.nerrors, 1);
  cr_assert(strstr(L.diag_text, "1:3: error: unterminated comment"));
}

Test(lexer, oversized_integer) {
  Lexed L;
  lex_all("2147483647 2147483648", &L);
  cr_assert_eq(L.n, 2);
  cr_assert_eq(L.val[0].num, 2147483647.0);
  cr_assert_eq(L.nerrors, 1);
  cr_assert(strstr(L.diag_text, "integer literal too large"));
}

Test(lexer, malformed_number) {
  Lexed L;
  lex_all("12abc 1e", &L);
  cr_assert_eq(L.nerrors, 2);
  cr_assert(strstr(L.diag_text, "invalid number '12abc'"));
}
