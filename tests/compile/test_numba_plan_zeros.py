"""A phantom of `pad` over partial sums is -0.0 (fpspec.compile.loops note
[phantoms]) in a numba replica run by a plan (a recursive order, note [plans]
in fpspec.compile.backends.numba) too: a sum of -0.0s stays -0.0, as the model
says."""
from __future__ import annotations

import numpy as np
from fresh_replicas import assert_fresh_bits, reference_outputs, run_fresh

from fpspec.compile import compile_spec
from fpspec.spec import parse

SPEC = parse('target "test.sum"\nop sum\nn in 6\n\narithmetic {\n    input = fp32\n    product = none\n'
             "    accumulator = fp32\n    init = none\n    output = fp32\n}\n\n"
             "let r = if n <= 2: seq else: lanes(2, r, seq)\n\n"
             "order lanes(3, r, pad(4, seq))\n")


def test_pad_phantoms_over_partial_sums_keep_negative_zero_in_a_plan(tmp_path):
    source = compile_spec(SPEC, "numba")
    assert "_PLAN_ENTRY = _reduce" in source       # the order runs by a plan
    X = np.stack([np.full(6, -0.0), np.array([-0.0, 1.5, -1.5, -0.0, 2.0, -2.0])], axis=1).astype(np.float32)
    want = reference_outputs(SPEC, "sums", (X,))
    assert np.signbit(want[0])
    (got,) = run_fresh([(source, "sums", (X,))], tmp_path)
    assert_fresh_bits(got, want, "sums")
