"""Chains of fused nodes with the short group anywhere (cuBLAS's K loops)."""
from __future__ import annotations

import pytest

from fpspec.tree import (Node, chain_groups, chain_node_end, chain_shape, format_tree, fused_chain, lca_size,
                         observable, parse_tree)


def test_groups_put_the_short_one_where_asked():
    assert chain_groups(50, 16) == [16, 16, 16, 2]
    assert chain_groups(50, 16, 1) == [16, 2, 16, 16]
    assert chain_groups(50, 16, 0) == [2, 16, 16, 16]
    assert chain_groups(50, 16, 9) == [16, 16, 16, 2]      # past the end: last
    assert chain_groups(48, 16, 0) == [16, 16, 16]         # no short group


def test_trees_are_exact():
    assert format_tree(fused_chain(range(10), 4, 1)) == "[[[0 1 2 3] 4 5] 6 7 8 9]"
    # a first group of one is no node: the next node shows w + 1 leaves
    assert format_tree(fused_chain(range(9), 4, 0)) == "[[0 1 2 3 4] 5 6 7 8]"
    assert format_tree(fused_chain(range(9), 4)) == "[[[0 1 2 3] 4 5 6 7] 8]"


@pytest.mark.parametrize("m", [1, 2, 5, 16, 17, 33, 50, 65, 100])
@pytest.mark.parametrize("w,at", [(4, None), (4, 0), (4, 1), (16, 0), (16, 2), (1, None)])
def test_node_end_is_l_of_the_tree(m, w, at):
    t = fused_chain(range(m), w, at)
    for b in range(1, m):
        for a in {0, b - 1}:
            assert lca_size(t, a, b) == chain_node_end(m, w, at, b)


@pytest.mark.parametrize("m,w,at", [(50, 16, 1), (65, 16, 0), (34, 16, 0), (200, 16, 3), (40, 16, None)])
def test_shape_reads_back_w_and_at(m, w, at):
    t = fused_chain(range(m), w, at)
    assert chain_shape(t) == (w, at)
    assert chain_shape(observable(t)) == (w, at)


def test_observable_turns_fused_pairs_into_binary_nodes():
    t = fused_chain(range(33), 16)          # the last node is [prev 32]
    seen = observable(t)
    assert format_tree(seen).startswith("([[0 1 2")
    assert seen == parse_tree(format_tree(seen))
    assert observable(seen) is seen
    assert chain_shape(Node((0, 1))) == (2, None)
