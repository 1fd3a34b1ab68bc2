"""Kernels a new user wrote from the docs alone (bench/user/*.tile: GEGLU, RMSNorm + residual,
column max two ways, GEMM + bias + SiLU, softmax with a temperature, a weight gradient X^T dY; colmax_split.tile is our
rewrite of the column max, at several -D values), on the GPU through the
Python package, each against torch in the same process: the error against a float32 torch
reference and the time against torch eager (CUDA events, L2 flushed, median).

The GEMM runs twice: at the tile the user chose and at the bench's tuned tile (the same -D values
as dsl/examples/gemm.tile's bench rows), beside the example itself at that tile, so the table
shows whether a kernel written from the docs gets the example's speed.

PTX comes from this machine (`make user-prep` writes build/user/*.ptx); on the GPU:
    TILEC_LIB_DIR=build python3 bench/user_kernels.py --ptx-dir build/user --json $OUT/user.json
"""
import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, ".."))
sys.path.insert(0, os.path.join(ROOT, "python"))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import tilec  # noqa: E402


def timed(fn, reps=50):
    """Median ms of fn() over reps runs, each after a 256 MB write that evicts L2."""
    flush = torch.empty(64 << 20, dtype=torch.int32, device="cuda")
    for _ in range(5):
        fn()
    times = []
    for _ in range(reps):
        flush.zero_()
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    return statistics.median(times)


def rel_err(out, want):
    out, want = out.float(), want.float()
    return ((out - want).norm() / want.norm().clamp_min(1e-30)).item()


def cases(ptx):
    """(name, shape text, run ours, run torch, check) per case; check returns the relative error."""
    h = torch.float16
    out = []

    m, d = 8192, 4096
    x = torch.randn(m, 2 * d, dtype=h, device="cuda")
    y = torch.empty(m, d, dtype=h, device="cuda")
    k = tilec.load_ptx(ptx("geglu"))
    ref = lambda: F.gelu(x[:, :d], approximate="tanh") * x[:, d:]  # noqa: E731
    want = F.gelu(x[:, :d].float(), approximate="tanh") * x[:, d:].float()
    out.append(("geglu", "8192 x 2*4096", lambda: k(x, y), ref, lambda: rel_err(y, want)))

    m, n = 16384, 1024
    xr = torch.randn(m, n, dtype=h, device="cuda")
    w = torch.randn(n, dtype=h, device="cuda")
    r = torch.randn(m, n, dtype=h, device="cuda")
    yr = torch.empty_like(xr)
    k2 = tilec.load_ptx(ptx("rmsres"))

    def rms_torch(xx=xr):
        return xx * torch.rsqrt(xx.float().pow(2).mean(-1, keepdim=True) + 1e-5).to(h) * w + r
    want_r = xr.float() * torch.rsqrt(xr.float().pow(2).mean(-1, keepdim=True) + 1e-5) * w.float() + r.float()
    out.append(("rms_residual", "16384 x 1024", lambda: k2(xr, w, r, yr, 1e-5), rms_torch,
                lambda: rel_err(yr, want_r)))

    m, n = 8192, 8192
    xc = torch.randn(m, n, dtype=torch.float32, device="cuda") - 3.0  # all negative: max < 0
    yc = torch.empty(n, dtype=torch.float32, device="cuda")
    want_c = xc.amax(0)
    for name in ("colmax", "colmax_bn32"):
        k3 = tilec.load_ptx(ptx(name))
        out.append((name + " (a strip per block)", "8192 x 8192 f32", lambda k3=k3: k3(xc, yc), lambda: xc.amax(0),
                    lambda: rel_err(yc, want_c)))
    k4 = tilec.load_ptx(ptx("colmax_atomic"))

    def atomic():
        yc.fill_(float("-inf"))
        k4(xc, yc)
    out.append(("colmax (atomic_max)", "8192 x 8192 f32", atomic, lambda: xc.amax(0), lambda: rel_err(yc, want_c)))
    # our rewrite (bench/user/colmax_split.tile) at the -D values of make user-prep
    for name in sorted(n[:-4] for n in os.listdir(os.path.dirname(ptx("x"))) if n.startswith("colmax_split")):
        ks = tilec.load_ptx(ptx(name))

        def split(ks=ks):
            yc.fill_(float("-inf"))
            ks(xc, yc)
        out.append((name + " (rewrite)", "8192 x 8192 f32", split, lambda: xc.amax(0), lambda: rel_err(yc, want_c)))

    s = 4096
    a = torch.randn(s, s, dtype=h, device="cuda") / 8
    b = torch.randn(s, s, dtype=h, device="cuda") / 8
    bias = torch.randn(s, dtype=h, device="cuda")
    c = torch.empty(s, s, dtype=h, device="cuda")
    want_g = F.silu(torch.addmm(bias.float(), a.float(), b.float()))
    for name, what in (("gemm_silu", "user's tile"), ("gemm_silu_tuned", "bench tile"),
                       ("gemm_silu_pp", "user's tile, TILEC_PINGPONG=1")):
        if not os.path.exists(ptx(name)):
            continue
        kg = tilec.load_ptx(ptx(name))
        out.append(("%s (%s)" % (name, what), "4096^3", lambda kg=kg: kg(a, b, bias, c),
                    lambda: F.silu(torch.addmm(bias, a, b)), lambda: rel_err(c, want_g)))
    ke = tilec.load_ptx(ptx("gemm_relu_example"))
    want_e = F.relu(torch.addmm(bias.float(), a.float(), b.float()))
    out.append(("dsl/examples/gemm.tile ACT=1 (bench tile)", "4096^3", lambda: ke(a, b, bias, c),
                lambda: F.relu(torch.addmm(bias, a, b)), lambda: rel_err(c, want_e)))

    # the weight gradient of a linear layer, dW = X^T dY (X^T read in place as wgmma's operand A;
    # wgrad_regs: the same source with TILEC_TRANS_A=0, X^T through registers)
    mt, ki, no = 8192, 4096, 4096
    xw = torch.randn(mt, ki, dtype=h, device="cuda") / 8
    gw = torch.randn(mt, no, dtype=h, device="cuda") / 8
    dw = torch.empty(ki, no, dtype=h, device="cuda")
    want_w = xw.float().t() @ gw.float()
    for name, what in (("wgrad", "X^T in place"), ("wgrad_s3", "X^T in place, 3 stages"),
                       ("wgrad_keep", "TILEC_STORE_RING=0"), ("wgrad_regs", "TILEC_TRANS_A=0")):
        if not os.path.exists(ptx(name)):
            continue
        kw = tilec.load_ptx(ptx(name))
        out.append(("%s (%s)" % (name, what), "8192 x 4096 x 4096", lambda kw=kw: kw(xw, gw, dw),
                    lambda: torch.matmul(xw.t(), gw), lambda: rel_err(dw, want_w)))

    m, n = 16384, 1024
    xs = torch.randn(m, n, dtype=h, device="cuda")
    ys = torch.empty_like(xs)
    k5 = tilec.load_ptx(ptx("softmax_t"))
    want_s = torch.softmax(xs.float() / 0.7, -1)
    out.append(("softmax_temp", "16384 x 1024", lambda: k5(xs, ys, 0.7), lambda: torch.softmax(xs / 0.7, -1),
                lambda: rel_err(ys, want_s)))
    return out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--ptx-dir", default=os.path.join(ROOT, "build", "user"))
    p.add_argument("--json")
    args = p.parse_args()
    ptx = lambda name: os.path.join(args.ptx_dir, name + ".ptx")  # noqa: E731
    torch.manual_seed(0)
    rows = []
    for name, shape, ours, theirs, check in cases(ptx):
        row = {"kernel": name, "shape": shape}
        try:
            ours()
            torch.cuda.synchronize()
            row["rel_err"] = check()
            row["ok"] = row["rel_err"] < 1e-2
            row["tilec_ms"] = timed(ours)
            row["torch_ms"] = timed(theirs)
            row["tilec_over_torch"] = row["torch_ms"] / row["tilec_ms"]
        except Exception as e:  # one case's failure must not hide the others
            row["ok"], row["error"] = False, "%s: %s" % (type(e).__name__, e)
        rows.append(row)
        print("%-44s %-16s %s" % (name, shape, row.get("error") or "err %.1e %s  tilec %.4f ms  torch %.4f ms  %.2fx"
              % (row["rel_err"], "ok" if row["ok"] else "WRONG", row["tilec_ms"], row["torch_ms"],
                 row["tilec_over_torch"])), flush=True)
    commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    if os.path.exists(os.path.join(args.ptx_dir, "COMMIT")):
        commit = open(os.path.join(args.ptx_dir, "COMMIT")).read().strip()
    doc = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
           "commit": commit, "gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "rows": rows}
    if args.json:
        with open(args.json, "w") as f:
            json.dump(doc, f, indent=1)
    bad = [r["kernel"] for r in rows if not r["ok"]]
    print("user kernels: %s" % ("all correct" if not bad else "FAILED: " + ", ".join(bad)))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
