"""Kernels: compile (or find in the JIT cache), check arguments against the contract, launch.

A Kernel holds the PTX and its contract. Calling it binds the arguments once per signature
(dtypes, shapes, strides, device) through tilert_plan_create — the runtime's own checks, with
its messages — and keeps the bound plan; later calls with the same signature only read the data
pointers and scalars and make one ctypes call (tilert_plan_launch). numpy arrays and CPU torch
tensors run in the interpreter (built from the source on first use), CUDA memory on the GPU.
"""
import ctypes
import os
import threading
import warnings
import weakref
from collections import namedtuple
from ctypes import byref, c_char_p, c_double, c_int64, c_void_p

from . import _args, _cache, _lib
from ._errors import (ArgumentError, CompileError, CompilerUnavailable, CompileWarning, check)

# kind: "tensor" | "scalar"; zero_init: an out tensor declared `= 0` (every launch zeroes it)
ArgSpec = namedtuple("ArgSpec", "name kind dtype is_out dims zero_init", defaults=(False,))
DimSpec = namedtuple("DimSpec", "name pinned value")

# What the package did, for tests and benchmarks: compiles (PTX or interpreter builds through
# libtilec), cache_hits (PTX from disk), memo_hits (the same load() again in this process).
stats = {"compiles": 0, "cpu_builds": 0, "cache_hits": 0, "memo_hits": 0}
_MISSING = object()



def _made_once(cache, lock, key, make):
    """cache[key], made by make() the first time (under lock; a hit takes no lock)."""
    v = cache.get(key)
    if v is None:
        with lock:
            v = cache.get(key)
            if v is None:
                v = cache[key] = make()
    return v

class Contract:
    """A kernel's contract, parsed by the runtime from its "// tilec:" lines."""

    def __init__(self, info):
        dec = lambda b: (b if isinstance(b, bytes) else b.value).decode()
        self.name = dec(info.name)
        self.threads = info.threads
        self.smem_bytes = info.smem_bytes
        self.dims = [DimSpec(dec(d.name), bool(d.pinned), d.value)
                     for d in info.dims[:info.ndims]]
        self.args = [ArgSpec(dec(a.name), "tensor" if a.kind == _lib.ARG_TENSOR else "scalar",
                             _lib.DTYPES[a.dtype], bool(a.is_out),
                             tuple(self.dims[d].name for d in a.dims[:a.rank]), bool(a.zero_init))
                     for a in info.args[:info.nargs]]
        self.grid = [dec(g) for g in info.grid]
        self.requires = [dec(t) for t in info.requires_text[:info.nrequires]]
        self._info = info

    def derive_dims(self, values):
        """The dims of dimension expressions (Y$1 for Y: f32[M, D / 2]) from the others in
        `values` ({name: int}): each has an implied requirement "Y$1 <expression> ==", which the
        runtime's evaluator computes, as `tilec run` does."""
        names = [d.name for d in self.dims]
        vals = (c_int64 * max(len(names), 1))(*[values.get(n, -1) for n in names])
        out = {}
        for rpn in (r.value.decode() for r in self._info.requires[:self._info.nrequires]):
            head, _, rest = rpn.partition(" ")
            if "$" in head and head not in values and rest.endswith(" =="):
                v = c_int64()
                check(_lib.runtime().eval_expr(byref(self._info), rest[:-3].encode(), vals, byref(v)))
                out[head] = v.value
        return out

    def __repr__(self):
        args = ", ".join("%s: %s%s%s%s" % (a.name, "out " if a.is_out else "", a.dtype,
                                            "[%s]" % ", ".join(a.dims) if a.kind == "tensor" else "",
                                            " = 0" if a.zero_init else "")
                         for a in self.args)
        return "<tilec kernel %s(%s), %d threads>" % (self.name, args, self.threads)


def parse_contract(text):
    info = _lib.KernelInfo()
    check(_lib.runtime().parse_kernel_info(text.encode(), byref(info)))
    return info


# ------------------------------------------------------------------ devices

class _Devices:
    """tilert devices, opened on first use: the CPU interpreter and each CUDA ordinal; per
    device, the wrappers of foreign stream handles (torch's, cupy's)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.handles = {}
        self.streams = {}

    def get(self, ordinal):
        def open_device():
            h = c_void_p()
            backend = _lib.BACKEND_CPU if ordinal == _args.CPU else _lib.BACKEND_GPU
            check(_lib.runtime().device_open(backend, max(ordinal, 0), byref(h)))
            return h
        return _made_once(self.handles, self.lock, ordinal, open_device)

    def stream(self, ordinal, handle):
        key = (ordinal, handle)
        s = self.streams.get(key)
        if s is None:
            s = c_void_p()
            check(_lib.runtime().stream_wrap(self.get(ordinal), c_void_p(handle), byref(s)))
            self.streams[key] = s
        return s


devices = _Devices()


def default_arch():
    """$TILEC_ARCH, else the first GPU's (sm_90 -> sm_90a: tilec's Hopper target), else sm_90a."""
    env = os.environ.get("TILEC_ARCH")
    if env:
        return env
    try:
        cc = _lib.runtime().device_cc(devices.get(0))
    except Exception:
        return "sm_90a"
    return {80: "sm_80", 86: "sm_86", 89: "sm_89"}.get(cc, "sm_90a")


# ------------------------------------------------------------------ compiling

def _finalize(obj, fn, *args):
    """Frees a C object with its Python owner, but not at interpreter exit: the process's end
    frees everything, and the CUDA context may be gone by then."""
    weakref.finalize(obj, fn, *args).atexit = False


class _Result:
    """A tilec_result, freed with the object."""

    def __init__(self, handle):
        self.handle = handle
        _finalize(self, _lib.compiler().free, handle)


def compile_result(source, filename, defines, arch, opt_level, kernel, targets):
    """tilec_compile; CompileError with the diagnostics on failure, CompileWarning for warnings.
    ctypes releases the GIL for the call, so threads compile in parallel (autotune)."""
    try:
        comp = _lib.compiler()
    except _lib.LibraryNotFound as e:
        raise CompilerUnavailable("compiling %s needs libtilec.so, which cannot be loaded here "
                                  "(%s); a warm JIT cache or tilec.load_ptx needs no compiler"
                                  % (filename, e)) from None
    defs = (c_char_p * max(len(defines), 1))(*[d.encode() for d in defines])
    o = _lib.Options(targets=targets, arch=arch.encode(), opt_level=opt_level,
                     kernel=kernel.encode() if kernel else None, defines=defs,
                     ndefines=len(defines), werror=0)
    h = comp.compile(source, len(source), filename.encode(), byref(o))
    if not h:
        raise MemoryError("tilec_compile: out of memory")
    r = _Result(h)
    r.diagnostics = comp.diagnostics(h).decode(errors="replace")
    if not comp.ok(h):
        raise CompileError(r.diagnostics)
    return r


def _warn(diag):
    if diag:
        warnings.warn(CompileWarning(diag.rstrip("\n")), stacklevel=4)


def define_strings(defines):
    """{"BLOCK": 4096, "T": "bf16"} -> sorted ["BLOCK=4096", "T=bf16"] (the cache key's order)."""
    out = []
    for k, v in defines.items():
        if isinstance(v, bool):
            v = int(v)
        out.append("%s=%s" % (k, repr(v) if isinstance(v, float) else v))
    return sorted(out)


# ------------------------------------------------------------------ kernels

class _Plan:
    """One bound signature: the runtime's plan and the buffers one launch fills."""
    __slots__ = ("handle", "ptrs", "scalars", "getters", "spos", "stream_of", "device",
                 "launch_fn", "err", "errp", "streams", "__weakref__")

    def __init__(self, handle, nargs, getters, spos, stream_of, device):
        self.handle = handle
        self.ptrs = (c_void_p * nargs)()
        self.scalars = (c_double * nargs)() if spos else None
        self.getters, self.spos, self.stream_of, self.device = getters, spos, stream_of, device
        rt = _lib.runtime()
        self.launch_fn = rt.plan_launch if device == _args.CPU else rt.plan_launch_fast
        self.err = _lib.Status()
        self.errp = ctypes.pointer(self.err)
        self.streams = {}  # foreign stream handle -> tilert_stream wrapper
        _finalize(self, rt.plan_destroy, handle)

    def wrap(self, handle):
        s = self.streams[handle] = devices.stream(self.device, handle)
        return s


class Kernel:
    """A compiled kernel: call it on tensors (see the module docstring). Attributes: name,
    contract, ptx, arch, defines, source_path."""

    def __init__(self, ptx, arch, defines=(), source=None, filename=None, kernel=None,
                 opt_level=-1, result=None, metadata=None):
        self.ptx = ptx                 # None: compiled for the interpreter only
        self.arch = arch
        self.defines = tuple(defines)
        self.source_path = filename
        self._source, self._kernel_opt, self._opt_level = source, kernel, opt_level
        self._result = result          # a tilec_result with the tile IR, for the interpreter
        self._info = parse_contract(ptx or metadata)
        self.contract = Contract(self._info)
        self.name = self.contract.name
        specs = self.contract.args
        self._nargs = len(specs)
        self._index = {a.name: i for i, a in enumerate(specs)}
        self._tpos = tuple(i for i, a in enumerate(specs) if a.kind == "tensor")
        self._spos = tuple(i for i, a in enumerate(specs) if a.kind == "scalar")
        self._plans = {}
        self._lock = threading.Lock()
        self._kernels = {}             # device -> tilert_kernel handle
        self._keep = []                # modules and CPU kernels, freed with the Kernel
        _finalize(self, _release, self._keep)

    def __repr__(self):
        return repr(self.contract)

    # -------------------------------------------------------------- calling

    def __call__(self, *args, **kw):
        stream = None
        if kw or len(args) != self._nargs:
            args, stream = self._normalize(args, kw)
        keys = _args.keys
        try:
            key = tuple([keys[type(args[i])](args[i]) for i in self._tpos])
            plan = self._plans[key]
        except KeyError:  # a new signature, or a type describe() has not seen
            key = tuple([_args.signature_key(args[i]) for i in self._tpos])
            plan = self._bind(args, key)
        ptrs = plan.ptrs
        for i, get in plan.getters:
            ptrs[i] = get(args[i])
        if plan.spos:
            sc = plan.scalars
            try:
                for i in plan.spos:
                    sc[i] = args[i]
            except TypeError:
                for i in plan.spos:
                    sc[i] = _scalar(self.name, self.contract.args[i], args[i])
        if stream is None:
            if plan.stream_of is not None:
                h = plan.stream_of()
                stream = plan.streams.get(h) or plan.wrap(h)
        else:
            stream = plan.wrap(_args.stream_handle(stream))
        if plan.launch_fn(plan.handle, ptrs, plan.scalars, stream, plan.errp):
            check(plan.err)

    def _normalize(self, args, kw):
        """Positional + keyword arguments -> one tuple in the kernel's order; stream= is taken
        unless the kernel has an argument of that name."""
        specs = self.contract.args
        if len(args) > self._nargs:
            raise ArgumentError("TILERT_ERROR_INVALID_ARGUMENT", "%s takes %d arguments (%s), got %d"
                                % (self.name, self._nargs, ", ".join(a.name for a in specs),
                                   len(args)))
        out = list(args) + [_MISSING] * (self._nargs - len(args))
        stream = None
        for k, v in kw.items():
            i = self._index.get(k)
            if i is None and k == "stream":
                stream = v
                continue
            if i is None:
                raise ArgumentError("TILERT_ERROR_INVALID_ARGUMENT", "%s has no argument '%s' (it "
                                    "takes %s)" % (self.name, k, ", ".join(a.name for a in specs)))
            if out[i] is not _MISSING:
                raise ArgumentError("TILERT_ERROR_INVALID_ARGUMENT",
                                    "%s: argument '%s' given twice" % (self.name, k))
            out[i] = v
        missing = [specs[i].name for i, v in enumerate(out) if v is _MISSING]
        if missing:
            raise ArgumentError("TILERT_ERROR_INVALID_ARGUMENT", "%s: missing argument%s %s"
                                % (self.name, "s" if len(missing) > 1 else "",
                                   ", ".join("'%s'" % m for m in missing)))
        return tuple(out), stream

    def _bind(self, args, key):
        """The slow path, once per signature: describe the tensors, bind through the runtime."""
        specs = self.contract.args
        descs, device = {}, None
        for i in self._tpos:
            d = _args.describe(specs[i].name, args[i])
            if specs[i].is_out and not d.writeable:
                raise ArgumentError("TILERT_ERROR_INVALID_ARGUMENT", "%s: argument '%s' is written "
                                    "by the kernel but the %s is read-only"
                                    % (self.name, specs[i].name, d.what))
            if device is not None and d.device != device:
                raise ArgumentError("TILERT_ERROR_INVALID_ARGUMENT", "%s: tensors on different "
                                    "devices (%s and %s)" % (self.name, _dev_name(device),
                                                             _dev_name(d.device)))
            device, descs[i] = d.device, d
        raw = (_lib.Arg * max(self._nargs, 1))()
        for i, spec in enumerate(specs):
            if spec.kind == "scalar":
                raw[i].kind = _lib.ARG_SCALAR
                raw[i].scalar = _scalar(self.name, spec, args[i])
                continue
            d = descs[i]
            t = raw[i].tensor
            raw[i].kind = _lib.ARG_TENSOR
            t.data, t.dtype, t.rank = d.ptr_of(args[i]), _lib.DTYPES.index(d.dtype), len(d.shape)
            if len(d.shape) > _lib.MAX_RANK:
                raise ArgumentError("TILERT_ERROR_SHAPE", "%s: argument '%s' has rank %d (at most "
                                    "%d)" % (self.name, spec.name, len(d.shape), _lib.MAX_RANK))
            for r, (n, s) in enumerate(zip(d.shape, d.strides)):
                t.shape[r], t.strides[r] = n, s
        if device is None:
            device = _args.CPU
        handle = c_void_p()
        check(_lib.runtime().plan_create(self._kernel_for(device), raw, self._nargs, byref(handle)))
        plan = _Plan(handle, self._nargs, [(i, descs[i].ptr_of) for i in self._tpos],
                     self._spos, descs[self._tpos[0]].stream_of if self._tpos else None, device)
        if None not in key:
            with self._lock:
                if len(self._plans) >= 4096:  # a workload of ever new shapes: start over
                    self._plans.clear()
                self._plans[key] = plan
        return plan

    # -------------------------------------------------------------- backends

    def _kernel_for(self, device):
        return _made_once(self._kernels, self._lock, device,
                          lambda: self._cpu_kernel() if device == _args.CPU else self._gpu_kernel(device))

    def _gpu_kernel(self, ordinal):
        if self.ptx is None:
            raise ArgumentError("TILERT_ERROR_UNSUPPORTED", "%s was compiled for the interpreter "
                                "only (target='cpu'): no PTX to run on the GPU" % self.name)
        rt = _lib.runtime()
        mod, k = c_void_p(), c_void_p()
        check(rt.module_load_ptx(devices.get(ordinal), self.ptx.encode(), byref(mod)))
        self._keep.append((rt.module_unload, mod))
        check(rt.module_get_kernel(mod, self.name.encode(), byref(k)))
        return k

    def _cpu_kernel(self):
        if self._result is None:
            if self._source is None:
                raise ArgumentError("TILERT_ERROR_UNSUPPORTED", "%s: loaded from PTX alone, so it "
                                    "cannot run in the interpreter (load the .tile source)"
                                    % self.name)
            stats["cpu_builds"] += 1
            self._result = compile_result(self._source, self.source_path or "<string>",
                                          list(self.defines), self.arch, self._opt_level,
                                          self._kernel_opt, _lib.TARGET_CPU)
        k = c_void_p()
        check(_lib.compiler().cpu_kernel(self._result.handle, devices.get(_args.CPU), byref(k)))
        self._keep.append((_lib.runtime().kernel_destroy_cpu, k, self._result))
        return k

    def grid(self, *args, **kw):
        """The grid a launch with these arguments would use (x, y, z), launching nothing."""
        args, _ = self._normalize(args, kw) if kw or len(args) != self._nargs else (args, None)
        plan = self._bind(args, (None,))
        g = (c_int64 * 3)()
        _lib.runtime().plan_grid(plan.handle, g)
        return tuple(g)


def _release(keep):
    for entry in reversed(keep):
        entry[0](entry[1])


def _dev_name(d):
    return "cpu" if d == _args.CPU else "cuda:%d" % d


def _scalar(kname, spec, v):
    try:
        return float(v)
    except (TypeError, ValueError):
        raise ArgumentError("TILERT_ERROR_INVALID_ARGUMENT", "%s: argument '%s' is a %s scalar, "
                            "got %s" % (kname, spec.name, spec.dtype, type(v).__name__)) from None


# ------------------------------------------------------------------ loading

_memo = {}
_memo_lock = threading.Lock()


def ptx_key(source, defines, arch, opt_level, kernel, build_id):
    return _cache.digest("ptx", source, "\0".join(defines), arch, opt_level, kernel or "",
                         build_id)


def build(source, filename, defines, arch=None, opt_level=-1, kernel=None, memo=True,
          target="ptx", warn=True):
    """Source bytes -> Kernel through the in-process memo, the disk cache, or a compile.
    target="cpu": the front end and tile IR only (no LLVM, nothing cached): the interpreter.
    The compile's warnings are kept with the PTX (Kernel.diagnostics) and, when warn, raised as
    CompileWarning on each load from disk or compile."""
    arch = arch or default_arch()
    defs = define_strings(defines)
    if target == "cpu":
        stats["cpu_builds"] += 1
        r = compile_result(source, filename, defs, arch, opt_level, kernel, _lib.TARGET_CPU)
        k = Kernel(None, arch, defs, source, filename, kernel, opt_level, r,
                   _lib.compiler().metadata(r.handle).decode())
        k.diagnostics = r.diagnostics
        if warn:
            _warn(k.diagnostics)
        return k
    if target != "ptx":
        raise ValueError("target must be 'ptx' or 'cpu', not %r" % (target,))
    try:
        build_id = _lib.compiler().build_id
    except _lib.LibraryNotFound as e:
        raise CompilerUnavailable("the JIT cache is keyed by the compiler's build id, and "
                                  "libtilec.so cannot be loaded here: %s" % e) from None
    key = ptx_key(source, defs, arch, opt_level, kernel, build_id)
    if memo:
        k = _memo.get(key)
        if k is not None:
            stats["memo_hits"] += 1
            return k
    ptx, result = _cache.read_text("ptx", key, ".ptx"), None
    if ptx is not None and _valid_ptx(ptx):
        stats["cache_hits"] += 1
        diag = _cache.read_text("ptx", key, ".diag") or ""
    else:
        if os.environ.get("TILEC_NO_COMPILE") == "1":  # tests: prove a warm load compiles nothing
            raise CompilerUnavailable("TILEC_NO_COMPILE=1 and %s is not in the JIT cache" % filename)
        stats["compiles"] += 1
        result = compile_result(source, filename, defs, arch, opt_level, kernel,
                                _lib.TARGET_PTX | _lib.TARGET_CPU)
        ptx, diag = _lib.compiler().ptx(result.handle).decode(), result.diagnostics
        if diag:  # before the PTX: whoever finds the PTX finds its warnings
            _cache.write_text("ptx", key, ".diag", diag)
        _cache.write_text("ptx", key, ".ptx", ptx)
    k = Kernel(ptx, arch, defs, source, filename, kernel, opt_level, result)
    k.cache_key, k.diagnostics = key, diag
    if warn:
        _warn(diag)
    if memo:
        with _memo_lock:
            _memo[key] = k
    return k


def _valid_ptx(ptx):
    """A cache entry is used only when its contract parses and the PTX is complete."""
    try:
        parse_contract(ptx)
    except Exception:
        return False
    return ptx.rstrip().endswith("}")
