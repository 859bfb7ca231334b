"""Static and dry-run checks of a spec, separate from parsing.

`check(spec)` raises the first SpecError found:
- every named order referred to exists (and builtin names are not redefined);
- the header states a range of n and a known op;
- literal trees have leaves 0..size-1;
- every `using(NAME, ...)` names an `arithmetic NAME { ... }` section, and
  every arithmetic section resolves (fpspec.spec.regions);
- for the n of the stated range, every order gives a tree: each size
  parameter is an integer >= 1, split points lie inside their list, and
  recursion terminates (never re-enters a named order on the same n).

The dry run follows sizes only, never builds a tree, and memoizes on
(order, n), so checking every n up to a few thousand is cheap.  For a range
longer than EXHAUSTIVE the n checked are: the first EXHAUSTIVE, every power
of two and its neighbours, 3 * 2^k, and the upper end (up to 2^24 when the
range is unbounded).  Recursion is always on strictly shorter sub-ranges
between those checks, so each checked n covers its whole call tree.
"""
from __future__ import annotations

import sys

from fpspec.errors import Location, SpecError
from fpspec.spec import ast as A
from fpspec.spec.expand import chunk_bounds, eval_cond, eval_expr, pad_of, unroll_of
from fpspec.tree import check_leaves

OPS = ("sum", "dot", "gemv", "gemm")
BUILTIN_ORDERS = ("seq", "rev", "pairwise", "gpu_tree", "fused", "chain", "lanes", "blocks", "chunks", "pad", "split",
                  "tail", "using")
EXHAUSTIVE = 4096
DEPTH = 20000  # Python frames, as in expand
UNBOUNDED_CHECK = 1 << 24


def _check_binned(h: A.Header) -> None:
    """A binned accumulator (fpspec.arith.binned) is checked here: it holds for the whole accumulation."""
    for a in h.arithmetics:
        for e in a.entries:
            if isinstance(e.value, A.Apply):
                raise SpecError(f"arithmetic {a.name}: accumulator = {e.value} holds for the whole accumulation; "
                                "expected it in the main arithmetic section", e.loc or a.loc)
    if h.arithmetic is not None and any(isinstance(e.value, A.Apply) for e in h.arithmetic.entries):
        from fpspec.arith.model import Arithmetic

        Arithmetic.from_entries(h.arithmetic.entries)


def check(spec: A.Spec) -> None:
    h = spec.header
    if h.op is not None and h.op not in OPS:
        raise SpecError(f"unknown op '{h.op}'; expected one of {', '.join(OPS)}", h.loc)
    if h.n is None:
        raise SpecError("the spec states no range of n; expected a line like `n in 1..4096`",
                        spec.loc or Location("<spec>", 1, 1))
    _check_binned(h)
    lets = {d.name: d for d in spec.lets}
    from fpspec.spec.regions import arithmetics

    named = tuple(a.name for a in h.arithmetics)
    if named:
        arithmetics(spec)
    for d in spec.lets:
        if d.name in BUILTIN_ORDERS:
            raise SpecError(f"'{d.name}' is a builtin order; expected another name", d.loc)
        _check_static(d.order, lets, named)
    _check_static(spec.order, lets, named)
    dry = _DryRun(lets)
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, DEPTH))
    n = h.n.lo
    try:
        for n in sample_ns(h.n):
            dry.run(spec.order, n)
    except RecursionError:
        # the same bound as expand: such a spec could not be expanded either
        raise SpecError(f"orders nest too deeply at n = {n} (over ~{DEPTH} levels); expected recursion on "
                        "sub-ranges that shrink geometrically", spec.order.loc) from None
    finally:
        sys.setrecursionlimit(limit)


def sample_ns(r: A.Range) -> list[int]:
    hi = UNBOUNDED_CHECK if r.hi is None else r.hi
    if hi - r.lo < EXHAUSTIVE:
        return list(range(r.lo, hi + 1))
    ns = set(range(r.lo, r.lo + EXHAUSTIVE))
    k = 1
    while k <= 2 * hi:
        ns.update((k - 1, k, k + 1, 3 * k))
        k *= 2
    ns.add(hi)
    return sorted(x for x in ns if r.lo <= x <= hi)


def _children(o):
    if isinstance(o, A.Lanes):
        return (o.inner, o.outer) + (() if o.left is None else (o.left,))
    if isinstance(o, (A.Blocks, A.Chunks)):
        return (o.inner, o.outer)
    if isinstance(o, A.Split):
        return (o.first, o.rest)
    if isinstance(o, A.Tail):
        return (o.body, o.outer)
    if isinstance(o, A.Guard):
        return tuple(c.order for c in o.cases) + (o.otherwise,)
    if isinstance(o, (A.Using, A.Pad)):
        return (o.order,)
    return ()


order_children = _children   # the orders directly inside an order (fpspec.spec.regions walks with it)

# the fields of each combinator that hold orders (map_children, fpspec.infer.fit rebuild through it)
ORDER_FIELDS = ((A.Lanes, ("inner", "outer", "left")), (A.Blocks, ("inner", "outer")),
                 (A.Chunks, ("inner", "outer")), (A.Split, ("first", "rest")), (A.Tail, ("body", "outer")),
                 (A.Using, ("order",)), (A.Pad, ("order",)))


def map_children(o, fn):
    """o with fn applied to each order directly inside it (the ones `order_children` gives)."""
    from dataclasses import replace

    if isinstance(o, A.Guard):
        return replace(o, cases=tuple(replace(c, order=fn(c.order)) for c in o.cases), otherwise=fn(o.otherwise))
    for cls, fields in ORDER_FIELDS:
        if isinstance(o, cls):
            return replace(o, **{f: fn(getattr(o, f)) for f in fields if getattr(o, f) is not None})
    return o


def _check_static(o, lets: dict, named: tuple = ()) -> None:
    stack = [o]
    while stack:
        x = stack.pop()
        if isinstance(x, A.Ref) and x.name not in lets:
            known = ", ".join(BUILTIN_ORDERS + tuple(lets))
            raise SpecError(f"unknown order '{x.name}'; expected one of {known}", x.loc)
        if isinstance(x, A.Using) and x.name not in named:
            known = ", ".join(named) if named else "none: add `arithmetic NAME { ... }` to the header"
            raise SpecError(f"unknown arithmetic '{x.name}' in using({x.name}, ...); expected one of {known}",
                            x.loc)
        if isinstance(x, A.Literal):
            try:
                check_leaves(x.tree)
            except ValueError as e:
                raise SpecError(f"literal {e}", x.loc) from None
        stack.extend(_children(x))


def _positive(e, n: int, what: str) -> int:
    v = eval_expr(e, n)
    if v < 1:
        raise SpecError(f"{what} {e} = {v} at n = {n}; expected an integer >= 1", e.loc)
    return v


class _DryRun:
    """Follows the sizes an expansion would see; raises what expand would."""

    def __init__(self, lets: dict):
        self.lets = lets
        self.done: set = set()
        self.active: set = set()

    def run(self, o, n: int) -> None:
        if n <= 1:
            return
        key = (id(o), n)
        if key in self.done:
            return
        if isinstance(o, A.Ref):
            rkey = (o.name, n)
            if rkey in self.active:
                raise SpecError(f"order '{o.name}' calls itself on all {n} of its operands: the recursion "
                                "does not terminate; expected a sub-range", o.loc)
            self.active.add(rkey)
            try:
                self.run(self.lets[o.name].order, n)
            finally:
                self.active.discard(rkey)
        elif isinstance(o, A.Lanes):
            k = _positive(o.k, n, "lanes count")
            if o.left is not None:
                u = k if o.unroll is None else unroll_of(o, k, n)
                if n < u:
                    self.run(o.left, n)
                else:
                    self.run(o.inner, (n - n % u) // k)
                    self.run(o.outer, k)
                    if n % u:
                        self.run(o.left, 1 + n % u)
            else:
                lanes = min(k, n)
                for size in {(n - j + k - 1) // k for j in (0, lanes - 1)}:
                    self.run(o.inner, size)
                self.run(o.outer, lanes)
        elif isinstance(o, A.Blocks):
            b = _positive(o.b, n, "block size")
            for size in {min(b, n), n - (n - 1) // b * b}:
                self.run(o.inner, size)
            self.run(o.outer, (n + b - 1) // b)
        elif isinstance(o, A.Pad):
            self.run(o.order, n + pad_of(o, n)[1])
        elif isinstance(o, A.Chunks):
            bounds = chunk_bounds(o.size, n)
            for size in {b - a for a, b in bounds}:
                self.run(o.inner, size)
            self.run(o.outer, len(bounds))
        elif isinstance(o, A.Tail):
            k = _positive(o.k, n, "tail multiple")
            p = n - n % k
            if p == 0:
                self.run(o.outer, n)
            else:
                self.run(o.body, p)
                self.run(o.outer, n - p + 1)
        elif isinstance(o, A.Split):
            at = eval_expr(o.at, n)
            if not 1 <= at <= n - 1:
                raise SpecError(f"split point {o.at} = {at} at n = {n}; expected 1 <= split <= {n - 1}",
                                o.at.loc or o.loc)
            self.run(o.first, at)
            self.run(o.rest, n - at)
        elif isinstance(o, A.Using):
            self.run(o.order, n)
        elif isinstance(o, A.Guard):
            for case in o.cases:
                if eval_cond(case.cond, n):
                    self.run(case.order, n)
                    break
            else:
                self.run(o.otherwise, n)
        elif isinstance(o, A.Pairwise):
            if o.split is not None:
                h = eval_expr(o.split, n)
                if not 1 <= h <= n - 1:
                    raise SpecError(f"pairwise split {o.split} = {h} at n = {n}; expected 1 <= split <= {n - 1}",
                                    o.split.loc or o.loc)
                self.run(o, h)
                self.run(o, n - h)
        elif isinstance(o, A.Chain):
            _positive(o.w, n, "chain width")
            if o.at is not None and eval_expr(o.at, n) < 0:
                raise SpecError(f"chain short-group index {o.at} = {eval_expr(o.at, n)} at n = {n}; "
                                f"expected an integer >= 0", o.at.loc or o.loc)
        elif isinstance(o, A.Literal):
            size = 1 if isinstance(o.tree, int) else o.tree.size
            if size != n:
                raise SpecError(f"literal tree of {size} leaves applied to {n} operands; "
                                f"expected a tree of {n} leaves", o.loc)
        self.done.add(key)
