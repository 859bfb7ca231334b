"""The exact model of one fused multi-term node (a Tensor Core block FMA).

    d = c + sum_k a_k * b_k          (w products and one addend, many rows at once)

Step by step (each step is one small function below, so that a kernel writer
can port it line by line; this module imports only numpy, and the compiler
may embed its source in a generated replica):

1. `decode`: sign, exponent and integer significand from the fp32 bit pattern
   of each value (every input format is a subset of fp32), the exponent
   clamped to the input format's emin (note [subnormal exponent]).
2. `products`: exact products as integers: M = Ma * Mb (<= 48 bits), the
   product exponent ea + eb, NOT renormalised (note [unnormalised product]).
3. `align`: the block's largest exponent over the nonzero products and c
   (note [c in the alignment]), floored at the exponent floor
   (note [exponent floor]); every term is shifted to a grid of 2^(emax - F),
   F = 23 + extra_bits fraction bits below the largest exponent, dropping
   the bits below it by truncation of the magnitude (note [sign-magnitude
   truncation]).
4. `sum`: exact int64 sum of the aligned, signed terms.
5. `round_result`: one rounding of sum * 2^(emax - F) to the output format,
   toward zero or to nearest even (note [result rounding]).
6. specials: NaN / inf decided from the inputs alone (note [specials]).

Reproduces every row of the measured H100 and A100 vectors
(data/tensor-core-vectors, see tests/arith/test_vectors.py).

Note [subnormal exponent]: a subnormal input of format f has the exponent
emin(f) and a significand below 1: a = 2^-20 in fp16 is 2^-6 * 2^-14, so its
products align as if their exponent were -14 + eb.  c is decoded as fp32
(exponent clamped at -126) even when the output format is fp16.

Note [unnormalised product]: the product of two significands in [1, 2) lies
in [1, 4); the hardware aligns with the exponent ea + eb and keeps the carry
bit above it, it does not renormalise.  Which bits are dropped depends on this.

Note [c in the alignment]: c takes part in choosing the largest exponent and
is truncated like a product.  With c_aligned=False the products are aligned
among themselves and c is added to their truncated sum exactly, before the one
final rounding.

Note [exponent floor]: the largest exponent is never below `exponent_floor`
(-133 on H100 for fp32 output): tiny blocks lose their low bits to a fixed
grid.  Blocks whose products and c are all zero return +0.0 (the hardware
writes +0.0 even for c = -0.0).

Note [sign-magnitude truncation]: an aligned term keeps floor(|t| / 2^(emax-F))
with its sign, so truncation is toward zero for negative terms too (not two's
complement floor).  `aligned="floor"` (toward -inf) and `aligned="rne"` are
modelled for probing other hardware.

Note [result rounding]: the exact integer sum is rounded once, to the output
precision (at most 24 + extra_bits bits when extra_bits < 0: fp8 keeps 13
fraction bits).  "rz": toward zero; a value at or above 2^(emax_out + 1)
becomes inf (as measured).  "rne": nearest even, overflow to inf.  Subnormal
results are rounded on the subnormal grid; with subnormal_outputs=False they
flush to +0.0.

Note [zero exponent]: with zero_exponent = z, a zero operand takes part in the
alignment with exponent z (a zero c too, and a zero product with exponent
z + e_other): MMA-Sim's convention (z = -126 on NVIDIA and AMD), under which c
always bounds the largest exponent from below.  None: zeros never set it and
`exponent_floor` bounds it (the FTTN convention).  The measured H100 and A100
vectors fit both; an H200's wgmma outputs fit only FTTN's (fpspec.arith.units
note [two conventions]).  c_emin: the exponent a subnormal c is clamped to (None:
fp32's -126; MMA-Sim clamps an fp16 c at fp16's -14).

Note [block scales]: block-scaled formats (mxf8f6f4: one power-of-two scale per
32 products of a row of A and a column of B) scale each product by
scale_a * scale_b; the scale exponents add to the product exponent before the
alignment, so a product 2^-127 * 2^-6 never underflows.  The NaN scale (ue8m0
0xFF) gives NaN.  mxf4nvf4 sums groups of 16 fp4 products first
(`block_scaled_node`).

Note [amd combine]: AMD CDNA3 (MMA-Sim's fused_dot_rd_add): the products are
aligned among themselves (truncated toward zero, F fraction bits below their
largest exponent, zeros included), then the product sum and c meet at
e = max(e_products, e_c): the sum floored (toward -inf) to 31 fraction bits
below e, c floored to 24, one rounding to nearest even.  fp8 (interleave = 2):
the even and the odd products are aligned apart, the two sums floored onto
the larger one's grid, and a c more than 25 binades below e is dropped.  A
finite product at or above 2^128 makes the block inf (NaN with both signs).

Note [zero result]: a block whose result rounds to zero gives +0.0 (the
integer datapath has no sign for a zero magnitude): an all-zero block even
with c = -0.0 (measured), a tiny negative sum truncated or rounded to zero
(MMA-Sim's model).  AMD's combine rounds a nonzero exact value to nearest
and keeps its sign (a tiny negative block gives -0.0).

Note [specials]: a NaN input, inf * 0, or +inf and -inf among the products and
c give NaN; otherwise an inf product or c gives that inf.  Finite inputs never
give NaN; a finite block may overflow to inf.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

ROUNDINGS = ("rz", "rne")
ALIGNED = ("truncate", "floor", "rne")

# (precision, emin, emax) of the formats a fused node reads or writes
_FORMATS = {
    "fp32": (24, -126, 127), "tf32": (11, -126, 127), "fp16": (11, -14, 15),
    "bf16": (8, -126, 127), "fp8e4m3": (4, -6, 8), "fp8e5m2": (3, -14, 15),
    "fp8e4m3fnuz": (4, -7, 7), "fp8e5m2fnuz": (3, -15, 15),
    "fp6e2m3": (4, 0, 2), "fp6e3m2": (3, -2, 4), "fp4e2m1": (2, 0, 2),
}
COMBINES = ("aligned", "amd")
_ZERO_EXP = -(1 << 20)   # exponent given to zero terms: never the largest


@dataclass(frozen=True)
class FusedParams:
    """Everything that fixes the bits of one fused node besides its inputs.

    w: products per node; extra_bits: alignment bits kept below fp32's 23
    fraction bits (negative: fewer); aligned: rounding of aligned terms;
    result: rounding of the node's result; c_aligned: c takes part in the
    alignment; exponent_floor: lower bound of the alignment exponent (None:
    none); subnormal_inputs / subnormal_outputs: False flushes them to zero;
    input / output: formats of a (and b) and of c, d; input_b: b's format when
    it differs; zero_exponent, c_emin: note [zero exponent]; combine:
    "aligned" (one alignment, NVIDIA) or "amd" (note [amd combine]);
    interleave: sub-blocks of strided products aligned apart (amd only).
    """

    w: int
    extra_bits: int
    aligned: str = "truncate"
    result: str = "rz"
    c_aligned: bool = True
    exponent_floor: int | None = None
    subnormal_inputs: bool = True
    subnormal_outputs: bool = True
    input: str = "fp16"
    output: str = "fp32"
    input_b: str | None = None
    zero_exponent: int | None = None
    c_emin: int | None = None
    combine: str = "aligned"
    interleave: int = 1

    def __post_init__(self):
        if self.w < 1:
            raise ValueError(f"fused w must be >= 1, got {self.w}")
        if not -23 <= self.extra_bits <= 30:
            raise ValueError(f"fused extra_bits must be in -23..30, got {self.extra_bits}")
        if self.aligned not in ALIGNED:
            raise ValueError(f"fused aligned must be one of {', '.join(ALIGNED)}, got {self.aligned!r}")
        if self.result not in ROUNDINGS:
            raise ValueError(f"fused result must be one of {', '.join(ROUNDINGS)}, got {self.result!r}")
        if self.combine not in COMBINES:
            raise ValueError(f"fused combine must be one of {', '.join(COMBINES)}, got {self.combine!r}")
        if self.interleave < 1 or self.w % self.interleave:
            raise ValueError(f"fused interleave must divide w={self.w}, got {self.interleave}")
        if self.input_b == self.input:
            object.__setattr__(self, "input_b", None)   # canonical: equal formats compare equal
        for what in ("input", "output") + (("input_b",) if self.input_b is not None else ()):
            if getattr(self, what) not in _FORMATS:
                raise ValueError(f"fused {what} format must be one of {', '.join(_FORMATS)}, "
                                 f"got {getattr(self, what)!r}")

    @property
    def conventional(self) -> bool:
        """True for the FTTN form: one input format, zeros never aligned, c at fp32's
        emin, one alignment (numpy and numba replicas take any form)."""
        return (self.input_b is None and self.zero_exponent is None and self.c_emin is None
                and self.combine == "aligned" and self.interleave == 1)

    @property
    def fraction_bits(self) -> int:
        """F: bits of the alignment grid below the largest exponent."""
        return 23 + self.extra_bits

    @property
    def result_precision(self) -> int:
        """Significand bits of a node's result (fp8: 24 + extra_bits < 24)."""
        return min(_FORMATS[self.output][0], 24 + min(self.extra_bits, 0))


# ---------------------------------------------------------------- 1. decode

def decode(x, emin: int):
    """(negative, exponent, significand) of fp32-representable values.

    The significand is an integer with 23 fraction bits (value = M * 2^(e-23));
    the exponent is clamped at `emin` and the significand shifted to match
    (exact: a value of a format with that emin is a multiple of its unit).
    """
    bits = np.asarray(x, np.float64).astype(np.float32).view(np.uint32).astype(np.int64)
    negative = (bits >> 31) != 0
    field = (bits >> 23) & 0xFF
    frac = bits & 0x7FFFFF
    sig = np.where(field > 0, frac | (1 << 23), frac)
    exp = np.where(field > 0, field - 127, -126)
    under = np.minimum(np.maximum(emin - exp, 0), 63)
    sig = sig >> under
    exp = np.maximum(exp, emin)
    return negative, exp, sig


# ---------------------------------------------------------------- 2. products

def scale_exponents(scale):
    """Exponents of power-of-two scale factors (ue8m0: 2^-127..2^127), exact in float64."""
    _, e = np.frexp(np.asarray(scale, np.float64))
    return e.astype(np.int64) - 1


def products(a, b, params: FusedParams, scale_a=None, scale_b=None):
    """Exact products: (negative, exponent ea+eb, significand with 46 fraction bits).

    scale_a, scale_b: power-of-two block scale factors (broadcast against a and b):
    their exponents add to the product exponent (note [block scales]).
    """
    emin_a = _FORMATS[params.input][1]
    emin_b = _FORMATS[params.input_b or params.input][1]
    a = np.asarray(a, np.float64)
    b = np.asarray(b, np.float64)
    if not params.subnormal_inputs:
        a = np.where(np.abs(a) < 2.0 ** emin_a, 0.0, a)
        b = np.where(np.abs(b) < 2.0 ** emin_b, 0.0, b)
    na, ea, ma = decode(a, emin_a)
    nb, eb, mb = decode(b, emin_b)
    sig = ma * mb
    if params.zero_exponent is None:
        exp = np.where(sig != 0, ea + eb, _ZERO_EXP)   # zero products never set the alignment
    else:                                              # note [zero exponent]
        z = params.zero_exponent
        exp = np.where(ma == 0, z, ea) + np.where(mb == 0, z, eb)
    if scale_a is not None:
        exp = exp + scale_exponents(scale_a) + scale_exponents(scale_b)
    return na ^ nb, exp, sig


def addend(c, params: FusedParams):
    """c decoded with 23 fraction bits (exponent clamped at c_emin, default fp32's)."""
    c = np.asarray(c, np.float64)
    if not params.subnormal_outputs:
        c = np.where(np.abs(c) < 2.0 ** _FORMATS[params.output][1], 0.0, c)
    neg, exp, sig = decode(c, -126 if params.c_emin is None else params.c_emin)
    zero = _ZERO_EXP if params.zero_exponent is None else params.zero_exponent
    exp = np.where(sig != 0, exp, zero)
    return neg, exp, sig


# ---------------------------------------------------------------- 3. align

def shift_right(sig, shift, negative, mode: str):
    """Magnitude `sig` * 2^-shift on an integer grid, rounded per `mode`.

    shift < 0 shifts left (exact).  Shifts are clamped to 62 (a Triton/GPU
    shift >= 64 is undefined); significands are below 2^50, so a clamped
    shift already gives 0 with a nonzero remainder.
    """
    left = np.minimum(np.maximum(-shift, 0), 62)
    right = np.minimum(np.maximum(shift, 0), 62)
    kept = sig >> right
    if mode != "truncate":
        lost = sig - (kept << right)
        if mode == "floor":      # toward -inf: negative magnitudes round up
            kept = kept + ((lost != 0) & negative)
        else:                    # nearest even
            half = np.where(right > 0, np.left_shift(1, np.maximum(right - 1, 0)), 1 << 62)
            kept = kept + ((lost > half) | ((lost == half) & ((kept & 1) == 1)))
    return kept << left


def align(negative, exp, sig, unit_exp, emax, params: FusedParams):
    """Signed integers on the grid 2^(emax - F): term = sig * 2^(unit_exp)."""
    shift = (emax[..., None] - params.fraction_bits) - unit_exp
    mag = shift_right(sig, shift, negative, params.aligned)
    return np.where(negative, -mag, mag)


def largest_exponent(exps, params: FusedParams):
    emax = exps.max(axis=-1)
    if params.exponent_floor is not None:
        emax = np.maximum(emax, params.exponent_floor)
    return emax


# ---------------------------------------------------------------- 5. round

def round_value(v, precision: int, emin: int, emax: int, mode: str, subnormals: bool = True):
    """Round exact float64 values `v` to a format with `precision` bits, by `mode`.

    Exact: scaling by a power of two and trunc / rint are exact in float64.
    """
    v = np.asarray(v, np.float64)
    finite = np.isfinite(v) & (v != 0)
    _, e = np.frexp(np.where(finite, v, 1.0))
    e = np.maximum(e.astype(np.int64) - 1, emin)
    shift = precision - 1 - e
    scaled = np.ldexp(np.where(finite, v, 0.0), shift)
    q = np.trunc(scaled) if mode == "rz" else np.rint(scaled)
    r = np.ldexp(q, -shift)
    largest = (2.0 - 2.0 ** (1 - precision)) * 2.0 ** emax
    if mode == "rz":
        over = np.abs(v) >= 2.0 ** (emax + 1)      # note [result rounding]
    else:
        over = np.abs(r) > largest
    r = np.where(over, np.copysign(np.inf, v), r)
    if not subnormals:
        r = np.where(np.abs(r) < 2.0 ** emin, 0.0, r)
    return np.where(finite, r, v)


# ---------------------------------------------------------------- 6. specials

def specials(p_float, c):
    """(is_special, value) per row from the float64 products and c (note [specials])."""
    vals = np.concatenate([p_float, np.asarray(c, np.float64)[..., None]], axis=-1)
    nan = np.isnan(vals).any(axis=-1)
    pos = (vals == np.inf).any(axis=-1)
    neg = (vals == -np.inf).any(axis=-1)
    nan = nan | (pos & neg)
    value = np.where(nan, np.nan, np.where(pos, np.inf, -np.inf))
    return nan | pos | neg, value


# ---------------------------------------------------------------- the node

def fused_node(a, b, c, params: FusedParams, scale_a=None, scale_b=None) -> np.ndarray:
    """One fused node per row: a, b shape (rows, k) with k <= w, c shape (rows,).

    scale_a, scale_b: block scale factors (powers of two) per row, or None.
    Returns float64 values of `params.output` (fp32 or fp16 results).
    """
    a = np.atleast_2d(np.asarray(a, np.float64))
    b = np.atleast_2d(np.asarray(b, np.float64))
    c = np.broadcast_to(np.asarray(c, np.float64), a.shape[:-1])
    if a.shape[-1] > params.w:
        raise ValueError(f"a fused node takes at most w={params.w} products, got {a.shape[-1]}")
    scaled = scale_a is not None
    if scaled:
        scale_a = np.broadcast_to(np.asarray(scale_a, np.float64), a.shape[:-1])[..., None]
        scale_b = np.broadcast_to(np.asarray(scale_b, np.float64), a.shape[:-1])[..., None]
    with np.errstate(invalid="ignore", over="ignore"):
        p_float = a * b * (scale_a * scale_b if scaled else 1.0)
        special, special_value = specials(p_float, c)
        if params.combine == "amd":   # note [amd combine]: an overflowing product is inf
            big = np.abs(p_float) >= 2.0 ** 128
            pos = (big & (p_float > 0)).any(axis=-1)
            neg = (big & (p_float < 0)).any(axis=-1)
            over = ~special & (pos | neg)
            special_value = np.where(over, np.where(pos & neg, np.nan, np.where(pos, np.inf, -np.inf)),
                                     special_value)
            special = special | over
    a = np.where(special[..., None], 0.0, a)
    b = np.where(special[..., None], 0.0, b)
    c = np.where(special, 0.0, c)
    if scaled:
        scale_a = np.where(special[..., None], 1.0, scale_a)
        scale_b = np.where(special[..., None], 1.0, scale_b)

    pneg, pexp, psig = products(a, b, params, scale_a, scale_b)
    cneg, cexp, csig = addend(c, params)
    if params.combine == "amd":
        exact = _amd_combine(pneg, pexp, psig, cneg, cexp, csig, params)
    else:
        exact = _aligned_combine(pneg, pexp, psig, cneg, cexp, csig, c, params)
    precision, emin_out, emax_out = _FORMATS[params.output]
    d = round_value(exact, params.result_precision, emin_out, emax_out, params.result,
                    params.subnormal_outputs)
    if params.combine == "aligned":
        d = np.where(d == 0, 0.0, d)   # note [zero result]
    return np.where(special, special_value, d)


def _aligned_combine(pneg, pexp, psig, cneg, cexp, csig, c, params: FusedParams):
    """The exact value of an aligned block: products (and c) truncated at one exponent, summed."""
    F = params.fraction_bits
    if params.c_aligned:
        emax = largest_exponent(np.concatenate([pexp, cexp[..., None]], axis=-1), params)
    else:
        emax = largest_exponent(pexp, params)
    total = align(pneg, pexp, psig, pexp - 46, emax, params).sum(axis=-1)
    if params.c_aligned:
        total = total + align(cneg[..., None], cexp[..., None], csig[..., None],
                              cexp[..., None] - 23, emax, params)[..., 0]
        return np.ldexp(total.astype(np.float64), emax - F)   # |total| < 2^53: exact
    prod_sum = np.ldexp(total.astype(np.float64), emax - F)
    return _sum_round_to_odd(prod_sum, c)


def _amd_combine(pneg, pexp, psig, cneg, cexp, csig, params: FusedParams):
    """The exact value of an AMD CDNA block (note [amd combine])."""
    F = params.fraction_bits
    parts = []
    for j in range(params.interleave):     # sub-blocks of products j, j+i, j+2i, ...
        e_j = largest_exponent(pexp[..., j::params.interleave], params)
        s_j = align(pneg[..., j::params.interleave], pexp[..., j::params.interleave],
                    psig[..., j::params.interleave], pexp[..., j::params.interleave] - 46, e_j, params)
        parts.append((e_j, s_j.sum(axis=-1)))
    e_p = parts[0][0]
    for e_j, _ in parts[1:]:
        e_p = np.maximum(e_p, e_j)
    total = 0
    for e_j, s_j in parts:                 # floor (toward -inf) onto the common grid
        total = total + _shift_floor(s_j, e_p - e_j)
    e = np.maximum(e_p, cexp)
    s31 = _shift_floor(total, (e - 31) - (e_p - F))
    c_signed = np.where(cneg, -csig, csig)
    c24 = _shift_floor(c_signed, (e - 24) - (cexp - 23))
    if params.interleave > 1:              # the fp8 path drops a c more than 25 binades down
        c24 = np.where(cexp >= e - 25, c24, 0)
    return np.ldexp((s31 + (c24 << 7)).astype(np.float64), e - 31)


def _shift_floor(v, shift):
    """Signed integers v * 2^-shift rounded toward -inf (shift < 0: exact left shift)."""
    right = np.minimum(np.maximum(shift, 0), 62)
    left = np.minimum(np.maximum(-shift, 0), 62)
    return (v >> right) << left


def _sum_round_to_odd(x, y):
    """x + y in float64 rounded to odd: a later rounding to <= 51 bits is exact."""
    s = x + y
    bb = s - x
    err = (x - (s - bb)) + (y - bb)
    bits = s.view(np.int64)
    odd_fix = (err != 0) & ((bits & 1) == 0)
    return np.where(odd_fix, np.nextafter(s, np.where(err > 0, np.inf, -np.inf)), s)


def fused_sum(a, b, c, params, out_format: str | None = None) -> np.ndarray:
    """d = c + sum_k a_k * b_k for many rows, one fused node or a chain of them.

    a, b: shape (rows, K) (or (K,)): exact input values (fp16, bf16, tf32,
    fp8 values held in float32/float64); c: shape (rows,) (or a scalar), a
    value of the output format.  `params`: a FusedParams or a name from
    PARAMS ("h100-fp16", "a100-tf32", ...).  out_format: the format of c and
    d ("fp32" or "fp16"); a named set is looked up for it.

    K <= w: one fused node.  K > w: a chain (see `fused_chain`).
    """
    params = resolve_params(params, out_format)
    a = np.asarray(a, np.float64)
    if a.shape[-1] <= params.w:
        return fused_node(a, b, c, params)
    return fused_chain(a, b, c, params)


def fused_chain(a, b, c, params) -> np.ndarray:
    """Blocks of w products in order; each block's result is the next block's c.

    The last block takes the K mod w leftovers (zero products change
    nothing: they never set the alignment).
    """
    params = resolve_params(params, None)
    a = np.atleast_2d(np.asarray(a, np.float64))
    b = np.atleast_2d(np.asarray(b, np.float64))
    d = np.broadcast_to(np.asarray(c, np.float64), a.shape[:-1])
    for start in range(0, a.shape[-1], params.w):
        stop = start + params.w
        d = fused_node(a[..., start:stop], b[..., start:stop], d, params)
    return d


def resolve_params(params, out_format: str | None) -> FusedParams:
    """A FusedParams, or the named set for `out_format` (default: the set's own)."""
    if isinstance(params, FusedParams):
        if out_format is not None and out_format != params.output:
            raise ValueError(f"params write {params.output}, not {out_format}")
        return params
    from fpspec.arith.params import get_params   # names live outside this numpy-only module

    return get_params(params, out_format)
