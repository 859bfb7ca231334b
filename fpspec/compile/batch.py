"""Batch-invariant replicas: one order and one arithmetic per output element,
whatever the batch size M and the element's position.

A replica reduces along K in the spec's order; nothing in that order depends
on M (the spec language has no M), so the bits of an output row do not depend
on how many rows are computed with it.  Two things can still tie an output to
the batch, and `batch_invariant` removes both:

- a spec revealed from a library that runs other kernels on some outputs
  (OpenBLAS's edge tiles, leftover rows) has an outermost `if` on the output
  row i and column j, and which rows are "leftover" depends on M.  Every output
  takes the order of the reference output (row 0, column 0) instead: the arm
  that output takes at every n (conditions that also test n keep testing n);
- Triton's native path picks its tiles from M (small batches run smaller tiles).
  Note [tiles and bits]: the tiles only decide which outputs a program computes,
  never the order along K; every tile set keeps BM a multiple of 64, so on
  Hopper every tile shape is issued as the same warpgroup MMA (wgmma, k = 16
  per instruction, chained along K) and the fused node is the same at every M.

`fpspec audit` run on such a replica is the check (tests/audit).
"""
from __future__ import annotations

from dataclasses import replace

from fpspec.compile.ir import CompileError
from fpspec.spec import ast as A
from fpspec.spec.positions import position_guard, uses_position

REFERENCE = (0, 0)

# native-path tiles by batch size, ((max M, tiles), ...) ascending; larger batches take the
# replica's own tiles.  Up to 64 rows: one 64-row MMA tile, narrow columns so that a single
# row still spreads its B over every SM (128 programs at N = 4096), and an 8-deep pipeline:
# a small batch streams B from memory, and 7 blocks of 128 x 32 in flight a program keep
# about 7 MB of loads in flight over the GPU (4 stages: 1.31-1.38x cuBLAS at M = 1..64, 8
# stages 0.98-1.17x; `bench_batch.py --sweep`, H200: benchmarks/results/
# bench_batch_h200_2026-11-27.txt); up to 1024: square 128-tiles, twice the programs of the
# large tiles (benchmarks/results/batch_h200_2026-11-27.txt)
BATCH_TILES = ((64, dict(BM=64, BN=32, BK=128, GROUP=8, num_warps=4, num_stages=8)),
               (1024, dict(BM=128, BN=128, BK=64, GROUP=8, num_warps=8, num_stages=4)))


def batch_invariant(spec: A.Spec, at: tuple[int, int] = REFERENCE) -> tuple[A.Spec, str]:
    """`spec` with every output element in the order output `at` uses, and one line
    saying what changed (for the replica's header)."""
    from fpspec.spec.shapes import covering_any

    guard = position_guard(spec)
    if guard is None:
        # one order whatever the shape: the replica takes every output shape
        return covering_any(spec), "batch-invariant: one order for every output (the spec has no `if` on i, j)"
    cases = [A.Case(_at(c.cond, at), c.order) for c in guard.cases]
    if not any(_mentions_n(c.cond) for c in cases):
        from fpspec.spec.expand import eval_cond

        # conditions on i, j only: the reference's arm, the same at every n
        order = next((c.order for c in cases if eval_cond(c.cond, 1, (0, 0))), guard.otherwise)
    else:
        order = A.Guard(tuple(cases), guard.otherwise)
    return (covering_any(replace(spec, order=order)),
            f"batch-invariant: every output in the order of output (i, j) = {at} (the spec's `if` on i, j dropped)")


def _at(c, at):
    """Condition or expression c with i and j replaced by the reference position."""
    if isinstance(c, A.Var) and c.name in ("i", "j"):
        return A.Num(at[0] if c.name == "i" else at[1])
    if isinstance(c, (A.Compare, A.BoolOp, A.BinOp)):
        return replace(c, left=_at(c.left, at), right=_at(c.right, at))
    if isinstance(c, A.Call):
        return replace(c, args=tuple(_at(x, at) for x in c.args))
    if isinstance(c, A.IfExpr):
        return replace(c, cond=_at(c.cond, at), then=_at(c.then, at), otherwise=_at(c.otherwise, at))
    if uses_position(c):
        raise CompileError(f"--batch-invariant: cannot place the reference output in {c}")
    return c


def _mentions_n(c) -> bool:
    if isinstance(c, A.Var):
        return c.name == "n"
    if isinstance(c, (A.Compare, A.BoolOp, A.BinOp)):
        return _mentions_n(c.left) or _mentions_n(c.right)
    if isinstance(c, A.Call):
        return any(_mentions_n(x) for x in c.args)
    if isinstance(c, A.IfExpr):
        return _mentions_n(c.cond) or _mentions_n(c.then) or _mentions_n(c.otherwise)
    return False


def mark(source: str, target: str, note: str) -> str:
    """The replica's source with the note in its header (and, for triton, the
    tiles by batch size of Note [tiles and bits])."""
    first, _, rest = source.partition("\n")
    source = f"{first}\n# {note}\n{rest}"       # after the @generated line
    if target == "triton":
        source += ("\n\n# batch-invariant tiles by batch size (the order along K is the same)\n"
                   f"REPLICA.batch_tiles = {BATCH_TILES!r}\n")
    return source
