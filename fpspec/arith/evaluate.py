"""The reference value of a whole accumulation: a tree under an arithmetic.

`evaluate(tree, x, y, arithmetic)` is the executable definition every replica
is checked against.  Terms: for a sum (product = none) term k is x[k]; for
dot / gemv / gemm it is the product x[k] * y[k], formed as the arithmetic
says.  x has shape (n,) or (n, m): m independent accumulations, vectorized.

Note [which child is fused]: with product = fma, a binary node whose child is
a leaf computes fma(x_k, y_k, v), v the value of the other child.  When both
children are leaves i < j, the later one is fused: fma(x_j, y_j, round(x_i *
y_i)); this is `acc = x[i]*y[i]; acc = fma(x[j], y[j], acc)`, the loop every
BLAS kernel runs per lane.  A node of two subtrees is a plain addition.

Note [exact products]: with product = exact, a leaf is the exact product and
a binary node rounds the exact sum of its children once (for a leaf and a
subtree this is the FMA; for two leaves it is round(x_i*y_i + x_j*y_j)).
Products are exact in float64 for inputs of at most 26 bits (fp32 and
narrower); an fp64 input with product = exact is refused.

Note [fused nodes]: a fused node's leaf children are its products (always
exact, decoded as the input format); a non-leaf child is its c, a value in the
accumulator format.  At most one non-leaf child: that is what the hardware
adds.  For a sum, the leaf x[k] enters as the product x[k] * 1.
A fused node of w + 1 products and no c is a chain whose first node held one
product (fpspec.tree.chain_groups; a node of one child is no node in a tree):
that product goes through a fused node alone, and the result is the c of the
other w.

Note [init and output]: init = +0.0 adds +0.0 to the result in the accumulator
(fpspec.arith.model note [init +0.0]); then the result is cast to the output
format, nearest even.

Note [regions]: a spec may give parts of the tree their own arithmetic
(`using(NAME, order)`, fpspec.spec.regions).  A node is computed in its own
arithmetic: its accumulator, and the product handling of its leaf children
(a leaf is formed by the node that takes it).  A child's value from another
region enters exactly: widening is exact, and a node narrower than a child
rounds the exact sum once (round to odd, then to the node's format).  init
and the output cast belong to the whole accumulation (the main arithmetic).

Note [bias]: with `bias = after` the bias (one value per accumulation, the
same shape as the result) is added to the result in the accumulator, rounded
once, before the output cast; with `bias = inside` the tree has n + 1 leaves
and leaf 0 is the bias, a term bias * 1 (fpspec.arith.model note [bias]).
"""
from __future__ import annotations

import numpy as np

from fpspec.arith.fused import fused_node
from fpspec.arith.model import FMA_PRODUCTS, Arithmetic
from fpspec.errors import FpspecError
from fpspec.formats import add, fma, get_format, round_to, round_to_odd_sum
from fpspec.tree import postorder


def evaluate(tree, x, y=None, arithmetic: Arithmetic | None = None, regions: dict | None = None,
             bias=None) -> np.ndarray:
    """Result of the accumulation `tree` over terms from x (and y), under `arithmetic`.

    x: (n,) or (n, m); y: None for a sum, else (n,) or (n, m).  Returns
    float64 values of the output format, shape () or (m,).  `regions` maps
    the key (smallest leaf, number of leaves) of a node to its own
    Arithmetic (note [regions]); every other node uses `arithmetic`.
    `bias`: () or (m,) values where the arithmetic takes one (note [bias]).
    """
    ar = arithmetic or Arithmetic()
    if ar.bias != "none":
        if bias is None:
            raise FpspecError(f"the arithmetic adds a bias (bias = {ar.bias}): evaluate needs its values")
        b = np.asarray(bias, np.float64)
        if ar.bias == "inside":   # the bias is operand 0 of n + 1: a term b * 1
            X = np.asarray(x, np.float64)
            row = np.broadcast_to(b, X.shape[1:])[None]
            x = np.concatenate([row, X])
            if y is not None:
                Y = np.broadcast_to(np.asarray(y, np.float64).reshape(X.shape[:1] + (-1,) * (X.ndim - 1)), X.shape)
                y = np.concatenate([np.ones_like(row), Y])
            return evaluate(tree, x, y, _without_bias(ar), regions)
        acc_result = evaluate(tree, x, y, _without_bias(ar, output=ar.accumulator), regions)
        return round_to(get_format(ar.output), add(get_format(ar.accumulator), acc_result, b))
    if ar.binned is not None:     # order-independent: the tree does not matter (fpspec.arith.binned)
        from fpspec.arith.binned import evaluate_binned

        return evaluate_binned(x, y, ar.input, ar.binned)
    X = np.asarray(x, np.float64)
    if ar.product == "none":
        Y = np.ones_like(X)
    else:
        if y is None:
            raise FpspecError(f"product = {ar.product} needs y (a dot, gemv or gemm)")
        Y = np.asarray(y, np.float64)
        if Y.ndim == 1 and X.ndim == 2:
            Y = Y[:, None]                # one y for every accumulation
        Y = np.broadcast_to(Y, X.shape)
    for a in (ar, *(regions or {}).values()):
        if a.product != "none" and get_format(a.input).precision > 26 and a.product == "exact":
            raise FpspecError("product = exact is not defined for fp64 inputs (products do not fit float64)")

    def node_arith(s):
        return ar if not regions else regions.get((s.first, s.size), ar)

    results: list = []
    widths: list = []         # precision each result is held in (note [regions]: a wider child)
    for s in postorder(tree):
        if isinstance(s, int):
            rounded = regions.get((s, 0)) if regions else None
            if rounded is not None:   # fpspec.spec.expand note [lone products]: added to a zero lane
                value = _leaf_value(s, rounded, X, Y)
                if rounded.product == "none":    # x + (-0.0) rounds x (an input wider than the lane)
                    value = round_to(get_format(rounded.accumulator), value)
                results.append(value)
                widths.append(get_format(rounded.accumulator).precision)
                continue
            results.append(s)         # leaves stay symbolic until their parent decides
            widths.append(0)
            continue
        k = len(s.children)
        kids = results[-k:]
        wide = max(widths[-k:])
        del results[-k:], widths[-k:]
        a = node_arith(s)
        acc = get_format(a.accumulator)
        if s.fused:
            d = _fused(kids, X, Y, a)
            # fpspec.arith.model note [fused output]: a wider node result is stored into the accumulator
            results.append(round_to(acc, d) if a.fused.output != a.accumulator else d)
        elif wide > acc.precision and not (a.product in FMA_PRODUCTS + ("exact",) and any(map(_is_leaf, kids))):
            results.append(_narrowing(kids[0], kids[1], a, acc, X, Y))
        else:
            results.append(_binary(kids[0], kids[1], a, acc, X, Y))
        widths.append(acc.precision)
    out = results[0]
    acc = get_format(ar.accumulator)
    if isinstance(out, (int, np.integer)) and not isinstance(out, np.ndarray):
        out = _leaf_value(out, ar, X, Y)
    if ar.init == "+0.0":
        out = add(acc, out, 0.0)
    return round_to(get_format(ar.output), out)


def _without_bias(ar: Arithmetic, **changes) -> Arithmetic:
    from dataclasses import replace

    return replace(ar, bias="none", **changes)


def _product(k, X, Y):
    """The exact product of term k (note [exact products])."""
    return X[k] * Y[k]


def _leaf_value(k, ar, X, Y):
    """A leaf used as an ordinary addend: rounded to the accumulator."""
    if ar.product == "none":
        # a sum's term enters exactly, wider than the accumulator or not: the node that takes
        # it rounds the exact sum once (note [regions]; fpspec.compile.numerics note [exact leaves])
        return X[k]
    acc = get_format(ar.accumulator)
    if acc.precision == 53 and get_format(ar.input).precision == 53:
        return X[k] * Y[k]      # native fp64 product, rounded once
    if ar.product == "rounded" and ar.product_format is not None:
        return round_to(acc, round_to(get_format(ar.product_format), _product(k, X, Y)))
    return round_to(acc, _product(k, X, Y))


def _narrowing(a, b, ar, acc, X, Y):
    """A binary node with a child from a wider region: the exact sum, rounded once."""
    va = _leaf_value(a, ar, X, Y) if _is_leaf(a) else a
    vb = _leaf_value(b, ar, X, Y) if _is_leaf(b) else b
    return round_to(acc, round_to_odd_sum(va, vb))


def _is_leaf(v) -> bool:
    return isinstance(v, int)


def _binary(a, b, ar, acc, X, Y):
    """One binary node; a holds the smaller first leaf (canonical order)."""
    def leaf_value(k):
        return _leaf_value(k, ar, X, Y)

    def product(k):
        return _product(k, X, Y)

    if ar.product in ("none", "rounded"):
        va = leaf_value(a) if _is_leaf(a) else a
        vb = leaf_value(b) if _is_leaf(b) else b
        if acc.precision < 53 and get_format(ar.input).precision > 26:
            # fp64 leaves in a narrower node: the exact sum rounded once (a float64 sum
            # first would round twice; fpspec.formats note [double rounding])
            return round_to(acc, round_to_odd_sum(va, vb))
        return add(acc, va, vb)
    if ar.product == "fma_first" and _is_leaf(a) and _is_leaf(b):    # the first leaf fused, the second rounded
        return _fma(acc, ar, X[a], Y[a], leaf_value(b))
    if ar.product in FMA_PRODUCTS:
        if _is_leaf(b):                       # note [which child is fused]: the later leaf
            other = leaf_value(a) if _is_leaf(a) else a
            return _fma(acc, ar, X[b], Y[b], other)
        if _is_leaf(a):
            return _fma(acc, ar, X[a], Y[a], b)
        return add(acc, a, b)
    # exact: round the exact sum once (note [exact products])
    va = product(a) if _is_leaf(a) else a
    vb = product(b) if _is_leaf(b) else b
    if _is_leaf(a) and _is_leaf(b):
        return round_to(acc, round_to_odd_sum(va, vb))
    if _is_leaf(a) or _is_leaf(b):
        leaf = a if _is_leaf(a) else b
        other = b if leaf is a else a
        return _fma(acc, ar, X[leaf], Y[leaf], other)
    return add(acc, va, vb)


def _fma(acc, ar, x, y, c):
    """round_acc(x*y + c) once; fp64 accumulators of <= 26-bit inputs add the exact product natively."""
    if acc.precision == 53 and get_format(ar.input).precision <= 26:
        return np.add(x * y, c)
    return fma(acc, x, y, c)


def _fused(kids, X, Y, ar):
    if ar.fused is None:
        raise FpspecError("the tree has fused nodes but the arithmetic has no fused parameters")
    leaves = [k for k in kids if _is_leaf(k)]
    partial = [k for k in kids if not _is_leaf(k)]
    if len(partial) > 1:
        raise FpspecError(f"a fused node adds at most one partial result (c); this one has {len(partial)}")
    if len(leaves) == ar.fused.w + 1 and not partial:   # note [fused nodes]: a first group of one
        first = leaves.pop(0)
        partial = [fused_node(X[first][..., None], Y[first][..., None], np.zeros(np.shape(X[first])), ar.fused)
                   .reshape(np.shape(X[first]))]
    if len(leaves) > ar.fused.w:
        raise FpspecError(f"a fused node of {len(leaves)} products exceeds w = {ar.fused.w}")
    a = np.stack([X[k] for k in leaves], axis=-1)
    b = np.stack([Y[k] for k in leaves], axis=-1)
    c = partial[0] if partial else np.zeros(a.shape[:-1])
    return fused_node(a, b, c, ar.fused).reshape(a.shape[:-1])

