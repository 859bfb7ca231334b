"""Black boxes with known trees and arithmetics, for planting differences.

Each builder returns a callable on NumPy arrays (what a replica or a library
function is), computed by walking a known tree: the orders and arithmetics
here are exact definitions, so a planted change is exactly one change.
"""
from __future__ import annotations

import numpy as np

from fpspec import tree as T
from fpspec.arith.fused import fused_node
from fpspec.formats import fma, get_format


def tree_sum(tree_at, fmt="fp32", init=None):
    """x -> the sum of x in the order tree_at(len(x)), one rounding per add in fmt.

    init: None (no initial value) or a float added first (+0.0 turns -0.0 into +0.0).
    """
    f = get_format(fmt)

    def fn(x):
        x = np.asarray(x, np.float64)
        v = T.evaluate(tree_at(len(x)), x, f)
        if init is not None:
            v = f.round(np.float64(init) + v)
        return np.float32(v) if f.name == "fp32" else np.float64(v)

    return fn


def _eval_products(t, x, y, f, products):
    """A sum of products x_k*y_k in tree order: 'rounded' rounds each product
    to f first; 'fma' fuses the product of a leaf into the add that consumes it."""
    if products == "rounded":
        return T.evaluate(t, f.round(x * y), f)
    results = []
    for s in T.postorder(t):
        if isinstance(s, int):
            results.append(("leaf", s))
            continue
        a, b = results[-2:]
        del results[-2:]
        if b[0] == "leaf":       # the right leaf is fused into the add
            other = f.round(x[a[1]] * y[a[1]]) if a[0] == "leaf" else a[1]
            results.append(("val", fma(f, x[b[1]], y[b[1]], other)))
        elif a[0] == "leaf":
            results.append(("val", fma(f, x[a[1]], y[a[1]], b[1])))
        else:
            results.append(("val", f.round(a[1] + b[1])))
    kind, v = results[0]
    return f.round(x[v] * y[v]) if kind == "leaf" else v


def tree_dot(tree_at, fmt="fp32", products="rounded"):
    f = get_format(fmt)

    def fn(x, y):
        x = np.asarray(x, np.float64)
        y = np.asarray(y, np.float64)
        with np.errstate(all="ignore"):
            return np.float32(_eval_products(tree_at(len(x)), x, y, f, products))

    return fn


def chain_tree(n: int, w: int):
    """The tree of a chain of w-product fused nodes, each later node taking the
    previous result as one more term: [[0 1 2 3] 4 5 6 7] ..."""
    acc = T.fused(*range(min(w, n))) if n > 1 else 0
    for start in range(w, n, w):
        acc = T.Node((acc, *range(start, min(start + w, n))), fused=True) if n - start >= 1 else acc
    return acc


def fused_dot(params):
    """dot(a, b) on fp16 inputs: a chain of fused nodes with `params`, c = +0.0."""
    def fn(x, y):
        x = np.asarray(x, np.float64)[None, :]
        y = np.asarray(y, np.float64)[None, :]
        d = np.zeros(1)
        for start in range(0, x.shape[1], params.w):
            d = fused_node(x[:, start:start + params.w], y[:, start:start + params.w], d, params)
        return np.float32(d[0])

    return fn
