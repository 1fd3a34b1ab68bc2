#!/usr/bin/env bash
# DRAM throughput of the memory-bound kernels under Nsight Compute (issue 6), at the benchmark's
# shapes: for each row op and shape, the fastest tilec variant of the benchmark and the hand-written
# baseline, each launched once (bench/probe_rowops.py --once). (The benchmark's `copy` row is a
# cudaMemcpy, which Nsight Compute does not profile as a kernel.)
# Clocks are left as the GPU has them (--clock-control none). Needs build/ from `make bench-prep`.
# Writes $OUT/ncu_rowops.csv (raw) and $OUT/ncu_rowops.txt (one line per kernel).
set -u
cd "$(dirname "$0")/../.."
OUT=${OUT:?OUT must be set}
ncu=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
best='softmax_n1024_r2w2|rmsnorm_n1024_r4w4|layernorm_n1024_pin|add_rmsnorm_n1024_r4w4'
best="$best|softmax_n4096_r1w4|rmsnorm_n4096_pin|layernorm_n4096_r1w4|add_rmsnorm_n4096_r1w4"
best="$best|softmax_n16k_r1w4|rmsnorm_n16k_pin|layernorm_n16k_pin|add_rmsnorm_n16k_pin"
timeout 150 "$ncu" --profile-from-start off --clock-control none --csv --print-units base --metrics \
  gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed \
  python3 bench/probe_rowops.py --once --only " ($best|baseline)\$" --order "$OUT/ncu_order.txt" \
  > "$OUT/ncu_rowops.csv" 2> "$OUT/ncu_rowops.err"
echo "ncu exit $?"
python3 - "$OUT" <<'PY' | tee "$OUT/ncu_rowops.txt"
import csv, sys
out = sys.argv[1]
rows = list(csv.DictReader([l for l in open(f"{out}/ncu_rowops.csv") if l.startswith('"')]))
k = {}
for r in rows:
    k.setdefault(r["ID"], {})[r["Metric Name"]] = float(r["Metric Value"].replace(",", ""))
labels = [l.split() for l in open(f"{out}/ncu_order.txt")]
ids = sorted(k, key=int)
if len(ids) != len(labels):
    print(f"ncu_rowops: {len(ids)} kernels profiled for {len(labels)} launches: the table would be misaligned")
    sys.exit(1)
print(f"{'case':34s} {'impl':24s} {'us':>8s} {'read MB':>8s} {'write MB':>8s} {'DRAM GB/s':>9s} {'dram %':>7s}")
for (case, name), i in zip(labels, ids):
    m = k[i]
    t = m["gpu__time_duration.sum"] * 1e-3
    rd, wr = m["dram__bytes_read.sum"] / 1e6, m["dram__bytes_write.sum"] / 1e6
    print(f"{case:34s} {name:24s} {t:8.2f} {rd:8.1f} {wr:8.1f} {(rd + wr) / t * 1e3:9.0f} "
          f"{m['dram__throughput.avg.pct_of_peak_sustained_elapsed']:7.1f}")
PY
