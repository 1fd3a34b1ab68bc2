#!/usr/bin/env bash
# GPU correctness and compute-sanitizer, from a build/ made elsewhere by `make gpu-prep`.
# Writes gpu_test.json and sanitizer logs to $OUT (or build/gpu-out). Builds nothing.
set -uo pipefail
B=${B:-build}
OUT=${OUT:-$B/gpu-out}
mkdir -p "$OUT"
runner=$B/example_runner
[ -x "$runner" ] || { echo "gpu-test: $runner missing: run 'make gpu-prep' on a build machine"; exit 1; }
status=0
echo "== correctness: every GPU case against the float64 reference"
"$runner" --suite=gpu --backend=gpu --ptx-dir "$B/ptx" --json "$OUT/gpu_test.json" || status=1
# stamp the results with the commit the build came from and the driver
python3 - "$OUT/gpu_test.json" "$B/COMMIT" <<'PY' || true
import json, subprocess, sys
path, commit_file = sys.argv[1], sys.argv[2]
d = json.load(open(path))
try: d["commit"] = " ".join(open(commit_file).read().split())
except OSError: d["commit"] = "unknown"
try: d["driver"] = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"], capture_output=True, text=True).stdout.strip()
except OSError: pass
json.dump(d, open(path, "w"), indent=1)
PY

echo "== compute-sanitizer on a small ragged case per example"
san=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
summary="$OUT/sanitizer_summary.txt"
: > "$summary"
for c in vadd_n17 softmax_17r2 softmax_online_1000 rmsnorm_17 layernorm_17 add_rmsnorm_17 gemm_gelu attn_d128 attn_d64_causal; do
  for tool in memcheck racecheck synccheck; do
    log="$OUT/san_${c}_${tool}.log"
    "$san" --tool "$tool" --error-exitcode 99 "$runner" --backend=gpu --ptx-dir "$B/ptx" --case "$c" > "$log" 2>&1
    rc=$?
    errs=$(grep -Eo 'ERROR SUMMARY: [0-9]+' "$log" | tail -1 | grep -Eo '[0-9]+$')
    hazards=$(grep -Eo 'RACECHECK SUMMARY: [0-9]+ hazard' "$log" | grep -Eo '[0-9]+' | head -1)
    printf '%-22s %-10s rc=%-3s errors=%s %s\n' "$c" "$tool" "$rc" "${errs:-?}" "${hazards:+hazards=$hazards}" | tee -a "$summary"
    [ "$rc" = 0 ] || status=1
  done
done
# keep only a few logs (the device tool returns at most 8 files)
cat "$OUT"/san_*.log > "$OUT/sanitizer_logs.txt" 2>/dev/null; rm -f "$OUT"/san_*.log
exit $status
