#!/bin/bash
# check_golden_tir.sh — `tilec FILE --emit=tir` of every dsl/examples/*.tile (default parameters)
# must equal tests/golden/tir/<example>.tir byte for byte; so must that of every
# tests/golden/src/*.tile (language constructs no example shows, e.g. the shape operations).
#
#   B=build bash tests/check_golden_tir.sh            check (exit 1 on any difference)
#   B=build bash tests/check_golden_tir.sh --update   rewrite the goldens (`make golden-update`);
#                                                     review them with `git diff tests/golden`
set -u
cd "$(dirname "$0")/.."
B=${B:-build}
TILEC="$B/tilec"
GOLDEN=tests/golden/tir
update=0
[ "${1:-}" = "--update" ] && update=1

if [ ! -x "$TILEC" ]; then
  echo "check_golden_tir: $TILEC not built" >&2
  exit 1
fi
mkdir -p "$GOLDEN"
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT

fail=0
count=0
for src in dsl/examples/*.tile tests/golden/src/*.tile; do
  name=$(basename "$src" .tile)
  want="$GOLDEN/$name.tir"
  count=$((count + 1))
  if ! "$TILEC" "$src" --emit=tir -o - >"$tmp" 2>"$tmp.err"; then
    echo "FAIL $name: tilec --emit=tir failed:"
    sed 's/^/  /' "$tmp.err" | head -20
    fail=1
    rm -f "$tmp.err"
    continue
  fi
  rm -f "$tmp.err"
  if [ ! -s "$tmp" ]; then
    echo "FAIL $name: empty --emit=tir output"
    fail=1
  elif [ $update = 1 ]; then
    if ! cmp -s "$tmp" "$want"; then
      cp "$tmp" "$want"
      echo "updated $want"
    fi
  elif [ ! -f "$want" ]; then
    echo "FAIL $name: no golden $want (run: make golden-update)"
    fail=1
  elif ! diff -u "$want" "$tmp" >"$tmp.diff"; then
    echo "FAIL $name: --emit=tir differs from $want (if intended: make golden-update):"
    head -60 "$tmp.diff"
    fail=1
  fi
  rm -f "$tmp.diff"
done

# A golden without its example is stale.
for g in "$GOLDEN"/*.tir; do
  [ -e "$g" ] || continue
  name=$(basename "$g" .tir)
  if [ ! -f "dsl/examples/$name.tile" ] && [ ! -f "tests/golden/src/$name.tile" ]; then
    if [ $update = 1 ]; then
      rm -f "$g" && echo "removed stale $g"
    else
      echo "FAIL: stale golden $g (no dsl/examples/$name.tile or tests/golden/src/$name.tile)"
      fail=1
    fi
  fi
done

if [ $fail = 0 ]; then
  echo "golden tir: $count examples ok"
fi
exit $fail
