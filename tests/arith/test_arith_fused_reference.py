"""The vectorized int64 fused model against a slow, independent rational reference.

The reference follows the same definition (fused.py steps 1-6) with Python
Fractions and math.floor instead of bit fields and shifts, one row at a time.
"""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from fpspec.arith import FusedParams, fused_node
from fpspec.formats import get_format, round_to


def _exp(v: Fraction, emin: int) -> int:
    e = math.floor(math.log2(abs(v)))
    while Fraction(2) ** e > abs(v):
        e -= 1
    while Fraction(2) ** (e + 1) <= abs(v):
        e += 1
    return max(e, emin)


def _round_int(q: Fraction, mode: str, negative: bool) -> int:
    """q >= 0 to an integer: truncate, floor of the signed value, or nearest even."""
    f = math.floor(q)
    if mode in ("truncate", "rz") or q == f:
        return f
    if mode == "floor":
        return f + 1 if negative else f
    rem = q - f
    return f + 1 if rem > Fraction(1, 2) or (rem == Fraction(1, 2) and f % 2) else f


def reference(a, b, c, p: FusedParams) -> float:
    fin, fout = get_format(p.input), get_format(p.output)
    terms = [(Fraction(float(x)) * Fraction(float(y)),
              _exp(Fraction(float(x)), fin.emin) + _exp(Fraction(float(y)), fin.emin))
             for x, y in zip(a, b) if x != 0 and y != 0]
    cf = Fraction(float(c))
    exps = [e for _, e in terms] + ([_exp(cf, -126)] if (cf != 0 and p.c_aligned) else [])
    if not terms and cf == 0:
        return 0.0
    F = p.fraction_bits
    total = Fraction(0)
    if exps:
        emax = max(exps)
        if p.exponent_floor is not None:
            emax = max(emax, p.exponent_floor)
        unit = Fraction(2) ** (emax - F)
        aligned = [(t, t < 0) for t, _ in terms] + ([(cf, cf < 0)] if p.c_aligned and cf != 0 else [])
        for t, neg in aligned:
            k = _round_int(abs(t) / unit, p.aligned, neg)
            total += -k * unit if neg else k * unit
    if not p.c_aligned:
        total += cf
    if total == 0:
        return 0.0
    prec = p.result_precision
    e = max(_exp(total, fout.emin), fout.emin)
    q = abs(total) / Fraction(2) ** (e - prec + 1)
    mag = _round_int(q, p.result, total < 0) * Fraction(2) ** (e - prec + 1)
    value = float(mag) if total > 0 else -float(mag)
    if p.result == "rz" and abs(total) >= Fraction(2) ** (fout.emax + 1):
        return math.copysign(math.inf, value)
    if abs(value) > fout.largest:
        return math.copysign(math.inf, value)
    return value


def _values(fmt, draw, k):
    f = get_format(fmt)
    raw = draw(st.lists(st.floats(-2.0 ** 12, 2.0 ** 12, allow_nan=False), min_size=k, max_size=k))
    scales = draw(st.lists(st.integers(-30, 10), min_size=k, max_size=k))
    vals = [float(round_to(f, v * 2.0 ** s)) for v, s in zip(raw, scales)]
    return [v if math.isfinite(v) else f.largest for v in vals]     # finite inputs: specials are tested apart


@st.composite
def cases(draw):
    fmt = draw(st.sampled_from(("fp16", "bf16", "tf32", "fp8e4m3")))
    w = draw(st.integers(1, 8))
    p = FusedParams(w, draw(st.integers(-10, 4)), draw(st.sampled_from(("truncate", "floor", "rne"))),
                    draw(st.sampled_from(("rz", "rne"))), draw(st.booleans()),
                    draw(st.one_of(st.none(), st.integers(-140, -20))), True, True, fmt, "fp32")
    a = _values(fmt, draw, w)
    b = _values(fmt, draw, w)
    c = float(np.float32(draw(st.floats(-2.0 ** 20, 2.0 ** 20, allow_nan=False)) * 2.0 ** draw(st.integers(-40, 0))))
    return a, b, c, p


@settings(max_examples=120, deadline=None)
@given(cases())
def test_vectorized_model_equals_rational_reference(case):
    a, b, c, p = case
    got = float(fused_node(np.array([a]), np.array([b]), np.array([c]), p)[0])
    want = reference(a, b, c, p)
    assert got == want and math.copysign(1, got) == math.copysign(1, want), (got, want)
