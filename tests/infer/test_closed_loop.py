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
# seed -> what the loop ends in, with a fit budget of 100,000 leaves (seed 6: a literal
# tree at n = 9, gpu_tree elsewhere; seed 7: blocks of lanes with guards inside; seed 1:
# pad(4, pad(5, pairwise)); seed 4: a part whose arithmetic the probes per part cannot fit)
SAMPLE = {1: "recovered", 2: "recovered", 6: "recovered", 7: "recovered", 4: "refused"}


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


def test_a_wrong_inferred_spec_is_reported_as_wrong():
    from fpspec.infer.roundtrip import _first_difference

    a = parse("op sum\nn in 1..\norder lanes(4, seq, pairwise)\n")
    b = parse("op sum\nn in 1..\norder lanes(4, seq, seq)\n")
    assert _first_difference(a, b, [2, 8, 9], arithmetic=False).startswith("n = 8: first difference at root")
    assert _first_difference(a, a, [2, 8, 9], arithmetic=False) == ""


def _with_arith(order: str, acc: str, fmt: str = "fp32") -> object:
    return parse(f"op sum\nn in 1..\narithmetic {{ input = {fmt} product = none accumulator = {acc} "
                 f"init = +0.0 output = {fmt} }}\norder {order}\n")


def test_arithmetic_is_compared_by_the_bits_it_computes():
    from fpspec.infer.roundtrip import _first_difference

    wide, narrow = _with_arith("seq", "fp64"), _with_arith("seq", "fp32")
    assert "the arithmetic differs: input column" in _first_difference(wide, narrow, [40], arithmetic=True)
    # two fp16 terms added in fp32 and rounded to fp16 are their fp16 sum: the same arithmetic here
    assert _first_difference(_with_arith("seq", "fp32", "fp16"), _with_arith("seq", "fp16", "fp16"), [2],
                             arithmetic=True) == ""


@pytest.mark.parametrize("fmt", ["fp16", "bf16"])
def test_fp32_results_of_narrow_inputs_keep_init_plus_zero(fmt):
    """fp16/bf16 terms added in fp32 from +0.0 and returned in fp32 as float64 values: the
    target declares its input format as output; the probe reads fp32 off the results, so
    a sum of -0.0 terms is +0.0 in the inferred spec too (it was -0.0: init none)."""
    from fpspec.arith.probe import probe_arithmetic
    from fpspec.infer.roundtrip import replica_target
    from fpspec.spec.expand import expand_arith

    spec = parse(f"op sum\nn in 1..12\narithmetic {{ input = {fmt} product = none accumulator = fp32 "
                 "init = +0.0 output = fp32 }\norder tail((if n > 9: 5 else: 1), pad(8, seq), rev)\n")
    target = replica_target(spec, box="numpy")(3)
    assert target.out_fmt == fmt
    report = probe_arithmetic(target, expand_arith(spec, 3)[0])
    a = report.arithmetic
    assert (a.accumulator, a.init, a.output, report.consistent) == ("fp32", "+0.0", "fp32", True)
    if fmt == "bf16":
        return     # the closed loop once (fp16) below: the probe is what differed
    rec = recover(spec, (1, 10), box="numpy", seed=0, fit_work=100_000)
    assert rec.verdict == "recovered", rec.text()
    main = expand_arith(rec.inferred, 10)[1]
    assert (main.init, main.output) == ("+0.0", "fp32")


def test_fused_chain_whose_last_group_is_short_is_probed_at_its_full_width():
    """chain(16, 2) over 24 leaves: a bare node of 16 products, then c and 8 products; w is 16
    (the node with c is the short last group), not 8."""
    from fpspec.arith.probe import probe_arithmetic
    from fpspec.infer.roundtrip import replica_target
    from fpspec.spec.expand import expand_arith

    spec = parse("op sum\nn in 2..\narithmetic { input = fp16 product = none accumulator = fp32 init = +0.0 "
                 "output = fp16 fused { w = 16 extra_bits = 2 aligned = truncate result = rz c_aligned = true "
                 "exponent_floor = -133 } }\norder split(16, pairwise, chain(16, 2))\n")
    report = probe_arithmetic(replica_target(spec, box="numpy")(40), expand_arith(spec, 40)[0], rows=120)
    assert report.arithmetic.fused.w == 16 and report.consistent, str(report)


def test_fp64_terms_in_an_fp32_part_are_converted_before_they_are_added():
    """The model of a part narrower than the input agrees with the compiled replica (each
    node rounds the exact sum of its fp64 terms to fp32 once), so the probes can find that part."""
    from fpspec.arith.evaluate import evaluate
    from fpspec.infer.roundtrip import replica_target
    from fpspec.spec.expand import expand_arith

    spec = parse("op sum\nn in 2..\narithmetic { input = fp64 product = none accumulator = fp64 init = none "
                 "output = fp64 }\narithmetic part0 { accumulator = fp32 }\n"
                 "order split(min(3, n - 1), using(part0, rev), pairwise)\n")
    tree, main, regions = expand_arith(spec, 6)
    target = replica_target(spec, box="numpy")(6)
    rng = np.random.default_rng(3)
    X = rng.uniform(-1, 1, (200, 6)) * np.exp2(rng.integers(-20, 20, (200, 6)))
    want = np.array([target.run(x) for x in X])
    assert np.array_equal(evaluate(tree, X.T, None, main, regions), want)
