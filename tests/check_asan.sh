#!/usr/bin/env bash
# check_asan.sh — the whole tilec under AddressSanitizer + UndefinedBehaviorSanitizer.
# Builds $B/asan/tilec (-fsanitize=address,undefined -fno-sanitize-recover=all), then runs
# --check and --emit=ast over every example (also with -D overrides), every tests/diag file, a
# 1 MB source file and 10,000 nested parentheses. Any sanitizer report or an exit status other
# than 0/1 fails the test.
set -u
cd "$(dirname "$0")/.."
B=${B:-build}
CC=${CC:-gcc}
out=$B/asan
# The Makefile builds it, into its own build directory, with the sanitizers on every compile and
# the link (CC carries them).
SAN="-fsanitize=address,undefined -fno-sanitize-recover=all"
make --no-print-directory B="$out" CC="$CC $SAN" OPT="-O1 -g -fno-omit-frame-pointer" "$out/tilec" \
  >"$B/asan-build.log" 2>&1 || { cat "$B/asan-build.log"; echo "check_asan: build failed"; exit 1; }

export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:exitcode=99
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1:exitcode=98
export NO_COLOR=1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
n=0 bad=0
run() { # expected-max-status args...
  n=$((n + 1))
  "$out/tilec" "$@" > "$tmp/out" 2> "$tmp/err"
  local rc=$?
  if [ $rc -gt 1 ] || grep -qE "AddressSanitizer|runtime error:|LeakSanitizer" "$tmp/err"; then
    echo "FAIL (status $rc): tilec $*"; head -30 "$tmp/err"; bad=1
  fi
}
for f in dsl/examples/*.tile; do
  run --check "$f"
  run --emit=ast -o "$tmp/ast.txt" "$f"
done
run --check -D D=128 -D CAUSAL=1 dsl/examples/attention.tile
run --emit=ast -D D=128 -D CAUSAL=1 -D BM=128 dsl/examples/attention.tile
run --emit=ast -D ACT=2 -D N=4096 dsl/examples/gemm.tile
run --emit=ast -D N=1000 -D BLOCK=1024 dsl/examples/softmax.tile
for f in tests/diag/*.tile; do
  args=()
  [ -f "${f%.tile}.args" ] && read -r -a args < "${f%.tile}.args"
  run --check "$f" "${args[@]}"
  run --emit=ast "$f" "${args[@]}"
done
# 1 MB of statements; 10,000 nested parentheses; 1 MB on one line; binary garbage
python3 - "$tmp" <<'PY'
import sys, os
d = sys.argv[1]
body = "".join(f"  let v{i} = block.x * {i} + 1;\n  Y[v{i} : +1] = to_f32(v{i});\n" for i in range(20000))
open(f"{d}/big.tile", "w").write("kernel big(Y: out f32[N]) grid (N) threads (32) {\n" + body + "}\n")
open(f"{d}/nest.tile", "w").write("kernel k() grid (1) threads (32) { let a = " + "(" * 10000 + "1" + ")" * 10000 + "; }\n")
open(f"{d}/line.tile", "w").write("kernel k() grid (1) threads (32) { let a = " + "1 + " * 250000 + "1; }\n")
open(f"{d}/bin.tile", "wb").write(os.urandom(65536))
PY
[ "$(stat -c %s "$tmp/big.tile")" -ge 1000000 ] || { echo "check_asan: big.tile too small"; bad=1; }
for f in big nest line bin; do run --check "$tmp/$f.tile"; done
# the 10,000 nested parentheses must be an error with a location, not a crash
"$out/tilec" --check "$tmp/nest.tile" 2>&1 | grep -q "nest.tile:1:[0-9]*: error: .*nesting too deep" ||
  { echo "check_asan: nest.tile: expected a located 'nesting too deep' error"; bad=1; }
run --check "$tmp/missing.tile"
echo "check_asan: $n runs"
[ $bad = 0 ] && echo "check_asan: no sanitizer reports" || echo "check_asan: FAILED"
exit $bad
