#!/usr/bin/env bash
# A bench-only device call that runs the same rows twice, as they are and under a run-time
# environment setting (AB_ENV, e.g. "TILERT_PERSISTENT_WAVES=100000"): for launcher knobs, which
# bench variants (compile-time knobs) cannot A/B. Unpacks the carried build/, runs
# bench/run_gpu.sh with BK (kernels), BD (dtypes), BV (variants regex), BB (budget s each), then
# a shell command in PRE_CMD if set (e.g. an ncu script). $OUT gets a.json, b.json (the AB_ENV
# run), their tables, and all.tar.gz.
set -u
tar -xJf build/carry.tar.xz
W=$(mktemp -d)
if [ -n "${PRE_CMD:-}" ]; then mkdir -p $W/pre; OUT=$W/pre bash -c "$PRE_CMD" > $W/pre.log 2>&1; tail -3 $W/pre.log; cp $W/pre/*.txt $OUT/ 2>/dev/null; fi
for side in a b; do
  envs=""; [ $side = b ] && envs="$AB_ENV"
  env $envs BENCH_OUT=$W/$side BENCH_TIMEOUT=${BT:-300} bash bench/run_gpu.sh --kernels ${BK:-attention} --dtypes ${BD:-f16} \
    --budget ${BB:-200} --variants "${BV}" > $W/bench_$side.log 2>&1
  echo "bench $side ($envs) exit $?"
  cp $W/$side/latest.json $OUT/$side.json 2>/dev/null; cp $W/$side/table.md $OUT/table_$side.md 2>/dev/null
done
tar -C $W -czf $OUT/all.tar.gz .
