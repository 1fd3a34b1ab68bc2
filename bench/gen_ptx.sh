#!/usr/bin/env bash
# bench/gen_ptx.sh TILEC NAME OUTDIR — generates one PTX variant of bench/configs.txt:
#   OUTDIR/NAME.ptx    the PTX (absent when tilec failed)
#   OUTDIR/NAME.err    why it is absent (tilec's diagnostics), only on failure
#   OUTDIR/NAME.ptxas  `ptxas -arch=sm_90a -v` report (registers, spills), or its errors
# Never fails: a variant that does not compile becomes a row marked "no PTX" in the benchmark, the
# rest of the run goes on. Run from the repository root.
set -u
tilec=$1 name=$2 outdir=$3
ptxas=${CUDA:-/usr/local/cuda}/bin/ptxas
ptx=$outdir/$name.ptx err=$outdir/$name.err rep=$outdir/$name.ptxas
mkdir -p "$outdir"
rm -f "$ptx" "$err" "$rep" "$ptx.tmp"

line=$(awk -v n="$name" '$1 == n' "${CONFIGS:-bench/configs.txt}")
if [ -z "$line" ]; then echo "gen_ptx: $name is not in ${CONFIGS:-bench/configs.txt}" | tee "$err"; exit 0; fi
set -f  # the MATCH field may be "*"
set -- $line
example=$2
shift 3
flags=() envs=()
# PARAM=VALUE becomes -D PARAM=VALUE; TILEC_*=VALUE is an environment setting of the compiler
# instead (TILEC_CLUSTER=0: the schedule without clusters, for an A/B in the same run); TILE=PATH
# compiles PATH (an A/B of the example's source, bench/ab/) instead of the example; KERNEL=NAME
# only that kernel of a file of several (tilec --kernel); COMPILER=PATH compiles with the tilec at
# PATH, a build of another commit (an A/B against it in the same run; absent: a "no PTX" row).
tile=${TILE_DIR:-dsl/examples}/$example${TILE_SUFFIX:-}.tile
for d in "$@"; do case $d in TILEC_*) envs+=("$d") ;; TILE=*) tile=${d#TILE=} ;; KERNEL=*) flags+=(--kernel "${d#KERNEL=}") ;;
  COMPILER=*) tilec=${d#COMPILER=} ;; *) flags+=(-D "$d") ;; esac; done

if [ ! -x "$tilec" ]; then
  echo "gen_ptx: $tilec not built" | tee "$err"
  exit 0
fi
if ! env "${envs[@]}" "$tilec" "$tile" --emit=ptx --arch=sm_90a "${flags[@]}" -o "$ptx.tmp" 2>"$err" ||
   [ ! -s "$ptx.tmp" ]; then
  echo "gen_ptx: $name: tilec failed: $(head -c 300 "$err" | head -3)"
  [ -s "$err" ] || echo "tilec produced no PTX" >"$err"
  rm -f "$ptx.tmp"
  exit 0
fi
mv "$ptx.tmp" "$ptx"
rm -f "$err"
if [ -x "$ptxas" ]; then
  if ! "$ptxas" -arch=sm_90a -v "$ptx" -o /dev/null >"$rep" 2>&1; then
    echo "gen_ptx: $name: ptxas rejects the PTX (see $rep)"
  fi
fi
exit 0
