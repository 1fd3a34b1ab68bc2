#!/usr/bin/env bash
# tests/check_bench.sh — what of the benchmark can be checked without a GPU (< 60 s):
#   1. the hand-written CUDA baselines compile (nvcc, sm_90a) into build/bench/libbaselines.so,
#      with no register spills on the paths the benchmark uses (skipped without nvcc);
#   2. bench/run.py's ctypes mirrors of runtime/tilert.h have the C layout (gcc vs --abi);
#   3. the baselines' C API answers a bad shape with an error, not a crash (ctypes, no GPU needed);
#   4. `python3 bench/run.py --dry-run` lists the plan;
#   5. bench/chart.py and the table code turn a fixture JSON into well-formed SVG and markdown;
#   6. the GEMM / attention baselines' fragment and shared-memory index arithmetic, replayed with
#      per-lane models of ldmatrix and mma.sync, matches numpy (skipped without numpy);
#   7. with a CPU torch (python3-torch), the whole driver runs on toy sizes, including recovery
#      from a worker that crashes in a row and one that hangs (skipped without torch);
#   8. the attention family's accuracy rule (FlashAttention-3's, per output tensor; per-row figures
#      recorded: bench/tools/check_fa3_rule.py)
#      on synthetic numpy arrays, and with torch the worker's check path on CPU toy cases (skipped
#      without numpy).
set -euo pipefail
cd "$(dirname "$0")/.."
B=${B:-build}
CUDA=${CUDA:-/usr/local/cuda}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "check_bench: FAIL: $*"; exit 1; }

# 1. baselines
if [ -x "$CUDA/bin/nvcc" ]; then
  make --no-print-directory -s B="$B" "$B/bench/libbaselines.so" >/dev/null || fail "baselines do not build"
  nm -D "$B/bench/libbaselines.so" >"$tmp/syms"
  for f in vadd_f32 softmax rmsnorm layernorm add_rmsnorm gemm attention last_error; do
    grep -q " T bl_$f\$" "$tmp/syms" || fail "bl_$f not exported"
  done
  # spills: the attention and GEMM kernels must keep everything in registers
  for cu in attention gemm; do
    "$CUDA/bin/nvcc" -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -Ibench/baselines -Xptxas -v \
      -c "bench/baselines/$cu.cu" -o "$tmp/$cu.o" 2>"$tmp/$cu.log" || fail "$cu.cu does not compile"
    if grep -E "[1-9][0-9]* bytes spill stores" "$tmp/$cu.log"; then fail "$cu.cu spills registers"; fi
  done
  echo "check_bench: baselines build, no spills in attention/gemm"
else
  echo "check_bench: SKIP baselines (no nvcc at $CUDA/bin/nvcc)"
fi

# 2. ctypes layout == C layout
${CC:-gcc} -std=c11 -Wall -Wextra -Werror -Iruntime bench/tools/abi.c -o "$tmp/abi"
diff <("$tmp/abi") <(python3 bench/run.py --abi) || fail "ctypes mirrors in bench/run.py differ from runtime/tilert.h"
echo "check_bench: ctypes layout matches runtime/tilert.h"

# 3. the C API fails soft
if [ -f "$B/bench/libbaselines.so" ]; then
  python3 - "$B/bench/libbaselines.so" <<'PY' || fail "baseline API did not reject a bad shape"
import sys, ctypes as C
lib = C.CDLL(sys.argv[1]); lib.bl_last_error.restype = C.c_char_p
lib.bl_softmax.argtypes = [C.c_int, C.c_void_p, C.c_void_p, C.c_int64, C.c_int64, C.c_void_p]
lib.bl_gemm.argtypes = [C.c_int, C.c_void_p, C.c_void_p, C.c_void_p, C.c_void_p, C.c_int64, C.c_int64, C.c_int64, C.c_int, C.c_void_p]
lib.bl_attention.argtypes = [C.c_int, C.c_void_p, C.c_void_p, C.c_void_p, C.c_void_p, C.c_int64, C.c_int64, C.c_int64, C.c_int64, C.c_float, C.c_int, C.c_void_p]
assert lib.bl_softmax(0, None, None, 4, 7, None) == -1 and b"N % 8" in lib.bl_last_error()
assert lib.bl_gemm(0, None, None, None, None, 16, 16, 40, 1, None) == -1 and b"K % 64" in lib.bl_last_error()
assert lib.bl_attention(0, None, None, None, None, 1, 1, 64, 96, 0.1, 0, None) == -1 and b"64 or 128" in lib.bl_last_error()
PY
  echo "check_bench: baseline API rejects unsupported shapes"
fi

# 4. dry run
python3 bench/run.py --dry-run >"$tmp/plan.txt" || fail "run.py --dry-run"
grep -q "^rows: " "$tmp/plan.txt" || fail "dry run printed no row count"
grep -q "attention|B=1,H=16,N=16384,D=128|bf16|1" "$tmp/plan.txt" || fail "plan lacks the 16k causal hdim-128 bf16 attention case"
echo "check_bench: dry run: $(grep '^rows: ' "$tmp/plan.txt")"
# every bf16 and f16 case has tilec variants, each compiled for the case's dtype (T=... in configs)
grep -Eq "^  softmax\|M=16384,N=1024\|bf16\|0 .* tilec:softmax_bf16_" "$tmp/plan.txt" || fail "plan lacks tilec for bf16 softmax"
python3 - <<'PY' || fail "tilec variants and case dtypes disagree"
import sys
sys.path.insert(0, "bench")
import run
configs = run.read_configs()
plan = run.make_plan()
for c in plan:
    impls, absent = run.impls_for(c, configs)
    vs = [v for i, v in impls if i == "tilec"]
    assert vs, f"no tilec variant for {run.case_key(c)}: {absent}"
    for name in vs:
        v = next(x for x in configs if x["name"] == name)
        assert v["dtype"] == c["dtype"], f"{name} ({v['dtype']}) serves {run.case_key(c)}"
# the bench set names variants of configs.txt and serves every case of the plan by itself
names = run.read_bench_set()
known = {v["name"] for v in configs}
assert names and names <= known, f"bench_set.txt names unknown variants: {sorted(names - known)}"
in_set = [v for v in configs if v["name"] in names]
for c in plan:
    impls, _ = run.impls_for(c, in_set)
    assert any(i == "tilec" for i, v in impls), f"the bench set has no variant for {run.case_key(c)}"
assert run.variant_dtype("softmax", {"T": "bf16"}) == "bf16"
assert run.variant_dtype("softmax", {}) == "f16" and run.variant_dtype("vadd", {}) == "f32"
PY
echo "check_bench: every f16/bf16 case has tilec variants of its dtype, in the bench set too"

# 5. charts and tables from a fixture
python3 bench/chart.py bench/fixtures/sample_results.json --out "$tmp/charts" >/dev/null
python3 - "$tmp/charts" <<'PY' || fail "charts or tables"
import json, sys, xml.dom.minidom as md
sys.path.insert(0, "bench")
import run
for f in ("bars.svg", "roofline.svg"):
    doc = md.parse(f"{sys.argv[1]}/{f}")
    assert doc.documentElement.tagName == "svg"
    assert len(doc.getElementsByTagName("rect")) > 5 or f == "roofline.svg"
res = json.load(open("bench/fixtures/sample_results.json"))
t = run.render_tables(res)
assert "## attention" in t and "✗ failed-check" in t, t
# the attention family's sections show FA3's ratio and, as information, the rows over 2x (a row
# with some passes: the rule is per tensor); a failed row names the rule it broke
sec = t.split("## attention_backward")[1].split("\n## ")[0]
assert "err / lowp | rows > 2x |" in sec and "| 3.10 | 12 (5.20x) | ✗ failed-check (fa3) |" in sec, sec
assert "| 1.40 | 3 (4.20x) | ✓ |" in sec, sec
assert "err / lowp" not in t.split("## gemm")[1].split("\n## ")[0]
assert "✗ failed-check (rel) |" in t, t
fails = t.split("## Rows that failed")[1]
assert "attention_backward B16 H32 N1024 D64 causal bf16 tilec attnb_bf16_d64_c1_split: failed-check (fa3): [fa3] dQ: " \
    "max err 0.093 > 2 x" in fails and "12 of 524288 rows over 2x" in fails, fails
s = run.summary(res)
assert "x0.30" in s, s
# best.md: a line per case, our fastest verified variant against the fastest peer (a case whose
# tilec rows all failed shows ✗ and no ratios)
b = run.render_best(res)
assert "| softmax | 16384x1024 | f16 | 0.0250 (`softmax_n1024_r4w8`) | 0.0350 (torch) | 1.40 | 0.88 |" in b, b
assert "| gemm | 4096x4096x4096 | f16 | ✗ |" in b, b
PY
echo "check_bench: charts, tables and best.md render"

# 5b. A/B ratios (bench/tools/ab.py): a suffix against its base in the same run, verified rows
# only, the longer suffix (_fanr) not read as the shorter (_nr)
python3 - "$tmp/ab.json" <<'PY'
import json, sys
def row(v, ms, ok=True, n=4096):
    return {"kernel": "k", "shape": {"N": n}, "dtype": "f16", "causal": None, "impl": "tilec",
            "variant": v, "median_ms": ms, "verified": ok}
rows = [row("a", 2.0), row("a_nr", 1.0), row("a_fa", 4.0), row("a_fanr", 8.0), row("a", 3.0, n=8),
        row("a_nr", 1.0, ok=False, n=8), row("b_nr", 1.0)]
json.dump({"gpu": "G", "commit": "c", "date": "d", "rows": rows}, open(sys.argv[1], "w"))
PY
python3 bench/tools/ab.py "$tmp/ab.json" _nr _fanr >"$tmp/ab.txt" || fail "bench/tools/ab.py"
grep -q "^_nr  *2.000  (1 cases)" "$tmp/ab.txt" && grep -q "^_fanr  *0.250  (1 cases)" "$tmp/ab.txt" ||
  { cat "$tmp/ab.txt"; fail "bench/tools/ab.py ratios"; }
# ^PREFIX: a variant against the fastest variant of bench/bench_set.txt on its case (a faster
# variant outside the set is no base)
python3 - "$tmp/abset.json" <<'PY'
import json, sys
def row(v, ms, n=4096):
    return {"kernel": "k", "shape": {"N": n}, "dtype": "f16", "causal": None, "impl": "tilec",
            "variant": v, "median_ms": ms, "verified": True}
rows = [row("xentb_win_bn50264_c4096_w16", 4.0), row("xentb_win_bn50264_c8192_w16", 3.0),
        row("a_nr", 0.5), row("zz_one", 1.5)]
json.dump({"gpu": "G", "commit": "c", "date": "d", "rows": rows}, open(sys.argv[1], "w"))
PY
python3 bench/tools/ab.py "$tmp/abset.json" '^zz_' >"$tmp/abset.txt" || fail "bench/tools/ab.py ^PREFIX"
grep -q "^\^zz_  *2.000  (1 cases)" "$tmp/abset.txt" || { cat "$tmp/abset.txt"; fail "bench/tools/ab.py ^PREFIX ratios"; }
echo "check_bench: A/B ratios"

# 6. the baselines' ldmatrix / mma.sync fragment and shared-memory index arithmetic, replayed on
#    the CPU against numpy (bench/tools/emulate_mma.py; skipped without numpy)
NPY=""
for p in python3 /usr/bin/python3; do
  if "$p" -c "import numpy" 2>/dev/null; then NPY=$p; break; fi
done
if [ -n "$NPY" ]; then
  "$NPY" bench/tools/emulate_mma.py >"$tmp/emu.log" 2>&1 || { cat "$tmp/emu.log"; fail "mma emulation of the baselines"; }
  echo "check_bench: GEMM and attention fragment arithmetic agrees with numpy (emulated)"
else
  echo "check_bench: SKIP mma emulation (no numpy)"
fi

# 7. the driver end to end on CPU torch, with a crash and a hang injected
PY3=""
for p in python3 /usr/bin/python3; do
  if "$p" -c "import torch" 2>/dev/null; then PY3=$p; break; fi
done
if [ -n "$PY3" ]; then
  BENCH_FAULT_CRASH="softmax|M=64,N=1024|f32|0|torch" BENCH_FAULT_HANG="layernorm|M=64,N=1024|f32|0|torch" \
    timeout 120 "$PY3" bench/run.py --smoke-cpu --out "$tmp/smoke" --budget 60 --row-timeout 6 >"$tmp/smoke.log" 2>&1 ||
    { tail -20 "$tmp/smoke.log"; fail "smoke run"; }
  "$PY3" - "$tmp/smoke" <<'PY' || { tail -30 "$tmp/smoke.log"; fail "smoke results"; }
import json, sys, os
d = sys.argv[1]
for f in ("latest.json", "table.md", "bars.svg", "roofline.svg"):
    assert os.path.exists(os.path.join(d, f)), f
r = json.load(open(os.path.join(d, "latest.json")))
st = {(x["kernel"], x["impl"]): x for x in r["rows"]}
assert st[("softmax", "torch")]["status"] == "crashed" and not st[("softmax", "torch")]["verified"]
assert st[("layernorm", "torch")]["status"] == "timeout"
assert st[("vadd", "torch")]["verified"] and st[("vadd", "torch")]["median_ms"] > 0, st[("vadd", "torch")]
assert st[("gemm", "cublas")]["verified"], st[("gemm", "cublas")]   # rows after the crash and the hang ran
assert all(x["status"] != "not-run" for x in r["rows"]), [x for x in r["rows"] if x["status"] == "not-run"]
# the attention cases' setup (float32 reference, the low-precision baseline of FA3's rule) ran
assert not [x for x in r["rows"] if (x.get("error") or "").startswith("setup:")], \
    [x["error"] for x in r["rows"] if (x.get("error") or "").startswith("setup:")]
assert r["ceilings"]["copy_gbps"] > 0
for k in ("commit", "date", "gpu", "driver", "ceilings", "rows"):
    assert k in r, k
PY
  echo "check_bench: CPU smoke run recovered from a crash and a hang ($PY3)"
else
  echo "check_bench: SKIP CPU smoke run (no torch for python3; apt-get install python3-torch)"
fi
# 8. FlashAttention-3's rule (numpy; with torch too, the worker's low-precision baseline
#    and check() on CPU)
if [ -n "$NPY" ]; then
  "$NPY" bench/tools/check_fa3_rule.py >"$tmp/fa3.log" 2>&1 || { cat "$tmp/fa3.log"; fail "the attention family's FA3 rule"; }
  grep "^check_fa3_rule:" "$tmp/fa3.log" | sed 's/^check_fa3_rule/check_bench/'
else
  echo "check_bench: SKIP the FA3 rule's check (no numpy)"
fi
echo "check_bench: all passed"
