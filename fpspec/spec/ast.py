"""The .fps abstract syntax tree: frozen dataclasses, one per grammar rule.

Every node keeps where it came from in `loc` (a `fpspec.errors.Location`, or
None for nodes built in code).  `loc` is keyword-only and `compare=False`, so
two specs are equal when they say the same thing, wherever it was written.

Three layers:

* expressions (`Expr`) are integers computed from `n`, the number of operands
  the enclosing order is applied to (see "What n means" below);
* orders (`Order`) are functions from a list of operands to one tree;
* a `Spec` is a header (target, op, formats, range of n, provenance,
  arithmetic), named orders (`Let`) and the root order.

What n means
------------
Every order is applied to a list of operands o[0..n-1]: leaves (term indices)
or subtrees built by an enclosing order.  Inside an order, `n` is the length
of THAT list: at the root it is the reduction length; inside `lanes(k, A, B)`
it is the lane's length for A and the number of lanes for B; in a named order
called recursively it is the length of the sub-range.  So a recursive order
reads like the C function it describes (numpy's pairwise_sum(a, n)).

Every order applied to ONE operand returns that operand unchanged (no node is
made), and no order is ever applied to zero operands.

Binary nodes are written (a b), fused nodes [a b c]; children are unordered
(the tree is canonical), so "a + b" and "b + a" are the same node.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Union

from fpspec.errors import Location
from fpspec.tree import Tree


def _loc():
    return field(default=None, compare=False, repr=False, kw_only=True)


class _Printable:
    """str(node) is its canonical .fps text (fpspec.spec.printer)."""

    __slots__ = ()

    def __str__(self) -> str:
        from fpspec.spec.printer import format_node

        return format_node(self)


# ---------------------------------------------------------------- expressions in n

@dataclass(frozen=True)
class Num(_Printable):
    """An integer literal."""

    value: int
    loc: Location | None = _loc()


@dataclass(frozen=True)
class Var(_Printable):
    """`n`: the number of operands of the enclosing order; `i`, `j`: the row and
    column of the output element whose terms are summed (both 0 for a sum or a
    dot, j = 0 for a GEMV).  Libraries run different kernels for different
    output tiles (OpenBLAS sgemm's edge tiles, sgemv's m % 4 leftover rows), so
    one spec of a matrix op may need an order per output position: `if j < 8:
    ... else: ...`.  The compiler takes i and j only in the conditions of the
    outermost `if` of the root order."""

    name: str = "n"
    loc: Location | None = _loc()


BINARY_OPS = ("+", "-", "*", "//", "%")


@dataclass(frozen=True)
class BinOp(_Printable):
    """Integer arithmetic: + - * // % (floor division and modulo, as Python)."""

    op: str
    left: "Expr"
    right: "Expr"
    loc: Location | None = _loc()

    def __post_init__(self):
        if self.op not in BINARY_OPS:
            raise ValueError(f"unknown operator {self.op!r}; expected one of {' '.join(BINARY_OPS)}")


FUNCTIONS = ("min", "max")


@dataclass(frozen=True)
class Call(_Printable):
    """A built-in function of integers: min(a, b, ...), max(a, b, ...)."""

    func: str
    args: tuple
    loc: Location | None = _loc()

    def __post_init__(self):
        if self.func not in FUNCTIONS:
            raise ValueError(f"unknown function {self.func!r}; expected one of {', '.join(FUNCTIONS)}")


@dataclass(frozen=True)
class IfExpr(_Printable):
    """`(if C: A elif C2: B else: Z)`: the first arm whose condition holds.

    Written in parentheses wherever an expression goes; `elif` arms are
    nested IfExprs in `otherwise`.  OpenBLAS's level-3 K blocking takes
    (if n >= 640: 320 elif n > 320: (n // 2 + 7) // 8 * 8 else: n) operands
    of the n left (see `Chunks`).
    """

    cond: "Cond"
    then: "Expr"
    otherwise: "Expr"
    loc: Location | None = _loc()


Expr = Union[Num, Var, BinOp, Call, IfExpr]

# ---------------------------------------------------------------- conditions (guards on n)

COMPARE_OPS = ("<", "<=", ">", ">=", "==", "!=")


@dataclass(frozen=True)
class Compare(_Printable):
    """`left OP right` with OP one of < <= > >= == !=."""

    op: str
    left: Expr
    right: Expr
    loc: Location | None = _loc()

    def __post_init__(self):
        if self.op not in COMPARE_OPS:
            raise ValueError(f"unknown comparison {self.op!r}; expected one of {' '.join(COMPARE_OPS)}")


@dataclass(frozen=True)
class BoolOp(_Printable):
    """`left and right`, `left or right` (and binds tighter than or)."""

    op: str
    left: "Cond"
    right: "Cond"
    loc: Location | None = _loc()

    def __post_init__(self):
        if self.op not in ("and", "or"):
            raise ValueError(f"unknown boolean operator {self.op!r}; expected 'and' or 'or'")


Cond = Union[Compare, BoolOp]

# ---------------------------------------------------------------- orders
# Each order maps operands o[0..n-1] to one tree.  The docstrings are the
# definition the expander, the compiler and the lowering all follow.


@dataclass(frozen=True)
class Seq(_Printable):
    """`seq`: sequential fold, left to right: (((o0 o1) o2) ... o[n-1])."""

    loc: Location | None = _loc()


@dataclass(frozen=True)
class Rev(_Printable):
    """`rev`: reverse fold, right to left: (o0 (o1 (... (o[n-2] o[n-1])))).

    The accumulator starts at o[n-1] and takes o[n-2], o[n-3], ... in turn.
    """

    loc: Location | None = _loc()


@dataclass(frozen=True)
class Pairwise(_Printable):
    """`pairwise` or `pairwise(SPLIT)`: recursive halving.

    n == 1: o0.  Otherwise h = SPLIT evaluated with n = the current length
    (default n // 2, so the left half gets the floor), 1 <= h <= n - 1, and
    the result is (pairwise(o[0..h-1]) pairwise(o[h..n-1])).
    """

    split: Expr | None = None
    loc: Location | None = _loc()


@dataclass(frozen=True)
class GpuTree(_Printable):
    """`gpu_tree`: GPU-style tree reduction, combining i with i + half.

    Repeat while n > 1: half = (n + 1) // 2; for i in 0 .. n - half - 1:
    o[i] = (o[i] o[i + half]); then n = half (an odd middle element o[half-1]
    waits for the next round).  For 8 operands: 0+4, 1+5, 2+6, 3+7, then
    0+2, 1+3, then 0+1.
    """

    loc: Location | None = _loc()


@dataclass(frozen=True)
class Fused(_Printable):
    """`fused`: one fused node of all n operands [o0 o1 ... o[n-1]]."""

    loc: Location | None = _loc()


@dataclass(frozen=True)
class Chain(_Printable):
    """`chain(W)`: a chain of W-term fused nodes, each taking the previous
    result as an extra term.

    r = [o0 .. o[W-1]] (just o0 if n == 1); then for each next group g of
    W operands (the last group may be shorter, down to one operand):
    r = [r g0 g1 ...], a fused node of len(g) + 1 children.  For n <= W it is
    one fused node of n operands.  Tensor-core matmul: chain(16).

    `chain(W, AT)`: the short group (n % W operands, if any) is the AT-th
    group instead of the last (AT >= n // W: last); a first group of one
    operand is that operand, so the next node has W + 1 children.  cuBLAS
    loops over K in tiles of T starting with the partial tile:
    chain(16, n % T // 16).
    """

    w: Expr
    at: Expr | None = None
    loc: Location | None = _loc()


@dataclass(frozen=True)
class Lanes(_Printable):
    """`lanes(K, INNER, OUTER)`: K strided lanes.

    Lane j (0 <= j < min(K, n)) holds o[j], o[j+K], o[j+2K], ... (all of
    them: when K does not divide n the first n % K lanes are one longer; use
    `tail` to treat leftovers apart).  INNER orders each lane (n = the lane's
    length); OUTER combines the lane results in lane order (n = the number of
    lanes).  numpy.sum blocks: lanes(8, seq, pairwise).

    `lanes(K, INNER, OUTER, LEFT)`: the lanes take the first n - n % K
    operands only (every lane the same length); LEFT orders lane 0's result
    followed by the n % K leftovers (n = 1 + n % K), and its result stands in
    for lane 0's before OUTER.  A vectorized loop whose scalar tail goes into
    the first vector lane: torch.sum is lanes(8, ..., seq, split(1, seq, seq)).
    With fewer than K operands there are no lanes: LEFT orders them all.

    `lanes(K, INNER, OUTER, LEFT, U)`: the same with the lanes over the first
    n - n % U operands (U a multiple of K: a loop unrolled U terms at a time,
    its K accumulators each taking U / K of them); n < U: LEFT alone.
    OpenBLAS's sgemm kernel along K: lanes(2, seq, seq, seq, 8), so at
    n = 15 lane 0 is (((0 2) 4) 6), then 8..14 join it one by one, then lane 1.
    """

    k: Expr
    inner: "Order"
    outer: "Order"
    left: "Order | None" = None
    unroll: Expr | None = None
    loc: Location | None = _loc()

    def __post_init__(self):
        if self.unroll is not None and self.left is None:
            raise ValueError("lanes with an unroll modulus needs LEFT: lanes(K, INNER, OUTER, LEFT, U)")


@dataclass(frozen=True)
class VLanes(_Printable):
    """`vlanes(V, K, INNER, OUTER)`: K lanes fed by vector loads of V operands.

    The first n - n % V operands are n // V vectors of V consecutive
    operands; vector v goes to lane v % K, so lane j holds the operands of
    vectors j, j + K, j + 2K, ... in order.  The n % V leftovers (a scalar
    tail) go one each to lanes 0, 1, ..., n % V - 1 (lane j % K), after
    their vectors.
    INNER orders each lane that received operands (n = its length), OUTER
    the lane results in lane order (n = that number of lanes).  A GPU
    reduction where thread j loads vectors j, j + K, ... into V accumulators
    and the first threads add the tail (PyTorch's CUDA reduce kernel):
    vlanes(4, 512, lanes(4, seq, seq, seq), gpu_tree).
    """

    v: Expr
    k: Expr
    inner: "Order"
    outer: "Order"
    loc: Location | None = _loc()


@dataclass(frozen=True)
class Blocks(_Printable):
    """`blocks(B, INNER, OUTER)`: contiguous blocks of B.

    Block j holds o[jB .. jB+B-1]; the last block holds the n % B leftovers
    when B does not divide n.  INNER orders each block, OUTER combines the
    block results in block order (n = number of blocks = ceil(n / B)).
    """

    b: Expr
    inner: "Order"
    outer: "Order"
    loc: Location | None = _loc()


@dataclass(frozen=True)
class Chunks(_Printable):
    """`chunks(SIZE, INNER, OUTER)`: contiguous chunks taken from the front,
    each of SIZE operands where SIZE is evaluated with n = the number of
    operands not yet taken (1 <= SIZE <= that number).

    INNER orders each chunk (n = its size), OUTER the chunk results in order
    (n = the number of chunks): with OUTER = seq each chunk's result is added
    to the running total, as the C loop
    `for (ls = 0; ls < k; ls += min_l) { min_l = SIZE(k - ls); C += block; }`.
    OpenBLAS sgemm along K (GEMM_Q = 320, halving rounded up to 8):
    chunks((if n >= 640: 320 elif n > 320: (n // 2 + 7) // 8 * 8 else: n),
    lanes(2, seq, seq, seq, 8), seq).  A constant SIZE is `blocks`.
    """

    size: Expr
    inner: "Order"
    outer: "Order"
    loc: Location | None = _loc()


@dataclass(frozen=True)
class Pad(_Printable):
    """`pad(M, ORDER)`: ORDER applied to the operands padded to a multiple of
    M with phantoms placed right after the first n % M operands: a vector
    kernel that loads the partial vector first, zeros in its upper lanes.

    r = n % M, c = (M - r) % M phantoms; ORDER gets [o0 .. o[r-1], c
    phantoms, o[r] .. o[n-1]] (n = n + c inside it); then every node loses
    its phantom children (a node left with one child is that child).
    OpenBLAS sgemv_t (numpy.matmul(A, x), float32): after the n % 4 scalar
    tail is cut off, pad(8, lanes(8, seq, lanes(4, seq, pairwise))).
    """

    m: Expr
    order: "Order"
    loc: Location | None = _loc()


@dataclass(frozen=True)
class Split(_Printable):
    """`split(AT, FIRST, REST)`: (FIRST(o[0..AT-1]) REST(o[AT..n-1])).

    1 <= AT <= n - 1.  With named orders this is recursion on sub-ranges:
    numpy's pairwise_sum is split(n // 2 - n // 2 % 8, ps, ps).
    """

    at: Expr
    first: "Order"
    rest: "Order"
    loc: Location | None = _loc()


@dataclass(frozen=True)
class Tail(_Printable):
    """`tail(K, BODY, OUTER)`: the n % K leftovers handled apart.

    p = n - n % K.  If p == 0 (n < K): OUTER(o).  Otherwise r = BODY(o[0..p-1])
    and the result is OUTER([r, o[p], ..., o[n-1]]): with OUTER = seq the
    leftovers are added one by one to the body's result.
    numpy.sum blocks of at most 128: tail(8, lanes(8, seq, pairwise), seq).
    """

    k: Expr
    body: "Order"
    outer: "Order"
    loc: Location | None = _loc()


@dataclass(frozen=True)
class Using(_Printable):
    """`using(NAME, ORDER)`: ORDER, every node of it computed in the arithmetic
    `arithmetic NAME { ... }` instead of the main one.

    The tree is ORDER's tree (expand(using(a, o)) == expand(o)); only the
    arithmetic of its nodes changes.  The subtree's result enters its parent
    exactly and the parent rounds in its own arithmetic; a leaf child is
    formed (product rounded, fused into an FMA, ...) as the node that takes
    it says.  Nests: the innermost `using` decides.  OpenBLAS sdot's fp32 FMA
    kernel inside an fp64 loop: tail(32, using(kernel, ...), split(1, seq, seq)).
    """

    name: str
    order: "Order"
    loc: Location | None = _loc()


@dataclass(frozen=True)
class Literal(_Printable):
    """A literal tree over operand positions 0..n-1, in fpspec.tree text form:
    `((0 1) [2 3 4])`.  Applies only when n equals the tree's size; position
    i stands for operand o[i].  Any tree can be written this way."""

    tree: Tree
    loc: Location | None = _loc()


@dataclass(frozen=True)
class Ref(_Printable):
    """A named order (see `Let`), possibly the one being defined (recursion)."""

    name: str
    loc: Location | None = _loc()


@dataclass(frozen=True)
class Case(_Printable):
    """One arm of a guard: `if COND: ORDER` / `elif COND: ORDER`."""

    cond: Cond
    order: "Order"
    loc: Location | None = _loc()


@dataclass(frozen=True)
class Guard(_Printable):
    """`if C1: A elif C2: B ... else: Z`: the first arm whose condition holds
    for the current n; `else` is required, so every n has an order."""

    cases: tuple  # tuple[Case, ...], at least one
    otherwise: "Order"
    loc: Location | None = _loc()

    def __post_init__(self):
        if not self.cases:
            raise ValueError("a guard needs at least one `if` arm")


Order = Union[Seq, Rev, Pairwise, GpuTree, Fused, Chain, Lanes, VLanes, Blocks, Chunks, Pad, Split, Tail, Using, Literal, Ref, Guard]

# ---------------------------------------------------------------- header blocks


@dataclass(frozen=True)
class Ident(_Printable):
    """A bare identifier as a value: fp32, fma, truncate, rz."""

    name: str
    loc: Location | None = _loc()

    def __post_init__(self):
        if self.name in ("true", "false"):
            raise ValueError(f"{self.name} is a boolean value, not an identifier: use {self.name == 'true'}")


@dataclass(frozen=True)
class Float(_Printable):
    """A float value kept as canonical text so that +0.0 and -0.0 differ.

    Canonical: zeros are written with their sign (+0.0, -0.0), other values
    as Python's repr (1.5, -2.5e-08).  `value` is the float.
    """

    text: str
    loc: Location | None = _loc()

    def __post_init__(self):
        v = float(self.text)
        if v == 0.0:
            canon = "-0.0" if math.copysign(1.0, v) < 0 else "+0.0"
        else:
            canon = repr(v)
        object.__setattr__(self, "text", canon)

    @property
    def value(self) -> float:
        return float(self.text)

    @classmethod
    def of(cls, value: float) -> "Float":
        return cls(repr(float(value)))


@dataclass(frozen=True)
class Apply(_Printable):
    """`name(key = value, ...)` as a value: a choice with parameters, `accumulator = binned(fold = 3)`."""

    name: str
    entries: tuple  # tuple[Entry, ...]
    loc: Location | None = _loc()

    def get(self, key: str, default=None):
        for e in self.entries:
            if e.key == key:
                return e.value
        return default


# A value: Ident, int (maybe negative), Float, str (a quoted string), bool, Apply, or Block.
Value = Union[Ident, int, Float, str, bool, Apply, "Block"]


@dataclass(frozen=True)
class Entry(_Printable):
    """`key = value` inside a block."""

    key: str
    value: Value
    loc: Location | None = _loc()


@dataclass(frozen=True)
class Block(_Printable):
    """`name { key = value ... }`: ordered entries; a value may itself be a
    Block (written `name { ... }` in place of `key = value`, as an Entry whose
    key is the block's name)."""

    name: str
    entries: tuple  # tuple[Entry, ...]
    loc: Location | None = _loc()

    def get(self, key: str, default=None):
        for e in self.entries:
            if e.key == key:
                return e.value
        return default

    def as_dict(self) -> dict:
        return {e.key: e.value for e in self.entries}


@dataclass(frozen=True)
class NamedArithmetic(_Printable):
    """`arithmetic NAME { key = value ... }`: an arithmetic for `using(NAME, ...)`.

    Its entries override the main `arithmetic { ... }` section's; keys it
    does not give are inherited (product_format only together with product).
    input, output and init belong to the whole accumulation: a named section
    may repeat them only with the main section's values.
    """

    name: str
    entries: tuple  # tuple[Entry, ...]
    loc: Location | None = _loc()


@dataclass(frozen=True)
class Range(_Printable):
    """`n in LO..HI` (HI None: unbounded, `n in LO..`); `n in N` is LO == HI."""

    lo: int
    hi: int | None
    loc: Location | None = _loc()

    def __contains__(self, n: int) -> bool:
        return self.lo <= n and (self.hi is None or n <= self.hi)


HEADER_WORDS = ("target", "op", "n", "let", "order")


@dataclass(frozen=True)
class Header(_Printable):
    """What the spec is about.  All optional.

    target: the function revealed ("numpy.sum"); op: sum | dot | gemv | gemm;
    n: the range of n the spec is valid for; sections: named blocks, in
    order, conventionally `formats`, `provenance` (library versions, device,
    date, fpspec version, command) and `arithmetic` (fpspec.arith defines its
    entries).
    """

    target: str | None = None
    op: str | None = None
    n: Range | None = None
    sections: tuple = ()  # tuple[Block, ...]
    loc: Location | None = _loc()
    arithmetics: tuple = ()  # tuple[NamedArithmetic, ...]: `arithmetic NAME { ... }`, in order

    def __post_init__(self):
        for b in self.sections:
            if b.name in HEADER_WORDS:
                raise ValueError(f"a section cannot be named {b.name!r} (a header keyword)")
        names = [a.name for a in self.arithmetics]
        if len(set(names)) != len(names):
            raise ValueError(f"named arithmetic sections repeat a name: {names}")

    def section(self, name: str) -> Block | None:
        for b in self.sections:
            if b.name == name:
                return b
        return None

    @property
    def arithmetic(self) -> Block | None:
        return self.section("arithmetic")

    def named_arithmetic(self, name: str) -> NamedArithmetic | None:
        for a in self.arithmetics:
            if a.name == name:
                return a
        return None

    @property
    def provenance(self) -> Block | None:
        return self.section("provenance")

    @property
    def formats(self) -> Block | None:
        return self.section("formats")


# ---------------------------------------------------------------- the spec


@dataclass(frozen=True)
class Let(_Printable):
    """`let NAME = ORDER`: a named order; ORDER may refer to NAME (recursion)
    and to any other named order of the spec."""

    name: str
    order: Order
    loc: Location | None = _loc()


@dataclass(frozen=True)
class Spec(_Printable):
    """A whole .fps file: header, named orders, and `order ORDER`, the order
    of the root (applied to the n leaves 0..n-1)."""

    header: Header
    lets: tuple  # tuple[Let, ...]
    order: Order
    loc: Location | None = _loc()

    def let(self, name: str) -> Let | None:
        for d in self.lets:
            if d.name == name:
                return d
        return None
