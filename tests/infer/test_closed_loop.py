"""The closed loop on a fixed-seed sample: a random parametric spec
(fpspec.spec.generate) -> its numpy replica as the black box -> range
inference -> the inferred spec compared with the generating one at held-out
n, trees and arithmetic (fpspec.infer.roundtrip).  benchmarks/soak_infer.py
runs thousands of these."""
from __future__ import annotations

import numpy as np
import pytest

from fpspec.infer.roundtrip import recover
from fpspec.spec import parse
from fpspec.spec.generate import random_spec

RANGE = (1, 24)
# seed -> what the loop ends in, with a fit budget of 100,000 leaves
SAMPLE = {2: "recovered", 6: "recovered", 7: "recovered", 1: "refused"}


def _spec(seed: int):
    return random_spec(np.random.default_rng([7, seed]), op="sum", max_depth=3, n_range=RANGE)


@pytest.mark.parametrize("seed", sorted(SAMPLE))
def test_random_spec_is_recovered_or_refused_never_wrong(seed):
    spec = _spec(seed)
    rec = recover(spec, RANGE, box="numpy", seed=seed, fit_work=100_000)
    assert rec.verdict == SAMPLE[seed], rec.text()
    if rec.verdict == "recovered":
        assert rec.compared == tuple(range(1, 25))   # all of 1..24 is revealed: compared at every n
        assert (rec.inferred.header.n.lo, rec.inferred.header.n.hi) == RANGE
    else:
        assert rec.detail   # a refusal says why


def test_a_literal_arm_at_one_n_is_recovered_at_that_n():
    # seed 6 of the sample: `if n == 9: <literal tree> else: gpu_tree`
    spec = _spec(6)
    assert str(spec.order).startswith("if n == 9: ")
    rec = recover(spec, RANGE, box="numpy", seed=6, fit_work=100_000)
    from fpspec.spec import expand
    from fpspec.tree import observable

    for n in range(1, 25):
        assert observable(expand(rec.inferred, n)) == observable(expand(spec, n)), n


def test_a_wrong_inferred_spec_is_reported_as_wrong():
    from fpspec.infer.roundtrip import _first_difference

    a = parse("op sum\nn in 1..\norder lanes(4, seq, pairwise)\n")
    b = parse("op sum\nn in 1..\norder lanes(4, seq, seq)\n")
    assert _first_difference(a, b, [2, 8, 9], arithmetic=False).startswith("n = 8: first difference at root")
    assert _first_difference(a, a, [2, 8, 9], arithmetic=False) == ""
