#!/usr/bin/env python3
"""bench/tools/ab.py — the A/Bs of one benchmark run: each variant whose name ends in one of the
given suffixes beside the variant without it (`lnb_n4096_r1c32w8_s4_nhi` beside
`lnb_n4096_r1c32w8_s4`), case by case, from the same result JSON (bench/run.py's latest.json or a
dated copy), so both sides were timed in one run on one GPU.

  python3 bench/tools/ab.py RESULT.json _fa _nhi _nr     # one table per suffix, then geomeans

A ratio is the base's median time over the variant's: above 1, the suffix is faster. Only
verified rows count; a case either side lacks is left out. Suffixes are tried longest first, so
`_fanr` is not read as `_nr` of `..._fa`.
"""
import json
import math
import sys


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


def main(argv):
    if len(argv) < 3:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    with open(argv[1]) as f:
        res = json.load(f)
    times = medians(res["rows"])
    suffixes = sorted(argv[2:], key=len, reverse=True)
    print(f"# A/B from {argv[1]}: {res.get('gpu')}, commit {res.get('commit')}, {res.get('date')}")
    summary = []
    for s in argv[2:]:
        found = list(pairs(times, s, suffixes))
        print(f"\n## {s}: base ms / {s} ms (> 1: {s} faster)")
        for base, variant, case, ratio in found:
            print(f"{ratio:7.3f}  {variant:44s} {case[0]} {case[1]} {case[2]}")
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
