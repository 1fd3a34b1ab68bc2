#!/usr/bin/env python3
"""bench/probe_matmul.py — a user's plain GEMM (bench/probe/matmul.tile) against torch.matmul
(cuBLAS), f16, in one process on the GPU: CUDA events, median of runs each after a 256 MB write
that empties the L2 (bench/run.py's method). Each PTX is checked against torch.matmul before it is
timed. Writes JSON (date, commit, GPU, shapes, medians) to --json.

    python3 bench/probe_matmul.py --json out.json NAME=build/probe/x.ptx [NAME=...]
"""
import argparse, datetime, json, os, subprocess, sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "python"))
import tilec  # noqa: E402

SHAPES = [(4096, 4096, 4096), (8192, 8192, 8192), (6144, 5120, 4096)]


def time_ms(fn, flush, reps):
    fn()
    torch.cuda.synchronize()
    ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(reps)]
    for s, e in ev:
        flush()
        s.record()
        fn()
        e.record()
    torch.cuda.synchronize()
    ts = sorted(s.elapsed_time(e) for s, e in ev)
    return ts[len(ts) // 2]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", required=True)
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("ptx", nargs="+", help="NAME=PATH of a PTX of bench/probe/matmul.tile")
    a = ap.parse_args()
    buf = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    flush = buf.zero_
    kernels = {}
    for spec in a.ptx:
        name, path = spec.split("=", 1)
        kernels[name] = tilec.load_ptx(path)
    try:
        commit = open("build/bench/commit.txt").read().split()[0]
    except OSError:
        commit = "unknown"
    rows = []
    for m, n, k in SHAPES:
        torch.manual_seed(0)
        A = torch.randn(m, k, device="cuda", dtype=torch.float16) / 32
        B = torch.randn(k, n, device="cuda", dtype=torch.float16) / 32
        ref = torch.matmul(A, B)
        t = time_ms(lambda: torch.matmul(A, B), flush, a.reps)
        rows.append({"impl": "cublas", "shape": {"M": m, "N": n, "K": k}, "median_ms": t,
                     "tflops": 2 * m * n * k / t / 1e9})
        for name, kern in kernels.items():
            C = torch.empty(m, n, device="cuda", dtype=torch.float16)
            kern(A, B, C)
            torch.cuda.synchronize()
            err = ((C.float() - ref.float()).norm() / ref.float().norm()).item()
            row = {"impl": "tilec", "variant": name, "shape": {"M": m, "N": n, "K": k}, "rel_err": err,
                   "verified": err < 5e-3}
            if row["verified"]:
                t = time_ms(lambda: kern(A, B, C), flush, a.reps)
                row.update(median_ms=t, tflops=2 * m * n * k / t / 1e9)
            rows.append(row)
        for r in rows[-1 - len(kernels):]:
            print(f"{m}x{n}x{k} {r['impl']:7s} {r.get('variant', ''):24s} "
                  f"{r.get('median_ms', float('nan')):8.4f} ms {r.get('tflops', 0):7.1f} TFLOP/s", flush=True)
    out = {"date": datetime.datetime.now().isoformat(timespec="seconds"), "commit": commit,
           "gpu": torch.cuda.get_device_name(), "dtype": "f16",
           "method": "CUDA events, median of --reps runs, each after a 256 MB write (L2 flushed)",
           "torch": torch.__version__, "rows": rows}
    json.dump(out, open(a.json, "w"), indent=1)


if __name__ == "__main__":
    main()
