#!/usr/bin/env bash
# A bench-only device call (no gpu-test: for runs that change no compiler code): unpacks the
# carried build/, runs bench/run_gpu.sh with BK (kernels), BD (dtypes), BV (variants regex), BB
# (budget s), BT (timeout s), then tests/gpu/ncu_gemm.sh when NCU_GEMM_PTX is set. $OUT gets
# latest.json, table.md, ncu_gemm.txt and all.tar.gz (everything). NEED_GPU=H200: exit 3 at once,
# before unpacking, on a card whose name does not match (a call for the nvidia-h200 kind may get an
# H100: its device time then goes to the start alone, not to timings that cannot be cited).
set -u
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
echo "gpu: $gpu"
if [ -n "${NEED_GPU:-}" ] && [[ "$gpu" != *"$NEED_GPU"* ]]; then echo "not a $NEED_GPU: nothing run"; exit 3; fi
tar -xJf build/carry.tar.xz
W=$(mktemp -d)
BENCH_OUT=$W/b BENCH_TIMEOUT=${BT:-330} bash bench/run_gpu.sh --kernels ${BK:-attention_backward,layernorm_backward,gemm} --dtypes ${BD:-f16} --budget ${BB:-300} --variants "${BV}" > $W/bench.log 2>&1
echo "bench exit $?"
if [ -n "${NCU_GEMM_PTX:-}" ]; then mkdir -p $W/ncu; OUT=$W/ncu bash tests/gpu/ncu_gemm.sh > $W/ncu.log 2>&1; cat $W/ncu/ncu_gemm.txt || tail $W/ncu.log; fi
cp $W/b/latest.json $W/b/table.md $OUT/ 2>/dev/null; cp $W/ncu/ncu_gemm.txt $OUT/ 2>/dev/null
tail -5 $W/bench.log
tar -C $W -czf $OUT/all.tar.gz .
