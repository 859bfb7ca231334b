"""Spec AST (fpspec.spec.ast) -> kernel IR (fpspec.compile.ir).

The combinators map one to one onto reducers; the only renaming is the
variable: inside a spec `n` is the length of the list an order is applied
to, which the IR calls `m`.  With `n=N` the kernel is specialized: guards at
the root (and named orders the root reduces to) are decided for N now.
"""
from __future__ import annotations

from dataclasses import replace

from fpspec.arith.model import Arithmetic
from fpspec.compile import ir
from fpspec.compile.ir import CompileError, Kernel
from fpspec.compile.trees import table_of
from fpspec.spec import ast as A
from fpspec.spec.positions import position_guard
from fpspec.spec.regions import using_names
from fpspec.spec.shapes import covered_shapes, provenance_shape

M = ir.Var("m")


def build_expr(e, positions: bool = False) -> ir.IntExpr:
    """`positions`: the output row i and column j may appear (the outermost `if` only)."""
    if isinstance(e, A.Num):
        return ir.Const(e.value)
    if isinstance(e, A.Var):
        if e.name == "n":
            return M
        if not positions:
            where = f"{e.loc.line}:{e.loc.column}: " if e.loc is not None else ""
            raise CompileError(f"{where}the output position {e.name} is used inside an order; the compiler "
                               "takes i and j only in the conditions of the root order's outermost `if`")
        return ir.Var(e.name)
    if isinstance(e, A.BinOp):
        return ir.BinOp(e.op, build_expr(e.left, positions), build_expr(e.right, positions))
    if isinstance(e, A.IfExpr):
        return ir.IfInt(build_cond(e.cond, positions), build_expr(e.then, positions),
                        build_expr(e.otherwise, positions))
    if isinstance(e, A.Call):
        args = [build_expr(x, positions) for x in e.args]
        out = args[0]
        for x in args[1:]:
            out = ir.BinOp(e.func, out, x)
        return out
    raise CompileError(f"not an integer expression: {e}")


def build_cond(c, positions: bool = False) -> ir.Cond:
    if isinstance(c, A.Compare):
        return ir.Compare(c.op, build_expr(c.left, positions), build_expr(c.right, positions))
    if isinstance(c, A.BoolOp):
        return ir.BoolOp(c.op, build_cond(c.left, positions), build_cond(c.right, positions))
    raise CompileError(f"not a condition: {c}")


def _minus_mod(k: ir.IntExpr) -> ir.IntExpr:
    """m - m % k: the operands a `tail(k, ...)` body gets."""
    return ir.BinOp("-", M, ir.BinOp("%", M, k))


def build_order(o) -> ir.Reducer:
    """One order as a reducer (named orders become `Call`s)."""
    if isinstance(o, A.Seq):
        return ir.Fold()
    if isinstance(o, A.Rev):
        return ir.Fold(reverse=True)
    if isinstance(o, A.Pairwise):
        return ir.Pairwise(None if o.split is None else build_expr(o.split))
    if isinstance(o, A.GpuTree):
        return ir.TreeReduce()
    if isinstance(o, A.Fused):
        return ir.FusedChain(M)
    if isinstance(o, A.Chain):
        return ir.FusedChain(build_expr(o.w), None if o.at is None else build_expr(o.at))
    if isinstance(o, A.Lanes):
        return ir.Lanes(build_expr(o.k), build_order(o.inner), build_order(o.outer),
                        None if o.left is None else build_order(o.left),
                        None if o.unroll is None else build_expr(o.unroll))
    if isinstance(o, A.VLanes):
        return ir.VLanes(build_expr(o.v), build_expr(o.k), build_order(o.inner), build_order(o.outer))
    if isinstance(o, A.Blocks):
        return ir.Blocks(build_expr(o.b), build_order(o.inner), build_order(o.outer))
    if isinstance(o, A.Chunks):
        return ir.Chunks(build_expr(o.size), build_order(o.inner), build_order(o.outer))
    if isinstance(o, A.Pad):
        return ir.Pad(build_expr(o.m), build_order(o.order))
    if isinstance(o, A.Split):
        at = build_expr(o.at)
        return ir.Segments((ir.Part(at, build_order(o.first)), ir.Part(ir.BinOp("-", M, at), build_order(o.rest))),
                           ir.Fold())
    if isinstance(o, A.Tail) and isinstance(o.outer, A.Split) and o.outer.at == A.Num(1):
        # (body, REST(leftovers)): the leftovers reach REST as leaves, so FMA-ing arithmetics
        # keep their products unrounded (a C loop's scalar tail); below k the split takes all
        k = build_expr(o.k)
        whole = ir.Segments((ir.Part(_minus_mod(k), build_order(o.body)),
                             ir.Part(ir.BinOp("%", M, k), build_order(o.outer.rest))), ir.Fold())
        return ir.Guard((ir.Case(ir.Compare("<", M, k), build_order(o.outer)),), whole)
    if isinstance(o, A.Tail):
        k = build_expr(o.k)
        return ir.Segments((ir.Part(_minus_mod(k), build_order(o.body)), ir.Part(ir.BinOp("%", M, k), None)),
                           build_order(o.outer))
    if isinstance(o, A.Literal):
        return table_of(o.tree)
    if isinstance(o, A.Ref):
        return ir.Call(o.name)
    if isinstance(o, A.Using):
        return ir.WithArithmetic(o.name, build_order(o.order))
    if isinstance(o, A.Guard):
        return ir.Guard(tuple(ir.Case(build_cond(c.cond), build_order(c.order)) for c in o.cases),
                        build_order(o.otherwise))
    raise CompileError(f"the compiler cannot express the order {type(o).__name__}")


def arithmetic_of(spec: A.Spec) -> Arithmetic:
    from fpspec.spec.regions import main_arithmetic

    return main_arithmetic(spec)


def named_arithmetics_of(spec: A.Spec) -> tuple:
    """(name, Arithmetic) of every `arithmetic NAME { ... }` section (fpspec.spec.regions)."""
    from fpspec.spec.regions import arithmetics

    return tuple((k, a) for k, a in arithmetics(spec).items() if k is not None) if spec.header.arithmetics else ()


def _hoistable(main: Arithmetic, region: Arithmetic) -> bool:
    """Whether a part around every node may be the kernel's own arithmetic: init = +0.0 and a
    bias after the tree are added in the main accumulator (fpspec.arith.evaluate note [init
    and output]), which a part of another accumulator would replace."""
    return region.accumulator == main.accumulator or (main.init == "none" and main.bias != "after")


def build_kernel(spec: A.Spec, n: int | None = None, name: str | None = None,
                 source: str | None = None) -> Kernel | ir.Positional:
    """The kernel of a parsed spec; `n` specializes it to one length.  A spec whose
    root is an `if` on the output position gives a `Positional` of one kernel per arm."""
    o = position_guard(spec)
    if o is not None:
        text = source if source is not None else str(spec)
        # each arm runs on the rows and columns of its outputs: the dispatcher checks the shape
        arms = [replace(build_kernel(A.Spec(spec.header, spec.lets, c.order), n, name, text), rows=None, cols=None)
                for c in o.cases]
        rest = replace(build_kernel(A.Spec(spec.header, spec.lets, o.otherwise), n, name, text), rows=None, cols=None)
        if any(isinstance(k, ir.Positional) for k in arms + [rest]):
            raise CompileError("an `if` on the output position i, j inside another one; the compiler takes "
                               "one, as the root order's outermost `if`")
        m, ncols = provenance_shape(spec)
        if m is None or (rest.op == "gemm" and ncols is None):
            raise CompileError("the order depends on the output position i, j, but the spec does not say the "
                               "output shape its conditions were written for (provenance { shape { m = ROWS "
                               "ncols = COLUMNS } }, as fpspec reveal writes it)")
        return ir.Positional(rest.op, tuple((build_cond(c.cond, True), k) for c, k in zip(o.cases, arms)),
                             rest, text, rest.name, tuple(str(c.cond) for c in o.cases),
                             (m, ncols if rest.op == "gemm" else 1))
    h = spec.header
    op = h.op or "sum"
    if op not in ir.OPS:
        raise CompileError(f"op {op!r} cannot be compiled; expected one of {', '.join(ir.OPS)}")
    lo, hi = (h.n.lo, h.n.hi) if h.n is not None else (1, None)
    arithmetic, named = arithmetic_of(spec), named_arithmetics_of(spec)
    top = spec.order
    # at n = 1 the root part makes no node, and the main arithmetic forms the lone leaf
    # (docs/fps.md, `using`): a range holding n = 1 keeps the part as a region
    while isinstance(top, A.Using) and lo > 1 and _hoistable(arithmetic, dict(named)[top.name]):
        # every node in one region: that is the kernel's own arithmetic (an arm of an `if`
        # on the output position, e.g.), which every backend takes
        arithmetic = dict(named)[top.name]
        top = top.order
    root = build_order(top)
    orders = tuple((d.name, build_order(d.order)) for d in spec.lets)
    kernel_name = name or h.target or "spec"
    text = source if source is not None else str(spec)
    if n is not None:
        if n < lo or (hi is not None and n > hi):
            raise CompileError(f"-n {n} is outside the spec's range {lo}..{'' if hi is None else hi}")
        lo = hi = n
        root = specialize(root, dict(orders), n)
    used = using_names(top, *(d.order for d in spec.lets))
    rows, cols = covered_shapes(spec)
    return Kernel(op, arithmetic, root, lo, hi, orders, text, kernel_name,
                  arithmetics=tuple((k, a) for k, a in named if k in used), rows=rows, cols=cols)


def specialize(r: ir.Reducer, orders: dict, n: int) -> ir.Reducer:
    """Decide the guards the root list (length n) meets, following named orders."""
    seen = 0
    while isinstance(r, (ir.Guard, ir.Call)) and seen < 1000:
        seen += 1
        if isinstance(r, ir.Call):
            if r.name not in orders:
                raise CompileError(f"order {r.name!r} is not defined")
            r = orders[r.name]
            continue
        for case in r.cases:
            if ir.cond_value(case.cond, n, n):
                r = case.reducer
                break
        else:
            r = r.otherwise
            if r is None:
                raise CompileError(f"no case of the spec applies at n = {n}")
    return r
