#!/usr/bin/env bash
# Nsight Compute on the GEMM (issue 11's evidence): one 4096^3 f16 launch of each entry point of the
# bench's gemm_128x256_k64_s4 PTX (the warp-specialized TMA one, then the cp.async one through
# TILERT_WS=0), against cuBLAS (torch.matmul) in the same process: tensor pipe, DRAM and L2 use, and the
# warp stall reasons per issued instruction.
# Clocks as the GPU has them (--clock-control none). Needs build/ from `make bench-prep`.
# Writes $OUT/ncu_gemm.csv (raw) and $OUT/ncu_gemm.txt (one line per kernel).
set -u
cd "$(dirname "$0")/../.."
OUT=${OUT:?OUT must be set}
ncu=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
ptx=${NCU_GEMM_PTX:-build/bench/ptx/gemm_128x256_k64_s4.ptx}
shape=${NCU_GEMM_SHAPE:-4096 4096 4096} # M N K (e.g. "16 8192 8192" with a gemm_skinny_* PTX)
cat > "$OUT/ncu_gemm.py" <<'PY'
import os, sys, torch
sys.path.insert(0, "python")
import tilec
m, n, k = (int(x) for x in sys.argv[2:5])
a = torch.randn(m, k, device="cuda", dtype=torch.float16) / 64
b = torch.randn(k, n, device="cuda", dtype=torch.float16)
bias = torch.randn(n, device="cuda", dtype=torch.float16)
c = torch.empty(m, n, device="cuda", dtype=torch.float16)
ws = tilec.load_ptx(sys.argv[1])
ws(a, b, bias, c)                       # the runtime picks the entry when the kernel is first made
os.environ["TILERT_WS"] = "0"
cp = tilec.load_ptx(sys.argv[1])
cp(a, b, bias, c)
for _ in range(3):                      # warm-up (module loads, tensor maps)
    ws(a, b, bias, c); cp(a, b, bias, c); torch.matmul(a, b)
torch.cuda.synchronize()
torch.cuda.cudart().cudaProfilerStart()
ws(a, b, bias, c)
cp(a, b, bias, c)
torch.matmul(a, b)
torch.cuda.synchronize()
torch.cuda.cudart().cudaProfilerStop()
ref = torch.relu(a.float() @ b.float() + bias.float())
print("max rel err", ((c.float() - ref).norm() / ref.norm()).item())
PY
timeout 200 "$ncu" --profile-from-start off --clock-control none --csv --print-units base --metrics \
gpu__time_duration.sum,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,sm__throughput.avg.pct_of_peak_sustained_elapsed,dram__throughput.avg.pct_of_peak_sustained_elapsed,lts__t_bytes.sum,dram__bytes_read.sum,sm__warps_active.avg.pct_of_peak_sustained_active,regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio \
  python3 "$OUT/ncu_gemm.py" "$ptx" $shape > "$OUT/ncu_gemm.csv" 2> "$OUT/ncu_gemm.err"
echo "ncu exit $?"
python3 - "$OUT" $shape <<'PY' | tee "$OUT/ncu_gemm.txt"
import sys
sys.path.insert(0, "tests/gpu")
from ncu_csv import read
out = sys.argv[1]
flop = 2 * int(sys.argv[2]) * int(sys.argv[3]) * int(sys.argv[4])
k, names = read(f"{out}/ncu_gemm.csv", 40)
print(f"{'kernel':40s} {'us':>8s} {'TFLOP/s':>8s} {'tensor %':>8s} {'SM %':>6s} {'dram %':>7s} {'L2 GB':>7s} {'DRAM rd GB':>10s}")
for i in sorted(k, key=int):
    m = k[i]
    t = m["gpu__time_duration.sum"] * 1e-3
    print(f"{names[i]:40s} {t:8.1f} {flop / t / 1e6:8.1f} "
          f"{m['sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active']:8.1f} "
          f"{m['sm__throughput.avg.pct_of_peak_sustained_elapsed']:6.1f} "
          f"{m['dram__throughput.avg.pct_of_peak_sustained_elapsed']:7.1f} {m['lts__t_bytes.sum'] / 1e9:7.2f} "
          f"{m['dram__bytes_read.sum'] / 1e9:10.2f}")
for i in sorted(k, key=int):  # why warps did not issue: stall cycles per issued instruction
    stalls = {n[34:-23]: v for n, v in k[i].items() if n.startswith("smsp__average_warps_issue_stalled") and v >= 0.05}
    print(f"  stalls per issue, {names[i]}: " + ", ".join(f"{n} {v:.2f}" for n, v in sorted(stalls.items(), key=lambda x: -x[1])))
PY
