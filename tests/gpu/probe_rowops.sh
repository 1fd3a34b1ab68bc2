#!/usr/bin/env bash
# One device call for issue 6: bench/probe_rowops.py (three timing methods, the launch-shape sweep
# and the variants of bench/probe_extra.txt). From a build/ made here by `make bench-prep` plus
# bench/probe_prep.sh. Nsight Compute at the bench shapes: tests/gpu/ncu_rowops.sh.
set -u
cd "$(dirname "$0")/../.."
OUT=${OUT:?OUT must be set}
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv | tee "$OUT/probe.log"
timeout 400 python3 bench/probe_rowops.py --out "$OUT" >> "$OUT/probe.log" 2>&1
echo "probe exit $?" >> "$OUT/probe.log"
grep -E "FAILED|Error|exit" "$OUT/probe.log" | tail -20
