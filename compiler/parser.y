/* parser.y — the .tile grammar (pure bison parser over the reentrant flex scanner).
 *
 * Builds the AST (ast.h) in the arena. Syntax errors are reported by yyreport_syntax_error in
 * `file:line:col: error: expected X before Y` form and counted in ParseCtx.nerrors (yyparse
 * returns 0 after a successful recovery). Recovery points: a statement (`error ';'`), the end of a
 * block (`'{' stmts error '}'`) and a whole kernel (`program error`, which skips to the next
 * `kernel`). The grammar is in docs/language.md (EBNF) — keep the two in step. */
%define api.pure full
%locations
%define parse.error custom
%define api.location.type {SrcLoc}
%expect 0
%param {yyscan_t scanner}

%code requires {
#include "ast.h"

#ifndef YY_TYPEDEF_YY_SCANNER_T
#define YY_TYPEDEF_YY_SCANNER_T
typedef void *yyscan_t;
#endif

/* State shared by the scanner and the parser (the scanner's extra data). */
typedef struct ParseCtx {
  Arena *arena;
  Diag *diag;
  AstProgram *prog;
  int nerrors;             /* syntax + lexical errors */
  int line, col;           /* scanner cursor */
  SrcLoc comment_start;    /* for "unterminated comment" */
  SrcLoc last_loc;         /* the most recent token (the lookahead at an error) */
  SrcLoc last_end;         /* just past the most recent token */
  SrcLoc prev_end;         /* just past the token before it */
  int last_tok, prev_tok;  /* the kinds of those two tokens (the lexer's numbering) */
  char last_text[48];      /* text of the most recent token (cut) */
  bool lex_eof_error;      /* the input ended early: inside a comment, or the scanner stopped
                              at too deep a nesting (already reported) */
  int nesting;             /* brackets ( [ { open at the scanner's cursor */
} ParseCtx;

/* Brackets nest at most this deep (the scanner counts them and stops with a located error); the
 * parser's stack (YYMAXDEPTH) is the backstop for chains that nest without brackets. */
enum { MAX_NESTING = 256 };

/* Growable arrays used while parsing. */
typedef struct ExprList { AstExpr **v; int n, cap; } ExprList;
typedef struct StmtList { AstStmt *head, *tail; } StmtList;
typedef struct SliceList { AstSliceItem *v; int n, cap; } SliceList;
typedef struct ParamList { AstParam *v; int n, cap; } ParamList;
typedef struct ArgList { AstArg *v; int n, cap; } ArgList;
/* online_softmax items: `rows = e`, `rescale = a`, or a bare name continuing the rescale list. */
typedef struct SmItem { const char *key; AstExpr *value; const char *name; SrcLoc loc; } SmItem;
typedef struct SmList { SmItem *v; int n, cap; } SmList;

#define YYLLOC_DEFAULT(Cur, Rhs, N)                                        \
  do {                                                                     \
    if (N) {                                                               \
      (Cur).line = YYRHSLOC(Rhs, 1).line;                                  \
      (Cur).col = YYRHSLOC(Rhs, 1).col;                                    \
      (Cur).end_line = YYRHSLOC(Rhs, N).end_line;                          \
      (Cur).end_col = YYRHSLOC(Rhs, N).end_col;                            \
    } else {                                                               \
      (Cur).line = (Cur).end_line = YYRHSLOC(Rhs, 0).end_line;             \
      (Cur).col = (Cur).end_col = YYRHSLOC(Rhs, 0).end_col;                \
    }                                                                      \
  } while (0)
}

%code {
#include <string.h>
#include "lexer.h"

/* Deep nesting ends in a clean error, never in stack exhaustion later in sema's recursion.
 * MAX_NESTING levels of brackets of any construct fit in it (a `for` level takes about ten
 * entries), so the scanner's exact limit is the one users meet. */
#define YYMAXDEPTH 4000
#define YYINITDEPTH 200

#define CTX (yyget_extra(scanner))
#define A (CTX->arena)

static void yyerror(SrcLoc *loc, yyscan_t scanner, const char *msg);

static void *grow_array(Arena *a, void *v, int n, int *cap, size_t elem) {
  if (n < *cap)
    return v;
  int ncap = *cap ? *cap * 2 : 4;
  void *p = arena_alloc(a, (size_t)ncap * elem);
  if (v)
    memcpy(p, v, (size_t)n * elem);
  *cap = ncap;
  return p;
}
#define PUSH(a, list, x)                                                        \
  do {                                                                          \
    (list).v = grow_array((a), (list).v, (list).n, &(list).cap, sizeof *(list).v); \
    (list).v[(list).n++] = (x);                                                 \
  } while (0)

/* Left-associative chains (1 + 1 + ... + 1) do not grow the parser stack, but they make the
 * tree deep, and sema and the printers recurse over it: chains of operators (binary, unary,
 * ?:) longer than this are an error. */
enum { MAX_EXPR_DEPTH = 1000 };

/* e's operator chain is one longer than its longest operand's. */
static void set_depth(AstExpr *e, int operand_depth, yyscan_t scanner) {
  e->depth = 1 + operand_depth;
  if (e->depth == MAX_EXPR_DEPTH + 1) { /* reported once, where the chain crosses the limit */
    ParseCtx *c = yyget_extra(scanner);
    c->nerrors++;
    diag_report(c->diag, DIAG_ERROR, e->loc, "expression too deeply nested (more than %d operators)",
                MAX_EXPR_DEPTH);
  }
}

static int max_depth(const AstExpr *x, const AstExpr *y) {
  return x->depth > y->depth ? x->depth : y->depth;
}

static AstExpr *mk_binary(Arena *a, AstOp op, AstExpr *l, AstExpr *r, SrcLoc loc, yyscan_t scanner) {
  AstExpr *e = ast_expr(a, AST_BINARY, loc);
  set_depth(e, max_depth(l, r), scanner);
  e->op = op;
  e->args = arena_alloc(a, 2 * sizeof *e->args);
  e->args[0] = l, e->args[1] = r;
  e->nargs = 2;
  return e;
}

static AstExpr *mk_unary(Arena *a, AstOp op, AstExpr *x, SrcLoc loc, yyscan_t scanner) {
  AstExpr *e = ast_expr(a, AST_UNARY, loc);
  set_depth(e, x->depth, scanner);
  e->op = op;
  e->args = arena_alloc(a, sizeof *e->args);
  e->args[0] = x;
  e->nargs = 1;
  return e;
}

static AstExpr *mk_lit(Arena *a, AstExprKind k, double v, SrcLoc loc) {
  AstExpr *e = ast_expr(a, k, loc);
  e->cval = v;
  return e;
}

static StmtList stmt_append(StmtList l, AstStmt *s) {
  if (!s)
    return l;
  if (l.tail)
    l.tail->next = s;
  else
    l.head = s;
  l.tail = s;
  return l;
}

static AstStmt *mk_block(Arena *a, StmtList l, SrcLoc loc) {
  AstStmt *s = ast_stmt(a, ST_BLOCK, loc);
  s->body = l.head;
  return s;
}

static AstStmt *mk_var(Arena *a, AstVarPlace p, const char *name, SrcLoc nloc, AstTypeSpec *t,
                       AstExpr *init, SrcLoc loc) {
  AstStmt *s = ast_stmt(a, ST_VAR, loc);
  s->place = p, s->name = name, s->name_loc = nloc, s->type = t, s->value = init;
  return s;
}

static AstStmt *mk_assign(Arena *a, const char *name, SrcLoc nloc, int op, AstExpr *v, SrcLoc loc) {
  AstStmt *s = ast_stmt(a, ST_ASSIGN, loc);
  s->name = name, s->name_loc = nloc, s->assign_op = op, s->value = v;
  return s;
}

static AstStmt *mk_softmax(Arena *a, yyscan_t scanner, const char *name, SrcLoc nloc, SmList items,
                           SrcLoc loc);
}

%union {
  double num;
  const char *str;
  AstExpr *expr;
  AstStmt *stmt;
  AstTypeSpec *type;
  ExprList elist;
  StmtList slist;
  SliceList slice;
  AstSliceItem item;
  ParamList plist;
  AstParam param;
  ArgList alist;
  AstArg arg;
  SmList smlist;
  SmItem smitem;
  int op;
}

%token TOK_EOF 0 "end of file"
%token KW_KERNEL "'kernel'" KW_GRID "'grid'" KW_THREADS "'threads'" KW_CLUSTER "'cluster'" KW_LET "'let'"
%token KW_REG "'reg'" KW_SHARED "'shared'" KW_OUT "'out'" KW_FOR "'for'" KW_IN "'in'"
%token KW_STEP "'step'" KW_PIPELINE "'pipeline'" KW_IF "'if'" KW_ELSE "'else'"
%token KW_REQUIRE "'require'" KW_ONLINE_SOFTMAX "'online_softmax'" KW_BLOCK "'block'"
%token <num> KW_TRUE "'true'" KW_FALSE "'false'" KW_INF "'inf'"
%token <str> IDENT "identifier"
%token <num> INT_LIT "integer literal" FLOAT_LIT "float literal"
%token DOTDOT "'..'" ADD_ASSIGN "'+='" SUB_ASSIGN "'-='" MUL_ASSIGN "'*='" DIV_ASSIGN "'/='"
%token EQ "'=='" NE "'!='" LE "'<='" GE "'>='" ANDAND "'&&'" OROR "'||'"

%right '?' ':'
%left OROR
%left ANDAND
%left EQ NE
%left '<' LE '>' GE
%left '+' '-'
%left '*' '/' '%'
%precedence UNARY

%type <expr> expr primary param_value slice_expr
%type <elist> expr_list expr_list_opt
%type <slist> stmts
%type <stmt> stmt block if_stmt else_opt var_stmt for_stmt
%type <type> type
%type <slice> slice_list
%type <item> slice_item
%type <plist> params_opt param_list
%type <param> param
%type <alist> args_opt arg_list
%type <arg> arg
%type <smlist> sm_items
%type <smitem> sm_item
%type <op> assign_op
%type <expr> step_opt pipeline_opt cluster_opt

%%

/* program: kernel* — an error anywhere outside a statement skips to the next `kernel` */
program
  : %empty
  | program kernel
  | program error
  ;

/* kernel: 'kernel' NAME ['<' params '>'] '(' args ')' 'grid' '(' exprs ')' ['cluster' '(' expr ')']
 *         'threads' '(' expr ')' block */
kernel
  : KW_KERNEL IDENT params_opt '(' args_opt ')' KW_GRID '(' expr_list ')' cluster_opt KW_THREADS '(' expr ')' block
    {
      AstKernel *k = arena_alloc(A, sizeof *k);
      k->name = $2; k->loc = @2;
      k->params = $3.v; k->nparams = $3.n;
      k->args = $5.v; k->nargs = $5.n;
      k->ngrid = $9.n > 3 ? 3 : $9.n;
      for (int i = 0; i < k->ngrid; i++)
        k->grid[i] = $9.v[i];
      if ($9.n > 3) {
        CTX->nerrors++;
        diag_report(CTX->diag, DIAG_ERROR, $9.v[3]->loc, "a grid has at most 3 dimensions, found %d", $9.n);
      }
      k->cluster = $11;
      k->threads = $14;
      k->body = $16;
      AstProgram *p = CTX->prog;
      AstKernel **tail = &p->kernels;
      while (*tail)
        tail = &(*tail)->next;
      *tail = k;
      p->nkernels++;
    }
  ;

/* cluster_opt: ['cluster' '(' expr ')']: that many blocks adjacent along x run as one cluster */
cluster_opt
  : %empty                        { $$ = NULL; }
  | KW_CLUSTER '(' expr ')'       { $$ = $3; }
  ;

/* params: '<' param (',' param)* '>';  param: NAME '=' value | NAME ':' KIND '=' value
 * (KIND is the contextual word `type`, checked by sema: `T: type = f16`) */
params_opt
  : %empty                  { $$ = (ParamList){0}; }
  | '<' '>'                 { $$ = (ParamList){0}; }
  | '<' param_list '>'      { $$ = $2; }
  ;
param_list
  : param                   { $$ = (ParamList){0}; PUSH(A, $$, $1); }
  | param_list ',' param    { $$ = $1; PUSH(A, $$, $3); }
  ;
param
  : IDENT '=' param_value   { $$ = (AstParam){.name = $1, .loc = @1, .init = $3}; }
  | IDENT ':' IDENT '=' param_value
    { $$ = (AstParam){.name = $1, .loc = @1, .init = $5, .kind_name = $3, .kind_loc = @3}; }
  ;
/* param value: a literal, a negated literal, or a parenthesized expression ('>' ends the list) */
param_value
  : INT_LIT                 { $$ = mk_lit(A, AST_INT, $1, @$); }
  | FLOAT_LIT               { $$ = mk_lit(A, AST_FLOAT, $1, @$); }
  | KW_INF                  { $$ = mk_lit(A, AST_FLOAT, $1, @$); }
  | KW_TRUE                 { $$ = mk_lit(A, AST_BOOL, $1, @$); }
  | KW_FALSE                { $$ = mk_lit(A, AST_BOOL, $1, @$); }
  | IDENT                   { $$ = ast_expr(A, AST_NAME, @$); $$->name = $1; }
  | '-' param_value         { $$ = mk_unary(A, OP_NEG, $2, @$, scanner); }
  | '(' expr ')'            { $$ = $2; }
  ;

/* args: arg (',' arg)*;  arg: NAME ':' ['out'] type ['=' value] */
args_opt
  : %empty                  { $$ = (ArgList){0}; }
  | arg_list                { $$ = $1; }
  | arg_list ','            { $$ = $1; }
  ;
arg_list
  : arg                     { $$ = (ArgList){0}; PUSH(A, $$, $1); }
  | arg_list ',' arg        { $$ = $1; PUSH(A, $$, $3); }
  ;
arg
  : IDENT ':' type          { $$ = (AstArg){.name = $1, .loc = @1, .type = $3}; }
  | IDENT ':' KW_OUT type   { $$ = (AstArg){.name = $1, .loc = @1, .type = $4}; $4->is_out = true; $$.is_out = true; }
  | IDENT ':' type '=' param_value
    { $$ = (AstArg){.name = $1, .loc = @1, .type = $3, .init = $5}; }
  | IDENT ':' KW_OUT type '=' param_value
    { $$ = (AstArg){.name = $1, .loc = @1, .type = $4, .init = $6}; $4->is_out = true; $$.is_out = true; }
  ;

/* type: ELEM | ELEM '[' exprs ']' */
type
  : IDENT
    {
      $$ = arena_alloc(A, sizeof *$$);
      $$->elem_name = $1; $$->loc = @1;
    }
  | IDENT '[' expr_list ']'
    {
      $$ = arena_alloc(A, sizeof *$$);
      $$->elem_name = $1; $$->loc = @$;
      $$->dims = $3.v; $$->ndims = $3.n;
    }
  ;

/* block: '{' stmt* '}' */
block
  : '{' stmts '}'           { $$ = mk_block(A, $2, @$); }
  | '{' stmts error '}'     { $$ = mk_block(A, $2, @$); }
  ;
stmts
  : %empty                  { $$ = (StmtList){0}; }
  | stmts stmt              { $$ = stmt_append($1, $2); }
  ;

/* statements */
stmt
  : var_stmt                { $$ = $1; }
  /* assignment: NAME op expr ';' */
  | IDENT assign_op expr ';' { $$ = mk_assign(A, $1, @1, $2, $3, @$); }
  /* store: TENSOR '[' slices ']' '=' expr ';' */
  | slice_expr '=' expr ';'
    {
      $$ = ast_stmt(A, ST_STORE, @$);
      $$->target = $1; $$->value = $3;
    }
  | for_stmt                { $$ = $1; }
  | if_stmt                 { $$ = $1; }
  /* 'require' expr ';' */
  | KW_REQUIRE expr ';'
    {
      $$ = ast_stmt(A, ST_REQUIRE, @$);
      $$->value = $2;
    }
  /* 'online_softmax' NAME '(' 'rows' '=' expr [',' 'rescale' '=' NAME (',' NAME)*] ')' ';' */
  | KW_ONLINE_SOFTMAX IDENT '(' sm_items ')' ';'
    { $$ = mk_softmax(A, scanner, $2, @2, $4, @$); }
  /* expression statement: expr ';' */
  | expr ';'
    {
      $$ = ast_stmt(A, ST_EXPR, @$);
      $$->value = $1;
    }
  | block                   { $$ = $1; }
  | ';'                     { $$ = NULL; }
  | error ';'               { $$ = NULL; }
  ;

/* 'let' NAME '=' expr ';' | ('reg'|'shared') NAME [':' type] '=' expr ';' */
var_stmt
  : KW_LET IDENT '=' expr ';'               { $$ = mk_var(A, VAR_LET, $2, @2, NULL, $4, @$); }
  | KW_LET IDENT ':' type '=' expr ';'      { $$ = mk_var(A, VAR_LET, $2, @2, $4, $6, @$); }
  | KW_REG IDENT '=' expr ';'               { $$ = mk_var(A, VAR_REG, $2, @2, NULL, $4, @$); }
  | KW_REG IDENT ':' type '=' expr ';'      { $$ = mk_var(A, VAR_REG, $2, @2, $4, $6, @$); }
  | KW_SHARED IDENT '=' expr ';'            { $$ = mk_var(A, VAR_SHARED, $2, @2, NULL, $4, @$); }
  | KW_SHARED IDENT ':' type '=' expr ';'   { $$ = mk_var(A, VAR_SHARED, $2, @2, $4, $6, @$); }
  ;

assign_op
  : '='                     { $$ = 0; }
  | ADD_ASSIGN              { $$ = OP_ADD; }
  | SUB_ASSIGN              { $$ = OP_SUB; }
  | MUL_ASSIGN              { $$ = OP_MUL; }
  | DIV_ASSIGN              { $$ = OP_DIV; }
  ;

/* 'for' NAME 'in' expr '..' expr ['step' expr] ['pipeline' expr] block */
for_stmt
  : KW_FOR IDENT KW_IN expr DOTDOT expr step_opt pipeline_opt block
    {
      $$ = ast_stmt(A, ST_FOR, @$);
      $$->name = $2; $$->name_loc = @2;
      $$->lo = $4; $$->hi = $6; $$->step = $7; $$->pipeline = $8;
      $$->body = $9;
    }
  ;
step_opt
  : %empty                  { $$ = NULL; }
  | KW_STEP expr            { $$ = $2; }
  ;
pipeline_opt
  : %empty                  { $$ = NULL; }
  | KW_PIPELINE expr        { $$ = $2; }
  ;

/* 'if' expr block ['else' (block | if)] */
if_stmt
  : KW_IF expr block else_opt
    {
      $$ = ast_stmt(A, ST_IF, @$);
      $$->value = $2; $$->body = $3; $$->els = $4;
    }
  ;
else_opt
  : %empty                  { $$ = NULL; }
  | KW_ELSE block           { $$ = $2; }
  | KW_ELSE if_stmt         { $$ = $2; }
  ;

/* online_softmax items: KEY '=' expr | NAME (continues `rescale`) */
sm_items
  : sm_item                 { $$ = (SmList){0}; PUSH(A, $$, $1); }
  | sm_items ',' sm_item    { $$ = $1; PUSH(A, $$, $3); }
  ;
sm_item
  : IDENT '=' expr          { $$ = (SmItem){.key = $1, .value = $3, .loc = @$}; }
  | IDENT                   { $$ = (SmItem){.name = $1, .loc = @$}; }
  ;

/* expressions, C precedence */
expr
  : primary                 { $$ = $1; }
  | expr '?' expr ':' expr
    {
      $$ = ast_expr(A, AST_TERNARY, @$);
      int d = max_depth($3, $5);
      set_depth($$, $1->depth > d ? $1->depth : d, scanner);
      $$->args = arena_alloc(A, 3 * sizeof *$$->args);
      $$->args[0] = $1; $$->args[1] = $3; $$->args[2] = $5;
      $$->nargs = 3;
    }
  | expr OROR expr          { $$ = mk_binary(A, OP_OR, $1, $3, @$, scanner); }
  | expr ANDAND expr        { $$ = mk_binary(A, OP_AND, $1, $3, @$, scanner); }
  | expr EQ expr            { $$ = mk_binary(A, OP_EQ, $1, $3, @$, scanner); }
  | expr NE expr            { $$ = mk_binary(A, OP_NE, $1, $3, @$, scanner); }
  | expr '<' expr           { $$ = mk_binary(A, OP_LT, $1, $3, @$, scanner); }
  | expr LE expr            { $$ = mk_binary(A, OP_LE, $1, $3, @$, scanner); }
  | expr '>' expr           { $$ = mk_binary(A, OP_GT, $1, $3, @$, scanner); }
  | expr GE expr            { $$ = mk_binary(A, OP_GE, $1, $3, @$, scanner); }
  | expr '+' expr           { $$ = mk_binary(A, OP_ADD, $1, $3, @$, scanner); }
  | expr '-' expr           { $$ = mk_binary(A, OP_SUB, $1, $3, @$, scanner); }
  | expr '*' expr           { $$ = mk_binary(A, OP_MUL, $1, $3, @$, scanner); }
  | expr '/' expr           { $$ = mk_binary(A, OP_DIV, $1, $3, @$, scanner); }
  | expr '%' expr           { $$ = mk_binary(A, OP_REM, $1, $3, @$, scanner); }
  | '-' expr %prec UNARY    { $$ = mk_unary(A, OP_NEG, $2, @$, scanner); }
  | '!' expr %prec UNARY    { $$ = mk_unary(A, OP_NOT, $2, @$, scanner); }
  ;

/* primary: literal | NAME | NAME '(' args ')' | slice | NAME '.' NAME ['(' args ')'] | block.x | '(' expr ')' */
primary
  : INT_LIT                 { $$ = mk_lit(A, AST_INT, $1, @$); }
  | FLOAT_LIT               { $$ = mk_lit(A, AST_FLOAT, $1, @$); }
  | KW_INF                  { $$ = mk_lit(A, AST_FLOAT, $1, @$); }
  | KW_TRUE                 { $$ = mk_lit(A, AST_BOOL, $1, @$); }
  | KW_FALSE                { $$ = mk_lit(A, AST_BOOL, $1, @$); }
  | IDENT                   { $$ = ast_expr(A, AST_NAME, @$); $$->name = $1; }
  | IDENT '(' expr_list_opt ')'
    {
      $$ = ast_expr(A, AST_CALL, @$);
      $$->name = $1; $$->name_loc = @1;
      $$->args = $3.v; $$->nargs = $3.n;
    }
  | slice_expr              { $$ = $1; }
  | IDENT '.' IDENT
    {
      $$ = ast_expr(A, AST_MEMBER, @$);
      $$->name = $1; $$->name_loc = @1;
      $$->field = $3; $$->field_loc = @3;
    }
  | IDENT '.' IDENT '(' expr_list_opt ')'
    {
      $$ = ast_expr(A, AST_METHOD, @$);
      $$->name = $1; $$->name_loc = @1;
      $$->field = $3; $$->field_loc = @3;
      $$->args = $5.v; $$->nargs = $5.n;
    }
  | KW_BLOCK '.' IDENT
    {
      $$ = ast_expr(A, AST_BLOCK_ID, @$);
      $$->field = $3; $$->field_loc = @3;
      $$->axis = -1; /* sema checks the name */
    }
  | '(' expr ')'            { $$ = $2; $$->loc = @$; }
  ;

/* slice: TENSOR '[' item (',' item)* ']' */
slice_expr
  : IDENT '[' slice_list ']'
    {
      $$ = ast_expr(A, AST_SLICE, @$);
      $$->name = $1; $$->name_loc = @1;
      $$->items = $3.v; $$->nitems = $3.n;
    }
  ;
slice_list
  : slice_item              { $$ = (SliceList){0}; PUSH(A, $$, $1); }
  | slice_list ',' slice_item { $$ = $1; PUSH(A, $$, $3); }
  ;
/* item: expr | expr ':' '+' expr | ':' */
slice_item
  : expr                    { $$ = (AstSliceItem){.kind = SLICE_INDEX, .start = $1, .loc = @$}; }
  | expr ':' '+' expr       { $$ = (AstSliceItem){.kind = SLICE_RANGE, .start = $1, .size_expr = $4, .loc = @$}; }
  | ':'                     { $$ = (AstSliceItem){.kind = SLICE_FULL, .loc = @$}; }
  ;

expr_list
  : expr                    { $$ = (ExprList){0}; PUSH(A, $$, $1); }
  | expr_list ',' expr      { $$ = $1; PUSH(A, $$, $3); }
  ;
expr_list_opt
  : %empty                  { $$ = (ExprList){0}; }
  | expr_list               { $$ = $1; }
  ;

%%

static AstStmt *mk_softmax(Arena *a, yyscan_t scanner, const char *name, SrcLoc nloc, SmList items,
                           SrcLoc loc) {
  ParseCtx *c = CTX;
  AstStmt *s = ast_stmt(a, ST_SOFTMAX, loc);
  s->name = name, s->name_loc = nloc;
  s->rescale_names = arena_alloc(a, (size_t)items.n * sizeof *s->rescale_names);
  s->rescale_locs = arena_alloc(a, (size_t)items.n * sizeof *s->rescale_locs);
  bool in_rescale = false;
  for (int i = 0; i < items.n; i++) {
    SmItem *it = &items.v[i];
    if (it->key && !strcmp(it->key, "rows") && !s->rows) {
      s->rows = it->value;
      in_rescale = false;
    } else if (it->key && !strcmp(it->key, "scale") && !s->softmax_scale) {
      s->softmax_scale = it->value;
      in_rescale = false;
    } else if (it->key && !strcmp(it->key, "rescale") && it->value->kind == AST_NAME) {
      s->rescale_names[s->nrescale] = it->value->name;
      s->rescale_locs[s->nrescale++] = it->value->loc;
      in_rescale = true;
    } else if (!it->key && in_rescale) {
      s->rescale_names[s->nrescale] = it->name;
      s->rescale_locs[s->nrescale++] = it->loc;
    } else if (it->key && !strcmp(it->key, "rescale")) {
      c->nerrors++;
      diag_report(c->diag, DIAG_ERROR, it->value->loc, "'rescale' takes names of reg accumulators");
    } else if (it->key && (!strcmp(it->key, "rows") || !strcmp(it->key, "scale"))) {
      c->nerrors++;
      diag_report(c->diag, DIAG_ERROR, it->loc, "'%s' given twice", it->key);
    } else if (it->key) {
      c->nerrors++;
      diag_report(c->diag, DIAG_ERROR, it->loc,
                  "unknown online_softmax option '%s' (expected 'rows', 'rescale' or 'scale')", it->key);
    } else {
      c->nerrors++;
      diag_report(c->diag, DIAG_ERROR, it->loc,
                  "expected 'rows = R' or 'rescale = ACC' in online_softmax, found '%s'", it->name);
    }
  }
  if (!s->rows && c->nerrors == 0) {
    c->nerrors++;
    diag_report(c->diag, DIAG_ERROR, nloc, "online_softmax '%s' needs 'rows = R'", name);
  }
  return s;
}

static void yyerror(SrcLoc *loc, yyscan_t scanner, const char *msg) {
  ParseCtx *c = CTX;
  c->nerrors++;
  if (!strcmp(msg, "memory exhausted"))
    diag_report(c->diag, DIAG_ERROR, *loc, "nesting too deep: the parser holds at most %d open "
                "constructs (operators, brackets, 'else if' branches and the statements around "
                "them)", YYMAXDEPTH);
  else
    diag_report(c->diag, DIAG_ERROR, *loc, "%s", msg);
}

/* A token's name for messages: bison's alias without its double quotes. */
static const char *tok_display(yysymbol_kind_t k, char *buf, size_t n) {
  const char *s = yysymbol_name(k);
  size_t len = strlen(s);
  if (len >= 2 && s[0] == '"' && s[len - 1] == '"') {
    snprintf(buf, n, "%.*s", (int)(len - 2), s + 1);
    return buf;
  }
  return s;
}

/* The lookahead, described for "before X": its text when it is a name or number. */
static const char *found_display(ParseCtx *c, yysymbol_kind_t k, char *buf, size_t n) {
  char tmp[64];
  if (k == YYSYMBOL_IDENT)
    snprintf(buf, n, "identifier '%s'", c->last_text);
  else if (k == YYSYMBOL_INT_LIT || k == YYSYMBOL_FLOAT_LIT)
    snprintf(buf, n, "'%s'", c->last_text);
  else
    snprintf(buf, n, "%s", tok_display(k, tmp, sizeof tmp));
  return buf;
}

static bool has_tok(const yysymbol_kind_t *v, int n, yysymbol_kind_t k) {
  for (int i = 0; i < n; i++)
    if (v[i] == k)
      return true;
  return false;
}

/* By name, for character tokens (their symbol numbers depend on the declaration order). */
static bool has_char_tok(const yysymbol_kind_t *v, int n, const char *name) {
  for (int i = 0; i < n; i++)
    if (!strcmp(yysymbol_name(v[i]), name))
      return true;
  return false;
}

/* Messages: "expected ';' before X" (placed just after the previous token), "expected
 * expression before X", "expected A, B or C before X", or "unexpected X". */
/* Python-style slices, the usual slip of a new user: `X[a : a + BN]` (an end, not a length) and
 * `X[r, :HD]` (a prefix): a note with the form the language has. */
static void slice_hint(ParseCtx *c, const yysymbol_kind_t *exp, int n, yysymbol_kind_t la, SrcLoc loc) {
  if (la == YYSYMBOL_DOTDOT && has_char_tok(exp, n, "']'"))
    diag_report(c->diag, DIAG_NOTE, loc, "a slice is written 'start : +size' ('X[r, 0 : +BLOCK]'); "
                "'a .. b' is the range of a for loop");
  else if (n == 1 && has_char_tok(exp, n, "'+'"))
    diag_report(c->diag, DIAG_NOTE, loc, "a range is written 'start : +size', with its length "
                "(e.g. 'X[i0 : +BLOCK]'), not 'start : end'");
  else if (c->prev_tok == ':' && has_char_tok(exp, n, "']'"))
    diag_report(c->diag, DIAG_NOTE, loc, "':' alone takes the whole dimension; the first n "
                "elements are '0 : +n'");
}

/* Forms other languages have and this one spells differently: `x ** 2`, `x.sum(0)`, `Y[r][c]`. */
static void foreign_hint(ParseCtx *c, yysymbol_kind_t la, SrcLoc loc) {
  const char *name = yysymbol_name(la);
  if (!strcmp(name, "'*'") && c->prev_tok == '*')
    diag_report(c->diag, DIAG_NOTE, loc, "there is no power operator: multiply ('x * x'), or "
                "write 'exp(y * log(x))' for x > 0");
  else if (!strcmp(name, "'.'") && (c->prev_tok == ')' || c->prev_tok == ']' || c->prev_tok == IDENT))
    diag_report(c->diag, DIAG_NOTE, loc, "values have no methods: pass the value to the function "
                "('sum(x, 0)', not 'x.sum(0)')");
  else if (!strcmp(name, "'['") && c->prev_tok == ']')
    diag_report(c->diag, DIAG_NOTE, loc, "index every dimension in one pair of brackets "
                "('Y[r, 0 : +BLOCK]', not 'Y[r][0 : +BLOCK]')");
}

static int yyreport_syntax_error(const yypcontext_t *ctx, yyscan_t scanner) {
  ParseCtx *c = CTX;
  c->nerrors++;
  if (c->lex_eof_error && yypcontext_token(ctx) == YYSYMBOL_YYEOF)
    return 0; /* "unterminated comment" already said it */
  enum { MAXEXP = 64 };
  yysymbol_kind_t exp[MAXEXP];
  int n = yypcontext_expected_tokens(ctx, exp, MAXEXP);
  if (n < 0)
    n = 0;
  yysymbol_kind_t la = yypcontext_token(ctx);
  SrcLoc loc = *yypcontext_location(ctx);
  char found[96], t1[64];
  found_display(c, la, found, sizeof found);
  bool expr_start = has_tok(exp, n, YYSYMBOL_INT_LIT) && has_tok(exp, n, YYSYMBOL_IDENT) &&
                    has_char_tok(exp, n, "'('");
  if (has_char_tok(exp, n, "';'")) { /* ';' */
    SrcLoc at = c->prev_end.line ? c->prev_end : loc;
    diag_report(c->diag, DIAG_ERROR, at, "expected ';' before %s", found);
    foreign_hint(c, la, loc);
  } else if (expr_start) {
    diag_report(c->diag, DIAG_ERROR, loc, "expected expression before %s", found);
    foreign_hint(c, la, loc);
  } else if (n > 4 && (has_char_tok(exp, n, "')'") || has_char_tok(exp, n, "']'"))) {
    /* inside brackets, after a complete operand: the closer is the likely omission */
    diag_report(c->diag, DIAG_ERROR, loc, "expected %s before %s",
                has_char_tok(exp, n, "')'") ? "')'" : "']'", found);
  } else if (n >= 1 && n <= 4) {
    char list[256] = "";
    size_t len = 0;
    for (int i = 0; i < n; i++) {
      const char *sep = i == 0 ? "" : i == n - 1 ? " or " : ", ";
      len += (size_t)snprintf(list + len, sizeof list - len, "%s%s", sep,
                              tok_display(exp[i], t1, sizeof t1));
      if (len >= sizeof list)
        break;
    }
    diag_report(c->diag, DIAG_ERROR, loc, "expected %s before %s", list, found);
    slice_hint(c, exp, n, la, loc);
  } else {
    diag_report(c->diag, DIAG_ERROR, loc, "unexpected %s", found);
  }
  return 0;
}

AstProgram *parse_program(Arena *a, const SourceFile *src, Diag *d) {
  ParseCtx ctx = {.arena = a, .diag = d, .line = 1, .col = 1};
  ctx.prog = arena_alloc(a, sizeof *ctx.prog);
  ctx.prog->file = src;
  yyscan_t scanner;
  if (yylex_init_extra(&ctx, &scanner)) {
    diag_plain(d, DIAG_ERROR, "cannot start the scanner");
    return NULL;
  }
  diag_index_lines(d, a);
  YY_BUFFER_STATE buf = yy_scan_bytes(src->text, (int)src->len, scanner);
  int rc = yyparse(scanner);
  yy_delete_buffer(buf, scanner);
  yylex_destroy(scanner);
  if (rc != 0 || ctx.nerrors > 0)
    return NULL;
  return ctx.prog;
}
