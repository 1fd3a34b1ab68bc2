"""tilec from Python: compile .tile kernels in process and call them on tensors.

    import tilec
    k = tilec.load("dsl/examples/softmax.tile", T="bf16", BLOCK=4096)
    k(x, y)          # torch CUDA tensors / cupy arrays: the GPU, on the current stream
    k(x_np, y_np)    # numpy arrays: the CPU interpreter, same kernel

Pure Python over libtilec.so (the compiler) and libtilert.so (the runtime), through ctypes.
Reference: docs/python.md.
"""
import os as _os

from . import _cache, _lib
from ._errors import (ArgumentError, CompileError, CompilerUnavailable, CompileWarning,
                      LaunchError, ShapeError, TilecError)
from ._kernel import ArgSpec, Contract, DimSpec, Kernel, default_arch, stats
from ._kernel import build as _build
from ._lib import LibraryNotFound
from ._tune import DeviceModel, Tuned, autotune, candidates, prune

__version__ = "0.1.0"
__all__ = ["load", "compile", "load_ptx", "Kernel", "Contract", "ArgSpec", "DimSpec",
           "TilecError", "CompileError", "CompileWarning", "CompilerUnavailable", "LaunchError",
           "ArgumentError", "ShapeError", "LibraryNotFound", "autotune", "Tuned", "DeviceModel",
           "candidates", "prune", "cache_dir", "stats", "compiler_version", "default_arch",
           "bf16_bits", "from_bf16_bits", "synchronize"]


def load(path, *, kernel=None, arch=None, opt_level=-1, target="ptx", defines=None, **params):
    """Compiles the .tile file at `path` (or finds it in the JIT cache). Compile-time parameters
    and pinned dims as keywords (BLOCK=4096, T="bf16") or defines={...}; kernel= picks one kernel
    of a file of several; arch defaults to the GPU's (else sm_90a); target="cpu" skips the PTX
    (interpreter only, no LLVM). Raises CompileError."""
    with open(path, "rb") as f:
        source = f.read()
    return _build(source, path, dict(defines or {}, **params), arch, opt_level, kernel,
                  target=target)


def compile(source, *, filename="<string>", kernel=None, arch=None, opt_level=-1, target="ptx",
            defines=None, **params):
    """load() for source text; filename is what diagnostics call it."""
    if isinstance(source, str):
        source = source.encode()
    return _build(source, filename, dict(defines or {}, **params), arch, opt_level, kernel,
                  target=target)


def load_ptx(ptx, *, name=None):
    """A Kernel from PTX written by tilec (a path or the text): needs no compiler, runs on the GPU
    only. name picks the kernel in a module of several (default: the first)."""
    if "\n" not in ptx and _os.path.exists(ptx):
        with open(ptx, "r", encoding="utf-8") as f:
            ptx = f.read()
    k = Kernel(ptx, arch=None)
    if name and name != k.name:
        raise ArgumentError("TILERT_ERROR_NOT_FOUND", "the PTX's first kernel is %s, not %s"
                            % (k.name, name))
    return k


def cache_dir():
    """The JIT cache's folder ($TILEC_CACHE_DIR, else ~/.cache/tilec)."""
    return _cache.directory()


def compiler_version():
    """(version, build id) of the loaded libtilec.so."""
    c = _lib.compiler()
    return c.version, c.build_id


def synchronize(device=0):
    """Waits for every launch on the GPU `device` (tests and timing)."""
    from ._kernel import devices
    from ._errors import check
    check(_lib.runtime().synchronize(devices.get(device)))


def bf16_bits(x):
    """numpy float array -> uint16 array of bfloat16 bits (round to nearest even): how numpy
    arrays pass bf16 tensors."""
    import numpy as np
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    nan = (u & 0x7FFFFFFF) > 0x7F800000
    r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    return np.where(nan, ((u >> 16) | 0x40).astype(np.uint16), r)


def from_bf16_bits(u):
    """uint16 bfloat16 bits -> float32 array."""
    import numpy as np
    return (np.asarray(u, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)
