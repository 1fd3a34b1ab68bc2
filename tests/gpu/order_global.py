"""GPU check of the order of two statements touching the same global elements (order_global in
compiler/lower_nvptx.c): tests/gpu/order_global.tile stores a row, then overwrites one element
of it, reads that element back and stores it into element 0, each from another thread than the
first store's. The result must be the interpreter's: the later statement wins, every time.
With a second PTX, tests/gpu/order_global_loop.tile: a loop that shifts a row in place, each
iteration reading what the previous one stored (order_global_carried).
Usage: python3 tests/gpu/order_global.py PTX [LOOP_PTX]   (make gpu-prep writes both to
build/probe/)"""
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python"))
import tilec  # noqa: E402


def main():
    k = tilec.load_ptx(sys.argv[1])
    bad = 0
    for rep in range(50):
        M, N = 4096, 1000 - rep % 7
        x = torch.randn(M, N, device="cuda")
        t = torch.randint(0, N, (M,), device="cuda", dtype=torch.int32)
        y = torch.empty_like(x)
        k(x, t, y)
        want = x * 2.0
        rows = torch.arange(M, device="cuda")
        want[rows, t.long()] = x[rows, t.long()] - 1.0
        want[:, 0] = want[rows, t.long()] + 0.5
        bad += int((y != want).any(dim=1).sum())
    print(f"order_global: {bad} wrong rows in 50 launches of 4096")
    if len(sys.argv) > 2:
        bad += check_loop(tilec.load_ptx(sys.argv[2]))
    return 1 if bad else 0


def check_loop(k):
    bad = 0
    for rep in range(50):
        M = 4096
        x = torch.randn(M, 512, device="cuda")
        y = torch.empty_like(x)
        k(x, y)
        want = x.clone()
        for _ in range(4):
            want[:, 1:] = want[:, :511] * 0.5 + 1.0
        bad += int((y != want).any(dim=1).sum())
    print(f"order_global_loop: {bad} wrong rows in 50 launches of 4096")
    return bad


if __name__ == "__main__":
    sys.exit(main())
