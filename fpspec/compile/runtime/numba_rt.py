"""Numba replica runtime: one output element per call, scalars, no fastmath.

Every function here is compiled with fastmath off, so LLVM may neither
reassociate nor contract a*b+c into an FMA; the only FMA is `_fma`, an
explicit llvm.fma call, used only when the spec says product = fma.

Globals the template defines: _ACC (carrier dtype), _ACC_FMT ((precision,
emin, emax) when the accumulator is emulated on float64), _OUT_FMT, _INIT_ZERO,
_ZERO, and for fused nodes the _FP_* constants (see `_fused_core`).
"""
import math

import numpy as np
from numba.extending import intrinsic, overload

from fpspec.arith.fused import round_value  # noqa: F401 (embedded)
from fpspec.compile.runtime.inputs_rt import _fits, _input, _length, _operands, _outputs, _said, _shape  # noqa: F401 (embedded)
from fpspec.compile.runtime.tags_rt import _join  # noqa: F401 (embedded)

_ACC = np.float32
_ACC_FMT = (24, -126, 127)
_OUT_FMT = (24, -126, 127)
_INIT_ZERO = False
_ZERO = np.float32(0.0)
_PROD = np.float32
_ZERO_EXP = -(1 << 20)
_FP_W = 16
_FP_F, _FP_EMIN_IN, _FP_FLOOR, _FP_ALIGNED, _FP_C_ALIGNED = 25, -14, -133, 0, True
_FP_RZ, _FP_RES_P, _FP_OUT_EMIN, _FP_OUT_EMAX, _FP_SUB_IN, _FP_SUB_OUT = True, 24, -126, 127, True, True
_FP_EMIN_IN_B, _FP_ZEXP_ON, _FP_ZEXP, _FP_C_EMIN, _FP_AMD, _FP_INTERLEAVE = -14, False, -126, -126, False, 1
_FP_IN_TINY, _FP_IN_TINY_B, _FP_OUT_TINY = 2.0 ** -14, 2.0 ** -14, 2.0 ** -126
_FP_OUT_OVER_RZ, _FP_OUT_OVER_RN = 2.0 ** 128, (2.0 - 2.0 ** -23) * 2.0 ** 127
_OUT_P, _OUT_EMIN, _OUT_OVER = 11, -14, 65504.0   # an emulated output format (fp16 here)


@intrinsic
def _fma(typingctx, x, y, z):
    """llvm.fma: x*y + z with one rounding, in the type of x (all three alike)."""
    def codegen(context, builder, signature, args):
        return builder.fma(*args)
    return x(x, y, z), codegen


# Note [wider partial sums]: a part (`using`) narrower than the code around it
# can meet a partial sum of that code, held in the wider carrier: a value list
# it reduces, or a lone leaf's node over such a sum (fpspec.compile.loops note
# [lone leaves]).  That sum enters its node exactly (fpspec.arith.evaluate
# note [regions]): the node rounds the exact x*y + acc, or u + v, once.  Numba
# types tell where: `_fma_into` takes the machine's FMA when acc is in the
# node's carrier, widens a narrower acc exactly into an fp64 node, and for a
# wider acc in an fp32 node adds the exact float64 product (inputs of <= 26
# bits) to acc rounded to odd, then rounds once to fp32 (53 >= 24 + 2 bits).
# The value lists a part's own functions build are float64 arrays (a lone
# operand from outside keeps every bit: `_vals_wide`, fpspec.compile.backends.
# numba `wide_lists`), and its additions are `_add_exact` unless its carrier
# is fp64.  Where every operand is in the node's carrier, nothing changes.
def _fma_into(x, y, acc):
    """x*y + acc rounded once into the type of x and y (note [wider partial sums])."""
    return _fma(x, y, acc)


@overload(_fma_into, inline="always")
def _fma_into_typed(x, y, acc):
    from numba.core import types

    if acc == x:
        return lambda x, y, acc: _fma(x, y, acc)
    if x == types.float64:      # a narrower acc widens exactly
        return lambda x, y, acc: _fma(x, y, np.float64(acc))
    return lambda x, y, acc: np.float32(_round_odd_sum(np.float64(x) * np.float64(y), np.float64(acc)))


@intrinsic
def _lane_folds(typingctx, a, lo, rows, k):
    """The k lane sums of the rows x k values a[lo:lo + rows * k] (row-major,
    rows >= 1): lane j is ((a[lo + j] + a[lo + k + j]) + a[lo + 2k + j]) + ...
    One <k x T> vector add per row: k independent IEEE adds side by side, no
    fast-math flags, nothing reassociated (note [vector lanes] in
    fpspec.compile.loops).  `a` must be C-contiguous, k a literal."""
    from llvmlite import ir
    from numba.core import cgutils, types

    if not (isinstance(k, types.IntegerLiteral) and isinstance(a, types.Array) and a.ndim == 1
            and a.layout == "C"):
        return None
    lanes = k.literal_value
    ret = types.UniTuple(a.dtype, lanes)

    def codegen(context, builder, signature, args):
        arr = context.make_array(signature.args[0])(context, builder, args[0])
        start = context.cast(builder, args[1], signature.args[1], types.intp)
        count = context.cast(builder, args[2], signature.args[2], types.intp)
        scalar = context.get_value_type(signature.args[0].dtype)
        vector = ir.VectorType(scalar, lanes)
        one = ir.Constant(start.type, 1)

        def row(r):
            at = builder.add(start, builder.mul(r, ir.Constant(start.type, lanes)))
            ptr = builder.bitcast(builder.gep(arr.data, [at]), vector.as_pointer())
            return builder.load(ptr, align=context.get_abi_sizeof(scalar))
        acc = cgutils.alloca_once(builder, vector)
        builder.store(row(ir.Constant(start.type, 0)), acc)
        with cgutils.for_range_slice(builder, one, count, one) as (r, _):
            builder.store(builder.fadd(builder.load(acc), row(r)), acc)
        total = builder.load(acc)
        out = cgutils.get_null_value(context.get_value_type(ret))
        for j in range(lanes):
            out = builder.insert_value(out, builder.extract_element(total, ir.Constant(ir.IntType(32), j)), j)
        return out
    return ret(a, lo, rows, k), codegen


@intrinsic
def _gemm_tile(typingctx, A, B, out, i0, j0, lo, hi, first, rows, vectors, fused, lanes, tree):
    """One register tile of A @ B over the block of leaves lo..hi-1: for each of
    the rows x (vectors * V) outputs (i, j) at (i0, j0), V the elements of a
    256-bit vector, each of the `lanes` lanes (lane l: leaves lo + l, lo + l +
    lanes, ...; every lane non-empty) is s = A[i, k] * B[k, j] rounded for its
    first leaf, then s = fma(A[i, k], B[k, j], s) (fused = 1, llvm.fma) or
    s + A[i, k] * B[k, j] rounded twice (fused = 0), in order; the lane sums
    are joined by `tree` (postfix: a digit pushes that lane, + adds the top
    two, left first); then out[i, j] = that if first else out[i, j] + that.
    Each output's operations are the scalar ones of `_gemm_kernel`: a vector
    only holds different outputs side by side (note [gemm tiles] in
    fpspec.compile.backends.numba).  A, B, out: C-contiguous 2-D arrays of one
    dtype; rows, vectors, fused, lanes, tree: literals."""
    from llvmlite import ir
    from numba.core import cgutils, types

    literals = (rows, vectors, fused, lanes)
    if not (all(isinstance(x, types.Array) and x.ndim == 2 and x.layout == "C" for x in (A, B, out))
            and A.dtype == B.dtype == out.dtype and A.dtype in (types.float32, types.float64)
            and all(isinstance(x, types.IntegerLiteral) for x in literals)
            and isinstance(tree, types.StringLiteral)):
        return None
    nr, nv, fma, nl = (x.literal_value for x in literals)
    postfix = tree.literal_value

    def codegen(context, builder, signature, args):
        a, b, o = (context.make_array(t)(context, builder, v) for t, v in zip(signature.args[:3], args[:3]))
        i0, j0, lo, hi = (context.cast(builder, v, t, types.intp) for v, t in zip(args[3:7], signature.args[3:7]))
        is_first = context.cast(builder, args[7], signature.args[7], types.boolean)
        scalar = context.get_value_type(signature.args[0].dtype)
        size = context.get_abi_sizeof(scalar)
        width = 32 // size
        vector = ir.VectorType(scalar, width)
        fma_fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(vector, [vector] * 3),
                                                f"llvm.fma.v{width}f{8 * size}")
        n, p, q = (builder.extract_value(x.shape, 1) for x in (a, b, o))

        def const(v):
            return ir.Constant(i0.type, v)

        def b_vector(k, c):         # B[k, j0 + c*width : ...]
            at = builder.add(builder.mul(k, p), builder.add(j0, const(c * width)))
            return builder.load(builder.bitcast(builder.gep(b.data, [at]), vector.as_pointer()), align=size)

        def a_broadcast(r, k):      # A[i0 + r, k] in every element
            x = builder.load(builder.gep(a.data, [builder.add(builder.mul(builder.add(i0, const(r)), n), k)]))
            v = builder.insert_element(ir.Constant(vector, ir.Undefined), x, ir.Constant(ir.IntType(32), 0))
            return builder.shuffle_vector(v, ir.Constant(vector, ir.Undefined),
                                          ir.Constant(ir.VectorType(ir.IntType(32), width), [0] * width))

        def leaf(lane, k, start):   # leaf k into the accumulators of `lane`
            bs = [b_vector(k, c) for c in range(nv)]
            for r in range(nr):
                x = a_broadcast(r, k)
                for c in range(nv):
                    if start:
                        builder.store(builder.fmul(x, bs[c]), accs[lane][r][c])
                        continue
                    acc = builder.load(accs[lane][r][c])
                    new = (builder.call(fma_fn, [x, bs[c], acc]) if fma
                           else builder.fadd(acc, builder.fmul(x, bs[c])))
                    builder.store(new, accs[lane][r][c])

        accs = [[[cgutils.alloca_once(builder, vector) for _ in range(nv)] for _ in range(nr)] for _ in range(nl)]
        for lane in range(nl):
            leaf(lane, builder.add(lo, const(lane)), True)
        full = builder.sdiv(builder.sub(hi, lo), const(nl))      # rows of `lanes` leaves
        with cgutils.for_range_slice(builder, const(1), full, const(1)) as (row, _):
            base = builder.add(lo, builder.mul(row, const(nl)))
            for lane in range(nl):
                leaf(lane, builder.add(base, const(lane)), False)
        base = builder.add(lo, builder.mul(full, const(nl)))
        for lane in range(nl - 1):  # the first (hi - lo) % lanes lanes take one more leaf
            with builder.if_then(builder.icmp_signed("<", builder.add(base, const(lane)), hi)):
                leaf(lane, builder.add(base, const(lane)), False)
        for r in range(nr):
            for c in range(nv):
                stack = []
                for token in postfix:
                    if token == "+":
                        right, left = stack.pop(), stack.pop()
                        stack.append(builder.fadd(left, right))
                    else:
                        stack.append(builder.load(accs[int(token)][r][c]))
                at = builder.add(builder.mul(builder.add(i0, const(r)), q), builder.add(j0, const(c * width)))
                ptr = builder.bitcast(builder.gep(o.data, [at]), vector.as_pointer())
                with builder.if_else(is_first) as (then, otherwise):
                    with then:
                        builder.store(stack[0], ptr, align=size)
                    with otherwise:
                        builder.store(builder.fadd(builder.load(ptr, align=size), stack[0]), ptr, align=size)
        return context.get_dummy_value()
    return types.none(A, B, out, i0, j0, lo, hi, first, rows, vectors, fused, lanes, tree), codegen


def _round_dir(v, precision, emin, emax, rz, subnormals):
    """Round a float64 to `precision` bits (toward zero or nearest even) with
    the exponent range emin..emax (fpspec.arith.fused.round_value, scalar)."""
    if v != v or v == 0.0 or math.isinf(v):
        return v
    e = math.frexp(v)[1]
    shift = precision - 1 - max(e - 1, emin)
    scaled = math.ldexp(v, shift)
    r = math.ldexp(np.trunc(scaled) if rz else np.rint(scaled), -shift)
    if rz:
        over = abs(v) >= 2.0 ** (emax + 1)
    else:
        over = abs(r) > (2.0 - 2.0 ** (1 - precision)) * 2.0 ** emax
    if over:
        r = math.copysign(math.inf, v)
    if not subnormals and abs(r) < 2.0 ** emin:
        r = 0.0
    return r


def _round_native(v):
    return _ACC(v)


def _round_emulated(v):
    return _round_dir(np.float64(v), _ACC_FMT[0], _ACC_FMT[1], _ACC_FMT[2], False, True)


def _term_sum(a, b, k):
    return _round_acc(a[k])


def _term_product(a, b, k):
    # inputs of <= 26 bits: the float64 product is exact, rounded once here
    return _round_acc(np.float64(a[k]) * np.float64(b[k]))


def _term_product_twice(a, b, k):
    # product_format: each product rounded to it first, then to the accumulator
    return _round_acc(_PROD(np.float64(a[k]) * np.float64(b[k])))


def _add_plain(u, v):
    return _round_acc(u + v)


def _add_leaf_plain(acc, a, b, k):
    return _add(acc, _term(a, b, k))


def _add_leaf_fma_native(acc, a, b, k):
    return _fma_into(_ACC(a[k]), _ACC(b[k]), acc)


def _add_leaf_fma_emulated(acc, a, b, k):
    # the exact product (inputs of <= 26 bits) plus acc rounded to odd, then once to the narrow
    # accumulator: one rounding of the exact sum, whatever acc's width (note [wider partial sums])
    return _round_acc(_round_odd_sum(np.float64(a[k]) * np.float64(b[k]), np.float64(acc)))


def _add_exact(u, v):
    # note [wider partial sums]: the exact u + v rounded once, an operand wider than the node or not
    return _round_acc(_round_odd_sum(np.float64(u), np.float64(v)))


def _add_leaves(a, b, i, j):
    return _add_leaf(_term(a, b, i), a, b, j)


def _add_leaves_first(a, b, i, j):
    # product = fma_first: the first leaf fused, the second rounded
    return _add_leaf(_term(a, b, j), a, b, i)


def _padded(a, b, lo, step, m, r, c):
    """The terms lo, lo + step, ... (m of them) with c phantoms after the first r
    (fpspec.compile.loops note [phantoms]): -0.0 in a, 1.0 in b."""
    pa = np.empty(m + c, a.dtype)
    pb = np.empty(m + c, b.dtype)
    for i in range(m + c):
        if i < r or i >= r + c:
            k = lo + (i if i < r else i - c) * step
            pa[i] = a[k]
            pb[i] = b[k]
        else:
            pa[i] = -0.0
            pb[i] = 1.0
    return pa, pb


def _vals(m):
    return np.empty(m, _ACC)


def _vals_wide(m):
    # note [wider partial sums]: a part's list may hold a lone partial sum of the code around it
    return np.empty(m, np.float64)


# Scalar forms of _term and _add_leaf for one term x*y (the column-blocked
# gemm kernel reads A[i, k] and a row of B, not two arrays indexed by k).
def _term_product_xy(x, y):
    return _round_acc(np.float64(x) * np.float64(y))


def _term_product_twice_xy(x, y):
    return _round_acc(_PROD(np.float64(x) * np.float64(y)))


def _add_leaf_plain_xy(acc, x, y):
    return _add(acc, _term_xy(x, y))


def _add_leaf_fma_native_xy(acc, x, y):
    return _fma_into(_ACC(x), _ACC(y), acc)


def _add_leaf_fma_emulated_xy(acc, x, y):
    return _round_acc(_round_odd_sum(np.float64(x) * np.float64(y), np.float64(acc)))


def _add_leaf_fma_same_xy(acc, x, y):
    # the schedule loop's partial sum in the carrier: `_fma_into`'s first case
    return _fma(_ACC(x), _ACC(y), _ACC(acc))


def _add_leaf_fma_wide_xy(acc, x, y):
    # a float64 partial sum into an fp32 node: `_fma_into`'s last case (note [wider partial sums])
    return np.float32(_round_odd_sum(np.float64(_ACC(x)) * np.float64(_ACC(y)), np.float64(acc)))


def _decode(x, emin):
    """(negative, exponent, significand with 23 fraction bits) of a finite value
    of an fp32 subset, the exponent clamped at emin (arith.fused.decode)."""
    negative = math.copysign(1.0, x) < 0.0
    ax = abs(x)
    if ax == 0.0:
        return negative, emin, 0
    exp = max(math.frexp(ax)[1] - 1, emin)
    return negative, exp, int(math.ldexp(ax, 23 - exp))


def _shift(sig, shift, negative):
    """arith.fused.shift_right for one term (shifts clamped to 62)."""
    left = min(max(-shift, 0), 62)
    right = min(max(shift, 0), 62)
    kept = sig >> right
    if _FP_ALIGNED != 0:
        lost = sig - (kept << right)
        if _FP_ALIGNED == 1:
            if lost != 0 and negative:
                kept += 1
        else:
            half = (1 << (right - 1)) if right > 0 else (1 << 62)
            if lost > half or (lost == half and (kept & 1) == 1):
                kept += 1
    return kept << left


def _leaf_index(ks, lo, step, i):
    return ks[i] if ks.shape[0] > 0 else lo + i * step


def _product_term(x, y):
    """(negative, alignment exponent, significand with 46 fraction bits) of the exact
    product x*y (arith.fused.products): flushed subnormal inputs are zeros, and a
    zero operand aligns at _FP_ZEXP under MMA-Sim's convention."""
    if not _FP_SUB_IN:
        if abs(x) < 2.0 ** _FP_EMIN_IN:
            x = 0.0
        if abs(y) < 2.0 ** _FP_EMIN_IN_B:
            y = 0.0
    na, ea, ma = _decode(x, _FP_EMIN_IN)
    nb, eb, mb = _decode(y, _FP_EMIN_IN_B)
    sig = ma * mb
    if _FP_ZEXP_ON:
        exp = (_FP_ZEXP if ma == 0 else ea) + (_FP_ZEXP if mb == 0 else eb)
    else:
        exp = ea + eb if sig != 0 else _ZERO_EXP
    return na != nb, exp, sig


def _shift_floor(v, shift):
    """Signed v * 2^-shift toward -inf (arith.fused._shift_floor, shifts clamped to 62)."""
    return (v >> min(max(shift, 0), 62)) << min(max(-shift, 0), 62)


def _fused_core(a, b, ks, lo, step, cnt, c):
    """One fused node: d = c + sum of the cnt products a[k]*b[k] (k = ks[i], or
    lo + i*step when ks is empty), exactly as fpspec.arith.fused.fused_node."""
    cf = np.float64(c)
    nan = cf != cf
    pinf = cf == math.inf
    ninf = cf == -math.inf
    big_pos = False
    big_neg = False
    for i in range(cnt):
        k = _leaf_index(ks, lo, step, i)
        p = np.float64(a[k]) * np.float64(b[k])
        nan = nan or p != p
        pinf = pinf or p == math.inf
        ninf = ninf or p == -math.inf
        big_pos = big_pos or (p >= 2.0 ** 128 and p != math.inf)
        big_neg = big_neg or (p <= -(2.0 ** 128) and p != -math.inf)
    if nan or (pinf and ninf):
        return math.nan
    if pinf:
        return math.inf
    if ninf:
        return -math.inf
    if _FP_AMD and (big_pos or big_neg):     # note [amd combine]: a finite product past fp32
        return math.nan if big_pos and big_neg else (math.inf if big_pos else -math.inf)
    if not _FP_SUB_OUT and abs(cf) < 2.0 ** _FP_OUT_EMIN:
        cf = 0.0
    cneg, cexp, csig = _decode(cf, _FP_C_EMIN)
    if csig == 0:
        cexp = _FP_ZEXP if _FP_ZEXP_ON else _ZERO_EXP
    if _FP_AMD:
        exact = _amd_exact(a, b, ks, lo, step, cnt, cneg, cexp, csig)
        return _round_dir(exact, _FP_RES_P, _FP_OUT_EMIN, _FP_OUT_EMAX, _FP_RZ, _FP_SUB_OUT)
    emax = _ZERO_EXP
    for i in range(cnt):
        k = _leaf_index(ks, lo, step, i)
        emax = max(emax, _product_term(np.float64(a[k]), np.float64(b[k]))[1])
    if _FP_C_ALIGNED:
        emax = max(emax, cexp)
    emax = max(emax, _FP_FLOOR)
    grid = emax - _FP_F
    total = 0
    for i in range(cnt):
        k = _leaf_index(ks, lo, step, i)
        neg, exp, sig = _product_term(np.float64(a[k]), np.float64(b[k]))
        mag = _shift(sig, grid - (exp - 46), neg)
        total += -mag if neg else mag
    if _FP_C_ALIGNED:
        mag = _shift(csig, grid - (cexp - 23), cneg)
        total += -mag if cneg else mag
        exact = math.ldexp(np.float64(total), grid)
    else:
        exact = _round_odd_sum(math.ldexp(np.float64(total), grid), cf)
    r = _round_dir(exact, _FP_RES_P, _FP_OUT_EMIN, _FP_OUT_EMAX, _FP_RZ, _FP_SUB_OUT)
    return 0.0 if r == 0.0 else r       # the hardware writes +0.0 (note [zero result])


def _amd_exact(a, b, ks, lo, step, cnt, cneg, cexp, csig):
    """The exact value of an AMD CDNA node (arith.fused._amd_combine): _FP_INTERLEAVE
    sub-blocks of strided products aligned apart, floored onto the largest one's grid,
    then the product sum floored to 31 and c to 24 fraction bits below their common top."""
    e_p = _ZERO_EXP
    for j in range(_FP_INTERLEAVE):
        e_j = _ZERO_EXP
        for i in range(j, cnt, _FP_INTERLEAVE):
            k = _leaf_index(ks, lo, step, i)
            e_j = max(e_j, _product_term(np.float64(a[k]), np.float64(b[k]))[1])
        e_p = max(e_p, max(e_j, _FP_FLOOR))
    total = 0
    for j in range(_FP_INTERLEAVE):
        e_j = _ZERO_EXP
        for i in range(j, cnt, _FP_INTERLEAVE):
            k = _leaf_index(ks, lo, step, i)
            e_j = max(e_j, _product_term(np.float64(a[k]), np.float64(b[k]))[1])
        e_j = max(e_j, _FP_FLOOR)
        s_j = 0
        for i in range(j, cnt, _FP_INTERLEAVE):
            k = _leaf_index(ks, lo, step, i)
            neg, exp, sig = _product_term(np.float64(a[k]), np.float64(b[k]))
            mag = _shift(sig, (e_j - _FP_F) - (exp - 46), neg)
            s_j += -mag if neg else mag
        total += _shift_floor(s_j, e_p - e_j)
    e = max(e_p, cexp)
    s31 = _shift_floor(total, (e - 31) - (e_p - _FP_F))
    c24 = _shift_floor(-csig if cneg else csig, (e - 24) - (cexp - 23))
    if _FP_INTERLEAVE > 1 and cexp < e - 25:   # the fp8 path drops a c far below
        c24 = 0
    return math.ldexp(np.float64(s31 + (c24 << 7)), e - 31)


def _round_odd_sum(x, y):
    """x + y rounded to odd (exact for one later rounding to <= 51 bits)."""
    s = x + y
    bb = s - x
    err = (x - (s - bb)) + (y - bb)
    if err != 0.0 and math.isfinite(s):
        bits = _f64_bits(s)
        if bits & 1 == 0:       # the neighbour toward the exact sum: +1 on the bits grows |s|
            s = _bits_f64(bits + 1 if (err > 0) == (s > 0) else bits - 1)
    return s


_NO_KS = np.empty(0, np.int64)


def _fused_range(a, b, lo, step, cnt, c):
    return _ACC(_fused_core(a, b, _NO_KS, lo, step, cnt, c))


@intrinsic
def _f64_bits(typingctx, x):
    """The IEEE bits of the float64 x as an int64."""
    from numba.core import types

    if x != types.float64:
        return None

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], context.get_value_type(types.int64))
    return types.int64(x), codegen


@intrinsic
def _bits_f64(typingctx, x):
    """The float64 whose IEEE bits are the int64 x."""
    from numba.core import types

    if x != types.int64:
        return None

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], context.get_value_type(types.float64))
    return types.float64(x), codegen


# Note [schedules]: a gemv or gemm runs its order once per n in plain
# Python with every value a row number (`_record_plan`), so the rows list
# every operation one output does, in order (leaves of a pad buffer are
# resolved to the inputs' leaves, a phantom to an extra leaf (-0.0, 1.0));
# one compiled loop (`_sched_gemm`, `_sched_gemv`, the same for every
# order) then runs the rows for a tile of outputs at a time, each row for
# every output of the tile before the next row.  Each output gets the
# operations of `_gemm_kernel` / `_rows_kernel` on the same operands in the
# same order (values held exactly in float64 between rows, as in
# `_run_plan`), so the bits are the same; what changes is the compile time
# (one small loop, not a compiled function per part of the order) and the
# speed (the work of a row is a loop over outputs).  A fused node works on
# integers: every element of A and B is decoded once per call
# (`_fused_decode`: exponent, signed significand) instead of once per
# product, and the node's exponent maximum and aligned sum run over the
# tile's outputs in the innermost loop.  Inputs with a NaN or an infinity
# under fused nodes, and orders whose recording fails, take the compiled
# order.  Threads, not a parallel loop: each runs the tasks part, part +
# parts, ... of a kernel compiled with nogil (numba compiles a parallel loop
# for seconds).
# Note [leaf pairs]: a node of two leaves (`_add_leaves`) records as two rows,
# the first leaf's term and then `_add_leaf` of the second (`_add_leaves`
# is that composition, `_add_leaves_first` the same with the leaves
# swapped), so the schedule loop has no branch of its own for it.  The
# term row holds the term exactly (float64 rows), and `_add_leaf` of a
# wider operand rounds the exact sum once (note [wider partial sums]),
# so the bits are those of the one call.
def _decode_bits(x, emin):
    """`_decode` by the bits of the float64 x: (negative, exponent, significand
    with 23 fraction bits) for finite x, the exponent clamped at emin."""
    bits = _f64_bits(x)
    field = (bits >> 52) & 0x7FF
    frac = bits & 0xFFFFFFFFFFFFF
    negative = bits < 0
    if field == 0:       # a zero, or a float64 subnormal: far below emin, its significand 0
        return negative, emin, 0
    e = field - 1023
    exp = max(e, emin)
    shift = exp - e + 29
    return negative, exp, ((frac | (1 << 52)) >> shift) if shift < 63 else 0


def _fused_decode(X, emin, tiny):
    """(exponent, signed significand) of every element of the 2-D X as
    `_product_term` decodes an operand (note [schedules]), by numpy on the bits:
    a flushed subnormal is a zero; a zero has exponent _FP_ZEXP (MMA-Sim's
    convention) or _ZERO_EXP, which keeps every product with a zero factor below
    any other term (its significand is 0)."""
    x = np.asarray(X, np.float64)
    if not _FP_SUB_IN:
        x = np.where(np.abs(x) < tiny, 0.0, x)
    bits = x.view(np.int64)
    field = (bits >> 52) & 0x7FF
    e = field - 1023
    exp = np.maximum(e, emin)
    shift = np.minimum(exp - e + 29, 63)
    sig = np.where((field == 0) | (shift == 63), 0, ((bits & 0xFFFFFFFFFFFFF) | (1 << 52)) >> shift)
    exp = np.where(sig == 0, _FP_ZEXP if _FP_ZEXP_ON else _ZERO_EXP, exp)
    return exp.astype(np.int32), np.where(bits < 0, -sig, sig).astype(np.int32)


def _round_bits(v, precision, emin, over, rz, subnormals, tiny):
    """_round_dir(v, precision, emin, emax, rz, subnormals) by the bits of the float64 v
    (fpspec.compile.backends.numba note [output rounding by the bits]): `over` the
    largest finite value (rz: 2^(emax + 1), what |v| must reach to overflow), `tiny`
    2^emin, below which a result without subnormals is zero."""
    bits = _f64_bits(v)
    field = (bits >> 52) & 0x7FF
    if field == 0x7FF or v == 0.0:       # NaN, infinities and zeros stay
        return v
    if field == 0:                       # a float64 subnormal: far below the last place, a zero
        return math.copysign(0.0, v) if subnormals else 0.0
    e = field - 1023
    q = max(e, emin) - (precision - 1)     # the exponent of the result's last place
    drop = q - (e - 52)
    if drop <= 0:
        r = v
    else:
        kept = 0
        if drop < 63:
            sig = (bits & 0xFFFFFFFFFFFFF) | (1 << 52)
            kept = sig >> drop
            if not rz:
                lost = sig - (kept << drop)
                half = np.int64(1) << (drop - 1)
                if lost > half or (lost == half and (kept & 1) == 1):
                    kept += 1
        r = np.float64(kept) * _bits_f64(np.int64(q + 1023) << 52)
        if bits < 0:
            r = -r
    if (abs(v) >= over) if rz else (abs(r) > over):
        r = math.copysign(math.inf, v)
    if not subnormals and abs(r) < tiny:
        r = 0.0
    return r


def _fused_round(v):
    """A fused node's result rounded to its format (`_round_bits`)."""
    return _round_bits(v, _FP_RES_P, _FP_OUT_EMIN, _FP_OUT_OVER_RZ if _FP_RZ else _FP_OUT_OVER_RN,
                       _FP_RZ, _FP_SUB_OUT, _FP_OUT_TINY)


def _round_out_bits(v):
    """v rounded to the emulated output format: nearest even, subnormals kept, overflow to
    infinity (`_round_bits`)."""
    return _round_bits(np.float64(v), _OUT_P, _OUT_EMIN, _OUT_OVER, False, True, 0.0)


def _fused_tile(ea, ma, eb, mb, i, j0, w, side, at, lo, step, cnt, cv, res, emax, total, cexps, csigs):
    """res[j] = the fused node c + the cnt products A[i, k] * B[k, j0 + j], c = cv[j],
    for j < w, exactly as `_fused_core` (k = side[at + q], or lo + q*step where
    at < 0) from the decoded inputs of `_fused_decode`, all finite; emax, total,
    cexps, csigs: scratch of w elements."""
    for j in range(w):
        cf = cv[j]
        if not _FP_SUB_OUT and abs(cf) < _FP_OUT_TINY:
            cf = 0.0
        cneg, cexp, csig = _decode_bits(cf, _FP_C_EMIN) if cf - cf == 0.0 else (False, 0, 0)
        if csig == 0:
            cexp = _FP_ZEXP if _FP_ZEXP_ON else _ZERO_EXP
        top = max(_ZERO_EXP, _FP_FLOOR)
        emax[j] = max(top, cexp) if _FP_C_ALIGNED else top
        cexps[j] = cexp
        csigs[j] = -csig if cneg else csig
    for q in range(cnt):
        k = side[at + q] if at >= 0 else lo + q * step
        x = np.int64(ea[i, k])
        row = eb[k, j0:j0 + w]
        for j in range(w):
            emax[j] = max(emax[j], x + row[j])
    for j in range(w):       # c on the grid, first: the int64 sum is the same in any order
        c = csigs[j]
        mag = _shift(abs(c), (emax[j] - _FP_F) - (cexps[j] - 23), c < 0) if _FP_C_ALIGNED else 0
        total[j] = -mag if c < 0 else mag
    for q in range(cnt):
        k = side[at + q] if at >= 0 else lo + q * step
        x = np.int64(ea[i, k]) - 46 + _FP_F
        xm = np.int64(ma[i, k])
        erow = eb[k, j0:j0 + w]
        mrow = mb[k, j0:j0 + w]
        for j in range(w):
            prod = xm * mrow[j]
            mag = _shift(abs(prod), emax[j] - (x + erow[j]), prod < 0)
            total[j] += -mag if prod < 0 else mag
    for j in range(w):
        cf = cv[j]
        if cf != cf:
            res[j] = math.nan
            continue
        if cf == math.inf or cf == -math.inf:
            res[j] = cf
            continue
        grid = emax[j] - _FP_F
        if _FP_C_ALIGNED and -1022 <= grid <= 1023:
            exact = np.float64(total[j]) * _bits_f64(np.int64(grid + 1023) << 52)
        elif _FP_C_ALIGNED:
            exact = math.ldexp(np.float64(total[j]), grid)
        else:
            if not _FP_SUB_OUT and abs(cf) < _FP_OUT_TINY:
                cf = 0.0
            exact = _round_odd_sum(math.ldexp(np.float64(total[j]), grid), cf)
        r = _fused_round(exact)
        res[j] = 0.0 if r == 0.0 else r


_SCHEDULED = False       # whether gemv and gemm run by note [schedules]
_SCHED_FUSED = False     # whether the schedule has fused nodes (gemm only)
_SCHEDULES = {}          # (entry, n) -> (rows, side, root, phantoms), or None where recording failed
_SCHED_OPS = ()          # (object, op code, kind) for `_record_plan`
_SCHED_CODES = frozenset()   # the op codes the kernel has a branch for (-1: nothing to run)
_reduce = _sched_gemm = _sched_gemv = None   # the template defines them (note [schedules])
_SCHED_VALUES = 1 << 18  # values a thread holds: the tile of outputs is this over the number of rows
_SCHED_MAX_N = 1 << 18   # the longest order recorded
_NO_CODES = np.empty((0, 0), np.int32)
_NO_INTS = np.empty((0, 4, 0), np.int64)   # a schedule without fused nodes: no integers (note [schedule scratch])


def _schedule(n):
    """The rows of the order at length n for `_sched_gemm` / `_sched_gemv`
    (note [schedules]), recorded once per n; None where recording fails (the
    compiled order then runs, and raises where the order is refused at n)."""
    key = (_reduce, n)
    if key in _SCHEDULES:
        return _SCHEDULES[key]
    if n > _SCHED_MAX_N:     # rows of a few operations per leaf: beyond this, the compiled order
        return None
    if len(_SCHEDULES) >= 64:
        _SCHEDULES.clear()
    try:
        ops, side, root, _ = _record_plan(n, _reduce, _SCHED_OPS)
    except Exception:
        _SCHEDULES[key] = None
        return None
    kinds = {}
    for _, code, kind in _SCHED_OPS:
        if kind == "zero":          # the codes of +0.0 and -0.0
            kinds[code[0]] = kinds[code[1]] = kind
        elif not isinstance(code, tuple):     # a leaf pair records rows of its two codes
            kinds[code] = kind
    # leaves in a pad buffer (fpspec.compile.loops note [phantoms]) are leaves of the inputs,
    # or the phantom (-0.0, 1.0): leaf n of inputs with one more element
    where = {}
    phantoms = False

    def leaf(sel, k):
        return where[k] if sel == 1 else k
    side = [int(k) for k in side]
    for t in range(ops.shape[0]):
        row = ops[t]
        kind = kinds[int(row[0])]
        if kind == "padded":
            sel, lo, step, m, r, c, at = (int(x) for x in row[1:8])
            for i in range(m + c):
                where[at + i] = leaf(sel, lo + (i if i < r else i - c) * step) if i < r or i >= r + c else n
            phantoms = phantoms or c > 0
            row[0] = -1                      # nothing to run
        elif kind == "term":
            row[2] = leaf(row[1], row[2])
            row[1] = 0
        elif kind == "add_leaf":
            row[3] = leaf(row[1], row[3])
            row[1] = 0
        elif kind == "fused_range":       # its leaves to `side`, as a `_fused_core` row has them
            sel, lo, step, cnt, c = (int(x) for x in row[1:6])
            row[1:] = (0, len(side), cnt, c, 0, 0, 0)
            side += [leaf(sel, lo + i * step) for i in range(cnt)]
        elif kind == "fused_core":
            for i in range(int(row[3])):
                side[row[2] + i] = leaf(row[1], side[row[2] + i])
            row[1] = 0
    ran = set(ops[:, 0].tolist()) <= _SCHED_CODES       # every row has its branch in the kernel
    _SCHEDULES[key] = (ops, np.array(side, np.int64), root, phantoms) if ran else None
    return _SCHEDULES[key]


# Note [schedule scratch]: the schedule loop's rows (a float64 per row and output of
# its tile) and a fused node's integers per output are arrays the caller makes,
# one slice per thread: the loop allocates nothing, so a first call compiles no
# `np.empty` for it (a fifth of a second each, for each shape and dtype).
def _sched_scratch(rows, outputs):
    """Each thread's rows for the schedule loop (the tile: at most 64 outputs, at
    most _SCHED_VALUES values a thread; a fused range's partial sums in one more
    row) and its fused nodes' integers (note [schedule scratch])."""
    width = max(1, min(outputs, 64, _SCHED_VALUES // max(rows, 1)))
    parts = _threads()
    ints = np.empty((parts, 4, width), np.int64) if _SCHED_FUSED else _NO_INTS
    return np.empty((parts, rows + 1, width), np.float64), ints


def _scheduled_gemm(A, B, out):
    """A @ B into out by note [schedules], or by `_gemm_rest` where it does not apply."""
    (m, n), p = A.shape, B.shape[1]
    s = _schedule(n)
    if s is None or (_SCHED_FUSED and not (np.isfinite(A).all() and np.isfinite(B).all())):
        _gemm_rest(A, B, out)
        return
    ops, side, root, phantoms = s
    if phantoms:
        A = np.concatenate((A, np.full((m, 1), -0.0, A.dtype)), axis=1)
        B = np.concatenate((B, np.ones((1, p), B.dtype)), axis=0)
    codes = (_fused_decode(A, _FP_EMIN_IN, _FP_IN_TINY) + _fused_decode(B, _FP_EMIN_IN_B, _FP_IN_TINY_B)
             if _SCHED_FUSED else (_NO_CODES,) * 4)
    _run_parallel(_sched_gemm, n, A, B, out, ops, side, root, *_sched_scratch(ops.shape[0], p), *codes)


def _scheduled_gemv(A, x, out):
    """A @ x into out by note [schedules], or by `_rows_kernel` where it does not apply."""
    m, n = A.shape
    s = _schedule(n)
    if s is None:
        _run_parallel(_rows_kernel, n, A, x, out, _plan(n))
        return
    ops, side, root, phantoms = s
    AT = np.ascontiguousarray(A.T)
    if phantoms:
        AT = np.concatenate((AT, np.full((1, m), -0.0, AT.dtype)), axis=0)
        x = np.concatenate((x, np.ones(1, x.dtype)))
    _run_parallel(_sched_gemv, n, AT, x, out, ops, side, root, _sched_scratch(ops.shape[0], m)[0])


def _table_step(a, b, lo, step, size, slots, kids, offs, fused, s):
    """Step s of a literal tree over leaves: slot i < size is leaf lo + i*step."""
    first, last = offs[s], offs[s + 1]
    if fused[s]:
        ks = np.empty(last - first, np.int64)
        cnt = 0
        c = _ZERO
        for i in range(first, last):
            if kids[i] < size:
                ks[cnt] = lo + kids[i] * step
                cnt += 1
            else:
                c = slots[kids[i]]
        if cnt == last - first and cnt == _FP_W + 1:   # a chain's first group of one (arith.evaluate)
            c = _ACC(_fused_core(a, b, ks[:1], lo, step, 1, _ZERO))
            return _ACC(_fused_core(a, b, ks[1:cnt], lo, step, cnt - 1, c))
        return _ACC(_fused_core(a, b, ks[:cnt], lo, step, cnt, c)) if cnt > 0 else c
    return _table_step_binary(a, b, lo, step, size, slots, kids, offs, fused, s)


def _table_step_binary(a, b, lo, step, size, slots, kids, offs, fused, s):
    """`_table_step` for tables without fused nodes (compiles without the fused model)."""
    i, j = kids[offs[s]], kids[offs[s] + 1]
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
    if _INIT_ZERO:     # note [init +0.0]: -0.0 becomes +0.0
        acc = _add(acc, _ZERO)
    return _round_out(acc)


def _round_out_native(v):
    return _OUT_CARRY(v)


def _round_out_emulated(v):
    return _round_dir(np.float64(v), _OUT_FMT[0], _OUT_FMT[1], _OUT_FMT[2], False, True)


# stand-ins so this module imports; the template binds the chosen variants
_round_acc = _round_native
_term = _term_sum
_add = _add_plain
_add_leaf = _add_leaf_plain
_round_out = _round_out_native
_term_xy = _term_product_xy
_add_leaf_xy = _add_leaf_plain_xy


# ---------------------------------------------------------------- the public functions
# Plain Python: check the arguments, then call a compiled kernel that runs one
# output element per iteration, on threads (`_run_parallel`).

_NAME = "spec"
N_MIN, N_MAX = 1, None
_IN_DTYPE = np.float32
_IN_NAME = "fp32"
_IN_GRID = None
_SUM_FUSED = False   # a sum through fused nodes: each x_k enters as the product x_k * 1
_IN_CARRY = np.float32
_OUT_DTYPE = np.float32
_OUT_CARRY = np.float32
_GEMM_COLUMNS_MIN = None   # the least n for _gemm_columns_kernel (None: the spec has none)
_gemm_columns_kernel = None
_GEMM_TILE = None   # (rows, columns, block, lanes) of `_gemm_tiles_kernel` (None: the spec has none)
_gemm_tiles_kernel = None
_GEMM_LONE = 0      # b: at n % b == 1 (n > b) the last block is one leaf, fused: one output at a time


def _gemm_tiled(A, B, out):
    """A @ B into out: `_gemm_tiles_kernel` up to the last whole tile of
    columns, the columns left over (and lengths whose last block has a lane
    of fewer than two leaves, note [lone leaves]) by `_gemm_rest` (note
    [gemm tiles])."""
    (m, n), p = A.shape, B.shape[1]
    rows, columns, block, lanes = _GEMM_TILE
    short = n % block if block else n
    if (lanes > 1 and 0 < short < 2 * lanes) or (_GEMM_LONE and n > _GEMM_LONE and n % _GEMM_LONE == 1):
        _gemm_rest(A, B, out)
        return
    pt = p - p % columns
    if pt > 0:
        _run_parallel(_gemm_tiles_kernel, n, A, B, out)
    if pt < p:
        edge = np.empty((m, p - pt), out.dtype)
        _gemm_rest(A, np.ascontiguousarray(B[:, pt:]), edge)
        out[:, pt:] = edge


def _gemm_rest(A, B, out):
    """A @ B into out without tiles: by columns where the order allows (note
    [gemm by columns]), else one output at a time."""
    n = A.shape[1]
    if _GEMM_COLUMNS_MIN is not None and n >= _GEMM_COLUMNS_MIN and not (_GEMM_LONE and n > _GEMM_LONE
                                                                        and n % _GEMM_LONE == 1):
        _run_parallel(_gemm_columns_kernel, A.shape[1], A, B, out)
    else:
        _run_parallel(_gemm_kernel, A.shape[1], A, np.ascontiguousarray(B.T), out, _plan(A.shape[1]))


def _threads():
    """The threads `_run_parallel` runs a kernel on: numba's thread count."""
    from numba import config

    return max(1, config.NUMBA_NUM_THREADS)


def _run_parallel(kernel, n, *args):
    """kernel(*args, part, parts) on `parts` threads at once, `_threads()` of them
    (a kernel does its tasks part, part + parts, ...; compiled with nogil); a
    ValueError raised in a kernel is raised again naming n."""
    import threading

    parts = _threads()
    errors = []

    def run(part):
        try:
            kernel(*args, part, parts)
        except BaseException as e:      # raised again in the caller's thread
            errors.append(e)
    threads = [threading.Thread(target=run, args=(r,)) for r in range(1, parts)]
    for t in threads:
        t.start()
    run(0)
    for t in threads:
        t.join()
    if errors:
        if isinstance(errors[0], ValueError):
            raise ValueError(f"at n = {n}: {errors[0]}") from None
        raise errors[0]


def _carried(x):
    """A checked input widened exactly to the dtype the kernels read (float16 -> float32), in C order;
    a 0-d array stays 0-d (the caller refuses it)."""
    return np.asarray(x, dtype=_IN_CARRY, order="C")


def _one_kernel(x, y, plan):
    return _final(_order(x, y, x.shape[0], plan))


def _rows_kernel(A, x, out, plan, part=0, parts=1):
    for i in prange(part, A.shape[0], parts):
        out[i] = _final(_order(A[i], x, x.shape[0], plan))


def _columns_kernel(XT, ones, out, plan, part=0, parts=1):
    for i in prange(part, XT.shape[0], parts):
        out[i] = _final(_order(XT[i], ones if _SUM_FUSED else XT[i], XT.shape[1], plan))


def _gemm_kernel(A, BT, out, plan, part=0, parts=1):
    p = BT.shape[0]
    for t in prange(part, A.shape[0] * p, parts):
        i, j = t // p, t % p
        out[i, j] = _final(_order(A[i], BT[j], A.shape[1], plan))


def api_sum(x):
    """The spec's sum of the 1-D array x."""
    x = _carried(_input(x, "x"))
    _shape("x", x, 1)
    _length(x.shape[0], "x")
    return _OUT_DTYPE(_one_kernel(x, np.ones_like(x) if _SUM_FUSED else x, _plan(x.shape[0])))


def api_sums(X):
    """The spec's sum of every column of X (each its own accumulation)."""
    X = _carried(_input(X, "X"))
    _shape("X", X, 2)
    _length(X.shape[0], "X")
    out = np.empty(X.shape[1], _OUT_CARRY)
    _run_parallel(_columns_kernel, X.shape[0], np.ascontiguousarray(X.T), np.ones(X.shape[0], X.dtype), out,
              _plan(X.shape[0]))
    return out.astype(_OUT_DTYPE)


def api_dot(x, y):
    """The spec's dot product of the 1-D arrays x and y."""
    x, y = _carried(_input(x, "x")), _carried(_input(y, "y", True))
    _shape("x", x, 1)
    _shape("y", y, 1)
    _operands("dot", x, y)
    return _OUT_DTYPE(_one_kernel(x, y, _plan(x.shape[0])))


def api_gemv(A, x):
    """A @ x, each output element in the spec's order over the columns of A."""
    A, x = _carried(_input(A, "A")), _carried(_input(x, "x", True))
    _shape("A", A, 2)
    _shape("x", x, 1)
    _operands("gemv", A, x)
    out = np.empty(A.shape[0], _OUT_CARRY)
    if _SCHEDULED:
        _scheduled_gemv(A, x, out)           # note [schedules]
    else:
        _run_parallel(_rows_kernel, x.shape[0], A, x, out, _plan(x.shape[0]))
    return out.astype(_OUT_DTYPE)


def api_gemm(A, B):
    """A @ B, each output element in the spec's order over the inner dimension."""
    A, B = _carried(_input(A, "A")), _carried(_input(B, "B", True))
    _shape("A", A, 2)
    _shape("B", B, 2)
    _operands("gemm", A, B)
    out = np.empty((A.shape[0], B.shape[1]), _OUT_CARRY)
    if _GEMM_TILE is not None:
        _gemm_tiled(A, B, out)               # note [gemm tiles]
    elif _SCHEDULED:
        _scheduled_gemm(A, B, out)           # note [schedules]
    else:
        _gemm_rest(A, B, out)
    return out.astype(_OUT_DTYPE)


# ---------------------------------------------------------------- plans (note [plans] in fpspec.compile.backends.numba)

_NO_PLAN = (np.empty((0, 8), np.int64), np.empty(0, np.int64), 0, 0)
_PLANS = {}
_PLAN_OPS = ()       # (object the generated code calls, op code, kind) for every recorded operation
_PLAN_ENTRY = None   # the entry function of the order (plain Python) where the order has a plan


class _PlanTerms:
    """A term array while a plan is recorded: sel 0 the replica's inputs,
    sel 1 the pad buffer, whose element base + k is this array's element k."""
    __slots__ = ("sel", "base")

    def __init__(self, sel, base):
        self.sel = sel
        self.base = base


class _PlanValues(list):
    """A list of values while a plan is recorded: plan row numbers, and the op
    code of the `_vals` that made it (its carrier)."""

    dtype = np.int64    # a stack of values made like the list (`np.empty(k, vals.dtype)`) holds row numbers

    def __init__(self, carrier, m):
        super().__init__([0] * m)
        self.carrier = carrier


class _PlanZero(int):
    """`_ZERO` while a plan is recorded: its plan row; its negation (a phantom,
    -0.0, of fpspec.compile.loops note [phantoms]) records a row of its own
    (the negated row number would name +0.0's row, or another row)."""

    def __new__(cls, row, negate):
        zero = super().__new__(cls, row)
        zero.negate = negate
        return zero

    def __neg__(self):
        return self.negate()


def _plan(n):
    """The plan `_run_plan` executes for length n (recorded once per n), or
    `_NO_PLAN` where the order needs none."""
    if _PLAN_ENTRY is None:
        return _NO_PLAN
    key = (_PLAN_ENTRY, n)      # arms of a positional order share `_PLANS` (fpspec.compile.positions)
    if key not in _PLANS:
        if len(_PLANS) >= 64:
            _PLANS.clear()
        _PLANS[key] = _record_plan(n, _PLAN_ENTRY, _PLAN_OPS)   # arms share one `_record_plan`
    return _PLANS[key]


def _record_plan(n, entry=None, table=None):
    """Run the order's plain-Python functions at length n with every value a
    row number of the plan: each operation on values or leaves appends a row
    (op code, operands); a call of a compiled function appends one row.
    `entry`, `table`: another entry function and (object, op code, kind)
    table than the plan's (note [schedules])."""
    from types import FunctionType

    rows, side, pad = [], [], [0]
    g = dict(globals())

    def op(*row):
        rows.append(row + (0,) * (8 - len(row)))
        return len(rows) - 1

    def recorder(code, kind):
        if kind == "term":
            return lambda a, b, k: op(code, a.sel, a.base + k)
        if kind == "add":
            return lambda u, v: op(code, u, v)
        if kind == "add_leaf":
            return lambda acc, a, b, k: op(code, a.sel, acc, a.base + k)
        if kind == "add_leaves":
            return lambda a, b, i, j: op(code, a.sel, a.base + i, a.base + j)
        if kind in ("leaf_pair", "leaf_pair_first"):     # note [leaf pairs]
            term, add_leaf = recorder(code[0], "term"), recorder(code[1], "add_leaf")
            if kind == "leaf_pair_first":       # product = fma_first: the first leaf fused, the second rounded
                return lambda a, b, i, j: add_leaf(term(a, b, j), a, b, i)
            return lambda a, b, i, j: add_leaf(term(a, b, i), a, b, j)
        if kind == "value":
            return lambda v: op(code, v)
        if kind == "vals":
            return lambda m: _PlanValues(code, m)
        if kind == "fused_range":
            return lambda a, b, lo, step, cnt, c: op(code, a.sel, a.base + lo, step, cnt, c)
        if kind == "fused_core":
            def fused_core(a, b, ks, lo, step, cnt, c):
                at = len(side)
                side.extend(a.base + (ks[i] if ks.shape[0] > 0 else lo + i * step) for i in range(cnt))
                return op(code, a.sel, at, cnt, c)
            return fused_core
        if kind == "padded":
            def padded(a, b, lo, step, m, r, c):
                at = pad[0]
                pad[0] += m + c
                op(code, a.sel, a.base + lo, step, m, r, c, at)
                return _PlanTerms(1, at), _PlanTerms(1, at)
            return padded
        if kind == "lane_folds":    # note [vector lanes] in fpspec.compile.loops, row by row
            term, add_leaf = recorder(code[0], "term"), recorder(code[1], "add_leaf")

            def lane_folds(a, lo, rows, k):
                lanes = [term(a, None, lo + j) for j in range(k)]
                for r in range(1, rows):
                    lanes = [add_leaf(lanes[j], a, None, lo + r * k + j) for j in range(k)]
                return tuple(lanes)
            return lane_folds
        if kind == "call_L":
            return lambda a, b, lo, step, m: op(code, a.sel, a.base + lo, step, m)
        if kind == "call_L1":
            return lambda a, b, lo, m: op(code, a.sel, a.base + lo, m)
        if kind == "call_T":
            def call_tagged(a, b, vals, tags, off, step, m):
                at = len(side)
                side.extend(vals[off + i * step] for i in range(m))
                side.extend(a.base + tags[off + i * step] if tags[off + i * step] >= 0 else tags[off + i * step]
                            for i in range(m))
                return op(code, a.sel, at, m, vals.carrier)
            return call_tagged
        if kind == "call_V":
            def call_values(vals, off, step, m):
                at = len(side)
                side.extend(vals[off + i * step] for i in range(m))
                return op(code, at, m, vals.carrier)
            return call_values
        raise AssertionError(kind)

    entry = _PLAN_ENTRY if entry is None else entry
    by_object = {id(obj): (code, kind) for obj, code, kind in (_PLAN_OPS if table is None else table)}
    for name, value in globals().items():
        if id(value) in by_object:
            code, kind = by_object[id(value)]
            g[name] = (_PlanZero(op(code[0]), lambda negated=code[1]: op(negated)) if kind == "zero"
                       else recorder(code, kind))
        else:
            py = getattr(value, "py_func", value)
            if isinstance(py, FunctionType):
                g[name] = FunctionType(py.__code__, g, py.__name__, py.__defaults__, py.__closure__)
    whole = _PlanTerms(0, 0)
    root = FunctionType(getattr(entry, 'py_func', entry).__code__, g)(whole, whole, n)
    return np.array(rows, np.int64).reshape(-1, 8), np.array(side, np.int64), root, pad[0]


prange = range   # the template imports numba's prange
