"""Kernel IR: what a replica computes, between a .fps spec and a backend.

A `Kernel` is one accumulation problem: an op (sum, dot, gemv, gemm), its
`Arithmetic` (formats, products, FMA, fused nodes, init, output cast) and an
order written as a `Reducer` applied to the n terms t_0..t_{n-1} of every
output element.  Everything across output elements is free; the IR fixes only
the order along the reduction, and backends vectorize over outputs.

Reducers are the spec's combinators, not unrolled trees, so the size of the
IR (and of a replica) does not grow with n.  A reducer maps an *operand list*
(a list of m values: leaves or partial sums) to one value:

- ``reduce(R, [o]) == o``: one operand is returned untouched (no addition).
- An empty operand list never reaches a reducer (see `Segments`).
- Integer parameters are `IntExpr`s over ``m`` (the length of the list the
  reducer is applied to) and ``n`` (the kernel's reduction length).

Binary additions happen in the accumulator format, round to nearest even
(see note [leaf products] for where products and FMAs enter).  Fused nodes
are one multi-term fused summation (fpspec.arith.fused.fused_node with the
arithmetic's `FusedParams`).

Note [leaf products]: a leaf operand k is the *term* t_k: x_k for a sum, the
product a_k*b_k for dot/gemv/gemm.  With ``product == "rounded"`` the product
is rounded to the accumulator format when it enters an addition; with
``"exact"`` it enters unrounded (backends compute it exactly: it fits the
carrying format for inputs of <= 26 bits); with ``"fma"`` a binary node
whose one child is a leaf and the other a partial sum is
fma(a_k, b_k, partial); a binary node of two leaves rounds the product of the
first (smaller index) and fuses the second.  In a fused node every leaf child
gives an exact product to the fused sum and a partial-sum child (at most one)
is its addend c (the first node of a chain gets c = +0.0, which changes
nothing: a zero never sets the alignment).  Every value is converted to the accumulator format when it
enters an addition (fp16 inputs summed in fp32: exact widening).

Each reducer's docstring gives its semantics on operands o_0..o_{m-1};
`fpspec.compile.trees.tree_of(kernel, n)` is their executable definition (the
tree a kernel denotes), and the NumPy backend the executable definition of
the numerics.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Union

from fpspec.arith.model import Arithmetic
from fpspec.errors import FpspecError


class CompileError(FpspecError):
    """A spec the compiler or a backend cannot express; one line, exit code 2."""


# ---------------------------------------------------------------- integer expressions

INT_OPS = ("+", "-", "*", "//", "%", "min", "max")
CMP_OPS = ("<", "<=", "==", "!=", ">", ">=")
BOOL_OPS = ("and", "or")
VARIABLES = ("m", "n", "i", "j")


@dataclass(frozen=True)
class Const:
    """An integer literal."""
    value: int

    def __post_init__(self):
        if isinstance(self.value, bool) or not isinstance(self.value, int):
            raise TypeError(f"Const holds an int, got {self.value!r}")


@dataclass(frozen=True)
class Var:
    """``m``: length of the current operand list; ``n``: the kernel's reduction length;
    ``i``, ``j``: the output element's row and column (only in `Positional` cases)."""
    name: str

    def __post_init__(self):
        if self.name not in VARIABLES:
            raise ValueError(f"unknown variable {self.name!r}; expected one of {VARIABLES}")


@dataclass(frozen=True)
class BinOp:
    """Integer arithmetic with Python semantics (``//`` and ``%`` floor)."""
    op: str
    a: "IntExpr"
    b: "IntExpr"

    def __post_init__(self):
        if self.op not in INT_OPS:
            raise ValueError(f"unknown integer operator {self.op!r}; expected one of {INT_OPS}")


@dataclass(frozen=True)
class IfInt:
    """``a if cond else b`` (the spec's `(if C: A else: B)`)."""
    cond: "Cond"
    a: "IntExpr"
    b: "IntExpr"


IntExpr = Union[Const, Var, BinOp, IfInt]


@dataclass(frozen=True)
class Compare:
    op: str
    a: IntExpr
    b: IntExpr

    def __post_init__(self):
        if self.op not in CMP_OPS:
            raise ValueError(f"unknown comparison {self.op!r}; expected one of {CMP_OPS}")


@dataclass(frozen=True)
class BoolOp:
    op: str
    a: "Cond"
    b: "Cond"

    def __post_init__(self):
        if self.op not in BOOL_OPS:
            raise ValueError(f"unknown boolean operator {self.op!r}; expected one of {BOOL_OPS}")


@dataclass(frozen=True)
class Not:
    a: "Cond"


Cond = Union[Compare, BoolOp, Not]


def int_value(e: IntExpr, m: int, n: int) -> int:
    """Evaluate an IntExpr (the reference; backends render the same Python text)."""
    if isinstance(e, Const):
        return e.value
    if isinstance(e, Var):
        return m if e.name == "m" else n
    if isinstance(e, IfInt):
        return int_value(e.a if cond_value(e.cond, m, n) else e.b, m, n)
    a, b = int_value(e.a, m, n), int_value(e.b, m, n)
    return {"+": a + b, "-": a - b, "*": a * b, "min": min(a, b), "max": max(a, b)}[e.op] if e.op not in ("//", "%") \
        else _divide(e.op, a, b)


def _divide(op: str, a: int, b: int) -> int:
    if b == 0:
        raise CompileError(f"division by zero in an integer parameter ({a} {op} 0)")
    return a // b if op == "//" else a % b


def cond_value(c: Cond, m: int, n: int) -> bool:
    if isinstance(c, Not):
        return not cond_value(c.a, m, n)
    if isinstance(c, BoolOp):
        a = cond_value(c.a, m, n)
        return (a and cond_value(c.b, m, n)) if c.op == "and" else (a or cond_value(c.b, m, n))
    a, b = int_value(c.a, m, n), int_value(c.b, m, n)
    return {"<": a < b, "<=": a <= b, "==": a == b, "!=": a != b, ">": a > b, ">=": a >= b}[c.op]


def chunk_bounds(size: IntExpr, m: int, n: int) -> list[tuple[int, int]]:
    """(start, end) of every chunk of `Chunks(size, ...)` over m operands."""
    out, start = [], 0
    while start < m:
        s = int_value(size, m - start, n)
        if not 1 <= s <= m - start:
            raise CompileError(f"chunk size {s} with {m - start} operands left; expected 1..{m - start}")
        out.append((start, start + s))
        start += s
    return out


def uses_var(e, name: str) -> bool:
    if isinstance(e, Var):
        return e.name == name
    if isinstance(e, (BinOp, Compare, BoolOp)):
        return uses_var(e.a, name) or uses_var(e.b, name)
    if isinstance(e, Not):
        return uses_var(e.a, name)
    if isinstance(e, IfInt):
        return uses_var(e.cond, name) or uses_var(e.a, name) or uses_var(e.b, name)
    return False


# ---------------------------------------------------------------- reducers

@dataclass(frozen=True)
class Fold:
    """Sequential fold: ((o_0 + o_1) + o_2) + ...; reverse: ((o_{m-1} + o_{m-2}) + ...).

    A loop with one accumulator.
    """
    reverse: bool = False


@dataclass(frozen=True)
class Pairwise:
    """Recursive halving: reduce(o[:h]) + reduce(o[h:]) with h = `split` evaluated
    at the current length m (default m // 2: the left half gets the floor),
    1 <= h <= m - 1.
    """
    split: "IntExpr | None" = None


@dataclass(frozen=True)
class TreeReduce:
    """GPU-style tree reduction by levels: while m > 1: h = (m + 1) // 2;
    o_i <- o_i + o_{i+h} for i < m - h; m <- h.  (For m a power of two this is
    "combine i with i + m/2".)  The left operand of each addition is o_i.
    """


@dataclass(frozen=True)
class FusedChain:
    """Chain of fused nodes of `width` operands: node_0 = fused(o_0..o_{w-1}),
    node_j = fused(node_{j-1}, next w operands); the last node takes what is left
    (at least one operand).  m <= w: one fused node (m == 1: the operand itself).

    With `at`, the short group (m % w operands) is group min(at, m // w)
    instead of the last (fpspec.tree.chain_groups); a first group of one
    operand shows in a tree as the next node having w + 1 leaves: one fused
    node where w is below the fused section's w, else a fused node of one
    product whose result is the next node's c (fpspec.arith.evaluate note
    [fused nodes]).
    """
    width: IntExpr
    at: "IntExpr | None" = None


@dataclass(frozen=True)
class Table:
    """A literal tree over exactly `size` operands, as a compact schedule.

    Slots 0..size-1 are the operands; step s writes slot size + s.  Step s is
    ``children[offsets[s]:offsets[s+1]]`` (slot numbers, canonical order) and
    ``fused[s]``; the last step is the root.  Steps are in an order where
    every child is computed before use (post-order).  Build one with
    `fpspec.compile.trees.table_of(tree)`.
    """
    size: int
    children: tuple[int, ...]
    offsets: tuple[int, ...]
    fused: tuple[bool, ...]

    def __post_init__(self):
        steps = len(self.fused)
        if len(self.offsets) != steps + 1 or self.offsets[0] != 0 or self.offsets[-1] != len(self.children):
            raise ValueError("Table offsets must run from 0 to len(children), one per step plus one")
        if self.size < 1 or (self.size == 1) != (steps == 0):
            raise ValueError(f"a Table over {self.size} operands needs steps, got {steps}")
        for s in range(steps):
            kids = self.children[self.offsets[s]:self.offsets[s + 1]]
            if len(kids) < 2 or (not self.fused[s] and len(kids) != 2):
                raise ValueError(f"Table step {s}: bad arity {len(kids)}")
            if any(k < 0 or k >= self.size + s for k in kids):
                raise ValueError(f"Table step {s} reads a slot not yet written")
        # a tree: every slot but the root (the last) is read exactly once
        if sorted(self.children) != list(range(self.size + steps - 1)):
            raise ValueError("Table steps must read every operand and every step but the last exactly once")


@dataclass(frozen=True)
class Lanes:
    """k strided lanes: lane j holds o_j, o_{j+k}, o_{j+2k}, ... (the first m % k
    lanes are one longer); each non-empty lane is reduced by `inner`, and the
    lane results (in lane order) by `outer`.  k accumulators.

    With `left`: the lanes take the first m - m % k operands (all lanes the
    same length), `left` reduces lane 0's result followed by the m % k
    leftovers, and its result is lane 0's for `outer`; m < k: `left` alone.
    With `unroll` u (a multiple of k, needs `left`): the lanes take the first
    m - m % u operands, `left` the m % u leftovers; m < u: `left` alone.
    """
    k: IntExpr
    inner: "Reducer"
    outer: "Reducer"
    left: "Reducer | None" = None
    unroll: "IntExpr | None" = None


@dataclass(frozen=True)
class VLanes:
    """k lanes fed by vector loads of v operands: vector i (o_{iv}..o_{iv+v-1},
    i < m // v) goes to lane i % k, then leftover j (o_{(m // v)v + j}) to lane
    j % k; each lane that received operands is reduced by `inner` (its
    operands in that order), the lane results (in lane order) by `outer`
    (fpspec.spec.ast.VLanes).
    """
    v: IntExpr
    k: IntExpr
    inner: "Reducer"
    outer: "Reducer"


@dataclass(frozen=True)
class Blocks:
    """Contiguous blocks of b: block j holds o_{jb}..o_{jb+b-1} (the last may be
    shorter); each block is reduced by `inner`, and the block results (in
    order) by `outer`.  Nested loops.
    """
    b: IntExpr
    inner: "Reducer"
    outer: "Reducer"


@dataclass(frozen=True)
class Chunks:
    """Contiguous chunks from the front: each takes `size` operands, `size`
    evaluated with m = the number of operands not yet taken (1 <= size <= that);
    each chunk is reduced by `inner`, the chunk results (in order) by `outer`.
    OpenBLAS's level-3 loop over K (fpspec.spec.ast.Chunks).
    """
    size: IntExpr
    inner: "Reducer"
    outer: "Reducer"


@dataclass(frozen=True)
class Pad:
    """`inner` over the operands padded to a multiple of `m`: r = len % m operands,
    then c = (m - r) % m phantoms, then the rest (a vector kernel that loads its
    partial vector first, zeros above it); a node loses its phantom children.

    Backends hold a phantom as a zero term that changes no sum: -0.0 (times
    1.0 for products), so x + phantom == x for every x, an FMA into it rounds
    the product once, and no inf * 0 can arise (fpspec.compile.loops note
    [phantoms]).
    """
    m: IntExpr
    inner: "Reducer"


@dataclass(frozen=True)
class Part:
    """`length` consecutive operands: reduced to one value by `reducer`, or, with
    reducer None, passed through one by one to the enclosing `Segments` outer.
    A part of length 0 contributes nothing.
    """
    length: IntExpr
    reducer: "Reducer | None"


@dataclass(frozen=True)
class Segments:
    """Splits and tails: cut the operand list into consecutive parts (lengths in
    order; the last part's length must make them add up to m, checked at run
    time), reduce each, and reduce the resulting list by `outer`.

    numpy's "8 lanes, then the leftovers one by one" is
    Segments((Part(m - m % 8, Lanes(...)), Part(m % 8, None)), Fold()).
    """
    parts: tuple[Part, ...]
    outer: "Reducer"


@dataclass(frozen=True)
class Case:
    cond: Cond
    reducer: "Reducer"


@dataclass(frozen=True)
class Guard:
    """The first case whose condition holds (conditions over m and n) decides;
    `otherwise` None means no case applies is an error at run time.
    """
    cases: tuple[Case, ...]
    otherwise: "Reducer | None" = None


@dataclass(frozen=True)
class Call:
    """A named order from `Kernel.orders`; calls may recurse (m must shrink)."""
    name: str


@dataclass(frozen=True)
class WithArithmetic:
    """`reducer`, every addition it makes in the arithmetic `Kernel.arithmetics[name]`
    (the spec's `using(NAME, order)`, fpspec.arith.evaluate note [regions]):
    its own accumulator carrier and product handling; the result enters the
    enclosing reducer's additions exactly (widened)."""
    name: str
    reducer: "Reducer"


Reducer = Union[Fold, Pairwise, TreeReduce, FusedChain, Table, Lanes, VLanes, Blocks, Chunks, Pad, Segments, Guard, Call,
                WithArithmetic]


# ---------------------------------------------------------------- kernel

OPS = ("sum", "dot", "gemv", "gemm")


@dataclass(frozen=True)
class Kernel:
    """One replica: ``root`` reduces the n terms of every output element.

    ``arithmetic`` is fpspec.arith's `Arithmetic` (formats by name, product
    handling per note [leaf products], init, output cast, `FusedParams` of
    the fused nodes): used as is, so every stage reads one definition.

    ``n_min``/``n_max`` bound the n the spec is valid for (``n_max`` None: no
    upper bound); the replica raises outside.  ``orders`` holds named reducers
    (for `Call`, recursion included), in a fixed order so output is stable.
    ``source`` is the spec text; ``name`` a label (the spec's file name).
    ``arithmetics`` holds the named arithmetics `WithArithmetic` refers to.
    ``rows``/``cols`` are the output shapes a gemv / gemm replica takes
    (fpspec.spec.shapes: (lo, hi) intervals, None for any); it raises outside.
    """
    op: str
    arithmetic: Arithmetic
    root: Reducer
    n_min: int = 1
    n_max: int | None = None
    orders: tuple[tuple[str, Reducer], ...] = ()
    source: str = ""
    name: str = "spec"
    sha256: str = field(default="", compare=False)
    arithmetics: tuple[tuple[str, Arithmetic], ...] = ()
    rows: tuple | None = None
    cols: tuple | None = None

    def __post_init__(self):
        if self.op not in OPS:
            raise ValueError(f"op must be one of {OPS}, got {self.op!r}")
        if self.n_min < 1 or (self.n_max is not None and self.n_max < self.n_min):
            raise ValueError(f"bad range of n: {self.n_min}..{self.n_max}")
        if not self.sha256:
            import hashlib

            object.__setattr__(self, "sha256", hashlib.sha256(self.source.encode()).hexdigest())
        names = [k for k, _ in self.orders]
        if len(set(names)) != len(names):
            raise ValueError(f"duplicate order names in {names}")

    def order(self, name: str) -> Reducer:
        for k, r in self.orders:
            if k == name:
                return r
        raise CompileError(f"order {name!r} is not defined")

    def named_arithmetic(self, name: str) -> Arithmetic:
        for k, a in self.arithmetics:
            if k == name:
                return a
        raise CompileError(f"arithmetic {name!r} is not defined")


def children(r: Reducer) -> tuple:
    """The reducers directly inside `r` (for passes that walk the IR)."""
    if isinstance(r, Lanes):
        return (r.inner, r.outer) + (() if r.left is None else (r.left,))
    if isinstance(r, (Blocks, Chunks, VLanes)):
        return (r.inner, r.outer)
    if isinstance(r, Segments):
        return tuple(p.reducer for p in r.parts if p.reducer is not None) + (r.outer,)
    if isinstance(r, Guard):
        return tuple(c.reducer for c in r.cases) + ((r.otherwise,) if r.otherwise is not None else ())
    if isinstance(r, WithArithmetic):
        return (r.reducer,)
    if isinstance(r, Pad):
        return (r.inner,)
    return ()


def walk(r: Reducer):
    """Every reducer under `r` (pre-order; `Call`s are not followed)."""
    stack = [r]
    while stack:
        s = stack.pop()
        yield s
        stack.extend(reversed(children(s)))


@dataclass(frozen=True)
class Positional:
    """A replica whose order depends on the output position: `cases` pair a
    condition on the output row ``i``, column ``j`` (and ``n``) with the Kernel
    of the outputs where it holds first; ``otherwise`` computes the rest.
    Every Kernel is a whole replica of its own (fpspec.compile.positions
    joins them)."""
    op: str
    cases: tuple[tuple[Cond, Kernel], ...]
    otherwise: Kernel
    source: str = ""
    name: str = "spec"
    texts: tuple[str, ...] = ()     # each case's condition as the spec writes it (comments in the replica)
    # (rows, columns) of the output the conditions were written for (the spec's provenance shape):
    # the replica refuses any other, where the same i, j may take another order
    shape: "tuple[int, int] | None" = None

    @property
    def kernels(self) -> tuple[Kernel, ...]:
        return tuple(k for _, k in self.cases) + (self.otherwise,)

    @property
    def sha256(self) -> str:
        return self.otherwise.sha256
