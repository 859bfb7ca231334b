"""gemm replicas whose outputs follow different orders (`if i`, `if j`): the tree revealed
at an output is that output's order, also at small n where one random input summed in two
orders gives the same bits (the engine's fingerprint then marks them alike, and queries
answered by outputs of another order build a wrong tree)."""
from __future__ import annotations

import pytest

from fpspec.compile import compile_spec, load_replica
from fpspec.reveal.engine import reveal
from fpspec.reveal.positions import moved
from fpspec.reveal.targets import from_callable
from fpspec.spec import parse
from fpspec.tree import format_tree, observable

# three orders over a 4 x 4 gemm with FMA leaves: at n = 4 the masked fingerprint
# (masks at leaves 0 and 1) gives x2 + x3 for both ((0 1) (2 3)) and (((0 1) 2) 3)
PAIRWISE = """
op gemm
n in 4..30
provenance { shape { m = 4 ncols = 4 } }
arithmetic { input = fp32 product = fma accumulator = fp32 init = none output = fp32 }
arithmetic part0 { accumulator = fp32 product = rounded }
arithmetic part1 { product = rounded }
order
    if j >= 3: using(part1, using(part0, pairwise(n - 1)))
    elif i % 2 == 1: pairwise(max(1, n // 2 - n // 2 % 8))
    else: pairwise(n // 2)
"""

# one row; three outputs of (0 (1 2)), the last a fused node of all three: at n = 3 the
# masked fingerprint gives x2 for both
FUSED = """
op gemm
n in 3..72
provenance { shape { m = 1 ncols = 4 } }
arithmetic {
    input = fp32 product = fma accumulator = fp32 init = none output = fp32
    fused { w = 16 extra_bits = 3 aligned = truncate result = rz c_aligned = true exponent_floor = none }
}
order
    if i < 1 and j < 3: split(1, lanes(max(1, n // 2), pad(3, rev), split(max(1, n // 2 - n // 2 % 4), seq, pairwise)), pad(5, lanes(1, pairwise, seq)))
    else: chain(16, n % 32 // 16)
"""


def _revealed(text: str, n: int, m: int, ncols: int, at: tuple, algorithm: str) -> str:
    module = load_replica(compile_spec(parse(text), "numpy"), "orders per output")
    target = from_callable(module.gemm, op="gemm", n=n, dtype="fp32", m=m, ncols=ncols, name="replica")
    got = reveal(moved(target, *at) if at != (0, 0) else target, algorithm=algorithm)
    return format_tree(observable(got.tree))


@pytest.mark.parametrize("at, want, algorithm", [
    ((0, 0), "((0 1) (2 3))", "auto"), ((0, 0), "((0 1) (2 3))", "basic"), ((0, 0), "((0 1) (2 3))", "modified"),
    ((2, 1), "((0 1) (2 3))", "auto"), ((0, 3), "(((0 1) 2) 3)", "auto"), ((0, 3), "(((0 1) 2) 3)", "modified"),
    ((1, 0), "(0 (1 (2 3)))", "basic")])
def test_each_output_reveals_its_own_order(at, want, algorithm):
    # "basic" asks one query per call: it once found no query row (the row of A chosen to
    # carry column queries was the only one) and failed with range() arg 3 must not be zero
    assert _revealed(PAIRWISE, 4, 4, 4, at, algorithm) == want


@pytest.mark.parametrize("at, want", [((0, 0), "(0 (1 2))"), ((0, 3), "[0 1 2]")])
def test_fused_output_beside_binary_ones(at, want):
    assert _revealed(FUSED, 3, 1, 4, at, "auto") == want
