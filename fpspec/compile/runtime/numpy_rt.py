"""NumPy replica runtime: partial sums are arrays over the output elements.

Globals the template defines: _ACC (carrier dtype of partial sums), _ACC_FMT
((precision, emin, emax) when the accumulator is emulated on float64, else
None), _OUT_DTYPE, _OUT_FMT (like _ACC_FMT, for the output cast), _INIT_ZERO,
_FUSED (FusedParams or None), _ZERO, and the embedded fused-node model.
Terms: a[k] (and b[k]) are arrays over outputs, float64 for products so that
a[k] * b[k] is exact for inputs of <= 26 bits (note [leaf products]).
"""
import numpy as np

from fpspec.arith.fused import _FORMATS, _sum_round_to_odd, addend, align, largest_exponent, products, round_value
from fpspec.compile.runtime.inputs_rt import _fits, _input, _length, _operands, _outputs, _said, _shape  # noqa: F401 (embedded)
from fpspec.compile.runtime.tags_rt import _join  # noqa: F401 (embedded)
from fpspec.formats import _fma64, _fma64_exact

_ACC = np.float32
_ACC_FMT = None
_OUT_DTYPE = np.float32
_OUT_FMT = None
_INIT_ZERO = False
_ROUND_FIRST = False
_FUSED = None
_ZERO = np.float32(0.0)
_PROD = np.float32


def _round_native(v):
    return _ACC(v)


def _round_emulated(v):
    return round_value(v, *_ACC_FMT, "rne")


def _term_sum(a, b, k):
    return _round_acc(a[k])


def _term_product(a, b, k):
    return _round_acc(a[k] * b[k])


def _term_product_twice(a, b, k):
    # product_format: each product rounded to it first, then to the accumulator
    return _round_acc(_PROD(a[k] * b[k]))


def _add_plain(u, v):
    return _round_acc(u + v)


def _add_leaf_plain(acc, a, b, k):
    return _add(acc, _term(a, b, k))


def _add_leaf_fma(acc, a, b, k):
    # note [leaf products]: one rounding of the exact a*b + acc
    p = _ACC_FMT[0] if _ACC_FMT is not None else np.finfo(_ACC).nmant + 1     # the accumulator's bits
    return _round_acc(_round_odd_sum_near(a[k] * b[k], np.asarray(acc, np.float64), p))


def _add_leaf_fma_fp64(acc, a, b, k):
    # an fp64 accumulator and inputs of <= 26 bits: a*b is exact, so one float64 add is the FMA
    return _round_acc(a[k] * b[k] + acc)


def _term_exact(a, b, k):
    # numerics note [exact leaves]: a sum's leaf wider than the accumulator enters exactly
    return a[k]


def _term_exact_product(a, b, k):
    # numerics note [exact leaves]: an exact product (<= 26-bit inputs), rounded by the node that takes it
    return a[k] * b[k]


def _add_exact(u, v):
    # numerics note [exact leaves]: the exact sum of (possibly wider) operands, rounded once
    return _round_acc(_round_odd_sum(np.asarray(u, np.float64), np.asarray(v, np.float64)))


def _add_leaves_exact(a, b, i, j):
    # numerics note [exact leaves]: two exact products, their exact sum rounded once
    return _round_acc(_round_odd_sum(a[i] * b[i], a[j] * b[j]))


def _add_leaf_fma64(acc, a, b, k):
    # an fp64 FMA, one rounding of a*b + acc (fpspec.formats note [fp64 fma]: Boldo and
    # Melquiond's sum, exact rationals for the elements it does not cover)
    x, y, c = np.broadcast_arrays(a[k], b[k], np.asarray(acc, np.float64))
    out, safe = _fma64(x, y, c)
    if not safe.all():
        out = np.array(out)
        out[~safe] = _fma64_exact(x[~safe], y[~safe], c[~safe])
    return out


def _add_leaves(a, b, i, j):
    return _add_leaf(_term(a, b, i), a, b, j)


def _add_leaves_first(a, b, i, j):
    # product = fma_first: the first leaf fused, the second rounded
    return _add_leaf(_term(a, b, j), a, b, i)


def _round_odd_sum(x, y):
    """x + y in float64 rounded to odd, so one more rounding to <= 51 bits is exact."""
    s = x + y
    bb = s - x
    err = (x - (s - bb)) + (y - bb)
    # inf and nan sums are already the result (err is nan there)
    odd_fix = (err != 0) & ((s.view(np.int64) & 1) == 0) & np.isfinite(s)
    return np.where(odd_fix, np.nextafter(s, np.where(err > 0, np.inf, -np.inf)), s)


# Note [round to odd where it matters]: an FMA into the accumulator is the exact
# a*b + acc rounded once; `_round_odd_sum` then the rounding to the accumulator
# gives it, at about fifteen whole-array operations per leaf.  The float64 sum s
# alone rounds to the same p-bit value (p <= 50) unless s is a point or a midpoint
# of the p-bit grid (the exact sum and s have no grid point or midpoint strictly
# between them: it would be a float64 nearer than s), and every such s has its
# 52 - p lowest significand bits zero (subnormals of the format too: a coarser
# grid).  So the sum is computed once, and rounded to odd only where those bits
# are zero (NaN and infinities too): a few elements of a random product (all of
# them where most are: sums of small integers), never a different result.  The
# first call of the 512^3 fp32 FMA gemm example: 10.4 s CPU here before, 3.3 s after.
def _round_odd_sum_near(x, y, p):
    """What `_round_odd_sum(x, y)` rounds to in p bits (note [round to odd where it
    matters]): the float64 sum, rounded to odd where that matters."""
    if p > 50:
        return _round_odd_sum(x, y)
    s = np.asarray(x + y)
    near = (s.view(np.int64) & ((1 << (52 - p)) - 1)) == 0
    count = np.count_nonzero(near)
    if 4 * count > near.size:       # sums of short values (small integers): all of them at once
        return _round_odd_sum(x, y)
    if count:
        x, y = np.broadcast_arrays(x, y)
        s = np.array(s)
        s[near] = _round_odd_sum(x[near], y[near])
    return s


def _padded(a, b, lo, step, m, r, c):
    """The terms lo, lo + step, ... (m of them) with c phantoms after the first r
    (fpspec.compile.loops note [phantoms]): -0.0 in a, 1.0 in b."""
    idx = lo + step * np.arange(m)
    pa = np.concatenate([a[idx[:r]], np.full((c,) + a.shape[1:], -0.0, a.dtype), a[idx[r:]]])
    pb = np.concatenate([b[idx[:r]], np.full((c,) + b.shape[1:], 1.0, b.dtype), b[idx[r:]]])
    return pa, pb


def _vals(m):
    return [None] * m


def _fused(a, b, ks, c):
    """One fused node over the leaves ks (and addend c), for every output at once."""
    ks = np.asarray(ks, np.int64)
    ak, bk = a[ks], b[ks]
    if (_FUSED.combine == "aligned" and np.isfinite(ak).all() and np.isfinite(bk).all()
            and np.isfinite(c).all()):     # (AMD's combine has no fast form)
        return _fused_finite(ak, bk, c)
    shape = np.broadcast_shapes(a.shape[1:], b.shape[1:])
    av = np.moveaxis(np.broadcast_to(a[ks], (len(ks),) + shape), 0, -1)
    bv = np.moveaxis(np.broadcast_to(b[ks], (len(ks),) + shape), 0, -1)
    d = fused_node(av.reshape(-1, len(ks)), bv.reshape(-1, len(ks)),
                   np.broadcast_to(np.asarray(c, np.float64), shape).reshape(-1), _FUSED)
    return _round_acc(d.reshape(shape))


def _fused_finite(ak, bk, c):
    """`_fused` when no input and no c is inf or nan (so no node is special):
    fused_node's steps, with the inputs decoded before they are broadcast
    (cnt x rows and cnt x columns values, not cnt x rows x columns), and the
    term axis first instead of last.  Same integers, same bits."""
    params = _FUSED
    pneg, pexp, psig = (np.moveaxis(v, 0, -1) for v in products(ak, bk, params))
    c = np.broadcast_to(np.asarray(c, np.float64), pexp.shape[:-1])
    cneg, cexp, csig = addend(c, params)
    if params.c_aligned:
        emax = largest_exponent(np.concatenate([pexp, cexp[..., None]], axis=-1), params)
    else:
        emax = largest_exponent(pexp, params)
    total = align(pneg, pexp, psig, pexp - 46, emax, params).sum(axis=-1)
    if params.c_aligned:
        total = total + align(cneg[..., None], cexp[..., None], csig[..., None],
                              cexp[..., None] - 23, emax, params)[..., 0]
        exact = np.ldexp(total.astype(np.float64), emax - params.fraction_bits)
    else:
        exact = _sum_round_to_odd(np.ldexp(total.astype(np.float64), emax - params.fraction_bits), c)
    _, emin_out, emax_out = _FORMATS[params.output]
    d = round_value(exact, params.result_precision, emin_out, emax_out, params.result, params.subnormal_outputs)
    return _round_acc(np.where((psig == 0).all(axis=-1) & (csig == 0), 0.0, d))


def _fused_range(a, b, lo, step, cnt, c):
    return _fused(a, b, lo + step * np.arange(cnt), c)


def _table_step(a, b, lo, step, size, slots, kids, offs, fused, s):
    """Step s of a literal tree over leaves: slot i < size is leaf lo + i*step."""
    first, last = offs[s], offs[s + 1]
    if fused[s]:
        leaves = [lo + kids[i] * step for i in range(first, last) if kids[i] < size]
        inner = [slots[kids[i]] for i in range(first, last) if kids[i] >= size]
        if not inner and len(leaves) == _FUSED.w + 1:   # a chain's first group of one (arith.evaluate)
            inner, leaves = [_fused(a, b, leaves[:1], _ZERO)], leaves[1:]
        return _fused(a, b, leaves, inner[0] if inner else _ZERO)
    i, j = kids[first], kids[first + 1]
    if i >= size and j >= size:
        return _add(slots[i], slots[j])
    if i < size and j < size:
        return _add_leaves(a, b, lo + i * step, lo + j * step)
    if i < size:
        return _add_leaf(slots[j], a, b, lo + i * step)
    return _add_leaf(slots[i], a, b, lo + j * step)


def _table_step_values(slots, kids, offs, s):
    """Step s of a literal tree over values (binary steps only)."""
    return _add(slots[kids[offs[s]]], slots[kids[offs[s] + 1]])


def _final(acc):
    if _ROUND_FIRST:   # numerics note [exact leaves]: a lone leaf's exact product
        acc = _round_acc(acc)
    if _INIT_ZERO:     # note [init +0.0]: -0.0 becomes +0.0
        acc = _add(acc, _ZERO)
    if _OUT_FMT is not None:
        acc = round_value(acc, *_OUT_FMT, "rne")
    return np.asarray(acc).astype(_OUT_DTYPE)


# stand-ins so this module imports; the template binds the chosen variants
_round_acc = _round_native
_term = _term_sum
_add = _add_plain
_add_leaf = _add_leaf_plain
fused_node = None


# ---------------------------------------------------------------- the public functions

_NAME = "spec"
N_MIN, N_MAX = 1, None
_IN_DTYPE = np.float32
_IN_NAME = "fp32"
_IN_GRID = None
_SUM_FUSED = False   # a sum through fused nodes: each x_k enters as the product x_k * 1


def api_sum(x):
    """The spec's sum of the 1-D array x."""
    x = _input(x, "x")
    _shape("x", x, 1)
    a = x.astype(np.float64)[:, None]
    with np.errstate(all="ignore"):   # inf and nan are results here, not errors
        return _final(_reduce(a, np.ones_like(a) if _SUM_FUSED else a, _length(x.shape[0], "x")))[0]


def api_sums(X):
    """The spec's sum of every column of X (each its own accumulation)."""
    X = _input(X, "X")
    _shape("X", X, 2)
    a = X.astype(np.float64)
    with np.errstate(all="ignore"):   # inf and nan are results here, not errors
        return _final(_reduce(a, np.ones_like(a) if _SUM_FUSED else a, _length(X.shape[0], "X")))


def api_dot(x, y):
    """The spec's dot product of the 1-D arrays x and y."""
    x, y = _input(x, "x"), _input(y, "y", True)
    _shape("x", x, 1)
    _shape("y", y, 1)
    n = _operands("dot", x, y)
    a, b = x.astype(np.float64)[:, None], y.astype(np.float64)[:, None]
    with np.errstate(all="ignore"):   # inf and nan are results here, not errors
        return _final(_reduce(a, b, n))[0]


def api_gemv(A, x):
    """A @ x, each output element in the spec's order over the columns of A."""
    A, x = _input(A, "A"), _input(x, "x", True)
    _shape("A", A, 2)
    _shape("x", x, 1)
    n = _operands("gemv", A, x)
    a, b = A.astype(np.float64).T, x.astype(np.float64)[:, None]
    with np.errstate(all="ignore"):   # inf and nan are results here, not errors
        return _final(_reduce(a, b, n))


def api_gemm(A, B):
    """A @ B, each output element in the spec's order over the inner dimension."""
    A, B = _input(A, "A"), _input(B, "B", True)
    _shape("A", A, 2)
    _shape("B", B, 2)
    n = _operands("gemm", A, B)
    a = A.astype(np.float64).T[:, :, None]
    b = B.astype(np.float64)[:, None, :]
    with np.errstate(all="ignore"):   # inf and nan are results here, not errors
        return _final(_reduce(a, b, n))
