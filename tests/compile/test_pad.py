"""`pad(M, ORDER)` compiled: the replica's tree is the spec's, its bits the
model's, and OpenBLAS sgemv's order along K (a pad inside a tail, FMA lanes
joined by plain adds) equals numpy.matmul bit for bit, inf and nan included."""
from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import assert_same_bits, load_replica
from fpspec.arith.evaluate import evaluate
from fpspec.compile import compile_spec
from fpspec.compile.build import build_kernel
from fpspec.compile.trees import tree_of
from fpspec.reveal.engine import reveal
from fpspec.reveal.targets import from_callable
from fpspec.spec import expand, parse
from fpspec.spec.expand import expand_arith

ORDERS = [
    "pad(8, lanes(8, seq, lanes(4, seq, pairwise)))",
    "tail(4, pad(8, lanes(8, seq, lanes(4, seq, pairwise))), split(1, seq, seq))",
    "pad(4, pairwise)",
    "pad(3, rev)",
    "blocks(12, pad(8, lanes(8, seq, seq)), seq)",
    "lanes(3, seq, pad(4, lanes(4, seq, pairwise)))",    # pad over partial sums
    "pad((if n > 16: 8 else: 4), lanes(4, seq, seq))",
]

# OpenBLAS sgemv_t (numpy.matmul(A, x), float32, one thread, Haswell/Zen kernels), as
# `python -m fpspec.infer numpy.matmul --op gemv --m 8 -n 1..1024` infers it
SGEMV = parse('''target "numpy.matmul"
op gemv
n in 1..4096

arithmetic {
    input = fp32
    product = rounded
    accumulator = fp32
    init = +0.0
    output = fp32
}

arithmetic fma_fp32 {
    product = fma
}

order
    if n <= 3: seq
    else: tail(4, pad(8, lanes(8, using(fma_fp32, seq), lanes(4, seq, pairwise))), split(1, seq, seq))
''')


def _spec(order: str, op: str = "sum", product: str = "none") -> object:
    return parse(f"op {op}\nn in 1..\n\narithmetic {{\n    input = fp32\n    product = {product}\n"
                 f"    accumulator = fp32\n    output = fp32\n}}\n\norder {order}\n")


@pytest.mark.parametrize("order", ORDERS)
def test_kernel_tree_is_the_spec_tree(order):
    spec = _spec(order)
    kernel = build_kernel(spec)
    for n in range(1, 41):
        assert tree_of(kernel, n) == expand(spec, n), (order, n)


def _terms(rng, n, rows):
    x = (rng.standard_normal((rows, n)) * np.exp2(rng.integers(-20, 20, (rows, n)))).astype(np.float32)
    x[0, :] = -0.0                    # a phantom must keep -0.0 + -0.0 = -0.0
    x[1, n // 2] = np.inf
    return x


@pytest.mark.parametrize("target", ["numpy", "numba"])
@pytest.mark.parametrize("order", ORDERS)
def test_sum_replica_has_the_model_bits(order, target):
    spec = _spec(order)
    mod = load_replica(compile_spec(spec, target), f"pad_sum_{target}")
    rng = np.random.default_rng(3)
    for n in (1, 3, 4, 5, 12, 13, 20, 29, 40):
        x = _terms(rng, n, 6)
        tree, arith, regions = expand_arith(spec, n)
        want = evaluate(tree, x.T.astype(np.float64), None, arith, regions).astype(np.float32)
        got = np.array([mod.sum(row) for row in x], np.float32)
        assert_same_bits(got, want, f"{order} n={n} ({target})")


@pytest.mark.parametrize("target", ["numpy", "numba"])
def test_fma_gemv_replica_has_the_model_bits(target):
    # FMA lanes under a pad, joined by rounded-product adds: phantoms never meet an FMA parent
    spec = parse(str(SGEMV).replace('target "numpy.matmul"\n', "").replace("n in 1..4096", "n in 1.."))
    mod = load_replica(compile_spec(spec, target), f"pad_gemv_{target}")
    rng = np.random.default_rng(4)
    for n in (4, 5, 12, 13, 20, 36, 44):
        a = _terms(rng, n, 5)
        x = (rng.standard_normal(n) * np.exp2(rng.integers(-4, 4, n))).astype(np.float32)
        tree, arith, regions = expand_arith(spec, n)
        want = evaluate(tree, a.T.astype(np.float64), x.astype(np.float64), arith, regions).astype(np.float32)
        assert_same_bits(np.asarray(mod.gemv(a, x), np.float32), want, f"n={n} ({target})")


@pytest.mark.parametrize("target", ["numpy", "numba"])
def test_sgemv_replica_equals_numpy_matmul(target):
    mod = load_replica(compile_spec(SGEMV, target), f"sgemv_{target}")
    rng = np.random.default_rng(5)
    ks = [1, 2, 3, 4, 5, 7, 8, 9, 12, 13, 15, 16, 17, 20, 28, 30, 33, 64, 100, 257, 1000, 4096]
    for k in ks if target == "numpy" else ks[::2]:
        for case in range(4):
            a = (rng.standard_normal((8, k)) * np.exp2(rng.integers(-8, 8, (8, k)))).astype(np.float32)
            x = rng.standard_normal(k).astype(np.float32)
            if case == 1:
                a[3, k - 1] = np.inf        # the padded kernel must not make inf * 0
            if case == 2:
                x[k // 2] = -np.inf
            if case == 3:
                a[:, :] = -0.0
            assert_same_bits(np.asarray(mod.gemv(a, x), np.float32), a @ x, f"K={k} case {case} ({target})")


@settings(max_examples=12, deadline=None)
@given(st.sampled_from(ORDERS[:5]), st.integers(2, 48))
def test_replica_of_a_pad_spec_reveals_the_spec_tree(order, n):
    spec = _spec(order)
    mod = load_replica(compile_spec(spec, "numpy"), "pad_roundtrip")
    revealed = reveal(from_callable(mod.sum, op="sum", n=n, dtype="float32", name="replica")).tree
    assert revealed == expand(spec, n)


@pytest.mark.parametrize("order", ORDERS)
def test_triton_sum_replica_has_the_model_bits(order):
    pytest.importorskip("triton")
    torch = pytest.importorskip("torch")
    spec = _spec(order)
    mod = load_replica(compile_spec(spec, "triton"), "pad_sum_triton")
    rng = np.random.default_rng(6)
    for n in (5, 12, 13, 29):
        x = _terms(rng, n, 3)
        tree, arith, regions = expand_arith(spec, n)
        want = evaluate(tree, x.T.astype(np.float64), None, arith, regions).astype(np.float32)
        # on the GPU when the kernels run there (TRITON_INTERPRET=0), else through the interpreter
        device = "cuda" if torch.cuda.is_available() and os.environ.get("TRITON_INTERPRET") != "1" else "cpu"
        got = np.array([mod.sum(torch.from_numpy(row).to(device)).cpu().numpy() for row in x], np.float32)
        assert_same_bits(got, want, f"{order} n={n} (triton)")


@pytest.mark.parametrize("target", ["numpy", "numba", "triton"])
def test_a_lone_product_in_a_padded_lane_is_rounded_before_an_fma_parent(target):
    # expand's note [lone products]: at n = 12 lane 4 holds phantom then term 8, so term 8
    # reaches the join (lane 0 + lane 4) as a rounded value, not a leaf the FMA fuses
    if target == "triton":
        pytest.importorskip("triton")
    spec = _spec("pad(8, lanes(8, seq, lanes(4, seq, pairwise)))", "gemv", "fma")
    tree, arith, regions = expand_arith(spec, 12)
    assert regions[(8, 0)] == arith and (0, 0) not in regions
    mod = load_replica(compile_spec(spec, target), f"pad_fma_{target}")
    rng = np.random.default_rng(11)
    # (the Triton interpreter is slow: the length of the note above only)
    for n in (12,) if target == "triton" else (4, 5, 12, 13, 20, 28):
        a = (rng.standard_normal((40, n)) * np.exp2(rng.integers(-12, 12, (40, n)))).astype(np.float32)
        x = (rng.standard_normal(n) * np.exp2(rng.integers(-12, 12, n))).astype(np.float32)
        tree, arith, regions = expand_arith(spec, n)
        want = evaluate(tree, a.T.astype(np.float64), x.astype(np.float64), arith, regions).astype(np.float32)
        assert_same_bits(np.asarray(mod.gemv(a, x), np.float32), want, f"n={n} ({target})")
