"""fp64 fma of the model (fpspec.formats note [fp64 fma]): the error-free
emulation equals the rational reference bit for bit, specials and the
underflow/overflow fallback included."""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from fpspec.formats import _fma64_exact, fma, get_format

F64 = get_format("fp64")
SPECIALS = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 2.0 ** -1074, -(2.0 ** -1074), 2.0 ** -1022,
                     np.finfo(np.float64).max, -np.finfo(np.float64).max, 2.0 ** 996, 2.0 ** -500, 1 / 3])


def _same(a, b):
    return (a.view(np.int64) == b.view(np.int64)) | (np.isnan(a) & np.isnan(b))


def test_random_cancelling_and_special_inputs():
    rng = np.random.default_rng(0)
    n = 4000
    for lo, hi in ((-60, 60), (-600, 600), (-1070, -900), (900, 1023)):
        x = rng.standard_normal(n) * np.exp2(rng.integers(lo, hi, n))
        y = rng.standard_normal(n) * np.exp2(rng.integers(-60, 60, n))
        with np.errstate(all="ignore"):
            near = -(x * y) * (1 + rng.integers(-3, 4, n) * 2.0 ** -52)      # heavy cancellation
            c = np.where(rng.random(n) < 0.5, near, rng.standard_normal(n) * np.exp2(rng.integers(lo, hi, n)))
        k = n // 8
        x[:k], y[k:2 * k], c[2 * k:3 * k] = (rng.choice(SPECIALS, k) for _ in range(3))
        with np.errstate(all="ignore"):
            got, want = fma(F64, x, y, c), _fma64_exact(x, y, c)
        assert _same(got, want).all(), (lo, hi)


@settings(max_examples=300, deadline=None)
@given(st.floats(), st.floats(), st.floats())
def test_any_three_doubles(x, y, c):
    with np.errstate(all="ignore"):
        got = fma(F64, np.float64(x), np.float64(y), np.float64(c))
        want = _fma64_exact(np.array([x]), np.array([y]), np.array([c]))[0]
    assert _same(np.array([got], np.float64), np.array([want]))[0]
