"""Tensor arguments from other libraries: numpy arrays (host memory: the CPU interpreter), torch
tensors (CUDA: the GPU on torch's current stream; CPU: the interpreter) and any object with
__cuda_array_interface__ (cupy, numba, ...). torch and cupy are never imported here: their types
are recognised by module name, and their modules are already loaded when such objects exist.

describe() is the slow path, once per signature: what the runtime needs to bind the tensor.
signature_key() is the fast path, every call: a hashable summary of everything describe() reads
except the data pointer, so one dict lookup finds the bound launch (docs/python.md).
"""
import functools
import sys

from . import _lib
from ._errors import ArgumentError

# dtype spellings -> tilec dtype. numpy has no bfloat16: a uint16 array passes the bits of one
# (tilec.bf16_bits / tilec.from_bf16_bits convert); ml_dtypes' bfloat16 is taken as is.
_NUMPY = {"bool": "bool", "int32": "i32", "float16": "f16", "float32": "f32",
          "bfloat16": "bf16", "uint16": "bf16"}
_TORCH = {"torch.bool": "bool", "torch.int32": "i32", "torch.float16": "f16",
          "torch.bfloat16": "bf16", "torch.float32": "f32"}
_TYPESTR = {"|b1": "bool", "<i4": "i32", "<f2": "f16", "<f4": "f32", "<u2": "bf16"}
CPU = -1  # the device of host memory


class Desc:
    """One tensor argument: where it lives (CPU or a CUDA ordinal), its tilec dtype, shape,
    strides in elements, how to read its data pointer and the stream to launch on."""
    __slots__ = ("device", "dtype", "shape", "strides", "ptr_of", "stream_of", "writeable", "what")

    def __init__(self, device, dtype, shape, strides, ptr_of, stream_of, writeable, what):
        self.device, self.dtype, self.shape = device, dtype, shape
        self.strides = _normalized(shape, strides)
        self.ptr_of, self.stream_of, self.writeable, self.what = ptr_of, stream_of, writeable, what


keys = {}  # type -> signature key function, filled by describe()


def signature_key(v):
    """Hashable signature of a tensor (None: a type describe() has not seen)."""
    f = keys.get(type(v))
    return f(v) if f else None


def _elem_strides(name, strides, itemsize):
    if any(s % itemsize for s in strides):
        raise ArgumentError("TILERT_ERROR_SHAPE", "argument '%s': strides %s (bytes) are not a "
                            "multiple of the element size %d" % (name, strides, itemsize))
    return tuple(s // itemsize for s in strides)


def _normalized(shape, strides):
    """Strides the runtime accepts for the same memory: an empty tensor touches nothing (numpy
    gives it zero strides), and the stride of an axis of size 1 is never used."""
    if 0 in shape:
        return _contiguous(shape)
    return tuple(s if n > 1 else (1 if r == len(shape) - 1 else max(s, 1))
                 for r, (n, s) in enumerate(zip(shape, strides)))


def _contiguous(shape):
    out, n = [], 1
    for d in reversed(shape):
        out.append(n)
        n *= d
    return tuple(reversed(out))


def _is_torch(v):
    return type(v).__module__.startswith("torch") and hasattr(v, "data_ptr")


def _torch_stream(ordinal):
    """A function of no arguments giving torch's current stream on that GPU (a raw handle)."""
    torch = sys.modules["torch"]
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    if raw:
        return functools.partial(raw, ordinal)
    return lambda: torch.cuda.current_stream(ordinal).cuda_stream


def _torch(name, t):
    dtype = _TORCH.get(str(t.dtype))
    if dtype is None:
        raise _bad_dtype(name, str(t.dtype))
    dev = t.get_device()
    keys.setdefault(type(t), lambda t: (t.dtype, t.shape, t.stride(), t.get_device()))
    dev_ = CPU if dev < 0 else dev
    stream = None if dev < 0 else _torch_stream(dev)
    return Desc(dev_, dtype, tuple(t.shape), tuple(t.stride()), type(t).data_ptr, stream,
                True, "torch tensor")


def _numpy(name, a):
    dtype = _NUMPY.get(a.dtype.name)
    if dtype is None:
        raise _bad_dtype(name, "numpy " + a.dtype.name)
    keys.setdefault(type(a), lambda a: (a.dtype, a.shape, a.strides, a.flags.writeable))
    return Desc(CPU, dtype, tuple(a.shape), _elem_strides(name, a.strides, a.itemsize),
                lambda a: a.__array_interface__["data"][0], None, a.flags.writeable,
                "numpy array")


def _cai_device(v):
    dev = getattr(v, "device", None)  # cupy: a Device with .id
    return getattr(dev, "id", 0) if not isinstance(dev, str) else 0


def _cupy_stream(ordinal):
    return sys.modules["cupy"].cuda.get_current_stream().ptr


def _cai(name, v):
    cai = v.__cuda_array_interface__
    dtype = _TYPESTR.get(cai["typestr"])
    if dtype is None:
        raise _bad_dtype(name, "typestr " + cai["typestr"])
    if cai.get("mask") is not None:
        raise ArgumentError("TILERT_ERROR_INVALID_ARGUMENT",
                            "argument '%s': masked arrays are not supported" % name)
    shape = tuple(cai["shape"])
    size = _lib.DTYPE_SIZE[dtype]
    strides = (_elem_strides(name, cai["strides"], size) if cai.get("strides")
               else _contiguous(shape))

    def key(v):
        c = v.__cuda_array_interface__
        return (c["typestr"], c["shape"], c.get("strides"), c["data"][1], _cai_device(v))
    keys.setdefault(type(v), key)
    dev = _cai_device(v)
    stream = _cupy_stream if type(v).__module__.startswith("cupy") else (lambda o: 0)
    return Desc(dev, dtype, shape, strides, lambda v: v.__cuda_array_interface__["data"][0],
                lambda o=dev, s=stream: s(o), not cai["data"][1], type(v).__name__)


def _bad_dtype(name, got):
    return ArgumentError("TILERT_ERROR_INVALID_ARGUMENT",
                         "argument '%s': unsupported dtype %s (tilec takes bool, int32, float16, "
                         "bfloat16, float32; numpy bfloat16 as uint16 bits)" % (name, got))


def describe(name, v):
    """The Desc of a tensor argument, or ArgumentError naming what was given."""
    if _is_torch(v):
        return _torch(name, v)
    if type(v).__module__ == "numpy" and hasattr(v, "__array_interface__"):
        return _numpy(name, v)
    if hasattr(v, "__cuda_array_interface__"):
        return _cai(name, v)
    if hasattr(v, "__array_interface__"):  # read through numpy, imported only now
        try:
            import numpy as np
        except ImportError:
            raise ArgumentError("TILERT_ERROR_INVALID_ARGUMENT",
                                "argument '%s': a %s (__array_interface__) is read through numpy, "
                                "which is not installed" % (name, type(v).__name__)) from None
        return _numpy(name, np.asarray(v))
    raise ArgumentError("TILERT_ERROR_INVALID_ARGUMENT",
                        "argument '%s' is a tensor: pass a numpy array, a torch tensor or an object "
                        "with __cuda_array_interface__ or __array_interface__, not %s"
                        % (name, type(v).__name__))


def stream_handle(s):
    """A CUstream handle from stream=: an int, a torch.cuda.Stream (.cuda_stream) or a cupy
    Stream (.ptr)."""
    if s is None or isinstance(s, int):
        return s or 0
    for attr in ("cuda_stream", "ptr"):
        if hasattr(s, attr):
            return int(getattr(s, attr))
    raise ArgumentError("TILERT_ERROR_INVALID_ARGUMENT",
                        "stream= takes an int handle, a torch.cuda.Stream or a cupy Stream, not %s"
                        % type(s).__name__)
