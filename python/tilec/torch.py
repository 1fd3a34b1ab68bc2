"""tilec kernels as torch operators: tilec.torch.custom_op(k) registers a kernel as a
torch.library.custom_op that allocates the kernel's `out` tensors and returns them, with a fake
(meta) implementation derived from the shape contract, so the operator composes with
torch.compile graphs. Importing this module imports torch (the rest of tilec never does).

    softmax = tilec.torch.custom_op(tilec.load("dsl/examples/softmax.tile", BLOCK=4096))
    y = softmax(x)                                   # torch.ops.tilec.softmax(x)
    f = torch.compile(lambda x: softmax(x * 2) + 1)  # traced through the fake implementation
"""
import torch

from ._errors import ArgumentError

_DTYPES = {"bool": torch.bool, "i32": torch.int32, "f16": torch.float16, "bf16": torch.bfloat16,
           "f32": torch.float32}
_SCALAR_TYPES = {"f32": "float", "i32": "int"}


def _contract(k):
    """A Kernel's contract; for a tilec.Tuned, the contract its candidates share."""
    return k.contract if hasattr(k, "contract") else k._base_kernel().contract


def _out_shapes(contract, out_shapes):
    """Per out tensor, a function of the inputs giving its shape: each dim is read off the first
    input tensor that has it (pinned dims are constants). out_shapes={name: fn(*inputs)} covers
    outputs whose dims no input has."""
    ins = [a for a in contract.args if not (a.kind == "tensor" and a.is_out)]
    pinned = {d.name: d.value for d in contract.dims if d.pinned}
    where = {}
    for i, a in enumerate(ins):
        for axis, dim in enumerate(a.dims if a.kind == "tensor" else ()):
            where.setdefault(dim, (i, axis))
    fns = []
    for a in contract.args:
        if a.kind != "tensor" or not a.is_out:
            continue
        if out_shapes and a.name in out_shapes:
            fns.append(out_shapes[a.name])
            continue
        missing = [d for d in a.dims if d not in where and d not in pinned]
        if missing:
            raise ArgumentError("TILERT_ERROR_INVALID_ARGUMENT", "custom_op(%s): no input gives "
                                "dim %s of output '%s'; pass out_shapes={'%s': fn}"
                                % (contract.name, ", ".join(missing), a.name, a.name))
        spec = [(pinned[d], None) if d in pinned else (None, where[d]) for d in a.dims]
        fns.append(lambda *ins, spec=spec: [v if w is None else ins[w[0]].shape[w[1]]
                                             for v, w in spec])
    return fns


def custom_op(k, name=None, *, out_shapes=None):
    """Registers k (a tilec.Kernel or tilec.Tuned) as torch.ops.<namespace>.<name> (default
    "tilec::<kernel name>"): inputs are the kernel's arguments that are not `out` tensors, in
    order; it returns the `out` tensors (one tensor, or a tuple), contiguous, on the first input's
    device. Returns the operator."""
    contract = _contract(k)
    qualname = name or "tilec::" + contract.name
    ins = [a for a in contract.args if not (a.kind == "tensor" and a.is_out)]
    outs = [a for a in contract.args if a.kind == "tensor" and a.is_out]
    if not outs:
        raise ArgumentError("TILERT_ERROR_INVALID_ARGUMENT",
                            "custom_op(%s): the kernel has no out tensor to return" % contract.name)
    shape_fns = _out_shapes(contract, out_shapes)
    params = ", ".join(("Tensor " if a.kind == "tensor" else _SCALAR_TYPES[a.dtype] + " ") + a.name
                       for a in ins)
    ret = "Tensor" if len(outs) == 1 else "(%s)" % ", ".join("Tensor" for _ in outs)
    schema = "(%s) -> %s" % (params, ret)
    device_of = next(i for i, a in enumerate(ins) if a.kind == "tensor")

    def allocate(inputs):
        dev = inputs[device_of].device
        return [torch.empty(fn(*inputs), dtype=_DTYPES[o.dtype], device=dev)
                for o, fn in zip(outs, shape_fns)]

    def impl(*inputs):
        made = allocate(inputs)
        it_in, it_out = iter(inputs), iter(made)
        k(*[next(it_out) if a.kind == "tensor" and a.is_out else next(it_in)
            for a in contract.args])
        return made[0] if len(made) == 1 else tuple(made)

    def fake(*inputs):
        made = allocate(inputs)
        return made[0] if len(made) == 1 else tuple(made)

    op = torch.library.custom_op(qualname, impl, mutates_args=(), schema=schema)
    op.register_fake(fake)
    return op
