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


# a bf16 gemm whose row 0 and row 1 differ at n = 28: revealed at output (1, 2) through a
# moved target, the engine asks again after a failed check; the channel mask it reopens
# came in Fortran order, and reopening element (0, 0) through reshape(-1) wrote to a copy
# (no query row was left: "range() arg 3 must not be zero")
BF16_ROWS = """
op gemm
n in 28..103
provenance { shape { m = 2 ncols = 3 } }
arithmetic { input = bf16 product = rounded accumulator = fp32 init = +0.0 output = bf16 }
arithmetic part0 { accumulator = fp16 product = rounded }
let r0 =
    if n <= 14: using(part0, tail(3, seq, seq))
    else: blocks(12, r0, lanes(6, seq, tail((if n > 8: 4 else: 1), pairwise, gpu_tree)))
order
    if i < 2: split(n // 2, using(part0, using(part0, pairwise)), split(max(1, n // 2 - n // 2 % 8), split(min(8, n - 1), pairwise, seq), blocks(11, seq, gpu_tree)))
    else: chunks(max(1, n // 2), lanes(4, r0, tail(6, seq, r0), tail(8, seq, gpu_tree), 4), chunks((if n > 12: 12 else: n), chunks((if n > 18: 18 else: n), gpu_tree, gpu_tree), tail(2, r0, seq)))
"""


def test_asked_again_at_a_moved_output():
    from fpspec.spec.expand import expand

    spec = parse(BF16_ROWS)
    module = load_replica(compile_spec(spec, "numpy"), "bf16 rows")
    target = from_callable(module.gemm, op="gemm", n=28, dtype="bf16", m=2, ncols=3, name="replica")
    got = reveal(moved(target, 1, 2)).tree
    assert format_tree(observable(got)) == format_tree(observable(expand(spec, 28, (1, 2))))
