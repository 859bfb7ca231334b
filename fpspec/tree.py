"""Summation trees: the order in which n terms meet.

A tree is a leaf (an int, the term index) or a `Node` whose children are trees.
A binary `Node` is one IEEE addition (an FMA when the arithmetic says so and a
child is a product); a fused `Node` (`fused=True`, any number of children >= 2)
is one multi-term fused summation, as Tensor Cores do.

Every Node is canonical on construction: children ordered by their smallest
leaf.  Equality, hashing and every traversal here are iterative, so trees of
depth 10^6 (a sequential sum) need no recursion.

Text form: binary nodes in parentheses, fused nodes in brackets, leaves as
integers: ``((0 1) [2 3 4])``.
"""
from __future__ import annotations

import gc
import json
import re
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Iterator, Union

import numpy as np

Tree = Union[int, "Node"]


def _first(t: Tree) -> int:
    return t if isinstance(t, int) else t._meta[1]


def _size(t: Tree) -> int:
    return 1 if isinstance(t, int) else t.size


def _height(t: Tree) -> int:
    return 0 if isinstance(t, int) else t.height


@dataclass(frozen=True, eq=False, slots=True, init=False)
class Node:
    children: tuple
    fused: bool = False
    # (size, first leaf, height, hash): derived once at construction and kept
    # in one slot; see note [fast construction]
    _meta: tuple = field(default=(), repr=False)

    # Note [fast construction]: a frozen dataclass sets each field through
    # object.__setattr__, about 0.5 us apiece on a slow core; trees of 10^6
    # leaves are routine, so __init__ writes the slots through their
    # descriptors (_SET_*, bound below the class).  Instances stay immutable.
    def __init__(self, children: tuple, fused: bool = False):
        kids = children if children.__class__ is tuple else tuple(children)
        if len(kids) == 2:
            a, b = kids
            ca, cb = a.__class__, b.__class__
            if ca is Node:
                sa, fa, ha, xa = a._meta
            elif ca is int:
                sa, fa, ha, xa = 1, a, 0, a
            else:
                sa = None
            if cb is Node:
                sb, fb, hb, xb = b._meta
            elif cb is int:
                sb, fb, hb, xb = 1, b, 0, b
            else:
                sb = None
            if sa is not None and sb is not None:
                if fb < fa:
                    kids = (b, a)
                    fa, fb, xa, xb = fb, fa, xb, xa
                _SET_CHILDREN(self, kids)
                _SET_FUSED(self, fused)
                _SET_META(self, (sa + sb, fa, 1 + (ha if ha > hb else hb), hash((fused, xa, xb))))
                return
        if len(kids) < 2:
            what = "fused node" if fused else "node"
            raise ValueError(f"a {what} needs at least 2 children, got {len(kids)}")
        if not fused and len(kids) != 2:
            raise ValueError(f"a binary node has exactly 2 children, got {len(kids)}")
        metas = []
        for k in kids:
            if k.__class__ is Node:
                metas.append(k._meta)
            elif isinstance(k, int) and not isinstance(k, bool):
                metas.append((1, int(k), 0, int(k)))
            else:
                raise TypeError(f"tree children are ints or Nodes, got {type(k).__name__}")
        order = sorted(range(len(kids)), key=lambda i: metas[i][1])
        kids = tuple(kids[i] if kids[i].__class__ is Node else int(kids[i]) for i in order)
        metas = [metas[i] for i in order]
        _SET_CHILDREN(self, kids)
        _SET_FUSED(self, bool(fused))
        _SET_META(self, (sum(m[0] for m in metas), metas[0][1], 1 + max(m[2] for m in metas),
                         hash((bool(fused), *(m[3] for m in metas)))))

    @property
    def size(self) -> int:
        return self._meta[0]

    @property
    def first(self) -> int:
        return self._meta[1]

    @property
    def height(self) -> int:
        return self._meta[2]

    def __hash__(self) -> int:
        return self._meta[3]

    def __eq__(self, other) -> bool:
        if not isinstance(other, Node):
            return NotImplemented
        stack = [(self, other)]
        while stack:
            a, b = stack.pop()
            if a is b:
                continue
            if isinstance(a, int) or isinstance(b, int):
                if a != b:
                    return False
                continue
            if (a._meta != b._meta or a.fused != b.fused
                    or len(a.children) != len(b.children)):
                return False
            stack.extend(zip(a.children, b.children))
        return True

    def __str__(self) -> str:
        return format_tree(self)

    def __repr__(self) -> str:
        text = format_tree(self)
        return f"Node<{text if len(text) <= 200 else text[:200] + '...'}>"


_SET_CHILDREN = Node.__dict__["children"].__set__
_SET_FUSED = Node.__dict__["fused"].__set__
_SET_META = Node.__dict__["_meta"].__set__



@contextmanager
def building(freeze: bool = True):
    """Pause the cyclic garbage collector while building a large tree.

    Nodes cannot form cycles, but each new container triggers generation
    scans over every live node: building 10^6 nodes spends most of its time
    there.  Wrap bulk construction (parse, expand, JSON) in `with building():`.

    Note [gc after a big build]: re-enabling the collector with every new
    node still in generation 0 makes the very next allocation scan them all
    (seconds for 10^6 nodes).  Nodes form no cycles, so moving what was built
    to the permanent generation (gc.freeze) loses nothing (refcounting still
    frees them) and makes that scan free.  gc.freeze reaches every object
    alive at that moment; pass freeze=False for small builds.
    """
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            if freeze:
                gc.freeze()
            gc.enable()

def build_binary(kids) -> Tree:
    """Binary Nodes in bulk: `kids` holds (x, y) pairs, x >= 0 the node built at position x
    earlier, x < 0 the leaf ~x; returns the last node built.

    Each node equals Node((a, b)) (canonical order, same metadata and hash), made without
    Node.__init__'s checks and call (the pairs come from code, not users): about half the
    cost per node, which matters for the revelation engine's n - 1 nodes.
    """
    new, set_c, set_f, set_m = object.__new__, _SET_CHILDREN, _SET_FUSED, _SET_META
    built: list = []
    append = built.append
    for x, y in kids:
        if x < 0:
            a = ~x
            sa, fa, ha, xa = 1, a, 0, a
        else:
            a = built[x]
            sa, fa, ha, xa = a._meta
        if y < 0:
            b = ~y
            sb, fb, hb, xb = 1, b, 0, b
        else:
            b = built[y]
            sb, fb, hb, xb = b._meta
        t = new(Node)
        if fb < fa:
            set_c(t, (b, a))
            set_m(t, (sa + sb, fb, 1 + (ha if ha > hb else hb), hash((False, xb, xa))))
        else:
            set_c(t, (a, b))
            set_m(t, (sa + sb, fa, 1 + (ha if ha > hb else hb), hash((False, xa, xb))))
        set_f(t, False)
        append(t)
    return built[-1]


def node(*children: Tree) -> Node:
    """A binary node."""
    return Node(tuple(children))


def fused(*children: Tree) -> Node:
    """A fused (multiway) node."""
    return Node(tuple(children), fused=True)


# ---------------------------------------------------------------- traversal

def postorder(t: Tree) -> Iterator[Tree]:
    """Every subtree, children before parents, left to right."""
    stack: list = [(t, False)]
    while stack:
        s, done = stack.pop()
        if done or isinstance(s, int):
            yield s
            continue
        stack.append((s, True))
        stack.extend((c, False) for c in reversed(s.children))


def leaves(t: Tree) -> list[int]:
    """Leaf indices in canonical left-to-right order."""
    return [s for s in postorder(t) if isinstance(s, int)]


def size(t: Tree) -> int:
    return _size(t)


def check_leaves(t: Tree, n: int | None = None) -> None:
    """Raise unless the leaves are exactly 0..n-1, each once."""
    ls = leaves(t)
    n = len(ls) if n is None else n
    if sorted(ls) != list(range(n)):
        seen = np.bincount(np.asarray(ls, dtype=np.int64), minlength=n) if ls else np.zeros(n, int)
        dup = np.flatnonzero(seen > 1)
        missing = np.flatnonzero(seen[:n] == 0)
        raise ValueError(
            f"tree leaves must be 0..{n - 1} once each"
            + (f"; repeated: {dup[:5].tolist()}" if dup.size else "")
            + (f"; missing: {missing[:5].tolist()}" if missing.size else "")
        )


def relabel(t: Tree, mapping) -> Tree:
    """Replace leaf i by mapping[i] (an int or a subtree)."""
    return _rebuild(t, lambda leaf: mapping[leaf])


def observable(t: Tree) -> Tree:
    """The tree as revelation sees it: a fused node of two children has the
    same l(i, j) as a binary node, so it is revealed as one (a chain's last
    node over one new operand, say).  The spec's tree keeps the flag, which
    the arithmetic needs; compare a spec with a revealed tree through this."""
    if not any(s.__class__ is not int and s.fused and len(s.children) == 2 for s in postorder(t)):
        return t
    results: list = []
    with building(freeze=False):
        for s in postorder(t):
            if s.__class__ is int:
                results.append(s)
            else:
                k = len(s.children)
                kids = tuple(results[-k:])
                del results[-k:]
                results.append(Node(kids, s.fused and k > 2))
    return results[0]


def _rebuild(t: Tree, leaf_fn) -> Tree:
    with building():
        return _rebuild_now(t, leaf_fn)


def _rebuild_now(t: Tree, leaf_fn) -> Tree:
    results: list = []
    for s in postorder(t):
        if isinstance(s, int):
            results.append(leaf_fn(s))
        else:
            k = len(s.children)
            kids = tuple(results[-k:])
            del results[-k:]
            results.append(Node(kids, s.fused))
    return results[0]


# ---------------------------------------------------------------- text form

def format_tree(t: Tree) -> str:
    parts: list[str] = []
    stack: list = [t]
    while stack:
        s = stack.pop()
        if isinstance(s, str):
            parts.append(s)
        elif isinstance(s, int):
            parts.append(str(s))
        else:
            open_, close = ("[", "]") if s.fused else ("(", ")")
            stack.append(close)
            for i, c in enumerate(reversed(s.children)):
                stack.append(c)
                if i < len(s.children) - 1:
                    stack.append(" ")
            stack.append(open_)
    return "".join(parts)


class TreeSyntaxError(ValueError):
    def __init__(self, message: str, pos: int):
        super().__init__(f"column {pos + 1}: {message}")
        self.pos = pos


def parse_tree(text: str) -> Tree:
    """Parse the nested-bracket text form (inverse of `format_tree`)."""
    with building():
        return _parse_tree(text)


_TOKEN = re.compile(r"\d+|[()\[\]]|[\s,]+|.")


def _parse_tree(text: str) -> Tree:
    stack: list[tuple[str, int, list]] = []
    result: Tree | None = None
    for m in _TOKEN.finditer(text):
        tok = m.group()
        i = m.start()
        ch = tok[0]
        if ch.isdigit():
            leaf = int(tok)
            if stack:
                stack[-1][2].append(leaf)
            elif result is None:
                result = leaf
            else:
                raise TreeSyntaxError("text after the end of the tree", i)
        elif ch == "(" or ch == "[":
            if result is not None and not stack:
                raise TreeSyntaxError("text after the end of the tree", i)
            stack.append((ch, i, []))
        elif ch == ")" or ch == "]":
            if not stack:
                raise TreeSyntaxError(f"unmatched {ch!r}", i)
            open_, pos, kids = stack.pop()
            if (open_ == "(") != (ch == ")"):
                raise TreeSyntaxError(f"{open_!r} at column {pos + 1} closed by {ch!r}", i)
            try:
                sub = Node(tuple(kids), open_ == "[")
            except ValueError as e:
                raise TreeSyntaxError(str(e), pos) from None
            if stack:
                stack[-1][2].append(sub)
            else:
                result = sub
        elif not (ch.isspace() or ch == ","):
            raise TreeSyntaxError(f"unexpected {ch!r}; expected '(', '[', ')', ']' or a leaf index", i)
    if stack:
        raise TreeSyntaxError(f"{stack[-1][0]!r} is never closed", stack[-1][1])
    if result is None:
        raise TreeSyntaxError("empty tree", 0)
    if result.__class__ is int and result != 0:
        # check_leaves would say "must be 0..0 once each; missing: [0]"
        raise ValueError(f"tree leaves must be numbered from 0: a tree of one leaf is `0`, not `{result}`")
    check_leaves(result)
    return result


# ---------------------------------------------------------------- JSON

def to_json(t: Tree):
    """Leaves are ints, binary nodes lists, fused nodes {"fused": [...]}."""
    results: list = []
    for s in postorder(t):
        if isinstance(s, int):
            results.append(s)
        else:
            k = len(s.children)
            kids = results[-k:]
            del results[-k:]
            results.append({"fused": kids} if s.fused else kids)
    return results[0]


def from_json(obj) -> Tree:
    with building():
        return _from_json(obj)


def _from_json(obj) -> Tree:
    results: list = []
    stack: list = [(obj, False)]
    while stack:
        o, done = stack.pop()
        if isinstance(o, bool) or not isinstance(o, (int, list, dict)):
            raise ValueError(f"not a tree: {o!r}")
        if isinstance(o, int):
            results.append(o)
            continue
        kids = o["fused"] if isinstance(o, dict) else o
        if done:
            k = len(kids)
            sub = tuple(results[-k:]) if k else ()
            del results[len(results) - k:]
            results.append(Node(sub, fused=isinstance(o, dict)))
        else:
            stack.append((o, True))
            stack.extend((c, False) for c in reversed(kids))
    return results[0]


def dumps(t: Tree) -> str:
    return json.dumps(to_json(t), separators=(",", ":"))


# ---------------------------------------------------------------- queries

class LcaIndex:
    """Answers l(i, j), the number of leaves under the lowest common ancestor."""

    def __init__(self, t: Tree):
        n = size(t)
        self.n = n
        parent: dict[int, int] = {}
        sizes: list[int] = []
        depth: list[int] = []
        leaf_node = np.zeros(n, dtype=np.int64)
        # preorder numbering of internal nodes, iterative
        ids: dict[int, int] = {}
        stack: list = [(t, -1)]
        parents: list[int] = []
        while stack:
            s, par = stack.pop()
            me = len(sizes)
            sizes.append(_size(s))
            depth.append(0 if par < 0 else depth[par] + 1)
            parents.append(par)
            if isinstance(s, int):
                leaf_node[s] = me
            else:
                stack.extend((c, me) for c in s.children)
        del parent, ids
        self._parent = parents
        self._size = sizes
        self._depth = depth
        self._leaf = leaf_node

    def l(self, i: int, j: int) -> int:
        a, b = int(self._leaf[i]), int(self._leaf[j])
        p, d = self._parent, self._depth
        while d[a] > d[b]:
            a = p[a]
        while d[b] > d[a]:
            b = p[b]
        while a != b:
            a, b = p[a], p[b]
        return self._size[a]


def lca_size(t: Tree, i: int, j: int) -> int:
    return LcaIndex(t).l(i, j)


@dataclass(frozen=True)
class Stats:
    leaves: int
    internal: int
    fused: int
    height: int
    max_fanout: int

    def __str__(self) -> str:
        return (f"{self.leaves} leaves, {self.internal} nodes ({self.fused} fused), "
                f"height {self.height}, max fan-in {self.max_fanout}")


def stats(t: Tree) -> Stats:
    internal = fused_n = fan = 0
    for s in postorder(t):
        if not isinstance(s, int):
            internal += 1
            fused_n += s.fused
            fan = max(fan, len(s.children))
    return Stats(size(t), internal, fused_n, _height(t), fan)


# ---------------------------------------------------------------- diff

@dataclass(frozen=True)
class Difference:
    path: tuple[int, ...]      # child indices from the root to the differing node
    left: Tree
    right: Tree

    def __str__(self) -> str:
        where = "root" if not self.path else "child " + ".".join(map(str, self.path))
        span = leaves(self.left)
        return (f"first difference at {where} (leaves {min(span)}..{max(span)}):"
                f"\n  left:  {_short(self.left)}\n  right: {_short(self.right)}")


def _short(t: Tree, limit: int = 300) -> str:
    s = format_tree(t)
    return s if len(s) <= limit else s[:limit] + f"... ({size(t)} leaves)"


def diff(a: Tree, b: Tree) -> Difference | None:
    """None when equal, else the deepest node where the two trees stop agreeing.

    Descends while both nodes split their leaves into the same groups; the
    node where the grouping differs is the useful message.
    """
    path: tuple[int, ...] = ()
    while True:
        if a == b:
            return None
        if isinstance(a, int) or isinstance(b, int) or a.fused != b.fused:
            return Difference(path, a, b)
        if len(a.children) != len(b.children):
            return Difference(path, a, b)
        groups_a = [sorted(leaves(c)) for c in a.children]
        groups_b = [sorted(leaves(c)) for c in b.children]
        if groups_a != groups_b:
            return Difference(path, a, b)
        for k, (ca, cb) in enumerate(zip(a.children, b.children)):
            if ca != cb:
                a, b, path = ca, cb, path + (k,)
                break


# ---------------------------------------------------------------- evaluation

def evaluate(t: Tree, terms, fmt="fp32", fused_sum=None) -> np.ndarray:
    """Sum `terms` (shape (n,) or (n, m): m independent outputs) in tree order.

    Binary nodes are one IEEE add in `fmt`, nearest-even.  Fused nodes call
    `fused_sum(list_of_child_values, fmt)`, required when the tree has any.
    Products, FMA and initial values are the arithmetic model's business
    (fpspec.arith); this is the plain-sum evaluator the synthetic targets use.
    """
    from fpspec.formats import add, get_format

    fmt = get_format(fmt) if isinstance(fmt, str) else fmt
    terms = np.asarray(terms, dtype=np.float64)
    results: list = []
    for s in postorder(t):
        if isinstance(s, int):
            results.append(terms[s])
            continue
        k = len(s.children)
        vals = results[-k:]
        del results[-k:]
        if s.fused:
            if fused_sum is None:
                raise ValueError("tree has fused nodes: pass fused_sum")
            results.append(fused_sum(vals, fmt))
        else:
            results.append(add(fmt, vals[0], vals[1]))
    return results[0]


# ---------------------------------------------------------------- builders (synthetic orders for tests)

def sequential(idx) -> Tree:
    idx = list(idx)
    acc: Tree = idx[0]
    with building():
        for i in idx[1:]:
            acc = Node((acc, i))
    return acc


def reversed_sequential(idx) -> Tree:
    return sequential(list(idx)[::-1])


def pairwise(idx) -> Tree:
    """Recursive halving; the left half gets the floor of the split."""
    idx = list(idx)
    # post-order over (lo, hi) ranges with an explicit stack
    out: list = []
    stack: list = [(0, len(idx), False)]
    with building():
        while stack:
            lo, hi, done = stack.pop()
            if hi - lo == 1:
                out.append(idx[lo])
            elif done:
                right = out.pop()
                out.append(Node((out.pop(), right)))
            else:
                mid = lo + (hi - lo) // 2
                stack.extend(((lo, hi, True), (mid, hi, False), (lo, mid, False)))
    return out[0]


def chain_groups(m: int, w: int, at: int | None = None) -> list[int]:
    """Group sizes of a chain of w-wide fused nodes over m operands, in chain order.

    Every group has w operands except a short one of m % w (if any), which
    sits at index min(at, m // w); at None means last.  cuBLAS puts it first
    or in the middle when its K loop starts with the partial tile.
    """
    if w < 1 or m < 1:
        raise ValueError(f"chain of width {w} over {m} operands")
    full, r = divmod(m, w)
    sizes = [w] * full
    if r:
        sizes.insert(full if at is None else min(max(at, 0), full), r)
    return sizes


def chain_node_end(m: int, w: int, at: int | None, x: int) -> int:
    """End (exclusive) of the operands under the first chain node that holds
    operand x: `chain_groups` in closed form, for l(i, j) at huge m."""
    full, r = divmod(m, w)
    p = full if (at is None or not r) else min(max(at, 0), full)
    start = p * w   # the short group (r operands; none if r == 0) starts here
    if x < start:
        end = (x // w + 1) * w
    elif x < start + r:
        end = start + r
    else:
        end = start + r + ((x - start - r) // w + 1) * w
    if end == 1 and m > 1:   # a first group of one operand is no node: the next node holds it
        end = 1 + min(w, m - 1)
    return min(end, m)


def chain_shape(t: Tree) -> tuple[int, int | None] | None:
    """(w, at) if t is a chain of fused nodes (`fused_chain(range(m), w, at)`
    up to operand labels, at None when the short group is last or there is
    none), else None.  Only the shape is read: callers compare trees.
    Binary nodes stand for fused pairs (`observable`)."""
    if t.__class__ is int:
        return None
    groups = []
    while True:
        inner = [c for c in t.children if c.__class__ is not int]
        if len(inner) > 1 or (inner and inner[0] is not t.children[0]):
            return None
        groups.append(len(t.children) - len(inner))
        if not inner:
            break
        t = inner[0]
    groups.reverse()
    m = sum(groups)
    rest = groups[1:]
    # a first group of one, in the next node (not where the rest are single: ((0 1) 2) is w = 2, short last)
    if rest and groups[0] == max(rest) + 1 and min(rest) == max(rest) > 1:
        return (rest[0], 0) if m % rest[0] == 1 else None
    w = max(groups)
    short = [i for i, g in enumerate(groups) if g != w]
    if not short or short == [len(groups) - 1]:
        return w, None
    return (w, short[0]) if len(short) == 1 else None


def fused_chain(idx, w: int, at: int | None = None) -> Tree:
    """A chain of fused nodes: the first group, then each next group fused with
    the result so far (a first group of one operand is that operand, so the
    next node has w + 1 leaf children)."""
    idx = list(idx)
    pos = 0
    acc: Tree | None = None
    with building():
        for g in chain_groups(len(idx), w, at):
            group = idx[pos:pos + g]
            pos += g
            if acc is None:
                acc = group[0] if g == 1 else Node(tuple(group), True)
            else:
                acc = Node((acc, *group), True)
    return acc


def random_tree(n: int, rng: np.random.Generator, fused_prob: float = 0.0, max_fan: int = 5) -> Tree:
    """A uniformly-shaped random tree: repeatedly merge random pending subtrees."""
    pending: list = list(range(n))
    while len(pending) > 1:
        if fused_prob and rng.random() < fused_prob and len(pending) > 2:
            k = int(rng.integers(2, min(max_fan, len(pending)) + 1))
            pick = rng.choice(len(pending), size=k, replace=False)
            kids = [pending[p] for p in pick]
            for p in sorted(pick, reverse=True):
                pending.pop(p)
            pending.append(Node(tuple(kids), fused=True))
        else:
            a, b = rng.choice(len(pending), size=2, replace=False)
            x, y = pending[a], pending[b]
            for p in sorted((a, b), reverse=True):
                pending.pop(p)
            pending.append(Node((x, y)))
    return pending[0]
