#!/usr/bin/env bash
# DRAM throughput of the memory-bound examples under Nsight Compute (issue 6), one large ragged
# case each, from a build/ made by `make gpu-prep`. Clocks are left as the GPU has them.
set -u
B=${B:-build}
OUT=${OUT:-$B/gpu-out}
mkdir -p "$OUT"
ncu=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
for c in vadd_big softmax_big softmax_online_big rmsnorm_big layernorm_big add_rmsnorm_big xent_big; do
  "$ncu" --clock-control none --metrics \
    dram__throughput.avg.pct_of_peak_sustained_elapsed,dram__bytes.sum,gpu__time_duration.sum \
    --csv "$B/example_runner" --backend=gpu --ptx-dir "$B/ptx" --case "$c" > "$OUT/ncu_$c.csv" 2>&1
  printf '%-20s' "$c"
  grep -E '"(dram__throughput|dram__bytes|gpu__time_duration)' "$OUT/ncu_$c.csv" | \
    awk -F'","' '{gsub(/"/,"",$NF); printf "  %s=%s %s", $(NF-2), $NF, $(NF-1)}'
  echo
done | tee "$OUT/ncu_rowops.txt"
cat "$OUT"/ncu_*.csv > "$OUT/ncu_raw.txt"; rm -f "$OUT"/ncu_*.csv
