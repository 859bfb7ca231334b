"""Every refusal: a one-line RevealRefused (exit code 3), never a wrong tree."""
import inspect
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
    # the function is guarded (fpspec.reveal.targets.checked_target), the user's one inside
    assert inspect.unwrap(resolve_target("math.fsum", op="sum", n=4).fn) is math.fsum


def _gemm_from_trees(choose, m=8, ncols=8, n=16):
    """A gemm whose output (r, c) sums in the tree choose(r, c, A) (values float64-held fp32)."""
    from fpspec.formats import get_format, round_to
    from fpspec.reveal.targets import from_callable
    from fpspec.tree import pairwise

    progs = {"seq": S.TreeProgram(sequential(range(n)), "fp32"), "pair": S.TreeProgram(pairwise(range(n)), "fp32")}
    f32 = get_format("fp32")

    def gemm(A, B):
        A, B = np.asarray(A, np.float64), np.asarray(B, np.float64)
        out = np.empty((A.shape[0], B.shape[1]))
        for r in range(A.shape[0]):
            terms = round_to(f32, A[r][None, :] * B.T)
            for c in range(B.shape[1]):
                out[r, c] = progs[choose(r, c, A)](terms[c:c + 1])[0]
        return out

    return from_callable(gemm, op="gemm", n=n, dtype="float32", m=m, ncols=ncols)


def test_nondeterministic_gemm():
    # the fingerprint input is repeated on idle rows of the first query call (note [repeat])
    rng = np.random.default_rng(3)
    target = _gemm_from_trees(lambda r, c, A: "seq" if rng.random() < 0.5 else "pair")
    assert "nondeterministic" in refusal(target)


def test_gemm_whose_outputs_depend_on_other_rows():
    # rows 8-15 sum pairwise, or in sequence once a row of A is all ones (a query call with
    # columns of B asking): they answer no query, repeat the fingerprint input in that call and
    # change there, while a plain repeat does not (note [repeat])
    def choose(r, c, A):
        return "seq" if (r < 8) != np.any(np.all(A == 1.0, axis=1)) else "pair"

    target = _gemm_from_trees(choose, m=16, ncols=64)
    assert "value-dependent" in refusal(target)


def test_split_masks_on_a_sum_say_why():
    # a sum has one operand to put the mask in: no split plan, and the accumulator is the input's widest
    msg = refusal(resolve_target("numpy.sum", n=8, dtype="float32"), algorithm="basic", split=True)
    assert msg == ("split masks put sqrt(M) in each operand of a product (dot, gemv, gemm), and numpy.sum is a "
                   "sum: its masks are single fp32 values, which must swamp partial sums in fp64 (the widest "
                   "accumulator assumed for fp32 inputs); use --masks unsplit or auto")
    assert "fp16 values, which must swamp partial sums in fp32" in refusal(
        resolve_target("numpy.sum", n=8, dtype="float16"), split=True)


def test_split_masks_on_a_sum_from_the_command_line(capsys):
    from fpspec.cli import main

    assert main(["reveal", "numpy.sum", "-n", "8", "--algorithm", "basic", "--masks", "split"]) == 3
    err = capsys.readouterr().err
    assert err.startswith("fpspec: error: split masks put sqrt(M)") and "use --masks unsplit or auto\n" in err
    assert main(["reveal", "numpy.sum", "-n", "8", "--algorithm", "basic", "--masks", "unsplit", "--no-probe"]) == 0
