"""AST -> canonical .fps text.  `parse(format_spec(s)) == s` for every spec.

Canonical layout: header lines (target, op, n), one blank line, sections (one
entry a line, nested blocks indented), named orders (`let`), then `order`.
Parentheses in expressions only where precedence needs them; a guard at the
top of a `let` or `order` gets one arm per line, elsewhere it stays inline.
"""
from __future__ import annotations

import json

from fpspec.spec import ast as A
from fpspec.tree import format_tree

INDENT = "    "

# ---------------------------------------------------------------- expressions and conditions

_EXPR_PREC = {"+": 1, "-": 1, "*": 2, "//": 2, "%": 2}
_COND_PREC = {"or": 1, "and": 2}


def format_expr(e) -> str:
    if isinstance(e, A.Num):
        return str(e.value)
    if isinstance(e, A.Var):
        return e.name
    if isinstance(e, A.Call):
        return f"{e.func}({', '.join(format_expr(a) for a in e.args)})"
    if isinstance(e, A.BinOp):
        prec = _EXPR_PREC[e.op]
        return f"{_paren_expr(e.left, prec, False)} {e.op} {_paren_expr(e.right, prec, True)}"
    if isinstance(e, A.IfExpr):   # always parenthesized (the grammar's only place for it)
        arms = []
        while isinstance(e, A.IfExpr):
            arms.append(f"{'if' if not arms else 'elif'} {format_cond(e.cond)}: {format_expr(e.then)}")
            e = e.otherwise
        return f"({' '.join(arms)} else: {format_expr(e)})"
    raise TypeError(f"not an expression: {e!r}")


def _paren_expr(e, parent: int, right: bool) -> str:
    text = format_expr(e)
    if isinstance(e, A.BinOp):
        mine = _EXPR_PREC[e.op]
        # operators are left-associative: a right operand of equal precedence keeps its parentheses
        if mine < parent or (right and mine == parent):
            return f"({text})"
    return text


def format_cond(c) -> str:
    if isinstance(c, A.Compare):
        return f"{format_expr(c.left)} {c.op} {format_expr(c.right)}"
    if isinstance(c, A.BoolOp):
        prec = _COND_PREC[c.op]
        left, right = format_cond(c.left), format_cond(c.right)
        # conditions have no parentheses in the grammar: the AST from the
        # parser is always left-nested with `and` under `or`
        if isinstance(c.right, A.BoolOp) and _COND_PREC[c.right.op] <= prec:
            raise ValueError(f"condition {left} {c.op} ({right}) cannot be written without parentheses; "
                             "build it left-nested, with `and` under `or`")
        if isinstance(c.left, A.BoolOp) and _COND_PREC[c.left.op] < prec:
            raise ValueError(f"condition ({left}) {c.op} {right} cannot be written without parentheses")
        return f"{left} {c.op} {right}"
    raise TypeError(f"not a condition: {c!r}")


# ---------------------------------------------------------------- orders

_SIMPLE = {A.Seq: "seq", A.Rev: "rev", A.GpuTree: "gpu_tree", A.Fused: "fused"}


def format_order(o, indent: str = "") -> str:
    """One order; a guard gets one arm a line, indented by `indent` + INDENT."""
    if isinstance(o, A.Guard):
        inner = indent + INDENT
        lines = []
        for i, case in enumerate(o.cases):
            word = "if" if i == 0 else "elif"
            lines.append(f"{inner}{word} {format_cond(case.cond)}: {format_inline(case.order)}")
        lines.append(f"{inner}else: {format_inline(o.otherwise)}")
        return "\n" + "\n".join(lines)
    return " " + format_inline(o)


def format_inline(o) -> str:
    cls = type(o)
    if cls in _SIMPLE:
        return _SIMPLE[cls]
    if isinstance(o, A.Pairwise):
        return "pairwise" if o.split is None else f"pairwise({format_expr(o.split)})"
    if isinstance(o, A.Chain):
        at = "" if o.at is None else f", {format_expr(o.at)}"
        return f"chain({format_expr(o.w)}{at})"
    if isinstance(o, A.Lanes):
        left = "" if o.left is None else f", {format_inline(o.left)}"
        left += "" if o.unroll is None else f", {format_expr(o.unroll)}"
        return f"lanes({format_expr(o.k)}, {format_inline(o.inner)}, {format_inline(o.outer)}{left})"
    if isinstance(o, A.VLanes):
        return f"vlanes({format_expr(o.v)}, {format_expr(o.k)}, {format_inline(o.inner)}, {format_inline(o.outer)})"
    if isinstance(o, A.Blocks):
        return f"blocks({format_expr(o.b)}, {format_inline(o.inner)}, {format_inline(o.outer)})"
    if isinstance(o, A.Chunks):
        return f"chunks({format_expr(o.size)}, {format_inline(o.inner)}, {format_inline(o.outer)})"
    if isinstance(o, A.Pad):
        return f"pad({format_expr(o.m)}, {format_inline(o.order)})"
    if isinstance(o, A.Split):
        return f"split({format_expr(o.at)}, {format_inline(o.first)}, {format_inline(o.rest)})"
    if isinstance(o, A.Tail):
        return f"tail({format_expr(o.k)}, {format_inline(o.body)}, {format_inline(o.outer)})"
    if isinstance(o, A.Using):
        return f"using({o.name}, {format_inline(o.order)})"
    if isinstance(o, A.Literal):
        if isinstance(o.tree, int):
            raise ValueError("a literal tree of one leaf cannot be written; use seq for one operand")
        return format_tree(o.tree)
    if isinstance(o, A.Ref):
        return o.name
    if isinstance(o, A.Guard):
        arms = [f"{'if' if i == 0 else 'elif'} {format_cond(c.cond)}: {format_inline(c.order)}"
                for i, c in enumerate(o.cases)]
        return " ".join(arms) + f" else: {format_inline(o.otherwise)}"
    raise TypeError(f"not an order: {o!r}")


# ---------------------------------------------------------------- header and blocks

def format_value(v, indent: str) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, A.Ident):
        return v.name
    if isinstance(v, A.Float):
        return v.text
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)
    if isinstance(v, A.Apply):
        return f"{v.name}(" + ", ".join(f"{e.key} = {format_value(e.value, indent)}" for e in v.entries) + ")"
    raise TypeError(f"not a block value: {v!r}")


def format_block(b: A.Block, indent: str = "") -> str:
    lines = [f"{indent}{b.name} {{"]
    for e in b.entries:
        if isinstance(e.value, A.Block):
            lines.append(format_block(e.value, indent + INDENT))
        else:
            lines.append(f"{indent}{INDENT}{e.key} = {format_value(e.value, indent)}")
    lines.append(f"{indent}}}")
    return "\n".join(lines)


def format_range(r: A.Range) -> str:
    if r.hi == r.lo:
        return f"n in {r.lo}"
    return f"n in {r.lo}..{'' if r.hi is None else r.hi}"


def format_header(h: A.Header) -> str:
    lines = []
    if h.target is not None:
        lines.append(f"target {json.dumps(h.target, ensure_ascii=False)}")
    if h.op is not None:
        lines.append(f"op {h.op}")
    if h.n is not None:
        lines.append(format_range(h.n))
    parts = ["\n".join(lines)] if lines else []
    parts += [format_block(b) for b in h.sections]
    parts += [format_named_arithmetic(a) for a in h.arithmetics]
    return "\n\n".join(parts)


def format_named_arithmetic(a: A.NamedArithmetic) -> str:
    """`arithmetic NAME { ... }`: a block whose first line carries the name."""
    return format_block(A.Block(f"arithmetic {a.name}", a.entries))


def format_spec(s: A.Spec) -> str:
    parts = []
    header = format_header(s.header)
    if header:
        parts.append(header)
    for d in s.lets:
        parts.append(f"let {d.name} ={format_order(d.order)}")
    parts.append(f"order{format_order(s.order)}")
    return "\n\n".join(parts) + "\n"


def format_node(x) -> str:
    """Canonical text of any AST node (what str() gives)."""
    if isinstance(x, A.Spec):
        return format_spec(x)
    if isinstance(x, A.Header):
        return format_header(x)
    if isinstance(x, A.Block):
        return format_block(x)
    if isinstance(x, A.NamedArithmetic):
        return format_named_arithmetic(x)
    if isinstance(x, A.Entry):
        if isinstance(x.value, A.Block):
            return format_block(x.value)
        return f"{x.key} = {format_value(x.value, '')}"
    if isinstance(x, (A.Ident, A.Float, A.Apply)):
        return format_value(x, "")
    if isinstance(x, A.Range):
        return format_range(x)
    if isinstance(x, A.Let):
        return f"let {x.name} ={format_order(x.order)}"
    if isinstance(x, A.Case):
        return f"if {format_cond(x.cond)}: {format_inline(x.order)}"
    if isinstance(x, (A.Compare, A.BoolOp)):
        return format_cond(x)
    if isinstance(x, (A.Num, A.Var, A.BinOp, A.Call, A.IfExpr)):
        return format_expr(x)
    return format_inline(x)
