"""A guard inside a part with a few small n as exceptions (fpspec.infer.fit note
[small exceptions], tried below the root as at it): the outer order of
blocks(2, pairwise, G) over the block counts 1..32, G a guard on residues mod 5
with n == 8 and n == 30 cases of their own."""
from __future__ import annotations

from fpspec.infer.fit import Budget, Fitter
from fpspec.infer.shapes import Obs
from fpspec.spec import parse
from fpspec.spec.expand import expand
from fpspec.tree import observable

PART = ("if n == 30: rev elif n % 5 != 1: if n % 5 == 0: if n == 5: ((0 (2 4)) (1 3)) else: seq "
        "elif n == 8: tail(max(1, n // 6), pairwise, rev) else: gpu_tree else: pairwise(min(9, n - 1))")


def test_part_guard_with_small_exceptions_fits_within_a_small_budget():
    spec = parse(f"n in 1..32\norder {PART}\n")
    obs = [Obs(n, observable(expand(spec, n))) for n in range(1, 33)]
    fitter = Fitter(budget=Budget(work=100_000))
    got = fitter.fit_guarded(obs, 1)
    assert str(got) == ("if n % 5 == 1: blocks(9, seq, rev) elif n % 5 == 0: tail(10, if n <= 20: seq else: rev, "
                        "if n <= 5: lanes(2, pairwise, seq) else: seq) elif n == 8: pairwise else: gpu_tree")
    checked = parse(f"n in 1..32\norder {got}\n")
    assert all(observable(expand(checked, o.n)) == o.tree for o in obs)
