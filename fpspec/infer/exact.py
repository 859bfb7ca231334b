"""Black boxes whose every addition is exact: the order cannot be seen, the result can.

Note [exact sums]: fp16 terms added in an fp64 accumulator never round
(every partial sum is a multiple of fp16's smallest subnormal, 2^-24, below
n * 2^16: 40 + log2(n) bits, fewer than fp64's 53 for n < 8192).  Reveal
refuses such a box ("order-independent": every pair of masks cancels first),
and rightly: no tree can be observed.  But its result is still fixed: the
exact sum, rounded once to the output format -- which is what ANY order
computes in an fp64 accumulator while the sums stay exact.  So inference
writes `order seq` with `accumulator = fp64`, after checking the box against
that result bit for bit on random and special inputs at n spread over the
range (the all -0.0 sum decides `init`), and says in the provenance that
the order is not observable.  Where fp64 would not be exact for the largest
n of the range, or the box computes anything else, it refuses, saying which.
"""
from __future__ import annotations

import math

import numpy as np

from fpspec.errors import RevealRefused
from fpspec.formats import get_format, round_to

EXACT_ACCUMULATOR = "fp64"
CHECKED_N = 12       # n of the range the box is compared at (the largest included)
INPUTS = 48          # random input rows per n


def exact_span(fmt: str, n: int) -> bool:
    """Do n terms of format fmt add exactly in fp64, in every order?"""
    f = get_format(fmt)
    span = (f.emax + 1) - (f.emin - f.precision + 1)    # bits from the smallest subnormal to past the largest
    return span + math.ceil(math.log2(max(n, 1))) <= get_format(EXACT_ACCUMULATOR).precision


def order_free(op: str, main, regions: dict, n: int) -> bool:
    """Is the tree irrelevant to the bits at n (note [exact sums])?  main, regions:
    fpspec.arith.Arithmetic of the spec's nodes (fpspec.spec.expand.expand_arith)."""
    if op != "sum":
        return False
    for a in (main, *regions.values()):
        if (a.product != "none" or a.fused is not None or a.binned is not None
                or get_format(a.accumulator).name != EXACT_ACCUMULATOR or not exact_span(a.input, n)):
            return False
    return True


def exact_result(x: np.ndarray, out_fmt: str) -> np.ndarray:
    """Rows of x (float64, exact in their format) summed exactly, rounded once to out_fmt."""
    exact = np.array([math.fsum(r) for r in x])
    neg_zero = np.all((x == 0) & np.signbit(x), axis=1)   # fsum gives +0.0 for a sum of -0.0
    exact[neg_zero] = -0.0
    return round_to(get_format(out_fmt), exact)


def exact_arithmetic(make_target, lo: int, hi: int, seed: int, why: str):
    """(Arithmetic, checked n) of a box whose sums are exact (note [exact sums]); RevealRefused
    naming what is not so.  why: the reveal's refusal, kept in every refusal's text."""
    from fpspec.arith import Arithmetic
    from fpspec.infer.check import _random_values

    first = make_target(max(lo, 2))
    if first.op != "sum":
        raise RevealRefused(f"{why}; an exact {first.op} has no model here (sums only)")
    if not exact_span(first.fmt, hi):
        raise RevealRefused(f"{why}; {first.fmt} terms do not add exactly in {EXACT_ACCUMULATOR} up to n = {hi}, "
                            "so no arithmetic is claimed")
    ns = sorted({max(lo, 2) + round(i * (hi - max(lo, 2)) / (CHECKED_N - 1)) for i in range(CHECKED_N)})
    rng = np.random.default_rng([seed, 23])
    init = "none"
    for n in ns:
        target = make_target(n)
        x = _random_values(target.fmt, (INPUTS, n), rng)
        x[0] = -0.0                       # all -0.0: init none keeps it, init +0.0 makes it +0.0
        x[1, :] = x[2, :]
        x[1, n // 2:] = -x[2, : n - n // 2]   # cancellations: the rounding of the exact sum shows
        got = target.run_sum(x)
        want = exact_result(x, target.out_fmt)
        if n == ns[0] and got[0] == 0 and not np.signbit(got[0]):
            init = "+0.0"
        if init == "+0.0":
            want[0] = 0.0
        same = (got.view(np.uint64) == want.view(np.uint64)) | (np.isnan(got) & np.isnan(want))
        if not same.all():
            k = int(np.flatnonzero(~same)[0])
            raise RevealRefused(f"{why}; and its result is not the exact sum rounded once to {target.out_fmt} "
                                f"(n = {n}: {got[k]!r}, the exact sum rounded {want[k]!r}): no arithmetic fits")
    return Arithmetic(input=first.fmt, product="none", accumulator=EXACT_ACCUMULATOR, init=init,
                      output=first.out_fmt), tuple(ns)
