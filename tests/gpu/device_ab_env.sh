#!/usr/bin/env bash
# A device call for launcher knobs (run-time environment settings, which bench variants, being
# compile-time knobs, cannot A/B). Unpacks the carried build/, then:
#  - CASES="id ..." (optional): those GPU cases of build/example_runner, as they are and under each
#    setting of CASE_ENVS ("A=1|A=2");
#  - the bench (bench/run_gpu.sh with BK kernels, BD dtypes, BV variants regex, BC cases regex, BB
#    budget s each, BT timeout s) as it is (side a) and under each setting of AB_ENV, '|'-separated
#    (sides b, c, ...; e.g. "TILERT_PERSISTENT_WAVES=100000|TILERT_WALK_CHUNK=2");
#  - SAN_CASES="id ...": memcheck, racecheck and synccheck on those cases (last: the slowest);
#  - then a shell command in PRE_CMD if set (e.g. an ncu script).
# $OUT gets a.json, b.json, ..., their tables, cases.txt, and all.tar.gz (everything).
set -u
tar -xJf build/carry.tar.xz
W=$(mktemp -d)
status=0
if [ -n "${CASES:-}" ]; then
  IFS='|' read -ra cenvs <<< "${CASE_ENVS:-}"
  for envs in "" "${cenvs[@]}"; do
    for c in $CASES; do
      env $envs timeout -k 5 120 build/example_runner --backend=gpu --ptx-dir build/ptx --case "$c" > $W/case.log 2>&1
      rc=$?
      printf '%-28s %-24s rc=%s %s\n' "$c" "${envs:-default}" "$rc" "$(tail -1 $W/case.log)" | tee -a $W/cases.txt
      [ $rc = 0 ] || { status=1; cat $W/case.log >> $W/cases_failed.log; }
    done
  done
fi
if [ -n "${BV:-}" ]; then
  IFS='|' read -ra abenvs <<< "${AB_ENV:-}"
  sides=(a b c d e f g h)
  i=0
  for envs in "" "${abenvs[@]}"; do
    side=${sides[$i]}; i=$((i + 1))
    env $envs BENCH_OUT=$W/$side BENCH_TIMEOUT=${BT:-300} bash bench/run_gpu.sh --kernels ${BK:-attention} --dtypes ${BD:-f16} \
      --budget ${BB:-200} --variants "${BV}" ${BC:+--cases "$BC"} > $W/bench_$side.log 2>&1
    echo "bench $side (${envs:-as is}) exit $?"
    cp $W/$side/latest.json $OUT/$side.json 2>/dev/null; cp $W/$side/table.md $W/table_$side.md 2>/dev/null
  done
fi
san=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
for c in ${SAN_CASES:-}; do
  for tool in memcheck racecheck synccheck; do
    log=$W/san_${c}_${tool}.log
    timeout -k 5 ${SAN_TIMEOUT:-150} "$san" --tool $tool --error-exitcode 99 build/example_runner --backend=gpu --ptx-dir build/ptx --case "$c" > $log 2>&1
    rc=$?
    errs=$(grep -Eo '(ERROR SUMMARY: |RACECHECK SUMMARY: [0-9]+ hazards displayed \()[0-9]+' $log | tail -1 | grep -Eo '[0-9]+$')
    printf '%-28s %-10s rc=%-3s errors=%s\n' "$c" $tool $rc "${errs:-?}" | tee -a $W/cases.txt
    [ $rc = 0 ] || status=1
  done
done
if [ -n "${PRE_CMD:-}" ]; then mkdir -p $W/pre; OUT=$W/pre bash -c "$PRE_CMD" > $W/pre.log 2>&1; tail -3 $W/pre.log; cp $W/pre/*.txt $OUT/ 2>/dev/null; fi
cp $W/cases.txt $OUT/ 2>/dev/null
tar -C $W -czf $OUT/all.tar.gz .
exit $status
