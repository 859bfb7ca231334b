"""Taking an observed tree apart: the structure each combinator leaves.

An observation is a tree over operand positions 0..n-1.  For each
structural combinator of the .fps language this module answers two
questions about one observation: which parameter values could have produced
it (the candidates), and, for one value, what the combinator's parts saw
(the sub-observations that INNER, OUTER, FIRST, REST, BODY must explain).

Every question is answered from `Shape`, per-node arrays computed once per
observed tree (smallest and largest leaf, leaf count, and the gcd of the
leaves' distances to the smallest: a node's leaves are exactly the stride-k
progression mn, mn+k, ..., mx iff k divides that gcd and the count is
(mx - mn) / k + 1).  Everything is iterative.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from math import gcd

import numpy as np

from fpspec.tree import Node, Tree, building, leaves, postorder


@dataclass(frozen=True)
class Obs:
    """One observed tree over operand positions 0..n-1."""

    n: int
    tree: Tree

    @property
    def key(self) -> tuple:
        return (self.n, hash(self.tree))

    @cached_property
    def shape(self) -> "Shape":
        return Shape(self.tree)


class Shape:
    """Per-node facts of one tree, nodes numbered in postorder (root last)."""

    def __init__(self, t: Tree):
        nodes: list = []
        mn: list[int] = []
        mx: list[int] = []
        sz: list[int] = []
        g: list[int] = []
        stack: list[int] = []  # indices of finished children
        for s in postorder(t):
            if s.__class__ is int:
                a, b, c, d = s, s, 1, 0
            else:
                k = len(s.children)
                kids = stack[-k:]
                del stack[-k:]
                a = mn[kids[0]]
                b = max(mx[i] for i in kids)
                c = sum(sz[i] for i in kids)
                d = 0
                for i in kids:
                    d = gcd(d, g[i], mn[i] - a)
            stack.append(len(nodes))
            nodes.append(s)
            mn.append(a)
            mx.append(b)
            sz.append(c)
            g.append(d)
        self.nodes = nodes
        self.index = {id(s): i for i, s in enumerate(nodes) if s.__class__ is not int}
        self.mn = np.array(mn, dtype=np.int64)
        self.mx = np.array(mx, dtype=np.int64)
        self.sz = np.array(sz, dtype=np.int64)
        self.g = np.array(g, dtype=np.int64)

    def facts(self, s: Tree) -> tuple[int, int, int]:
        """(smallest leaf, largest leaf, count) of a subtree of this tree."""
        if s.__class__ is int:
            return s, s, 1
        i = self.index[id(s)]
        return int(self.mn[i]), int(self.mx[i]), int(self.sz[i])


def contract(t: Tree, stops: dict, leaf_fn) -> Tree:
    """Rebuild t, replacing each node whose id is in `stops` by stops[id]
    (without looking inside it) and each other leaf l by leaf_fn(l)."""
    out: list = []
    stack: list = [(t, False)]
    with building():
        while stack:
            s, done = stack.pop()
            if s.__class__ is int:
                out.append(leaf_fn(s))
            elif done:
                c = len(s.children)
                kids = tuple(out[-c:])
                del out[-c:]
                out.append(Node(kids, s.fused))
            elif id(s) in stops:
                out.append(stops[id(s)])
            else:
                stack.append((s, True))
                stack.extend((c, False) for c in reversed(s.children))
    return out[0]


def equal_shifted(a: Tree, b: Tree, d: int) -> bool:
    """Is a, with every leaf l read as l - d, the same tree as b?"""
    stack = [(a, b)]
    while stack:
        x, y = stack.pop()
        if x.__class__ is int or y.__class__ is int:
            if x.__class__ is not y.__class__ or x - d != y:
                return False
        elif x.fused != y.fused or len(x.children) != len(y.children) or x.size != y.size:
            return False
        else:
            stack.extend(zip(x.children, y.children))
    return True


def _shift(t: Tree, d: int) -> Tree:
    return t if d == 0 else contract(t, {}, lambda leaf: leaf - d)


# ---------------------------------------------------------------- split

def split_point(o: Obs) -> int | None:
    """h when the root is (tree over 0..h-1, tree over h..n-1), else None."""
    t = o.tree
    if t.__class__ is int or t.fused:
        return None
    mn, mx, c = o.shape.facts(t.children[0])
    return c if mx == c - 1 else None


def split_parts(o: Obs, h: int) -> tuple[Obs, Obs]:
    left, right = o.tree.children
    return Obs(h, left), Obs(o.n - h, _shift(right, h))


# ---------------------------------------------------------------- lanes and blocks

def _group_roots(o: Obs, starts: np.ndarray, ends: np.ndarray, counts: np.ndarray, k: int | None):
    """Index of the node whose leaves are exactly group i, for every i; None
    if some group has no subtree.  Group i: leaves starts[i]..ends[i], all of
    them (k None) or every k-th (stride k)."""
    sh = o.shape
    gi = np.searchsorted(starts, sh.mn)
    gi_c = np.minimum(gi, len(starts) - 1)
    ok = (gi < len(starts)) & (starts[gi_c] == sh.mn) & (ends[gi_c] == sh.mx) & (counts[gi_c] == sh.sz)
    if k is not None:
        ok &= (sh.sz == 1) | (sh.g % k == 0)
    else:
        ok &= sh.mx - sh.mn + 1 == sh.sz
    idx = np.flatnonzero(ok)
    if len(idx) != len(starts):
        return None  # (each leaf set is one node's at most: sizes differ up the tree)
    return idx[np.argsort(sh.mn[idx], kind="stable")]


def _parts(o: Obs, roots: np.ndarray):
    sh = o.shape
    subs = [sh.nodes[i] for i in roots]
    stops = {id(s): j for j, s in enumerate(subs) if s.__class__ is not int}
    singles = {s: j for j, s in enumerate(subs) if s.__class__ is int}
    outer = contract(o.tree, stops, singles.__getitem__)
    return subs, outer


def lane_parts(o: Obs, k: int):
    """lanes(k): (inner observations per lane, outer observation) or None."""
    n = o.n
    m = min(k, n)
    starts = np.arange(m, dtype=np.int64)
    counts = (n - starts + k - 1) // k
    ends = starts + (counts - 1) * k
    roots = _group_roots(o, starts, ends, counts, k)
    if roots is None:
        return None
    subs, outer = _parts(o, roots)
    inner = [Obs(int(c), 0 if c == 1 else contract(s, {}, lambda leaf, j=j: (leaf - j) // k))
             for j, (s, c) in enumerate(zip(subs, counts))]
    return inner, Obs(m, outer)


def lane_parts_left(o: Obs, k: int, u: int | None = None):
    """lanes(k, inner, outer, left[, u]): (inner observations, outer observation
    or None, left observation or None), or None if o is not of that shape."""
    n = o.n
    u = k if u is None else u
    p, r = n - n % u, n % u
    if p == 0:
        return [], None, o
    starts = np.arange(k, dtype=np.int64)
    counts = np.full(k, p // k, dtype=np.int64)
    roots = _group_roots(o, starts, starts + (counts - 1) * k, counts, k)   # o.shape is cached on o
    if roots is None:
        return None
    subs = [o.shape.nodes[i] for i in roots]
    ext = None
    if r:
        want = p // k + r
        path = [o.tree]
        while path[-1].__class__ is not int and path[-1].size >= want:
            path.append(path[-1].children[0])
        ext = next((x for x in reversed(path) if x.__class__ is not int and x.size == want), None)
        if ext is None or sorted(leaves(ext)) != list(range(0, p, k)) + list(range(p, n)):
            return None
    inner = [Obs(p // k, 0 if p == k else contract(s, {}, lambda leaf, j=j: (leaf - j) // k))
             for j, s in enumerate(subs)]
    left = None
    if r:
        lane0 = subs[0]
        left = Obs(1 + r, contract(ext, {} if lane0.__class__ is int else {id(lane0): 0},
                                   lambda leaf: 0 if leaf < p else leaf - p + 1))
        subs = [ext] + subs[1:]
    stops = {id(s): j for j, s in enumerate(subs) if s.__class__ is not int}
    singles = {s: j for j, s in enumerate(subs) if s.__class__ is int}
    return inner, Obs(k, contract(o.tree, stops, singles.__getitem__)), left


def block_parts(o: Obs, b: int):
    """blocks(b): (inner observations per block, outer observation) or None."""
    n = o.n
    starts = np.arange(0, n, b, dtype=np.int64)
    return _contiguous_parts(o, starts, np.minimum(starts + b, n) - 1)


def _contiguous_parts(o: Obs, starts: np.ndarray, ends: np.ndarray):
    """(inner observation per contiguous group starts[k]..ends[k], outer observation),
    or None when the groups are not subtrees of o."""
    counts = ends - starts + 1
    roots = _group_roots(o, starts, ends, counts, None)
    if roots is None:
        return None
    subs, outer = _parts(o, roots)
    inner = [Obs(int(c), _shift(s, int(lo))) for s, lo, c in zip(subs, starts, counts)]
    return inner, Obs(len(starts), outer)


def chunk_parts(o: Obs):
    """chunks(SIZE, inner, outer): ((operands left, chunk size) per chunk,
    inner observations, outer observation), or None when the tree does not
    add contiguous chunks one after the other (fpspec.spec.lower.chunk_partition)."""
    from fpspec.spec.lower import chunk_partition

    if o.n < 2:
        return None
    bounds = chunk_partition(o.tree, o.n)
    if bounds is None:
        return [(o.n, o.n)], [o], Obs(1, 0)
    starts = np.array([a for a, _ in bounds], dtype=np.int64)
    ends = np.array([b - 1 for _, b in bounds], dtype=np.int64)
    parts = _contiguous_parts(o, starts, ends)
    if parts is None:
        return None
    return [(o.n - int(a), int(e - a + 1)) for a, e in zip(starts, ends)], *parts


def sized_chunk_parts(o: Obs, size):
    """chunks(size, inner, outer) with its SIZE expression given: (inner observations,
    outer observation), or None when the chunks it cuts are not subtrees of o."""
    from fpspec.spec.expand import chunk_bounds

    bounds = chunk_bounds(size, o.n)
    if len(bounds) < 2:
        return [o], Obs(1, 0)
    starts = np.array([a for a, _ in bounds], dtype=np.int64)
    ends = np.array([b - 1 for _, b in bounds], dtype=np.int64)
    return _contiguous_parts(o, starts, ends)


# ---------------------------------------------------------------- prefixes and tails

def _left_path(t: Tree) -> list:
    path = []
    while t.__class__ is not int:
        path.append(t)
        t = t.children[0]
    return path


def prefix_sizes(o: Obs) -> list[int]:
    """Sizes p < n of the subtrees whose leaves are exactly 0..p-1."""
    sh = o.shape
    out = []
    for s in _left_path(o.tree)[1:]:
        _, mx, c = sh.facts(s)
        if mx == c - 1:
            out.append(c)
    return out


def prefix_subtree(o: Obs, p: int) -> Tree | None:
    if p == 1:
        return 0
    sh = o.shape
    for s in _left_path(o.tree):
        _, mx, c = sh.facts(s)
        if c == p:
            return s if mx == p - 1 else None
        if c < p:
            return None
    return None


def tail_parts(o: Obs, k: int):
    """tail(k): (body observation or None, outer observation or None), or
    False when the tree has no subtree over 0..p-1 (p = n - n % k)."""
    n = o.n
    p = n - n % k
    if p == 0:
        return None, o
    if p == n:
        return o, None
    body = prefix_subtree(o, p)
    if body is None:
        return False
    stops = {} if body.__class__ is int else {id(body): 0}
    outer = contract(o.tree, stops, lambda leaf: leaf - p + 1)  # leaf 0 (p == 1) stays 0
    return Obs(p, body), Obs(n - p + 1, outer)


# ---------------------------------------------------------------- candidates

def lane_strides(o: Obs) -> list[int]:
    """Second-smallest leaf of every subtree above leaf 0, bottom-up: lane 0's
    stride k when lane 0 is a subtree, whatever order lane 0 itself has."""
    out, second = [], o.n
    for s in reversed(_left_path(o.tree)):
        second = min(second, min(c if c.__class__ is int else c.first for c in s.children[1:]))
        if second not in out:
            out.append(second)
    return out


def vlane_candidates(o: Obs) -> list[tuple[int, int]]:
    """(V, K) that could make leaf 0's lane of vlanes(V, K, ...): a subtree above
    leaf 0 whose leaves start 0..V-1 (V >= 2), the next one K * V (K >= 2); the
    lowest subtrees first (one above the lane joins lanes: a larger K's pairs)."""
    out = []
    for s in reversed(_left_path(o.tree)[1:]):
        got = sorted(leaves(s))
        v = next((i for i, x in enumerate(got) if x != i), len(got))
        if 2 <= v < len(got) and got[v] % v == 0 and got[v] // v >= 2 and (v, got[v] // v) not in out:
            out.append((v, got[v] // v))
    return out


def vlane_parts(o: Obs, v: int, k: int):
    """vlanes(v, k): (inner observations per lane, outer observation) or None."""
    from fpspec.spec.expand import vector_lanes

    sh = o.shape
    lanes = vector_lanes(list(range(o.n)), v, k)
    roots = []
    for lane in lanes:
        idx = np.flatnonzero((sh.mn == min(lane)) & (sh.mx == max(lane)) & (sh.sz == len(lane)))
        if len(idx) != 1 or (len(lane) > 1 and sorted(leaves(sh.nodes[idx[0]])) != sorted(lane)):
            return None
        roots.append(int(idx[0]))
    subs, outer = _parts(o, np.array(roots, dtype=np.int64))
    inner = []
    for lane, sub in zip(lanes, subs):
        where = {x: i for i, x in enumerate(lane)}
        inner.append(Obs(len(lane), 0 if len(lane) == 1 else contract(sub, {}, where.__getitem__)))
    return inner, Obs(len(lanes), outer)


def lane_candidates(o: Obs) -> set[int]:
    """Strides k that could make leaf 0's lane: the smallest other leaves of
    the lowest subtrees above leaf 0."""
    cands: set[int] = set()
    for s in _left_path(o.tree)[-4:]:
        for c in s.children[1:]:
            f = c if c.__class__ is int else c.first
            if f > 1:
                cands.add(f)
    return cands
