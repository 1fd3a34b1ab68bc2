#!/usr/bin/env python3
"""at_limits.py — prints a kernel exactly at the launch contract's limits (runtime/tilert.h,
TILERT_MAX_*): 32 arguments, 64 shape dims, 8 requirements (one with a 255-character text),
63-character argument, dim and parameter names, a 127-character kernel name, three grid axes of
79 RPN tokens each (the first 219 characters long). tests/check_cli.sh compiles it to PTX and C and runs it: the compiler and the
runtime must agree that it is valid (one past each limit is a tests/diag golden)."""
long_arg = "a" * 62 + "0"        # 63 characters
long_dim = "D" * 63
long_param = "P" * 63
kernel = "k" * 127

args = []
dims = []
for t in range(16):             # 16 rank-4 tensors with 4 dims of their own: 64 dims
    ds = [f"D{t}_{j}" for j in range(4)]
    if t == 0:
        ds[0] = long_dim
    dims += ds
    name = long_arg if t == 0 else f"T{t}"
    args.append(f"{name}: f32[{', '.join(ds)}]")
for t in range(15):             # 15 more tensors on those dims, then the output: 32 arguments
    args.append(f"U{t}: f32[{dims[4 * t]}, {dims[4 * t + 1]}]")
args.append(f"Y: out f32[{dims[4]}, {dims[5]}, {dims[6]}, {dims[7]}]")
assert len(args) == 32 and len(set(dims)) == 64

# 40 operands and 39 '+': 79 RPN tokens per axis (an odd count: 80 is not reachable), the first
# axis 219 characters long.
grid = [" + ".join([d] + ["1"] * 39) for d in (long_dim, dims[5], dims[9])]

reqs = [f"  require {dims[i]} > 0;" for i in range(7)]
reqs.append("  require " + "(" * 123 + "D1_0" + ")" * 123 + " >= 1;")   # a 255-character text

print(f"kernel {kernel}<{long_param} = 1, W = 1>(")
print("    " + ",\n    ".join(args) + ")")
print(f"  grid ({', '.join(grid)}) threads (32)")
print("{")
print("\n".join(reqs))
print(f"  Y[0, 0, 0, 0 : +32] = {long_arg}[0, 0, 0, 0 : +32] * to_f32({long_param} * W);")
print("}")
