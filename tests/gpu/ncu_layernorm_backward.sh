#!/usr/bin/env bash
# Nsight Compute on layernorm backward (issue 14's evidence): one launch (M=8192, N=4096, f16
# unless NCU_LNB_SHAPE="M N") of each bench PTX in NCU_LNB_PTX (bench variant names; default the
# example's best, the shared-memory sums of bench/ab, the row sums' barriers apart), against torch
# autograd's layernorm backward (its two kernels) in the same process; the zeroing of dW and dB is
# left out: DRAM throughput, L2 reduction traffic, warp states (why issue
# stalls). Clocks as the GPU has them (--clock-control none). Needs build/ from `make bench-prep`.
# Writes $OUT/ncu_layernorm_backward.csv (raw) and $OUT/ncu_layernorm_backward.txt (a summary);
# with NCU_LNB_SASS=1 also the per-SASS-instruction counts and stall samples of the first variant
# ($OUT/ncu_lnb_sass.csv.gz: where the instructions per element go).
set -u
cd "$(dirname "$0")/../.."
OUT=${OUT:?OUT must be set}
ncu=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
variants=${NCU_LNB_PTX:-lnb_n4096_r1c32w8_s4 lnbs_n4096_r2c16w8 lnb_n4096_r1c32w8_s4_nopair}
shape=${NCU_LNB_SHAPE:-8192 4096}
cat > "$OUT/ncu_lnb.py" <<'PY'
import sys, torch
sys.path.insert(0, "python")
import tilec
M, N = int(sys.argv[1]), int(sys.argv[2])
ks = [tilec.load_ptx(f"build/bench/ptx/{v}.ptx") for v in sys.argv[3:]]
x = torch.randn(M, N, device="cuda", dtype=torch.float16) * 2
w, b = torch.randn(N, device="cuda", dtype=torch.float16), torch.randn(N, device="cuda", dtype=torch.float16)
dy = torch.randn(M, N, device="cuda", dtype=torch.float16)
xf = x.float()
mean, rstd = xf.mean(-1), torch.rsqrt(xf.var(-1, unbiased=False) + 1e-5)
dx, dw, db = torch.empty_like(x), torch.zeros(N, device="cuda"), torch.zeros(N, device="cuda")
xr = x.detach().requires_grad_(True)
wr, br = w.detach().requires_grad_(True), b.detach().requires_grad_(True)
y = torch.nn.functional.layer_norm(xr, (N,), wr, br)
def peer():
    torch.autograd.grad(y, (xr, wr, br), dy, retain_graph=True)
for _ in range(3):
    for k in ks:
        k(x, w, mean, rstd, dy, dx, dw, db)
    peer()
torch.cuda.synchronize()
torch.cuda.cudart().cudaProfilerStart()
for k in ks:
    dw.zero_(); db.zero_()
    k(x, w, mean, rstd, dy, dx, dw, db)
peer()
torch.cuda.synchronize()
torch.cuda.cudart().cudaProfilerStop()
PY
timeout 200 "$ncu" --profile-from-start off --clock-control none --csv --print-units base \
  --kernel-name regex:'layernorm_backward|layer_norm|GammaBeta' \
  --section SpeedOfLight --section WarpStateStats --section Occupancy --section LaunchStats --metrics \
gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sectors_op_red.sum,lts__t_sectors_op_atom.sum,smsp__inst_executed.sum,regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio \
   python3 "$OUT/ncu_lnb.py" $shape $variants > "$OUT/ncu_layernorm_backward.csv" 2> "$OUT/ncu_layernorm_backward.err"
echo "ncu exit $?"
python3 - "$OUT" $variants <<'PY' | tee "$OUT/ncu_layernorm_backward.txt"
import sys
sys.path.insert(0, "tests/gpu")
from ncu_csv import print_memory_kernels
print_memory_kernels(f"{sys.argv[1]}/ncu_layernorm_backward.csv", sys.argv[2:], "torch")
PY
if [ "${NCU_LNB_SASS:-0}" = 1 ]; then
  timeout 200 "$ncu" --profile-from-start off --clock-control none --kernel-name regex:'layernorm_backward' \
    --section SourceCounters --section WarpStateStats -o "$OUT/lnb_src" -f \
    python3 "$OUT/ncu_lnb.py" $shape ${variants%% *} >> "$OUT/ncu_layernorm_backward.err" 2>&1
  "$ncu" -i "$OUT/lnb_src.ncu-rep" --page source --csv --print-source sass 2>> "$OUT/ncu_layernorm_backward.err" \
    | gzip > "$OUT/ncu_lnb_sass.csv.gz"
  rm -f "$OUT/lnb_src.ncu-rep"
  echo "sass export: $(zcat "$OUT/ncu_lnb_sass.csv.gz" | wc -l) lines"
fi
