"""Numba runtime of binned replicas (embedded: the replica imports only numpy and numba).

Globals the replica defines (fpspec.compile.binned.settings): _DT (the format's dtype), _FOLD, _BINS
(ReproBLAS's table in _DT), _BINS64 and _ULPS (float64), _P, _W, _EMAX, _MAXI, _COMPRESSION,
_HALF_EXPANSION, _EXPANSION, _SINGLE, _Q (carry unit: 2^_Q ulps), _EXP_SHIFT, _INF_BITS, _ABS_MASK,
_SIXTHS (_BINS64 / 6, as convert divides), _PLAIN (the least index convert does not scale),
_PRODUCT (terms are x*y rounded, else x), _BLOCK, _GEMM_TILE (gemm's lanes; a tile's packed panel
of B, K x 128 doubles, stays in a core's second-level cache), _ENDURANCE (deposits a primary takes
before it must be counted: 2^(p - W - 2)), _REGS and _GEMM_REGS (the deposits in vector
registers, _deposit_regs and _lane_regs: lanes a vector, vectors side by side; 0 vectors: none;
_REGS then the prefetch distance and its cache level).

One pass over the terms, a block of _BLOCK at a time (fpspec.arith.binned note [exact slices]): the
block's largest |term| (an integer max over the bit patterns: LLVM vectorizes it, and inf / nan show
as the largest patterns), the accumulator's index moved up if needed, then every term's slices added
counted in ulps of its bin (the difference of the bit patterns of the primary after and before:
integer sums, which LLVM vectorizes without reassociating anything), then carried into int64
(carry, low) pairs; with _REGS, the block's terms go to ReproBLAS's primaries held in vector
registers instead (_deposit_regs), counted once a block.  Gemm deposits most outputs as lanes
instead (_gemm_range).  The block loops
(_block_amax, _deposit, _deposit_top, _lane_steps) are written out by fpspec.compile.binned for the
spec's fold, with the term inline.  A state is
int64[_STATE = 2 + 3 _FOLD]: index (-1: empty), flags (1 nan, 2 +inf, 4 -inf), low[_FOLD],
carry[_FOLD], then scratch; states merge exactly in any order.
"""
import math

import numpy as np
from llvmlite import ir
from concurrent.futures import ThreadPoolExecutor

from numba import get_num_threads, njit, types
from numba.core import cgutils
from numba.extending import intrinsic

_DT = np.float64
_FOLD = 3
_STATE = 2 + 3 * _FOLD
_BINS = np.zeros(104)
_BINS64 = np.zeros(104)
_ULPS = np.zeros(104)
_SIXTHS = _BINS64 / 6.0
_PLAIN = 4
_P, _W, _EMAX, _MAXI, _Q, _EXP_SHIFT, _INF_BITS = 53, 40, 1023, 51, 50, 52, 0x7FF0000000000000
_COMPRESSION, _HALF_EXPANSION, _EXPANSION = 2.0 ** -14, 2.0 ** 13, 2.0 ** 14
_SINGLE = False
_PRODUCT = False
_ABS_MASK = 0x7FFFFFFFFFFFFFFF
_BLOCK = 4096
_GEMM_TILE = 128
_ENDURANCE = 2048
_REGS = (4, 4, 1024, 3)
_GEMM_REGS = (4, 4)
_jit = njit(fastmath=False)
_nogil = njit(fastmath=False, nogil=True)


def _vector_bits():
    """The width of this CPU's widest vector registers (512 bits with AVX-512, else 256), as numba
    compiles for it: the deposits in registers use vectors of it (the bits do not depend on it)."""
    from llvmlite import binding
    from numba.core import config

    features = config.CPU_FEATURES or binding.get_host_cpu_features().flatten()
    return 512 if "+avx512f" in features.split(",") else 256


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


@intrinsic
def _prefetch(typingctx, arr, i):
    """Ask for the cache line of arr[i] (no bounds: a prefetch never faults)."""
    def codegen(context, builder, sig, args):
        data = context.make_array(sig.args[0])(context, builder, args[0]).data
        i8p = builder.bitcast(builder.gep(data, [args[1]]), ir.IntType(8).as_pointer())
        i32 = ir.IntType(32)
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ir.VoidType(), [i8p.type, i32, i32, i32]),
                                            "llvm.prefetch.p0i8")
        builder.call(fn, [i8p, i32(0), i32(3), i32(1)])   # read, keep in all levels, data
        return context.get_dummy_value()

    return types.none(arr, types.intp), codegen


@intrinsic
def _deposit_regs(typingctx, X, Y, bins, counts):
    """The deposit of the terms of X (times Y when _PRODUCT) as ReproBLAS does it (s = P + (r|1);
    r += P - s; P = s), the primaries P of every slot held in vector registers: _REGS = (lanes a
    vector, vectors side by side, terms ahead whose lines are asked for (0: none), the cache level
    they go to as llvm.prefetch's locality).  A term goes
    to lane i mod (lanes * vectors); X.shape[0] is a multiple of that, and at most _ENDURANCE
    terms go to a lane (P stays in its binade: fpspec.arith.binned note [exact slices]).  Adds to
    counts[j] each slot's slices in ulps (the primaries' patterns less the bin's, bins =
    _BINS[index:]); returns the largest |term| pattern, or -1 when a primary is not finite (an
    inf or a nan came, or a term far above the bin: the caller looks at the block again).  No
    count per term and a max that is one vector instruction: fewer instructions than
    _deposit's loop, and the same bits."""
    def codegen(context, builder, sig, args):
        x_arg, y_arg, bins_arg, counts_arg = args
        width = 64 if sig.args[0].dtype == types.float64 else 32
        lanes, group, ahead, locality = _REGS
        dt = context.get_data_type(sig.args[0].dtype)
        it, i64, i32 = ir.IntType(width), ir.IntType(64), ir.IntType(32)
        vty, ity = ir.VectorType(dt, lanes), ir.VectorType(it, lanes)
        one = ir.Constant(ity, [1] * lanes)
        mask = ir.Constant(ity, [(1 << (width - 1)) - 1] * lanes)
        xa = context.make_array(sig.args[0])(context, builder, x_arg)
        x_data = xa.data
        y_data = context.make_array(sig.args[1])(context, builder, y_arg).data
        bins_data = context.make_array(sig.args[2])(context, builder, bins_arg).data
        counts_data = context.make_array(sig.args[3])(context, builder, counts_arg).data
        n = cgutils.unpack_tuple(builder, xa.shape, 1)[0]
        step = lanes * group
        zeros = ir.Constant(ir.VectorType(i32, lanes), [0] * lanes)

        def splat(v):
            return builder.shuffle_vector(builder.insert_element(ir.Constant(vty, ir.Undefined), v, i32(0)),
                                          ir.Constant(vty, ir.Undefined), zeros)

        def vload(data, idx):
            return builder.load(builder.bitcast(builder.gep(data, [idx]), vty.as_pointer()), align=width // 8)

        bins = [splat(builder.load(builder.gep(bins_data, [i64(j)]))) for j in range(_FOLD)]
        slots = []
        for j in range(_FOLD):
            for v in range(group):
                slot = cgutils.alloca_once(builder, vty)
                builder.store(bins[j], slot)
                slots.append((j, v, slot))
        highs = []
        for v in range(group):
            high = cgutils.alloca_once(builder, vty)
            builder.store(ir.Constant(vty, [0.0] * lanes), high)
            highs.append(high)
        fetch = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(ir.VoidType(), [ir.IntType(8).as_pointer(), i32, i32, i32]),
            "llvm.prefetch.p0i8")
        per_line = 64 // (width // 8)
        with cgutils.for_range(builder, builder.udiv(n, i64(step))) as loop:
            base = builder.mul(loop.index, i64(step))
            if ahead:
                for data in (x_data, y_data) if _PRODUCT else (x_data,):
                    for o in range(0, step, per_line):
                        at = builder.gep(data, [builder.add(base, i64(ahead + o))])
                        builder.call(fetch, [builder.bitcast(at, ir.IntType(8).as_pointer()), i32(0), i32(locality), i32(1)])
            for v in range(group):
                at = builder.add(base, i64(v * lanes))
                r = vload(x_data, at)
                if _PRODUCT:
                    r = builder.fmul(r, vload(y_data, at))
                a = builder.bitcast(builder.and_(builder.bitcast(r, ity), mask), vty)
                h = builder.load(highs[v])
                builder.store(builder.select(builder.fcmp_ordered(">", a, h), a, h), highs[v])
                for j in range(_FOLD):
                    slot = slots[j * group + v][2]
                    p = builder.load(slot)
                    s = builder.fadd(p, builder.bitcast(builder.or_(builder.bitcast(r, ity), one), vty))
                    if j < _FOLD - 1:
                        r = builder.fadd(r, builder.fsub(p, s))
                    builder.store(s, slot)
        # slot 0 not finite: an inf or a nan (r|1 of an inf is a nan), or an overflow
        ok = ir.Constant(ir.IntType(1), 1)
        for v in range(group):
            p = builder.load(slots[v][2])
            d = builder.fsub(p, p)
            finite = builder.fcmp_ordered("==", d, d)
            for t in range(lanes):
                ok = builder.and_(ok, builder.extract_element(finite, i32(t)))
        for j in range(_FOLD):
            total = ir.Constant(ity, [0] * lanes)
            m = builder.bitcast(bins[j], ity)
            for v in range(group):
                total = builder.add(total, builder.sub(builder.bitcast(builder.load(slots[j * group + v][2]), ity), m))
            where = builder.gep(counts_data, [i64(j)])
            acc = builder.load(where)
            for t in range(lanes):
                acc = builder.add(acc, builder.sext(builder.extract_element(total, i32(t)), i64)
                                  if width < 64 else builder.extract_element(total, i32(t)))
            builder.store(acc, where)
        h = builder.load(highs[0])
        for v in range(1, group):
            o = builder.load(highs[v])
            h = builder.select(builder.fcmp_ordered(">", o, h), o, h)
        best = builder.extract_element(h, i32(0))
        for t in range(1, lanes):
            o = builder.extract_element(h, i32(t))
            best = builder.select(builder.fcmp_ordered(">", o, best), o, best)
        bits = builder.bitcast(best, it)
        bits = bits if width == 64 else builder.zext(bits, i64)
        return builder.select(ok, bits, i64(-1))

    return types.int64(X, Y, bins, counts), codegen


@intrinsic
def _lane_regs(typingctx, A, Bf, N, k0, k1, col, P, g):
    """_lane_steps for the lanes g .. g + L - 1 of P (L: _GEMM_REGS = (lanes a vector, vectors)),
    their primaries held in vector registers across the k steps k0 .. k1 - 1: products A[k] *
    Bf[k * N + col + l] (_gemm_range passes a packed panel of B: its rows contiguous, read in
    order), each deposited as ReproBLAS does (s = P + (r|1); r += P - s; P = s), no loads or
    stores of P between the k steps; the bits do not depend on it."""
    def codegen(context, builder, sig, args):
        a_arg, b_arg, n, first, last, col_, p_arg, g_ = args
        width = 64 if sig.args[0].dtype == types.float64 else 32
        lanes, group = _GEMM_REGS
        if not group:                   # gemm's lanes all go through _lane_steps
            return context.get_dummy_value()
        dt = context.get_data_type(sig.args[0].dtype)
        vty, ity, i64, i32 = ir.VectorType(dt, lanes), ir.VectorType(ir.IntType(width), lanes), ir.IntType(64), ir.IntType(32)
        one = ir.Constant(ity, [1] * lanes)
        a_data = context.make_array(sig.args[0])(context, builder, a_arg).data
        b_data = context.make_array(sig.args[1])(context, builder, b_arg).data
        p_ary = context.make_array(sig.args[6])(context, builder, p_arg)
        tile = cgutils.unpack_tuple(builder, p_ary.shape, 2)[1]

        def at(data, idx):
            return builder.bitcast(builder.gep(data, [idx]), vty.as_pointer())

        slots = []
        for f in range(_FOLD):
            for v in range(group):
                where = at(p_ary.data, builder.add(builder.mul(i64(f), tile), builder.add(g_, i64(v * lanes))))
                slot = cgutils.alloca_once(builder, vty)
                builder.store(builder.load(where, align=width // 8), slot)
                slots.append((f, v, slot, where))
        with cgutils.for_range(builder, builder.sub(last, first)) as loop:
            k = builder.add(loop.index, first)
            a = builder.insert_element(ir.Constant(vty, ir.Undefined), builder.load(builder.gep(a_data, [k])), i32(0))
            a = builder.shuffle_vector(a, ir.Constant(vty, ir.Undefined), ir.Constant(ir.VectorType(i32, lanes), [0] * lanes))
            base = builder.add(builder.mul(k, n), col_)
            rs = [builder.fmul(a, builder.load(at(b_data, builder.add(base, i64(v * lanes))), align=width // 8))
                  for v in range(group)]
            # slot by slot, the vectors side by side: independent chains next to each other
            for f in range(_FOLD):
                for v in range(group):
                    slot = slots[f * group + v][2]
                    p = builder.load(slot)
                    s = builder.fadd(p, builder.bitcast(builder.or_(builder.bitcast(rs[v], ity), one), vty))
                    if f < _FOLD - 1:
                        rs[v] = builder.fadd(rs[v], builder.fsub(p, s))
                    builder.store(s, slot)
        for _, _, slot, where in slots:
            builder.store(builder.load(slot), where, align=width // 8)
        return context.get_dummy_value()

    return types.none(A, Bf, N, k0, k1, col, P, g), codegen


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
            m = _deposit(Xb, Yb, hint, counts)
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
            m = _deposit(Xb, Yb, state[0], counts)
        if m >= _INF_BITS:
            # an inf or a nan among the block's terms (flags: 1 nan, 2 +inf, 4 -inf); written
            # here, not as a function of its own: one compiled function less at the first call
            for i in range(b0, b1):
                t = X[i] * Y[i] if _PRODUCT else X[i]
                if t != t:
                    state[1] |= 1
                elif t == np.inf:
                    state[1] |= 2
                elif t == -np.inf:
                    state[1] |= 4
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
        _deposit(Xb, Yb, j, counts)
        for k in range(_FOLD):
            _carry_in(state, k, counts[k])


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
    """The sum the rows of `states` hold together (merged in order; any order gives the same).  Run
    in Python (the compiled functions' Python bodies): a few operations a thread, and at the first
    call only `convert` compiles here (_shift_state and _carry_in came with _partial), not a
    compiled merge of its own."""
    total = np.zeros(_STATE, np.int64)
    total[0] = -1
    for p in range(states.shape[0]):
        _merge_into.py_func(total, states[p])
    return _finish.py_func(total, np.empty(2 * _FOLD))


def _rows_range(A, x, out, r0, r1):
    """out[i] = binned sum of the terms of row i of A (times x when _PRODUCT), rows r0..r1-1."""
    state = np.zeros(_STATE, np.int64)
    fields = np.empty(2 * _FOLD)
    for i in range(r0, r1):
        _partial(A[i], x, 0, A.shape[1], state)
        out[i] = _finish(state, fields)


def _row_stats(A, amax, ka, r0, r1):
    """For rows r0..r1-1 of A: amax[i] = max_k |A[i, k]| (inf when a nan is there) and ka[i]
    the first k where it is."""
    for i in range(r0, r1):
        h = _DT(0)
        at = 0
        for k in range(A.shape[1]):
            a = abs(A[i, k])
            if not a <= h:
                h = a if a == a else _DT(np.inf)
                at = k
        amax[i] = h
        ka[i] = at


def _column_stats(B, bmax, kb, j0, j1):
    """_row_stats of the columns j0..j1-1 of B."""
    for j in range(j0, j1):
        bmax[j] = 0
        kb[j] = 0
    for k in range(B.shape[0]):
        for j in range(j0, j1):
            a = abs(B[k, j])
            if not a <= bmax[j]:
                bmax[j] = a if a == a else _DT(np.inf)
                kb[j] = k


def _gemm_range(A, B, Bf, amax, ka, bmax, kb, out, r0, r1):
    """Rows r0..r1-1 of A @ B (Bf: B flat), every element a binned dot, _GEMM_TILE columns side by
    side.

    An element's index is known before its products are deposited when the bound amax[i] *
    bmax[j] (rounded: at least every |product|, so its index at most theirs) and a product known
    to be there (A[i, ka[i]] * B[ka[i], j] or A[i, kb[j]] * B[kb[j], j]: at most the largest
    |product|, so its index at least theirs) fall in the same bin.  Then each output is a lane:
    its K products deposited into its primaries P (ReproBLAS's own accumulation, exact slices:
    fpspec.arith.binned note [exact slices]) over the tile's contiguous row of B, a few k steps a
    pass, counted in ulps every _ENDURANCE steps (before P can leave its binade).  No reduction,
    no largest |product| kept: the loop is elementwise over the lanes.  Runs of _GEMM_REGS lanes
    go through _lane_regs over a packed copy of the tile's columns of B (made once a tile), their
    primaries in registers across the k steps; the lanes left over through _lane_steps.  Other elements (a bound in
    the top bin, an inf or a nan, bounds in two bins) take the general path (_partial): the same
    bits."""
    K = A.shape[1]
    N = B.shape[1]
    P = np.empty((_FOLD, _GEMM_TILE), _DT)
    counts = np.zeros((_FOLD, _GEMM_TILE), np.int64)
    index = np.empty(_GEMM_TILE, np.int64)
    state = np.zeros(_STATE, np.int64)
    fields = np.empty(2 * _FOLD)
    column = np.empty(K, _DT)
    span = max(_GEMM_REGS[0] * _GEMM_REGS[1], 1)
    # the tile's columns of B, a run of span columns after another, each run's rows contiguous
    panel = np.empty((_GEMM_TILE // span if _GEMM_REGS[1] else 0, K * span), _DT)
    for j0 in range(0, N, _GEMM_TILE):
        w = min(_GEMM_TILE, N - j0)
        if _GEMM_REGS[1]:
            for q in range(w // span):
                for k in range(K):
                    for l in range(span):
                        panel[q, k * span + l] = B[k, j0 + q * span + l]
        for i in range(r0, r1):
            Ai = A[i]
            am = amax[i]
            kai = ka[i]
            for t in range(w):
                j = j0 + t
                bound = _bits(am * bmax[j])
                h = -1
                if bound < _INF_BITS and K > 0:
                    h = _index_of_bits(bound)
                    # |x * y| = |x| * |y| bit for bit, and bmax[j] = |B[kb[j], j]|: no load far in B
                    known = max(abs(Ai[kai] * B[kai, j]), abs(Ai[kb[j]]) * bmax[j])
                    if h == 0 or _index_of_bits(_bits(known)) != h:
                        h = -1
                index[t] = h
                for f in range(_FOLD):
                    P[f, t] = _BINS[max(h, 1) + f]
                    counts[f, t] = 0
            for k0 in range(0, K, _ENDURANCE):
                k1 = min(k0 + _ENDURANCE, K)
                g = 0
                if _GEMM_REGS[1]:
                    while g + span <= w:
                        _lane_regs(Ai, panel[g // span], span, k0, k1, 0, P, g)
                        g += span
                _lane_steps(Ai, Bf, N, k0, k1, j0, g, w, P)
                for f in range(_FOLD):
                    for t in range(w):
                        m = _BINS[max(index[t], 1) + f]
                        counts[f, t] += _bits(P[f, t]) - _bits(m)
                        P[f, t] = m
            _finish_plain(index, counts, out[i, j0:j0 + w])
            for t in range(w):
                j = j0 + t
                h = index[t]
                if h >= _PLAIN:
                    continue
                if h >= 0:
                    # _finish of the state (h, counts): low = count mod 2^_Q, carry = the rest
                    pri = fields[:_FOLD]
                    car = fields[_FOLD:]
                    for f in range(_FOLD):
                        c = counts[f, t]
                        pri[f] = _BINS64[h + f] + np.float64(c & ((np.int64(1) << _Q) - 1)) * _ULPS[h + f]
                        car[f] = np.float64(c >> _Q)
                    out[i, j] = convert(h, pri, car, _BINS64, _P, _W, _EXPANSION, _SINGLE)
                else:
                    for k in range(K):
                        column[k] = B[k, j]
                    bound = _bits(am * bmax[j])
                    _partial(Ai, column, 0, K, state, _index_of_bits(bound) if bound < _INF_BITS else -1)
                    out[i, j] = _finish(state, fields)


def _finish_plain(index, counts, out):
    """out[t] = the sum of lane t's state (index[t], counts[:, t]) where convert does not scale it
    (index[t] >= _PLAIN): convert's operations in its order, over all lanes in one loop with no
    arrays of fields; the other lanes are left as they are."""
    mask = (np.int64(1) << _Q) - 1
    for t in range(out.shape[0]):
        h = index[t]
        if h >= _PLAIN:
            y = 0.0
            y += np.float64(counts[0, t] >> _Q) * _SIXTHS[h]
            for f in range(1, _FOLD):
                y += np.float64(counts[f, t] >> _Q) * _SIXTHS[h + f]
                y += (_BINS64[h + f - 1] + np.float64(counts[f - 1, t] & mask) * _ULPS[h + f - 1]) - _BINS64[h + f - 1]
            y += (_BINS64[h + _FOLD - 1] + np.float64(counts[_FOLD - 1, t] & mask) * _ULPS[h + _FOLD - 1]) \
                - _BINS64[h + _FOLD - 1]
            out[t] = y


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
    A, B = np.ascontiguousarray(A), np.ascontiguousarray(B)
    out = np.empty((A.shape[0], B.shape[1]), np.float64)
    amax, ka = np.empty(A.shape[0], _DT), np.empty(A.shape[0], np.int64)
    bmax, kb = np.empty(B.shape[1], _DT), np.empty(B.shape[1], np.int64)
    parts = max(1, min(get_num_threads(), A.shape[0]))
    rows = _split(A.shape[0], parts)
    _run(_row_stats, [(A, amax, ka) + r for r in rows])
    _run(_column_stats, [(B, bmax, kb) + r for r in _split(B.shape[1], max(1, min(parts, B.shape[1])))])
    _run(_gemm_range, [(A, B, B.reshape(-1), amax, ka, bmax, kb, out) + r for r in rows])
    with np.errstate(over="ignore"):
        return out.astype(_DT)
