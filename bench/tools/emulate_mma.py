#!/usr/bin/env python3
"""bench/tools/emulate_mma.py — replays the index arithmetic of bench/baselines/attention.cu and
gemm.cu on the CPU with per-lane models of ldmatrix / ldmatrix.trans / mma.sync m16n8k16 (PTX ISA
fragment layouts), and compares with numpy. It cannot prove the CUDA compiles to the same thing,
but it catches wrong lane/fragment/shared-address arithmetic without a GPU. Needs numpy.

  python3 bench/tools/emulate_mma.py        exits 1 on a mismatch
"""
import sys

import numpy as np


# ---------------------------------------------------------------- warp-level instruction models
def ldmatrix_x4(smem, addrs, trans=False):
    """smem: flat array; addrs[lane] = element offset of a row start (lanes 8i..8i+7: matrix i).
    Returns r[lane][i] = (lo, hi) element pair of matrix i held by that lane."""
    r = [[None] * 4 for _ in range(32)]
    for i in range(4):
        rows = [smem[addrs[8 * i + j]: addrs[8 * i + j] + 8] for j in range(8)]  # 8x8 matrix i
        for lane in range(32):
            g, t = lane // 4, lane % 4
            if not trans:
                r[lane][i] = (rows[g][2 * t], rows[g][2 * t + 1])
            else:
                r[lane][i] = (rows[2 * t][g], rows[2 * t + 1][g])
    return r


def mma16816(c, a, b0, b1):
    """c[lane]: 4 floats; a[lane]: 4 pairs; b0/b1[lane]: pairs. Rebuilds the matrices from the
    fragments (g = lane/4, t = lane%4) and returns the new c."""
    A = np.zeros((16, 16))
    B = np.zeros((16, 8))
    C = np.zeros((16, 8))
    for lane in range(32):
        g, t = lane // 4, lane % 4
        for j in range(2):
            A[g, 2 * t + j] = a[lane][0][j]
            A[g + 8, 2 * t + j] = a[lane][1][j]
            A[g, 2 * t + 8 + j] = a[lane][2][j]
            A[g + 8, 2 * t + 8 + j] = a[lane][3][j]
            B[2 * t + j, g] = b0[lane][j]
            B[2 * t + 8 + j, g] = b1[lane][j]
            C[g, 2 * t + j] = c[lane][j]
            C[g + 8, 2 * t + j] = c[lane][2 + j]
    D = C + A @ B
    out = []
    for lane in range(32):
        g, t = lane // 4, lane % 4
        out.append([D[g, 2 * t], D[g, 2 * t + 1], D[g + 8, 2 * t], D[g + 8, 2 * t + 1]])
    return out


def f16(x):
    return np.float32(np.float16(x))


# ---------------------------------------------------------------- attention.cu, one block
def attention_block(Q, K, V, m0, BM, BN, D, causal, scale):
    """Mirror of attn_fwd for one (b, h) and one query block; returns O rows m0..m0+BM-1."""
    N = Q.shape[0]
    kLd = D + 8
    sQ = np.zeros(BM * kLd)
    for r in range(BM):
        if m0 + r < N:
            sQ[r * kLd: r * kLd + D] = Q[m0 + r]
    nblocks = (N + BN - 1) // BN
    if causal:
        nblocks = min(nblocks, (m0 + BM + BN - 1) // BN)
    scale_log2 = scale * 1.4426950408889634
    out = np.full((BM, D), np.nan)
    for warp in range(BM // 16):
        qrow0 = m0 + warp * 16
        acc = [[[0.0] * 4 for _ in range(32)] for _ in range(D // 8)]
        row_max = [[-np.inf, -np.inf] for _ in range(32)]
        row_sum = [[0.0, 0.0] for _ in range(32)]
        qf = [ldmatrix_x4(sQ, [(warp * 16 + (l % 16)) * kLd + kk * 16 + (l // 16) * 8 for l in range(32)])
              for kk in range(D // 16)]
        for j in range(nblocks):
            n0 = j * BN
            tk = np.zeros(BN * kLd)
            tv = np.zeros(BN * kLd)
            for r in range(BN):
                if n0 + r < N:
                    tk[r * kLd: r * kLd + D] = K[n0 + r]
                    tv[r * kLd: r * kLd + D] = V[n0 + r]
            s = [[[0.0] * 4 for _ in range(32)] for _ in range(BN // 8)]
            for kk in range(D // 16):
                for np_ in range(BN // 16):
                    r = ldmatrix_x4(tk, [(np_ * 16 + (l % 8) + (l // 16) * 8) * kLd + kk * 16 + ((l // 8) % 2) * 8
                                         for l in range(32)])
                    s[2 * np_] = mma16816(s[2 * np_], qf[kk], [x[0] for x in r], [x[1] for x in r])
                    s[2 * np_ + 1] = mma16816(s[2 * np_ + 1], qf[kk], [x[2] for x in r], [x[3] for x in r])
            if n0 + BN > N or (causal and n0 + BN - 1 > qrow0):
                for i in range(BN // 8):
                    for lane in range(32):
                        g, t = lane // 4, lane % 4
                        for e in range(4):
                            col = n0 + i * 8 + 2 * t + (e & 1)
                            row = qrow0 + g + (e >> 1) * 8
                            if col >= N or (causal and col > row):
                                s[i][lane][e] = -np.inf
            for h in range(2):
                mx = [max(max(s[i][lane][2 * h], s[i][lane][2 * h + 1]) for i in range(BN // 8)) for lane in range(32)]
                mx = [max(mx[l], mx[l ^ 1]) for l in range(32)]
                mx = [max(mx[l], mx[l ^ 2]) for l in range(32)]
                for lane in range(32):
                    m_new = max(row_max[lane][h], mx[lane] * scale_log2)
                    base = 0.0 if m_new == -np.inf else m_new
                    alpha = 2.0 ** (row_max[lane][h] - base)
                    row_max[lane][h] = m_new
                    ps = 0.0
                    for i in range(BN // 8):
                        for e in (2 * h, 2 * h + 1):
                            s[i][lane][e] = 2.0 ** (s[i][lane][e] * scale_log2 - base)
                            ps += s[i][lane][e]
                    row_sum[lane][h] = row_sum[lane][h] * alpha + ps
                    for i in range(D // 8):
                        acc[i][lane][2 * h] *= alpha
                        acc[i][lane][2 * h + 1] *= alpha
            for kt in range(BN // 16):
                pa = [[(f16(s[2 * kt][l][0]), f16(s[2 * kt][l][1])), (f16(s[2 * kt][l][2]), f16(s[2 * kt][l][3])),
                       (f16(s[2 * kt + 1][l][0]), f16(s[2 * kt + 1][l][1])),
                       (f16(s[2 * kt + 1][l][2]), f16(s[2 * kt + 1][l][3]))] for l in range(32)]
                for dp in range(D // 16):
                    r = ldmatrix_x4(tv, [(kt * 16 + (l % 16)) * kLd + dp * 16 + (l // 16) * 8 for l in range(32)],
                                    trans=True)
                    acc[2 * dp] = mma16816(acc[2 * dp], pa, [x[0] for x in r], [x[1] for x in r])
                    acc[2 * dp + 1] = mma16816(acc[2 * dp + 1], pa, [x[2] for x in r], [x[3] for x in r])
        for h in range(2):
            ls = [row_sum[l][h] for l in range(32)]
            ls = [ls[l] + ls[l ^ 1] for l in range(32)]
            ls = [ls[l] + ls[l ^ 2] for l in range(32)]
            for lane in range(32):
                g, t = lane // 4, lane % 4
                inv = 1.0 / ls[lane] if ls[lane] > 0 else 0.0
                row = qrow0 + g + h * 8
                if row >= N:
                    continue
                for i in range(D // 8):
                    out[row - m0, i * 8 + 2 * t] = acc[i][lane][2 * h] * inv
                    out[row - m0, i * 8 + 2 * t + 1] = acc[i][lane][2 * h + 1] * inv
    return out


def check_attention(rng, N, D, causal, BM=32, BN=32):
    Q, K, V = (f16(rng.standard_normal((N, D))) for _ in range(3))
    scale = D ** -0.5
    S = Q @ K.T * scale
    if causal:
        S = np.where(np.arange(N)[None, :] > np.arange(N)[:, None], -np.inf, S)
    P = np.exp(S - S.max(1, keepdims=True))
    ref = (P / P.sum(1, keepdims=True)) @ V
    grid = (N + BM - 1) // BM
    out = np.full((N, D), np.nan)
    for bx in range(grid):
        mblk = grid - 1 - bx if causal else bx
        o = attention_block(Q, K, V, mblk * BM, BM, BN, D, causal, scale)
        rows = min(BM, N - mblk * BM)
        out[mblk * BM: mblk * BM + rows] = o[:rows]
    err = np.linalg.norm(out - ref) / np.linalg.norm(ref)
    ok = np.isfinite(out).all() and err < 5e-3
    print(f"attention N={N} D={D} causal={causal} BM={BM} BN={BN}: rel err {err:.2e} {'ok' if ok else 'FAIL'}")
    return ok


# ---------------------------------------------------------------- gemm.cu, whole grid
def gemm(A, B, bias, BM, BN, BK, WM, WN):
    M, K = A.shape
    N = B.shape[1]
    kLdA, kLdB = BK + 8, BN + 8
    C = np.full((M, N), np.nan)
    warps_n = BN // WN
    for by in range((M + BM - 1) // BM):
        for bx in range((N + BN - 1) // BN):
            m0, n0 = by * BM, bx * BN
            for warp in range((BM // WM) * warps_n):
                wm0, wn0 = (warp // warps_n) * WM, (warp % warps_n) * WN
                acc = [[[[0.0] * 4 for _ in range(32)] for _ in range(WN // 8)] for _ in range(WM // 16)]
                for kt in range(K // BK):
                    k0 = kt * BK
                    a = np.zeros(BM * kLdA)
                    b = np.zeros(BK * kLdB)
                    for c in range(BM * BK // 8):
                        r, cc = c // (BK // 8), (c % (BK // 8)) * 8
                        if m0 + r < M:
                            a[r * kLdA + cc: r * kLdA + cc + 8] = A[m0 + r, k0 + cc: k0 + cc + 8]
                    for c in range(BK * BN // 8):
                        r, cc = c // (BN // 8), (c % (BN // 8)) * 8
                        if n0 + cc < N:
                            b[r * kLdB + cc: r * kLdB + cc + 8] = B[k0 + r, n0 + cc: n0 + cc + 8]
                    for kk in range(0, BK, 16):
                        af = [ldmatrix_x4(a, [(wm0 + i * 16 + (l % 16)) * kLdA + kk + (l // 16) * 8 for l in range(32)])
                              for i in range(WM // 16)]
                        bf = [None] * (WN // 8)
                        for j in range(0, WN // 8, 2):
                            r = ldmatrix_x4(b, [(kk + (l % 16)) * kLdB + wn0 + j * 8 + (l // 16) * 8 for l in range(32)],
                                            trans=True)
                            bf[j] = ([x[0] for x in r], [x[1] for x in r])
                            bf[j + 1] = ([x[2] for x in r], [x[3] for x in r])
                        for i in range(WM // 16):
                            for j in range(WN // 8):
                                acc[i][j] = mma16816(acc[i][j], af[i], bf[j][0], bf[j][1])
                for j in range(WN // 8):
                    for lane in range(32):
                        g, t = lane // 4, lane % 4
                        col = n0 + wn0 + j * 8 + 2 * t
                        if col >= N:
                            continue
                        for i in range(WM // 16):
                            for h in range(2):
                                row = m0 + wm0 + i * 16 + g + h * 8
                                if row >= M:
                                    continue
                                C[row, col] = max(acc[i][j][lane][2 * h] + bias[col], 0)
                                C[row, col + 1] = max(acc[i][j][lane][2 * h + 1] + bias[col + 1], 0)
    return C


def check_gemm(rng, M, N, K, cfg):
    A, B, bias = f16(rng.standard_normal((M, K))), f16(rng.standard_normal((K, N))), f16(rng.standard_normal(N))
    ref = np.maximum(A @ B + bias, 0)
    C = gemm(A, B, bias, *cfg)
    err = np.linalg.norm(C - ref) / np.linalg.norm(ref)
    ok = np.isfinite(C).all() and err < 1e-5  # numpy float32 vs the emulated sums
    print(f"gemm {M}x{N}x{K} tiles {cfg}: rel err {err:.2e} {'ok' if ok else 'FAIL'}")
    return ok


def main():
    rng = np.random.default_rng(1)
    ok = True
    # the baseline's real configurations, on small ragged shapes (M and N edges, several k-tiles)
    ok &= check_gemm(rng, 20, 48, 64, (16, 64, 64, 16, 16))        # skinny: BM=16, BN=64, BK=64
    ok &= check_gemm(rng, 70, 72, 64, (64, 64, 32, 32, 32))        # 64x64x32, warps 32x32
    ok &= check_gemm(rng, 130, 136, 64, (128, 128, 32, 64, 32))    # 128x128x32, warps 64x32
    # attention with the real BN = 64 and 16-row warps; small BM to keep it quick
    for N, D, causal in ((70, 64, False), (70, 64, True), (100, 128, True), (64, 128, False)):
        ok &= check_attention(rng, N, D, causal, BM=32, BN=64)
    ok &= check_attention(rng, 150, 64, True, BM=128, BN=64)        # the real block shape
    print("emulate_mma:", "all ok" if ok else "MISMATCH")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
