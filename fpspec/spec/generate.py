"""Random valid specs, and the shrinking of a failing one to a minimal spec.

    random_spec(rng, *, op=None, fmt=None, parametric=True, max_depth=4, n_range=None) -> Spec
    shrink(spec, still_fails, max_tries=400) -> Spec

`random_spec` draws from every construct of docs/fps.md: the combinators
(seq, rev, pairwise[(SPLIT)], gpu_tree, fused, chain(W[, AT]), lanes with
LEFT and U, vlanes, blocks, chunks, pad, split, tail, literal trees), guards on n
(thresholds and residues `n % m == r`), named orders with recursion on
sub-ranges (self and mutual, always under a base case `if n <= B: ...`),
`using` parts with `arithmetic NAME` sections, fused parameter blocks, and
for gemv / gemm an outermost `if` on the output position i, j (with the
shape it was written for in `provenance { shape { ... } }`).  Ops sum, dot,
gemv, gemm; input formats fp64, fp32, fp16, bf16.  Every spec it returns
passes `fpspec.spec.check` and prints to text that parses back to it.

Validity is by construction where it is cheap (split points in 1..n-1 for
every n, chunk sizes `min(C, n)`, recursion only on strictly shorter
sub-ranges, fused nodes only over leaves: note [fused operands]) and by
`check` otherwise: a draw that `check` refuses is drawn again.

Note [added draws]: a seed names the same spec in every version of the
generator wherever it can (known failures and soak records cite seeds and
indices), so a construct added later takes its choices from a side
generator derived from the main one's state (`_Draw.side`), which draws
nothing from the main stream: `vlanes` replaces some draws of `lanes`, whose
operands are drawn from the main stream as before.

Note [fused operands]: a fused node adds its products and at most one
partial sum (its c); so `fused` and `chain` are drawn only where the
operands are leaves (the root's operands, and INNER / FIRST / REST / BODY
of a combinator over leaves), never as the OUTER of lanes or blocks.

`shrink` is greedy: it tries one local simplification at a time (a node
replaced by `seq` or by one of its children, a guard arm dropped, a `using`
unwrapped, a constant made smaller, the range of n cut in halves, unused
named orders and sections dropped), keeps the first that still passes
`check` and still fails, and stops when none does (a local minimum).
"""
from __future__ import annotations

import hashlib
from dataclasses import fields, replace
from typing import Callable

import numpy as np

from fpspec.errors import SpecError
from fpspec.spec import ast as A
from fpspec.spec.check import check, order_children
from fpspec.tree import Node, random_tree

OPS = ("sum", "dot", "gemv", "gemm")
FORMATS = ("fp64", "fp32", "fp16", "bf16")
# fused parameter blocks: (w, extra_bits, result, exponent_floor) as published (fpspec.arith.params) and nearby
_FUSED_BLOCKS = ((16, 2, "rz", -133), (8, 1, "rz", -132), (4, 0, "rne", None), (16, 3, "rz", None), (8, 2, "rne", -133))
_TRIES = 200

n_ = A.Var("n")


def _num(v: int) -> A.Num:
    return A.Num(int(v))


def _bin(op, a, b):
    return A.BinOp(op, a, b)


def _cmp(op, a, b):
    return A.Compare(op, a, b)


# ---------------------------------------------------------------- the generator


class _Draw:
    """One spec's draw: its op, formats and the names it defines so far."""

    def __init__(self, rng: np.random.Generator, op: str, fmt: str, max_depth: int, lo: int, hi: int):
        self.rng, self.op, self.fmt, self.max_depth = rng, op, fmt, max_depth
        self.lo, self.hi = lo, hi
        self.shape = None                  # the output shape a gemv / gemm spec's position guards are for
        self.named_orders: list[str] = []       # named orders that terminate on any n: usable anywhere
        self.lets: list[A.Let] = []
        self.named: list[A.NamedArithmetic] = []
        self.main, self.fused = self._arithmetic()
        self._side: np.random.Generator | None = None

    def side(self) -> np.random.Generator:
        """The generator of choices added after the main stream was fixed (note [added draws])."""
        if self._side is None:
            state = repr(self.rng.bit_generator.state).encode()
            self._side = np.random.default_rng(int.from_bytes(hashlib.sha256(state).digest()[:8], "little"))
        return self._side

    def vector_lanes(self, lanes: A.Lanes, max_v: int = 8, thread: bool = True) -> A.Order:
        """Sometimes vlanes(V, K, INNER, OUTER) in place of lanes(K, INNER, OUTER[, LEFT[, U]]),
        V in 1..max_v (note [added draws]); INNER sometimes a GPU thread's V accumulators
        lanes(V, seq, seq[, seq]) (PyTorch's CUDA sum) where `thread`."""
        side = self.side()
        if side.random() >= 0.35:
            return lanes
        widths = [v for v in (1, 2, 3, 4, 8) if v <= max_v]
        v = widths[int(side.integers(0, len(widths)))]
        inner = lanes.inner
        if thread and v > 1 and side.random() < 0.4:
            inner = A.Lanes(_num(v), A.Seq(), A.Seq(), A.Seq() if side.random() < 0.5 else None)
        return A.VLanes(_num(v), lanes.k, inner, lanes.outer)

    # ------------------------------------------------------------ named orders

    def chance(self, p: float) -> bool:
        return bool(self.rng.random() < p)

    def pick(self, seq):
        return seq[int(self.rng.integers(0, len(seq)))]

    def int_(self, lo: int, hi: int) -> int:
        return int(self.rng.integers(lo, hi + 1))

    # ------------------------------------------------------------ arithmetic

    def _arithmetic(self) -> tuple[A.Block, bool]:
        fmt, op = self.fmt, self.op
        acc = {"fp64": ["fp64"], "fp32": ["fp32", "fp32", "fp32", "fp64"],
               "fp16": ["fp32", "fp32", "fp32", "fp16", "fp64"], "bf16": ["fp32", "fp32", "fp32", "bf16"]}[fmt]
        accumulator = self.pick(acc)
        if op == "sum":
            product = "none"
        else:
            # exact products only where the accumulator holds them (the compilers refuse the rest)
            wide = {"fp16": ("fp32", "fp64"), "bf16": ("fp32", "fp64"), "fp32": ("fp64",)}.get(fmt, ())
            products = ["rounded", "rounded", "fma", "fma_first"] if fmt == "fp64" else \
                ["rounded", "rounded", "fma", "fma", "fma_first"]
            if accumulator in wide:
                products += ["exact", "exact"]
            product = self.pick(products)
        entries = [A.Entry("input", A.Ident(fmt)), A.Entry("product", A.Ident(product))]
        if product == "rounded" and accumulator == "fp64" and fmt == "fp32" and self.chance(0.5):
            entries.append(A.Entry("product_format", A.Ident("fp32")))
        entries.append(A.Entry("accumulator", A.Ident(accumulator)))
        entries.append(A.Entry("init", A.Float("+0.0") if self.chance(0.5) else A.Ident("none")))
        output = self.pick([fmt, accumulator]) if accumulator != "fp64" or fmt == "fp64" else fmt
        entries.append(A.Entry("output", A.Ident(output)))
        fused = fmt in ("fp16", "bf16", "fp32") and accumulator == "fp32" and self.chance(0.3)
        self.fused_w = 0
        if fused:
            w, extra, result, floor = self.pick(_FUSED_BLOCKS)
            self.fused_w = w
            entries.append(A.Entry("fused", A.Block("fused", (
                A.Entry("w", w), A.Entry("extra_bits", extra), A.Entry("aligned", A.Ident("truncate")),
                A.Entry("result", A.Ident(result)), A.Entry("c_aligned", True),
                A.Entry("exponent_floor", A.Ident("none") if floor is None else floor)))))
        self.accumulator, self.product = accumulator, product
        return A.Block("arithmetic", tuple(entries)), fused

    def named_arithmetic(self) -> str:
        """A new `arithmetic NAME { ... }` section (an accumulator or a product override)."""
        name = f"part{len(self.named)}"
        entries = []
        narrower = {"fp64": ["fp32"], "fp32": (["fp16", "bf16"] if self.fmt in ("fp16", "bf16") else [])}
        options = narrower.get(self.accumulator, []) + [self.accumulator]
        acc = self.pick(options)
        if acc != self.accumulator or self.op == "sum" or self.chance(0.5):
            entries.append(A.Entry("accumulator", A.Ident(acc)))
        if self.op != "sum":
            products = ["rounded", "fma"] + (["exact"] if self.product == "exact" else [])
            entries.append(A.Entry("product", A.Ident(self.pick(products))))
        self.named.append(A.NamedArithmetic(name, tuple(entries)))
        return name

    # ------------------------------------------------------------ expressions and conditions

    def size(self, lo: int = 1, hi: int = 8) -> A.Expr:
        """A positive size: mostly a constant, sometimes one that grows with n."""
        r = self.rng.random()
        if r < 0.75:
            return _num(self.int_(lo, hi))
        if r < 0.9:
            return A.Call("max", (_num(lo), _bin("//", n_, _num(self.int_(2, 8)))))
        k = self.int_(lo + 1, hi + 8)
        return A.IfExpr(_cmp(">", n_, _num(k)), _num(self.int_(lo, hi)), _num(lo))

    def split_point(self) -> A.Expr:
        """An expression in 1..n-1 for every n >= 2."""
        return self.pick([
            _bin("//", n_, _num(2)),
            _bin("-", n_, _bin("//", n_, _num(2))),
            _num(1),
            _bin("-", n_, _num(1)),
            A.Call("max", (_num(1), _bin("-", _bin("//", n_, _num(2)), _bin("%", _bin("//", n_, _num(2)),
                                                                           _num(self.pick([2, 4, 8])))))),
            A.Call("min", (_num(self.int_(1, 12)), _bin("-", n_, _num(1)))),
        ])

    def n_cond(self) -> A.Cond:
        """A guard on n: a threshold, a residue, or both."""
        hi = self.hi if self.hi is not None else self.lo + 64
        threshold = _cmp(self.pick(["<", "<=", ">", ">=", "=="]), n_, _num(self.int_(1, max(2, min(hi, 64)))))
        m = self.int_(2, 8)
        residue = _cmp(self.pick(["==", "!="]), _bin("%", n_, _num(m)), _num(self.int_(0, m - 1)))
        r = self.rng.random()
        if r < 0.45:
            return threshold
        if r < 0.8:
            return residue
        return A.BoolOp(self.pick(["and", "or"]), threshold, residue)

    # ------------------------------------------------------------ orders

    def order(self, depth: int, leaves: bool) -> A.Order:
        """An order applied to operands that are leaves (or not: note [fused operands])."""
        if depth <= 0 or self.chance(0.3):
            return self.simple(leaves)
        d = depth - 1
        kind = self.pick(("lanes", "lanes", "blocks", "blocks", "chunks", "pad", "split", "split", "tail", "tail",
                          "guard", "guard", "using", "pairwise_split"))
        if kind == "lanes":
            k = self.size(1, 8)
            if self.chance(0.35):
                left = self.order(d, False)
                if isinstance(k, A.Num) and self.chance(0.4):
                    return self.vector_lanes(A.Lanes(k, self.order(d, leaves), self.order(d, False), left,
                                                     _num(k.value * self.int_(1, 4))))
                return self.vector_lanes(A.Lanes(k, self.order(d, leaves), self.order(d, False), left))
            return self.vector_lanes(A.Lanes(k, self.order(d, leaves), self.order(d, False)))
        if kind == "blocks":
            return A.Blocks(self.size(1, 16), self.order(d, leaves), self.order(d, False))
        if kind == "chunks":
            c = self.int_(1, 20)
            size = self.pick([A.Call("min", (_num(c), n_)),
                              A.IfExpr(_cmp(">", n_, _num(c)), _num(c), n_),
                              A.Call("max", (_num(1), _bin("//", n_, _num(2))))])
            return A.Chunks(size, self.order(d, leaves), self.order(d, False))
        if kind == "pad":
            return A.Pad(_num(self.int_(2, 8)), self.order(d, False))
        if kind == "split":
            return A.Split(self.split_point(), self.order(d, leaves), self.order(d, leaves))
        if kind == "tail":
            return A.Tail(self.size(1, 8), self.order(d, leaves), self.order(d, False))
        if kind == "guard":
            return self.guard(d, leaves)
        if kind == "using":
            name = self.pick([a.name for a in self.named]) if self.named and self.chance(0.5) \
                else self.named_arithmetic()
            return A.Using(name, self.order(d, leaves))
        return A.Pairwise(self.split_point())

    def guard(self, depth: int, leaves: bool) -> A.Guard:
        cases = []
        for _ in range(self.int_(1, 3)):
            if self.chance(0.2):
                size = self.int_(2, 9)
                cases.append(A.Case(_cmp("==", n_, _num(size)), A.Literal(self.literal(size, leaves))))
            else:
                cases.append(A.Case(self.n_cond(), self.order(depth, leaves)))
        return A.Guard(tuple(cases), self.order(depth, leaves))

    def literal(self, size: int, leaves: bool):
        t = random_tree(size, self.rng)
        if leaves and self.fused and 2 <= size <= self.fused_w and self.chance(0.3):
            return Node(tuple(range(size)), True)
        return t

    def simple(self, leaves: bool) -> A.Order:
        options = ["seq", "seq", "rev", "pairwise", "gpu_tree"]
        if self.named_orders:
            options += ["ref", "ref"]
        if leaves and self.fused:
            options += ["fused", "chain", "chain"]
        kind = self.pick(options)
        if kind == "seq":
            return A.Seq()
        if kind == "rev":
            return A.Rev()
        if kind == "pairwise":
            return A.Pairwise()
        if kind == "gpu_tree":
            return A.GpuTree()
        if kind == "ref":
            return A.Ref(self.pick(self.named_orders))
        # a fused node takes at most w products (the arithmetic's fused block): `fused` goes
        # under a guard that says so, chains are at most w wide
        w = self.fused_w
        if kind == "fused":
            return A.Guard((A.Case(_cmp("<=", n_, _num(w)), A.Fused()),), A.Chain(_num(w)))
        w = _num(self.pick([x for x in (2, 4, 8, 16) if x <= w]))
        if self.chance(0.4):
            at = self.pick([_num(self.int_(0, 3)), _bin("//", _bin("%", n_, _num(32)), _num(16)),
                            _bin("//", _bin("%", n_, _num(64)), _num(16))])
            return A.Chain(w, at)
        return A.Chain(w)

    # ------------------------------------------------------------ named orders

    def named_order(self) -> None:
        """A named order without recursion: usable anywhere."""
        name = f"h{len(self.lets)}"
        self.lets.append(A.Let(name, self.order(max(1, self.max_depth - 2), False)))
        self.named_orders.append(name)

    def recursive(self) -> None:
        """One named order, or two that call each other, each with a base case
        `if n <= B: ...` and recursion only on sub-ranges shorter than n."""
        names = [f"r{len(self.lets)}"]
        if self.chance(0.3):
            names.append(f"r{len(self.lets) + 1}")
        d = max(0, self.max_depth - 2)
        for name in names:
            base = self.int_(2, 16)
            cases = [A.Case(_cmp("<=", n_, _num(base)), self.order(d, True))]
            if self.chance(0.3):
                m = self.int_(2, 4)
                cases.append(A.Case(_cmp("==", _bin("%", n_, _num(m)), _num(self.int_(0, m - 1))),
                                    self.step(names, base, d)))
            self.lets.append(A.Let(name, A.Guard(tuple(cases), self.step(names, base, d))))
        self.named_orders.extend(names)

    def step(self, names: list, base: int, depth: int) -> A.Order:
        """One recursive step for n > base: every call of `names` gets fewer than n operands."""
        ref = lambda: A.Ref(self.pick(names))  # noqa: E731
        other = lambda: ref() if self.chance(0.5) else self.order(depth, True)  # noqa: E731
        kind = self.pick(("split", "split", "blocks", "lanes", "chunks", "tail"))
        if kind == "split":
            return A.Split(self.split_point(), ref(), other())
        top = max(2, min(base, 8))
        if kind == "blocks":   # blocks of b <= base < n; ceil(n / b) < n blocks
            return A.Blocks(_num(self.int_(2, max(2, base))), ref(),
                            ref() if self.chance(0.3) else self.order(depth, False))
        if kind == "lanes":    # lanes of ceil(n / k) < n; k <= base < n lanes
            # vlanes with V < base: a lane holds n only where n <= V + 1 (one vector, one leftover)
            return self.vector_lanes(A.Lanes(_num(self.int_(2, top)), ref(),
                                             ref() if self.chance(0.3) else self.order(depth, False)), base - 1,
                                     thread=False)
        if kind == "chunks":
            return A.Chunks(A.Call("min", (_num(self.int_(1, base)), n_)), ref(), self.order(depth, False))
        # tail: OUTER gets 1 + n % k <= k <= base < n operands
        return A.Tail(_num(self.int_(1, top)), self.order(depth, True), ref())

    # ------------------------------------------------------------ the root

    def root(self) -> A.Order:
        if self.op in ("gemv", "gemm") and self.chance(0.25):
            return self.position_guard()
        return self.order(self.max_depth, True)

    def position_guard(self) -> A.Guard:
        rows = self.shape[0]
        i, j = A.Var("i"), A.Var("j")
        conds = [_cmp("<", i, _num(self.int_(1, rows))), _cmp("==", _bin("%", i, _num(2)), _num(self.int_(0, 1)))]
        if self.op == "gemm":
            conds += [_cmp(">=", j, _num(self.int_(1, self.shape[1]))),
                      A.BoolOp("and", _cmp("<", i, _num(self.int_(1, rows))), _cmp("<", j, _num(self.shape[1] // 2 + 1)))]
        cases = []
        for cond in self.rng.permutation(len(conds))[:self.int_(1, 2)]:
            arm = self.order(self.max_depth - 1, True)
            if self.chance(0.3):
                arm = A.Using(self.named_arithmetic(), arm)
            cases.append(A.Case(conds[int(cond)], arm))
        return A.Guard(tuple(cases), self.order(self.max_depth - 1, True))


def random_spec(rng: np.random.Generator, *, op: str | None = None, fmt: str | None = None, parametric: bool = True,
                max_depth: int = 4, n_range: tuple | None = None) -> A.Spec:
    """A random spec that passes `fpspec.spec.check`.

    op: sum | dot | gemv | gemm (default: drawn); fmt: the input format, fp64 |
    fp32 | fp16 | bf16 (default: drawn); parametric: `n in LO..HI` (else one
    n); max_depth: combinators nested at most this deep; n_range: (LO, HI) of
    a parametric spec (its one n is drawn from it otherwise; default: drawn,
    HI <= 160 so that every n is cheap to expand and evaluate).
    """
    if op is not None and op not in OPS:
        raise ValueError(f"op {op!r}; expected one of {', '.join(OPS)}")
    if fmt is not None and fmt not in FORMATS:
        raise ValueError(f"fmt {fmt!r}; expected one of {', '.join(FORMATS)}")
    for _ in range(_TRIES):
        draw_fmt = fmt or str(rng.choice(FORMATS, p=(0.2, 0.4, 0.2, 0.2)))
        spec = _draw(rng, op or str(rng.choice(OPS)), draw_fmt, parametric, max_depth, n_range)
        try:
            check(spec)
        except SpecError:
            continue
        return spec
    raise RuntimeError(f"no valid spec in {_TRIES} draws (op {op}, fmt {fmt}, n_range {n_range})")


def _draw(rng, op: str, fmt: str, parametric: bool, max_depth: int, n_range) -> A.Spec:
    if n_range is None:
        lo = int(rng.integers(1, 9)) if rng.random() < 0.7 else int(rng.integers(9, 60))
        hi = lo + int(rng.integers(0, 100))
    else:
        lo, hi = int(n_range[0]), int(n_range[1])
    if not parametric:
        lo = hi = int(rng.integers(lo, hi + 1))
    g = _Draw(rng, op, fmt, max_depth, lo, hi)
    # drawn after the arithmetic (a seed's specs stay the ones earlier runs and records name)
    g.shape = {"gemv": (int(rng.integers(1, 6)),), "gemm": (int(rng.integers(1, 5)), int(rng.integers(1, 5)))}.get(op)
    if rng.random() < 0.35:
        g.recursive()
    if rng.random() < 0.25:
        g.named_order()
    order = g.root()
    sections = [g.main]
    if g.shape is not None:
        shape = (A.Entry("m", g.shape[0]),) + ((A.Entry("ncols", g.shape[1]),) if op == "gemm" else ())
        sections.insert(0, A.Block("provenance", (A.Entry("shape", A.Block("shape", shape)),)))
    used = _using_names(order, g.lets)
    header = A.Header(target="random", op=op, n=A.Range(lo, hi), sections=tuple(sections),
                      arithmetics=tuple(a for a in g.named if a.name in used))
    refs = _refs(order, {d.name: d for d in g.lets})
    return A.Spec(header, tuple(d for d in g.lets if d.name in refs), order)


# ---------------------------------------------------------------- walking


def _walk(o):
    stack = [o]
    while stack:
        x = stack.pop()
        yield x
        stack.extend(order_children(x))


def _refs(order, lets: dict) -> set:
    """Names of the named orders `order` reaches (through other named orders too)."""
    seen: set = set()
    todo = [order]
    while todo:
        for x in _walk(todo.pop()):
            if isinstance(x, A.Ref) and x.name not in seen and x.name in lets:
                seen.add(x.name)
                todo.append(lets[x.name].order)
    return seen


def _using_names(order, lets) -> set:
    by_name = {d.name: d for d in lets}
    roots = [order] + [by_name[n].order for n in _refs(order, by_name)]
    return {x.name for r in roots for x in _walk(r) if isinstance(x, A.Using)}


def pruned(spec: A.Spec) -> A.Spec:
    """spec without the named orders and named arithmetic sections nothing uses."""
    lets = {d.name: d for d in spec.lets}
    refs = _refs(spec.order, lets)
    kept = tuple(d for d in spec.lets if d.name in refs)
    used = _using_names(spec.order, kept)
    header = replace(spec.header, arithmetics=tuple(a for a in spec.header.arithmetics if a.name in used))
    return replace(spec, header=header, lets=kept)


# ---------------------------------------------------------------- shrinking

_EXPR_FIELDS = {A.Lanes: ("k", "unroll"), A.VLanes: ("v", "k"), A.Blocks: ("b",), A.Chunks: ("size",), A.Pad: ("m",),
                A.Split: ("at",), A.Tail: ("k",), A.Chain: ("w", "at"), A.Pairwise: ("split",)}


def _smaller_exprs(e):
    """Simpler expressions to try in place of e."""
    if e is None:
        return
    if isinstance(e, A.Num):
        for v in sorted({1, 2, e.value // 2}):
            if 0 < v < e.value:
                yield _num(v)
        return
    for v in (1, 2, 4, 8):
        yield _num(v)
    if isinstance(e, (A.BinOp, A.Call, A.IfExpr)):
        yield _bin("//", n_, _num(2))


def _order_variants(o):
    """Every order one local simplification away from o (smaller first)."""
    if not isinstance(o, A.Seq):
        yield A.Seq()
    kids = order_children(o)
    yield from kids
    if isinstance(o, A.Guard):
        if len(o.cases) > 1:
            for i in range(len(o.cases)):
                yield replace(o, cases=o.cases[:i] + o.cases[i + 1:])
        for i, c in enumerate(o.cases):
            for v in _order_variants(c.order):
                yield replace(o, cases=o.cases[:i] + (replace(c, order=v),) + o.cases[i + 1:])
        for v in _order_variants(o.otherwise):
            yield replace(o, otherwise=v)
        return
    if isinstance(o, A.Lanes) and o.left is not None:
        yield replace(o, left=None, unroll=None)
        if o.unroll is not None:
            yield replace(o, unroll=None)
    if isinstance(o, A.VLanes):
        yield A.Lanes(o.k, o.inner, o.outer)
    if isinstance(o, A.Chain) and o.at is not None:
        yield replace(o, at=None)
    if isinstance(o, A.Pairwise) and o.split is not None:
        yield replace(o, split=None)
    for cls, names in _EXPR_FIELDS.items():
        if isinstance(o, cls):
            for name in names:
                for e in _smaller_exprs(getattr(o, name)):
                    yield replace(o, **{name: e})
    for f in fields(o):
        v = getattr(o, f.name)
        if f.name != "loc" and v is not None and v in kids:
            for w in _order_variants(v):
                yield replace(o, **{f.name: w})


def _spec_variants(spec: A.Spec):
    r = spec.header.n
    lo, hi = r.lo, r.hi
    if hi is not None and hi > lo:
        mid = (lo + hi) // 2
        for a, b in ((lo, mid), (mid + 1, hi), (lo, lo), (hi, hi)):
            yield replace(spec, header=replace(spec.header, n=A.Range(a, b)))
    for v in _order_variants(spec.order):
        yield pruned(replace(spec, order=v))
    for i, d in enumerate(spec.lets):
        for v in _order_variants(d.order):
            yield pruned(replace(spec, lets=spec.lets[:i] + (replace(d, order=v),) + spec.lets[i + 1:]))
    arith = spec.header.arithmetic
    if arith is not None:
        entries = arith.entries
        for i, e in enumerate(entries):
            simpler = {"init": A.Ident("none"), "product_format": None, "fused": None}
            if e.key in simpler:
                new = entries[:i] + (() if simpler[e.key] is None else (replace(e, value=simpler[e.key]),)) \
                    + entries[i + 1:]
                if new != entries:
                    sections = tuple(replace(b, entries=new) if b is arith else b for b in spec.header.sections)
                    yield replace(spec, header=replace(spec.header, sections=sections))


def shrink(spec: A.Spec, still_fails: Callable[[A.Spec], bool], max_tries: int = 400) -> A.Spec:
    """A minimal spec (no single simplification of it still fails) derived from `spec`.

    `still_fails(candidate)` is called only on candidates that pass `check`;
    at most `max_tries` calls are made.
    """
    tries = 0
    current = spec
    progress = True
    while progress and tries < max_tries:
        progress = False
        for cand in _spec_variants(current):
            if cand == current:
                continue
            try:
                check(cand)
            except SpecError:
                continue
            tries += 1
            if still_fails(cand):
                current, progress = cand, True
                break
            if tries >= max_tries:
                break
    return current


__all__ = ["random_spec", "shrink", "pruned", "OPS", "FORMATS"]
