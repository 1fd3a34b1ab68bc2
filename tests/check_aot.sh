#!/usr/bin/env bash
# check_aot.sh — ahead-of-time C output (issue 7).
#
# 1. From the hand-written PTX in tests/aot/kernels/ (a stand-in for tilec's output, so this
#    part does not depend on the front end): generate vadd (sm_80 + sm_90a, with cubins when
#    ptxas is present), scale_d64 and scale_d128, and link the last two into `scale`.
# 2. Every generated file compiles warning-free with gcc -std=c99 -Wall -Wextra -Werror, with
#    g++ (as C++), and with cuda.h included first (which proves its copied driver constants).
# 3. tests/aot/aot_test.c calls the launch functions with wrong shapes, dtypes, strides,
#    alignment, overflowing offsets, racing outputs and NULL pointers and checks each error code
#    and message; without a driver it checks the clean no-driver error (also forced with
#    TILERT_LIBCUDA=/nonexistent); on a GPU it runs the kernels and compares with the host. With
#    a fake driver whose JIT log has no NUL (fake_libcuda.c), jit_log_test checks under ASan that
#    libtilert and the generated loader read no byte past the log.
# 4. Once `tilec --emit=c` works: C for every example in dsl/examples, compiled the same way.
# 5. A file of several kernels (layernorm_backward.tile) gives one pair, one module per arch;
#    bundle_test.c checks both kernels' contracts, two builds linked kernel by kernel, and, with
#    fake_libcuda.so accepting the PTX, that one module load serves both kernels, found by name;
#    ws_test.c, on the same fake driver, which entry a generated GEMM's launches take (the
#    warp-specialized one with its tensor maps and persistent grid, or the cp.async one).
set -euo pipefail
B=${B:-build}
CUDA=${CUDA:-/usr/local/cuda}
W="$B/tests/aot"
rm -rf "$W" && mkdir -p "$W/gen" "$W/examples"
K=tests/aot/kernels

CFLAGS_GEN="-std=c11 -D_POSIX_C_SOURCE=200809L -D_DEFAULT_SOURCE -O1 -Icompiler -Iruntime -Wall -Wextra -Werror"
gcc $CFLAGS_GEN tests/aot/gen.c "$B/libtilec.a" "$B/libtilert.a" -ldl -lm -o "$W/gen-tool"

cubin=""
if command -v ptxas >/dev/null 2>&1 || [ -x "$CUDA/bin/ptxas" ]; then cubin=--cubin; fi
"$W/gen-tool" emit "$W/gen/vadd" $cubin sm_80=$K/vadd.sm_80.ptx sm_90a=$K/vadd.sm_90a.ptx
"$W/gen-tool" emit "$W/gen/scale_d64" sm_80=$K/scale_d64.sm_80.ptx
"$W/gen-tool" emit "$W/gen/scale_d128" sm_80=$K/scale_d128.sm_80.ptx
"$W/gen-tool" link "$W/gen/scale" "$W/gen/scale_d64.h" "$W/gen/scale_d128.h"

# Malformed input must be refused with a message, not crash.
if "$W/gen-tool" emit "$W/gen/bad" sm_80=tests/aot/gen.c 2>"$W/bad.err"; then
  echo "check_aot: PTX without metadata was accepted"; exit 1
fi
grep -q "is this PTX from tilec" "$W/bad.err" || { cat "$W/bad.err"; exit 1; }
if "$W/gen-tool" link "$W/gen/bad" "$W/gen/vadd.h" "$W/gen/scale_d64.h" 2>"$W/bad.err"; then
  echo "check_aot: linking different kernels was accepted"; exit 1
fi
grep -q "different argument lists" "$W/bad.err" || { cat "$W/bad.err"; exit 1; }

compile_all() { # DIR: every .c there, three ways
  local f
  for f in "$1"/*.c; do
    [ -e "$f" ] || continue
    gcc -std=c99 -Wall -Wextra -Werror -c "$f" -o "$f.o"
    g++ -x c++ -Wall -Wextra -Werror -c "$f" -o "$f.cpp.o"
    gcc -std=c99 -Wall -Wextra -Werror -include cuda.h -I"$CUDA/include" -c "$f" -o /dev/null
  done
}
compile_all "$W/gen"
echo "check_aot: generated C compiles with gcc -std=c99, g++ and cuda.h ($(ls "$W"/gen/*.c | wc -l) files)"

G="$W/gen"
gcc -std=c99 -Wall -Wextra -Werror -I"$G" -Iruntime tests/aot/aot_test.c \
  "$G/vadd.c.o" "$G/scale.c.o" "$G/scale_d64.c.o" "$G/scale_d128.c.o" "$B/libtilert.a" -ldl -lm \
  -o "$W/aot_test"
g++ -x c++ -Wall -Wextra -Werror -I"$G" -Iruntime tests/aot/aot_test.c -x none \
  "$G/vadd.c.cpp.o" "$G/scale.c.cpp.o" "$G/scale_d64.c.cpp.o" "$G/scale_d128.c.cpp.o" \
  "$B/libtilert.a" -ldl -lm -o "$W/aot_test_cpp"
"$W/aot_test"
"$W/aot_test_cpp" >/dev/null
TILERT_LIBCUDA=/nonexistent/libcuda.so.1 "$W/aot_test" | grep -q "checking the no-driver path"
# A driver whose JIT fills the whole error log with no NUL (tests/aot/fake_libcuda.c): libtilert
# and the generated loader report it without reading past the buffer (AddressSanitizer).
gcc -shared -fPIC -O1 -Wall -Wextra -Werror tests/aot/fake_libcuda.c -o "$W/fake_libcuda.so"
gcc -std=c11 -D_POSIX_C_SOURCE=200809L -D_DEFAULT_SOURCE -g -O1 -Wall -Wextra -Werror \
  -fsanitize=address,undefined -fno-sanitize-recover=all -Iruntime -I"$G" -I"$CUDA/include" \
  tests/aot/jit_log_test.c "$G/vadd.c" runtime/*.c -ldl -lm -o "$W/jit_log_test"
TILERT_LIBCUDA="$W/fake_libcuda.so" "$W/jit_log_test" "$K/vadd.sm_90a.ptx"

# Every example through the real compiler.
n=0
for t in dsl/examples/*.tile; do
  name=$(basename "$t" .tile)
  "$B/tilec" "$t" --emit=c --arch=sm_80 --arch=sm_90a -o "$W/examples/$name" ||
    { echo "check_aot: tilec --emit=c failed on $t"; exit 1; }
  n=$((n + 1))
done
compile_all "$W/examples"
echo "check_aot: $n examples through tilec --emit=c compile with gcc, g++ and cuda.h"
# The docs/aot.md program builds with its one gcc line (it runs in make gpu-test).
gcc -std=c99 -O2 -Wall -Wextra -Werror -I"$W/examples" -I"$CUDA/include" tests/aot/demo_main.c \
  "$W/examples/vadd.c" "$W/examples/softmax.c" -L"$CUDA/lib64/stubs" -lcuda -ldl -lm \
  -o "$W/demo"
# Contract checks of real examples, incl. two specializations linked behind one entry point.
L=$W/linked
mkdir -p "$L"
"$B/tilec" dsl/examples/softmax.tile --emit=c --arch=sm_90a -o "$L/softmax"
"$B/tilec" dsl/examples/attention.tile -D D=64 --emit=c --arch=sm_90a -o "$L/attention_d64"
"$B/tilec" dsl/examples/attention.tile -D D=128 --emit=c --arch=sm_90a -o "$L/attention_d128"
"$B/tilec" --link "$L/attention_d64.h" "$L/attention_d128.h" -o "$L/attention"
for cc in "gcc -std=c99" "g++ -x c++"; do
  $cc -Wall -Wextra -Werror -I"$L" tests/aot/examples_test.c -x none "$L/softmax.c" \
    "$L/attention.c" "$L/attention_d64.c" "$L/attention_d128.c" -ldl -o "$L/examples_test" ||
    { echo "check_aot: examples_test does not build with $cc"; exit 1; }
  if ldconfig -p 2>/dev/null | grep -q libcuda.so.1; then "$L/examples_test"
  else EXPECT_NO_DRIVER=1 "$L/examples_test"; fi || { echo "check_aot: examples_test failed"; exit 1; }
done
# A file of several kernels: one pair (--kernel still picks one), linked kernel by kernel.
M=$W/bundle
mkdir -p "$M"
# (full-size entries taken as aligned, TILEC_FULL_ALIGNED=1: bundle_test.c checks the launcher's choice)
TILEC_FULL_ALIGNED=1 "$B/tilec" dsl/examples/layernorm_backward.tile --emit=c --arch=sm_80 --arch=sm_90a -o "$M/ln"
"$B/tilec" dsl/examples/layernorm_backward.tile -D BLOCK=4096 -D STAGES=4 --emit=c --arch=sm_90a -o "$M/ln_4k"
"$B/tilec" --link "$M/ln.h" "$M/ln_4k.h" -o "$M/ln_any"
"$B/tilec" dsl/examples/layernorm_backward.tile --kernel layernorm_train --emit=c -o "$M/train"
[ "$(ls "$M")" = "$(printf '%s\n' ln.c ln.h ln_4k.c ln_4k.h ln_any.c ln_any.h train.c train.h)" ] ||
  { echo "check_aot: a file of several kernels wrote: $(ls "$M")"; exit 1; }
# each kernel with its full-size entry (require N <= BLOCK) in every image, the entry without
# functions of its own
[ "$(grep -c '^// tilec: kernel ' "$M/ln.h")" = 2 ] && [ "$(grep -c '\.entry layernorm_' "$M/ln.c")" = 8 ] &&
  [ "$(grep -c '\.entry layernorm_[a-z]*__full' "$M/ln.c")" = 4 ] && ! grep -q '__full_launch' "$M/ln.h" &&
  grep -q "tilec_result train_launch(" "$M/train.h" && ! grep -q layernorm_backward "$M/train.h" ||
  { echo "check_aot: the bundle does not hold both kernels (and their full-size entries) once per arch, or --kernel did not pick"; exit 1; }
for bad in "$M/ln.h $L/softmax.h" "$L/attention_d64.h $M/ln.h"; do
  if "$B/tilec" --link $bad -o "$M/bad" 2>"$W/bad.err"; then
    echo "check_aot: --link $bad was accepted"; exit 1
  fi
  grep -q "files of several kernels link with builds of the same file" "$W/bad.err" || { cat "$W/bad.err"; exit 1; }
done
if "$B/tilec" dsl/examples/layernorm_backward.tile --kernel layernorm --emit=c -o "$M/bad" 2>"$W/bad.err"; then
  echo "check_aot: --kernel with an unknown name was accepted"; exit 1
fi
grep -q "has no kernel 'layernorm' (it has: layernorm_backward, layernorm_train)" "$W/bad.err" ||
  { cat "$W/bad.err"; exit 1; }
compile_all "$M"
gcc -std=c99 -Wall -Wextra -Werror -I"$M" tests/aot/bundle_test.c "$M/ln.c" "$M/ln_4k.c" \
  "$M/ln_any.c" -ldl -o "$M/bundle_test"
TILERT_LIBCUDA=/nonexistent/libcuda.so.1 "$M/bundle_test"
TILERT_LIBCUDA="$W/fake_libcuda.so" FAKE_LIBCUDA_JIT=ok "$M/bundle_test"
# The warp-specialized entry from generated C (tensor maps per launch, persistent grid), on the
# fake driver: gemm for sm_90a.
"$B/tilec" dsl/examples/gemm.tile --emit=c --arch=sm_90a -o "$M/gw"
"$B/tilec" dsl/examples/attention.tile -D D=128 -D BM=128 -D BN=128 -D WARPS=8 -D CAUSAL=1 \
  --emit=c --arch=sm_90a -o "$M/aw"
# clusters (cuLaunchKernelEx): a row split over 4 blocks, and a GEMM entry walking pairs of tiles
C=$W/cluster
mkdir -p "$C"
"$B/tilec" bench/ab/cross_entropy_backward_split.tile --emit=c --arch=sm_90a -o "$C/xc"
printf 'kernel pair_add(X: f32[N], Y: out f32[N])\n  grid (cdiv(N, 256)) cluster (2) threads (128)\n{\n  Y[block.x * 256 : +256] = X[block.x * 256 : +256] + 1.0;\n}\n' > "$C/pair_add.tile"
"$B/tilec" "$C/pair_add.tile" --emit=c --arch=sm_90a -o "$C/pc"
TILEC_CLUSTER=1 "$B/tilec" dsl/examples/gemm.tile -D BM=128 -D BN=128 -D BK=64 -D WARPS=8 -D STAGES=4 \
  --emit=c --arch=sm_90a -o "$C/gc"
compile_all "$C"
# Their GPU run (make gpu-prep builds it, make gpu-test runs it): compiled here.
gcc -std=c11 -O2 -Wall -Wextra -Werror -I"$C" -Itests/aot -Icompiler -Itests/ref -I"$CUDA/include" \
  tests/aot/cluster_gpu.c "$C/xc.c" "$C/gc.c" tests/ref/*.c "$B/libtilec.a" -L"$CUDA/lib64/stubs" -lcuda -ldl -lm \
  -o "$C/cluster_gpu"
gcc -std=c99 -Wall -Wextra -Werror -I"$M" -I"$C" -Itests/aot tests/aot/ws_test.c "$M/gw.c" "$M/aw.c" "$C/xc.c" \
  "$C/gc.c" "$C/pc.c" -ldl -o "$M/ws_test"
TILERT_LIBCUDA="$W/fake_libcuda.so" FAKE_LIBCUDA_JIT=ok "$M/ws_test"
# Its GPU run on the bench's GEMM tiles (make gpu-prep builds it, make gpu-test runs it): compiled here.
mkdir -p "$M/big"
"$B/tilec" dsl/examples/gemm.tile -D BM=128 -D BN=256 -D BK=64 -D WARPS=8 -D STAGES=4 -D ACT=2 \
  --emit=c --arch=sm_90a -o "$M/big/gw"
gcc -std=c11 -O2 -Wall -Wextra -Werror -I"$M/big" -Itests/aot -Icompiler -Itests/ref -I"$CUDA/include" \
  tests/aot/ws_gpu.c "$M/big/gw.c" tests/ref/*.c "$B/libtilec.a" -L"$CUDA/lib64/stubs" -lcuda -ldl -lm \
  -o "$M/ws_gpu"
# Its GPU run (make gpu-prep builds it, make gpu-test runs it): compiled here.
gcc -std=c11 -O2 -Wall -Wextra -Werror -I"$M" -Icompiler -Itests/ref -I"$CUDA/include" \
  tests/aot/bundle_gpu.c "$M/ln.c" tests/ref/*.c "$B/libtilec.a" -L"$CUDA/lib64/stubs" -lcuda -ldl -lm \
  -o "$M/bundle_gpu"
# Output names: files keep their names (the .c includes exactly that header), the C prefix is
# the name made an identifier; a directory or an un-#include-able name is refused.
N=$W/names
mkdir -p "$N/dir"
T=$(cd "$B" && pwd)/tilec
cp dsl/examples/vadd.tile "$N/my-k.tile"
(cd "$N" && "$T" my-k.tile --emit=c --arch=sm_90a)
"$T" dsl/examples/softmax.tile --emit=c --arch=sm_90a -o "$N/softmax-f16"
"$T" dsl/examples/softmax.tile -D BLOCK=2048 --emit=c --arch=sm_90a -o "$N/softmax-2k"
"$T" dsl/examples/vadd.tile --emit=c --arch=sm_90a -o "$N/9x"
grep -q "tilec_result my_k_launch(" "$N/my-k.h" && grep -q '#include "my-k.h"' "$N/my-k.c" &&
  grep -q "softmax_f16_launch(" "$N/softmax-f16.h" && grep -q "_9x_launch(" "$N/9x.h" ||
  { echo "check_aot: mangled names or includes are wrong"; exit 1; }
for bad in "$N/dir/" "$N/." "$N/q\"x"; do
  if "$T" dsl/examples/vadd.tile --emit=c -o "$bad" 2>"$W/bad.err"; then
    echo "check_aot: --emit=c -o '$bad' was accepted"; exit 1
  fi
  grep -qE "names a directory|cannot be #included" "$W/bad.err" || { cat "$W/bad.err"; exit 1; }
done
[ -z "$(ls -A "$N/dir")" ] || { echo "check_aot: -o dir/ wrote $(ls -A "$N/dir")"; exit 1; }
# A requirement with a block comment (quotes and backslashes inside) reaches the header as its
# tokens; a hand-edited header whose requirement text holds "*/" still links into valid C.
cat > "$N/req.tile" <<'EOF2'
kernel req(X: f32[N], Y: out f32[N])
  grid (N) threads (32)
{
  require N /* a "quoted" \ comment */ > 0 && // to the end of the line
    N < 100000;
  Y[0 : +32] = X[0 : +32];
}
EOF2
"$T" "$N/req.tile" --emit=c --arch=sm_90a -o "$N/req"
grep -q "require N > 0 && N < 100000$" "$N/req.h" || { grep require "$N/req.h"; exit 1; }
sed -i 's#| N <= BLOCK$#| N <= BLOCK */ "x\\"#' "$N/softmax-2k.h"
grep -q 'BLOCK \*/ "x' "$N/softmax-2k.h" || { echo "check_aot: sed did not edit"; exit 1; }
"$T" --link "$N/softmax-2k.h" "$N/softmax-f16.h" -o "$N/soft-all"
grep -q "require N <= BLOCK \* / \"x" "$N/soft-all.h" || { grep require "$N/soft-all.h"; exit 1; }
compile_all "$N"
echo "check_aot: mangled names, comments and escapes compile ($(ls "$N"/*.c | wc -l) files)"
echo "check_aot: passed"
