/* ast.h — the abstract syntax tree of a .tile program and the front-end entry points.
 *
 * Produced by parse_program() (parser.y + lexer.l), checked and annotated in place by
 * sema_check() (sema.c), consumed by lower_tir.c. All nodes live in the compilation's arena.
 *
 * ============================ THE CONTRACT (after sema_check returned true) =====================
 *
 * Kernels. sema_check specializes every kernel: AstKernel.params[i].value holds the final value
 * (default, or the -D override); a type parameter (is_type) holds its element type in `elem`
 * instead, and every type written with its name (T[M, N], reg x: T[...]) is resolved to that
 * element type: AstArg.elem, AstDecl.ty and AstExpr.ty are always concrete, AstKernel.dims lists every symbolic dimension in order of first
 * appearance in the argument list, with `pinned`/`value` set when the dim is a parameter name (D in
 * attention) or named by a -D. AstArg.dims[] index AstKernel.dims. grid[0..ngrid-1] and the
 * `require` conditions are expressions over dims and params only (params already folded: such a
 * NAME node has is_const set); launch_grid and launch_requires hold them as the runtime's RPN,
 * within the limits of runtime/tilert.h (TILERT_MAX_*, checked with located errors, like the
 * argument, dim and require counts and name lengths). threads_value is the folded thread count
 * (a power of two, 32..1024). smem_bytes is the sum of the kernel's `shared` tiles.
 *
 * Expressions. Every AstExpr has:
 *   - ty: TileType (elem, rank, dims — all compile-time; ty.place and ty.layout are unused).
 *     rank 0 = scalar.
 *   - is_const/cval: the value is known at compile time (literals, params, pinned dims, and any
 *     operator/builtin over constants is folded). Integers are exact in the double. For a constant
 *     node, ty.elem is its FINAL element type (see "constants adapt" below), so lower_tir may emit
 *     TIR_CONST(cval) of type ty for any constant node without looking at its children.
 *     A constant is always a scalar (rank 0); cval is already rounded to ty.elem.
 *   - Constants adapt ("untyped constants", as in Go): a literal or a parameter (or a fold of only
 *     those) takes the element type of the other operand of a binary operator / where / maximum /
 *     minimum / assignment / store / declared type. Without context: int -> i32, float -> f32,
 *     bool -> bool. A float constant never adapts to i32 or bool (error). Sema writes the
 *     adopted type into ty.
 *   - No other implicit element conversion exists: operands of AST_BINARY (and where/maximum/
 *     minimum) have the same element type after constants adapted; explicit casts are
 *     AST_CALL with BI_TO_F32/BI_TO_F16/BI_TO_BF16/BI_TO_I32. The generic cast `to(T, x)` (BI_TO)
 *     never survives sema: it is rewritten in place into the concrete one (builtin, name, and
 *     args = {x}, nargs = 1), so nothing after sema sees BI_TO.
 *   - Broadcasting (numpy: align trailing dims, a dim of 1 or a missing leading dim stretches) is
 *     implicit and resolved by sema: for AST_BINARY, AST_TERNARY (where / ?: share this), and
 *     the element-wise builtins of two or three operands, `opnd_ty` holds the common type every
 *     operand is brought to BEFORE the operation (element type of the operands, broadcast shape).
 *     lower_tir emits, per operand, TIR_BCAST from the operand's ty to opnd_ty when the shapes
 *     differ (rank may grow: missing leading dims are size 1). For comparisons ty.elem is bool
 *     while opnd_ty.elem is the operands' type. For `where(c, a, b)`, c is broadcast to
 *     opnd_ty's shape with elem bool; a and b to opnd_ty.
 *   - Statements that write (ST_VAR with an initializer, ST_ASSIGN, ST_STORE) do the same with
 *     their target type: `value` is broadcast from value->ty to the target shape; the element
 *     types already agree (constants adapted), except ST_VAR with an explicit type, where a
 *     constant initializer has ty.elem == the declared elem already.
 *
 * Names. AST_NAME points at its AstDecl (decl): a compile-time parameter, a dim, a scalar
 * argument, a tensor argument, a variable (let/reg/shared), a loop variable or an
 * online_softmax state. Declarations are unique per kernel (AstDecl.id = 0..ndecls-1) so lower_tir
 * can keep a side table of TIR registers indexed by id. A tensor argument may only appear as the
 * base of AST_SLICE (or of ST_STORE's target); sema rejects it elsewhere.
 *
 * Slices. AST_SLICE: base (a DECL_TENSOR_ARG decl) and one AstSliceItem per tensor dimension
 * (arity == tensor rank, checked): SLICE_INDEX (scalar i32 `start`, drops the dim), SLICE_RANGE
 * (`start : +size`, size folded into `size`, keeps the dim), SLICE_FULL (`:` on a pinned dim,
 * size = the pinned value, start is NULL meaning 0). ty = the tile read (elem = the tensor's).
 * fill (for `fill(T[...], v)`: BI_FILL call whose args[0] is the slice) is in the call node.
 * The base may also be a `reg`/`let` tile (DECL_VAR of rank >= 1): then every start is a constant
 * (is_const, cval) and the box lies inside the tile; SLICE_FULL is the whole axis.
 *
 * Atomics. `atomic_add(T[...], v);` / `atomic_max(...)` exist only as the whole of an ST_EXPR:
 * an AST_CALL whose args[0] is the AST_SLICE written (an `out` tensor) and args[1] the value,
 * checked like ST_STORE's target and value (broadcast from args[1]->ty to the slice's ty, element
 * types equal). The call's ty is the slice's; it has no value.
 *
 * Builtins. AST_CALL has `builtin` (AstBuiltin) and args; for reductions, squeeze and
 * expand_dims `axis` holds the folded axis (args[1] is its constant expression). A reduction's
 * ty lacks the reduced axis unless `keep` (written `sum(x, 1, keep)`; sema drops the third
 * argument, so nargs is 2). AST_MEMBER is `st.max` / `st.sum` (member) on a DECL_SOFTMAX; AST_METHOD is `st.update(x)` / `st.finish(acc)` with one argument.
 * AST_BLOCK_ID is block.x/y/z (axis 0/1/2), an i32 scalar.
 */
#ifndef TILEC_AST_H
#define TILEC_AST_H

#include "tilec.h"

/* ------------------------------------------------------------------ declarations */

typedef enum {
  DECL_PARAM,      /* compile-time parameter <BM = 64>; index = position in kernel params */
  DECL_TYPE_PARAM, /* compile-time element type <T: type = f16>; ty.elem = its value; index = as
                      DECL_PARAM. It names an element type (T[M, N], to(T, x)), never a value */
  DECL_DIM,        /* symbolic shape dim; index = position in kernel dims */
  DECL_SCALAR_ARG, /* scalar kernel argument (eps: f32); index = position in kernel args */
  DECL_TENSOR_ARG, /* tensor kernel argument; index = position in kernel args */
  DECL_VAR,        /* let / reg / shared variable; `place` says which */
  DECL_LOOP,       /* for-loop induction variable, i32 scalar, read-only */
  DECL_SOFTMAX,    /* online_softmax state */
} AstDeclKind;

typedef enum { VAR_LET, VAR_REG, VAR_SHARED } AstVarPlace;

struct AstStmt;

typedef struct AstDecl {
  AstDeclKind kind;
  const char *name;
  SrcLoc loc;              /* the name at its declaration */
  int id;                  /* unique within the kernel, 0..ndecls-1 */
  int index;               /* see AstDeclKind */
  AstVarPlace place;       /* DECL_VAR */
  TileType ty;             /* type of a value of this name (tensor args: elem only, rank 0) */
  bool is_const;           /* params, pinned dims, lets of constants */
  bool untyped;            /* a constant that adapts its element type (params, lets of them) */
  double cval;
  struct AstStmt *stmt;    /* DECL_VAR/DECL_LOOP/DECL_SOFTMAX: the declaring statement */
  int nuses;               /* reads (for the unused warnings) */
  const struct AstExpr *row_reduce; /* DECL_VAR: as AstExpr.row_reduce of its value */
  bool error;              /* its declaration had an error: uses stay silent */
} AstDecl;

/* ------------------------------------------------------------------ expressions */

typedef enum {
  AST_INT,       /* integer literal: cval */
  AST_FLOAT,     /* float literal (also `inf`): cval */
  AST_BOOL,      /* true / false */
  AST_NAME,      /* name -> decl */
  AST_BLOCK_ID,  /* block.x / .y / .z -> axis */
  AST_UNARY,     /* op: '-' or '!'; args[0] */
  AST_BINARY,    /* op: AstBinOp; args[0], args[1] */
  AST_TERNARY,   /* c ? a : b; args[0..2]; c must be a scalar bool */
  AST_CALL,      /* builtin(args...) */
  AST_SLICE,     /* tensor[items] */
  AST_MEMBER,    /* st.max / st.sum */
  AST_METHOD,    /* st.update(x) / st.finish(x): args[0] */
} AstExprKind;

typedef enum {
  OP_NONE,        /* 0: ST_ASSIGN's plain '=' */
  OP_ADD, OP_SUB, OP_MUL, OP_DIV, OP_REM,
  OP_LT, OP_LE, OP_GT, OP_GE, OP_EQ, OP_NE,
  OP_AND, OP_OR,
  OP_NEG, OP_NOT, /* unary */
} AstOp;

/* X(enum, name, min args, max args) */
#define AST_BUILTINS(X)                                                              \
  X(BI_EXP, "exp", 1, 1) X(BI_EXP2, "exp2", 1, 1) X(BI_LOG, "log", 1, 1)            \
  X(BI_SQRT, "sqrt", 1, 1) X(BI_RSQRT, "rsqrt", 1, 1) X(BI_TANH, "tanh", 1, 1)      \
  X(BI_ERF, "erf", 1, 1) X(BI_SIGMOID, "sigmoid", 1, 1) X(BI_ABS, "abs", 1, 1)      \
  X(BI_MAXIMUM, "maximum", 2, 2) X(BI_MINIMUM, "minimum", 2, 2)                     \
  X(BI_WHERE, "where", 3, 3)                                                        \
  X(BI_TO_F32, "to_f32", 1, 1) X(BI_TO_F16, "to_f16", 1, 1)                         \
  X(BI_TO_BF16, "to_bf16", 1, 1) X(BI_TO_I32, "to_i32", 1, 1)                       \
  X(BI_TO, "to", 2, 2)                                                              \
  X(BI_CDIV, "cdiv", 2, 2)                                                          \
  X(BI_ROW_INDEX, "row_index", 2, 2) X(BI_COL_INDEX, "col_index", 2, 2)             \
  X(BI_INDEX, "index", 2, 2)                                                        \
  X(BI_SUM, "sum", 2, 3) X(BI_MAX, "max", 2, 3) X(BI_MIN, "min", 2, 3)              \
  X(BI_DOT, "dot", 2, 2) X(BI_TRANS, "trans", 1, 1) X(BI_FILL, "fill", 2, 2)       \
  X(BI_ATOMIC_ADD, "atomic_add", 2, 2) X(BI_ATOMIC_MAX, "atomic_max", 2, 2)       \
  X(BI_SQUEEZE, "squeeze", 2, 2) X(BI_EXPAND_DIMS, "expand_dims", 2, 2)             \
  X(BI_CLUSTER_SUM, "cluster_sum", 1, 1) X(BI_CLUSTER_MAX, "cluster_max", 1, 1)

typedef enum {
#define X(e, name, lo, hi) e,
  AST_BUILTINS(X)
#undef X
  BI_COUNT
} AstBuiltin;

const char *ast_builtin_name(AstBuiltin b);
bool ast_builtin_from_name(const char *s, AstBuiltin *out);

typedef enum { SLICE_INDEX, SLICE_RANGE, SLICE_FULL } AstSliceKind;

struct AstExpr;
typedef struct AstSliceItem {
  AstSliceKind kind;
  struct AstExpr *start;   /* INDEX / RANGE: i32 scalar; FULL: NULL (0) */
  struct AstExpr *size_expr; /* RANGE: the S of `+S` as written */
  int32_t size;            /* RANGE: folded S; FULL: the pinned dim's value; INDEX: 1 */
  SrcLoc loc;
} AstSliceItem;

typedef enum { MEMBER_MAX, MEMBER_SUM } AstMember;
typedef enum { METHOD_UPDATE, METHOD_FINISH } AstMethod;

typedef struct AstExpr {
  AstExprKind kind;
  SrcLoc loc;              /* the whole expression */
  /* --- filled by sema --- */
  TileType ty;
  TileType opnd_ty;        /* BINARY / TERNARY / element-wise calls of 2-3 operands: see above */
  bool is_const;
  bool untyped;            /* constant that has not been given a type by context yet */
  double cval;
  /* --- per kind --- */
  const char *name;        /* NAME, MEMBER/METHOD (the state's name), CALL (the callee) */
  AstDecl *decl;           /* NAME, MEMBER, METHOD, SLICE (the tensor) */
  AstOp op;                /* UNARY, BINARY */
  int axis;                /* BLOCK_ID; reductions (folded) */
  bool keep;               /* reductions: `sum(x, 1, keep)` keeps the axis with size 1 */
  /* sema: the reduction along an axis > 0 that dropped it, when this value has its shape (the
   * reduction itself, an element-wise op of it, a name bound to it): numpy broadcasting would
   * line it up with the wrong axis of a larger tile, so sema refuses that. */
  const struct AstExpr *row_reduce;
  AstBuiltin builtin;      /* CALL */
  AstMember member;        /* MEMBER */
  AstMethod method;        /* METHOD */
  struct AstExpr **args;   /* UNARY/BINARY/TERNARY/CALL/METHOD operands */
  int nargs;
  AstSliceItem *items;     /* SLICE */
  int nitems;
  SrcLoc name_loc;         /* CALL / METHOD / MEMBER / SLICE: the callee/base name */
  const char *field;       /* MEMBER / METHOD / BLOCK_ID: the name after '.' */
  SrcLoc field_loc;
  int depth;               /* parser: length of the longest operator chain below (limit) */
} AstExpr;

/* ------------------------------------------------------------------ statements */

typedef enum {
  ST_BLOCK,    /* { body } */
  ST_VAR,      /* let|reg|shared name [: type] = init; -> decl */
  ST_ASSIGN,   /* name op= value; -> decl */
  ST_STORE,    /* tensor[items] = value; target is an AST_SLICE */
  ST_FOR,      /* for var in lo .. hi step S pipeline P { body } */
  ST_IF,       /* if cond { then } else { els } */
  ST_REQUIRE,  /* require cond; */
  ST_SOFTMAX,  /* online_softmax name(rows = R, rescale = a, b); */
  ST_EXPR,     /* expression statement (st.update(x);) */
} AstStmtKind;

/* A type as written: elem name and optional dims ([M, N] on arguments, [BM, D] on reg/shared). */
typedef struct AstTypeSpec {
  const char *elem_name;
  SrcLoc loc;
  AstExpr **dims;          /* NULL for scalars */
  int ndims;
  bool is_out;             /* arguments: `out` */
} AstTypeSpec;

typedef struct AstStmt {
  AstStmtKind kind;
  SrcLoc loc;
  struct AstStmt *next;    /* statements in a block are a linked list */
  /* ST_BLOCK / ST_FOR / ST_IF(then) */
  struct AstStmt *body;
  struct AstStmt *els;     /* ST_IF: else branch (a block or an if), may be NULL */
  /* ST_VAR / ST_ASSIGN / ST_FOR / ST_SOFTMAX */
  const char *name;
  SrcLoc name_loc;
  AstDecl *decl;           /* sema: the declared (VAR/FOR/SOFTMAX) or assigned (ASSIGN) decl */
  AstVarPlace place;       /* ST_VAR */
  AstTypeSpec *type;       /* ST_VAR: optional declared type */
  int assign_op;           /* ST_ASSIGN: 0 for '=', else OP_ADD/OP_SUB/OP_MUL/OP_DIV */
  AstExpr *target;         /* ST_STORE: AST_SLICE */
  AstExpr *value;          /* VAR init, ASSIGN/STORE value, REQUIRE/IF cond, EXPR */
  /* ST_FOR */
  AstExpr *lo, *hi, *step, *pipeline;
  int step_value;          /* sema: folded, > 0 (1 when absent) */
  int pipeline_value;      /* sema: folded, >= 1 (1 when absent) */
  /* ST_SOFTMAX */
  AstExpr *rows;
  int rows_value;          /* sema: folded R */
  const char **rescale_names;
  SrcLoc *rescale_locs;
  AstDecl **rescale;       /* sema: the accumulators (reg f32 [R, ...]) */
  int nrescale;
  AstExpr *softmax_scale;  /* `scale = c` or NULL: update(s) works on c * s (c a float scalar) */
} AstStmt;

/* ------------------------------------------------------------------ kernels */

typedef struct AstParam {
  const char *name;
  SrcLoc loc;
  AstExpr *init;           /* default as written (a type parameter's: an AST_NAME, the type) */
  const char *kind_name;   /* `T: type = f16`: "type" as written (sema checks it); NULL for values */
  SrcLoc kind_loc;
  bool is_type;            /* sema: a type parameter; its value is `elem`, `value` is unused */
  ElemType elem;           /* sema: a type parameter's final element type (default or -D) */
  bool is_float;           /* sema: float-valued (default or -D written with '.', 'e', inf) */
  double value;            /* sema: final value (default or -D) */
  bool overridden;         /* sema: set by -D */
  AstDecl *decl;
} AstParam;

typedef struct AstArg {
  const char *name;
  SrcLoc loc;
  AstTypeSpec *type;
  bool is_tensor;
  bool is_out;
  AstExpr *init;           /* `= 0`: an out tensor the launch starts at zero (NULL: as passed) */
  ElemType elem;           /* sema */
  int rank;                /* sema: 0 for scalars */
  int dims[TILE_MAX_RANK]; /* sema: index into AstKernel.dims */
  AstDecl *decl;
} AstArg;

typedef struct AstDim {
  const char *name;
  SrcLoc loc;              /* first appearance */
  bool pinned;
  int64_t value;           /* when pinned */
  AstDecl *decl;
  /* A dimension written as an expression (X: f32[N, D / 2]): a hidden run-time dim named
   * "X$1" (tensor, axis; '$' keeps it apart from source names) bound from the tensor like any
   * other, with a requirement "X$1 == D / 2" in launch_requires; derive is the expression's RPN
   * (NULL for a dim written as a name). A constant expression gives a pinned dim instead. */
  const char *derive;
  const char *derive_text; /* the expression as written, for messages */
} AstDim;

typedef struct AstKernel {
  const char *name;
  SrcLoc loc;              /* the kernel name */
  AstParam *params; int nparams;
  AstArg *args; int nargs;
  AstDim *dims; int ndims;             /* sema */
  AstExpr *grid[3]; int ngrid;
  AstExpr *threads;
  int threads_value;                   /* sema */
  AstExpr *cluster;                    /* `cluster (K)` or NULL */
  int cluster_value;                   /* sema: blocks a cluster along x (1: no cluster) */
  AstStmt *body;                       /* ST_BLOCK */
  int ndecls;                          /* sema: AstDecl ids are 0..ndecls-1 */
  AstStmt **requires; int nrequires;   /* sema: the top-level require statements */
  TirExpr launch_grid[3];              /* sema: the grid axes in the runtime's RPN ("1" unused) */
  TirExpr *launch_requires;            /* sema: requires[i] in RPN, with its cleaned source text */
  int64_t smem_bytes;                  /* sema: sum of shared tiles */
  struct AstKernel *next;
} AstKernel;

typedef struct AstProgram {
  const SourceFile *file;
  AstKernel *kernels;      /* linked list, in source order */
  int nkernels;
} AstProgram;

/* ------------------------------------------------------------------ entry points */

/* Parses a whole file; reports syntax errors through d (several per run thanks to recovery).
 * Returns NULL if any syntax error was reported. */
AstProgram *parse_program(Arena *a, const SourceFile *src, Diag *d);

/* Checks and specializes every kernel (see the contract above). defs are the -D overrides:
 * a name must be a parameter or a dim of at least one kernel. Returns false after errors. */
bool sema_check(Arena *a, AstProgram *prog, const Define *defs, int ndefs, GpuArch arch, Diag *d);

/* --emit=ast: an indented tree with each expression's resolved type. */
void ast_print(FILE *out, const AstProgram *prog);

/* Helpers for the parser (ast.c). */
AstExpr *ast_expr(Arena *a, AstExprKind kind, SrcLoc loc);
AstStmt *ast_stmt(Arena *a, AstStmtKind kind, SrcLoc loc);
const char *ast_op_name(AstOp op);
/* "f32[64, 128]" / "i32" into the arena. */
const char *ast_type_str(Arena *a, const TileType *t);
SrcLoc ast_loc_join(SrcLoc a, SrcLoc b);

#endif
