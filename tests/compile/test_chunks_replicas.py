"""OpenBLAS sgemm's order along K (chunks + unrolled lanes, product = fma):
replicas equal numpy.matmul bit for bit at 8 x 8, where every output element
has element (0, 0)'s order (float32, x86-64, OpenBLAS Haswell kernels)."""
from __future__ import annotations

import os

import numpy as np
import pytest

from conftest import assert_same_bits, load_replica
from fpspec.compile import compile_spec
from fpspec.compile.build import build_kernel
from fpspec.compile.trees import tree_of
from fpspec.spec import expand, parse

SGEMM = parse('''target "numpy.matmul"
op gemm
n in 1..

arithmetic {
    input = fp32
    product = fma
    accumulator = fp32
    init = +0.0
    output = fp32
}

order chunks((if n >= 640: 320 elif n > 320: (n // 2 + 7) // 8 * 8 else: n), lanes(2, seq, seq, seq, 8), seq)
''')
# every branch: a lone chunk below 8 and at 8, tails, the halving between 320 and 640, whole 320s above
KS = {"numpy": [1, 2, 7, 8, 15, 16, 100, 321, 384, 639, 700, 1300],
      "numba": [1, 7, 15, 100, 384, 700, 1300],
      "triton": [7, 15, 700]}   # the interpreter is slow


def test_kernel_tree_is_the_spec_tree():
    kernel = build_kernel(SGEMM)
    for n in (1, 2, 7, 15, 100, 321, 384, 700, 1000):
        assert tree_of(kernel, n) == expand(SGEMM, n), n


def _inputs(m, k, n, rng):
    a = (rng.standard_normal((m, k)) * np.exp2(rng.integers(-8, 8, (m, k)))).astype(np.float32)
    b = (rng.standard_normal((k, n)) * np.exp2(rng.integers(-8, 8, (k, n)))).astype(np.float32)
    return a, b


@pytest.mark.parametrize("target", ["numpy", "numba", "triton"])
def test_replica_equals_numpy_matmul(target):
    if target == "triton":   # on the CPU through TRITON_INTERPRET=1 (tests/conftest.py)
        pytest.importorskip("triton")
        torch = pytest.importorskip("torch")
    mod = load_replica(compile_spec(SGEMM, target), f"sgemm_k_{target}")
    rng = np.random.default_rng(8)
    for k in KS[target]:
        for shape in ((8, 8), (4, 16)):   # (OpenBLAS runs these small products on one thread)
            a, b = _inputs(shape[0], k, shape[1], rng)
            want = np.matmul(a, b)
            if target == "triton":   # on the GPU when the kernels run there (TRITON_INTERPRET=0)
                device = "cuda" if torch.cuda.is_available() and os.environ.get("TRITON_INTERPRET") != "1" else "cpu"
                got = mod.gemm(torch.from_numpy(a).to(device), torch.from_numpy(b).to(device)).cpu().numpy()
            else:
                got = np.asarray(mod.gemm(a, b), dtype=np.float32)
            assert_same_bits(got, want, f"K={k} {shape} ({target})")
