#!/usr/bin/env bash
# check_diag.sh — diagnostics golden tests.
#
# For every tests/diag/NAME.tile, runs `$B/tilec --check tests/diag/NAME.tile [ARGS]` (ARGS from
# tests/diag/NAME.args when present, e.g. -D overrides) and compares its stderr byte for byte with
# tests/diag/NAME.expected; the exit status must be 1 when the expectation holds an error, else 0.
#   tests/check_diag.sh            check
#   tests/check_diag.sh --update   rewrite every NAME.expected from the current output
set -u
cd "$(dirname "$0")/.."
B=${B:-build}
TILEC="$B/tilec"
update=0
[ "${1:-}" = "--update" ] && update=1
[ -x "$TILEC" ] || { echo "check_diag: $TILEC not built" >&2; exit 1; }
export NO_COLOR=1
fail=0 n=0
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
for tile in tests/diag/*.tile; do
  name=${tile%.tile}
  args=()
  [ -f "$name.args" ] && read -r -a args < "$name.args"
  "$TILEC" --check "$tile" "${args[@]}" 2> "$tmp" > /dev/null
  rc=$?
  n=$((n + 1))
  if [ $rc -gt 1 ]; then
    echo "FAIL $tile: exit status $rc (crash?)"; fail=1; continue
  fi
  if [ $update = 1 ]; then
    cp "$tmp" "$name.expected"; continue
  fi
  if [ ! -f "$name.expected" ]; then
    echo "FAIL $tile: no $name.expected (run tests/check_diag.sh --update)"; fail=1; continue
  fi
  if ! cmp -s "$tmp" "$name.expected"; then
    echo "FAIL $tile: output differs from $name.expected"
    diff -u "$name.expected" "$tmp" | head -20
    fail=1; continue
  fi
  want=0
  grep -q ': error: ' "$name.expected" && want=1
  if [ $rc != $want ]; then
    echo "FAIL $tile: exit status $rc, expected $want"; fail=1
  fi
done
msgs=$(cat tests/diag/*.expected 2>/dev/null | grep -E '(^|: )(error|warning): ' | sed -E 's/^.*(error|warning): //' | sed -E "s/'[^']*'/Q/g; s/[0-9]+/N/g" | sort -u | wc -l)
if [ $update = 1 ]; then echo "check_diag: updated $n expectations"; exit 0; fi
echo "check_diag: $n files, $msgs distinct messages"
[ "$msgs" -ge 30 ] || { echo "FAIL: fewer than 30 distinct diagnostics"; fail=1; }
exit $fail
