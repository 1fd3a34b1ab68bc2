#!/usr/bin/env bash
# check_tuned.sh — the tuned row-op table (issue 6): bench/tuned.txt is what bench/tuned.py makes
# from the committed benchmark results, every line compiles to C (sm_90a) and links behind one
# entry point per example (`make tuned`), the C compiles warning-free, tests/aot/tuned_test.c
# finds a specialization for every row length up to the largest BLOCK (checks only, no GPU), and
# every specialization's PTX assembles for sm_90a without spills.
set -euo pipefail
B=${B:-build}
W="$B/tests/tuned"
rm -rf "$W" && mkdir -p "$W"
python3 bench/tuned.py --check
python3 bench/tuned.py --build "$W" --tilec "$B/tilec" >"$W/build.log" 2>&1 ||
  { cat "$W/build.log"; echo "check_tuned: the tuned bundle does not build"; exit 1; }
gcc -std=c99 -O1 -Wall -Wextra -Werror -I"$W" tests/aot/tuned_test.c "$W"/*.c -ldl -o "$W/tuned_test" ||
  { echo "check_tuned: the tuned bundle does not compile"; exit 1; }
"$W/tuned_test"
# every specialization assembles without spills (the rule for all PTX of the test suite)
PTXAS=${PTXAS:-${CUDA:-/usr/local/cuda}/bin/ptxas}
spills="no spills"
[ -x "$PTXAS" ] || spills="spills not checked: no ptxas"
# One specialization: compile, assemble, no spill (run two at a time: the machines have two cores).
one() {
  local name=$1 example=$2
  shift 2
  "$B/tilec" "dsl/examples/$example.tile" --emit=ptx --arch=sm_90a "$@" -o "$W/$name.ptx" || exit 1
  rep=$("$PTXAS" -arch=sm_90a -v "$W/$name.ptx" -o /dev/null 2>&1) || { echo "$rep"; echo "check_tuned: ptxas rejects $name"; exit 1; }
  if echo "$rep" | grep -q '[1-9][0-9]* bytes spill stores'; then
    echo "check_tuned: $name spills: $(echo "$rep" | grep -o '[0-9]* bytes spill stores')"; exit 1
  fi
}
export -f one
export B W PTXAS
if [ -x "$PTXAS" ]; then
  grep -v '^#' bench/tuned.txt | xargs -P "$(nproc)" -L 1 bash -c 'one "$@"' _ ||
    { echo "check_tuned: a specialization failed (above)"; exit 1; }
fi
echo "check_tuned: passed ($(grep -vc '^#' bench/tuned.txt) specializations, $spills)"
