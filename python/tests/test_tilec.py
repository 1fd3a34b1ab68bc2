"""The Python package end to end on numpy through the CPU interpreter (no GPU needed): compile
errors with tilec's diagnostics, dtypes, strides, scalars, contract errors, the JIT cache (a
warm load compiles nothing, concurrent processes), autotune's pruning and winner cache.

Run by tests/check_python.sh: python3 -m unittest discover -s python/tests
"""
import glob
import json
import os
import shlex
import subprocess
import sys
import tempfile
import threading
import unittest

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "python"))
CACHE = tempfile.mkdtemp(prefix="tilec-test-cache-")
os.environ["TILEC_CACHE_DIR"] = CACHE
os.environ.pop("TILEC_NO_COMPILE", None)

import tilec  # noqa: E402

EX = os.path.join(ROOT, "dsl", "examples")
rng = np.random.default_rng(7)

SCALE = """kernel scale<T: type = f32, BLOCK = 256>(X: T[M, N], Y: out T[M, N], s: f32, bias: i32)
  grid (M) threads (32)
{
  require N <= BLOCK;
  let r = block.x;
  reg x = to_f32(X[r : +1, 0 : +BLOCK]);
  Y[r : +1, 0 : +BLOCK] = to(T, x * s + to_f32(bias));
}
"""
TWO = """kernel first(X: f32[N], Y: out f32[N]) grid (cdiv(N, 64)) threads (32)
{
  Y[block.x * 64 : +64] = X[block.x * 64 : +64] + 1;
}
kernel second(X: f32[N], Y: out f32[N]) grid (cdiv(N, 64)) threads (32)
{
  Y[block.x * 64 : +64] = X[block.x * 64 : +64] * 2;
}
"""


def read(path):
    with open(path) as f:
        return f.read()


def softmax_ref(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def run_py(code, env=None):
    """Runs code in a fresh interpreter (same package and cache); returns its stdout's JSON."""
    e = dict(os.environ, **(env or {}))
    r = subprocess.run([sys.executable, "-c", "import sys; sys.path.insert(0, %r)\n%s"
                        % (os.path.join(ROOT, "python"), code)],
                       capture_output=True, text=True, env=e, timeout=300)
    if r.returncode:
        raise AssertionError("subprocess failed:\n" + r.stderr)
    return json.loads(r.stdout.strip().splitlines()[-1])


class Diagnostics(unittest.TestCase):
    def test_compile_error_has_location_and_caret(self):
        with self.assertRaises(tilec.CompileError) as cm:
            tilec.compile("kernel k(X: f32[N]) grid (1) threads (32) {\n  let z = q;\n}\n",
                          filename="bad.tile")
        self.assertEqual(cm.exception.diagnostics,
                         "bad.tile:2:11: error: undeclared name 'q'\n  let z = q;\n          ^\n")

    def test_same_text_as_the_command_line(self):
        """Every diagnostics golden file (tests/diag, what `tilec --check` prints) comes back
        byte for byte from the API."""
        checked = 0
        for tile in sorted(glob.glob(os.path.join(ROOT, "tests", "diag", "*.tile"))):
            name = tile[:-5]
            args = shlex.split(read(name + ".args")) if os.path.exists(name + ".args") else []
            defines, arch = {}, None
            for a in args:
                if a.startswith("--arch="):
                    arch = a[7:]
                elif a != "-D":
                    k, v = a.split("=", 1)
                    defines[k] = v
            expected = read(name + ".expected")
            if "error:" not in expected:
                continue  # warnings only (CompileWarning) or a file of several kernels
            rel = os.path.relpath(tile, ROOT)
            with self.assertRaises(tilec.CompileError, msg=rel) as cm:
                tilec.compile(read(tile), filename=rel, defines=defines, arch=arch or "sm_90a",
                              target="cpu")
            self.assertEqual(cm.exception.diagnostics, expected, rel)
            checked += 1
        self.assertGreater(checked, 50)

    def test_bad_define_and_arch(self):
        with self.assertRaisesRegex(tilec.CompileError, "unknown architecture 'sm_70'"):
            tilec.load(os.path.join(EX, "vadd.tile"), arch="sm_70")
        with self.assertRaisesRegex(tilec.CompileError, "NOPE"):
            tilec.load(os.path.join(EX, "vadd.tile"), NOPE=3)

    def test_kernel_choice(self):
        with self.assertRaisesRegex(tilec.CompileError, r"holds 2 kernels \(first, second\)"):
            tilec.compile(TWO)
        with self.assertRaisesRegex(tilec.CompileError, "no kernel 'third'"):
            tilec.compile(TWO, kernel="third")
        k = tilec.compile(TWO, kernel="second")
        x = rng.standard_normal(100).astype(np.float32)
        y = np.zeros_like(x)
        k(x, y)
        np.testing.assert_array_equal(y, x * 2)


class Calls(unittest.TestCase):
    def test_examples_against_numpy(self):
        sm = tilec.load(os.path.join(EX, "softmax.tile"), T="f32", BLOCK=1024)
        x = rng.standard_normal((5, 1000)).astype(np.float32)
        y = np.full_like(x, np.nan)
        sm(x, y)
        np.testing.assert_allclose(y, softmax_ref(x), rtol=1e-5, atol=1e-7)
        rms = tilec.load(os.path.join(EX, "rmsnorm.tile"), T="f32", BLOCK=512)
        x = rng.standard_normal((3, 300)).astype(np.float32)
        w = rng.standard_normal(300).astype(np.float32)
        y = np.zeros_like(x)
        rms(x, w, y, eps=1e-5)
        ref = x / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-5) * w
        np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-5)
        va = tilec.load(os.path.join(EX, "vadd.tile"))
        a, b = (rng.standard_normal(5000).astype(np.float32) for _ in range(2))
        c = np.zeros_like(a)
        va(a, b, c)
        np.testing.assert_array_equal(c, a + b)

    def test_dtypes(self):
        x = rng.standard_normal((3, 100)).astype(np.float32)
        for T, conv, back in (("f32", lambda a: a, lambda a: a),
                              ("f16", lambda a: a.astype(np.float16), lambda a: a.astype(np.float32)),
                              ("bf16", tilec.bf16_bits, tilec.from_bf16_bits)):
            k = tilec.compile(SCALE, T=T)
            y = conv(np.zeros_like(x))
            k(conv(x), y, 2.0, 3)
            ref = back(conv(back(conv(x)) * 2 + 3))
            np.testing.assert_array_equal(back(y), ref, T)
        k = tilec.compile(SCALE, T="f16")
        with self.assertRaisesRegex(tilec.ArgumentError, "argument 'X' must be f16, got f32"):
            k(x, np.zeros((3, 100), np.float16), 1.0, 0)
        with self.assertRaisesRegex(tilec.ArgumentError, "unsupported dtype numpy float64"):
            k(x.astype(np.float64), np.zeros((3, 100), np.float16), 1.0, 0)

    def test_strides(self):
        k = tilec.load(os.path.join(EX, "softmax.tile"), T="f32", BLOCK=1024)
        base = rng.standard_normal((8, 1200)).astype(np.float32)
        x = base[::2, 100:1100]                      # rows every other, columns offset
        out = np.zeros((8, 1200), np.float32)
        k(x, out[1::2, 7:1007])
        np.testing.assert_allclose(out[1::2, 7:1007], softmax_ref(x), rtol=1e-5, atol=1e-7)
        self.assertEqual(np.count_nonzero(out[0::2]), 0)   # nothing written outside the view
        with self.assertRaisesRegex(tilec.ShapeError, "innermost stride must be 1"):
            k(base[:, ::2], np.zeros((8, 600), np.float32))
        with self.assertRaisesRegex(tilec.ShapeError, "stride -1200 of axis 0 must be > 0"):
            k(base[::-1], np.zeros_like(base))
        ro = np.zeros_like(x)
        ro.flags.writeable = False
        with self.assertRaisesRegex(tilec.ArgumentError, "'Y' is written by the kernel but"):
            k(x, ro)
        e = np.zeros((0, 1000), np.float32)           # empty: numpy's zero strides are fine
        k(e, e.copy())

    def test_scalars(self):
        k = tilec.compile(SCALE)
        x = rng.standard_normal((2, 10)).astype(np.float32)
        for call in (lambda y: k(x, y, 3.0, 1), lambda y: k(x, y, s=3.0, bias=1),
                     lambda y: k(X=x, Y=y, bias=1, s=3.0), lambda y: k(x, y, 3.0, bias=1)):
            y = np.zeros_like(x)
            call(y)
            np.testing.assert_allclose(y, x * 3 + 1, rtol=1e-6)
        y = np.zeros_like(x)
        with self.assertRaisesRegex(tilec.ArgumentError, "missing argument 'bias'"):
            k(x, y, 3.0)
        with self.assertRaisesRegex(tilec.ArgumentError, "has no argument 'b'"):
            k(x, y, 3.0, b=1)
        with self.assertRaisesRegex(tilec.ArgumentError, "'s' given twice"):
            k(x, y, 3.0, 1, s=2.0)
        with self.assertRaisesRegex(tilec.ArgumentError, "i32 scalar; 1.5 is not an integer"):
            k(x, y, 3.0, 1.5)   # checked on every launch, not only when the signature is new
        k(x, y, 3.0, 1)
        with self.assertRaisesRegex(tilec.ArgumentError, "is a f32 scalar, got ndarray"):
            k(x, y, x, 1)        # same signature as the launch before: the fast path
        with self.assertRaisesRegex(tilec.ArgumentError, "is a f32 scalar, got ndarray"):
            k(x, y, x, 1)
        with self.assertRaisesRegex(tilec.ArgumentError, "pass a numpy array, a torch tensor"):
            k([1.0], y, 3.0, 1)

    def test_contract_errors(self):
        k = tilec.load(os.path.join(EX, "softmax.tile"), T="f32", BLOCK=1024)
        x = np.zeros((2, 2000), np.float32)
        with self.assertRaisesRegex(tilec.ShapeError, r"requirement 'N <= BLOCK' failed: N = 2000"):
            k(x, x.copy())
        with self.assertRaisesRegex(tilec.ShapeError, "dim N: argument 'X' has 100"):
            k(np.zeros((2, 100), np.float32), np.zeros((2, 99), np.float32))
        with self.assertRaisesRegex(tilec.ShapeError, "must have rank 2, got rank 1"):
            k(np.zeros(100, np.float32), np.zeros(100, np.float32))
        p = tilec.load(os.path.join(EX, "softmax.tile"), T="f32", BLOCK=1024, N=512)
        with self.assertRaisesRegex(tilec.ShapeError, "compiled for N = 512"):
            p(np.zeros((2, 100), np.float32), np.zeros((2, 100), np.float32))
        self.assertEqual(p.grid(np.zeros((3, 512), np.float32), np.zeros((3, 512), np.float32)),
                         (3, 1, 1))

    def test_contract(self):
        k = tilec.load(os.path.join(EX, "rmsnorm.tile"), T="bf16", BLOCK=2048, WARPS=8)
        c = k.contract
        self.assertEqual((c.name, c.threads), ("rmsnorm", 256))
        self.assertEqual([a.name for a in c.args], ["X", "W", "Y", "eps"])
        self.assertEqual(c.args[0], tilec.ArgSpec("X", "tensor", "bf16", False, ("M", "N")))
        self.assertEqual(c.args[3].kind, "scalar")
        self.assertTrue(c.args[2].is_out)
        self.assertEqual(c.requires, ["N <= BLOCK"])

    def test_zeroed_output(self):
        # `= 0`: every launch zeroes Y before the kernel adds into it (here on the host)
        src = ("kernel colsum(X: f32[M, N], Y: out f32[N] = 0)\n  grid (M) threads (32)\n{\n"
               "  atomic_add(Y[0 : +32], X[block.x, 0 : +32]);\n}\n")
        k = tilec.compile(src, target="cpu")
        self.assertTrue(k.contract.args[1].zero_init)
        self.assertFalse(k.contract.args[0].zero_init)
        self.assertIn("Y: out f32[N] = 0", repr(k))
        x = np.arange(4 * 32, dtype=np.float32).reshape(4, 32)
        y = np.full(32, np.nan, np.float32)
        k(x, y)
        np.testing.assert_array_equal(y, x.sum(0))
        k(x, y)  # not added to the last launch's sums
        np.testing.assert_array_equal(y, x.sum(0))

    def test_dimension_expressions(self):
        src = ("kernel h(X: f32[M, D], Y: out f32[M, D / 2])\n  grid (M) threads (32)\n{\n"
               "  Y[block.x, 0 : +32] = X[block.x, 0 : +32] * 2.0;\n}\n")
        k = tilec.compile(src, target="cpu")
        self.assertEqual([d.name for d in k.contract.dims], ["M", "D", "Y$1"])
        self.assertEqual(k.contract.derive_dims({"M": 3, "D": 64}), {"Y$1": 32})
        x = np.arange(3 * 64, dtype=np.float32).reshape(3, 64)
        y = np.zeros((3, 32), np.float32)
        k(x, y)
        np.testing.assert_array_equal(y, x[:, :32] * 2)
        with self.assertRaisesRegex(tilec.ShapeError,
                                    r"requirement 'axis 1 of Y == D / 2' failed: Y\$1 = 31, D = 64"):
            k(x, np.zeros((3, 31), np.float32))

    def test_load_ptx(self):
        k = tilec.load(os.path.join(EX, "vadd.tile"))
        p = tilec.load_ptx(k.ptx)
        self.assertEqual(p.contract.args, k.contract.args)
        with self.assertRaisesRegex(tilec.LaunchError, "cannot run in the interpreter"):
            p(*(np.zeros(8, np.float32) for _ in range(3)))

    def test_threads_compile_like_one(self):
        """The C API compiles in several threads at once (GIL released): same PTX."""
        src = read(os.path.join(EX, "softmax.tile"))
        cfgs = [dict(BLOCK=b, WARPS=w) for b in (512, 1024, 2048) for w in (2, 4)]
        out = [None] * len(cfgs)

        def one(i):
            out[i] = tilec.compile(src, arch="sm_80", opt_level=2, **cfgs[i]).ptx
        ts = [threading.Thread(target=one, args=(i,)) for i in range(len(cfgs))]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        for i, cfg in enumerate(cfgs):
            tilec._kernel._memo.clear()
            os.environ["TILEC_CACHE"] = "0"
            try:
                self.assertEqual(out[i], tilec.compile(src, arch="sm_80", opt_level=2, **cfg).ptx)
            finally:
                del os.environ["TILEC_CACHE"]


try:
    import torch
except ImportError:
    torch = None


@unittest.skipUnless(torch, "no torch")
class Torch(unittest.TestCase):
    """Real torch CPU tensors run in the interpreter; the custom op traces under torch.compile
    (aot_eager: the fake implementation, no C++ compiler needed)."""

    def test_cpu_tensors(self):
        k = tilec.load(os.path.join(EX, "softmax.tile"), T="bf16", BLOCK=1024)
        x = torch.randn(4, 1000, dtype=torch.bfloat16)[:, :900]
        y = torch.empty(4, 900, dtype=torch.bfloat16)
        for _ in range(2):
            k(x, y)
            self.assertLess((y.float() - torch.softmax(x.float(), -1)).abs().max().item(), 1e-2)
        with self.assertRaisesRegex(tilec.ArgumentError, "must be bf16, got f32"):
            k(x.float(), y)

    @unittest.skipUnless(torch and hasattr(torch.library, "custom_op"), "torch < 2.4")
    def test_custom_op_under_compile(self):
        import tilec.torch
        ce = tilec.torch.custom_op(tilec.load(os.path.join(EX, "cross_entropy.tile"), T="f16"),
                                   "tilec_unittest::cross_entropy")
        x = torch.randn(6, 500, dtype=torch.float16)
        lab = torch.randint(0, 500, (6,), dtype=torch.int32)
        f = torch.compile(lambda x, lab: ce(x, lab) * 2, backend="aot_eager", fullgraph=True)
        ref = torch.nn.functional.cross_entropy(x.float(), lab.long(), reduction="none") * 2
        self.assertLess((f(x, lab) - ref).abs().max().item(), 1e-3)


class TuneCli(unittest.TestCase):
    def test_tune_command(self):
        env = dict(os.environ, TILEC_CACHE_DIR=tempfile.mkdtemp(prefix="tilec-tcli-"),
                   PYTHONPATH=os.path.join(ROOT, "python"))
        cmd = [sys.executable, "-m", "tilec", "tune", os.path.join(EX, "softmax.tile"), "--space",
               "BLOCK=512,1024", "--space", "WARPS=2,4", "--shape", "M=4,N=1000", "-D", "T=f32",
               "--key", "N", "--reps", "2", "--cpu"]
        outs = [subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
                for _ in range(2)]
        for r in outs:
            self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("4 candidates", outs[0].stdout)
        self.assertRegex(outs[0].stdout, r"BLOCK=512 WARPS=2 +contract: .*N <= BLOCK")
        self.assertRegex(outs[0].stdout, r"winner: -D BLOCK=1024 -D WARPS=[24] +[0-9.]+ ms\n")
        self.assertIn("(from the cache)", outs[1].stdout)
        bad = subprocess.run(cmd[:7] + ["--shape", "M=4", "--cpu"], capture_output=True, text=True,
                             env=env)
        self.assertIn("no value for dim N", bad.stderr)


class ForeignTensors(unittest.TestCase):
    """The torch and __cuda_array_interface__ adaptors, without torch or a GPU."""

    def test_torch_like_cpu_tensor_runs_in_the_interpreter(self):
        FakeTensor = type("Tensor", (), {"__module__": "torch"})

        class DType:
            def __init__(self, name):
                self.name = name

            def __str__(self):
                return "torch." + self.name

        def fake(a):
            t = FakeTensor()
            t.a, t.dtype, t.shape = a, DType(str(a.dtype)), a.shape
            return t
        FakeTensor.stride = lambda t: tuple(s // t.a.itemsize for s in t.a.strides)
        FakeTensor.get_device = lambda t: -1
        FakeTensor.data_ptr = lambda t: t.a.__array_interface__["data"][0]
        k = tilec.load(os.path.join(EX, "softmax.tile"), T="f32", BLOCK=1024)
        x = rng.standard_normal((3, 700)).astype(np.float32)
        for _ in range(2):  # the bind, then the cached signature
            y = np.zeros_like(x)
            k(fake(x), fake(y))
            np.testing.assert_allclose(y, softmax_ref(x), rtol=1e-5, atol=1e-7)
        with self.assertRaisesRegex(tilec.ArgumentError, "unsupported dtype torch.float64"):
            k(fake(x.astype(np.float64)), fake(y))

    def test_cuda_array_without_a_driver(self):
        class CudaArray:
            def __init__(self, n):
                self.__cuda_array_interface__ = {"shape": (n,), "typestr": "<f4", "data": (4096, False),
                                                 "strides": None, "version": 3}
        k = tilec.load(os.path.join(EX, "vadd.tile"))
        try:
            tilec._kernel.devices.get(0)
            self.skipTest("a GPU is present: the fake device pointer would be launched")
        except tilec.LaunchError:
            pass
        with self.assertRaises(tilec.LaunchError) as cm:
            k(CudaArray(10), CudaArray(10), CudaArray(10))
        self.assertIn(cm.exception.code, ("TILERT_ERROR_NO_DRIVER", "TILERT_ERROR_NO_DEVICE"))
        with self.assertRaisesRegex(tilec.ArgumentError, "tensors on different devices"):
            k(CudaArray(10), np.zeros(10, np.float32), np.zeros(10, np.float32))


class RunCli(unittest.TestCase):
    """tilec run --in NAME=FILE.npy --out DIR --kernel NAME."""
    TILEC = os.environ.get("TILEC_BIN", os.path.join(ROOT, "build", "tilec"))

    def run_tilec(self, *args, rc=0):
        r = subprocess.run([self.TILEC, "run"] + list(args), capture_output=True, text=True,
                           cwd=ROOT, env=dict(os.environ, NO_COLOR="1"))
        self.assertEqual(r.returncode, rc, r.stderr)
        return r.stdout + r.stderr

    def test_in_and_out(self):
        d = tempfile.mkdtemp(prefix="tilec-npy-")
        x = rng.standard_normal((5, 900))                     # float64, converted to f32
        np.save(os.path.join(d, "x.npy"), x)
        out = self.run_tilec("dsl/examples/softmax.tile", "-D", "T=f32", "--in",
                             "X=%s/x.npy" % d, "--out", d)
        self.assertIn("inputs: X from %s/x.npy\n" % d, out)
        y = np.load(os.path.join(d, "Y.npy"))
        self.assertEqual((y.dtype, y.shape), (np.float32, (5, 900)))
        np.testing.assert_allclose(y, softmax_ref(x.astype(np.float32)), rtol=1e-5, atol=1e-8)
        # an out tensor that is also read (add_rmsnorm's residual), a random W, f16 files
        r = rng.standard_normal((3, 64)).astype(np.float16)
        np.save(os.path.join(d, "r.npy"), r)
        np.save(os.path.join(d, "xh.npy"), x[:3, :64].astype(np.float16))
        out = self.run_tilec("dsl/examples/add_rmsnorm.tile", "--in", "X=%s/xh.npy" % d, "--in",
                             "R=%s/r.npy" % d, "--shape", "eps=1e-5", "--out", d)
        self.assertIn("inputs: X from %s/xh.npy, R from %s/r.npy, W random (seed 1)" % (d, d), out)
        new_r = np.load(os.path.join(d, "R.npy"))
        self.assertEqual(new_r.dtype, np.float16)
        np.testing.assert_array_equal(new_r, (x[:3, :64].astype(np.float16).astype(np.float32)
                                              + r.astype(np.float32)).astype(np.float16))

    def test_in_errors(self):
        d = tempfile.mkdtemp(prefix="tilec-npy-")
        np.save(os.path.join(d, "x.npy"), np.zeros((4, 100), np.float32))
        np.save(os.path.join(d, "f.npy"), np.asfortranarray(np.zeros((4, 100))))
        np.save(os.path.join(d, "c.npy"), np.zeros((4, 100), np.complex64))
        sm = "dsl/examples/softmax.tile"
        self.assertIn("Fortran order", self.run_tilec(sm, "--in", "X=%s/f.npy" % d, rc=1))
        self.assertIn("holds dtype '<c8'", self.run_tilec(sm, "--in", "X=%s/c.npy" % d, rc=1))
        self.assertIn("has no tensor argument named 'Q'", self.run_tilec(sm, "--in", "Q=%s/x.npy" % d, rc=1))
        self.assertIn("axis 1 of X is 100, but --shape or -D make dim N 99",
                      self.run_tilec(sm, "--in", "X=%s/x.npy" % d, "--shape", "N=99", rc=1))
        self.assertIn("has 2 dimensions; argument 'W' has rank 1", self.run_tilec(
            "dsl/examples/rmsnorm.tile", "--in", "W=%s/x.npy" % d, rc=1))
        self.assertIn("needs NAME=FILE.npy", self.run_tilec(sm, "--in", "x.npy", rc=1))

    def test_kernel_choice(self):
        d = tempfile.mkdtemp(prefix="tilec-npy-")
        with open(os.path.join(d, "two.tile"), "w") as f:
            f.write(TWO)
        x = rng.standard_normal(100).astype(np.float32)
        np.save(os.path.join(d, "x.npy"), x)
        out = self.run_tilec(os.path.join(d, "two.tile"), "--kernel", "second", "--in",
                             "X=%s/x.npy" % d, "--out", d)
        self.assertNotIn("kernel first", out)
        np.testing.assert_array_equal(np.load(os.path.join(d, "Y.npy")), x * 2)
        self.assertIn("has no kernel 'third' (it has: first, second)",
                      self.run_tilec(os.path.join(d, "two.tile"), "--kernel", "third", rc=1))


class Cache(unittest.TestCase):
    LOAD = ("import json, tilec\n"
            "k = tilec.load(%r, T='f32', BLOCK=%d)\n"
            "print(json.dumps(dict(tilec.stats, name=k.name)))")

    def test_warm_load_compiles_nothing(self):
        path = os.path.join(EX, "softmax.tile")
        env = {"TILEC_CACHE_DIR": tempfile.mkdtemp(prefix="tilec-warm-")}
        cold = run_py(self.LOAD % (path, 512), env)
        self.assertEqual((cold["compiles"], cold["cache_hits"]), (1, 0))
        warm = run_py(self.LOAD % (path, 512), dict(env, TILEC_NO_COMPILE="1"))
        self.assertEqual((warm["compiles"], warm["cache_hits"]), (0, 1))
        other = run_py(self.LOAD % (path, 256), env)  # other defines: another entry
        self.assertEqual(other["compiles"], 1)
        with self.assertRaises(AssertionError):      # not cached, and compiling is forbidden
            run_py(self.LOAD % (path, 128), dict(env, TILEC_NO_COMPILE="1"))

    def test_corrupt_entry_is_recompiled(self):
        d = tempfile.mkdtemp(prefix="tilec-corrupt-")
        path = os.path.join(EX, "vadd.tile")
        run_py(self.LOAD.replace(", T='f32', BLOCK=%d", "") % path, {"TILEC_CACHE_DIR": d})
        (entry,) = glob.glob(os.path.join(d, "ptx", "*", "*.ptx"))
        text = read(entry)
        with open(entry, "w") as f:
            f.write(text[: len(text) // 2])
        again = run_py(self.LOAD.replace(", T='f32', BLOCK=%d", "") % path, {"TILEC_CACHE_DIR": d})
        self.assertEqual(again["compiles"], 1)
        self.assertEqual(read(entry), text)

    def test_concurrent_processes(self):
        d = tempfile.mkdtemp(prefix="tilec-conc-")
        code = ("import sys; sys.path.insert(0, %r)\nimport tilec, numpy as np\n"
                "k = tilec.load(%r, T='f32', BLOCK=1024)\nx = np.ones((2, 10), np.float32)\n"
                "y = np.zeros_like(x)\nk(x, y)\nassert abs(y.sum() - 2) < 1e-5\n"
                % (os.path.join(ROOT, "python"), os.path.join(EX, "softmax.tile")))
        procs = [subprocess.Popen([sys.executable, "-c", code], env=dict(os.environ, TILEC_CACHE_DIR=d),
                                  stderr=subprocess.PIPE) for _ in range(4)]
        for p in procs:
            _, err = p.communicate(timeout=300)
            self.assertEqual(p.returncode, 0, err)
        files = [f for _, _, fs in os.walk(d) for f in fs]
        self.assertEqual(len(files), 1, files)  # one entry, no temporary left behind
        self.assertTrue(files[0].endswith(".ptx"))


class Autotune(unittest.TestCase):
    SRC = os.path.join(EX, "softmax.tile")

    def test_pruning(self):
        src = read(self.SRC).encode()
        space = {"BLOCK": [256, 1024, 2048], "ROWS": [1, 16], "WARPS": [4, 64]}
        cands = tilec._tune.compile_all(src, self.SRC, {"T": "f32"}, tilec.candidates(space),
                                        "sm_90a", jobs=4)
        seq = tilec._tune.compile_all(src, self.SRC, {"T": "f32"}, tilec.candidates(space),
                                      "sm_90a", jobs=1)
        self.assertEqual([c.reason for c in cands], [c.reason for c in seq])
        self.assertEqual([c.kernel and c.kernel.ptx for c in cands],
                         [c.kernel and c.kernel.ptx for c in seq])
        model = tilec.DeviceModel("small GPU", "sm_90a", smem_per_block=48 * 1024)
        x = np.zeros((4, 1000), np.float32)
        alive = tilec.prune(cands, model, args=(x, x.copy()), ptxas=False)
        why = {tuple(c.config.values()): c.reason for c in cands}
        self.assertRegex(why[(256, 1, 4)], r"^contract: .*requirement 'N <= BLOCK' failed")
        self.assertRegex(why[(1024, 1, 64)], r"^compile: .*thread count must be at most 1024")       # 2048 threads
        self.assertRegex(why[(2048, 16, 4)], r"^registers: .* will spill")
        self.assertIsNone(why[(1024, 1, 4)])
        self.assertEqual({tuple(c.config.values()) for c in alive},
                         {k for k, v in why.items() if v is None})
        self.assertGreater(len(alive), 1)
        # shared memory: gemm's staged tiles against a small GPU's 48 KB
        path = os.path.join(EX, "gemm.tile")
        g = tilec._tune.compile_all(read(path).encode(), path, {"WARPS": 4}, tilec.candidates(
            {"BM": [64], "BN": [64], "BK": [32, 128], "STAGES": [1, 3]}), "sm_90a")
        tilec.prune(g, model, ptxas=False)
        smem = {(c.config["BK"], c.config["STAGES"]): c.reason for c in g}
        self.assertIsNone(smem[(32, 1)])
        self.assertRegex(smem[(128, 3)], r"^smem: \d+ bytes > 49152 per block on small GPU")

    @unittest.skipUnless(tilec._tune.find_ptxas(), "no ptxas")
    def test_ptxas_spills_prune(self):
        path = os.path.join(EX, "gemm.tile")
        src = read(path).encode()
        cands = tilec._tune.compile_all(src, path, {"STAGES": 2}, [
            {"BM": 64, "BN": 64, "BK": 32, "WARPS": 4}, {"BM": 256, "BN": 256, "BK": 64, "WARPS": 4}],
            "sm_90a")
        alive = tilec.prune(cands, tilec.DeviceModel("H200", "sm_90a"))
        self.assertEqual([c.config["BM"] for c in alive], [64])
        self.assertIsNotNone(cands[0].registers)
        self.assertRegex(cands[1].reason, r"^(spills: \d+ bytes|registers|smem)")

    def test_tune_on_cpu_and_winner_cache(self):
        d = tempfile.mkdtemp(prefix="tilec-tune-")
        code = ("import json, numpy as np, tilec\n"
                "t = tilec.autotune(%r, space={'BLOCK': [1024, 2048], 'WARPS': [2, 4]}, key=['N'],\n"
                "                   defines={'T': 'f32'}, reps=2, warmup=1, ptxas=False)\n"
                "x = np.random.default_rng(1).standard_normal((3, 1000)).astype(np.float32)\n"
                "y = np.zeros_like(x)\nt(x, y)\n"
                "e = np.exp(x - x.max(1, keepdims=True)); e /= e.sum(1, keepdims=True)\n"
                "assert np.allclose(y, e, atol=1e-6)\n"
                "rec = list(t.records.values())[0]\n"
                "print(json.dumps(dict(tilec.stats, config=rec['config'], n=len(rec['candidates']))))"
                % self.SRC)
        cold = run_py(code, {"TILEC_CACHE_DIR": d})
        self.assertEqual((cold["n"], cold["compiles"]), (4, 4))
        warm = run_py(code, {"TILEC_CACHE_DIR": d, "TILEC_NO_COMPILE": "1"})
        self.assertEqual(warm["compiles"], 0)
        self.assertEqual(warm["config"], cold["config"])
        self.assertEqual(len(glob.glob(os.path.join(d, "tune", "*", "*.json"))), 1)


if __name__ == "__main__":
    unittest.main()
