"""End to end: black boxes (fpspec.reveal.synthetic and numpy.sum) -> one spec."""
from __future__ import annotations

import numpy as np
import pytest

from fpspec.infer import infer_spec, sampled_check, spec_l_many
from fpspec.infer.check import alternatives, choose_pairs
from fpspec.infer.engine import compress
from fpspec.reveal.synthetic import sum_target
from fpspec.reveal.targets import resolve_target
from fpspec.spec import expand, parse
from fpspec.tree import LcaIndex, Node, sequential

from orders import numpy_pairwise, switching

NUMPY_SPEC = """n in 1..
let f =
    if n <= 128: tail(8, lanes(8, seq, pairwise), seq)
    else: split(n // 2 - n // 2 % 8, f, f)
order f
"""


def synthetic(fn, name="synthetic.sum"):
    return lambda n: sum_target(fn(n), name=name)


def _order_text(spec):
    return str(spec.lets[0].order) if spec.lets else str(spec.order)


def test_switching_order_gets_its_threshold_pinned_by_bisection():
    r = infer_spec(synthetic(switching), (1, 400), progress=False, holdout=6, replica=None, probe=False)
    assert _order_text(r.spec) == "if n <= 100: seq else: pairwise"
    assert {100, 101} <= set(r.revealed)
    assert r.ok and len(r.held_out) == 6
    for n in (99, 100, 101, 257, 400):
        assert expand(r.spec, n) == switching(n)


def planted(n):
    """numpy's order, except at n = 650 (nothing recurses onto 650 below 1300)."""
    return sequential(range(n)) if n == 650 else numpy_pairwise(n)


def test_planted_counterexample_at_a_held_out_n_is_found_and_fixed():
    r = infer_spec(synthetic(planted), (1, 700), progress=False, holdout=[650, 333], replica=None,
                   probe=False, seed=3)
    assert 650 in r.held_out and 650 not in r.revealed
    [c] = [c for c in r.counterexamples if c.n == 650]
    assert c.stage == "held-out" and c.resolved
    for n in (333, 649, 650, 651, 700):
        assert expand(r.spec, n) == planted(n)
    assert r.ok


def wrong_above(n):
    """numpy's order up to 4000; above, the split is rounded to 16 instead of 8."""
    if n <= 4000:
        return numpy_pairwise(n)
    h = n // 2 - (n // 2) % 16
    return Node((numpy_pairwise(h), _shifted(numpy_pairwise(n - h), h)))


def _shifted(t, d):
    from fpspec.infer.shapes import contract

    return contract(t, {}, lambda leaf: leaf + d)


def test_sampled_check_catches_a_spec_wrong_only_at_large_n():
    spec = parse(NUMPY_SPEC)
    n = 4112  # 4112 // 2 = 2056: a multiple of 8, not of 16
    assert sampled_check(spec, sum_target(numpy_pairwise(n)), replica=None).ok
    bad = sampled_check(spec, sum_target(wrong_above(n)), replica=None)
    assert bad.mismatches > 0 and not bad.ok
    i, j, got, want = bad.first_mismatch
    assert got == LcaIndex(wrong_above(n)).l(i, j) and want == LcaIndex(numpy_pairwise(n)).l(i, j)


def test_inference_with_a_low_full_limit_reports_the_large_n_counterexample():
    r = infer_spec(synthetic(wrong_above), (1, 4500), progress=False, full_limit=1024, holdout=[700],
                   checks=(4112,), replica=None, probe=False)
    assert _order_text(r.spec).startswith("if n <= 128: tail(8, lanes(8, seq, pairwise), seq)")
    bad = [s for s in r.sampled if s.n == 4112]
    assert bad and not bad[0].ok and not r.ok
    assert any(c.n == 4112 and not c.resolved for c in r.counterexamples)
    assert "SAMPLED" in r.report()


def test_real_numpy_sum_float32_moderate_range():
    r = infer_spec(lambda n: resolve_target("numpy.sum", n=n, dtype="float32"), (1, 1500),
                   progress=False, holdout=8, full_limit=1500, replica=None, probe=False)
    assert _order_text(r.spec) == _order_text(parse(NUMPY_SPEC)).replace(" f,", " numpy_sum,").replace(
        " f)", " numpy_sum)")
    assert r.ok and len(r.held_out) == 8 and not set(r.held_out) & set(r.revealed)
    prov = r.spec.header.provenance
    assert prov.get("revealed") == compress(r.revealed) and prov.get("held_out") == compress(r.held_out)
    js = r.to_json()
    assert {t["n"] for t in js["per_n"]} >= set(r.revealed) | set(r.held_out)
    assert js["fit"]["runs"][0][:2] == [1, 128]


@pytest.mark.parametrize("text", [
    NUMPY_SPEC, "order blocks(16, pairwise, rev)", "order chain(16)", "order gpu_tree",
    "order lanes(4, seq, gpu_tree)", "order blocks(5, lanes(2, rev, seq), pairwise(n - 1))",
    "order tail(7, blocks(7, fused, seq), pairwise)", "order if n < 50: ((0 2) ((1 3) 4)) else: seq",
])
def test_l_from_a_spec_equals_l_of_its_expanded_tree(text):
    spec = parse(text)
    rng = np.random.default_rng(2)
    for n in (5, 37, 300, 1000):
        try:
            tree = expand(spec, n)
        except Exception:
            continue
        pairs = rng.integers(0, n, (200, 2))
        pairs = pairs[pairs[:, 0] != pairs[:, 1]]
        index = LcaIndex(tree)
        assert spec_l_many(spec, n, pairs).tolist() == [index.l(a, b) for a, b in pairs.tolist()]


def test_pairs_separate_nearest_alternatives_at_two_to_the_24():
    spec = parse(NUMPY_SPEC)
    n = 1 << 24
    pairs, considered, separated = choose_pairs(spec, n, np.random.default_rng(0))
    assert considered == len(alternatives(spec)) and separated >= considered // 2
    want = spec_l_many(spec, n, pairs)
    told_apart = 0
    for alt in alternatives(spec):
        try:
            told_apart += bool(np.any(spec_l_many(alt, n, pairs) != want))
        except Exception:
            pass
    assert told_apart == separated
    assert len(pairs) < 200  # no n x n table: a few hundred queries at most


def test_compress():
    assert compress([1, 2, 3, 5, 7, 8, 10, 11, 12]) == "1..3 5 7 8 10..12"


def test_a_check_outside_the_range_is_refused_not_dropped():
    from fpspec.errors import FpspecError
    from fpspec.infer.engine import infer_spec

    def never(n):
        raise AssertionError("no target call before the arguments are checked")

    with pytest.raises(FpspecError, match=r"--check 200 is outside the range 1\.\.100"):
        infer_spec(never, (1, 100), checks=(200,), progress=False)
