"""ctypes bindings of libtilert.so (runtime/tilert.h) and libtilec.so (compiler/tilec_api.h).

The libraries are looked for in $TILEC_LIB_DIR, the package's own lib/ folder, the build tree
the package sits in (python/../build) and the system's library path, in that order. libtilert
is needed for every launch; libtilec (the compiler) only to compile: a warm JIT cache, or
tilec.load_ptx, needs no compiler, so a machine without LLVM still runs cached kernels.
"""
import ctypes
import ctypes.util
import os
import threading
from ctypes import (POINTER, Structure, c_char, c_char_p, c_double, c_int, c_int64, c_size_t,
                    c_uint, c_void_p)

MAX_RANK = 4
MAX_ARGS = 32
MAX_TMAPS = 8

# tilert_code, in tilert.h's order
CODES = ("TILERT_OK", "TILERT_ERROR_NO_DRIVER", "TILERT_ERROR_NO_DEVICE", "TILERT_ERROR_DRIVER",
         "TILERT_ERROR_INVALID_ARGUMENT", "TILERT_ERROR_SHAPE", "TILERT_ERROR_REQUIREMENT",
         "TILERT_ERROR_BAD_METADATA", "TILERT_ERROR_NOT_FOUND", "TILERT_ERROR_OUT_OF_MEMORY",
         "TILERT_ERROR_EXECUTION", "TILERT_ERROR_UNSUPPORTED")
DTYPES = ("bool", "i32", "f16", "bf16", "f32")   # tilert_dtype
DTYPE_SIZE = {"bool": 1, "i32": 4, "f16": 2, "bf16": 2, "f32": 4}
ARG_TENSOR, ARG_SCALAR = 0, 1
BACKEND_AUTO, BACKEND_GPU, BACKEND_CPU = 0, 1, 2
TARGET_PTX, TARGET_CPU = 1, 2


class Status(Structure):
    _fields_ = [("code", c_int), ("cu_result", c_int), ("message", c_char * 512)]


class Tensor(Structure):
    _fields_ = [("data", c_void_p), ("dtype", c_int), ("rank", c_int),
                ("shape", c_int64 * MAX_RANK), ("strides", c_int64 * MAX_RANK)]


class Arg(Structure):
    _fields_ = [("kind", c_int), ("tensor", Tensor), ("scalar", c_double)]


class ArgInfo(Structure):
    _fields_ = [("name", c_char * 64), ("kind", c_int), ("dtype", c_int), ("is_out", c_int),
                ("rank", c_int), ("dims", c_int * MAX_RANK), ("zero_init", c_int)]


class DimInfo(Structure):
    _fields_ = [("name", c_char * 64), ("pinned", c_int), ("value", c_int64)]


class TmapInfo(Structure):
    _fields_ = [("arg", c_int), ("swizzle", c_int), ("box", c_int * MAX_RANK), ("multicast", c_int)]


class KernelInfo(Structure):
    _fields_ = [("name", c_char * 128), ("threads", c_int), ("smem_bytes", c_int),
                ("nargs", c_int), ("args", ArgInfo * MAX_ARGS), ("ndims", c_int),
                ("dims", DimInfo * (2 * MAX_ARGS)), ("grid", (c_char * 256) * 3),
                ("nrequires", c_int), ("requires", (c_char * 256) * 8),
                ("requires_text", (c_char * 256) * 8), ("ws_name", c_char * 128),
                ("ws_threads", c_int), ("ws_smem_bytes", c_int), ("ntmaps", c_int),
                ("tmaps", TmapInfo * MAX_TMAPS), ("ws_persistent", c_int), ("ws_cluster", c_int),
                ("ws_cluster_axis", c_int), ("ws_groups", c_int), ("ws_tile_group", c_int),
                ("ws_walk_rows", c_int), ("full_name", c_char * 128), ("cluster", c_int),
                ("aligned", c_int), ("zero_wait", c_int)]


class Options(Structure):
    _fields_ = [("targets", c_uint), ("arch", c_char_p), ("opt_level", c_int),
                ("kernel", c_char_p), ("defines", POINTER(c_char_p)), ("ndefines", c_int),
                ("werror", c_int)]


class LibraryNotFound(OSError):
    """libtilert.so or libtilec.so could not be found or loaded."""


def _candidate_dirs():
    env = os.environ.get("TILEC_LIB_DIR")
    here = os.path.dirname(os.path.abspath(__file__))
    dirs = [env] if env else []
    dirs += [os.path.join(here, "lib"), os.path.join(here, "..", "..", "build")]
    return [os.path.normpath(d) for d in dirs]


def _open(name, mode=ctypes.RTLD_GLOBAL, cls=ctypes.CDLL):
    """Loads lib<name>.so from the first candidate folder holding it, else the system's."""
    errors = []
    for d in _candidate_dirs():
        path = os.path.join(d, "lib%s.so" % name)
        if os.path.exists(path):
            try:
                return cls(path, mode=mode), path
            except OSError as e:
                errors.append("%s: %s" % (path, e))
    found = ctypes.util.find_library(name)
    if found:
        try:
            return cls(found, mode=mode), found
        except OSError as e:
            errors.append("%s: %s" % (found, e))
    raise LibraryNotFound("lib%s.so not found or not loadable (looked in %s; set TILEC_LIB_DIR)%s"
                          % (name, ", ".join(_candidate_dirs()),
                             "".join("\n  " + e for e in errors)))


def _fn(lib, name, restype, *argtypes):
    f = getattr(lib, name)
    f.restype = restype
    f.argtypes = list(argtypes) if argtypes else None
    return f


class Runtime:
    """libtilert.so: two handles on the one library: `rt` releases the GIL during calls (the CPU
    interpreter runs long), `fast` keeps it (a GPU launch is short; holding the GIL makes the
    per-signature argument buffers safe to share between threads and saves a GIL round trip)."""

    def __init__(self):
        lib, self.path = _open("tilert")
        fast = ctypes.PyDLL(self.path, mode=ctypes.RTLD_GLOBAL)
        S, P, I = Status, c_void_p, c_int
        self.device_open = _fn(lib, "tilert_device_open", S, I, I, POINTER(c_void_p))
        self.device_name = _fn(lib, "tilert_device_name", c_char_p, P)
        self.device_cc = _fn(lib, "tilert_device_compute_capability", I, P)
        self.parse_kernel_info = _fn(lib, "tilert_parse_kernel_info", S, c_char_p, POINTER(KernelInfo))
        self.eval_expr = _fn(lib, "tilert_eval_expr", S, POINTER(KernelInfo), c_char_p,
                             POINTER(c_int64), POINTER(c_int64))
        self.module_load_ptx = _fn(lib, "tilert_module_load_ptx", S, P, c_char_p, POINTER(c_void_p))
        self.module_get_kernel = _fn(lib, "tilert_module_get_kernel", S, P, c_char_p, POINTER(c_void_p))
        self.module_unload = _fn(lib, "tilert_module_unload", None, P)
        self.kernel_destroy_cpu = _fn(lib, "tilert_kernel_destroy_cpu", None, P)
        self.plan_create = _fn(lib, "tilert_plan_create", S, P, POINTER(Arg), I, POINTER(c_void_p))
        self.plan_destroy = _fn(lib, "tilert_plan_destroy", None, P)
        self.plan_grid = _fn(lib, "tilert_plan_grid", None, P, POINTER(c_int64))
        # launches: no argtypes, every argument a ready ctypes object (the cheapest ctypes call)
        self.plan_launch = _fn(lib, "tilert_plan_launch", I)
        self.plan_launch_fast = _fn(fast, "tilert_plan_launch", I)
        self.stream_wrap = _fn(lib, "tilert_stream_wrap", S, P, P, POINTER(c_void_p))
        self.stream_synchronize = _fn(lib, "tilert_stream_synchronize", S, P)
        self.synchronize = _fn(lib, "tilert_synchronize", S, P)
        self.malloc = _fn(lib, "tilert_malloc", S, P, c_size_t, POINTER(c_void_p))
        self.free = _fn(lib, "tilert_free", S, P, P)
        self.memset8 = _fn(lib, "tilert_memset8", S, P, P, ctypes.c_uint8, c_size_t)
        self.event_create = _fn(lib, "tilert_event_create", S, P, POINTER(c_void_p))
        self.event_record = _fn(lib, "tilert_event_record", S, P, P)
        self.event_elapsed_ms = _fn(lib, "tilert_event_elapsed_ms", S, P, P, POINTER(ctypes.c_float))
        self.event_destroy = _fn(lib, "tilert_event_destroy", None, P)


class Compiler:
    """libtilec.so: tilec_compile and the result accessors."""

    def __init__(self):
        lib, self.path = _open("tilec")
        P = c_void_p
        self.version = _fn(lib, "tilec_version", c_char_p)().decode()
        self.build_id = _fn(lib, "tilec_build_id", c_char_p)().decode()
        self.compile = _fn(lib, "tilec_compile", P, c_char_p, c_size_t, c_char_p, POINTER(Options))
        self.ok = _fn(lib, "tilec_result_ok", c_int, P)
        self.diagnostics = _fn(lib, "tilec_result_diagnostics", c_char_p, P)
        self.ptx = _fn(lib, "tilec_result_ptx", c_char_p, P)
        self.metadata = _fn(lib, "tilec_result_metadata", c_char_p, P)
        self.cpu_kernel = _fn(lib, "tilec_result_cpu_kernel", Status, P, P, POINTER(c_void_p))
        self.free = _fn(lib, "tilec_result_free", None, P)


_lock = threading.Lock()
_runtime = None
_compiler = None
_compiler_error = None


def runtime():
    global _runtime
    if _runtime is None:
        with _lock:
            if _runtime is None:
                _runtime = Runtime()
    return _runtime


def compiler():
    """The compiler library; raises LibraryNotFound (remembered) when it cannot be loaded."""
    global _compiler, _compiler_error
    if _compiler is None:
        runtime()  # libtilert first: libtilec.so takes its runtime from the same file
        with _lock:
            if _compiler is None and _compiler_error is None:
                try:
                    _compiler = Compiler()
                except LibraryNotFound as e:
                    _compiler_error = e
    if _compiler is None:
        raise _compiler_error
    return _compiler
