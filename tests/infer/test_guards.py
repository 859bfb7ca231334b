"""Guards that join size and alignment, exceptions to residue classes, plain ends of
the range, thresholds moved after a sampled fit, block sizes and tails whose count
grows with n: each fitted from
the trees of a spec at n = 1..48 and a few n above (as range inference reveals
them), compared exactly, then expanded at every n up to 64."""
from __future__ import annotations

import pytest

from fpspec.infer.engine import _fit
from fpspec.infer.fit import Budget, Fitter, Obs
from fpspec.infer.rules import decision_list
from fpspec.spec import ast as A, parse
from fpspec.spec.expand import expand
from fpspec.tree import observable

REVEALED = list(range(1, 49)) + [51, 63, 64]

# the generating order, the order fitted from its trees at REVEALED
CASES = {
    "size and alignment at once": (
        "if n > 39 or n % 3 != 1: rev elif n % 6 == 0: pairwise elif n % 8 == 7: rev else: seq",
        "if n <= 37 and n % 3 == 1 and n % 8 != 7: seq else: rev"),
    "a searched arm beside simple orders": (
        "if n == 4: ((0 2) (1 3)) elif n <= 33 or n % 2 != 1: pairwise "
        "else: split(max(1, n // 2 - n // 2 % 8), seq, blocks(12, gpu_tree, pairwise))",
        "if n == 4: gpu_tree elif n > 34 and n % 2 == 1: split(n // 2 - n // 2 % 8, seq, blocks(12, gpu_tree, "
        "pairwise)) else: pairwise"),
    "a residue class with one exception": (
        "if n == 25: blocks(11, rev, tail(6, pairwise, seq)) elif n % 4 != 3: seq "
        "else: pairwise(max(1, n // 2 - n // 2 % 2))",
        "if n == 25: blocks(11, rev, seq) elif n % 4 == 3: pairwise(max(1, n // 2 - n // 2 % 2)) else: seq"),
    "a block size that cuts only the largest n is not taken": (
        "blocks(max(1, n // 6), rev, seq)",
        "blocks(max(1, n // 6), rev, seq)"),
    "a tail whose count grows with n": (
        "tail(max(1, n // 7), pad(6, gpu_tree), pairwise)",
        "tail(max(1, n // 7), pad(6, gpu_tree), pairwise)"),
    "a plain order below a threshold, blocks of 12 above it": (
        "split(min(1, n - 1), gpu_tree, if n >= 32: blocks(12, blocks((if n > 11: 9 else: 1), seq, rev), gpu_tree) "
        "else: seq)",
        "split(1, seq, if n <= 31: seq else: blocks(12, if n <= 11: rev else: "
        "(((((((((0 1) 2) 3) 4) 5) 6) 7) 8) ((9 10) 11)), gpu_tree))"),
}


def _trees(order: str, ns):
    spec = parse(f"n in 1..\norder {order}\n")
    return {n: observable(expand(spec, n)) for n in ns}


@pytest.mark.parametrize("name", sorted(CASES))
def test_fitted_exactly_and_right_at_every_n(name):
    order, want = CASES[name]
    fitted, _ = _fit(_trees(order, REVEALED), "order", 1, 64, budget=Budget(work=300_000))
    assert str(fitted.order) == want
    every = range(1, 65)
    assert {n: observable(expand(fitted, n)) for n in every} == _trees(order, every)


def test_decision_list_joins_a_threshold_and_two_residues():
    seq, rev = frozenset({0}), frozenset({1})
    labels = {n: seq if n <= 39 and n % 3 == 1 and n % 8 != 7 else rev for n in range(3, 49)}
    got = decision_list(labels, [A.Seq(), A.Rev()])
    assert str(got) == "if n <= 37 and n % 3 == 1 and n % 8 != 7: seq else: rev"
    # an n that both orders give takes either arm; one that neither gives has no list
    assert str(decision_list({**labels, 4: seq | rev}, [A.Seq(), A.Rev()])) == str(got)
    assert decision_list({3: seq, 4: rev, 5: seq, 6: rev, 7: seq, 8: rev, 9: frozenset()}, [A.Seq(), A.Rev()]) is None


def test_a_threshold_fitted_on_a_sample_is_moved_to_where_every_n_agrees():
    order = "if n <= 30: seq else: blocks(4, rev, seq)"
    obs = [Obs(n, t) for n, t in _trees(order, range(2, 49)).items()]
    fitter = Fitter(budget=Budget(work=100_000))
    sampled = parse("n in 1..\norder if n <= 27: seq else: blocks(4, rev, seq)\n").order
    bad = [o for o in obs if not fitter._verify(sampled, o, False)]
    assert [o.n for o in bad] == [28, 29, 30]
    assert str(fitter._moved_threshold(sampled, obs, bad, False)) == order
    # a wrong order is not made right by a threshold
    wrong = parse("n in 1..\norder if n <= 27: seq else: blocks(4, seq, seq)\n").order
    bad = [o for o in obs if not fitter._verify(wrong, o, False)]
    assert fitter._moved_threshold(wrong, obs, bad, False) is None
