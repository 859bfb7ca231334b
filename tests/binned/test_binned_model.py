"""The binned accumulator model (fpspec.arith.binned): order independence, merging, exceptions, the bound."""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from fpspec.arith.binned import Binned, binned_dot, binned_format, binned_sum, error_bound

FORMATS = {"fp64": np.float64, "fp32": np.float32}


def bits(v):
    return np.asarray(v).tobytes()


def wide(rng, n, dtype):
    """Values over a wide exponent range, with cancellation."""
    x = rng.standard_normal(n) * 2.0 ** rng.integers(-60, 60, n)
    x[: n // 3] = -x[n // 3: 2 * (n // 3)]
    return x.astype(dtype)


def test_constants_follow_the_paper_with_its_errata():
    d, f = binned_format("fp64"), binned_format("fp32")
    assert (d.width, d.max_index, d.endurance) == (40, 51, 2 ** 11)
    assert (f.width, f.max_index, f.endurance) == (13, 20, 2 ** 9)     # i_max 20, not 19 (errata)
    # primary of bin i: 1.5 * 2^(a_i + p), a_i = emax + 1 - (i + 1) W; bin 0 scaled (note [index 0])
    assert d.bins[1] == 1.5 * 2.0 ** (1024 - 80 + 53) and d.bins[0] == 1.5 * 2.0 ** 1023
    assert f.bins[3] == np.float32(1.5 * 2.0 ** (128 - 52 + 24))


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2 ** 32 - 1), n=st.integers(1, 400), fmt=st.sampled_from(["fp64", "fp32"]),
       fold=st.integers(2, 4), data=st.data())
def test_any_permutation_and_split_gives_the_same_bits(seed, n, fmt, fold, data):
    rng = np.random.default_rng(seed)
    x = wide(rng, n, FORMATS[fmt])
    whole = binned_sum(x, fold=fold)
    perm = np.array(data.draw(st.permutations(range(n))))
    cuts = sorted(data.draw(st.lists(st.integers(0, n), max_size=5)))
    parts = np.split(x[perm], cuts)
    merged = Binned.empty(fmt, fold)
    for part in reversed(parts):          # merged in another order than deposited
        merged = merged + Binned.empty(fmt, fold).deposit(part)
    assert merged == whole
    assert bits(merged.to_float()) == bits(whole.to_float())
    # one value at a time, in the permuted order
    one = Binned.empty(fmt, fold)
    for v in x[perm][:50]:
        one = one.deposit(v)
    assert one == binned_sum(x[perm][:50], fold=fold)


def test_array_layout_round_trips():
    rng = np.random.default_rng(3)
    for fmt in FORMATS:
        b = binned_sum(wide(rng, 1000, FORMATS[fmt]))
        a = b.to_array()
        assert a.dtype == FORMATS[fmt] and a.shape == (6,)
        assert Binned.from_array(a, fmt, 3) == b
    assert Binned.from_array(np.zeros(6), "fp64", 3) == Binned.empty("fp64", 3)


def test_exceptions_are_the_ieee_sum_of_the_exceptional_values():
    inf, nan = math.inf, math.nan
    assert binned_sum(np.array([1.0, inf, 2.0])).to_float() == inf
    assert binned_sum(np.array([-inf, 1e308, 1e308])).to_float() == -inf
    assert np.isnan(binned_sum(np.array([inf, -inf])).to_float())
    assert np.isnan(binned_sum(np.array([nan, 1.0])).to_float())
    # canonical NaN bits
    assert bits(binned_sum(np.array([-inf, inf])).to_float()) == bits(np.float64(np.nan))
    # finite overflow of the sum itself gives inf (the conversion overflows)
    big = np.finfo(np.float64).max
    assert binned_sum(np.array([big, big])).to_float() == inf
    assert binned_sum(np.array([big, big, -big])).to_float() == big
    # zeros: +0.0 always (ReproBLAS returns +0.0 for an all-zero input)
    assert bits(binned_sum(np.array([-0.0, -0.0])).to_float()) == bits(np.float64(0.0))
    assert bits(Binned.empty().to_float()) == bits(np.float64(0.0))


def test_dot_deposits_rounded_products():
    x = np.array([1 + 2.0 ** -12, 3.0], dtype=np.float32)
    y = np.array([1 + 2.0 ** -12, -3.0], dtype=np.float32)
    assert binned_dot(x, y).to_float() == np.float32(np.float32(x[0] * y[0]) - 9.0)


def exact_sum(x) -> Fraction:
    return sum((Fraction(float(v)) for v in x), Fraction(0))


@pytest.mark.parametrize("fmt", ["fp64", "fp32"])
@pytest.mark.parametrize("fold", [2, 3])
def test_the_bound_holds_against_exact_rational_sums(fmt, fold):
    rng = np.random.default_rng(7)
    dtype = FORMATS[fmt]
    cases = [wide(rng, 300, dtype),
             rng.standard_normal(500).astype(dtype),
             np.concatenate([np.full(100, 2.0 ** 20), np.full(100, -2.0 ** 20), rng.random(100)]).astype(dtype),
             (rng.standard_normal(200) * 2.0 ** rng.integers(-140, -120, 200)).astype(dtype)]
    worst = Fraction(0)
    for x in cases:
        result = Fraction(float(binned_sum(x, fold=fold).to_float()))
        err = abs(exact_sum(x) - result)
        bound = error_bound(x.size, float(np.max(np.abs(x))), fmt, fold)
        assert err < bound
        worst = max(worst, err / bound)
    assert worst > 0      # the inputs do exercise the bound


def test_the_bound_is_the_corrected_formula():
    # errata: n * 2^(W(1-K)) * max|x| (the paper's -1 in the exponent is wrong)
    eps = Fraction(1, 2 ** 53)
    c = 7 * eps / (1 - 6 * Fraction(1, 2 ** 26))
    assert error_bound(1000, 1.0, "fp64", 3) == (1 + c) * 1000 * Fraction(1, 2 ** 80) + c * 1000
