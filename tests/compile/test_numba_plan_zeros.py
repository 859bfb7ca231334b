"""A phantom of `pad` over partial sums is -0.0 (fpspec.compile.loops note
[phantoms]) in a numba replica run by a plan (a recursive order, note [plans]
in fpspec.compile.backends.numba) too: a sum of -0.0s stays -0.0, as the model
says."""
from __future__ import annotations

import numpy as np
from conftest import assert_same_bits, load_replica

from fpspec.arith.evaluate import evaluate
from fpspec.compile import compile_spec
from fpspec.spec import parse
from fpspec.spec.expand import expand_arith

SPEC = parse('target "test.sum"\nop sum\nn in 6\n\narithmetic {\n    input = fp32\n    product = none\n'
             "    accumulator = fp32\n    init = none\n    output = fp32\n}\n\n"
             "let r = if n <= 2: seq else: lanes(2, r, seq)\n\n"
             "order lanes(3, r, pad(4, seq))\n")


def test_pad_phantoms_over_partial_sums_keep_negative_zero_in_a_plan():
    nb = load_replica(compile_spec(SPEC, "numba"), "plan_pad_zeros")
    assert nb._PLAN_ENTRY is not None        # the order runs by a plan
    tree, main, regions = expand_arith(SPEC, 6)
    X = np.stack([np.full(6, -0.0), np.array([-0.0, 1.5, -1.5, -0.0, 2.0, -2.0])], axis=1).astype(np.float32)
    want = evaluate(tree, X.astype(np.float64), None, main, regions)
    assert np.signbit(want[0])
    assert_same_bits(nb.sums(X), want.astype(np.float32), "sums")
