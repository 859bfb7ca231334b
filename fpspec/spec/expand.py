"""Spec, n -> tree: every order applied to its list of operands, exactly as
the docstrings in fpspec.spec.ast define it.

Trees are built bottom-up straight into fpspec.tree.Node (no intermediate
objects), with the cyclic GC paused (`fpspec.tree.building`): a 10^6-leaf tree is
about 10^6 Node constructions and little else.
"""
from __future__ import annotations

import sys

from fpspec.errors import SpecError
from fpspec.spec import ast as A
from fpspec.tree import Node, Tree, building, fused_chain, relabel

# ---------------------------------------------------------------- expressions


ORIGIN = (0, 0)     # the output element (i, j) of a sum or a dot


def eval_expr(e, n: int, pos: tuple = ORIGIN) -> int:
    """Value of an integer expression with n and the output position (i, j)
    bound; SpecError on x // 0."""
    cls = type(e)
    if cls is A.Num:
        return e.value
    if cls is A.Var:
        return n if e.name == "n" else pos[0] if e.name == "i" else pos[1]
    if cls is A.BinOp:
        a, b = eval_expr(e.left, n, pos), eval_expr(e.right, n, pos)
        op = e.op
        if op == "+":
            return a + b
        if op == "-":
            return a - b
        if op == "*":
            return a * b
        if b == 0:
            raise SpecError(f"{e} divides by zero at n = {n}; expected a non-zero divisor", e.loc)
        return a // b if op == "//" else a % b
    if cls is A.Call:
        vals = [eval_expr(x, n, pos) for x in e.args]
        return min(vals) if e.func == "min" else max(vals)
    if cls is A.IfExpr:
        return eval_expr(e.then if eval_cond(e.cond, n, pos) else e.otherwise, n, pos)
    raise TypeError(f"not an expression: {e!r}")


def eval_cond(c, n: int, pos: tuple = ORIGIN) -> bool:
    if type(c) is A.Compare:
        a, b = eval_expr(c.left, n, pos), eval_expr(c.right, n, pos)
        op = c.op
        return (a < b if op == "<" else a <= b if op == "<=" else a > b if op == ">"
                else a >= b if op == ">=" else a == b if op == "==" else a != b)
    if c.op == "and":
        return eval_cond(c.left, n, pos) and eval_cond(c.right, n, pos)
    return eval_cond(c.left, n, pos) or eval_cond(c.right, n, pos)


def _size_param(e, n: int, what: str, lo: int = 1, pos: tuple = ORIGIN) -> int:
    v = eval_expr(e, n, pos)
    if v < lo:
        raise SpecError(f"{what} {e} = {v} at n = {n}; expected an integer >= {lo}", e.loc)
    return v


def _chain_at(e, n: int, pos: tuple = ORIGIN) -> int:
    v = eval_expr(e, n, pos)
    if v < 0:
        raise SpecError(f"chain short-group index {e} = {v} at n = {n}; expected an integer >= 0", e.loc)
    return v


def unroll_of(o: A.Lanes, k: int, n: int, pos: tuple = ORIGIN) -> int:
    """U of lanes(K, INNER, OUTER, LEFT, U): a positive multiple of K."""
    u = _size_param(o.unroll, n, "lanes unroll", pos=pos)
    if u % k:
        raise SpecError(f"lanes unroll {o.unroll} = {u} at n = {n} is not a multiple of the lane count {k}; "
                        "expected a multiple of K", o.unroll.loc or o.loc)
    return u


def vector_lanes(ops: list, v: int, k: int) -> list:
    """The operand lists of vlanes(V, K, ...) over ops (fpspec.spec.ast.VLanes): vector i
    (ops[iV:iV+V]) to lane i % K, then leftover j to lane j % K; lanes that got nothing dropped."""
    nv, r = len(ops) // v, len(ops) % v
    lanes = [[] for _ in range(min(k, max(nv, r)))]
    for i in range(nv):
        lanes[i % k].extend(ops[i * v:(i + 1) * v])
    for j in range(r):
        lanes[j % k].append(ops[nv * v + j])
    return lanes


def vlanes_of(o: A.VLanes, n: int, pos: tuple = ORIGIN) -> tuple[int, int]:
    """(V, K) of vlanes(V, K, ...) at n, each >= 1."""
    return _size_param(o.v, n, "vector width", pos=pos), _size_param(o.k, n, "lanes count", pos=pos)


def pad_of(o: A.Pad, n: int, pos: tuple = ORIGIN) -> tuple[int, int]:
    """(r, c) of pad(M, ...) at n: the n % M operands before the c phantoms."""
    m = _size_param(o.m, n, "pad multiple", pos=pos)
    return n % m, (m - n % m) % m


# Note [lone products]: a vector kernel's padded lane starts at zero, so a
# product that meets only phantoms is added to a zero: an FMA into +-0, which
# rounds it, in that lane's arithmetic.  The tree shows the leaf alone (a
# node loses its phantom children); fpspec.arith.evaluate rounds the leaves
# recorded under (leaf, 0) before their parent uses them, as the replicas'
# -0.0 * 1.0 phantom terms do (fpspec.compile.loops note [phantoms]).

def drop_phantoms(t: Tree, regions: dict | None = None) -> Tree:
    """t without its phantom leaves (negative), a node left with one child
    replaced by it.  Only nodes whose smallest leaf is negative hold phantoms
    (children are sorted by smallest leaf), so operands are not walked.
    `regions` (node key -> arithmetic name, fpspec.spec.regions): a rebuilt
    node keeps the name its phantom-holding original had (its key changes),
    and a leaf whose node lost only phantoms is recorded under (leaf, 0) with
    that node's name ("" for the main arithmetic): the kernel added its
    product to a zero lane, which rounds it (note [lone products])."""
    if t.__class__ is int:
        return t
    out: list = []
    stack: list = [(t, False)]
    while stack:
        s, done = stack.pop()
        if s.__class__ is int:
            out.append(None if s < 0 else s)
        elif s.first >= 0:
            out.append(s)
        elif done:
            k = len(s.children)
            kids = [x for x in out[-k:] if x is not None]
            del out[-k:]
            new = None if not kids else kids[0] if len(kids) == 1 else Node(tuple(kids), s.fused)
            if regions is not None:
                name = regions.pop((s.first, s.size), None)
                if name is not None and len(kids) > 1:
                    regions[(new.first, new.size)] = name
                elif len(kids) == 1 and kids[0].__class__ is int and not s.fused:
                    regions.setdefault((kids[0], 0), name or "")
            out.append(new)
        else:
            stack.append((s, True))
            stack.extend((c, False) for c in reversed(s.children))
    return out[0]


def chunk_bounds(size, n: int, pos: tuple = ORIGIN) -> list[tuple[int, int]]:
    """(start, end) of every chunk of chunks(SIZE, ...) over n operands, SIZE
    evaluated at the number of operands left."""
    out, start = [], 0
    while start < n:
        left = n - start
        s = eval_expr(size, left, pos)
        if not 1 <= s <= left:
            raise SpecError(f"chunk size {size} = {s} with {left} operands left; expected 1 <= size <= {left}",
                            size.loc)
        out.append((start, start + s))
        start += s
    return out


# ---------------------------------------------------------------- orders


class _Expander:
    def __init__(self, lets: dict, regions: dict | None = None, pos: tuple = ORIGIN):
        self.lets = lets
        self.pos = pos
        self.active: set = set()  # (name, n) pairs on the call stack: a repeat never terminates
        self.regions = regions    # node key -> arithmetic name, filled by `using` (None: not asked)

    def apply(self, o, ops: list) -> Tree:
        n = len(ops)
        if n == 1:
            return ops[0]
        cls = type(o)
        if cls is A.Seq:
            acc = ops[0]
            for x in ops[1:]:
                acc = Node((acc, x))
            return acc
        if cls is A.Rev:
            acc = ops[-1]
            for x in reversed(ops[:-1]):
                acc = Node((x, acc))
            return acc
        if cls is A.Lanes:
            k = _size_param(o.k, n, "lanes count", pos=self.pos)
            inner, apply = o.inner, self.apply
            if o.left is None:
                return apply(o.outer, [apply(inner, ops[j::k]) for j in range(min(k, n))])
            u = k if o.unroll is None else unroll_of(o, k, n, self.pos)
            if n < u:
                return apply(o.left, ops)
            p = n - n % u
            lanes = [apply(inner, ops[j:p:k]) for j in range(k)]
            if p < n:
                lanes[0] = apply(o.left, [lanes[0]] + ops[p:])
            return apply(o.outer, lanes)
        if cls is A.VLanes:
            v, k = vlanes_of(o, n, self.pos)
            return self.apply(o.outer, [self.apply(o.inner, lane) for lane in vector_lanes(ops, v, k)])
        if cls is A.Blocks:
            b = _size_param(o.b, n, "block size", pos=self.pos)
            inner, apply = o.inner, self.apply
            return apply(o.outer, [apply(inner, ops[i:i + b]) for i in range(0, n, b)])
        if cls is A.Chunks:
            inner, apply = o.inner, self.apply
            return apply(o.outer, [apply(inner, ops[a:b]) for a, b in chunk_bounds(o.size, n, self.pos)])
        if cls is A.Pad:
            r, c = pad_of(o, n, self.pos)
            if c == 0:
                return self.apply(o.order, ops)
            t = drop_phantoms(self.apply(o.order, ops[:r] + list(range(-c, 0)) + ops[r:]), self.regions)
            # A pad inside an outer pad can get only the outer's phantoms: it stays a
            # phantom, which the outer pad drops.
            return ops[0] if t is None else t
        if cls is A.Tail:
            k = _size_param(o.k, n, "tail multiple", pos=self.pos)
            p = n - n % k
            if p == 0:
                return self.apply(o.outer, ops)
            return self.apply(o.outer, [self.apply(o.body, ops[:p])] + ops[p:])
        if cls is A.Split:
            at = eval_expr(o.at, n, self.pos)
            if not 1 <= at <= n - 1:
                raise SpecError(f"split point {o.at} = {at} at n = {n}; expected 1 <= split <= {n - 1}",
                                o.at.loc or o.loc)
            return Node((self.apply(o.first, ops[:at]), self.apply(o.rest, ops[at:])))
        if cls is A.Ref:
            return self._ref(o, ops)
        if cls is A.Using:
            before = set(self.regions) if self.regions is not None else None
            t = self.apply(o.order, ops)
            if self.regions is not None:
                self._mark(t, ops, o.name)
                # a lone product of a pad inside the part was rounded by a node of the part
                # (note [lone products]); an inner `using` named its own already
                for key in set(self.regions) - before:
                    if key[1] == 0 and not self.regions[key]:
                        self.regions[key] = o.name
            return t
        if cls is A.Guard:
            for case in o.cases:
                if eval_cond(case.cond, n, self.pos):
                    return self.apply(case.order, ops)
            return self.apply(o.otherwise, ops)
        if cls is A.Pairwise:
            return self._pairwise(o, ops)
        if cls is A.GpuTree:
            vals = list(ops)
            m = n
            while m > 1:
                half = (m + 1) // 2
                for i in range(m - half):
                    vals[i] = Node((vals[i], vals[i + half]))
                m = half
            return vals[0]
        if cls is A.Fused:
            return Node(tuple(ops), True)
        if cls is A.Chain:
            w = _size_param(o.w, n, "chain width", pos=self.pos)
            if w == 1:
                acc = ops[0]
                for i in range(1, n):
                    acc = Node((acc, ops[i]), True)
                return acc
            return fused_chain(ops, w, None if o.at is None else _chain_at(o.at, n, self.pos))
        if cls is A.Literal:
            return self._literal(o, ops)
        raise TypeError(f"not an order: {o!r}")

    def _mark(self, t: Tree, ops: list, name: str) -> None:
        """Name `name` for every node of t made from `ops` (not inside an operand);
        a node an inner `using` named already keeps its name (the innermost decides)."""
        from fpspec.spec.regions import node_key

        boundary = {id(x) for x in ops if not isinstance(x, int)}
        stack = [t]
        while stack:
            s = stack.pop()
            if isinstance(s, int) or id(s) in boundary:
                continue
            self.regions.setdefault(node_key(s), name)
            stack.extend(s.children)

    def _ref(self, o: A.Ref, ops: list) -> Tree:
        d = self.lets.get(o.name)
        if d is None:
            raise SpecError(f"unknown order '{o.name}'; expected a builtin order or one of: "
                            f"{', '.join(self.lets) or '(no named orders)'}", o.loc)
        key = (o.name, len(ops))
        if key in self.active:
            raise SpecError(f"order '{o.name}' calls itself on all {len(ops)} of its operands: "
                            "the recursion does not terminate; expected a sub-range", o.loc)
        self.active.add(key)
        try:
            return self.apply(d.order, ops)
        finally:
            self.active.discard(key)

    def _pairwise(self, o: A.Pairwise, ops: list) -> Tree:
        split = o.split
        out: list = []
        stack = [(0, len(ops), False)]
        while stack:
            lo, hi, done = stack.pop()
            m = hi - lo
            if m == 1:
                out.append(ops[lo])
            elif done:
                right = out.pop()
                out.append(Node((out.pop(), right)))
            else:
                h = m // 2 if split is None else eval_expr(split, m, self.pos)
                if not 1 <= h <= m - 1:
                    raise SpecError(f"pairwise split {split} = {h} at n = {m}; expected 1 <= split <= {m - 1}",
                                    split.loc or o.loc)
                stack.extend(((lo, hi, True), (lo + h, hi, False), (lo, lo + h, False)))
        return out[0]

    def _literal(self, o: A.Literal, ops: list) -> Tree:
        t = o.tree
        size = 1 if isinstance(t, int) else t.size
        if size != len(ops):
            raise SpecError(f"literal tree of {size} leaves applied to {len(ops)} operands; "
                            f"expected a tree of {len(ops)} leaves", o.loc)
        return relabel(t, ops)


def lets_of(spec: A.Spec) -> dict:
    return {d.name: d for d in spec.lets}


FREEZE_ABOVE = 50_000  # leaves; below that the gen-0 pass is cheap and freezing is not worth its reach


def apply_order(order, operands, lets=None, regions: dict | None = None, pos: tuple = ORIGIN) -> Tree:
    """`order` applied to `operands` (leaves or subtrees); lets: name -> Let.
    `regions`, a dict, receives node key -> arithmetic name for the nodes made
    inside a `using` (fpspec.spec.regions)."""
    ops = list(operands)
    if not ops:
        raise SpecError("an order was applied to no operands; expected at least one", getattr(order, "loc", None))
    ex = _Expander(lets or {}, regions, pos)
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 20000))
    try:
        with building(freeze=len(ops) >= FREEZE_ABOVE):
            return ex.apply(order, ops)
    except RecursionError:
        raise SpecError("orders nest too deeply (over ~20000 levels); expected recursion on sub-ranges "
                        "that shrink geometrically", getattr(order, "loc", None)) from None
    finally:
        sys.setrecursionlimit(limit)


def check_n(spec: A.Spec, n: int) -> None:
    r = spec.header.n
    if n < 1:
        raise SpecError(f"n = {n}; expected n >= 1", r.loc if r else None)
    if r is not None and n not in r:
        raise SpecError(f"n = {n} is outside the stated range {str(r)[5:]}; expected n in that range", r.loc)


def expand(spec: A.Spec, n: int, pos: tuple = ORIGIN) -> Tree:
    """The tree of `spec` at reduction length n, over leaves 0..n-1, for the
    output element at row i, column j (pos)."""
    check_n(spec, n)
    return apply_order(spec.order, range(n), lets_of(spec), pos=pos)


def expand_arith(spec: A.Spec, n: int, pos: tuple = ORIGIN):
    """(tree, main Arithmetic, Regions) of `spec` at n: Regions maps the key
    (smallest leaf, number of leaves) of every node made inside a `using` to
    its Arithmetic (fpspec.spec.regions); the other nodes use the main one.
    fpspec.arith.evaluate(tree, x, y, main, regions) gives the spec's bits."""
    from fpspec.spec.regions import arithmetics

    by_name = arithmetics(spec)
    check_n(spec, n)
    names: dict = {}
    tree = apply_order(spec.order, range(n), lets_of(spec), names, pos)
    return tree, by_name[None], {key: by_name[name or None] for key, name in names.items()}
