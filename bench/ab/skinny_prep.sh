#!/usr/bin/env bash
# PTX for bench/ab/skinny_parts.py (the M = 16 GEMM, issue 11): build/skinny/*.ptx, each checked
# by ptxas for spills. Run from the repository root after `make`.
set -eu
tilec=${TILEC:-build/tilec}
out=build/skinny
rm -rf "$out" && mkdir -p "$out"
one() {  # NAME FILE [KERNEL] -D...   (TILEC_* words: the compiler's environment)
  local name=$1 file=$2; shift 2
  local envs=() flags=()
  for d in "$@"; do case $d in TILEC_*) envs+=("$d") ;; --kernel=*) flags+=(--kernel "${d#--kernel=}") ;; *) flags+=(-D "$d") ;; esac; done
  env "${envs[@]}" "$tilec" "$file" "${flags[@]}" -o "$out/$name.ptx"
  /usr/local/cuda/bin/ptxas -arch=sm_90a -v "$out/$name.ptx" -o /dev/null 2>&1 | grep -E "spill" | grep -v " 0 bytes spill stores, 0 bytes spill loads" && { echo "$name spills"; exit 1; } || true
}
g=dsl/examples/gemm.tile s=bench/ab/gemm_splitk.tile
one gemm_m16_n64_k256_s5 $g BM=16 BN=64 BK=256 WARPS=4 STAGES=5 ACT=1
one gemm_m16_n64_k256_s5_1blk $g BM=16 BN=64 BK=256 WARPS=4 STAGES=5 ACT=1 TILEC_WS_BLOCKS=1
one gemm_m16_n64_k128_s4 $g BM=16 BN=64 BK=128 WARPS=4 STAGES=4 ACT=1
one gemm_m16_n32_k256_s3 $g BM=16 BN=32 BK=256 WARPS=4 STAGES=3 ACT=1
one gemm_m16_n32_k128_s6 $g BM=16 BN=32 BK=128 WARPS=4 STAGES=6 ACT=1
one gemm_m64_n32_k128_s4 $g BM=64 BN=32 BK=128 WARPS=4 STAGES=4 ACT=1
one gemm_m16_n128_k128_s5 $g BM=16 BN=128 BK=128 WARPS=4 STAGES=5 ACT=1
for sp in 2 4; do one splitk_sum_s$sp $s --kernel=gemm_splitk_sum SM=16 SN=256 SWARPS=4 SPLIT=$sp ACT=1; done
one splitk_m64_n256_k64_s4 $s --kernel=gemm_splitk BM=64 BN=256 BK=64 WARPS=4 STAGES=4 SPLIT=4
one splitk_m16_n256_k64_s4 $s --kernel=gemm_splitk BM=16 BN=256 BK=64 WARPS=4 STAGES=5 SPLIT=4
one splitk_m16_n128_k128_s4 $s --kernel=gemm_splitk BM=16 BN=128 BK=128 WARPS=4 STAGES=5 SPLIT=4
one splitk_m16_n128_k128_s2 $s --kernel=gemm_splitk BM=16 BN=128 BK=128 WARPS=4 STAGES=5 SPLIT=2
one splitk_m16_n64_k128_s2 $s --kernel=gemm_splitk BM=16 BN=64 BK=128 WARPS=4 STAGES=5 SPLIT=2
one gemm_m16_n64_k128_s8 $g BM=16 BN=64 BK=128 WARPS=4 STAGES=8 ACT=1
one gemm_m16_n64_k256_s5_w8 $g BM=16 BN=64 BK=256 WARPS=8 STAGES=5 ACT=1
one gemm_m16_n64_k64_s8 $g BM=16 BN=64 BK=64 WARPS=4 STAGES=8 ACT=1
one gemm_m16_n64_k512_s2 $g BM=16 BN=64 BK=512 WARPS=4 STAGES=2 ACT=1
ls "$out"
