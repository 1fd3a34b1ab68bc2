#!/usr/bin/env bash
# bench/probe_prep.sh — PTX for bench/probe_rowops.py (run after `make bench-prep`, from the
# repository root): the launch-shape sweep of bench/probe_configs.txt (dsl/examples) and the
# variants of bench/probe_extra.txt (bench/probe/EXAMPLE_S.tile, S = the first field of the name).
set -u
tilec=${TILEC:-build/tilec}
out=build/bench/ptx
for v in $(awk '!/^#/ && NF {print $1}' bench/probe_configs.txt); do
  CONFIGS=bench/probe_configs.txt bash bench/gen_ptx.sh "$tilec" "$v" "$out"
done
for v in $(awk '!/^#/ && NF {print $1}' bench/probe_extra.txt); do
  CONFIGS=bench/probe_extra.txt TILE_DIR=bench/probe TILE_SUFFIX=_${v%%_*} bash bench/gen_ptx.sh "$tilec" "$v" "$out"
done
echo "probe_prep: $(ls $out | grep -c '\.ptx$') PTX files in $out"
