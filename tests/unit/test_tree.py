import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from fpspec.tree import (
    LcaIndex, Node, diff, evaluate, format_tree, from_json, fused, node, pairwise,
    parse_tree, random_tree, sequential, stats, to_json, TreeSyntaxError, check_leaves,
)


def test_canonical_order_and_equality():
    a = parse_tree("((2 3) (1 0))")
    assert format_tree(a) == "((0 1) (2 3))"
    assert a == parse_tree("((0 1) (2 3))")
    assert hash(a) == hash(parse_tree("((1 0) (3 2))"))
    assert a != parse_tree("(((0 1) 2) 3)")
    assert fused(0, 1, 2) != parse_tree("((0 1) 2)")


def test_fused_text_and_json_round_trip():
    t = parse_tree("[[0 1 2 3] 4 5 6 7]")
    assert t.fused and len(t.children) == 5
    assert from_json(to_json(t)) == t
    assert to_json(parse_tree("[0 (1 2)]")) == {"fused": [0, [1, 2]]}


@pytest.mark.parametrize("bad, where", [("(0 1", "never closed"), ("(0 1))", "unmatched"),
                                        ("(0)", "at least 2"), ("(0 1 2)", "exactly 2"),
                                        ("(0 x)", "unexpected 'x'"), ("(0 2)", "missing"),
                                        ("[0 1)", "closed by")])
def test_parse_errors(bad, where):
    with pytest.raises(ValueError, match=where):
        parse_tree(bad)


def test_lca_sizes_match_design_example():
    t = parse_tree("(((0 1) (2 3)) ((4 5) (6 7)))")
    idx = LcaIndex(t)
    assert idx.l(2, 4) == 8 and idx.l(0, 1) == 2 and idx.l(1, 3) == 4 and idx.l(6, 7) == 2
    s = sequential(range(6))
    assert [LcaIndex(s).l(0, j) for j in range(1, 6)] == [2, 3, 4, 5, 6]


def test_deep_trees_need_no_recursion():
    n = 20000
    s = sequential(range(n))
    assert s == sequential(range(n))
    assert parse_tree(format_tree(s)) == s
    assert from_json(to_json(s)) == s
    assert stats(s).height == n - 1
    assert diff(s, sequential(range(n))) is None


def test_diff_names_first_differing_subtree():
    a = parse_tree("(((0 1) (2 3)) ((4 5) (6 7)))")
    b = parse_tree("(((0 1) (2 3)) (((4 5) 6) 7))")
    d = diff(a, b)
    assert d.path == (1,)
    assert format_tree(d.left) == "((4 5) (6 7))"
    assert format_tree(d.right) == "(((4 5) 6) 7)"


def test_evaluate_matches_numpy_float32_sequential():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((17, 100)).astype(np.float32)
    acc = x[0].copy()
    for i in range(1, 17):
        acc = acc + x[i]
    got = evaluate(sequential(range(17)), x.astype(np.float64), "fp32")
    assert np.array_equal(got.astype(np.float32).view(np.uint32), acc.view(np.uint32))


def test_evaluate_fp16_and_bf16_round_each_add():
    x = np.array([2048.0, 1.0, 1.0])
    assert evaluate(sequential(range(3)), x, "fp16") == 2048.0      # 2049 rounds to even
    assert evaluate(parse_tree("(0 (1 2))"), x, "fp16") == 2050.0
    y = np.array([256.0, 1.0, 1.0])
    assert evaluate(sequential(range(3)), y, "bf16") == 256.0


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 60), st.integers(0, 2**32 - 1), st.sampled_from([0.0, 0.3]))
def test_text_and_json_round_trip_random_trees(n, seed, fp):
    t = random_tree(n, np.random.default_rng(seed), fused_prob=fp)
    check_leaves(t, n)
    assert parse_tree(format_tree(t)) == t
    assert from_json(to_json(t)) == t


def test_one_leaf_tree_must_be_leaf_zero():
    assert parse_tree("0") == 0
    with pytest.raises(ValueError) as info:
        parse_tree("5")
    assert str(info.value) == "tree leaves must be numbered from 0: a tree of one leaf is `0`, not `5`"
