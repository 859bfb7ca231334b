"""Residue guards read off the trees (note [residue classes] in fpspec.infer.fit):
generated specs whose order is guarded by n % 3 or n % 5, fitted from their trees
below a cut and compared with the generating spec at the held-out n above it."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from fpspec.infer.engine import _fit
from fpspec.infer.fit import Budget, Fitter
from fpspec.infer.shapes import Obs
from fpspec.spec import expand
from fpspec.spec.generate import random_spec
from fpspec.tree import observable

# (rng seed, range, the generated order as fpspec prints it, the class the trees propose first)
CASES = {
    "mod5": ([1, 18], (1, 64), "if n % 5 != 1: pairwise(min(2, n - 1)) else: split(min(5, n - 1), gpu_tree, seq)",
             (5, 1)),
    "mod3": ([5, 345], (1, 40), "if n % 3 != 1: lanes(1, seq, gpu_tree) else: pairwise", (3, 1)),
}


def _trees(spec, ns):
    return {n: observable(expand(spec, n)) for n in ns}


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_residue_guarded_spec_is_fitted_exactly_at_held_out_n(name):
    seed, (lo, hi), order, first = CASES[name]
    spec = random_spec(np.random.default_rng(seed), op="sum", max_depth=4 if name == "mod5" else 2, n_range=(lo, hi))
    assert str(spec.order) == order
    cut = hi * 3 // 4
    trees = _trees(spec, range(lo, cut + 1))
    assert Fitter()._class_proposals([Obs(n, t) for n, t in trees.items()])[0] == first
    fitted, _ = _fit(trees, "order", lo, hi, budget=Budget(work=300_000))
    held_out = range(cut + 1, hi + 1)
    assert {n: observable(expand(fitted, n)) for n in held_out} == _trees(spec, held_out)


def test_trees_of_one_order_propose_no_residue_class():
    spec = random_spec(np.random.default_rng([1, 18]), op="sum", max_depth=4, n_range=(1, 64))
    seq_only = dataclasses.replace(spec, order=spec.order.otherwise)   # split(min(5, n - 1), gpu_tree, seq) alone
    trees = _trees(seq_only, range(1, 49))
    assert Fitter()._class_proposals([Obs(n, t) for n, t in trees.items()]) == []
