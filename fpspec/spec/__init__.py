"""The .fps specification language.

API (everything a caller needs; the AST is in fpspec.spec.ast):

    parse(text, filename="<string>") -> Spec
        Syntax lives only in grammar/fps.lark.  Raises SpecError with
        a Location (file:line:col) naming what was expected.
    str(spec) -> str
        Canonical text; parse(str(spec)) == spec for every spec.
    check(spec) -> None
        Names resolve, the range of n is sane, every order gives a tree for
        the n of the stated range (sizes are non-negative integers, splits
        inside the list, fused nodes of >= 2 children, recursion terminates).
        Raises SpecError.
    expand(spec, n) -> fpspec.tree.Tree
        The tree over leaves 0..n-1 (SpecError when n is outside the range).
    apply_order(order, operands, lets={}) -> Tree
        One order applied to a list of operands (leaves or subtrees).
    lower(tree | {n: tree}, header=None) -> Spec
        The most compact spec found that expands back exactly to the tree(s):
        combinators where they fit, literal subtrees only where none does.
    diff_specs(a, b, n) -> fpspec.tree.Difference | None
        None when both specs give the same tree at n, else the first
        differing subtree.
    spec_hash(spec) -> str
        sha256 hex of the canonical text.
    load(path) -> Spec
        parse a file (locations name the file).
    make_header(target=, op=, n=(lo, hi), provenance={...}, arithmetic=Block, formats={...}) -> Header
        a header for lower(); `reveal -o` passes its provenance dict.

Orders (see fpspec.spec.ast for the exact semantics of each):
    seq  rev  pairwise[(SPLIT)]  gpu_tree  fused  chain(W)
    lanes(K, INNER, OUTER)  blocks(B, INNER, OUTER)
    split(AT, FIRST, REST)  tail(K, BODY, OUTER)
    ((0 1) [2 3 4])   a literal tree over operand positions
    NAME              a named order (`let NAME = ...`), recursion allowed
    if COND: A elif COND: B else: C     guards on n

Example (NumPy's float32 sum, every n):

    target "numpy.sum"
    op sum
    n in 1..
    let pairwise_sum =
        if n < 8: seq
        elif n <= 128: tail(8, lanes(8, seq, pairwise), seq)
        else: split(n // 2 - n // 2 % 8, pairwise_sum, pairwise_sum)
    order pairwise_sum
"""
from __future__ import annotations

import hashlib

from fpspec.spec.ast import (  # noqa: F401  (re-exported)
    BinOp, Block, Blocks, BoolOp, Call, Case, Chain, Chunks, Compare, Entry, Expr, Float, Fused,
    GpuTree, Guard, Header, Ident, IfExpr, Lanes, Let, Literal, Num, Order, Pairwise, Range, Ref,
    Rev, Seq, Spec, Split, Tail, Var,
)
# The submodules parse, check, expand and lower share their names with the
# functions below: import them first, so that the functions defined after
# them are what `fpspec.spec.parse` etc. name (a submodule's first import
# would otherwise replace the package attribute with the module).
from fpspec.spec import check as _check_mod  # noqa: E402
from fpspec.spec import expand as _expand_mod  # noqa: E402
from fpspec.spec import lower as _lower_mod  # noqa: E402
from fpspec.spec import parse as _parse_mod  # noqa: E402
from fpspec.spec.header import make_header  # noqa: E402,F401


def parse(text: str, filename: str = "<string>") -> Spec:
    return _parse_mod.parse(text, filename)


def check(spec: Spec) -> None:
    _check_mod.check(spec)


def expand(spec: Spec, n: int, pos: tuple = (0, 0)):
    """The tree at length n of the output element at row i, column j (pos)."""
    return _expand_mod.expand(spec, n, pos)


def apply_order(order, operands, lets=None):
    """`order` applied to `operands`; lets: name -> Let (or a Spec's lets as a tuple)."""
    if isinstance(lets, tuple):
        lets = {d.name: d for d in lets}
    return _expand_mod.apply_order(order, operands, lets or {})


def lower(tree, header: Header | None = None, observed: bool = False) -> Spec:
    return _lower_mod.lower(tree, header, observed)


def diff_specs(a: Spec, b: Spec, n: int):
    from fpspec.tree import diff

    return diff(expand(a, n), expand(b, n))


def spec_hash(spec: Spec) -> str:
    return hashlib.sha256(str(spec).encode()).hexdigest()


def load(path) -> Spec:
    """Parse a .fps file (SpecError with the file's name in the location; a directory, an
    empty or a binary file is one error naming it: fpspec.io.read_text)."""
    from fpspec.io import read_text

    return parse(read_text(path, ".fps spec"), str(path))
