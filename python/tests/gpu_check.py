"""GPU check of the Python package (on the H200 machine; `make python-dist` here first so that
python/tilec/lib holds libtilert.so and the self-contained libtilec.so):

    python3 python/tests/gpu_check.py --out $OUT      # ~2-3 minutes

Writes $OUT/python_gpu.json (and prints it): date, commit, GPU, and per section
  correctness  the examples through the package on torch tensors vs torch references (f32 math),
               a non-default stream, cupy (when installed), torch.compile over tilec.torch.custom_op;
  launch_us    host microseconds per call (median of rounds of 2000 calls after warm-up): k(...)
               vs a Triton kernel launch vs torch.add of the same size, and the ctypes floor;
  compile_ms   tilec cold (empty JIT cache) and warm (cache hit, fresh process) vs Triton's,
               each first call in its own process;
  tune         autotune wall time over >= 24 candidates (attention, GEMM), pruned counts, and the
               winner's time vs the best of every candidate timed without pruning.
Each section records its error instead of stopping the script.
"""
import argparse
import datetime
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "python"))
EX = os.path.join(ROOT, "dsl", "examples")

TRITON_SRC = '''
import triton, triton.language as tl
@triton.jit
def add_kernel(x, y, z, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(z + offs, tl.load(x + offs, mask=m) + tl.load(y + offs, mask=m), mask=m)
@triton.jit
def softmax_kernel(x, y, stride, n, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    v = tl.load(x + row * stride + offs, mask=offs < n, other=-float("inf")).to(tl.float32)
    e = tl.exp(v - tl.max(v, 0))
    tl.store(y + row * stride + offs, (e / tl.sum(e, 0)).to(y.dtype.element_ty), mask=offs < n)
'''


def triton_module():
    """TRITON_SRC as an imported module: triton.jit reads its functions' source from a file."""
    import importlib.util
    path = os.path.join(tempfile.mkdtemp(prefix="tilec-triton-"), "tilec_triton_kernels.py")
    with open(path, "w") as f:
        f.write(TRITON_SRC)
    spec = importlib.util.spec_from_file_location("tilec_triton_kernels", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def rel_err(out, ref):
    import torch
    out, ref = out.double(), ref.double()
    if not torch.isfinite(out).all():
        return float("nan")
    return float((out - ref).norm() / max(ref.norm(), 1e-30))


def section(results, name, fn):
    t0 = time.time()
    try:
        results[name] = fn()
    except Exception:
        results[name] = {"error": traceback.format_exc()}
    results.setdefault("section_s", {})[name] = round(time.time() - t0, 2)
    print("== %s (%.1f s)" % (name, time.time() - t0), file=sys.stderr, flush=True)


# ------------------------------------------------------------------ correctness

def correctness():
    import torch
    import tilec
    import tilec.torch
    torch.manual_seed(0)
    dev = "cuda"
    rows = []

    def check(name, out, ref, tol):
        e = rel_err(out, ref)
        rows.append({"case": name, "rel_err": e, "tol": tol, "ok": e <= tol})

    r = lambda *s, dt=torch.float16: torch.randn(*s, device=dev, dtype=torch.float32).to(dt)
    # vadd, ragged
    k = tilec.load(os.path.join(EX, "vadd.tile"))
    a, b = r(1000003, dt=torch.float32), r(1000003, dt=torch.float32)
    c = torch.full_like(a, float("nan"))
    k(a, b, c)
    torch.cuda.synchronize()
    check("vadd f32 1000003", c, a + b, 1e-6)
    # softmax f16 / bf16, ragged rows
    for dt, T in ((torch.float16, "f16"), (torch.bfloat16, "bf16")):
        k = tilec.load(os.path.join(EX, "softmax.tile"), T=T, BLOCK=4096)
        x = r(1000, 4000, dt=dt)
        y = torch.full_like(x, float("nan"))
        k(x, y)
        torch.cuda.synchronize()
        check("softmax %s 1000x4000" % T, y, torch.softmax(x.float(), -1), 1e-2)
    # softmax on a strided view and a non-default stream
    k = tilec.load(os.path.join(EX, "softmax.tile"), T="f16", BLOCK=1024)
    base = r(512, 1200)
    x = base[:, 100:1100]
    y = torch.empty(512, 1000, device=dev, dtype=torch.float16)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        k(x, y)
    s.synchronize()
    check("softmax f16 strided view, side stream", y, torch.softmax(x.float(), -1), 1e-2)
    # rmsnorm bf16, layernorm f16
    k = tilec.load(os.path.join(EX, "rmsnorm.tile"), T="bf16", BLOCK=4096)
    x, w = r(512, 3000, dt=torch.bfloat16), r(3000, dt=torch.bfloat16)
    y = torch.empty_like(x)
    k(x, w, y, eps=1e-6)
    torch.cuda.synchronize()
    xf = x.float()
    check("rmsnorm bf16 512x3000", y, xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6) * w.float(), 1e-2)
    k = tilec.load(os.path.join(EX, "layernorm.tile"), T="f16", BLOCK=1024)
    x, w, bb = r(513, 1024), r(1024), r(1024)
    y = torch.empty_like(x)
    k(x, w, bb, y, 1e-5)
    torch.cuda.synchronize()
    check("layernorm f16 513x1024", y, torch.nn.functional.layer_norm(
        x.float(), (1024,), w.float(), bb.float(), 1e-5), 1e-2)
    # add_rmsnorm: R is read and overwritten
    k = tilec.load(os.path.join(EX, "add_rmsnorm.tile"), T="f16", BLOCK=2048)
    x, res, w = r(300, 2000), r(300, 2000), r(2000)
    h = x.float() + res.float()
    y = torch.empty_like(x)
    k(x, res, w, y, eps=1e-5)
    torch.cuda.synchronize()
    check("add_rmsnorm f16 residual", res, h, 1e-2)
    check("add_rmsnorm f16 y", y, h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-5) * w.float(), 1e-2)
    # cross entropy with ignored labels
    k = tilec.load(os.path.join(EX, "cross_entropy.tile"), T="f16")
    x = r(256, 5000)
    lab = torch.randint(0, 5000, (256,), device=dev, dtype=torch.int32)
    lab[::7] = -100
    loss = torch.empty(256, device=dev, dtype=torch.float32)
    k(x, lab, loss)
    torch.cuda.synchronize()
    ref = torch.nn.functional.cross_entropy(x.float(), lab.long(), reduction="none", ignore_index=-100)
    check("cross_entropy f16 256x5000", loss, ref, 1e-3)
    # gemm + bias + relu, ragged M and N
    k = tilec.load(os.path.join(EX, "gemm.tile"), T="f16", BM=128, BN=128, BK=64, WARPS=8, STAGES=3, ACT=1)
    A, B, bias = r(1000, 512), r(512, 1030), r(1030)
    C = torch.empty(1000, 1030, device=dev, dtype=torch.float16)
    k(A, B, bias, C)
    torch.cuda.synchronize()
    check("gemm f16 1000x1030x512 +bias relu", C, torch.relu(A.float() @ B.float() + bias.float()), 1e-2)
    # attention d64, causal and not
    for causal in (0, 1):
        k = tilec.load(os.path.join(EX, "attention.tile"), T="f16", D=64, CAUSAL=causal)
        q, kk, v = r(2, 4, 1000, 64), r(2, 4, 1000, 64), r(2, 4, 1000, 64)
        o = torch.empty_like(q)
        k(q, kk, v, o, scale=0.125)
        torch.cuda.synchronize()
        ref = torch.nn.functional.scaled_dot_product_attention(q.float(), kk.float(), v.float(),
                                                              is_causal=bool(causal), scale=0.125)
        check("attention f16 d64 causal=%d" % causal, o, ref, 1e-2)
    # torch.compile over the custom op
    sm = tilec.torch.custom_op(tilec.load(os.path.join(EX, "softmax.tile"), T="f16", BLOCK=1024),
                               "tilec_test::softmax")
    f = torch.compile(lambda x: sm(x * 2) + 1, fullgraph=True)
    x = r(64, 1000)
    y = f(x)
    torch.cuda.synchronize()
    check("torch.compile(softmax custom_op)", y, torch.softmax(2 * x.half().float(), -1) + 1, 1e-2)
    # cupy without torch
    try:
        import cupy
    except ImportError:
        cupy = None
    if cupy is not None:
        k = tilec.load(os.path.join(EX, "vadd.tile"))
        a, b = cupy.random.randn(50000, dtype=cupy.float32), cupy.random.randn(50000, dtype=cupy.float32)
        c = cupy.zeros_like(a)
        k(a, b, c)
        cupy.cuda.get_current_stream().synchronize()
        rows.append({"case": "vadd cupy", "rel_err": float(cupy.abs(c - (a + b)).max()), "tol": 0,
                     "ok": bool(cupy.all(c == a + b))})
    # errors through the package on the GPU
    try:
        tilec.load(os.path.join(EX, "softmax.tile"), T="f16", BLOCK=1024)(r(4, 2000), r(4, 2000))
        rows.append({"case": "require error raised", "ok": False})
    except tilec.ShapeError as e:
        rows.append({"case": "require error raised", "ok": "N <= BLOCK" in str(e)})
    return {"cases": rows, "all_ok": all(x["ok"] for x in rows)}


# ------------------------------------------------------------------ launch overhead

def host_us(fn, n=2000, rounds=7):
    import torch
    for _ in range(300):
        fn()
    torch.cuda.synchronize()
    res = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        t1 = time.perf_counter()
        torch.cuda.synchronize()
        res.append((t1 - t0) / n * 1e6)
    return statistics.median(res)


def launch_overhead():
    import torch
    import tilec
    from tilec import _kernel, _lib
    add_kernel = triton_module().add_kernel
    n = 4096
    x, y, z = (torch.randn(n, device="cuda") for _ in range(3))
    k = tilec.load(os.path.join(EX, "vadd.tile"))
    k(x, y, z)
    k(x, y, z)
    plan = next(iter(k._plans.values()))
    rt = _lib.runtime()
    stream = plan.wrap(torch.cuda.current_stream().cuda_stream)
    for i, get in plan.getters:
        plan.ptrs[i] = get((x, y, z)[i])
    out = {"shape": [n], "dtype": "f32", "calls_per_round": 2000}
    out["tilec_k_call_us"] = host_us(lambda: k(x, y, z))
    out["tilec_k_call_kw_us"] = host_us(lambda: k(X=x, Y=y, Z=z))
    out["tilec_ctypes_floor_us"] = host_us(
        lambda: rt.plan_launch_fast(plan.handle, plan.ptrs, None, stream, plan.errp))
    out["triton_launch_us"] = host_us(lambda: add_kernel[(1,)](x, y, z, n, BLOCK=4096))
    out["torch_add_us"] = host_us(lambda: torch.add(x, y, out=z))
    torch.cuda.synchronize()
    out["tilec_result_ok"] = bool(torch.equal(z, x + y))
    return out


# ------------------------------------------------------------------ compile time

COLD_TILEC = '''
import json, sys, time
sys.path.insert(0, %(py)r)
import torch, tilec
args = %(args)s
torch.cuda.synchronize()
arch = tilec.default_arch()    # the driver and the library are loaded outside the timed region
tilec.compiler_version()
t0 = time.perf_counter()
k = tilec.load(%(path)r, arch=arch, **%(defs)r)
t1 = time.perf_counter()
k(*args)
torch.cuda.synchronize()
t2 = time.perf_counter()
print(json.dumps(dict(load_ms=(t1 - t0) * 1e3, first_call_ms=(t2 - t0) * 1e3, stats=tilec.stats)))
'''
COLD_TRITON = '''
import json, time, torch
%(src)s
x = torch.randn(1000, 4000, device="cuda", dtype=torch.float16)
y = torch.empty_like(x)
torch.cuda.synchronize()
t0 = time.perf_counter()
softmax_kernel[(1000,)](x, y, x.stride(0), 4000, BLOCK=4096)
torch.cuda.synchronize()
print(json.dumps(dict(ms=(time.perf_counter() - t0) * 1e3)))
'''


def _sub(code, env):
    """Runs code as a script file in a fresh process (triton.jit needs a file to read)."""
    path = os.path.join(tempfile.mkdtemp(prefix="tilec-sub-"), "sub.py")
    with open(path, "w") as f:
        f.write(code)
    r = subprocess.run([sys.executable, path], capture_output=True, text=True,
                       env=dict(os.environ, **env), timeout=300)
    if r.returncode:
        raise RuntimeError(r.stderr[-3000:])
    return json.loads(r.stdout.strip().splitlines()[-1])


def compile_times():
    out = {}
    py = os.path.join(ROOT, "python")
    f16 = 'torch.randn(%s, device="cuda", dtype=torch.float16)'
    cases = (("softmax f16 BLOCK=4096", "softmax.tile", {"T": "f16", "BLOCK": 4096},
              "(%s, %s)" % (f16 % "1000, 4000", f16 % "1000, 4000")),
             ("attention f16 d128", "attention.tile",
              {"T": "f16", "D": 128, "BM": 128, "BN": 64, "WARPS": 8, "STAGES": 2},
              "(%s, %s, %s, %s, 0.088)" % ((f16 % "2, 8, 1024, 128",) * 4)))
    for name, path, defs, args in cases:
        cache = tempfile.mkdtemp(prefix="tilec-cold-")
        code = COLD_TILEC % dict(py=py, path=os.path.join(EX, path), defs=defs, args=args)
        cold = _sub(code, {"TILEC_CACHE_DIR": cache})
        warm = _sub(code, {"TILEC_CACHE_DIR": cache, "TILEC_NO_COMPILE": "1"})
        out["tilec " + name] = {"cold_load_ms": cold["load_ms"], "cold_first_call_ms": cold["first_call_ms"],
                                "warm_load_ms": warm["load_ms"], "warm_first_call_ms": warm["first_call_ms"],
                                "warm_compiles": warm["stats"]["compiles"]}
    tcache = tempfile.mkdtemp(prefix="triton-cold-")
    code = COLD_TRITON % dict(src=TRITON_SRC)
    cold = _sub(code, {"TRITON_CACHE_DIR": tcache})
    warm = _sub(code, {"TRITON_CACHE_DIR": tcache})
    out["triton softmax f16 BLOCK=4096"] = {"cold_first_call_ms": cold["ms"],
                                              "warm_first_call_ms": warm["ms"]}
    return out


# ------------------------------------------------------------------ tuning

def _tune(path, space, key, defines, args, label):
    import tilec
    from tilec import _tune
    t0 = time.perf_counter()
    tuned = tilec.autotune(path, space=space, key=key, defines=defines, reps=10, warmup=2)
    win = tuned.best(*args)
    wall = time.perf_counter() - t0
    rec = list(tuned.records.values())[0]
    # every candidate that compiled, timed without pruning: the exhaustive best
    allc = _tune.compile_all(open(path, "rb").read(), path, defines, _tune.candidates(space),
                             win.arch)
    best = None
    for c in allc:
        if c.kernel is None:
            continue
        try:
            ms = _tune.time_kernel(c.kernel, args, 10, 2)
        except tilec.TilecError:
            continue
        if best is None or ms < best[0]:
            best = (ms, c.config)
    win_ms = _tune.time_kernel(win, args, 10, 2)
    reasons = {}
    for c in rec["candidates"]:
        r = (c["reason"] or "timed").split(":")[0]
        reasons[r] = reasons.get(r, 0) + 1
    return {"label": label, "candidates": len(rec["candidates"]), "outcomes": reasons,
            "tune_wall_s": wall, "compile_s": rec["compile_s"], "winner": rec["config"],
            "winner_ms": win_ms, "exhaustive_best_ms": best[0] if best else None,
            "exhaustive_best": best[1] if best else None,
            "winner_over_best": win_ms / best[0] if best else None}


def tuning():
    import torch
    cache = tempfile.mkdtemp(prefix="tilec-tune-")
    os.environ["TILEC_CACHE_DIR"] = cache
    out = []
    B, H, N, D = 4, 16, 2048, 64
    q, k, v = (torch.randn(B, H, N, D, device="cuda", dtype=torch.float16) for _ in range(3))
    o = torch.empty_like(q)
    out.append(_tune(os.path.join(EX, "attention.tile"),
                     {"BM": [64, 128], "BN": [32, 64, 128], "WARPS": [4, 8], "STAGES": [2, 3]},
                     ["N"], {"T": "f16", "D": D}, (q, k, v, o, 1 / math.sqrt(D)),
                     "attention f16 d64 %dx%dx%d" % (B, H, N)))
    M = Nn = K = 4096
    A = torch.randn(M, K, device="cuda", dtype=torch.float16)
    Bm = torch.randn(K, Nn, device="cuda", dtype=torch.float16)
    bias = torch.randn(Nn, device="cuda", dtype=torch.float16)
    C = torch.empty(M, Nn, device="cuda", dtype=torch.float16)
    out.append(_tune(os.path.join(EX, "gemm.tile"),
                     {"BM": [64, 128], "BN": [64, 128, 256], "BK": [32, 64], "WARPS": [4, 8],
                      "STAGES": [3, 4]}, ["M", "N", "K"], {"T": "f16", "ACT": 0},
                     (A, Bm, bias, C), "gemm f16 4096^3"))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--skip", default="", help="comma-separated sections to skip")
    a = ap.parse_args()
    import torch
    import tilec
    res = {"date": datetime.datetime.now().isoformat(timespec="seconds"),
           "gpu": torch.cuda.get_device_name(0), "torch": torch.__version__,
           "python": sys.version.split()[0], "tilec": list(tilec.compiler_version()),
           "libtilec": tilec._lib.compiler().path}
    commit = os.path.join(ROOT, "python", "tilec", "lib", "COMMIT")
    res["commit"] = open(commit).read().strip() if os.path.exists(commit) else None
    try:
        import triton
        res["triton"] = triton.__version__
    except ImportError:
        res["triton"] = None
    os.environ.setdefault("TILEC_CACHE_DIR", tempfile.mkdtemp(prefix="tilec-gpu-"))
    skip = set(a.skip.split(","))
    os.makedirs(a.out, exist_ok=True)
    for name, fn in (("correctness", correctness), ("launch_us", launch_overhead),
                     ("compile_ms", compile_times), ("tune", tuning)):
        if name not in skip:
            section(res, name, fn)
        with open(os.path.join(a.out, "python_gpu.json"), "w") as f:  # what is done so far: a
            json.dump(res, f, indent=1)                                 # deadline keeps it
    print(json.dumps(res, indent=1))
    ok = res.get("correctness", {}).get("all_ok")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
