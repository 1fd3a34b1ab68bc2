#!/usr/bin/env bash
# PTX for bench/ab/skinny_parts.py (the M = 16 GEMM, issue 11): each variant of
# bench/ab/skinny_configs.txt through bench/gen_ptx.sh into build/skinny/ (NAME.ptx, NAME.ptxas);
# fails when one does not compile or spills. Run from the repository root after `make`.
set -eu
out=build/skinny configs=bench/ab/skinny_configs.txt
rm -rf "$out"
for name in $(awk '!/^#/ && NF { print $1 }' "$configs"); do
  CONFIGS=$configs bash bench/gen_ptx.sh "${TILEC:-build/tilec}" "$name" "$out"
  [ -f "$out/$name.ptx" ] || { echo "skinny_prep: no PTX for $name"; exit 1; }
  if grep -q '[1-9][0-9]* bytes spill stores' "$out/$name.ptxas" 2>/dev/null; then echo "skinny_prep: $name spills"; exit 1; fi
done
ls "$out"/*.ptx | wc -l
