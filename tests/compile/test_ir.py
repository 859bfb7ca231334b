"""The kernel IR: the trees it denotes, schedule tables, AST -> IR."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fpspec.arith.model import Arithmetic
from fpspec.compile import ir
from fpspec.compile.build import build_kernel
from fpspec.compile.ir import CompileError
from fpspec.compile.trees import table_of, tree_of
from fpspec.spec import expand, parse
from fpspec.tree import format_tree, parse_tree, random_tree

NUMPY_SUM = """target "numpy.sum"
op sum
n in 1..
let pairwise_sum =
    if n < 8: seq
    elif n <= 128: tail(8, lanes(8, seq, pairwise), seq)
    else: split(n // 2 - n // 2 % 8, pairwise_sum, pairwise_sum)
order pairwise_sum
"""

# one spec per combinator (and their mixtures); each must expand exactly as the IR says
ORDERS = [
    "seq", "rev", "pairwise", "pairwise(n // 3 + 1)", "gpu_tree", "fused", "chain(4)",
    "lanes(4, seq, pairwise)", "lanes(3, rev, gpu_tree)", "blocks(5, seq, seq)", "blocks(4, pairwise, rev)",
    "split(n // 2, seq, rev)", "tail(4, lanes(4, seq, seq), seq)", "tail(3, blocks(3, seq, pairwise), pairwise)",
    "if n < 5: seq elif n < 9: rev else: lanes(min(n // 2, 4), seq, pairwise)",
    "blocks(16, chain(4), seq)", "lanes(2, chain(3), seq)",
]


def test_numpy_sum_trees_match_the_design_document():
    k = build_kernel(parse(NUMPY_SUM))
    assert format_tree(tree_of(k, 9)) == "((((0 1) (2 3)) ((4 5) (6 7))) 8)"
    assert format_tree(tree_of(k, 8)) == "(((0 1) (2 3)) ((4 5) (6 7)))"
    assert format_tree(tree_of(k, 32)).startswith("((((((0 8) 16) 24) (((1 9) 17) 25))")


def test_numpy_sum_ir_expands_like_the_spec():
    spec = parse(NUMPY_SUM)
    k = build_kernel(spec)
    for n in list(range(1, 300)) + [1000, 1023, 4097]:
        assert tree_of(k, n) == expand(spec, n), n


@pytest.mark.parametrize("order", ORDERS)
def test_every_combinator_builds_to_ir_that_expands_like_the_spec(order):
    spec = parse(f"op sum\nn in 1..\norder {order}\n")
    k = build_kernel(spec)
    for n in range(1, 40):
        assert tree_of(k, n) == expand(spec, n), (order, n)


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 40), st.integers(0, 2**32 - 1), st.sampled_from([0.0, 0.4]))
def test_schedule_table_gives_back_the_tree(n, seed, fused_prob):
    tree = random_tree(n, np.random.default_rng(seed), fused_prob=fused_prob)
    table = table_of(tree)
    assert len(table.fused) == (0 if n == 1 else len(table.offsets) - 1)
    assert tree_of(ir.Kernel("sum", Arithmetic(), table), n) == tree


def test_literal_tree_in_a_spec_is_a_table():
    k = build_kernel(parse("op sum\nn in 5\norder ((0 1) [2 3 4])\n"))
    assert isinstance(k.root, ir.Table)
    assert tree_of(k, 5) == parse_tree("((0 1) [2 3 4])")


def test_specializing_decides_the_root_guards():
    spec = parse(NUMPY_SUM)
    assert build_kernel(spec, n=5).root == ir.Fold()
    small = build_kernel(spec, n=100)
    assert isinstance(small.root, ir.Segments) and (small.n_min, small.n_max) == (100, 100)
    assert tree_of(small, 100) == expand(spec, 100)
    big = build_kernel(spec, n=1000)
    assert tree_of(big, 1000) == expand(spec, 1000)
    with pytest.raises(CompileError, match="outside"):
        tree_of(big, 999)


def test_n_outside_the_spec_range_is_refused():
    with pytest.raises(CompileError, match="outside the spec's range 8..16"):
        build_kernel(parse("op sum\nn in 8..16\norder seq\n"), n=17)


def test_ir_rejects_malformed_nodes():
    with pytest.raises(ValueError):
        ir.BinOp("**", ir.Const(1), ir.Const(2))
    with pytest.raises(ValueError):
        ir.Var("k")
    with pytest.raises(ValueError):
        ir.Table(3, (0, 1), (0, 2), (False,))      # leaves 2 unused: no root over all
    with pytest.raises(ValueError):
        ir.Kernel("conv", Arithmetic(), ir.Fold())


def test_kernel_hash_is_of_the_spec_text():
    import hashlib

    k = build_kernel(parse(NUMPY_SUM), source=NUMPY_SUM)
    assert k.sha256 == hashlib.sha256(NUMPY_SUM.encode()).hexdigest()
