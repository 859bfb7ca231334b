"""Numba runtime of binned replicas (embedded: the replica imports only numpy and numba).

Globals the replica defines (fpspec.compile.binned.settings): _DT (the format's dtype), _FOLD, _BINS
(ReproBLAS's table in _DT), _BINS64 and _ULPS (float64), _P, _W, _EMAX, _MAXI, _COMPRESSION,
_HALF_EXPANSION, _EXPANSION, _SINGLE, _Q (carry unit: 2^_Q ulps), _EXP_SHIFT, _INF_BITS, _ABS_MASK,
_PRODUCT (terms are x*y rounded, else x), _BLOCK.

One pass over the terms, a block of _BLOCK at a time (fpspec.arith.binned note [exact slices]): the
block's largest |term| (an integer max over the bit patterns: LLVM vectorizes it, and inf / nan show
as the largest patterns), the accumulator's index moved up if needed, then every term's slices added
counted in ulps of its bin (the difference of the bit patterns of the primary after and before:
integer sums, which LLVM vectorizes without reassociating anything), then carried into int64
(carry, low) pairs.  The block loops (_block_amax, _deposit, _deposit_top) are written out by
fpspec.compile.binned for the spec's fold, with the term inline.  A state is
int64[_STATE = 2 + 3 _FOLD]: index (-1: empty), flags (1 nan, 2 +inf, 4 -inf), low[_FOLD],
carry[_FOLD], then scratch; states merge exactly in any order.
"""
import math

import numpy as np
from llvmlite import ir
from concurrent.futures import ThreadPoolExecutor

from numba import get_num_threads, njit, types
from numba.extending import intrinsic

_DT = np.float64
_FOLD = 3
_STATE = 2 + 3 * _FOLD
_BINS = np.zeros(104)
_BINS64 = np.zeros(104)
_ULPS = np.zeros(104)
_P, _W, _EMAX, _MAXI, _Q, _EXP_SHIFT, _INF_BITS = 53, 40, 1023, 51, 50, 52, 0x7FF0000000000000
_COMPRESSION, _HALF_EXPANSION, _EXPANSION = 2.0 ** -14, 2.0 ** 13, 2.0 ** 14
_SINGLE = False
_PRODUCT = False
_ABS_MASK = 0x7FFFFFFFFFFFFFFF
_BLOCK = 2048
_jit = njit(fastmath=False)
_nogil = njit(fastmath=False, nogil=True)


@intrinsic
def _or1(typingctx, x):
    """(x|1): the last significand bit set (bit operations on the float's pattern)."""
    width = 64 if x == types.float64 else 32

    def codegen(context, builder, sig, args):
        ity = ir.IntType(width)
        i = builder.bitcast(args[0], ity)
        return builder.bitcast(builder.or_(i, ity(1)), args[0].type)

    return x(x), codegen


@intrinsic
def _bits(typingctx, x):
    """The bit pattern of x as an int64 (fp32: its 32 bits, zero-extended).  For two floats of one
    binade the difference of their patterns is the number of ulps between them."""
    width = 64 if x == types.float64 else 32

    def codegen(context, builder, sig, args):
        i = builder.bitcast(args[0], ir.IntType(width))
        return i if width == 64 else builder.zext(i, ir.IntType(64))

    return types.int64(x), codegen


def _term(X, Y, i):
    if _PRODUCT:
        return X[i] * Y[i]
    return X[i]


def _index_of_bits(m):
    """ReproBLAS's xindex of the largest |term| given by its bit pattern m (finite)."""
    e = m >> _EXP_SHIFT
    if e == 0:
        if m == 0:
            return _MAXI
        # a subnormal: m * 2^(emin - (p - 1)), its exponent read off m as a float (exact)
        v = math.frexp(np.float64(m))[1] + 1 - _EMAX - (_P - 1)
        return min((_EMAX + 1 - v) // _W, _MAXI)
    return min((_EMAX + 1 - (e - _EMAX + 1)) // _W, _MAXI)


def _block_flags(X, Y, b0, b1):
    f = 0
    for i in range(b0, b1):
        t = _term(X, Y, i)
        if t != t:
            f |= 1
        elif t == np.inf:
            f |= 2
        elif t == -np.inf:
            f |= 4
    return f


def _carry_in(state, j, count):
    """Add `count` ulps to slot j of the state's (low, carry) pair, keeping low in [0, 2^_Q)."""
    mask = (np.int64(1) << _Q) - 1
    low = state[2 + j] + (count & mask)
    state[2 + _FOLD + j] += (count >> _Q) + (low >> _Q)
    state[2 + j] = low & mask


def _shift_state(state, by):
    """Slots moved `by` places toward the lesser bins (ReproBLAS's update)."""
    for j in range(_FOLD - 1, -1, -1):
        src = j - by
        state[2 + j] = state[2 + src] if src >= 0 else 0
        state[2 + _FOLD + j] = state[2 + _FOLD + src] if src >= 0 else 0


def _partial(X, Y, lo, hi, state, hint=-1):
    """The binned state of terms lo..hi-1, written into `state` (zeroed here).  `hint` (>= 0): an
    index at most the one of the largest |term| (from a bound on it), deposited at in one pass
    with no max pass first; passed again at the true index when that is higher.  Same bits."""
    for k in range(2 + 2 * _FOLD):
        state[k] = 0
    state[0] = -1
    counts = state[2 + 2 * _FOLD:]      # scratch: the block's counts (no allocation per call)
    for b0 in range(lo, hi, _BLOCK):
        b1 = min(b0 + _BLOCK, hi)
        # views from 0: the block loops index from 0 up, which LLVM vectorizes
        Xb, Yb = X[b0:b1], Y[b0:b1]
        if state[0] < 0 and hint >= 0:
            m = _deposit_at(Xb, Yb, hint, counts)
            if m < _INF_BITS and _index_of_bits(m) == hint:
                state[0] = hint
                for k in range(_FOLD):
                    _carry_in(state, k, counts[k])
                continue
        elif state[0] < 0:
            m = _block_amax(Xb, Yb)
        else:
            # the block's largest |term| comes out of the deposit; deposited again only when it
            # needs a higher bin than the accumulator's (rare: a bin is 2^W wide)
            m = _deposit_at(Xb, Yb, state[0], counts)
        if m >= _INF_BITS:
            state[1] |= _block_flags(X, Y, b0, b1)
            continue
        j = _index_of_bits(m)
        if state[0] >= 0 and j >= state[0]:
            for k in range(_FOLD):
                _carry_in(state, k, counts[k])
            continue
        if state[0] < 0:
            state[0] = j
        else:
            _shift_state(state, state[0] - j)
            state[0] = j
        _deposit_at(Xb, Yb, j, counts)
        for k in range(_FOLD):
            _carry_in(state, k, counts[k])


def _deposit_at(X, Y, index, counts):
    """counts = the block's slices at `index`; returns the largest |term| pattern of the block."""
    if index == 0:
        return _deposit_top(X, Y, counts)
    return _deposit(X, Y, index, counts)


def _merge_into(state, other):
    """state += other, exactly (ReproBLAS's binned_dmdmadd on the exact form)."""
    state[1] |= other[1]
    if other[0] < 0:
        return
    if state[0] < 0:
        for k in range(2, 2 + 2 * _FOLD):
            state[k] = other[k]
        state[0] = other[0]
        return
    if other[0] < state[0]:
        _shift_state(state, state[0] - other[0])
        state[0] = other[0]
    by = other[0] - state[0]
    for j in range(by, _FOLD):
        _carry_in(state, j, other[2 + j - by])
        state[2 + _FOLD + j] += other[2 + _FOLD + j - by]


def _finish(state, fields):
    """The sum a state holds, as a float64 of the format's value (canonical nan for nan)."""
    f = state[1]
    if f != 0:
        if f & 1 or (f & 6) == 6:
            return np.nan
        return np.inf if f & 2 else -np.inf
    index = state[0]
    if index < 0:
        return 0.0
    pri = fields[:_FOLD]
    car = fields[_FOLD:]
    for j in range(_FOLD):
        pri[j] = _BINS64[index + j] + np.float64(state[2 + j]) * _ULPS[index + j]
        car[j] = np.float64(state[2 + _FOLD + j])
    return convert(index, pri, car, _BINS64, _P, _W, _EXPANSION, _SINGLE)


def _merged(states):
    """The sum the rows of `states` hold together (merged in order; any order gives the same)."""
    total = np.zeros(_STATE, np.int64)
    total[0] = -1
    for p in range(states.shape[0]):
        _merge_into(total, states[p])
    return _finish(total, np.empty(2 * _FOLD))


def _rows_range(A, x, out, r0, r1):
    """out[i] = binned sum of the terms of row i of A (times x when _PRODUCT), rows r0..r1-1."""
    state = np.zeros(_STATE, np.int64)
    fields = np.empty(2 * _FOLD)
    for i in range(r0, r1):
        _partial(A[i], x, 0, A.shape[1], state)
        out[i] = _finish(state, fields)


def _gemm_range(A, Bt, out, r0, r1):
    """Rows r0..r1-1 of A @ B (Bt = B transposed, contiguous), every element a binned dot.  Its
    hint: the index of max|A[i, :]| * max|B[:, j]|, rounded (at least every |product|, so at most
    their index; equal to it unless a bin boundary lies in between)."""
    state = np.zeros(_STATE, np.int64)
    fields = np.empty(2 * _FOLD)
    bmax = np.empty(Bt.shape[0], _DT)
    for j in range(Bt.shape[0]):
        bmax[j] = _abs_max(Bt[j])
    for i in range(r0, r1):
        amax = _abs_max(A[i])
        for j in range(Bt.shape[0]):
            bound = _bits(amax * bmax[j])
            hint = _index_of_bits(bound) if bound < _INF_BITS else -1
            _partial(A[i], Bt[j], 0, A.shape[1], state, hint)
            out[i, j] = _finish(state, fields)


def _abs_max(v):
    """The largest |v[k]| (0 when empty, inf when an inf or a nan is there)."""
    h = _DT(0)
    for k in range(v.shape[0]):
        a = abs(v[k])
        if not a <= h:
            h = a if a == a else _DT(np.inf)
    return h


def _pool(workers, cache={}):
    """A pool of `workers` threads, made once: starting threads on every call costs a few percent
    of a sum of 10^7 terms."""
    if workers not in cache:
        cache[workers] = ThreadPoolExecutor(workers)
    return cache[workers]


def _run(fn, tasks):
    """Run fn(*task) for every task, one thread each, the first on this one (the kernels release
    the GIL)."""
    futures = [_pool(len(tasks) - 1).submit(fn, *t) for t in tasks[1:]]
    fn(*tasks[0])
    for f in futures:
        f.result()


def _split(n, parts):
    return [(n * p // parts, n * (p + 1) // parts) for p in range(parts)]


def _sum_threads(x, y):
    n = x.shape[0]
    parts = _parts(n)
    states = np.zeros((parts, _STATE), np.int64)
    _run(_partial, [(x, y, lo, hi, states[p]) for p, (lo, hi) in enumerate(_split(n, parts))])
    with np.errstate(over="ignore"):     # an fp32 sum beyond the format's range is inf
        return _DT(_merged(states))


def _rows_threads(A, x, out):
    parts = max(1, min(get_num_threads(), A.shape[0]))
    _run(_rows_range, [(A, x, out, r0, r1) for r0, r1 in _split(A.shape[0], parts)])


def _parts(n):
    # a thread per piece, pieces of at least a block: the bits do not depend on it
    return max(1, min(get_num_threads(), n // _BLOCK))


def api_sum(x):
    """The binned sum of the 1-D array x (every thread count, split and order: the same bits)."""
    x = _checked(x, "x", 1)
    return _sum_threads(x, x)


def api_sums(X):
    """The binned sum of every column of X."""
    X = _checked(X, "X", 2)
    out = np.empty(X.shape[1], np.float64)
    Xt = np.ascontiguousarray(X.T)
    _rows_threads(Xt, Xt[0], out)
    with np.errstate(over="ignore"):
        return out.astype(_DT)


def api_dot(x, y):
    """The binned sum of the products x[k] * y[k], each rounded to the format."""
    x, y = _checked(x, "x", 1), _checked(y, "y", 1)
    if x.shape != y.shape:
        raise ValueError(f"dot: x has {x.shape[0]} elements, y has {y.shape[0]}")
    return _sum_threads(x, y)


def api_gemv(A, x):
    """A @ x, every output element a binned dot product."""
    A, x = _checked(A, "A", 2), _checked(x, "x", 1)
    if A.shape[1] != x.shape[0]:
        raise ValueError(f"gemv: A is {A.shape[0]}x{A.shape[1]} but x has {x.shape[0]} elements")
    out = np.empty(A.shape[0], np.float64)
    _rows_threads(np.ascontiguousarray(A), x, out)
    with np.errstate(over="ignore"):
        return out.astype(_DT)


def api_gemm(A, B):
    """A @ B, every output element a binned dot product."""
    A, B = _checked(A, "A", 2), _checked(B, "B", 2)
    if A.shape[1] != B.shape[0]:
        raise ValueError(f"gemm: A is {A.shape[0]}x{A.shape[1]} but B is {B.shape[0]}x{B.shape[1]}")
    out = np.empty((A.shape[0], B.shape[1]), np.float64)
    parts = max(1, min(get_num_threads(), A.shape[0]))
    args = (np.ascontiguousarray(A), np.ascontiguousarray(B.T), out)
    _run(_gemm_range, [args + r for r in _split(A.shape[0], parts)])
    with np.errstate(over="ignore"):
        return out.astype(_DT)
