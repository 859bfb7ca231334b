"""The replica API, the same on numpy and numba: NumPy arrays in, NumPy out;
anything else (lists, scalars, masked arrays, 0-d arrays, wrong dtype, shape or
length) refused with one error naming the argument; a replica whose order
depends on the output position refuses output shapes its spec does not cover."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from conftest import load_replica
from fpspec.compile import CompileError, compile_spec
from fpspec.spec import parse

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "cpu"
SPEC = """op sum
n in 2..64

arithmetic {
    input = fp32
    product = none
    accumulator = fp32
    init = +0.0
    output = fp32
}

order lanes(2, seq, seq)
"""
F32 = np.float32
REFUSED = [
    (np.ma.masked_array(np.ones(4, F32), [0, 1, 0, 0]), TypeError,
     "x is a masked array; this replica of spec adds every element (pass x.filled(0) or x.compressed() to say which)"),
    ([1.0, 2.0], TypeError, "x is a list, but this replica of spec takes NumPy arrays of dtype float32"),
    (F32(3), TypeError, "x is a NumPy float32 scalar, but this replica of spec takes arrays of dtype float32"),
    (np.array(3, F32), ValueError, "x must have 1 dimension(s), got shape ()"),
    (np.ones(4), TypeError, "x has dtype float64, but this replica of spec takes float32 arrays (input format fp32)"),
    (np.ones((2, 2), F32), ValueError, "x must have 1 dimension(s), got shape (2, 2)"),
    (np.ones(1, F32), ValueError, "x has length 1, outside the range n in 2..64 this replica of spec is valid for"),
    (np.ones(65, F32), ValueError, "x has length 65, outside the range n in 2..64 this replica of spec is valid for"),
]


@pytest.fixture(scope="module", params=["numpy", "numba"])
def replica(request):
    return load_replica(compile_spec(parse(SPEC), target=request.param), f"api_{request.param}")


@pytest.mark.parametrize("x, error, message", REFUSED, ids=[str(k) for k in range(len(REFUSED))])
def test_bad_arguments_are_refused_the_same_way_on_each_backend(replica, x, error, message):
    with pytest.raises(error) as e:
        replica.sum(x)
    assert str(e.value).startswith(message)


def test_numpy_in_numpy_out(replica):
    x = np.arange(1, 10, dtype=F32) / F32(3)
    total = replica.sum(x)
    assert type(total) is np.float32
    evens, odds = x[0], x[1]          # lane 0 and lane 1, each folded in order, then joined
    for k in range(2, 9, 2):
        evens = F32(evens + x[k])
    for k in range(3, 9, 2):
        odds = F32(odds + x[k])
    assert total.view(np.uint32) == F32(evens + odds).view(np.uint32)
    # another byte order of float32 is float32
    assert replica.sum(x.astype(">f4")).view(np.uint32) == total.view(np.uint32)
    totals = replica.sums(np.stack([x, x], axis=1))
    assert totals.dtype == np.float32 and totals.shape == (2,)
    assert (totals.view(np.uint32) == total.view(np.uint32)).all()


@pytest.mark.parametrize("target", ["numpy", "numba"])
def test_position_dependent_gemm_refuses_shapes_its_spec_does_not_cover(target):
    spec = parse((EXAMPLES / "numpy_matmul_float32_64x64x64.fps").read_text())
    rep = load_replica(compile_spec(spec, target=target), f"gemm64_{target}")
    A = np.ones((64, 64), F32)
    assert rep.gemm(A, A).shape == (64, 64)
    covered = "its spec covers 64 x 64 outputs only (A with 64 rows, B with 64 columns)"
    with pytest.raises(ValueError, match=r"^A has 128 rows, but this replica's orders depend on the output "
                                         r"position and " + covered.replace("(", r"\(").replace(")", r"\)")):
        rep.gemm(np.ones((128, 64), F32), A)
    with pytest.raises(ValueError, match=r"^B has 128 columns, but"):
        rep.gemm(A, np.ones((64, 128), F32))


def test_a_position_dependent_spec_without_its_shape_is_refused():
    text = (EXAMPLES / "numpy_matmul_float32_64x64x64.fps").read_text()
    start, end = text.index("    shape {"), text.index("    device =")
    with pytest.raises(CompileError, match="does not say the output shape its conditions were written for"):
        compile_spec(parse(text[:start] + text[end:]), target="numpy")


LONE_LAST_BLOCK = """op gemv
n in 1..40

provenance {
    shape {
        m = 3
    }
}

arithmetic {
    input = fp32
    product = fma
    accumulator = fp32
    init = none
    output = fp32
}

order blocks(2, seq, seq)
"""


@pytest.mark.parametrize("target", ["numpy", "numba"])
def test_a_last_block_of_one_product_is_fused_into_the_fold(target):
    """blocks(2, seq, seq) at odd n ends with a block of one leaf: with product = fma
    it is fused into the running sum (the replica used to raise at run time)."""
    from fpspec.arith.evaluate import evaluate
    from fpspec.compile.build import arithmetic_of
    from fpspec.spec import expand

    spec = parse(LONE_LAST_BLOCK)
    rep = load_replica(compile_spec(spec, target=target), f"lone_block_{target}")
    rng = np.random.default_rng(3)
    for n in (3, 5, 9):
        A = rng.standard_normal((3, n)).astype(F32)
        x = rng.standard_normal(n).astype(F32)
        want = [evaluate(expand(spec, n), A[i].astype(np.float64), x.astype(np.float64), arithmetic_of(spec))
                for i in range(3)]
        assert rep.gemv(A, x).view(np.uint32).tolist() == np.asarray(want, F32).view(np.uint32).tolist()
