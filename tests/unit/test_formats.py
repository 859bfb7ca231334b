from fractions import Fraction

import numpy as np
import pytest

from fpspec.formats import add, fma, get_format, round_to


@pytest.mark.parametrize("name,dtype", [("fp32", np.float32), ("fp16", np.float16)])
def test_round_to_matches_numpy_casts_including_subnormals_and_overflow(name, dtype):
    rng = np.random.default_rng(1)
    x = rng.standard_normal(20000) * np.exp2(rng.integers(-160, 140, 20000).astype(float))
    with np.errstate(over="ignore"):
        want = x.astype(dtype).astype(np.float64)
    assert np.array_equal(round_to(get_format(name), x), want)


def test_bf16_rounds_once_from_float64():
    # 1 + 2^-8 + 2^-30 is above the halfway point of bf16: rounding via fp32 first would tie to even
    x = 1.0 + 2.0**-8 + 2.0**-30
    assert round_to(get_format("bf16"), x) == 1.0 + 2.0**-7
    assert add(get_format("bf16"), 256.0, 1.0) == 256.0


def test_fp32_fma_is_one_rounding():
    rng = np.random.default_rng(2)
    f = get_format("fp32")
    x, y, c = (rng.standard_normal(3000).astype(np.float32).astype(np.float64) for _ in range(3))
    got = fma(f, x, y, c)
    for i in range(0, 3000, 7):
        exact = Fraction(x[i]) * Fraction(y[i]) + Fraction(c[i])
        assert got[i] == np.float32(float(exact)) or got[i] == round_to(f, float(exact))
    # a case where rounding the product first differs
    a = 1.0 + 2.0**-12     # a*a = 1 + 2^-11 + 2^-24: the product alone ties to even in fp32
    assert fma(f, a, a, -1.0) == 2.0**-11 + 2.0**-24
    assert round_to(f, round_to(f, a * a) - 1.0) == 2.0**-11


@pytest.mark.parametrize("x,y,c,want", [
    (-0.0, 1.0, -0.0, -0.0), (0.0, 1.0, -0.0, 0.0), (1.0, 1.0, -1.0, 0.0),
    (1e300, 1e300, -np.inf, -np.inf), (1e300, 1e300, 0.0, np.inf), (np.inf, 0.0, 1.0, np.nan),
])
def test_fp64_fma_special_cases(x, y, c, want):
    got = fma(get_format("fp64"), x, y, c)
    assert (np.isnan(got) and np.isnan(want)) or (got == want and np.signbit(got) == np.signbit(want))
