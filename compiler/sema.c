/* sema.c — semantic checks and specialization of the AST (contract in ast.h).
 *
 * One pass per kernel: parameters (defaults, then -D), arguments and dims, launch expressions,
 * the body (names, types, shapes, placement, constant folding, the per-tile element limit), then
 * the shared-memory budget, the register estimate and the unused-variable warnings. Every check
 * reports through Diag with the node's location and keeps going (a failed expression returns
 * false; its parents stay silent), until the error limit is passed. */
#include "ast.h"
#include "tilert.h" /* the launch contract's limits (TILERT_MAX_*), shared with the runtime */

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ state */

/* A block's declarations, in order (popped together; also walked for "did you mean"). */
typedef struct Scope {
  struct Scope *parent;
  AstDecl **v;
  int n, cap;
} Scope;

/* Every visible name, hashed: kernels may declare tens of thousands of lets, and a linear walk
 * of the scopes per lookup made checking quadratic. A name declared twice (after the
 * redeclaration error) has two entries; lookup takes the latest (highest id), as the scopes
 * would. */
typedef struct NameEntry {
  AstDecl *decl;
  struct NameEntry *next;  /* same bucket */
} NameEntry;

typedef struct NameTable {
  NameEntry **buckets;     /* nbuckets, a power of two */
  int nbuckets, count;
  NameEntry *free_list;    /* entries of popped scopes, reused */
} NameTable;

/* A shared tile, for the budget message. */
typedef struct SharedTile {
  const char *name;
  SrcLoc loc;
  TileType ty;
  int64_t bytes;
} SharedTile;

typedef struct Sema {
  Arena *a;
  Diag *d;
  AstKernel *k;
  GpuArch arch;
  const Define *defs;
  int ndefs;
  bool *def_used;          /* per define: matched a param or dim in some kernel */
  Scope *scope;
  NameTable names;         /* the visible declarations of scope and its parents */
  AstDecl **decls;         /* every decl of the kernel, by id */
  int ndecls, cap_decls;
  SharedTile *shared;
  int nshared, cap_shared;
  /* Expression context: 0 = kernel body; else the name of the launch construct
   * ("grid", "threads", "require", "parameter") where only dims and parameters may appear. */
  const char *launch_ctx;
  const AstExpr *shared_load; /* the value of the `shared` variable being checked: loaded
                                 straight into shared memory, never into registers */
  int depth;               /* statement nesting (require is top level only) */
  const AstExpr *stmt_call; /* the call that is a whole expression statement (atomics) */
} Sema;

static void check_cluster(Sema *S);
static bool check_cluster_reduce(Sema *S, AstExpr *e);

static void *grow(Arena *a, void *v, int n, int *cap, size_t elem) {
  if (n < *cap)
    return v;
  int ncap = *cap ? *cap * 2 : 8;
  void *p = arena_alloc(a, (size_t)ncap * elem);
  if (v)
    memcpy(p, v, (size_t)n * elem);
  *cap = ncap;
  return p;
}

#define ERR(S, loc, ...) diag_report((S)->d, DIAG_ERROR, (loc), __VA_ARGS__)
#define NOTE(S, loc, ...) diag_report((S)->d, DIAG_NOTE, (loc), __VA_ARGS__)
#define WARN(S, loc, ...) diag_report((S)->d, DIAG_WARNING, (loc), __VA_ARGS__)

static const char *tstr(Sema *S, const TileType *t) { return ast_type_str(S->a, t); }

static TileType scalar_ty(ElemType e) { return (TileType){.elem = e}; }

/* ------------------------------------------------------------------ scopes */

static uint32_t name_hash(const char *s) {
  uint32_t h = 2166136261u; /* FNV-1a */
  for (; *s; s++)
    h = (h ^ (unsigned char)*s) * 16777619u;
  return h;
}

static NameEntry **name_bucket(NameTable *t, const char *name) {
  return &t->buckets[name_hash(name) & (uint32_t)(t->nbuckets - 1)];
}

static void names_reset(Sema *S) { S->names = (NameTable){0}; }

static void names_add(Sema *S, AstDecl *d) {
  NameTable *t = &S->names;
  if (t->count >= t->nbuckets) { /* keep chains short: rehash into twice the buckets */
    int nb = t->nbuckets ? t->nbuckets * 2 : 64;
    NameEntry **old = t->buckets;
    int oldn = t->nbuckets;
    t->buckets = arena_alloc(S->a, (size_t)nb * sizeof *t->buckets);
    t->nbuckets = nb;
    for (int i = 0; i < oldn; i++)
      for (NameEntry *e = old[i], *next; e; e = next) {
        next = e->next;
        NameEntry **b = name_bucket(t, e->decl->name);
        e->next = *b;
        *b = e;
      }
  }
  NameEntry *e = t->free_list;
  if (e)
    t->free_list = e->next;
  else
    e = arena_alloc(S->a, sizeof *e);
  NameEntry **b = name_bucket(t, d->name);
  e->decl = d;
  e->next = *b;
  *b = e;
  t->count++;
}

static void names_remove(Sema *S, AstDecl *d) {
  NameTable *t = &S->names;
  for (NameEntry **p = name_bucket(t, d->name); *p; p = &(*p)->next)
    if ((*p)->decl == d) {
      NameEntry *e = *p;
      *p = e->next;
      e->next = t->free_list;
      t->free_list = e;
      t->count--;
      return;
    }
}

static void scope_push(Sema *S) {
  Scope *s = arena_alloc(S->a, sizeof *s);
  s->parent = S->scope;
  S->scope = s;
}

static void scope_pop(Sema *S) {
  Scope *s = S->scope;
  for (int i = s->n - 1; i >= 0; i--)
    names_remove(S, s->v[i]);
  S->scope = s->parent;
}

static AstDecl *lookup(Sema *S, const char *name) {
  if (!S->names.nbuckets)
    return NULL;
  AstDecl *best = NULL;
  for (NameEntry *e = *name_bucket(&S->names, name); e; e = e->next)
    if ((!best || e->decl->id > best->id) && !strcmp(e->decl->name, name))
      best = e->decl;
  return best;
}

static const char *decl_what(const AstDecl *d) {
  switch (d->kind) {
  case DECL_PARAM: return "parameter";
  case DECL_TYPE_PARAM: return "type parameter";
  case DECL_DIM: return "dimension";
  case DECL_SCALAR_ARG: return "scalar argument";
  case DECL_TENSOR_ARG: return "tensor argument";
  case DECL_VAR: return d->place == VAR_LET ? "'let' value" : d->place == VAR_REG ? "'reg' tile" : "'shared' tile";
  case DECL_LOOP: return "loop variable";
  case DECL_SOFTMAX: return "online_softmax state";
  }
  return "name";
}

/* Creates a declaration in the current scope; a name already visible is an error (no shadowing:
 * kernels are short, and a shadowed tile is more often a mistake than a wish). */
static AstDecl *declare(Sema *S, AstDeclKind kind, const char *name, SrcLoc loc, TileType ty) {
  AstDecl *prev = lookup(S, name);
  if (prev) {
    ERR(S, loc, "redeclaration of '%s'", name);
    NOTE(S, prev->loc, "previous declaration of '%s' (a %s) is here", name, decl_what(prev));
    prev->nuses++; /* later uses find the new one: no "unused" warning on top of the error */
  }
  AstDecl *d = arena_alloc(S->a, sizeof *d);
  d->kind = kind, d->name = name, d->loc = loc, d->ty = ty;
  d->id = S->ndecls;
  S->decls = grow(S->a, S->decls, S->ndecls, &S->cap_decls, sizeof *S->decls);
  S->decls[S->ndecls++] = d;
  Scope *sc = S->scope;
  sc->v = grow(S->a, sc->v, sc->n, &sc->cap, sizeof *sc->v);
  sc->v[sc->n++] = d;
  names_add(S, d);
  return d;
}

/* Edit distance <= 2 suggestion among visible names ("did you mean"). */
static int edit_distance(const char *a, const char *b) {
  size_t n = strlen(a), m = strlen(b);
  if (n > 32 || m > 32)
    return 99;
  int row[33];
  for (size_t j = 0; j <= m; j++)
    row[j] = (int)j;
  for (size_t i = 1; i <= n; i++) {
    int prev = row[0];
    row[0] = (int)i;
    for (size_t j = 1; j <= m; j++) {
      int cur = row[j];
      int best = prev + (a[i - 1] != b[j - 1]);
      if (row[j] + 1 < best)
        best = row[j] + 1;
      if (row[j - 1] + 1 < best)
        best = row[j - 1] + 1;
      row[j] = best;
      prev = cur;
    }
  }
  return row[m];
}

static const char *suggest_name(Sema *S, const char *name) {
  const char *best = NULL;
  int bestd = 3;
  for (Scope *s = S->scope; s; s = s->parent)
    for (int i = 0; i < s->n; i++) {
      int dist = edit_distance(name, s->v[i]->name);
      if (dist < bestd && dist < (int)strlen(name)) {
        bestd = dist;
        best = s->v[i]->name;
      }
    }
  return best;
}

static const char *suggest_builtin(const char *name) {
  const char *best = NULL;
  int bestd = 3;
  for (int i = 0; i < BI_COUNT; i++) {
    int dist = edit_distance(name, ast_builtin_name((AstBuiltin)i));
    if (dist < bestd) {
      bestd = dist;
      best = ast_builtin_name((AstBuiltin)i);
    }
  }
  return best;
}

/* ------------------------------------------------------------------ shapes */

/* numpy broadcasting of a and b into *out (elem untouched). On failure, *bad is the dim index
 * (counted in a's numbering from the right) that differs. */
static bool broadcast(const TileType *a, const TileType *b, TileType *out) {
  int r = a->rank > b->rank ? a->rank : b->rank;
  TileType t = *out;
  t.rank = r;
  for (int i = 0; i < r; i++) {
    int ia = a->rank - r + i, ib = b->rank - r + i;
    int32_t da = ia >= 0 ? a->dims[ia] : 1, db = ib >= 0 ? b->dims[ib] : 1;
    if (da != db && da != 1 && db != 1)
      return false;
    t.dims[i] = da == 1 ? db : da;
  }
  for (int i = r; i < TILE_MAX_RANK; i++)
    t.dims[i] = 0;
  *out = t;
  return true;
}

/* Whether a value of shape v broadcasts to exactly shape t. */
static bool broadcasts_to(const TileType *v, const TileType *t) {
  if (v->rank > t->rank)
    return false;
  for (int i = 0; i < v->rank; i++) {
    int32_t dv = v->dims[i], dt = t->dims[t->rank - v->rank + i];
    if (dv != dt && dv != 1)
      return false;
  }
  return true;
}

/* Elements of t with every dim rounded up to a power of two, as the GPU backend's layouts pad
 * it; saturates just above TILE_MAX_ELEMS (dims are at most 2^24, so no overflow). */
static int64_t padded_numel(const TileType *t) {
  int64_t n = 1;
  for (int i = 0; i < t->rank && n <= TILE_MAX_ELEMS; i++) {
    int64_t p = 1;
    while (p < t->dims[i])
      p *= 2;
    n *= p;
  }
  return n;
}

/* The per-tile element limit (TILE_MAX_ELEMS), reported at the expression or type that makes
 * the tile. */
static bool check_tile_size(Sema *S, const TileType *t, SrcLoc loc) {
  if (t->rank == 0 || padded_numel(t) <= TILE_MAX_ELEMS)
    return true;
  double n = 1, p = 1; /* exact enough for a message; int64 could overflow at rank 4 */
  for (int i = 0; i < t->rank; i++) {
    double pd = 1;
    while (pd < t->dims[i])
      pd *= 2;
    n *= t->dims[i];
    p *= pd;
  }
  char padded[96] = "";
  if (p != n)
    snprintf(padded, sizeof padded, " (%.0f with each dimension rounded up to a power of two)", p);
  ERR(S, loc, "tile %s is too large: %.0f elements%s, and a tile may have at most %d; use "
      "smaller tiles", tstr(S, t), n, padded, TILE_MAX_ELEMS);
  return false;
}

/* Whether e is the tensor read of `shared x = T[...]` (or of fill(T[...], v)): it goes from
 * global to shared memory in chunks, never through a thread's registers. */
static bool is_shared_load(const Sema *S, const AstExpr *e) {
  const AstExpr *v = S->shared_load;
  bool whole = v && (e == v || (v->kind == AST_CALL && v->builtin == BI_FILL && e == v->args[0]));
  if (!whole)
    return false;
  const AstExpr *sl = v->kind == AST_CALL ? v->args[0] : v; /* a window of a shared tile is a register tile */
  return sl->kind == AST_SLICE && sl->decl && sl->decl->kind == DECL_TENSOR_ARG;
}

/* The per-thread limit (TILE_MAX_ELEMS_PER_THREAD) of a register tile, once the thread count is
 * known: a thread's share is unrolled into straight-line code. */
static bool check_thread_share(Sema *S, const TileType *t, SrcLoc loc) {
  int threads = S->k->threads_value;
  if (t->rank == 0 || threads <= 0)
    return true;
  int64_t share = (padded_numel(t) + threads - 1) / threads;
  if (share <= TILE_MAX_ELEMS_PER_THREAD)
    return true;
  ERR(S, loc, "tile %s puts %lld elements on each of the %d threads, and at most %d per thread "
      "are supported (a thread's share becomes straight-line code whose compile time grows "
      "faster than its size, and it spills registers long before); use more threads per block "
      "(e.g. a larger WARPS) or smaller tiles", tstr(S, t), (long long)share, threads,
      TILE_MAX_ELEMS_PER_THREAD);
  return false;
}

/* ------------------------------------------------------------------ constants */

/* Integers are kept as exact doubles; i32 results must fit. */
static bool int_fits(double v) { return v >= -2147483648.0 && v <= 2147483647.0; }

static bool is_intval(double v) { return v == floor(v) && isfinite(v); }

/* Makes a constant adopt element type `to` (untyped constants only; typed ones must match).
 * int -> any numeric or bool (non-zero is true); float -> float types; bool -> bool. */
static bool adapt(Sema *S, AstExpr *e, ElemType to, SrcLoc where) {
  if (!e->untyped)
    return true;
  ElemType from = e->ty.elem;
  bool ok = from == to || (from == TY_I32 && to != TY_BOOL) ||
            (from == TY_I32 && to == TY_BOOL) || (from == TY_F32 && elem_is_float(to));
  if (!ok) {
    char num[64];
    if (from == TY_BOOL)
      snprintf(num, sizeof num, "%s", e->cval != 0 ? "true" : "false");
    else
      snprintf(num, sizeof num, "%g", e->cval);
    (void)where;
    ERR(S, e->loc, "%s constant %s cannot be used as %s",
        from == TY_BOOL ? "bool" : "float", num, elem_name(to));
    return false;
  }
  e->ty.elem = to;
  e->untyped = false;
  e->cval = to == TY_BOOL ? (e->cval != 0) : round_to_elem(to, e->cval);
  return true;
}

/* An untyped constant with no context takes its default type (int -> i32, float -> f32). */
static void settle(AstExpr *e) {
  if (e->untyped)
    e->untyped = false;
}

/* The folded integer of a compile-time expression, or an error naming `what`. */
static bool const_int(Sema *S, AstExpr *e, const char *what, int64_t *out) {
  if (!e->is_const || e->ty.rank != 0) {
    ERR(S, e->loc, "%s must be a compile-time constant (literals and parameters)", what);
    return false;
  }
  if (e->ty.elem != TY_I32 || !is_intval(e->cval)) {
    ERR(S, e->loc, "%s must be an integer, found %s", what,
        e->ty.elem == TY_BOOL ? "bool" : e->ty.elem == TY_I32 ? "a non-integer" : elem_name(e->ty.elem));
    return false;
  }
  *out = (int64_t)e->cval;
  return true;
}

static bool fold_arith(Sema *S, AstExpr *e, AstOp op, ElemType t, double x, double y, double *out) {
  bool isint = t == TY_I32;
  double r = 0;
  switch (op) {
  case OP_ADD: r = x + y; break;
  case OP_SUB: r = x - y; break;
  case OP_MUL: r = x * y; break;
  case OP_DIV:
    if (isint) {
      if (y == 0) {
        ERR(S, e->loc, "division by zero in a constant expression");
        return false;
      }
      r = (double)((int64_t)x / (int64_t)y);
    } else {
      r = x / y;
    }
    break;
  case OP_REM:
    if (y == 0) {
      ERR(S, e->loc, "division by zero in a constant expression");
      return false;
    }
    r = (double)((int64_t)x % (int64_t)y);
    break;
  case OP_LT: r = x < y; break;
  case OP_LE: r = x <= y; break;
  case OP_GT: r = x > y; break;
  case OP_GE: r = x >= y; break;
  case OP_EQ: r = x == y; break;
  case OP_NE: r = x != y; break;
  case OP_AND: r = (x != 0) && (y != 0); break;
  case OP_OR: r = (x != 0) || (y != 0); break;
  default: break;
  }
  if (isint && op <= OP_REM && !int_fits(r)) {
    ERR(S, e->loc, "integer overflow in a constant expression (the result does not fit in i32)");
    return false;
  }
  *out = r;
  return true;
}

/* ------------------------------------------------------------------ expressions */

static bool check_expr(Sema *S, AstExpr *e);

static bool is_cmp(AstOp op) { return op >= OP_LT && op <= OP_NE; }

/* An i32 division (/ % cdiv) by the constant 0 faults whatever the dividend: an error even when
 * the dividend is a run-time value (a constant one is reported by the fold). */
static bool check_divisor(Sema *S, const AstExpr *e, const AstExpr *x, const AstExpr *y) {
  if (x->ty.elem != TY_I32 || x->is_const || !y->is_const || y->cval != 0)
    return true;
  ERR(S, e->loc, "division by zero: the divisor is always 0");
  return false;
}

/* The i32 result of folding -x or abs(x): -2147483648 has no positive counterpart. */
static bool check_int_fold(Sema *S, const AstExpr *e, double v) {
  if (e->ty.elem != TY_I32 || int_fits(v))
    return true;
  ERR(S, e->loc, "integer overflow in a constant expression (the result does not fit in i32)");
  return false;
}

/* Brings two operands to a common element type (constants adapt) and checks that. `what` names
 * the operator for messages. */
static bool unify_elems(Sema *S, AstExpr *e, AstExpr *x, AstExpr *y, const char *what) {
  if (x->untyped && !y->untyped)
    return adapt(S, x, y->ty.elem, e->loc);
  if (y->untyped && !x->untyped)
    return adapt(S, y, x->ty.elem, e->loc);
  if (x->untyped && y->untyped) { /* both constants: int with float becomes float */
    if (x->ty.elem != y->ty.elem) {
      if (x->ty.elem == TY_BOOL || y->ty.elem == TY_BOOL) {
        ERR(S, e->loc, "operands of %s have different types: %s and %s", what, elem_name(x->ty.elem),
            elem_name(y->ty.elem));
        return false;
      }
      x->ty.elem = y->ty.elem = TY_F32;
    }
    return true;
  }
  if (x->ty.elem != y->ty.elem) {
    ERR(S, e->loc, "operands of %s have different element types: %s and %s (convert one with to_%s)",
        what, tstr(S, &x->ty), tstr(S, &y->ty), elem_name(x->ty.elem));
    return false;
  }
  return true;
}

/* After a failed broadcast of a lower-rank v against t: when v's dims are t's leading ones, v
 * was most likely meant per row (a dropped reduction axis, a slice of a rank-1 tensor), and numpy
 * rules line it up with t's trailing axes instead. */
static void note_rows(Sema *S, SrcLoc loc, const TileType *v, const TileType *t) {
  if (v->rank == 0 || v->rank >= t->rank)
    return;
  for (int i = 0; i < v->rank; i++)
    if (v->dims[i] != t->dims[i])
      return;
  NOTE(S, loc, "%s lines up with the last %s of %s (broadcasting aligns trailing axes); to use it "
       "per row, add the axis: expand_dims(v, %d), or keep a reduction's axis: sum(x, %d, keep)",
       tstr(S, v), v->rank == 1 ? "axis" : "axes", tstr(S, t), v->rank, v->rank);
}

static bool bcast_pair(Sema *S, AstExpr *e, const TileType *x, const TileType *y, TileType *out,
                       const char *what) {
  if (!broadcast(x, y, out)) {
    ERR(S, e->loc, "shapes of %s do not broadcast: %s and %s", what, tstr(S, x), tstr(S, y));
    note_rows(S, e->loc, x, y);
    note_rows(S, e->loc, y, x);
    return false;
  }
  return true;
}

/* A value that a reduction along axis a > 0 made by dropping that axis, broadcast to a larger
 * rank, would line up with the wrong axes (numpy aligns trailing ones): per-row statistics
 * become per-column ones, silently when the sizes happen to agree. */
static bool check_row_bcast(Sema *S, const AstExpr *v, int to_rank) {
  const AstExpr *r = v->row_reduce;
  if (!r || v->ty.rank >= to_rank)
    return true;
  ERR(S, v->loc, "%s comes from '%s' along axis %d, which drops that axis: broadcast to rank %d it "
      "would line up with the wrong axes; keep the axis, %s(x, %d, keep), or add it back, "
      "expand_dims(v, %d)", tstr(S, &v->ty), r->name, r->axis, to_rank, r->name, r->axis, r->axis);
  if (r != v)
    NOTE(S, r->loc, "the reduction is here");
  return false;
}

/* Before operands broadcast together: check_row_bcast of each against the largest rank. */
static bool check_rows(Sema *S, AstExpr *const *ops, int n) {
  int rank = 0;
  for (int i = 0; i < n; i++)
    rank = ops[i]->ty.rank > rank ? ops[i]->ty.rank : rank;
  for (int i = 0; i < n; i++)
    if (!check_row_bcast(S, ops[i], rank))
      return false;
  return true;
}

/* e stays per row when an operand of its shape is. */
static void inherit_rows(AstExpr *e, AstExpr *const *ops, int n) {
  for (int i = 0; i < n; i++)
    if (ops[i]->row_reduce && tile_same_shape(&ops[i]->ty, &e->ty))
      e->row_reduce = ops[i]->row_reduce;
}

static void mark_const(AstExpr *e, double v, bool untyped) {
  e->is_const = true;
  e->cval = v;
  e->untyped = untyped;
}

static bool check_binary(Sema *S, AstExpr *e) {
  AstExpr *x = e->args[0], *y = e->args[1];
  bool okx = check_expr(S, x), oky = check_expr(S, y);
  if (!okx || !oky)
    return false;
  char what[16];
  snprintf(what, sizeof what, "'%s'", ast_op_name(e->op));
  AstOp op = e->op;
  if (op == OP_AND || op == OP_OR) {
    if (!adapt(S, x, TY_BOOL, e->loc) || !adapt(S, y, TY_BOOL, e->loc))
      return false;
    if (x->ty.elem != TY_BOOL || y->ty.elem != TY_BOOL) {
      ERR(S, e->loc, "operands of %s must be bool, found %s and %s", what, tstr(S, &x->ty),
          tstr(S, &y->ty));
      return false;
    }
  } else {
    if (!unify_elems(S, e, x, y, what))
      return false;
    ElemType t = x->ty.elem;
    if (t == TY_BOOL && !(op == OP_EQ || op == OP_NE)) {
      ERR(S, e->loc, "operator %s does not take bool operands (use && || ! and where)", what);
      return false;
    }
    if (op == OP_REM && t != TY_I32) {
      ERR(S, e->loc, "operator '%%' needs i32 operands, found %s", elem_name(t));
      return false;
    }
  }
  TileType shape = {.elem = x->ty.elem};
  if (!check_rows(S, e->args, 2) || !bcast_pair(S, e, &x->ty, &y->ty, &shape, what))
    return false;
  e->opnd_ty = shape;
  e->ty = shape;
  inherit_rows(e, e->args, 2);
  if (is_cmp(op) || op == OP_AND || op == OP_OR)
    e->ty.elem = TY_BOOL;
  if ((op == OP_DIV || op == OP_REM) && !check_divisor(S, e, x, y))
    return false;
  if (x->is_const && y->is_const) {
    double v;
    if (!fold_arith(S, e, op, x->ty.elem, x->cval, y->cval, &v))
      return false;
    /* `1 / 2 * x` with x a float: C's integer division, the usual slip in a GELU or a mean */
    if (op == OP_DIV && x->kind == AST_INT && y->kind == AST_INT && v * y->cval != x->cval)
      WARN(S, e->loc, "'%lld / %lld' divides integers and is %lld; write '%lld.0 / %lld.0' for a fraction",
           (long long)x->cval, (long long)y->cval, (long long)v, (long long)x->cval, (long long)y->cval);
    if (!is_cmp(op) && op != OP_AND && op != OP_OR && !x->untyped)
      v = round_to_elem(x->ty.elem, v);
    mark_const(e, v, x->untyped && y->untyped);
  }
  return true;
}

static bool check_unary(Sema *S, AstExpr *e) {
  AstExpr *x = e->args[0];
  if (!check_expr(S, x))
    return false;
  if (e->op == OP_NOT) {
    if (!adapt(S, x, TY_BOOL, e->loc))
      return false;
    if (x->ty.elem != TY_BOOL) {
      ERR(S, e->loc, "operator '!' needs a bool operand, found %s", tstr(S, &x->ty));
      return false;
    }
  } else if (x->ty.elem == TY_BOOL) {
    ERR(S, e->loc, "unary '-' does not take a bool operand");
    return false;
  }
  e->ty = x->ty;
  e->row_reduce = x->row_reduce;
  if (x->is_const) {
    double v = e->op == OP_NOT ? !(x->cval != 0) : -x->cval;
    if (!check_int_fold(S, e, v))
      return false;
    mark_const(e, v, x->untyped);
  }
  return true;
}

/* Whether the expression may be used as a condition: a scalar bool after adaptation. */
static bool check_cond(Sema *S, AstExpr *c, const char *what) {
  if (!adapt(S, c, TY_BOOL, c->loc))
    return false;
  if (c->ty.elem != TY_BOOL || c->ty.rank != 0) {
    ERR(S, c->loc, "%s must be a scalar bool, found %s", what, tstr(S, &c->ty));
    return false;
  }
  return true;
}

static bool check_ternary(Sema *S, AstExpr *e) {
  bool ok = true;
  for (int i = 0; i < 3; i++)
    ok &= check_expr(S, e->args[i]);
  if (!ok)
    return false;
  AstExpr *c = e->args[0], *x = e->args[1], *y = e->args[2];
  if (!check_cond(S, c, "the condition of '?:'"))
    return false;
  if (!unify_elems(S, e, x, y, "'?:'"))
    return false;
  TileType shape = {.elem = x->ty.elem};
  if (!check_rows(S, e->args + 1, 2) || !bcast_pair(S, e, &x->ty, &y->ty, &shape, "'?:'"))
    return false;
  e->ty = e->opnd_ty = shape;
  inherit_rows(e, e->args + 1, 2);
  if (c->is_const && x->is_const && y->is_const)
    mark_const(e, c->cval != 0 ? x->cval : y->cval, x->untyped && y->untyped);
  return true;
}

static bool check_name(Sema *S, AstExpr *e) {
  AstDecl *d = lookup(S, e->name);
  if (!d) {
    const char *hint = suggest_name(S, e->name);
    if (hint)
      ERR(S, e->loc, "undeclared name '%s'; did you mean '%s'?", e->name, hint);
    else
      ERR(S, e->loc, "undeclared name '%s'", e->name);
    return false;
  }
  e->decl = d;
  d->nuses++;
  if (d->error)
    return false;
  if (d->kind == DECL_TYPE_PARAM) {
    ERR(S, e->loc, "'%s' is a type parameter: it names an element type, not a value (use it in a "
        "type, %s[N], or a conversion, to(%s, x))", e->name, e->name, e->name);
    return false;
  }
  if (S->launch_ctx && d->kind != DECL_PARAM && d->kind != DECL_DIM) {
    ERR(S, e->loc, "%s expressions may only use dimensions and parameters; '%s' is a %s",
        S->launch_ctx, e->name, decl_what(d));
    return false;
  }
  if (d->kind == DECL_TENSOR_ARG) {
    ERR(S, e->loc, "tensor argument '%s' must be sliced to be read (e.g. %s[i : +SIZE])", e->name,
        e->name);
    return false;
  }
  if (d->kind == DECL_SOFTMAX) {
    ERR(S, e->loc, "'%s' is an online_softmax state, not a value (use %s.max, %s.sum, %s.update(x) "
        "or %s.finish(acc))", e->name, e->name, e->name, e->name, e->name);
    return false;
  }
  e->ty = d->ty;
  e->row_reduce = d->row_reduce;
  if (d->is_const)
    mark_const(e, d->cval, d->untyped);
  return true;
}

static bool check_block_id(Sema *S, AstExpr *e) {
  const char *f = e->field;
  if (S->launch_ctx) {
    ERR(S, e->loc, "%s expressions may only use dimensions and parameters, not block.%s",
        S->launch_ctx, f);
    return false;
  }
  if (!strcmp(f, "x") || !strcmp(f, "y") || !strcmp(f, "z")) {
    e->axis = f[0] - 'x';
    e->ty = scalar_ty(TY_I32);
    return true;
  }
  ERR(S, e->field_loc, "unknown block index 'block.%s' (expected block.x, block.y or block.z)", f);
  return false;
}

/* A scalar i32 index (slice start, loop bound, index-tile start). */
static bool check_index(Sema *S, AstExpr *x, const char *what) {
  if (!check_expr(S, x))
    return false;
  if (!adapt(S, x, TY_I32, x->loc))
    return false;
  if (x->ty.elem != TY_I32 || x->ty.rank != 0) {
    ERR(S, x->loc, "%s must be a scalar i32, found %s", what, tstr(S, &x->ty));
    return false;
  }
  return true;
}

/* The folded S of a range `a : +S`, 1 .. 2^24. */
static bool slice_size(Sema *S, AstSliceItem *it) {
  int64_t sz;
  if (!check_expr(S, it->size_expr) || !const_int(S, it->size_expr, "a slice size", &sz))
    return false;
  if (sz <= 0 || sz > (1 << 24)) {
    ERR(S, it->size_expr->loc, "a slice size must be between 1 and 16777216, found %lld",
        (long long)sz);
    return false;
  }
  it->size = (int32_t)sz;
  return true;
}

/* A slice of tile d has one item per axis. */
static bool tile_slice_rank_ok(Sema *S, const AstExpr *e, const AstDecl *d) {
  if (e->nitems == d->ty.rank)
    return true;
  ERR(S, e->loc, "'%s' is %s, of rank %d, but the slice has %d %s", e->name, tstr(S, &d->ty),
      d->ty.rank, e->nitems, e->nitems == 1 ? "index" : "indices");
  NOTE(S, d->loc, "'%s' is declared here", e->name);
  return false;
}

/* One item of a tile's slice along an axis of size dim: ':', or a start and a size no larger than
 * the axis. A register tile's start is a constant (a box inside the tile); a shared tile's
 * window may start anywhere at run time (elements outside the tile read the fill: 0, or
 * fill()'s), but a constant start must put it inside. */
static bool check_tile_slice_item(Sema *S, const AstExpr *e, AstSliceItem *it, int axis, int32_t dim,
                                  bool window) {
  if (it->kind == SLICE_FULL) {
    it->size = dim;
    return true;
  }
  if (!check_index(S, it->start, "a slice index"))
    return false;
  if (!window && !it->start->is_const) {
    ERR(S, it->start->loc, "a slice of register tile '%s' needs a compile-time start (register "
        "tiles are sliced by constant ranges: 16 : +16, not i : +16)", e->name);
    return false;
  }
  it->size = 1;
  if (it->kind == SLICE_RANGE && !slice_size(S, it))
    return false;
  if (window && it->size > dim) {
    ERR(S, it->size_expr->loc, "a window of %d elements does not fit axis %d of shared tile '%s', "
        "which has size %d", (int)it->size, axis, e->name, (int)dim);
    return false;
  }
  int64_t a = (int64_t)it->start->cval;
  if (it->start->is_const && (a < 0 || a + it->size > dim)) {
    ERR(S, it->loc, "%lld : +%d is outside axis %d of '%s', which has size %d", (long long)a,
        (int)it->size, axis, e->name, (int)dim);
    return false;
  }
  return true;
}

/* x[items] of a tile, one item per axis: of a `reg` or `let` tile a constant box (TIR extract), of
 * a `shared` tile of rank 1 or 2 a window at run-time starts (TIR window). The result is the box,
 * a register tile, without the axes of scalar indices. */
static bool check_tile_slice(Sema *S, AstExpr *e, const AstDecl *d, bool window) {
  const TileType *xt = &d->ty;
  if (!tile_slice_rank_ok(S, e, d))
    return false;
  TileType t = {.elem = xt->elem};
  bool ok = true;
  for (int i = 0; i < e->nitems; i++) {
    AstSliceItem *it = &e->items[i];
    if (!check_tile_slice_item(S, e, it, i, xt->dims[i], window))
      ok = false;
    else if (it->kind != SLICE_INDEX)
      t.dims[t.rank++] = it->size;
  }
  e->ty = t;
  if (ok && window && xt->rank > 2) {
    ERR(S, e->loc, "'%s' is %s; only shared tiles of rank 1 or 2 can be sliced", e->name, tstr(S, xt));
    return false;
  }
  return ok;
}

/* Checks a slice T[items]; `store` when it is the target of a store (not a read). */
static bool check_slice(Sema *S, AstExpr *e, bool store) {
  if (S->launch_ctx) {
    ERR(S, e->loc, "%s expressions may only use dimensions and parameters, not tensor slices",
        S->launch_ctx);
    return false;
  }
  AstDecl *d = lookup(S, e->name);
  if (!d) {
    ERR(S, e->name_loc, "undeclared name '%s'", e->name);
    return false;
  }
  if (!store)
    d->nuses++;
  e->decl = d;
  if (d->error)
    return false;
  bool reg_tile = d->kind == DECL_VAR && d->place != VAR_SHARED && d->ty.rank > 0;
  if (reg_tile && store) {
    ERR(S, e->name_loc, "cannot store into a slice of register tile '%s'; assign the whole tile "
        "(e.g. %s = where(row_index(0, R) < 16, v, %s))", e->name, e->name, e->name);
    return false;
  }
  if (reg_tile)
    return check_tile_slice(S, e, d, false);
  bool shared_tile = d->kind == DECL_VAR && d->place == VAR_SHARED && d->ty.rank > 0;
  if (shared_tile)
    return check_tile_slice(S, e, d, true);
  if (d->kind != DECL_TENSOR_ARG) {
    ERR(S, e->name_loc, "'%s' is a %s%s; only tensor arguments and tiles ('reg', 'let', 'shared') "
        "can be sliced", e->name, d->kind == DECL_VAR && d->ty.rank == 0 ? "scalar " : "",
        decl_what(d));
    return false;
  }
  const AstArg *arg = &S->k->args[d->index];
  if (e->nitems != arg->rank) {
    ERR(S, e->loc, "tensor '%s' has rank %d but the slice has %d %s", e->name, arg->rank,
        e->nitems, e->nitems == 1 ? "index" : "indices");
    NOTE(S, arg->loc, "'%s' is declared here", e->name);
    return false;
  }
  TileType t = {.elem = arg->elem};
  bool ok = true;
  for (int i = 0; i < e->nitems; i++) {
    AstSliceItem *it = &e->items[i];
    const AstDim *dim = &S->k->dims[arg->dims[i]];
    if (it->kind == SLICE_FULL) {
      if (!dim->pinned && dim->derive) {
        ERR(S, it->loc, "':' takes the whole axis %d of '%s', %s, which is not known at compile "
            "time (pin the dims it uses with -D NAME=VALUE or write 'start : +SIZE')", i, e->name,
            dim->derive_text);
        ok = false;
        continue;
      }
      if (!dim->pinned) {
        ERR(S, it->loc, "':' takes the whole dimension '%s', which is not known at compile time "
            "(pin it with -D %s=VALUE or write 'start : +SIZE')", dim->name, dim->name);
        ok = false;
        continue;
      }
      it->size = (int32_t)dim->value;
      t.dims[t.rank++] = it->size;
      continue;
    }
    if (!check_index(S, it->start, "a slice index")) {
      ok = false;
      continue;
    }
    if (it->kind == SLICE_INDEX) {
      it->size = 1;
      continue;
    }
    if (!slice_size(S, it)) {
      ok = false;
      continue;
    }
    t.dims[t.rank++] = it->size;
  }
  if (!ok)
    return false;
  e->ty = t;
  return true;
}

static bool check_member(Sema *S, AstExpr *e) {
  if (S->launch_ctx) {
    ERR(S, e->loc, "%s expressions may only use dimensions and parameters", S->launch_ctx);
    return false;
  }
  AstDecl *d = lookup(S, e->name);
  if (!d) {
    ERR(S, e->name_loc, "undeclared name '%s'", e->name);
    return false;
  }
  e->decl = d;
  d->nuses++;
  if (d->kind != DECL_SOFTMAX) {
    ERR(S, e->name_loc, "'%s' is a %s; only online_softmax states have members", e->name,
        decl_what(d));
    return false;
  }
  if (e->kind == AST_MEMBER) {
    if (!strcmp(e->field, "max"))
      e->member = MEMBER_MAX;
    else if (!strcmp(e->field, "sum"))
      e->member = MEMBER_SUM;
    else {
      ERR(S, e->field_loc, "online_softmax state has no member '%s' (members: max, sum; methods: "
          "update, finish)", e->field);
      return false;
    }
    e->ty = d->ty;
    return true;
  }
  int rows = d->ty.dims[0];
  if (!strcmp(e->field, "update"))
    e->method = METHOD_UPDATE;
  else if (!strcmp(e->field, "finish"))
    e->method = METHOD_FINISH;
  else {
    ERR(S, e->field_loc, "online_softmax state has no method '%s' (methods: update, finish)",
        e->field);
    return false;
  }
  if (e->nargs != 1) {
    ERR(S, e->loc, "'%s.%s' takes 1 argument, found %d", e->name, e->field, e->nargs);
    return false;
  }
  AstExpr *x = e->args[0];
  if (!check_expr(S, x))
    return false;
  if (x->ty.elem != TY_F32 || x->ty.rank != 2 || x->ty.dims[0] != rows) {
    ERR(S, x->loc, "'%s.%s' needs an f32[%d, K] tile (rows = %d), found %s", e->name, e->field, rows,
        rows, tstr(S, &x->ty));
    return false;
  }
  e->ty = x->ty;
  return true;
}

/* Element-wise float math of one operand: exp log sqrt ... (abs also takes i32). */
static bool check_math1(Sema *S, AstExpr *e, AstExpr *x) {
  if (x->untyped && x->ty.elem == TY_I32)
    adapt(S, x, e->builtin == BI_ABS ? TY_I32 : TY_F32, e->loc);
  bool ok = elem_is_float(x->ty.elem) || (e->builtin == BI_ABS && x->ty.elem == TY_I32);
  if (!ok) {
    ERR(S, e->loc, "'%s' needs a float operand (f32, f16 or bf16), found %s", e->name,
        tstr(S, &x->ty));
    return false;
  }
  e->ty = x->ty;
  e->row_reduce = x->row_reduce;
  if (x->is_const) {
    double v = x->cval, r = v;
    switch (e->builtin) {
    case BI_EXP: r = exp(v); break;
    case BI_EXP2: r = exp2(v); break;
    case BI_LOG: r = log(v); break;
    case BI_SQRT: r = sqrt(v); break;
    case BI_RSQRT: r = 1.0 / sqrt(v); break;
    case BI_TANH: r = tanh(v); break;
    case BI_ERF: r = erf(v); break;
    case BI_SIGMOID: r = 1.0 / (1.0 + exp(-v)); break;
    case BI_ABS: r = fabs(v); break;
    default: break;
    }
    if (!check_int_fold(S, e, r))
      return false;
    mark_const(e, x->untyped ? r : round_to_elem(x->ty.elem, r), x->untyped);
  }
  return true;
}

static bool check_reduce(Sema *S, AstExpr *e) {
  AstExpr *x = e->args[0], *ax = e->args[1];
  if (!ax->is_const || ax->ty.elem != TY_I32 || ax->ty.rank != 0) {
    ERR(S, ax->loc, "the axis of '%s' must be a compile-time integer%s", e->name,
        e->builtin == BI_SUM ? ""
        : e->builtin == BI_MAX ? " (for the element-wise maximum of two values use maximum(a, b))"
                               : " (for the element-wise minimum of two values use minimum(a, b))");
    return false;
  }
  if (x->ty.rank == 0) {
    ERR(S, x->loc, "'%s' reduces a tile along an axis; its operand is a scalar (%s)", e->name,
        tstr(S, &x->ty));
    return false;
  }
  if (x->ty.elem == TY_BOOL) {
    ERR(S, x->loc, "'%s' does not take bool tiles", e->name);
    return false;
  }
  int64_t axis = (int64_t)ax->cval;
  if (axis < 0 || axis >= x->ty.rank) {
    ERR(S, ax->loc, "reduction axis %lld is out of range for %s (rank %d: axis 0..%d)",
        (long long)axis, tstr(S, &x->ty), x->ty.rank, x->ty.rank - 1);
    return false;
  }
  e->axis = (int)axis;
  e->ty = x->ty;
  e->ty.dims[axis] = 1;
  if (e->keep)
    return true;
  for (int i = (int)axis; i + 1 < x->ty.rank; i++)
    e->ty.dims[i] = x->ty.dims[i + 1];
  e->ty.dims[--e->ty.rank] = 0;
  e->row_reduce = axis > 0 ? e : NULL;
  return true;
}

/* `sum(x, 1, keep)`: the third argument is the word `keep`, not a name to look up. */
static bool take_keep(Sema *S, AstExpr *e) {
  if (e->nargs < 3)
    return true;
  AstExpr *k = e->args[2];
  e->nargs = 2;
  if (k->kind == AST_NAME && !strcmp(k->name, "keep")) {
    e->keep = true;
    return true;
  }
  ERR(S, k->loc, "the third argument of '%s' can only be 'keep' (%s(x, axis, keep) keeps the "
      "reduced axis with size 1)", e->name, e->name);
  return false;
}

/* squeeze(x, axis) drops an axis of size 1; expand_dims(x, axis) inserts one before `axis`
 * (0..rank). The elements and their order stay: only the shape is relabeled. */
static bool check_reshape(Sema *S, AstExpr *e) {
  AstExpr *x = e->args[0], *ax = e->args[1];
  bool squeeze = e->builtin == BI_SQUEEZE;
  if (!ax->is_const || ax->ty.elem != TY_I32 || ax->ty.rank != 0) {
    ERR(S, ax->loc, "the axis of '%s' must be a compile-time integer", e->name);
    return false;
  }
  settle(x);
  int rank = x->ty.rank, hi = squeeze ? rank - 1 : rank;
  if (squeeze && rank == 0) {
    ERR(S, x->loc, "'squeeze' removes an axis of a tile; its operand is a scalar (%s)", tstr(S, &x->ty));
    return false;
  }
  int64_t axis = (int64_t)ax->cval;
  if (axis < 0 || axis > hi) {
    ERR(S, ax->loc, "'%s' axis %lld is out of range for %s (axis 0..%d)", e->name, (long long)axis,
        tstr(S, &x->ty), hi);
    return false;
  }
  if (squeeze && x->ty.dims[axis] != 1) {
    ERR(S, ax->loc, "'squeeze' removes an axis of size 1, but axis %lld of %s has size %d (to reduce "
        "it, sum(x, %lld) drops the axis by itself)", (long long)axis, tstr(S, &x->ty), (int)x->ty.dims[axis],
        (long long)axis);
    return false;
  }
  if (!squeeze && rank == TILE_MAX_RANK) {
    ERR(S, x->loc, "'expand_dims' would give %s a fifth dimension (tiles have rank 4 at most)",
        tstr(S, &x->ty));
    return false;
  }
  e->axis = (int)axis;
  e->ty = (TileType){.elem = x->ty.elem, .rank = squeeze ? rank - 1 : rank + 1};
  for (int i = 0, j = 0; i < e->ty.rank; i++) {
    if (!squeeze && i == axis) {
      e->ty.dims[i] = 1;
      continue;
    }
    if (squeeze && j == axis)
      j++;
    e->ty.dims[i] = x->ty.dims[j++];
  }
  return true;
}

static bool check_dot(Sema *S, AstExpr *e) {
  AstExpr *x = e->args[0], *y = e->args[1];
  if (x->ty.rank != 2 || y->ty.rank != 2) {
    AstExpr *bad = x->ty.rank != 2 ? x : y;
    ERR(S, bad->loc, "'dot' needs 2-D tiles, found %s", tstr(S, &bad->ty));
    return false;
  }
  if (x->ty.elem != y->ty.elem) {
    ERR(S, e->loc, "operands of 'dot' have different element types: %s and %s", tstr(S, &x->ty),
        tstr(S, &y->ty));
    return false;
  }
  if (!elem_is_float(x->ty.elem)) {
    ERR(S, e->loc, "'dot' takes f16, bf16 or f32 tiles, found %s", tstr(S, &x->ty));
    return false;
  }
  if (x->ty.dims[1] != y->ty.dims[0]) {
    ERR(S, e->loc, "inner dimensions of 'dot' differ: %s x %s (%d vs %d)", tstr(S, &x->ty),
        tstr(S, &y->ty), x->ty.dims[1], y->ty.dims[0]);
    return false;
  }
  e->ty = (TileType){.elem = TY_F32, .rank = 2, .dims = {x->ty.dims[0], y->ty.dims[1]}};
  return true;
}

static bool check_index_tile(Sema *S, AstExpr *e) {
  if (!check_index(S, e->args[0], "the start of an index tile"))
    return false;
  int64_t n;
  if (!const_int(S, e->args[1], "the size of an index tile", &n))
    return false;
  if (n <= 0 || n > (1 << 24)) {
    ERR(S, e->args[1]->loc, "the size of an index tile must be between 1 and 16777216, found %lld",
        (long long)n);
    return false;
  }
  if (e->builtin == BI_INDEX)
    e->ty = (TileType){.elem = TY_I32, .rank = 1, .dims = {(int32_t)n}};
  else if (e->builtin == BI_ROW_INDEX)
    e->ty = (TileType){.elem = TY_I32, .rank = 2, .dims = {(int32_t)n, 1}};
  else
    e->ty = (TileType){.elem = TY_I32, .rank = 2, .dims = {1, (int32_t)n}};
  return true;
}

static bool check_cvt(Sema *S, AstExpr *e, AstExpr *x) {
  ElemType to = e->builtin == BI_TO_F32 ? TY_F32 : e->builtin == BI_TO_F16 ? TY_F16
                : e->builtin == BI_TO_BF16 ? TY_BF16 : TY_I32;
  settle(x);
  e->ty = x->ty;
  e->ty.elem = to;
  e->row_reduce = x->row_reduce;
  if (x->is_const) {
    double v = x->cval;
    if (to == TY_I32) {
      v = trunc(v);
      if (!int_fits(v)) {
        ERR(S, e->loc, "constant %g does not fit in i32", x->cval);
        return false;
      }
    }
    mark_const(e, round_to_elem(to, v), false);
  }
  return true;
}

/* maximum / minimum / cdiv: two operands, element-wise, broadcasting. */
static bool check_elem2(Sema *S, AstExpr *e) {
  AstExpr *x = e->args[0], *y = e->args[1];
  char what[32];
  snprintf(what, sizeof what, "'%s'", e->name);
  if (!unify_elems(S, e, x, y, what))
    return false;
  if (x->ty.elem == TY_BOOL) {
    ERR(S, e->loc, "%s does not take bool operands", what);
    return false;
  }
  if (e->builtin == BI_CDIV && x->ty.elem != TY_I32) {
    ERR(S, e->loc, "'cdiv' needs i32 operands, found %s", elem_name(x->ty.elem));
    return false;
  }
  TileType shape = {.elem = x->ty.elem};
  if (!check_rows(S, e->args, 2) || !bcast_pair(S, e, &x->ty, &y->ty, &shape, what))
    return false;
  e->ty = e->opnd_ty = shape;
  inherit_rows(e, e->args, 2);
  if (e->builtin == BI_CDIV && !check_divisor(S, e, x, y))
    return false;
  if (x->is_const && y->is_const) {
    double a = x->cval, b = y->cval, r;
    if (e->builtin == BI_MAXIMUM)
      r = a > b ? a : b;
    else if (e->builtin == BI_MINIMUM)
      r = a < b ? a : b;
    else {
      if (b == 0) {
        ERR(S, e->loc, "division by zero in a constant expression");
        return false;
      }
      r = floor(a / b) == a / b ? a / b : floor(a / b) + 1;
      if (b < 0 || a < 0)
        r = (double)(((int64_t)a + (int64_t)b - 1) / (int64_t)b);
    }
    mark_const(e, r, x->untyped && y->untyped);
  }
  return true;
}

static bool check_where(Sema *S, AstExpr *e) {
  AstExpr *c = e->args[0], *x = e->args[1], *y = e->args[2];
  if (!adapt(S, c, TY_BOOL, c->loc))
    return false;
  if (c->ty.elem != TY_BOOL) {
    ERR(S, c->loc, "the condition of 'where' must be bool, found %s", tstr(S, &c->ty));
    return false;
  }
  if (!unify_elems(S, e, x, y, "'where'"))
    return false;
  TileType shape = {.elem = x->ty.elem}, shape2 = shape;
  if (!check_rows(S, e->args, 3) || !bcast_pair(S, e, &x->ty, &y->ty, &shape, "'where'"))
    return false;
  if (!bcast_pair(S, e, &c->ty, &shape, &shape2, "'where'"))
    return false;
  shape2.elem = x->ty.elem;
  e->ty = e->opnd_ty = shape2;
  inherit_rows(e, e->args + 1, 2);
  if (c->is_const && x->is_const && y->is_const)
    mark_const(e, c->cval != 0 ? x->cval : y->cval, x->untyped && y->untyped);
  return true;
}

static bool check_fill(Sema *S, AstExpr *e) {
  AstExpr *sl = e->args[0], *v = e->args[1];
  if (sl->kind != AST_SLICE) {
    ERR(S, sl->loc, "the first argument of 'fill' must be a tensor slice (fill(T[...], value))");
    return false;
  }
  if (!check_expr(S, sl) || !check_expr(S, v))
    return false;
  if (sl->decl->kind != DECL_TENSOR_ARG && sl->decl->place != VAR_SHARED) {
    ERR(S, sl->loc, "'fill' pads a tensor or shared tile slice; '%s' is a register tile, and its "
        "slices have no outside to pad", sl->name);
    return false;
  }
  if (!v->is_const || v->ty.rank != 0) {
    ERR(S, v->loc, "the fill value must be a compile-time scalar constant");
    return false;
  }
  if (!adapt(S, v, sl->ty.elem, v->loc))
    return false;
  if (v->ty.elem != sl->ty.elem) {
    ERR(S, v->loc, "the fill value has type %s but the tensor holds %s", elem_name(v->ty.elem),
        elem_name(sl->ty.elem));
    return false;
  }
  e->ty = sl->ty;
  return true;
}

static bool resolve_elem(Sema *S, const char *name, SrcLoc loc, ElemType *out);
static bool check_write(Sema *S, AstExpr *v, const TileType *t, const char *what, const char *name);

/* `atomic_add(T[...], v);` and `atomic_max(T[...], v);`: a store that combines with what is
 * there, so only as a statement, to an `out` tensor, of a type the hardware updates in place. */
static bool check_atomic(Sema *S, AstExpr *e) {
  AstExpr *sl = e->args[0], *v = e->args[1];
  /* Both operands first (a first argument that is no slice is not checked as a value: it is not
   * read, and "must be sliced to be read" would mislead). */
  bool ok = sl->kind == AST_SLICE ? check_slice(S, sl, true) : true;
  ok &= check_expr(S, v);
  if (S->stmt_call != e) {
    ERR(S, e->loc, "'%s' updates memory and has no value; use it as a statement: %s(T[...], "
        "value);", e->name, e->name);
    return false;
  }
  if (sl->kind != AST_SLICE) {
    ERR(S, sl->loc, "the first argument of '%s' must be a tensor slice (%s(T[...], value))",
        e->name, e->name);
    return false;
  }
  if (!ok)
    return false;
  if (sl->decl->kind != DECL_TENSOR_ARG) {
    ERR(S, sl->name_loc, "'%s' updates a tensor in global memory; '%s' is a shared tile (write "
        "its window with %s[...] = v)", e->name, sl->name, sl->name);
    return false;
  }
  const AstArg *arg = &S->k->args[sl->decl->index];
  if (!arg->is_out) {
    ERR(S, sl->name_loc, "'%s' writes to '%s', which is not declared 'out'", e->name, sl->name);
    NOTE(S, arg->loc, "declare it as '%s: out %s[...]'", sl->name, elem_name(arg->elem));
    return false;
  }
  ElemType t = arg->elem;
  bool is_add = e->builtin == BI_ATOMIC_ADD;
  if (t == TY_BOOL || (!is_add && t != TY_I32 && t != TY_F32)) {
    ERR(S, sl->name_loc, "'%s' takes %s tensors; '%s' holds %s", e->name,
        is_add ? "f32, f16, bf16 or i32" : "f32 or i32", sl->name, elem_name(t));
    return false;
  }
  e->ty = sl->ty;
  return check_write(S, v, &sl->ty, "tensor", sl->name);
}

/* `to(T, x)`: T is an element type name or a type parameter. The node becomes the concrete cast
 * (to_f32, to_f16, to_bf16, to_i32) so nothing after sema sees a type name. */
static bool check_to(Sema *S, AstExpr *e) {
  AstExpr *t = e->args[0];
  if (t->kind != AST_NAME) {
    ERR(S, t->loc, "the first argument of 'to' must be an element type (f32, f16, bf16 or i32) or "
        "a type parameter");
    return false;
  }
  ElemType to;
  if (!resolve_elem(S, t->name, t->loc, &to))
    return false;
  static const AstBuiltin cast[TY_COUNT] = {
      [TY_BOOL] = BI_COUNT, [TY_I32] = BI_TO_I32, [TY_F16] = BI_TO_F16, [TY_BF16] = BI_TO_BF16,
      [TY_F32] = BI_TO_F32};
  if (cast[to] == BI_COUNT) {
    ERR(S, t->loc, "'to' cannot convert to %s (compare with a value instead, e.g. x != 0)",
        elem_name(to));
    return false;
  }
  e->builtin = cast[to];
  e->name = ast_builtin_name(cast[to]);
  e->args = &e->args[1];
  e->nargs = 1;
  return true;
}

/* Functions of other languages that this one writes with its builtins: how, instead of a "did
 * you mean" that would change the maths (mean -> max, pow -> log, sin -> min). */
static const struct {
  const char *name, *how;
} composed_builtins[] = {
    {"mean", "divide a sum by the count: 'sum(x, 1, keep) / to_f32(N)'"},
    {"pow", "multiply ('x * x'), or write 'exp(y * log(x))' for x > 0"},
    {"relu", "write 'maximum(x, 0.0)'"},
    {"silu", "write 'x * sigmoid(x)'"},
    {"gelu", "write it with tanh: '0.5 * x * (1.0 + tanh(0.7978845608 * (x + 0.044715 * x * x * x)))', "
             "or erf: '0.5 * x * (1.0 + erf(x * 0.7071067812))'"},
    {"softmax", "write 'exp(x - max(x, 1, keep))' and divide by its 'sum(..., 1, keep)'"},
    {"clamp", "write 'minimum(maximum(x, lo), hi)'"},
    {"argmax", "take the max, then the first index that holds it: with m = max(x, 0, keep), "
               "'min(where(x == m, index(0, n), 2147483647), 0)' (col_index for a row of a 2-D tile)"},
    {"sin", "there are no trigonometric functions"},
    {"cos", "there are no trigonometric functions"},
};

static bool check_call(Sema *S, AstExpr *e) {
  AstBuiltin b;
  if (!ast_builtin_from_name(e->name, &b)) {
    const char *hint = suggest_builtin(e->name);
    for (size_t i = 0; i < sizeof composed_builtins / sizeof composed_builtins[0]; i++)
      if (!strcmp(e->name, composed_builtins[i].name)) {
        ERR(S, e->name_loc, "there is no function '%s': %s", e->name, composed_builtins[i].how);
        return false;
      }
    if (hint)
      ERR(S, e->name_loc, "unknown function '%s'; did you mean '%s'?", e->name, hint);
    else
      ERR(S, e->name_loc, "unknown function '%s'", e->name);
    return false;
  }
  e->builtin = b;
  static const struct { int lo, hi; } arity[BI_COUNT] = {
#define X(en, name, lo, hi) [en] = {lo, hi},
      AST_BUILTINS(X)
#undef X
  };
  if (e->nargs < arity[b].lo || e->nargs > arity[b].hi) {
    if (arity[b].lo != arity[b].hi)
      ERR(S, e->loc, "'%s' takes %d or %d arguments, found %d", e->name, arity[b].lo, arity[b].hi,
          e->nargs);
    else
      ERR(S, e->loc, "'%s' takes %d argument%s, found %d", e->name, arity[b].lo,
          arity[b].lo == 1 ? "" : "s", e->nargs);
    return false;
  }
  if (S->launch_ctx && b != BI_CDIV && b != BI_MAXIMUM && b != BI_MINIMUM) {
    ERR(S, e->name_loc, "'%s' is not allowed in %s expressions (only cdiv, minimum, maximum)",
        e->name, S->launch_ctx);
    return false;
  }
  if (b == BI_FILL)
    return check_fill(S, e);
  if (b == BI_ATOMIC_ADD || b == BI_ATOMIC_MAX)
    return check_atomic(S, e);
  if (b == BI_TO) {
    if (!check_to(S, e))
      return false;
    b = e->builtin;
  }
  if ((b == BI_SUM || b == BI_MAX || b == BI_MIN) && !take_keep(S, e))
    return false;
  bool ok = true;
  for (int i = 0; i < e->nargs; i++)
    ok &= check_expr(S, e->args[i]);
  if (!ok)
    return false;
  switch (b) {
  case BI_MAXIMUM:
  case BI_MINIMUM:
  case BI_CDIV:
    return check_elem2(S, e);
  case BI_WHERE:
    return check_where(S, e);
  case BI_TO_F32:
  case BI_TO_F16:
  case BI_TO_BF16:
  case BI_TO_I32:
    return check_cvt(S, e, e->args[0]);
  case BI_ROW_INDEX:
  case BI_COL_INDEX:
  case BI_INDEX:
    return check_index_tile(S, e);
  case BI_SUM:
  case BI_MAX:
  case BI_MIN:
    return check_reduce(S, e);
  case BI_DOT:
    return check_dot(S, e);
  case BI_SQUEEZE:
  case BI_EXPAND_DIMS:
    return check_reshape(S, e);
  case BI_CLUSTER_SUM:
  case BI_CLUSTER_MAX:
    return check_cluster_reduce(S, e);
  case BI_TRANS: {
    AstExpr *x = e->args[0];
    if (x->ty.rank != 2) {
      ERR(S, x->loc, "'trans' needs a 2-D tile, found %s", tstr(S, &x->ty));
      return false;
    }
    e->ty = x->ty;
    e->ty.dims[0] = x->ty.dims[1];
    e->ty.dims[1] = x->ty.dims[0];
    return true;
  }
  default:
    return check_math1(S, e, e->args[0]);
  }
}

static bool check_expr_kind(Sema *S, AstExpr *e) {
  switch (e->kind) {
  case AST_INT:
    e->ty = scalar_ty(TY_I32);
    mark_const(e, e->cval, true);
    return true;
  case AST_FLOAT:
    e->ty = scalar_ty(TY_F32);
    mark_const(e, e->cval, true);
    return true;
  case AST_BOOL:
    e->ty = scalar_ty(TY_BOOL);
    mark_const(e, e->cval, true);
    return true;
  case AST_NAME: return check_name(S, e);
  case AST_BLOCK_ID: return check_block_id(S, e);
  case AST_UNARY: return check_unary(S, e);
  case AST_BINARY: return check_binary(S, e);
  case AST_TERNARY: return check_ternary(S, e);
  case AST_CALL: return check_call(S, e);
  case AST_SLICE: return check_slice(S, e, false);
  case AST_MEMBER:
  case AST_METHOD: return check_member(S, e);
  }
  return false;
}

static bool check_expr(Sema *S, AstExpr *e) {
  if (!check_expr_kind(S, e))
    return false;
  /* The operands' common shape (opnd_ty) is a tile too, and may be larger than either one. */
  if (!check_tile_size(S, &e->ty, e->loc) ||
      (e->opnd_ty.rank != 0 && !check_tile_size(S, &e->opnd_ty, e->loc)))
    return false;
  /* A name's tile was checked where it was declared (a shared one is no register tile). */
  if (e->kind == AST_NAME || is_shared_load(S, e))
    return true;
  return check_thread_share(S, &e->ty, e->loc) &&
         (e->opnd_ty.rank == 0 || check_thread_share(S, &e->opnd_ty, e->loc));
}

/* ------------------------------------------------------------------ launch expressions */

/* Grid and require expressions travel to the runtime as RPN text (docs/architecture.md,
 * "Kernel metadata"), within its limits: TILERT_MAX_EXPR_TOKENS tokens and TILERT_MAX_EXPR
 * bytes. Parameters are folded to literals by now. */
typedef struct Rpn {
  char buf[TILERT_MAX_EXPR];
  size_t len;              /* of the whole text, even past the buffer */
  int ntok;
} Rpn;

static void rpn_put(Rpn *r, const char *tok) {
  size_t n = strlen(tok) + (r->len > 0);
  if (r->len + n < sizeof r->buf)
    snprintf(r->buf + r->len, sizeof r->buf - r->len, "%s%s", r->len ? " " : "", tok);
  r->len += n;
  r->ntok++;
}

static const char *rpn_binop(AstOp op) {
  static const char *names[] = {[OP_ADD] = "+", [OP_SUB] = "-", [OP_MUL] = "*", [OP_DIV] = "/",
                                [OP_REM] = "%", [OP_LT] = "<",  [OP_LE] = "<=", [OP_GT] = ">",
                                [OP_GE] = ">=", [OP_EQ] = "==", [OP_NE] = "!=", [OP_AND] = "&&",
                                [OP_OR] = "||"};
  return op <= OP_OR ? names[op] : NULL;
}

static const char *rpn_call(AstBuiltin b) {
  return b == BI_CDIV ? "cdiv" : b == BI_MAXIMUM ? "max" : b == BI_MINIMUM ? "min" : NULL;
}

/* Appends e in RPN; false after reporting what the runtime cannot evaluate. */
static bool rpn_expr(Sema *S, Rpn *r, const AstExpr *e) {
  if (e->is_const) {
    if (!is_intval(e->cval)) {
      ERR(S, e->loc, "launch expressions must be integers, found %g", e->cval);
      return false;
    }
    char num[32];
    snprintf(num, sizeof num, "%lld", (long long)e->cval);
    rpn_put(r, num);
    return true;
  }
  bool ok = false;
  if (e->kind == AST_NAME && e->decl->kind == DECL_DIM) {
    rpn_put(r, e->decl->name);
    return true;
  }
  if (e->kind == AST_BINARY && rpn_binop(e->op))
    ok = rpn_expr(S, r, e->args[0]) && rpn_expr(S, r, e->args[1]);
  else if (e->kind == AST_UNARY && e->op == OP_NEG) {
    rpn_put(r, "0");
    ok = rpn_expr(S, r, e->args[0]);
  } else if (e->kind == AST_UNARY)
    ok = rpn_expr(S, r, e->args[0]);
  else if (e->kind == AST_CALL && rpn_call(e->builtin) && e->nargs == 2)
    ok = rpn_expr(S, r, e->args[0]) && rpn_expr(S, r, e->args[1]);
  else {
    ERR(S, e->loc, "this launch expression may only use dims, parameters, literals, + - * / %%, "
        "comparisons, && || !, cdiv, minimum, maximum");
    return false;
  }
  if (ok)
    rpn_put(r, e->kind == AST_BINARY  ? rpn_binop(e->op)
               : e->kind == AST_UNARY ? (e->op == OP_NEG ? "-" : "!")
                                      : rpn_call(e->builtin));
  return ok;
}

/* The source text of loc for messages: comments dropped, blanks and line breaks one space, so it
 * is one line of plain tokens (the language has no string literals). */
static const char *clean_text(Sema *S, SrcLoc loc) {
  size_t n;
  const char *src = diag_span(S->d, loc, &n);
  if (!src)
    return NULL;
  char *out = arena_alloc(S->a, n + 1);
  size_t j = 0;
  for (size_t i = 0; i < n; i++) {
    if (src[i] == '/' && i + 1 < n && (src[i + 1] == '/' || src[i + 1] == '*')) {
      const char *close = src[i + 1] == '/' ? "\n" : "*/";
      while (i < n && strncmp(src + i, close, strlen(close)))
        i++;
      i += strlen(close) - 1;
      out[j++] = ' ';
    } else {
      out[j++] = isspace((unsigned char)src[i]) ? ' ' : src[i];
    }
    if (j >= 2 && out[j - 1] == ' ' && out[j - 2] == ' ')
      j--;
  }
  while (j > 0 && out[j - 1] == ' ')
    j--;
  out[j] = '\0';
  return out;
}

/* Turns a checked grid or require expression (what: "grid", "require") into the runtime's form. */
static bool launch_rpn(Sema *S, const AstExpr *e, const char *what, TirExpr *out) {
  Rpn r = {.len = 0};
  if (!rpn_expr(S, &r, e))
    return false;
  if (r.ntok > TILERT_MAX_EXPR_TOKENS || r.len >= TILERT_MAX_EXPR) {
    ERR(S, e->loc, "this %s expression is too long for the runtime: %d tokens and %zu characters "
        "in its RPN form, and at most %d tokens and %d characters are supported; simplify it",
        what, r.ntok, r.len, TILERT_MAX_EXPR_TOKENS, TILERT_MAX_EXPR - 1);
    return false;
  }
  const char *text = clean_text(S, e->loc);
  *out = (TirExpr){.rpn = arena_strndup(S->a, r.buf, r.len), .loc = e->loc};
  out->text = text && *text ? text : out->rpn;
  return true;
}

/* ------------------------------------------------------------------ statements */

static bool resolve_elem(Sema *S, const char *name, SrcLoc loc, ElemType *out) {
  AstDecl *d = lookup(S, name);
  if (d && d->kind == DECL_TYPE_PARAM) {
    d->nuses++;
    *out = d->ty.elem;
    return !d->error;
  }
  if (elem_from_name(name, out))
    return true;
  if (d) {
    ERR(S, loc, "'%s' is a %s, not an element type (expected f32, f16, bf16, i32, bool or a type "
        "parameter)", name, decl_what(d));
    return false;
  }
  if (!strncmp(name, "fp8", 3) || !strncmp(name, "f8", 2) || !strcmp(name, "e4m3") ||
      !strcmp(name, "e5m2"))
    ERR(S, loc, "element type '%s' is reserved for fp8 and not supported yet", name);
  else
    ERR(S, loc, "unknown element type '%s' (expected f32, f16, bf16, i32 or bool)", name);
  return false;
}

/* The type written in `reg x: f32[BM, D] = ...`: dims compile-time positive. */
static bool resolve_var_type(Sema *S, AstTypeSpec *ts, TileType *out) {
  TileType t = {0};
  if (!resolve_elem(S, ts->elem_name, ts->loc, &t.elem))
    return false;
  if (ts->is_out) {
    ERR(S, ts->loc, "'out' is only for tensor arguments");
    return false;
  }
  if (ts->ndims > TILE_MAX_RANK) {
    ERR(S, ts->loc, "a tile has at most %d dimensions, found %d", TILE_MAX_RANK, ts->ndims);
    return false;
  }
  for (int i = 0; i < ts->ndims; i++) {
    int64_t n;
    if (!check_expr(S, ts->dims[i]) || !const_int(S, ts->dims[i], "a tile dimension", &n))
      return false;
    if (n <= 0 || n > (1 << 24)) {
      ERR(S, ts->dims[i]->loc, "a tile dimension must be between 1 and 16777216, found %lld",
          (long long)n);
      return false;
    }
    t.dims[t.rank++] = (int32_t)n;
  }
  if (!check_tile_size(S, &t, ts->loc))
    return false;
  *out = t;
  return true;
}

/* A value written into a target of type t (declared variable, assignment, store). */
static bool check_write(Sema *S, AstExpr *v, const TileType *t, const char *what, const char *name) {
  if (!adapt(S, v, t->elem, v->loc))
    return false;
  if (v->ty.elem != t->elem) {
    ERR(S, v->loc, "%s '%s' holds %s but the value is %s (convert it with to_%s)", what, name,
        elem_name(t->elem), tstr(S, &v->ty), t->elem == TY_BOOL ? "i32" : elem_name(t->elem));
    if (v->kind == AST_CALL && v->builtin == BI_SUM && t->elem == TY_F32)
      diag_report(S->d, DIAG_NOTE, v->loc, "a sum keeps its total in f32 only when its operand is f32: "
                  "convert before it, sum(to_f32(x), axis), not after");
    return false;
  }
  if (!check_row_bcast(S, v, t->rank))
    return false;
  if (!broadcasts_to(&v->ty, t)) {
    ERR(S, v->loc, "cannot broadcast %s to %s (the shape of %s '%s')", tstr(S, &v->ty), tstr(S, t),
        what, name);
    note_rows(S, v->loc, &v->ty, t);
    return false;
  }
  return true;
}

static void check_stmts(Sema *S, AstStmt *s);

static void check_var(Sema *S, AstStmt *s) {
  TileType declared = {0};
  bool has_type = s->type != NULL;
  S->shared_load = s->place == VAR_SHARED ? s->value : NULL;
  bool ok = check_expr(S, s->value);
  S->shared_load = NULL;
  if (has_type && !resolve_var_type(S, s->type, &declared))
    ok = false;
  TileType ty = {0};
  if (ok && has_type) {
    ok = check_write(S, s->value, &declared, "variable", s->name);
    ty = declared;
  } else if (ok) {
    settle(s->value);
    ty = s->value->ty;
  }
  if (ok && s->place != VAR_SHARED)
    ok = check_thread_share(S, &ty, has_type ? s->type->loc : s->name_loc);
  AstDecl *d = declare(S, DECL_VAR, s->name, s->name_loc, ty);
  d->place = s->place;
  d->stmt = s;
  s->decl = d;
  if (!ok) {
    d->nuses = 1; /* no unused warning on top of the error */
    d->error = true;
    return;
  }
  if (tile_same_shape(&ty, &s->value->ty))
    d->row_reduce = s->value->row_reduce;
  if (s->place == VAR_LET && s->value->is_const) {
    d->is_const = true;
    d->cval = s->value->cval;
  }
  if (s->place == VAR_SHARED) {
    int64_t bytes = tile_numel(&ty) * elem_bytes(ty.elem);
    S->k->smem_bytes += bytes;
    S->shared = grow(S->a, S->shared, S->nshared, &S->cap_shared, sizeof *S->shared);
    S->shared[S->nshared++] = (SharedTile){s->name, s->name_loc, ty, bytes};
  }
}

static void check_assign(Sema *S, AstStmt *s) {
  AstDecl *d = lookup(S, s->name);
  bool okv = check_expr(S, s->value);
  if (!d) {
    const char *hint = suggest_name(S, s->name);
    if (hint)
      ERR(S, s->name_loc, "undeclared name '%s'; did you mean '%s'?", s->name, hint);
    else
      ERR(S, s->name_loc, "undeclared name '%s'", s->name);
    return;
  }
  s->decl = d;
  if (d->kind != DECL_VAR || d->place == VAR_LET) {
    if (d->kind == DECL_VAR)
      ERR(S, s->name_loc, "cannot assign to '%s': it is a 'let' value (declare it with 'reg' to "
          "make it mutable)", s->name);
    else if (d->kind == DECL_TENSOR_ARG)
      ERR(S, s->name_loc, "cannot assign to tensor '%s' as a whole; store to a slice (%s[...] = v)",
          s->name, s->name);
    else
      ERR(S, s->name_loc, "cannot assign to %s '%s'", decl_what(d), s->name);
    NOTE(S, d->loc, "'%s' is declared here", s->name);
    return;
  }
  if (!okv || d->error)
    return;
  if (s->assign_op && d->ty.elem == TY_BOOL) {
    ERR(S, s->loc, "compound assignment does not take bool tiles");
    return;
  }
  if (check_write(S, s->value, &d->ty, "variable", s->name) && s->value->row_reduce &&
      tile_same_shape(&d->ty, &s->value->ty))
    d->row_reduce = s->value->row_reduce; /* reg m: f32[R] = -inf; m = max(x, 1); */
}

static void check_store(Sema *S, AstStmt *s) {
  AstExpr *t = s->target;
  bool okt = check_slice(S, t, true);
  bool okv = check_expr(S, s->value);
  if (!okt)
    return;
  if (t->decl->kind == DECL_VAR) { /* a window of a shared tile (check_slice took nothing else) */
    if (okv)
      check_write(S, s->value, &t->ty, "shared tile", t->name);
    return;
  }
  const AstArg *arg = &S->k->args[t->decl->index];
  if (!arg->is_out) {
    ERR(S, t->name_loc, "cannot store to '%s': it is not declared 'out'", t->name);
    NOTE(S, arg->loc, "declare it as '%s: out %s[...]'", t->name, elem_name(arg->elem));
    return;
  }
  if (okv)
    check_write(S, s->value, &t->ty, "tensor", t->name);
}

static void check_for(Sema *S, AstStmt *s) {
  check_index(S, s->lo, "the loop start");
  check_index(S, s->hi, "the loop end");
  s->step_value = 1;
  s->pipeline_value = 1;
  int64_t v;
  if (s->step && check_expr(S, s->step) && const_int(S, s->step, "the loop step", &v)) {
    if (v <= 0)
      ERR(S, s->step->loc, "the loop step must be positive, found %lld", (long long)v);
    else
      s->step_value = (int)v;
  }
  if (s->pipeline && check_expr(S, s->pipeline) &&
      const_int(S, s->pipeline, "the pipeline depth", &v)) {
    if (v < 1 || v > 8)
      ERR(S, s->pipeline->loc, "the pipeline depth must be between 1 and 8, found %lld",
          (long long)v);
    else
      s->pipeline_value = (int)v;
  }
  scope_push(S);
  AstDecl *d = declare(S, DECL_LOOP, s->name, s->name_loc, scalar_ty(TY_I32));
  d->stmt = s;
  d->nuses = 1; /* a loop variable may well go unused (repeat N times) */
  s->decl = d;
  S->depth++;
  check_stmts(S, s->body);
  S->depth--;
  scope_pop(S);
}

static void check_softmax(Sema *S, AstStmt *s) {
  int64_t rows = 0;
  bool ok = s->rows && check_expr(S, s->rows) && const_int(S, s->rows, "'rows'", &rows);
  if (ok && (rows <= 0 || rows > (1 << 24))) {
    ERR(S, s->rows->loc, "'rows' must be between 1 and 16777216, found %lld", (long long)rows);
    ok = false;
  }
  TileType row_ty = {.elem = TY_F32, .rank = 2, .dims = {(int32_t)rows, 1}};
  if (ok && !(check_tile_size(S, &row_ty, s->rows->loc) &&
              check_thread_share(S, &row_ty, s->rows->loc)))
    ok = false;
  s->rows_value = (int)rows;
  s->rescale = arena_alloc(S->a, (size_t)(s->nrescale + 1) * sizeof *s->rescale);
  for (int i = 0; i < s->nrescale; i++) {
    AstDecl *acc = lookup(S, s->rescale_names[i]);
    if (!acc) {
      ERR(S, s->rescale_locs[i], "undeclared name '%s'", s->rescale_names[i]);
      continue;
    }
    acc->nuses++;
    s->rescale[i] = acc;
    if (acc->kind != DECL_VAR || acc->place != VAR_REG || acc->ty.elem != TY_F32 ||
        acc->ty.rank < 1 || (ok && acc->ty.dims[0] != rows)) {
      ERR(S, s->rescale_locs[i], "online_softmax can only rescale 'reg' f32 tiles whose first "
          "dimension is rows = %lld; '%s' is a %s of type %s", (long long)rows, acc->name,
          decl_what(acc), tstr(S, &acc->ty));
      NOTE(S, acc->loc, "'%s' is declared here", acc->name);
    }
  }
  AstExpr *c = s->softmax_scale;
  if (c && check_expr(S, c) && (c->ty.rank != 0 || !elem_is_float(c->ty.elem))) {
    ERR(S, c->loc, "online_softmax 'scale' must be a float scalar, found %s", tstr(S, &c->ty));
    ok = false;
  }
  TileType ty = {.elem = TY_F32, .rank = 2, .dims = {(int32_t)(rows > 0 ? rows : 1), 1}};
  AstDecl *d = declare(S, DECL_SOFTMAX, s->name, s->name_loc, ty);
  d->stmt = s;
  s->decl = d;
  if (!ok) {
    d->nuses = 1;
    d->error = true;
  }
}

/* A launch requirement: a `require` statement s, or (s NULL) one a dimension expression implies. */
static void append_require(Sema *S, AstStmt *s, TirExpr rpn) {
  AstKernel *k = S->k;
  AstStmt **v = arena_alloc(S->a, (size_t)(k->nrequires + 1) * sizeof *v);
  TirExpr *x = arena_alloc(S->a, (size_t)(k->nrequires + 1) * sizeof *x);
  if (k->nrequires) {
    memcpy(v, k->requires, (size_t)k->nrequires * sizeof *v);
    memcpy(x, k->launch_requires, (size_t)k->nrequires * sizeof *x);
  }
  v[k->nrequires] = s;
  x[k->nrequires++] = rpn;
  k->requires = v;
  k->launch_requires = x;
}

static void check_require(Sema *S, AstStmt *s) {
  if (S->depth > 0) {
    ERR(S, s->loc, "'require' is only allowed at the top level of a kernel body");
    return;
  }
  S->launch_ctx = "require";
  bool ok = check_expr(S, s->value);
  S->launch_ctx = NULL;
  if (!ok || !check_cond(S, s->value, "a requirement"))
    return;
  if (s->value->is_const && s->value->cval == 0) {
    ERR(S, s->value->loc, "this requirement is always false");
    return;
  }
  AstKernel *k = S->k;
  if (k->nrequires == TILERT_MAX_REQUIRES) {
    ERR(S, s->loc, "kernel '%s' has more than %d requirements, the runtime's limit; combine "
        "some with &&", k->name, TILERT_MAX_REQUIRES);
    return;
  }
  TirExpr rpn;
  if (!launch_rpn(S, s->value, "require", &rpn))
    return;
  size_t tlen = strlen(rpn.text);
  if (tlen >= TILERT_MAX_EXPR) {
    ERR(S, s->value->loc, "this requirement's text is %zu characters long, and the runtime keeps "
        "at most %d for its messages; shorten it or split it into several 'require's", tlen,
        TILERT_MAX_EXPR - 1);
    return;
  }
  append_require(S, s, rpn);
}

static void check_stmt(Sema *S, AstStmt *s) {
  switch (s->kind) {
  case ST_BLOCK:
    scope_push(S);
    S->depth++;
    check_stmts(S, s->body);
    S->depth--;
    scope_pop(S);
    return;
  case ST_VAR: check_var(S, s); return;
  case ST_ASSIGN: check_assign(S, s); return;
  case ST_STORE: check_store(S, s); return;
  case ST_FOR: check_for(S, s); return;
  case ST_IF:
    if (check_expr(S, s->value))
      check_cond(S, s->value, "an 'if' condition");
    check_stmt(S, s->body);
    if (s->els)
      check_stmt(S, s->els);
    return;
  case ST_REQUIRE: check_require(S, s); return;
  case ST_SOFTMAX: check_softmax(S, s); return;
  case ST_EXPR:
    S->stmt_call = s->value;
    if (!check_expr(S, s->value))
      return;
    settle(s->value);
    if (s->value->kind == AST_CALL &&
        (s->value->builtin == BI_ATOMIC_ADD || s->value->builtin == BI_ATOMIC_MAX))
      return;
    if (!(s->value->kind == AST_METHOD && s->value->method == METHOD_UPDATE))
      WARN(S, s->value->loc, "expression result unused");
    return;
  }
}

static void check_stmts(Sema *S, AstStmt *s) {
  for (; s && !diag_too_many(S->d); s = s->next)
    check_stmt(S, s);
}

/* ------------------------------------------------------------------ kernel header */

typedef enum { DEFVAL_OK, DEFVAL_BAD, DEFVAL_TOO_LARGE } DefineValue;

/* Parses a -D value: integer, number (with '.', exponent or inf), true/false. An integer written
 * as one (digits only) that does not fit in i32 is too large, not a float. */
static DefineValue parse_define_value(const char *s, double *v, bool *is_float) {
  if (!strcmp(s, "true") || !strcmp(s, "false")) {
    *v = s[0] == 't';
    *is_float = false;
    return DEFVAL_OK;
  }
  size_t n = strlen(s);
  if (!n || isspace((unsigned char)s[0]) || isspace((unsigned char)s[n - 1]))
    return DEFVAL_BAD; /* strtod would skip leading blanks: "-D BLOCK= 5" is a typo */
  const char *digits = s + (*s == '-' || *s == '+');
  if (*digits && strspn(digits, "0123456789") == strlen(digits)) {
    errno = 0;
    long long iv = strtoll(s, NULL, 10);
    *v = (double)iv;
    *is_float = false;
    return errno == 0 && int_fits(*v) ? DEFVAL_OK : DEFVAL_TOO_LARGE;
  }
  char *end;
  errno = 0;
  double dv = strtod(s, &end);
  if (*end || isnan(dv))
    return DEFVAL_BAD;
  *v = dv;
  *is_float = true;
  return errno == ERANGE && isinf(dv) ? DEFVAL_TOO_LARGE : DEFVAL_OK; /* underflow is fine */
}

static const Define *find_define(Sema *S, const char *name) {
  const Define *found = NULL;
  for (int i = 0; i < S->ndefs; i++)
    if (!strcmp(S->defs[i].name, name)) {
      found = &S->defs[i]; /* the last one wins, as with cc -D */
      S->def_used[i] = true;
    }
  return found;
}

/* A name the runtime keeps in a fixed field of cap bytes (with its NUL): kernel, argument, dim
 * and parameter names appear in the metadata. */
static void check_name_length(Sema *S, const char *what, const char *name, SrcLoc loc, int cap) {
  size_t n = strlen(name);
  if (n >= (size_t)cap)
    ERR(S, loc, "this %s name is %zu characters long, and the runtime supports at most %d", what, n,
        cap - 1);
}

/* `T: type = f16`: the default names an element type (or an earlier type parameter); -D T=bf16
 * overrides it with an element type name. */
static void check_type_param(Sema *S, AstParam *p, int index) {
  AstKernel *k = S->k;
  bool ok = true;
  if (strcmp(p->kind_name, "type") != 0) {
    ERR(S, p->kind_loc, "unknown parameter kind '%s' (write '%s: type = f16' for an element type, "
        "or '%s = 64' for a value)", p->kind_name, p->name, p->name);
    ok = false;
  } else if (elem_from_name(p->name, &p->elem)) {
    ERR(S, p->loc, "a type parameter cannot be named like the element type '%s'", p->name);
    ok = false;
  } else if (p->init->kind != AST_NAME) {
    ERR(S, p->init->loc, "the default of type parameter '%s' must be an element type (f32, f16, "
        "bf16, i32 or bool)", p->name);
    ok = false;
  } else {
    ok = resolve_elem(S, p->init->name, p->init->loc, &p->elem);
  }
  const Define *def = find_define(S, p->name);
  if (def) {
    ElemType e;
    if (!elem_from_name(def->value, &e)) {
      diag_plain(S->d, DIAG_ERROR, "-D %s=%s: '%s' is not an element type (type parameter '%s' of "
                 "kernel '%s' takes f32, f16, bf16, i32 or bool)", def->name, def->value, def->value,
                 p->name, k->name);
    } else if (ok) {
      p->elem = e;
      p->overridden = true;
    }
  }
  p->is_type = true;
  AstDecl *d = declare(S, DECL_TYPE_PARAM, p->name, p->loc, scalar_ty(p->elem));
  d->index = index;
  d->nuses = 1;
  d->error = !ok;
  p->decl = d;
}

static void check_params(Sema *S) {
  AstKernel *k = S->k;
  for (int i = 0; i < k->nparams; i++) {
    AstParam *p = &k->params[i];
    if (p->kind_name) {
      check_type_param(S, p, i);
      continue;
    }
    check_name_length(S, "parameter", p->name, p->loc, TILERT_MAX_NAME);
    S->launch_ctx = "parameter";
    bool ok = check_expr(S, p->init);
    S->launch_ctx = NULL;
    if (ok && (!p->init->is_const || p->init->ty.rank != 0)) {
      ERR(S, p->init->loc, "the default of parameter '%s' must be a compile-time constant", p->name);
      ok = false;
    }
    if (ok) {
      p->value = p->init->cval;
      p->is_float = p->init->ty.elem == TY_F32;
    }
    const Define *def = find_define(S, p->name);
    if (def) {
      double v;
      bool isf;
      DefineValue pv = parse_define_value(def->value, &v, &isf);
      if (pv == DEFVAL_BAD) {
        diag_plain(S->d, DIAG_ERROR, "invalid value '%s' for -D %s (expected a number)", def->value,
                   def->name);
      } else if (pv == DEFVAL_TOO_LARGE) {
        diag_plain(S->d, DIAG_ERROR, "-D %s=%s: the value is too large%s", def->name, def->value,
                   isf ? "" : " (integers are i32: -2147483648 to 2147483647)");
      } else if (isf && ok && !p->is_float) {
        diag_plain(S->d, DIAG_ERROR, "-D %s=%s: parameter '%s' of kernel '%s' is an integer", def->name,
                   def->value, p->name, k->name);
      } else {
        p->value = v;
        p->is_float = isf || p->is_float;
        p->overridden = true;
        ok = true;
      }
    }
    TileType ty = scalar_ty(p->is_float ? TY_F32 : TY_I32);
    AstDecl *d = declare(S, DECL_PARAM, p->name, p->loc, ty);
    d->index = i;
    d->is_const = ok;
    d->untyped = true;
    d->cval = p->value;
    d->nuses = 1;
    p->decl = d;
  }
}

/* Appends the dim `name` (not yet a declaration). */
static AstDim *new_dim(Sema *S, const char *name, SrcLoc loc) {
  AstKernel *k = S->k;
  AstDim *dims = arena_alloc(S->a, (size_t)(k->ndims + 1) * sizeof *dims);
  if (k->ndims)
    memcpy(dims, k->dims, (size_t)k->ndims * sizeof *dims);
  k->dims = dims;
  AstDim *dim = &dims[k->ndims];
  dim->name = name;
  dim->loc = loc;
  return dim;
}

/* The declaration of a run-time dim, within the runtime's count. */
static AstDecl *declare_dim(Sema *S, AstDim *dim) {
  AstKernel *k = S->k;
  if (k->ndims == TILERT_MAX_DIMS)
    ERR(S, dim->loc, "kernel '%s' has more than %d shape dimensions, the runtime's limit", k->name,
        TILERT_MAX_DIMS);
  AstDecl *d = declare(S, DECL_DIM, dim->name, dim->loc, scalar_ty(TY_I32));
  d->index = k->ndims;
  d->nuses = 1;
  dim->decl = d;
  return d;
}

/* Finds or creates the dim `name` (first appearance at loc); pins it from a parameter or -D. */
static int intern_dim(Sema *S, const char *name, SrcLoc loc) {
  AstKernel *k = S->k;
  for (int i = 0; i < k->ndims; i++)
    if (!strcmp(k->dims[i].name, name))
      return i;
  AstDim *dim = new_dim(S, name, loc);
  AstDecl *prev = lookup(S, name);
  if (prev && prev->kind == DECL_PARAM) { /* `D` in attention: a pinned dim */
    const AstParam *p = &k->params[prev->index];
    if (p->is_float || !is_intval(p->value) || p->value < 1) {
      ERR(S, loc, "parameter '%s' is used as a dimension, so it must be a positive integer", name);
      NOTE(S, p->loc, "'%s' is declared here", name);
    }
    dim->pinned = true;
    dim->value = (int64_t)p->value;
    dim->decl = prev;
    return k->ndims++;
  }
  if (prev) {
    ERR(S, loc, "dimension '%s' has the same name as a %s", name, decl_what(prev));
    NOTE(S, prev->loc, "'%s' is declared here", name);
  }
  check_name_length(S, "dimension", name, loc, TILERT_MAX_NAME);
  AstDecl *d = declare_dim(S, dim);
  const Define *def = find_define(S, name);
  if (def) {
    double v;
    bool isf;
    DefineValue pv = parse_define_value(def->value, &v, &isf);
    if (pv == DEFVAL_TOO_LARGE && def->value[0] != '-')
      diag_plain(S->d, DIAG_ERROR, "-D %s=%s: the value is too large (a dimension is at most "
                 "2147483647)", def->name, def->value);
    else if (pv != DEFVAL_OK || isf || v < 1)
      diag_plain(S->d, DIAG_ERROR, "-D %s=%s: a dimension must be a positive integer", def->name,
                 def->value);
    else {
      dim->pinned = true;
      dim->value = (int64_t)v;
      d->is_const = true;
      d->cval = v;
    }
  }
  return k->ndims++;
}

/* Every name in a dimension expression must be known before it is checked: a parameter, a dim
 * written alone somewhere (interned already), or a dim pinned by -D. A dim that appears only
 * inside expressions cannot be solved from the shapes. */
static bool resolve_dim_names(Sema *S, const AstExpr *e) {
  if (e->kind == AST_NAME && !lookup(S, e->name)) {
    bool pinned = false;
    for (int i = 0; i < S->ndefs && !pinned; i++)
      pinned = !strcmp(S->defs[i].name, e->name);
    if (pinned) {
      intern_dim(S, e->name, e->loc);
      return true;
    }
    ERR(S, e->loc, "dimension '%s' appears only inside dimension expressions, so the shapes at "
        "launch cannot give its value; write it alone as some tensor's dimension (e.g. X: "
        "f32[%s]) or pin it (-D %s=VALUE)", e->name, e->name, e->name);
    return false;
  }
  bool ok = true;
  for (int i = 0; i < e->nargs; i++)
    ok &= resolve_dim_names(S, e->args[i]);
  return ok;
}

/* The launch requirement that a derived dim `dim` has the value of its expression. */
static bool require_derived(Sema *S, const AstDim *dim, const TirExpr *rpn, int axis,
                            const AstArg *a) {
  AstKernel *k = S->k;
  if (k->nrequires == TILERT_MAX_REQUIRES) {
    ERR(S, rpn->loc, "kernel '%s' has more than %d requirements, the runtime's limit, counting "
        "one per dimension expression", k->name, TILERT_MAX_REQUIRES);
    return false;
  }
  TirExpr req = {.rpn = arena_printf(S->a, "%s %s ==", dim->name, rpn->rpn),
                 .text = arena_printf(S->a, "axis %d of %s == %s", axis, a->name, rpn->text),
                 .loc = rpn->loc};
  /* the check adds the dim and `==` to an expression launch_rpn let through, and its text */
  int ntok = 1;
  for (const char *c = req.rpn; *c; c++)
    ntok += *c == ' ';
  size_t len = strlen(req.rpn), tlen = strlen(req.text);
  if (ntok > TILERT_MAX_EXPR_TOKENS || len >= TILERT_MAX_EXPR || tlen >= TILERT_MAX_EXPR) {
    ERR(S, rpn->loc, "this dimension expression is too long for the runtime: its launch check "
        "'axis %d of %s == ...' is %d tokens and %zu characters in RPN form and %zu characters of "
        "text, and at most %d tokens and %d characters are supported; simplify it", axis, a->name,
        ntok, len, tlen, TILERT_MAX_EXPR_TOKENS, TILERT_MAX_EXPR - 1);
    return false;
  }
  append_require(S, NULL, req);
  return true;
}

/* `X: f32[N, D / 2]`: axis j of a is an expression over dims and parameters. A constant gives a
 * pinned dim; else a hidden run-time dim (shared by equal expressions) that the launch checks
 * against the expression (docs/language.md 5.3). */
static int derived_dim(Sema *S, const AstArg *a, int axis, AstExpr *de) {
  if (!resolve_dim_names(S, de))
    return -1;
  S->launch_ctx = "dimension";
  bool ok = check_expr(S, de);
  S->launch_ctx = NULL;
  if (!ok || !adapt(S, de, TY_I32, de->loc))
    return -1;
  if (de->ty.elem != TY_I32 || de->ty.rank != 0) {
    ERR(S, de->loc, "a tensor dimension must be a scalar i32, found %s", tstr(S, &de->ty));
    return -1;
  }
  AstKernel *k = S->k;
  const char *name = arena_printf(S->a, "%s$%d", a->name, axis);
  if (de->is_const) {
    if (de->cval < 1) {
      ERR(S, de->loc, "this dimension is %lld; a dimension must be a positive integer",
          (long long)de->cval);
      return -1;
    }
    AstDim *dim = new_dim(S, name, de->loc);
    dim->pinned = true;
    dim->value = (int64_t)de->cval;
    AstDecl *d = declare_dim(S, dim);
    d->is_const = true;
    d->cval = de->cval;
    return k->ndims++;
  }
  TirExpr rpn;
  if (!launch_rpn(S, de, "dimension", &rpn))
    return -1;
  for (int i = 0; i < k->ndims; i++)
    if (k->dims[i].derive && !strcmp(k->dims[i].derive, rpn.rpn))
      return i;
  AstDim *dim = new_dim(S, name, de->loc);
  dim->derive = rpn.rpn;
  dim->derive_text = rpn.text;
  declare_dim(S, dim);
  if (!require_derived(S, dim, &rpn, axis, a))
    return -1;
  return k->ndims++;
}

/* `dW: out f32[N] = 0`: the launch zeroes the tensor before the kernel writes it, so a kernel
 * that accumulates with atomics needs no zeroing launch of the caller's own (the runtime's zeroing
 * overlaps the kernel's start; docs/architecture.md). Zero is the one start: the identity of
 * atomic_add, and what a memset writes in every element type. */
static void check_arg_init(Sema *S, const AstArg *a) {
  const AstExpr *e = a->init;
  if (!e)
    return;
  if (!a->type->dims)
    ERR(S, e->loc, "scalar argument '%s' cannot have a starting value; only an 'out' tensor can "
        "start at 0", a->name);
  else if (!a->is_out)
    ERR(S, e->loc, "input tensor '%s' cannot have a starting value; only an 'out' tensor can start "
        "at 0", a->name);
  else if ((e->kind != AST_INT && e->kind != AST_FLOAT) || e->cval != 0)
    ERR(S, e->loc, "an 'out' tensor can only start at 0 (the launch zeroes it); '%s' is given "
        "another value", a->name);
}

static void check_args(Sema *S) {
  AstKernel *k = S->k;
  if (k->nargs > TILERT_MAX_ARGS)
    ERR(S, k->args[TILERT_MAX_ARGS].loc, "kernel '%s' has %d arguments, more than the %d the "
        "runtime supports", k->name, k->nargs, TILERT_MAX_ARGS);
  for (int i = 0; i < k->nargs; i++) {
    AstArg *a = &k->args[i];
    AstTypeSpec *ts = a->type;
    a->is_tensor = ts->dims != NULL;
    check_name_length(S, "argument", a->name, a->loc, TILERT_MAX_NAME);
    bool ok = resolve_elem(S, ts->elem_name, ts->loc, &a->elem);
    check_arg_init(S, a);
    if (!a->is_tensor) {
      if (a->is_out) {
        ERR(S, ts->loc, "only tensor arguments can be 'out'; '%s' is a scalar", a->name);
      }
      if (ok && a->elem != TY_F32 && a->elem != TY_I32) { /* the kernel ABI passes .f32 / .u32 */
        if (a->elem == TY_BOOL)
          ERR(S, ts->loc, "scalar argument '%s' is bool, but scalar arguments must be f32 or i32 "
              "(pass an i32 and compare it, e.g. %s != 0)", a->name, a->name);
        else
          ERR(S, ts->loc, "scalar argument '%s' is %s, but scalar arguments must be f32 or i32 "
              "(pass an f32 and convert it, e.g. to(%s, %s))", a->name, elem_name(a->elem),
              elem_name(a->elem), a->name);
        ok = false;
      }
      AstDecl *d = declare(S, DECL_SCALAR_ARG, a->name, a->loc, scalar_ty(ok ? a->elem : TY_F32));
      d->index = i;
      d->nuses = 1;
      a->decl = d;
      continue;
    }
    AstDecl *d = declare(S, DECL_TENSOR_ARG, a->name, a->loc, scalar_ty(a->elem));
    d->index = i;
    d->nuses = 1;
    d->error = !ok; /* its type was reported: uses stay silent */
    a->decl = d;
    if (ts->ndims > TILE_MAX_RANK) {
      ERR(S, ts->loc, "a tensor has at most %d dimensions, '%s' has %d", TILE_MAX_RANK, a->name,
          ts->ndims);
      d->error = true;
      continue;
    }
    a->rank = ts->ndims;
    for (int j = 0; j < ts->ndims; j++)
      if (ts->dims[j]->kind == AST_NAME)
        a->dims[j] = intern_dim(S, ts->dims[j]->name, ts->dims[j]->loc);
  }
  /* Expressions after every name written alone is a dim: `A: f32[D / 2], B: f32[D]`. */
  for (int i = 0; i < k->nargs && !diag_too_many(S->d); i++) {
    AstArg *a = &k->args[i];
    for (int j = 0; a->is_tensor && j < a->rank; j++) {
      AstExpr *de = a->type->dims[j];
      if (de->kind != AST_NAME && (a->dims[j] = derived_dim(S, a, j, de)) < 0)
        a->decl->error = true; /* its slices stay silent: the dim has no entry */
    }
  }
}

static void check_launch(Sema *S) {
  AstKernel *k = S->k;
  if (k->ngrid < 1)
    ERR(S, k->loc, "kernel '%s' needs a grid", k->name);
  for (int i = 0; i < 3; i++)
    k->launch_grid[i] = (TirExpr){.rpn = "1", .text = "1", .loc = k->loc};
  for (int i = 0; i < k->ngrid; i++) {
    S->launch_ctx = "grid";
    bool ok = check_expr(S, k->grid[i]);
    S->launch_ctx = NULL;
    if (!ok || !adapt(S, k->grid[i], TY_I32, k->grid[i]->loc))
      continue;
    if (k->grid[i]->ty.elem != TY_I32 || k->grid[i]->ty.rank != 0)
      ERR(S, k->grid[i]->loc, "a grid size must be a scalar i32, found %s",
          tstr(S, &k->grid[i]->ty));
    else
      launch_rpn(S, k->grid[i], "grid", &k->launch_grid[i]);
  }
  S->launch_ctx = "threads";
  bool ok = check_expr(S, k->threads);
  S->launch_ctx = NULL;
  int64_t t;
  if (ok && const_int(S, k->threads, "the thread count", &t)) {
    if (t <= 0 || t % 32 != 0)
      ERR(S, k->threads->loc, "the thread count must be a positive multiple of 32 (a whole number "
          "of warps), found %lld", (long long)t);
    else if (t > TILERT_MAX_THREADS)
      ERR(S, k->threads->loc, "the thread count must be at most %d, found %lld",
          TILERT_MAX_THREADS, (long long)t);
    else if (t & (t - 1)) /* the layouts map thread-index bits to tile coordinates */
      ERR(S, k->threads->loc, "the thread count must be a power of two (32, 64, 128, 256, 512 or "
          "1024), found %lld", (long long)t);
    else
      k->threads_value = (int)t;
  }
  check_cluster(S);
}

/* cluster (K): K blocks adjacent along x run as one cluster (sm_90: at most 8, the portable size),
 * whose blocks combine scalars with cluster_sum / cluster_max. */
static void check_cluster(Sema *S) {
  AstKernel *k = S->k;
  k->cluster_value = 1;
  if (!k->cluster)
    return;
  S->launch_ctx = "cluster";
  bool ok = check_expr(S, k->cluster);
  S->launch_ctx = NULL;
  int64_t c;
  if (!ok || !const_int(S, k->cluster, "the cluster size", &c))
    return;
  if (c < 1 || c > TILERT_MAX_CLUSTER)
    ERR(S, k->cluster->loc, "the cluster size must be between 1 and %d blocks, found %lld", TILERT_MAX_CLUSTER,
        (long long)c);
  else if (S->arch < ARCH_SM90)
    ERR(S, k->cluster->loc, "clusters need sm_90 or newer, not %s (--arch=sm_90a)", arch_name(S->arch));
  else
    k->cluster_value = (int)c;
}

/* cluster_sum(x), cluster_max(x): an f32 scalar combined over the blocks of the cluster, at the
 * top level of the body (every block of the cluster reaches it, once, in the same order). */
static bool check_cluster_reduce(Sema *S, AstExpr *e) {
  AstExpr *x = e->args[0];
  if (!S->k->cluster) {
    ERR(S, e->name_loc, "'%s' needs a kernel with a cluster clause: `grid (...) cluster (K) threads (...)`",
        e->name);
    return false;
  }
  if (S->depth > 0) {
    ERR(S, e->name_loc, "'%s' is only allowed at the top level of a kernel body (every block of the cluster "
        "must reach it once)", e->name);
    return false;
  }
  if (x->ty.rank != 0 || x->ty.elem != TY_F32) {
    ERR(S, x->loc, "'%s' takes an f32 scalar, found %s", e->name, tstr(S, &x->ty));
    return false;
  }
  e->ty = x->ty;
  return true;
}

static void check_smem(Sema *S) {
  AstKernel *k = S->k;
  int limit = arch_smem_limit(S->arch);
  if (k->smem_bytes <= limit)
    return;
  ERR(S, k->loc, "kernel '%s' needs %lld bytes of shared memory per block, more than the %d "
      "available on %s", k->name, (long long)k->smem_bytes, limit, arch_name(S->arch));
  for (int i = 0; i < S->nshared; i++)
    NOTE(S, S->shared[i].loc, "shared tile '%s' is %s = %lld bytes", S->shared[i].name,
         tstr(S, &S->shared[i].ty), (long long)S->shared[i].bytes);
}

static void warn_unused(Sema *S) {
  for (int i = 0; i < S->ndecls; i++) {
    AstDecl *d = S->decls[i];
    if (d->nuses > 0)
      continue;
    if (d->kind == DECL_VAR)
      WARN(S, d->loc, "unused variable '%s'", d->name);
    else if (d->kind == DECL_SOFTMAX)
      WARN(S, d->loc, "unused online_softmax state '%s'", d->name);
  }
}

/* Registers a thread has at most (PTX: 255 per thread). */
enum { MAX_REGS_PER_THREAD = 255 };

/* An early warning for tiles that cannot stay in registers. The estimate is deliberately simple
 * and a lower bound: the largest single 'reg' or 'let' tile, spread over the block's threads
 * (32-bit registers: f16/bf16 pack two per register), ignoring every other live tile. Above the
 * hardware limit ptxas spills to local memory, which is slow and easy to miss. */
static void warn_registers(Sema *S) {
  int threads = S->k->threads_value;
  if (threads <= 0)
    return;
  const AstDecl *big = NULL;
  int64_t big_regs = 0;
  for (int i = 0; i < S->ndecls; i++) {
    const AstDecl *d = S->decls[i];
    if (d->kind != DECL_VAR || d->place == VAR_SHARED || d->error || d->ty.rank == 0)
      continue;
    int64_t words = padded_numel(&d->ty);
    if (elem_bytes(d->ty.elem) == 2)
      words = (words + 1) / 2;
    int64_t regs = (words + threads - 1) / threads;
    if (regs > big_regs)
      big = d, big_regs = regs;
  }
  if (!big || big_regs <= MAX_REGS_PER_THREAD)
    return;
  WARN(S, big->loc, "%s tile '%s' (%s) alone needs about %lld registers per thread (%lld elements "
       "over %d threads), more than the %d a thread can have, so it will spill to local memory; "
       "use more threads per block (e.g. a larger WARPS) or smaller tiles",
       big->place == VAR_REG ? "'reg'" : "'let'", big->name, tstr(S, &big->ty),
       (long long)big_regs, (long long)tile_numel(&big->ty), threads, MAX_REGS_PER_THREAD);
}

/* A kernel without an `out` tensor can write nothing its caller sees (said of a kernel that is
 * otherwise sound: a store into a tensor not marked `out` is an error of its own). */
static void warn_no_output(Sema *S, const AstKernel *k, int errors_before) {
  if (S->d->nerrors > errors_before)
    return;
  for (int i = 0; i < k->nargs; i++)
    if (k->args[i].is_out)
      return;
  WARN(S, k->loc, "kernel '%s' has no 'out' argument: nothing it computes can be seen (mark the "
       "tensors it writes 'out', e.g. 'Y: out f32[N]')", k->name);
}

static void check_kernel(Sema *S, AstKernel *k) {
  int errors_before = S->d->nerrors;
  S->k = k;
  S->scope = NULL;
  names_reset(S);
  S->ndecls = 0, S->cap_decls = 0, S->decls = NULL;
  S->nshared = 0, S->cap_shared = 0, S->shared = NULL;
  S->depth = 0;
  k->smem_bytes = 0;
  check_name_length(S, "kernel", k->name, k->loc, TILERT_MAX_KERNEL_NAME);
  scope_push(S);
  check_params(S);
  check_args(S);
  check_launch(S);
  if (k->body)
    check_stmts(S, k->body->body);
  k->ndecls = S->ndecls;
  if (!diag_too_many(S->d)) {
    check_smem(S);
    warn_registers(S);
    if (S->d->nerrors == errors_before) /* an erroneous expression may not have recorded its uses */
      warn_unused(S);
    warn_no_output(S, k, errors_before);
  }
  S->scope = NULL;
}

/* The hint for a -D name no kernel knows: each kernel's parameters and dims. */
static void report_unknown_define(Sema *S, AstProgram *prog, const Define *def) {
  char list[1024];
  size_t len = 0;
  list[0] = 0;
  for (AstKernel *k = prog->kernels; k && len < sizeof list; k = k->next) {
    len += (size_t)snprintf(list + len, sizeof list - len, "%skernel '%s' has parameters ",
                            len ? "; " : "", k->name);
    for (int i = 0; i < k->nparams && len < sizeof list; i++)
      len += (size_t)snprintf(list + len, sizeof list - len, "%s%s", i ? ", " : "", k->params[i].name);
    if (!k->nparams && len < sizeof list)
      len += (size_t)snprintf(list + len, sizeof list - len, "(none)");
    for (int i = 0, n = 0; i < k->ndims && len < sizeof list; i++)
      if (!strchr(k->dims[i].name, '$')) /* the hidden dims of expressions take no -D */
        len += (size_t)snprintf(list + len, sizeof list - len, "%s%s", n++ ? ", " : " and dims ",
                                k->dims[i].name);
  }
  diag_plain(S->d, DIAG_ERROR, "-D %s=%s: no kernel has a parameter or dimension named '%s' (%s)",
             def->name, def->value, def->name, list);
}

bool sema_check(Arena *a, AstProgram *prog, const Define *defs, int ndefs, GpuArch arch, Diag *d) {
  int before = d->nerrors;
  Sema S = {.a = a, .d = d, .arch = arch, .defs = defs, .ndefs = ndefs};
  S.def_used = arena_alloc(a, (size_t)(ndefs + 1) * sizeof *S.def_used);
  if (!prog->kernels)
    diag_report(d, DIAG_ERROR, (SrcLoc){1, 1, 1, 1}, "no kernel in this file");
  for (AstKernel *k = prog->kernels; k && !diag_too_many(d); k = k->next) {
    for (AstKernel *o = prog->kernels; o != k; o = o->next)
      if (!strcmp(o->name, k->name)) {
        diag_report(d, DIAG_ERROR, k->loc, "redefinition of kernel '%s'", k->name);
        diag_report(d, DIAG_NOTE, o->loc, "previous definition of '%s' is here", k->name);
        break;
      }
    check_kernel(&S, k);
  }
  for (int i = 0; i < ndefs && !diag_too_many(d); i++)
    if (!S.def_used[i])
      report_unknown_define(&S, prog, &defs[i]);
  return d->nerrors == before;
}
