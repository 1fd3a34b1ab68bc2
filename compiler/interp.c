/* interp.c — the TIR interpreter: the CPU reference executor (semantics: docs/tir.md).
 *
 * Every register is one dense row-major buffer of 4-byte elements, allocated once per run:
 * float for f32/f16/bf16 (f16/bf16 values are kept already rounded to their type, so every write
 * into such a tile goes through round_tile), int32_t for i32 and bool (0/1). Ops loop over whole
 * tiles with the op switch outside the loop; control flow jumps between precomputed marker pairs.
 * The element kernels (ew_exec) are also what constant folding calls (interp_eval_elem), so a
 * folded constant is bit-for-bit what the interpreter would have computed. */
#include "tilec.h"
#include "tilert.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ element kernels */

static float round_f16(float x) { return f16_bits_to_f32(f32_to_f16_bits(x)); }
static float round_bf16(float x) { return bf16_bits_to_f32(f32_to_bf16_bits(x)); }

/* Values of f16/bf16 tiles are floats rounded to the type; f32 needs nothing. */
static void round_tile(ElemType t, float *x, int64_t n) {
  if (t == TY_F16)
    for (int64_t i = 0; i < n; i++)
      x[i] = round_f16(x[i]);
  else if (t == TY_BF16)
    for (int64_t i = 0; i < n; i++)
      x[i] = round_bf16(x[i]);
}

/* Float -> i32 as PTX cvt.rzi.s32.f32: toward zero, saturating, NaN -> 0. */
static int32_t f_to_i32(double v) {
  if (isnan(v))
    return 0;
  if (v >= 2147483647.0)
    return INT32_MAX;
  if (v <= -2147483648.0)
    return INT32_MIN;
  return (int32_t)v;
}

static float elem_from_double(ElemType t, double v) {
  return t == TY_F16 ? round_f16((float)v) : t == TY_BF16 ? round_bf16((float)v) : (float)v;
}

/* Stores double v into element i of a tile of type t (the one conversion rule for imm/params). */
static void put_double(ElemType t, void *buf, int64_t i, double v) {
  if (t == TY_I32)
    ((int32_t *)buf)[i] = f_to_i32(v);
  else if (t == TY_BOOL)
    ((int32_t *)buf)[i] = v != 0;
  else
    ((float *)buf)[i] = elem_from_double(t, v);
}

static double get_double(ElemType t, const void *buf, int64_t i) {
  return elem_is_float(t) ? (double)((const float *)buf)[i] : (double)((const int32_t *)buf)[i];
}

static bool float_unary(TirOp op, const float *a, float *d, int64_t n) {
  switch (op) {
#define LOOP(expr)                  \
  for (int64_t i = 0; i < n; i++) { \
    float x = a[i];                 \
    d[i] = (expr);                  \
  }                                 \
  return true;
  case TIR_COPY: LOOP(x)
  case TIR_NEG: LOOP(-x)
  case TIR_ABS: LOOP(fabsf(x))
  case TIR_EXP: LOOP(expf(x))
  case TIR_EXP2: LOOP(exp2f(x))
  case TIR_LOG: LOOP(logf(x))
  case TIR_SQRT: LOOP(sqrtf(x))
  case TIR_RSQRT: LOOP(1.0f / sqrtf(x))
  case TIR_TANH: LOOP(tanhf(x))
  case TIR_ERF: LOOP(erff(x))
  case TIR_SIGMOID: LOOP(1.0f / (1.0f + expf(-x)))
#undef LOOP
  default:
    return false;
  }
}

static bool float_binary(TirOp op, const float *a, const float *b, void *dst, int64_t n) {
  float *d = dst;
  int32_t *c = dst;
  switch (op) {
#define LOOP(out, expr)             \
  for (int64_t i = 0; i < n; i++) { \
    float x = a[i], y = b[i];       \
    out[i] = (expr);                \
  }                                 \
  return true;
  case TIR_ADD: LOOP(d, x + y)
  case TIR_SUB: LOOP(d, x - y)
  case TIR_MUL: LOOP(d, x * y)
  case TIR_DIV: LOOP(d, x / y)
  case TIR_MIN: LOOP(d, fminf(x, y))
  case TIR_MAX: LOOP(d, fmaxf(x, y))
  case TIR_LT: LOOP(c, x < y)
  case TIR_LE: LOOP(c, x <= y)
  case TIR_GT: LOOP(c, x > y)
  case TIR_GE: LOOP(c, x >= y)
  case TIR_EQ: LOOP(c, x == y)
  case TIR_NE: LOOP(c, x != y)
#undef LOOP
  default:
    return false;
  }
}

/* i32 arithmetic wraps (done in uint32_t: no C undefined behaviour); division truncates. */
static bool int_op(TirOp op, const int32_t *a, const int32_t *b, int32_t *d, int64_t n,
                   const char **fault) {
  switch (op) {
#define LOOP(expr)                  \
  for (int64_t i = 0; i < n; i++) { \
    int32_t x = a[i];               \
    int32_t y = b ? b[i] : 0;       \
    (void)y;                        \
    d[i] = (int32_t)(expr);         \
  }                                 \
  return true;
  case TIR_COPY: LOOP(x)
  case TIR_NEG: LOOP(-(uint32_t)x)
  case TIR_ABS: LOOP(x < 0 ? -(uint32_t)x : (uint32_t)x)
  case TIR_NOT: LOOP(!x)
  case TIR_ADD: LOOP((uint32_t)x + (uint32_t)y)
  case TIR_SUB: LOOP((uint32_t)x - (uint32_t)y)
  case TIR_MUL: LOOP((uint32_t)x * (uint32_t)y)
  case TIR_MIN: LOOP(x < y ? x : y)
  case TIR_MAX: LOOP(x > y ? x : y)
  case TIR_AND: LOOP(x && y)
  case TIR_OR: LOOP(x || y)
  case TIR_LT: LOOP(x < y)
  case TIR_LE: LOOP(x <= y)
  case TIR_GT: LOOP(x > y)
  case TIR_GE: LOOP(x >= y)
  case TIR_EQ: LOOP(x == y)
  case TIR_NE: LOOP(x != y)
#undef LOOP
  case TIR_DIV:
  case TIR_REM:
    for (int64_t i = 0; i < n; i++) {
      if (b[i] == 0 || (a[i] == INT32_MIN && b[i] == -1)) {
        *fault = b[i] == 0 ? "i32 division by zero" : "i32 division overflow (INT32_MIN / -1)";
        return false;
      }
      d[i] = op == TIR_DIV ? a[i] / b[i] : a[i] % b[i];
    }
    return true;
  default:
    *fault = "op not defined on integers";
    return false;
  }
}

static void cvt_exec(ElemType st, ElemType dt, const void *src, void *dst, int64_t n) {
  if (elem_is_float(st) && elem_is_float(dt)) {
    memmove(dst, src, (size_t)n * 4);
    round_tile(dt, dst, n);
  } else if (elem_is_float(st)) {
    const float *s = src;
    int32_t *d = dst;
    for (int64_t i = 0; i < n; i++)
      d[i] = dt == TY_BOOL ? s[i] != 0 : f_to_i32(s[i]);
  } else if (elem_is_float(dt)) {
    const int32_t *s = src;
    float *d = dst;
    for (int64_t i = 0; i < n; i++)
      d[i] = elem_from_double(dt, s[i]);
  } else {
    const int32_t *s = src;
    int32_t *d = dst;
    for (int64_t i = 0; i < n; i++)
      d[i] = dt == TY_BOOL ? s[i] != 0 : s[i];
  }
}

/* Element-wise op (incl. CVT) on n elements. at: element type of the value operands (for
 * SELECT args 1 and 2; src[0] is the bool condition); dt: result type. */
static bool ew_exec(TirOp op, ElemType at, ElemType dt, void *dst, void *const src[3], int64_t n,
                    const char **fault) {
  if (op == TIR_CVT) {
    cvt_exec(at, dt, src[0], dst, n);
    return true;
  }
  if (op == TIR_SELECT) {
    const int32_t *c = src[0];
    const uint32_t *x = src[1], *y = src[2];
    uint32_t *d = dst;
    for (int64_t i = 0; i < n; i++)
      d[i] = c[i] ? x[i] : y[i];
    return true;
  }
  if (!elem_is_float(at))
    return int_op(op, src[0], tir_op_info[op].nargs > 1 ? src[1] : NULL, dst, n, fault);
  bool ok = tir_op_info[op].nargs == 1 ? float_unary(op, src[0], dst, n)
                                       : float_binary(op, src[0], src[1], dst, n);
  if (!ok) {
    *fault = "op not defined on floats";
    return false;
  }
  if (!(tir_op_info[op].flags & OPF_CMP))
    round_tile(dt, dst, n);
  return true;
}

bool interp_eval_elem(TirOp op, ElemType at, ElemType dt, const double args[3], double *out) {
  uint32_t buf[3], res = 0;
  void *src[3];
  int n = tir_op_info[op].nargs;
  if (!tir_op_maps_elements(op))
    return false;
  for (int i = 0; i < n && i < 3; i++) {
    ElemType t = op == TIR_SELECT && i == 0 ? TY_BOOL : at;
    put_double(t, &buf[i], 0, args[i]);
    src[i] = &buf[i];
  }
  const char *fault = NULL;
  if (!ew_exec(op, at, dt, &res, src, 1, &fault))
    return false;
  ElemType rt = tir_op_info[op].flags & OPF_CMP ? TY_BOOL : dt;
  *out = get_double(rt, &res, 0);
  return true;
}

/* ------------------------------------------------------------ shaped ops */

/* Dims padded on the left to rank 4 (leading 1s), and row-major strides over them. */
static void pad4(const TileType *t, int64_t dims[4]) {
  int pad = 4 - t->rank;
  for (int i = 0; i < 4; i++)
    dims[i] = i < pad ? 1 : t->dims[i - pad];
}

static void bcast_exec(const TileType *st, const TileType *dt, const uint32_t *s, uint32_t *d) {
  int64_t sd[4], dd[4], ss[4];
  pad4(st, sd);
  pad4(dt, dd);
  int64_t stride = 1;
  for (int i = 3; i >= 0; i--) {
    ss[i] = sd[i] == 1 ? 0 : stride;
    stride *= sd[i];
  }
  int64_t k = 0;
  for (int64_t i0 = 0; i0 < dd[0]; i0++)
    for (int64_t i1 = 0; i1 < dd[1]; i1++)
      for (int64_t i2 = 0; i2 < dd[2]; i2++) {
        const uint32_t *row = s + i0 * ss[0] + i1 * ss[1] + i2 * ss[2];
        if (ss[3])
          memcpy(d + k, row, (size_t)dd[3] * 4);
        else
          for (int64_t i3 = 0; i3 < dd[3]; i3++)
            d[k + i3] = row[0];
        k += dd[3];
      }
}

/* Reduction over `axis` seen as [outer, len, inner]; float sums accumulate in f32 in index
 * order, max/min follow fmaxf/fminf (a NaN loses to a number, as PTX max.f32). */
static void reduce_exec(TirOp op, const TileType *st, int axis, const void *src, void *dst) {
  int64_t outer = 1, inner = 1, len = st->dims[axis];
  for (int i = 0; i < axis; i++)
    outer *= st->dims[i];
  for (int i = axis + 1; i < st->rank; i++)
    inner *= st->dims[i];
  bool isf = elem_is_float(st->elem);
  for (int64_t o = 0; o < outer; o++)
    for (int64_t in = 0; in < inner; in++) {
      int64_t base = o * len * inner + in;
      if (isf) {
        const float *s = src;
        float acc = s[base];
        for (int64_t k = 1; k < len; k++) {
          float x = s[base + k * inner];
          acc = op == TIR_REDUCE_SUM ? acc + x : op == TIR_REDUCE_MAX ? fmaxf(acc, x) : fminf(acc, x);
        }
        ((float *)dst)[o * inner + in] = acc;
      } else {
        const int32_t *s = src;
        int32_t acc = s[base];
        for (int64_t k = 1; k < len; k++) {
          int32_t x = s[base + k * inner];
          acc = op == TIR_REDUCE_SUM ? (int32_t)((uint32_t)acc + (uint32_t)x)
                : op == TIR_REDUCE_MAX ? (x > acc ? x : acc)
                                       : (x < acc ? x : acc);
        }
        ((int32_t *)dst)[o * inner + in] = acc;
      }
    }
  if (isf)
    round_tile(st->elem, dst, outer * inner);
}

/* dst = c + a @ b; each product and the running sum in f32, k ascending (i, k, j loop order
 * keeps that order per element and lets the j loop vectorize). */
static void dot_exec(int M, int K, int N, const float *a, const float *b, const float *c, float *d) {
  if (d != c)
    memcpy(d, c, (size_t)M * N * 4);
  for (int i = 0; i < M; i++) {
    float *drow = d + (int64_t)i * N;
    for (int k = 0; k < K; k++) {
      float aik = a[(int64_t)i * K + k];
      const float *brow = b + (int64_t)k * N;
      for (int j = 0; j < N; j++)
        drow[j] += aik * brow[j];
    }
  }
}

/* ------------------------------------------------------------ the machine */

typedef struct LoopState {
  int64_t i, hi, step;
} LoopState;

typedef struct Machine {
  const TirFunc *f;
  const InterpArg *args;
  const int64_t *dims;
  void **regs;          /* one buffer per register */
  void *scratch;        /* as large as the largest register: results that alias an operand */
  int *match;           /* marker pairs: FOR<->ENDFOR, IF->ELSE|ENDIF, ELSE->ENDIF */
  LoopState *loops;     /* per FOR instruction */
  int64_t block[3];
  char *err;
  size_t errlen;
} Machine;

__attribute__((format(printf, 3, 4))) static bool fault(Machine *m, const TirInst *in, const char *fmt,
                                                        ...) {
  char msg[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  snprintf(m->err, m->errlen, "%s:%d:%d: %s (%s, block %" PRId64 ",%" PRId64 ",%" PRId64 ")", m->f->name,
           in ? in->loc.line : 0, in ? in->loc.col : 0, msg,
           in ? tir_op_info[in->op].name : "-", m->block[0], m->block[1], m->block[2]);
  return false;
}

static const TileType *rtype(const Machine *m, int r) { return &m->f->regs[r].type; }
static int32_t iscalar(const Machine *m, int r) { return *(const int32_t *)m->regs[r]; }

/* Tile element k (float for float types, int32 otherwise) stored to tensor memory. */
static void tensor_put(ElemType t, void *data, int64_t off, const void *tile, int64_t k) {
  double v = elem_is_float(t) ? (double)((const float *)tile)[k] : (double)((const int32_t *)tile)[k];
  elem_store(data, off, t, v);
}

/* An atomic update of tensor element off with tile element k, done alone (the interpreter runs
 * one block at a time): floats in f32, rounded once to the tensor's type; i32 wraps. */
static void tensor_update(TirOp op, ElemType t, void *data, int64_t off, const void *tile, int64_t k) {
  double old = elem_load(data, off, t);
  if (t == TY_I32) {
    int32_t x = (int32_t)old, y = ((const int32_t *)tile)[k];
    int32_t r = op == TIR_ATOMIC_ADD ? (int32_t)((uint32_t)x + (uint32_t)y) : x > y ? x : y;
    elem_store(data, off, t, r);
    return;
  }
  float x = (float)old, y = ((const float *)tile)[k];
  elem_store(data, off, t, op == TIR_ATOMIC_ADD ? x + y : fmaxf(x, y));
}

/* LOAD, STORE and the atomics walk the addressed box in row-major order; scalar indices have extent 1, so
 * the walk order is the tile's element order. */
static void memory_exec(Machine *m, const TirInst *in) {
  const TirArg *a = &m->f->args[in->arg_index];
  const InterpTensor *t = &m->args[in->arg_index].tensor;
  bool load = in->op == TIR_LOAD;
  void *tile = m->regs[load ? in->dst : in->args[0]];
  int64_t start[4] = {0}, ext[4] = {1, 1, 1, 1}, shape[4] = {1, 1, 1, 1}, stride[4] = {0};
  int pad = 4 - a->rank;
  for (int d = 0; d < a->rank; d++) {
    start[pad + d] = iscalar(m, in->index[d].start);
    ext[pad + d] = in->index[d].is_range ? in->index[d].size : 1;
    shape[pad + d] = t->shape[d];
    stride[pad + d] = t->strides[d];
  }
  uint32_t fill = 0;
  if (load)
    put_double(a->elem, &fill, 0, in->imm);
  int64_t k = 0;
  for (int64_t i0 = 0; i0 < ext[0]; i0++)
    for (int64_t i1 = 0; i1 < ext[1]; i1++)
      for (int64_t i2 = 0; i2 < ext[2]; i2++) {
        int64_t c0 = start[0] + i0, c1 = start[1] + i1, c2 = start[2] + i2;
        bool row_ok = c0 >= 0 && c0 < shape[0] && c1 >= 0 && c1 < shape[1] && c2 >= 0 && c2 < shape[2];
        /* Offsets only of elements inside the tensor: tilert_bind proved those fit in int64. */
        int64_t base = row_ok ? c0 * stride[0] + c1 * stride[1] + c2 * stride[2] : 0;
        for (int64_t i3 = 0; i3 < ext[3]; i3++, k++) {
          int64_t c3 = start[3] + i3;
          bool ok = row_ok && c3 >= 0 && c3 < shape[3];
          int64_t off = ok ? base + c3 * stride[3] : 0;
          if (load) {
            if (!ok)
              ((uint32_t *)tile)[k] = fill;
            else if (elem_is_float(a->elem)) /* tensor values are exact in their tile type */
              ((float *)tile)[k] = (float)elem_load(t->data, off, a->elem);
            else
              ((int32_t *)tile)[k] = (int32_t)elem_load(t->data, off, a->elem);
          } else if (ok && in->op == TIR_STORE) {
            tensor_put(a->elem, t->data, off, tile, k);
          } else if (ok) {
            tensor_update(in->op, a->elem, t->data, off, tile, k);
          }
        }
      }
}

static bool leaf_exec(Machine *m, const TirInst *in) {
  const TileType *dt = rtype(m, in->dst);
  void *d = m->regs[in->dst];
  int64_t n = tile_numel(dt);
  switch (in->op) {
  case TIR_CONST:
    put_double(dt->elem, d, 0, in->imm);
    for (int64_t i = 1; i < n; i++)
      ((uint32_t *)d)[i] = ((uint32_t *)d)[0];
    return true;
  case TIR_PARAM:
    put_double(dt->elem, d, 0, m->args[in->arg_index].scalar);
    return true;
  case TIR_DIM: {
    int64_t v = m->dims[in->arg_index];
    if (v < 0 || v > INT32_MAX)
      return fault(m, in, "dim %s = %" PRId64 " does not fit in i32", m->f->dims[in->arg_index].name, v);
    *(int32_t *)d = (int32_t)v;
    return true;
  }
  case TIR_BLOCK_ID:
    *(int32_t *)d = (int32_t)m->block[in->axis];
    return true;
  case TIR_ROW_SHIFT: { /* from the host address: the interpreter's rows start where they do */
    const InterpTensor *t = &m->args[in->arg_index].tensor;
    int64_t off = 0, eb = elem_bytes(m->f->args[in->arg_index].elem);
    for (int k = 0; k < 3 && in->args[k] >= 0; k++)
      off += (int64_t)iscalar(m, in->args[k]) * t->strides[k];
    uint64_t at = (uint64_t)(uintptr_t)t->data + (uint64_t)(off * eb);
    int rank = m->f->args[in->arg_index].rank;
    *(int32_t *)d = t->shape[rank - 1] > 0 ? (int32_t)((at & 15) / (uint64_t)eb) : 0; /* an empty row: 0 */
    return true;
  }
  default: { /* IOTA */
    int64_t dims[4];
    pad4(dt, dims);
    int ax = in->axis + 4 - dt->rank;
    int64_t inner = 1;
    for (int i = ax + 1; i < 4; i++)
      inner *= dims[i];
    for (int64_t i = 0; i < n; i++)
      ((int32_t *)d)[i] = (int32_t)((i / inner) % dims[ax]);
    return true;
  }
  }
}

/* EXTRACT: dst element (i0..i3) is src element (i0 + o0 .. i3 + o3), both padded to rank 4. */
static void extract_exec(const TileType *st, const TileType *dt, const int32_t *offs,
                         const uint32_t *s, uint32_t *d) {
  int64_t sd[4], dd[4], o[4] = {0, 0, 0, 0};
  pad4(st, sd);
  pad4(dt, dd);
  for (int i = 0; i < dt->rank; i++)
    o[4 - dt->rank + i] = offs[i];
  for (int64_t a = 0; a < dd[0]; a++)
    for (int64_t b = 0; b < dd[1]; b++)
      for (int64_t c = 0; c < dd[2]; c++)
        for (int64_t e = 0; e < dd[3]; e++)
          *d++ = s[(((a + o[0]) * sd[1] + b + o[1]) * sd[2] + c + o[2]) * sd[3] + e + o[3]];
}

/* WINDOW: the box of a shared tile (rank 1 or 2; rank 1 is one row) at run-time starts; elements
 * outside the tile read the fill value. */
static void window_exec(const Machine *m, const TirInst *in, const TileType *st, const TileType *dt,
                        const uint32_t *s, uint32_t *d) {
  int64_t rows = st->rank == 2 ? st->dims[0] : 1, cols = st->dims[st->rank - 1];
  int64_t drows = dt->rank == 2 ? dt->dims[0] : 1, dcols = dt->dims[dt->rank - 1];
  int64_t r0 = iscalar(m, in->args[1]), c0 = iscalar(m, in->args[2]);
  uint32_t fbits = 0;
  put_double(dt->elem, &fbits, 0, in->imm);
  for (int64_t i = 0; i < drows; i++)
    for (int64_t j = 0; j < dcols; j++) {
      int64_t r = r0 + i, c = c0 + j;
      *d++ = r >= 0 && r < rows && c >= 0 && c < cols ? s[r * cols + c] : fbits;
    }
}

/* WINDOW_STORE: the value's elements that fall inside the tile, in place; the rest are dropped. */
static void window_store_exec(Machine *m, const TirInst *in) {
  const TileType *t = rtype(m, in->dst), *vt = rtype(m, in->args[0]);
  int64_t rows = t->rank == 2 ? t->dims[0] : 1, cols = t->dims[t->rank - 1];
  int64_t vrows = vt->rank == 2 ? vt->dims[0] : 1, vcols = vt->dims[vt->rank - 1];
  int64_t r0 = iscalar(m, in->args[1]), c0 = iscalar(m, in->args[2]);
  uint32_t *d = m->regs[in->dst];
  const uint32_t *v = m->regs[in->args[0]];
  for (int64_t i = 0; i < vrows; i++)
    for (int64_t j = 0; j < vcols; j++) {
      int64_t r = r0 + i, c = c0 + j;
      if (r >= 0 && r < rows && c >= 0 && c < cols)
        d[r * cols + c] = v[i * vcols + j];
    }
}

/* Non-element-wise ops whose result may alias an operand compute into scratch first. */
static bool shaped_exec(Machine *m, const TirInst *in) {
  const TileType *dt = rtype(m, in->dst);
  int64_t n = tile_numel(dt);
  bool alias = in->dst == in->args[0] || (in->op == TIR_DOT && in->dst == in->args[1]);
  void *d = alias ? m->scratch : m->regs[in->dst];
  const TileType *st = rtype(m, in->args[0]);
  void *s = m->regs[in->args[0]];
  switch (in->op) {
  case TIR_BCAST:
    bcast_exec(st, dt, s, d);
    break;
  case TIR_TRANS: {
    int R = st->dims[0], C = st->dims[1];
    for (int i = 0; i < R; i++)
      for (int j = 0; j < C; j++)
        ((uint32_t *)d)[(int64_t)j * R + i] = ((const uint32_t *)s)[(int64_t)i * C + j];
    break;
  }
  case TIR_DOT: {
    int M = st->dims[0], K = st->dims[1], N = dt->dims[1];
    dot_exec(M, K, N, s, m->regs[in->args[1]], m->regs[in->args[2]], d);
    break;
  }
  case TIR_EXTRACT:
    extract_exec(st, dt, in->offs, s, d);
    break;
  case TIR_WINDOW:
    window_exec(m, in, st, dt, s, d);
    break;
  default:
    reduce_exec(in->op, st, in->axis, s, d);
    break;
  }
  if (alias)
    memcpy(m->regs[in->dst], d, (size_t)n * 4);
  return true;
}

static bool inst_exec(Machine *m, const TirInst *in) {
  if (tir_op_maps_elements(in->op)) {
    void *src[3] = {NULL, NULL, NULL};
    for (int i = 0; i < 3 && in->args[i] >= 0; i++)
      src[i] = m->regs[in->args[i]];
    int vi = in->op == TIR_SELECT ? 1 : 0;
    const char *msg = NULL;
    if (!ew_exec(in->op, rtype(m, in->args[vi])->elem, rtype(m, in->dst)->elem, m->regs[in->dst], src,
                 tile_numel(rtype(m, in->dst)), &msg))
      return fault(m, in, "%s", msg);
    return true;
  }
  switch (in->op) {
  case TIR_LOAD:
  case TIR_STORE:
  case TIR_ATOMIC_ADD:
  case TIR_ATOMIC_MAX:
    memory_exec(m, in);
    return true;
  case TIR_ANY: { /* the whole tile: a guard taken where the GPU's warps skip it does the same */
    const int32_t *x = m->regs[in->args[0]];
    int32_t some = 0;
    for (int64_t k = 0; k < tile_numel(rtype(m, in->args[0])); k++)
      some |= x[k] != 0;
    *(int32_t *)m->regs[in->dst] = some;
    return true;
  }
  case TIR_WINDOW_STORE:
    window_store_exec(m, in);
    return true;
  case TIR_RESHAPE: /* tiles are flat row-major arrays: the elements do not move */
    memmove(m->regs[in->dst], m->regs[in->args[0]], (size_t)tile_numel(rtype(m, in->dst)) * 4);
    return true;
  case TIR_BCAST:
  case TIR_TRANS:
  case TIR_EXTRACT:
  case TIR_WINDOW:
  case TIR_DOT:
  case TIR_REDUCE_SUM:
  case TIR_REDUCE_MAX:
  case TIR_REDUCE_MIN:
    return shaped_exec(m, in);
  default:
    return leaf_exec(m, in);
  }
}

/* One block: a pc walk; markers jump between their precomputed partners. */
/* Runs the block from *pcp until it ends (BLOCK_DONE), faults (BLOCK_FAULT) or reaches a cluster
 * reduction (BLOCK_AT_CLUSTER, *pcp at it: the cluster's other blocks must get there too). */
enum { BLOCK_FAULT, BLOCK_DONE, BLOCK_AT_CLUSTER };

static int block_exec(Machine *m, int *pcp) {
  const TirFunc *f = m->f;
  int pc = *pcp;
  while (pc < f->ninsts) {
    const TirInst *in = &f->insts[pc];
    switch (in->op) {
    case TIR_FOR: {
      LoopState *ls = &m->loops[pc];
      ls->i = iscalar(m, in->args[0]);
      ls->hi = iscalar(m, in->args[1]);
      ls->step = iscalar(m, in->args[2]);
      if (ls->step <= 0)
        return fault(m, in, "for step %" PRId64 " is not positive", ls->step);
      if (ls->i >= ls->hi) {
        pc = m->match[pc] + 1;
        continue;
      }
      *(int32_t *)m->regs[in->dst] = (int32_t)ls->i;
      pc++;
      continue;
    }
    case TIR_ENDFOR: {
      int head = m->match[pc];
      LoopState *ls = &m->loops[head];
      ls->i += ls->step;
      if (ls->i < ls->hi) {
        *(int32_t *)m->regs[f->insts[head].dst] = (int32_t)ls->i;
        pc = head + 1;
      } else {
        pc++;
      }
      continue;
    }
    case TIR_IF:
      pc = iscalar(m, in->args[0]) ? pc + 1 : m->match[pc] + 1;
      continue;
    case TIR_ELSE:
      pc = m->match[pc] + 1;
      continue;
    case TIR_ENDIF:
    case TIR_PIPE_WAIT: /* a scheduled function runs as its unscheduled self: loads are synchronous */
    case TIR_PIPE_RELEASE:
    case TIR_DOT_WAIT:
    case TIR_WG_TURN:
    case TIR_WG_PASS:
    case TIR_HEAD_WAIT:
    case TIR_HEAD_RELEASE:
      pc++;
      continue;
    case TIR_CLUSTER_SUM:
    case TIR_CLUSTER_MAX:
      *pcp = pc;
      return BLOCK_AT_CLUSTER;
    default:
      if (!inst_exec(m, in))
        return BLOCK_FAULT;
      pc++;
    }
  }
  return BLOCK_DONE;
}

/* Marker partners from one stack walk (the IR is verified, so nesting is sound). */
static bool match_markers(Machine *m) {
  const TirFunc *f = m->f;
  int depth = 0;
  int *stack = malloc(sizeof(int) * (size_t)(f->ninsts + 1));
  if (!stack)
    return fault(m, NULL, "out of memory");
  for (int i = 0; i < f->ninsts; i++) {
    TirOp op = f->insts[i].op;
    if (op == TIR_FOR || op == TIR_IF) {
      stack[depth++] = i;
    } else if (op == TIR_ELSE || op == TIR_ENDFOR || op == TIR_ENDIF) {
      if (depth == 0) {
        free(stack);
        return fault(m, &f->insts[i], "unbalanced control flow");
      }
      int open = stack[--depth];
      m->match[open] = i;
      if (op == TIR_ENDFOR)
        m->match[i] = open;
      if (op == TIR_ELSE)
        stack[depth++] = i;
    }
  }
  free(stack);
  if (depth)
    return fault(m, &f->insts[0], "unbalanced control flow");
  return true;
}

static void machine_free(Machine *m) {
  if (m->regs)
    for (int r = 0; r < m->f->nregs; r++)
      free(m->regs[r]);
  free(m->regs);
  free(m->scratch);
  free(m->match);
  free(m->loops);
}

static bool machine_init(Machine *m) {
  const TirFunc *f = m->f;
  int64_t biggest = 1;
  m->regs = calloc((size_t)f->nregs + 1, sizeof *m->regs);
  m->match = calloc((size_t)f->ninsts + 1, sizeof *m->match);
  m->loops = calloc((size_t)f->ninsts + 1, sizeof *m->loops);
  if (!m->regs || !m->match || !m->loops)
    return fault(m, NULL, "out of memory");
  for (int r = 0; r < f->nregs; r++) {
    int64_t n = tile_numel(&f->regs[r].type);
    biggest = n > biggest ? n : biggest;
    if (!(m->regs[r] = calloc((size_t)n, 4)))
      return fault(m, NULL, "out of memory");
  }
  if (!(m->scratch = calloc((size_t)biggest, 4)))
    return fault(m, NULL, "out of memory");
  return match_markers(m);
}

/* Host buffers must exist for every tensor that has elements (a bad binding is a clean error). */
static bool check_args(Machine *m) {
  const TirFunc *f = m->f;
  if (f->ndims && !m->dims)
    return fault(m, NULL, "no dim values");
  for (int i = 0; i < f->nargs; i++) {
    if (f->args[i].kind != ARG_TENSOR)
      continue;
    const InterpTensor *t = &m->args[i].tensor;
    bool empty = false;
    for (int d = 0; d < f->args[i].rank; d++) {
      if (t->shape[d] < 0)
        return fault(m, NULL, "tensor %s: negative shape", f->args[i].name);
      empty |= t->shape[d] == 0;
    }
    if (!empty && !t->data)
      return fault(m, NULL, "tensor %s: no data", f->args[i].name);
  }
  return true;
}

/* One cluster (blocks x0 .. x0 + n - 1 of row y, z; a kernel without a cluster clause runs
 * clusters of one block), its blocks in lockstep: each runs to the next cluster reduction, which
 * then combines their operands in rank order (the GPU's order) and hands every block the result. */
static bool cluster_exec(Machine *ms, int n, int64_t x0, int64_t y, int64_t z) {
  const TirFunc *f = ms[0].f;
  int pc[TILERT_MAX_CLUSTER] = {0};
  for (int b = 0; b < n; b++)
    ms[b].block[0] = x0 + b, ms[b].block[1] = y, ms[b].block[2] = z;
  for (;;) {
    int state[TILERT_MAX_CLUSTER] = {0};
    for (int b = 0; b < n; b++)
      if ((state[b] = block_exec(&ms[b], &pc[b])) == BLOCK_FAULT)
        return false; /* (the machines share one message buffer) */
    for (int b = 1; b < n; b++)
      if (state[b] != state[0] || (state[0] == BLOCK_AT_CLUSTER && pc[b] != pc[0]))
        return fault(&ms[b], state[b] == BLOCK_DONE ? NULL : &f->insts[pc[b]],
                     "the blocks of a cluster reached different cluster reductions");
    if (state[0] == BLOCK_DONE)
      return true;
    const TirInst *in = &f->insts[pc[0]];
    float r = *(const float *)ms[0].regs[in->args[0]];
    for (int b = 1; b < n; b++) {
      float v = *(const float *)ms[b].regs[in->args[0]];
      r = in->op == TIR_CLUSTER_SUM ? r + v : fmaxf(r, v);
    }
    for (int b = 0; b < n; b++) {
      *(float *)ms[b].regs[in->dst] = r;
      pc[b]++;
    }
  }
}

/* The grid, cluster by cluster (one machine per block of a cluster). */
static bool grid_run(Machine *m, const int64_t grid[3]) {
  int n = m->f->cluster;
  if (grid[0] % n)
    return fault(m, NULL, "grid x %" PRId64 " is not a multiple of the cluster size %d", grid[0], n);
  Machine ms[TILERT_MAX_CLUSTER];
  bool ok = check_args(m);
  int ready = 0;
  for (; ok && ready < n; ready++) {
    ms[ready] = *m;
    ok = machine_init(&ms[ready]);
  }
  for (int64_t z = 0; ok && z < grid[2]; z++)
    for (int64_t y = 0; ok && y < grid[1]; y++)
      for (int64_t x = 0; ok && x < grid[0]; x += n)
        ok = cluster_exec(ms, n, x, y, z);
  for (int b = 0; b < ready; b++)
    machine_free(&ms[b]);
  return ok;
}

bool interp_run(const TirFunc *f, const InterpArg *args, const int64_t *dim_values,
                const int64_t grid[3], char *err, size_t errlen) {
  Machine m = {.f = f, .args = args, .dims = dim_values, .err = err, .errlen = errlen};
  if (errlen)
    err[0] = 0;
  for (int i = 0; i < 3; i++)
    if (grid[i] < 0 || grid[i] > INT32_MAX)
      return fault(&m, NULL, "grid size %" PRId64 " on axis %d out of range", grid[i], i);
  return grid_run(&m, grid);
}
