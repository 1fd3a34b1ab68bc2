#!/usr/bin/env bash
# One device call for issue 6: bench/probe_rowops.py (three timing methods, launch-shape sweep,
# persistent variants) and, with NCU=1, Nsight Compute on every implementation once (clocks left as
# they are). From a build/ made here by `make bench-prep` plus the probe variants.
set -u
cd "$(dirname "$0")/../.."
OUT=${OUT:?OUT must be set}
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv | tee "$OUT/probe.log"
timeout 400 python3 bench/probe_rowops.py --out "$OUT" >> "$OUT/probe.log" 2>&1
echo "probe exit $?" >> "$OUT/probe.log"
if [ "${NCU:-0}" = 1 ]; then
  ncu=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
  timeout 150 "$ncu" --profile-from-start off --clock-control none --csv --metrics \
    gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__warps_active.avg.pct_of_peak_sustained_active,launch__grid_size \
    python3 bench/probe_rowops.py --once --order "$OUT/once_order.txt" > "$OUT/ncu_probe.csv" 2> "$OUT/ncu_probe.err"
  echo "ncu exit $?" >> "$OUT/probe.log"
fi
grep -E "FAILED|Error|exit" "$OUT/probe.log" | tail -20
