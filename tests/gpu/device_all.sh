#!/usr/bin/env bash
# One device call: GPU correctness + compute-sanitizer + AOT demo (tests/gpu/run_gpu_tests.sh),
# then the benchmark (bench/run_gpu.sh), then Nsight Compute on the row ops (tests/gpu/ncu_rowops.sh).
# Everything from a build/ made here by `make gpu-prep bench-prep device-carry`: carry
# ["build/carry.tar.xz"] (build/ as a whole is over the 64 MiB a call carries); it is unpacked
# first. The device tool returns at most 8 files: the key ones are copied to $OUT, the rest travel
# in all.tar.gz. Knobs (environment): GPU_TEST_SKIP_CPASYNC=1 / GPU_TEST_SKIP_WS=1 (one
# correctness pass instead of three), SAN_CASES="case ..." (the sanitizers' cases), BENCH_ARGS
# (e.g. "--kernels attention --variants 'rotpk|_rot$'"), BENCH_TIMEOUT, DEVICE_NCU=0 (no ncu).
set -uo pipefail
cd "$(dirname "$0")/../.."
[ -f build/carry.tar.xz ] && tar -xJf build/carry.tar.xz
FINAL=${OUT:?OUT must be set}
WORK=$(mktemp -d)
BENCH_ARGS=${BENCH_ARGS:-}
OUT=$WORK/gpu bash tests/gpu/run_gpu_tests.sh > "$WORK/gpu_test.log" 2>&1
gpu_rc=$?
tail -60 "$WORK/gpu_test.log"
echo "== gpu-test exit $gpu_rc"
mkdir -p "$WORK/bench"
eval "set -- $BENCH_ARGS" # shell words, so a quoted --variants regex stays one argument
BENCH_OUT=$WORK/bench BENCH_TIMEOUT=${BENCH_TIMEOUT:-440} bash bench/run_gpu.sh "$@" > "$WORK/bench.log" 2>&1
echo "== bench exit $?"
if [ "${DEVICE_NCU:-1}" != 0 ]; then
  mkdir -p "$WORK/ncu"
  OUT=$WORK/ncu bash tests/gpu/ncu_rowops.sh > "$WORK/ncu.log" 2>&1
  echo "== ncu_rowops exit $?"
  cat "$WORK/ncu/ncu_rowops.txt" 2>/dev/null || tail -20 "$WORK/ncu.log"
fi
tail -80 "$WORK/bench/table.md" 2>/dev/null || tail -40 "$WORK/bench.log"
cp "$WORK/gpu/gpu_test.json" "$WORK/gpu/sanitizer_summary.txt" "$FINAL/" 2>/dev/null
cp "$WORK/bench/latest.json" "$WORK/bench/table.md" "$WORK/bench/bars.svg" "$WORK/bench/roofline.svg" "$FINAL/" 2>/dev/null
cp "$WORK/ncu/ncu_rowops.txt" "$FINAL/" 2>/dev/null
tar -C "$WORK" -czf "$FINAL/all.tar.gz" . 2>/dev/null
ls -la "$FINAL"
