"""The fit search on orders whose part count grows with n (vlanes and chunks of
max(1, n // c)), on orders whose parts recurse into the root, and on guards read off
the n that no parameter-free order gives (fpspec.infer.fit)."""
from __future__ import annotations

import numpy as np
import pytest

from fpspec.infer.engine import _fit, first_design
from fpspec.infer.fit import Budget, Fitter
from fpspec.infer.shapes import Obs
from fpspec.spec import ast as A
from fpspec.spec import parse
from fpspec.spec.expand import expand
from fpspec.tree import observable


def _fitted(text: str, seed: int = 0, every: bool = False):
    """The spec fitted to `text`'s trees at the first design's n of 1..64 (every: at each n
    of 1..64), and the spec itself."""
    spec = parse(f"n in 1..64\n{text}\n")
    ns = range(1, 65) if every else sorted(first_design(1, 64, np.random.default_rng(seed)))
    trees = {n: expand(spec, n) for n in ns}
    got, _ = _fit(trees, "order", 1, 64, budget=Budget(work=300_000))
    return got, spec


@pytest.mark.parametrize("order", [
    # fewer lanes than vectors at the largest n: lane 0 holds vectors 0, 9, 18, 27 at n = 64
    "vlanes(2, max(1, n // 7), lanes(2, seq, seq), pairwise)",
    # as many lanes as vectors at every n above 13: only the leftovers of small n show the lane count
    "vlanes(8, max(1, n // 2), lanes(8, seq, seq), pairwise)",
])
def test_vector_lanes_whose_count_grows_with_n_are_fitted(order):
    got, _ = _fitted(f"order {order}")
    assert str(got.order) == order


@pytest.mark.parametrize("order", [
    "chunks(max(1, n // 2), seq, seq)",                                  # the last chunks are lone leaves
    "if n <= 5: gpu_tree else: chunks(max(1, n // 2), gpu_tree, gpu_tree)",  # chunks not added one by one
])
def test_chunks_of_a_share_of_the_operands_left_are_fitted(order):
    got, _ = _fitted(f"order {order}")
    assert str(got.order) == order


def test_a_root_that_recurses_through_its_blocks_is_fitted_as_a_recursion():
    """blocks(3, seq, r) over r's own trees, r lanes below 10: the outer part is the root
    (note [recursive parts]), its n <= 9 a threshold arm (note [small exceptions])."""
    got, spec = _fitted("let r = if n <= 9: lanes(4, pairwise, seq) else: blocks(3, seq, r)\norder r")
    assert [str(d.order) for d in got.lets] == ["if n <= 9: lanes(4, pairwise, seq) else: blocks(3, seq, order)"]
    assert str(got.order) == "order"
    for n in range(1, 65):
        assert expand(got, n) == expand(spec, n), n


def test_residue_classes_past_a_plain_run_in_a_listed_guard_are_fitted():
    """seq up to 15, then two orders on the parity of n: the n no parameter-free order
    gives are one searched arm (note [simple lists]), whose n are residue classes."""
    got, spec = _fitted("order if n <= 15: seq elif n % 2 == 0: blocks(4, seq, pairwise) "
                        "else: tail(6, vlanes(3, 4, lanes(3, seq, seq), blocks(7, gpu_tree, gpu_tree)), seq)", seed=1)
    # (seed 1's design: at seed 0's, the odd class's search passes its cap and the fit stops)
    # (12 lanes of one operand, taken 3 lanes at a time: the 4 lanes of 3-wide vectors at every n)
    assert str(got.order) == ("if n <= 15: seq else: if n % 2 == 1: tail(6, lanes(12, seq, blocks(3, seq, gpu_tree)), "
                              "seq) else: blocks(4, seq, pairwise)")
    for n in range(1, 65):
        assert expand(got, n) == expand(spec, n), n


def test_a_sampled_order_wrong_where_it_was_searched_ends_the_search(monkeypatch):
    """The sampled search's answer is checked at every observation; where it is wrong only
    at n already sampled, another round would search the same sample again: no order."""
    spec = parse("n in 1..64\norder blocks(4, seq, pairwise)\n")
    obs = [Obs(n, observable(expand(spec, n))) for n in range(2, 30)]
    fitter = Fitter(budget=Budget(work=300_000))
    monkeypatch.setattr(fitter, "_fit_sample", lambda sample, depth, root: A.Seq())
    assert fitter.fit(obs) is None


def test_exceptions_a_little_above_the_small_n_are_kept_as_their_trees():
    """seq but at n = 5 and 10 (hand-written trees) and on n % 5 == 2 (from 12 on): the n
    below 2 * EXCEPTION_N that no parameter-free order gives keep their trees, the rest of
    the class is one searched arm (note [simple lists])."""
    got, spec = _fitted("order split(n - 1, if n % 5 == 1: lanes(7, split(max(1, n // 2 - n // 2 % 2), rev, seq), seq) "
                        "elif n == 4: (((0 2) 1) 3) elif n == 9: ((((((0 (2 8)) 6) 3) 4) (1 5)) 7) else: seq, seq)",
                        every=True)
    assert [str(c.cond) for c in got.order.cases] == ["n == 5", "n == 10", "n == 12", "n == 17", "n > 21 and n % 5 == 2"]
    # (the REST of one operand takes FIRST's order, which gives it too)
    assert str(got.order.cases[-1].order) == ("split(n - 1, lanes(7, split(max(1, n // 2 - n // 2 % 2), rev, seq), seq), "
                                              "lanes(7, split(max(1, n // 2 - n // 2 % 2), rev, seq), seq))")
    assert str(got.order.otherwise) == "seq"
    for n in range(1, 65):
        assert expand(got, n) == expand(spec, n), n
