"""Floating-point formats: their parameters and exact rounding from float64.

Every value fpspec handles is carried in float64 (or as raw bits); a format says
how a float64 result is rounded into it.  float64 holds every fp32/fp16/bf16/fp8
value exactly, and holds the exact sum or product of two fp32 values before
rounding whenever that sum fits 53 bits (see note [double rounding]).

Note [double rounding]: rounding an exact float64 sum of two p-bit values to p
bits is correct when 53 >= 2p + 2 (fp32 and narrower); for fp64 the add itself
is done natively.  fma needs round-to-odd first (see `fma`).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Format:
    name: str
    precision: int          # significand bits, hidden bit included
    emin: int               # exponent of the smallest normal
    emax: int               # exponent of the largest finite
    bits: int               # storage width
    has_inf: bool = True
    max_finite: float = 0.0  # 0 means the IEEE default (2 - 2^(1-p)) * 2^emax

    @property
    def largest(self) -> float:
        if self.max_finite:
            return self.max_finite
        return float((2.0 - 2.0 ** (1 - self.precision)) * 2.0 ** self.emax)

    @property
    def smallest_subnormal(self) -> float:
        return float(2.0 ** (self.emin - self.precision + 1))

    @property
    def eps(self) -> float:
        return float(2.0 ** (1 - self.precision))

    def round(self, x):
        """Round float64 values to this format, nearest-even (vectorized)."""
        return round_to(self, x)


FORMATS: dict[str, Format] = {
    f.name: f
    for f in (
        Format("fp64", 53, -1022, 1023, 64),
        Format("fp32", 24, -126, 127, 32),
        Format("tf32", 11, -126, 127, 32),
        Format("fp16", 11, -14, 15, 16),
        Format("bf16", 8, -126, 127, 16),
        Format("fp8e4m3", 4, -6, 8, 8, has_inf=False, max_finite=448.0),
        Format("fp8e5m2", 3, -14, 15, 8),
    )
}

# Formats that only matrix units read (fpspec.arith.units): get_format knows them; the
# input generators and the revelation engine work on FORMATS
ELEMENT_FORMATS: dict[str, Format] = {
    f.name: f
    for f in (
        # AMD CDNA3's fp8 (torch's *fnuz): no inf, no -0.0, one more exponent below
        Format("fp8e4m3fnuz", 4, -7, 7, 8, has_inf=False, max_finite=240.0),
        Format("fp8e5m2fnuz", 3, -15, 15, 8, has_inf=False, max_finite=57344.0),
        # OCP microscaling element formats (no inf, no nan)
        Format("fp6e2m3", 4, 0, 2, 6, has_inf=False, max_finite=7.5),
        Format("fp6e3m2", 3, -2, 4, 6, has_inf=False, max_finite=28.0),
        Format("fp4e2m1", 2, 0, 2, 4, has_inf=False, max_finite=6.0),
        # block scale factors: powers of two only (ue8m0)
        Format("ue8m0", 1, -127, 127, 8, has_inf=False, max_finite=2.0 ** 127),
    )
}

ALIASES = {
    "float64": "fp64", "double": "fp64", "f64": "fp64",
    "float32": "fp32", "float": "fp32", "f32": "fp32", "single": "fp32",
    "float16": "fp16", "half": "fp16", "f16": "fp16",
    "bfloat16": "bf16",
    "float8_e4m3fn": "fp8e4m3", "e4m3": "fp8e4m3",
    "float8_e5m2": "fp8e5m2", "e5m2": "fp8e5m2",
    "xf32": "tf32",   # AMD's name: fp32 inputs truncated to tf32
    "float8_e4m3fnuz": "fp8e4m3fnuz", "float8_e5m2fnuz": "fp8e5m2fnuz",
    "e2m3": "fp6e2m3", "e3m2": "fp6e3m2", "e2m1": "fp4e2m1", "float8_e8m0fnu": "ue8m0",
}


def get_format(name: str) -> Format:
    key = ALIASES.get(str(name).lower(), str(name).lower())
    try:
        return FORMATS[key] if key in FORMATS else ELEMENT_FORMATS[key]
    except KeyError:
        known = ", ".join(FORMATS)
        raise ValueError(f"unknown format {name!r}; expected one of {known}") from None


def round_to(fmt: Format, x):
    """Round float64 `x` to `fmt` with round-to-nearest-even, subnormals and overflow.

    Exact: the scaling by powers of two and np.rint are exact in float64.
    """
    x = np.asarray(x, dtype=np.float64)
    if fmt.precision == 53:
        return x.copy()
    with np.errstate(invalid="ignore", over="ignore"):
        finite = np.isfinite(x) & (x != 0)
        _, e = np.frexp(np.where(finite, x, 1.0))
        e = np.maximum(e.astype(np.int64) - 1, fmt.emin)   # unbiased exponent, floored at emin
        shift = (fmt.precision - 1 - e).astype(np.float64)
        scaled = np.ldexp(np.where(finite, x, 0.0), shift.astype(np.int64))
        r = np.ldexp(np.rint(scaled), (-shift).astype(np.int64))
        big = np.abs(r) > fmt.largest
        over = np.copysign(np.inf if fmt.has_inf else np.nan, x)
        r = np.where(big, over, r)
        return np.where(finite, r, x)


def two_sum(a, b):
    s = a + b
    bb = s - a
    err = (a - (s - bb)) + (b - bb)
    return s, err


def add(fmt: Format, a, b):
    """One IEEE addition in `fmt` (nearest-even) on float64-held values."""
    return round_to(fmt, np.add(a, b, dtype=np.float64))


def round_to_odd_sum(a, b):
    """a + b in float64 with round-to-odd, so a later rounding to <= 51 bits is exact."""
    s, err = two_sum(np.asarray(a, np.float64), np.asarray(b, np.float64))
    bits = s.view(np.int64) if isinstance(s, np.ndarray) else np.array(s).view(np.int64)
    inexact = (err != 0) & np.isfinite(s)
    even = (bits & 1) == 0
    # move one ulp toward the discarded error when the result is even
    toward = np.where(err > 0, np.inf, -np.inf)
    adjusted = np.where(inexact & even, np.nextafter(s, toward), s)
    return adjusted


def fma(fmt: Format, x, y, c):
    """round_fmt(x*y + c) with one rounding, for x, y, c held exactly in float64.

    x*y must be exact in float64 (true for formats of <= 26 bits); for fp64
    the product is split exactly with Dekker's algorithm.
    """
    x = np.asarray(x, np.float64)
    y = np.asarray(y, np.float64)
    c = np.asarray(c, np.float64)
    if fmt.precision <= 26:
        return round_to(fmt, round_to_odd_sum(x * y, c))
    x, y, c = np.broadcast_arrays(x, y, c)
    out, safe = _fma64(x, y, c)
    if safe.all():
        return out
    out = np.array(out)
    out[~safe] = _fma64_exact(x[~safe], y[~safe], c[~safe])
    return out


# Note [fp64 fma]: Boldo and Melquiond (IEEE TC 57(4), 2008): with
# x*y = uh + ul exactly (Dekker) and c + uh = th + tl exactly (2Sum),
# RN(th + RO(tl + ul)) is RN(x*y + c), RO rounding to odd.  Exact unless
# a product's error term underflows or something overflows: those elements
# (and only those) go to the rational fallback.


def _fma64(x, y, c):
    """(fma values, mask of the elements they are exact for): note [fp64 fma]."""
    with np.errstate(all="ignore"):
        p = x * y
        th, tl = two_sum(c, p)
        fast = th + round_to_odd_sum(tl, _two_prod_err(x, y, p))
        # a zero or non-finite factor: the product is exact (or nan/inf) and one IEEE add rounds
        simple = (x == 0) | (y == 0) | ~(np.isfinite(x) & np.isfinite(y))
        c_special = ~np.isfinite(c)      # finite exact product + inf/nan: c
        out = np.where(simple, p + c, np.where(c_special, c, fast))
        ap = np.abs(p)
        safe = simple | c_special | ((ap >= 2.0 ** -960) & (ap <= 2.0 ** 1000) & (np.abs(c) <= 2.0 ** 1000)
                                     & (np.abs(x) < 2.0 ** 995) & (np.abs(y) < 2.0 ** 995))
    return out, safe


def _fma64_exact(x, y, c):
    """fp64 fma elementwise through rationals (the elements note [fp64 fma] does not cover)."""
    # the exact value as a rational, rounded once (float(Fraction) rounds
    # to nearest even); IEEE special cases first
    from fractions import Fraction

    flat = np.broadcast_arrays(x, y, c)
    out = np.empty(flat[0].shape)
    for idx in np.ndindex(out.shape):
        xv, yv, cv = (float(v[idx]) for v in flat)
        if not (np.isfinite(xv) and np.isfinite(yv)):
            out[idx] = xv * yv + cv          # inf/nan products: plain IEEE rules
        elif not np.isfinite(cv):
            out[idx] = cv                    # finite exact product + inf/nan c
        else:
            exact = Fraction(xv) * Fraction(yv) + Fraction(cv)
            if exact == 0:
                # an exact zero is +0 under RNE unless both addends are -0
                negative_product = (np.signbit(xv) != np.signbit(yv))
                both_negative_zero = negative_product and xv * yv == 0 and cv == 0 and np.signbit(cv)
                out[idx] = -0.0 if both_negative_zero else 0.0
            else:
                try:
                    out[idx] = float(exact)
                except OverflowError:
                    out[idx] = np.inf if exact > 0 else -np.inf
    return out


def _two_prod_err(a, b, p):
    split = 134217729.0
    def halves(v):
        t = split * v
        hi = t - (t - v)
        return hi, v - hi
    ah, al = halves(a)
    bh, bl = halves(b)
    return ((ah * bh - p) + ah * bl + al * bh) + al * bl


def to_bits(fmt: Format, x) -> np.ndarray:
    """Bit patterns (as uint64) of float64-held values of `fmt` (fp64/fp32/fp16 only)."""
    x = np.asarray(x, np.float64)
    if fmt.name == "fp64":
        return x.view(np.uint64)
    if fmt.name in ("fp32", "tf32"):
        return x.astype(np.float32).view(np.uint32).astype(np.uint64)
    if fmt.name == "fp16":
        return x.astype(np.float16).view(np.uint16).astype(np.uint64)
    if fmt.name == "bf16":
        return (x.astype(np.float32).view(np.uint32) >> 16).astype(np.uint64)
    raise ValueError(f"no bit view for {fmt.name}")
