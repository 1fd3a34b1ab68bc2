#!/usr/bin/env python3
"""backward_torch.py — the backward examples (issue 14) on the GPU against torch autograd, as a
training step runs them: our forward that saves what the backward needs, then our backward, on
the same inputs as torch's forward + autograd.grad.

  python3 tests/gpu/backward_torch.py [--ptx-dir build/ptx] [--json FILE]

The PTX is the modules `make gpu-prep` compiled for example_runner's GPU cases (every kernel of the
file in one module): ln_bwd_big (layernorm_train + layernorm_backward), rmsnorm_bwd_big, xent_bwd_big
(cross_entropy_backward), attn_bwd_d64_big and attn_bwd_d128_causal_big (attention_lse,
attention_backward_prep, attention_backward, attention_backward_dq) and the *_split twins (the
scheme without atomics: attention_backward_kv, attention_backward_q). The yardstick is float32
autograd of the same math on the upcast inputs; an output passes when its relative error is within
the bound, or within 2x torch's own error in the same precision (torch in f16 against the same
float32 gradients) plus 1e-3. Exit status 0 only if every check passes.
"""
import argparse
import json
import math
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "bench"))
import run as R  # noqa: E402  (bench/run.py: the ctypes runtime wrapper)

EPS = 1e-5


def rel(a, b):
    return ((a.float() - b.float()).norm() / b.float().norm().clamp_min(1e-30)).item()


class Check:
    def __init__(self):
        self.rows, self.ok = [], True

    def add(self, case, name, ours, ref, theirs, bound):
        e, t = rel(ours, ref), (rel(theirs, ref) if theirs is not None else None)
        ok = math.isfinite(e) and (e <= bound or (t is not None and e <= 2 * t + 1e-3))
        self.ok &= ok
        self.rows.append({"case": case, "output": name, "rel_err": e, "torch_rel_err": t, "bound": bound, "ok": ok})
        ts = f"{t:.2e}" if t is not None else "-"
        print(f"  {case:28s} {name:6s} ours {e:.2e}  torch {ts}  bound {bound:g}  {'ok' if ok else 'FAIL'}", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ptx-dir", default=os.path.join(ROOT, "build", "ptx"))
    ap.add_argument("--json")
    a = ap.parse_args()
    import torch
    import torch.nn.functional as F
    torch.backends.cuda.matmul.allow_tf32 = False
    R.PTX_DIR = a.ptx_dir
    dev = torch.device("cuda")
    torch.empty(1, device=dev)  # the primary context current before our runtime opens it
    rt = R.Tilert(R.LIBTILERT)
    g = torch.Generator(device=dev)
    g.manual_seed(14)
    rnd = lambda *s: torch.randn(*s, device=dev, generator=g)  # noqa: E731
    chk = Check()
    leaf = lambda t: t.detach().clone().requires_grad_()  # noqa: E731
    dt = torch.float16

    def autograd(forward, inputs, dy):
        """[output, *gradients] of forward(*inputs) given dy, in float32 (the yardstick) and in dt
        (torch's own error): the two lists."""
        both = []
        for cast in (torch.float32, dt):
            xs = [leaf(t.to(cast)) for t in inputs]
            ys = forward(*xs)
            both.append([ys, *torch.autograd.grad(ys, xs, dy.to(cast))])
        return both

    # layernorm: layernorm_train (Y, Mean, Rstd), then layernorm_backward
    M, N = 4097, 4095
    x, w, b, dy = (rnd(M, N) * 2).to(dt), rnd(N).to(dt), rnd(N).to(dt), rnd(M, N).to(dt)
    y, mean, rstd = torch.empty_like(x), torch.empty(M, device=dev), torch.empty(M, device=dev)
    # dW, dB garbage: declared `= 0`, the launch zeroes them (runtime/zero.c)
    dx, dw, db = torch.empty_like(x), torch.full((N,), float('nan'), device=dev), torch.full((N,), float('nan'), device=dev)
    rt.launcher("ln_bwd_big", [x, w, b, y, mean, rstd, EPS], entry="layernorm_train")()
    rt.launcher("ln_bwd_big", [x, w, mean, rstd, dy, dx, dw, db], entry="layernorm_backward")()
    torch.cuda.synchronize()
    ref, low = autograd(lambda xs, ws, bs: F.layer_norm(xs, (N,), ws, bs, EPS), (x, w, b), dy)
    for name, ours, r_, t_ in zip(("Y", "dX", "dW", "dB"), (y, dx, dw, db), ref, low):
        chk.add("layernorm 4097x4095 f16", name, ours, r_, t_, 5e-3)

    # rmsnorm: rmsnorm_backward recomputes each row's 1 / rms (the forward saves nothing); dW by atomics
    M, N = 4097, 4095
    x, w, dy = (rnd(M, N) * 2).to(dt), rnd(N).to(dt), rnd(M, N).to(dt)
    dx, dw = torch.empty_like(x), torch.full((N,), float('nan'), device=dev)
    rt.launcher("rmsnorm_bwd_big", [x, w, dy, dx, dw, EPS])()
    torch.cuda.synchronize()
    ref, low = autograd(lambda xs, ws: F.rms_norm(xs, (N,), ws, EPS), (x, w), dy)
    for name, ours, r_, t_ in zip(("dX", "dW"), (dx, dw), ref[1:], low[1:]):
        chk.add("rmsnorm 4097x4095 f16", name, ours, r_, t_, 5e-3)

    # cross-entropy: loss and dX in one kernel (reduction='none', dloss per row, ignored rows)
    M, N = 1025, 50257
    x = (rnd(M, N) * 2).to(dt)
    label = torch.randint(0, N, (M,), device=dev, generator=g)
    label[::7] = -100
    dloss = torch.rand(M, device=dev, generator=g) + 0.5
    loss, dx = torch.empty(M, device=dev), torch.empty_like(x)
    rt.launcher("xent_bwd_big", [x, label.to(torch.int32), dloss, loss, dx], entry="cross_entropy_backward")()
    torch.cuda.synchronize()
    outs = {}
    for cast in (torch.float32, dt):
        xs = leaf(x.to(cast))
        ls = F.cross_entropy(xs, label, reduction="none", ignore_index=-100)
        outs[cast] = (ls, torch.autograd.grad(ls, (xs,), dloss.to(cast))[0])
    chk.add("cross_entropy 1025x50257 f16", "loss", loss, outs[torch.float32][0], outs[dt][0], 1e-5)
    chk.add("cross_entropy 1025x50257 f16", "dX", dx, outs[torch.float32][1], outs[dt][1], 5e-3)

    # attention: attention_lse (O, LSE), prep (Delta, dQacc = 0), backward, dq; vs SDPA autograd;
    # then the scheme without atomics (kv, q) from the *_split module on the same O, LSE, Delta
    for variant, split, (B, H, N, D, causal) in (
            ("attn_bwd_d64_big", "attn_bwd_split_d64_big", (2, 4, 1000, 64, 0)),
            ("attn_bwd_d64_causal_big", "attn_bwd_split_d64_causal_big", (2, 4, 1000, 64, 1)),
            ("attn_bwd_d128_causal_big", "attn_bwd_split_d128_big", (1, 4, 2049, 128, 1))):
        scale = 1.0 / math.sqrt(D)
        q, k, v, do = (rnd(B, H, N, D).to(dt) for _ in range(4))
        o, lse = torch.empty_like(q), torch.empty(B, H, N, device=dev)
        delta, dqacc = torch.empty(B, H, N, device=dev), torch.empty(B, H, N, D, device=dev)
        dq, dk, dv = torch.empty_like(q), torch.empty_like(q), torch.empty_like(q)
        dq2, dk2, dv2 = torch.empty_like(q), torch.empty_like(q), torch.empty_like(q)
        for entry, args in (("attention_lse", [q, k, v, o, lse, scale]),
                            ("attention_backward_prep", [o, do, delta, dqacc]),
                            ("attention_backward", [q, k, v, do, lse, delta, dqacc, dk, dv, scale]),
                            ("attention_backward_dq", [dqacc, dq])):
            rt.launcher(variant, args, entry=entry)()
        rt.launcher(split, [q, k, v, do, lse, delta, dk2, dv2, scale], entry="attention_backward_kv")()
        rt.launcher(split, [q, k, v, do, lse, delta, dq2, scale], entry="attention_backward_q")()
        torch.cuda.synchronize()
        res = {}
        for cast in (torch.float32, dt):
            qs, ks, vs = leaf(q.to(cast)), leaf(k.to(cast)), leaf(v.to(cast))
            if cast == torch.float32:  # the math in float32 (chunk-free: these shapes are small)
                s = torch.matmul(qs, ks.transpose(-1, -2)) * scale
                if causal:
                    s = s.masked_fill(torch.ones(N, N, dtype=torch.bool, device=dev).triu(1), float("-inf"))
                os_ = torch.matmul(torch.softmax(s, -1), vs)
                lse_ref = torch.logsumexp(s, -1).detach()
            else:  # torch's own flash attention in f16: the yardstick's error
                from torch.nn.attention import SDPBackend, sdpa_kernel
                with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
                    os_ = F.scaled_dot_product_attention(qs, ks, vs, is_causal=bool(causal), scale=scale)
            res[cast] = (os_, *torch.autograd.grad(os_, (qs, ks, vs), do.to(cast)))
        case = f"attention B{B} H{H} N{N} D{D}{' causal' if causal else ''}"
        chk.add(case, "LSE", lse, lse_ref, None, 1e-5)
        for name, ours, r_, t_ in zip(("O", "dQ", "dK", "dV"), (o, dq, dk, dv), res[torch.float32], res[dt]):
            chk.add(case, name, ours, r_, t_, 1e-2)
        for name, ours, r_, t_ in zip(("dQ", "dK", "dV"), (dq2, dk2, dv2), res[torch.float32][1:], res[dt][1:]):
            chk.add(case + " split", name, ours, r_, t_, 1e-2)

    if a.json:
        with open(a.json, "w") as f:
            json.dump({"rows": chk.rows, "ok": chk.ok}, f, indent=1)
    print(f"backward vs torch autograd: {'all passed' if chk.ok else 'FAILED'} ({len(chk.rows)} outputs)")
    return 0 if chk.ok else 1


if __name__ == "__main__":
    sys.exit(main())
