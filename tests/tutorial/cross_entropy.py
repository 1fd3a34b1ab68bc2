# Tutorial section 12 (docs/tutorial.md): cross_entropy from Python, on numpy arrays, in the
# interpreter; the same call takes torch CUDA tensors on the GPU.
import numpy as np
import tilec

k = tilec.load("dsl/examples/cross_entropy.tile", T="f16", BN=1024)
print(k)
rng = np.random.default_rng(0)
x = rng.standard_normal((4, 3000)).astype(np.float16)
label = np.array([5, 2999, -100, 0], dtype=np.int32)     # -100: ignored, loss 0
loss = np.empty(4, dtype=np.float32)
k(x, label, loss)

xf = x.astype(np.float64)
lse = np.log(np.exp(xf - xf.max(1, keepdims=True)).sum(1)) + xf.max(1)
ref = np.where(label >= 0, lse - xf[np.arange(4), np.clip(label, 0, None)], 0)
print("loss      ", np.round(loss, 4))
print("max error  %.0e" % np.abs(loss - ref).max())
