#!/usr/bin/env bash
# check_cli.sh — the command line: tilec's outputs appear whole or not at all, with normal
# permissions, and never replace a device node; write errors are reported (compiler/output.c).
# A kernel at the launch contract's limits compiles and runs; -D values and `tilec run` sizes
# are checked.
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

# --dump=KIND: the stage on stdout (the spelling of docs/architecture.md), or to -o; no file beside
# the source; a bad kind, --dump with --emit, and --dump=c are errors
(cd "$W" && cp "$OLDPWD/dsl/examples/vadd.tile" . && "$OLDPWD/$T" vadd.tile --dump=tir >tir.out) ||
  bad "--dump=tir failed"
grep -q "^kernel vadd" "$W/tir.out" || bad "--dump=tir printed no TIR: $(head -2 "$W/tir.out")"
[ -e "$W/vadd.ptx" ] && bad "--dump=tir wrote vadd.ptx"
"$T" dsl/examples/vadd.tile --dump=ptx -o "$W/d.ptx" && grep -q "^.visible .entry vadd" "$W/d.ptx" ||
  bad "--dump=ptx -o FILE wrote no PTX"
for args in "--dump=bogus" "--dump=tir --emit=ptx" "--dump=c" "--dump"; do
  # shellcheck disable=SC2086
  if "$T" dsl/examples/vadd.tile $args >/dev/null 2>"$W/err"; then bad "'$args' exited 0"; fi
  grep -q "error: " "$W/err" || bad "'$args': no message"
done

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
# A kernel exactly at the launch contract's limits (tests/cli/at_limits.py) is valid for the
# compiler and the runtime alike: PTX (its metadata read back by the runtime's parser), C that
# compiles, and a run. One past each limit is a located error (tests/diag/limit_*.tile).
python3 tests/cli/at_limits.py > "$W/lim.tile"
"$T" "$W/lim.tile" -o "$W/lim.ptx" 2>"$W/err" || bad "kernel at the limits: --emit=ptx failed: $(head -3 "$W/err")"
if "$T" "$W/lim.tile" --emit=c -o "$W/lim" 2>"$W/err"; then
  gcc -std=c99 -Wall -Wextra -Werror -c "$W/lim.c" -o /dev/null || bad "kernel at the limits: its C does not compile"
else bad "kernel at the limits: --emit=c failed: $(head -3 "$W/err")"; fi
shapes=$(grep -o 'D[0-9_D]*' "$W/lim.tile" | sort -u | sed 's/$/=1/' | paste -sd,)
"$T" run "$W/lim.tile" --shape "$shapes" >/dev/null 2>"$W/err" || bad "kernel at the limits: run failed: $(head -3 "$W/err")"

# -D values with blanks are not numbers (strtod would skip the blank)
"$T" --check dsl/examples/softmax.tile -D "BLOCK= 5" 2>"$W/err" && bad "-D 'BLOCK= 5' accepted"
grep -q "invalid value ' 5' for -D BLOCK (expected a number)" "$W/err" || bad "-D 'BLOCK= 5': $(cat "$W/err")"

# tilec run: sizes are checked before anything is allocated
"$T" run dsl/examples/vadd.tile --shape N=2147483647 2>"$W/err" && bad "run with 3 x 8.6 GB accepted"
grep -q "the tensors take 25769803764 bytes, more than the 1073741824 that 'tilec run' allows" "$W/err" ||
  bad "no size cap message: $(cat "$W/err")"
"$T" run dsl/examples/vadd.tile --shape N=1000 --max-memory=11K 2>"$W/err" && bad "--max-memory=11K not enforced"
"$T" run dsl/examples/vadd.tile --shape N=1000 --max-memory=12K >/dev/null || bad "--max-memory=12K refused"
"$T" run dsl/examples/vadd.tile --shape N=8 --max-memory=4X 2>"$W/err" && bad "--max-memory=4X accepted"
printf 'kernel k(X: f32[A, B, C, D], Y: out f32[A, B, C, D])\n  grid (1) threads (32)\n{\n  Y[0, 0, 0, 0 : +32] = X[0, 0, 0, 0 : +32];\n}\n' > "$W/r4.tile"
"$T" run "$W/r4.tile" --shape A=65536,B=65536,C=65536,D=65536 2>"$W/err" && bad "element count overflow accepted"
grep -q "tensor 'X' has more than 2^63 elements" "$W/err" || bad "no overflow message: $(cat "$W/err")"
"$T" run dsl/examples/softmax.tile --shape M=0,N=100 >/dev/null || bad "an empty run failed"
# tilec run: an atomic_max target starts at -inf (its identity), not 0; --out makes its directory
printf 'kernel colmax(X: f32[M, N], Y: out f32[N])\n  grid (M) threads (32)\n{\n  atomic_max(Y[0 : +32], X[block.x, 0 : +32] - 10.0);\n}\n' > "$W/colmax.tile"
"$T" run "$W/colmax.tile" --shape M=5,N=32 --out "$W/made/here" >"$W/out" 2>"$W/err" ||
  bad "run of an atomic_max kernel failed: $(head -3 "$W/err")"
grep -Eq "^  Y .* max -(9|10)\." "$W/out" || bad "atomic_max did not start at -inf: $(grep '^  Y' "$W/out")"
[ -f "$W/made/here/Y.npy" ] || bad "--out did not make its directory"
# a file of two kernels with outputs of one name: --out DIR writes DIR/KERNEL/NAME.npy
printf 'kernel one(X: f32[N], Y: out f32[N])\n  grid (1) threads (32)\n{\n  Y[0 : +32] = X[0 : +32];\n}\nkernel two(X: f32[N], Y: out f32[N])\n  grid (1) threads (32)\n{\n  Y[0 : +32] = X[0 : +32] * 2.0;\n}\n' > "$W/two_y.tile"
"$T" run "$W/two_y.tile" --shape N=32 --out "$W/two_out" >/dev/null 2>"$W/err" || bad "run of two kernels: $(cat "$W/err")"
[ -f "$W/two_out/one/Y.npy" ] && [ -f "$W/two_out/two/Y.npy" ] || bad "two kernels' Y: $(ls -R "$W/two_out")"
# a grid that does not cover an output: the elements no store reached are counted
printf 'kernel half(X: f32[N], Y: out f32[N])\n  grid (cdiv(N, 256)) threads (128)\n{\n  Y[block.x * 128 : +128] = X[block.x * 128 : +128];\n}\n' > "$W/half.tile"
"$T" run "$W/half.tile" --shape N=1000 >"$W/out" 2>&1 || bad "run of half: $(cat "$W/out")"
grep -q "note: 488 of the 1000 elements of Y were never written (they hold NaN)" "$W/out" ||
  bad "an uncovered output: $(cat "$W/out")"
"$T" run "$W/half.tile" --shape N=128 >"$W/out" 2>&1 && ! grep -q "never written" "$W/out" ||
  bad "a covered output reported: $(cat "$W/out")"
# a scalar given with --in: how to give it
printf 'kernel sc(X: f32[N], Y: out f32[N], a: f32)\n  grid (1) threads (32)\n{\n  Y[0 : +32] = X[0 : +32] * a;\n}\n' > "$W/sc.tile"
"$T" run "$W/sc.tile" --in a="$W/made/here/Y.npy" 2>"$W/err" >/dev/null && bad "--in of a scalar accepted"
grep -q "'a' is a scalar argument of kernel 'sc': give its value with --shape a=VALUE" "$W/err" ||
  bad "--in of a scalar: $(cat "$W/err")"
# an `= 0` output: it starts at 0 (the launch zeroes it), and --in cannot give it a start
printf 'kernel cs(X: f32[M, N], Y: out f32[N] = 0)\n  grid (M) threads (32)\n{\n  atomic_add(Y[0 : +32], X[block.x, 0 : +32]);\n}\n' > "$W/cs.tile"
mkdir -p "$W/cs"
"$T" run "$W/cs.tile" --shape M=4,N=32 --out "$W/cs" >"$W/out" 2>&1 || bad "run of an = 0 output: $(cat "$W/out")"
grep -q "never written" "$W/out" && bad "an = 0 output reported unwritten: $(cat "$W/out")"
"$T" run "$W/cs.tile" --shape M=4 --in Y="$W/cs/Y.npy" 2>"$W/err" >/dev/null && bad "--in of an = 0 output accepted"
grep -q "\-\-in: argument 'Y' of kernel 'cs' is declared '= 0': every launch zeroes it, so it takes no starting values" "$W/err" ||
  bad "--in of an = 0 output: $(cat "$W/err")"

# tilec run with dimension expressions: --shape gives the dims written alone, the others follow;
# an --in array of the wrong size is the launch's requirement; a negative one is refused
printf 'kernel h(X: f32[M, D], Y: out f32[M, D / 2], Z: out f32[D - 64])\n  grid (M) threads (32)\n{\n  Y[block.x, 0 : +32] = X[block.x, 0 : +32];\n  Z[0 : +32] = X[0, 64 : +32];\n}\n' > "$W/de.tile"
mkdir -p "$W/de100" "$W/de90"
"$T" run "$W/de.tile" --shape M=3,D=100 --out "$W/de100" >"$W/out" 2>&1 || bad "run with D / 2: $(cat "$W/out")"
grep -q "Y          f32          150 elements" "$W/out" || bad "run with D / 2: Y is not 3 x 50: $(cat "$W/out")"
"$T" run "$W/de.tile" --shape M=3,D=90 --out "$W/de90" >/dev/null 2>&1 || bad "run with D=90 failed"
"$T" run "$W/de.tile" --shape M=3,D=100 --in Y="$W/de90/Y.npy" 2>"$W/err" && bad "a Y of 3 x 45 accepted for D=100"
grep -q "requirement 'axis 1 of Y == D / 2' failed: Y\$1 = 45, D = 100" "$W/err" || bad "no requirement message: $(cat "$W/err")"
"$T" run "$W/de.tile" --shape M=3,D=10 2>"$W/err" && bad "a negative dimension accepted"
grep -q "dim Z\$0 ('D 64 -' in RPN) is -54 with these shapes" "$W/err" || bad "no negative-dim message: $(cat "$W/err")"
# a dim no --shape names is solved from an --in array whose axis is linear in it (X: [M, 2 * D])
printf 'kernel glu(X: f32[M, 2 * D], Y: out f32[M, D])\n  grid (M) threads (32)\n{\n  Y[block.x, 0 : +32] = X[block.x, 0 : +32] * X[block.x, D : +32];\n}\n' > "$W/glu.tile"
"$T" run "$W/glu.tile" --in X="$W/de100/Y.npy" >"$W/out" 2>&1 || bad "D not solved from X's 2 * D: $(cat "$W/out")"
grep -q "Y          f32           75 elements" "$W/out" || bad "D from X's 2 * D: Y is not 3 x 25: $(cat "$W/out")"
"$T" run "$W/glu.tile" --in X="$W/de90/Y.npy" 2>"$W/err" && bad "an X of 45 columns accepted for 2 * D"
grep -q "no value for dim D" "$W/err" || bad "an X of 45 columns: $(cat "$W/err")"

# A tile ptxas cannot assemble (a 192 x 256 GEMM over 16 warps: m64n256 needs 154 registers a
# thread, a block of 512 launches with 128; C7602) is an error at the kernel, with no output;
# the warp-specialized entry, refused the same way, is left out first (lower_nvptx.c compile_ws)
if [ -x "${TILEC_PTXAS:-/usr/local/cuda/bin/ptxas}" ] || command -v ptxas >/dev/null; then
  if "$T" dsl/examples/gemm.tile --arch=sm_90a -D BM=192 -D BN=256 -D BK=64 -D WARPS=16 -o "$W/wide.ptx" 2>"$W/err"; then
    bad "a kernel ptxas refuses compiled"
  fi
  grep -q "gemm.tile:4:8: error: ptxas cannot assemble this kernel for sm_90a ((C7602) Insufficient registers" "$W/err" ||
    bad "a kernel ptxas refuses: $(cat "$W/err")"
  [ -e "$W/wide.ptx" ] && bad "a kernel ptxas refuses left its PTX"
  # the same where the kernel never had a warp-specialized entry (256 x 192 over 16 warps)
  if "$T" dsl/examples/gemm.tile --arch=sm_90a -D BM=256 -D BN=192 -D BK=64 -D WARPS=16 -o "$W/wide.ptx" 2>"$W/err"; then
    bad "a kernel ptxas refuses (no warp-specialized entry) compiled"
  fi
  grep -q "error: ptxas cannot assemble this kernel for sm_90a ((C7602)" "$W/err" ||
    bad "a kernel ptxas refuses (no warp-specialized entry): $(cat "$W/err")"
fi

# --emit=schedule: the GPU schedule (warp roles and TMA boxes on sm_90a, cp.async rings on sm_80)
"$T" dsl/examples/gemm.tile -D BM=128 -D BN=256 -D BK=64 -D WARPS=8 -D STAGES=4 --emit=schedule -o "$W/s90" ||
  bad "--emit=schedule failed"
for want in "pipe_wait pipe 0" "pipe_release pipe 0, previous stage" "// roles: producer warpgroup" \
            "// tmap 1: load @14, B box [64, 64] x 4, swizzle 128" "// prefetched before the loop: @10"; do
  grep -qF "$want" "$W/s90" || bad "--emit=schedule (sm_90a) lacks '$want'"
done
"$T" dsl/examples/gemm.tile --emit=schedule --arch=sm_80 -o "$W/s80" || bad "--emit=schedule --arch=sm_80 failed"
grep -q "pipe_wait" "$W/s80" && ! grep -q "roles" "$W/s80" || bad "--emit=schedule (sm_80): $(tail -3 "$W/s80")"

# attention d64 (4 stages, 176 KB): two copies of Q, O stored by each consumer warpgroup, the
# loop rotated (on by default from 3 stages)
"$T" dsl/examples/attention.tile -D D=64 -D BM=128 -D BN=128 -D WARPS=8 -D STAGES=4 --emit=schedule -o "$W/sa" ||
  bad "--emit=schedule (attention) failed"
for want in "// head loads: @10 (16384 bytes, 2 copies)" ", rotated (accumulator wait @" \
            "O box [1, 1, 64, 64] x 1, swizzle 128, one per warpgroup (2)"; do
  grep -qF "$want" "$W/sa" || bad "--emit=schedule (attention) lacks '$want'"
done

# a file of two kernels: one module with both (one metadata block each), or the one --kernel picks
printf 'kernel add1(X: f32[N], Y: out f32[N])\n  grid (cdiv(N, 256)) threads (128)\n{\n  Y[block.x * 256 : +256] = X[block.x * 256 : +256] + 1.0;\n}\nkernel mul2(X: f32[N], Y: out f32[N])\n  grid (cdiv(N, 256)) threads (128)\n{\n  Y[block.x * 256 : +256] = X[block.x * 256 : +256] * 2.0;\n}\n' > "$W/two.tile"
"$T" "$W/two.tile" -o "$W/two.ptx" || bad "--emit=ptx of two kernels failed"
[ "$(grep -c '^// tilec: kernel ' "$W/two.ptx")" = 2 ] && [ "$(grep -c '^.visible .entry ' "$W/two.ptx")" = 2 ] ||
  bad "two kernels: $(grep -E '^// tilec: kernel|^.visible .entry' "$W/two.ptx")"
"$T" "$W/two.tile" --kernel mul2 -o "$W/one.ptx" && [ "$(grep -c '^.visible .entry ' "$W/one.ptx")" = 1 ] &&
  grep -q '^.visible .entry mul2(' "$W/one.ptx" || bad "--kernel mul2 did not give mul2 alone"

# a kernel in clusters: --emit=c writes its launcher (cuLaunchKernelEx; tests/aot/ws_test.c runs it)
"$T" bench/ab/cross_entropy_backward_split.tile --emit=c --arch=sm_90a -o "$W/split" 2>"$W/err" &&
  [ -s "$W/split.h" ] && grep -A5 '^static const tk_kernel tk_k = {' "$W/split.c" | grep -Eq ', -?[0-9]+, 4, (0|16)};$' ||
  bad "--emit=c of a cluster kernel: $(head -2 "$W/err")"

[ $fail = 0 ] && echo "check_cli: passed"
exit $fail
