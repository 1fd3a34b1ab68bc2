/* gemm_check.h — one GEMM launch of generated C checked against the float64 reference, shared by
 * the GPU programs in tests/aot/ that run dsl/examples/gemm.tile (ws_gpu.c, cluster_gpu.c).
 * Include after cuda.h, gpu_buf.h, ref.h and the generated header. */
#ifndef TILEC_TESTS_GEMM_CHECK_H
#define TILEC_TESTS_GEMM_CHECK_H

typedef tilec_result (*GemmLaunch)(struct CUstream_st *, const tilec_tensor *, const tilec_tensor *,
                                   const tilec_tensor *, const tilec_tensor *);

/* act(A B + bias) of M x K by K x N, A's view `offset` elements into its buffer (an offset of 1
 * breaks TMA's alignment: the cp.async entry); prints PROG: WHAT and the error, counts a failure. */
static int gemm_check(const char *prog, GemmLaunch launch, const char *(*error)(void), const char *what,
                      int64_t M, int64_t N, int64_t K, int offset, int act, int *failures) {
  int64_t mk[2] = {M, K}, kn[2] = {K, N}, mn[2] = {M, N};
  Buf a, b, bias, c;
  if (buf_new(&a, M * K + offset, TY_F16, 1.0) || buf_new(&b, K * N, TY_F16, 1.0) ||
      buf_new(&bias, N, TY_F16, 1.0) || buf_new(&c, M * N, TY_F16, 0))
    return 1;
  tilec_tensor ta = tilec_tensor_contiguous(a.d + 2 * (unsigned)offset, TILEC_F16, 2, mk);
  tilec_tensor tb = tilec_tensor_contiguous(b.d, TILEC_F16, 2, kn);
  tilec_tensor tbias = tilec_tensor_contiguous(bias.d, TILEC_F16, 1, &N);
  tilec_tensor tc = tilec_tensor_contiguous(c.d, TILEC_F16, 2, mn);
  TK(launch(NULL, &ta, &tb, &tbias, &tc), error);
  CU(cuCtxSynchronize());
  if (buf_fetch(&c, TY_F16))
    return 1;
  double *want = malloc(sizeof(double) * (size_t)(M * N));
  ref_gemm(M, N, K, a.v + offset, b.v, bias.v, act, want);
  double err = rel_err(c.v, want, M * N);
  printf("%s: %-52s rel err %.2e  %s\n", prog, what, err, err <= 1e-2 ? "ok" : "FAILED");
  *failures += !(err <= 1e-2);
  free(want);
  Buf *all[] = {&a, &b, &bias, &c};
  buf_free_all(all, sizeof all / sizeof all[0]);
  return 0;
}

#endif
