"""python3 -m tilec tune FILE --space NAME=V1,V2 ... --shape DIM=V,...: autotuning from the
command line. Inputs are zero-filled tensors of the given shapes (on the GPU when one is present,
made with the runtime's allocator, so neither torch nor cupy is needed; else numpy arrays in the
interpreter); scalar arguments come from --shape too (default 1). Prints every candidate's
outcome and the winner, which is cached like tilec.autotune's."""
import argparse
import ctypes
import json
import sys

from . import _kernel, _lib, _tune
from ._errors import TilecError, check

_TYPESTR = {"bool": "|b1", "i32": "<i4", "f16": "<f2", "bf16": "<u2", "f32": "<f4"}


class DeviceArray:
    """Zeroed GPU memory from tilert_malloc, seen through __cuda_array_interface__."""

    def __init__(self, ordinal, dtype, shape):
        rt, dev = _lib.runtime(), _kernel.devices.get(ordinal)
        n = _lib.DTYPE_SIZE[dtype]
        for d in shape:
            n *= d
        self.ptr = ctypes.c_void_p()
        check(rt.malloc(dev, max(n, 1), ctypes.byref(self.ptr)))
        check(rt.memset8(dev, self.ptr, 0, max(n, 1)))
        self.__cuda_array_interface__ = {"shape": tuple(shape), "typestr": _TYPESTR[dtype],
                                         "data": (self.ptr.value, False), "strides": None,
                                         "version": 3}


def _pairs(text, what):
    out = {}
    for item in filter(None, text.split(",")):
        if "=" not in item:
            raise SystemExit("tilec tune: %s expects NAME=VALUE, got '%s'" % (what, item))
        k, v = item.split("=", 1)
        out[k] = v
    return out


def _number(v):
    try:
        return int(v)
    except ValueError:
        try:
            return float(v)
        except ValueError:
            return v


def _inputs(contract, values, gpu):
    dims = {d.name: d.value for d in contract.dims if d.pinned}
    dims.update({k: int(v) for k, v in values.items() if k in {d.name for d in contract.dims}})
    dims.update(contract.derive_dims(dims))
    missing = [d.name for d in contract.dims if d.name not in dims]
    if missing:
        raise SystemExit("tilec tune: no value for dim %s (e.g. --shape %s=1024)"
                         % (", ".join(missing), missing[0]))
    args = []
    for a in contract.args:
        if a.kind == "scalar":
            args.append(float(values.get(a.name, 1)))
            continue
        shape = [dims[d] for d in a.dims]
        if gpu is not None:
            args.append(DeviceArray(gpu, a.dtype, shape))
        else:
            import numpy as np
            np_dtype = {"bool": np.bool_, "i32": np.int32, "f16": np.float16, "bf16": np.uint16,
                        "f32": np.float32}[a.dtype]
            args.append(np.zeros(shape, np_dtype))
    return args


def tune_main(argv):
    ap = argparse.ArgumentParser(prog="python3 -m tilec tune", description=__doc__)
    ap.add_argument("file")
    ap.add_argument("--space", action="append", default=[], metavar="NAME=V1,V2,...",
                    help="a parameter and its candidate values (repeatable)")
    ap.add_argument("--shape", action="append", default=[], metavar="DIM=V,...",
                    help="dims and scalar arguments (repeatable)")
    ap.add_argument("-D", action="append", default=[], dest="defines", metavar="NAME=VALUE")
    ap.add_argument("--key", default="", help="comma-separated dims the winner is kept per")
    ap.add_argument("--kernel")
    ap.add_argument("--arch")
    ap.add_argument("--cpu", action="store_true", help="the interpreter even when a GPU is present")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--json", action="store_true", help="print the tuning record as JSON")
    o = ap.parse_args(argv)
    space = {}
    for s in o.space:
        name, _, vals = s.partition("=")
        if not vals:
            raise SystemExit("tilec tune: --space expects NAME=V1,V2,..., got '%s'" % s)
        space[name] = [_number(v) for v in vals.split(",")]
    values = {}
    for s in o.shape:
        values.update(_pairs(s, "--shape"))
    defines = {k: _number(v) for d in o.defines for k, v in _pairs(d, "-D").items()}
    gpu = None
    if not o.cpu:
        try:
            _kernel.devices.get(0)
            gpu = 0
        except TilecError:
            pass
    t = _tune.autotune(o.file, space=space, key=[k for k in o.key.split(",") if k],
                       defines=defines, kernel=o.kernel, arch=o.arch, reps=o.reps)
    args = _inputs(t._base_kernel().contract, values, gpu)
    win = t.best(*args)
    rec = next(iter(t.records.values()))
    if o.json:
        print(json.dumps(rec, indent=1))
        return 0
    print("%s on %s (%s): %d candidates" % (o.file, rec["gpu"], rec["arch"],
                                           len(rec["candidates"])))
    for c in rec["candidates"]:
        cfg = " ".join("%s=%s" % kv for kv in c["config"].items())
        print("  %-40s %s" % (cfg, "%.4f ms" % c["ms"] if c["ms"] is not None else c["reason"]))
    print("winner: %s  %.4f ms%s" % (" ".join("-D %s=%s" % kv for kv in rec["config"].items()),
                                     rec["ms"], " (from the cache)" if rec.get("cached") else ""))
    return 0 if win else 1


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] != "tune":
        print("usage: python3 -m tilec tune FILE --space NAME=V1,V2 ... --shape DIM=V,... "
              "(see --help)", file=sys.stderr)
        return 2
    try:
        return tune_main(argv[1:])
    except TilecError as e:
        print("tilec tune: error: %s" % e, file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
