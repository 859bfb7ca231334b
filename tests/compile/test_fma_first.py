"""product = fma_first: a node of two leaves fuses the first and rounds the
second (C's `a[0]*x[0] + a[1]*x[1]` as GCC contracts it).  The model, the
probes, the replicas and OpenBLAS dgemv (numpy.matmul, float64) agree."""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from conftest import assert_same_bits, load_replica
from fpspec.arith.evaluate import evaluate
from fpspec.arith.model import Arithmetic
from fpspec.arith.probe import probe_arithmetic
from fpspec.compile import compile_spec
from fpspec.compile.build import build_kernel
from fpspec.compile.trees import tree_of
from fpspec.reveal.targets import from_callable
from fpspec.spec import expand, parse
from fpspec.spec.expand import expand_arith
from fpspec.tree import Node


def _fma(a: float, b: float, c: float) -> float:
    if not (math.isfinite(a) and math.isfinite(b)):
        return a * b + c                  # an infinite or nan operand: IEEE's product of it, then the sum
    if not math.isfinite(c):
        return c                          # a finite exact product cannot change an infinite addend
    try:
        return float(Fraction(a) * Fraction(b) + Fraction(c))   # one rounding, as an FMA
    except OverflowError:                 # the exact result rounds past the largest double
        return math.copysign(math.inf, Fraction(a) * Fraction(b) + Fraction(c))


def test_two_leaves_fuse_the_first():
    x = np.array([-0.12853466294403426, 1.3664634705496859])
    y = np.array([-0.6651946734866135, 0.3515100700930197])
    tree = Node((0, 1))
    first = evaluate(tree, x, y, Arithmetic(input="fp64", product="fma_first", accumulator="fp64", output="fp64"))
    last = evaluate(tree, x, y, Arithmetic(input="fp64", product="fma", accumulator="fp64", output="fp64"))
    assert float(first) == _fma(x[0], y[0], x[1] * y[1])
    assert float(last) == _fma(x[1], y[1], x[0] * y[0])
    assert float(first) != float(last)


def _dot_first(x, y):
    acc = _fma(float(x[0]), float(y[0]), float(x[1]) * float(y[1]))
    for k in range(2, len(x)):
        acc = _fma(float(x[k]), float(y[k]), acc)
    return acc


def test_probes_find_fma_first():
    target = from_callable(_dot_first, op="dot", n=5, dtype="float64", name="fma_first_dot")
    report = probe_arithmetic(target, expand(parse("n in 1..\norder seq\n"), 5))
    assert report.arithmetic.product == "fma_first"


SPEC = '''op gemv
n in 1..

arithmetic {{
    input = fp32
    product = fma_first
    accumulator = fp32
    output = fp32
}}

order {order}
'''
ORDERS = ["seq", "tail(4, lanes(2, seq, seq), split(1, seq, seq))", "pairwise", "split(1, seq, seq)",
          "tail(3, lanes(3, seq, seq), seq)"]


@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("target", ["numpy", "numba"])
def test_replica_has_the_model_bits(order, target):
    spec = parse(SPEC.format(order=order))
    kernel = build_kernel(spec)
    mod = load_replica(compile_spec(spec, target), f"fma_first_{target}")
    rng = np.random.default_rng(9)
    for n in (1, 2, 3, 4, 5, 6, 9, 13):
        assert tree_of(kernel, n) == expand(spec, n)
        a = (rng.standard_normal((6, n)) * np.exp2(rng.integers(-12, 12, (6, n)))).astype(np.float32)
        x = rng.standard_normal(n).astype(np.float32)
        tree, arith, regions = expand_arith(spec, n)
        want = evaluate(tree, a.T.astype(np.float64), x.astype(np.float64), arith, regions).astype(np.float32)
        assert_same_bits(np.asarray(mod.gemv(a, x), np.float32), want, f"{order} n={n} ({target})")


DGEMV = parse(open(__file__.replace("tests/compile/test_fma_first.py",
                                     "examples/cpu/numpy_matmul_float64_gemv_m4.fps")).read())


@pytest.mark.parametrize("target", ["numba"])    # (numpy has no exact fp64 FMA: a one-line refusal)
def test_dgemv_replica_equals_numpy_matmul(target):
    mod = load_replica(compile_spec(DGEMV, target), f"dgemv_{target}")
    rng = np.random.default_rng(10)
    for k in (1, 2, 3, 4, 5, 7, 8, 13, 100, 2049, 2053):
        for case in range(3):
            a = rng.standard_normal((4, k)) * np.exp2(rng.integers(-20, 20, (4, k)))
            x = rng.standard_normal(k)
            if case == 1:
                a[2, k - 1] = np.inf
            assert_same_bits(np.asarray(mod.gemv(a, x), np.float64), a @ x, f"K={k} case {case} ({target})")


def test_a_guard_arm_without_fields_is_a_part():
    from fpspec.spec.regions import partition

    spec = parse("n in 1..\norder if n <= 3: seq else: tail(4, lanes(2, seq, seq), split(1, seq, seq))\n")
    order, parents = partition(spec)
    assert str(order) == ("if n <= 3: using(b0, seq) else: tail(4, using(b1_body, lanes(2, using(b1_body_inner, seq), "
                          "using(b1_body_outer, seq))), split(1, seq, seq))")
    assert parents == {"b0": None, "b1_body": None, "b1_body_inner": "b1_body", "b1_body_outer": "b1_body"}
