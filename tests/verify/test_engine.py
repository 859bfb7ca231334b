"""The verification engine catches every planted difference, on synthetic black boxes.

Each test plants exactly one change (one tree node, FMA for a rounded product,
an initial value, one fused-node parameter bit, nondeterminism, a crash, a
wrong shape) and checks the channel that must see it; the unplanted control
must come out equivalent, so none of these can pass vacuously.
"""
import dataclasses
import json

import numpy as np
import pytest

from fpspec import tree as T
from fpspec.arith.params import PARAMS
from fpspec.verify import Side, compare, default_n_values, live_outputs, same_bits

from verify_synthetic import chain_tree, fused_dot, tree_dot, tree_sum

NS = (5, 8, 13)


@dataclasses.dataclass(frozen=True)
class Arith:          # the shape of an arithmetic section: fields compared one by one
    products: str = "none"
    init: str = "none"
    accumulator: str = "fp32"


def side(name, role, op, fmt, tree_at, fn, arithmetic=None, out_fmt=None):
    return Side(name, role, op, fmt, tree_at=tree_at, out_fmt=out_fmt,
                arithmetic_at=None if arithmetic is None else (lambda n, t: arithmetic),
                outputs=live_outputs(fn, op, None, None, name))


def verify(spec_side, replica_side, samples=400, ns=NS):
    return compare(spec_side, [replica_side], ns, samples=samples, seed=1,
                   sample_pairs=[(spec_side, replica_side)])


def rotate_once(t):
    """(A (B C)) -> ((A B) C) at the deepest such node: exactly one node changes."""
    target = None
    for s in T.postorder(t):
        if isinstance(s, T.Node) and not s.fused and isinstance(s.children[1], T.Node) \
                and not s.children[1].fused:
            target = s
            break
    assert target is not None
    a, (b, c) = target.children[0], target.children[1].children
    new = T.node(T.node(a, b), c)
    return _replace(t, target, new), target, new


def _replace(t, old, new):
    results = []
    for s in T.postorder(t):
        if s is old:
            # children of old were pushed already: drop them
            del results[-len(old.children):]
            results.append(new)
        elif isinstance(s, int):
            results.append(s)
        else:
            k = len(s.children)
            kids = tuple(results[-k:])
            del results[-k:]
            results.append(T.Node(kids, s.fused))
    return results[0]


def spec_sum(tree_at=T.pairwise):
    at = lambda n: tree_at(range(n))  # noqa: E731
    return side("spec", "spec", "sum", "fp32", at, tree_sum(at), Arith())


# ---------------------------------------------------------------- controls

def test_an_identical_replica_is_equivalent_and_says_what_it_checked():
    spec = spec_sum()
    rep = side("replica", "replica", "sum", "fp32", spec.tree_at, tree_sum(spec.tree_at), Arith())
    r = verify(spec, rep)
    assert r.equivalent, r.text()
    assert r.n_values == NS and len(r.trees) == 3 and r.samples_run == 400
    assert [a.n for a in r.arithmetic] == [5, 8, 13] and all(a.equal for a in r.arithmetic)
    text = r.text()
    assert "n values (3): 5 8 13" in text and "400 inputs, 400 comparisons" in text
    assert text.endswith("EQUIVALENT")
    json.dumps(r.to_json())
    assert r.to_json()["equivalent"] is True


def test_nothing_compared_is_not_equivalent():
    spec = spec_sum()
    r = compare(spec, [], NS)
    assert not r.equivalent


# ---------------------------------------------------------------- planted: one tree node

def test_one_rotated_node_is_caught_by_the_tree_and_named():
    spec = spec_sum()
    rotated = {n: rotate_once(spec.tree_at(n)) for n in NS}
    at = lambda n: rotated[n][0]  # noqa: E731
    r = verify(spec, side("replica", "replica", "sum", "fp32", at, tree_sum(at), Arith()), samples=0)
    assert not r.equivalent
    bad = [t for t in r.trees if not t.equal]
    assert [t.n for t in bad] == list(NS)
    _, old, new = rotated[5]
    assert f"spec:    {T.format_tree(old)}" in bad[0].difference
    assert f"replica: {T.format_tree(new)}" in bad[0].difference
    assert "NOT EQUIVALENT" in r.text()


def test_one_rotated_node_is_caught_by_samples_alone_with_both_outputs_in_hex():
    # the tree channel is fooled on purpose (it reports the spec's tree)
    spec = spec_sum()
    rotated = lambda n: rotate_once(spec.tree_at(n))[0]  # noqa: E731
    r = verify(spec, side("replica", "replica", "sum", "fp32", spec.tree_at, tree_sum(rotated)))
    assert all(t.equal for t in r.trees) and not r.equivalent
    m = next(s.mismatch for s in r.samples if s.mismatch)
    assert m.left_value.startswith("0x") and m.right_value.startswith("0x")
    assert m.left_value != m.right_value
    text = r.text()
    assert "first differing input" in text and "rebuild: fpspec.inputs.generate('sum'" in text


# ---------------------------------------------------------------- planted: FMA for a rounded product

def _dot_sides(products_replica, arith_spec=Arith("rounded"), arith_rep=None):
    at = lambda n: T.sequential(range(n))  # noqa: E731
    spec = side("spec", "spec", "dot", "fp32", at, tree_dot(at, products="rounded"), arith_spec)
    rep = side("replica", "replica", "dot", "fp32", at, tree_dot(at, products=products_replica), arith_rep)
    return spec, rep


def test_fma_for_a_rounded_product_is_caught_by_samples():
    spec, rep = _dot_sides("fma")
    r = verify(spec, rep)
    assert not r.equivalent and any(not s.equal for s in r.samples)
    spec, rep = _dot_sides("rounded")
    assert verify(spec, rep).equivalent


def test_fma_for_a_rounded_product_is_caught_by_the_arithmetic_section():
    spec, rep = _dot_sides("rounded", arith_rep=Arith("fma"))   # outputs fooled on purpose
    r = verify(spec, rep, samples=0)
    assert not r.equivalent
    assert r.arithmetic[0].differences == (("products", "rounded", "fma"),)
    assert "products: spec says rounded, replica shows fma" in r.text()


# ---------------------------------------------------------------- planted: initial value

def test_a_plus_zero_initial_value_is_caught_by_samples():
    spec = spec_sum()
    rep = side("replica", "replica", "sum", "fp32", spec.tree_at, tree_sum(spec.tree_at, init=0.0), Arith())
    r = verify(spec, rep)
    assert not r.equivalent
    m = next(s.mismatch for s in r.samples if s.mismatch)
    assert "signed_zeros" in m.sample
    assert {m.left_value.split()[0], m.right_value.split()[0]} == {"0x80000000", "0x00000000"}


# ---------------------------------------------------------------- planted: one fused-node parameter bit

def _fused_sides(planted_params):
    params = PARAMS["h100-fp16"]
    at = lambda n: chain_tree(n, params.w)  # noqa: E731
    spec = side("spec", "spec", "dot", "fp16", at, fused_dot(params), Arith("exact"), "fp32")
    rep = side("replica", "replica", "dot", "fp16", at, fused_dot(planted_params), Arith("exact"), "fp32")
    return spec, rep


def test_the_unchanged_fused_parameters_are_equivalent():
    assert verify(*_fused_sides(PARAMS["h100-fp16"]), ns=(40,), samples=300).equivalent


@pytest.mark.parametrize("change", [dict(extra_bits=1), dict(result="rne"), dict(c_aligned=False)])
def test_a_one_bit_change_in_a_fused_parameter_is_caught_by_samples(change):
    planted = dataclasses.replace(PARAMS["h100-fp16"], **change)
    r = verify(*_fused_sides(planted), ns=(40,), samples=300)
    assert not r.equivalent and r.samples[0].mismatch is not None


# ---------------------------------------------------------------- planted: nondeterminism

def test_a_nondeterministic_replica_is_caught():
    spec = spec_sum(T.sequential)
    rng = np.random.default_rng(0)
    orders = (tree_sum(lambda n: T.sequential(range(n))), tree_sum(lambda n: T.reversed_sequential(range(n))))
    flaky = lambda x: orders[int(rng.integers(0, 2))](x)  # noqa: E731
    r = verify(spec, side("replica", "replica", "sum", "fp32", spec.tree_at, flaky, Arith()))
    assert not r.equivalent


def test_a_replica_that_agrees_once_and_then_changes_its_mind_is_caught_by_the_repeat_check():
    spec = spec_sum(T.sequential)
    calls = {"n": 0}
    right = tree_sum(spec.tree_at)
    other = tree_sum(lambda n: T.reversed_sequential(range(n)))

    def drifting(x):   # first pass matches the spec; the repeat pass does not
        calls["n"] += 1
        return right(x) if calls["n"] <= 100 else other(x)

    rep = side("replica", "replica", "sum", "fp32", spec.tree_at, drifting)
    r = compare(spec, [rep], (24,), samples=100, seed=3, sample_pairs=[(spec, rep)])
    assert not r.equivalent
    assert any(p.stage == "repeat" and "nondeterministic" in p.message for p in r.problems), r.text()


# ---------------------------------------------------------------- broken targets are reported

def test_a_target_that_raises_is_reported_not_crashed_on():
    spec = spec_sum()

    def boom(x):
        raise RuntimeError("device lost")

    r = verify(spec, side("replica", "replica", "sum", "fp32", spec.tree_at, boom))
    assert not r.equivalent
    assert any("raised RuntimeError: device lost" in p.message for p in r.problems)


def test_a_target_with_the_wrong_shape_is_reported():
    spec = spec_sum()
    r = verify(spec, side("replica", "replica", "sum", "fp32", spec.tree_at, lambda x: np.zeros(3)))
    assert not r.equivalent
    assert any("returned shape (3,), expected ()" in p.message for p in r.problems)


def test_a_side_whose_tree_cannot_be_revealed_is_reported():
    from fpspec.errors import RevealRefused

    def refuse(n):
        raise RevealRefused("the target gives different outputs for the same input")

    spec = spec_sum()
    r = verify(spec, side("replica", "replica", "sum", "fp32", refuse, tree_sum(spec.tree_at)), samples=50)
    assert not r.equivalent
    assert any("different outputs for the same input" in p.message for p in r.problems)


# ---------------------------------------------------------------- pieces

def test_same_bits_tells_signed_zeros_apart_and_lets_any_nan_match():
    a = np.array([0.0, -0.0, np.nan, 1.0])
    b = np.array([-0.0, -0.0, -np.nan, np.nextafter(1.0, 2)])
    assert same_bits(a, b).tolist() == [False, True, True, False]


def test_default_n_values_cross_each_boundary_and_stay_in_range():
    ns = default_n_values(2, 10**9, boundaries=(100, 5000), max_n=1000, seed=0)
    assert {99, 100, 101, 2, 3, 1000, 999}.issubset(ns) and 128 not in ns
    assert {127, 128, 129, 255, 256, 257}.issubset(default_n_values(2, 300, seed=0))   # no guards: powers of 2
    assert all(2 <= n <= 1000 for n in ns) and 5000 not in ns
    assert ns == default_n_values(2, 10**9, boundaries=(100, 5000), max_n=1000, seed=0)
