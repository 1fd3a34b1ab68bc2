#!/usr/bin/env python3
"""bench/run.py — one honest table: our generated kernels, hand-written CUDA baselines and library
peers, checked and timed side by side on the same torch tensors in one run (DESIGN.md §7).

  python3 bench/run.py --dry-run            list the plan (no GPU, no torch needed)
  python3 bench/run.py --out DIR [--quick]  run it (GPU machine); results in DIR

Structure. The parent process (no torch) runs a worker process (`--worker`) that imports torch and
does the work, writing one JSON line per event to DIR/rows.jsonl ("start" before each row, "row"
after it). A CUDA fault poisons a process's context, and a hung kernel never returns: the parent
watches the journal, and when the worker dies or a row makes no progress for --row-timeout seconds
it kills the worker, records the row as crashed / timed out, and starts a new worker that skips
every row already done. Results (latest.json, a dated copy, table.md, charts) are rewritten as the
run goes, so a run cut short still leaves its rows.

Impls: tilec (our PTX through build/libtilert.so), baseline (build/bench/libbaselines.so), and the
peers cublas (torch), torch-sdpa-flash, torch-sdpa-cudnn, torch. The memory-bound kernels (vadd and
the row ops) also get a `copy` row: a device copy moving the case's minimum bytes, timed the same
way, which is the most bandwidth a kernel of that size reaches (a 67 MB problem is short enough that
launch ramp-up and the L2 write-back count), and a second time, `stream_ms`: back-to-back launches
over rotating buffer sets (>= 1 GiB a cycle, no flush), the steady state of a model running one op
after another.
"""
import argparse
import datetime
import json
import math
import os
import re
import signal
import subprocess
import sys
import time
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
BUILD = os.path.join(ROOT, "build")
PTX_DIR = os.path.join(BUILD, "bench", "ptx")
CONFIGS = os.path.join(HERE, "configs.txt")
BENCH_SET = os.path.join(HERE, "bench_set.txt")
LIBTILERT = os.path.join(BUILD, "libtilert.so")
LIBBASELINES = os.path.join(BUILD, "bench", "libbaselines.so")

EPS = 1e-5
# Relative-error thresholds ||out - ref|| / ||ref|| (DESIGN §7); the worst single row may reach
# ROW_FACTOR times that (catches one wrong row drowned in a large matrix). Not the attention
# family's: those rows are judged by FlashAttention-3's rule (ATTN_FACTOR below).
TOL = {"f32": 1e-5, "f16": 5e-3, "bf16": 1e-2}
ROW_FACTOR = 5.0
IMPL_ORDER = ["tilec", "baseline", "cublas", "torch-sdpa-flash", "torch-sdpa-cudnn", "torch-flex", "torch", "copy"]
PEERS = ("cublas", "torch-sdpa-flash", "torch-sdpa-cudnn", "torch-flex", "torch")
ROW_KERNELS = ("softmax", "rmsnorm", "layernorm", "add_rmsnorm")
# Training kernels (issue 14), against torch autograd; several entries of one multi-kernel module each.
BACKWARD = ("rmsnorm_backward", "layernorm_backward", "cross_entropy_backward", "attention_backward")
# Kernels whose arithmetic runs on tensor cores: their floor also counts FLOPs at the GEMM ceiling.
TENSOR_CORE = ("gemm", "gemm_gelu", "attention", "attention_gqa", "attention_backward")
# kernels whose cases carry `causal`; they are checked by FlashAttention-3's rule (fa3_rule), not TOL
ATTENTION_KERNELS = ("attention", "attention_gqa", "attention_backward")
# FlashAttention-3's accuracy rule (issue 12), per output tensor as FA3's own tests apply it (O;
# dQ, dK, dV): max |out - ref| over the tensor <= ATTN_FACTOR x the tensor's max error of plain
# PyTorch attention run in the case's own low precision (the "low-precision math", FA3's peer), plus
# ATTN_SLACK x the output's largest |ref| (~32 float32 ulps of float32 accumulation noise). The same
# comparison row by row (a row: one query's O or dQ, one key's dK or dV) is recorded, not judged.
ATTN_FACTOR = 2.0
ATTN_SLACK = 2.0 ** -18
# Cases whose kernel is another example's: gemm_gelu is dsl/examples/gemm.tile with ACT=2 (the
# GELU(tanh) epilogue), against torch's gelu(addmm(...)) (two kernels): does fusion pay.
EXAMPLE_OF = {"gemm_gelu": "gemm"}
# Memory-bound kernels: a same-size device copy row and the steady-state (stream) timing.
MEMORY_BOUND = ("vadd",) + ROW_KERNELS + ("rmsnorm_backward", "layernorm_backward", "cross_entropy_backward")
STREAM_BYTES = 1 << 30  # rotating buffer sets: at least this much moved per cycle (> 15x the L2)
STREAM_LAUNCHES = 200


def log(*a):
    print(*a, flush=True)


# -------------------------------------------------------------------------------- the FA3 rule
# Pure array code: numpy arrays (tests/check_bench.sh, no GPU) and torch tensors (the worker) alike.
def row_max_err(out, ref):
    """Per row, max |out - ref| over the last axis (the rows: every other axis flattened, in order)."""
    d = abs(out - ref)
    d = d.reshape(-1, d.shape[-1]) if len(d.shape) > 1 else d.reshape(1, -1)
    m = d.max(-1)
    return getattr(m, "values", m)  # torch's max(dim) is a (values, indices) pair


def _num(x):
    """A plain float, None for inf / NaN (JSON has neither)."""
    x = float(x)
    return x if math.isfinite(x) else None


def fa3_rule(err, base, slack, factor=ATTN_FACTOR):
    """FlashAttention-3's rule on one output tensor, from its per-row max errors against the
    high-precision reference (row_max_err): err ours, base the low-precision math's. The tensor
    passes (`ok`) iff max(err) <= factor * max(base) + slack; a NaN error fails. `ratio` is max(err) /
    (max(base) + slack / factor), the error as a multiple of the low-precision math's, the slack
    counted in (the rule: ratio <= factor). Recorded, not judged: the same comparison per row,
    `rows_over` rows with err[i] > factor * base[i] + slack, the worst row by that ratio
    (`worst_row`, `worst_row_ratio`, its errors). Returns plain numbers, for the row's JSON."""
    s = max(float(slack), 1e-30)
    emax, bmax = float(err.max()), float(base.max())
    nan = int((err != err).sum())  # NaN is no max: an unwritten element fails whatever max() says
    ratio = emax / (bmax + s / factor) if math.isfinite(bmax) else float("nan")
    over = ~(err <= base * factor + s)
    rr = err / (base + s / factor)
    i = int(rr.argmax())
    return {"ok": bool(nan == 0 and emax <= factor * bmax + s), "max_err": _num(emax), "lowp_max_err": _num(bmax),
            "ratio": _num(ratio), "slack": float(slack),
            "rows": int(err.shape[0]), "rows_over": int(over.sum()), "worst_row": i,
            "worst_row_ratio": _num(rr[i]), "worst_row_err": _num(err[i]), "worst_row_lowp_err": _num(base[i])}


# ------------------------------------------------------------------------------------------ plan
def case_key(c):
    s = ",".join(f"{k}={v}" for k, v in c["shape"].items())
    return f'{c["kernel"]}|{s}|{c["dtype"]}|{int(c.get("causal") or 0)}'


def row_key(c, impl, variant):
    return f"{case_key(c)}|{impl}|{variant or ''}"


def make_plan(quick=False, kernels=None, dtypes=None, smoke=False):
    """The cases of DESIGN §6 (a subset with quick; toy sizes with smoke, for the CPU test)."""
    if smoke:
        toy = [
            {"kernel": "vadd", "shape": {"N": 1 << 12}, "dtype": "f32", "causal": None},
            {"kernel": "softmax", "shape": {"M": 64, "N": 1024}, "dtype": "f32", "causal": None},
            {"kernel": "layernorm", "shape": {"M": 64, "N": 1024}, "dtype": "f32", "causal": None},
            {"kernel": "add_rmsnorm", "shape": {"M": 64, "N": 1024}, "dtype": "bf16", "causal": None},
            {"kernel": "gemm", "shape": {"M": 64, "N": 128, "K": 128}, "dtype": "f32", "causal": None},
            {"kernel": "attention", "shape": {"B": 2, "H": 2, "N": 128, "D": 64}, "dtype": "f32", "causal": 1},
            {"kernel": "rmsnorm_backward", "shape": {"M": 64, "N": 1024}, "dtype": "f32", "causal": None},
            {"kernel": "layernorm_backward", "shape": {"M": 64, "N": 1024}, "dtype": "f32", "causal": None},
            {"kernel": "cross_entropy_backward", "shape": {"M": 16, "N": 1000}, "dtype": "f32", "causal": None},
            {"kernel": "attention_backward", "shape": {"B": 1, "H": 2, "N": 96, "D": 64}, "dtype": "f32", "causal": 1},
        ]
        return [c for c in toy if not kernels or c["kernel"] in kernels]
    plan = []
    dts = ["f16"] if quick else ["f16", "bf16"]
    if dtypes:
        dts = [d for d in dts if d in dtypes]

    def add(kernel, shape, dtype, causal=None):
        if kernels and kernel not in kernels:
            return
        plan.append({"kernel": kernel, "shape": shape, "dtype": dtype, "causal": causal})

    if not dtypes or "f32" in dtypes:
        add("vadd", {"N": 1 << 28}, "f32")
    row_shapes = [(8192, 4096)] if quick else [(16384, 1024), (8192, 4096), (4096, 16384)]
    for k in ROW_KERNELS:
        for m, n in row_shapes:
            for dt in dts:
                add(k, {"M": m, "N": n}, dt)
    gemm_shapes = [(4096, 4096, 4096)] if quick else [(4096, 4096, 4096), (8192, 8192, 8192), (16, 8192, 8192),
                                                      (6144, 5120, 4096), (4000, 4000, 4000)]
    for m, n, k in gemm_shapes:
        for dt in dts:
            add("gemm", {"M": m, "N": n, "K": k}, dt)
    for m, n, k in gemm_shapes[:2]:
        for dt in dts:
            add("gemm_gelu", {"M": m, "N": n, "K": k}, dt)
    seqlens = [1024, 8192] if quick else [512, 1024, 2048, 4096, 8192, 16384]
    for d in (64, 128):
        for causal in (0, 1):
            for n in seqlens:
                for dt in dts:
                    add("attention", {"B": 16384 // n, "H": 2048 // d, "N": n, "D": d}, dt, causal)
    # grouped-query heads (32 query heads over 8 K/V heads) and a sliding window of 1024 keys
    # (issue 12), causal; the window has FlexAttention as its peer (SDPA takes no window)
    for w in (0, 1024):
        for dt in dts:
            add("attention_gqa", {"B": 4, "H": 32, "HKV": 8, "N": 4096, "D": 128, "W": w}, dt, 1)
    # backward (training) kernels
    # (not N = 16384 yet: a row over 512 threads with dW, dB, X, dY in registers spills)
    for k in ("rmsnorm_backward", "layernorm_backward"):
        for m, n in [(m, n) for m, n in row_shapes if n <= 4096]:
            for dt in dts:
                add(k, {"M": m, "N": n}, dt)
    for m, n in ([(4096, 50257)] if quick else [(4096, 32000), (4096, 50257), (2048, 128256)]):
        for dt in dts:
            add("cross_entropy_backward", {"M": m, "N": n}, dt)
    for d in (64, 128):
        for causal in (0, 1):
            for n in ([1024, 8192] if quick else [1024, 2048, 4096, 8192, 16384]):
                for dt in dts:
                    add("attention_backward", {"B": 16384 // n, "H": 2048 // d, "N": n, "D": d}, dt, causal)
    return plan


def variant_params(name):
    """The PARAM=VALUE settings of variant `name` in bench/configs.txt (a dict of strings)."""
    return next(v["params"] for v in read_configs() if v["name"] == name)


def read_configs(path=CONFIGS, only=None):
    """The variants of bench/configs.txt; with `only` (a regular expression), those whose name it
    matches (re.search), so one run can time an A/B of a few variants beside the peers."""
    out = []
    with open(path) as f:
        for ln in f:
            ln = ln.split("#", 1)[0].strip()
            if not ln:
                continue
            parts = ln.split()
            if len(parts) < 3:
                continue
            match = {}
            if parts[2] != "*":
                for kv in parts[2].split(","):
                    k, _, v = kv.partition("=")
                    match[k.strip()] = v.strip()
            params = dict(p.split("=", 1) for p in parts[3:] if "=" in p)
            if only and not re.search(only, parts[0]):
                continue
            out.append({"name": parts[0], "example": parts[1], "match": match, "params": params,
                        "dtype": variant_dtype(parts[1], params)})
    return out


def read_bench_set(path=BENCH_SET):
    """The variant names of bench/bench_set.txt: what a plain `make bench` times."""
    names = set()
    with open(path) as f:
        for ln in f:
            names.update(ln.split("#", 1)[0].split())
    return names


def configs_of(a):
    """The variants a run times: those --variants names; every one with --all (and in the CPU smoke
    test); else the bench set, so that a plain run fits one device call, and with --with the
    variants that regular expression names beside it (A/Bs timed in the same run as the set)."""
    configs = read_configs(only=a.variants)
    extra = getattr(a, "with_variants", None)
    if extra and (a.variants or a.all):
        log("bench: --with adds to the bench set; with --variants or --all it changes nothing")
    if a.variants or a.all or a.smoke_cpu:
        return configs
    names = read_bench_set()
    return [v for v in configs if v["name"] in names or (extra and re.search(extra, v["name"]))]


def case_matches(c, match):
    keys = dict(c["shape"])
    keys["causal"] = int(c.get("causal") or 0)
    keys["dtype"] = c["dtype"]
    return all(str(keys.get(k)) == v for k, v in match.items())


# Element type of each example's tensors at its defaults (f16 unless listed). The row kernels,
# gemm and attention take a type parameter `T` (dsl/examples: `T: type = f16`): a variant compiled
# with T=bf16 serves the bf16 cases, and only those; without T it serves the default dtype.
EXAMPLE_DTYPE = {"vadd": "f32"}


def variant_dtype(example, params):
    return params.get("T", EXAMPLE_DTYPE.get(example, "f16"))


def act_matches(c, v):
    """gemm variants: ACT=2 serves gemm_gelu cases, any other ACT the gemm cases."""
    if v["example"] != "gemm":
        return True
    return (v["params"].get("ACT") == "2") == (c["kernel"] == "gemm_gelu")


def tilec_variants(c, configs):
    """The variants that serve case c: same example, MATCH agrees, compiled for c's dtype."""
    ex = EXAMPLE_OF.get(c["kernel"], c["kernel"])
    return [v for v in configs if v["example"] == ex and case_matches(c, v["match"]) and act_matches(c, v)
            and v.get("dtype", variant_dtype(v["example"], v["params"])) == c["dtype"]]


def impls_for(c, configs):
    """[(impl, variant)] for a case, and [(impl, reason)] of absent ones."""
    k, dt = c["kernel"], c["dtype"]
    out, absent = [], []
    vs = tilec_variants(c, configs)
    if not vs:
        if any(v["example"] == EXAMPLE_OF.get(k, k) and case_matches(c, v["match"]) for v in configs):
            absent.append(("tilec", f"no {dt} variant of dsl/examples/{k}.tile in bench/configs.txt (add one with T={dt})"))
        else:
            absent.append(("tilec", "no variant in bench/configs.txt matches"))
    else:
        out += [("tilec", v["name"]) for v in vs]
    if k not in ("gemm_gelu", "attention_gqa") and k not in BACKWARD:  # no hand-written baseline for those
        out.append(("baseline", None))
    if k == "gemm":
        out.append(("cublas", None))
    elif k in ("attention", "attention_backward"):
        out += [("torch-sdpa-flash", None), ("torch-sdpa-cudnn", None)]
    elif k == "attention_gqa":
        if not c["shape"].get("W"):
            out += [("torch-sdpa-flash", None), ("torch-sdpa-cudnn", None)]
        out.append(("torch-flex", None))
    else:
        out.append(("torch", None))
    if k in MEMORY_BOUND:
        out.append(("copy", None))
    return out, absent


# -------------------------------------------------------------------------------------- counting
def elem_size(dt):
    return {"f32": 4, "f16": 2, "bf16": 2}[dt]


def flops_bytes(c):
    """FLOPs and the fewest bytes the kernel must move (each input read once, each output written
    once), as in the header comments of dsl/examples/*.tile."""
    k, s, e = c["kernel"], c["shape"], elem_size(c["dtype"])
    if k == "vadd":
        n = s["N"]
        return n, 12 * n
    if k in ROW_KERNELS:
        m, n = s["M"], s["N"]
        f = {"softmax": 5, "rmsnorm": 4, "layernorm": 8, "add_rmsnorm": 5}[k] * m * n
        b = {"softmax": 2 * m * n, "rmsnorm": 2 * m * n + n, "layernorm": 2 * m * n + 2 * n,
             "add_rmsnorm": 4 * m * n + n}[k] * e
        return f, b
    if k in ("gemm", "gemm_gelu"):
        m, n, kk = s["M"], s["N"], s["K"]
        return 2 * m * n * kk, e * (m * kk + kk * n + m * n + n)
    if k == "attention":
        b, h, n, d = s["B"], s["H"], s["N"], s["D"]
        f = 4 * b * h * n * n * d
        if c.get("causal"):
            f //= 2
        return f, 4 * b * h * n * d * e
    if k == "attention_gqa":  # the (query, key) pairs the causal window keeps; K, V per K/V head
        b, h, hkv, n, d, w = s["B"], s["H"], s["HKV"], s["N"], s["D"], s.get("W", 0)
        pairs = sum(min(i + 1, w) if w > 0 else i + 1 for i in range(n)) if c.get("causal") else n * (min(n, w) if w > 0 else n)
        return 4 * b * h * d * pairs, e * (2 * b * h * n * d + 2 * b * hkv * n * d)
    if k == "rmsnorm_backward":  # read X, dY, write dX; W; dW in f32
        m, n = s["M"], s["N"]
        return 10 * m * n, 3 * m * n * e + n * e + 4 * n
    if k == "layernorm_backward":  # read X, dY, write dX; W, Mean, Rstd; dW, dB in f32
        m, n = s["M"], s["N"]
        return 12 * m * n, 3 * m * n * e + 8 * m + n * e + 8 * n
    if k == "cross_entropy_backward":  # read X once, write dX; label, dloss, loss, X[label]
        m, n = s["M"], s["N"]
        return 8 * m * n, 2 * m * n * e + 12 * m + m * e
    if k == "attention_backward":  # five N x N x D products; read Q K V O dO, write dQ dK dV
        b, h, n, d = s["B"], s["H"], s["N"], s["D"]
        f = 10 * b * h * n * n * d
        if c.get("causal"):
            f //= 2
        return f, 8 * b * h * n * d * e + 8 * b * h * n
    raise ValueError(k)


def floor_ms(c, ceilings):
    f, b = flops_bytes(c)
    t = []
    if ceilings.get("copy_gbps"):
        t.append(b / (ceilings["copy_gbps"] * 1e9) * 1e3)
    if c["kernel"] in TENSOR_CORE and ceilings.get("gemm_bf16_tflops"):
        t.append(f / (ceilings["gemm_bf16_tflops"] * 1e12) * 1e3)
    return max(t) if t else None


# ===================================================================================== worker
# Everything below up to the parent section runs in the worker, which imports torch.

class Journal:
    def __init__(self, path):
        self.f = open(path, "a", buffering=1)

    def write(self, rec):
        self.f.write(json.dumps(rec) + "\n")
        self.f.flush()


def _ctypes_api():
    """ctypes mirrors of runtime/tilert.h: the Python package's (python/tilec/_lib.py, checked
    against the C layout by tests/check_bench.sh), loaded without the package's own imports."""
    import importlib.util
    path = os.path.join(HERE, "..", "python", "tilec", "_lib.py")
    spec = importlib.util.spec_from_file_location("tilec_lib_mirrors", path)
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return {"Status": m.Status, "Tensor": m.Tensor, "Arg": m.Arg, "ArgInfo": m.ArgInfo, "DimInfo": m.DimInfo,
            "KernelInfo": m.KernelInfo}


def abi_report():
    """Sizes and offsets of the ctypes mirrors, in the format tests/check_bench.sh compares."""
    import ctypes as C
    t = _ctypes_api()
    return "\n".join([
        f"status {C.sizeof(t['Status'])} {t['Status'].message.offset}",
        f"tensor {C.sizeof(t['Tensor'])} {t['Tensor'].shape.offset} {t['Tensor'].strides.offset}",
        f"arg {C.sizeof(t['Arg'])} {t['Arg'].tensor.offset} {t['Arg'].scalar.offset}",
        f"arginfo {C.sizeof(t['ArgInfo'])}",
        f"diminfo {C.sizeof(t['DimInfo'])} {t['DimInfo'].value.offset}",
        f"kernelinfo {C.sizeof(t['KernelInfo'])} {t['KernelInfo'].nargs.offset} "
        f"{t['KernelInfo'].args.offset} {t['KernelInfo'].ndims.offset} {t['KernelInfo'].dims.offset} "
        f"{t['KernelInfo'].grid.offset} {t['KernelInfo'].nrequires.offset}",
        f"enums {Tilert.TILERT_BACKEND_GPU} {TILERT_DTYPES['i32']} {TILERT_DTYPES['f16']} "
        f"{TILERT_DTYPES['bf16']} {TILERT_DTYPES['f32']} {Tilert.ARG_SCALAR}",
    ])


# tilert_dtype values (runtime/tilert.h)
TILERT_DTYPES = {"bool": 0, "i32": 1, "f16": 2, "bf16": 3, "f32": 4}


class Tilert:
    """Our runtime through ctypes: load PTX variants, launch on torch tensors (default stream)."""
    TILERT_BACKEND_GPU = 1
    ARG_TENSOR, ARG_SCALAR = 0, 1

    def __init__(self, path):
        import ctypes as C
        self.C = C
        self.t = _ctypes_api()
        self.lib = C.CDLL(path)
        St, Arg = self.t["Status"], self.t["Arg"]
        L = self.lib
        L.tilert_device_open.restype = St
        L.tilert_device_open.argtypes = [C.c_int, C.c_int, C.POINTER(C.c_void_p)]
        L.tilert_module_load_ptx.restype = St
        L.tilert_module_load_ptx.argtypes = [C.c_void_p, C.c_char_p, C.POINTER(C.c_void_p)]
        L.tilert_module_get_kernel.restype = St
        L.tilert_module_get_kernel.argtypes = [C.c_void_p, C.c_char_p, C.POINTER(C.c_void_p)]
        L.tilert_launch.restype = St
        L.tilert_launch.argtypes = [C.c_void_p, C.POINTER(Arg), C.c_int, C.c_void_p]
        L.tilert_kernel_get_info.restype = C.POINTER(self.t["KernelInfo"])
        L.tilert_kernel_get_info.argtypes = [C.c_void_p]
        L.tilert_code_name.restype = C.c_char_p
        L.tilert_code_name.argtypes = [C.c_int]
        L.tilert_device_name.restype = C.c_char_p
        L.tilert_device_name.argtypes = [C.c_void_p]
        self.dev = C.c_void_p()
        self._check(L.tilert_device_open(self.TILERT_BACKEND_GPU, 0, C.byref(self.dev)), "device_open")
        self.kernels = {}

    def _check(self, st, what):
        if st.code != 0:
            name = self.lib.tilert_code_name(st.code).decode()
            raise RuntimeError(f"tilert {what}: {name}: {st.message.decode(errors='replace')}")

    def kernel(self, variant, entry=None):
        """entry: a kernel of a multi-kernel module by name (None: the module's first .entry)."""
        key = (variant, entry)
        if key in self.kernels:
            return self.kernels[key]
        path = os.path.join(PTX_DIR, variant + ".ptx")
        if not os.path.exists(path):
            err = os.path.join(PTX_DIR, variant + ".err")
            why = open(err).read().strip()[:300] if os.path.exists(err) else "not generated (make bench-prep)"
            raise RuntimeError(f"no PTX for {variant}: {why}")
        ptx = open(path, "rb").read()
        names = re.findall(rb"\.entry\s+([A-Za-z_$][\w$]*)", ptx)
        if not names:
            raise RuntimeError(f"{path}: no .entry in the PTX")
        if entry is not None and entry.encode() not in names:
            raise RuntimeError(f"{path}: no kernel {entry} (entries: {b', '.join(names).decode()})")
        name = entry.encode() if entry is not None else names[0]
        C = self.C
        mod, k = C.c_void_p(), C.c_void_p()
        self._check(self.lib.tilert_module_load_ptx(self.dev, ptx, C.byref(mod)), f"module_load_ptx({variant})")
        # A variant named *_cpasync is its twin's PTX launched through the cp.async entry point
        # (TILERT_WS=0 while the runtime prepares the kernel): the A/B of warp specialization.
        # *_tiles: the persistent entry launched with one block per tile (TILERT_PERSISTENT=0).
        # *_g1 / *_g8: the persistent entry walking tiles x first / in groups of 8 rows of y
        # (TILERT_TILE_GROUP; the kernel's own choice otherwise: its metadata's `group`).
        env = {"_cpasync": ("TILERT_WS", "0"), "_tiles": ("TILERT_PERSISTENT", "0"), "_g1": ("TILERT_TILE_GROUP", "1"),
               "_g8": ("TILERT_TILE_GROUP", "8")}
        var, val = next((v for sfx, v in env.items() if variant.endswith(sfx)), (None, None))
        saved = os.environ.get(var) if var else None
        if var:
            os.environ[var] = val
        try:
            self._check(self.lib.tilert_module_get_kernel(mod, name, C.byref(k)), "module_get_kernel")
        finally:
            if var and saved is None:
                os.environ.pop(var, None)
            elif var:
                os.environ[var] = saved
        info = self.lib.tilert_kernel_get_info(k).contents
        self.kernels[key] = (k, info)
        return self.kernels[key]

    def make_args(self, info, values):
        """values: torch tensors and Python floats, in the kernel's argument order."""
        C, Arg = self.C, self.t["Arg"]
        if info.nargs != len(values):
            raise RuntimeError(f"kernel {info.name.decode()} takes {info.nargs} arguments, bench passes {len(values)}")
        arr = (Arg * len(values))()
        for i, v in enumerate(values):
            a = arr[i]
            if isinstance(v, (int, float)):
                a.kind = self.ARG_SCALAR
                a.scalar = float(v)
            else:
                a.kind = self.ARG_TENSOR
                a.tensor.data = v.data_ptr()
                a.tensor.dtype = torch_to_tilert(v.dtype)
                a.tensor.rank = v.dim()
                for d in range(v.dim()):
                    a.tensor.shape[d] = v.shape[d]
                    a.tensor.strides[d] = v.stride(d)
            want = info.args[i].kind
            if want != a.kind:
                raise RuntimeError(f"argument {i} ({info.args[i].name.decode()}): kind mismatch")
        return arr

    def launcher(self, variant, values, entry=None):
        k, info = self.kernel(variant, entry)
        arr = self.make_args(info, values)
        n, launch, check = len(values), self.lib.tilert_launch, self._check

        def fn():
            st = launch(k, arr, n, None)
            if st.code != 0:
                check(st, "launch")
        fn._keep = (arr, values)  # the argument array must outlive the closure's uses
        fn._info = info
        return fn


def torch_to_tilert(dt):
    import torch
    names = {torch.bool: "bool", torch.int32: "i32", torch.float16: "f16", torch.bfloat16: "bf16",
             torch.float32: "f32"}
    return TILERT_DTYPES[names[dt]]


class Baselines:
    def __init__(self, path):
        import ctypes as C
        self.C = C
        self.lib = C.CDLL(path)
        self.lib.bl_last_error.restype = C.c_char_p
        i64, vp, f32 = C.c_int64, C.c_void_p, C.c_float
        sig = {
            "bl_vadd_f32": [vp, vp, vp, i64, vp],
            "bl_softmax": [C.c_int, vp, vp, i64, i64, vp],
            "bl_rmsnorm": [C.c_int, vp, vp, vp, i64, i64, f32, vp],
            "bl_layernorm": [C.c_int, vp, vp, vp, vp, i64, i64, f32, vp],
            "bl_add_rmsnorm": [C.c_int, vp, vp, vp, vp, i64, i64, f32, vp],
            "bl_gemm": [C.c_int, vp, vp, vp, vp, i64, i64, i64, C.c_int, vp],
            "bl_attention": [C.c_int, vp, vp, vp, vp, i64, i64, i64, i64, f32, C.c_int, vp],
        }
        for name, args in sig.items():
            f = getattr(self.lib, name)
            f.argtypes = args
            f.restype = C.c_int

    def call(self, name, *args):
        f = getattr(self.lib, name)

        def fn():
            rc = f(*args)
            if rc != 0:
                raise RuntimeError(f"{name} returned {rc}: {self.lib.bl_last_error().decode()}")
        return fn


class Worker:
    def __init__(self, a, journal):
        import torch
        self.torch = torch
        self.a = a
        self.j = journal
        torch.backends.cuda.matmul.allow_tf32 = False  # fp32 references must be fp32
        torch.backends.cudnn.allow_tf32 = False
        self.smoke = a.smoke_cpu
        if self.smoke:  # tests/check_bench.sh: the whole path on CPU torch, toy sizes, no GPU
            self.dev = torch.device("cpu")
            self.flush_buf = torch.empty(1 << 20, dtype=torch.uint8)
        else:
            torch.cuda.init()
            self.dev = torch.device("cuda")
            torch.empty(1, device=self.dev)  # primary context current before our runtime opens it
            self.flush_buf = torch.empty(256 << 20, dtype=torch.uint8, device=self.dev)
        self.tilert = self.tilert_err = None
        self.bl = self.bl_err = None
        try:
            if self.smoke:
                raise RuntimeError("smoke test on the CPU: no GPU")
            self.tilert = Tilert(LIBTILERT)
        except Exception as e:  # noqa: BLE001 — every failure becomes a row, never a stop
            self.tilert_err = f"{type(e).__name__}: {e}"
            log(f"worker: our runtime is unavailable ({self.tilert_err}); tilec rows will fail")
        try:
            if self.smoke:
                raise RuntimeError("smoke test on the CPU: no GPU")
            self.bl = Baselines(LIBBASELINES)
        except Exception as e:  # noqa: BLE001
            self.bl_err = f"{type(e).__name__}: {e}"
            log(f"worker: baselines unavailable ({self.bl_err}); baseline rows will fail")
        self.configs = configs_of(a)
        self.deadline = a.deadline
        self.flush_ms = None

    # ---------------------------------------------------------------- timing
    def sync(self):
        if not self.smoke:
            self.torch.cuda.synchronize()

    def event(self):
        if self.smoke:
            return HostEvent()
        return self.torch.cuda.Event(enable_timing=True)

    def flush(self):
        self.flush_buf.zero_()  # 256 MB written: the 60 MiB L2 holds nothing of the inputs after

    def time_fn(self, fn, budget_s):
        fn()
        self.sync()

        def timed(n):
            ev = [(self.event(), self.event()) for _ in range(n)]
            for s, e in ev:
                self.flush()
                s.record()
                fn()
                e.record()
            self.sync()
            return sorted(s.elapsed_time(e) for s, e in ev)

        est = timed(3)[1]
        per = est + (self.flush_ms or 0.1)
        reps = int(max(self.a.min_reps, min(self.a.max_reps, budget_s * 1e3 / per)))
        ts = timed(reps)
        q = lambda p: ts[min(len(ts) - 1, int(p * (len(ts) - 1) + 0.5))]  # noqa: E731
        return {"median_ms": q(0.5), "p10_ms": q(0.1), "p90_ms": q(0.9), "reps": reps}

    # ---------------------------------------------------------------- ceilings
    def ceilings(self):
        """Device copy GB/s (read + write) and cuBLAS GEMM 8192^3 TFLOP/s on random data; each one
        that fails is None (its floors are then not computed) and the rows still run."""
        torch = self.torch
        out = {"copy_gbps": None, "gemm_bf16_tflops": None, "gemm_f16_tflops": None, "errors": []}
        try:
            t = self.time_fn(self.flush, 0.1)
            self.flush_ms = t["median_ms"]
            out["flush_ms"] = round(self.flush_ms, 4)
            src = torch.randint(0, 255, (1 << (20 if self.smoke else 30),), dtype=torch.uint8, device=self.dev)
            dst = torch.empty_like(src)
            t = self.time_fn(lambda: dst.copy_(src), 0.4)
            out["copy_gbps"] = round(2 * src.numel() / (t["median_ms"] * 1e-3) / 1e9, 1)
            del src, dst
        except Exception as e:  # noqa: BLE001
            out["errors"].append(f"copy: {type(e).__name__}: {e}")
        n = 256 if self.smoke else 8192
        for name, dt in (("gemm_bf16_tflops", torch.bfloat16), ("gemm_f16_tflops", torch.float16)):
            try:
                a = torch.randn(n, n, device=self.dev).to(dt)
                b = torch.randn(n, n, device=self.dev).to(dt)
                t = self.time_fn(lambda: torch.matmul(a, b), 0.5)
                out[name] = round(2 * n ** 3 / (t["median_ms"] * 1e-3) / 1e12, 1)
                del a, b
            except Exception as e:  # noqa: BLE001
                out["errors"].append(f"{name}: {type(e).__name__}: {str(e)[:200]}")
        if not self.smoke:
            torch.cuda.empty_cache()
        return out

    # ---------------------------------------------------------------- cases
    def tdt(self, dt):
        torch = self.torch
        return {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}[dt]

    def setup_case(self, c):
        """Inputs, output buffers and the float32 reference (plus the peer error for attention)."""
        torch = self.torch
        k, s, dt = c["kernel"], c["shape"], self.tdt(c["dtype"])
        g = torch.Generator(device=self.dev)
        g.manual_seed(zlib.crc32(case_key(c).encode()))  # same inputs in every worker
        rnd = lambda *shape, scale=1.0: (torch.randn(*shape, device=self.dev, generator=g) * scale).to(dt)  # noqa: E731
        ctx = {"inputs": {}, "outs": {}, "ref": {}, "inout": {}}
        if k == "vadd":
            n = s["N"]
            x, y = rnd(n), rnd(n)
            ctx["inputs"] = {"X": x, "Y": y}
            ctx["outs"] = {"Z": torch.empty_like(x)}
            ctx["ref"] = {"Z": x + y}
        elif k in ROW_KERNELS:
            m, n = s["M"], s["N"]
            x = rnd(m, n, scale=2.0)
            w = rnd(n) if k != "softmax" else None
            xf = x.float()
            if k == "softmax":
                ctx["ref"] = {"Y": torch.softmax(xf, -1)}
            elif k == "rmsnorm":
                ctx["ref"] = {"Y": xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + EPS) * w.float()}
            elif k == "layernorm":
                b = rnd(n)
                ctx["inputs"]["Bias"] = b
                ctx["ref"] = {"Y": torch.nn.functional.layer_norm(xf, (n,), w.float(), b.float(), EPS)}
            else:
                r = rnd(m, n)
                h = xf + r.float()
                ctx["inout"] = {"R": r.clone()}
                ctx["inputs"]["R"] = r
                ctx["ref"] = {"R": h, "Y": h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + EPS) * w.float()}
            ctx["inputs"]["X"] = x
            if w is not None:
                ctx["inputs"]["W"] = w
            ctx["outs"]["Y"] = torch.empty_like(x)
        elif k in ("gemm", "gemm_gelu"):
            m, n, kk = s["M"], s["N"], s["K"]
            a, b, bias = rnd(m, kk, scale=kk ** -0.5), rnd(kk, n), rnd(n)
            ctx["inputs"] = {"A": a, "B": b, "bias": bias}
            ctx["outs"] = {"C": torch.empty(m, n, device=self.dev, dtype=dt)}
            y = a.float() @ b.float() + bias.float()
            ctx["ref"] = {"C": torch.relu(y) if k == "gemm" else torch.nn.functional.gelu(y, approximate="tanh")}
        elif k == "attention":
            B, H, N, D = s["B"], s["H"], s["N"], s["D"]
            q, kt, v = rnd(B, H, N, D), rnd(B, H, N, D), rnd(B, H, N, D)
            ctx["inputs"] = {"Q": q, "K": kt, "V": v}
            ctx["outs"] = {"O": torch.empty_like(q)}
            ctx["scale"] = 1.0 / math.sqrt(D)
            ref = self.attention_ref(q, kt, v, ctx["scale"], bool(c["causal"]))
            ctx["ref"] = {"O": ref}
            self.lowp_baseline(ctx, q, kt, v, bool(c["causal"]))
        elif k == "attention_gqa":
            B, H, HKV, N, D, W = s["B"], s["H"], s["HKV"], s["N"], s["D"], s.get("W", 0)
            q, kt, v = rnd(B, H, N, D), rnd(B, HKV, N, D), rnd(B, HKV, N, D)
            ctx["inputs"] = {"Q": q, "K": kt, "V": v}
            ctx["outs"] = {"O": torch.empty_like(q)}
            ctx["scale"], ctx["window"] = 1.0 / math.sqrt(D), W
            rep = H // HKV
            ref = self.attention_ref(q, kt.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1), ctx["scale"],
                                     bool(c["causal"]), W)
            ctx["ref"] = {"O": ref}
            self.lowp_baseline(ctx, q, kt, v, bool(c["causal"]), W)
        elif k == "rmsnorm_backward":
            m, n = s["M"], s["N"]
            x, w, dy = rnd(m, n, scale=2.0), rnd(n), rnd(m, n)
            xf, gf = x.float(), dy.float()
            inv = torch.rsqrt((xf * xf).mean(-1, keepdim=True) + EPS)
            gw = gf * w.float()
            dx = inv * gw - xf * inv ** 3 * (gw * xf).mean(-1, keepdim=True)
            ctx["inputs"] = {"X": x, "W": w, "dY": dy}
            ctx["outs"] = {"dX": torch.empty_like(x), "dW": torch.empty(n, device=self.dev)}
            ctx["ref"] = {"dX": dx, "dW": (gf * xf * inv).sum(0)}
        elif k == "layernorm_backward":
            m, n = s["M"], s["N"]
            x, w, b, dy = rnd(m, n, scale=2.0), rnd(n), rnd(n), rnd(m, n)
            xf, gf = x.float(), dy.float()
            mean = xf.mean(-1)  # the row statistics the forward (layernorm_train) saves
            rstd = torch.rsqrt(xf.var(-1, unbiased=False) + EPS)
            xhat = (xf - mean[:, None]) * rstd[:, None]
            gw = gf * w.float()
            dx = rstd[:, None] * (gw - xhat * (gw * xhat).mean(-1, keepdim=True) - gw.mean(-1, keepdim=True))
            ctx["inputs"] = {"X": x, "W": w, "Bias": b, "Mean": mean, "Rstd": rstd, "dY": dy}
            ctx["outs"] = {"dX": torch.empty_like(x), "dW": torch.empty(n, device=self.dev),
                           "dB": torch.empty(n, device=self.dev)}
            ctx["ref"] = {"dX": dx, "dW": (gf * xhat).sum(0), "dB": gf.sum(0)}
        elif k == "cross_entropy_backward":
            m, n = s["M"], s["N"]
            x = rnd(m, n, scale=2.0)
            label = torch.randint(0, n, (m,), device=self.dev, generator=g)
            label[::7] = -100  # ignore_index rows: loss 0, zero gradient
            dloss = torch.rand(m, device=self.dev, generator=g) + 0.5
            xf = x.float()
            valid = label >= 0
            lse = torch.logsumexp(xf, -1)
            picked = xf.gather(1, label.clamp_min(0)[:, None])[:, 0]
            p = torch.softmax(xf, -1)
            rows = torch.arange(m, device=self.dev)[valid]
            p[rows, label[valid]] -= 1.0
            ctx["inputs"] = {"X": x, "label": label.to(torch.int32), "label64": label, "dloss": dloss}
            ctx["outs"] = {"loss": torch.empty(m, device=self.dev), "dX": torch.empty_like(x)}
            ctx["ref"] = {"loss": torch.where(valid, lse - picked, torch.zeros_like(lse)),
                          "dX": p * (dloss * valid)[:, None]}
            del p
        elif k == "attention_backward":
            B, H, N, D = s["B"], s["H"], s["N"], s["D"]
            q, kt, v, do = rnd(B, H, N, D), rnd(B, H, N, D), rnd(B, H, N, D), rnd(B, H, N, D)
            ctx["scale"] = 1.0 / math.sqrt(D)
            o, lse, dq, dk, dv = self.attention_grads_ref(q, kt, v, do, ctx["scale"], bool(c["causal"]))
            # what the forward saves (attention_backward.tile's attention_lse): O in T, LSE in f32
            ctx["inputs"] = {"Q": q, "K": kt, "V": v, "O": o.to(dt), "LSE": lse, "dO": do}
            ctx["outs"] = {"dQ": torch.empty_like(q), "dK": torch.empty_like(q), "dV": torch.empty_like(q)}
            ctx["ref"] = {"dQ": dq, "dK": dk, "dV": dv}
            self.lowp_baseline(ctx, q, kt, v, bool(c["causal"]), do=do, o=ctx["inputs"]["O"])
        return ctx

    def lowp_baseline(self, ctx, q, k, v, causal, window=0, do=None, o=None):
        """The yardstick of FA3's rule: per row of each reference output, the max error of plain
        PyTorch attention in the inputs' low precision (attention_lowp) -> ctx["lowp_err"]; and the
        rule's absolute slack, ATTN_SLACK x the output's largest |ref| -> ctx["slack"]."""
        ctx["lowp_err"] = self.attention_lowp(q, k, v, ctx["scale"], causal, ctx["ref"], window, do, o)
        ctx["slack"] = {n: ATTN_SLACK * r.abs().max().item() for n, r in ctx["ref"].items()}

    def attention_lowp(self, q, k, v, scale, causal, refs, window=0, do=None, o_in=None):
        """Plain PyTorch attention with every op's result in the inputs' dtype (FlashAttention-3's
        peer: its tests' attention_ref(upcast=False, reorder_ops=True)): S = Q (K scale)^T, masked,
        P = softmax(S), O = P V. Not SDPA's math backend, which computes f16/bf16 in float32.
        With do (and o_in, the forward O the kernels are given, in the inputs' dtype): dQ, dK, dV by
        autograd's formulas for those ops, each result in the same precision (dV = P^T dO,
        dP = dO V^T, dS = softmax's backward rounded once, dQ = dS (K scale), dK = (dS^T Q) scale),
        except softmax's row term delta: rowsum(dO * o_in) in float32, as a flash-style backward
        computes it from the low-precision O (autograd's is rowsum(dP * P)), so that the yardstick
        does the kernels' computation. Run over groups of (batch, head) slices, each independent,
        so that a group's [g, N, N] score matrices stay under ~0.5 GB (one slice at N = 16k).
        Returns, for each output of refs ({"O": ...} or {"dQ", "dK", "dV"}), its per-row max error
        against refs (row_max_err), float32."""
        torch = self.torch
        B, H, N, D = q.shape
        rep = H // k.shape[1]  # grouped-query heads share a K/V head
        if rep > 1:
            k, v = k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1)
        Q, K, V = (t.reshape(B * H, N, D) for t in (q, k, v))
        if do is not None:
            dO, Oin = do.reshape(B * H, N, D), o_in.reshape(B * H, N, D)
        R = {n: r.reshape(B * H, N, D) for n, r in refs.items()}
        mask = None
        if causal or window > 0:
            i = torch.arange(N, device=self.dev)
            mask = torch.zeros(N, N, dtype=torch.bool, device=self.dev)
            if causal:
                mask |= i[None, :] > i[:, None]
            if window > 0:
                mask |= i[:, None] - i[None, :] >= window
        g = max(1, (1 << 27) // (N * N))
        errs = {n: [] for n in refs}
        with torch.no_grad():
            for s in range(0, B * H, g):
                qs, vs = Q[s:s + g], V[s:s + g]
                ks = K[s:s + g] * scale
                sc = torch.matmul(qs, ks.transpose(-1, -2))
                if mask is not None:
                    sc = sc.masked_fill(mask, float("-inf"))
                p = torch.softmax(sc, -1)
                del sc
                if do is None:
                    got = {"O": torch.matmul(p, vs)}
                else:
                    gs = dO[s:s + g]
                    dv = torch.matmul(p.transpose(-1, -2), gs)
                    ds = torch.matmul(gs, vs.transpose(-1, -2)).float()  # dP, then dS in place
                    delta = (gs.float() * Oin[s:s + g].float()).sum(-1, keepdim=True)
                    ds = ds.sub_(delta).mul_(p).to(q.dtype)
                    del p
                    dq = torch.matmul(ds, ks)
                    dk = torch.matmul(ds.transpose(-1, -2), qs) * scale
                    del ds
                    got = {"dQ": dq, "dK": dk, "dV": dv}
                for n in refs:
                    errs[n].append(row_max_err(got[n].float(), R[n][s:s + g]))
                del got
        return {n: torch.cat(e) for n, e in errs.items()}

    def attention_grads_ref(self, q, k, v, do, scale, causal):
        """float32 O, LSE and the gradients dQ, dK, dV of attention, in query chunks so that the
        [chunk, N] score matrices stay under ~0.5 GB each."""
        torch = self.torch
        B, H, N, D = q.shape
        f32 = torch.float32
        kf, vf = k.float(), v.float()
        o = torch.empty(B, H, N, D, device=self.dev, dtype=f32)
        lse = torch.empty(B, H, N, device=self.dev, dtype=f32)
        dq = torch.empty_like(o)
        dk, dv = torch.zeros_like(o), torch.zeros_like(o)
        chunk = max(16, min(N, (1 << 27) // (B * H * N)))
        for i in range(0, N, chunk):
            qs, gs = q[:, :, i:i + chunk].float(), do[:, :, i:i + chunk].float()
            sc = torch.matmul(qs, kf.transpose(-1, -2)) * scale
            if causal:
                rows = torch.arange(i, min(N, i + chunk), device=self.dev)[:, None]
                cols = torch.arange(N, device=self.dev)[None, :]
                sc.masked_fill_(cols > rows, float("-inf"))
            ls = torch.logsumexp(sc, -1)
            p = torch.exp(sc - ls[..., None])
            del sc
            os_ = torch.matmul(p, vf)
            o[:, :, i:i + chunk], lse[:, :, i:i + chunk] = os_, ls
            ds = p * (torch.matmul(gs, vf.transpose(-1, -2)) - (gs * os_).sum(-1, keepdim=True))
            dq[:, :, i:i + chunk] = torch.matmul(ds, kf) * scale
            dk += torch.matmul(ds.transpose(-1, -2), qs) * scale
            dv += torch.matmul(p.transpose(-1, -2), gs)
            del p, ds
        return o, lse, dq, dk, dv

    def attention_ref(self, q, k, v, scale, causal, window=0):
        """float32 attention, in query chunks so the score matrix stays under ~1 GB; window > 0
        keeps key j for query i only when i - j < window."""
        torch = self.torch
        B, H, N, D = q.shape
        out = torch.empty(B, H, N, D, device=self.dev, dtype=torch.float32)
        kf, vf = k.float(), v.float()
        chunk = max(16, min(N, (1 << 28) // (B * H * N)))
        for i in range(0, N, chunk):
            qs = q[:, :, i:i + chunk].float()
            sc = torch.matmul(qs, kf.transpose(-1, -2)) * scale
            rows = torch.arange(i, min(N, i + chunk), device=self.dev)[:, None]
            cols = torch.arange(N, device=self.dev)[None, :]
            if causal:
                sc.masked_fill_(cols > rows, float("-inf"))
            if window > 0:
                sc.masked_fill_(rows - cols >= window, float("-inf"))
            out[:, :, i:i + chunk] = torch.matmul(torch.softmax(sc, -1), vf)
            del sc, qs
        return out

    def sdpa(self, backend, q, k, v, scale, causal):
        import torch.nn.functional as F
        from torch.nn.attention import SDPBackend, sdpa_kernel
        be = {"flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION}[backend]
        gqa = {"enable_gqa": True} if k.shape[1] != q.shape[1] else {}
        with sdpa_kernel([be]):
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale, **gqa)

    def flex_fn(self, c, ctx):
        """PyTorch FlexAttention (compiled once per case) with attention_gqa's mask: causal and,
        with W > 0, the last W keys; K/V heads shared by groups of query heads."""
        from torch.nn.attention.flex_attention import create_block_mask, flex_attention
        torch, s, I = self.torch, c["shape"], ctx["inputs"]
        causal, w = bool(c["causal"]), s.get("W", 0)

        def mask(b, h, qi, kj):
            keep = qi >= kj if causal else qi >= 0
            return keep & (qi - kj < w) if w > 0 else keep
        if "flex" not in ctx:
            bm = create_block_mask(mask, None, None, s["N"], s["N"], device=self.dev)
            ctx["flex"] = (torch.compile(flex_attention), bm)
        flex, bm = ctx["flex"]
        gqa = s["H"] != s["HKV"]
        return lambda: {"O": flex(I["Q"], I["K"], I["V"], block_mask=bm, scale=ctx["scale"], enable_gqa=gqa)}

    def impl_fn(self, c, ctx, impl, variant):
        """A closure that runs one implementation and returns its outputs {name: tensor}."""
        torch, F = self.torch, self.torch.nn.functional
        k, s, I, O = c["kernel"], c["shape"], ctx["inputs"], ctx["outs"]
        bdt = {"f16": 0, "bf16": 1}.get(c["dtype"])
        ptr = lambda t: t.data_ptr() if t is not None else None  # noqa: E731
        stream = None if self.smoke else torch.cuda.current_stream().cuda_stream
        if impl == "tilec":
            if self.tilert is None:
                raise RuntimeError(f"libtilert: {self.tilert_err}")
            order = {
                "vadd": [I.get("X"), I.get("Y"), O.get("Z")],
                "softmax": [I.get("X"), O.get("Y")],
                "rmsnorm": [I.get("X"), I.get("W"), O.get("Y"), EPS],
                "layernorm": [I.get("X"), I.get("W"), I.get("Bias"), O.get("Y"), EPS],
                "add_rmsnorm": [I.get("X"), I.get("R"), I.get("W"), O.get("Y"), EPS],
                "gemm": [I.get("A"), I.get("B"), I.get("bias"), O.get("C")],
                "gemm_gelu": [I.get("A"), I.get("B"), I.get("bias"), O.get("C")],
                "attention": [I.get("Q"), I.get("K"), I.get("V"), O.get("O"), ctx.get("scale")],
                "attention_gqa": [I.get("Q"), I.get("K"), I.get("V"), O.get("O"), ctx.get("scale"), ctx.get("window")],
            }.get(k)
            if k in BACKWARD:
                return self.tilec_backward_fn(c, ctx, variant)
            if "_splitk_" in variant:
                return self.tilec_splitk_fn(c, ctx, variant)
            launch = self.tilert.launcher(variant, order)
            outs = dict(O)
            if k == "add_rmsnorm":
                outs["R"] = I["R"]

            def fn():
                launch()
                return outs
            return fn
        if impl == "baseline":
            if self.bl is None:
                raise RuntimeError(f"libbaselines: {self.bl_err}")
            if k == "vadd":
                f = self.bl.call("bl_vadd_f32", ptr(I["X"]), ptr(I["Y"]), ptr(O["Z"]), s["N"], stream)
            elif k == "softmax":
                f = self.bl.call("bl_softmax", bdt, ptr(I["X"]), ptr(O["Y"]), s["M"], s["N"], stream)
            elif k == "rmsnorm":
                f = self.bl.call("bl_rmsnorm", bdt, ptr(I["X"]), ptr(I["W"]), ptr(O["Y"]), s["M"], s["N"], EPS, stream)
            elif k == "layernorm":
                f = self.bl.call("bl_layernorm", bdt, ptr(I["X"]), ptr(I["W"]), ptr(I["Bias"]), ptr(O["Y"]),
                                 s["M"], s["N"], EPS, stream)
            elif k == "add_rmsnorm":
                f = self.bl.call("bl_add_rmsnorm", bdt, ptr(I["X"]), ptr(I["R"]), ptr(I["W"]), ptr(O["Y"]),
                                 s["M"], s["N"], EPS, stream)
            elif k == "gemm":
                f = self.bl.call("bl_gemm", bdt, ptr(I["A"]), ptr(I["B"]), ptr(I["bias"]), ptr(O["C"]),
                                 s["M"], s["N"], s["K"], 1, stream)
            else:
                f = self.bl.call("bl_attention", bdt, ptr(I["Q"]), ptr(I["K"]), ptr(I["V"]), ptr(O["O"]),
                                 s["B"], s["H"], s["N"], s["D"], ctx["scale"], int(c["causal"]), stream)
            outs = dict(O)
            if k == "add_rmsnorm":
                outs["R"] = I["R"]

            def fn():
                f()
                return outs
            return fn
        if impl == "copy":
            return self.copy_fn(c, ctx)
        # peers: results are fresh tensors (nothing to poison)
        if k == "vadd":
            z = torch.empty_like(I["X"])
            return lambda: {"Z": torch.add(I["X"], I["Y"], out=z)}
        if k == "softmax":
            return lambda: {"Y": torch.softmax(I["X"], -1)}
        if k == "rmsnorm":
            return lambda: {"Y": F.rms_norm(I["X"], (s["N"],), I["W"], EPS)}
        if k == "layernorm":
            return lambda: {"Y": F.layer_norm(I["X"], (s["N"],), I["W"], I["Bias"], EPS)}
        if k == "add_rmsnorm":
            def fn():
                r = torch.add(I["X"], I["R"], out=I["R"])
                return {"R": r, "Y": F.rms_norm(r, (s["N"],), I["W"], EPS)}
            return fn
        if k == "gemm_gelu":
            return lambda: {"C": F.gelu(torch.addmm(I["bias"], I["A"], I["B"]), approximate="tanh")}
        if k == "gemm":
            if hasattr(torch, "_addmm_activation"):  # cuBLASLt with the relu epilogue fused
                return lambda: {"C": torch._addmm_activation(I["bias"], I["A"], I["B"])}
            return lambda: {"C": torch.relu(torch.addmm(I["bias"], I["A"], I["B"]))}
        if k in ("attention", "attention_gqa") and impl.startswith("torch-sdpa-"):
            be = impl.rsplit("-", 1)[1]
            return lambda: {"O": self.sdpa(be, I["Q"], I["K"], I["V"], ctx["scale"], bool(c["causal"]))}
        if k == "attention_gqa" and impl == "torch-flex":
            return self.flex_fn(c, ctx)
        if k in BACKWARD:
            return self.autograd_fn(c, ctx, impl)
        raise ValueError(impl)

    def tilec_splitk_fn(self, c, ctx, variant):
        """bench/ab/gemm_splitk.tile: the split-K kernel into f32 partial tiles, then their sum with
        the epilogue (the timed work is both launches)."""
        s, I, O = c["shape"], ctx["inputs"], ctx["outs"]
        p = variant_params(variant)
        part = self.torch.empty(int(p.get("SPLIT", 4)), s["M"], s["N"], device=self.dev)
        L = self.tilert.launcher
        mm = L(variant, [I["A"], I["B"], part], entry="gemm_splitk")
        total = L(variant, [part, I["bias"], O["C"]], entry="gemm_splitk_sum")

        def fn():
            mm()
            total()
            return dict(O)
        fn._keep = part
        return fn

    def tilec_backward_fn(self, c, ctx, variant):
        """The kernels of a backward example's module, launched in order; the timed work includes
        zeroing what they accumulate into (rmsnorm's dW, layernorm's dW and dB; attention's prep zeroes dQacc)."""
        torch = self.torch
        k, s, I, O = c["kernel"], c["shape"], ctx["inputs"], ctx["outs"]
        L = self.tilert.launcher
        if k == "layernorm_backward" and variant.startswith("lnbp_"):
            # bench/ab/layernorm_backward_partials.tile: per-block partial rows, then their sums
            # (no atomics, nothing to zero)
            p = variant_params(variant)
            parts = -(-s["M"] // (int(p.get("ROWS", 1)) * int(p.get("CHUNK", 16))))
            dwp = torch.empty(parts, s["N"], device=self.dev)
            dbp = torch.empty(parts, s["N"], device=self.dev)
            rows = L(variant, [I["X"], I["W"], I["Mean"], I["Rstd"], I["dY"], O["dX"], dwp, dbp],
                     entry="layernorm_backward")
            sums = L(variant, [dwp, dbp, O["dW"], O["dB"]], entry="layernorm_backward_sums")

            def fn():
                rows()
                sums()
                return O
            fn._keep = (dwp, dbp)
            return fn
        def accumulating(bwd, *names):
            """The sums its atomics add into, zeroed first in the timed work, but those the kernel
            declares `= 0` (the launch zeroes them itself: runtime/zero.c)."""
            info = bwd._info
            own = {info.args[i].name.decode() for i in range(info.nargs) if info.args[i].zero_init}
            sums = [O[n] for n in names if n not in own]

            def fn():
                for t in sums:
                    t.zero_()
                bwd()
                return O
            return fn
        if k == "rmsnorm_backward":
            return accumulating(L(variant, [I["X"], I["W"], I["dY"], O["dX"], O["dW"], EPS]), "dW")
        if k == "layernorm_backward":
            return accumulating(L(variant, [I["X"], I["W"], I["Mean"], I["Rstd"], I["dY"], O["dX"], O["dW"], O["dB"]],
                                  entry="layernorm_backward"), "dW", "dB")
        if k == "cross_entropy_backward":
            # the module's first kernel: the two-pass one, or the one KERNEL= compiled alone
            f = L(variant, [I["X"], I["label"], I["dloss"], O["loss"], O["dX"]])

            def fn():
                f()
                return O
            return fn
        B, H, N, D = s["B"], s["H"], s["N"], s["D"]
        delta = torch.empty(B, H, N, device=self.dev)
        dqacc = torch.empty(B, H, N, D, device=self.dev)
        prep = L(variant, [I["O"], I["dO"], delta, dqacc], entry="attention_backward_prep")
        common = [I["Q"], I["K"], I["V"], I["dO"], I["LSE"], delta]
        # "_split" anywhere in the name as a token (attnb_d64_c1_split_km128 too: a suffix test sent
        # such variants down the atomic scheme, whose kernels ignore KM)
        if re.search(r"_split(64)?(_|$)", variant):
            # the scheme without atomics: dK, dV by key blocks, dQ by query blocks (prep's zeroing
            # of dQacc is wasted there: 4 B H N D bytes)
            steps = [prep, L(variant, common + [O["dK"], O["dV"], ctx["scale"]], entry="attention_backward_kv"),
                     L(variant, common + [O["dQ"], ctx["scale"]], entry="attention_backward_q")]
        else:
            steps = [prep, L(variant, common + [dqacc, O["dK"], O["dV"], ctx["scale"]], entry="attention_backward"),
                     L(variant, [dqacc, O["dQ"]], entry="attention_backward_dq")]

        def fn():
            for step in steps:
                step()
            return O
        fn._keep = (delta, dqacc)
        return fn

    def autograd_fn(self, c, ctx, impl):
        """torch autograd of the same operation: the graph is built once here (not timed), the timed
        call is torch.autograd.grad (fresh gradients, nothing accumulated); cross-entropy's forward
        is timed too, since our kernel computes the loss as well."""
        torch, F = self.torch, self.torch.nn.functional
        k, s, I = c["kernel"], c["shape"], ctx["inputs"]
        leaf = lambda t: t.detach().clone().requires_grad_()  # noqa: E731
        if k == "rmsnorm_backward":
            x, w = leaf(I["X"]), leaf(I["W"])
            y = F.rms_norm(x, (s["N"],), w, EPS)

            def fn():
                dx, dw = torch.autograd.grad(y, (x, w), I["dY"], retain_graph=True)
                return {"dX": dx, "dW": dw}
            return fn
        if k == "layernorm_backward":
            x, w, b = leaf(I["X"]), leaf(I["W"]), leaf(I["Bias"])
            y = F.layer_norm(x, (s["N"],), w, b, EPS)

            def fn():
                dx, dw, db = torch.autograd.grad(y, (x, w, b), I["dY"], retain_graph=True)
                return {"dX": dx, "dW": dw, "dB": db}
            return fn
        if k == "cross_entropy_backward":
            x = leaf(I["X"])

            def fn():
                loss = F.cross_entropy(x, I["label64"], reduction="none", ignore_index=-100)
                (dx,) = torch.autograd.grad(loss, (x,), I["dloss"].to(loss.dtype))
                return {"loss": loss, "dX": dx}
            return fn
        be = impl.rsplit("-", 1)[1]
        q, kk, v = leaf(I["Q"]), leaf(I["K"]), leaf(I["V"])
        o = self.sdpa(be, q, kk, v, ctx["scale"], bool(c["causal"]))

        def fn():
            dq, dk, dv = torch.autograd.grad(o, (q, kk, v), I["dO"], retain_graph=True)
            return {"dQ": dq, "dK": dk, "dV": dv}
        return fn

    def copy_fn(self, c, ctx):
        """dst <- src moving the case's minimum bytes (half read, half written); its own check."""
        torch = self.torch
        _, b = flops_bytes(c)
        g = torch.Generator(device=self.dev)
        g.manual_seed(b)
        src = torch.randint(0, 255, (b // 2,), dtype=torch.uint8, device=self.dev, generator=g)
        dst = torch.empty_like(src)

        def fn():
            dst.copy_(src)
            return {"_copy": (dst, src)}
        return fn

    def check_copy(self, fn):
        torch = self.torch
        dst, src = fn()["_copy"]
        dst.fill_(0)
        fn()
        self.sync()
        ok = bool(torch.equal(dst, src))
        return ok, {"rel_err": 0.0 if ok else None}, "" if ok else "copy differs from its source"

    def stream_time(self, c, ctx, impl, variant, nbytes):
        """Median-free steady state: STREAM_LAUNCHES back-to-back launches cycling over buffer sets
        (fresh copies of the case's tensors) that move >= STREAM_BYTES a cycle, no flush, one
        event pair around them all; ms per launch."""
        torch = self.torch
        k = max(2, -(-STREAM_BYTES // max(1, nbytes))) if not self.smoke else 2
        fns = []
        for _ in range(k):
            cx = dict(ctx)
            cx["inputs"] = {n: t.clone() for n, t in ctx["inputs"].items()}
            cx["outs"] = {n: torch.empty_like(t) for n, t in ctx["outs"].items()}
            fns.append(self.impl_fn(c, cx, impl, variant))
        for f in fns:
            f()
        self.sync()
        n = STREAM_LAUNCHES if not self.smoke else 4
        t0, t1 = self.event(), self.event()
        t0.record()
        for i in range(n):
            fns[i % k]()
        t1.record()
        self.sync()
        return t0.elapsed_time(t1) / n

    def check(self, c, ctx, fn):
        """Poison, run once, compare every output with the reference. Returns (ok, metrics)."""
        torch = self.torch
        for t in ctx["outs"].values():
            t.fill_(float("nan"))
        for name, saved in ctx["inout"].items():
            ctx["inputs"][name].copy_(saved)
        if os.environ.get("BENCH_FAULT_CRASH") and os.environ["BENCH_FAULT_CRASH"] in ctx["key"]:
            os._exit(7)  # tests: a worker that dies in a row
        if os.environ.get("BENCH_FAULT_HANG") and os.environ["BENCH_FAULT_HANG"] in ctx["key"]:
            time.sleep(3600)  # tests: a row that never finishes
        outs = fn()
        self.sync()
        fa3 = c["kernel"] in ATTENTION_KERNELS
        tol = TOL[c["dtype"]]
        # which rule judged the row: FA3's for the attention family, else the relative-error bounds
        m = {"check": "fa3" if fa3 else "rel+worst-row", "rel_err": 0.0, "max_abs_err": 0.0, "nonfinite": 0}
        if fa3:
            m["fa3"] = {}
        else:
            m["row_rel_err"] = 0.0
        why, rules = [], set()

        def fail(rule, msg):
            rules.add(rule)
            why.append(f"[{rule}] {msg}")
        for name, ref in ctx["ref"].items():
            o = outs[name].float()
            bad = (~torch.isfinite(o)).sum().item()
            m["nonfinite"] += bad
            d = o - ref
            rel = (d.norm() / ref.norm().clamp_min(1e-30)).item()
            mae = d.abs().max().item()
            m["rel_err"] = max(m["rel_err"], rel) if math.isfinite(rel) else float("inf")
            m["max_abs_err"] = max(m["max_abs_err"], mae) if math.isfinite(mae) else float("inf")
            if bad:
                fail("nonfinite", f"{name}: {bad} non-finite (unwritten or NaN) elements")
            if fa3:
                # FlashAttention-3's rule on the output tensor (ATTN_FACTOR, ATTN_SLACK); the rel err
                # above and the per-row figures are recorded, not judged
                r = fa3_rule(row_max_err(o, ref), ctx["lowp_err"][name], ctx["slack"][name])
                r["worst_pos"] = r["worst_row"] % ref.shape[-2]  # the query (O, dQ) or key (dK, dV)
                m["fa3"][name] = r
                if not r["ok"]:
                    fail("fa3", f"{name}: max err {fmt(r['max_err'], '.3g')} > {ATTN_FACTOR:g} x the low-precision "
                         f"math's {fmt(r['lowp_max_err'], '.3g')} + {r['slack']:.2g} ({fmt(r['ratio'], '.3g')} x); "
                         f"per row, not judged: {fa3_rows_text(r)}")
                continue
            r2 = ref.reshape(-1, ref.shape[-1]) if ref.dim() > 1 else ref.reshape(1, -1)
            d2 = d.reshape(r2.shape)
            # rows whose reference is small next to the typical row are judged against 5% of the
            # typical row's norm instead of their own
            floor = max(1e-30, 0.05 * ref.norm().item() / math.sqrt(max(1, r2.shape[0])))
            row = (d2.norm(dim=-1) / r2.norm(dim=-1).clamp_min(floor)).max().item()
            m["row_rel_err"] = max(m["row_rel_err"], row) if math.isfinite(row) else float("inf")
            if not rel <= tol:
                fail("rel", f"{name}: rel err {rel:.3g} > {tol:g}")
            if not row <= ROW_FACTOR * tol:
                fail("worst-row", f"{name}: worst row rel err {row:.3g} > {ROW_FACTOR * tol:g}")
        if fa3:  # the row's summary over its outputs, for the table: the worst output's figures
            per = m["fa3"].values()
            for key, field in (("fa3_ratio", "ratio"), ("lowp_max_abs_err", "lowp_max_err"),
                               ("fa3_row_ratio", "worst_row_ratio")):
                vals = [r[field] for r in per]
                m[key] = None if None in vals else max(vals)
            m["fa3_rows_over"] = sum(r["rows_over"] for r in per)
        m["failed_rules"] = sorted(rules)
        for k_ in ("rel_err", "row_rel_err", "max_abs_err"):
            if k_ in m and math.isinf(m[k_]):
                m[k_] = None  # JSON has no inf
        return not why, m, "; ".join(why)

    def context_alive(self):
        if self.smoke:
            return True
        try:
            self.torch.cuda.synchronize()
            self.torch.empty(1, device=self.dev).add_(1)
            self.torch.cuda.synchronize()
            return True
        except Exception:  # noqa: BLE001
            return False

    def run_row(self, c, ctx, impl, variant, budget_s):
        ctx["key"] = row_key(c, impl, variant)
        row = {"kernel": c["kernel"], "shape": c["shape"], "dtype": c["dtype"], "causal": c["causal"],
               "impl": impl, "variant": variant, "median_ms": None, "tflops": None, "gbps": None,
               "rel_err": None, "verified": False, "status": "error"}
        f, b = flops_bytes(c)
        row["flops"], row["bytes"] = f, b
        if impl == "tilec" and variant:
            row["ptxas"] = ptxas_summary(variant)
        try:
            fn = self.impl_fn(c, ctx, impl, variant)
            ok, m, why = self.check_copy(fn) if impl == "copy" else self.check(c, ctx, fn)
            row.update(m)
            if not ok:
                row["status"], row["error"] = "failed-check", why
                return row
            row["verified"] = True
            t = self.time_fn(fn, budget_s)
            row.update(t)
            sec = t["median_ms"] * 1e-3
            row["tflops"] = round(f / sec / 1e12, 3)
            row["gbps"] = round(b / sec / 1e9, 1)
            row["status"] = "ok"
            if c["kernel"] in MEMORY_BOUND:
                try:  # a failure here (memory for the buffer sets) must not undo the verified row
                    st = self.stream_time(c, ctx, impl, variant, b)
                    row["stream_ms"] = st
                    row["stream_gbps"] = round(b / (st * 1e-3) / 1e9, 1)
                except Exception as e:  # noqa: BLE001
                    row["stream_error"] = f"{type(e).__name__}: {str(e)[:300]}"
        except Exception as e:  # noqa: BLE001 — the row records it, the run goes on
            row["status"], row["error"] = "error", f"{type(e).__name__}: {str(e)[:600]}"
            row["verified"] = False
        return row

    def run(self, plan, skip):
        torch = self.torch
        info = {"gpu": "CPU smoke test", "driver": "none"} if self.smoke else device_info(torch)
        self.j.write({"event": "device", **info})
        if self.a.ceilings_file and os.path.exists(self.a.ceilings_file):
            ceil = json.load(open(self.a.ceilings_file))
            self.flush_ms = ceil.get("flush_ms")
        else:
            log("measuring ceilings: device copy, cuBLAS bf16/fp16 GEMM 8192^3")
            ceil = self.ceilings()
            self.j.write({"event": "ceilings", **ceil})
            if self.a.ceilings_file:
                with open(self.a.ceilings_file, "w") as f:
                    json.dump(ceil, f)
            log(f"ceilings: copy {ceil['copy_gbps']} GB/s, bf16 GEMM {ceil['gemm_bf16_tflops']} TFLOP/s, "
                f"fp16 GEMM {ceil['gemm_f16_tflops']} TFLOP/s {'; '.join(ceil['errors'])}")
        todo = []
        for c in plan:
            impls, _ = impls_for(c, self.configs)
            keys = [(i, v, row_key(c, i, v)) for i, v in impls]
            keys = [x for x in keys if x[2] not in skip]
            if keys:
                todo.append((c, keys))
        nrows = sum(len(k) for _, k in todo)
        done = 0
        for c, keys in todo:
            left = self.deadline - time.time()
            if left < 5:
                log("worker: time budget spent, stopping")
                break
            # The first row's clock starts before the setup: a hang there is caught like any other.
            self.j.write({"event": "start", "key": keys[0][2], "t": time.time()})
            try:
                ctx = self.setup_case(c)
            except Exception as e:  # noqa: BLE001
                for impl, variant, key in keys:
                    self.j.write({"event": "row", "key": key, "row": {
                        "kernel": c["kernel"], "shape": c["shape"], "dtype": c["dtype"], "causal": c["causal"],
                        "impl": impl, "variant": variant, "verified": False, "status": "error",
                        "error": f"setup: {type(e).__name__}: {str(e)[:400]}"}})
                if not self.context_alive():
                    sys.exit(3)
                continue
            for impl, variant, key in keys:
                left = self.deadline - time.time()
                budget = max(0.02, min(self.a.row_budget, 0.5 * left / max(1, nrows - done)))
                self.j.write({"event": "start", "key": key, "t": time.time()})
                row = self.run_row(c, ctx, impl, variant, budget)
                done += 1
                self.j.write({"event": "row", "key": key, "row": row})
                ms = f"{row['median_ms']:.4f} ms" if row.get("median_ms") else row["status"]
                perf = f"  {row['tflops']:.1f} TFLOP/s  {row['gbps']:.0f} GB/s" if row.get("tflops") is not None else ""
                err = f"  [{row.get('error', '')[:160]}]" if row["status"] != "ok" else ""
                log(f"[{done}/{nrows}] {key}: {ms}{perf}{err}")
                if row["status"] == "error" and not self.context_alive():
                    log("worker: CUDA context lost; exiting so the parent restarts a fresh worker")
                    sys.exit(3)
            del ctx
            if not self.smoke:
                torch.cuda.empty_cache()
        return 0


class HostEvent:
    """torch.cuda.Event's two methods on the host clock (smoke test only)."""

    def record(self):
        self.t = time.perf_counter()

    def elapsed_time(self, other):
        return (other.t - self.t) * 1e3


def ptxas_summary(variant):
    p = os.path.join(PTX_DIR, variant + ".ptxas")
    if not os.path.exists(p):
        return None
    txt = open(p).read()
    m = re.search(r"Used (\d+) registers", txt)
    sp = re.search(r"(\d+) bytes spill stores", txt)
    return {"registers": int(m.group(1)) if m else None, "spill_stores": int(sp.group(1)) if sp else None,
            "error": None if m else txt.strip()[:200]}


def device_info(torch):
    info = {"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__, "cuda": torch.version.cuda}
    try:
        info["cudnn"] = torch.backends.cudnn.version()
    except Exception:  # noqa: BLE001
        pass
    try:
        import triton
        info["triton"] = triton.__version__
    except Exception:  # noqa: BLE001
        pass
    try:
        info["driver"] = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                                        capture_output=True, text=True, timeout=20).stdout.strip().splitlines()[0]
    except Exception:  # noqa: BLE001
        info["driver"] = "unknown"
    p = torch.cuda.get_device_properties(0)
    info["sms"] = p.multi_processor_count
    return info


def plan_of(a):
    """The plan for the command line: make_plan, then --cases."""
    plan = make_plan(a.quick, a.kernels, a.dtypes, a.smoke_cpu)
    return [c for c in plan if re.search(a.cases, case_key(c))] if a.cases else plan


def worker_main(a):
    plan = plan_of(a)
    skip = set()
    if a.skip_file and os.path.exists(a.skip_file):
        skip = set(x.strip() for x in open(a.skip_file) if x.strip())
    j = Journal(a.journal)
    w = Worker(a, j)
    return w.run(plan, skip)


# ===================================================================================== parent
def read_journal(path):
    recs = []
    if not os.path.exists(path):
        return recs
    with open(path) as f:
        for ln in f:
            try:
                recs.append(json.loads(ln))
            except ValueError:
                pass  # a line cut by a kill
    return recs


def commit_id():
    p = os.path.join(BUILD, "bench", "commit.txt")
    if os.path.exists(p):
        return open(p).read().strip()
    try:
        return subprocess.run(["git", "-C", ROOT, "rev-parse", "HEAD"], capture_output=True, text=True,
                              timeout=10).stdout.strip() or "unknown"
    except Exception:  # noqa: BLE001
        return "unknown"


def collect(journal, plan, configs, started):
    recs = read_journal(journal)
    dev, ceil, rows = {}, {}, {}
    for r in recs:
        if r.get("event") == "device":
            dev = r
        elif r.get("event") == "ceilings":
            ceil = r
        elif r.get("event") == "row":
            rows[r["key"]] = r["row"]
    absent = []
    for c in plan:
        _, ab = impls_for(c, configs)
        for impl, why in ab:
            absent.append({"kernel": c["kernel"], "shape": c["shape"], "dtype": c["dtype"], "causal": c["causal"],
                           "impl": impl, "reason": why})
    ordered = []
    for c in plan:
        impls, _ = impls_for(c, configs)
        for i, v in impls:
            k = row_key(c, i, v)
            if k not in rows:
                rows[k] = {"kernel": c["kernel"], "shape": c["shape"], "dtype": c["dtype"], "causal": c["causal"],
                           "impl": i, "variant": v, "median_ms": None, "verified": False, "status": "not-run",
                           "error": "not reached (time budget, or the run is still going)"}
            if k in rows:
                r = rows[k]
                fl = floor_ms(c, ceil)
                if fl and r.get("median_ms"):
                    r["floor_ms"] = round(fl, 5)
                    r["pct_floor"] = round(100 * fl / r["median_ms"], 1)
                ordered.append(r)
    ceilings = {k: ceil.get(k) for k in ("copy_gbps", "gemm_bf16_tflops", "gemm_f16_tflops", "flush_ms")}
    return {
        "commit": commit_id(),
        "date": started.strftime("%Y-%m-%dT%H:%M:%S"),
        "gpu": dev.get("gpu", "unknown"),
        "driver": dev.get("driver", "unknown"),
        "software": {k: dev.get(k) for k in ("torch", "cuda", "cudnn", "triton") if k in dev},
        "ceilings": ceilings,
        "method": {"timing": "CUDA events, median after warm-up, L2 flushed (256 MB write) before each run",
                   "stream": f"memory-bound rows: {STREAM_LAUNCHES} back-to-back launches over rotating buffer "
                             f"sets (>= {STREAM_BYTES >> 20} MiB a cycle, no flush), one event pair, ms per launch",
                   "copy": "memory-bound cases: a device copy (torch copy_) of the case's minimum bytes, same timing",
                   "tolerances": TOL, "row_factor": ROW_FACTOR,
                   "attention_rule": f"{', '.join(ATTENTION_KERNELS)}, every implementation (check 'fa3'): "
                                     f"per output tensor, max |out - ref| <= {ATTN_FACTOR:g} x the tensor's max "
                                     f"error of plain PyTorch attention in the case's dtype (backward: delta from "
                                     f"the given low-precision O) + {ATTN_SLACK:.3g} x the output's max |ref|; ref: "
                                     f"float32 from the same inputs; per-row figures recorded, not judged",
                   "other_rule": "other kernels (check 'rel+worst-row'): rel err <= tolerances[dtype], "
                                 "worst row's <= row_factor x that"},
        "rows": ordered,
        "absent": absent,
    }


def write_results(res, out, stamp):
    os.makedirs(out, exist_ok=True)
    txt = json.dumps(res, indent=1)
    for name in ("latest.json", f"bench-{stamp}.json"):
        tmp = os.path.join(out, name + ".tmp")
        with open(tmp, "w") as f:
            f.write(txt)
        os.replace(tmp, os.path.join(out, name))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dry-run", action="store_true", help="print the plan and exit (no torch, no GPU)")
    ap.add_argument("--quick", action="store_true", help="a small subset (f16, fewer shapes)")
    ap.add_argument("--out", default=os.path.join(HERE, "results"), help="results folder")
    ap.add_argument("--kernels", type=lambda s: s.split(","), help="only these kernels (comma-separated)")
    ap.add_argument("--dtypes", type=lambda s: s.split(","), help="only these dtypes (f32,f16,bf16)")
    ap.add_argument("--variants", help="only our variants whose name matches this regular expression (the peers run "
                    "as always), e.g. 'rotpk|_rot$|bn128$'")
    ap.add_argument("--with", dest="with_variants", help="the bench set and also the variants whose name matches "
                    "this regular expression (A/Bs in the same run as the set), e.g. '_priv$'")
    ap.add_argument("--all", action="store_true", help="every variant of bench/configs.txt (several device calls), "
                    "not only the bench set (bench/bench_set.txt)")
    ap.add_argument("--cases", help="only the cases whose key (kernel|B=..,H=..|dtype|causal, as in the JSON) matches "
                    "this regular expression, e.g. '\\|1$' for the causal attention rows")
    ap.add_argument("--budget", type=float, default=420.0, help="seconds for the whole run (default 420)")
    ap.add_argument("--row-budget", type=float, default=0.25, help="timing seconds per row at most")
    ap.add_argument("--row-timeout", type=float, default=90.0, help="seconds a row may run before it is killed")
    ap.add_argument("--min-reps", type=int, default=5)
    ap.add_argument("--max-reps", type=int, default=300)
    ap.add_argument("--abi", action="store_true", help="print the ctypes struct layout (for tests)")
    ap.add_argument("--smoke-cpu", action="store_true", help=argparse.SUPPRESS)  # tests: CPU torch, toy sizes
    # worker-only
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--journal", help=argparse.SUPPRESS)
    ap.add_argument("--skip-file", help=argparse.SUPPRESS)
    ap.add_argument("--ceilings-file", help=argparse.SUPPRESS)
    ap.add_argument("--deadline", type=float, help=argparse.SUPPRESS)
    a = ap.parse_args()

    if a.abi:
        print(abi_report())
        return 0
    if a.worker:
        return worker_main(a)
    configs = configs_of(a)
    plan = plan_of(a)
    if a.dry_run:
        return dry_run(plan, configs)
    return parent_main(a, plan, configs)


def ptx_dtype(variant):
    """Element type of the first tensor argument in a variant's PTX metadata (None: no PTX)."""
    try:
        with open(os.path.join(PTX_DIR, variant + ".ptx")) as f:
            for ln in f:
                m = re.match(r"// tilec: arg \S+ tensor (\S+) ", ln)
                if m:
                    return m.group(1)
    except OSError:
        pass
    return None


def dry_run(plan, configs):
    nrows = nabsent = 0
    log(f"plan: {len(plan)} cases")
    for c in plan:
        impls, ab = impls_for(c, configs)
        nrows += len(impls)
        nabsent += len(ab)
        f, b = flops_bytes(c)
        names = []
        for i, v in impls:
            if i == "tilec":
                have = os.path.exists(os.path.join(PTX_DIR, v + ".ptx"))
                names.append(f"tilec:{v}" + ("" if have else "(no PTX yet)"))
            else:
                names.append(i)
        names += [f"{i}:absent" for i, _ in ab]
        log(f"  {case_key(c):60s} {f / 1e9:10.2f} GFLOP {b / 1e6:10.1f} MB  {' '.join(names)}")
    missing = [v["name"] for v in configs if not os.path.exists(os.path.join(PTX_DIR, v["name"] + ".ptx"))]
    for v in configs:  # a stale PTX (made before T= was added) would be fed the wrong dtype
        got = ptx_dtype(v["name"])
        if got and got != v["dtype"]:
            log(f"WARNING: {v['name']}: bench/configs.txt makes it {v['dtype']} but its PTX is {got} (make bench-prep)")
    log(f"rows: {nrows} to check and time, {nabsent} absent (no such variant)")
    log(f"tilec variants timed (bench/configs.txt; the bench set unless --variants or --all): {len(configs)}; PTX missing for {len(missing)}")
    for p, what in ((LIBTILERT, "our runtime"), (LIBBASELINES, "baselines")):
        log(f"{what}: {p} {'present' if os.path.exists(p) else 'MISSING (make bench-prep)'}")
    return 0


def _on_sigterm(signum, frame):
    raise SystemExit(128 + signum)


def parent_main(a, plan, configs):
    signal.signal(signal.SIGTERM, _on_sigterm)
    started = datetime.datetime.now(datetime.timezone.utc)
    stamp = started.strftime("%Y%m%d-%H%M%S")
    t0 = time.time()
    deadline = t0 + a.budget
    os.makedirs(a.out, exist_ok=True)
    journal = os.path.join(a.out, "rows.jsonl")
    skip_file = os.path.join(a.out, ".skip")
    ceil_file = os.path.join(a.out, ".ceilings.json")
    for p in (journal, skip_file, ceil_file):
        if os.path.exists(p):
            os.remove(p)
    log(f"bench: {len(plan)} cases, budget {a.budget:.0f} s, results in {a.out}")
    restarts = 0
    while True:
        done = {r["key"] for r in read_journal(journal) if r.get("event") == "row"}
        with open(skip_file, "w") as f:
            f.write("\n".join(sorted(done)))
        cmd = [sys.executable, "-u", os.path.abspath(__file__), "--worker", "--journal", journal,
               "--skip-file", skip_file, "--ceilings-file", ceil_file, "--deadline", str(deadline),
               "--row-budget", str(a.row_budget), "--min-reps", str(a.min_reps), "--max-reps", str(a.max_reps)]
        if a.quick:
            cmd.append("--quick")
        if a.smoke_cpu:
            cmd.append("--smoke-cpu")
        if a.kernels:
            cmd += ["--kernels", ",".join(a.kernels)]
        if a.dtypes:
            cmd += ["--dtypes", ",".join(a.dtypes)]
        if a.variants:
            cmd += ["--variants", a.variants]
        if a.all:
            cmd.append("--all")
        if a.with_variants:
            cmd += ["--with", a.with_variants]
        if a.cases:
            cmd += ["--cases", a.cases]
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        proc = subprocess.Popen(cmd, env=env)  # same session: whoever kills us reaches it too
        try:
            reason = watch(proc, journal, deadline, a.row_timeout, a.out, plan, configs, started, stamp)
        except BaseException:  # SIGTERM (an outer `timeout`) or Ctrl-C: stop the worker, keep the rows
            proc.kill()
            proc.wait()
            log("bench: interrupted; writing the rows measured so far")
            finish(a, plan, configs, started, stamp, journal, t0)
            raise
        rc = proc.returncode
        recs = read_journal(journal)
        done = {r["key"] for r in recs if r.get("event") == "row"}
        pending = [r for r in recs if r.get("event") == "start" and r["key"] not in done]
        if rc == 0 and reason is None:
            break
        if pending:
            key = pending[-1]["key"]
            status = {"timeout": "timeout"}.get(reason, "crashed")
            parts = key.split("|")
            with open(journal, "a") as f:
                f.write(json.dumps({"event": "row", "key": key, "row": {
                    "kernel": parts[0], "shape": {kv.split("=")[0]: int(kv.split("=")[1]) for kv in parts[1].split(",") if kv},
                    "dtype": parts[2], "causal": int(parts[3]) if parts[0] in ATTENTION_KERNELS else None,
                    "impl": parts[4], "variant": parts[5] or None, "verified": False, "status": status,
                    "error": f"worker {reason or 'exited with ' + str(rc)} during this row"}}) + "\n")
            log(f"bench: row {key} {status} (worker {reason or 'rc=' + str(rc)}); restarting the worker")
        else:
            log(f"bench: worker ended (rc={rc}, {reason}) outside any row")
        restarts += 1
        if reason == "deadline" or time.time() > deadline - 10 or restarts > 25:
            break
        if not pending and rc != 3:
            break  # a failure outside the rows (import, ceilings) would just repeat
    return finish(a, plan, configs, started, stamp, journal, t0)


def finish(a, plan, configs, started, stamp, journal, t0):
    res = collect(journal, plan, configs, started)
    write_results(res, a.out, stamp)
    for p in (".skip", ".ceilings.json"):
        if os.path.exists(os.path.join(a.out, p)):
            os.remove(os.path.join(a.out, p))
    try:
        sys.path.insert(0, HERE)
        import chart
        chart.write_charts(res, a.out)
    except Exception as e:  # noqa: BLE001
        log(f"bench: charts failed: {type(e).__name__}: {e}")
    table = render_tables(res)
    with open(os.path.join(a.out, "table.md"), "w") as f:
        f.write(table)
    with open(os.path.join(a.out, "best.md"), "w") as f:
        f.write(render_best(res))
    log("")
    log(table)
    log(summary(res))
    bad = [r for r in res["rows"] if not r.get("verified")]
    log(f"bench: {len(res['rows'])} rows, {len(bad)} not verified, {time.time() - t0:.0f} s; results in {a.out}")
    return 0


def watch(proc, journal, deadline, row_timeout, out, plan, configs, started, stamp):
    """Waits for the worker; kills it on a stuck row or at the deadline. Rewrites the results now
    and then so an external kill still leaves them."""
    last_write = time.time()
    while True:
        try:
            proc.wait(timeout=1.0)
            return None if proc.returncode == 0 else "crash"
        except subprocess.TimeoutExpired:
            pass
        now = time.time()
        recs = read_journal(journal)
        done = {r["key"] for r in recs if r.get("event") == "row"}
        pending = [r for r in recs if r.get("event") == "start" and r["key"] not in done]
        why = None
        if pending and now - pending[-1]["t"] > row_timeout:
            why = "timeout"
        elif now > deadline + 15:
            why = "deadline"
        if why:
            proc.kill()
            proc.wait()
            return why
        if now - last_write > 20:
            try:
                write_results(collect(journal, plan, configs, started), out, stamp)
            except Exception as e:  # noqa: BLE001
                log(f"bench: interim results not written: {e}")
            last_write = now


# ------------------------------------------------------------------------------------ tables
def shape_str(r):
    s = r["shape"]
    k = r["kernel"]
    if k == "attention_gqa":
        return (f"B{s['B']} H{s['H']}/{s['HKV']} N{s['N']} D{s['D']}" + (f" W{s['W']}" if s.get("W") else "")
                + (" causal" if r.get("causal") else ""))
    if k in ("attention", "attention_backward"):
        return f"B{s['B']} H{s['H']} N{s['N']} D{s['D']}" + (" causal" if r.get("causal") else "")
    if k in ("gemm", "gemm_gelu"):
        return f"{s['M']}x{s['N']}x{s['K']}"
    if k == "vadd":
        return f"N={s['N']}"
    return f"{s['M']}x{s['N']}"


def case_groups(res):
    """{kernel: {(shape, dtype): {impl: best verified row or the first failed one}}}"""
    out = {}
    for r in res["rows"]:
        g = out.setdefault(r["kernel"], {}).setdefault((shape_str(r), r["dtype"]), {})
        cur = g.get(r["impl"])
        if cur is None:
            g[r["impl"]] = r
            continue
        better = (r.get("verified") and r.get("median_ms") is not None and
                  (not cur.get("verified") or cur.get("median_ms") is None or r["median_ms"] < cur["median_ms"]))
        if better:
            g[r["impl"]] = r
    return out


def verified_ms(impls, impl):
    """The median of a case's `impl` row when it was verified and timed, else None."""
    r = impls.get(impl)
    return r["median_ms"] if r and r.get("verified") and r.get("median_ms") else None


def fmt(v, spec):
    return "—" if v is None else format(v, spec)


def fa3_rows_text(r):
    """One output's per-row figures of FA3's rule (information): '3 of 524288 rows over 2x, worst
    row 5121 (position 1): 0.0031 vs 0.001, 3.1 x'."""
    return (f"{r['rows_over']} of {r['rows']} rows over {ATTN_FACTOR:g}x, worst row {r['worst_row']} (position "
            f"{r.get('worst_pos')}): {fmt(r['worst_row_err'], '.3g')} vs {fmt(r['worst_row_lowp_err'], '.3g')}, "
            f"{fmt(r['worst_row_ratio'], '.3g')} x")


def fa3_rows_cell(r):
    """The table's `rows > 2x` cell (information): '3 (4.10x)' = rows over, the worst row's ratio."""
    n = r.get("fa3_rows_over")
    return "—" if n is None else f"{n} ({fmt(r.get('fa3_row_ratio'), '.2f')}x)"


def failed_rules(r):
    """' (fa3)' etc.: the check rules a failed-check row broke ('' for any other row)."""
    rules = r.get("failed_rules") if r.get("status") == "failed-check" else None
    return f" ({', '.join(rules)})" if rules else ""


def render_tables(res):
    ce = res.get("ceilings", {})
    lines = [f"# Benchmark {res['date']} — {res['gpu']}, driver {res['driver']}, commit {res['commit']}", "",
             f"Ceilings measured in this run: device copy {fmt(ce.get('copy_gbps'), '.0f')} GB/s (read + write), "
             f"cuBLAS GEMM 8192^3 bf16 {fmt(ce.get('gemm_bf16_tflops'), '.0f')} TFLOP/s, "
             f"fp16 {fmt(ce.get('gemm_f16_tflops'), '.0f')} TFLOP/s.", "",
             "`% floor` = roofline floor time / median time (100% = at the ceiling); `vs peer` = best peer's "
             "median / this median (> 1: faster than the best library peer); `vs base` = the hand-written "
             "baseline's median / this median; ✗ = failed its check (not timed). Memory-bound kernels: "
             "`vs copy` = the median of a device copy of the same bytes / this median (the bandwidth a kernel "
             "of this size can reach); `stream GB/s` = back-to-back launches over rotating buffers "
             "(steady state, no flush). Checks: the attention family by FlashAttention-3's rule per output tensor "
             f"(`fa3`: `err / lowp` = the worst output's max error over the same tensor's max error of plain "
             f"PyTorch attention in the same dtype, slack included; at most {ATTN_FACTOR:g}; `rows > "
             f"{ATTN_FACTOR:g}x` = information, not judged: the rows (one query's O / dQ, one key's dK / dV) whose "
             "own max error is over that multiple of the low-precision math's on the row, and the worst row's "
             "ratio), the other kernels by `rel err` (`rel`) and the worst row's (`worst-row`); a ✗ names the "
             "rule that failed.", ""]
    for kernel, cases in case_groups(res).items():
        mb = kernel in MEMORY_BOUND
        fa3 = kernel in ATTENTION_KERNELS
        lines += [f"## {kernel}", "",
                  "| shape | dtype | impl | variant | median ms | TFLOP/s | GB/s | % floor | vs peer | vs base | "
                  + ("vs copy | stream GB/s | " if mb else "") + "rel err | " + (f"err / lowp | rows > {ATTN_FACTOR:g}x | " if fa3 else "") + "ok |",
                  "|---|---|---|---|---:|---:|---:|---:|---:|---:|" + ("---:|---:|" if mb else "") + "---:|"
                  + ("---:|---:|" if fa3 else "") + ":-:|"]
        for (shape, dt), impls in cases.items():
            copy_ms, base_ms = verified_ms(impls, "copy"), verified_ms(impls, "baseline")
            best_peer = min((verified_ms(impls, i) for i in PEERS if verified_ms(impls, i)), default=None)
            for impl in sorted(impls, key=lambda i: IMPL_ORDER.index(i) if i in IMPL_ORDER else 99):
                r = impls[impl]
                ratio = best_peer / r["median_ms"] if best_peer and r.get("median_ms") else None
                vb = base_ms / r["median_ms"] if base_ms and r.get("median_ms") and impl != "baseline" else None
                ok = "✓" if r.get("verified") else "✗ " + (r.get("status") or "") + failed_rules(r)
                vc = copy_ms / r["median_ms"] if copy_ms and r.get("median_ms") and impl != "copy" else None
                extra = f"{fmt(vc, '.2f')} | {fmt(r.get('stream_gbps'), '.0f')} | " if mb else ""
                lines.append(f"| {shape} | {dt} | {impl} | {r.get('variant') or ''} | {fmt(r.get('median_ms'), '.4f')} | "
                             f"{fmt(r.get('tflops'), '.1f')} | {fmt(r.get('gbps'), '.0f')} | "
                             f"{fmt(r.get('pct_floor'), '.0f')} | {fmt(ratio, '.2f')} | {fmt(vb, '.2f')} | "
                             f"{extra}{fmt(r.get('rel_err'), '.1e')} | "
                             + (f"{fmt(r.get('fa3_ratio'), '.2f')} | {fa3_rows_cell(r)} | " if fa3 else "") + f"{ok} |")
        lines.append("")
    bad = [r for r in res["rows"] if not r.get("verified")]
    if bad:
        lines += ["## Rows that failed", ""]
        for r in bad:
            lines.append(f"- {r['kernel']} {shape_str(r)} {r['dtype']} {r['impl']} {r.get('variant') or ''}: "
                         f"{r.get('status')}{failed_rules(r)}: {(r.get('error') or '')[:400]}")
        lines.append("")
    if res.get("absent"):
        kinds = sorted({(a["impl"], a["reason"]) for a in res["absent"]})
        lines += ["## Absent rows", ""] + [f"- {i}: {why}" for i, why in kinds] + [""]
    return "\n".join(lines)


def render_best(res):
    """One line per case (docs/performance.md, "Current results"): our fastest verified variant
    against the fastest library peer, the hand-written baseline and, for memory-bound kernels, a
    device copy of the same bytes, all from this run."""
    lines = [f"Run {res['date']}, {res['gpu']}, commit {res['commit'][:7]}; ratios > 1: ours is faster.", "",
             "| kernel | shape | dtype | tilec ms (variant) | best peer ms | tilec / peer | tilec / baseline "
             "| % of floor | tilec / copy |", "|---|---|---|---|---|---:|---:|---:|---:|"]
    for kernel, cases in case_groups(res).items():
        for (shape, dt), impls in cases.items():
            t = impls.get("tilec")
            if not t or not t.get("verified") or t.get("median_ms") is None:
                lines.append(f"| {kernel} | {shape} | {dt} | ✗ | | | | | |")
                continue
            ms = t["median_ms"]
            peers = [(verified_ms(impls, i), i) for i in PEERS if verified_ms(impls, i)]
            bp = min(peers) if peers else None
            base, copy = verified_ms(impls, "baseline"), verified_ms(impls, "copy")
            lines.append(f"| {kernel} | {shape} | {dt} | {ms:.4f} (`{t.get('variant')}`) | "
                         + (f"{bp[0]:.4f} ({bp[1]})" if bp else "—") + f" | {fmt(bp and bp[0] / ms, '.2f')} | "
                         f"{fmt(base and base / ms, '.2f')} | {fmt(t.get('pct_floor'), '.0f')} | "
                         f"{fmt(copy and copy / ms, '.2f')} |")
    return "\n".join(lines) + "\n"


def summary(res):
    """One line per case, printed last: what the reader of the output tail needs first."""
    lines = ["", "summary (ms; x = best peer / ours, > 1 is faster than the peer; ✗ = failed check)"]
    for kernel, cases in case_groups(res).items():
        for (shape, dt), impls in cases.items():
            def cell(i):
                r = impls.get(i)
                if r is None:
                    return None
                return f"{r['median_ms']:.4f}" if r.get("median_ms") is not None else "✗"
            peer = [(r["median_ms"], i) for i, r in impls.items() if i in PEERS and r.get("median_ms")]
            bp = min(peer) if peer else None
            t = impls.get("tilec")
            x = f"x{bp[0] / t['median_ms']:.2f}" if bp and t and t.get("median_ms") else ""
            parts = [f"tilec {cell('tilec') or '-'}", f"baseline {cell('baseline') or '-'}"]
            if bp:
                parts.append(f"{bp[1]} {bp[0]:.4f}")
            cp = impls.get("copy")
            if cp and cp.get("median_ms") and t and t.get("median_ms"):
                parts.append(f"copy {cp['median_ms']:.4f} (x{cp['median_ms'] / t['median_ms']:.2f})")
            lines.append(f"  {kernel:11s} {shape:32s} {dt:4s} " + "  ".join(parts) + f"  {x}")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
