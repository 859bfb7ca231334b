"""Known parametric orders as plain tree builders, written independently of
the .fps language: the ground truth the inference must recover."""
from __future__ import annotations

from fpspec.tree import Node, Tree, building, pairwise, sequential


def numpy_pairwise(n: int, lo: int = 0) -> Tree:
    """numpy's pairwise_sum (loops_utils.h.src), blocks of 8 lanes up to 128."""
    with building():
        return _np(lo, n)


def _np(lo: int, n: int) -> Tree:
    if n < 8:
        return sequential(range(lo, lo + n))
    if n <= 128:
        lanes = [sequential(range(lo + j, lo + n - n % 8, 8)) for j in range(8)]
        r = Node((Node((Node((lanes[0], lanes[1])), Node((lanes[2], lanes[3])))),
                  Node((Node((lanes[4], lanes[5])), Node((lanes[6], lanes[7]))))))
        for i in range(lo + n - n % 8, lo + n):
            r = Node((r, i))
        return r
    n2 = n // 2
    n2 -= n2 % 8
    return Node((_np(lo, n2), _np(lo + n2, n - n2)))


def lanes_with_tail(n: int, k: int = 4) -> Tree:
    """k strided lanes over the first n - n % k, each in order, lanes folded
    left to right, then the leftovers one by one (torch-like)."""
    p = n - n % k
    if p == 0:
        return sequential(range(n))
    acc = None
    with building():
        for j in range(k):
            lane = sequential(range(j, p, k))
            acc = lane if acc is None else Node((acc, lane))
        for i in range(p, n):
            acc = Node((acc, i))
    return acc


def blocked(n: int, b: int = 16) -> Tree:
    """Contiguous blocks of b, each summed pairwise, block sums in order."""
    with building():
        parts = [pairwise(range(lo, min(lo + b, n))) for lo in range(0, n, b)]
        return sequential_of(parts)


def sequential_of(parts) -> Tree:
    acc = parts[0]
    for p in parts[1:]:
        acc = Node((acc, p))
    return acc


def fused_chain(n: int, w: int = 16) -> Tree:
    """Tensor-core style: w-term fused nodes, each taking the previous result."""
    acc = Node(tuple(range(min(w, n))), fused=True) if n > 1 else 0
    for lo in range(w, n, w):
        acc = Node((acc, *range(lo, min(lo + w, n))), fused=True)
    return acc


def switching(n: int) -> Tree:
    """Sequential up to 100, pairwise above (an order that changes with n)."""
    return sequential(range(n)) if n <= 100 else pairwise(range(n))


def openblas_sgemm_k(n: int, q: int = 320, unroll: int = 8) -> Tree:
    """OpenBLAS sgemm (Haswell kernel) along K for one output element, as its
    C code reads: the level-3 driver takes K in chunks (q while 2q or more are
    left, half of what is left rounded up to `unroll` while more than q are,
    else all of it) and adds each chunk's result into C; the kernel keeps 2
    accumulators over the first s - s % unroll terms of a chunk of s (even
    terms to accumulator 0), folds the s % unroll tail into accumulator 0,
    then adds accumulator 1."""
    with building():
        acc, start, left = None, 0, n
        while left:
            s = q if left >= 2 * q else ((left // 2 + unroll - 1) // unroll) * unroll if left > q else left
            c = _sgemm_chunk(start, s, unroll)
            acc = c if acc is None else Node((acc, c))
            start, left = start + s, left - s
        return acc


def _sgemm_chunk(lo: int, s: int, unroll: int) -> Tree:
    p = s - s % unroll
    if p == 0:
        return sequential(range(lo, lo + s))
    a0, a1 = sequential(range(lo, lo + p, 2)), sequential(range(lo + 1, lo + p, 2))
    for i in range(lo + p, lo + s):
        a0 = Node((a0, i))
    return Node((a0, a1))
