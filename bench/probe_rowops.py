#!/usr/bin/env python3
"""bench/probe_rowops.py — where the row ops lose time against the copy (issue 6). GPU machine only.

For every f16 row-op case of the benchmark it runs our variants (bench/configs.txt and the sweep in
bench/probe_configs.txt), the hand-written baseline, the torch peer and a device copy of the same
number of bytes, each verified first (run.py's check), and times each three ways:

  flush   run.py's method: 256 MB written before each launch (the L2 is left full of dirty lines)
  clean   the L2 flushed by reading 256 MB instead (nothing dirty left to write back)
  stream  back-to-back launches over rotating buffer sets (>= 1 GiB a cycle, no flush), timed as
          one span: the steady state of a model running one op after another (run.py's stream_ms)

  python3 bench/probe_rowops.py --out DIR            the timings (DIR/probe.json; a line per row on stdout)
  python3 bench/probe_rowops.py --once [--only RE]   each implementation once, between
                                                     cudaProfilerStart/Stop (for ncu), in the
                                                     order written to --order; --only keeps the
                                                     "CASE NAME" labels RE matches
"""
import argparse
import json
import os
import re
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import run as R  # noqa: E402

PROBE_CONFIGS = [os.path.join(HERE, n) for n in ("probe_configs.txt", "probe_extra.txt")]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=".")
    ap.add_argument("--once", action="store_true")
    ap.add_argument("--order", help="with --once: write the launch order (one label a line) here")
    ap.add_argument("--only", help="regular expression over 'CASE NAME' labels: run only those")
    ap.add_argument("--kernels", default=",".join(R.ROW_KERNELS))
    a = ap.parse_args()
    wa = argparse.Namespace(smoke_cpu=False, min_reps=20, max_reps=200, deadline=time.time() + 3600)
    import torch
    w = R.Worker(wa, R.Journal(os.devnull))
    configs = R.read_configs() + [v for p in PROBE_CONFIGS if os.path.exists(p) for v in R.read_configs(p)]
    plan = [c for c in R.make_plan(False, a.kernels.split(","), ["f16"]) if c["kernel"] in R.ROW_KERNELS]
    clean_buf = w.flush_buf.view(torch.int64)
    rows = []
    order = open(a.order, "w") if a.once and a.order else None
    for c in plan:
        ctx = w.setup_case(c)
        ctx["key"] = R.case_key(c)
        _, nbytes = R.flops_bytes(c)
        for impl, variant in R.impls_for(c, configs)[0]:
            name = variant or impl
            if a.only and not re.search(a.only, f"{ctx['key']} {name}"):
                continue
            try:
                fn = w.impl_fn(c, ctx, impl, variant)
                if a.once:
                    torch.cuda.synchronize()
                    torch.cuda.profiler.start()
                    fn()
                    torch.cuda.synchronize()
                    torch.cuda.profiler.stop()
                    if order:
                        order.write(f"{ctx['key']} {name}\n")
                    continue
                if not (variant or "").startswith("x"):  # x*: anatomy experiments, not checked
                    ok, m, why = w.check_copy(fn) if impl == "copy" else w.check(c, ctx, fn)
                    if not ok:
                        R.log(f"{ctx['key']} {name}: FAILED {why}")
                        rows.append({"case": ctx["key"], "impl": impl, "variant": variant, "error": why})
                        continue
                w.flush = lambda: w.flush_buf.zero_()
                t_flush = w.time_fn(fn, 0.15)["median_ms"]
                w.flush = lambda: clean_buf.sum()
                t_clean = w.time_fn(fn, 0.15)["median_ms"]
                t_stream = w.stream_time(c, ctx, impl, variant, nbytes)
                r = {"case": ctx["key"], "impl": impl, "variant": variant, "bytes": nbytes,
                     "flush_ms": t_flush, "clean_ms": t_clean, "stream_ms": t_stream}
                if variant:
                    r["ptxas"] = R.ptxas_summary(variant)
                for k in ("flush", "clean", "stream"):
                    r[k + "_gbps"] = round(nbytes / (r[k + "_ms"] * 1e-3) / 1e9, 1)
                rows.append(r)
                R.log(f"{ctx['key']:28s} {name:32s} flush {r['flush_gbps']:6.0f}  clean {r['clean_gbps']:6.0f}  "
                      f"stream {r['stream_gbps']:6.0f} GB/s")
            except Exception as e:  # noqa: BLE001
                R.log(f"{ctx['key']} {name}: {type(e).__name__}: {str(e)[:300]}")
                rows.append({"case": ctx["key"], "impl": impl, "variant": variant, "error": str(e)[:300]})
        del ctx
        torch.cuda.empty_cache()
    if a.once:
        return 0
    res = {"date": time.strftime("%Y-%m-%dT%H:%M:%S"), "commit": R.commit_id(), "gpu": torch.cuda.get_device_name(0),
           "method": {"flush": "256 MB zero_() before each launch, events around the launch, median",
                      "clean": "256 MB read (sum) before each launch, events around the launch, median",
                      "stream": "run.py's stream_ms: back-to-back launches over rotating buffer sets, one span"},
           "rows": rows}
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "probe.json"), "w") as f:
        json.dump(res, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
