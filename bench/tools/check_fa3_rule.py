#!/usr/bin/env python3
"""bench/tools/check_fa3_rule.py — the attention family's accuracy rule of bench/run.py (FlashAttention-3's,
per output tensor: max error <= 2 x the low-precision math's + a slack; per-row figures recorded),
tested without a GPU.

  1. run.row_max_err / run.fa3_rule on synthetic numpy arrays: a tensor whose max error is 3x the
     baseline's fails, 1.5x passes, an all-zero tensor reproduced exactly passes, a NaN fails, the
     slack; the per-row figures (rows over 2x their own baseline, the worst row) are computed but
     decide nothing;
  2. with torch (a CPU build is enough): the same arrays as torch tensors give the same verdicts, and
     the worker's own path on toy cases: the low-precision math baseline (attention_lowp, chunked
     over heads; the backward's delta from the given low-precision O) agrees with the float32
     reference in float32, and check() passes outputs 1.5x the baseline's error, fails, naming the
     rule, one row at 3x the tensor's, and (bf16) passes one row at 3x its own row's.

  python3 bench/tools/check_fa3_rule.py     exits 1 on a failure (needs numpy)
"""
import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import run  # noqa: E402


def synthetic():
    """ref [2, 3, 8] (6 rows), the low-precision math's output with a known per-row error, and
    outputs whose row errors are given multiples of it. Row 4 is all zero, exactly reproduced."""
    rng = np.random.default_rng(1)
    ref = rng.standard_normal((2, 3, 8)).astype(np.float32)
    ref[1, 1] = 0.0  # row 4
    lowp_err = np.array([1e-3, 2e-3, 5e-4, 1e-3, 0.0, 3e-3], dtype=np.float32)
    lowp = ref.copy()
    for i, e in enumerate(lowp_err):
        lowp.reshape(6, 8)[i, i % 8] += e * (1 if i % 2 else -1)

    def ours(mult, col=3):
        o = ref.copy()
        for i, e in enumerate(lowp_err):
            o.reshape(6, 8)[i, col] += mult[i] * e
        return o
    return ref, lowp, ours


def check_rule(xp, conv):
    """The rule on numpy (xp=np, conv=identity) or torch tensors."""
    ref, lowp, ours = synthetic()
    R = conv(ref)
    base = run.row_max_err(conv(lowp), R)
    assert np.allclose(np.asarray(base, dtype=np.float64), [1e-3, 2e-3, 5e-4, 1e-3, 0.0, 3e-3], rtol=1e-3), base
    slack = 1e-7

    def rule(o, b=base, s=slack):
        return run.fa3_rule(run.row_max_err(conv(o), R), b, s)
    # every row at 1.5x its own baseline: the tensor's max error (row 5) is 1.5x the tensor's baseline
    ok = rule(ours([1.5] * 6))
    assert ok["ok"] and abs(ok["ratio"] - 1.5) < 0.01 and ok["rows"] == 6 and ok["rows_over"] == 0, ok
    assert abs(ok["lowp_max_err"] - 3e-3) < 1e-6 and abs(ok["max_err"] - 4.5e-3) < 1e-5, ok
    # every row at 3x: the tensor fails at 3x
    bad = rule(ours([3.0] * 6))
    assert not bad["ok"] and abs(bad["ratio"] - 3.0) < 0.01 and bad["rows_over"] == 5, bad  # row 4: 0 vs 0
    # one row 3x its own baseline, the tensor's max error still 1.5x the tensor's: passes (the rule
    # is per tensor); the per-row figures name the row
    m = [1.5] * 6
    m[2] = 3.0
    r = rule(ours(m))
    assert r["ok"] and abs(r["ratio"] - 1.5) < 0.01, r
    assert r["rows_over"] == 1 and r["worst_row"] == 2 and abs(r["worst_row_ratio"] - 3.0) < 0.01, r
    assert abs(r["worst_row_err"] - 1.5e-3) < 1e-6 and abs(r["worst_row_lowp_err"] - 5e-4) < 1e-6, r
    # one row's error 3x the tensor's baseline (row 2, whose own baseline is small): fails
    m[2] = 3.0 * 3e-3 / 5e-4
    r = rule(ours(m))
    assert not r["ok"] and abs(r["ratio"] - 3.0) < 0.01 and r["worst_row"] == 2, r
    # the all-zero row (row 4): an error within the slack or 3x it passes (the tensor's baseline is
    # 3e-3); the row is counted over 2x its own when over the slack
    z = ours([1.5] * 6)
    z.reshape(6, 8)[4, 0] = 0.5 * slack
    assert rule(z)["ok"] and rule(z)["rows_over"] == 0
    z.reshape(6, 8)[4, 0] = 3 * slack
    r = rule(z)
    assert r["ok"] and r["rows_over"] == 1 and r["worst_row"] == 4, r
    # an all-zero tensor reproduced exactly by both passes, even without slack
    zr = conv(np.zeros((2, 3, 8), dtype=np.float32))
    zb = run.row_max_err(zr, zr)
    for s in (0.0, slack):
        r = run.fa3_rule(run.row_max_err(zr, zr), zb, s)
        assert r["ok"] and r["ratio"] == 0.0 and r["rows_over"] == 0, r
    # ... and any error over the slack fails it
    zo = np.zeros((2, 3, 8), dtype=np.float32)
    zo[1, 2, 3] = 1e-20
    assert not run.fa3_rule(run.row_max_err(conv(zo), zr), zb, 0.0)["ok"]
    # a NaN fails (an unwritten output), whatever the other rows' errors; its numbers are None for the JSON
    n = ours([1.0] * 6)
    n.reshape(6, 8)[1, 5] = np.nan
    r = rule(n)
    assert not r["ok"] and r["max_err"] is None and r["ratio"] is None and r["rows_over"] == 1, r


def check_worker(torch):
    """The worker's FA3 path on the CPU, toy cases (float32; bf16 for the backward)."""
    a = argparse.Namespace(smoke_cpu=True, deadline=0.0)
    w = run.Worker(a, None)
    cases = [
        {"kernel": "attention", "shape": {"B": 2, "H": 2, "N": 128, "D": 64}, "dtype": "f32", "causal": 1},
        {"kernel": "attention_gqa", "shape": {"B": 1, "H": 4, "HKV": 2, "N": 64, "D": 32, "W": 16}, "dtype": "f32",
         "causal": 1},
        {"kernel": "attention_backward", "shape": {"B": 1, "H": 2, "N": 96, "D": 64}, "dtype": "f32", "causal": 1},
        {"kernel": "attention_backward", "shape": {"B": 1, "H": 2, "N": 96, "D": 64}, "dtype": "bf16", "causal": 1},
    ]
    for c in cases:
        ctx = w.setup_case(c)
        ctx["key"] = run.row_key(c, "test", None)
        for name, ref in ctx["ref"].items():
            e = ctx["lowp_err"][name]
            rows = ref.numel() // ref.shape[-1]
            assert e.shape == (rows,), (c["kernel"], name, e.shape)
            # float32 "low precision" is the reference's math: a wrong mask, scale, window, gradient
            # or delta would be off by O(|ref|); bf16's error is a few roundings, not O(|ref|)
            lim = (1e-4 if c["dtype"] == "f32" else 0.1) * ref.abs().max().item()
            assert e.max().item() < lim, (c["kernel"], c["dtype"], name, e.max().item())
            assert ctx["slack"][name] > 0
        # each row's error in one element = mult x (that row's baseline + slack / 2)
        allow = {n: ctx["lowp_err"][n] + ctx["slack"][n] / run.ATTN_FACTOR for n in ctx["ref"]}

        def make(mult):
            outs = {}
            for name, ref in ctx["ref"].items():
                o = ref.clone()
                o[..., 0] += mult[name].reshape(ref.shape[:-1]) * allow[name].reshape(ref.shape[:-1])
                outs[name] = o
            return lambda: outs
        ones = {n: torch.full_like(x, 1.5) for n, x in allow.items()}
        # every row at 1.5x its own: every tensor at 1.5x, passes
        ok, m, why = w.check(c, ctx, make(ones))
        assert ok and m["check"] == "fa3" and not m["failed_rules"], (c["kernel"], why, m)
        assert 1.4 < m["fa3_ratio"] < 1.6 and m["fa3_rows_over"] == 0, (c["kernel"], m)
        assert set(m["fa3"]) == set(ctx["ref"]) and m["lowp_max_abs_err"] is not None, m
        # one row (5) with an error 3x the tensor's allowance: fails, naming the rule and the row
        row = 5
        three = {}
        for n, x in allow.items():
            three[n] = ones[n].clone()
            three[n][row] = 3.0 * x.max() / x[row]
        ok, m, why = w.check(c, ctx, make(three))
        assert not ok and m["failed_rules"] == ["fa3"] and "[fa3]" in why and "rows over 2x" in why, (c["kernel"], why)
        for name, r in m["fa3"].items():
            assert not r["ok"] and 2.9 < r["ratio"] < 3.1, (c["kernel"], name, r)
            assert r["worst_row"] == row and r["worst_pos"] == row % ctx["ref"][name].shape[-2], r
        if c["dtype"] == "bf16":
            # the row whose own allowance is smallest at 3x its own, when that stays within 2x the
            # tensor's: the per-row figures count it, the check passes
            own = {}
            for n, x in allow.items():
                i = int(x.argmin())
                assert 3.0 * x[i] < 1.5 * x.max(), (n, x[i], x.max())
                own[n] = ones[n].clone()
                own[n][i] = 3.0
            ok, m, why = w.check(c, ctx, make(own))
            assert ok and not m["failed_rules"] and m["fa3_rows_over"] == 3 and 2.9 < m["fa3_row_ratio"] < 3.1, (why, m)
            # the backward's low-precision math takes delta from the O it is given (the kernels' O):
            # a wrong O moves dQ and dK, not dV
            I = ctx["inputs"]
            e2 = w.attention_lowp(I["Q"], I["K"], I["V"], ctx["scale"], True, ctx["ref"], 0, I["dO"], I["O"] * 1.25)
            for n in ("dQ", "dK"):
                assert e2[n].max() > 2 * ctx["lowp_err"][n].max(), (n, e2[n].max(), ctx["lowp_err"][n].max())
            assert torch.equal(e2["dV"], ctx["lowp_err"]["dV"])
    # the other kernels keep their relative-error rules
    c = {"kernel": "softmax", "shape": {"M": 8, "N": 64}, "dtype": "f32", "causal": None}
    ctx = w.setup_case(c)
    ctx["key"] = run.row_key(c, "test", None)
    ok, m, why = w.check(c, ctx, lambda: {"Y": ctx["ref"]["Y"] * 1.01})
    assert not ok and m["check"] == "rel+worst-row" and m["failed_rules"] == ["rel", "worst-row"], (why, m)
    assert "fa3" not in m


def main():
    check_rule(np, lambda x: x)
    print("check_fa3_rule: the rule on numpy arrays: a tensor at 3x fails, 1.5x passes, all-zero exact passes, "
          "NaN fails; per-row figures computed, not judged")
    try:
        import torch
    except ImportError:
        print("check_fa3_rule: SKIP torch tensors and the worker's path (no torch)")
        return 0
    check_rule(torch, lambda x: torch.from_numpy(np.ascontiguousarray(x)))
    check_worker(torch)
    print("check_fa3_rule: torch tensors agree; the worker's low-precision baseline (backward: delta from the "
          "given O) and check() on CPU toy cases")
    return 0


if __name__ == "__main__":
    sys.exit(main())
