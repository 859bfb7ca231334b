"""The fit search on vector lanes, tails nested in tails, and residue classes above a
plain run (fpspec.infer.fit)."""
from __future__ import annotations

import numpy as np
import pytest

from fpspec.infer.engine import _fit, first_design
from fpspec.infer.fit import Budget, Fitter, _nested_seq_tail
from fpspec.infer.lca import spec_l
from fpspec.infer.shapes import Obs, vlane_candidates
from fpspec.spec import ast as A
from fpspec.spec import parse
from fpspec.spec.expand import expand
from fpspec.tree import lca_size, observable

NS = (5, 13, 17, 22, 31, 40, 51, 57, 64)


def _obs(order: str, ns) -> list[Obs]:
    spec = parse(f"n in 1..64\norder {order}\n")
    return [Obs(n, observable(expand(spec, n))) for n in ns]


@pytest.mark.parametrize("order", ["vlanes(3, 4, lanes(3, seq, seq), gpu_tree)",
                                   "vlanes(4, 2, lanes(4, seq, seq, seq), seq)"])
def test_vector_lanes_are_fitted_with_their_width_and_lanes(order):
    assert str(Fitter(budget=Budget(work=300_000)).fit_root(_obs(order, NS))) == order


def test_vector_lane_candidates_come_from_the_lowest_subtree_first():
    # above leaf 0: one lane's accumulators (2, 6), the lane (3, 4), two lanes joined (3, 2)
    big = _obs("vlanes(3, 4, lanes(3, seq, seq), gpu_tree)", [64])[0]
    assert vlane_candidates(big) == [(2, 6), (3, 4), (3, 2)]


def test_lca_sizes_of_vector_lanes_match_their_trees():
    spec = parse("n in 1..64\norder tail(6, vlanes(4, 3, pad(4, seq), gpu_tree), rev)\n")
    for n in (2, 5, 13, 31):
        t = expand(spec, n)
        got = [spec_l(spec, n, i, j) for i in range(n) for j in range(i + 1, n)]
        assert got == [lca_size(t, i, j) for i in range(n) for j in range(i + 1, n)], n


def test_a_tail_of_seq_inside_a_tail_of_seq_is_one_tail():
    inner = A.Tail(A.Num(6), A.Seq(), A.Seq())
    assert _nested_seq_tail(3, inner, A.Seq())
    assert not _nested_seq_tail(4, inner, A.Seq())          # 4 does not divide 6
    assert not _nested_seq_tail(3, A.Tail(A.Num(6), A.Seq(), A.Rev()), A.Seq())


def test_residue_classes_above_a_plain_run_are_fitted():
    """seq up to 13, then one order on n % 3 == 0 and another elsewhere: the run of seq cut
    off first (note [simple ends]), the n above it proposed as classes of n % 3."""
    spec = parse("n in 1..64\norder if n <= 13: seq elif n % 3 == 0: split(5, rev, pairwise) "
                 "else: tail(4, pairwise, rev)\n")
    trees = {n: expand(spec, n) for n in sorted(first_design(1, 64, np.random.default_rng(0)))}
    got, _ = _fit(trees, "order", 1, 64, budget=Budget(work=300_000))
    assert str(got.order) == ("if n <= 13: seq else: if n % 3 == 0: split(5, rev, pairwise) "
                              "else: tail(4, pairwise, rev)")
