"""Orders per output position: a GEMV or GEMM whose output elements do not all
sum in one order (OpenBLAS runs other kernels on edge tiles: sgemm's leftover
columns, sgemv's m % 4 leftover rows), revealed class by class.

The engine reveals element (0, 0)'s tree and marks the outputs that share it
(`Revelation.shared`).  For the first output not covered yet, at (r, c), the
target is *moved*: row r of A swapped with row 0 and column c of B with column
0 before the call, and the output swapped back.  The library still computes
its element (r, c) in its own order, and the engine, reading the moved
target's element (0, 0), reveals that order and the outputs that share it.
Repeat until every output has an order.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np

from fpspec.errors import RevealRefused
from fpspec.reveal.engine import Revelation, reveal

MAX_ORDERS = 16     # distinct orders across the outputs of one call before we give up


@dataclass(frozen=True)
class PositionOrder:
    """One order and the output elements computed in it (bool, the output's shape)."""

    at: tuple[int, int]                 # the element it was revealed at
    revelation: Revelation
    mask: np.ndarray = field(compare=False, repr=False)


def moved(target, r: int, c: int = 0):
    """`target` with output element (r, c) read as element (0, 0) (see the module note)."""
    if (r, c) == (0, 0):
        return target
    rows = _swap(target.m, r)
    fn = target.fn
    if target.op == "gemv":
        def call(A, x):
            return fn(A[rows], x)[rows]
    else:
        cols = _swap(target.ncols, c)

        def call(A, B):
            return fn(A[rows], B[:, cols])[rows][:, cols]
    return dataclasses.replace(target, fn=call, call_rows=None)


def restricted(target, mask: np.ndarray, at: tuple[int, int]):
    """A gemv/gemm target whose every output computes in the order of output `at`:
    the rows r of A with mask[r, at column] set, read against one column of B
    placed at that column (the other columns of B zero).  Probes and sample
    checks batch their inputs over rows of A; read through this view they only
    see outputs of that order."""
    grid = np.asarray(mask, bool).reshape(target.m, -1)
    r0, c0 = at
    rows = np.flatnonzero(grid[:, c0])
    if len(rows) == target.m and (target.op == "gemv" or grid[:, :].all()):
        return target
    fn, m, n, ncols = target.fn, target.m, target.n, target.ncols

    def call(A, B):
        full_a = _zeros_like(A, (m, n))
        full_a[rows] = A
        if target.op == "gemv":
            return fn(full_a, B)[rows]
        full_b = _zeros_like(B, (n, ncols))
        full_b[:, c0:c0 + 1] = B[:, :1]
        return fn(full_a, full_b)[rows][:, c0:c0 + 1]
    return dataclasses.replace(target, fn=call, call_rows=None, m=len(rows),
                               ncols=1 if target.op == "gemm" else target.ncols)


def _zeros_like(x, shape):
    if isinstance(x, np.ndarray):
        return np.zeros(shape, x.dtype)
    import torch

    return torch.zeros(shape, dtype=x.dtype, device=x.device)


def _swap(size: int, k: int) -> list[int]:
    p = list(range(size))
    p[0], p[k] = k, 0
    return p


def reveal_positions(target, *, max_orders: int = MAX_ORDERS, first: Revelation | None = None,
                     **options) -> tuple[PositionOrder, ...]:
    """The orders of every output element of a gemv/gemm target, one `PositionOrder`
    per distinct order, the first at element (0, 0); the masks partition the output.
    `first`: element (0, 0)'s revelation when the caller has it already; `options`
    go to fpspec.reveal.engine.reveal."""
    if target.op not in ("gemv", "gemm"):
        rv = first or reveal(target, **options)
        return (PositionOrder((0, 0), rv, np.ones(target.output_shape, bool)),)
    shape = (target.m, target.ncols if target.op == "gemm" else 1)
    group = _bit_groups(target, shape)
    remaining = np.ones(shape, bool)
    found: list[PositionOrder] = []
    while remaining.any():
        if len(found) == max_orders:
            raise RevealRefused(
                f"more than {max_orders} different orders across the {target.m} x {shape[1]} outputs "
                f"({int(remaining.sum())} outputs left); reveal a smaller output shape")
        r, c = (int(v) for v in np.argwhere(remaining)[0])
        rv = first if first is not None and (r, c) == (0, 0) else reveal(moved(target, r, c), **options)
        shared = np.ones(shape, bool) if rv.shared is None else rv.shared.reshape(shape)
        rows, cols = _swap(shape[0], r), _swap(shape[1], c)
        mask = remaining & shared[rows][:, cols] & (group == group[r, c])     # the swap is its own inverse
        mask[r, c] = True
        remaining &= ~mask
        found.append(PositionOrder((r, c), rv, mask.reshape(target.output_shape)))
    return tuple(found)


ARITHMETIC_CALLS = 8    # random inputs that tell outputs of one tree but another arithmetic apart


def _bit_groups(target, shape) -> np.ndarray:
    """Outputs that may share an order: equal bits on ARITHMETIC_CALLS random inputs
    that give every output the same terms (each row of A the same x, each column
    of B the same y).  The queries' fingerprint cannot see an arithmetic
    difference (their products are exact) and misses some tree differences
    (OpenBLAS sgemv's m % 4 leftover rows: another tree at some n, products
    rounded apart from the FMA kernel's at every n); random products can."""
    from fpspec.reveal.engine import _random_exact

    rng = np.random.default_rng(7)
    bits = []
    for _ in range(ARITHMETIC_CALLS):
        x, y = _random_exact(target, (2, target.n), rng, spread=2)
        A = target.native(np.tile(x, (target.m, 1)))
        B = target.native(y if target.op == "gemv" else np.tile(y[:, None], (1, target.ncols)))
        with np.errstate(all="ignore"):
            out = np.asarray(target.to_float64(target.fn(A, B)), np.float64).reshape(shape)
        bits.append(out.view(np.uint64))
    _, group = np.unique(np.stack(bits, -1).reshape(-1, len(bits)), axis=0, return_inverse=True)
    return np.asarray(group).reshape(shape)


def labels(orders: tuple[PositionOrder, ...], shape: tuple[int, ...]) -> np.ndarray:
    """The output's elements labelled with the index of their order."""
    out = np.full(shape, -1, np.int64)
    for k, p in enumerate(orders):
        out[p.mask] = k
    return out
