#!/bin/bash
# check_ptxas.sh — every dsl/examples/*.tile (default parameters, plus attention with -D D=128
# -D CAUSAL=1, row-op launch shapes, tests/golden/src/shape_ops.tile, the transposed-A GEMMs; the
# cluster and 192-row attention kernels on sm_90a only) compiles to PTX for sm_80 and sm_90a, and ptxas assembles it with 0 bytes of spill
# stores and loads and no serialized wgmma (C7514/C7515). Registers and shared memory per kernel are logged. Then the golden feature
# checks in tests/golden/ptx/<variant>.check run on the sm_90a PTX:
#   CHECK: REGEX         a line matches (grep -E)
#   CHECK-NOT: REGEX     no line matches
#   CHECK-COUNT-N: REGEX at least N lines match
#   CHECK-MAX-N: REGEX   at most N lines match
#   CHECK-RUN-N: REGEX   at least N matching lines in a row (inline-asm comment lines and
#                        blank lines between them skipped): loads issued back to back
# Without ptxas (no CUDA toolkit) the assembly step is skipped, the feature checks still run.
set -u
cd "$(dirname "$0")/.."
B=${B:-build}
TILEC="$B/tilec"
PTXAS=${PTXAS:-/usr/local/cuda/bin/ptxas}
OUT="$B/ptx"
GOLDEN=tests/golden/ptx
[ -x "$TILEC" ] || { echo "check_ptxas: $TILEC not built" >&2; exit 1; }
mkdir -p "$OUT"
have_ptxas=1
[ -x "$PTXAS" ] || { echo "check_ptxas: SKIP assembly ($PTXAS not found)"; have_ptxas=0; }

# variant name | source | extra flags
variants=()
for src in dsl/examples/*.tile; do
  variants+=("$(basename "$src" .tile)|$src|")
done
variants+=("attention_d128_causal|dsl/examples/attention.tile|-D D=128 -D CAUSAL=1")
# The backward at D = 128 (dK and dV alone are 128 f32 registers a thread): BM = 16 and, for the
# kernel without dQ, KSTAGES = 1 fit.
variants+=("attention_backward_d128_causal|dsl/examples/attention_backward.tile|-D D=128 -D CAUSAL=1 -D BM=16 -D KSTAGES=1")
# Row-op launch shapes of bench/configs.txt: a row per warp (no shared-memory reduction step), and
# a long row over 16 warps; their checks pin the 16-byte vectors issued back to back.
variants+=("softmax_r8w8|dsl/examples/softmax.tile|-D ROWS=8 -D WARPS=8")
variants+=("add_rmsnorm_r8w8|dsl/examples/add_rmsnorm.tile|-D ROWS=8 -D WARPS=8")
variants+=("rmsnorm_n16k|dsl/examples/rmsnorm.tile|-D BLOCK=16384 -D WARPS=16")
# Runtime-N layernorm (its `col < N` mask and ragged paths) at the bench's long-row shapes: must fit
# the 64 registers of 2 blocks per SM (.minnctapersm) without a spill.
variants+=("layernorm_n16k|dsl/examples/layernorm.tile|-D BLOCK=16384 -D WARPS=16")
variants+=("layernorm_n4096_r2w8|dsl/examples/layernorm.tile|-D BLOCK=4096 -D ROWS=2 -D WARPS=8")
# Cross-entropy backward in one pass at the bench's 32000 columns: the 64 KB row read back in
# windows of a shared tile; few registers (three blocks per SM), vector window reads.
variants+=("xent_row_n32k|dsl/examples/cross_entropy_backward.tile|--kernel cross_entropy_backward_row -D BLOCK=32768 -D C=4096 -D WARPS=16")
# Cross-entropy backward walking its rows on a ring (bench/ab/cross_entropy_backward_rows.tile) at
# the bench's odd 50257 columns: each stage's row copied at its own shift, the windows read in
# vectors, the ring's two 100 KB stages stored in their length (not 64K-column layouts).
variants+=("xent_rows_odd|bench/ab/cross_entropy_backward_rows.tile|-D BLOCK=50264 -D C=4096 -D WARPS=16 -D RPB=16 -D STAGES=2")
# The row kernel with one exponential an element (bench/ab/cross_entropy_backward_stored.tile): the
# sum loop writes exp(x - max) back over the row, a window store in 16-byte vectors where
# tir_align moved its loop to the row's boundary, and the dX loop reads it back.
variants+=("xent_stored_odd|bench/ab/cross_entropy_backward_stored.tile|-D BLOCK=50264 -D C=4096 -D WARPS=16")
# wgmma's operand A read in place as the transpose of a shared tile: the GEMM of 16 rows that
# tir_swap.c computes as C^T = B^T A^T, and a weight gradient X^T dY (a kernel a user wrote).
variants+=("gemm_m16|dsl/examples/gemm.tile|-D BM=16 -D BN=64 -D BK=128 -D WARPS=4 -D STAGES=6")
variants+=("wgrad|bench/user/wgrad.tile|")
# The language's shape operations (dropped and kept reduction axes, register-tile slices, index(),
# dimension expressions), as in their golden TIR.
variants+=("shape_ops|tests/golden/src/shape_ops.tile|")

# One kernel for one arch: compile, assemble, look at ptxas's report; its line (or FAIL lines)
# go to OUT/NAME.ARCH.log. Two at a time (the machines have two cores), printed in order below.
check_one() {
  local name src flags arch log rc regs smem ptx
  IFS='|' read -r name src flags arch <<<"$1"
  ptx="$OUT/$name.$arch.ptx"
  exec >"$OUT/$name.$arch.log"
  # shellcheck disable=SC2086
  if ! "$TILEC" "$src" --emit=ptx --arch=$arch $flags -o "$ptx" 2>"$ptx.err"; then
    echo "FAIL $name $arch: tilec --emit=ptx failed:"; sed 's/^/  /' "$ptx.err" | head -20
    return
  fi
  rm -f "$ptx.err"
  smem=$(sed -n 's|^// tilec: smem \([0-9]*\)$|\1|p' "$ptx" | paste -sd, -)   # one per kernel
  [ "$have_ptxas" = 1 ] || return 0
  log=$("$PTXAS" -arch=$arch -v "$ptx" -o /dev/null 2>&1)
  rc=$?
  regs=$(sed -n 's/.*Used \([0-9]*\) registers.*/\1/p' <<<"$log" | head -1)
  if [ $rc -ne 0 ]; then
    echo "FAIL $name $arch: ptxas failed:"; sed 's/^/  /' <<<"$log" | head -20; return
  fi
  # every entry of the module (multi-kernel files, full-size entries: one report per kernel)
  if grep -qE "[1-9][0-9]* bytes spill (stores|loads)" <<<"$log"; then
    echo "FAIL $name $arch: spills:"; grep -i spill <<<"$log" | sed 's/^/  /'; return
  fi
  # C7514/C7515: ptxas serialized the wgmmas (each waits for the one before): a schedule gone wrong
  if grep -qE "C751[45]|are serialized" <<<"$log"; then
    echo "FAIL $name $arch: wgmma serialized:"; grep -E "C751[45]|serialized" <<<"$log" | sed 's/^/  /'; return
  fi
  printf '%-24s %-7s %5s %7s  %s\n' "$name" "$arch" "$regs" "$smem" ok
}
export -f check_one
export TILEC PTXAS OUT have_ptxas

jobs=()
for v in "${variants[@]}"; do
  for arch in sm_80 sm_90a; do jobs+=("$v|$arch"); done
done
# clusters need sm_90: cross-entropy backward with its rows split over 8 blocks (128256 columns)
jobs+=("xent_split|bench/ab/cross_entropy_backward_split.tile|-D SPLIT=8 -D WARPS=4 -D C=2048|sm_90a")
# FlashAttention-3's d64 tile, 192 query rows over 16 warps: the warp-specialized entry leaves out
# the fourth warpgroup, which holds only padded rows (3 consumers at 160 registers). sm_90a: on
# mma.sync the same tile spills 16 bytes (a tile for wgmma, not one the sm_80 path is tuned for)
jobs+=("attention_bm192|dsl/examples/attention.tile|-D D=64 -D BM=192 -D BN=128 -D WARPS=16 -D STAGES=3 -D CAUSAL=1|sm_90a")
printf '%s\n' "${jobs[@]}" | xargs -P "$(nproc)" -d '\n' -n 1 bash -c 'check_one "$1"' _
fail=0
printf '%-24s %-7s %5s %7s  %s\n' kernel arch regs smem "ptxas"
for j in "${jobs[@]}"; do
  IFS='|' read -r name _ _ arch <<<"$j"
  log="$OUT/$name.$arch.log"
  if [ ! -s "$log" ] && [ "$have_ptxas" = 1 ]; then echo "FAIL $name $arch: no result"; fail=1; continue; fi
  cat "$log" 2>/dev/null
  grep -q '^FAIL' "$log" 2>/dev/null && fail=1
done

# Golden feature checks on the sm_90a PTX.
nchecks=0
for chk in "$GOLDEN"/*.check; do
  [ -e "$chk" ] || continue
  name=$(basename "$chk" .check)
  ptx="$OUT/$name.sm_90a.ptx"
  if [ ! -f "$ptx" ]; then echo "FAIL $name: no $ptx for $chk"; fail=1; continue; fi
  while IFS= read -r line; do
    case "$line" in
      ''|'#'*) continue ;;
      CHECK-NOT:*) re=${line#CHECK-NOT: }
        if grep -qE -- "$re" "$ptx"; then echo "FAIL $name: found '$re' ($chk)"; fail=1; fi ;;
      CHECK-COUNT-*) n=${line#CHECK-COUNT-}; n=${n%%:*}; re=${line#CHECK-COUNT-$n: }
        got=$(grep -cE -- "$re" "$ptx")
        if [ "$got" -lt "$n" ]; then echo "FAIL $name: '$re' on $got lines, want >= $n ($chk)"; fail=1; fi ;;
      CHECK-MAX-*) n=${line#CHECK-MAX-}; n=${n%%:*}; re=${line#CHECK-MAX-$n: }
        got=$(grep -cE -- "$re" "$ptx")
        if [ "$got" -gt "$n" ]; then echo "FAIL $name: '$re' on $got lines, want <= $n ($chk)"; fail=1; fi ;;
      CHECK-RUN-*) n=${line#CHECK-RUN-}; n=${n%%:*}; re=${line#CHECK-RUN-$n: }
        got=$(grep -vE '^[[:space:]]*(// (begin|end) inline asm)?[[:space:]]*$' "$ptx" | awk -v re="$re" \
          '$0 ~ re { if (++run > best) best = run; next } { run = 0 } END { print best + 0 }')
        if [ "$got" -lt "$n" ]; then echo "FAIL $name: '$re' at most $got lines in a row, want >= $n ($chk)"; fail=1; fi ;;
      CHECK:*) re=${line#CHECK: }
        if ! grep -qE -- "$re" "$ptx"; then echo "FAIL $name: no '$re' ($chk)"; fail=1; fi ;;
      *) echo "FAIL $chk: bad line '$line'"; fail=1 ;;
    esac
    nchecks=$((nchecks + 1))
  done <"$chk"
done
echo "check_ptxas: ${#variants[@]} kernels x 2 arches and $((${#jobs[@]} - 2 * ${#variants[@]})) on sm_90a only, $nchecks feature checks"
[ $fail -eq 0 ] && echo "check_ptxas: all passed"
exit $fail
