"""gemv/gemm whose outputs sum in different orders that the engine's fingerprint cannot tell
apart (fpspec.reveal.engine, notes [vanished values] and [blind fingerprint]): the tree
revealed at an output is that output's order, and `shared` marks exactly the outputs that
compute in it.

Two causes: fp16 fingerprint values small enough for the masks to swamp rounded to zero
(every output then gave the same bits), and orders that agree on the leaves outside the
lcas of leaves (0, 1) and (n - 2, n - 1) (the fused [0 1 2] and ((0 2) 1) both swamp every
value at n = 3).  Queries answered by outputs of another order built a mixed tree."""
from __future__ import annotations

import numpy as np
import pytest

from fpspec.compile import compile_spec, load_replica
from fpspec.formats import get_format, round_to
from fpspec.reveal.engine import PROOF_PAIRS, _order_sensitive, _proof_pairs, reveal
from fpspec.reveal.oracle import LcaOracle
from fpspec.reveal.positions import moved, reveal_positions
from fpspec.reveal.synthetic import TreeProgram, gemm_target
from fpspec.reveal.targets import from_callable
from fpspec.spec import parse
from fpspec.tree import Node, format_tree, observable, parse_tree, random_tree, sequential

SEQ_REV = """
op gemm
n in 3
provenance { shape { m = 3 ncols = 4 } }
arithmetic { input = fp16 product = rounded accumulator = fp32 init = none output = fp32 }
order
    if i < 1: seq
    else: rev
"""

FUSED_GPU_TREE = """
op gemm
n in 3
provenance { shape { m = 4 ncols = 4 } }
arithmetic {
    input = bf16 product = fma accumulator = fp32 init = none output = fp32
    fused { w = 16 extra_bits = 2 aligned = truncate result = rz c_aligned = true exponent_floor = -133 }
}
order
    if i < 3: fused
    else: gpu_tree
"""

CHAIN_SEQ = """
op gemm
n in 7
provenance { shape { m = 2 ncols = 2 } }
arithmetic {
    input = fp16 product = rounded accumulator = fp32 init = none output = fp16
    fused { w = 16 extra_bits = 3 aligned = truncate result = rz c_aligned = true exponent_floor = none }
}
order
    if i % 2 == 0: chain(2)
    else: seq
"""

GEMV_GPU_TREE_SEQ = """
op gemv
n in 3
provenance { shape { m = 3 } }
arithmetic {
    input = fp16 product = fma accumulator = fp32 init = none output = fp32
    fused { w = 16 extra_bits = 2 aligned = truncate result = rz c_aligned = true exponent_floor = -133 }
}
order
    if i < 1: gpu_tree
    else: seq
"""

CHAIN = "([[(0 1) 2 3] 4 5] 6)"
SEQ7 = "((((((0 1) 2) 3) 4) 5) 6)"

# (spec, op, n, input format, m, ncols, {row: the tree of every output of that row})
REPLICAS = {
    "seq-rev": (SEQ_REV, "gemm", 3, "fp16", 3, 4, {0: "((0 1) 2)", 1: "(0 (1 2))", 2: "(0 (1 2))"}),
    "fused-gpu_tree": (FUSED_GPU_TREE, "gemm", 3, "bf16", 4, 4,
                       {0: "[0 1 2]", 1: "[0 1 2]", 2: "[0 1 2]", 3: "((0 2) 1)"}),
    "chain-seq": (CHAIN_SEQ, "gemm", 7, "fp16", 2, 2, {0: CHAIN, 1: SEQ7}),
    "gemv": (GEMV_GPU_TREE_SEQ, "gemv", 3, "fp16", 3, 1, {0: "((0 2) 1)", 1: "((0 1) 2)", 2: "((0 1) 2)"}),
}


def _replica_target(case: str):
    text, op, n, fmt, m, ncols, _ = REPLICAS[case]
    module = load_replica(compile_spec(parse(text), "numpy"), case)
    return from_callable(getattr(module, op), op=op, n=n, dtype=fmt, m=m, ncols=ncols, name="replica")


@pytest.mark.parametrize("case", sorted(REPLICAS))
def test_every_output_of_a_replica_reveals_its_own_order(case):
    target = _replica_target(case)
    rows = REPLICAS[case][6]
    for r in range(target.m):
        for c in range(target.ncols):
            rv = reveal(moved(target, r, c))
            assert (r, c, format_tree(observable(rv.tree))) == (r, c, rows[r])
            # the outputs marked as sharing it, seen from the moved target: rows of that order
            want = np.array([[rows[row] == rows[r]] * target.ncols for row in range(target.m)])
            want[[0, r]] = want[[r, 0]]
            assert rv.shared.reshape(target.m, -1).tolist() == want.tolist()


def test_positions_of_a_replica_are_its_rows():
    orders = reveal_positions(_replica_target("fused-gpu_tree"))
    assert [(p.at, format_tree(observable(p.revelation.tree))) for p in orders] == [
        ((0, 0), "[0 1 2]"), ((3, 0), "((0 2) 1)")]
    assert orders[1].mask.tolist() == [[False] * 4] * 3 + [[True] * 4]


def _gemv_target(row_trees, fmt):
    progs = [TreeProgram(t, fmt) for t in row_trees]

    def gemv(A, x):
        terms = np.asarray(A, np.float64) * np.asarray(x, np.float64)[None, :]
        return np.array([p(terms[r]) for r, p in enumerate(progs)], np.float64).astype(np.float16)
    return from_callable(gemv, op="gemv", n=progs[0].n, dtype=fmt, m=len(progs), name="synthetic.gemv")


FUSED3 = Node((0, 1, 2), fused=True)


@pytest.mark.parametrize("row_trees, fmt, ncols", [
    # fp32 sums, a fused row beside binary ones: the masked fingerprint sees 0 at every output
    ([FUSED3, FUSED3, FUSED3, parse_tree("((0 2) 1)")], "fp32", 3),
    # fp16 sums: the fingerprint's values round to zero unless kept at the smallest subnormal
    ([sequential(range(3)), sequential([2, 1, 0]), sequential([2, 1, 0])], "fp16", 4),
    # fp16 rows that agree outside lca(0, 1) and lca(4, 5), whose other values sum exactly in
    # any order: the fingerprint cannot tell them apart, the proof of the tree can
    ([parse_tree("((0 1) ((2 3) (4 5)))"), parse_tree("((0 1) (2 (3 (4 5))))")], "fp16", 2),
    # ... and a pair whose answers once mixed into the other row's tree (and a fused one)
    ([parse_tree("(((0 (1 5)) 4) (2 3))"), parse_tree("((((0 5) 1) 4) (2 3))")] * 2, "fp16", 3),
])
def test_synthetic_gemm_rows_reveal_their_own_trees(row_trees, fmt, ncols):
    target = gemm_target(row_trees, fmt, ncols=ncols)
    for r, tree in enumerate(row_trees):
        rv = reveal(moved(target, r, ncols - 1))
        assert format_tree(observable(rv.tree)) == format_tree(observable(tree))


def test_synthetic_gemv_rows_reveal_their_own_trees():
    trees = [parse_tree("((0 2) 1)"), sequential(range(3)), FUSED3]
    target = _gemv_target(trees, "fp16")
    got = [format_tree(observable(reveal(moved(target, r)).tree)) for r in range(3)]
    assert got == ["((0 2) 1)", "((0 1) 2)", "[0 1 2]"]


def test_proof_pairs_pin_every_node():
    def proof(text, limit=PROOF_PAIRS):
        rows, complete = _proof_pairs(parse_tree(text), limit)
        return rows.tolist(), complete
    assert proof("((0 1) 2)") == ([[0, 1, 2], [0, 2, 3]], True)
    # a fused node: every pair of its children, else ((0 1) 2) would pass as [0 1 2]
    assert proof("[(0 1) 2 3]") == ([[0, 1, 2], [0, 2, 4], [0, 3, 4], [2, 3, 4]], True)
    # clusters first; of a wide fused node's other pairs, neighbours while the limit allows
    assert proof("[0 1 2 3 4 5]", 7) == ([[0, k, 6] for k in range(1, 6)] + [[1, 2, 6], [2, 3, 6]], False)
    assert _proof_pairs(sequential(range(PROOF_PAIRS + 2)), PROOF_PAIRS) is None


def test_random_row_trees_reveal_their_own_trees():
    # fp16 rows of two random trees over a few leaves: their answers, mixed, give a wrong
    # tree that still looks like a tree unless every output is checked
    rng = np.random.default_rng(7)
    for _ in range(12):
        n = int(rng.integers(5, 10))
        a, b = random_tree(n, rng), random_tree(n, rng)
        target = gemm_target([a, b, b], "fp16", ncols=2)
        got = [format_tree(observable(reveal(moved(target, r, 1)).tree)) for r in (0, 1)]
        assert got == [format_tree(observable(a)), format_tree(observable(b))]


@pytest.mark.parametrize("fmt, n", [("fp16", 3), ("fp16", 40), ("fp8e5m2", 4), ("bf16", 3)])
def test_fingerprint_values_never_vanish(fmt, n):
    # fp16 at n = 3: values scaled below the masks' units rounded to zero, and every
    # output gave zero, whatever its order
    target = gemm_target([sequential(range(n))] * 2, fmt, ncols=2)
    oracle = LcaOracle(target)
    x = _order_sensitive(target, oracle, np.random.default_rng(3))
    assert x[:2].tolist() == [oracle.plan.a_mask, -oracle.plan.a_mask]
    assert np.all(x[2:] != 0) and np.array_equal(round_to(get_format(fmt), x), x)
    assert np.abs(x[2:]).sum() < oracle.plan.window * oracle.plan.u       # the masks swamp them
