"""Fitting known parametric orders from trees at designed n (no black box)."""
from __future__ import annotations

import numpy as np
import pytest

from fpspec.infer.engine import _fit, first_design
from fpspec.spec import ast as A
from fpspec.spec import expand
from fpspec.spec.expand import apply_order
from fpspec.tree import pairwise, sequential

from orders import SGEMV_LIKE, blocked, fused_chain, lanes_with_tail, numpy_pairwise, sgemv_like, switching

KNOWN = {
    "sequential": (lambda n: sequential(range(n)), "seq"),
    "pairwise": (lambda n: pairwise(range(n)), "pairwise"),
    "lanes_with_tail": (lanes_with_tail, "tail(4, lanes(4, seq, seq), seq)"),
    "numpy_pairwise": (numpy_pairwise, "if n <= 128: tail(8, lanes(8, seq, pairwise), seq) "
                                       "else: split(n // 2 - n // 2 % 8, order, order)"),
    "blocked": (blocked, "blocks(16, pairwise, seq)"),
    "fused_chain": (fused_chain, "chain(16)"),
}


def _observe(fn, ns):
    return {n: fn(n) for n in ns}


@pytest.mark.parametrize("name", sorted(KNOWN))
def test_fit_recovers_known_order_and_predicts_unseen_n(name):
    fn, want = KNOWN[name]
    rng = np.random.default_rng(1)
    fit_ns = first_design(1, 1100, rng)
    spec, _ = _fit(_observe(fn, fit_ns), "order", 1, 5000)
    text = str(spec.lets[0].order) if spec.lets else str(spec.order)
    assert text == want
    unseen = sorted(set(int(x) for x in rng.integers(1, 5000, 12)) - fit_ns)
    for n in unseen:
        assert expand(spec, n) == fn(n), n


def test_outer_blocks_inside_a_tail_are_found_from_the_range_below_them():
    # note [outer blocks]: fitted below 512, then blocks(512, ...) around the padded lanes
    rng = np.random.default_rng(2)
    fit_ns = first_design(1, 2100, rng)
    spec, _ = _fit(_observe(sgemv_like, fit_ns), "order", 1, 2100)
    assert str(spec.order) == SGEMV_LIKE
    for n in (513, 1027, 1538, 2047):
        assert expand(spec, n) == sgemv_like(n), n


def test_an_order_that_changes_with_n_gets_a_guard():
    ns = set(range(1, 49)) | {99, 100, 101, 102, 150, 300}
    spec, fitter = _fit(_observe(switching, ns), "order", 1, 1000)
    assert isinstance(spec.order, A.Guard)
    assert str(spec.order) == "if n <= 100: seq else: pairwise"
    assert [(r.lo, r.hi) for r in fitter.runs] == [(1, 100), (101, 300)]


def test_fit_never_contradicts_an_observation():
    # an order with no structure at one n: a literal case for it, the rest fitted
    rng = np.random.default_rng(5)
    from fpspec.tree import random_tree

    trees = _observe(lambda n: sequential(range(n)), range(1, 40))
    trees[23] = random_tree(23, rng)
    spec, _ = _fit(trees, "order", 1, 100)
    for n, t in trees.items():
        assert expand(spec, n) == t
    assert expand(spec, 60) == sequential(range(60))


def test_orders_without_structure_are_refused_in_one_line_not_tabled():
    from fpspec.infer.fit import Stopped
    from fpspec.tree import random_tree

    rng = np.random.default_rng(9)
    trees = {n: random_tree(n, rng) for n in range(1, 60)}
    with pytest.raises(Stopped, match="no order of the .fps language explains|whole budget"):
        _fit(trees, "order", 1, 100)


def test_fits_cublas_chains_from_the_h100_trace():
    """torch.matmul fp16 16x16xK on an H100 (tests/infer/data, recorded on the H100), K = 1..256:
    cuBLAS picks its kernel by K's alignment and starts the K loop with the
    partial tile, so the short group moves: a guard on residues of n."""
    import json
    from pathlib import Path

    from fpspec.infer.fit import Fitter
    from fpspec.infer.shapes import Obs
    from fpspec.spec.expand import apply_order
    from fpspec.tree import observable, parse_tree

    path = Path(__file__).resolve().parent / "data" / "h100_fp16_16x16_k1_256.jsonl"
    obs = [Obs(r["n"], parse_tree(r["tree"])) for r in map(json.loads, path.read_text().splitlines()) if "tree" in r]
    order = Fitter().fit_root(obs)
    assert str(order) == ("if n % 2 == 1: chain(16, n % 64 // 16) elif n % 8 == 0: chain(16) "
                          "elif n <= 86: chain(16, n % 32 // 16) else: chain(16, n % 128 // 16)")
    for o in obs:
        assert observable(apply_order(order, range(o.n))) == o.tree, o.n


def test_fits_lanes_whose_leftovers_join_lane_0():
    from fpspec.infer.fit import Fitter
    from fpspec.infer.shapes import Obs
    from fpspec.spec import expand, parse

    spec = parse("order if n <= 7: lanes(4, seq, seq, seq) "
                 "else: lanes(8, lanes(4, seq, seq, seq), seq, split(1, seq, seq))")
    ns = list(range(2, 70)) + [100, 127, 128, 129, 200, 255, 256, 300, 511, 512, 513]
    order = Fitter().fit_root([Obs(n, expand(spec, n)) for n in ns])
    assert str(order) == str(spec.order)


def test_the_cost_of_an_order_with_arithmetic_per_part_is_its_tree_order_and_one():
    from fpspec.infer.fit import order_cost
    from fpspec.spec import parse

    spec = parse("arithmetic { input = fp32 product = rounded accumulator = fp32 init = +0.0 output = fp32 }\n"
                 "arithmetic f { product = fma }\nop dot\norder tail(4, using(f, seq), seq)\n")
    assert order_cost(spec.order) == order_cost(parse("order tail(4, seq, seq)").order) + 1


def test_a_search_out_of_budget_keeps_the_runs_of_simple_orders():
    """`if n <= 27: pairwise else: seq`: a budget that stops the search before it finds the guard
    still gives it (the runs every observation agrees with), never a partial order."""
    from fpspec.infer.fit import Budget, Fitter, Obs, Stopped
    from fpspec.spec import parse
    from fpspec.spec.expand import expand
    from fpspec.tree import observable

    spec = parse("n in 1..\norder if n <= 27: pairwise else: seq\n")
    obs = [Obs(n, observable(expand(spec, n))) for n in range(2, 49)]
    fitter = Fitter(budget=Budget(work=2_000))
    assert str(fitter.fit_root(obs)) == "if n <= 27: pairwise else: seq"
    assert [(r.lo, r.hi) for r in fitter.runs] == [(2, 27), (28, 48)]
    # more n than MAX_EXCEPTIONS whose trees no simple order gives: the budget's stop stands
    lanes = parse("n in 1..\norder lanes(4, seq, pairwise)\n")
    odd = obs + [Obs(n, observable(expand(lanes, n))) for n in range(49, 54)]
    with pytest.raises(Stopped):
        Fitter(budget=Budget(work=2_000)).fit_root(odd)


def test_simple_runs_keep_a_single_exception_as_its_tree():
    """seq at every n but one: the stopped search still gives `if n == 28: TREE else: seq`."""
    from fpspec.infer.fit import Budget, Fitter, Obs
    from fpspec.spec import parse
    from fpspec.spec.expand import expand
    from fpspec.tree import format_tree, observable

    spec = parse("n in 1..\norder if n == 28: blocks(5, pairwise, seq) else: seq\n")
    obs = [Obs(n, observable(expand(spec, n))) for n in range(2, 41)]
    got = Fitter(budget=Budget(work=2_000)).fit_root(obs)
    assert isinstance(got, A.Guard) and len(got.cases) == 1 and str(got.otherwise) == "seq"
    assert str(got.cases[0].cond) == "n == 28"
    assert format_tree(got.cases[0].order.tree) == format_tree(obs[26].tree)


def test_blocks_growing_with_n_and_a_small_exception_are_fitted():
    """blocks(max(1, n // 6), ...) (c blocks and a rest), and a hand-written tree at n = 6 beside
    blocks(15, seq, seq) (the first block summed in order: 15 is the end of its prefix sizes)."""
    from fpspec.infer.fit import Budget, Fitter, Obs
    from fpspec.spec import parse
    from fpspec.spec.expand import expand
    from fpspec.tree import observable

    spec = parse("n in 1..\norder blocks(max(1, n // 6), seq, split(n - n // 2, gpu_tree, pairwise))\n")
    obs = [Obs(n, observable(expand(spec, n))) for n in range(2, 65)]
    got = Fitter(budget=Budget(work=300_000)).fit_root(obs)
    assert str(got).startswith("blocks(max(1, n // 6), seq, split(")
    assert all(observable(apply_order(got, range(n))) == observable(expand(spec, n)) for n in range(2, 100))
    spec = parse("n in 1..\norder if n == 6: ((((0 5) (3 4)) 2) 1) else: blocks(15, seq, seq)\n")
    obs = [Obs(n, observable(expand(spec, n))) for n in range(2, 65)]
    got = Fitter(budget=Budget(work=300_000)).fit_root(obs)
    assert str(got.otherwise) == "blocks(15, seq, seq)" and str(got.cases[0].cond) == "n == 6"
    assert all(observable(apply_order(got, range(n))) == observable(expand(spec, n)) for n in range(2, 100))


def test_pad_to_a_multiple_that_is_not_a_vector_width():
    from fpspec.infer.fit import Budget, Fitter, Obs
    from fpspec.spec import parse
    from fpspec.spec.expand import expand
    from fpspec.tree import observable

    spec = parse("n in 1..\norder pad(5, blocks(2, rev, tail(8, rev, seq)))\n")
    obs = [Obs(n, observable(expand(spec, n))) for n in range(2, 65)]
    got = Fitter(budget=Budget(work=300_000)).fit_root(obs)
    assert str(got).startswith("pad(5, blocks(2, ")
    assert all(observable(apply_order(got, range(n))) == observable(expand(spec, n)) for n in range(2, 100))


def test_lanes_growing_with_n_and_clamped_split_points():
    """lanes(max(1, n // 8), ...) and the split points a generated spec clamps into 1..n-1."""
    from fpspec.infer.fit import Budget, Fitter, Obs
    from fpspec.spec import parse
    from fpspec.spec.expand import expand
    from fpspec.tree import observable

    for text, want in (("split(min(7, n - 1), seq, lanes(max(1, n // 8), tail(2, rev, pairwise), rev))",
                        "split(min(7, n - 1), seq, lanes(max(1, n // 8), "),
                       ("pairwise(max(1, n // 2 - n // 2 % 4))", "pairwise(max(1, n // 2 - n // 2 % 4))")):
        spec = parse(f"n in 1..\norder {text}\n")
        obs = [Obs(n, observable(expand(spec, n))) for n in range(2, 65)]
        got = Fitter(allow_ref=False, budget=Budget(work=300_000)).fit_root(obs)   # no recursion to confirm
        assert str(got).startswith(want)
        assert all(observable(apply_order(got, range(n))) == observable(expand(spec, n)) for n in range(2, 100))
