/* meta.c — the "// tilec:" kernel metadata: a strict parser and the RPN evaluator.
 *
 * The compiler (compiler/meta.c) writes these lines at the top of the PTX; one "kernel" line
 * starts each kernel's block. Grammar, one item per line after "// tilec: ":
 *   kernel NAME | threads N | smem BYTES | dim NAME [= VALUE] | arg NAME tensor DTYPE in|out DIMS...
 *   arg NAME scalar f32|i32 | grid RPN [| RPN [| RPN]] | require RPN | TEXT | param NAME = VALUE
 * RPN: space-separated integer literals, dim names and + - * / % cdiv min max < <= > >= == != && ||
 * (binary) and ! (unary). Errors name the metadata line and say what was expected. */
#include "tilert_internal.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define META_PREFIX "// tilec:"
/* A line holds at most MAX_LINE bytes, so at most MAX_LINE / 2 tokens; one expression at most
 * TILERT_MAX_EXPR_TOKENS (a grid line carries three). */
enum { MAX_LINE = 1024, MAX_LINE_TOKS = MAX_LINE / 2, MAX_TOKS = TILERT_MAX_EXPR_TOKENS };

/* ---------------------------------------------------------------- lexing helpers */

static bool is_ident(const char *s) {
  if (!(isalpha((unsigned char)*s) || *s == '_' || *s == '$'))
    return false;
  for (s++; *s; s++)
    if (!(isalnum((unsigned char)*s) || *s == '_' || *s == '$'))
      return false;
  return true;
}

/* Decimal integer, optional leading '-', the whole string. */
static bool parse_int(const char *s, int64_t *out) {
  const char *p = s + (*s == '-');
  if (!isdigit((unsigned char)*p))
    return false;
  for (; *p; p++)
    if (!isdigit((unsigned char)*p))
      return false;
  errno = 0;
  long long v = strtoll(s, NULL, 10);
  if (errno == ERANGE)
    return false;
  *out = v;
  return true;
}

/* Splits s in place at runs of blanks; returns the token count or -1 when there are too many. */
static int split(char *s, char **toks, int max) {
  int n = 0;
  for (char *p = s;;) {
    while (*p == ' ' || *p == '\t')
      p++;
    if (!*p)
      return n;
    if (n == max)
      return -1;
    toks[n++] = p;
    while (*p && *p != ' ' && *p != '\t')
      p++;
    if (*p)
      *p++ = '\0';
  }
}

/* If `line` (length len) is a metadata line, copies its payload (after the prefix, trimmed) to
 * buf and returns 1; 0 for other lines; -1 when the payload is too long. */
static int meta_payload(const char *line, size_t len, char *buf) {
  while (len && (*line == ' ' || *line == '\t'))
    line++, len--;
  size_t plen = strlen(META_PREFIX);
  if (len < plen || strncmp(line, META_PREFIX, plen) != 0)
    return 0;
  line += plen, len -= plen;
  while (len && (line[len - 1] == '\r' || line[len - 1] == ' ' || line[len - 1] == '\t'))
    len--;
  while (len && (*line == ' ' || *line == '\t'))
    line++, len--;
  if (len >= MAX_LINE)
    return -1;
  memcpy(buf, line, len);
  buf[len] = '\0';
  return 1;
}

/* ---------------------------------------------------------------- RPN */

typedef enum { OP_NONE, OP_BIN, OP_NOT } OpArity;

static OpArity op_arity(const char *t) {
  static const char *const bin[] = {"+",  "-",  "*",  "/",  "%",  "cdiv", "min", "max", "<",
                                    "<=", ">",  ">=", "==", "!=", "&&",   "||"};
  for (size_t i = 0; i < sizeof bin / sizeof bin[0]; i++)
    if (strcmp(t, bin[i]) == 0)
      return OP_BIN;
  return strcmp(t, "!") == 0 ? OP_NOT : OP_NONE;
}

static int find_dim(const tilert_kernel_info *info, const char *name) {
  for (int i = 0; i < info->ndims; i++)
    if (strcmp(info->dims[i].name, name) == 0)
      return i;
  return -1;
}

static int find_arg(const tilert_kernel_info *info, const char *name) {
  for (int i = 0; i < info->nargs; i++)
    if (strcmp(info->args[i].name, name) == 0)
      return i;
  return -1;
}

static int tokenize_expr(const char *rpn, char *buf, char **toks) {
  if (strlen(rpn) >= MAX_LINE)
    return -1;
  strcpy(buf, rpn);
  return split(buf, toks, MAX_TOKS);
}

tilert_status tilert__check_expr(const tilert_kernel_info *info, const char *rpn) {
  char buf[MAX_LINE], *toks[MAX_TOKS];
  int n = tokenize_expr(rpn, buf, toks);
  if (n <= 0)
    return tilert__err(TILERT_ERROR_BAD_METADATA, "expression '%s' is empty or too long", rpn);
  int depth = 0;
  for (int i = 0; i < n; i++) {
    int64_t v;
    OpArity a = op_arity(toks[i]);
    if (a == OP_BIN || a == OP_NOT) {
      int need = a == OP_BIN ? 2 : 1;
      if (depth < need)
        return tilert__err(TILERT_ERROR_BAD_METADATA,
                           "expression '%s': operator '%s' needs %d operand(s)", rpn, toks[i], need);
      depth -= need - 1;
    } else if (parse_int(toks[i], &v) || find_dim(info, toks[i]) >= 0) {
      depth++;
    } else {
      return tilert__err(TILERT_ERROR_BAD_METADATA,
                         "expression '%s': '%s' is not a number, a declared dim or an operator",
                         rpn, toks[i]);
    }
  }
  if (depth != 1)
    return tilert__err(TILERT_ERROR_BAD_METADATA,
                       "expression '%s' leaves %d values on the stack (expected 1)", rpn, depth);
  return tilert__ok();
}

static tilert_status apply_bin(const char *op, int64_t a, int64_t b, int64_t *r, const char *rpn) {
  bool ovf = false;
  if (!strcmp(op, "+"))
    ovf = __builtin_add_overflow(a, b, r);
  else if (!strcmp(op, "-"))
    ovf = __builtin_sub_overflow(a, b, r);
  else if (!strcmp(op, "*"))
    ovf = __builtin_mul_overflow(a, b, r);
  else if (!strcmp(op, "/") || !strcmp(op, "%") || !strcmp(op, "cdiv")) {
    if (b == 0)
      return tilert__err(TILERT_ERROR_SHAPE, "division by zero in '%s' (%lld %s 0)", rpn,
                         (long long)a, op);
    if (a == INT64_MIN && b == -1)
      ovf = true;
    else if (op[0] == '/')
      *r = a / b;
    else if (op[0] == '%')
      *r = a % b;
    else
      *r = a / b + (a % b != 0 && (a < 0) == (b < 0)); /* round towards +inf */
  } else if (!strcmp(op, "min"))
    *r = a < b ? a : b;
  else if (!strcmp(op, "max"))
    *r = a > b ? a : b;
  else if (!strcmp(op, "<"))
    *r = a < b;
  else if (!strcmp(op, "<="))
    *r = a <= b;
  else if (!strcmp(op, ">"))
    *r = a > b;
  else if (!strcmp(op, ">="))
    *r = a >= b;
  else if (!strcmp(op, "=="))
    *r = a == b;
  else if (!strcmp(op, "!="))
    *r = a != b;
  else if (!strcmp(op, "&&"))
    *r = a && b;
  else
    *r = a || b;
  if (ovf)
    return tilert__err(TILERT_ERROR_SHAPE, "integer overflow in '%s' (%lld %s %lld)", rpn,
                       (long long)a, op, (long long)b);
  return tilert__ok();
}

tilert_status tilert_eval_expr(const tilert_kernel_info *info, const char *rpn,
                               const int64_t *dim_values, int64_t *result) {
  if (!info || !rpn || !result || (info->ndims > 0 && !dim_values))
    return tilert__err(TILERT_ERROR_INVALID_ARGUMENT, "tilert_eval_expr: NULL argument");
  tilert_status st = tilert__check_expr(info, rpn);
  if (st.code)
    return st;
  char buf[MAX_LINE], *toks[MAX_TOKS];
  int n = tokenize_expr(rpn, buf, toks);
  int64_t stack[MAX_TOKS];
  int sp = 0;
  for (int i = 0; i < n; i++) {
    int64_t v;
    OpArity a = op_arity(toks[i]);
    if (a == OP_NOT) {
      stack[sp - 1] = !stack[sp - 1];
    } else if (a == OP_BIN) {
      st = apply_bin(toks[i], stack[sp - 2], stack[sp - 1], &v, rpn);
      if (st.code)
        return st;
      stack[sp-- - 2] = v;
    } else if (parse_int(toks[i], &v)) {
      stack[sp++] = v;
    } else {
      stack[sp++] = dim_values[find_dim(info, toks[i])];
    }
  }
  *result = stack[0];
  return tilert__ok();
}

void tilert__expr_dims(const tilert_kernel_info *info, const char *rpn, const int64_t *dim_values,
                       char *out, size_t len) {
  char buf[MAX_LINE], *toks[MAX_TOKS];
  bool seen[TILERT_MAX_DIMS] = {0};
  size_t used = 0;
  out[0] = '\0';
  int n = tokenize_expr(rpn, buf, toks);
  for (int i = 0; i < n; i++) {
    int d = find_dim(info, toks[i]);
    if (d < 0 || seen[d])
      continue;
    seen[d] = true;
    int w = snprintf(out + used, len - used, "%s%s = %lld", used ? ", " : "", info->dims[d].name,
                     (long long)dim_values[d]);
    if (w < 0 || (size_t)w >= len - used)
      return;
    used += (size_t)w;
  }
}

/* ---------------------------------------------------------------- the parser */

typedef struct Parser {
  tilert_kernel_info *info;
  int lineno;                  /* of the line being parsed, 1-based in the text */
  bool have_threads, have_smem, have_grid, have_cluster;
} Parser;

#define PERR(p, ...) meta_err((p), __VA_ARGS__)

__attribute__((format(printf, 2, 3))) static tilert_status meta_err(const Parser *p,
                                                                     const char *fmt, ...) {
  char msg[400];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return tilert__err(TILERT_ERROR_BAD_METADATA, "kernel metadata, line %d: %s", p->lineno, msg);
}

static bool copy_name(char *dst, size_t cap, const char *src) {
  if (!is_ident(src) || strlen(src) >= cap)
    return false;
  strcpy(dst, src);
  return true;
}

static bool dtype_from(const char *s, tilert_dtype *out) {
  for (int t = TILERT_BOOL; t <= TILERT_F32; t++)
    if (strcmp(s, tilert_dtype_name((tilert_dtype)t)) == 0) {
      *out = (tilert_dtype)t;
      return true;
    }
  return false;
}

static tilert_status parse_count(Parser *p, char **t, int n, bool *have, int lo, int hi, int *out) {
  int64_t v;
  if (*have)
    return PERR(p, "duplicate '%s' line", t[0]);
  if (n != 2 || !parse_int(t[1], &v) || v < lo || v > hi)
    return PERR(p, "expected '%s N' with %d <= N <= %d", t[0], lo, hi);
  *have = true;
  *out = (int)v;
  return tilert__ok();
}

static tilert_status parse_dim(Parser *p, char **t, int n) {
  tilert_kernel_info *k = p->info;
  int64_t v = 0;
  if (!(n == 2 || (n == 4 && strcmp(t[2], "=") == 0 && parse_int(t[3], &v))))
    return PERR(p, "expected 'dim NAME' or 'dim NAME = VALUE'");
  if (n == 4 && (v < 1 || v > INT32_MAX))
    return PERR(p, "pinned dim %s = %lld is out of range (1..%d)", t[1], (long long)v, INT32_MAX);
  if (find_dim(k, t[1]) >= 0)
    return PERR(p, "dim '%s' declared twice", t[1]);
  if (k->ndims == TILERT_MAX_DIMS)
    return PERR(p, "more than %d dims", TILERT_MAX_DIMS);
  tilert_dim_info *d = &k->dims[k->ndims];
  if (!copy_name(d->name, sizeof d->name, t[1]))
    return PERR(p, "bad dim name '%s'", t[1]);
  d->pinned = n == 4;
  d->value = v;
  k->ndims++;
  return tilert__ok();
}

static tilert_status parse_arg(Parser *p, char **t, int n) {
  tilert_kernel_info *k = p->info;
  if (k->nargs == TILERT_MAX_ARGS)
    return PERR(p, "more than %d arguments", TILERT_MAX_ARGS);
  tilert_arg_info *a = &k->args[k->nargs];
  memset(a, 0, sizeof *a);
  if (n < 4)
    return PERR(p, "expected 'arg NAME tensor DTYPE in|out DIMS...' or 'arg NAME scalar DTYPE'");
  if (!copy_name(a->name, sizeof a->name, t[1]))
    return PERR(p, "bad argument name '%s'", t[1]);
  for (int i = 0; i < k->nargs; i++)
    if (strcmp(k->args[i].name, a->name) == 0)
      return PERR(p, "argument '%s' declared twice", a->name);
  if (!dtype_from(t[3], &a->dtype))
    return PERR(p, "argument '%s': unknown element type '%s' (bool, i32, f16, bf16, f32)", a->name,
                t[3]);
  if (strcmp(t[2], "scalar") == 0) {
    if (n != 4)
      return PERR(p, "scalar argument '%s': expected 'arg NAME scalar DTYPE'", a->name);
    if (a->dtype != TILERT_F32 && a->dtype != TILERT_I32)
      return PERR(p, "scalar argument '%s' must be f32 or i32, not %s", a->name, t[3]);
    a->kind = TILERT_ARG_SCALAR;
    k->nargs++;
    return tilert__ok();
  }
  if (strcmp(t[2], "tensor") != 0)
    return PERR(p, "argument '%s': expected 'tensor' or 'scalar', got '%s'", a->name, t[2]);
  a->kind = TILERT_ARG_TENSOR;
  if (n < 5 || (strcmp(t[4], "in") != 0 && strcmp(t[4], "out") != 0 && strcmp(t[4], "out=0") != 0))
    return PERR(p, "tensor argument '%s': expected 'in' or 'out' (or 'out=0') after the element type", a->name);
  a->is_out = t[4][0] == 'o';
  a->zero_init = strcmp(t[4], "out=0") == 0;
  a->rank = n - 5;
  if (a->rank < 1 || a->rank > TILERT_MAX_RANK)
    return PERR(p, "tensor argument '%s' has rank %d (1..%d)", a->name, a->rank, TILERT_MAX_RANK);
  for (int i = 0; i < a->rank; i++) {
    a->dims[i] = find_dim(k, t[5 + i]);
    if (a->dims[i] < 0)
      return PERR(p, "tensor argument '%s': dim '%s' has no 'dim' line", a->name, t[5 + i]);
  }
  k->nargs++;
  return tilert__ok();
}

/* Joins t[from..to) with single spaces into dst (cap bytes). */
static bool join(char *dst, size_t cap, char **t, int from, int to) {
  size_t used = 0;
  dst[0] = '\0';
  for (int i = from; i < to; i++) {
    int w = snprintf(dst + used, cap - used, "%s%s", i > from ? " " : "", t[i]);
    if (w < 0 || (size_t)w >= cap - used)
      return false;
    used += (size_t)w;
  }
  return true;
}

static tilert_status parse_grid(Parser *p, char **t, int n) {
  tilert_kernel_info *k = p->info;
  if (p->have_grid)
    return PERR(p, "duplicate 'grid' line");
  int axis = 0, start = 1;
  for (int i = 1; i <= n; i++) {
    if (i < n && strcmp(t[i], "|") != 0)
      continue;
    if (axis == 3)
      return PERR(p, "grid has more than 3 axes");
    if (i == start)
      return PERR(p, "grid axis %d is empty", axis);
    if (!join(k->grid[axis], sizeof k->grid[axis], t, start, i))
      return PERR(p, "grid axis %d is too long", axis);
    tilert_status st = tilert__check_expr(k, k->grid[axis]);
    if (st.code)
      return PERR(p, "grid axis %d: %s", axis, st.message);
    axis++;
    start = i + 1;
  }
  for (; axis < 3; axis++)
    strcpy(k->grid[axis], "1");
  p->have_grid = true;
  return tilert__ok();
}

/* "require RPN | TEXT": raw is the payload after "require" with its spacing intact, so the
 * source text keeps its own spelling (it may contain "||"). */
static tilert_status parse_require(Parser *p, const char *raw) {
  tilert_kernel_info *k = p->info;
  if (k->nrequires == TILERT_MAX_REQUIRES)
    return PERR(p, "more than %d 'require' lines", TILERT_MAX_REQUIRES);
  const char *bar = NULL;
  for (const char *s = raw; *s; s++)
    if (*s == '|' && (s == raw || s[-1] == ' ') && (s[1] == ' ' || s[1] == '\0')) {
      bar = s;
      break;
    }
  if (!bar)
    return PERR(p, "expected 'require RPN | SOURCE TEXT'");
  const char *text = bar + 1;
  while (*text == ' ')
    text++;
  size_t rlen = (size_t)(bar - raw);
  while (rlen && raw[rlen - 1] == ' ')
    rlen--;
  while (rlen && *raw == ' ')
    raw++, rlen--;
  if (rlen == 0 || !*text)
    return PERR(p, "'require' needs both an expression and its source text");
  if (rlen >= sizeof k->requires[0] || strlen(text) >= sizeof k->requires_text[0])
    return PERR(p, "'require' line too long");
  memcpy(k->requires[k->nrequires], raw, rlen);
  k->requires[k->nrequires][rlen] = '\0';
  strcpy(k->requires_text[k->nrequires], text);
  tilert_status st = tilert__check_expr(k, k->requires[k->nrequires]);
  if (st.code)
    return PERR(p, "requirement '%s': %s", text, st.message);
  k->nrequires++;
  return tilert__ok();
}

/* ws NAME threads N smem S [persistent [group G] [rows] [pingpong] [cluster 2 x|y]] (no group:
 * the PTX predates it, 8) */
static tilert_status parse_ws(Parser *p, char **t, int n) {
  tilert_kernel_info *k = p->info;
  int64_t th, sm;
  if (k->ws_name[0])
    return PERR(p, "duplicate 'ws' line");
  int i = 6;
  bool persistent = i < n && !strcmp(t[i], "persistent");
  i += persistent;
  int64_t group = 8;
  bool grouped = persistent && i + 1 < n && !strcmp(t[i], "group");
  if (grouped && (!parse_int(t[i + 1], &group) || group < 1 || group > 65535))
    return PERR(p, "bad raster group '%s' (1 to 65535)", t[i + 1]);
  i += 2 * grouped;
  bool rows = persistent && i < n && !strcmp(t[i], "rows");
  i += rows;
  bool pingpong = persistent && i < n && !strcmp(t[i], "pingpong");
  i += pingpong;
  bool cl = persistent && i + 2 < n && !strcmp(t[i], "cluster") && !strcmp(t[i + 1], "2") &&
            (!strcmp(t[i + 2], "x") || !strcmp(t[i + 2], "y"));
  if (cl)
    i += 3;
  if (n < 6 || i != n || strcmp(t[2], "threads") != 0 || strcmp(t[4], "smem") != 0 || !parse_int(t[3], &th) ||
      !parse_int(t[5], &sm) || th < 1 || th > 1024 || sm < 0 || sm > (1 << 24) || (pingpong && cl) ||
      (rows && (pingpong || cl)))
    return PERR(p, "expected 'ws NAME threads N smem S [persistent [group G] [rows | pingpong | cluster 2 x|y]]'");
  k->ws_persistent = persistent;
  k->ws_walk_rows = rows;
  k->ws_tile_group = persistent ? (int)group : 0;
  k->ws_groups = pingpong ? 2 : 1;
  k->ws_cluster = cl ? 2 : 1;
  k->ws_cluster_axis = cl && t[i - 1][0] == 'y';
  if (!copy_name(k->ws_name, sizeof k->ws_name, t[1]))
    return PERR(p, "bad entry point name '%s'", t[1]);
  k->ws_threads = (int)th;
  k->ws_smem_bytes = (int)sm;
  return tilert__ok();
}

/* tmap ARG swizzle W box B0 .. B(rank-1) */
static tilert_status parse_tmap(Parser *p, char **t, int n) {
  tilert_kernel_info *k = p->info;
  if (!k->ws_name[0])
    return PERR(p, "'tmap' before the 'ws' line");
  if (k->ntmaps == TILERT_MAX_TMAPS)
    return PERR(p, "more than %d tensor maps", TILERT_MAX_TMAPS);
  tilert_tmap_info *m = &k->tmaps[k->ntmaps];
  int64_t v;
  int a = n > 1 ? find_arg(k, t[1]) : -1;
  if (a < 0 || k->args[a].kind != TILERT_ARG_TENSOR)
    return PERR(p, "tmap: '%s' is not a tensor argument", n > 1 ? t[1] : "");
  m->multicast = n == 6 + k->args[a].rank && !strcmp(t[n - 1], "multicast");
  if (m->multicast && k->ws_cluster != 2)
    return PERR(p, "tmap %s: multicast without a cluster", t[1]);
  if (n != 5 + k->args[a].rank + m->multicast || strcmp(t[2], "swizzle") != 0 || strcmp(t[4], "box") != 0 ||
      !parse_int(t[3], &v) || (v != 32 && v != 64 && v != 128))
    return PERR(p, "expected 'tmap ARG swizzle 32|64|128 box', one size per dimension of %s [, multicast]", t[1]);
  m->arg = a;
  m->swizzle = (int)v;
  for (int d = 0; d < k->args[a].rank; d++) {
    if (!parse_int(t[5 + d], &v) || v < 1 || v > 256)
      return PERR(p, "tmap %s: box size '%s' is not in 1..256", t[1], t[5 + d]);
    m->box[d] = (int)v;
  }
  k->ntmaps++;
  return tilert__ok();
}

static tilert_status parse_line(Parser *p, char *payload, bool dims_pass) {
  char raw[MAX_LINE], *t[MAX_LINE_TOKS];
  strcpy(raw, payload);
  int n = split(payload, t, MAX_LINE_TOKS);
  if (n < 0)
    return PERR(p, "too many tokens");
  if (n == 0)
    return PERR(p, "empty metadata line");
  bool is_dim = strcmp(t[0], "dim") == 0;
  if (dims_pass != is_dim)
    return tilert__ok();
  if (is_dim)
    return parse_dim(p, t, n);
  if (!strcmp(t[0], "threads"))
    return parse_count(p, t, n, &p->have_threads, 1, TILERT_MAX_THREADS, &p->info->threads);
  if (!strcmp(t[0], "smem"))
    return parse_count(p, t, n, &p->have_smem, 0, 1 << 24, &p->info->smem_bytes);
  if (!strcmp(t[0], "cluster"))
    return parse_count(p, t, n, &p->have_cluster, 2, TILERT_MAX_CLUSTER, &p->info->cluster);
  if (!strcmp(t[0], "arg"))
    return parse_arg(p, t, n);
  if (!strcmp(t[0], "grid"))
    return parse_grid(p, t, n);
  if (!strcmp(t[0], "require"))
    return parse_require(p, strstr(raw, "require") + strlen("require"));
  if (!strcmp(t[0], "param")) {
    if (n != 4 || strcmp(t[2], "=") != 0 || !is_ident(t[1]))
      return PERR(p, "expected 'param NAME = VALUE'");
    return tilert__ok();
  }
  if (!strcmp(t[0], "ws"))
    return parse_ws(p, t, n);
  if (!strcmp(t[0], "full")) {
    if (n != 2 || p->info->full_name[0] || !strcmp(t[1], p->info->name) ||
        !copy_name(p->info->full_name, sizeof p->info->full_name, t[1]))
      return PERR(p, "expected one 'full NAME' (another kernel of the module)");
    return tilert__ok();
  }
  if (!strcmp(t[0], "aligned")) {
    if (n != 2 || strcmp(t[1], "16") || p->info->aligned)
      return PERR(p, "expected one 'aligned 16'");
    p->info->aligned = 16;
    return tilert__ok();
  }
  if (!strcmp(t[0], "zero_wait")) {
    if (n != 1 || p->info->zero_wait)
      return PERR(p, "expected one 'zero_wait'");
    p->info->zero_wait = 1;
    return tilert__ok();
  }
  if (!strcmp(t[0], "tmap"))
    return parse_tmap(p, t, n);
  if (!strcmp(t[0], "kernel"))
    return PERR(p, "expected 'kernel NAME'");
  return PERR(p, "unknown metadata item '%s' (kernel, threads, smem, dim, arg, grid, require, "
                 "param, ws, tmap, full, aligned, zero_wait)", t[0]);
}

/* Every run-time dim must be the size of some tensor dimension, or it could never be bound. */
static tilert_status check_block(Parser *p, int kernel_line) {
  tilert_kernel_info *k = p->info;
  p->lineno = kernel_line;
  if (!p->have_threads)
    return PERR(p, "kernel '%s' has no 'threads' line", k->name);
  if (!p->have_grid)
    return PERR(p, "kernel '%s' has no 'grid' line", k->name);
  for (int d = 0; d < k->ndims; d++) {
    bool used = k->dims[d].pinned;
    for (int a = 0; a < k->nargs && !used; a++)
      for (int i = 0; i < k->args[a].rank; i++)
        used |= k->args[a].kind == TILERT_ARG_TENSOR && k->args[a].dims[i] == d;
    if (!used)
      return PERR(p, "kernel '%s': run-time dim '%s' is not the size of any tensor argument",
                  k->name, k->dims[d].name);
  }
  return tilert__ok();
}

/* Calls fn(line payload, line number) for every metadata line; stops at the first error. */
typedef struct Line {
  const char *start;
  size_t len;
  int no;
} Line;

static bool next_line(const char **cur, Line *l, int *no) {
  if (!**cur)
    return false;
  l->start = *cur;
  const char *nl = strchr(*cur, '\n');
  l->len = nl ? (size_t)(nl - *cur) : strlen(*cur);
  l->no = ++*no;
  *cur = nl ? nl + 1 : *cur + l->len;
  return true;
}

tilert_status tilert_parse_kernel_info_named(const char *text, const char *name, tilert_kernel_info *out) {
  if (!text || !out)
    return tilert__err(TILERT_ERROR_INVALID_ARGUMENT, "tilert_parse_kernel_info: NULL argument");
  memset(out, 0, sizeof *out);
  Parser p = {.info = out};
  char buf[MAX_LINE], *t[MAX_LINE_TOKS];
  char names[512] = "";
  /* Pass 0 finds the block; passes 1 and 2 parse its dims, then everything else. */
  const char *block = NULL;
  int block_line = 0, lineno = 0;
  bool in_block = false;
  Line l;
  for (const char *cur = text; next_line(&cur, &l, &lineno);) {
    int r = meta_payload(l.start, l.len, buf);
    p.lineno = l.no;
    if (r < 0)
      return PERR(&p, "line too long");
    if (r == 0)
      continue;
    int n = split(buf, t, MAX_LINE_TOKS);
    if (n > 0 && strcmp(t[0], "kernel") == 0) {
      if (n != 2 || !is_ident(t[1]) || strlen(t[1]) >= sizeof out->name)
        return PERR(&p, "expected 'kernel NAME' with NAME an identifier");
      if (in_block)
        break;
      size_t used = strlen(names);
      snprintf(names + used, sizeof names - used, "%s%s", used ? ", " : "", t[1]);
      if (!name || strcmp(name, t[1]) == 0) {
        in_block = true;
        block = cur;
        block_line = l.no;
        strcpy(out->name, t[1]);
      }
    } else if (!block_line && !names[0]) {
      return PERR(&p, "metadata before the first 'kernel' line");
    }
  }
  if (!block_line) {
    if (!names[0])
      return tilert__err(TILERT_ERROR_BAD_METADATA,
                         "no '" META_PREFIX " kernel' line: is this PTX from tilec?");
    return tilert__err(TILERT_ERROR_NOT_FOUND, "no kernel '%s' in the module (it has: %s)", name,
                       names);
  }
  for (int pass = 1; pass <= 2; pass++) {
    lineno = block_line;
    for (const char *cur = block; next_line(&cur, &l, &lineno);) {
      int r = meta_payload(l.start, l.len, buf);
      if (r == 0)
        continue;
      p.lineno = l.no;
      if (strncmp(buf, "kernel", 6) == 0 && (buf[6] == ' ' || buf[6] == '\t'))
        break;
      tilert_status st = parse_line(&p, buf, pass == 1);
      if (st.code)
        return st;
    }
  }
  return check_block(&p, block_line);
}

tilert_status tilert_parse_kernel_info(const char *text, tilert_kernel_info *out) {
  return tilert_parse_kernel_info_named(text, NULL, out);
}
