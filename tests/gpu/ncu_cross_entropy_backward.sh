#!/usr/bin/env bash
# Nsight Compute on cross-entropy backward (issue 14's evidence): one launch of each bench PTX in
# NCU_XENTB_PTX (bench variant names; default the example's 2-stage kernel) at 4096 x 32000 (rows
# 16-byte aligned) and 4096 x 50257 (rows that start anywhere: the shifted loads and stores), f16:
# DRAM traffic, warp states, and the
# per-SASS-instruction stall samples of the misaligned shape ($OUT/ncu_xentb_sass.csv.gz).
# Clocks as the GPU has them (--clock-control none). Needs build/ from `make bench-prep`.
# Writes $OUT/ncu_xentb.csv (raw) and $OUT/ncu_xentb.txt (a summary).
set -u
cd "$(dirname "$0")/../.."
OUT=${OUT:?OUT must be set}
ncu=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
variants=${NCU_XENTB_PTX:-xentb_bn2048_w8}
# NCU_XENTB_N=32000: that shape only (a one-pass kernel bounds N); the SASS samples at NCU_XENTB_N too
shape=${NCU_XENTB_N:-both}
cat > "$OUT/ncu_xentb.py" <<'PY'
import sys, torch
sys.path.insert(0, "python")
import tilec
ks = [tilec.load_ptx(f"build/bench/ptx/{v}.ptx") for v in sys.argv[2:]]
cases = []
for M, N in [(4096, 32000), (4096, 50257)] if sys.argv[1] == "both" else [(4096, int(sys.argv[1]))]:
    x = torch.randn(M, N, device="cuda", dtype=torch.float16)
    label = torch.randint(0, N, (M,), device="cuda", dtype=torch.int32)
    dloss = torch.randn(M, device="cuda", dtype=torch.float32)
    loss, dx = torch.empty(M, device="cuda"), torch.empty_like(x)
    cases.append((x, label, dloss, loss, dx))
def run():
    for x, label, dloss, loss, dx in cases:
        for k in ks:
            k(x, label, dloss, loss, dx)
for _ in range(3):
    run()
torch.cuda.synchronize()
torch.cuda.cudart().cudaProfilerStart()
for x, label, dloss, loss, dx in cases:
    for k in ks:
        k(x, label, dloss, loss, dx)
torch.cuda.synchronize()
torch.cuda.cudart().cudaProfilerStop()
PY
timeout 150 "$ncu" --profile-from-start off --clock-control none --csv --print-units base \
  --kernel-name regex:'cross_entropy_backward' \
  --section SpeedOfLight --section WarpStateStats --section Occupancy --section LaunchStats --metrics \
gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_bytes.sum,smsp__inst_executed.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum,regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio,regex:sm__inst_executed_pipe_.*\.avg\.pct_of_peak_sustained_active,regex:sm__pipe_.*_cycles_active\.avg\.pct_of_peak_sustained_active \
   python3 "$OUT/ncu_xentb.py" $shape $variants > "$OUT/ncu_xentb.csv" 2> "$OUT/ncu_xentb.err"
echo "ncu exit $?"
python3 - "$OUT" $shape $variants <<'PY' | tee "$OUT/ncu_xentb.txt"
import sys
sys.path.insert(0, "tests/gpu")
from ncu_csv import print_memory_kernels
shapes = ("4096x32000", "4096x50257") if sys.argv[2] == "both" else (f"4096x{sys.argv[2]}",)
labels = [f"{v} {s}" for s in shapes for v in sys.argv[3:]]
print_memory_kernels(f"{sys.argv[1]}/ncu_xentb.csv", labels, "?")
PY
if [ "${NCU_XENTB_SASS:-1}" = 1 ]; then
  timeout 200 "$ncu" --profile-from-start off --clock-control none --kernel-name regex:'cross_entropy_backward' \
    --section SourceCounters --section WarpStateStats -o "$OUT/xentb_src" -f \
    python3 "$OUT/ncu_xentb.py" $([ "$shape" = both ] && echo 50257 || echo "$shape") ${variants%% *} >> "$OUT/ncu_xentb.err" 2>&1
  "$ncu" -i "$OUT/xentb_src.ncu-rep" --page source --csv --print-source sass 2>> "$OUT/ncu_xentb.err" \
    | gzip > "$OUT/ncu_xentb_sass.csv.gz"
  rm -f "$OUT/xentb_src.ncu-rep"
  echo "sass export: $(zcat "$OUT/ncu_xentb_sass.csv.gz" | wc -l) lines"
fi
