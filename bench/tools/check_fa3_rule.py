#!/usr/bin/env python3
"""bench/tools/check_fa3_rule.py — the attention family's accuracy rule of bench/run.py (FlashAttention-3's:
per row, max error <= 2 x the low-precision math's + a slack), tested without a GPU.

  1. run.row_max_err / run.fa3_rule on synthetic numpy arrays: a row 3x worse than the baseline
     fails, 1.5x passes, an all-zero row with zero error passes, a NaN row fails, the slack;
  2. with torch (a CPU build is enough): the same arrays as torch tensors give the same verdicts, and
     the worker's own path on toy float32 cases: the low-precision math baseline (attention_lowp,
     chunked over heads, autograd for the backward) agrees with the float32 reference, and check()
     passes outputs 1.5x the baseline's error and fails, naming the rule, one row at 3x.

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
    ok = run.fa3_rule(run.row_max_err(conv(ours([1.5] * 6)), R), base, slack)
    assert ok["bad_rows"] == 0 and ok["rows"] == 6, ok
    assert abs(ok["ratio"] - 1.5) < 0.01, ok  # every row at 1.5x (row 4: 0 vs 0)
    assert abs(ok["lowp_max_err"] - 3e-3) < 1e-6 and abs(ok["max_err"] - 4.5e-3) < 1e-5, ok
    m = [1.5] * 6
    m[2] = 3.0  # one row 3x its baseline's error: fails, and is the worst
    bad = run.fa3_rule(run.row_max_err(conv(ours(m)), R), base, slack)
    assert bad["bad_rows"] == 1 and bad["worst_row"] == 2 and abs(bad["ratio"] - 3.0) < 0.01, bad
    assert abs(bad["worst_err"] - 1.5e-3) < 1e-6 and abs(bad["worst_lowp_err"] - 5e-4) < 1e-6, bad
    # the whole tensor's max error (4.5e-3, row 5) is within 2 x the baseline's (3e-3): only the
    # per-row rule sees row 2
    assert bad["max_err"] <= 2 * bad["lowp_max_err"], bad
    # the all-zero row: zero error passes; an error within the slack passes, over it fails
    z = ours([1.5] * 6)
    z.reshape(6, 8)[4, 0] = 0.5 * slack
    assert run.fa3_rule(run.row_max_err(conv(z), R), base, slack)["bad_rows"] == 0
    z.reshape(6, 8)[4, 0] = 3 * slack
    r = run.fa3_rule(run.row_max_err(conv(z), R), base, slack)
    assert r["bad_rows"] == 1 and r["worst_row"] == 4, r
    # a NaN row fails (an unwritten output), and its numbers are None for the JSON
    n = ours([1.0] * 6)
    n.reshape(6, 8)[1, 5] = np.nan
    r = run.fa3_rule(run.row_max_err(conv(n), R), base, slack)
    assert r["bad_rows"] == 1 and r["max_err"] is None, r
    # no slack, zero baseline: zero error passes, any error fails
    zb = conv(np.zeros(3, dtype=np.float32))
    assert run.fa3_rule(conv(np.zeros(3, dtype=np.float32)), zb, 0.0)["bad_rows"] == 0
    assert run.fa3_rule(conv(np.array([0, 1e-20, 0], dtype=np.float32)), zb, 0.0)["bad_rows"] == 1


def check_worker(torch):
    """The worker's FA3 path on the CPU, toy float32 cases."""
    a = argparse.Namespace(smoke_cpu=True, deadline=0.0)
    w = run.Worker(a, None)
    cases = [
        {"kernel": "attention", "shape": {"B": 2, "H": 2, "N": 128, "D": 64}, "dtype": "f32", "causal": 1},
        {"kernel": "attention_gqa", "shape": {"B": 1, "H": 4, "HKV": 2, "N": 64, "D": 32, "W": 16}, "dtype": "f32",
         "causal": 1},
        {"kernel": "attention_backward", "shape": {"B": 1, "H": 2, "N": 96, "D": 64}, "dtype": "f32", "causal": 1},
    ]
    for c in cases:
        ctx = w.setup_case(c)
        ctx["key"] = run.row_key(c, "test", None)
        for name, ref in ctx["ref"].items():
            e = ctx["lowp_err"][name]
            rows = ref.numel() // ref.shape[-1]
            assert e.shape == (rows,), (c["kernel"], name, e.shape)
            # float32 "low precision" is the reference's math: a wrong mask, scale, window or
            # gradient would be off by O(|ref|)
            assert e.max().item() < 1e-4 * ref.abs().max().item(), (c["kernel"], name, e.max().item())
            assert ctx["slack"][name] > 0
        # outputs off by 1.5 x (baseline + slack / 2) in one element of every row: each row's error is
        # 1.5x its allowance / 2, so the check passes; then one row at 3x fails, naming fa3-row
        def make(mult_row=None, mult=1.5):
            outs = {}
            for name, ref in ctx["ref"].items():
                allow = (ctx["lowp_err"][name] + ctx["slack"][name] / run.ATTN_FACTOR).reshape(ref.shape[:-1])
                o = ref.clone()
                m = torch.full_like(allow, mult)
                if mult_row is not None:
                    m.reshape(-1)[mult_row] = 3.0
                o[..., 0] += m * allow
                outs[name] = o
            return lambda: outs
        ok, m, why = w.check(c, ctx, make())
        assert ok and m["check"] == "fa3-row" and not m["failed_rules"], (c["kernel"], why, m)
        assert 1.4 < m["fa3_ratio"] < 1.6, (c["kernel"], m)
        assert set(m["fa3"]) == set(ctx["ref"]) and m["lowp_max_abs_err"] is not None, m
        row = 5
        ok, m, why = w.check(c, ctx, make(row))
        assert not ok and m["failed_rules"] == ["fa3-row"] and "[fa3-row]" in why, (c["kernel"], why)
        for name, r in m["fa3"].items():
            assert r["bad_rows"] == 1 and r["worst_row"] == row and 2.9 < r["ratio"] < 3.1, (c["kernel"], name, r)
    # the other kernels keep their relative-error rules
    c = {"kernel": "softmax", "shape": {"M": 8, "N": 64}, "dtype": "f32", "causal": None}
    ctx = w.setup_case(c)
    ctx["key"] = run.row_key(c, "test", None)
    ok, m, why = w.check(c, ctx, lambda: {"Y": ctx["ref"]["Y"] * 1.01})
    assert not ok and m["check"] == "rel+worst-row" and m["failed_rules"] == ["rel", "worst-row"], (why, m)
    assert "fa3" not in m


def main():
    check_rule(np, lambda x: x)
    print("check_fa3_rule: the rule on numpy arrays: 3x fails, 1.5x passes, a zero row with zero error passes")
    try:
        import torch
    except ImportError:
        print("check_fa3_rule: SKIP torch tensors and the worker's path (no torch)")
        return 0
    check_rule(torch, lambda x: torch.from_numpy(np.ascontiguousarray(x)))
    check_worker(torch)
    print("check_fa3_rule: torch tensors agree; the worker's low-precision baseline and check() on CPU toy cases")
    return 0


if __name__ == "__main__":
    sys.exit(main())
