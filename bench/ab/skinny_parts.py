"""Where the time of the M = 16 GEMM goes (issue 11): each kernel of the split-K GEMM
(bench/ab/gemm_splitk.tile) timed alone and both in sequence, beside the one-kernel GEMM variants
and cuBLAS (torch.matmul, torch.addmm + relu), at 16 x 8192 x 8192, f16. Same timing as
bench/user_kernels.py: CUDA events around one call, L2 flushed before each, median of 100.

PTX comes from this machine: bench/ab/skinny_prep.sh writes build/skinny/*.ptx. On the GPU:
    TILEC_LIB_DIR=build python3 bench/ab/skinny_parts.py --ptx-dir build/skinny --json $OUT/skinny.json
"""
import argparse
import datetime
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.join(ROOT, "bench"))

import torch  # noqa: E402

import tilec  # noqa: E402
from user_kernels import timed as timed_reps  # noqa: E402 (events, L2 flushed, median)


def timed(fn):
    return timed_reps(fn, reps=100)

def main():
    p = argparse.ArgumentParser()
    p.add_argument("--ptx-dir", default=os.path.join(ROOT, "build", "skinny"))
    p.add_argument("--json")
    args = p.parse_args()
    torch.manual_seed(0)
    m, n, k = 16, 8192, 8192
    h = torch.float16
    a = torch.randn(m, k, dtype=h, device="cuda") / 8
    b = torch.randn(k, n, dtype=h, device="cuda") / 8
    bias = torch.randn(n, dtype=h, device="cuda")
    c = torch.empty(m, n, dtype=h, device="cuda")
    want = torch.relu(torch.addmm(bias.float(), a.float(), b.float()))
    err = lambda: ((c.float() - want).norm() / want.norm()).item()  # noqa: E731
    rows = [{"name": "torch.matmul (cuBLAS)", "ms": timed(lambda: torch.matmul(a, b))},
            {"name": "torch relu(addmm)", "ms": timed(lambda: torch.relu(torch.addmm(bias, a, b)))}]
    names = sorted(f[:-4] for f in os.listdir(args.ptx_dir) if f.endswith(".ptx"))
    for name in names:
        if name.startswith("splitk_sum"):
            continue
        kern = tilec.load_ptx(os.path.join(args.ptx_dir, name + ".ptx"))
        if not name.startswith("splitk_"):
            c.zero_()
            ms = timed(lambda: kern(a, b, bias, c))
            rows.append({"name": name, "ms": ms, "rel_err": err()})
            continue
        split = int(name.rsplit("_s", 1)[1])
        part = torch.empty(split, m, n, dtype=torch.float32, device="cuda")
        ksum = tilec.load_ptx(os.path.join(args.ptx_dir, "splitk_sum_s%d.ptx" % split))
        c.zero_()
        both = timed(lambda: (kern(a, b, part), ksum(part, bias, c)))
        rows.append({"name": name + " (both kernels)", "ms": both, "rel_err": err()})
        rows.append({"name": name + " (partials alone)", "ms": timed(lambda: kern(a, b, part))})
        rows.append({"name": name + " (sum alone)", "ms": timed(lambda: ksum(part, bias, c))})
    for r in rows:
        print("%-48s %.4f ms%s" % (r["name"], r["ms"], "  err %.1e" % r["rel_err"] if "rel_err" in r else ""))
    if args.json:
        commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True,
                                text=True).stdout.strip()
        with open(args.json, "w") as f:
            json.dump({"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                       "commit": commit, "gpu": torch.cuda.get_device_name(), "dtype": "f16",
                       "shape": {"M": m, "N": n, "K": k}, "timing": "CUDA events, L2 flushed, median of 100",
                       "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
