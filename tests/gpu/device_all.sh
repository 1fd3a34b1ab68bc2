#!/usr/bin/env bash
# One device call: GPU correctness + compute-sanitizer + AOT demo (tests/gpu/run_gpu_tests.sh),
# then the benchmark (bench/run_gpu.sh), the plain-GEMM probe (bench/probe_matmul.py, when
# build/probe/ has PTX of bench/probe/matmul.tile) and Nsight Compute (tests/gpu/ncu_*.sh).
# Everything from a build/ made here by `make gpu-prep bench-prep device-carry`: carry
# ["build/carry.tar.xz"] (build/ as a whole is over the 64 MiB a call carries); it is unpacked
# first. The device tool returns at most 8 files: the key ones are copied to $OUT, the rest travel
# in all.tar.gz. Knobs (environment): GPU_TEST_SKIP_CPASYNC=1 / GPU_TEST_SKIP_WS=1 (one
# correctness pass instead of three), SAN_CASES="case ..." (the sanitizers' cases), BENCH_ARGS
# (e.g. "--kernels attention --variants 'rotpk|_rot$'"), BENCH_TIMEOUT, DEVICE_NCU="rowops gemm
# attention" (which ncu_*.sh to run; default rowops, 0: none), DEVICE_PROBE=0 (no matmul probe).
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
if [ "${DEVICE_PROBE:-1}" != 0 ] && ls build/probe/*.ptx > /dev/null 2>&1; then
  specs=$(for p in build/probe/*.ptx; do n=$(basename "$p" .ptx); echo "$n=$p"; done)
  timeout -k 5 240 python3 bench/probe_matmul.py --json "$WORK/probe_matmul.json" $specs > "$WORK/probe_matmul.log" 2>&1
  echo "== probe_matmul exit $?"
  cat "$WORK/probe_matmul.log"
fi
ncu_list=${DEVICE_NCU:-rowops}
[ "$ncu_list" = 0 ] && ncu_list=
for n in $ncu_list; do
  mkdir -p "$WORK/ncu_$n"
  OUT=$WORK/ncu_$n bash "tests/gpu/ncu_$n.sh" > "$WORK/ncu_$n.log" 2>&1
  echo "== ncu_$n exit $?"
  cat "$WORK/ncu_$n/ncu_$n.txt" 2>/dev/null || tail -20 "$WORK/ncu_$n.log"
  cat "$WORK/ncu_$n/ncu_$n.txt" >> "$WORK/ncu.txt" 2>/dev/null
done
tail -80 "$WORK/bench/table.md" 2>/dev/null || tail -40 "$WORK/bench.log"
cp "$WORK/gpu/gpu_test.json" "$WORK/gpu/sanitizer_summary.txt" "$FINAL/" 2>/dev/null
cp "$WORK/bench/latest.json" "$WORK/bench/table.md" "$FINAL/" 2>/dev/null
cp "$WORK/ncu.txt" "$WORK/probe_matmul.json" "$FINAL/" 2>/dev/null
tar -C "$WORK" -czf "$FINAL/all.tar.gz" . 2>/dev/null
ls -la "$FINAL"
