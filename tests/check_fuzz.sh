#!/usr/bin/env bash
# check_fuzz.sh — builds $B/fuzz/fuzz_frontend (clang-14 -fsanitize=fuzzer,address) and fuzzes
# the front end for FUZZ_SECONDS seconds (default 60), seeded with dsl/examples and tests/diag.
# Crashes, sanitizer reports, leaks and hangs (> 10 s on one input) fail the test; the crashing
# input is left in $B/fuzz/ (crash-*, leak-*, timeout-*).
set -eu
cd "$(dirname "$0")/.."
B=${B:-build}
FUZZ_SECONDS=${FUZZ_SECONDS:-60}
CLANG=$(command -v clang-14 || command -v clang || true)
[ -n "$CLANG" ] || { echo "check_fuzz: clang-14 not found (make deps)"; exit 1; }
out=$B/fuzz
mkdir -p "$out/corpus"
[ -f "$B/compiler/parser.c" ] && [ -f "$B/compiler/lexer.c" ] || make --no-print-directory B="$B" "$B/compiler/parser.c" "$B/compiler/lexer.c"
srcs="compiler/ast.c compiler/sema.c compiler/diag.c compiler/common.c compiler/tir.c $B/compiler/parser.c $B/compiler/lexer.c tests/fuzz/fuzz_frontend.c"
bin=$out/fuzz_frontend
rebuild=0
[ -x "$bin" ] || rebuild=1
for f in $srcs compiler/*.h; do [ "$f" -nt "$bin" ] && rebuild=1; done
if [ $rebuild = 1 ]; then
  echo "check_fuzz: building $bin"
  "$CLANG" -std=c11 -D_POSIX_C_SOURCE=200809L -D_DEFAULT_SOURCE -g -O1 -fsanitize=fuzzer,address \
    -Icompiler -I"$B/compiler" -Wno-unused-function -Wno-sign-compare -Wno-unused-parameter \
    $srcs -lm -o "$bin"
fi
cp dsl/examples/*.tile tests/diag/*.tile "$out/corpus/" 2>/dev/null || true
echo "check_fuzz: fuzzing for ${FUZZ_SECONDS}s"
cd "$out"
log=fuzz.log
if ! ./fuzz_frontend -max_total_time="$FUZZ_SECONDS" -timeout=10 -rss_limit_mb=2048 -max_len=16384 \
     -print_final_stats=1 corpus > "$log" 2>&1; then
  tail -40 "$log"
  echo "check_fuzz: FAILED (see $out/$log)"
  exit 1
fi
grep -E "stat::number_of_executed_units|Done" "$log" | tail -2
echo "check_fuzz: no crash, leak or hang"
