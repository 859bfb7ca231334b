"""Static and dry-run checks of a spec, separate from parsing.

`check(spec)` raises the first SpecError found:
- every named order referred to exists (and builtin names are not redefined);
- the header states a range of n and a known op;
- literal trees have leaves 0..size-1;
- every `using(NAME, ...)` names an `arithmetic NAME { ... }` section, and
  every arithmetic section resolves (fpspec.spec.regions);
- the arithmetic sections resolve and fit the op (a sum adds its inputs,
  product = none; dot/gemv/gemm form products), products the replicas can
  form, and a `fused` block wherever the order has fused nodes;
- a `shapes` section names output sizes of a gemv / gemm (fpspec.spec.shapes);
- orders and expressions nest at most MAX_NESTING levels (literal trees
  any depth);
- for the n of the stated range, every order gives a tree: each size
  parameter is an integer in 1..MAX_INT, split points lie inside their
  list, and recursion terminates: it never re-enters a named order on the
  same n, and a named order that recurses down to one operand has a base
  case there (note [base case]).

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
from fpspec.spec.expand import chunk_bounds, eval_cond, eval_expr, pad_of, unroll_of, vlanes_of
from fpspec.spec.shapes import check_shapes, shape_advice
from fpspec.tree import check_leaves

OPS = ("sum", "dot", "gemv", "gemm")
BUILTIN_ORDERS = ("seq", "rev", "pairwise", "gpu_tree", "fused", "chain", "lanes", "blocks", "chunks", "pad", "split",
                  "tail", "using", "vlanes")
EXHAUSTIVE = 4096
DEPTH = 20000  # Python frames, as in expand
UNBOUNDED_CHECK = 1 << 24
MAX_INT = (1 << 63) - 1    # sizes, n and leaves: what a replica's int64 holds
MAX_NESTING = 32           # orders inside orders (expressions alike): replicas nest code as deep
MAX_LOOP_NESTING = 16      # lanes/blocks/chunks inside each other: Python nests at most 20 loops
LOOPS = (A.Lanes, A.VLanes, A.Blocks, A.Chunks)


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
    for end in (h.n.lo, h.n.hi):
        if end is not None and end > MAX_INT:
            raise SpecError(f"{h.n}: {end} is too large; expected n <= 2^63 - 1", h.n.loc or spec.loc)
    _check_binned(h)
    lets = {d.name: d for d in spec.lets}
    named = tuple(a.name for a in h.arithmetics)
    for d in spec.lets:
        if d.name in BUILTIN_ORDERS:
            raise SpecError(f"'{d.name}' is a builtin order; expected another name", d.loc)
        _check_static(d.order, lets, named)
    _check_static(spec.order, lets, named)
    _check_arithmetic(spec)
    check_shapes(spec)
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


def advice(spec: A.Spec) -> list[str]:
    """What a valid spec still lacks for some uses (printed as warnings by `fpspec check`)."""
    h = spec.header
    if h.arithmetic is None:
        return ["no arithmetic section: the spec fixes the order only; fpspec verify needs "
                "`arithmetic { input = ... product = ... accumulator = ... init = ... output = ... }` "
                "to compare bits (fpspec reveal -o writes the probed one)"]
    return shape_advice(spec)


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
    if isinstance(o, (A.Blocks, A.Chunks, A.VLanes)):
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
ORDER_FIELDS = ((A.Lanes, ("inner", "outer", "left")), (A.Blocks, ("inner", "outer")), (A.VLanes, ("inner", "outer")),
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
    stack = [(o, 1, 0)]
    while stack:
        x, depth, loops = stack.pop()
        if depth > MAX_NESTING:
            raise SpecError(f"orders nest more than {MAX_NESTING} levels deep; expected at most {MAX_NESTING}",
                            x.loc)
        loops += isinstance(x, LOOPS)
        if loops > MAX_LOOP_NESTING:
            raise SpecError(f"lanes, blocks and chunks nest more than {MAX_LOOP_NESTING} deep (each a loop in "
                            f"the replica); expected at most {MAX_LOOP_NESTING}", x.loc)
        for e in _expressions(x):
            _check_expression(e)
        if isinstance(x, A.Ref) and x.name not in lets:
            known = ", ".join(BUILTIN_ORDERS + tuple(lets))
            raise SpecError(f"unknown order '{x.name}'; expected one of {known}", x.loc)
        if isinstance(x, A.Using) and x.name not in named:
            known = ", ".join(named) if named else "none: add `arithmetic NAME { ... }` to the header"
            raise SpecError(f"unknown arithmetic '{x.name}' in using({x.name}, ...); expected one of {known}",
                            x.loc)
        if isinstance(x, A.Literal):
            _check_literal(x)
        stack.extend((c, depth + 1, loops) for c in _children(x))


def _check_literal(x: A.Literal) -> None:
    from fpspec.tree import leaves

    ls = leaves(x.tree)
    # before check_leaves: a leaf far past the tree's size would be counted in a table that large
    big = max(ls)
    if big >= len(ls):
        raise SpecError(f"literal leaf {big} is outside the tree's positions 0..{len(ls) - 1}; "
                        f"expected each of 0..{len(ls) - 1} once", x.loc)
    try:
        check_leaves(x.tree)
    except ValueError as e:
        raise SpecError(f"literal {e}", x.loc) from None


_EXPR_FIELDS = {A.Pairwise: ("split",), A.Chain: ("w", "at"), A.Lanes: ("k", "unroll"), A.Blocks: ("b",),
                A.VLanes: ("v", "k"),
                A.Chunks: ("size",), A.Pad: ("m",), A.Split: ("at",), A.Tail: ("k",)}


def _expressions(o) -> list:
    if isinstance(o, A.Guard):
        return [c.cond for c in o.cases]
    return [getattr(o, f) for f in _EXPR_FIELDS.get(type(o), ()) if getattr(o, f) is not None]


def _check_expression(e) -> None:
    """Nesting within bounds, integer literals an int64 holds."""
    stack = [(e, 1)]
    while stack:
        x, depth = stack.pop()
        if depth > MAX_NESTING:
            raise SpecError(f"expression nests more than {MAX_NESTING} levels deep; expected at most "
                            f"{MAX_NESTING}", getattr(x, "loc", None) or getattr(e, "loc", None))
        if isinstance(x, A.Num) and x.value > MAX_INT:
            raise SpecError(f"integer {x.value} is too large; expected at most 2^63 - 1", x.loc)
        for f in ("left", "right", "cond", "then", "otherwise"):
            if hasattr(x, f):
                stack.append((getattr(x, f), depth + 1))
        stack.extend((a, depth + 1) for a in getattr(x, "args", ()))


# ---------------------------------------------------------------- arithmetic

FUSED_ORDERS = (A.Fused, A.Chain)


def _check_arithmetic(spec: A.Spec) -> None:
    """The arithmetic sections resolve and describe what the op and the order need
    (what every replica backend needs; backend-only limits stay with compile)."""
    from fpspec.spec.regions import arithmetics

    h = spec.header
    if h.arithmetic is None and not h.arithmetics:
        return
    resolved = arithmetics(spec)
    sections = {None: h.arithmetic, **{a.name: a for a in h.arithmetics}}
    for name, arith in resolved.items():
        block = sections[name]
        where = "arithmetic" if name is None else f"arithmetic {name}"
        loc = _entry_loc(block, "product") or (block.loc if block is not None else h.loc)
        if h.op == "sum" and arith.product != "none":
            raise SpecError(f"{where}: product = {arith.product} in a sum; expected product = none "
                            "(op sum adds its inputs: there are no products)", loc)
        if h.op in ("dot", "gemv", "gemm") and arith.product == "none":
            raise SpecError(f"{where}: product = none in op {h.op}; expected how products enter the sum "
                            "(exact, rounded, fma or fma_first)", loc)
        if arith.product != "none":
            _check_products(arith, where, block, loc)
    _check_fused_blocks(spec, resolved)


def _check_products(arith, where: str, block, loc) -> None:
    from fpspec.formats import get_format

    p_in = get_format(arith.input).precision
    p_acc = get_format(arith.accumulator).precision
    if arith.product_format is not None and arith.product_format not in ("fp32", "fp64"):
        raise SpecError(f"{where}: product_format = {arith.product_format}: products rounded to it cannot be "
                        "formed by a replica; expected fp32 or fp64",
                        _entry_loc(block, "product_format") or loc)
    if p_in > 26 and (arith.product == "exact" or (arith.product == "rounded" and arith.accumulator != arith.input)):
        raise SpecError(f"{where}: product = {arith.product} of {arith.input} inputs in a {arith.accumulator} "
                        "accumulator: the product is wider than any replica's carrier; expected product = fma, "
                        "fma_first or rounded to the input format", loc)
    if arith.product == "exact" and 2 * p_in > p_acc and arith.fused is None:
        raise SpecError(f"{where}: product = exact: a product of two {arith.input} values is not representable "
                        f"in {arith.accumulator}; expected product = fma or rounded", loc)


def _check_fused_blocks(spec: A.Spec, resolved: dict) -> None:
    """A fused node (fused, chain, a literal's [...]) needs the fused block of its arithmetic."""
    anywhere = any(a.fused is not None for a in resolved.values())
    roots = [(d.order, None, False) for d in spec.lets] + [(spec.order, None, True)]
    for root, _, known in roots:
        stack = [(root, None)]
        while stack:
            o, name = stack.pop()
            if isinstance(o, A.Using):
                name = o.name
            fused = isinstance(o, FUSED_ORDERS) or (isinstance(o, A.Literal) and _has_fused(o.tree))
            # a named order may run inside any `using`: there one section with a fused block is enough
            has = resolved[name].fused is not None if known or name is not None else anywhere
            if fused and not has:
                section = "the arithmetic" if name is None else f"arithmetic {name}"
                raise SpecError(f"{o} makes fused nodes, but {section} has no `fused {{ ... }}` block; expected "
                                "one (w, extra_bits, aligned, result, ...: docs/fps.md)", o.loc)
            stack.extend((c, name) for c in _children(o))


def _has_fused(t) -> bool:
    stack = [t]
    while stack:
        x = stack.pop()
        if not isinstance(x, int):
            if x.fused:
                return True
            stack.extend(x.children)
    return False


def _entry_loc(block, key: str):
    """Where `key = ...` is written in a section (the last one, as a repeat is the mistake)."""
    if block is None:
        return None
    found = [e.loc for e in block.entries if e.key == key and e.loc is not None]
    return found[-1] if found else None


def _positive(e, n: int, what: str) -> int:
    v = eval_expr(e, n)
    if v < 1:
        raise SpecError(f"{what} {e} = {v} at n = {n}; expected an integer >= 1", e.loc)
    if v > MAX_INT:
        raise SpecError(f"{what} {e} = {v} at n = {n} is too large; expected at most 2^63 - 1", e.loc)
    return v


# Note [base case]: every order applied to one operand returns it, so a
# recursion such as `let f = split(n // 2, f, f)` expands although no arm
# of f can take one operand: only the rule ends it.  The replicas call a
# named order's code on its sub-ranges, down to one operand, and need code
# that ends there (they recursed forever on it).  So a named order that
# reaches one operand through its own recursion must have a base case: its
# definition at n = 1, followed without the rule, ends without a split
# (which needs two operands) and without calling itself again.


def _recursive_names(lets: dict) -> set:
    """The named orders that can call themselves, directly or through others."""
    calls = {}
    for name, d in lets.items():
        found, stack = set(), [d.order]
        while stack:
            x = stack.pop()
            if isinstance(x, A.Ref):
                found.add(x.name)
            stack.extend(_children(x))
        calls[name] = found
    out = set()
    for start in lets:
        seen, stack = set(), list(calls[start])
        while stack:
            x = stack.pop()
            if x == start:
                out.add(start)
                break
            if x not in seen and x in calls:
                seen.add(x)
                stack.extend(calls[x])
    return out


class _DryRun:
    """Follows the sizes an expansion would see; raises what expand would."""

    def __init__(self, lets: dict):
        self.lets = lets
        self.done: set = set()
        self.active: set = set()
        self.recursive = _recursive_names(lets)

    def run(self, o, n: int, strict: bool = False) -> None:
        if n <= 1 and not strict:
            if isinstance(o, A.Ref) and o.name in self.recursive:
                self.base_case(o)
            return
        key = (id(o), n, strict)
        if key in self.done:
            return
        if isinstance(o, A.Ref):
            rkey = (o.name, n)
            if rkey in self.active:
                if n == 1:
                    raise SpecError(f"order '{o.name}' has no base case: on one operand it calls itself again; "
                                    f"expected an arm for n == 1, such as `if n <= 1: seq else: ...`", o.loc)
                raise SpecError(f"order '{o.name}' calls itself on all {n} of its operands: the recursion "
                                "does not terminate; expected a sub-range", o.loc)
            self.active.add(rkey)
            try:
                self.run(self.lets[o.name].order, n, strict)
            finally:
                self.active.discard(rkey)
        elif isinstance(o, A.Lanes):
            k = _positive(o.k, n, "lanes count")
            if o.left is not None:
                u = k if o.unroll is None else unroll_of(o, k, n)
                if n < u:
                    self.run(o.left, n, strict)
                else:
                    self.run(o.inner, (n - n % u) // k, strict)
                    self.run(o.outer, k, strict)
                    if n % u:
                        self.run(o.left, 1 + n % u, strict)
            else:
                lanes = min(k, n)
                for size in {(n - j + k - 1) // k for j in (0, lanes - 1)}:
                    self.run(o.inner, size, strict)
                self.run(o.outer, lanes, strict)
        elif isinstance(o, A.VLanes):
            v, k = vlanes_of(o, n)
            nv, r = n // v, n % v
            lanes = min(k, max(nv, r))
            # lane lengths: whole vectors (one more for the first nv % k lanes), one more for the first r
            sizes = {v * (nv // k + (j < nv % k)) + max(0, (r - j + k - 1) // k)
                     for j in {0, lanes - 1, r - 1, r, nv % k - 1, nv % k} if 0 <= j < lanes}
            for size in sizes:
                self.run(o.inner, size, strict)
            self.run(o.outer, lanes, strict)
        elif isinstance(o, A.Blocks):
            b = _positive(o.b, n, "block size")
            for size in {min(b, n), n - (n - 1) // b * b}:
                self.run(o.inner, size, strict)
            self.run(o.outer, (n + b - 1) // b, strict)
        elif isinstance(o, A.Pad):
            self.run(o.order, n + pad_of(o, n)[1], strict)
        elif isinstance(o, A.Chunks):
            bounds = chunk_bounds(o.size, n)
            for size in {b - a for a, b in bounds}:
                self.run(o.inner, size, strict)
            self.run(o.outer, len(bounds), strict)
        elif isinstance(o, A.Tail):
            k = _positive(o.k, n, "tail multiple")
            p = n - n % k
            if p == 0:
                self.run(o.outer, n, strict)
            else:
                self.run(o.body, p, strict)
                self.run(o.outer, n - p + 1, strict)
        elif isinstance(o, A.Split):
            if n == 1:
                raise SpecError(f"{self.base_of} has no base case: its recursion reaches one operand, where "
                                f"{o} has nothing to split; expected an arm for n == 1, such as "
                                "`if n <= 1: seq else: ...`", o.loc)
            at = eval_expr(o.at, n)
            if not 1 <= at <= n - 1:
                raise SpecError(f"split point {o.at} = {at} at n = {n}; expected 1 <= split <= {n - 1}",
                                o.at.loc or o.loc)
            self.run(o.first, at, strict)
            self.run(o.rest, n - at, strict)
        elif isinstance(o, A.Using):
            self.run(o.order, n, strict)
        elif isinstance(o, A.Guard):
            for case in o.cases:
                if eval_cond(case.cond, n):
                    self.run(case.order, n, strict)
                    break
            else:
                self.run(o.otherwise, n, strict)
        elif isinstance(o, A.Pairwise):
            if o.split is not None:
                h = eval_expr(o.split, n)
                if not 1 <= h <= n - 1:
                    raise SpecError(f"pairwise split {o.split} = {h} at n = {n}; expected 1 <= split <= {n - 1}",
                                    o.split.loc or o.loc)
                self.run(o, h, strict)
                self.run(o, n - h, strict)
        elif isinstance(o, A.Chain):
            _positive(o.w, n, "chain width")
            if o.at is not None and eval_expr(o.at, n) < 0:
                raise SpecError(f"chain short-group index {o.at} = {eval_expr(o.at, n)} at n = {n}; "
                                f"expected an integer >= 0", o.at.loc or o.loc)
        elif isinstance(o, A.Literal):
            size = 1 if isinstance(o.tree, int) else o.tree.size
            if size != n and not (strict and n == 1):     # one operand: the rule holds for a literal
                raise SpecError(f"literal tree of {size} leaves applied to {n} operands; "
                                f"expected a tree of {n} leaves", o.loc)
        self.done.add(key)

    def base_case(self, ref: A.Ref) -> None:
        """Note [base case]: `ref` is reached on one operand from inside its own recursion."""
        if (id(ref), 1, True) in self.done:
            return
        self.base_of = f"order '{ref.name}'"
        self.run(ref, 1, strict=True)
