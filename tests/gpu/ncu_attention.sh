#!/usr/bin/env bash
# Nsight Compute on attention (issue 12's evidence): one d128 launch (B=4, H=16, N=4096, f16,
# not causal) of the bench's attn_d128_c0_bn128 PTX (warp-specialized entry), against torch SDPA's
# cuDNN and flash backends in the same process: tensor pipe, throughput, and the warp states
# (why issue stalls). Clocks as the GPU has them (--clock-control none). Needs build/ from
# `make bench-prep`. Writes $OUT/ncu_attention.csv (raw) and $OUT/ncu_attention.txt (a summary).
# NCU_ATTN_SHAPE="B H N" profiles another shape (the short sequences: "32 16 512"), NCU_ATTN_D
# another head dimension (with an NCU_ATTN_PTX of that D). NCU_ATTN_SASS=1 also samples the tilec
# kernel per SASS instruction (stall reasons by instruction) into $OUT/ncu_attention_sass.csv.gz.
# NCU_ATTN_CAUSAL=1: the peers run causal too (give it the PTX of a CAUSAL=1 variant).
set -u
cd "$(dirname "$0")/../.."
OUT=${OUT:?OUT must be set}
ncu=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
ptx=${NCU_ATTN_PTX:-build/bench/ptx/attn_d128_c0_bn128.ptx}
shape=${NCU_ATTN_SHAPE:-4 16 4096}
D=${NCU_ATTN_D:-128}
causal=${NCU_ATTN_CAUSAL:-0}
cat > "$OUT/ncu_attention.py" <<'PY'
import sys, torch
import torch.nn.functional as F
from torch.nn.attention import sdpa_kernel, SDPBackend
sys.path.insert(0, "python")
import tilec
B, H, N, D, causal = (int(x) for x in sys.argv[2:7])
q, k, v = (torch.randn(B, H, N, D, device="cuda", dtype=torch.float16) for _ in range(3))
o = torch.empty_like(q)
attn = tilec.load_ptx(sys.argv[1])
scale = D ** -0.5
def peers():
    with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
        F.scaled_dot_product_attention(q, k, v, is_causal=bool(causal))
    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        F.scaled_dot_product_attention(q, k, v, is_causal=bool(causal))
for _ in range(3):
    attn(q, k, v, o, scale); peers()
torch.cuda.synchronize()
torch.cuda.cudart().cudaProfilerStart()
attn(q, k, v, o, scale)
peers()
torch.cuda.synchronize()
torch.cuda.cudart().cudaProfilerStop()
ref = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=bool(causal))
print("max abs err", (o.float() - ref).abs().max().item())
PY
timeout 240 "$ncu" --profile-from-start off --clock-control none --csv --print-units base \
  --section SpeedOfLight --section WarpStateStats --section Occupancy --metrics \
sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,gpu__time_duration.sum,\
sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active,sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active,\
sm__pipe_alu_cycles_active.avg.pct_of_peak_sustained_active,smsp__inst_executed.sum,smsp__issue_active.avg.pct_of_peak_sustained_active,\
sm__inst_executed_pipe_lsu.avg.pct_of_peak_sustained_active,regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio \
   python3 "$OUT/ncu_attention.py" "$ptx" $shape $D "$causal" > "$OUT/ncu_attention.csv" 2> "$OUT/ncu_attention.err"
echo "ncu exit $?"
python3 - "$OUT" $shape $D "$causal" <<'PY' | tee "$OUT/ncu_attention.txt"
import sys
sys.path.insert(0, "tests/gpu")
from ncu_csv import read
out = sys.argv[1]
k, names = read(f"{out}/ncu_attention.csv")
B, H, N, D, causal = (int(x) for x in sys.argv[2:7])
flops = 4 * B * H * N * N * D // (2 if causal else 1)
for i in sorted(k, key=int):
    m = k[i]
    t = m.get("gpu__time_duration.sum", 0) * 1e-3
    print(f"== {names[i]}: {t:.1f} us, {flops / t / 1e6 if t else 0:.1f} TFLOP/s, tensor pipe active "
          f"{m.get('sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active', -1):.1f} %")
    for name in ("sm__inst_executed_pipe_xu", "sm__pipe_fma_cycles_active", "sm__pipe_alu_cycles_active",
                 "sm__inst_executed_pipe_lsu", "smsp__issue_active"):
        print(f"   {name + ' % of peak':60s} {m.get(name + '.avg.pct_of_peak_sustained_active', -1):12.2f}")
    print(f"   {'instructions issued (warp)':60s} {m.get('smsp__inst_executed.sum', -1):12.0f}")
    for name, val in sorted(m.items()):
        if name.startswith("smsp__average_warps_issue_stalled") and val >= 0.05:
            print(f"   {name[34:-23]:60s} {val:12.2f}")
        elif name.startswith("Stall") or "Warp Cycles" in name or "Throughput" in name or "Occupancy" in name \
           or "Registers" in name or "Issued" in name or "Eligible" in name:
            print(f"   {name:60s} {val:12.2f}")
PY
if [ "${NCU_ATTN_SASS:-0}" = 1 ]; then
  timeout 240 "$ncu" --profile-from-start off --clock-control none --kernel-name regex:'^attention' \
    --section SourceCounters --section WarpStateStats -o "$OUT/attn_src" -f \
    python3 "$OUT/ncu_attention.py" "$ptx" $shape $D "$causal" >> "$OUT/ncu_attention.err" 2>&1
  "$ncu" -i "$OUT/attn_src.ncu-rep" --page source --csv --print-source sass 2>> "$OUT/ncu_attention.err" \
    | gzip > "$OUT/ncu_attention_sass.csv.gz"
  rm -f "$OUT/attn_src.ncu-rep"
  echo "sass export: $(zcat "$OUT/ncu_attention_sass.csv.gz" | wc -l) lines"
fi
