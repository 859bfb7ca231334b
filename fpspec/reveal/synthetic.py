"""Synthetic black boxes: targets that sum in a known tree, for tests and benchmarks.

`TreeProgram` evaluates a tree on many inputs at once, level by level (all
binary nodes of one height in one vectorized add), in fp64/fp32/fp16 natively
and bf16 through exact rounding.  Fused nodes use `fused_sum`: align to the
largest exponent, truncate every term to `precision + 3` bits below it, add
exactly, round once (the Tensor Core model of seed 000 section 5.2.1; it is
what makes masks swamp inside a fused node).
"""
from __future__ import annotations

import numpy as np

from fpspec.formats import get_format, round_to
from fpspec.reveal.targets import Target
from fpspec.tree import Node, Tree, pairwise, postorder, sequential
from fpspec.tree import fused_chain as tree_fused_chain

_NATIVE = {"fp64": np.float64, "fp32": np.float32, "fp16": np.float16}


def fused_sum(vals, fmt, extra_bits: int = 3) -> np.ndarray:
    """One multi-term fused summation of float64-held values (truncating alignment, one rounding)."""
    fmt = get_format(fmt) if isinstance(fmt, str) else fmt
    V = np.asarray(vals, dtype=np.float64)
    with np.errstate(divide="ignore"):
        _, e = np.frexp(np.max(np.abs(V), axis=0))
    quantum = np.ldexp(1.0, (e - 1 - (fmt.precision + extra_bits)).astype(np.int64))
    T = np.trunc(V / quantum) * quantum          # exact: scaling by powers of two, truncation toward zero
    return round_to(fmt, T.sum(axis=0))          # exact sum: every term is a multiple of quantum, < 2^53 of them


class TreeProgram:
    """A tree compiled to levels: call with terms of shape (b, n) -> sums of shape (b,)."""

    def __init__(self, tree: Tree, fmt: str = "fp32", extra_bits: int = 3):
        self.fmt = get_format(fmt)
        self.extra_bits = extra_bits
        self.n = 1 if isinstance(tree, int) else tree.size
        slot: dict[int, int] = {}
        by_height: dict[int, list] = {}
        next_slot = self.n
        height: dict[int, int] = {}
        for s in postorder(tree):
            if isinstance(s, int):
                continue
            kids = []
            h = 0
            for c in s.children:
                if isinstance(c, int):
                    kids.append(c)
                else:
                    kids.append(slot[id(c)])
                    h = max(h, height[id(c)])
            slot[id(s)] = next_slot
            height[id(s)] = h + 1
            by_height.setdefault(h + 1, []).append((next_slot, s.fused, kids))
            next_slot += 1
        self.slots = next_slot
        self.root = self.n - 1 if isinstance(tree, int) else slot[id(tree)]
        self.levels = []
        for h in sorted(by_height):
            items = by_height[h]
            binary = [(o, k) for o, f, k in items if not f]
            fused = [(o, k) for o, f, k in items if f]
            bo = np.array([o for o, _ in binary], np.int64)
            ba = np.array([k[0] for _, k in binary], np.int64)
            bb = np.array([k[1] for _, k in binary], np.int64)
            self.levels.append((bo, ba, bb, fused))

    def __call__(self, X) -> np.ndarray:
        X = np.asarray(X, dtype=np.float64)
        single = X.ndim == 1
        X = X.reshape(-1, self.n)
        native = _NATIVE.get(self.fmt.name)
        dt = native or np.float64
        V = np.empty((self.slots, X.shape[0]), dtype=dt)
        V[: self.n] = X.T.astype(dt)
        for bo, ba, bb, fused in self.levels:
            if len(bo):
                if native is not None:
                    V[bo] = V[ba] + V[bb]
                else:
                    V[bo] = round_to(self.fmt, V[ba] + V[bb])
            for o, kids in fused:
                V[o] = fused_sum(V[kids].astype(np.float64), self.fmt, self.extra_bits)
        out = V[self.root].astype(np.float64)
        return out[0] if single else out


def sum_target(tree: Tree, fmt: str = "fp32", name: str = "synthetic.sum", batched: bool = True) -> Target:
    """A sum whose order is `tree`; `call_rows` sums many rows in one call."""
    prog = TreeProgram(tree, fmt)
    ident = lambda x: np.asarray(x, dtype=np.float64)  # noqa: E731  (values travel float64-held)
    return Target(name, "sum", prog.n, get_format(fmt).name, fn=lambda x: prog(x), native=ident,
                  to_float64=ident, call_rows=(lambda X: prog(X)) if batched else None)


def dot_target(tree: Tree, fmt: str = "fp32", name: str = "synthetic.dot") -> Target:
    prog = TreeProgram(tree, fmt)
    f = get_format(fmt)
    ident = lambda x: np.asarray(x, dtype=np.float64)  # noqa: E731
    return Target(name, "dot", prog.n, f.name, fn=lambda x, y: prog(round_to(f, x * y)), native=ident,
                  to_float64=ident)


def gemm_target(row_trees, fmt: str = "fp32", ncols: int = 3, name: str = "synthetic.gemm",
                col_trees=None) -> Target:
    """A GEMM whose output (r, c) sums its K products in row_trees[r] (or col_trees[c] where given)."""
    progs = [TreeProgram(t, fmt) for t in row_trees]
    cprogs = None if col_trees is None else {c: TreeProgram(t, fmt) for c, t in col_trees.items()}
    f = get_format(fmt)
    K = progs[0].n

    def gemm(A, B):
        A = np.asarray(A, np.float64)
        B = np.asarray(B, np.float64)
        out = np.empty((A.shape[0], B.shape[1]))
        for r in range(A.shape[0]):
            terms = round_to(f, A[r][None, :] * B.T)       # (ncols, K) exact products, rounded
            out[r] = progs[r](terms)
            if cprogs:
                for c, p in cprogs.items():
                    out[r, c] = p(terms[c])
        return out

    ident = lambda x: np.asarray(x, dtype=np.float64)  # noqa: E731
    return Target(name, "gemm", K, f.name, m=len(progs), ncols=ncols, fn=gemm, native=ident, to_float64=ident)


# ---------------------------------------------------------------- known orders

def strided_lanes(n: int, k: int, outer: str = "pairwise") -> Tree:
    """k lanes (lane i sums i, i+k, ... in order), lanes combined pairwise or in sequence."""
    lanes = [sequential(range(i, n, k)) for i in range(min(k, n))]
    return _combine(lanes, outer)


def blocks(n: int, b: int, outer: str = "sequential") -> Tree:
    """Contiguous blocks of b summed in order, block sums combined in sequence or pairwise."""
    parts = [sequential(range(lo, min(n, lo + b))) for lo in range(0, n, b)]
    return _combine(parts, outer)


def fused_chain(n: int, w: int, at: int | None = None) -> Tree:
    """Fused nodes of w terms, each later node also taking the previous result (H100 style)."""
    return tree_fused_chain(range(n), w, at)


def reversed_tree(n: int) -> Tree:
    return sequential(range(n - 1, -1, -1))


def caterpillar(n: int, rng) -> Tree:
    return sequential(rng.permutation(n).tolist())


def _combine(parts: list, how: str) -> Tree:
    if len(parts) == 1:
        return parts[0]
    if how == "sequential":
        acc = parts[0]
        for p in parts[1:]:
            acc = Node((acc, p))
        return acc
    # pairwise halving over the parts (iterative, bottom-up over a work list)
    work = [(0, len(parts), None)]
    done: dict[tuple[int, int], Tree] = {}
    while work:
        lo, hi, _ = work.pop()
        if hi - lo == 1:
            done[(lo, hi)] = parts[lo]
            continue
        mid = lo + (hi - lo) // 2
        if (lo, mid) in done and (mid, hi) in done:
            done[(lo, hi)] = Node((done.pop((lo, mid)), done.pop((mid, hi))))
        else:
            work.append((lo, hi, None))
            work.extend([(lo, mid, None), (mid, hi, None)])
    return done[(0, len(parts))]


__all__ = ["TreeProgram", "fused_sum", "sum_target", "dot_target", "gemm_target", "strided_lanes",
           "blocks", "fused_chain", "reversed_tree", "caterpillar", "pairwise", "sequential"]


class TreeOracle:
    """Answers l_S(i, j) straight from a known tree (no arithmetic): for counting queries on big n.

    Same interface as fpspec.reveal.oracle.LcaOracle.l_many; every answer is what a
    perfect black box summing in `tree` would give.
    """

    def __init__(self, tree: Tree, window: int | None = None):
        from fpspec.tree import leaves

        order = leaves(tree)
        self.n = len(order)
        self.queries = 0
        self.calls = 0
        self.pos = np.empty(self.n, np.int64)
        self.pos[np.asarray(order)] = np.arange(self.n)
        lo, hi, parent, depth = [], [], [], []
        self.node_of_leaf = np.empty(self.n, np.int64)
        stack = [(tree, -1)]
        while stack:
            t, par = stack.pop()
            me = len(lo)
            first = self.pos[t] if isinstance(t, int) else self.pos[t.first]
            lo.append(first)
            hi.append(first + (1 if isinstance(t, int) else t.size))
            parent.append(par)
            depth.append(0 if par < 0 else depth[par] + 1)
            if isinstance(t, int):
                self.node_of_leaf[t] = me
            else:
                stack.extend((c, me) for c in reversed(t.children))
        self.lo, self.hi = np.array(lo), np.array(hi)
        self.parent, self.depth = np.array(parent), np.array(depth)
        self.plan = type("Plan", (), {"window": window or (1 << 62)})()

    def lca(self, a, b) -> np.ndarray:
        """Vectorized binary lifting: O(log depth) numpy steps, whatever the tree's height."""
        if not hasattr(self, "_up"):
            up = [np.where(self.parent < 0, np.arange(len(self.parent)), self.parent)]
            while (1 << len(up)) <= int(self.depth.max()):
                up.append(up[-1][up[-1]])
            self._up = up
        x, y = self.node_of_leaf[a], self.node_of_leaf[b]
        swap = self.depth[x] < self.depth[y]
        x, y = np.where(swap, y, x), np.where(swap, x, y)
        diff = self.depth[x] - self.depth[y]
        for k, up in enumerate(self._up):
            x = np.where((diff >> k) & 1, up[x], x)
        for up in reversed(self._up):
            move = up[x] != up[y]
            x = np.where(move, up[x], x)
            y = np.where(move, up[y], y)
        return np.where(x == y, x, self._up[0][x])

    def l_many(self, pairs, units=None, groups=None) -> np.ndarray:
        pairs = np.asarray(pairs, np.int64).reshape(-1, 2)
        self.queries += len(pairs)
        self.calls += 1
        node = self.lca(pairs[:, 0], pairs[:, 1])
        if units is None:
            return self.hi[node] - self.lo[node]
        sets = [units] if groups is None else list(units)
        groups = np.zeros(len(pairs), np.int64) if groups is None else np.asarray(groups)
        out = np.empty(len(pairs), np.int64)
        for g in np.unique(groups).tolist():
            sel = np.flatnonzero(groups == g)
            member = np.zeros(self.n + 1, np.int64)
            s = np.union1d(sets[g], [])
            member[self.pos[s.astype(np.int64)] + 1] = 1
            for col in (0, 1):  # masks outside S still count
                member[self.pos[pairs[sel, col]] + 1] = 1
            prefix = np.cumsum(member)
            out[sel] = prefix[self.hi[node[sel]]] - prefix[self.lo[node[sel]]]
        return out
