"""Every refusal: a one-line RevealRefused (exit code 3), never a wrong tree."""
import math
from fractions import Fraction

import numpy as np
import pytest

from fpspec.errors import RevealRefused
from fpspec.reveal import synthetic as S
from fpspec.reveal.engine import reveal
from fpspec.reveal.targets import from_callable, resolve_target
from fpspec.tree import sequential


def refusal(target, **kw) -> str:
    with pytest.raises(RevealRefused) as info:
        reveal(target, **kw)
    msg = str(info.value)
    assert "\n" not in msg and info.value.exit_code == 3
    return msg


def test_l_not_an_integer():
    target = from_callable(lambda x: np.sum(x) + 0.25, op="sum", n=16, dtype="float64")
    assert "not an integer in [2, n]" in refusal(target)


def test_l_outside_the_range():
    target = from_callable(lambda x: -float(len(x)), op="sum", n=16, dtype="float64")
    assert "not an integer in [2, n]" in refusal(target)


def test_answers_inconsistent_with_any_tree():
    n = 12
    table = np.random.default_rng(5).integers(2, n + 1, size=(n, n))

    def liar(x):
        # a "sum" whose l(i, j) is a random table: no tree has these answers
        i, j = int(np.argmax(x)), int(np.argmin(x))
        unit = np.min(np.abs(x[x != 0])) if np.any((x != 0) & (np.abs(x) < 1e300)) else 1.0
        if abs(x[i]) < 1e300:
            return float(np.sum(x))
        return (n - table[min(i, j), max(i, j)]) * unit

    assert "inconsistent with any tree" in refusal(from_callable(liar, op="sum", n=n, dtype="float64"))


def test_nondeterministic():
    rng = np.random.default_rng(0)

    def shuffled_sum(x):
        acc = np.float32(0)
        for v in np.asarray(x, np.float32)[rng.permutation(len(x))]:
            acc = np.float32(acc + v)
        return acc

    assert "nondeterministic" in refusal(from_callable(shuffled_sum, op="sum", n=24, dtype="float32"))


def test_math_fsum_is_order_independent():
    target = resolve_target("math:fsum", op="sum", n=20, dtype="float64")
    assert "order-independent" in refusal(target)
    assert "order-independent" in refusal(target, algorithm="basic")


def test_exact_rational_sum_is_order_independent():
    exact = lambda x: float(sum(Fraction(float(v)) for v in x))  # noqa: E731
    assert "order-independent" in refusal(from_callable(exact, op="sum", n=10, dtype="float32"))


def test_n_too_large_for_the_format_counts():
    target = resolve_target("numpy.sum", n=3000, dtype="float16")
    assert "too large" in refusal(target, algorithm="fprev")


def test_format_without_room_for_masks():
    assert "too large for the format" in refusal(S.sum_target(sequential(range(8)), "fp8e4m3"))


def test_fsum_target_resolves_both_spellings():
    assert resolve_target("math.fsum", op="sum", n=4).fn is math.fsum
