"""Mask value M and unit u for a target, derived from its formats.

A query puts +M at leaf i, -M at leaf j and the unit u on a set of other leaves
(zero elsewhere).  The output is u times the number of units not swamped by
the masks, so three facts must hold in the formats involved:

1. swamping: M + s == M in the accumulator for every partial sum s of units,
   i.e. W*u stays below half an ulp of M in the widest plausible accumulator
   (we keep 4 bits of margin for Tensor Core alignment, which keeps a few
   extra bits before truncating);
2. exact counts: c*u is exact in the output format for every count c <= W,
   i.e. W < 2^p_out and u >= the output's smallest subnormal;
3. representable operands: M and u exist in the input format (for products:
   M = a*b and u = a'*b' with a, b, a', b' in the input format, which is the
   "split" of seed 000 section 8.1 that widens the range for fp16/fp8; a target that
   reads B in another format, torch._scaled_mm e5m2 x e4m3, has b and b' in B's: an
   e5m2 mask 2^15 is nan as e4m3).

4. no overflow where masks meet: rows that pack several queries (oracle.py,
   Note [packing]) hold several +M; a partial sum of 2^h of them must stay
   finite in the input format (the narrowest accumulator a library may use),
   so M keeps up to MASK_HEADROOM_BITS bits of headroom below the format's
   largest power of two where that costs no window (fp32 and bf16; fp16 and
   fp8 have no range to spare, and a packed row that overflows anyway is
   asked again one query per row).

W ("window") is the most units one query may carry.  When n - 2 > W the
modified algorithm counts in windows of at most W units (seed 000 section
8.1.2, generalized: zeros outside the window).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from fpspec.errors import RevealRefused
from fpspec.formats import Format, get_format

SWAMP_MARGIN_BITS = 4
MASK_HEADROOM_BITS = 7      # 128 masks of one sign may meet in a partial sum without overflow


@dataclass(frozen=True)
class MaskPlan:
    fmt: str            # input format
    acc: str            # widest accumulator assumed
    out: str            # output format
    M: float            # the mask as a term (a product for dot/gemv/gemm)
    u: float            # the unit as a term
    a_mask: float       # operand values: first operand at a mask position ...
    b_mask: float       # ... second operand at a mask position (1 unless split)
    a_unit: float
    b_unit: float
    split: bool
    window: int         # most units one query may carry with an exact count
    stack: int = 1      # masks of one sign that may meet in one partial sum without overflow

    def __str__(self) -> str:
        how = f"split {self.a_mask:g}*{self.b_mask:g}" if self.split else "unsplit"
        return (f"M = 2^{int(math.log2(self.M))}, u = 2^{int(math.log2(self.u))} ({how}), "
                f"window {self.window} units, accumulator assumed {self.acc}")


def _pow2_floor(x: float) -> float:
    return 2.0 ** math.floor(math.log2(x))


def _largest_pow2(f: Format) -> int:
    return math.frexp(f.largest)[1] - 1   # log2 rounds up to 1024 for fp64


def _smallest_pow2(f: Format) -> int:
    return math.frexp(f.smallest_subnormal)[1] - 1


def _plan(fin: Format, acc: Format, out: Format, need: int, split: bool,
          within: Format | None = None, headroom: int = 0, count_bits: int = 0,
          out_shift: int = 0, fin_b: Format | None = None) -> tuple[float, float, float, float, int] | None:
    """(a_mask, b_mask, a_unit, b_unit, window) or None when no unit works; within: a
    narrower format some part of the target adds in (note [masks within a narrower part]);
    the mask `headroom` bits below the largest it could be, counts below 2^count_bits when given;
    fin_b: B's format where it is not fin (split masks and units hold in both)."""
    fin_b = fin_b or fin
    count_limit = min(2 ** out.precision, 2 ** acc.precision, 2 ** (count_bits or out.precision)) - 1
    if within is not None:
        count_limit = min(count_limit, 2 ** within.precision - 1)
    if split:
        # the product of the two masks must be finite where the kernel forms it: in fp32 at least
        # (fp32 products of fp32 inputs; exact fp16/bf16 products on Tensor Cores), else fp64
        prod = fin if fin.precision > 24 else get_format("fp32")
        e = min(_largest_pow2(fin), _largest_pow2(fin_b), _largest_pow2(prod) // 2,
                _largest_pow2(acc) // 2) - (headroom + 1) // 2
        a_mask = b_mask = 2.0 ** e
        u_lo_exp = max(_smallest_pow2(fin) + _smallest_pow2(fin_b), _smallest_pow2(out) + out_shift,
                       _smallest_pow2(acc))
    else:
        e = min(_largest_pow2(fin), _largest_pow2(acc)) - headroom
        a_mask, b_mask = 2.0 ** e, 1.0
        u_lo_exp = max(_smallest_pow2(fin), _smallest_pow2(out) + out_shift, _smallest_pow2(acc))
    if within is not None:
        # a mask and its units stay finite and exact in the narrower part (one bit of headroom)
        top = _largest_pow2(within) - 1
        if split:
            a_mask = b_mask = 2.0 ** min(math.log2(a_mask), top // 2)
        else:
            a_mask = 2.0 ** min(math.log2(a_mask), top)
        u_lo_exp = max(u_lo_exp, _smallest_pow2(within))
    M = a_mask * b_mask
    want = max(2, min(count_limit, need))
    # largest u (at most 1, kept away from subnormals when possible) swamped at `want` units
    u = min(1.0, _pow2_floor(M / (want * 2.0 ** (acc.precision + SWAMP_MARGIN_BITS))))
    u = max(u, 2.0 ** u_lo_exp)
    window = min(count_limit, int(M / (u * 2.0 ** (acc.precision + SWAMP_MARGIN_BITS))))
    if window < 1:
        return None
    ue = int(round(math.log2(u)))
    if split:
        ea = ue // 2
        a_unit, b_unit = 2.0 ** ea, 2.0 ** (ue - ea)
        if ue - ea < _smallest_pow2(fin_b):   # B's half of the unit in B's format, A's in A's
            ea = ue - _smallest_pow2(fin_b)
        if ea < _smallest_pow2(fin) or ue - ea < _smallest_pow2(fin_b):
            return None
    else:
        a_unit, b_unit = u, 1.0
    return a_mask, b_mask, a_unit, b_unit, window


# Note [masks within a narrower part]: the widest accumulator assumed for the
# input format sets how large M is (fp64 inputs: M = 2^1023).  A target that
# adds some parts in a narrower format (an fp32 region in an fp64 sum) turns
# such a mask into inf there, and its outputs into inf or nan: no count at
# all.  fpspec.reveal.engine then asks again with masks that the narrower
# format holds (`within`): M at most half its largest power of two, units
# at least its smallest subnormal, counts below 2^precision; swamping is
# still planned for the widest accumulator, so it holds in every part.
NARROWER_PARTS = ("fp32", "fp16")


def plan_masks(target, *, split: bool | None = None, within: str | None = None) -> MaskPlan:
    """Derive M, u and the window for `target` (see the module note); refuse when no choice works.
    within: a narrower format the masks must fit (note [masks within a narrower part])."""
    fin, acc, out = target.format, target.accumulator, target.output_format
    narrow = get_format(within) if within is not None else None
    need = target.n - 2
    product = target.op != "sum"
    options = []
    if split is not True:
        options.append(False)
    if product and split is not False:
        options.append(True)
    best = None
    bits = getattr(target, "count_bits", 0)
    shift = getattr(target, "out_shift", 0)   # a mean: the output is the sum / 2^shift
    fin_b = get_format(target.fmt_b) if getattr(target, "fmt_b", "") else None
    for s in options:
        got = _plan(fin, acc, out, need, s, narrow, count_bits=bits, out_shift=shift, fin_b=fin_b)
        if got is not None and (best is None or got[4] > best[1][4]):
            best = (s, got, 0)
        if got is not None and got[4] >= need:
            break  # prefer unsplit: it batches one query per row
    if best is None or best[1][4] < 1:
        raise RevealRefused(
            f"{fin.name} has too little range for masks that swamp a {acc.name} accumulator "
            f"(no M, u with M + n*u == M); n = {target.n} is too large for the format")
    s, got, h = best
    for room in range(MASK_HEADROOM_BITS if not s else 0, 0, -1):   # most headroom keeping the window
        roomy = _plan(fin, acc, out, need, s, narrow, room, bits, shift, fin_b)
        if roomy is not None and roomy[4] >= got[4] and roomy[2:4] == got[2:4]:   # same window and unit
            got, h = roomy, room
            break
    a_mask, b_mask, a_unit, b_unit, window = got
    return MaskPlan(fin.name, acc.name, out.name, a_mask * b_mask, a_unit * b_unit,
                    a_mask, b_mask, a_unit, b_unit, s, window, 2 ** h)
