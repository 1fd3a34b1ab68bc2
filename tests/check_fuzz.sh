#!/usr/bin/env bash
# check_fuzz.sh — builds the libFuzzer targets with clang-14 and fuzzes each for FUZZ_SECONDS
# seconds (default 30, both targets at once: make test stays well under 10 minutes), seeded with dsl/examples and tests/diag:
#   fuzz_frontend  parse + sema (-fsanitize=fuzzer,address)
#   fuzz_pipeline  parse, sema, lower_tir, TIR passes + verifier, metadata round trip through the
#                  runtime's parser, tilert_bind, the interpreter (-fsanitize=fuzzer,address,undefined)
# Crashes, sanitizer reports, leaks and hangs (> 10 s on one input) fail the test; the crashing
# input is left in $B/fuzz/ (crash-*, leak-*, timeout-*). FUZZ_TARGETS="fuzz_pipeline" runs one.
set -eu
cd "$(dirname "$0")/.."
B=${B:-build}
FUZZ_SECONDS=${FUZZ_SECONDS:-30}
FUZZ_TARGETS=${FUZZ_TARGETS:-"fuzz_frontend fuzz_pipeline"}
CLANG=$(command -v clang-14 || command -v clang || true)
CUDA=${CUDA:-/usr/local/cuda}
[ -n "$CLANG" ] || { echo "check_fuzz: clang-14 not found (make deps)"; exit 1; }
out=$B/fuzz
mkdir -p "$out"
[ -f "$B/compiler/parser.c" ] && [ -f "$B/compiler/lexer.c" ] || make --no-print-directory B="$B" "$B/compiler/parser.c" "$B/compiler/lexer.c"
front="compiler/ast.c compiler/sema.c compiler/diag.c compiler/common.c compiler/tir.c $B/compiler/parser.c $B/compiler/lexer.c"
declare -A srcs=(
  [fuzz_frontend]="$front tests/fuzz/fuzz_frontend.c"
  [fuzz_pipeline]="$front compiler/tir_print.c compiler/tir_verify.c compiler/tir_passes.c compiler/lower_tir.c compiler/meta.c compiler/interp.c runtime/meta.c runtime/bind.c runtime/status.c runtime/cuda_loader.c tests/fuzz/fuzz_pipeline.c"
)
declare -A sanitizers=([fuzz_frontend]=fuzzer,address [fuzz_pipeline]=fuzzer,address,undefined)

build() { # TARGET
  local bin=$out/$1 rebuild=0 f
  [ -x "$bin" ] || rebuild=1
  for f in ${srcs[$1]} compiler/*.h runtime/*.h tests/fuzz/*.h; do [ "$f" -nt "$bin" ] && rebuild=1; done
  [ $rebuild = 1 ] || return 0
  echo "check_fuzz: building $bin"
  "$CLANG" -std=c11 -D_POSIX_C_SOURCE=200809L -D_DEFAULT_SOURCE -g -O1 -fsanitize="${sanitizers[$1]}" \
    -fno-sanitize-recover=all -Icompiler -Iruntime -Itests/fuzz -I"$B/compiler" -I"$CUDA/include" \
    -Wno-unused-function -Wno-sign-compare -Wno-unused-parameter ${srcs[$1]} -ldl -lm -o "$bin"
}

fuzz() { # TARGET
  local corpus=$out/corpus_$1 log=$out/$1.log
  mkdir -p "$corpus"
  cp dsl/examples/*.tile tests/diag/*.tile "$corpus/" 2>/dev/null || true
  echo "check_fuzz: $1 for ${FUZZ_SECONDS}s"
  if ! (cd "$out" && "./$1" -max_total_time="$FUZZ_SECONDS" -timeout=10 -rss_limit_mb=2048 \
          -max_len=16384 -print_final_stats=1 "corpus_$1" > "$1.log" 2>&1); then
    tail -40 "$log"
    echo "check_fuzz: $1 FAILED (see $log)"
    return 1
  fi
  echo "check_fuzz: $1: $(grep -E "stat::number_of_executed_units" "$log" | awk '{print $2}') runs, no crash, leak or hang"
}

# The targets build and fuzz side by side (libFuzzer takes one core; the machines have two).
pids=()
for t in $FUZZ_TARGETS; do build "$t" & pids+=($!); done
for p in "${pids[@]}"; do wait "$p"; done
pids=() status=0
for t in $FUZZ_TARGETS; do fuzz "$t" & pids+=($!); done
for p in "${pids[@]}"; do wait "$p" || status=1; done
exit $status
