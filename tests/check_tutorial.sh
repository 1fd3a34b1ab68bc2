#!/usr/bin/env bash
# check_tutorial.sh — keeps docs/tutorial.md true. Every fenced block right after a marker line
# is checked; blocks without a marker (GPU output, prose sketches) are not.
#
#   <!-- check: file PATH -->       the block equals the file PATH byte for byte (plus a newline)
#   <!-- check: excerpt PATH -->    the block's lines appear in PATH, in order; a line "..." is a
#                                   gap, the lines between gaps are consecutive in PATH
#   <!-- check: output [rc=N] [needs=PATH] -->
#                                   the block is "$ COMMAND" then its output: COMMAND runs in the
#                                   repository root (bash, NO_COLOR=1, stderr into stdout), its
#                                   output must equal the rest of the block and its exit status N
#                                   (default 0); skipped when PATH (a built file) is missing
#   <!-- check: output-excerpt [rc=N] [needs=PATH] -->
#                                   the same, but the block's lines are an excerpt ("..." gaps)
#
# Comparisons ignore trailing blanks and timings ("0.2 ms" reads as "N ms", "(0.01s)" as "(Ns)");
# commands that run ptxas are skipped when it is not installed. Paths "build/" in commands
# become "$B/".
# The tutorial's host program (tests/tutorial/cross_entropy_main.c) is compiled and run by its
# own checked blocks, against build/libtilec.a and build/libtilert.a.
#
#   B=build bash tests/check_tutorial.sh            check
#   B=build bash tests/check_tutorial.sh --update   rewrite the output of every "output" block
set -u
cd "$(dirname "$0")/.."
B=${B:-build}
DOC=docs/tutorial.md
PTXAS=${PTXAS:-/usr/local/cuda/bin/ptxas}
update=0
[ "${1:-}" = "--update" ] && update=1
for f in "$B/tilec" "$B/libtilec.a" "$B/libtilert.a"; do
  [ -e "$f" ] || { echo "check_tutorial: $f not built" >&2; exit 1; }
done
export NO_COLOR=1
mkdir -p "$B/tutorial"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Split the marked blocks into $tmp/N.kind, $tmp/N.arg, $tmp/N.body (N = 1, 2, ...).
awk -v dir="$tmp" '
  state == 0 && /^<!-- check: [a-z-]+( .*)? -->$/ {
    line = $0; sub(/^<!-- check: /, "", line); sub(/ -->$/, "", line)
    kind = line; sub(/ .*/, "", kind)
    arg = (index(line, " ") ? substr(line, index(line, " ") + 1) : "")
    state = 1; next
  }
  state == 1 && /^```/ { n++; print kind > (dir "/" n ".kind"); print arg > (dir "/" n ".arg")
                         printf "" > (dir "/" n ".body"); state = 2; next }
  state == 1 { printf "%s:%d: marker not followed by a fenced block\n", FILENAME, FNR; bad = 1; state = 0 }
  state == 2 && /^```$/ { close(dir "/" n ".body"); state = 0; next }
  state == 2 { print > (dir "/" n ".body") }
  END { print n + 0 > (dir "/count"); exit bad }
' "$DOC" || exit 1
nblocks=$(cat "$tmp/count")

norm() { sed -E 's/[[:space:]]+$//; s/[0-9]+(\.[0-9]+)? ms\b/N ms/g; s/\([0-9]+\.[0-9]+s\)/(Ns)/g' "$1"; }

# excerpt_of EXPECTED ACTUAL: EXPECTED's segments ("..." separated) occur in ACTUAL in order.
excerpt_of() {
  awk 'NR == FNR { have[++nh] = $0; next }
       { want[++nw] = $0 }
       END {
         pos = 1; i = 1
         while (i <= nw) {
           if (want[i] == "...") { i++; continue }
           j = i; while (j <= nw && want[j] != "...") j++   # segment want[i..j-1]
           found = 0
           for (p = pos; p + (j - i) - 1 <= nh && !found; p++) {
             ok = 1
             for (k = 0; k < j - i && ok; k++) if (have[p + k] != want[i + k]) ok = 0
             if (ok) { found = 1; pos = p + (j - i) }
           }
           if (!found) { print "  not found (in order): " want[i]; exit 1 }
           i = j
         }
       }' "$2" "$1"
}

fail=0 checked=0 skipped=0
for ((n = 1; n <= nblocks; n++)); do
  kind=$(cat "$tmp/$n.kind") arg=$(cat "$tmp/$n.arg") body="$tmp/$n.body"
  case "$kind" in
    file)
      checked=$((checked + 1))
      if ! cmp -s "$body" "$arg"; then
        echo "FAIL block $n: differs from $arg"; diff -u "$arg" "$body" | head -20; fail=1
      fi ;;
    excerpt)
      checked=$((checked + 1))
      if [ ! -f "$arg" ]; then echo "FAIL block $n: no file $arg"; fail=1; continue; fi
      norm "$body" >"$tmp/want"; norm "$arg" >"$tmp/have"
      excerpt_of "$tmp/want" "$tmp/have" >"$tmp/why" || { echo "FAIL block $n: not an excerpt of $arg"; cat "$tmp/why"; fail=1; } ;;
    output|output-excerpt)
      want_rc=0 needs=""
      for a in $arg; do
        case "$a" in rc=*) want_rc=${a#rc=} ;; needs=*) needs=${a#needs=} ;; esac
      done
      cmd=$(head -1 "$body")
      if [ "${cmd:0:2}" != '$ ' ]; then echo "FAIL block $n: first line is not '\$ COMMAND'"; fail=1; continue; fi
      cmd=${cmd:2}
      [ "$B" != build ] && { cmd=${cmd//build\//$B/}; needs=${needs//build\//$B/}; }
      if [ -n "$needs" ] && [ ! -e "$needs" ]; then
        echo "skip block $n ($needs not built): $cmd"; skipped=$((skipped + 1)); continue
      fi
      if [[ "$cmd" == *ptxas* ]] && [ ! -x "$PTXAS" ]; then
        echo "skip block $n (no ptxas): $cmd"; skipped=$((skipped + 1)); continue
      fi
      checked=$((checked + 1))
      bash -c "$cmd" >"$tmp/out" 2>&1 </dev/null
      rc=$?
      if [ $rc != "$want_rc" ]; then
        echo "FAIL block $n: '$cmd' exited $rc, expected $want_rc"; sed 's/^/  /' "$tmp/out" | head -20; fail=1; continue
      fi
      if [ $update = 1 ] && [ "$kind" = output ]; then
        { head -1 "$body"; cat "$tmp/out"; } >"$tmp/$n.new"; continue
      fi
      tail -n +2 "$body" | norm /dev/stdin >"$tmp/want"; norm "$tmp/out" >"$tmp/have"
      if [ "$kind" = output ]; then
        if ! cmp -s "$tmp/want" "$tmp/have"; then
          echo "FAIL block $n: output of '$cmd' differs from the tutorial:"
          diff -u "$tmp/want" "$tmp/have" | head -30; fail=1
        fi
      elif ! excerpt_of "$tmp/want" "$tmp/have" >"$tmp/why"; then
        echo "FAIL block $n: output of '$cmd' does not contain the tutorial's excerpt:"; cat "$tmp/why"; fail=1
      fi ;;
    *) echo "FAIL block $n: unknown marker kind '$kind'"; fail=1 ;;
  esac
done

if [ $update = 1 ]; then
  # Rebuild the document with the new outputs (output blocks only).
  awk -v dir="$tmp" '
    state == 0 && /^<!-- check: [a-z-]+( .*)? -->$/ { print; state = 1; next }
    state == 1 && /^```/ { n++; print; f = dir "/" n ".new"; repl = (getline l < f) > 0
                           if (repl) { print l; while ((getline l < f) > 0) print l }
                           state = 2; next }
    state == 2 && /^```$/ { print; state = 0; next }
    state == 2 && repl { next }
    { print }
  ' "$DOC" >"$tmp/doc" && cp "$tmp/doc" "$DOC"
  echo "check_tutorial: updated the output blocks of $DOC; review with git diff"
  exit $fail
fi

# The blocks that make the tutorial what it claims: the kernel, the C snippet, its compilation.
for must in "file dsl/examples/cross_entropy.tile" "excerpt tests/tutorial/cross_entropy_main.c"; do
  grep -q "^<!-- check: $must -->$" "$DOC" || { echo "FAIL: no '<!-- check: $must -->' block"; fail=1; }
done
grep -q '^\$ .*cross_entropy_main\.c.*libtilert\.a' "$DOC" ||
  { echo "FAIL: the tutorial does not compile tests/tutorial/cross_entropy_main.c"; fail=1; }
echo "check_tutorial: $checked blocks checked, $skipped skipped"
[ $fail = 0 ] && echo "check_tutorial: all passed"
exit $fail
