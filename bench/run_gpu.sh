#!/usr/bin/env bash
# bench/run_gpu.sh — THE command on the GPU machine (what `make bench` runs). Builds nothing: it
# needs what `make bench-prep` built here and carried along in build/ (build/libtilert.so,
# build/bench/libbaselines.so, build/bench/ptx/*.ptx, build/bench/commit.txt).
#
#   bash bench/run_gpu.sh [run.py options: --quick, --kernels softmax,gemm, --budget S ...]
#
# Results go to $BENCH_OUT, else $OUT (the device tool's folder that comes back), else
# bench/results/: latest.json, bench-<date>.json, table.md, bars.svg, roofline.svg, rows.jsonl,
# run.log (7 files). The whole run is capped at $BENCH_TIMEOUT seconds (default 470, inside one
# 10-minute device call); run.py's own budget (420 s) normally ends it first, with every row
# measured so far written.
set -u
cd "$(dirname "$0")/.."
outdir=${BENCH_OUT:-${OUT:-bench/results}}
mkdir -p "$outdir"
export PYTHONUNBUFFERED=1
{
  echo "run_gpu: $(date -u +%FT%TZ) on $(hostname), results in $outdir"
  for f in build/libtilert.so build/bench/libbaselines.so build/bench/commit.txt; do
    [ -f "$f" ] || echo "run_gpu: WARNING: $f missing (make bench-prep on the build machine, carry build/)"
  done
  echo "run_gpu: $(ls build/bench/ptx/*.ptx 2>/dev/null | wc -l) PTX variants carried"
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw \
    --format=csv 2>&1 | head -3 || true
} 2>&1 | tee "$outdir/run.log"
timeout -k 15 "${BENCH_TIMEOUT:-470}" python3 -u bench/run.py --out "$outdir" "$@" 2>&1 | tee -a "$outdir/run.log"
rc=${PIPESTATUS[0]}
[ "$rc" = 124 ] && echo "run_gpu: stopped at ${BENCH_TIMEOUT:-470} s; the rows measured so far are in $outdir" | tee -a "$outdir/run.log"
exit "$rc"
