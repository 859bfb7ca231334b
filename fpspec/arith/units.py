"""Matrix units: the arithmetic of one matrix instruction, for every GPU family.

    d = c + sum_k a_k * b_k       (one output element of an MMA instruction)

A `MatrixUnit` says how one instruction forms one element of its result:
- "fused": k products go through ceil(k / w) fused nodes in a chain (each
  node's result is the next node's c): NVIDIA Tensor Cores from Volta to
  Blackwell, AMD CDNA3 matrix cores (combine = amd), block-scaled mxf8f6f4
  (one scale factor per row of A and column of B);
- "block_scaled": mxf4nvf4 (Blackwell): groups of 16 fp4 products summed
  exactly, each group scaled by its block's two scale factors, the groups and
  c aligned in one fused node (`block_scaled_node`);
- "fma": a chain of IEEE fused multiply-adds from c (fp64 everywhere, fp32 on
  AMD CDNA);
- "pairwise": AMD CDNA1/2 fp16/bf16: groups of `group` products summed
  pairwise in fp32 (each product and each sum one fp32 rounding), each group
  sum added to the accumulator in fp32; CDNA2 flushes subnormal inputs and
  every subnormal partial sum to zero.

`unit_dot(unit, a, b, c)` evaluates it for many rows at once (numpy only).
Names are GPU-INPUT[-to-OUTPUT] as in fpspec.arith.params ("h100-fp16",
"mi300x-xf32", "b200-fp4e2m1-mxf4nvf4-ue4m3-16"); `UNITS` holds them all,
`ARCHS` the GPUs of each architecture.

The structure follows MMA-Sim (microsoft/MMA-Sim, arXiv 2511.10909):
accumulator fraction bits 23 (Volta), 24 (Turing, Ampere, Ada), 25 (Hopper,
Blackwell), 13 (fp8 on Ada and Hopper, whose fp32 results keep 13 fraction
bits too), 35 (mxf4nvf4); Ampere and Ada split k in halves for m16n8k16
fp16/bf16, m16n8k8 tf32 and m16n8k32 fp8.  Below the alignment the named sets
follow the measurements (note [two conventions]); `mmasim_conventions(unit)`
is MMA-Sim's form, checked bit for bit by benchmarks/validate_mmasim.py.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from fpspec.arith.fused import _FORMATS, FusedParams, align, decode, fused_node, round_value

KINDS = ("fused", "block_scaled", "fma", "pairwise")

# architecture -> the GPUs users know it by
ARCHS = {
    "volta": ("v100",),
    "turing": ("t4",),
    "ampere": ("a100", "a2", "a30"),
    "ada": ("ada", "l40s"),
    "hopper": ("h100", "h200", "gh200"),
    "blackwell": ("b200",),
    "rtx-blackwell": ("rtx-pro-6000",),
    "cdna1": ("mi100",),
    "cdna2": ("mi210", "mi250"),
    "cdna3": ("mi300a", "mi300x"),
}
ZERO_EXPONENT = -126


@dataclass(frozen=True)
class MatrixUnit:
    """How one instruction forms one element: `kind` (KINDS) and its parameters.

    node: the fused node (fused, block_scaled); accumulator: the fma / pairwise
    format; group: products per pairwise group; flush: CDNA2's flush of
    subnormals; block: products per scale factor (block-scaled kinds);
    truncate_inputs: fp32 inputs cut to tf32 (tf32 / xf32 instructions read
    the top 19 bits of an fp32 register); pairs, c_last: note [fp8 mma with
    fp16 output].
    """

    kind: str
    input: str
    output: str
    node: FusedParams | None = None
    accumulator: str | None = None
    group: int = 0
    flush: bool = False
    block: int = 0
    scale: str | None = None
    input_b: str | None = None
    truncate_inputs: bool = False
    pairs: bool = False     # each 32 products taken as k = 0, 1, 4, 5, ..., 29, then 2, 3, 6, 7, ..., 31
    c_last: bool = False    # the chain starts from +0.0; c joins its result in one rounding to the output

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"matrix unit kind must be one of {', '.join(KINDS)}, got {self.kind!r}")
        if self.kind in ("fused", "block_scaled") and self.node is None:
            raise ValueError(f"a {self.kind} matrix unit needs its fused node")


def unit_dot(unit: MatrixUnit, a, b, c, scale_a=None, scale_b=None) -> np.ndarray:
    """d = c + sum_k a_k b_k per row under `unit`: a, b (rows, k); c (rows,).

    scale_a, scale_b: (rows,) for mxf8f6f4, (rows, k / block) for mxf4nvf4.
    Returns float64 values of the unit's output format.
    """
    a = np.atleast_2d(np.asarray(a, np.float64))
    b = np.atleast_2d(np.asarray(b, np.float64))
    c = np.broadcast_to(np.asarray(c, np.float64), a.shape[:-1]).copy()
    if unit.truncate_inputs:
        a, b = truncate_to_tf32(a), truncate_to_tf32(b)
    if unit.kind == "fused":
        if unit.pairs:   # note [fp8 mma with fp16 output]
            k = a.shape[-1]
            order = [j for start in range(0, k, 32) for half in (0, 1)
                     for j in range(start, min(start + 32, k)) if j // 2 % 2 == half]
            a, b = a[..., order], b[..., order]
        d = np.zeros_like(c) if unit.c_last else c
        for start in range(0, a.shape[-1], unit.node.w):
            stop = start + unit.node.w
            d = fused_node(a[..., start:stop], b[..., start:stop], d, unit.node, scale_a, scale_b)
        if unit.c_last:
            precision, emin, emax = _FORMATS[unit.output]
            d = round_value(d + c, precision, emin, emax, "rne")   # d and c of the output format: exact sum
        return d
    if unit.kind == "block_scaled":
        return block_scaled_node(a, b, c, scale_a, scale_b, unit.node, unit.block, unit.scale)
    if unit.kind == "fma":
        return _fma_chain(a, b, c, unit.accumulator)
    return _pairwise(a, b, c, unit.group, unit.flush, unit.input)


def truncate_to_tf32(x):
    """fp32 values with the low 13 fraction bits cleared (toward zero)."""
    bits = np.asarray(x, np.float64).astype(np.float32).view(np.uint32)
    return (bits & np.uint32(0xFFFFE000)).view(np.float32).astype(np.float64)


# ---------------------------------------------------------------- block scaled (mxf4nvf4)

def _scale_parts(scale, fmt: str):
    """(significand as a multiple of 2^-3, exponent) of scale factors, subnormals at fmt's emin.

    ue8m0 scales are powers of two (2^-127..2^127); ue4m3 scales are fp8e4m3
    magnitudes (the sign bit is ignored).
    """
    s = np.abs(np.asarray(scale, np.float64))
    s = np.where(np.isfinite(s), s, 0.0)        # a NaN scale: the block is NaN (block_scaled_node)
    emin = -127 if fmt == "ue8m0" else -6
    _, e = np.frexp(np.where(s > 0, s, 1.0))
    e = np.maximum(e.astype(np.int64) - 1, emin)
    sig8 = np.rint(np.ldexp(s, 3 - e)).astype(np.int64)   # exact: <= 4 significant bits
    return sig8, np.where(s > 0, e, ZERO_EXPONENT)   # a zero scale aligns like a zero operand


def block_scaled_node(a, b, c, scale_a, scale_b, params: FusedParams, block: int, scale: str):
    """mxf4nvf4: groups of 16 products, each scaled by its block's scales, aligned with c.

    A group's exponent is the sum of its two scale exponents whatever its
    products (a group of zeros takes part in the alignment too).  NaN if a
    scale or c is NaN.
    """
    rows, k = a.shape
    sa = np.asarray(scale_a, np.float64).reshape(rows, -1)
    sb = np.asarray(scale_b, np.float64).reshape(rows, -1)
    groups = k // 16
    owner = (np.arange(groups) * 16) // block          # the block each group of 16 lies in
    sig_a, e_a = _scale_parts(sa[:, owner], scale)
    sig_b, e_b = _scale_parts(sb[:, owner], scale)
    # fp4 products are multiples of 2^-2; a group sum of 16 is exact in float64
    g = np.rint((a * b).reshape(rows, groups, 16).sum(axis=-1) * 4).astype(np.int64)
    gsig = g * sig_a * sig_b                           # value = gsig * 2^(e - 8)
    gexp = e_a + e_b
    cneg, cexp, csig = decode(c, -126)
    cexp = np.where(csig != 0, cexp, ZERO_EXPONENT)
    emax = np.maximum(gexp.max(axis=-1), cexp)
    F = params.fraction_bits
    total = align(gsig < 0, gexp, np.abs(gsig), gexp - 8, emax, params).sum(axis=-1)
    total = total + align(cneg[:, None], cexp[:, None], csig[:, None], cexp[:, None] - 23, emax, params)[:, 0]
    exact = np.ldexp(total.astype(np.float64), emax - F)
    _, emin_out, emax_out = _FORMATS[params.output]
    d = round_value(exact, params.result_precision, emin_out, emax_out, params.result)
    d = np.where(d == 0, 0.0, d)       # fpspec.arith.fused note [zero result]
    nan = np.isnan(sa).any(axis=-1) | np.isnan(sb).any(axis=-1) | np.isnan(c)
    return np.where(nan, np.nan, np.where(np.isinf(c), c, d))


# ---------------------------------------------------------------- fma and pairwise

def _fma_chain(a, b, c, accumulator: str):
    """d = fma(a_k, b_k, d) for k = 0, 1, ... from d = c (fp32 or fp64)."""
    from fpspec.formats import fma, get_format

    fmt = get_format(accumulator)
    d = c
    for k in range(a.shape[-1]):
        x, y = a[:, k], b[:, k]
        with np.errstate(invalid="ignore", over="ignore"):
            finite_xy = np.isfinite(x) & np.isfinite(y)
            plain = ~(finite_xy & np.isfinite(d))
            # inf / nan: no rounding to do; a finite product (even one beyond the
            # format's range) leaves an infinite d as it is
            ieee = np.where(finite_xy, d, x * y + d)
        d = np.where(plain, ieee, fma(fmt, np.where(plain, 0.0, x), np.where(plain, 0.0, y),
                                      np.where(plain, 0.0, d)))
    return d


def _flush(x, keep_sign: bool):
    tiny = np.abs(x) < np.float32(2.0 ** -126)
    return np.where(tiny, x * np.float32(0.0) if keep_sign else np.float32(0.0), x)


def _pairwise(a, b, c, group: int, flush: bool, input: str):
    """AMD CDNA1/2 fp16/bf16: pairwise fp32 sums of `group` products, added to c in fp32."""
    if flush:   # subnormal inputs (of their own format) and an fp32-subnormal c become +0.0
        tiny = 2.0 ** _FORMATS[input][1]
        a = np.where(np.abs(a) < tiny, 0.0, a)
        b = np.where(np.abs(b) < tiny, 0.0, b)
        c = np.where(np.abs(c) < 2.0 ** -126, 0.0, c)
    a32, b32 = a.astype(np.float32), b.astype(np.float32)
    d = c.astype(np.float32)
    with np.errstate(invalid="ignore", over="ignore", under="ignore"):
        for start in range(0, a.shape[-1], group):
            d = d + _pairwise_sum(a32[:, start:start + group], b32[:, start:start + group], flush)
            if flush:
                d = _flush(d, keep_sign=True)
    return d.astype(np.float64)


def _pairwise_sum(a, b, flush: bool):
    n = a.shape[-1]
    if n == 1:
        exact = a[:, 0].astype(np.float64) * b[:, 0].astype(np.float64)
        # fma(a, b, +0.0): an exact zero product gives +0.0, a product that
        # underflows keeps its sign (-0.0)
        s = np.where(exact == 0, np.float32(0.0), exact.astype(np.float32))
    else:
        m = n // 2
        s = _pairwise_sum(a[:, :m], b[:, :m], flush) + _pairwise_sum(a[:, m:], b[:, m:], flush)
    return _flush(s, keep_sign=True) if flush else s


# ---------------------------------------------------------------- the named units

# Note [two conventions]: below the alignment, MMA-Sim and the FTTN models differ in
# two places: MMA-Sim lets a zero operand align with exponent -126 (so c, even 0,
# bounds the largest exponent from below) and clamps an fp16 c at -14; FTTN's
# models never align zeros and floor the largest exponent (-133 Hopper and
# Blackwell, -132 Ampere and Ada; -21 / -20 / -19 for fp16 output), decoding c
# as fp32.  Both reproduce every measured H100 and A100 vector.  On an H200,
# 524 288 wgmma bf16 blocks drawn to tell them apart (examples/gpu/mma_blocks.py,
# examples/gpu/README.md) agree with the FTTN conventions everywhere and with
# MMA-Sim's on all but 3449: the named sets of the architectures FTTN measured
# use FTTN's conventions; Turing, RTX Blackwell and AMD use MMA-Sim's (nothing
# else is known), and `mmasim_conventions` gives MMA-Sim's form of any unit.
FTTN_FLOORS = {"volta": (None, -19), "ampere": (-132, -20), "ada": (-132, -20), "hopper": (-133, -21),
               "blackwell": (-133, -21)}


# Note [fp8 mma with fp16 output]: the H100's mma.sync m16n8k32 with e4m3 or
# e5m2 inputs and an fp16 accumulator (the measured vectors, cuda/
# mma_fp8_output_fp16.cu) runs as two fp16-accumulating k16 steps: the first
# over k = 0, 1, 4, 5, 8, 9, ..., 28, 29, the second over the other 16 (the
# fp8 registers of a thread, k = 4t..4t+3 and 16+4t..16+4t+3, converted to
# fp16 pairs), each step one node of the H100 fp16-to-fp16 kind (16 products,
# 25 fraction bits, nearest even to fp16) whose c is the previous step's
# result, starting from +0.0; c itself is added last, in one fp16 rounding to
# nearest even.  Every one of the 5000 E4M3 and 5000 E5M2 rows, bit for bit
# (tests/arith/test_arith_vectors.py); one node of 32 (MMA-Sim's Hopper model)
# misses 1880 and 1644 of them (benchmarks/fit_fp8_fp16_vectors.py).


def nvidia_node(arch: str, w: int, input: str, output: str, input_b: str | None = None,
                fraction_bits: int | None = None) -> FusedParams:
    """The fused node of an NVIDIA architecture (note [two conventions])."""
    if fraction_bits is None:
        fraction_bits = {"volta": 23, "turing": 24, "ampere": 24, "ada": 24}.get(arch, 25)
        if input.startswith("fp8") and arch in ("ada", "hopper"):
            fraction_bits = 13
    node = FusedParams(w, fraction_bits - 23, "truncate", "rne" if output == "fp16" else "rz", True, None,
                       input=input, output=output, input_b=input_b)
    if arch in FTTN_FLOORS:
        return replace(node, exponent_floor=FTTN_FLOORS[arch][output == "fp16"])
    return mmasim_node(node)


def mmasim_node(node: FusedParams) -> FusedParams:
    """`node` under MMA-Sim's conventions (note [two conventions])."""
    if node.combine == "amd":
        return node
    return replace(node, exponent_floor=None, zero_exponent=ZERO_EXPONENT,
                   c_emin=-14 if node.output == "fp16" else None)


def mmasim_conventions(unit: MatrixUnit) -> MatrixUnit:
    """`unit` with its fused node under MMA-Sim's conventions (the form validate_mmasim.py checks)."""
    return unit if unit.node is None else replace(unit, node=mmasim_node(unit.node))


def amd_node(w: int, input: str, input_b: str | None = None, interleave: int = 1) -> FusedParams:
    return FusedParams(w, 1, "truncate", "rne", True, None, input=input, output="fp32", input_b=input_b,
                       zero_exponent=ZERO_EXPONENT, combine="amd", interleave=interleave)


def _fused(arch, w, input, output="fp32", input_b=None, **kw):
    node = nvidia_node(arch, w, input, output, input_b, kw.pop("fraction_bits", None))
    return MatrixUnit("fused", input, output, node, input_b=input_b, truncate_inputs=input == "tf32", **kw)


_FP8 = ("fp8e4m3", "fp8e5m2")


def _nvidia_units(arch: str) -> dict[str, MatrixUnit]:
    """(input[-to-output] suffix) -> unit, for one NVIDIA architecture."""
    units: dict[str, MatrixUnit] = {}
    w16 = {"volta": 4, "turing": 8, "ampere": 8, "ada": 8}.get(arch, 16)   # fp16 / bf16 node width
    units["fp16"] = _fused(arch, w16, "fp16")
    units["fp16-to-fp16"] = _fused(arch, w16, "fp16", "fp16")
    if arch == "volta":
        return units
    units["fp64"] = MatrixUnit("fma", "fp64", "fp64", accumulator="fp64")
    if arch != "turing":
        units["bf16"] = _fused(arch, w16, "bf16")
        units["tf32"] = _fused(arch, w16 // 2, "tf32")
    if arch in ("ada", "hopper", "blackwell", "rtx-blackwell"):
        w8 = {"ada": 16}.get(arch, 32)
        for fa in _FP8:
            for fb in _FP8:
                name = fa if fa == fb else f"{fa}x{fb}"
                units[name] = _fused(arch, w8, fa, input_b=None if fa == fb else fb)
                units[f"{name}-to-fp16"] = _fused(arch, w8, fa, "fp16", input_b=None if fa == fb else fb)
    if arch == "hopper":   # note [fp8 mma with fp16 output]: mma.sync m16n8k32, fp16 accumulator
        for fa in _FP8:
            units[f"{fa}-mma-to-fp16"] = _fused(arch, 16, fa, "fp16", fraction_bits=25, pairs=True, c_last=True)
    if arch in ("blackwell", "rtx-blackwell"):
        for fa in _FP8 + ("fp6e2m3", "fp6e3m2", "fp4e2m1"):
            for fb in _FP8 + ("fp6e2m3", "fp6e3m2", "fp4e2m1"):
                name = fa if fa == fb else f"{fa}x{fb}"
                if name not in units:
                    units[name] = _fused(arch, 32, fa, input_b=None if fa == fb else fb)
                    units[f"{name}-to-fp16"] = _fused(arch, 32, fa, "fp16", input_b=None if fa == fb else fb)
                # mxf8f6f4: one ue8m0 scale per 32 products of a row / a column
                units[f"{name}-mxf8f6f4"] = _fused(arch, 32, fa, input_b=None if fa == fb else fb,
                                                   block=32, scale="ue8m0")
        for block, scale in ((32, "ue8m0"), (16, "ue8m0"), (16, "ue4m3"), (32, "ue4m3")):
            node = nvidia_node(arch, 64, "fp4e2m1", "fp32", fraction_bits=35)
            units[f"fp4e2m1-mxf4nvf4-{scale}-{block}"] = MatrixUnit(
                "block_scaled", "fp4e2m1", "fp32", node, block=block, scale=scale)
    return units


def _amd_units(arch: str) -> dict[str, MatrixUnit]:
    units = {"fp32": MatrixUnit("fma", "fp32", "fp32", accumulator="fp32")}
    if arch != "cdna1":
        units["fp64"] = MatrixUnit("fma", "fp64", "fp64", accumulator="fp64")
    if arch in ("cdna1", "cdna2"):
        flush = arch == "cdna2"
        units["fp16"] = MatrixUnit("pairwise", "fp16", "fp32", accumulator="fp32", group=4, flush=flush)
        units["bf16"] = MatrixUnit("pairwise", "bf16", "fp32", accumulator="fp32", group=2, flush=flush)
        if arch == "cdna2":   # the _1k bf16 instructions: groups of 4
            units["bf16-1k"] = MatrixUnit("pairwise", "bf16", "fp32", accumulator="fp32", group=4, flush=True)
        return units
    units["xf32"] = MatrixUnit("fused", "tf32", "fp32", amd_node(4, "tf32"), truncate_inputs=True)
    units["fp16"] = MatrixUnit("fused", "fp16", "fp32", amd_node(8, "fp16"))
    units["bf16"] = MatrixUnit("fused", "bf16", "fp32", amd_node(8, "bf16"))
    fnuz = ("fp8e4m3fnuz", "fp8e5m2fnuz")
    for fa in fnuz:
        for fb in fnuz:
            name = fa if fa == fb else f"{fa}x{fb}"
            units[name] = MatrixUnit("fused", fa, "fp32", amd_node(16, fa, None if fa == fb else fb, 2),
                                     input_b=None if fa == fb else fb)
    return units


def _build() -> dict[str, MatrixUnit]:
    out: dict[str, MatrixUnit] = {}
    for arch, gpus in ARCHS.items():
        units = _amd_units(arch) if arch.startswith("cdna") else _nvidia_units(arch)
        for gpu in gpus:
            for suffix, unit in units.items():
                out[f"{gpu}-{suffix}"] = unit
    return out


UNITS: dict[str, MatrixUnit] = _build()


def get_unit(name: str) -> MatrixUnit:
    try:
        return UNITS[str(name).lower()]
    except KeyError:
        gpus = ", ".join(g for gs in ARCHS.values() for g in gs)
        raise ValueError(f"unknown matrix unit {name!r}: expected GPU-INPUT[-to-OUTPUT], GPU one of "
                         f"{gpus} ({len(UNITS)} names in fpspec.arith.units.UNITS)") from None


__all__ = ["ARCHS", "MatrixUnit", "UNITS", "block_scaled_node", "get_unit", "mmasim_conventions", "unit_dot"]
