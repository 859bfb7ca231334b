"""The schedule loop of numba gemv / gemm replicas has one branch per operation
(fpspec.compile.backends.numba note [one branch per operation]): zeros, casts
and the terms of arithmetics with the same carrier share a branch, a node of two
leaves runs as a term row and an add_leaf row (fpspec.compile.runtime.numba_rt
note [leaf pairs]), a named arithmetic's FMA into a float64 partial sum is typed
where it is written.  The replicas keep the bits of the spec's model; and the
numpy replica's FMA rounds to odd only where it matters (fpspec.compile.runtime.
numpy_rt note [round to odd where it matters])."""
from __future__ import annotations

import re

import numpy as np
import pytest

from conftest import assert_same_bits, load_replica
from fpspec.arith.evaluate import evaluate
from fpspec.compile import compile_spec
from fpspec.compile.runtime import numpy_rt
from fpspec.spec import parse
from fpspec.spec.expand import expand_arith

SPEC = """target "t"
op gemv
n in 1..

arithmetic {{
    input = fp32
    product = {product}
    accumulator = fp32
    init = +0.0
    output = fp32
}}

arithmetic fma_fp32 {{
    product = fma
}}

order {order}
"""

# (product, order): a named FMA arithmetic in lanes inside pads (gemv_m7's first order,
# smaller blocks), and over nodes of two leaves (`_add_leaves`: split(1, ...) of a first
# leaf), with product = rounded and fma_first
CASES = [
    ("rounded", "tail(4, blocks(64, pad(8, lanes(8, using(fma_fp32, seq), lanes(4, seq, pairwise))), seq), "
                "split(1, seq, seq))"),
    ("rounded", "split(n // 2, using(fma_fp32, split(1, seq, seq)), lanes(2, seq, seq))"),
    ("fma_first", "lanes(2, using(fma_fp32, split(1, seq, seq)), split(1, seq, seq))"),
]


def _branches(source: str) -> list[str]:
    kernel = source[source.index("def _sched_gemv("):source.index("_SCHED_OPS = (")]
    return re.findall(r"c == \d+:   # (\S+)", kernel)


@pytest.mark.parametrize("product, order", CASES)
def test_schedule_has_one_branch_per_operation_and_the_models_bits(product, order):
    spec = parse(SPEC.format(product=product, order=order))
    source = compile_spec(spec, "numba")
    branches = _branches(source)
    assert "_ZERO__fma_fp32" not in branches and "_ACC" not in branches and "_term__fma_fp32" not in branches
    assert not any(b.startswith("_add_leaves") for b in branches)
    assert "_fma_into(" not in source[source.index("def _sched_gemv("):]
    if "using(fma_fp32, split(1" in order:      # nodes of two leaves, recorded as leaf pairs
        assert re.search(r"= _add_leaves__fma_fp32\(a, b", source)
    mod = load_replica(source, "schedule_branches")
    rng = np.random.default_rng(11)
    for n in (4, 5, 9, 16, 67, 130):
        assert mod._schedule(n) is not None, n       # the schedule runs, not the compiled order
        a = (rng.standard_normal((5, n)) * np.exp2(rng.integers(-14, 14, (5, n)))).astype(np.float32)
        x = rng.standard_normal(n).astype(np.float32)
        tree, arith, regions = expand_arith(spec, n)
        want = evaluate(tree, a.T.astype(np.float64), x.astype(np.float64), arith, regions).astype(np.float32)
        assert_same_bits(np.asarray(mod.gemv(a, x), np.float32), want, f"{order} n={n}")


def _near_values(p: int, rng) -> tuple[np.ndarray, np.ndarray]:
    """Products and partial sums whose float64 sums land on p-bit grid points and
    midpoints, just beside them, and anywhere; with zeros, infinities and NaN."""
    m = 4000
    acc = np.ldexp(rng.integers(1 << (p - 1), 1 << p, m).astype(np.float64), rng.integers(-p - 20, 20, m))
    ulp = np.ldexp(1.0, np.frexp(acc)[1] - p)
    half = ulp / 2 * rng.choice([-1.0, 1.0], m)
    tail = np.ldexp(rng.choice([-1.0, 1.0], m), np.frexp(acc)[1] - p - rng.integers(30, 60, m))
    x = np.concatenate([half + tail, half, ulp + tail, rng.standard_normal(m) * ulp * 8,
                        rng.integers(-4, 5, m).astype(np.float64)])
    y = np.concatenate([acc, acc, acc, acc, rng.integers(-4, 5, m).astype(np.float64)])
    x[:6] = [np.inf, np.nan, -np.inf, 0.0, -0.0, 1e300]
    y[:6] = [1.0, 1.0, np.inf, -0.0, -0.0, 1e300]
    return x, y


@pytest.mark.parametrize("p", [24, 11, 8])
@pytest.mark.parametrize("sums", ["mixed", "short"])
def test_round_odd_sum_near_rounds_as_round_odd_sum(p, sums):
    rng = np.random.default_rng(p)
    x, y = _near_values(p, rng)
    if sums == "short":          # sums of small integers: every float64 sum has its low bits zero
        keep = slice(4 * 4000, None)
        x, y = x[keep], y[keep]
    emin, emax = {24: (-126, 127), 11: (-14, 15), 8: (-126, 127)}[p]
    with np.errstate(all="ignore"):
        got = numpy_rt.round_value(numpy_rt._round_odd_sum_near(x, y, p), p, emin, emax, "rne")
        want = numpy_rt.round_value(numpy_rt._round_odd_sum(x, y), p, emin, emax, "rne")
    assert_same_bits(got, want, f"p={p} {sums}")
