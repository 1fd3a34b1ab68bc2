#!/usr/bin/env bash
# run_tests.sh — what `make test-run` runs: the Criterion unit tests, then every tests/check_*.sh,
# TEST_JOBS at a time (default 2: several checks start a worker per core of their own). Several checks run one process at a time
# (check_aot, check_python), so two at once keep both cores of the CI machine busy. Each one's
# output is held until it ends, then printed whole under its name with its seconds; the status is
# non-zero when any failed. Needs B=<build dir> (each script gets it in its environment).
#
#   B=build bash tests/run_tests.sh [check_NAME ...]    only those checks (no unit tests)
set -u
cd "$(dirname "$0")/.."
B=${B:-build}
export B
jobs=${TEST_JOBS:-2}
[ "$jobs" -ge 1 ] 2>/dev/null || jobs=2
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
start=$(date +%s)
failed=()

if [ $# = 0 ]; then
  echo "== unit tests"
  t=$(date +%s)
  eval "unit_args=(${UNIT_ARGS:-})" # shell words, as make's recipe line would split them
  "$B/tests/unit_tests" "-j$jobs" "${unit_args[@]}" || failed+=("unit tests")
  echo "   ($(($(date +%s) - t)) s)"
  checks=(tests/check_*.sh)
else
  checks=()
  for c in "$@"; do
    c=tests/$(basename "${c%.sh}").sh
    [ -e "$c" ] && checks+=("$c") || { echo "== $c: no such check"; failed+=("$c"); }
  done
fi

# The longest first, so the short ones fill in beside them (seconds on the CI machine, alone).
cost() {
  case $(basename "$1" .sh) in
    check_asan) echo 170 ;; check_aot) echo 110 ;; check_tuned) echo 55 ;; check_fuzz) echo 50 ;;
    check_ptxas) echo 45 ;; check_python) echo 41 ;; *) echo 10 ;;
  esac
}
mapfile -t order < <(for c in "${checks[@]}"; do [ -e "$c" ] && echo "$(cost "$c") $c"; done | sort -k1,1nr -k2 | cut -d' ' -f2)

# One check: its output in $logs/NAME.out, its seconds and status in $logs/NAME.done.
run_one() {
  local c=$1 name t rc
  name=$(basename "$c" .sh)
  t=$(date +%s)
  bash "$c" > "$logs/$name.out" 2>&1
  rc=$?
  echo "$rc $(($(date +%s) - t))" > "$logs/$name.done.tmp" && mv "$logs/$name.done.tmp" "$logs/$name.done"
}
# Prints each finished check once, in the order they end.
report() {
  local d name rc secs
  for d in "$logs"/*.done; do
    [ -e "$d" ] || continue
    name=$(basename "$d" .done)
    read -r rc secs < "$d"
    echo "== tests/$name.sh"
    cat "$logs/$name.out"
    echo "   ($secs s)"
    [ "$rc" = 0 ] || { echo "   FAILED: tests/$name.sh (status $rc)"; failed+=("tests/$name.sh"); }
    mv "$d" "$d.reported"
  done
}
for c in "${order[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do
    wait -n
    report
  done
  run_one "$c" &
done
wait
report
for c in "${order[@]}"; do # a check whose runner died wrote no result
  name=$(basename "$c" .sh)
  [ -e "$logs/$name.done.reported" ] || { echo "== $c: no result"; failed+=("$c"); }
done

if [ ${#failed[@]} -gt 0 ]; then
  echo "== FAILED: ${failed[*]} ($(($(date +%s) - start)) s)"
  exit 1
fi
echo "== all tests passed in $(($(date +%s) - start)) s"
