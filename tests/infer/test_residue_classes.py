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
    "mod3": ([5, 345], (1, 40), "if n % 3 != 1: vlanes(2, 1, lanes(2, seq, seq, seq), gpu_tree) else: pairwise",
             (3, 1)),
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
    assert Fitter()._class_proposals([Obs(n, t) for n, t in trees.items()])[0] == first + ((),)
    fitted, _ = _fit(trees, "order", lo, hi, budget=Budget(work=300_000))
    held_out = range(cut + 1, hi + 1)
    assert {n: observable(expand(fitted, n)) for n in held_out} == _trees(spec, held_out)


def test_trees_of_one_order_propose_no_residue_class():
    spec = random_spec(np.random.default_rng([1, 18]), op="sum", max_depth=4, n_range=(1, 64))
    seq_only = dataclasses.replace(spec, order=spec.order.otherwise)   # split(min(5, n - 1), gpu_tree, seq) alone
    trees = _trees(seq_only, range(1, 49))
    assert Fitter()._class_proposals([Obs(n, t) for n, t in trees.items()]) == []


def test_a_class_mod_4_is_proposed_and_fitted_but_a_tail_by_4_proposes_none():
    # moduli 2, 4, 8 come from the trees too; a tail's leftovers (n % 4 of them) are its own cut
    guarded = "n in 1..\norder if n % 4 == 3: split(2, seq, pairwise) else: rev\n"
    from fpspec.spec import parse

    trees = _trees(parse(guarded), range(1, 49))
    obs = [Obs(n, t) for n, t in trees.items()]
    assert (4, 3, ()) in Fitter()._class_proposals(obs)
    fitted, _ = _fit(trees, "order", 1, 64, budget=Budget(work=100_000))
    assert {n: observable(expand(fitted, n)) for n in range(49, 65)} == _trees(parse(guarded), range(49, 65))
    tail = _trees(parse("n in 1..\norder tail(4, lanes(4, seq, pairwise), seq)\n"), range(1, 49))
    assert Fitter()._class_proposals([Obs(n, t) for n, t in tail.items()]) == []


def test_a_capped_guess_leaves_no_trace_in_the_search():
    # a sub-search stopped by its cap is not remembered as "no order": the same search runs again
    from fpspec.infer.fit import Capped

    fitter = Fitter(budget=Budget(work=1_000_000))
    trees = _trees(random_spec(np.random.default_rng([1, 18]), op="sum", max_depth=4, n_range=(1, 64)),
                   range(2, 40))
    obs = [Obs(n, t) for n, t in trees.items()]
    with fitter.budget.capped(50) as token:
        with pytest.raises(Capped) as stopped:
            fitter.fit(obs, 0, True)
    assert stopped.value.token is token and fitter._memo == {}
    assert fitter.fit_guarded(obs, 0, True) is not None
