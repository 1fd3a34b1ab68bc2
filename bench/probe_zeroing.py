#!/usr/bin/env python3
"""bench/probe_zeroing.py — what a zeroing launch before a kernel costs (session bb; GPU machine, torch).

Medians of 200 launches, each after a 256 MB flush, CUDA events around the timed work: nothing,
one or two torch.zero_() of 4096 floats, a 67 MB device copy alone and after them. Prints one JSON
line. bench/probe/zeroing_pdl.cu is the same question for a kernel shaped like layernorm backward,
with the zeroing as cudaMemsetAsync, as one kernel, and as a kernel the accumulating one is a
programmatic dependent of (docs/performance.md, session bb).
"""
import json

import torch
dev='cuda'; torch.cuda.init()
flush=torch.empty(256<<20, dtype=torch.uint8, device=dev)
dW=torch.empty(4096, device=dev); dB=torch.empty(4096, device=dev)
src=torch.empty(8192*4096*3, dtype=torch.float16, device=dev); dst=torch.empty(8192*4096*3//2*2, dtype=torch.float16, device=dev)
src2=torch.empty(8192*4096*2, dtype=torch.float16, device=dev); dst2=torch.empty(8192*4096, dtype=torch.float16, device=dev)
def t(fn, n=200):
    fn(); torch.cuda.synchronize(); ev=[]
    for _ in range(n):
        s=torch.cuda.Event(enable_timing=True); e=torch.cuda.Event(enable_timing=True)
        flush.zero_(); s.record(); fn(); e.record(); ev.append((s,e))
    torch.cuda.synchronize(); ts=sorted(s.elapsed_time(e) for s,e in ev); return round(ts[len(ts)//2]*1000,2)
cp=lambda: dst2.copy_(src2[:8192*4096])
r={'gpu':torch.cuda.get_device_name(),
 'empty_us':t(lambda:None),
 'zero1_us':t(lambda:dW.zero_()),
 'zero2_us':t(lambda:(dW.zero_(),dB.zero_())),
 'copy67MB_us':t(cp),
 'zero2_copy67MB_us':t(lambda:(dW.zero_(),dB.zero_(),cp())),
 'zero1_copy67MB_us':t(lambda:(dW.zero_(),cp())),
}
print(json.dumps(r))
