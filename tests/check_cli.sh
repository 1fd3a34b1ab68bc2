#!/usr/bin/env bash
# tilec's outputs appear whole or not at all, with normal permissions, and never replace a
# device node; write errors are reported. (compiler/output.c)
set -u
B=${B:-build}
T=$B/tilec
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
fail=0
bad() { echo "check_cli: FAIL: $*"; fail=1; }

# -o /dev/null: written directly, the device node stays a device
"$T" dsl/examples/vadd.tile -o /dev/null || bad "-o /dev/null exited $?"
[ -c /dev/null ] || bad "/dev/null is no longer a character device"

# a new file gets the umask's permissions, not mkstemp's 0600
(umask 022; "$T" dsl/examples/vadd.tile -o "$W/v.ptx") || bad "-o v.ptx exited $?"
[ "$(stat -c %a "$W/v.ptx")" = 644 ] || bad "v.ptx has mode $(stat -c %a "$W/v.ptx"), want 644"

# --emit=c: NAME.h and NAME.c both or neither
mkdir "$W/pp.c"
if "$T" dsl/examples/vadd.tile --emit=c -o "$W/pp" 2>"$W/err"; then bad "--emit=c over a directory succeeded"; fi
[ -e "$W/pp.h" ] && bad "--emit=c left pp.h behind after failing"
grep -q "cannot write '$W/pp.c': it is a directory" "$W/err" || bad "no clear message: $(cat "$W/err")"

# a failed compile leaves no output and no temporary
if "$T" tests/diag/undeclared_name.tile -o "$W/bad.ptx" 2>/dev/null; then bad "bad source compiled"; fi
ls "$W" | grep -q "bad.ptx" && bad "a failed compile left $(ls "$W" | grep bad.ptx)"

# a full disk on standard output is an error with a message
if [ -e /dev/full ]; then
  for k in tir ptx ast; do
    if "$T" dsl/examples/vadd.tile --emit=$k -o - >/dev/full 2>"$W/err"; then bad "--emit=$k to /dev/full exited 0"; fi
    grep -q "cannot write 'standard output'" "$W/err" || bad "--emit=$k to /dev/full: no message"
  done
fi
[ $fail = 0 ] && echo "check_cli: passed"
exit $fail
