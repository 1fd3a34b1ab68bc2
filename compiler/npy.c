/* npy.c — numpy's .npy files for `tilec run --in NAME=FILE.npy --out DIR` (driver.c): read an
 * array (little-endian bool, int32/64, float16/32/64, C order; uint16 as bfloat16 bits) and
 * write a tensor in its own dtype (bf16, which numpy lacks, as float32: exact). Format:
 * "\x93NUMPY", version, header length, a Python dict literal, the data. */
#include "tilec.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

enum { NPY_MAX_BYTES = 1 << 30 };

/* The value of `key` in the header dict: the text after "'key':" with blanks skipped. */
static const char *npy_field(const char *hdr, const char *key) {
  char pat[32];
  snprintf(pat, sizeof pat, "'%s':", key);
  const char *p = strstr(hdr, pat);
  if (!p)
    return NULL;
  for (p += strlen(pat); *p == ' '; p++) {
  }
  return p;
}

static bool npy_fail(Diag *d, const char *path, const char *why) {
  diag_plain(d, DIAG_ERROR, "--in: '%s' is not a .npy file tilec reads: %s", path, why);
  return false;
}

/* Parses the header dict (NUL-terminated) into x's descr and shape. */
static bool npy_parse_header(const char *hdr, const char *path, NpyArray *x, Diag *d) {
  const char *descr = npy_field(hdr, "descr"), *order = npy_field(hdr, "fortran_order");
  const char *shape = npy_field(hdr, "shape");
  if (!descr || !order || !shape || *descr != '\'' || *shape != '(')
    return npy_fail(d, path, "malformed header");
  size_t n = strcspn(descr + 1, "'");
  if (n >= sizeof x->descr)
    return npy_fail(d, path, "unknown dtype");
  memcpy(x->descr, descr + 1, n);
  x->descr[n] = 0;
  if (strncmp(order, "False", 5))
    return npy_fail(d, path, "Fortran order (save np.ascontiguousarray(x))");
  x->rank = 0;
  x->numel = 1;
  for (const char *p = shape + 1; *p && *p != ')';) {
    char *end;
    errno = 0;
    long long v = strtoll(p, &end, 10);
    if (end == p || errno || v < 0 || x->rank == TILE_MAX_RANK)
      return npy_fail(d, path, "unsupported shape (rank 0 to 4)");
    x->shape[x->rank++] = v;
    if (v && x->numel > NPY_MAX_BYTES / v)
      return npy_fail(d, path, "too large");
    x->numel *= v;
    for (p = end; *p == ',' || *p == ' '; p++) {
    }
  }
  return true;
}

/* Element size of a supported dtype, 0 otherwise. */
static int npy_size(const char *descr) {
  static const struct { const char *descr; int size; } known[] = {
      {"|b1", 1}, {"<i4", 4}, {"<i8", 8}, {"<f2", 2}, {"<f4", 4}, {"<f8", 8}, {"<u2", 2}};
  for (size_t i = 0; i < sizeof known / sizeof *known; i++)
    if (!strcmp(descr, known[i].descr))
      return known[i].size;
  return 0;
}

bool npy_read(Arena *a, const char *path, NpyArray *x, Diag *d) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    diag_plain(d, DIAG_ERROR, "--in: cannot open '%s': %s", path, strerror(errno));
    return false;
  }
  unsigned char pre[12];
  bool ok = fread(pre, 1, 10, f) == 10 && !memcmp(pre, "\x93NUMPY", 6) && pre[6] >= 1 && pre[6] <= 3;
  size_t hlen = ok ? (size_t)pre[8] | (size_t)pre[9] << 8 : 0;
  if (ok && pre[6] >= 2) {
    ok = fread(pre + 10, 1, 2, f) == 2;
    hlen |= (size_t)pre[10] << 16 | (size_t)pre[11] << 24;
  }
  char *hdr = ok && hlen < 65536 ? arena_alloc(a, hlen + 1) : NULL;
  ok = hdr && fread(hdr, 1, hlen, f) == hlen && npy_parse_header(hdr, path, x, d);
  int size = ok ? npy_size(x->descr) : 0;
  if (ok && !size) {
    fclose(f);
    diag_plain(d, DIAG_ERROR, "--in: '%s' holds dtype '%s'; tilec reads bool, int32, int64, "
               "float16, float32, float64 and uint16 (bfloat16 bits)", path, x->descr);
    return false;
  }
  if (ok) {
    unsigned char *data = arena_alloc(a, (size_t)x->numel * (size_t)size + 1);
    ok = fread(data, (size_t)size, (size_t)x->numel, f) == (size_t)x->numel;
    x->data = data;
    if (!ok)
      npy_fail(d, path, "data cut short");
  } else if (!d->nerrors) {
    npy_fail(d, path, "bad magic or header");
  }
  fclose(f);
  return ok;
}

double npy_get(const NpyArray *x, int64_t i, ElemType t) {
  const unsigned char *p = x->data;
  const char *s = x->descr;
  if (!strcmp(s, "|b1"))
    return p[i] != 0;
  if (!strcmp(s, "<i4") || !strcmp(s, "<f4") || !strcmp(s, "<f2"))
    return elem_load(p, i, s[1] == 'i' ? TY_I32 : s[2] == '4' ? TY_F32 : TY_F16);
  if (!strcmp(s, "<u2")) /* bfloat16 bits for a bf16 tensor, else an integer */
    return t == TY_BF16 ? elem_load(p, i, TY_BF16) : ((const uint16_t *)(const void *)p)[i];
  if (!strcmp(s, "<i8")) {
    int64_t v;
    memcpy(&v, p + 8 * i, 8);
    return (double)v;
  }
  double v;
  memcpy(&v, p + 8 * i, 8);
  return v;
}

char *npy_format(Arena *a, ElemType t, int rank, const int64_t *shape, const void *data,
                 size_t *len) {
  static const char *descr[TY_COUNT] = {[TY_BOOL] = "|b1", [TY_I32] = "<i4", [TY_F16] = "<f2",
                                        [TY_BF16] = "<f4", [TY_F32] = "<f4"};
  char dims[128] = "";
  int64_t numel = 1;
  for (int r = 0; r < rank; r++) {
    size_t used = strlen(dims);
    snprintf(dims + used, sizeof dims - used, "%lld%s", (long long)shape[r], rank == 1 ? "," : r + 1 < rank ? ", " : "");
    numel *= shape[r];
  }
  char *dict = arena_printf(a, "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }",
                            descr[t], dims);
  size_t hlen = strlen(dict) + 1, pad = (64 - (10 + hlen) % 64) % 64;
  int esize = t == TY_BF16 ? 4 : elem_bytes(t);
  *len = 10 + hlen + pad + (size_t)numel * (size_t)esize;
  unsigned char *out = arena_alloc(a, *len);
  memcpy(out, "\x93NUMPY\x01\x00", 8);
  out[8] = (unsigned char)((hlen + pad) & 0xff), out[9] = (unsigned char)((hlen + pad) >> 8);
  memcpy(out + 10, dict, hlen - 1);
  memset(out + 10 + hlen - 1, ' ', pad);
  out[10 + hlen + pad - 1] = '\n';
  unsigned char *body = out + 10 + hlen + pad;
  if (t == TY_BF16)
    for (int64_t i = 0; i < numel; i++)
      elem_store(body, i, TY_F32, elem_load(data, i, TY_BF16));
  else
    memcpy(body, data, (size_t)numel * (size_t)esize);
  return (char *)out;
}
