"""lower: expand(lower(t)) == t for every tree, and compact where structure exists."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fpspec.spec import check, expand, lower, parse
from fpspec.tree import Node, random_tree, sequential



def _round_trip(t):
    spec = lower(t)
    assert expand(spec, t.size if isinstance(t, Node) else 1) == t
    assert parse(str(spec)) == spec
    return spec


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 40), st.integers(0, 2**32 - 1), st.sampled_from([0.0, 0.3, 0.8]))
def test_random_trees_round_trip(n, seed, fused_prob):
    _round_trip(random_tree(n, np.random.default_rng(seed), fused_prob=fused_prob))


def test_thousands_of_random_trees_round_trip():
    # seeded, without hypothesis's per-example overhead (~0.2 s here)
    rng = np.random.default_rng(7)
    for _ in range(2000):
        n = int(rng.integers(1, 30))
        _round_trip(random_tree(n, rng, fused_prob=float(rng.choice([0.0, 0.3, 0.8]))))


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 300), st.integers(1, 20), st.integers(1, 9), st.sampled_from(
    ["seq", "rev", "pairwise", "gpu_tree", "fused", "chain(3)"]), st.sampled_from(["seq", "rev", "pairwise", "gpu_tree"]))
def test_structured_trees_round_trip_compactly(n, k, b, inner, outer):
    for text in (f"lanes({k}, {inner}, {outer})", f"blocks({b}, {inner}, {outer})",
                 f"tail({k}, lanes({b}, {inner}, {outer}), seq)"):
        t = expand(parse(f"order {text}"), n)
        spec = _round_trip(t)
        assert len(str(spec.order)) <= max(len(text), 40) or len(str(spec)) < 200, (text, str(spec))


def test_structured_trees_lower_to_their_combinator():
    cases = {
        "chain(16)": 4096,
        "lanes(8, seq, gpu_tree)": 1024,
        "lanes(8, seq, seq)": 1000,
        "blocks(16, fused, seq)": 100,
        "lanes(8, seq, pairwise)": 128,
        "gpu_tree": 77,
        "rev": 50,
    }
    for text, n in cases.items():
        spec = _round_trip(expand(parse(f"order {text}"), n))
        assert str(spec) == f"n in {n}\n\norder {text}\n"


def test_h100_chain_at_4096_is_one_line():
    t = expand(parse("order chain(16)"), 4096)
    assert str(lower(t)) == "n in 4096\n\norder chain(16)\n"


def test_deep_sequential_tree():
    t = sequential(range(20000))
    assert str(lower(t).order) == "seq"


@pytest.mark.parametrize("n", [1, 7, 8, 9, 33, 129, 300, 1000, 4099])
def test_numpy_sum_lowers_small_and_exact(n, numpy_sum_spec):
    spec = _round_trip(expand(numpy_sum_spec, n))
    assert len(str(spec)) < 1024


def test_numpy_sum_at_65536_under_1kb(numpy_sum_spec):
    spec = _round_trip(expand(numpy_sum_spec, 65536))
    assert len(str(spec)) < 1024


def test_numpy_sum_lowered_from_one_n_recovers_the_recursion(numpy_sum_spec):
    NUMPY = numpy_sum_spec
    spec = lower(expand(NUMPY, 300))
    assert "split(n // 2 - n // 2 % 8" in str(spec)
    assert "tail(8, lanes(8, seq, pairwise), seq)" in str(spec)
    # stated for n = 300 only, but the recursion it found holds for every n
    from fpspec.spec import Range, Spec

    general = Spec(spec.header.__class__(n=Range(1, None)), spec.lets, spec.order)
    check(general)
    for n in list(range(1, 400)) + [1000, 4099]:
        assert expand(general, n) == expand(NUMPY, n)


def test_many_trees_one_spec(numpy_sum_spec):
    NUMPY = numpy_sum_spec
    trees = {n: expand(NUMPY, n) for n in (100, 129, 200, 300, 513)}
    spec = lower(trees)
    assert (spec.header.n.lo, spec.header.n.hi) == (100, 513)
    assert len(spec.lets) == 1 and "split(n // 2 - n // 2 % 8" in str(spec)
    for n, t in trees.items():
        assert expand(spec, n) == t


def test_many_unrelated_trees_guard_on_n():
    trees = {5: expand(parse("order rev"), 5), 6: expand(parse("order gpu_tree"), 6)}
    spec = lower(trees)
    assert str(spec.order) == "if n == 5: rev else: gpu_tree"


def test_header_is_kept(numpy_sum_spec):
    NUMPY = numpy_sum_spec
    from fpspec.spec import make_header

    h = make_header(provenance={"target": "numpy.sum", "op": "sum", "n": 8, "versions": {"numpy": "2.4.0"},
                                "device": "cpu", "date": "2026-11-26"})
    spec = lower(expand(NUMPY, 8), h)
    text = str(spec)
    assert text.startswith('target "numpy.sum"\nop sum\nn in 8\n\nprovenance {\n    versions {\n        numpy = "2.4.0"')
    assert parse(text) == spec


@pytest.mark.parametrize("n,text", [
    (127, "lanes(8, lanes(4, seq, seq, seq), seq, split(1, seq, seq))"),   # torch.sum: tails join lane 0
    (63, "lanes(8, lanes(4, seq, seq, seq), seq, split(1, seq, seq))"),
    (50, "chain(16, 1)"),                                                   # cuBLAS: the short node second
    (65, "chain(16, 0)"),
])
def test_lanes_with_leftovers_and_chains_with_the_short_node_inside_lower_to_one_line(n, text):
    spec = _round_trip(expand(parse(f"order {text}"), n))
    assert str(spec.order) == text


def test_torch_sum_tree_of_the_examples_is_the_lanes_left_spec():
    """examples/cpu/torch_sum_float32_n100.fps holds the literal tree torch.sum
    revealed at n = 100; lanes(..., left) expands to exactly that tree."""
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "examples" / "cpu" / "torch_sum_float32_n100.fps"
    revealed = expand(parse(path.read_text()), 100)
    spec = parse("order lanes(8, lanes(4, seq, seq, seq), seq, split(1, seq, seq))")
    assert expand(spec, 100) == revealed
