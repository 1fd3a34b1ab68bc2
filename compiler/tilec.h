/* tilec.h — the compiler's one internal header (chibicc style).
 *
 * Sections: arena, source locations and diagnostics, element types, tile IR (TIR),
 * passes, interpreter, GPU lowering, kernel metadata. The AST lives in ast.h (front end only).
 *
 * Stages, one file each:
 *   lexer.l parser.y ast.c   source -> AST                 (front end)
 *   sema.c                   checks, parameter folding      (front end)
 *   lower_tir.c              checked AST -> TIR
 *   tir.c                    TIR builder, printer, verifier, op table
 *   tir_passes.c             specialization / constant folding / DCE
 *   interp.c                 TIR interpreter (the CPU reference executor)
 *   layout.c                 linear layouts (GF(2) maps), used by the GPU backend
 *   lower_nvptx.c            TIR -> LLVM IR -> PTX (the only file that includes llvm-c/)
 *   meta.c                   kernel metadata text that travels inside the PTX
 *   driver.c                 the pipeline after the front end (outputs, tilec run)
 *   api.c                    tilec_compile() (tilec_api.h): the pipeline as a library call
 *   main.c                   the tilec command line
 */
#ifndef TILEC_H
#define TILEC_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define TILEC_VERSION "0.1.0"

/* ---------------------------------------------------------------- arena */

/* All compiler memory comes from one arena per compilation and is freed once. */
typedef struct Arena Arena;
Arena *arena_new(void);
void arena_free(Arena *a);
void *arena_alloc(Arena *a, size_t n);          /* zeroed, 16-byte aligned */
char *arena_strdup(Arena *a, const char *s);
char *arena_strndup(Arena *a, const char *s, size_t n);
char *arena_printf(Arena *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ------------------------------------------------- locations, diagnostics */

/* A half-open source range; lines and columns are 1-based, columns count bytes. */
typedef struct SrcLoc {
  int line, col;         /* first character */
  int end_line, end_col; /* one past the last character (same line for most tokens) */
} SrcLoc;

typedef struct SourceFile {
  const char *name;      /* as given on the command line */
  const char *text;      /* NUL-terminated contents */
  size_t len;
} SourceFile;

typedef enum { DIAG_ERROR, DIAG_WARNING, DIAG_NOTE } DiagKind;

/* Diagnostics sink: file:line:col: kind: message, the source line, a caret under the range.
 * At most DIAG_MAX_ERRORS errors are printed, then "too many errors" and compilation stops.
 * Warnings of one kind (one message format) are printed DIAG_MAX_SAME_WARNINGS times, then one
 * note says the rest are suppressed; notes that follow a dropped diagnostic are dropped too. */
#define DIAG_MAX_ERRORS 20
#define DIAG_MAX_SAME_WARNINGS 20
typedef struct Diag {
  const SourceFile *file;
  FILE *out;             /* stderr by default; tests point it at a memstream */
  int nerrors, nwarnings;
  bool werror;
  bool color;
  const size_t *line_start; /* diag_index_lines: offset of the first byte of each line */
  int nlines;
  bool dropping;         /* the last error or warning was dropped: so are its notes */
  struct { const char *fmt; int n; } same[16]; /* warnings printed per message format */
  int nsame;
} Diag;

void diag_init(Diag *d, const SourceFile *file, FILE *out);
/* Indexes the line starts of d->file once (parse_program does it), so a diagnostic finds its
 * line in constant time instead of rescanning the file. Without it lines are found by scanning. */
void diag_index_lines(Diag *d, Arena *a);
/* The source text under loc (which may span lines), or NULL when loc is not in the file. */
const char *diag_span(const Diag *d, SrcLoc loc, size_t *len);
void diag_report(Diag *d, DiagKind kind, SrcLoc loc, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
void diag_vreport(Diag *d, DiagKind kind, SrcLoc loc, const char *fmt, va_list ap);
/* Errors with no source position (bad flags, I/O): "tilec: error: ...". */
void diag_plain(Diag *d, DiagKind kind, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
bool diag_too_many(const Diag *d);

/* ---------------------------------------------------------- element types */

/* X(enum, name, bytes, is_float) — fp8 is reserved: the name parses, sema rejects it for now. */
#define TILEC_ELEM_TYPES(X)      \
  X(TY_BOOL, "bool", 1, 0)       \
  X(TY_I32, "i32", 4, 0)         \
  X(TY_F16, "f16", 2, 1)         \
  X(TY_BF16, "bf16", 2, 1)       \
  X(TY_F32, "f32", 4, 1)

typedef enum {
#define X(e, name, bytes, isf) e,
  TILEC_ELEM_TYPES(X)
#undef X
  TY_COUNT
} ElemType;

const char *elem_name(ElemType t);
int elem_bytes(ElemType t);
bool elem_is_float(ElemType t);
bool elem_from_name(const char *s, ElemType *out);

/* Rounding helpers shared by the interpreter, constant folding and the runtime's tests:
 * IEEE binary16 and bfloat16, round to nearest even, NaN stays NaN, overflow -> inf. */
uint16_t f32_to_f16_bits(float f);
float f16_bits_to_f32(uint16_t h);
uint16_t f32_to_bf16_bits(float f);
float bf16_bits_to_f32(uint16_t h);
double round_to_elem(ElemType t, double v); /* value as stored in a tile of type t */
uint32_t f32_bits(float f);                    /* the bits of an f32, and back */
float bits_f32(uint32_t u);
/* Element i of a dense buffer of type t (tensor memory: f16/bf16 as bits, bool as one byte),
 * read as a double / written from one (rounded to nearest even; i32 truncates; bool is v != 0). */
double elem_load(const void *base, int64_t i, ElemType t);
void elem_store(void *base, int64_t i, ElemType t, double v);

/* ------------------------------------------------------------------ tile IR
 *
 * Flat, typed, non-SSA. A function (one kernel, fully specialized: every compile-time parameter
 * has a value) is a list of instructions over virtual registers. Every register holds a tile with
 * a fixed TileType: element type, compile-time shape (rank 0 = scalar), placement. A register may
 * be written many times (loop-carried accumulators are just registers written in a loop).
 *
 * Structured control flow is spelled flat with markers:
 *   FOR  %i = %lo, %hi, %step      ... ENDFOR      (i = lo; i < hi; i += step; step > 0)
 *   IF   %cond                     ... [ELSE ...] ENDIF
 *
 * Operands of element-wise ops have identical shapes and element types: lower_tir inserts BCAST
 * and CVT explicitly, so no backend ever reasons about implicit broadcasting or promotion.
 * Reductions keep the reduced axis with size 1 (keepdims); the language's default form, which
 * drops it, is lowered to a reduction and a RESHAPE.
 *
 * Global memory is reached only through LOAD and STORE on tensor arguments, with per-dimension
 * addressing (a scalar index drops the dimension; a range [start, start + size) keeps it). Elements
 * outside [0, dim) in any dimension are masked: loads give the fill value, stores are dropped.
 */

#define TILE_MAX_RANK 4
/* The most elements one tile may have, counted with every dimension rounded up to a power of
 * two (the GPU backend's layouts pad so; 22 bits of flat coordinate). Sema rejects larger tiles
 * where they are written; the layout pass keeps the same check as a safety net. */
#define TILE_MAX_ELEMS (1 << 22)
/* The most elements of a register tile one thread may hold (padded elements over the block's
 * threads). Lowering unrolls a thread's share, and LLVM's time grows faster than linearly with it
 * (a softmax row: 512 per thread 1.6 s, 1024 12 s, 2048 over 2 minutes), so sema refuses more. */
#define TILE_MAX_ELEMS_PER_THREAD 512

typedef enum { PLACE_REG, PLACE_SHARED } Placement;

struct Layout; /* layout.c: set by the GPU backend's layout pass; NULL in the interpreter */

typedef struct TileType {
  ElemType elem;
  int rank;                      /* 0: scalar */
  int32_t dims[TILE_MAX_RANK];   /* each >= 1; need not be a power of two */
  Placement place;
  struct Layout *layout;
} TileType;

int64_t tile_numel(const TileType *t);
bool tile_same_shape(const TileType *a, const TileType *b);

/* Op table. X(enum, name, nargs, flags); nargs -1 = variable (see TirInst). */
enum {
  OPF_ELEMWISE = 1,  /* per element, operands and result have the same shape */
  OPF_CMP = 2,       /* result element type is bool */
  OPF_MARKER = 4,    /* control-flow marker */
  OPF_SIDEFX = 8,    /* never dead */
  OPF_INT_OK = 16,   /* accepts i32 operands */
  OPF_BOOL_OK = 32,  /* accepts bool operands */
  OPF_FLOAT_OK = 64, /* accepts float operands */
};

#define TIR_OPS(X)                                                                     \
  /* leaves */                                                                         \
  X(TIR_CONST, "const", 0, 0)        /* dst = imm (splat to dst shape) */              \
  X(TIR_PARAM, "param", 0, 0)        /* dst = scalar kernel argument #arg */           \
  X(TIR_DIM, "dim", 0, 0)            /* dst:i32 = runtime shape dimension #dim */      \
  X(TIR_BLOCK_ID, "block_id", 0, 0)  /* dst:i32 = block index along axis (0=x) */      \
  X(TIR_IOTA, "iota", 0, 0)          /* dst:i32[...] = index along axis */             \
  /* data movement */                                                                  \
  X(TIR_COPY, "copy", 1, OPF_ELEMWISE | OPF_INT_OK | OPF_BOOL_OK | OPF_FLOAT_OK)       \
  X(TIR_BCAST, "bcast", 1, OPF_INT_OK | OPF_BOOL_OK | OPF_FLOAT_OK)                    \
  X(TIR_CVT, "cvt", 1, OPF_INT_OK | OPF_BOOL_OK | OPF_FLOAT_OK)                        \
  X(TIR_TRANS, "trans", 1, OPF_INT_OK | OPF_BOOL_OK | OPF_FLOAT_OK)                    \
  /* same elements in the same order, size-1 dims inserted or removed */                \
  X(TIR_RESHAPE, "reshape", 1, OPF_INT_OK | OPF_BOOL_OK | OPF_FLOAT_OK)                \
  /* dst = args[0][offs[d] : +dst.dims[d], ...]: a constant box of a register tile */     \
  X(TIR_EXTRACT, "extract", 1, OPF_INT_OK | OPF_BOOL_OK | OPF_FLOAT_OK)                \
  /* dst = args[0][args[1] : +dst.dims[0], args[2] : +dst.dims[1]]: a box of a shared tile    \
   * (rank 1 or 2; rank 1 is one row) at run-time starts; outside the tile: imm (the fill)  */ \
  X(TIR_WINDOW, "window", 3, OPF_INT_OK | OPF_BOOL_OK | OPF_FLOAT_OK)                  \
  /* dst[args[1] : +v.dims[0], args[2] : +v.dims[1]] = v (args[0], dst's element type): a box \
   * of shared tile dst written in place; elements outside the tile are dropped. It reads   \
   * dst too (its other elements stay): tir_inst_reads */                                  \
  X(TIR_WINDOW_STORE, "window_store", 3, OPF_SIDEFX | OPF_INT_OK | OPF_BOOL_OK | OPF_FLOAT_OK) \
  /* unary math */                                                                     \
  X(TIR_NEG, "neg", 1, OPF_ELEMWISE | OPF_INT_OK | OPF_FLOAT_OK)                       \
  X(TIR_ABS, "abs", 1, OPF_ELEMWISE | OPF_INT_OK | OPF_FLOAT_OK)                       \
  X(TIR_NOT, "not", 1, OPF_ELEMWISE | OPF_BOOL_OK)                                     \
  X(TIR_EXP, "exp", 1, OPF_ELEMWISE | OPF_FLOAT_OK)                                    \
  X(TIR_EXP2, "exp2", 1, OPF_ELEMWISE | OPF_FLOAT_OK)                                  \
  X(TIR_LOG, "log", 1, OPF_ELEMWISE | OPF_FLOAT_OK)                                    \
  X(TIR_SQRT, "sqrt", 1, OPF_ELEMWISE | OPF_FLOAT_OK)                                  \
  X(TIR_RSQRT, "rsqrt", 1, OPF_ELEMWISE | OPF_FLOAT_OK)                                \
  X(TIR_TANH, "tanh", 1, OPF_ELEMWISE | OPF_FLOAT_OK)                                  \
  X(TIR_ERF, "erf", 1, OPF_ELEMWISE | OPF_FLOAT_OK)                                    \
  X(TIR_SIGMOID, "sigmoid", 1, OPF_ELEMWISE | OPF_FLOAT_OK)                            \
  /* binary math; operands same type and shape */                                      \
  X(TIR_ADD, "add", 2, OPF_ELEMWISE | OPF_INT_OK | OPF_FLOAT_OK)                       \
  X(TIR_SUB, "sub", 2, OPF_ELEMWISE | OPF_INT_OK | OPF_FLOAT_OK)                       \
  X(TIR_MUL, "mul", 2, OPF_ELEMWISE | OPF_INT_OK | OPF_FLOAT_OK)                       \
  X(TIR_DIV, "div", 2, OPF_ELEMWISE | OPF_INT_OK | OPF_FLOAT_OK) /* int: C truncation */\
  X(TIR_REM, "rem", 2, OPF_ELEMWISE | OPF_INT_OK)                                      \
  X(TIR_MIN, "min", 2, OPF_ELEMWISE | OPF_INT_OK | OPF_FLOAT_OK)                       \
  X(TIR_MAX, "max", 2, OPF_ELEMWISE | OPF_INT_OK | OPF_FLOAT_OK)                       \
  X(TIR_AND, "and", 2, OPF_ELEMWISE | OPF_BOOL_OK)                                     \
  X(TIR_OR, "or", 2, OPF_ELEMWISE | OPF_BOOL_OK)                                       \
  X(TIR_LT, "lt", 2, OPF_ELEMWISE | OPF_CMP | OPF_INT_OK | OPF_FLOAT_OK)               \
  X(TIR_LE, "le", 2, OPF_ELEMWISE | OPF_CMP | OPF_INT_OK | OPF_FLOAT_OK)               \
  X(TIR_GT, "gt", 2, OPF_ELEMWISE | OPF_CMP | OPF_INT_OK | OPF_FLOAT_OK)               \
  X(TIR_GE, "ge", 2, OPF_ELEMWISE | OPF_CMP | OPF_INT_OK | OPF_FLOAT_OK)               \
  X(TIR_EQ, "eq", 2, OPF_ELEMWISE | OPF_CMP | OPF_INT_OK | OPF_BOOL_OK | OPF_FLOAT_OK) \
  X(TIR_NE, "ne", 2, OPF_ELEMWISE | OPF_CMP | OPF_INT_OK | OPF_BOOL_OK | OPF_FLOAT_OK) \
  X(TIR_SELECT, "select", 3, OPF_ELEMWISE | OPF_INT_OK | OPF_BOOL_OK | OPF_FLOAT_OK)   \
  /* reductions along `axis`, keepdims; float sums accumulate in f32 */                \
  X(TIR_REDUCE_SUM, "reduce_sum", 1, OPF_INT_OK | OPF_FLOAT_OK)                        \
  X(TIR_REDUCE_MAX, "reduce_max", 1, OPF_INT_OK | OPF_FLOAT_OK)                        \
  X(TIR_REDUCE_MIN, "reduce_min", 1, OPF_INT_OK | OPF_FLOAT_OK)                        \
  /* dst:bool = some element of args[0] (a bool tile) is true, as far as the thread can tell:  \
   * the GPU answers for the elements its warp holds; only an IF's condition, whose body is  \
   * the same as nothing where the tile is false (an any-guard, docs/tir.md) */             \
  X(TIR_ANY, "any", 1, OPF_BOOL_OK)                                                    \
  /* dst:f32[M,N] = a[M,K] @ b[K,N] + c:f32[M,N]; a, b f16 or bf16 (or f32) */           \
  X(TIR_DOT, "dot", 3, OPF_FLOAT_OK)                                                   \
  /* global memory */                                                                  \
  X(TIR_LOAD, "load", -1, OPF_INT_OK | OPF_BOOL_OK | OPF_FLOAT_OK)                     \
  X(TIR_STORE, "store", -1, OPF_SIDEFX | OPF_INT_OK | OPF_BOOL_OK | OPF_FLOAT_OK)      \
  /* read-modify-write of each in-range element, addressed like STORE (args[0] the value) */ \
  X(TIR_ATOMIC_ADD, "atomic_add", -1, OPF_SIDEFX | OPF_INT_OK | OPF_FLOAT_OK)           \
  X(TIR_ATOMIC_MAX, "atomic_max", -1, OPF_SIDEFX | OPF_INT_OK | OPF_FLOAT_OK)           \
  /* dst:i32 = how many elements of tensor #arg_index the address of element [args[0], ..]  \
   * (one i32 operand per dim, rank <= 3) lies past the 16-byte boundary below it; no access */ \
  X(TIR_ROW_SHIFT, "row_shift", -1, OPF_INT_OK)                                        \
  /* structured control flow */                                                        \
  X(TIR_FOR, "for", 3, OPF_MARKER | OPF_SIDEFX)                                        \
  X(TIR_ENDFOR, "endfor", 0, OPF_MARKER | OPF_SIDEFX)                                  \
  X(TIR_IF, "if", 1, OPF_MARKER | OPF_SIDEFX)                                          \
  X(TIR_ELSE, "else", 0, OPF_MARKER | OPF_SIDEFX)                                      \
  X(TIR_ENDIF, "endif", 0, OPF_MARKER | OPF_SIDEFX)                                   \
  /* schedule (tir_schedule.c inserts them; lower_tir never does): axis = pipe number */ \
  X(TIR_PIPE_WAIT, "pipe_wait", 0, OPF_SIDEFX)    /* this iteration's stage landed */  \
  X(TIR_PIPE_RELEASE, "pipe_release", 0, OPF_SIDEFX) /* stage of iteration i-imm free */ \
  /* rotated loops: wgmma groups issued by async DOTs (imm 1) retire, at most imm left in \
     flight; args[0]'s values are read only from here on */                            \
  X(TIR_DOT_WAIT, "dot_wait", 1, OPF_SIDEFX)                                           \
  /* ping-pong of the consumer warpgroups (rotated loops): wait for this warpgroup's turn to \
     issue its dots; hand the turn to the next warpgroup (named barriers, role-scoped) */ \
  X(TIR_WG_TURN, "wg_turn", 0, OPF_SIDEFX)                                             \
  X(TIR_WG_PASS, "wg_pass", 0, OPF_SIDEFX)                                             \
  /* head loads (warp-specialized entry): the shared tiles loaded once before the loop  \
     (attention's Q) landed / may be overwritten by the next tile's */                 \
  X(TIR_HEAD_WAIT, "head_wait", 0, OPF_SIDEFX)                                         \
  X(TIR_HEAD_RELEASE, "head_release", 0, OPF_SIDEFX)                                   \
  /* dst:f32 = the sum / max of args[0]:f32 over the blocks of the cluster (rank order); at \
     the top level only: every block of the cluster reaches it once */                   \
  X(TIR_CLUSTER_SUM, "cluster_sum", 1, OPF_SIDEFX | OPF_FLOAT_OK)                        \
  X(TIR_CLUSTER_MAX, "cluster_max", 1, OPF_SIDEFX | OPF_FLOAT_OK)

typedef enum {
#define X(e, name, nargs, flags) e,
  TIR_OPS(X)
#undef X
  TIR_OP_COUNT
} TirOp;

/* Ops that address a tensor argument with TirInst.index (LOAD, STORE, the atomics), and those
 * of them that write it (the value is args[0]; no result register). */
static inline bool tir_op_addresses(TirOp op) {
  return op == TIR_LOAD || op == TIR_STORE || op == TIR_ATOMIC_ADD || op == TIR_ATOMIC_MAX;
}
static inline bool tir_op_writes_tensor(TirOp op) { return op != TIR_LOAD && tir_op_addresses(op); }
/* The reductions along an axis (REDUCE_SUM, _MAX, _MIN). */
static inline bool tir_op_reduces(TirOp op) { return op == TIR_REDUCE_SUM || op == TIR_REDUCE_MAX || op == TIR_REDUCE_MIN; }

typedef struct TirOpInfo {
  const char *name;
  int nargs;
  unsigned flags;
} TirOpInfo;
extern const TirOpInfo tir_op_info[TIR_OP_COUNT];

/* Ops computed element by element in registers: the elementwise table entries and CVT (whose
 * result element type differs from its operand's). */
static inline bool tir_op_maps_elements(TirOp op) {
  return (tir_op_info[op].flags & OPF_ELEMWISE) || op == TIR_CVT;
}

/* One dimension of a LOAD/STORE address. */
typedef struct TirIndex {
  bool is_range;  /* range keeps the dimension; a scalar index drops it */
  int start;      /* register holding an i32 scalar: the index, or the range's first index */
  int32_t size;   /* range length (compile-time); 1 for a scalar index */
} TirIndex;

typedef struct TirInst {
  TirOp op;
  int dst;                 /* register written; -1 when none (STORE, markers) */
  int args[3];             /* operand registers; unused entries are -1 */
  int axis;                /* BLOCK_ID, IOTA, REDUCE_*: the axis */
  double imm;              /* CONST value (ints are exact in a double); LOAD fill value */
  int arg_index;           /* PARAM, LOAD, STORE: kernel argument number; DIM: dim number */
  TirIndex index[TILE_MAX_RANK]; /* LOAD/STORE: one per tensor dimension */
  int pipeline;            /* FOR: requested pipelining depth (1 = none) */
  int stage;               /* scheduled DOT, PIPE_WAIT: the ring stage of the iteration this many
                              ahead (a rotated loop's next-iteration dot: 1); else 0 */
  int32_t offs[TILE_MAX_RANK]; /* EXTRACT: the first element taken along each dimension */
  int k_steps;             /* scheduled DOT: only its first k_steps k16 steps (0: all); a rotated
                              loop's last, unread product, which only has to define its result */
  bool early_set;          /* PIPE_WAIT, PIPE_RELEASE: of the ring's early set (TirPipe.early) */
  SrcLoc loc;
} TirInst;
/* STORE: args[0] is the value; LOAD: dst is the tile. Result tile dims = the range sizes. */

typedef struct TirReg {
  TileType type;
  const char *name;        /* user variable name or NULL (printed as %N) */
} TirReg;

typedef enum { ARG_TENSOR, ARG_SCALAR } ArgKind;

typedef struct TirArg {
  const char *name;
  ArgKind kind;
  ElemType elem;
  bool is_out;             /* tensor written by the kernel */
  bool zero_init;          /* out tensor declared `= 0`: the launch zeroes it before the kernel
                            * writes it (docs/language.md 5.3; the runtime, docs/architecture.md) */
  int rank;                /* tensors */
  int dims[TILE_MAX_RANK]; /* index into TirFunc.dims for each dimension */
  SrcLoc loc;
} TirArg;

/* A symbolic shape dimension (N, D, ...). Pinned dims have a compile-time value and are not
 * passed at launch; the runtime checks that the tensors match it. */
typedef struct TirDim {
  const char *name;
  bool pinned;
  int64_t value;           /* when pinned */
  const char *derive;      /* a dim written as an expression: its RPN over the other dims (the
                              launch checks it with a requirement; `tilec run` computes it) */
} TirDim;

/* An integer expression over dims, in reverse Polish notation, evaluated at launch
 * (grid size, requirements). Tokens: integer literals, dim names, and the operators
 * + - * / % cdiv min max < <= > >= == != && || ! (see meta.c). */
typedef struct TirExpr {
  const char *rpn;         /* space-separated tokens */
  const char *text;        /* the source text, for messages */
  SrcLoc loc;
} TirExpr;

typedef struct TirParamValue {
  const char *name;
  bool is_float;
  double value;
} TirParamValue;

typedef struct TirFunc {
  Arena *arena;
  const char *name;
  TirArg *args; int nargs;
  TirDim *dims; int ndims;
  TirReg *regs; int nregs, cap_regs;
  TirInst *insts; int ninsts, cap_insts;
  TirExpr grid[3];         /* unused axes are "1" */
  int threads;             /* threads per block, compile-time */
  int cluster;             /* blocks per cluster along x (1: none; sm_90) */
  TirExpr *requires; int nrequires; /* launch-time conditions ("N <= BLOCK") */
  TirParamValue *params; int nparams; /* the compile-time parameters it was specialized with */
  struct TirSchedule *sched; /* set by tir_schedule on its copy; NULL before */
  const char *full_entry;  /* the name of its full-size entry (driver_full_entry), or NULL */
  bool aligned_args;       /* compiled for tensors whose bases and strides (but the last) are
                              multiples of 16 bytes: a full-size entry with TILEC_FULL_ALIGNED=1,
                              every entry with TILEC_ALIGNED_ARGS=1. The metadata says so
                              (`aligned 16`), and the runtime launches it only on such tensors */
  SrcLoc loc;
} TirFunc;

TirFunc *tir_func_new(Arena *a, const char *name, SrcLoc loc);
int tir_new_reg(TirFunc *f, TileType type, const char *name);
TirInst *tir_emit(TirFunc *f, TirOp op, SrcLoc loc); /* appends; dst/args initialised to -1 */
/* A pass that rewrites f's code into a new array (moving instructions into an IF): insts holds
 * the n instructions written so far; those tir_out_inst adds get loc. */
typedef struct TirOut {
  TirFunc *f;
  TirInst *insts;
  int n;
  SrcLoc loc;
} TirOut;
TirInst *tir_out_inst(TirOut *o, TirOp op, int dst, int a0, int a1); /* appends; the rest -1 */
int tir_out_new(TirOut *o, TirOp op, TileType t, int a0, int a1);   /* into a new register of type t */
bool tir_inst_reads(const TirInst *in, int r);        /* r is an operand or a LOAD/STORE index */
int tir_only_write(const TirFunc *f, int r);          /* the one instruction writing r, or -1 */
int tir_region_end(const TirFunc *f, int first);     /* the ENDFOR/ENDIF closing FOR/IF `first`, or -1 */
bool tir_arg_written(const TirFunc *f, int arg);     /* tensor argument arg is written (STORE, atomics) */
int tir_windowed_row_load(const TirFunc *f, int r); /* r a rank-1 shared tile one LOAD writes whole, read only by windows (window stores may write it): that LOAD, else -1 */
bool tir_at_top_level(const TirFunc *f, int i);      /* instruction i lies outside every loop and branch */
int tir_enclosing(const TirFunc *f, int i);          /* the FOR or IF whose body holds instruction i most closely, or -1 */
bool tir_is_zero_tile(const TirFunc *f, int r);       /* r's only write is a CONST 0 */
bool tir_is_i32_scalar(const TirFunc *f, int r);      /* r is an i32 scalar */
bool tir_rows_whole_granules(const TirFunc *f, int arg); /* tensor arg's rows: a pinned length of whole 16-byte granules */
bool tir_trans_view_ok(const TirFunc *f, int t);     /* TRANS t reads its shared source in place */
/* The largest m known to divide every value of i32 scalar r (0: r is always 0; 1: nothing known). */
int64_t tir_known_multiple(const TirFunc *f, int r);
int64_t tir_gcd(int64_t a, int64_t b);                 /* gcd(a, 0) = |a| */
/* Where `tilec run` and the tests start an out argument: 0 if declared `= 0`, else the identity of
 * the atomics that update it (0 under atomic_add, -inf under atomic_max alone), NaN (poison) when
 * none does. */
double tir_atomic_start(const TirFunc *f, int arg);
void tir_print(FILE *out, const TirFunc *f);          /* --emit=tir, spec in docs/tir.md */
/* Checks every structural and typing rule; reports through d (with locations) and returns
 * false on the first broken rule. `stage` names the pass that ran before, for the message. */
bool tir_verify(const TirFunc *f, Diag *d, const char *stage);

/* Passes: each returns false after reporting an error. */
bool tir_fold_constants(TirFunc *f, Diag *d);
bool tir_eliminate_dead(TirFunc *f, Diag *d);
/* Puts loop-body selects whose index masks provably keep every element under a scalar guard
 * (tir_guard.c); TILEC_MASK_GUARD=0 turns it off. */
bool tir_guard_masks(TirFunc *f, Diag *d);
/* The same for one-hot masks (`where(col_index(n0, BN) == t, g, 0)`: false everywhere but in the
 * chunk holding t); run after tir_align_windows, which reads masks as selects, not IFs.
 * TILEC_ONEHOT_GUARD=0 turns it off. */
bool tir_guard_onehots(TirFunc *f, Diag *d);
/* Starts chunk loops over a row at the 16-byte boundary at or below their first column, where the
 * body provably gives the same result with fill elements before the row (tir_align.c);
 * TILEC_ALIGN_WINDOWS=0 turns it off. */
bool tir_align_windows(TirFunc *f, Diag *d);
/* Moves the computation of a reduction's operand above an earlier reduction it does not depend
 * on, so that the two cross warps together (tir_passes.c); TILEC_REDUCE_HOIST=0 turns it off. */
bool tir_hoist_reduce_operands(TirFunc *f, Diag *d);
/* Keeps a loop's `acc = max(acc, to_f32(w))` (or min) accumulator in w's f16/bf16 type, converted
 * once after the loop, and takes `reduce_max(to_f32(w))` (or min) as `to_f32(reduce_max(w))`:
 * exact, and two elements an instruction on the GPU (tir_passes.c); TILEC_NARROW_MINMAX=0 turns
 * it off. */
bool tir_narrow_minmax(TirFunc *f, Diag *d);
/* `exp(x - s) * c` and `exp(x - s) / c` with s and c broadcast row scalars: under `if (c > 0)`,
 * exp(x - (s - log c)) (s + log c for /), the factor folded into the exponent's operand
 * (tir_expfold.c); TILEC_EXP_FOLD=0 turns it off. */
bool tir_fold_exp_scale(TirFunc *f, Diag *d);
/* Moves pure register instructions (and register loads of input tensors) whose operands a loop
 * does not write above the loop (at most 32 registers a thread of tiles a loop, else its scalars
 * only; tir_passes.c); TILEC_HOIST_INVARIANTS=0 turns it off. */
bool tir_hoist_invariants(TirFunc *f, Diag *d);

/* ------------------------------------------------------------- interpreter
 *
 * Runs a TirFunc for a whole grid on host memory, one block (program) at a time, in order,
 * with the element semantics of the GPU backend: f16/bf16 round to nearest even whenever a value
 * is stored in a tile of that type; float reductions and dot accumulate in f32; exp/exp2/log etc.
 * computed in f32 by libm. Deterministic. */
typedef struct InterpTensor {
  void *data;              /* host memory, element type of the argument */
  int64_t shape[TILE_MAX_RANK];
  int64_t strides[TILE_MAX_RANK]; /* in elements */
} InterpTensor;

typedef struct InterpArg {
  InterpTensor tensor;     /* ARG_TENSOR */
  double scalar;           /* ARG_SCALAR (converted to the argument's type) */
} InterpArg;

/* dim_values[i] is the value of f->dims[i]; grid is evaluated by the caller.
 * Returns false and writes a message on a run-time fault (never aborts). */
bool interp_run(const TirFunc *f, const InterpArg *args, const int64_t *dim_values,
                const int64_t grid[3], char *err, size_t errlen);
/* One element of an element-wise op or CVT with exactly the interpreter's semantics (used by
 * constant folding). at: element type of the value operands (SELECT: args[1], args[2]; args[0]
 * is the bool condition); dt: the result type. False when the op faults (i32 division by zero)
 * or is not element-wise. */
bool interp_eval_elem(TirOp op, ElemType at, ElemType dt, const double args[3], double *out);

/* ------------------------------------------------------------ GPU lowering */

typedef enum { ARCH_SM80, ARCH_SM86, ARCH_SM89, ARCH_SM90, ARCH_SM90A, ARCH_COUNT } GpuArch;
const char *arch_name(GpuArch a);                /* "sm_90a" */
bool arch_from_name(const char *s, GpuArch *out);
int arch_smem_limit(GpuArch a);                  /* bytes of shared memory per block */
int arch_sm_threads(GpuArch a);                  /* threads resident per SM at most */
int arch_sm_blocks(GpuArch a);                   /* blocks resident per SM at most */
int arch_blocks_per_sm(GpuArch a, int threads, int smem); /* resident by threads and shared memory */

/* sm_90a: a DOT of 8, 16 or 32 rows computed as its transpose, when the kernel then runs on
 * wgmma (tir_swap.c); f itself when nothing is swapped, a copy when something is, NULL after an
 * error. TILEC_SWAP_AB=0 turns it off. */
TirFunc *tir_swap_small_dots(TirFunc *f, GpuArch arch, Diag *d);

typedef struct NvptxOptions {
  GpuArch arch;
  int opt_level;           /* 0..3 */
  bool dump_llvm;          /* --emit=llvm: text of the LLVM module instead of PTX */
  bool no_loop_versions;   /* internal (nvptx_compile): loops not versioned (version_loop) */
  int *loop_versions;      /* internal: when set, counts the loops emitted in two versions */
} NvptxOptions;

/* ------------------------------------------------------------ schedule
 *
 * tir_schedule.c: the GPU schedule of a kernel whose layouts are assigned, as a copy of the
 * function with PIPE_WAIT / PIPE_RELEASE instructions in its pipelined loops and this table
 * (docs/tir.md, "Schedule"). The interpreter never sees it; the emitter only follows it. */
typedef struct TirPipe {
  int first, last;         /* the FOR and its ENDFOR */
  int stages;              /* ring depth, >= 2 */
  int ahead;               /* cp.async entry: iterations its copies run ahead (stages - 1, or
                              stages - 2 with overlap_dot) */
  int overlap_dot;         /* the DOT whose wgmma group stays in flight one iteration, or -1 */
  int *loads, nloads;      /* the LOADs filling the ring, in order (each tile's only write) */
  int *chain, nchain;      /* pure scalar body instructions their index starts need, in order */
  /* Lookahead loads (cp.async entry): top-level LOADs of small register tiles in the body whose
   * index starts the chain can replay and whose tensor the kernel never writes (a row's Mean and
   * Rstd). pipe_top issues them lookahead_dist iterations ahead into registers of their own and
   * hands them over at the top of their iteration, so a row's statistics arrive during earlier
   * rows instead of stalling this one (layernorm backward: 17% of the warps' stall samples, run
   * y1). At most LOOKAHEAD_REGS registers a thread for all copies in flight; TILEC_LOOKAHEAD=0
   * leaves them in place, TILEC_LOOKAHEAD=K issues them K iterations ahead (at most `ahead`;
   * default 1: runs y2, y3, docs/performance.md). */
  int *lookahead, nlookahead;
  int lookahead_dist;
  int wait, release;       /* its PIPE_WAIT and PIPE_RELEASE instructions */
  /* Thread-private ring (cp.async entry): every element of every ring tile is read only by the
   * thread that copies it in (the tile's layout has no replicas and only elementwise ops and
   * conversions read it, in that layout). Its wait is then the thread's own cp.async.wait_group,
   * no block barrier; the body's reductions take their slots by the iteration's parity instead
   * (docs/architecture.md, "Thread-private rings"). Opt-in (TILEC_PRIVATE_RING=1): it measured
   * even on the H100 (session aq), and layernorm backward then keeps its loop versions, 3x the
   * code. */
  bool thread_private;
  /* Rotated (warp-specialized entry): the zero-accumulator DOT that starts the body (S = Q K^T)
   * is issued for iteration i+1 at the end of iteration i, before the overlapped DOT (O += P V)
   * of iteration i, so the next iteration's softmax runs while P V is on the tensor cores. */
  bool rotated;
  int acc_wait;            /* rotated: the DOT_WAIT 0 before the body's first read of the
                              overlapped DOT's accumulator (the release follows it) */
  int turn, pass;          /* rotated with turns: the body's WG_TURN and WG_PASS, or -1 */
  /* The early set (warp-specialized entry): the ring loads whose last reader comes before the
   * others' (attention's K, read by S = Q K^T, where V waits for O += P V) have full / empty
   * mbarriers of their own, waited for at early_wait (after the FOR) and freed at early_release,
   * so the producer refills their stage while the rest of the body still reads the others; those
   * are waited for right before their first reader (`wait`) and freed at `release`. A rotated
   * loop frees the early set under `if step < hi - i` (its last, unread product still reads it)
   * and the loop's exit frees the last iteration's, after the drain (early_tail). NULL: one set,
   * every load on wait and release. */
  bool *early;             /* per load */
  int early_wait, early_release;
  bool early_tail;
} TirPipe;

/* One TMA tensor map (a kernel parameter): a LOAD of a ring as `chunks` boxes per stage. */
typedef struct TirTmap {
  int load;                /* the LOAD instruction (a store map: the STORE) */
  bool store;              /* a TMA store: the consumers stage the STORE's register tile in
                              shared memory (this layout), one thread stores it with TMA */
  int arg;                 /* its tensor argument */
  int32_t box[TILE_MAX_RANK]; /* elements per tensor dimension (argument order); 1 for a
                              scalar index; the innermost spans at most `swizzle` bytes */
  int swizzle;             /* 32, 64 or 128: the wgmma tile's swizzle, which TMA writes */
  int chunks;              /* boxes per stage, side by side along the innermost dimension */
  int rows, row_bytes;     /* the box's rows: the shared tile's, or its first ones where its layout
                              pads them (192 of a wgmma A operand laid out in 256); bytes of one
                              box row (= swizzle span) */
  bool multicast;          /* cluster: the two blocks load the same tile, each half of its rows
                              (box[outer] = rows / 2) into both blocks' shared memory */
  int outer;               /* the tensor dimension of the tile's rows */
  /* A TMA store whose register tile's rows split by consumer warpgroup (attention's O, GEMM's C:
   * a wgmma accumulator): each warpgroup stages and stores its own rows/split rows (box[outer]),
   * synchronizing only itself, so the warpgroups leave a tile's epilogue out of lockstep.
   * 1: the whole tile, after a barrier of all consumers. TILEC_STORE_SPLIT=0 keeps 1. */
  int split;
} TirTmap;

#define TIR_MAX_TMAPS 8

typedef struct TirProgressive {
  int load;                /* the top-level LOAD of the shared tile */
  int loop;                /* the FOR that first reads it, only through windows at its counter */
  int parts;               /* commit groups, a power of two >= 2, of S / parts columns each */
} TirProgressive;

typedef struct TirSchedule {
  TirPipe *pipes; int npipes;
  /* Warp specialization (sm_90a): a producer warpgroup issues TMA into the one pipelined loop's
   * ring (full / empty mbarriers); the kernel's own threads are the consumers. */
  bool ws;
  /* Persistent (with ws): a grid of at most the resident blocks, each walking output tiles
   * (grouped raster) with the ring running on across tiles, so a tile's epilogue overlaps the
   * next tile's loads. The block index the body sees is the tile's. */
  bool persistent;
  /* Row walk (with persistent): the loop's trip count depends on block.x (causal attention), so
   * tiles differ in cost along x but every row (all of x for one y, z) costs the same: a block
   * walks chunks of a row's tiles (the fourth grid parameter: 2, a long tile and its short
   * mirror; gx, a whole row), then the chunk `blocks` chunks on (launched with a block per tile,
   * a block takes its one tile as any persistent entry does). */
  bool walk_rows;
  /* Cluster (with persistent): pairs of blocks adjacent along grid axis cluster_axis run as one
   * cluster of 2; the ring loads whose coordinates do not depend on that axis are multicast. */
  int cluster;             /* 1 or 2 */
  int cluster_axis;        /* 0: x, 1: y */
  /* Ping-pong (with persistent): `groups` copies of the kernel's threads (one warpgroup each) run
   * the body on alternate tiles of the block's walk, consuming the one ring in turn: one group's
   * epilogue runs under the other's main loop. */
  int groups;              /* 1 or 2 */
  /* Turns (rotated loop, one group of 2+ warpgroups): the consumer warpgroups issue their dots
   * in a fixed cyclic order, each between a WG_TURN and a WG_PASS (FlashAttention-3's ping-pong):
   * one warpgroup's softmax runs while the tensor cores work on the other's products. */
  int turns;               /* the warpgroups taking turns, or 0 */
  /* Block order (not persistent, or a row walk): the loops' trip counts grow with block.x, so
   * the entry points read block.x reversed (nctaid.x - 1 - ctaid.x; a row walk's tile decode
   * reverses x) and the longest blocks start first. */
  bool reverse_x;
  /* Persistent walk: rows of y per raster group (the runtime's default; TILERT_TILE_GROUP
   * overrides). 1 (x first) when no ring load's coordinates depend on block.x, so the blocks
   * resident at once stream the same operands (attention's K and V); else TILE_GROUP_ROWS. */
  int tile_group;
  int consumer_threads, producer_threads; /* consumer_threads: one group's (the kernel's) */
  int consumer_regs, producer_regs; /* setmaxnreg budgets */
  /* Blocks of the warp-specialized entry an SM holds by registers: 1, or 2 where one consumer
   * warpgroup's block (256 threads) is launched with 128 registers a thread (`.minnctapersm 2`)
   * and the budgets split that pool (24 / 232). Left at 1, ptxas gives such a block up to 255
   * registers a thread, one block an SM, and ignores setmaxnreg (C7508). */
  int launch_blocks;
  bool ring_for_stores;    /* the ring took fewer stages than its `pipeline P` so that the TMA
                              stores' staging tiles fit beside it (store_ring) */
  int *slice, nslice;      /* instructions before the loop the producer replays (scalars) */
  /* Head loads (with ws, one group, no cluster): the shared tiles the body loads once before the
   * loop (attention's Q) come by TMA from the producer too, a one-stage ring of their own: the
   * consumers wait for them at HEAD_WAIT and free them at HEAD_RELEASE after their last reader,
   * so a persistent block's next Q loads during this tile's epilogue. Their tensor maps follow
   * the ring's: tmaps[pipes[0].nloads + h]. */
  int *heads, nheads;      /* the LOADs */
  int head_wait, head_release; /* the HEAD_WAIT and HEAD_RELEASE instructions, or -1 */
  /* With an early release (tir_schedule.c release_heads_early), head_release is inside the
   * loop, under an IF on its last iteration, and head_release_empty is a second one after the
   * loop for a loop that ran no iteration; else -1. */
  int head_release_empty;
  /* The producer issues a tile's head loads after this many of its ring loads: with one copy
   * freed after the loop, the ring's stages (those need only stages the previous tile frees
   * before its loop ends); 0 with two copies (freed by the tile before the previous one) or an
   * early release (the next tile's first ring load then waits for the previous tile's last
   * iteration, still an iteration and an epilogue ahead of its use; issuing the heads after it
   * instead made the rotated d128 producer spill at 24 registers). */
  int head_after;
  int head_bytes;          /* what HEAD_WAIT's mbarrier expects */
  /* 1, or 2 (persistent, when a second copy of the head tiles fits): tile i's head tiles sit in
   * copy i % 2, so the producer loads the next tile's (Q) while this tile's loop still reads
   * its own, instead of after that loop frees them. TILEC_HEAD_DOUBLE=0: one copy. */
  int head_stages;
  /* TMA stores (the epilogue): top-level STOREs after the loop whose register tiles the
   * consumers write into a staging tile of their own in shared memory, then one thread stores
   * with cp.async.bulk.tensor (tensor maps after the heads'); TILEC_TMA_STORE=0 leaves them out. */
  int *stores, nstores;
  int store_bytes;         /* their staging tiles' shared memory */
  /* Prefetched loads (the warp-specialized entry's copy): top-level LOADs of register tiles after the loop that
   * depend on nothing the loop computes and read a tensor the kernel never writes (GEMM's bias)
   * are moved before the loop, so their latency hides under it instead of following the drain;
   * at most PREFETCH_REGS registers a thread. TILEC_PREFETCH=0 leaves them in place. */
  int *prefetch, nprefetch;
  /* Progressive copies (no pipes): a top-level cp.async copy of a rank-1 shared tile committed
   * in `parts` groups of consecutive columns (each thread's chunks ascend through the tile),
   * whose first reader is a top-level loop reading it only through windows at the loop counter:
   * each iteration waits only for the parts its window reaches, so the first loop over a row
   * runs while the rest of the row lands. Opt-in, TILEC_PROGRESSIVE=P (at most P parts): on the
   * H200 the waits and barriers in the loop cost about what the overlap gains (cross-entropy
   * backward: 8 parts 1-4% slower, 2 parts within 1.2% either way; runs ab2, ab3). */
  TirProgressive *progs; int nprogs;
  /* Idle bands (the warp-specialized entry's copy, 2+ consumer warpgroups): every register tile
   * the pipelined loop hands to the code after it holds whole bands of band_rows rows, one per
   * warpgroup, and all that reads them after the loop keeps rows apart and ends in STOREs at
   * rows band_row0 + i of a dimension band_dim long. A warpgroup whose band starts at or past
   * that length (the last, ragged query tile of a sequence: 128 of a 192-row tile's rows at
   * N = 2048) then runs the loop's protocol only, its stage waits and releases, turns and head
   * syncs, and none of its products or softmax: its rows are never stored. lower_nvptx.c emits
   * the loop twice (idle_band_loop). TILEC_IDLE_BANDS=0: none. band_rows 0: none. */
  int band_rows;
  int band_row0;           /* the i32 register of the tile's first row (attention's m0) */
  int band_dim;            /* the dim (TirFunc.dims) those rows end at (N) */
  /* With idle bands in a persistent walk taken x first (tile_group 1, no row walk): the walk
   * decodes x as (x + y) mod gx, a permutation of each row's tiles. A walker takes every
   * blocks-th tile, and where the blocks are a multiple of the row (132 walkers, rows of 11
   * 192-row tiles at N = 2048) it met the same x, so the same walkers took every ragged tile and
   * the others, all whole tiles, set the time; rotated, each walker meets each x. The rows' tiles
   * read the same ring data (nothing loaded follows x), so the waves stream what they did.
   * TILEC_ROTATE_X=0: not rotated. */
  bool rotate_x;
  TirTmap *tmaps; int ntmaps;
  int tx_bytes;            /* bytes one stage receives (mbarrier expect_tx) */
  int early_bytes;         /* of them, the early set's (pipes[0].early) */
} TirSchedule;

typedef struct SchedOptions {
  GpuArch arch;
  bool ws_entry;           /* the warp-specialized entry's copy: prefetched epilogue loads (its
                              consumers have the registers; the cp.async entry may not) and head
                              tiles freed early (the cp.async entry loads its own) */
  bool rotate;             /* the warp-specialized entry's copy: rotate loops where legal */
  bool wgmma;              /* DOTs on wgmma (layout_kernel_uses_wgmma) */
  int stage_cap;           /* at most this many stages per loop (shared-memory retries) */
  bool wide_producer;      /* the producer at 40 registers, the consumers at what is left (a
                              producer that spills at 24; lower_nvptx.c retries with it) */
  bool one_set;            /* no early set (TirPipe.early): tir_schedule's own second try for a
                              loop it did not rotate */
  bool whole_stores;       /* TMA stores of the whole tile (TirTmap.split 1): the split store's
                              few registers spilled a GELU epilogue; lower_nvptx.c retries with it */
  bool one_block;          /* TirSchedule.launch_blocks 1 where it would be 2: the consumers spilled
                              at the 2-block budget; lower_nvptx.c retries with it */
  bool no_idle_bands;      /* no TirSchedule.band_rows: every plan with them spilled (lower_nvptx.c) */
  bool no_ws;              /* no warp-specialized entry (lower_nvptx.c, when ptxas refused every
                              plan's: a wgmma too wide for the registers the block is launched
                              with, C7602) */
  int ring_stages;         /* > 0: the pipelined loop's ring depth instead of its `pipeline P`
                              (tir_schedule's own second try for a warp-specialized entry whose
                              ring holds too little work ahead, deeper_ring, or crowds out its
                              TMA stores, store_ring) */
} SchedOptions;

/* A scheduled copy of f (instructions copied; registers, args, dims shared), verified. */
TirFunc *tir_schedule(const TirFunc *f, const SchedOptions *o, Diag *d);
/* The schedule's rules: every read of a ring is after its pipe's wait and before its release,
 * the producer's slice computes what its loads need, budgets fit the SM. */
bool tir_verify_schedule(const TirFunc *f, Diag *d);
void tir_print_schedule(FILE *out, const TirFunc *f);
/* A LOAD whose elements move in 16-byte runs (what cp.async needs). */
bool tir_load_moves_16_bytes(const TirFunc *f, const TirInst *in);
/* How many ifs and fors open between instruction first (exclusive) and j (exclusive) are still
 * open at j: 0 for j at the top level of the body that starts after first. */
int tir_nest_depth(const TirFunc *f, int first, int j);
/* Pipelining on (TILEC_PIPELINE=0 turns it off, to compare). */
bool tir_pipelining_enabled(void);
/* Rotated loops where legal (TILEC_ROTATE=0 turns them off, to compare). */
bool tir_rotation_enabled(void);

/* common.c: whether environment setting name is "0" (a compiler feature switched off, for A/Bs). */
bool env_off(const char *name);
bool env_on(const char *name);                   /* the variable is "1" */
/* common.c: whether f's entries take their tensors as 16-byte aligned (TirFunc.aligned_args). */
bool tir_aligned_args(const TirFunc *f);
/* common.c: ptxas where the user has it (TILEC_PTXAS, then PATH, then /usr/local/cuda/bin), or
 * NULL; and the bytes of spill stores and loads `ptxas -v` reports for ptx (the functions whose
 * names end with suffix; every one when it is NULL), or -1 when it cannot run or rejects the PTX. */
const char *ptxas_find(Arena *a);
long ptxas_spill_bytes(Arena *a, const char *ptxas, const char *ptx, GpuArch arch, const char *suffix);
/* ptxas's first error line for ptx (e.g. "ptxas fatal : (C7602) Insufficient registers ..."), or
 * NULL when it assembles it or cannot run. */
char *ptxas_refusal(Arena *a, const char *ptxas, const char *ptx, GpuArch arch);
/* ptxas -v's register count of each function of ptx, in order, into regs[0 .. max); the number
 * of functions, or -1 when ptxas fails or reports none. */
int ptxas_registers(Arena *a, const char *ptxas, const char *ptx, GpuArch arch, int *regs, int max);
/* `ptxas -v`'s output (stdout and stderr) for ptx, arena-allocated, or NULL when ptxas could not
 * run; *status: its exit status (0: assembled). The last few modules' reports are kept in the
 * process, so asking again of the same text runs ptxas once. */
const char *ptxas_report(Arena *a, const char *ptxas, const char *ptx, GpuArch arch, int *status);
/* The spill bytes (stores + loads) one line of `ptxas -v` reports, or -1 when it reports none. */
long ptxas_spill_line(const char *line);

/* Lowers a verified TirFunc to PTX text (arena-allocated, NUL-terminated) or LLVM IR text.
 * Runs the layout pass and shared-memory planning first; reports through d. */
char *nvptx_compile(TirFunc *f, const NvptxOptions *o, Diag *d, int *smem_bytes_out);
/* The n kernels of a file in one PTX module (one metadata block per kernel), each as
 * nvptx_compile would make it. */
char *nvptx_compile_module(TirFunc **fs, int n, const NvptxOptions *o, Diag *d);

/* ---------------------------------------------------------------- metadata
 *
 * Everything the runtime needs to launch a kernel travels inside the PTX as comment lines
 * beginning "// tilec:" (format in docs/architecture.md, parsed by runtime/meta.c). */
char *meta_emit(Arena *a, const TirFunc *f, int dynamic_smem_bytes);
/* The lines of a scheduled kernel's warp-specialized entry point: its name, threads, shared
 * memory and the tensor maps the runtime passes after the ordinary parameters. */
char *meta_emit_ws(Arena *a, const TirFunc *f, const char *entry, int dynamic_smem_bytes);

/* ------------------------------------------------------- AOT (--emit=c)
 *
 * emit_c.c (docs/aot.md): writes BASE.h and BASE.c, a typed launcher with the PTX of every arch
 * embedded (and, when cubin is set and ptxas is found, the cubins), depending only on libcuda at
 * run time. The C prefix of the functions is the last component of BASE. Every kernel of the PTX
 * goes in (each arch's PTX is one module with the same kernels); the contracts come from the
 * PTX's "// tilec:" lines. Several kernels share one PREFIX_load and get PREFIX_KERNEL_launch. */
bool emit_c_files(Arena *a, const char *base, const char *const *ptx_per_arch,
                  const GpuArch *archs, int narchs, bool cubin, Diag *d);
/* Whether BASE.h and BASE.c can be written and BASE.h #included: BASE must name a file (not
 * "dir/", "." or ".."), and an #include "..." takes no '"', '\\' or control byte. Other
 * characters stay in the file names and become '_' in the C prefix (softmax-f16.h declares
 * softmax_f16_launch). Reports as `what` ("--emit=c", "--link"). */
bool emit_c_name_ok(const char *base, const char *what, Diag *d);
/* `tilec --link A.h B.h -o BASE`: one entry point over specializations written by emit_c_files
 * (same argument list), launching the first whose contract accepts the arguments; files of
 * several kernels (the same kernels in each) link kernel by kernel. */
bool emit_c_link(Arena *a, const char *base, const char *const *headers, int nheaders, Diag *d);

/* ---------------------------------------------------------------- outputs */

/* output.c: files that appear whole or not at all (temporary + rename; devices written directly;
 * NULL or "-" is standard output, whose write errors are reported too). */
typedef struct OutFile {
  FILE *fp;
  const char *path;   /* NULL for standard output */
  char *tmp;          /* renamed to path on commit; NULL when written directly */
  const char *shown;  /* for messages */
} OutFile;

bool out_open(Arena *a, OutFile *o, const char *path, Diag *d);
/* Closes the n files; when ok and every write succeeded, puts them all in place, else removes
 * them all (reporting the write error, if that was the cause). Returns whether they are in place. */
bool out_commit(OutFile *files, int n, bool ok, Diag *d);
/* Makes directory path and any missing parents (mkdir -p); false, reported, when one cannot be
 * made or is not a directory. */
bool out_make_dir(Arena *a, const char *path, Diag *d);
/* Writes n memory buffers to n paths, all or nothing. */
bool out_write_files(Arena *a, const char *const *paths, const char *const *texts,
                     const size_t *lens, int n, Diag *d);

/* npy.c: numpy .npy arrays for `tilec run --in NAME=FILE.npy --out DIR`. */
typedef struct NpyArray {
  char descr[8];                 /* "<f4", "|b1", ... */
  int rank;
  int64_t shape[TILE_MAX_RANK];
  int64_t numel;
  const unsigned char *data;     /* arena, little-endian, C order */
} NpyArray;
bool npy_read(Arena *a, const char *path, NpyArray *x, Diag *d);
/* Element i as a double; a uint16 array holds bfloat16 bits when t is TY_BF16. */
double npy_get(const NpyArray *x, int64_t i, ElemType t);
/* The .npy bytes of a dense tensor of type t (bf16 written as float32); *len gets the size. */
char *npy_format(Arena *a, ElemType t, int rank, const int64_t *shape, const void *data,
                 size_t *len);

/* ---------------------------------------------------------------- pipeline */

/* exec_cpu.c: a runtime kernel (tilert.h) whose launches run f in the interpreter.
 * f and a must outlive the kernel. */
struct tilert_device;
struct tilert_kernel;
struct tilert_status exec_cpu_kernel(struct tilert_device *dev, Arena *a, const TirFunc *f,
                                     struct tilert_kernel **out);

struct AstProgram; /* ast.h: the parsed and checked program (all kernels, specialized) */
struct AstKernel;  /* ast.h: one kernel */

/* lower_tir.c: a checked, specialized kernel -> verified TIR. NULL after reporting errors. */
TirFunc *lower_tir(Arena *a, const struct AstKernel *k, Diag *d);

typedef enum { EMIT_CHECK, EMIT_AST, EMIT_TIR, EMIT_SCHEDULE, EMIT_LLVM, EMIT_PTX, EMIT_C } EmitKind;

typedef struct Define {
  const char *name, *value;  /* -D NAME=VALUE, as written */
  SrcLoc loc;                /* unused (command line) */
} Define;

typedef struct TilecOptions {
  const char *input;         /* the .tile file */
  const char *output;        /* -o; NULL = default name; "-" = stdout */
  EmitKind emit;
  GpuArch archs[ARCH_COUNT]; /* --arch (repeatable for --emit=c); default sm_90a */
  int narchs;
  int opt_level;             /* -O0..-O3, default 3 */
  Define *defines; int ndefines;
  bool cubin;                /* --cubin with --emit=c: also embed ptxas output */
  /* `tilec run FILE`: run in the interpreter on random inputs */
  bool run;
  const char *shapes;        /* --shape M=4,N=1000 */
  unsigned seed;             /* --seed */
  const char **inputs;       /* --in NAME=FILE.npy (tensors not named are random) */
  int ninputs;
  const char *out_dir;       /* --out DIR: every out tensor as DIR/NAME.npy */
  const char *kernel;        /* --kernel NAME: only that kernel of the file */
  int64_t run_max_bytes;     /* --max-memory: all tensors together (default TILEC_RUN_MAX_BYTES) */
} TilecOptions;

/* driver.c: the PTX (or LLVM IR) of the kernels: one module with every one of them. */
char *driver_compile(TirFunc **funcs, int n, const NvptxOptions *no, Diag *d);

/* driver.c: the arch whose shared-memory budget is the tightest of o's: sema checks against it. */
GpuArch driver_sema_arch(const TilecOptions *o);

/* driver.c: lower_tir, then every pass with the verifier after each. NULL after errors. */
TirFunc *driver_lower(Arena *a, const struct AstKernel *k, Diag *d);

/* driver.c: the full-size entry of kernel k (lowered as f from a program checked with defs):
 * where a run-time dim has a constant bound (`require N <= BLOCK`), the same kernel compiled
 * again with every such dim pinned to its bound, named NAME__full; the runtime launches it when
 * the launch's dims equal those bounds (docs/architecture.md, "Full-size entries"). NULL when
 * there is none (no bound, TILEC_FULL_ENTRY=0, or the pinned kernel does not compile). Sets
 * f->full_entry. */
TirFunc *driver_full_entry(Arena *a, const struct AstKernel *k, TirFunc *f, const Define *defs,
                           int ndefs, GpuArch arch, const Diag *d);

/* `tilec run` allocates at most this many bytes of tensors unless --max-memory says otherwise:
 * the interpreter is for small problems, and a typo in --shape should not exhaust the machine. */
#define TILEC_RUN_MAX_BYTES (1LL << 30)

/* driver.c: everything after the front end (--emit=tir|llvm|ptx|c, `tilec run`).
 * Writes outputs atomically (temp file + rename); returns the process exit status. */
int driver_backend(Arena *a, struct AstProgram *prog, const TilecOptions *o, Diag *d);

#endif
