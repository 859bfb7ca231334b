"""The revelation engine: Target -> summation tree (FPRev, seed 000, section 5 and 8.1).

    reveal(target, algorithm="auto") -> Revelation

Algorithms (all iterative: no recursion, any order, n up to 2^20 and beyond):
- "basic": FPRev-basic (Algorithm 2): every l(i, j), then merge in ascending l
  with a union-find; a batch of merges with one l that joins k > 2 parts is a
  fused node.  n(n-1)/2 queries: small n only.
- "fprev": FPRev (Algorithm 4, multiway): pick a pivot p in the leaf set I,
  ask l(p, j) for every other j, group the j by l: the groups are the subtrees
  hanging off p's path to the root, built the same way; a group whose own top
  covers more than the group is part of a fused node (Algorithm 4's
  |J_l| != n_leaves(T_c) case).  Units on every leaf, so n - 2 counts must be
  exact in the output format.
- "modified": Algorithm 5's idea generalized: units only on the group being
  built plus one leaf beside it (its "context": the parent's pivot, which shows
  a fused parent), zeros elsewhere, and counts in windows of at most W units
  when the group is wider than the format counts exactly.  Works for fp16/bf16
  and for n beyond 2^p.
- "auto": fprev when the format counts n - 2 units exactly, else modified.

Pivots are random (seeded; seed 000 section 8.2 suggests it): a reversed sum
takes about 2n queries instead of n^2/2.  All groups pending at the same depth
are asked in one batch ("wave"), so a GEMM answers a whole wave in a few calls.

Every answer is checked: l must be an integer in [2, |S|], each level of a
pivot's path must hold exactly the leaves counted so far, and the finished tree
is checked against fresh single-call queries (a nondeterministic or
value-dependent target fails here).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from fpspec.errors import FpspecError, RevealRefused
from fpspec.reveal.masks import plan_masks
from fpspec.reveal.oracle import LcaOracle
from fpspec.tree import Node, Tree, check_leaves, leaves, postorder

ALGORITHMS = ("auto", "basic", "fprev", "modified")
BASIC_MAX_N = 1024          # n(n-1)/2 queries: beyond this FPRev-basic is hopeless


@dataclass(frozen=True)
class Revelation:
    tree: Tree
    n: int
    queries: int
    calls: int
    seconds: float
    algorithm: str
    notes: tuple[str, ...] = ()
    # gemv/gemm: output elements (row, col) whose order differs from the revealed one
    differing: tuple[tuple[int, ...], ...] = ()
    checked_outputs: int = 0
    plan: str = ""
    target: str = ""

    def summary(self) -> dict:
        from fpspec.tree import stats

        return {
            "target": self.target, "n": self.n, "algorithm": self.algorithm,
            "queries": self.queries, "calls": self.calls, "seconds": round(self.seconds, 6),
            "tree_stats": str(stats(self.tree)), "masks": self.plan,
            "differing_outputs": [list(d) for d in self.differing],
            "checked_outputs": self.checked_outputs, "notes": list(self.notes),
        }


@dataclass
class _Frame:
    """One leaf group being built: pivot p's path splits it into groups by l."""

    leaves: np.ndarray
    ctx: int                                    # a leaf beside the group (modified mode), -1 at the root
    pivot: int = -1
    levels: list = field(default_factory=list)  # [(l, child frame index)] in ascending l
    top_fused: bool = False                     # the group's top node also covers the context side
    top_exceeds: bool = False                   # last level's l exceeds the group (fused with the parent)
    result: Tree | None = None


def reveal(target, *, algorithm: str = "auto", seed: int = 0, progress: bool = False,
           pivot: str = "random", split: bool | None = None, check: bool = True) -> Revelation:
    """Reveal the summation tree of `target`; raise RevealRefused with a one-line reason."""
    if algorithm not in ALGORITHMS:
        raise FpspecError(f"unknown algorithm {algorithm!r}; expected one of {', '.join(ALGORITHMS)}")
    start = time.perf_counter()
    n = target.n
    plan = plan_masks(target, split=split)
    oracle = LcaOracle(target, plan)
    notes: list[str] = []
    rng = np.random.default_rng(seed)
    exact_all = n - 2 <= plan.window
    if algorithm == "auto":
        algorithm = "fprev" if exact_all else "modified"
    if algorithm in ("fprev", "basic") and not exact_all:
        raise RevealRefused(
            f"n = {n} is too large for {plan.out} counts with {algorithm} (at most {plan.window + 2} "
            "leaves count exactly); use --algorithm modified")
    _check_deterministic(target, oracle, rng)
    if target.op in ("gemv", "gemm") and target.m > 1:
        rows = _rows_sharing_row0(oracle, rng)
        if len(rows) < target.m:
            notes.append(f"{target.m - len(rows)} of {target.m} rows differ from row 0 on a sample; "
                         "queries are batched over the other rows only")
        oracle.rows = rows
    bar = _Progress(n, progress)
    try:
        if algorithm == "basic":
            if n > BASIC_MAX_N:
                raise FpspecError(f"FPRev-basic asks n(n-1)/2 queries; use it for n <= {BASIC_MAX_N}")
            tree = _basic(oracle, n)
        else:
            tree = _fprev(oracle, n, rng, restricted=algorithm == "modified", pivot=pivot, bar=bar)
    finally:
        bar.close()
    check_leaves(tree, n)
    differing: tuple = ()
    checked = 0
    if check:
        _validate(tree, target, plan, rng, oracle)
        if target.op in ("gemv", "gemm"):
            differing, checked = _sharing_check(tree, oracle, rng)
            if differing:
                notes.append(f"{len(differing)} of {checked} output elements do not share the revealed order")
    return Revelation(tree, n, oracle.queries, oracle.calls, time.perf_counter() - start, algorithm,
                      tuple(notes), differing, checked, str(plan), target.describe())


# ---------------------------------------------------------------- FPRev (Algorithm 4 / modified)

def _fprev(oracle: LcaOracle, n: int, rng, *, restricted: bool, pivot: str, bar) -> Tree:
    frames: list[_Frame] = [_Frame(np.arange(n), -1)]
    wave = [0]
    while wave:
        asking = [f for f in wave if len(frames[f].leaves) > 1]
        for f in wave:
            if len(frames[f].leaves) == 1:
                frames[f].result = int(frames[f].leaves[0])
                bar.advance(1)
        if not asking:
            break
        pairs, groups, units = [], [], []
        for g, f in enumerate(asking):
            fr = frames[f]
            k = int(rng.integers(len(fr.leaves))) if pivot == "random" else 0
            fr.pivot = int(fr.leaves[k])
            others = np.delete(fr.leaves, k)
            pairs.append(np.stack([np.full(len(others), fr.pivot), others], 1))
            groups.append(np.full(len(others), g))
            if restricted:
                units.append(fr.leaves if fr.ctx < 0 else np.append(fr.leaves, fr.ctx))
            bar.advance(1)
        P = np.concatenate(pairs)
        G = np.concatenate(groups)
        L = oracle.l_many(P, units if restricted else None, G if restricted else None)
        next_wave = []
        offset = 0
        for g, f in enumerate(asking):
            fr = frames[f]
            k = len(fr.leaves) - 1
            ls, js = L[offset:offset + k], P[offset:offset + k, 1]
            offset += k
            order = np.argsort(ls, kind="stable")
            ls, js = ls[order], js[order]
            cut = np.flatnonzero(np.diff(ls)) + 1
            starts = np.concatenate([[0], cut])
            ends = np.concatenate([cut, [k]])
            if fr.ctx < 0 and n > 2 and ls[-1] == 2 and len(fr.leaves) == n:
                raise RevealRefused(
                    "order-independent: every pair of masks cancels first (an exact or compensated sum); "
                    "there is no order to reveal")
            covered = 1
            for t, (a, b) in enumerate(zip(starts.tolist(), ends.tolist())):
                covered += b - a
                lv = int(ls[a])
                last = t == len(starts) - 1
                # a group's top level may exceed it only when the group hangs under a fused
                # parent: by exactly the context leaf (modified) or by the parent's other leaves
                exceeds_ok = last and fr.ctx >= 0 and (lv == covered + 1 if restricted else lv > covered)
                if lv != covered and not exceeds_ok:
                    raise RevealRefused(
                        f"answers inconsistent with any tree: the path from leaf {fr.pivot} has a level of "
                        f"l = {lv} holding {covered} leaves")
                if lv != covered:
                    fr.top_exceeds = True
                child = _Frame(np.sort(js[a:b]), fr.pivot)
                frames.append(child)
                fr.levels.append((lv, len(frames) - 1))
                next_wave.append(len(frames) - 1)
        wave = next_wave
    return _assemble(frames)


def _assemble(frames: list[_Frame]) -> Tree:
    """Children were appended after their parents: build in reverse creation order."""
    for fr in reversed(frames):
        if fr.result is not None:
            continue
        r: Tree = fr.pivot
        for t, (lv, ci) in enumerate(fr.levels):
            child = frames[ci]
            sub = child.result
            top = t == len(fr.levels) - 1 and fr.top_exceeds
            if child.top_fused:
                # the child's top node is a fused node that also takes r as a child
                r = Node(sub.children + (r,), fused=True)
            elif top:
                r = Node((r, sub), fused=True)
            else:
                r = Node((r, sub))
        fr.result = r
        fr.top_fused = fr.top_exceeds
    return frames[0].result


# ---------------------------------------------------------------- FPRev-basic (Algorithm 2)

def _basic(oracle: LcaOracle, n: int) -> Tree:
    i, j = np.triu_indices(n, 1)
    pairs = np.stack([i, j], 1)
    L = oracle.l_many(pairs)
    if n > 2 and np.all(L == 2):
        raise RevealRefused("order-independent: every pair of masks cancels first (an exact or compensated "
                            "sum); there is no order to reveal")
    parent = list(range(n))
    tree_of: dict[int, Tree] = {k: k for k in range(n)}
    size = [1] * n

    def find(a: int) -> int:
        root = a
        while parent[root] != root:
            root = parent[root]
        while parent[a] != root:
            parent[a], a = root, parent[a]
        return root

    order = np.argsort(L, kind="stable")
    Ls, Is, Js = L[order], pairs[order, 0], pairs[order, 1]
    cut = np.flatnonzero(np.diff(Ls)) + 1
    for a, b in zip(np.concatenate([[0], cut]).tolist(), np.concatenate([cut, [len(Ls)]]).tolist()):
        lv = int(Ls[a])
        parts: dict[int, list[int]] = {}      # new root -> old roots merged under it at this l
        for x, y in zip(Is[a:b].tolist(), Js[a:b].tolist()):
            rx, ry = find(x), find(y)
            if rx == ry:
                continue
            kids = parts.pop(rx, [rx]) + parts.pop(ry, [ry])
            parent[ry] = rx
            size[rx] += size[ry]
            parts[rx] = kids
        for root, kids in parts.items():
            if size[root] != lv:
                raise RevealRefused(f"answers inconsistent with any tree: a node of l = {lv} holds {size[root]} leaves")
            tree_of[root] = Node(tuple(tree_of.pop(k) if k != root else tree_of[root] for k in kids),
                                 fused=len(kids) > 2)
    roots = {find(k) for k in range(n)}
    if len(roots) != 1:
        raise RevealRefused("answers inconsistent with any tree: the leaves never join into one tree")
    return tree_of[roots.pop()]


# ---------------------------------------------------------------- checks

def _check_deterministic(target, oracle: LcaOracle, rng) -> None:
    """The same input must give the same output: call twice on random inputs and on masked ones."""
    from fpspec.formats import get_format

    fmt = get_format(target.fmt)
    ops = []
    for shape in target.operand_shapes:
        x = rng.standard_normal(shape) * 2.0 ** rng.integers(-4, 5, size=shape)
        ops.append(np.asarray(fmt.round(x), dtype=np.float64))
    a = target.run(*ops)
    b = target.run(*ops)
    oracle.calls += 2
    if not np.array_equal(a.view(np.uint64), b.view(np.uint64)):
        raise RevealRefused("nondeterministic: the same input gave different outputs on two calls")
    k = min(4, target.n - 1)
    i = rng.choice(target.n, size=k, replace=False)
    j = (i + 1 + rng.integers(0, target.n - 1, size=k)) % target.n
    pairs = np.stack([i, j], 1)
    window = np.sort(rng.permutation(target.n)[:oracle.plan.window])
    units = np.union1d(window, np.concatenate([i, j]))
    first = oracle.l_many(pairs, units)
    second = oracle.l_many(pairs, units)
    if not np.array_equal(first, second):
        raise RevealRefused("nondeterministic: the same masked input gave different outputs on two calls")


def _tree_pairs(tree: Tree, rng, k: int) -> np.ndarray:
    """Pairs that pin the tree down: for sampled nodes, first leaves of two different children."""
    nodes = [s for s in postorder(tree) if not isinstance(s, int)]
    pick = rng.choice(len(nodes), size=min(k, len(nodes)), replace=False)
    out = []
    for p in pick.tolist():
        kids = nodes[p].children
        a, b = rng.choice(len(kids), size=2, replace=False)
        fa = kids[a] if isinstance(kids[a], int) else kids[a].first
        fb = kids[b] if isinstance(kids[b], int) else kids[b].first
        out.append((fa, fb))
    n = tree.size if isinstance(tree, Node) else 1
    for _ in range(k):
        a, b = rng.choice(n, size=2, replace=False)
        out.append((int(a), int(b)))
    return np.array(out, dtype=np.int64)


class _Intervals:
    """Each node of a tree as an interval of its leaf order: lca and leaf counts without recursion."""

    def __init__(self, tree: Tree):
        order = leaves(tree)
        self.pos = np.empty(len(order), np.int64)
        self.pos[np.asarray(order)] = np.arange(len(order))
        self.lo, self.hi, self.parent, self.depth = [], [], [], []
        self.node_of_leaf = np.empty(len(order), np.int64)
        stack = [(tree, -1)]
        cursor = 0
        # preorder with explicit stack; a node's interval is [first leaf pos, first + size)
        while stack:
            t, par = stack.pop()
            me = len(self.lo)
            first = self.pos[t] if isinstance(t, int) else self.pos[t.first]
            size = 1 if isinstance(t, int) else t.size
            self.lo.append(int(first))
            self.hi.append(int(first) + size)
            self.parent.append(par)
            self.depth.append(0 if par < 0 else self.depth[par] + 1)
            if isinstance(t, int):
                self.node_of_leaf[t] = me
            else:
                stack.extend((c, me) for c in reversed(t.children))
        del cursor

    def lca(self, a: int, b: int) -> int:
        x, y = int(self.node_of_leaf[a]), int(self.node_of_leaf[b])
        d, p = self.depth, self.parent
        while d[x] > d[y]:
            x = p[x]
        while d[y] > d[x]:
            y = p[y]
        while x != y:
            x, y = p[x], p[y]
        return x

    def l_restricted(self, a: int, b: int, S) -> int:
        """Leaves of S u {a, b} under lca(a, b)."""
        node = self.lca(a, b)
        ps = self.pos[np.union1d(S, [a, b])]
        return int(np.count_nonzero((ps >= self.lo[node]) & (ps < self.hi[node])))


def _validate(tree: Tree, target, plan, rng, oracle: LcaOracle) -> None:
    """Fresh single-call queries must agree with the tree (catches batching, nondeterminism, garbage)."""
    single = LcaOracle(target, plan, batch=False)
    single.rows = oracle.rows[:1] if len(oracle.rows) else np.zeros(1, np.int64)
    pairs = _tree_pairs(tree, rng, 24)
    iv = _Intervals(tree)
    if target.n - 2 <= plan.window:
        S = None
        expect = np.array([iv.hi[iv.lca(a, b)] - iv.lo[iv.lca(a, b)] for a, b in pairs.tolist()])
        got = single.l_many(pairs)
    else:
        # windowed: units on a random window of leaves; expected l_S from the tree
        S = np.sort(rng.permutation(target.n)[:plan.window])
        expect = np.array([iv.l_restricted(a, b, S) for a, b in pairs.tolist()])
        got = single.l_many(pairs, S)
    oracle.queries += single.queries
    oracle.calls += single.calls
    bad = np.flatnonzero(got != expect)
    if bad.size:
        a, b = pairs[bad[0]]
        raise RevealRefused(
            f"answers inconsistent with any tree: l({a}, {b}) = {got[bad[0]]} on a fresh call, the revealed "
            f"tree says {expect[bad[0]]} (nondeterministic or value-dependent order?)")


def _rows_sharing_row0(oracle: LcaOracle, rng) -> np.ndarray:
    """Rows whose column-0 answers match row 0 on a sample of pairs (batching is safe over them)."""
    n = oracle.n
    pairs = [(0, 1), (0, n - 1), (n // 2 - 1, n // 2)] + [
        tuple(rng.choice(n, size=2, replace=False).tolist()) for _ in range(5)]
    agree = np.ones(oracle.target.m, bool)
    for a, b in pairs:
        if a == b:
            continue
        res = oracle.l_everywhere(a, b).reshape(oracle.target.m, -1)[:, 0]
        agree &= res == res[0]
    return np.flatnonzero(agree)


def _sharing_check(tree: Tree, oracle: LcaOracle, rng) -> tuple[tuple, int]:
    """Every output element must show the revealed l on a sample of pairs; list those that do not."""
    iv = _Intervals(tree)
    pairs = _tree_pairs(tree, rng, 12)
    bad = np.zeros(oracle.target.output_shape, bool)
    for a, b in pairs.tolist():
        got = oracle.l_everywhere(a, b)
        node = iv.lca(a, b)
        bad |= got != iv.hi[node] - iv.lo[node]
    where = np.argwhere(bad.reshape(oracle.target.m, -1))
    return tuple((int(r), int(c)) for r, c in where), int(bad.size)


class _Progress:
    """A rich progress bar that appears only once a run has taken more than a second."""

    def __init__(self, total: int, enabled: bool):
        self.total, self.enabled, self.done = total, enabled, 0
        self.start = time.perf_counter()
        self.bar = None

    def advance(self, k: int) -> None:
        self.done += k
        if not self.enabled:
            return
        if self.bar is None and time.perf_counter() - self.start > 1.0:
            from rich.progress import Progress

            self.bar = Progress(transient=True)
            self.task = self.bar.add_task("revealing", total=self.total)
            self.bar.start()
        if self.bar is not None:
            self.bar.update(self.task, completed=self.done)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()
