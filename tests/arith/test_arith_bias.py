"""Where a gemm's bias enters (arithmetic `bias = after | inside`, fpspec.arith.model note
[bias]): the model, the replicas of every backend (gemm(A, B, bias)), verify --bias against
synthetic black boxes that add it after or inside the accumulation, and reveal's choice."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from fpspec.arith.evaluate import evaluate
from fpspec.arith.model import Arithmetic
from fpspec.compile import compile_spec, load_replica
from fpspec.errors import SpecError
from fpspec.spec import check, parse
from fpspec.tree import sequential

SPEC = ("op gemm\nn in 1..\narithmetic {{ input = {fmt} product = {product} accumulator = fp32 init = {init} "
        "output = {fmt} bias = {bias} }}\norder {order}\n")


def spec_of(bias, fmt="fp32", product="rounded", init="+0.0", order="seq"):
    spec = parse(SPEC.format(bias=bias, fmt=fmt, product=product, init=init, order=order))
    check(spec)
    return spec


def test_the_model_adds_the_bias_where_the_arithmetic_says():
    # terms 1, 2^-24, 2^-24 and a bias 1: after, 1 + 2^-24 + 2^-24 rounds each 2^-24 away (1 + 1 = 2);
    # inside, the bias 1 first: ((1 + 1) + 2^-24) + 2^-24 = 2 as well, but for a bias -1 the two differ
    x, y = np.array([1.0, 2.0 ** -24, 2.0 ** -24]), np.ones(3)
    after = Arithmetic(input="fp32", product="exact", bias="after")
    inside = Arithmetic(input="fp32", product="exact", bias="inside")
    assert evaluate(sequential(range(3)), x, y, after, bias=-1.0) == 0.0
    assert evaluate(sequential(range(4)), x, y, inside, bias=-1.0) == 2.0 ** -23
    # after: the sum rounded to the accumulator (fp32), then cast to the output (fp16): two roundings.
    # 1 + 2^-11 + 2^-24: fp32 ties to 1 + 2^-11, which ties to 1.0 in fp16; once rounded it is 1 + 2^-10
    half = Arithmetic(input="fp16", product="exact", output="fp16", bias="after")
    got = evaluate(sequential(range(2)), np.array([1.0, 2.0 ** -11]), np.ones(2), half, bias=2.0 ** -24)
    assert got == 1.0
    with pytest.raises(SpecError, match="bias = before: expected one of none | after | inside"):
        Arithmetic(bias="before")


def test_the_bias_clause_round_trips_and_is_written_only_when_given():
    spec = spec_of("after")
    assert "bias = after" in str(spec)
    assert "bias" not in str(parse(str(spec).replace("    bias = after\n", "")))
    assert Arithmetic.from_entries(Arithmetic(bias="inside").to_entries()).bias == "inside"


@pytest.mark.parametrize("bias", ["after", "inside"])
def test_replicas_of_every_backend_take_the_bias(bias):
    rng = np.random.default_rng(5)
    A = rng.standard_normal((3, 7)).astype(np.float16)
    B = rng.standard_normal((7, 4)).astype(np.float16)
    b = (rng.standard_normal(4) * 64).astype(np.float16)
    spec = spec_of(bias, fmt="fp16", product="exact", init="none")
    want = _reference(spec, A, B, b)
    # numba's wrapper is NumPy's text around its own kernel: compiled once (after), for the time it takes
    for target in ("numpy", "numba", "triton") if bias == "after" else ("numpy", "triton"):
        replica = load_replica(compile_spec(spec, target=target), f"{bias} {target}")
        if target == "triton":
            got = replica.gemm(*(torch.from_numpy(v) for v in (A, B, b))).float().numpy()
        else:
            got = replica.gemm(A, B, b)
        assert np.array_equal(np.asarray(got, np.float64).view(np.uint64), want.view(np.uint64)), target


def _reference(spec, A, B, b):
    from fpspec.verify import reference_outputs
    from fpspec.inputs import Sample
    from fpspec.spec.expand import expand
    from fpspec.verify import spec_arithmetic

    arith = spec_arithmetic(spec)
    k = A.shape[1] + (arith.bias == "inside")
    sample = Sample("given", 0, 0, tuple(np.asarray(v, np.float64) for v in (A, B, b)))
    return np.asarray(reference_outputs(expand(spec, k), arith, "gemm", [sample])[0], np.float64)


@pytest.fixture
def boxes(monkeypatch):
    monkeypatch.syspath_prepend(str(Path(__file__).parent))


@pytest.mark.parametrize("spec_bias,box", [("after", "after"), ("after", "inside"), ("inside", "inside")])
def test_verify_tells_a_bias_after_from_one_inside(boxes, spec_bias, box):
    from fpspec.verify import verify_spec

    spec = spec_of(spec_bias, init="+0.0" if spec_bias == "after" else "none")
    replica = load_replica(compile_spec(spec, target="numpy"), spec_bias).gemm
    report = verify_spec(spec, replica_fn=replica, against=f"bias_boxes:{box}", n_values=[5], samples=80,
                         m=3, ncols=4)
    assert report.equivalent == (spec_bias == box), report.text()
    if spec_bias != box:   # the trees and arithmetic agree (a +0.0 bias hides it): the bits tell
        assert all(t.equal for t in report.trees)
        assert any(not s.equal for s in report.samples)


def test_verify_refuses_a_bias_spec_against_a_function_without_one():
    from fpspec.errors import FpspecError
    from fpspec.verify import verify_spec

    spec = spec_of("after")
    with pytest.raises(FpspecError, match="takes none"):
        verify_spec(spec, replica_fn=lambda A, B, bias=None: A @ B, against="numpy.matmul", n_values=[6],
                    samples=10, m=3, ncols=4)
