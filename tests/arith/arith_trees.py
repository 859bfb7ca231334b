"""Trees for probe tests: synthetic chains, and small real trees revealed by brute force.

`reveal_small` asks the reveal stage's oracle for l(i, j) of every pair and
merges clusters in increasing l (FPRev-basic); enough for the binary trees of
small CPU targets these tests probe, without depending on the full engine.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from fpspec.arith import evaluate
from fpspec.tree import Node, fused


def chain(n: int, w: int):
    """A Tensor Core chain: [0..w-1], then each node takes the previous result and w more products."""
    t = fused(*range(w))
    for s in range(w, n, w):
        t = Node((t, *range(s, min(s + w, n))), fused=True)
    return t


def synthetic(tree, arith, op: str, n: int, m: int = 4, ncols: int = 3):
    """A black box computing `tree` under `arith` (the model itself), as a Target."""
    from fpspec.reveal.targets import from_callable

    def as64(v):
        return np.asarray(v, np.float64)

    if op == "sum":
        fn = lambda x: evaluate(tree, as64(x), None, arith)  # noqa: E731
    elif op == "dot":
        fn = lambda x, y: evaluate(tree, as64(x), as64(y), arith)  # noqa: E731
    elif op == "gemv":
        fn = lambda A, x: evaluate(tree, as64(A).T, as64(x), arith)  # noqa: E731
    else:
        def fn(A, B):
            A, B = as64(A), as64(B)
            return np.stack([evaluate(tree, A.T, np.repeat(B[:, j:j + 1], A.shape[0], 1), arith)
                             for j in range(B.shape[1])], axis=1)
    t = from_callable(fn, op=op, n=n, dtype=arith.input, m=m if op in ("gemv", "gemm") else 1,
                      ncols=ncols if op == "gemm" else 1)
    return dataclasses.replace(t, out_fmt=arith.output)


def reveal_small(target):
    """The binary tree of a small target (all n(n-1)/2 pairs)."""
    from fpspec.reveal.oracle import LcaOracle

    n = target.n
    pairs = [(i, j) for i in range(n) for j in range(i + 1, n)]
    ls = LcaOracle(target).l_many(pairs)
    parent = list(range(n))
    sub: dict[int, object] = {i: i for i in range(n)}

    def find(i):
        while parent[i] != i:
            i = parent[i]
        return i

    for (i, j), _ in sorted(zip(pairs, ls), key=lambda p: p[1]):
        a, b = find(i), find(j)
        if a != b:
            parent[b] = a
            sub[a] = Node((sub.pop(a), sub.pop(b)))
    return sub[find(0)]
