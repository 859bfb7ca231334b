"""l(i, j) straight from a spec, without building the tree.

At n = 2^24 the tree of a spec has 3.3e7 nodes: too many to build in Python
within a minute or 2 GB.  But l(i, j) -- the number of leaves under the
lowest common ancestor of leaves i and j -- only needs the path of orders
that i and j go down together: at each order, either both operands fall in
the same part (a lane, a block, a half) and we descend into it, or they part
here and the answer is the total weight of the operands under the node where
they meet.  Operands carry weights (the leaf counts of the subtrees they
stand for), kept in closed form where possible (`Ones`, `Blocked`,
`Prepend`) so that no array of length n is ever made for the common orders.
"""
from __future__ import annotations

from bisect import bisect_right

import numpy as np

from fpspec.errors import SpecError
from fpspec.spec import ast as A
from fpspec.spec.expand import chunk_bounds, eval_cond, eval_expr, lets_of, pad_of, unroll_of, vector_lanes
from fpspec.tree import chain_node_end

# ---------------------------------------------------------------- operand weights


class Weights:
    """Leaf counts of m operands; total(lo, hi) sums positions lo..hi-1."""

    m: int

    def total(self, lo: int, hi: int) -> int:
        raise NotImplementedError

    def sub(self, lo: int, hi: int) -> "Weights":
        return Arr(self.array()[lo:hi])

    def strided(self, j: int, k: int) -> "Weights":
        return Arr(self.array()[j::k])

    def array(self) -> np.ndarray:
        raise NotImplementedError

    def lane_totals(self, k: int) -> "Weights":
        a = self.array()
        return Arr(np.array([a[j::k].sum() for j in range(min(k, self.m))], dtype=np.int64))

    def block_totals(self, b: int) -> "Weights":
        a = self.array()
        return Arr(np.add.reduceat(a, np.arange(0, self.m, b)))


class Ones(Weights):
    """m single leaves."""

    def __init__(self, m: int):
        self.m = m

    def total(self, lo, hi):
        return hi - lo

    def sub(self, lo, hi):
        return Ones(hi - lo)

    def strided(self, j, k):
        return Ones(len(range(j, self.m, k)))

    def array(self):
        return np.ones(self.m, dtype=np.int64)

    def lane_totals(self, k):
        m = self.m
        if k < (1 << 16):
            return Arr(np.array([len(range(j, m, k)) for j in range(min(k, m))], dtype=np.int64))
        return super().lane_totals(k)

    def block_totals(self, b):
        return Blocked(self.m, b)


class Blocked(Weights):
    """ceil(total / b) operands of b leaves each, the last one shorter."""

    def __init__(self, total: int, b: int):
        self.whole, self.b = total, b
        self.m = -(-total // b)

    def total(self, lo, hi):
        return min(hi * self.b, self.whole) - lo * self.b

    def array(self):
        a = np.full(self.m, self.b, dtype=np.int64)
        a[-1] = self.whole - (self.m - 1) * self.b
        return a


class Prepend(Weights):
    """One operand of `first` leaves, then the operands of `rest` (tail's OUTER)."""

    def __init__(self, first: int, rest: Weights):
        self.first, self.rest = first, rest
        self.m = rest.m + 1

    def total(self, lo, hi):
        if lo >= hi:
            return 0
        t = self.first if lo == 0 else 0
        return t + self.rest.total(max(lo - 1, 0), hi - 1)

    def array(self):
        return np.concatenate([[self.first], self.rest.array()]).astype(np.int64)


class Arr(Weights):
    def __init__(self, a: np.ndarray):
        self.a = np.asarray(a, dtype=np.int64)
        self.m = len(self.a)
        self._prefix = None

    def total(self, lo, hi):
        if self._prefix is None:
            self._prefix = np.concatenate([[0], np.cumsum(self.a)])
        return int(self._prefix[hi] - self._prefix[lo])

    def array(self):
        return self.a


# ---------------------------------------------------------------- the walk


def spec_l(spec: A.Spec, n: int, i: int, j: int) -> int:
    """l(i, j) of spec's tree at n (i != j)."""
    return order_l(spec.order, Ones(n), i, j, lets_of(spec))


def spec_l_many(spec: A.Spec, n: int, pairs) -> np.ndarray:
    lets = lets_of(spec)
    w = Ones(n)
    return np.array([order_l(spec.order, w, int(a), int(b), lets) for a, b in np.asarray(pairs).reshape(-1, 2)],
                    dtype=np.int64)


def order_l(o, w: Weights, a: int, b: int, lets: dict) -> int:
    """Weight under the lowest common ancestor of operands a and b (a != b)."""
    if a > b:
        a, b = b, a
    while True:
        m = w.m
        cls = type(o)
        if cls is A.Ref:
            o = lets[o.name].order
            continue
        if cls is A.Guard:
            o = next((c.order for c in o.cases if eval_cond(c.cond, m)), o.otherwise)
            continue
        if cls is A.Using:      # the same tree, in another arithmetic
            o = o.order
            continue
        if cls is A.Seq:
            return w.total(0, b + 1)
        if cls is A.Rev:
            return w.total(a, m)
        if cls is A.Fused:
            return w.total(0, m)
        if cls is A.Chain:
            at = None if o.at is None else _within(o.at, m, 0)
            return w.total(0, chain_node_end(m, _within(o.w, m, 1), at, b))
        if cls is A.Pairwise:
            lo, hi = 0, m
            while True:
                h = (hi - lo) // 2 if o.split is None else _within(o.split, hi - lo, 1, hi - lo - 1)
                mid = lo + h
                if b < mid:
                    hi = mid
                elif a >= mid:
                    lo = mid
                else:
                    return w.total(lo, hi)
        if cls is A.Split:
            h = _within(o.at, m, 1, m - 1)
            if b < h:
                o, w = o.first, w.sub(0, h)
            elif a >= h:
                o, w, a, b = o.rest, w.sub(h, m), a - h, b - h
            else:
                return w.total(0, m)
            continue
        if cls is A.Tail:
            k = _within(o.k, m, 1)
            p = m - m % k
            if p == 0:
                o = o.outer
            elif b < p:
                o, w = o.body, w.sub(0, p)
            else:
                w = Prepend(w.total(0, p), w.sub(p, m))
                a = 0 if a < p else a - p + 1
                b = b - p + 1
                o = o.outer
            continue
        if cls is A.Lanes and o.left is not None:
            k = _within(o.k, m, 1)
            u = k if o.unroll is None else unroll_of(o, k, m)
            p = m - m % u
            if p == 0:
                o = o.left
                continue
            la, lb = (a % k if a < p else 0), (b % k if b < p else 0)
            if a < p and b < p and la == lb:
                o, w, a, b = o.inner, w.sub(0, p).strided(la, k), a // k, b // k
            elif la == lb:   # lane 0 and a leftover, or two leftovers: LEFT over [lane 0, leftovers]
                w = Prepend(w.sub(0, p).strided(0, k).total(0, p // k), w.sub(p, m))
                a = 0 if a < p else a - p + 1
                b = b - p + 1
                o = o.left
            else:
                totals = w.sub(0, p).lane_totals(k).array().copy()
                totals[0] += w.total(p, m)
                o, w, a, b = o.outer, Arr(totals), min(la, lb), max(la, lb)
            continue
        if cls is A.Lanes:
            k = _within(o.k, m, 1)
            la, lb = a % k, b % k
            if la == lb:
                o, w, a, b = o.inner, w.strided(la, k), a // k, b // k
            else:
                o, w, a, b = o.outer, w.lane_totals(k), min(la, lb), max(la, lb)
            continue
        if cls is A.VLanes:
            v, k = _within(o.v, m, 1), _within(o.k, m, 1)
            lanes = vector_lanes(np.arange(m, dtype=np.int64), v, k)
            la, lb = (next(i for i, lane in enumerate(lanes) if x in lane) for x in (a, b))
            arr = w.array()
            if la == lb:
                lane = np.asarray(lanes[la], dtype=np.int64)
                o, w = o.inner, Arr(arr[lane])
                a, b = int(np.flatnonzero(lane == a)[0]), int(np.flatnonzero(lane == b)[0])
            else:
                o, w = o.outer, Arr(np.array([arr[np.asarray(lane, dtype=np.int64)].sum() for lane in lanes]))
                a, b = min(la, lb), max(la, lb)
            continue
        if cls is A.Blocks:
            size = _within(o.b, m, 1)
            ba, bb = a // size, b // size
            if ba == bb:
                lo = ba * size
                o, w, a, b = o.inner, w.sub(lo, min(lo + size, m)), a - lo, b - lo
            else:
                o, w, a, b = o.outer, w.block_totals(size), ba, bb
            continue
        if cls is A.Pad:   # phantoms weigh nothing, and dropping them keeps every LCA of real operands
            r, c = pad_of(o, m)
            if c:
                arr = w.array()
                w = Arr(np.concatenate([arr[:r], np.zeros(c, np.int64), arr[r:]]))
                a, b = (a if a < r else a + c), (b if b < r else b + c)
            o = o.order
            continue
        if cls is A.Chunks:
            bounds, starts, sizes = _chunks_at(o.size, m)
            ca, cb = bisect_right(starts, a) - 1, bisect_right(starts, b) - 1
            if ca == cb:
                lo, hi = bounds[ca]
                o, w, a, b = o.inner, w.sub(lo, hi), a - lo, b - lo
            else:
                totals = sizes if type(w) is Ones else Arr(np.add.reduceat(w.array(), np.array(starts, dtype=np.int64)))
                o, w, a, b = o.outer, totals, ca, cb
            continue
        if cls is A.GpuTree:
            vals = w.array().copy()
            cur = m
            while True:
                half = (cur + 1) // 2
                vals[:cur - half] += vals[half:cur]
                a = a - half if a >= half else a
                b = b - half if b >= half else b
                if a == b:
                    return int(vals[a])
                vals, cur = vals[:half], half
        if cls is A.Literal:
            return _literal_l(o.tree, w, a, b)
        raise SpecError(f"cannot answer l(i, j) for {o}")


_CHUNKS: dict = {}


def _chunks_at(size, m: int):
    """chunk_bounds, their starts and sizes, once per (SIZE, m): every pair
    asked walks them (keyed by identity: hashing SIZE costs more than this)."""
    key = (id(size), m)
    hit = _CHUNKS.get(key)
    if hit is None or hit[0] is not size:
        if len(_CHUNKS) > 1024:
            _CHUNKS.clear()
        bounds = chunk_bounds(size, m)
        starts = [lo for lo, _ in bounds]
        # the chunk sizes as one Arr: its prefix sums are made once, not per pair
        hit = _CHUNKS[key] = (size, bounds, starts, Arr(np.array([hi - lo for lo, hi in bounds], dtype=np.int64)))
    return hit[1:]


def _within(e, m: int, lo: int, hi: int | None = None) -> int:
    """A parameter's value at m, refused (as expand refuses it) outside lo..hi:
    an out-of-range split would otherwise recurse on the same range forever."""
    v = eval_expr(e, m)
    if v < lo or (hi is not None and v > hi):
        raise SpecError(f"{e} = {v} at n = {m}; expected {lo}..{'' if hi is None else hi}")
    return v


def _literal_l(t, w: Weights, a: int, b: int) -> int:
    """Walk down the (small) literal tree while a and b share a child."""
    from fpspec.tree import leaves

    def holds(c, x):
        return c == x if isinstance(c, int) else x in leaves(c)

    while True:
        ca = next(c for c in t.children if holds(c, a))
        if not holds(ca, b):
            return int(sum(w.total(x, x + 1) for x in leaves(t)))
        t = ca
