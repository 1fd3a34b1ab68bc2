#!/usr/bin/env bash
# check_asan.sh — the whole tilec under AddressSanitizer + UndefinedBehaviorSanitizer.
# Builds $B/asan/tilec (-fsanitize=address,undefined -fno-sanitize-recover=all), then runs
# --emit=ast (parse, sema, the tree) over every example (also with -D overrides), every tests/diag file, a
# 1 MB source file and 10,000 nested parentheses; the back half too: every example through
# --emit=tir, the PTX emitter (sm_80), the C emitter (sm_80 and sm_90a) and `tilec run` on
# small shapes (empty ones included, where leaks hid), an empty kernel body through all of them,
# and 40,000 unused variables (capped warnings, in well under the timeout). Any sanitizer report
# or an exit status other than 0/1 fails the test. The runs go two at a time (ASAN_JOBS).
set -u
cd "$(dirname "$0")/.."
B=${B:-build}
CC=${CC:-gcc}
out=$B/asan
# The Makefile builds it, into its own build directory, with the sanitizers on every compile and
# the link (CC carries them).
SAN="-fsanitize=address,undefined -fno-sanitize-recover=all"
make --no-print-directory -j2 B="$out" CC="$CC $SAN" OPT="-O1 -g -fno-omit-frame-pointer" "$out/tilec" \
  >"$B/asan-build.log" 2>&1 || { cat "$B/asan-build.log"; echo "check_asan: build failed"; exit 1; }

export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:exitcode=99
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1:exitcode=98
export NO_COLOR=1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
n=0 bad=0
# One tilec run, its stdout / stderr in DIR/out and DIR/err: a status above 1 or a sanitizer
# report fails it (and creates DIR/bad).
run_in() { # dir args...
  local dir=$1
  shift
  "$out/tilec" "$@" > "$dir/out" 2> "$dir/err"
  local rc=$?
  if [ $rc -gt 1 ] || grep -qE "AddressSanitizer|runtime error:|LeakSanitizer" "$dir/err"; then
    echo "FAIL (status $rc): tilec $*"; head -30 "$dir/err"; : > "$dir/bad"
  fi
}
run_now() { n=$((n + 1)); run_in "$tmp" "$@"; [ ! -e "$tmp/bad" ] || bad=1; }
# run queues a run; run_queued runs the queue ASAN_JOBS at a time (default 2: the machines have
# two cores), each worker in a directory of its own.
: > "$tmp/queue"
run() { n=$((n + 1)); printf '%q ' "$@" >> "$tmp/queue"; echo >> "$tmp/queue"; }
run_queued() {
  local jobs=${ASAN_JOBS:-2} w
  for ((w = 0; w < jobs; w++)); do
    mkdir -p "$tmp/w$w"
    (i=0
     while IFS= read -r line; do
       i=$((i + 1))
       [ $(((i - 1) % jobs)) = "$w" ] || continue
       eval "args=($line)"
       run_in "$tmp/w$w" "${args[@]}"
     done < "$tmp/queue") &
  done
  wait
  ! ls "$tmp"/w*/bad > /dev/null 2>&1 || bad=1
}
# --emit=ast runs what --check runs (parse, sema) and then prints the tree: one run covers both
for f in dsl/examples/*.tile; do
  run --emit=ast -o "$tmp/ast.txt" "$f"
done
run --check -D D=128 -D CAUSAL=1 dsl/examples/attention.tile
run --emit=ast -D D=128 -D CAUSAL=1 -D BM=128 dsl/examples/attention.tile
run --emit=ast -D ACT=2 -D N=4096 dsl/examples/gemm.tile
run --emit=ast -D N=1000 -D BLOCK=1024 dsl/examples/softmax.tile
for f in tests/diag/*.tile; do
  args=()
  [ -f "${f%.tile}.args" ] && read -r -a args < "${f%.tile}.args"
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

# The back half: TIR, the PTX and C emitters, the interpreter through `tilec run`.
declare -A shapes=([vadd]=N=1000 [softmax]=M=3,N=100 [softmax_online]=M=3,N=100
  [rmsnorm]=M=3,N=100 [layernorm]=M=3,N=100 [add_rmsnorm]=M=3,N=100 [cross_entropy]=M=3,N=100
  [gemm]=M=65,N=72,K=40 [attention]=B=1,H=2,N=70 [rmsnorm_backward]=M=37,N=100
  [layernorm_backward]=M=37,N=100 [cross_entropy_backward]=M=3,N=100 [attention_backward]=B=1,H=2,N=70
  [attention_gqa]=B=1,H=4,HKV=2,N=70,window=20)
for f in dsl/examples/*.tile; do
  name=$(basename "$f" .tile)
  run --emit=tir -o "$tmp/x.tir" "$f"
  # the C emitter lowers for both arches (compile_ws, ptxas's plans); the PTX writer once
  run --emit=ptx --arch=sm_80 -o "$tmp/x.ptx" "$f"
  run --emit=c --arch=sm_80 --arch=sm_90a -o "$tmp/x" "$f"
  [ -n "${shapes[$name]:-}" ] || { echo "check_asan: no run shape for $name"; bad=1; continue; }
  run run "$f" --shape "${shapes[$name]}"
done
run run dsl/examples/softmax.tile --shape M=0,N=100
run run dsl/examples/gemm.tile --shape M=0,N=72,K=40
run run dsl/examples/vadd.tile --shape N=2147483647
# what used to crash: 33 rank-4 tensors through the PTX emitter, > 32 args / > 64 dims in a run
run --emit=ptx -o "$tmp/x.ptx" tests/diag/limit_args.tile
run run tests/diag/limit_args.tile --shape A=1,B=1,C=1,D=1
run run tests/diag/limit_dims.tile
printf 'kernel k(X: f32[N]) grid (N) threads (32) {\n}\n' > "$tmp/empty.tile"
for e in tir ptx c; do run --emit=$e -o "$tmp/empty" "$tmp/empty.tile"; done
run run "$tmp/empty.tile" --shape N=3
python3 - "$tmp" <<'PY'
import sys
lets = "".join(f"  let v{i} = block.x * {i} + 1;\n" for i in range(40000))
open(f"{sys.argv[1]}/unused.tile", "w").write(
    "kernel k(X: f32[N], Y: out f32[N]) grid (N) threads (32) {\n" + lets + "  Y[0 : +32] = X[0 : +32];\n}\n")
PY
run_queued
start=$(date +%s)
run_now --check "$tmp/unused.tile"
[ "$(grep -c "warning: unused variable" "$tmp/err")" = 20 ] && grep -q "further ones are suppressed" "$tmp/err" ||
  { echo "check_asan: 40,000 unused variables: warnings not capped"; bad=1; }
[ $(($(date +%s) - start)) -lt 30 ] || { echo "check_asan: 40,000 unused variables took over 30 s"; bad=1; }
echo "check_asan: $n runs"
[ $bad = 0 ] && echo "check_asan: no sanitizer reports" || echo "check_asan: FAILED"
exit $bad
