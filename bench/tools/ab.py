#!/usr/bin/env python3
"""bench/tools/ab.py — the A/Bs of one benchmark run: each variant whose name ends in one of the
given suffixes beside the variant without it (`lnb_n4096_r1c32w8_s4_nhi` beside
`lnb_n4096_r1c32w8_s4`), case by case, from the same result JSON (bench/run.py's latest.json or a
dated copy), so both sides were timed in one run on one GPU.

  python3 bench/tools/ab.py RESULT.json _fa _nhi _nr     # one table per suffix, then geomeans

A ratio is the base's median time over the variant's: above 1, the suffix is faster. Only
verified rows count; a case either side lacks is left out. Suffixes are tried longest first, so
`_fanr` is not read as `_nr` of `..._fa`.

An argument `^PREFIX` reads the variants whose name starts with PREFIX (another source for the
same cases: `^xentst_`, the stored-exponential cross-entropy kernels) against the fastest
variant of bench/bench_set.txt timed on the same case: the base is then that set variant.
"""
import json
import math
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from run import read_bench_set  # noqa: E402


def case_key(row):
    return (row["kernel"], json.dumps(row["shape"], sort_keys=True), row["dtype"], row.get("causal"))


def medians(rows):
    """(variant, case) -> median ms of the verified tilec rows."""
    out = {}
    for r in rows:
        if r.get("impl") == "tilec" and r.get("verified") and r.get("median_ms"):
            out[(r["variant"], case_key(r))] = r["median_ms"]
    return out


def pairs(times, suffix, suffixes):
    """(base, variant, case, ratio) for every variant ending in suffix (and in no longer one)."""
    longer = [s for s in suffixes if len(s) > len(suffix) and s.endswith(suffix)]
    for (variant, case), ms in sorted(times.items()):
        if not variant.endswith(suffix) or any(variant.endswith(s) for s in longer):
            continue
        base = variant[: -len(suffix)]
        if (base, case) in times:
            yield base, variant, case, times[(base, case)] / ms


def against_set(times, prefix, bench_set):
    """(base, variant, case, ratio): each variant starting with prefix against the fastest set
    variant of its case."""
    best = {}
    for (variant, case), ms in times.items():
        if variant in bench_set and (case not in best or ms < best[case][1]):
            best[case] = (variant, ms)
    for (variant, case), ms in sorted(times.items()):
        if variant.startswith(prefix) and case in best:
            yield best[case][0], variant, case, best[case][1] / ms


def main(argv):
    if len(argv) < 3:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    with open(argv[1]) as f:
        res = json.load(f)
    times = medians(res["rows"])
    suffixes = sorted((a for a in argv[2:] if not a.startswith("^")), key=len, reverse=True)
    bench_set = set(read_bench_set()) if any(a.startswith("^") for a in argv[2:]) else set()
    print(f"# A/B from {argv[1]}: {res.get('gpu')}, commit {res.get('commit')}, {res.get('date')}")
    summary = []
    for s in argv[2:]:
        if s.startswith("^"):
            found = list(against_set(times, s[1:], bench_set))
            print(f"\n## {s}: the set's fastest ms / {s} ms (> 1: {s} faster)")
        else:
            found = list(pairs(times, s, suffixes))
            print(f"\n## {s}: base ms / {s} ms (> 1: {s} faster)")
        for base, variant, case, ratio in found:
            against = f"  (against {base})" if s.startswith("^") else ""
            print(f"{ratio:7.3f}  {variant:44s} {case[0]} {case[1]} {case[2]}{against}")
        if found:
            g = math.exp(sum(math.log(x[3]) for x in found) / len(found))
            summary.append((s, g, len(found)))
        else:
            print("  (no pair in this run)")
    print("\n## geomean")
    for s, g, n in summary:
        print(f"{s:10s} {g:.3f}  ({n} cases)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
