"""Tree -> the most compact spec found that expands back to exactly that tree.

The search works on *local trees*: a subtree relabelled so that its operands
are positions 0..m-1.  For a local tree, each recognizer reads the parameters
of one combinator off the structure (which subtrees hold position 0, which
ranges are contiguous, which leaf sets are strided), lowers the parts
recursively, and proposes a candidate order.  Candidates are ranked by the
length of their text; a literal tree is proposed only where no combinator
fits (or the tree is tiny).

Parts that one combinator orders alike (the lanes of `lanes`, the blocks of
`blocks`, the leaves of a recursive split) must share one order: `_unify`
picks the cheapest candidate of any part that rebuilds every part.  That is
how the blocks of NumPy's pairwise sum, of sizes 65..128, all become
`tail(8, lanes(8, seq, pairwise), seq)`.

Recursion on sub-ranges is found by `_recursive_split`: descend while every
node splits its range at SPLIT_RULES[i](n); the nodes where that stops are
the base cases, ordered by one guard on n.

Every lowering is checked by expanding it (`lower` raises if the round trip
ever fails: that would be a bug here, never a property of the input).
"""
from __future__ import annotations

import sys
from contextlib import contextmanager
from dataclasses import dataclass

from fpspec.errors import FpspecError
from fpspec.spec import ast as A
from fpspec.spec.expand import FREEZE_ABOVE, apply_order
from fpspec.tree import building
from fpspec.spec.printer import format_inline, format_order
from fpspec.tree import Node, chain_shape, format_tree, observable, relabel

# Split rules a recursive halving may follow: the size of the left part as a
# function of n, simplest first.  n // 2 - n // 2 % K is NumPy's "halves split
# at a multiple of K".
_N = A.Var()


def _half_rounded(k: int):
    half = A.BinOp("//", _N, A.Num(2))
    return A.BinOp("-", half, A.BinOp("%", half, A.Num(k)))


SPLIT_RULES = (
    A.BinOp("//", _N, A.Num(2)),
    A.BinOp("//", A.BinOp("+", _N, A.Num(1)), A.Num(2)),
    *(_half_rounded(k) for k in (2, 4, 8, 16, 32, 64, 128)),
)

LITERAL_ALWAYS_BELOW = 24   # smaller trees also get a literal candidate
KEEP = 6                    # candidates kept per local tree
SHORT = 10                  # a candidate this short ends the search ("chain(16)")
TAILS_TRIED = 2             # contiguous prefixes tried as the body of `tail`
MAX_LEFTOVERS = 128         # `tail` leftovers are what a vector loop leaves: few


@dataclass(frozen=True)
class Candidate:
    order: A.Order
    lets: tuple  # tuple[A.Let, ...] the order needs
    cost: int


def _candidate(order, lets=()) -> Candidate:
    lets = tuple(dict.fromkeys(lets))  # dedupe, keep order
    cost = len(format_inline(order)) + sum(len(d.name) + len(format_order(d.order)) + 8 for d in lets)
    return Candidate(order, lets, cost)


def _merge_lets(*cands: Candidate) -> tuple:
    out = []
    for c in cands:
        out.extend(c.lets)
    return tuple(dict.fromkeys(out))


# ---------------------------------------------------------------- tree functions

def _size(t) -> int:
    return 1 if t.__class__ is int else t._meta[0]


def _first(t) -> int:
    return t if t.__class__ is int else t._meta[1]


def _annotate(t):
    """(max leaf of each node, (first, size) -> node) for a local tree."""
    maxes: dict = {}
    index: dict = {}
    stack = [(t, False)]
    while stack:
        s, done = stack.pop()
        if s.__class__ is int:
            index[(s, 1)] = s
            continue
        if done:
            m = 0
            for c in s.children:
                v = c if c.__class__ is int else maxes[c]
                if v > m:
                    m = v
            maxes[s] = m
            index[(s._meta[1], s._meta[0])] = s
        else:
            stack.append((s, True))
            stack.extend((c, False) for c in s.children)
    return maxes, index


def _max(t, maxes) -> int:
    return t if t.__class__ is int else maxes[t]


def _leaves_sorted(t) -> list:
    out, stack = [], [t]
    while stack:
        s = stack.pop()
        if s.__class__ is int:
            out.append(s)
        else:
            stack.extend(s.children)
    out.sort()
    return out


def _shift(t, d: int):
    """t with every leaf i replaced by i - d (leaves are d .. d + size - 1)."""
    return t if d == 0 else relabel(t, range(-d, _size(t)))


def _contract(t, parts: dict, leaf_pos=None):
    """Replace each subtree in `parts` (node -> position) by its position;
    other leaves map through leaf_pos (or must all be inside parts)."""
    if t.__class__ is int or t in parts:
        return parts[t] if t in parts else leaf_pos(t)
    out: list = []
    stack = [(t, False)]
    while stack:
        s, done = stack.pop()
        if not done and s in parts:
            out.append(parts[s])
        elif s.__class__ is int:
            out.append(leaf_pos(s))
        elif done:
            k = len(s.children)
            kids = tuple(out[-k:])
            del out[-k:]
            out.append(Node(kids, s.fused))
        else:
            stack.append((s, True))
            stack.extend((c, False) for c in reversed(s.children))
    return out[0]


def _is_seq(t, m: int) -> bool:
    x = t
    for i in range(m - 1, 0, -1):
        if x.__class__ is int or x.fused or x.children[1] != i or x.children[1].__class__ is not int:
            return False
        x = x.children[0]
    return x == 0


def _is_rev(t, m: int) -> bool:
    x = t
    for i in range(m - 1):
        if x.__class__ is int or x.fused or x.children[0] != i or x.children[0].__class__ is not int:
            return False
        x = x.children[1]
    return x == m - 1


def _zero_path(t) -> list:
    """t, its child holding position 0, that child's, ... down to leaf 0."""
    path = [t]
    while path[-1].__class__ is not int:
        path.append(path[-1].children[0])
    return path


def _nice_threshold(lo: int, hi: int) -> int:
    """The largest power of two in [lo, hi] (a threshold a person would
    write, and the one that holds for other n too), else lo."""
    k = 1
    while k * 2 <= hi:
        k *= 2
    return k if lo <= k <= hi else lo


def _pow2_tails(p: int, r: int, limit: int = 128) -> list:
    """Powers of two K <= limit with p % K == 0 and K > r, largest first."""
    return [k for k in (128, 64, 32, 16, 8, 4, 2) if k <= limit and k > r and p % k == 0]


def _divisors_above(p: int, r: int) -> list:
    return [k for k in range(r + 1, p + 1) if p % k == 0]


# ---------------------------------------------------------------- chunks

def _spine_and_right(t) -> list:
    """The nodes of t's left spine and their right children."""
    out = []
    while t.__class__ is not int:
        out.append(t)
        out.extend(t.children[1:])
        t = t.children[0]
    out.append(t)
    return out


def chunk_partition(t, m: int):
    """[(start, end), ...] when t adds contiguous chunks one after the other:
    down the left spine every right child is the contiguous range just before
    the previous one (at least 2 operands: a lone leaf belongs to its chunk's
    own order), and what is left at the bottom is the first chunk.  None when
    fewer than 2 chunks show."""
    ends, hi = [], m
    while t.__class__ is not int and not t.fused and len(t.children) == 2:
        right = t.children[1]
        if right.__class__ is int:
            break
        ls = sorted(_leaves_sorted(right))
        if len(ls) < 2 or ls[-1] != hi - 1 or ls[0] != hi - len(ls):
            break
        ends.append(hi)
        hi = ls[0]
        t = t.children[0]
    if not ends or hi < 1:
        return None
    cuts = [0, hi] + ends[::-1]
    return list(zip(cuts, cuts[1:]))


def _halving_rules():
    """How a library halves a remainder between Q and 2Q: rounded up to a
    multiple of c ((n // 2 + c - 1) // c * c, OpenBLAS's level-3 GEMM_Q
    rule with c = GEMM_UNROLL), or the larger half first."""
    half = A.BinOp("//", _N, A.Num(2))
    rules = [half, A.BinOp("-", _N, half)]
    for c in (2, 4, 8, 16, 32, 64):
        rules.append(A.BinOp("*", A.BinOp("//", A.BinOp("+", half, A.Num(c - 1)), A.Num(c)), A.Num(c)))
    return rules


def chunk_size_expr(samples):
    """SIZE for chunks(SIZE, ...) from (operands left, chunk size) samples:
    `(if n >= 2Q: Q elif n > Q: HALF else: n)`, Q the largest chunk, HALF a
    halving rule (`_halving_rules`); None when no such rule fits every sample
    or the chunks are plain blocks (the same size but the last)."""
    from fpspec.spec.expand import eval_expr

    samples = sorted(set(samples))
    q = max(s for _, s in samples)
    if all(s == min(q, r) for r, s in samples):
        return None   # blocks(q, ...) says it
    two_q = A.Num(2 * q)
    for half in _halving_rules():
        e = A.IfExpr(A.Compare(">=", _N, two_q), A.Num(q),
                     A.IfExpr(A.Compare(">", _N, A.Num(q)), half, _N))
        if all(eval_expr(e, r) == s for r, s in samples):
            return e
    return None


# ---------------------------------------------------------------- the search

class _Lowerer:
    def __init__(self, observed: bool = False):
        self.observed = observed   # a revealed tree: its binary pairs may be fused (tree.observable)
        self.memo: dict = {}
        self.names: dict = {}
        self.shifted: dict = {}  # id(node) -> (node, node relabelled to start at 0)

    def local(self, x):
        """x (a contiguous range of positions) relabelled to start at 0; cached
        because every split rule and recognizer asks for the same parts."""
        hit = self.shifted.get(id(x))
        if hit is None or hit[0] is not x:
            hit = (x, _shift(x, _first(x)))
            self.shifted[id(x)] = hit
        return hit[1]

    def fresh(self, base: str) -> str:
        k = self.names.get(base, 0) + 1
        self.names[base] = k
        return base if k == 1 else f"{base}{k}"

    def best(self, t) -> Candidate:
        return self.lower(t)[0]

    def lower(self, t) -> list:
        """Candidates for local tree t, cheapest first (never empty)."""
        hit = self.memo.get(t)
        if hit is not None and (hit[0] is t or t.__class__ is int or hit[0] == t):
            return hit[1]
        cands = self._search(t)
        cands.sort(key=lambda c: c.cost)
        kept = []
        for c in cands:
            if all(c.order != k.order for k in kept):
                kept.append(c)
            if len(kept) == KEEP:
                break
        self.memo[t] = (t, kept)
        return kept

    def _search(self, t) -> list:
        m = _size(t)
        if m == 1:
            return [_candidate(A.Seq())]
        out: list = []
        if _is_seq(t, m):
            out.append(_candidate(A.Seq()))
        if _is_rev(t, m):
            out.append(_candidate(A.Rev()))
        if t.fused:
            if all(c.__class__ is int for c in t.children):
                out.append(_candidate(A.Fused()))
            else:
                out.extend(self._chain(t, m))
        else:
            out.extend(self._gpu_tree(t, m))
            if self.observed:   # a chain's last node over one operand reveals as binary
                out.extend(self._chain(t, m))
        if out and min(c.cost for c in out) <= SHORT:
            return out  # nothing recursive is shorter than one word
        maxes, index = _annotate(t)
        recursive = self._recursive_split(t, m, maxes)
        out.extend(recursive)
        if out and min(c.cost for c in out) <= SHORT:
            return out  # `pairwise`: the searches below would only recurse for longer text
        if not recursive:  # a recursive split already covers the split at the root
            out.extend(self._split(t, m, maxes))
        out.extend(self._tail(t, m, maxes))
        out.extend(self._blocks(t, m, maxes, index))
        out.extend(self._chunks(t, m))
        out.extend(self._lanes(t, m, maxes, index))
        if not out or m < LITERAL_ALWAYS_BELOW:
            out.append(_candidate(A.Literal(t)))
        return out

    # ------------------------------------------------ parameter-free combinators checked by expansion
    def _matches(self, order, t, m: int, lets=()) -> bool:
        try:
            return _same_tree(apply_order(order, range(m), {d.name: d for d in lets}), t, self.observed)
        except FpspecError:
            return False

    def _gpu_tree(self, t, m: int) -> list:
        # slot 0 ends holding positions 0, half, ... : its size is predictable
        sizes = [1] * m
        k = m
        while k > 2:
            half = (k + 1) // 2
            for i in range(k - half):
                sizes[i] += sizes[i + half]
            k = half
        if _size(t.children[0]) != sizes[0] or not self._matches(A.GpuTree(), t, m):
            return []
        return [_candidate(A.GpuTree())]

    def _chain(self, t, m: int) -> list:
        shape = chain_shape(t)   # the short group anywhere (cuBLAS: first or in the middle)
        if shape is None or not any(x.__class__ is not int and x.fused for x in _zero_path(t)):
            return []
        w, at = shape
        order = A.Chain(A.Num(w)) if at is None else A.Chain(A.Num(w), A.Num(at))
        return [_candidate(order)] if self._matches(order, t, m) else []

    # ------------------------------------------------ combinators read off the structure
    def _split(self, t, m: int, maxes) -> list:
        if t.fused:
            return []
        left, right = t.children
        at = _size(left)
        if _max(left, maxes) != at - 1:
            return []
        a, b = self.best(left), self.best(self.local(right))
        return [_candidate(A.Split(A.Num(at), a.order, b.order), _merge_lets(a, b))]

    def _tail(self, t, m: int, maxes) -> list:
        """Bodies: contiguous prefixes on the path to position 0.  Preferred:
        those whose size a small power of two K > leftovers divides (NumPy's
        "n - n % 8"); else the first ones with any valid K."""
        bodies = [x for x in _zero_path(t)[1:-1]
                  if _max(x, maxes) == _size(x) - 1 and m - _size(x) <= MAX_LEFTOVERS]
        nice = [x for x in bodies if _pow2_tails(_size(x), m - _size(x))]
        out = []
        for body in (nice or bodies)[:TAILS_TRIED]:
            p = _size(body)
            r = m - p
            ks = _pow2_tails(p, r) or _divisors_above(p, r)[:1]
            if not ks:
                continue
            b = self.best(body)
            if isinstance(b.order, (A.Lanes, A.Blocks)) and isinstance(b.order.k if isinstance(b.order, A.Lanes)
                                                                       else b.order.b, A.Num):
                count = (b.order.k if isinstance(b.order, A.Lanes) else b.order.b).value
                if count in ks:
                    ks = [count] + [k for k in ks if k != count]
            rest = _contract(t, {body: 0}, lambda i: i - p + 1)
            o = self.best(rest)
            for k in ks:
                out.append(_candidate(A.Tail(A.Num(k), b.order, o.order), _merge_lets(b, o)))
        return out

    def _blocks(self, t, m: int, maxes, index) -> list:
        out = []
        for blk in reversed(_zero_path(t)[1:-1]):
            b = _size(blk)
            if b < 2 or _max(blk, maxes) != b - 1:
                continue
            parts = {}
            ok = True
            for j, lo in enumerate(range(0, m, b)):
                s = min(b, m - lo)
                node = index.get((lo, s))
                if node is None or _max(node, maxes) != lo + s - 1:
                    ok = False
                    break
                parts[node] = j
            if not ok or len(parts) < 2:
                continue
            inner = self._unify([self.local(node) for node in parts])
            if inner is None:
                continue
            outer = self.best(_contract(t, parts))
            out.append(_candidate(A.Blocks(A.Num(b), inner.order, outer.order), _merge_lets(inner, outer)))
            # the smallest block size that works is the real one; larger ones
            # only regroup it (and would each cost a full search)
            return out
        return out

    def _lanes(self, t, m: int, maxes, index) -> list:
        out = []
        path = _zero_path(t)
        second = m  # second smallest leaf of the path node, computed bottom-up
        for lane0 in reversed(path[1:-1]):
            second = min(second, _first(lane0.children[1]))
            k = second
            if k < 2 or _size(lane0) != (m + k - 1) // k or maxes[lane0] != k * (_size(lane0) - 1):
                continue
            if _leaves_sorted(lane0) != list(range(0, m, k)):
                continue
            parts = {lane0: 0}
            for j in range(1, k):
                want = range(j, m, k)
                node = index.get((j, len(want)))
                if node is None or (node.__class__ is not int and _leaves_sorted(node) != list(want)):
                    parts = None
                    break
                parts[node] = j
            if parts is None:
                continue
            local = [0] * m  # position in its lane of every position
            for i in range(m):
                local[i] = i // k
            lanes = [relabel(node, local) for node in parts]
            inner = self._unify(lanes)
            if inner is None:
                continue
            outer = self.best(_contract(t, parts))
            out.append(_candidate(A.Lanes(A.Num(k), inner.order, outer.order), _merge_lets(inner, outer)))
        return out + self._lanes_left(t, m, path, maxes, index)

    def _lanes_left(self, t, m: int, path, maxes, index) -> list:
        """lanes(k, inner, outer, left): lane 0 over 0, k, .., p - k (p = m - m % k),
        inside the node that also holds the leftovers p..m-1 (torch.sum's tail)."""
        out = []
        for i, lane0 in enumerate(path[1:], start=1):
            if lane0.__class__ is int:   # lanes of one operand: k from the node holding 0 and the leftovers
                above = _leaves_sorted(path[i - 1])
                k = above[1] if len(above) > 1 else 0
                ls = [0]
            else:
                # leaves 0, k, .., p - k (k >= 2) have the largest leaf (size - 1) k: the prefixes of
                # a chain (k = 1) fail this without sorting their leaves (O(n^2) along a long chain)
                top, below = maxes[lane0], _size(lane0) - 1
                if top < 2 * below or top % below:
                    continue
                ls = _leaves_sorted(lane0)
                k = ls[1]
            p = len(ls) * k
            r = m - p
            if k < 2 or not 0 < r or ls != list(range(0, p, k)):
                continue
            # the unroll u: the least multiple of k past the leftovers that divides p
            # (a power of two when one fits: loops unroll by 4, 8, 16)
            us = sorted((u for u in range(k, p + 1, k) if u > r and p % u == 0), key=lambda u: (u & (u - 1) != 0, u))
            if not us:
                continue
            u = us[0]
            want = set(range(0, p, k)) | set(range(p, m))
            ext = next((x for x in reversed(path[:i]) if _size(x) == len(want)), None)
            if ext is None or set(_leaves_sorted(ext)) != want:
                continue
            parts = {ext: 0}
            for j in range(1, k):
                node = index.get((j, p // k))
                if node is None or (node.__class__ is not int and _leaves_sorted(node) != list(range(j, p, k))):
                    parts = None
                    break
                parts[node] = j
            if parts is None:
                continue
            local = [i // k for i in range(m)]
            inner = self._unify([relabel(lane0, local)] + [relabel(node, local) for node in list(parts)[1:]])
            if inner is None:
                continue
            left = self.best(_contract(ext, {lane0: 0, **{x: x - p + 1 for x in range(p, m)}}))
            outer = self.best(_contract(t, parts))
            order = A.Lanes(A.Num(k), inner.order, outer.order, left.order, None if u == k else A.Num(u))
            out.append(_candidate(order, _merge_lets(inner, outer, left)))
        return out

    def _chunks(self, t, m: int) -> list:
        """chunks(SIZE, inner, seq): contiguous chunks whose results are added
        one after the other (the right children down the left spine), SIZE
        fitted to (operands left, chunk size) by `chunk_size_expr`."""
        bounds = chunk_partition(t, m)
        if bounds is None:
            return []
        size = chunk_size_expr([(m - a, b - a) for a, b in bounds])
        if size is None:
            return []
        index = {(_first(x), _size(x)): x for x in _spine_and_right(t)}
        parts = {}
        for j, (a, b) in enumerate(bounds):
            node = index.get((a, b - a))
            if node is None:
                return []
            parts[node] = j
        inner = self._unify([self.local(node) for node in parts])
        if inner is None:
            return []
        outer = self.best(_contract(t, parts))
        return [_candidate(A.Chunks(size, inner.order, outer.order), _merge_lets(inner, outer))]

    def _recursive_split(self, t, m: int, maxes) -> list:
        out = []
        seen = set()
        for rule in SPLIT_RULES:
            found = self._split_skeleton(t, rule, maxes)
            if found is None:
                continue
            threshold, frontier, min_inner = found
            threshold = _nice_threshold(threshold, min_inner - 1)
            shape = (threshold, tuple(sorted(id(x) for x in frontier)))
            if shape in seen:  # a simpler rule already splits this tree the same way
                continue
            seen.add(shape)
            if threshold <= 1:  # halving all the way down: nothing recursive is shorter
                out.append(_candidate(A.Pairwise(None if rule == SPLIT_RULES[0] else rule)))
                break
            if len(frontier) < 2:
                continue
            arms = self._guarded([self.local(x) for x in frontier], threshold, min_inner)
            if arms is None:
                continue
            name = self.fresh("halves")
            split = A.Split(rule, A.Ref(name), A.Ref(name))
            *cases, (_, last) = arms
            conds = [A.Case(A.Compare("<=", _N, A.Num(hi)), c.order) for hi, c in cases]
            conds.append(A.Case(A.Compare("<=", _N, A.Num(threshold)), last.order))
            body = A.Guard(tuple(conds), split)
            lets = _merge_lets(*(c for _, c in arms)) + (A.Let(name, body),)
            out.append(_candidate(A.Ref(name), lets))
        return out

    def _split_skeleton(self, t, rule, maxes):
        """(threshold T, frontier nodes, smallest split node) when every node
        larger than T splits its range at rule(n); None when the root does not."""
        from fpspec.spec.expand import eval_expr

        def consistent(x) -> bool:
            if x.__class__ is int or x.fused:
                return False
            s = x._meta[0]
            h = eval_expr(rule, s)
            left = x.children[0]
            return 1 <= h < s and _size(left) == h and _max(left, maxes) == x._meta[1] + h - 1

        if not consistent(t):
            return None
        threshold = 1
        stack = [t]
        while stack:
            x = stack.pop()
            if consistent(x):
                stack.extend(x.children)
            else:
                threshold = max(threshold, _size(x))
        frontier, min_inner = [], _size(t)
        stack = [t]
        while stack:
            x = stack.pop()
            if _size(x) <= threshold:
                frontier.append(x)
            else:
                min_inner = min(min_inner, _size(x))
                stack.extend(x.children)
        return threshold, frontier, min_inner

    def _guarded(self, parts: list, threshold: int, min_inner: int):
        """[(upper size, candidate), ...] ordering the parts by size: one
        candidate if one fits all, else one per run of sizes."""
        one = self._unify(parts)
        if one is not None:
            return [(threshold, one)]
        by_size = sorted(parts, key=_size)
        arms, group = [], []
        for p in by_size:
            trial = self._unify(group + [p])
            if trial is None:
                if not group:
                    return None
                arms.append((_size(group[-1]), self._unify(group)))
                group = [p]
            else:
                group.append(p)
        arms.append((threshold, self._unify(group)))
        return arms

    def _unify(self, parts: list):
        """The cheapest candidate of any part that rebuilds every part."""
        distinct = list(dict.fromkeys(parts))
        pool: list = []
        for p in distinct:
            pool.extend(self.lower(p))
        pool.sort(key=lambda c: c.cost)
        tried = []
        for c in pool:
            if c.order in tried:
                continue
            tried.append(c.order)
            if all(self._fits(c, p) for p in distinct):
                return c
        return None

    def _fits(self, c: Candidate, p) -> bool:
        hit = self.memo.get(p)
        if hit is not None and any(k.order == c.order for k in hit[1]):
            return True
        return self._matches(c.order, p, _size(p), c.lets)


# ---------------------------------------------------------------- entry points

def _with_range(header: A.Header | None, lo: int, hi: int) -> A.Header:
    header = header or A.Header()
    if header.n is not None:
        return header
    return A.Header(header.target, header.op, A.Range(lo, hi), header.sections, loc=header.loc)


def lower(tree, header: A.Header | None = None, observed: bool = False) -> A.Spec:
    """The most compact spec found whose expansion is exactly `tree`.

    `tree` may also be {n: tree}: one spec for all of them, a guard on n
    where no single order fits every n (the range is then min..max of the
    given n; the spec is only known right at those n).  observed: `tree`
    was revealed, so a binary node may stand for a fused pair (a chain's last
    node over one operand): the spec's expansion equals it as revelation
    sees it (fpspec.tree.observable), fused pairs kept fused.
    """
    if isinstance(tree, dict):
        return _lower_many(tree, header, observed)
    n = _size(tree)
    lw = _Lowerer(observed)
    with building(freeze=n >= FREEZE_ABOVE), _deep_recursion():
        best = lw.best(tree)
    spec = _renamed(A.Spec(_with_range(header, n, n), best.lets, best.order))
    _verify(spec, {n: tree}, observed)
    return spec


def _lower_many(trees: dict, header: A.Header | None, observed: bool = False) -> A.Spec:
    if not trees:
        raise ValueError("lower: no trees given")
    lw = _Lowerer(observed)
    items = sorted(trees.items())
    with building(freeze=sum(_size(t) for t in trees.values()) >= FREEZE_ABOVE), _deep_recursion():
        common = lw._unify([t for _, t in items]) if len({_size(t) for _, t in items}) == 1 else None
        if common is None:
            pool = []
            for _, t in items:
                pool.extend(lw.lower(t))
            pool.sort(key=lambda c: c.cost)
            for c in pool:
                if all(lw._matches(c.order, t, n, c.lets) for n, t in items):
                    common = c
                    break
    if common is not None:
        order, lets = common.order, common.lets
    else:
        per_n = [(n, lw.best(t)) for n, t in items]
        *arms, (_, last) = per_n
        order = A.Guard(tuple(A.Case(A.Compare("==", _N, A.Num(n)), c.order) for n, c in arms), last.order)
        lets = _merge_lets(*(c for _, c in per_n))
    spec = _renamed(A.Spec(_with_range(header, items[0][0], items[-1][0]), lets, order))
    _verify(spec, dict(items), observed)
    return spec


def _renamed(spec: A.Spec) -> A.Spec:
    """Generated names numbered in order of appearance (halves, halves2, ...)."""
    mapping, count = {}, {}
    for d in spec.lets:
        base = d.name.rstrip("0123456789")
        count[base] = count.get(base, 0) + 1
        mapping[d.name] = base if count[base] == 1 else f"{base}{count[base]}"
    if all(k == v for k, v in mapping.items()):
        return spec
    lets = tuple(A.Let(mapping[d.name], rename_refs(d.order, mapping)) for d in spec.lets)
    return A.Spec(spec.header, lets, rename_refs(spec.order, mapping))


def rename_refs(o, mapping: dict):
    """o with every Ref renamed through mapping."""
    from fpspec.spec.check import map_children

    if isinstance(o, A.Ref):
        return A.Ref(mapping.get(o.name, o.name))
    return map_children(o, lambda x: rename_refs(x, mapping))


@contextmanager
def _deep_recursion(limit: int = 50000):
    # the search recurses once per level of the tree's combinator structure
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(max(old, limit))
    try:
        yield
    finally:
        sys.setrecursionlimit(old)


def _same_tree(built, t, observed: bool) -> bool:
    """built == t; for an observed (revealed) t also when built differs only
    by fused pairs, which reveal as binary nodes (tree.observable)."""
    return built == t or (observed and observable(t) is t and observable(built) == t)


def _verify(spec: A.Spec, trees: dict, observed: bool = False) -> None:
    from fpspec.spec.expand import apply_order as _apply

    lets = {d.name: d for d in spec.lets}
    for n, t in trees.items():
        if not _same_tree(_apply(spec.order, range(n), lets), t, observed):
            raise AssertionError(f"lowering bug: the spec does not expand back to the tree at n = {n}:\n"
                                 f"{spec}\ntree: {format_tree(t)[:500]}")
