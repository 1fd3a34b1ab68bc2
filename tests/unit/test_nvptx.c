/* test_nvptx.c — hand-built TIR for each op family lowers to PTX for sm_80 and sm_90a; the PTX
 * assembles with ptxas (when CUDA is installed) without spills; metadata and ABI as documented. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "layout.h"
#include "tilec.h"
#include "test_support.h"

static SrcLoc at(int line) { return (SrcLoc){line, 1, line, 2}; }

static TileType ty(ElemType e, int rank, int d0, int d1) {
  TileType t = {.elem = e, .rank = rank};
  t.dims[0] = d0, t.dims[1] = d1;
  return t;
}
static TileType shared(TileType t) {
  t.place = PLACE_SHARED;
  return t;
}

/* ------------------------------------------------------ a tiny builder */

typedef struct K {
  Arena *a;
  TirFunc *f;
} K;

static K kernel(const char *name, int threads) {
  K k = {arena_new(), NULL};
  k.f = tir_func_new(k.a, name, at(1));
  k.f->threads = threads;
  k.f->args = arena_alloc(k.a, 16 * sizeof(TirArg));
  k.f->dims = arena_alloc(k.a, 8 * sizeof(TirDim));
  return k;
}

static int dim(K *k, const char *name, bool pinned, int64_t v) {
  k->f->dims[k->f->ndims] = (TirDim){name, pinned, v, NULL};
  return k->f->ndims++;
}

static int tensor(K *k, const char *name, ElemType e, bool out, int rank, const int *dims) {
  TirArg *a = &k->f->args[k->f->nargs];
  *a = (TirArg){.name = name, .kind = ARG_TENSOR, .elem = e, .is_out = out, .rank = rank, .loc = at(1)};
  for (int i = 0; i < rank; i++)
    a->dims[i] = dims[i];
  return k->f->nargs++;
}

static int scalar_arg(K *k, const char *name, ElemType e) {
  k->f->args[k->f->nargs] = (TirArg){.name = name, .kind = ARG_SCALAR, .elem = e, .loc = at(1)};
  return k->f->nargs++;
}

static int konst(K *k, TileType t, double v) {
  TirInst *in = tir_emit(k->f, TIR_CONST, at(2));
  in->dst = tir_new_reg(k->f, t, NULL);
  in->imm = v;
  return in->dst;
}
static int ci(K *k, int v) { return konst(k, ty(TY_I32, 0, 0, 0), v); }

static int op(K *k, TirOp o, TileType t, int a, int b, int c) {
  TirInst *in = tir_emit(k->f, o, at(3));
  in->dst = tir_new_reg(k->f, t, NULL);
  in->args[0] = a, in->args[1] = b, in->args[2] = c;
  return in->dst;
}
static int op_into(K *k, TirOp o, int dst, int a, int b, int c) {
  TirInst *in = tir_emit(k->f, o, at(3));
  in->dst = dst;
  in->args[0] = a, in->args[1] = b, in->args[2] = c;
  return dst;
}
static int leaf(K *k, TirOp o, TileType t, int axis, int arg) {
  TirInst *in = tir_emit(k->f, o, at(4));
  in->dst = tir_new_reg(k->f, t, NULL);
  in->axis = axis;
  in->arg_index = arg;
  return in->dst;
}
static int reduce(K *k, TirOp o, int src, int axis) {
  TileType t = k->f->regs[src].type;
  t.dims[axis] = 1;
  t.place = PLACE_REG;
  TirInst *in = tir_emit(k->f, o, at(5));
  in->dst = tir_new_reg(k->f, t, NULL);
  in->args[0] = src;
  in->axis = axis;
  return in->dst;
}

/* idx: per tensor dim, a start register and a size (0 = scalar index). */
static int load(K *k, TileType t, int arg, double fill, const int *start, const int *size) {
  TirInst *in = tir_emit(k->f, TIR_LOAD, at(6));
  in->dst = tir_new_reg(k->f, t, NULL);
  in->arg_index = arg;
  in->imm = fill;
  for (int d = 0; d < k->f->args[arg].rank; d++)
    in->index[d] = (TirIndex){size[d] > 0, start[d], size[d] > 0 ? size[d] : 1};
  return in->dst;
}
static void store(K *k, int val, int arg, const int *start, const int *size) {
  TirInst *in = tir_emit(k->f, TIR_STORE, at(7));
  in->args[0] = val;
  in->arg_index = arg;
  for (int d = 0; d < k->f->args[arg].rank; d++)
    in->index[d] = (TirIndex){size[d] > 0, start[d], size[d] > 0 ? size[d] : 1};
}
static void marker(K *k, TirOp o, int dst, int a, int b, int c) {
  TirInst *in = tir_emit(k->f, o, at(8));
  in->dst = dst;
  in->args[0] = a, in->args[1] = b, in->args[2] = c;
}

/* ------------------------------------------------------ compile + check */

static char *errbuf;
static size_t errlen;

static char *compile(K *k, GpuArch arch, bool llvm, int *smem, bool expect_ok) {
  FILE *m = open_memstream(&errbuf, &errlen);
  Diag d;
  diag_init(&d, NULL, m);
  cr_assert(tir_verify(k->f, &d, "test"), "hand-built TIR is invalid");
  NvptxOptions o = {.arch = arch, .opt_level = 3, .dump_llvm = llvm};
  char *out = nvptx_compile(k->f, &o, &d, smem);
  fclose(m);
  if (expect_ok)
    cr_assert(out, "nvptx_compile failed: %s", errbuf);
  return out;
}


static void both_arches(K *k, const char **must, int nmust) {
  GpuArch arches[2] = {ARCH_SM80, ARCH_SM90A};
  for (int i = 0; i < 2; i++) {
    int smem = -1;
    char *ptx = compile(k, arches[i], false, &smem, true);
    if (getenv("TILEC_TEST_DUMP")) { /* debugging aid: keep the PTX */
      char path[256];
      snprintf(path, sizeof path, "%s/%s.%s.ptx", getenv("TILEC_TEST_DUMP"), k->f->name, arch_name(arches[i]));
      FILE *o = fopen(path, "w");
      if (o) {
        fputs(ptx, o);
        fclose(o);
      }
    }
    cr_assert(strstr(ptx, arch_name(arches[i])));
    char entry[128];
    snprintf(entry, sizeof entry, ".entry %s(", k->f->name);
    cr_assert(strstr(ptx, entry), "no %s in PTX", entry);
    cr_assert_not(strstr(ptx, ".local"), "local memory (unpromoted tile registers)");
    for (int j = 0; j < nmust; j++)
      cr_assert(strstr(ptx, must[j]), "PTX for %s lacks \"%s\"", arch_name(arches[i]), must[j]);
    ptxas_assert_clean(ptx, arches[i]);
  }
}

/* ------------------------------------------------------------ kernels */

Test(nvptx, vadd_abi_meta_and_vectors) {
  K k = kernel("vadd", 128);
  int N = dim(&k, "N", false, 0);
  int X = tensor(&k, "X", TY_F32, false, 1, &N), Y = tensor(&k, "Y", TY_F32, false, 1, &N);
  int Z = tensor(&k, "Z", TY_F32, true, 1, &N);
  k.f->grid[0] = (TirExpr){"N 1024 cdiv", "cdiv(N, BLOCK)", at(1)};
  k.f->nparams = 1;
  k.f->params = arena_alloc(k.a, sizeof(TirParamValue));
  k.f->params[0] = (TirParamValue){"BLOCK", false, 1024};
  TileType v = ty(TY_F32, 1, 1024, 0);
  int i0 = op(&k, TIR_MUL, ty(TY_I32, 0, 0, 0), leaf(&k, TIR_BLOCK_ID, ty(TY_I32, 0, 0, 0), 0, 0), ci(&k, 1024), -1);
  int sz[1] = {1024}, st[1] = {i0};
  int x = load(&k, v, X, 0, st, sz), y = load(&k, v, Y, 0, st, sz);
  store(&k, op(&k, TIR_ADD, v, x, y, -1), Z, st, sz);
  const char *must[] = {"ld.global.v4.b32", "st.global.v4", ".param .u64 vadd_param_0", ".param .u32 vadd_param_3"};
  both_arches(&k, must, 4);
  int smem = -1;
  char *ptx = compile(&k, ARCH_SM90A, false, &smem, true);
  cr_assert_eq(smem, 0);
  cr_assert_not(strstr(ptx, "vadd_param_4"));
  const char *head = "// tilec: kernel vadd\n// tilec: threads 128\n// tilec: smem 0\n// tilec: dim N\n"
                     "// tilec: arg X tensor f32 in N\n// tilec: arg Y tensor f32 in N\n"
                     "// tilec: arg Z tensor f32 out N\n// tilec: grid N 1024 cdiv | 1 | 1\n"
                     "// tilec: param BLOCK = 1024\n";
  cr_assert_eq(strncmp(ptx, head, strlen(head)), 0, "metadata header:\n%.400s", ptx);
  char *ll = compile(&k, ARCH_SM80, true, &smem, true);
  cr_assert(strstr(ll, "ptx_kernel"));
  cr_assert(strstr(ll, "!\"kernel\""));
  cr_assert(strstr(ll, "!\"maxntidx\", i32 128"));
  arena_free(k.a);
}

/* The parameter list is sized from the function: 50 rank-4 tensors and 80 run-time dims are 280
 * parameters (a fixed array of 256 used to overflow; sema keeps kernels within the runtime's
 * limits, this TIR is built by hand past them). */
Test(nvptx, signature_is_sized_from_the_function) {
  enum { NT = 50, ND = 80 };
  K k = kernel("wide", 32);
  k.f->args = arena_alloc(k.a, NT * sizeof(TirArg));
  k.f->dims = arena_alloc(k.a, ND * sizeof(TirDim));
  for (int i = 0; i < ND; i++)
    dim(&k, arena_printf(k.a, "D%d", i), false, 0);
  for (int i = 0; i < NT; i++) {
    int dims[4] = {(4 * i) % ND, (4 * i + 1) % ND, (4 * i + 2) % ND, (4 * i + 3) % ND};
    tensor(&k, arena_printf(k.a, "T%d", i), TY_F32, i == NT - 1, 4, dims);
  }
  int z = ci(&k, 0), st[4] = {z, z, z, z}, sz[4] = {1, 1, 1, 32};
  store(&k, konst(&k, (TileType){.elem = TY_F32, .rank = 4, .dims = {1, 1, 1, 32}}, 1.0), NT - 1, st, sz);
  char *ptx = compile(&k, ARCH_SM90A, false, NULL, true);
  cr_assert(strstr(ptx, ".param .u32 wide_param_279"), "%.2000s", ptx);
  cr_assert_not(strstr(ptx, "wide_param_280"));
  arena_free(k.a);
}

/* Softmax over rows of a [4, 1000] tile: reductions over lanes and warps, exp, bcast. */
Test(nvptx, softmax_rows_reduce_bcast) {
  K k = kernel("softmax4", 256);
  int dims[2] = {dim(&k, "M", false, 0), dim(&k, "N", true, 1000)};
  int X = tensor(&k, "X", TY_BF16, false, 2, dims), Y = tensor(&k, "Y", TY_BF16, true, 2, dims);
  TileType t16 = ty(TY_BF16, 2, 4, 1000), t32 = ty(TY_F32, 2, 4, 1000);
  int r0 = op(&k, TIR_MUL, ty(TY_I32, 0, 0, 0), leaf(&k, TIR_BLOCK_ID, ty(TY_I32, 0, 0, 0), 0, 0), ci(&k, 4), -1);
  int st[2] = {r0, ci(&k, 0)}, sz[2] = {4, 1000};
  int x = op(&k, TIR_CVT, t32, load(&k, t16, X, -1.0 / 0.0, st, sz), -1, -1);
  int mx = reduce(&k, TIR_REDUCE_MAX, x, 1);
  int e = op(&k, TIR_EXP, t32, op(&k, TIR_SUB, t32, x, op(&k, TIR_BCAST, t32, mx, -1, -1), -1), -1, -1);
  int s = reduce(&k, TIR_REDUCE_SUM, e, 1);
  int y = op(&k, TIR_DIV, t32, e, op(&k, TIR_BCAST, t32, s, -1, -1), -1);
  store(&k, op(&k, TIR_CVT, t16, y, -1, -1), Y, st, sz);
  /* exp(x - max) as one fma into ex2; / sum as one reciprocal per row and a multiply each. */
  const char *must[] = {"shfl.sync.bfly", "ex2.approx.ftz.f32", "bar.sync", "ld.global.v4.b32", "cvt.rn.bf16.f32",
                        "fma.rn.f32", "rcp.rn.f32"};
  both_arches(&k, must, 7);
  int smem = -1;
  char *ptx = compile(&k, ARCH_SM90A, false, &smem, true);
  cr_assert_not(strstr(ptx, "div.rn.f32"), "a division per element");
  cr_assert_not(strstr(ptx, "sub.rn.f32"), "x - max not folded into the fma");
  arena_free(k.a);
}

/* Every element-wise op, casts among all types, iota, select, IF/ELSE, FOR. */
Test(nvptx, elementwise_casts_control_flow) {
  K k = kernel("ew", 64);
  int N = dim(&k, "N", false, 0);
  int X = tensor(&k, "X", TY_F16, false, 1, &N), I = tensor(&k, "I", TY_I32, true, 1, &N);
  int Bo = tensor(&k, "Bo", TY_BOOL, true, 1, &N), F = tensor(&k, "F", TY_F32, true, 1, &N);
  int al = scalar_arg(&k, "alpha", TY_F32), ni = scalar_arg(&k, "n", TY_I32);
  TileType f = ty(TY_F32, 1, 100, 0), h = ty(TY_F16, 1, 100, 0), i = ty(TY_I32, 1, 100, 0), b = ty(TY_BOOL, 1, 100, 0);
  TileType si = ty(TY_I32, 0, 0, 0), sf = ty(TY_F32, 0, 0, 0);
  int st[1] = {ci(&k, 0)}, sz[1] = {100};
  int x = op(&k, TIR_CVT, f, load(&k, h, X, 0, st, sz), -1, -1);
  int alpha = op(&k, TIR_BCAST, f, leaf(&k, TIR_PARAM, sf, 0, al), -1, -1);
  TirOp un[] = {TIR_NEG, TIR_ABS, TIR_EXP, TIR_EXP2, TIR_LOG, TIR_SQRT, TIR_RSQRT, TIR_TANH, TIR_ERF, TIR_SIGMOID};
  int acc = x;
  for (size_t u = 0; u < sizeof un / sizeof *un; u++)
    acc = op(&k, TIR_ADD, f, acc, op(&k, un[u], f, x, -1, -1), -1);
  TirOp bin[] = {TIR_SUB, TIR_MUL, TIR_DIV, TIR_MIN, TIR_MAX};
  for (size_t u = 0; u < sizeof bin / sizeof *bin; u++)
    acc = op(&k, bin[u], f, acc, alpha, -1);
  int ix = op(&k, TIR_ADD, i, leaf(&k, TIR_IOTA, i, 0, 0), op(&k, TIR_CVT, i, acc, -1, -1), -1);
  int nn = op(&k, TIR_BCAST, i, leaf(&k, TIR_PARAM, si, 0, ni), -1, -1);
  TirOp ibin[] = {TIR_MIN, TIR_ADD, TIR_SUB, TIR_MUL, TIR_DIV, TIR_REM, TIR_MAX};
  for (size_t u = 0; u < sizeof ibin / sizeof *ibin; u++)
    ix = op(&k, ibin[u], i, ix, u == 6 ? leaf(&k, TIR_IOTA, i, 0, 0) : nn, -1);
  ix = op(&k, TIR_ABS, i, op(&k, TIR_NEG, i, ix, -1, -1), -1, -1);
  TirOp cmp[] = {TIR_LT, TIR_LE, TIR_GT, TIR_GE, TIR_EQ, TIR_NE};
  int cond = op(&k, TIR_LT, b, x, alpha, -1);
  for (size_t u = 0; u < sizeof cmp / sizeof *cmp; u++) {
    cond = op(&k, TIR_AND, b, cond, op(&k, cmp[u], b, ix, nn, -1), -1);
    cond = op(&k, TIR_OR, b, cond, op(&k, cmp[u], b, acc, x, -1), -1);
  }
  cond = op(&k, TIR_NOT, b, op(&k, TIR_NE, b, cond, op(&k, TIR_CVT, b, acc, -1, -1), -1), -1, -1);
  int sel = op(&k, TIR_SELECT, f, cond, acc, op(&k, TIR_CVT, f, ix, -1, -1));
  /* FOR with a loop-carried register, IF/ELSE on a run-time scalar. */
  int r = tir_new_reg(k.f, f, "r");
  op_into(&k, TIR_COPY, r, sel, -1, -1);
  int iv = tir_new_reg(k.f, si, "j");
  marker(&k, TIR_FOR, iv, ci(&k, 0), leaf(&k, TIR_PARAM, si, 0, ni), ci(&k, 2));
  op_into(&k, TIR_ADD, r, r, op(&k, TIR_CVT, f, op(&k, TIR_BCAST, i, iv, -1, -1), -1, -1), -1);
  marker(&k, TIR_ENDFOR, -1, -1, -1, -1);
  int c = op(&k, TIR_GT, ty(TY_BOOL, 0, 0, 0), leaf(&k, TIR_PARAM, si, 0, ni), ci(&k, 3), -1);
  marker(&k, TIR_IF, -1, c, -1, -1);
  op_into(&k, TIR_MUL, r, r, alpha, -1);
  marker(&k, TIR_ELSE, -1, -1, -1, -1);
  op_into(&k, TIR_SUB, r, r, alpha, -1);
  marker(&k, TIR_ENDIF, -1, -1, -1, -1);
  store(&k, r, F, st, sz);
  store(&k, ix, I, st, sz);
  store(&k, op(&k, TIR_CVT, b, op(&k, TIR_CVT, h, r, -1, -1), -1, -1), Bo, st, sz);
  const char *must[] = {"lg2.approx.ftz.f32", "sqrt.rn.f32", "rsqrt.approx", "rcp.approx.ftz.f32", "cvt.rzi.s32.f32",
                        "rem.s32", "st.global.u8"};
  both_arches(&k, must, 7);
  arena_free(k.a);
}

/* GEMM shape: shared operand tiles loaded in a loop, dot on tensor cores, epilogue with a rank-1 bias. */
Test(nvptx, gemm_shared_dot_loop) {
  K k = kernel("gemm", 128);
  int M = dim(&k, "M", false, 0), Kd = dim(&k, "K", false, 0), Nd = dim(&k, "N", false, 0);
  int A = tensor(&k, "A", TY_F16, false, 2, (int[]){M, Kd}), B = tensor(&k, "B", TY_F16, false, 2, (int[]){Kd, Nd});
  int bias = tensor(&k, "bias", TY_F16, false, 1, &Nd), C = tensor(&k, "C", TY_F16, true, 2, (int[]){M, Nd});
  TileType si = ty(TY_I32, 0, 0, 0);
  int m0 = op(&k, TIR_MUL, si, leaf(&k, TIR_BLOCK_ID, si, 1, 0), ci(&k, 64), -1);
  int n0 = op(&k, TIR_MUL, si, leaf(&k, TIR_BLOCK_ID, si, 0, 0), ci(&k, 32), -1);
  int acc = konst(&k, ty(TY_F32, 2, 64, 32), 0);
  int kk = tir_new_reg(k.f, si, "k0");
  marker(&k, TIR_FOR, kk, ci(&k, 0), leaf(&k, TIR_DIM, si, 0, Kd), ci(&k, 16));
  int a = load(&k, shared(ty(TY_F16, 2, 64, 16)), A, 0, (int[]){m0, kk}, (int[]){64, 16});
  int b = load(&k, shared(ty(TY_F16, 2, 16, 32)), B, 0, (int[]){kk, n0}, (int[]){16, 32});
  op_into(&k, TIR_DOT, acc, a, b, acc);
  marker(&k, TIR_ENDFOR, -1, -1, -1, -1);
  TileType t = ty(TY_F32, 2, 64, 32);
  int bv = op(&k, TIR_CVT, ty(TY_F32, 1, 32, 0), load(&k, ty(TY_F16, 1, 32, 0), bias, 0, &n0, (int[]){32}), -1, -1);
  int y = op(&k, TIR_MAX, t, op(&k, TIR_ADD, t, acc, op(&k, TIR_BCAST, t, bv, -1, -1), -1), konst(&k, t, 0), -1);
  store(&k, op(&k, TIR_CVT, ty(TY_F16, 2, 64, 32), y, -1, -1), C, (int[]){m0, n0}, (int[]){64, 32});
  const char *must[] = {"mma.sync.aligned.m16n8k16", "ldmatrix.sync.aligned.m8n8.x4.trans", "bar.sync",
                        ".extern .shared .align 16 .b8 tilec_smem[]", "st.shared"};
  setenv("TILEC_WGMMA", "0", 1); /* the mma.sync path on sm_90a too (wgmma: test_mma.c) */
  both_arches(&k, must, 5);
  int smem = 0;
  compile(&k, ARCH_SM90A, false, &smem, true);
  unsetenv("TILEC_WGMMA");
  /* a: 64 rows of (16 + 8) halves; b: 16 rows of (32 + 8) halves. */
  cr_assert_eq(smem, 64 * 24 * 2 + 16 * 40 * 2);
  arena_free(k.a);
}

/* Attention shape: a transposed shared tile read in place, a register operand staged for DOT,
 * row statistics broadcast into a tile of another shape (layout conversion through shared). */
Test(nvptx, attention_trans_view_and_conversions) {
  K k = kernel("attn", 128);
  int Nd = dim(&k, "N", false, 0), D = dim(&k, "D", true, 64);
  int Q = tensor(&k, "Q", TY_F16, false, 2, (int[]){Nd, D}), Kt = tensor(&k, "K", TY_F16, false, 2, (int[]){Nd, D});
  int O = tensor(&k, "O", TY_F32, true, 2, (int[]){Nd, D});
  TileType si = ty(TY_I32, 0, 0, 0);
  int z = ci(&k, 0);
  int q = load(&k, shared(ty(TY_F16, 2, 64, 64)), Q, 0, (int[]){z, z}, (int[]){64, 64});
  int kt = load(&k, shared(ty(TY_F16, 2, 32, 64)), Kt, 0, (int[]){z, z}, (int[]){32, 64});
  int ktT = op(&k, TIR_TRANS, ty(TY_F16, 2, 64, 32), kt, -1, -1);
  int s = op(&k, TIR_DOT, ty(TY_F32, 2, 64, 32), q, ktT, konst(&k, ty(TY_F32, 2, 64, 32), 0));
  int mx = reduce(&k, TIR_REDUCE_MAX, s, 1); /* [64, 1] from [64, 32] */
  int p16 = op(&k, TIR_CVT, ty(TY_F16, 2, 64, 32),
               op(&k, TIR_EXP, ty(TY_F32, 2, 64, 32), op(&k, TIR_SUB, ty(TY_F32, 2, 64, 32), s,
                                                          op(&k, TIR_BCAST, ty(TY_F32, 2, 64, 32), mx, -1, -1), -1),
                  -1, -1),
               -1, -1);
  int v = load(&k, ty(TY_F16, 2, 32, 64), Kt, 0, (int[]){z, z}, (int[]){32, 64}); /* register operand */
  int o = op(&k, TIR_DOT, ty(TY_F32, 2, 64, 64), p16, v, konst(&k, ty(TY_F32, 2, 64, 64), 0));
  /* [64, 1] broadcast into [64, 64]: its layout is the [64, 32] parent's, so it converts. */
  o = op(&k, TIR_MUL, ty(TY_F32, 2, 64, 64), o, op(&k, TIR_BCAST, ty(TY_F32, 2, 64, 64), mx, -1, -1), -1);
  /* A reg -> reg transpose and a min reduction over i32 along axis 0. */
  int tr = op(&k, TIR_TRANS, ty(TY_F32, 2, 64, 64), o, -1, -1);
  int io = leaf(&k, TIR_IOTA, ty(TY_I32, 2, 64, 64), 0, 0);
  int mn = reduce(&k, TIR_REDUCE_MIN, io, 0);
  int add = op(&k, TIR_ADD, ty(TY_F32, 2, 64, 64), tr,
               op(&k, TIR_CVT, ty(TY_F32, 2, 64, 64), op(&k, TIR_BCAST, ty(TY_I32, 2, 64, 64), mn, -1, -1), -1, -1), -1);
  (void)si;
  store(&k, add, O, (int[]){z, z}, (int[]){64, 64});
  const char *must[] = {"mma.sync.aligned.m16n8k16", "shfl.sync.bfly", "bar.sync", "ld.shared"};
  both_arches(&k, must, 4);
  arena_free(k.a);
}

/* Scalar-indexed dims (rank drop), a rank-3 tensor, reduction along axis 0 across warps. */
Test(nvptx, rank3_scalar_index_and_axis0) {
  K k = kernel("colsum", 256);
  int dims[3] = {dim(&k, "B", false, 0), dim(&k, "R", false, 0), dim(&k, "C", false, 0)};
  int X = tensor(&k, "X", TY_F32, false, 3, dims), Y = tensor(&k, "Y", TY_F32, true, 2, (int[]){dims[0], dims[2]});
  TileType si = ty(TY_I32, 0, 0, 0);
  int b = leaf(&k, TIR_BLOCK_ID, si, 0, 0), z = ci(&k, 0);
  int x = load(&k, ty(TY_F32, 2, 200, 48), X, 0, (int[]){b, z, z}, (int[]){0, 200, 48});
  int s = reduce(&k, TIR_REDUCE_SUM, x, 0);
  store(&k, s, Y, (int[]){b, z}, (int[]){1, 48});
  const char *must[] = {"bar.sync", "ld.global"};
  both_arches(&k, must, 2);
  arena_free(k.a);
}

/* ------------------------------------------------------------ errors */

Test(nvptx, rejects_too_much_shared_memory) {
  K k = kernel("big", 128);
  int N = dim(&k, "N", false, 0);
  int X = tensor(&k, "X", TY_F32, false, 2, (int[]){N, N}), Y = tensor(&k, "Y", TY_F32, true, 2, (int[]){N, N});
  int z = ci(&k, 0);
  int a = load(&k, shared(ty(TY_F32, 2, 256, 256)), X, 0, (int[]){z, z}, (int[]){256, 256});
  k.f->regs[a].name = "huge";
  store(&k, a, Y, (int[]){z, z}, (int[]){256, 256});
  int smem = 0;
  cr_assert_null(compile(&k, ARCH_SM80, false, &smem, false));
  cr_assert(strstr(errbuf, "shared memory"), "%s", errbuf);
  cr_assert(strstr(errbuf, "huge"), "%s", errbuf);
  free(errbuf);
  arena_free(k.a);
}

Test(nvptx, rejects_bad_threads_and_scalar_types) {
  K k = kernel("odd", 96);
  int N = dim(&k, "N", false, 0);
  tensor(&k, "X", TY_F32, true, 1, &N);
  int smem;
  cr_assert_null(compile(&k, ARCH_SM90, false, &smem, false));
  cr_assert(strstr(errbuf, "power of two"), "%s", errbuf);
  free(errbuf);
  k.f->threads = 128;
  scalar_arg(&k, "h", TY_F16);
  cr_assert_null(compile(&k, ARCH_SM90, false, &smem, false));
  cr_assert(strstr(errbuf, "f32 and i32 scalars"), "%s", errbuf);
  free(errbuf);
  arena_free(k.a);
}

Test(nvptx, every_arch_emits) {
  for (int a = 0; a < ARCH_COUNT; a++) {
    K k = kernel("empty", 32);
    int N = dim(&k, "N", false, 0);
    int X = tensor(&k, "X", TY_I32, true, 1, &N);
    int z = ci(&k, 0);
    store(&k, leaf(&k, TIR_IOTA, ty(TY_I32, 1, 32, 0), 0, 0), X, &z, (int[]){32});
    int smem;
    char *ptx = compile(&k, (GpuArch)a, false, &smem, true);
    char want[32];
    snprintf(want, sizeof want, ".target %s", arch_name((GpuArch)a));
    cr_assert(strstr(ptx, want), "%s", want);
    cr_assert(strstr(ptx, ".version 8.5"));
    ptxas_assert_clean(ptx, (GpuArch)a);
    arena_free(k.a);
  }
}

/* The shared memory a kernel's PTX declares it needs ("// tilec: smem N"). */
static int smem_of(const char *ptx) {
  const char *p = strstr(ptx, "tilec: smem ");
  return p ? atoi(p + 12) : -1;
}

/* A shifted STORE's staging buffer is a ring tile's stage only where that is safe: not in a loop
 * nested in the pipelined body (its next pass would read what the STORE wrote), not beside an
 * overlapped DOT (whose wgmma group still reads its stages). There it gets a buffer of its own.
 * And a ring tile last read inside a nested if is released after that if (this used to hang the
 * scheduler). */
Test(nvptx, shifted_store_staging_stays_off_live_stages) {
  Arena *a = arena_new();
  static const char *nested =
      "kernel nested<BLOCK = 256, STAGES = 2>(X: f16[M, N], W: f16[M, N], Y: out f16[M, N],\n"
      "    Z: out f16[M, N])\n"
      "  grid (1) threads (128)\n"
      "{\n"
      "  for r0 in 0 .. M step 2 pipeline STAGES {\n"
      "    shared xs = X[r0 : +2, 0 : +BLOCK];\n"
      "    shared ws = W[r0 : +2, 0 : +BLOCK];\n"
      "    for j in 0 .. 2 {\n"
      "      Y[r0 + j : +2, 0 : +BLOCK] = to(f16, to_f32(xs) + to_f32(j));\n"
      "    }\n"
      "    Z[r0 : +2, 0 : +BLOCK] = to(f16, to_f32(ws) * 2.0);\n"
      "  }\n"
      "}\n";
  static const char *in_if =
      "kernel in_if<BLOCK = 256, STAGES = 2>(X: f16[M, N], Y: out f16[M, N])\n"
      "  grid (1) threads (128)\n"
      "{\n"
      "  for r0 in 0 .. M step 2 pipeline STAGES {\n"
      "    shared xs = X[r0 : +2, 0 : +BLOCK];\n"
      "    if r0 > 2 {\n"
      "      Y[r0 : +2, 0 : +BLOCK] = to(f16, to_f32(xs) + 1.0);\n"
      "    }\n"
      "  }\n"
      "}\n";
  for (int arch = 0; arch < 2; arch++) {
    GpuArch ga = arch ? ARCH_SM90A : ARCH_SM80;
    char *plain = source_ptx_with(a, "nested.tile", nested, NULL, ga, "TILEC_SHIFTED", "0");
    char *shifted = source_ptx_with(a, "nested.tile", nested, NULL, ga, "TILEC_SHIFTED", "1");
    char *iff = source_ptx_with(a, "in_if.tile", in_if, NULL, ga, "TILEC_SHIFTED", "1");
    /* Y's buffer is its own (Z's may still be ws's stage, which nothing reads after Z) */
    cr_assert_gt(smem_of(shifted), smem_of(plain) + 2 * 2 * 16, "%d vs %d", smem_of(shifted), smem_of(plain));
    cr_assert(iff && strstr(iff, "cp.async"));
    ptxas_assert_clean(shifted, ga);
  }
  arena_free(a);
}

/* A multiply feeding an add in the same block is one fma.rn.f32 (LLVM's `contract` on float add /
 * sub / mul; B is loaded first, so its masked load's branches do not split the two);
 * TILEC_FP_CONTRACT=0 keeps the multiply and the add apart. */
Test(nvptx, multiply_add_contracts_to_fma) {
  Arena *a = arena_new();
  static const char *text =
      "kernel axpy<BLOCK = 256>(X: f32[N], W: f32[N], B: f32[N], Y: out f32[N])\n"
      "  grid (cdiv(N, BLOCK)) threads (128)\n"
      "{\n"
      "  let i0 = block.x * BLOCK;\n"
      "  let b = B[i0 : +BLOCK];\n"
      "  Y[i0 : +BLOCK] = X[i0 : +BLOCK] * W[i0 : +BLOCK] + b;\n"
      "}\n";
  for (int arch = 0; arch < 2; arch++) {
    GpuArch ga = arch ? ARCH_SM90A : ARCH_SM80;
    char *ptx = source_ptx(a, "axpy.tile", text, NULL, ga);
    cr_assert_geq(occurrences(ptx, "fma.rn.f32"), 2, "%s", ptx);
    cr_assert_eq(occurrences(ptx, "mul.rn.f32"), 0);
    char *apart = source_ptx_with(a, "axpy.tile", text, NULL, ga, "TILEC_FP_CONTRACT", "0");
    cr_assert_eq(occurrences(apart, "fma.rn.f32"), 0);
    cr_assert_eq(occurrences(apart, "mul.rn.f32"), occurrences(ptx, "fma.rn.f32"));
  }
  arena_free(a);
}

/* The longest chain of `op` instructions (e.g. "max.f32") in ptx each reading the one before:
 * the PTX's virtual registers are assigned once in straight-line code. */
static int chain_depth(const char *ptx, const char *op) {
  enum { NREG = 1 << 14 };
  static int depth[NREG];
  memset(depth, 0, sizeof depth);
  int deepest = 0;
  size_t n = strlen(op);
  for (const char *l = ptx; l && *l; l = strchr(l, '\n'), l = l ? l + 1 : NULL) {
    while (*l == ' ' || *l == '\t')
      l++;
    if (strncmp(l, op, n) != 0 || (l[n] != ' ' && l[n] != '\t'))
      continue;
    int r[3], k = 0;
    for (const char *c = l + n; *c && *c != '\n' && k < 3; c++)
      if (c[0] == '%' && c[1] == 'f' && c[2] >= '0' && c[2] <= '9')
        r[k++] = atoi(c + 2) % NREG;
    if (k < 3)
      continue; /* an immediate operand: a leaf */
    int d = 1 + (depth[r[1]] > depth[r[2]] ? depth[r[1]] : depth[r[2]]);
    depth[r[0]] = d;
    deepest = d > deepest ? d : deepest;
  }
  return deepest;
}

/* In-thread row reductions run in two chains (reduce_chains): a thread's 32 values of a row
 * reach their max in 15 + 1 dependent steps (and 5 across lanes) instead of 31, the same number
 * of instructions; a sum of products keeps one chain, so each product folds into an fma. */
Test(nvptx, row_reductions_run_in_chains) {
  Arena *a = arena_new();
  static const char *text =
      "kernel rowstat<BLOCK = 1024>(X: f32[M, N], Mx: out f32[M], S: out f32[M], P: out f32[M])\n"
      "  grid (M) threads (32)\n"
      "{\n"
      "  require N <= BLOCK;\n"
      "  let r = block.x;\n"
      "  let x = X[r : +1, 0 : +BLOCK];\n"
      "  Mx[r : +1] = max(x, 1);\n"
      "  S[r : +1] = sum(exp(x), 1);\n"
      "  P[r : +1] = sum(x * x, 1);\n"
      "}\n";
  char *ptx = source_ptx(a, "rowstat.tile", text, NULL, ARCH_SM90A);
  char *one = source_ptx_with(a, "rowstat.tile", text, NULL, ARCH_SM90A, "TILEC_REDUCE_CHAINS", "0");
  cr_expect_leq(chain_depth(ptx, "max.f32"), 15 + 1 + 5, "%d", chain_depth(ptx, "max.f32"));
  cr_expect_geq(chain_depth(one, "max.f32"), 31 + 5, "%d", chain_depth(one, "max.f32"));
  cr_expect_eq(occurrences(ptx, "max.f32"), occurrences(one, "max.f32"));
  cr_expect_leq(chain_depth(ptx, "add.rn.f32"), 15 + 1 + 5, "%d", chain_depth(ptx, "add.rn.f32"));
  cr_expect_eq(occurrences(ptx, "add.rn.f32"), occurrences(one, "add.rn.f32"));
  cr_expect_geq(occurrences(ptx, "fma.rn.f32"), 31, "the sum of products: one chain of fmas");
  cr_expect_eq(occurrences(ptx, "fma.rn.f32"), occurrences(one, "fma.rn.f32"));
  ptxas_assert_clean(ptx, ARCH_SM90A);
  arena_free(a);
}

/* Loop versions (the default): each pipelined loop with shifted tiles or stores is emitted twice
 * behind one alignment test before it; the aligned version is the plain loop (its copies, vector
 * reads and dX's vector store, no per-tile tests), the other the shifted loop (16-byte reads and
 * funnel shifts; 32-bit staging stores). The code is held
 * to the plain kernel's registers (.minnctapersm: ptxas gave the two versions up to 82 registers
 * where the plain kernel takes 32). */
Test(nvptx, shifted_loops_get_an_aligned_version) {
  Arena *a = arena_new();
  static const char *defs[] = {"BN=2048", "WARPS=8", "STAGES=3", NULL};
  char *text = example_text(a, "cross_entropy_backward");
  for (int arch = 0; arch < 2; arch++) {
    GpuArch ga = arch ? ARCH_SM90A : ARCH_SM80;
    char *plain = source_ptx_with(a, "cross_entropy_backward.tile", text, defs, ga, "TILEC_SHIFTED", "0");
    setenv("TILEC_LOOP_VERSIONS", "0", 1);
    char *one = source_ptx_with(a, "cross_entropy_backward.tile", text, defs, ga, "TILEC_SHIFTED", "1");
    unsetenv("TILEC_LOOP_VERSIONS");
    char *two = source_ptx(a, "cross_entropy_backward.tile", text, defs, ga); /* the default */
    cr_assert_str_eq(two, source_ptx_with(a, "cross_entropy_backward.tile", text, defs, ga, "TILEC_SHIFTED", "1"));
    const char *ops[] = {"cp.async.cg.shared.global", "st.global.v4", "shf.r.wrap", "bar.sync"};
    for (int k = 0; k < 4; k++)
      cr_assert_eq(occurrences(two, ops[k]), occurrences(plain, ops[k]) + occurrences(one, ops[k]), "%s: %d, %d + %d",
                   ops[k], occurrences(two, ops[k]), occurrences(plain, ops[k]), occurrences(one, ops[k]));
    cr_assert_geq(occurrences(two, "ld.shared.v4"), occurrences(plain, "ld.shared.v4") + occurrences(one, "ld.shared.v4") - 1,
                  "the aligned version's vector reads (LLVM may share one with the shifted version)");
    /* dX's shifted chunk (one a thread) goes to its staging buffer as element pairs: four words
     * at an even shift, else three words between two 2-byte stores */
    cr_assert_eq(occurrences(one, "st.shared.b32") - occurrences(plain, "st.shared.b32"), 7, "%d",
                 occurrences(one, "st.shared.b32"));
    cr_assert_eq(occurrences(plain, ".minnctapersm"), 0);
    cr_assert_eq(occurrences(two, arch ? ".minnctapersm 8" : ".minnctapersm"), 1,
                 "sm_90a: the plain kernel's 8 blocks of 256 threads at 32 registers");
    ptxas_assert_clean(two, ga);
  }
  arena_free(a);
}

/* A row copied once into a tile that only windows read (cross-entropy's one-pass kernel, N at run
 * time) is copied from its 16-byte boundary (plan_shifted_row), and the three loops tir_align
 * moved to that boundary read it 16 bytes at a time, as many vector reads as the kernel with
 * neither (TILEC_SHIFTED=0 TILEC_ALIGN_WINDOWS=0); with the loops moved but the copy not shifted,
 * the moved windows lose theirs. */
/* The same kernel in bf16 at BLOCK = 4104 (not a power of two): the row is stored in its 4104
 * elements plus a chunk of room (8224 bytes, 8208 unshifted), not the layout's 8192 elements;
 * the scratch of the block reductions is the 32 bytes beyond. */
Test(nvptx, rows_copied_once_are_shifted) {
  Arena *a = arena_new();
  static const char *defs_f16[] = {"BLOCK=4096", "C=1024", "WARPS=4", NULL};
  static const char *defs_bf16[] = {"T=bf16", "BLOCK=4104", "C=512", "WARPS=4", NULL};
  static const char *smem_bf16[] = {"// tilec: smem 8256\n", "// tilec: smem 8240\n", "// tilec: smem 8240\n"};
  char *text = example_text(a, "cross_entropy_backward");
  for (int run = 0; run < 4; run++) {
    GpuArch ga = run & 1 ? ARCH_SM90A : ARCH_SM80;
    const char **defs = run < 2 ? defs_f16 : defs_bf16;
    char *ptx[3]; /* the default; the loops moved, the copy not shifted; neither */
    for (int v = 0; v < 3; v++) {
      Diag d;
      if (v)
        setenv("TILEC_SHIFTED", "0", 1);
      if (v == 2)
        setenv("TILEC_ALIGN_WINDOWS", "0", 1);
      TirFunc *f = source_tir_kernel(a, "cross_entropy_backward.tile", text, defs, ga, 1, &d);
      NvptxOptions o = {.arch = ga, .opt_level = 3};
      ptx[v] = f ? nvptx_compile(f, &o, &d, NULL) : NULL;
      unsetenv("TILEC_SHIFTED");
      unsetenv("TILEC_ALIGN_WINDOWS");
      cr_assert(ptx[v], "variant %d", v);
    }
    int v_on = occurrences(ptx[0], "ld.shared.v4.b32"), v_moved = occurrences(ptx[1], "ld.shared.v4.b32"),
        v_neither = occurrences(ptx[2], "ld.shared.v4.b32");
    cr_assert_eq(v_on, v_neither, "%d vs %d", v_on, v_neither);
    cr_assert_lt(v_moved, v_on, "%d vs %d", v_moved, v_on);
    cr_assert_gt(occurrences(ptx[0], "cp.async.ca.shared.global"), occurrences(ptx[2], "cp.async.ca.shared.global"),
                 "the granule past the row");
    for (int v = 0; v < 3 && run >= 2; v++)
      cr_assert(strstr(ptx[v], smem_bf16[v]), "variant %d: %.200s", v, ptx[v]);
    ptxas_assert_clean(ptx[0], ga);
  }
  arena_free(a);
}

/* A rank-1 tile that only windows read is stored in its length rounded to 16 bytes when a load
 * writes it (the copies stop there; a shifted row keeps a chunk of room): 100 f32 + 4 = 416
 * bytes. A constant writes the whole power-of-two layout, so such a tile keeps all 512 bytes. */
Test(nvptx, only_loaded_rows_are_stored_short) {
  Arena *a = arena_new();
  static const char *inits[] = {"X[0 : +100]", "1"};
  static const char *smem[] = {"// tilec: smem 416\n", "// tilec: smem 512\n"};
  for (int k = 0; k < 2; k++) {
    char *text = arena_printf(a,
                              "kernel rows<C = 32>(X: f32[N], Y: out f32[N])\n"
                              "  grid (1) threads (32)\n"
                              "{\n"
                              "  require N <= 100;\n"
                              "  shared z: f32[100] = %s;\n"
                              "  for c0 in 0 .. N step C { Y[c0 : +C] = X[c0 : +C] + z[c0 : +C]; }\n"
                              "}\n",
                              inits[k]);
    for (int arch = 0; arch < 2; arch++) {
      GpuArch ga = arch ? ARCH_SM90A : ARCH_SM80;
      char *ptx = source_ptx(a, "rows.tile", text, NULL, ga);
      cr_assert(strstr(ptx, smem[k]), "%s: %.120s", inits[k], ptx);
      ptxas_assert_clean(ptx, ga);
    }
  }
  arena_free(a);
}

/* Row padding only where it spreads a DOT operand's rows over the banks: layernorm backward's
 * X and dY rings ([4, 1024] f16, read elementwise) lose their 16 bytes a row (2 tiles x 2 stages
 * x 4 rows), so each row starts on a 128-byte line; TILEC_ROW_PAD=1 pads them as before. */
Test(nvptx, elementwise_ring_tiles_are_not_padded) {
  Arena *a = arena_new();
  static const char *defs[] = {"BLOCK=1024", "ROWS=4", "CHUNK=16", "WARPS=4", "STAGES=2", NULL};
  char *text = example_text(a, "layernorm_backward");
  setenv("TILEC_SHIFTED", "0", 1); /* plain loops: a shifted tile keeps 16 bytes of room a row */
  for (int arch = 0; arch < 2; arch++) {
    GpuArch ga = arch ? ARCH_SM90A : ARCH_SM80;
    char *ptx = source_ptx(a, "layernorm_backward.tile", text, defs, ga);
    char *padded = source_ptx_with(a, "layernorm_backward.tile", text, defs, ga, "TILEC_ROW_PAD", "1");
    cr_assert_eq(smem_of(padded) - smem_of(ptx), 2 * 2 * 4 * 16, "%d vs %d", smem_of(padded), smem_of(ptx));
    ptxas_assert_clean(ptx, ga);
  }
  unsetenv("TILEC_SHIFTED");
  arena_free(a);
}

/* The example compiled with every qualifying loop versioned (TILEC_SHIFTED=1), after checking that by
 * default it keeps the plain loops (TILEC_SHIFTED=0, into *plain). */
static char *versions_dropped(Arena *a, const char *example, const char **defs, char **plain) {
  const char *path = arena_printf(a, "%s.tile", example);
  char *text = example_text(a, example);
  *plain = source_ptx_with(a, path, text, defs, ARCH_SM90A, "TILEC_SHIFTED", "0");
  cr_assert_str_eq(source_ptx(a, path, text, defs, ARCH_SM90A), *plain);
  return source_ptx_with(a, path, text, defs, ARCH_SM90A, "TILEC_SHIFTED", "1");
}

/* Versions only where they cost no registers (the ptxas at hand decides): layernorm backward's
 * two versions took 160 registers where its plain loop takes 116 (a block less per SM), so by
 * default it keeps the plain loop; TILEC_SHIFTED=1 still versions it. */
Test(nvptx, loop_versions_that_cost_registers_are_dropped) {
  if (!have_ptxas())
    return; /* the decision is ptxas's; without it, no versions by default */
  Arena *a = arena_new();
  static const char *defs[] = {"BLOCK=4096", "ROWS=1", "CHUNK=32", "WARPS=8", "STAGES=4", NULL};
  char *plain, *two = versions_dropped(a, "layernorm_backward", defs, &plain);
  cr_assert_gt(occurrences(two, "shf.r.wrap"), 0, "the shifted version");
  cr_assert_gt(occurrences(two, "cp.async.cg.shared.global"), occurrences(plain, "cp.async.cg.shared.global"));
  arena_free(a);
}

/* Nor where they make an entry longer than VERSIONS_MAX_INSTRUCTIONS (8000 PTX instructions) at
 * the same registers: rmsnorm backward with four rows of 1024 columns a step (32 elements a
 * thread, each with its shifted copy) came out at 18000 an entry, 4.9 times the plain module, and
 * ran 5-6% slower. Cross-entropy backward's versions (entries of 3900-5200) are kept. */
Test(nvptx, loop_versions_that_bloat_an_entry_are_dropped) {
  if (!have_ptxas())
    return;
  Arena *a = arena_new();
  static const char *defs[] = {"BLOCK=1024", "ROWS=4", "CHUNK=16", "WARPS=4", "STAGES=4", NULL};
  char *plain, *two = versions_dropped(a, "rmsnorm_backward", defs, &plain);
  cr_assert_gt(occurrences(two, "\n\t"), 8000, "the versions' size");
  cr_assert_lt(occurrences(plain, "\n\t"), 8000);
  arena_free(a);
}

/* Rows that may start anywhere (cross-entropy over 50257 f16 logits: 7 rows in 8 misaligned): the
 * ring's copies of a misaligned chunk start at the aligned address before it (one cp.async, and
 * one more for the granule after the row's last chunk), where they used to be a scalar load per
 * element; only a granule with an element out of bounds goes element by element (the LOAD's
 * fill). The reads add each row's shift back (two 16-byte reads a chunk and a funnel shift per
 * word: shifted_chunk), and keep the vector reads where every row is aligned (one test of the tensor's
 * address, its row strides and the tile's first column). The store of dX: a misaligned row goes
 * through a staging buffer and leaves in aligned 16-byte granules (shifted stores). These are the
 * shifted loops alone (TILEC_SHIFTED=1 TILEC_LOOP_VERSIONS=0); TILEC_SHIFTED=0: none of this. */
Test(nvptx, misaligned_rows_copy_from_aligned_addresses) {
  Arena *a = arena_new();
  static const char *defs[] = {"BN=256", NULL};
  char *text = example_text(a, "cross_entropy_backward");
  for (int arch = 0; arch < 2; arch++) {
    GpuArch ga = arch ? ARCH_SM90A : ARCH_SM80;
    setenv("TILEC_LOOP_VERSIONS", "0", 1); /* the shifted loops alone (the versions: the next test) */
    char *ptx = source_ptx_with(a, "cross_entropy_backward.tile", text, defs, ga, "TILEC_SHIFTED", "1");
    unsetenv("TILEC_LOOP_VERSIONS");
    /* two loops, each issuing in its prologue and its body: the in-bounds copy, the shifted one
     * and the granule after the row's last chunk; the shifted one also as an inner granule (two
     * unsigned compares: granule_inner), which the granule after the row never is */
    cr_assert_eq(occurrences(ptx, "cp.async.cg.shared.global"), 2 * 2 * 4);
    setenv("TILEC_LOOP_VERSIONS", "0", 1);
    setenv("TILEC_INNER_GRANULES", "0", 1);
    char *general = source_ptx_with(a, "cross_entropy_backward.tile", text, defs, ga, "TILEC_SHIFTED", "1");
    unsetenv("TILEC_INNER_GRANULES");
    unsetenv("TILEC_LOOP_VERSIONS");
    cr_assert_eq(occurrences(general, "cp.async.cg.shared.global"), 2 * 2 * 3);
    ptxas_assert_clean(general, ga);
    cr_assert_geq(occurrences(ptx, "shf.r.wrap.b32"), 2 * 4, "the shifted reads: a funnel shift per word");
    cr_assert_eq(occurrences(ptx, "ld.volatile.shared"), 0, "no element-wise reads");
    cr_assert_geq(occurrences(ptx, "ld.shared.v4.b32"), 2, "the aligned rows' reads");
    /* dX's store: the aligned rows' vector store; a misaligned row through the staging buffer,
     * between two barriers, one vector store per granule (and the one after the row) */
    cr_assert_eq(occurrences(ptx, "st.global.v4"), 3);
    ptxas_assert_clean(ptx, ga);
    char *plain = source_ptx_with(a, "cross_entropy_backward.tile", text, defs, ga, "TILEC_SHIFTED", "0");
    /* per issue site: the in-bounds copy; with fill 0 (the second loop) also the zero-fill of a
     * chunk past the end */
    cr_assert_eq(occurrences(plain, "cp.async.cg.shared.global"), 2 * (1 + 2));
    cr_assert_eq(occurrences(plain, "shf.r.wrap"), 0);
    cr_assert_eq(occurrences(plain, "st.global.v4"), 1);
    cr_assert_eq(occurrences(ptx, "bar.sync"), occurrences(plain, "bar.sync") + 2);
    /* the staging buffer is the current stage of the ring tile xb, which dX's STORE follows:
     * no shared memory beyond the shifted rows' room (a granule per row of each stage of the two
     * rings, each stage rounded up to 128 bytes) */
    cr_assert_leq(smem_of(ptx), smem_of(plain) + 2 * 2 * 128, "%d vs %d", smem_of(ptx), smem_of(plain));
  }
  arena_free(a);
}

/* A statement touching global elements that an earlier statement of the block stored (from
 * other threads) gets a barrier first (order_global); stores of one loop body, atomics of one
 * kind, and tensors stored once get none. */

Test(nvptx, statements_on_stored_global_elements_are_ordered) {
  Arena *a = arena_new();
  char *ptx = source_ptx(a, "tests/gpu/order_global.tile", file_text(a, "tests/gpu/order_global.tile"), NULL,
                         ARCH_SM90A);
  char *e = ptx_entry(a, ptx, "order_global");
  cr_assert(e);
  cr_assert_eq(occurrences(e, "bar.sync"), 3, "before the single-element store, before the load of Y, before the "
                                "store of element 0 (other threads may still be loading it)");
  const char *st = strstr(e, "st.global"), *b = strstr(e, "bar.sync");
  cr_assert(st && b && st < b, "the row's store, then the barrier");
  static const char *disjoint =
      "kernel k(X: f32[M, N], Y: out f32[M, N], S: out f32[N]) grid (M) threads (128) {\n"
      "  let r = block.x;\n"
      "  for c0 in 0 .. N step 512 {\n"
      "    let x = X[r, c0 : +512];\n"
      "    Y[r, c0 : +512] = x * 2.0;\n"
      "    atomic_add(S[c0 : +512], x);\n"
      "    atomic_add(S[c0 : +512], x * x);\n"
      "  }\n"
      "}\n";
  cr_assert_eq(occurrences(source_ptx(a, "disjoint.tile", disjoint, NULL, ARCH_SM90A), "bar.sync"), 0);
  source_assembles("tests/gpu/order_global.tile", file_text(a, "tests/gpu/order_global.tile"));
  arena_free(a);
}

/* Loads count too: a store after a load of the same tensor waits for the other threads' loads
 * unless each thread stores exactly the elements it loaded (an in-place update); a loop whose next
 * iteration touches what this one stored, or stores what it loaded, gets a barrier at its back
 * edge unless its iterations touch disjoint elements; a branch's stores are owed after the join
 * even when the other branch had a barrier. */
static const char *loop_kernel(Arena *a, const char *body) {
  char *src = arena_alloc(a, 1024);
  snprintf(src, 1024,
           "kernel k(X: f32[M, 1024], Y: out f32[M, 1024], c: i32[M]) grid (M) threads (128) {\n"
           "  let r = block.x;\n%s}\n", body);
  return src;
}

Test(nvptx, loads_and_loop_iterations_on_global_elements_are_ordered) {
  Arena *a = arena_new();
  /* in place, each thread its own elements: no barrier */
  cr_assert_eq(occurrences(source_ptx(a, "inplace.tile", loop_kernel(a, "  Y[r, 0 : +512] = Y[r, 0 : +512] * 2.0;\n"),
                                    NULL, ARCH_SM90A), "bar.sync"), 0);
  /* shifted by one element: the load's elements are stored by neighbouring threads */
  cr_assert_eq(occurrences(source_ptx(a, "shift.tile", loop_kernel(a, "  Y[r, 1 : +511] = Y[r, 0 : +511] * 2.0;\n"),
                                    NULL, ARCH_SM90A), "bar.sync"), 1);
  /* a loop over a run-time count (not unrolled): before it, between load and store, back edge */
  char *ptx = source_ptx(a, "carried.tile",
                         loop_kernel(a, "  Y[r, 0 : +512] = X[r, 0 : +512];\n"
                                        "  for s in 0 .. c[r] { Y[r, 1 : +511] = Y[r, 0 : +511] * 0.5; }\n"),
                         NULL, ARCH_SM90A);
  cr_assert_eq(occurrences(ptx, "bar.sync"), 3, "%d", occurrences(ptx, "bar.sync"));
  /* an in-place loop over disjoint windows at its counter (each thread its own elements; a
   * window narrower than the block's threads would hold replicas, which load but do not store) */
  ptx = source_ptx(a, "windows.tile",
                   loop_kernel(a, "  for c0 in 0 .. c[r] step 512 { Y[r, c0 : +512] = Y[r, c0 : +512] + X[r, c0 : +512]; }\n"),
                   NULL, ARCH_SM90A);
  cr_assert_eq(occurrences(ptx, "bar.sync"), 0);
  /* THEN stores, ELSE reduces (a barrier on that path only): the load after the join waits */
  ptx = source_ptx(a, "branch.tile",
                   loop_kernel(a, "  if c[r] > 0 { Y[r, 0 : +512] = X[r, 0 : +512]; }\n"
                                  "  else { Y[r, 0 : +1] = max(X[r, 0 : +512], 0, keep); }\n"
                                  "  Y[r, 0 : +1] = Y[r, 7 : +1];\n"),
                   NULL, ARCH_SM90A);
  const char *join = strstr(ptx, "ld.global.f32"), *b = join ? strstr(ptx, "bar.sync") : NULL;
  while (b && strstr(b + 1, "bar.sync") && strstr(b + 1, "bar.sync") < join)
    b = strstr(b + 1, "bar.sync");
  cr_assert(join && b && b < join, "a barrier right before the load of Y[r, 7]");
  source_assembles("tests/gpu/order_global_loop.tile", file_text(a, "tests/gpu/order_global_loop.tile"));
  arena_free(a);
}

/* The lines of file path (0 when it does not exist). */
static int count_lines(const char *path) {
  FILE *f = fopen(path, "r");
  int n = 0, c;
  while (f && (c = fgetc(f)) != EOF)
    n += c == '\n';
  if (f)
    fclose(f);
  return n;
}

/* ptxas's report is kept per module text, ptxas and arch (ptxas_report): the questions asked of
 * one module run ptxas once; another arch or another text runs it again. The ptxas here is a
 * wrapper that counts its runs. */
Test(nvptx, ptxas_runs_once_per_module_text) {
  const char *real = "/usr/local/cuda/bin/ptxas";
  if (access(real, X_OK) != 0)
    return; /* no CUDA toolkit: nothing to count */
  Arena *a = arena_new();
  char dir[] = "/tmp/tilec_ptxas_count_XXXXXX";
  cr_assert(mkdtemp(dir));
  char *wrapper = arena_printf(a, "%s/ptxas", dir), *runs = arena_printf(a, "%s/runs", dir);
  FILE *f = fopen(wrapper, "w");
  cr_assert(f);
  fprintf(f, "#!/bin/sh\necho run >> '%s'\nexec '%s' \"$@\"\n", runs, real);
  fclose(f);
  cr_assert_eq(chmod(wrapper, 0755), 0);
  /* sm_80 PTX assembles for sm_90a too */
  char *ptx = source_ptx(a, "dsl/examples/vadd.tile", example_text(a, "vadd"), NULL, ARCH_SM80);
  int regs[8];
  cr_expect_eq(ptxas_spill_bytes(a, wrapper, ptx, ARCH_SM80, NULL), 0);
  cr_expect_eq(ptxas_spill_bytes(a, wrapper, ptx, ARCH_SM80, "__ws"), 0);
  cr_expect_null(ptxas_refusal(a, wrapper, ptx, ARCH_SM80));
  cr_expect_eq(ptxas_registers(a, wrapper, ptx, ARCH_SM80, regs, 8), 1);
  cr_expect_eq(count_lines(runs), 1, "four questions of one module: one ptxas run");
  cr_expect_eq(ptxas_registers(a, wrapper, ptx, ARCH_SM90A, regs, 8), 1);
  cr_expect_eq(count_lines(runs), 2, "another arch: ptxas again");
  char *other = arena_printf(a, "%s// another text\n", ptx);
  cr_expect_eq(ptxas_spill_bytes(a, wrapper, other, ARCH_SM90A, NULL), 0);
  cr_expect_eq(count_lines(runs), 3, "another text: ptxas again");
  cr_expect_not_null(ptxas_refusal(a, wrapper, "not ptx\n", ARCH_SM90A), "a refusal is reported");
  cr_expect_eq(count_lines(runs), 4);
  cr_expect_eq(ptxas_spill_bytes(a, wrapper, "not ptx\n", ARCH_SM90A, NULL), -1, "and its status kept");
  cr_expect_eq(count_lines(runs), 4);
  unlink(wrapper), unlink(runs), rmdir(dir);
  arena_free(a);
}
