"""Triton kernels of binned replicas (fpspec.compile.triton_binned copies this file into each one).

The replica's constants come from fpspec.compile.triton_binned.render.  Sum and dot: `_lanes`
(fold <= 4) gives every program a contiguous piece of the terms, one tile at a time: the tile's
largest |term| (an integer max over bit patterns; inf and nan show as the largest), the program's
index moved up when needed (its slot counts shifted toward the lesser bins), every term's slices
counted in ulps of their bin (the difference of the primary's bit patterns after and before) and
added into int64 counts kept per lane, one per slot: exact integer sums, so the only reduction of
a tile is its max; the lanes are reduced once, at the end, as (low, carry) pairs.  `_partials` is
the same for any fold, its counts reduced every tile.  `_merge` aligns the programs' states on the
least index, adds them exactly and converts, operation for operation as ReproBLAS's
binned_ddmconv / binned_ssmconv (`_convert`).  Gemv and gemm: `_rows`, one program
per output element, the same loop over its K products.  No contraction (launched with
enable_fp_fusion=False), no clz (the interpreter lacks it: the subnormal index goes through a
conversion to float), no shift amounts out of range.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def _bits(v, DT: tl.constexpr, IT: tl.constexpr):
    # the pattern of v as int64 (fp32: its 32 bits, non-negative for non-negative v)
    return v.to(IT, bitcast=True).to(tl.int64)


@triton.jit
def _or1(v, DT: tl.constexpr, IT: tl.constexpr):
    return (v.to(IT, bitcast=True) | 1).to(DT, bitcast=True)


@triton.jit
def _index(m, P: tl.constexpr, EMAX: tl.constexpr, W: tl.constexpr, MAXI: tl.constexpr):
    # ReproBLAS's xindex of the largest |term| from its pattern m (finite); a subnormal's
    # exponent read off the pattern converted to float (exact: m < 2^(P-1))
    e = m >> (P - 1)
    sub = (m.to(tl.float64).to(tl.int64, bitcast=True) >> 52) - 1023 + 1 - (EMAX - 1 + P - 1)
    frexp_e = tl.where(e == 0, sub, e - EMAX + 1)
    j = tl.minimum((EMAX + 1 - frexp_e) // W, MAXI)
    return tl.where(m == 0, MAXI, j)


@triton.jit
def _shift(V, jv, by):
    # slot j takes slot j - by (0 below): the accumulator moved `by` bins up
    src = jv[:, None] - by
    pick = src == jv[None, :]
    return tl.sum(tl.where(pick, V[None, :], 0), axis=1)


@triton.jit
def _tile(t, I, V, flags, jv, bins_ptr, COMP, HALF, DT: tl.constexpr, IT: tl.constexpr,
          FOLD: tl.constexpr, P: tl.constexpr, EMAX: tl.constexpr, W: tl.constexpr, MAXI: tl.constexpr,
          INF_BITS: tl.constexpr, ABS_MASK: tl.constexpr):
    """One tile of terms t into the state (I: index, -1 empty; V: slot counts; flags)."""
    m = tl.max(_bits(t, DT, IT) & ABS_MASK, axis=0)
    if m >= INF_BITS:
        f = tl.max(tl.where(t != t, 1, 0), axis=0) | tl.max(tl.where(t == float("inf"), 2, 0), axis=0) \
            | tl.max(tl.where(t == float("-inf"), 4, 0), axis=0)
        flags = flags | f
    else:
        J = _index(m, P, EMAX, W, MAXI).to(tl.int64)
        if I < 0:
            I = J
        elif J < I:
            V = _shift(V, jv, I - J)
            I = J
        top = I == 0
        r = t
        for j in tl.static_range(FOLD):
            mj = tl.load(bins_ptr + I + j)
            cj = _bits(mj, DT, IT)
            if j == 0:
                s = tl.where(top, mj + _or1(r * COMP, DT, IT), mj + _or1(r, DT, IT))
                q = (mj - s) * HALF
                r = tl.where(top, (r + q) + q, r + (mj - s))
            else:
                s = mj + _or1(r, DT, IT)
                r = r + (mj - s)
            V += tl.where(jv == j, tl.sum(_bits(s, DT, IT) - cj, axis=0), 0)
    return I, V, flags


@triton.jit
def _field(v, jv, i):
    return tl.sum(tl.where(jv == i, v, 0), axis=0)


@triton.jit
def _convert(I, low, car, jv, bins_ptr, ulps_ptr, EXPANSION, FOLD: tl.constexpr, P: tl.constexpr,
             W: tl.constexpr, SINGLE: tl.constexpr):
    """fpspec.arith.binned.convert: ReproBLAS's conversion, in float64, step for step."""
    b = tl.load(bins_ptr + I + jv, mask=jv < FOLD, other=0.0).to(tl.float64)
    u = tl.load(ulps_ptr + I + jv, mask=jv < FOLD, other=0.0)
    pri = b + low.to(tl.float64) * u
    carf = car.to(tl.float64)
    y = tl.zeros([], tl.float64)
    LIMIT: tl.constexpr = (3 * P) // W
    if SINGLE or I > LIMIT:
        if SINGLE and I == 0:
            y = y + _field(carf, jv, 0) * (_field(b, jv, 0) / 6.0) * EXPANSION
            y = y + _field(carf, jv, 1) * (_field(b, jv, 1) / 6.0)
            y = y + (_field(pri, jv, 0) - _field(b, jv, 0)) * EXPANSION
            i = 2
        else:
            y = y + _field(carf, jv, 0) * (_field(b, jv, 0) / 6.0)
            i = 1
        while i < FOLD:
            y = y + _field(carf, jv, i) * (_field(b, jv, i) / 6.0)
            y = y + (_field(pri, jv, i - 1) - _field(b, jv, i - 1))
            i += 1
        y = y + (_field(pri, jv, FOLD - 1) - _field(b, jv, FOLD - 1))
    else:
        DOWN: tl.constexpr = 2.0 ** (-(2 * P - W))
        UP: tl.constexpr = 2.0 ** (2 * P - W)
        scaled = tl.maximum(tl.minimum(FOLD, LIMIT - I), 0)
        if I == 0:
            y = y + _field(carf, jv, 0) * ((_field(b, jv, 0) / 6.0) * DOWN * EXPANSION)
            y = y + _field(carf, jv, 1) * ((_field(b, jv, 1) / 6.0) * DOWN)
            y = y + (_field(pri, jv, 0) - _field(b, jv, 0)) * DOWN * EXPANSION
            i = 2
        else:
            y = y + _field(carf, jv, 0) * ((_field(b, jv, 0) / 6.0) * DOWN)
            i = 1
        while i < scaled:
            y = y + _field(carf, jv, i) * ((_field(b, jv, i) / 6.0) * DOWN)
            y = y + (_field(pri, jv, i - 1) - _field(b, jv, i - 1)) * DOWN
            i += 1
        if i == FOLD:
            y = (y + (_field(pri, jv, FOLD - 1) - _field(b, jv, FOLD - 1)) * DOWN) * UP
        else:
            t = y * UP
            if (t == float("inf")) | (t == float("-inf")):
                y = t
            else:
                y = t
                while i < FOLD:
                    y = y + _field(carf, jv, i) * (_field(b, jv, i) / 6.0)
                    y = y + (_field(pri, jv, i - 1) - _field(b, jv, i - 1))
                    i += 1
                y = y + (_field(pri, jv, FOLD - 1) - _field(b, jv, FOLD - 1))
    return y


@triton.jit
def _finish(I, low, car, flags, jv, bins_ptr, ulps_ptr, EXPANSION, FOLD: tl.constexpr, P: tl.constexpr,
             W: tl.constexpr, Q: tl.constexpr, SINGLE: tl.constexpr):
    """The value of a state (slot counts as low + carry * 2^Q, any low), as float64; canonical nan for nan."""
    car = car + (low >> Q)
    low = low & ((1 << Q) - 1)
    y = _convert(tl.maximum(I, 0), low, car, jv, bins_ptr, ulps_ptr, EXPANSION, FOLD, P, W, SINGLE)
    y = tl.where(I < 0, 0.0, y)
    special = tl.where(((flags & 1) != 0) | ((flags & 6) == 6), float("nan"),
                       tl.where((flags & 2) != 0, float("inf"), float("-inf")))
    return tl.where(flags != 0, special, y)


@triton.jit
def _partials(X, Y, states, n, tiles, bins_ptr, COMP, HALF, DT: tl.constexpr, IT: tl.constexpr,
              FOLD: tl.constexpr, F2: tl.constexpr, P: tl.constexpr, EMAX: tl.constexpr, W: tl.constexpr,
              MAXI: tl.constexpr, Q: tl.constexpr, INF_BITS: tl.constexpr, ABS_MASK: tl.constexpr,
              PRODUCT: tl.constexpr, BLOCK: tl.constexpr):
    """Program p: terms [p * tiles * BLOCK, (p + 1) * tiles * BLOCK) into its state row:
    index, flags, then F2 lows and F2 carries (low in [0, 2^Q)); any fold."""
    pid = tl.program_id(0)
    jv = tl.arange(0, F2)
    offs = tl.arange(0, BLOCK)
    I = tl.full([], -1, tl.int64)
    flags = tl.full([], 0, tl.int32)
    V = tl.zeros([F2], tl.int64)
    start = pid.to(tl.int64) * tiles * BLOCK
    for k in range(tiles):
        idx = start + k * BLOCK + offs
        mask = idx < n
        t = tl.load(X + idx, mask=mask, other=0.0)
        if PRODUCT:
            t = t * tl.load(Y + idx, mask=mask, other=0.0)
        I, V, flags = _tile(t, I, V, flags, jv, bins_ptr, COMP, HALF, DT, IT, FOLD, P, EMAX, W, MAXI,
                            INF_BITS, ABS_MASK)
    row = states + pid * (2 + 2 * F2)
    tl.store(row, I)
    tl.store(row + 1, flags.to(tl.int64))
    tl.store(row + 2 + jv, V & ((1 << Q) - 1))
    tl.store(row + 2 + F2 + jv, V >> Q)


@triton.jit
def _lane_sums(A, Q: tl.constexpr):
    # a slot's lanes as (low, carry): lows < 2^Q, at most 4096 lanes, so their sum fits in int64
    A = A.to(tl.int64)
    return tl.sum(A & ((1 << Q) - 1), axis=0), tl.sum(A >> Q, axis=0)


@triton.jit
def _lane_deposit(t, I, m0, m1, m2, m3, A0, A1, A2, A3, COMP, HALF, DT: tl.constexpr, IT: tl.constexpr,
                  FOLD: tl.constexpr, AT: tl.constexpr):
    """The slices of the tile's finite terms t at index I added to the lane counts A0 .. A3."""
    if I == 0:
        # note [index 0] of fpspec.arith.binned: slot 0 scaled
        s = m0 + _or1(t * COMP, DT, IT)
        A0 += (s.to(IT, bitcast=True) - m0.to(IT, bitcast=True)).to(AT)
        q = (m0 - s) * HALF
        r = (t + q) + q
    else:
        s = m0 + _or1(t, DT, IT)
        A0 += (s.to(IT, bitcast=True) - m0.to(IT, bitcast=True)).to(AT)
        r = t + (m0 - s)
    s = m1 + _or1(r, DT, IT)
    A1 += (s.to(IT, bitcast=True) - m1.to(IT, bitcast=True)).to(AT)
    if FOLD > 2:
        r = r + (m1 - s)
        s = m2 + _or1(r, DT, IT)
        A2 += (s.to(IT, bitcast=True) - m2.to(IT, bitcast=True)).to(AT)
    if FOLD > 3:
        r = r + (m2 - s)
        s = m3 + _or1(r, DT, IT)
        A3 += (s.to(IT, bitcast=True) - m3.to(IT, bitcast=True)).to(AT)
    return A0, A1, A2, A3


@triton.jit
def _lanes(X, Y, states, n, tiles, bins_ptr, COMP, HALF, DT: tl.constexpr, IT: tl.constexpr,
           FOLD: tl.constexpr, F2: tl.constexpr, P: tl.constexpr, EMAX: tl.constexpr, W: tl.constexpr,
           MAXI: tl.constexpr, Q: tl.constexpr, INF_BITS: tl.constexpr, ABS_MASK: tl.constexpr,
           PRODUCT: tl.constexpr, BLOCK: tl.constexpr, AT: tl.constexpr):
    """`_partials` for fold <= 4: every slot's counts kept per lane (A0 .. A3, one AT integer per
    term position of the tile), reduced once at the end.  A lane holds at most `tiles` counts of at
    most 2^(W-1) (the host picks AT: int32 for fp32 up to 2^18 tiles, else int64).  The next tile
    is loaded before this one is counted, so that a program keeps a load in flight.

    First pass: the index is the first tile's; every later term is deposited there, and the lanes
    keep their largest |term| pattern (no reduction, no barrier, per tile).  When that turns out
    to need a higher bin (or an inf / nan came), the counts are dropped and the second pass runs:
    the tile-by-tile update (each tile's largest |term| first).  Both give the counts of the index
    of the program's largest |term|: the same bits."""
    pid = tl.program_id(0)
    jv = tl.arange(0, F2)
    offs = tl.arange(0, BLOCK)
    I = tl.full([], -1, tl.int64)
    flags = tl.full([], 0, tl.int32)
    A0 = tl.zeros([BLOCK], AT)
    A1 = tl.zeros([BLOCK], AT)
    A2 = tl.zeros([BLOCK], AT)
    A3 = tl.zeros([BLOCK], AT)
    m0 = tl.load(bins_ptr)
    m1 = m0
    m2 = m0
    m3 = m0
    start = pid.to(tl.int64) * tiles * BLOCK
    end = tl.minimum(start + tiles * BLOCK, n)
    idx = start + offs
    xn = tl.load(X + idx, mask=idx < end, other=0.0)
    yn = xn
    if PRODUCT:
        yn = tl.load(Y + idx, mask=idx < end, other=0.0)
    t = xn
    if PRODUCT:
        t = t * yn
    m = tl.max(t.to(IT, bitcast=True) & ABS_MASK, axis=0).to(tl.int64)
    exact = m >= INF_BITS
    if m < INF_BITS:
        I = _index(m, P, EMAX, W, MAXI).to(tl.int64)
        m0 = tl.load(bins_ptr + I)
        m1 = tl.load(bins_ptr + I + 1)
        if FOLD > 2:
            m2 = tl.load(bins_ptr + I + 2)
        if FOLD > 3:
            m3 = tl.load(bins_ptr + I + 3)
        H = tl.zeros([BLOCK], IT)
        for k in range(tiles):
            t = xn
            if PRODUCT:
                t = t * yn
            idx = start + (k + 1) * BLOCK + offs
            xn = tl.load(X + idx, mask=idx < end, other=0.0)
            if PRODUCT:
                yn = tl.load(Y + idx, mask=idx < end, other=0.0)
            H = tl.maximum(H, t.to(IT, bitcast=True) & ABS_MASK)
            A0, A1, A2, A3 = _lane_deposit(t, I, m0, m1, m2, m3, A0, A1, A2, A3, COMP, HALF, DT, IT, FOLD, AT)
        m = tl.max(H, axis=0).to(tl.int64)
        exact = (m >= INF_BITS) | (_index(tl.minimum(m, INF_BITS - 1), P, EMAX, W, MAXI).to(tl.int64) < I)
    if exact:
        I = tl.full([], -1, tl.int64)
        A0 = tl.zeros([BLOCK], AT)
        A1 = tl.zeros([BLOCK], AT)
        A2 = tl.zeros([BLOCK], AT)
        A3 = tl.zeros([BLOCK], AT)
        idx = start + offs
        xn = tl.load(X + idx, mask=idx < end, other=0.0)
        if PRODUCT:
            yn = tl.load(Y + idx, mask=idx < end, other=0.0)
        for k in range(tiles):
            t = xn
            if PRODUCT:
                t = t * yn
            idx = start + (k + 1) * BLOCK + offs
            xn = tl.load(X + idx, mask=idx < end, other=0.0)
            if PRODUCT:
                yn = tl.load(Y + idx, mask=idx < end, other=0.0)
            m = tl.max(t.to(IT, bitcast=True) & ABS_MASK, axis=0).to(tl.int64)
            if m >= INF_BITS:
                f = tl.max(tl.where(t != t, 1, 0), axis=0) | tl.max(tl.where(t == float("inf"), 2, 0), axis=0) \
                    | tl.max(tl.where(t == float("-inf"), 4, 0), axis=0)
                flags = flags | f
            else:
                J = _index(m, P, EMAX, W, MAXI).to(tl.int64)
                if (I < 0) | (J < I):
                    # a higher bin came: slot j takes slot j - by (zeros when the state was empty)
                    by = I - J
                    A3 = tl.where(by == 0, A3, tl.where(by == 1, A2, tl.where(by == 2, A1, tl.where(by == 3, A0, 0))))
                    A2 = tl.where(by == 0, A2, tl.where(by == 1, A1, tl.where(by == 2, A0, 0)))
                    A1 = tl.where(by == 0, A1, tl.where(by == 1, A0, 0))
                    A0 = tl.where(by == 0, A0, 0)
                    I = J
                    m0 = tl.load(bins_ptr + I)
                    m1 = tl.load(bins_ptr + I + 1)
                    if FOLD > 2:
                        m2 = tl.load(bins_ptr + I + 2)
                    if FOLD > 3:
                        m3 = tl.load(bins_ptr + I + 3)
                A0, A1, A2, A3 = _lane_deposit(t, I, m0, m1, m2, m3, A0, A1, A2, A3, COMP, HALF, DT, IT, FOLD,
                                               AT)
    l0, c0 = _lane_sums(A0, Q)
    l1, c1 = _lane_sums(A1, Q)
    l2, c2 = _lane_sums(A2, Q)
    l3, c3 = _lane_sums(A3, Q)
    low = tl.where(jv == 0, l0, tl.where(jv == 1, l1, tl.where(jv == 2, l2, l3)))
    car = tl.where(jv == 0, c0, tl.where(jv == 1, c1, tl.where(jv == 2, c2, c3)))
    low = tl.where(jv < FOLD, low, 0)
    car = tl.where(jv < FOLD, car, 0)
    row = states + pid * (2 + 2 * F2)
    tl.store(row, I)
    tl.store(row + 1, flags.to(tl.int64))
    tl.store(row + 2 + jv, low & ((1 << Q) - 1))
    tl.store(row + 2 + F2 + jv, car + (low >> Q))


@triton.jit
def _merge(states, out, programs, bins_ptr, ulps_ptr, EXPANSION, FOLD: tl.constexpr, F2: tl.constexpr,
           P: tl.constexpr, W: tl.constexpr, Q: tl.constexpr, SINGLE: tl.constexpr, PB: tl.constexpr):
    """All programs' states aligned on the least index, added exactly, converted: out[0]."""
    jv = tl.arange(0, F2)
    pv = tl.arange(0, PB)
    ROW: tl.constexpr = 2 + 2 * F2
    I = tl.full([], 1 << 30, tl.int64)
    flags = tl.full([], 0, tl.int64)
    for p0 in range(0, programs, PB):
        rows = p0 + pv
        Ip = tl.load(states + rows * ROW, mask=rows < programs, other=-1)
        I = tl.minimum(I, tl.min(tl.where(Ip >= 0, Ip, 1 << 30), axis=0))
        flags = flags | tl.reduce_or(tl.load(states + rows * ROW + 1, mask=rows < programs, other=0), axis=0)
    low = tl.zeros([F2], tl.int64)
    car = tl.zeros([F2], tl.int64)
    for p0 in range(0, programs, PB):
        rows = p0 + pv
        ok = rows < programs
        Ip = tl.load(states + rows * ROW, mask=ok, other=-1)
        by = Ip - I
        src = jv[None, :] - by[:, None]                      # the row's slot landing on slot j
        live = ok[:, None] & (Ip[:, None] >= 0) & (src >= 0) & (src < F2)
        lows = tl.load(states + rows[:, None] * ROW + 2 + src, mask=live, other=0)
        cars = tl.load(states + rows[:, None] * ROW + 2 + F2 + src, mask=live, other=0)
        low += tl.sum(lows, axis=0)
        car += tl.sum(cars, axis=0)
    empty = I == (1 << 30)
    y = _finish(tl.where(empty, -1, I), low, car, flags.to(tl.int32), jv, bins_ptr, ulps_ptr, EXPANSION, FOLD, P, W,
                Q, SINGLE)
    tl.store(out, y.to(out.dtype.element_ty))


@triton.jit
def _rows(A, B, out, N, K, sam, sak, sbk, sbn, bins_ptr, ulps_ptr, COMP, HALF, EXPANSION,
          DT: tl.constexpr, IT: tl.constexpr, FOLD: tl.constexpr, F2: tl.constexpr, P: tl.constexpr,
          EMAX: tl.constexpr, W: tl.constexpr, MAXI: tl.constexpr, Q: tl.constexpr, INF_BITS: tl.constexpr,
          ABS_MASK: tl.constexpr, SINGLE: tl.constexpr, BLOCK: tl.constexpr):
    """out[i, j] = binned sum over k of A[i, k] * B[k, j]; one program per output element."""
    pid = tl.program_id(0)
    i = pid // N
    j = pid % N
    jv = tl.arange(0, F2)
    offs = tl.arange(0, BLOCK)
    I = tl.full([], -1, tl.int64)
    flags = tl.full([], 0, tl.int32)
    V = tl.zeros([F2], tl.int64)
    for k0 in range(0, K, BLOCK):
        k = k0 + offs
        mask = k < K
        t = tl.load(A + i * sam + k * sak, mask=mask, other=0.0) * tl.load(B + k * sbk + j * sbn, mask=mask,
                                                                          other=0.0)
        I, V, flags = _tile(t, I, V, flags, jv, bins_ptr, COMP, HALF, DT, IT, FOLD, P, EMAX, W, MAXI,
                            INF_BITS, ABS_MASK)
    y = _finish(I, V & ((1 << Q) - 1), V >> Q, flags, jv, bins_ptr, ulps_ptr, EXPANSION, FOLD, P, W, Q, SINGLE)
    tl.store(out + pid, y.to(out.dtype.element_ty))


class BinnedReplica:
    """The host side: constants on the device, launches, argument checks."""

    MAX_PROGRAMS = 4096       # lows of at most 2^12 programs add in int64 without overflow
    LANES = True              # fold <= 4: `_lanes` (counts per lane), else `_partials`

    # per format (BLOCK: terms a tile, up to 4096; WARPS; PROGRAMS_PER_SM: on a GPU, enough programs
    # to fill it, few states to merge): the tiling that read fastest at n = 10^8 on an H200
    # (benchmarks/bench_binned.py --gpu); any tiling gives the same bits
    TILING = {"fp32": (4096, 4, 4), "fp64": (2048, 4, 4)}

    def __init__(self, fmt, fold, torch_dtype, bins, ulps, consts):
        self.fmt, self.fold, self.dtype = fmt, fold, torch_dtype
        self.bins, self.ulps, self.c = bins, ulps, consts
        self.BLOCK, self.WARPS, self.PROGRAMS_PER_SM = self.TILING[fmt]
        self._tables = {}

    def tables(self, device):
        if device not in self._tables:
            self._tables[device] = (torch.tensor(self.bins, dtype=self.dtype, device=device),
                                    torch.tensor(self.ulps, dtype=torch.float64, device=device))
        return self._tables[device]

    def check(self, x, what, ndim):
        if not isinstance(x, torch.Tensor):
            raise TypeError(f"{what} must be a torch tensor")
        if x.dtype != self.dtype:
            raise TypeError(f"{what} has dtype {x.dtype}, but this replica takes {self.dtype}")
        if x.dim() != ndim:
            raise ValueError(f"{what} must have {ndim} dimension(s), got shape {tuple(x.shape)}")
        return x.contiguous()

    def programs(self, device):
        """The most programs a reduction launches (the bits do not depend on it)."""
        if device.type == "cuda":
            sms = torch.cuda.get_device_properties(device).multi_processor_count
            return min(self.MAX_PROGRAMS, sms * self.PROGRAMS_PER_SM)
        return self.MAX_PROGRAMS

    def reduce(self, x, y):
        if not 16 <= self.BLOCK <= 4096:
            raise ValueError(f"binned replica: BLOCK = {self.BLOCK}; expected 16 .. 4096 terms a tile")
        n = x.shape[0]
        bins, ulps = self.tables(x.device)
        c = self.c
        tiles = max(1, triton.cdiv(triton.cdiv(n, self.BLOCK), self.programs(x.device)))
        programs = max(1, triton.cdiv(n, self.BLOCK * tiles))
        states = torch.empty((programs, 2 + 2 * c["F2"]), dtype=torch.int64, device=x.device)
        out = torch.empty((), dtype=self.dtype, device=x.device)
        lanes = self.LANES and self.fold <= 4
        kernel = _lanes if lanes else _partials
        extra = {"AT": tl.int32 if c["SINGLE"] and tiles <= 1 << 18 else tl.int64} if lanes else {}
        kernel[(programs,)](x, y if y is not None else x, states, n, tiles, bins, c["COMP"], c["HALF"],
                            DT=c["DT"], IT=c["IT"], FOLD=self.fold, F2=c["F2"], P=c["P"], EMAX=c["EMAX"],
                            W=c["W"], MAXI=c["MAXI"], Q=c["Q"], INF_BITS=c["INF_BITS"],
                            ABS_MASK=c["ABS_MASK"], PRODUCT=y is not None, BLOCK=self.BLOCK,
                            num_warps=self.WARPS, enable_fp_fusion=False, **extra)
        _merge[(1,)](states, out, programs, bins, ulps, c["EXPANSION"], FOLD=self.fold, F2=c["F2"], P=c["P"],
                     W=c["W"], Q=c["Q"], SINGLE=c["SINGLE"], PB=256, num_warps=8, enable_fp_fusion=False)
        return out

    def matmul(self, A, B):
        M, K_ = A.shape
        N = B.shape[1]
        bins, ulps = self.tables(A.device)
        c = self.c
        out = torch.empty((M, N), dtype=self.dtype, device=A.device)
        if M * N:
            _rows[(M * N,)](A, B, out, N, K_, A.stride(0), A.stride(1), B.stride(0), B.stride(1), bins,
                                       ulps, c["COMP"], c["HALF"], c["EXPANSION"], DT=c["DT"], IT=c["IT"],
                                       FOLD=self.fold, F2=c["F2"], P=c["P"], EMAX=c["EMAX"], W=c["W"],
                                       MAXI=c["MAXI"], Q=c["Q"], INF_BITS=c["INF_BITS"], ABS_MASK=c["ABS_MASK"],
                                       SINGLE=c["SINGLE"], BLOCK=256, enable_fp_fusion=False)
        return out
