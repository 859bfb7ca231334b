"""Random and adversarial inputs for comparing two implementations bit for bit.

Every generator is deterministic: sample `index` of a run with seed `seed`
comes from its own generator `default_rng([seed, index])`, so a failing sample
can be rebuilt alone from the three numbers a report prints (seed, index, kind).

Values are produced as float64 arrays holding values of the input format
exactly, then handed out in the format's NumPy dtype where NumPy has one
(fp64, fp32, fp16; tf32 travels as float32).  bf16 and fp8 have no NumPy
dtype: they stay float64-held and the target adapter casts them.

Shapes follow the op kinds of fpspec.reveal:
    sum   x (n,)
    dot   x (n,), y (n,)
    gemv  A (m, n), x (n,)        output (m,)
    gemm  A (m, n), B (n, ncols)  output (m, ncols)

The families (KINDS) aim at what separates two accumulation orders or two
arithmetics:
    uniform_bits   every bit pattern equally likely (nan and inf included)
    finite_bits    every finite bit pattern equally likely
    wide_exponent  full significands, exponents spread over a random span
    cancellation   pairs v, -v(1 +- few ulps) plus small terms: the exact sum
                   is tiny, so every rounding shows
    signed_zeros   +0.0 / -0.0 mixtures, all -0.0, exact cancellation to zero
    subnormals     terms at and below the smallest normal
    specials       +-inf, nan, and finite terms whose partial sums overflow
                   in some orders and not in others

For product ops the right operand is either a power of two (the products are
then exactly the designed terms) or a full-significand value (so a product
rounded before the add differs from one fused into an FMA); the sample index
alternates between the two.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

import numpy as np

from fpspec.formats import Format, get_format

KINDS: tuple[str, ...] = (
    "uniform_bits",
    "finite_bits",
    "wide_exponent",
    "cancellation",
    "signed_zeros",
    "subnormals",
    "specials",
)

OPS: tuple[str, ...] = ("sum", "dot", "gemv", "gemm")

_NATIVE = {"fp64": np.float64, "fp32": np.float32, "tf32": np.float32, "fp16": np.float16}


@dataclass(frozen=True)
class Sample:
    """One input to an op: `args` are the call's positional arrays."""

    kind: str
    seed: int
    index: int
    args: tuple

    def describe(self) -> str:
        return f"sample {self.index} (kind {self.kind}, seed {self.seed})"


# ---------------------------------------------------------------- shapes

def arg_shapes(op: str, n: int, m: int | None = None, ncols: int | None = None) -> tuple[tuple[int, ...], ...]:
    """The shapes of the positional arguments of `op` with reduction length n."""
    m = 1 if m is None else int(m)
    ncols = 1 if ncols is None else int(ncols)
    if op == "sum":
        return ((n,),)
    if op == "dot":
        return ((n,), (n,))
    if op == "gemv":
        return ((m, n), (n,))
    if op == "gemm":
        return ((m, n), (n, ncols))
    raise ValueError(f"unknown op kind {op!r}; expected one of {', '.join(OPS)}")


def output_shape(op: str, m: int | None = None, ncols: int | None = None) -> tuple[int, ...]:
    m = 1 if m is None else int(m)
    ncols = 1 if ncols is None else int(ncols)
    return {"sum": (), "dot": (), "gemv": (m,), "gemm": (m, ncols)}[op]


# ---------------------------------------------------------------- bits and values

def _fields(fmt: Format) -> tuple[int, int, int]:
    """(exponent field width, significand field width, bias) of an IEEE-style layout."""
    mant = fmt.precision - 1
    if fmt.name == "tf32":
        return 8, mant, 127
    ew = fmt.bits - fmt.precision
    return ew, mant, (1 << (ew - 1)) - 1


def from_bits(fmt: Format, bits) -> np.ndarray:
    """Decode raw bit patterns of `fmt` (any width up to 64) to float64 values."""
    fmt = get_format(fmt) if isinstance(fmt, str) else fmt
    bits = np.asarray(bits, dtype=np.uint64)
    if fmt.name == "fp64":
        return bits.view(np.float64).copy()
    ew, mw, bias = _fields(fmt)
    sign = np.where((bits >> np.uint64(ew + mw)) & np.uint64(1), -1.0, 1.0)
    e = ((bits >> np.uint64(mw)) & np.uint64((1 << ew) - 1)).astype(np.int64)
    mant = (bits & np.uint64((1 << mw) - 1)).astype(np.float64)
    normal = np.ldexp(1.0 + mant / 2.0 ** mw, e - bias)
    sub = np.ldexp(mant / 2.0 ** mw, 1 - bias)
    val = np.where(e == 0, sub, normal)
    top = e == (1 << ew) - 1
    if fmt.has_inf:
        val = np.where(top, np.where(mant == 0, np.inf, np.nan), val)
    else:  # e4m3: only the all-ones pattern is nan; the rest of the top binade is finite
        val = np.where(top & (mant == 2.0 ** mw - 1), np.nan, val)
    return sign * val


def native(values, fmt) -> np.ndarray:
    """Float64-held values of `fmt` in NumPy's dtype for it, or float64 when it has none."""
    fmt = get_format(fmt) if isinstance(fmt, str) else fmt
    return np.asarray(values, dtype=_NATIVE.get(fmt.name, np.float64))


def hex_bits(values, fmt) -> list[str]:
    """Bit patterns as hex strings of the format's width, for messages."""
    fmt = get_format(fmt) if isinstance(fmt, str) else fmt
    values = np.atleast_1d(np.asarray(values, dtype=np.float64))
    width = 16 if fmt.name == "fp64" else (8 if fmt.bits == 32 else fmt.bits // 4)
    if fmt.name in ("fp64", "fp32", "tf32", "fp16", "bf16"):
        from fpspec.formats import to_bits

        with np.errstate(over="ignore", invalid="ignore"):
            return [f"0x{int(b):0{width}x}" for b in to_bits(fmt, values)]
    return [float(v).hex() for v in values]


def _finite_full(fmt: Format, rng, shape, lo: int, hi: int) -> np.ndarray:
    """Random signs, exponents uniform in [lo, hi], full random significands."""
    p = fmt.precision
    e = rng.integers(lo, hi + 1, size=shape)
    mant = rng.integers(0, 1 << (p - 1), size=shape, dtype=np.int64) if p > 1 else np.zeros(shape, np.int64)
    if p == 53:  # 2^52 + mant is exact in float64; only the ldexp scale varies
        sig = (2.0 ** 52 + mant.astype(np.float64))
    else:
        sig = (1 << (p - 1)) + mant.astype(np.float64)
    v = np.ldexp(sig, e - (p - 1))
    v = np.minimum(v, fmt.largest)  # e4m3 tops out below its binade
    return np.where(rng.random(shape) < 0.5, -v, v)


def _uniform_bits(fmt: Format, rng, shape) -> np.ndarray:
    width = 32 if fmt.name == "tf32" else fmt.bits
    if width == 64:
        raw = rng.integers(0, np.iinfo(np.int64).max, size=shape, dtype=np.int64, endpoint=True).view(np.uint64)
        raw = raw ^ (rng.integers(0, 2, size=shape, dtype=np.uint64) << np.uint64(63))
    else:
        raw = rng.integers(0, 1 << width, size=shape, dtype=np.uint64)
    if fmt.name == "tf32":
        raw = raw & np.uint64(0xFFFFE000)
        return from_bits(get_format("fp32"), raw)
    return from_bits(fmt, raw)


def _log2n(n: int) -> int:
    return max(1, int(np.ceil(np.log2(max(n, 2)))))


# ---------------------------------------------------------------- term patterns (the left operand)

def _terms(kind: str, fmt: Format, rng, rows: int, n: int, scale_room: int, pairs: np.ndarray) -> np.ndarray:
    """(rows, n) values of `fmt` for one family; `scale_room` exponent steps are kept
    free at the top (and bottom) for the right operand of a product."""
    shape = (rows, n)
    p, emin, emax = fmt.precision, fmt.emin, fmt.emax
    top = emax - _log2n(n) - 1 - scale_room          # partial sums stay finite
    bottom = emin + scale_room
    top = max(top, bottom)                           # narrow formats at large n
    if kind == "uniform_bits":
        return _uniform_bits(fmt, rng, shape)
    if kind == "finite_bits":
        v = _uniform_bits(fmt, rng, shape)
        bad = ~np.isfinite(v)
        while bad.any():
            v[bad] = _uniform_bits(fmt, rng, (int(bad.sum()),))
            bad = ~np.isfinite(v)
        return v
    if kind == "wide_exponent":
        span = int(rng.choice([2, 8, 24, max(2, top - bottom)]))
        span = min(span, top - bottom)
        lo = int(rng.integers(bottom, top - span + 1))
        return _finite_full(fmt, rng, shape, lo, lo + span)
    if kind == "cancellation":
        # pairs (a, b): t_b = -t_a * (1 + k ulp), the rest small; big terms carry the
        # accumulated error of every rounding into the visible result
        big_e = min(top, max(bottom, p + 2))
        v = _finite_full(fmt, rng, shape, big_e - 2, big_e)
        small_lo = max(bottom, big_e - p - 4)
        small = _finite_full(fmt, rng, shape, small_lo, max(small_lo, big_e - p // 2 - 1))
        a, b = pairs[:, 0], pairs[:, 1]
        bump = rng.integers(-3, 4, size=(rows, len(a))) * 2.0 ** (1 - p)
        out = small.copy()
        out[:, a] = v[:, a]
        out[:, b] = fmt.round(-v[:, a] * (1.0 + bump))
        return out
    if kind == "signed_zeros":
        mode = int(rng.integers(0, 3))
        if mode == 0:        # all -0.0: the result's sign shows the initial value
            return np.full(shape, -0.0)
        zeros = np.where(rng.random(shape) < 0.5, -0.0, 0.0)
        if mode == 1:        # zeros with a few opposite pairs that cancel exactly to +0
            v = _finite_full(fmt, rng, shape, 0, 2)
            out = zeros.copy()
            k = max(1, len(pairs) // 4)
            out[:, pairs[:k, 0]] = v[:, pairs[:k, 0]]
            out[:, pairs[:k, 1]] = -v[:, pairs[:k, 0]]
            return out
        few = rng.random(shape) < 0.1  # mostly zeros, a few tiny values
        return np.where(few, _finite_full(fmt, rng, shape, bottom, bottom + 2), zeros)
    if kind == "subnormals":
        sub_max = 1 << (p - 1)
        mant = rng.integers(1, sub_max, size=shape).astype(np.float64) if p > 1 else np.ones(shape)
        sub = np.ldexp(mant, emin - (p - 1) + scale_room)
        near = _finite_full(fmt, rng, shape, emin + scale_room, emin + scale_room + 1)
        v = np.where(rng.random(shape) < 0.6, sub, np.abs(near))
        return np.where(rng.random(shape) < 0.5, -v, v)
    if kind == "specials":
        mode = int(rng.integers(0, 3))
        if mode == 0:        # partial sums that overflow in some orders only
            v = _finite_full(fmt, rng, shape, emax - 1 - scale_room, emax - scale_room)
            return np.abs(v) * np.where(rng.random(shape) < 0.35, -1.0, 1.0)
        out = _finite_full(fmt, rng, shape, 0, 6)
        choices = np.array([np.inf, -np.inf, np.nan] if fmt.has_inf else [np.nan])
        for r in range(rows):
            k = int(rng.integers(1, 4))
            at = rng.choice(n, size=min(k, n), replace=False)
            out[r, at] = rng.choice(choices, size=len(at))
        return out
    raise ValueError(f"unknown input kind {kind!r}; expected one of {', '.join(KINDS)}")


def _pairs(rng, n: int) -> np.ndarray:
    """Disjoint random index pairs over the reduction axis (shape (n // 2, 2))."""
    perm = rng.permutation(n)
    k = n // 2
    return perm[: 2 * k].reshape(k, 2)


def _right(kind: str, fmt: Format, rng, n: int, cols: int, pairs: np.ndarray, exact: bool) -> np.ndarray:
    """(n, cols) right operand of a product op.

    exact: powers of two, so the products are the designed terms with no rounding.
    Otherwise full significands, equal on paired indices so cancellations survive.
    """
    shape = (n, cols)
    if kind == "uniform_bits":
        return _uniform_bits(fmt, rng, shape)
    if kind == "finite_bits":
        return np.where(np.isfinite(v := _uniform_bits(fmt, rng, shape)), v, 1.0)
    if exact:
        e = rng.integers(-2, 3, size=shape)
        v = np.where(rng.random(shape) < 0.5, -1.0, 1.0) * np.ldexp(1.0, e)
    else:
        v = np.abs(_finite_full(fmt, rng, shape, 0, 0))   # [1, 2): the product needs ~2p bits
    if len(pairs):   # paired terms meet the same factor, so their cancellation survives
        v[pairs[:, 1]] = v[pairs[:, 0]]
    if kind == "specials" and not exact and rng.random() < 0.3:
        # a format without inf (e4m3) has only nan to offer
        v[rng.integers(0, n), rng.integers(0, cols)] = np.inf if fmt.has_inf else np.nan
    return v


# ---------------------------------------------------------------- public entry points

def generate(op: str, n: int, fmt, *, seed: int = 0, index: int = 0, kind: str | None = None,
             m: int | None = None, ncols: int | None = None) -> Sample:
    """Sample `index` of the run `seed`: arrays shaped for `op` in the native dtype.

    `kind` defaults to KINDS[index % len(KINDS)], so consecutive indices cover
    every family.
    """
    fmt = get_format(fmt) if isinstance(fmt, str) else fmt
    if n < 1:
        raise ValueError(f"n must be at least 1, got {n}")
    kind = KINDS[index % len(KINDS)] if kind is None else kind
    if kind not in KINDS:
        raise ValueError(f"unknown input kind {kind!r}; expected one of {', '.join(KINDS)}")
    shapes = arg_shapes(op, n, m, ncols)
    rng = np.random.default_rng([int(seed), int(index)])
    pairs = _pairs(rng, n)
    if op == "sum":
        x = _terms(kind, fmt, rng, 1, n, 0, pairs)[0]
        return Sample(kind, seed, index, (native(x, fmt),))
    rows = shapes[0][0] if op in ("gemv", "gemm") else 1
    cols = shapes[1][1] if op == "gemm" else 1
    exact = (index // len(KINDS)) % 2 == 0
    left = _terms(kind, fmt, rng, rows, n, 3, pairs)
    right = _right(kind, fmt, rng, n, cols, pairs, exact)
    if op == "dot":
        args = (left[0], right[:, 0])
    elif op == "gemv":
        args = (left, right[:, 0])
    else:
        args = (left, right)
    return Sample(kind, seed, index, tuple(native(a, fmt) for a in args))


def samples(op: str, n: int, fmt, count: int, *, seed: int = 0, kinds: tuple[str, ...] | None = None,
            m: int | None = None, ncols: int | None = None) -> Iterator[Sample]:
    """`count` samples cycling through `kinds` (all families by default)."""
    kinds = KINDS if kinds is None else tuple(kinds)
    for k in kinds:
        if k not in KINDS:
            raise ValueError(f"unknown input kind {k!r}; expected one of {', '.join(KINDS)}")
    for index in range(count):
        yield generate(op, n, fmt, seed=seed, index=index, kind=kinds[index % len(kinds)], m=m, ncols=ncols)
