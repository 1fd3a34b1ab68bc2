#!/usr/bin/env bash
# compute-sanitizer memcheck, racecheck and synccheck on GPU cases, one line each into
# $OUT/sanitizer_summary.txt (appended), the logs into $OUT/sanitizer_logs.txt (the device tool
# returns at most 8 files). Exit status 1 when any run failed. From a build/ made by `make gpu-prep`.
#   OUT=dir B=build bash tests/gpu/sanitize.sh CASE ...
set -uo pipefail
B=${B:-build}
OUT=${OUT:?OUT must be set}
runner=$B/example_runner
san=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
status=0
for c in "$@"; do
  for tool in memcheck racecheck synccheck; do
    log="$OUT/san_${c}_${tool}.log"
    timeout -k 5 300 "$san" --tool "$tool" --error-exitcode 99 "$runner" --backend=gpu --ptx-dir "$B/ptx" --case "$c" > "$log" 2>&1
    rc=$?
    errs=$(grep -Eo 'ERROR SUMMARY: [0-9]+' "$log" | tail -1 | grep -Eo '[0-9]+$')
    hazards=$(grep -Eo 'RACECHECK SUMMARY: [0-9]+ hazard' "$log" | grep -Eo '[0-9]+' | head -1)
    printf '%-22s %-10s rc=%-3s errors=%s %s\n' "$c" "$tool" "$rc" "${errs:-?}" "${hazards:+hazards=$hazards}" | tee -a "$OUT/sanitizer_summary.txt"
    [ "$rc" = 0 ] || status=1
  done
done
cat "$OUT"/san_*.log >> "$OUT/sanitizer_logs.txt" 2>/dev/null; rm -f "$OUT"/san_*.log
exit $status
