#!/usr/bin/env bash
# One device call: GPU correctness + compute-sanitizer + AOT demo (tests/gpu/run_gpu_tests.sh),
# then the benchmark (bench/run_gpu.sh), then Nsight Compute on the row ops (tests/gpu/ncu_rowops.sh).
# Everything from a build/ made here by
# `make gpu-prep bench-prep`. The device tool returns at most 8 files: the key ones are copied to
# $OUT, the rest travel in all.tar.gz. With the device tool, carry: build/ptx build/example_runner
# build/libtilert.a build/libtilert.so build/aot build/bench build/tuned build/COMMIT (build/ as a
# whole is over the 64 MiB a call carries).
set -uo pipefail
cd "$(dirname "$0")/../.."
FINAL=${OUT:?OUT must be set}
WORK=$(mktemp -d)
BENCH_ARGS=${BENCH_ARGS:-}
OUT=$WORK/gpu bash tests/gpu/run_gpu_tests.sh > "$WORK/gpu_test.log" 2>&1
gpu_rc=$?
tail -60 "$WORK/gpu_test.log"
echo "== gpu-test exit $gpu_rc"
mkdir -p "$WORK/bench"
BENCH_OUT=$WORK/bench BENCH_TIMEOUT=${BENCH_TIMEOUT:-440} bash bench/run_gpu.sh $BENCH_ARGS > "$WORK/bench.log" 2>&1
echo "== bench exit $?"
mkdir -p "$WORK/ncu"
OUT=$WORK/ncu bash tests/gpu/ncu_rowops.sh > "$WORK/ncu.log" 2>&1
echo "== ncu_rowops exit $?"
cat "$WORK/ncu/ncu_rowops.txt" 2>/dev/null || tail -20 "$WORK/ncu.log"
tail -80 "$WORK/bench/table.md" 2>/dev/null || tail -40 "$WORK/bench.log"
cp "$WORK/gpu/gpu_test.json" "$WORK/gpu/sanitizer_summary.txt" "$FINAL/" 2>/dev/null
cp "$WORK/bench/latest.json" "$WORK/bench/table.md" "$WORK/bench/bars.svg" "$WORK/bench/roofline.svg" "$FINAL/" 2>/dev/null
cp "$WORK/ncu/ncu_rowops.txt" "$FINAL/" 2>/dev/null
tar -C "$WORK" -czf "$FINAL/all.tar.gz" . 2>/dev/null
ls -la "$FINAL"
