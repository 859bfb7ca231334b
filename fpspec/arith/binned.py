"""The binned ("indexed") accumulator of ReproBLAS: a sum that does not depend on the order.

Seed 002 (Ahrens, Nguyen, Demmel, "ReproBLAS: Much Summation! So Reproducible!")
with its errata (float i_max = 20; the bound reads n * 2^(W(1-K)) * max|x|).
The exponent range is cut into bins of W bits (W = 40 for fp64, 13 for
fp32).  A K-fold accumulator of index I keeps K bins, I .. I+K-1, the K
highest below the largest |x| deposited; every x adds to bin I+j its slice
d(x, I+j) (x rounded to the bin's grid, ties away from zero, minus the
higher slices): an exact addition, so the K bin totals, and the final
conversion to a float that reads them in a fixed order, are the same bits
for every order, blocking, thread count and machine.

Public API (what a user merging partial sums across processes needs):

    acc = Binned.empty("fp64", fold=3)   # or binned_sum(x), binned_dot(x, y)
    acc = acc.deposit(x)                  # a value or an array (any order, any split)
    acc = acc + other                     # merge two partial results (exact)
    acc.to_float()                        # the sum: ReproBLAS's bits
    acc.to_array() / Binned.from_array(a, "fp64", 3)   # ReproBLAS's double_binned layout

`error_bound(n, max_abs, "fp64", 3)` is the paper's bound (5.25), corrected.

Note [exact slices]: Algorithm 5.4 adds (r|1) (the last significand bit set,
so that no addition ties) to the primary field P of a bin; P stays in
[1.25, 2) * 2^(a+p) between renormalizations, so the amount added is r
rounded to a multiple of ulp(P) = 2^(a+1), ties away from zero, whatever P
holds.  The model therefore deposits into a fresh P = 1.5 * 2^(a+p) (the
`bins` table of ReproBLAS), reads the slice off as an integer count of
ulps, and keeps each bin's total as a Python int: `values[j]`.  ReproBLAS's
fields are that total written as carry * 2^(p-3) + (P - bins) / ulp with P
renormalized into [1.5, 1.75) * 2^(a+p) (`to_array`).

Note [index 0]: the top bin's primary field 1.5 * 2^(a_0 + p) would overflow;
ReproBLAS stores it scaled by 2^-(p-W+1) (x * COMPRESSION), so its ulp is a
count of 2^(p-W+1) larger units.  Nothing ever shifts into slot 0, so slot 0
of index 0 is the only scaled one; the conversion scales it back.

Note [duplicated bins]: slots past the last bin (I + j > i_max) reuse the
last bin's primary value, as ReproBLAS's table does; deposits of tiny values
then spill their remainders into them.  Reproduced as is (same table).

Note [exceptions]: an inf or nan deposited makes the result the IEEE sum of
the exceptional values (nan if a nan or both infinities came, else that
infinity), whatever else came.  The NaN returned is the canonical quiet NaN
(sign +, payload 0) on every backend.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np


class BinnedFormat:
    """The binning constants of ReproBLAS for one format ("fp64" or "fp32"), from its IEEE parameters."""

    def __init__(self, name):
        self.name = name
        if name == "fp64":
            self.dtype, self.itype, self.p, self.emax, self.emin, self.width = np.float64, np.int64, 53, 1023, -1022, 40
        elif name == "fp32":
            self.dtype, self.itype, self.p, self.emax, self.emin, self.width = np.float32, np.int32, 24, 127, -126, 13
        else:
            raise ValueError(f"binned: format {name}; expected fp64 or fp32")
        p, w = self.p, self.width
        # C's DBL_MAX_EXP is emax + 1 (frexp's convention); (3.1) with the errata
        self.max_index = (self.emax - self.emin + p - 1) // w - 1
        self.max_fold = self.max_index + 1
        self.endurance = 1 << (p - w - 2)
        self.compression = 2.0 ** -(p - w + 1)
        self.expansion = 2.0 ** (p - w + 1)
        self.quarter_bits = p - 3          # 0.25 * ufp(P) = 2^(p-3) ulps of P: one carry unit
        bins = [1.5 * 2.0 ** self.emax]
        for i in range(1, self.max_index + 1):
            bins.append(1.5 * 2.0 ** (self.emax + 1 + p - w - i * w))
        bins += [bins[-1]] * (self.max_fold - 1)
        self.bins = np.array(bins, dtype=self.dtype)
        # ulp of every slot's primary (slot 0 of index 0 in its scaled units)
        self.ulps = np.array([math.ldexp(1.0, math.frexp(float(b))[1] - p) for b in bins], dtype=np.float64)

    def index(self, amax):
        """The index J of the bin holding |x| = amax (Algorithm 5.2, ReproBLAS's xindex): from the exponent;
        0 for inf / nan, i_max for 0, clamped to i_max for subnormals."""
        amax = float(amax)
        if not math.isfinite(amax):
            return 0
        if amax == 0.0:
            return self.max_index
        e = math.frexp(amax)[1]
        return min((self.emax + 1 - e) // self.width, self.max_index)


_FORMATS = {}


def binned_format(name) -> BinnedFormat:
    if name not in _FORMATS:
        _FORMATS[name] = BinnedFormat(name)
    return _FORMATS[name]


# ---------------------------------------------------------------- deposit (numpy, embedded in replicas)

def _or1(r, fmt):
    """(r|1): r with the last significand bit set (note [exact slices])."""
    return (r.view(fmt.itype) | fmt.itype(1)).view(fmt.dtype)


def slice_counts(x, index, fold, fmt):
    """Per value of the finite array `x` (the input format's dtype, any shape): the slices it adds to
    slots 0..fold-1 of an accumulator of `index`, as float64 counts of each slot's ulp (exact integers,
    |count| <= 2^(W-1)); a list of `fold` arrays."""
    dt = fmt.dtype
    bins = fmt.bins[index:index + fold]
    ulps = fmt.ulps[index:index + fold]
    r = np.asarray(x, dtype=dt)
    out = []
    start = 0
    if index == 0:
        # note [index 0]: Algorithm 5.4 lines 3-9, as ReproBLAS writes them
        m = bins[0]
        s = _or1(r * dt(fmt.compression), fmt) + m
        out.append((s - m).astype(np.float64) / ulps[0])
        q = (m - s) * dt(fmt.expansion * 0.5)
        r = (r + q) + q
        start = 1
    for j in range(start, fold):
        m = bins[j]
        s = _or1(r, fmt) + m
        out.append((s - m).astype(np.float64) / ulps[j])
        r = r + (m - s)
    return out


def total_counts(x, index, fold, fmt, axis=None):
    """Exact sums of `slice_counts` over `axis` (None: all): a list of Python ints (axis None) or of
    int64 arrays; sums are taken in int64 over chunks short enough never to overflow."""
    counts = slice_counts(x, index, fold, fmt)
    if axis is None:
        chunk = 1 << 20
        return [sum(int(c[i:i + chunk].astype(np.int64).sum()) for i in range(0, c.size, chunk)) if c.size else 0
                for c in (c.ravel() for c in counts)]
    return [c.astype(np.int64).sum(axis=axis) for c in counts]


def special_sum(x):
    """The IEEE sum of the non-finite values of `x` (note [exceptions]); None when all are finite."""
    x = np.asarray(x)
    bad = ~np.isfinite(x)
    if not bad.any():
        return None
    v = x[bad]
    if np.isnan(v).any() or ((v > 0).any() and (v < 0).any()):
        return math.nan
    return float(v[0])


def fields_of(index, values, fmt):
    """ReproBLAS's fields (primary, carry) as float64 lists from exact slot totals (note [exact slices]):
    carry = floor(total / 2^(p-3)), primary = bins + (total mod 2^(p-3)) * ulp."""
    fold = len(values)
    q = fmt.quarter_bits
    pri, car = [], []
    for j in range(fold):
        v = int(values[j])
        pri.append(float(fmt.bins[index + j]) + (v & ((1 << q) - 1)) * float(fmt.ulps[index + j]))
        car.append(float(v >> q))
    return pri, car


def convert(index, pri, car, bins, p, width, expansion, single):
    """ReproBLAS's binned -> float conversion (binned_ddmconv / binned_ssmconv), operation for
    operation: fields in order of decreasing exponent (carry 0, then carry j and primary j-1, ...) in
    double; fp64 with the top bins scaled down by 2^-(2p-W) so that nothing overflows early.  `pri`,
    `car`: the fold fields as float64 (of the format's values); `bins` the format's table; `single`:
    fp32 (the result is then rounded to fp32 by the caller).  Plain scalar arithmetic, so that the
    numba replicas compile this very function."""
    fold = len(pri)
    y = 0.0
    if single:
        if index == 0:
            y += car[0] * (bins[index] / 6.0) * expansion
            y += car[1] * (bins[index + 1] / 6.0)
            y += (pri[0] - bins[index]) * expansion
            i = 2
        else:
            y += car[0] * (bins[index] / 6.0)
            i = 1
        while i < fold:
            y += car[i] * (bins[index + i] / 6.0)
            y += pri[i - 1] - bins[index + i - 1]
            i += 1
        y += pri[fold - 1] - bins[index + fold - 1]
        return y
    limit = (3 * p) // width
    if index <= limit:
        down = 2.0 ** (-(2 * p - width))
        up = 2.0 ** (2 * p - width)
        scaled = max(min(fold, limit - index), 0)
        if index == 0:
            y += car[0] * ((bins[index] / 6.0) * down * expansion)
            y += car[1] * ((bins[index + 1] / 6.0) * down)
            y += (pri[0] - bins[index]) * down * expansion
            i = 2
        else:
            y += car[0] * ((bins[index] / 6.0) * down)
            i = 1
        while i < scaled:
            y += car[i] * ((bins[index + i] / 6.0) * down)
            y += (pri[i - 1] - bins[index + i - 1]) * down
            i += 1
        if i == fold:
            y += (pri[fold - 1] - bins[index + fold - 1]) * down
            return y * up
        if math.isinf(y * up):
            return y * up
        y *= up
        while i < fold:
            y += car[i] * (bins[index + i] / 6.0)
            y += pri[i - 1] - bins[index + i - 1]
            i += 1
        y += pri[fold - 1] - bins[index + fold - 1]
        return y
    y += car[0] * (bins[index] / 6.0)
    for i in range(1, fold):
        y += car[i] * (bins[index + i] / 6.0)
        y += pri[i - 1] - bins[index + i - 1]
    y += pri[fold - 1] - bins[index + fold - 1]
    return y


def convert_fields(index, pri, car, fmt):
    """`convert` with the format's constants, rounded to the format: a numpy scalar."""
    single = fmt.name == "fp32"
    bins = [float(b) for b in fmt.bins]
    with np.errstate(over="ignore"):
        return fmt.dtype(convert(index, pri, car, bins, fmt.p, fmt.width, fmt.expansion, single))


def row_index(amax, fmt):
    """`BinnedFormat.index` of every value of the array `amax` (finite, >= 0)."""
    e = np.frexp(amax.astype(np.float64))[1]
    j = np.minimum((fmt.emax + 1 - e) // fmt.width, fmt.max_index)
    return np.where(amax == 0, fmt.max_index, j).astype(np.int64)


def sum_rows(terms, fold, fmt):
    """The binned sum of every row of `terms` (shape (m, n), the format's dtype, already rounded), as
    an array of m values of the format: the NumPy replicas' kernel.  Vectorized over rows: each row's
    index from its largest |term|, its slices (note [exact slices]) counted in int64 over column
    chunks short enough never to overflow, carried into (carry, low) as ReproBLAS's fields."""
    terms = np.asarray(terms, dtype=fmt.dtype)
    m, n = terms.shape
    out = np.zeros(m, dtype=fmt.dtype)
    finite = np.isfinite(terms)
    clean = np.where(finite, terms, fmt.dtype(0))
    index = row_index(np.abs(clean).max(axis=1) if n else np.zeros(m, dtype=fmt.dtype), fmt)
    q = fmt.quarter_bits
    low = np.zeros((fold, m), dtype=np.int64)
    carry = np.zeros((fold, m), dtype=np.int64)
    chunk = 1 << 16
    for lo in range(0, n, chunk):
        part = clean[:, lo:lo + chunk]
        for j, c in enumerate(row_slice_counts(part, index, fold, fmt)):
            s = c.astype(np.int64).sum(axis=1)
            low[j] += s & ((1 << q) - 1)
            carry[j] += (s >> q) + (low[j] >> q)
            low[j] &= (1 << q) - 1
    single = fmt.name == "fp32"
    bins = [float(b) for b in fmt.bins]
    with np.errstate(over="ignore"):
        for i in range(m):
            if n == 0:
                continue
            if not finite[i].all():
                out[i] = fmt.dtype(special_sum(terms[i]))
                continue
            k = int(index[i])
            pri = [bins[k + j] + float(low[j, i]) * float(fmt.ulps[k + j]) for j in range(fold)]
            car = [float(carry[j, i]) for j in range(fold)]
            out[i] = fmt.dtype(convert(k, pri, car, bins, fmt.p, fmt.width, fmt.expansion, single))
    return out


def row_slice_counts(x, index, fold, fmt):
    """`slice_counts` of the rows of `x` (shape (m, n)), row i at its own index[i]."""
    dt = fmt.dtype
    out = []
    r = x
    top = index[:, None] == 0
    for j in range(fold):
        m = fmt.bins[index + j][:, None]
        u = fmt.ulps[index + j][:, None]
        if j == 0 and top.any():
            # note [index 0]: slot 0 of index-0 rows takes the scaled deposit
            mc = fmt.bins[0]
            sc = _or1(r * dt(fmt.compression), fmt) + mc
            qc = (mc - sc) * dt(fmt.expansion * 0.5)
            s = _or1(r, fmt) + m
            out.append(np.where(top, (sc - mc).astype(np.float64) / fmt.ulps[0],
                                (s - m).astype(np.float64) / u))
            r = np.where(top, (r + qc) + qc, r + (m - s))
            continue
        s = _or1(r, fmt) + m
        out.append((s - m).astype(np.float64) / u)
        r = r + (m - s)
    return out


# ---------------------------------------------------------------- the accumulator

def _shift(values, by):
    """Slots moved `by` places toward the lesser bins (a larger bin came in): the least drop off."""
    fold = len(values)
    return tuple([0] * min(by, fold) + list(values[:max(fold - by, 0)]))


def _ieee_special(a, b):
    if a is None:
        return b
    if b is None:
        return a
    return a + b if not (math.isinf(a) and math.isinf(b) and a != b) else math.nan


@dataclass(frozen=True)
class Binned:
    """A K-fold binned accumulator, exact: `index` (None while nothing came), `values` (each slot's
    total in its ulps, note [exact slices]) and `special` (the IEEE sum of the infs and nans that came,
    None if none).  Immutable: `deposit` and `+` return new accumulators."""

    format: str = "fp64"
    fold: int = 3
    index: int | None = None
    values: tuple = ()
    special: float | None = None

    def __post_init__(self):
        fmt = binned_format(self.format)
        if not isinstance(self.fold, int) or not 2 <= self.fold <= fmt.max_fold:
            raise ValueError(f"binned: fold = {self.fold!r}; expected an integer in 2..{fmt.max_fold}")
        if not self.values:
            object.__setattr__(self, "values", (0,) * self.fold)

    @classmethod
    def empty(cls, format: str = "fp64", fold: int = 3) -> "Binned":
        return cls(format, fold)

    @property
    def fmt(self) -> BinnedFormat:
        return binned_format(self.format)

    def deposit(self, x) -> "Binned":
        """Add every value of `x` (a number or an array, cast to the format's dtype)."""
        fmt = self.fmt
        x = np.asarray(x, dtype=fmt.dtype).ravel()
        special = _ieee_special(self.special, special_sum(x))
        finite = x[np.isfinite(x)]
        if finite.size == 0:
            return Binned(self.format, self.fold, self.index, self.values, special)
        j = fmt.index(np.max(np.abs(finite)))
        index = j if self.index is None else min(self.index, j)
        old = (0,) * self.fold if self.index is None else _shift(self.values, self.index - index)
        new = total_counts(finite, index, self.fold, fmt)
        return Binned(self.format, self.fold, index, tuple(a + b for a, b in zip(old, new)), special)

    add = deposit

    def __add__(self, other: "Binned") -> "Binned":
        """Merge (ReproBLAS's binned_dmdmadd): the same result as depositing both inputs into one."""
        if not isinstance(other, Binned):
            return NotImplemented
        if (other.format, other.fold) != (self.format, self.fold):
            raise ValueError(f"binned: cannot add a {other.format} fold {other.fold} accumulator to a "
                             f"{self.format} fold {self.fold} one")
        special = _ieee_special(self.special, other.special)
        if other.index is None:
            return Binned(self.format, self.fold, self.index, self.values, special)
        if self.index is None:
            return Binned(self.format, self.fold, other.index, other.values, special)
        index = min(self.index, other.index)
        a, b = _shift(self.values, self.index - index), _shift(other.values, other.index - index)
        return Binned(self.format, self.fold, index, tuple(u + v for u, v in zip(a, b)), special)

    def fields(self):
        """ReproBLAS's (primary, carry) fields, renormalized, as arrays of the format's dtype
        (all zero while nothing came; primary[0] holds inf or nan after one)."""
        fmt = self.fmt
        if self.index is None:
            pri, car = [0.0] * self.fold, [0.0] * self.fold
        else:
            pri, car = fields_of(self.index, self.values, fmt)
        if self.special is not None:
            pri[0] = self.special
        return np.array(pri, dtype=fmt.dtype), np.array(car, dtype=fmt.dtype)

    def to_array(self) -> np.ndarray:
        """ReproBLAS's double_binned / float_binned layout: the K primaries, then the K carries."""
        return np.concatenate(self.fields())

    @classmethod
    def from_array(cls, a, format: str = "fp64", fold: int = 3) -> "Binned":
        """Inverse of `to_array` (a ReproBLAS binned value, e.g. received from another process)."""
        fmt = binned_format(format)
        a = np.asarray(a, dtype=fmt.dtype)
        if a.shape != (2 * fold,):
            raise ValueError(f"binned: expected {2 * fold} values (fold {fold}), got shape {a.shape}")
        pri, car = a[:fold], a[fold:]
        p0 = float(pri[0])
        if p0 == 0.0:
            return cls(format, fold)
        if not math.isfinite(p0):
            return cls(format, fold, None, (), p0)
        e = math.frexp(p0)[1] - 1
        index = (fmt.emax + fmt.p - fmt.width + 1 - e) // fmt.width   # ReproBLAS's binned_dmindex
        values = []
        for j in range(fold):
            low = (float(pri[j]) - float(fmt.bins[index + j])) / float(fmt.ulps[index + j])
            values.append((int(car[j]) << fmt.quarter_bits) + int(low))
        return cls(format, fold, index, tuple(values))

    def to_float(self):
        """The sum, rounded to the format (a numpy scalar): ReproBLAS's bits."""
        fmt = self.fmt
        if self.special is not None:
            return fmt.dtype(self.special)
        if self.index is None:
            return fmt.dtype(0.0)
        pri, car = fields_of(self.index, self.values, fmt)
        return convert_fields(self.index, pri, car, fmt)

    def __float__(self) -> float:
        return float(self.to_float())


def binned_sum(x, format: str | None = None, fold: int = 3) -> Binned:
    """The binned accumulator of the values of `x` (format from x's dtype unless given)."""
    return Binned.empty(format or _format_of(x), fold).deposit(x)


def binned_dot(x, y, format: str | None = None, fold: int = 3) -> Binned:
    """The binned accumulator of the products x_k * y_k, each rounded to the format (as ReproBLAS)."""
    fmt = binned_format(format or _format_of(x))
    with np.errstate(all="ignore"):
        terms = np.asarray(x, dtype=fmt.dtype) * np.asarray(y, dtype=fmt.dtype)
    return Binned.empty(fmt.name, fold).deposit(terms)


def binned_rows(terms, format: str, fold: int = 3) -> np.ndarray:
    """The binned sum of each row of the 2-D array `terms` (already rounded), as floats of the format."""
    terms = np.asarray(terms)
    return np.array([Binned.empty(format, fold).deposit(row).to_float() for row in terms],
                    dtype=binned_format(format).dtype)


def _format_of(x) -> str:
    dt = np.asarray(x).dtype
    if dt == np.float32:
        return "fp32"
    if dt == np.float64:
        return "fp64"
    raise ValueError(f"binned: dtype {dt}; expected float64 or float32 (or give format=)")


# ---------------------------------------------------------------- the error bound

def error_bound(n: int, max_abs: float, format: str = "fp64", fold: int = 3, total: float | None = None) -> Fraction:
    """|exact sum - binned result| < this, for n values of magnitude <= max_abs (seed 002, (5.25) with the
    errata: n * max(2^(W(1-K)) * max|x|, 2^(emin-1)) for the binning, plus 7 eps / (1 - 6 sqrt(eps)) of
    the accumulated value for the conversion, |T| <= n * max|x| unless `total` gives it).  Exact, as a
    Fraction rounded up (the square root bounded from above)."""
    fmt = binned_format(format)
    eps = Fraction(1, 2 ** fmt.p)
    # sqrt(eps) = 2^(-p/2); an upper bound for odd p
    sqrt_eps = Fraction(1, 2 ** (fmt.p // 2)) if fmt.p % 2 == 0 else Fraction(1, 2 ** ((fmt.p - 1) // 2))
    c = 7 * eps / (1 - 6 * sqrt_eps)
    m = Fraction(max_abs)
    binning = n * max(Fraction(2) ** (fmt.width * (1 - fold)) * m, Fraction(2) ** (fmt.emin - 1))
    t = n * m if total is None else abs(Fraction(total))
    return (1 + c) * binning + c * t


def bound_text(n: int, max_abs: float, format: str = "fp64", fold: int = 3) -> str:
    """The lines `fpspec show` prints for a binned arithmetic."""
    fmt = binned_format(format)
    b = error_bound(n, max_abs, format, fold)
    up = float(b)
    if Fraction(up) < b:
        up = math.nextafter(up, math.inf)
    return (f"error bound (ReproBLAS (5.25), W = {fmt.width}, K = {fold}, n = {n}, max|x| = {max_abs!r}):\n"
            f"  |sum - result| < (1 + c) * n * max(2^(W(1-K)) * max|x|, 2^(emin-1)) + c * n * max|x|, "
            f"c = 7 eps / (1 - 6 sqrt(eps)), eps = 2^-{fmt.p}\n"
            f"  = {up!r}")


def evaluate_binned(x, y, format: str, fold: int) -> np.ndarray:
    """fpspec.arith.evaluate's answer for a binned arithmetic: terms x[k] (a sum, y None) or x[k] * y[k]
    rounded to the format, x of shape (n,) or (n, m) (m accumulations); float64 values, shape () or (m,)."""
    fmt = binned_format(format)
    X = np.asarray(x, dtype=np.float64).astype(fmt.dtype)
    if y is not None:
        Y = np.asarray(y, dtype=np.float64).astype(fmt.dtype)
        if Y.ndim == 1 and X.ndim == 2:
            Y = Y[:, None]
        with np.errstate(all="ignore"):
            X = X * Y
    if X.ndim == 1:
        return np.float64(Binned.empty(format, fold).deposit(X).to_float())
    return np.array([Binned.empty(format, fold).deposit(X[:, i]).to_float() for i in range(X.shape[1])],
                    dtype=np.float64)
