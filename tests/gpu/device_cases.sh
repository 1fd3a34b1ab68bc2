#!/usr/bin/env bash
# One device call for a change's own GPU cases: the cases of the GPU suite whose id matches
# CASES (an extended regex), one by one against the float64 reference (each under the runner's
# deadline: a wrong mbarrier parity hangs), then compute-sanitizer memcheck, racecheck and
# synccheck on SAN_CASES. From build/carry_cases.tar.xz (build/ptx, the runner and libtilert,
# made here by `make gpu-prep`); builds nothing. Writes cases.txt, sanitizer_summary.txt and
# sanitizer_logs.txt to $OUT (tests/gpu/sanitize.sh).
#   CASES='^attn_bm' SAN_CASES='attn_bm256_d64_idle' bash tests/gpu/device_cases.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
[ -f build/carry_cases.tar.xz ] && tar -xJf build/carry_cases.tar.xz
OUT=${OUT:?OUT must be set}
runner=build/example_runner
status=0
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/cases.txt"
for id in $("$runner" --suite=gpu --list | awk '{print $1}' | grep -E "${CASES:?CASES must be set}"); do
  timeout -k 5 150 "$runner" --backend=gpu --ptx-dir build/ptx --case "$id" --case-timeout 120 > "$OUT/one.txt" 2>&1
  rc=$?
  printf '%-36s rc=%s %s\n' "$id" "$rc" "$(grep -E "^$id " "$OUT/one.txt" | awk '{print $(NF-1), $NF}' | tail -1)" | tee -a "$OUT/cases.txt"
  [ "$rc" = 0 ] || { status=1; cat "$OUT/one.txt" >> "$OUT/cases.txt"; }
done
rm -f "$OUT/one.txt"
# shellcheck disable=SC2086 # (the cases are words)
[ -z "${SAN_CASES:-}" ] || OUT=$OUT B=build bash tests/gpu/sanitize.sh $SAN_CASES || status=1
exit $status
