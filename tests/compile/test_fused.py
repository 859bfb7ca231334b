"""Fused (Tensor Core) nodes in CPU replicas: an H100 fp16/bf16 matmul in NumPy and Numba.

The fused-node emulation is checked against the measured GPU vectors
(/work/shared/data/tensor-core-vectors, loaded by tests/arith/arith_vectors.py)
through the replica's own node function, and whole chained matmuls against
fpspec.arith.evaluate.
"""
from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from conftest import assert_same_bits, load_replica
from fpspec.arith.evaluate import evaluate
from fpspec.arith.model import Arithmetic
from fpspec.arith.params import PARAMS
from fpspec.compile import compile_spec
from fpspec.inputs import samples
from fpspec.spec import ast as A
from fpspec.spec import expand, parse

_loader = Path(__file__).resolve().parents[1] / "arith" / "arith_vectors.py"
_spec = importlib.util.spec_from_file_location("arith_vectors_for_compile", _loader)
vectors = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(vectors)


def h100_spec(fmt: str = "fp16", out: str = "fp32", op: str = "gemm", order: A.Order | None = None) -> A.Spec:
    params = PARAMS[f"h100-{fmt}" + ("-to-fp16" if out == "fp16" else "")]
    arithmetic = Arithmetic(input=fmt, product="exact", accumulator=out, output=out, fused=params)
    header = A.Header(target=f"torch.matmul ({fmt}, H100)", op=op, n=A.Range(1, None),
                      sections=(A.Block("arithmetic", arithmetic.to_entries()),))
    return parse(str(A.Spec(header, (), order or A.Chain(A.Num(params.w)))))


@pytest.fixture(scope="module", params=[("fp16", "fp32"), ("bf16", "fp32"), ("fp16", "fp16")],
                ids=["fp16", "bf16", "fp16-out"])
def case(request):
    return request.param


@pytest.mark.parametrize("target", ["numpy", "numba"])
def test_fused_node_of_the_replica_reproduces_h100_vectors(case, target):
    fmt, out = case
    a, b, c, d = vectors.load("H100", fmt, out)
    mod = load_replica(compile_spec(h100_spec(fmt, out), target), f"h100_{fmt}_{out}_{target}")
    if target == "numpy":
        got = mod._fused_range(a.T, b.T, 0, 1, a.shape[1], c)
    else:
        rows = 1000 if fmt == "fp16" and out == "fp32" else 300   # a slice: numba runs one row per call
        a32, b32 = a[:rows].astype(np.float32), b[:rows].astype(np.float32)
        got = np.array([mod._fused_range(a32[i], b32[i], 0, 1, a.shape[1], c[i]) for i in range(rows)])
        d = d[:rows]
    assert_same_bits(np.asarray(got, np.float64), d, f"H100 {fmt}->{out} vectors ({target})")


def _replicas_chain_like_the_model(spec, label: str, ns, count: int):
    """numpy and numba replicas of an H100 fp16 gemm spec against fpspec.arith.evaluate, 3 x 2 outputs."""
    mod_np = load_replica(compile_spec(spec, "numpy"), f"{label}_numpy")
    mod_nb = load_replica(compile_spec(spec, "numba"), f"{label}_numba")
    arithmetic = Arithmetic(input="fp16", product="exact", accumulator="fp32", output="fp32", fused=PARAMS["h100-fp16"])
    for n in ns:
        tree = expand(spec, n)
        for s in samples("gemm", n, "fp16", count, seed=n, m=3, ncols=2):
            A_, B_ = s.args
            got = mod_np.gemm(A_, B_)
            X = np.repeat(A_.astype(np.float64).T, 2, axis=1)
            Y = np.tile(B_.astype(np.float64), (1, 3))
            want = evaluate(tree, X, Y, arithmetic).reshape(3, 2).astype(np.float32)
            assert_same_bits(got, want, f"{label} n={n} {s.describe()} (numpy)")
            assert_same_bits(mod_nb.gemm(A_, B_), got, f"{label} n={n} {s.describe()} (numba)")


def test_h100_fp16_matmul_replica_chains_fused_nodes_like_the_model():
    _replicas_chain_like_the_model(h100_spec(), "h100_gemm", (16, 40, 64), 7)


def test_replica_refuses_inputs_the_spec_does_not_cover():
    mod = load_replica(compile_spec(h100_spec(), "numpy"), "h100_gemm_numpy")
    with pytest.raises(TypeError, match="float16"):
        mod.gemm(np.ones((2, 16), np.float32), np.ones((16, 2), np.float32))
    with pytest.raises(ValueError, match="gemm: A is 2x16 but B is 8x2"):
        mod.gemm(np.ones((2, 16), np.float16), np.ones((8, 2), np.float16))


def test_finite_fast_path_of_the_numpy_replica_reproduces_h100_vectors(case):
    """`_fused` takes `_fused_finite` only when nothing is inf or nan: run it on
    the finite vectors alone (the whole set, with specials, goes the general way)."""
    fmt, out = case
    a, b, c, d = vectors.load("H100", fmt, out)
    finite = np.isfinite(a).all(axis=1) & np.isfinite(b).all(axis=1) & np.isfinite(c)
    assert finite.sum() > 100
    mod = load_replica(compile_spec(h100_spec(fmt, out), "numpy"), f"h100_{fmt}_{out}_numpy")
    got = mod._fused_finite(a[finite].T, b[finite].T, c[finite])
    assert_same_bits(np.asarray(got, np.float64), d[finite], f"H100 {fmt}->{out} finite vectors (numpy fast path)")


def test_chain_with_the_short_group_first_or_inside_matches_the_model():
    """cuBLAS starts its K loop with the partial tile of T: chain(16, n % T // 16)
    (K = 50 -> groups 16, 2, 16, 16; K = 65 -> a first node of 17 products)."""
    spec = h100_spec(order=parse("op gemm\norder chain(16, n % 64 // 16)").order)
    _replicas_chain_like_the_model(spec, "h100_gemm_at", (17, 34, 50, 65, 77, 81, 130), 5)


def test_literal_tree_with_a_first_group_of_one_matches_the_model():
    """Lowering may leave a chain as a literal: its node of w + 1 leaves is a
    node of one product whose result is the next node's c, in every backend."""
    from fpspec.tree import fused_chain

    tree = fused_chain(range(33), 16, 0)          # [[0 .. 16] 17 .. 32]
    spec = h100_spec(order=A.Literal(tree))
    arithmetic = Arithmetic(input="fp16", product="exact", accumulator="fp32", output="fp32", fused=PARAMS["h100-fp16"])
    for target in ("numpy", "numba"):
        mod = load_replica(compile_spec(spec, target), f"h100_literal_first_one_{target}")
        for s in samples("gemm", 33, "fp16", 5, seed=3, m=2, ncols=2):
            A_, B_ = s.args
            X = np.repeat(A_.astype(np.float64).T, 2, axis=1)
            Y = np.tile(B_.astype(np.float64), (1, 2))
            want = evaluate(tree, X, Y, arithmetic).reshape(2, 2).astype(np.float32)
            assert_same_bits(mod.gemm(A_, B_), want, f"literal first-of-one {s.describe()} ({target})")

