"""Autotuning: compile every point of a parameter space (threads over the C API: each compile has
its own arena and LLVM context, and ctypes releases the GIL), prune with the resource model before
timing (the kernel's shared memory and threads against the device; the compiler's own warning that
a register tile spills; registers and spills from ptxas -v when ptxas is installed; the
contract's requirements on the actual shapes), time the
survivors on the actual arguments (GPU: CUDA events with L2 flushed before each run; CPU: the
interpreter's wall time, which only exercises the flow), and cache the winner on disk per
(source, GPU name, arch, key bucket, fixed defines, space).
"""
import hashlib
import itertools
import os
import re
import shutil
import statistics
import subprocess
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from ctypes import byref, c_float, c_void_p

from . import _args, _cache, _kernel, _lib
from ._errors import CompileError, LaunchError, TilecError, check

# Shared memory one block may opt in to, per arch (bytes).
SMEM_PER_BLOCK = {"sm_80": 166912, "sm_86": 101376, "sm_89": 101376, "sm_90": 232448,
                  "sm_90a": 232448}
L2_FLUSH_BYTES = 256 << 20  # > the H200's 60 MiB L2, several times over


class DeviceModel:
    """What the pruning checks candidates against."""

    def __init__(self, name, arch, smem_per_block=None, regs_per_sm=65536, max_regs_per_thread=255,
                 max_threads=1024):
        self.name, self.arch = name, arch
        self.smem_per_block = smem_per_block or SMEM_PER_BLOCK.get(arch, 49152)
        self.regs_per_sm, self.max_regs_per_thread = regs_per_sm, max_regs_per_thread
        self.max_threads = max_threads

    def __repr__(self):
        return "DeviceModel(%r, %r, smem_per_block=%d)" % (self.name, self.arch, self.smem_per_block)


class Candidate:
    """One point of the space: its config, Kernel (None if it did not compile), the reason it was
    pruned (None: alive), ptxas' registers and spill bytes when known, and its median time."""

    def __init__(self, config):
        self.config, self.kernel, self.reason = config, None, None
        self.registers = self.spill_bytes = None
        self.ms = None

    def record(self):
        return {"config": self.config, "reason": self.reason, "ms": self.ms,
                "registers": self.registers, "spill_bytes": self.spill_bytes}

    def __repr__(self):
        return "Candidate(%r, %s)" % (self.config, self.reason or ("%.4f ms" % self.ms if self.ms
                                                                    else "alive"))


def candidates(space):
    """Every point of {"BM": [64, 128], "WARPS": [4, 8]} as a dict, in the space's order."""
    names = list(space)
    return [dict(zip(names, vals)) for vals in itertools.product(*(space[n] for n in names))]


def compile_all(source, filename, defines, configs, arch, opt_level=-1, kernel=None, jobs=None):
    """Candidates for every config, compiled in parallel (or found in the JIT cache); a compile
    error prunes the candidate with the error's first line."""
    def one(cfg):
        c = Candidate(cfg)
        try:
            c.kernel = _kernel.build(source, filename, dict(defines, **cfg), arch, opt_level, kernel,
                                     warn=False)
        except CompileError as e:
            c.reason = "compile: " + next((l for l in e.diagnostics.splitlines() if "error" in l),
                                         e.diagnostics.splitlines()[0] if e.diagnostics else "?")
        return c
    jobs = jobs or min(len(configs), os.cpu_count() or 1)
    if jobs <= 1:
        return [one(c) for c in configs]
    with ThreadPoolExecutor(jobs) as ex:
        return list(ex.map(one, configs))


def find_ptxas():
    p = os.environ.get("TILEC_PTXAS") or shutil.which("ptxas")
    if not p and os.access("/usr/local/cuda/bin/ptxas", os.X_OK):
        p = "/usr/local/cuda/bin/ptxas"
    return p


_PTXAS_REGS = re.compile(r"Used (\d+) registers")
_PTXAS_SPILL = re.compile(r"(\d+) bytes spill stores, (\d+) bytes spill loads")


def ptxas_resources(ptx, arch, ptxas):
    """(registers, spill bytes) of the PTX's kernel from `ptxas -v`; None when it fails."""
    with tempfile.TemporaryDirectory() as d:
        src = os.path.join(d, "k.ptx")
        with open(src, "w") as f:
            f.write(ptx)
        r = subprocess.run([ptxas, "-arch=" + arch, "-v", src, "-o", os.path.join(d, "k.cubin")],
                           capture_output=True, text=True)
    if r.returncode != 0:
        return None
    regs = _PTXAS_REGS.search(r.stderr)
    spill = _PTXAS_SPILL.search(r.stderr)
    return (int(regs.group(1)) if regs else None,
            int(spill.group(1)) + int(spill.group(2)) if spill else 0)


def prune(cands, model, args=None, ptxas=True, jobs=None):
    """Sets .reason on the candidates the model rules out, before anything is timed:
    shared memory or threads over the device's limits; with ptxas (True: find it; a path; False:
    skip), spilled registers or more registers than the SM holds for one block; with args, a
    contract the arguments break (a false `require`, a pinned dim). Returns the survivors."""
    path = find_ptxas() if ptxas is True else (ptxas or None)
    alive = [c for c in cands if c.reason is None]
    for c in alive:
        ct = c.kernel.contract
        spill = next((l for l in c.kernel.diagnostics.splitlines() if "will spill" in l), None)
        if spill:  # the compiler's own register estimate (sema), with or without ptxas
            c.reason = "registers: " + spill.split("warning: ", 1)[-1]
        elif ct.smem_bytes > model.smem_per_block:
            c.reason = "smem: %d bytes > %d per block on %s" % (ct.smem_bytes, model.smem_per_block,
                                                                model.name)
        elif ct.threads > model.max_threads:
            c.reason = "threads: %d > %d" % (ct.threads, model.max_threads)
        elif args is not None:
            try:
                c.kernel.grid(*args)
            except TilecError as e:
                c.reason = "contract: %s" % e
    alive = [c for c in alive if c.reason is None]
    if path and alive:
        with ThreadPoolExecutor(jobs or min(len(alive), os.cpu_count() or 1)) as ex:
            res = list(ex.map(lambda c: ptxas_resources(c.kernel.ptx, c.kernel.arch, path), alive))
        for c, r in zip(alive, res):
            if r is None:
                c.reason = "ptxas: failed to assemble"
                continue
            c.registers, c.spill_bytes = r
            if c.spill_bytes:
                c.reason = "spills: %d bytes" % c.spill_bytes
            elif c.registers and c.registers * c.kernel.contract.threads > model.regs_per_sm:
                c.reason = "registers: %d x %d threads > %d" % (c.registers, c.kernel.contract.threads,
                                                               model.regs_per_sm)
    return [c for c in cands if c.reason is None]


# ------------------------------------------------------------------ timing

class _Flush:
    """A scratch buffer per GPU, overwritten before each timed run so no input is in L2."""
    buffers = {}
    lock = threading.Lock()

    @classmethod
    def run(cls, ordinal):
        rt = _lib.runtime()
        dev = _kernel.devices.get(ordinal)
        with cls.lock:
            p = cls.buffers.get(ordinal)
            if p is None:
                p = c_void_p()
                check(rt.malloc(dev, L2_FLUSH_BYTES, byref(p)))
                cls.buffers[ordinal] = p
        check(rt.memset8(dev, p, 0, L2_FLUSH_BYTES))


def _device_of(k, args):
    for i in k._tpos:
        return _args.describe(k.contract.args[i].name, args[i])
    return None


def time_kernel(k, args, reps=20, warmup=3):
    """Median milliseconds of k(*args): CUDA events around each launch on its stream with L2
    flushed before it, or the host clock around each interpreter run."""
    desc = _device_of(k, args)
    for _ in range(warmup):
        k(*args)
    if desc is None or desc.device == _args.CPU:
        times = []
        for _ in range(reps):
            t0 = time.perf_counter()
            k(*args)
            times.append((time.perf_counter() - t0) * 1e3)
        return statistics.median(times)
    rt, ordinal = _lib.runtime(), desc.device
    dev = _kernel.devices.get(ordinal)
    handle = desc.stream_of() if desc.stream_of else 0
    stream = _kernel.devices.stream(ordinal, handle)
    evs = []
    try:
        for _ in range(2 * reps):
            e = c_void_p()
            check(rt.event_create(dev, byref(e)))
            evs.append(e)
        for r in range(reps):
            _Flush.run(ordinal)
            check(rt.event_record(evs[2 * r], stream))
            k(*args, stream=handle)
            check(rt.event_record(evs[2 * r + 1], stream))
        check(rt.stream_synchronize(stream))
        times = []
        for r in range(reps):
            ms = c_float()
            check(rt.event_elapsed_ms(evs[2 * r], evs[2 * r + 1], byref(ms)))
            times.append(ms.value)
    finally:
        for e in evs:
            rt.event_destroy(e)
    return statistics.median(times)


# ------------------------------------------------------------------ autotune

def _bucket(v):
    """Key values are bucketed to the next power of two: 1000 and 1024 share a winner."""
    v = int(v)
    return 1 if v <= 1 else 1 << (v - 1).bit_length()


class Tuned:
    """A tuned kernel: call it like a Kernel. The first call of each key bucket finds the winner
    (disk cache, else tuning on these arguments), later calls go straight to it."""

    def __init__(self, source, filename, space, key, defines, kernel, arch, opt_level, model, reps,
                 warmup, jobs, ptxas):
        self.source, self.filename, self.space, self.key = source, filename, space, list(key)
        self.defines, self.kernel_name, self.arch, self.opt_level = defines, kernel, arch, opt_level
        self.model, self.reps, self.warmup, self.jobs, self.ptxas = model, reps, warmup, jobs, ptxas
        self.configs = candidates(space)
        if not self.configs:
            raise ValueError("autotune: the space has no point")
        self.winners = {}       # (device, bucket) -> Kernel
        self.records = {}       # (device, bucket) -> the tuning record (dict)
        self._buckets = {}      # signature key -> bucket
        self._base = None
        self._lock = threading.Lock()

    def _base_kernel(self):
        """The first candidate: the contract (arg and dim names) shared by all of them."""
        if self._base is None:
            self._base = _kernel.build(self.source, self.filename,
                                       dict(self.defines, **self.configs[0]), self.arch,
                                       self.opt_level, self.kernel_name)
        return self._base

    def bucket(self, args):
        """(device, key bucket) of these arguments."""
        base = self._base_kernel()
        sig = tuple([_args.signature_key(args[i]) for i in base._tpos])
        b = self._buckets.get(sig)
        if b is not None:
            return b
        specs, values, device = base.contract.args, {}, _args.CPU
        for i, spec in enumerate(specs):
            if spec.kind == "scalar":
                values[spec.name] = args[i]
                continue
            d = _args.describe(spec.name, args[i])
            device = d.device
            values.update(zip(spec.dims, d.shape))
        unknown = [n for n in self.key if n not in values]
        if unknown:
            raise ValueError("autotune key %s: not a dim or scalar of %s" % (unknown, base.name))
        b = (device, tuple(_bucket(values[n]) for n in self.key))
        if None not in sig:
            self._buckets[sig] = b
        return b

    def _record_key(self, device_name, arch, bucket):
        space = sorted((k, [repr(v) for v in vs]) for k, vs in self.space.items())
        return _cache.digest("tune", hashlib.sha256(self.source).hexdigest(), device_name, arch,
                             bucket, sorted(_kernel.define_strings(self.defines)), space,
                             self.kernel_name or "", self.key)

    def best(self, *args):
        """The winning Kernel for these arguments (tuning now if no record exists)."""
        b = self.bucket(args)
        k = self.winners.get(b)
        if k is not None:
            return k
        with self._lock:
            k = self.winners.get(b)
            if k is None:
                k = self._find(args, b)
                self.winners[b] = k
        return k

    def _find(self, args, b):
        device, bucket = b
        arch = self.arch or _kernel.default_arch()
        model = self.model or _model_for(device, arch)
        rkey = self._record_key(model.name, arch, list(bucket))
        rec = _cache.read_json("tune", rkey)
        if rec and rec.get("config") is not None:
            rec["cached"] = True
            self.records[b] = rec
            return _kernel.build(self.source, self.filename, dict(self.defines, **rec["config"]),
                                 arch, self.opt_level, self.kernel_name)
        t0 = time.perf_counter()
        cands = compile_all(self.source, self.filename, self.defines, self.configs, arch,
                            self.opt_level, self.kernel_name, self.jobs)
        t_compile = time.perf_counter() - t0
        alive = prune(cands, model, args, self.ptxas, self.jobs)
        for c in alive:
            try:
                c.ms = time_kernel(c.kernel, args, self.reps, self.warmup)
            except LaunchError as e:
                c.reason = "launch: %s" % e
        timed = [c for c in alive if c.ms is not None]
        if not timed:
            raise TilecError("autotune %s: every candidate was pruned:\n  %s" % (
                self.filename, "\n  ".join("%s: %s" % (c.config, c.reason) for c in cands)))
        win = min(timed, key=lambda c: c.ms)
        rec = {"config": win.config, "ms": win.ms, "gpu": model.name, "arch": arch,
               "bucket": list(bucket), "key": self.key, "compile_s": t_compile,
               "tune_s": time.perf_counter() - t0, "candidates": [c.record() for c in cands]}
        _cache.write_json("tune", rkey, rec)
        self.records[b] = rec
        return win.kernel

    def __call__(self, *args, **kw):
        if kw:
            args, stream = self._base_kernel()._normalize(args, kw)
            if stream is not None:
                return self.best(*args)(*args, stream=stream)
        return self.best(*args)(*args)


def _model_for(device, arch):
    if device == _args.CPU:
        return DeviceModel("CPU interpreter", arch)
    rt = _lib.runtime()
    return DeviceModel(rt.device_name(_kernel.devices.get(device)).decode(), arch)


def autotune(path=None, space=None, key=(), *, source=None, filename=None, defines=None,
             kernel=None, arch=None, opt_level=-1, model=None, reps=20, warmup=3, jobs=None,
             ptxas=True):
    """A Tuned kernel over `space` ({"BM": [64, 128], ...}); key names the dims or scalars whose
    (power-of-two bucketed) values select a winner. defines fixes other parameters; model
    overrides the DeviceModel (e.g. to prune for an H200 on a CPU-only machine)."""
    if source is None:
        with open(path, "rb") as f:
            source = f.read()
    elif isinstance(source, str):
        source = source.encode()
    return Tuned(source, filename or path or "<string>", dict(space or {}), key,
                 dict(defines or {}), kernel, arch, opt_level, model, reps, warmup, jobs, ptxas)
