"""Arms of a position-dependent order (fpspec.compile.positions) that each run
by a plan (note [plans] in fpspec.compile.backends.numba) keep their own plans
at the same n: every output has the bits of its own arm's tree."""
from __future__ import annotations

import numpy as np
from fresh_replicas import assert_fresh_bits, reference_outputs, run_fresh

from fpspec.compile import compile_spec
from fpspec.spec import parse

SPEC = parse('target "test.gemm"\nop gemm\nn in 6\nprovenance {\n    shape {\n        m = 2\n        ncols = 1\n'
             "    }\n}\n\narithmetic {\n    input = fp64\n    product = rounded\n    accumulator = fp64\n"
             "    init = none\n    output = fp64\n}\n\n"
             "let r = if n <= 2: seq else: lanes(2, r, seq)\n"
             "let s = if n <= 2: rev else: lanes(3, s, rev)\n\n"
             "order\n    if i < 1: r\n    else: s\n")


def test_each_arm_runs_its_own_plan(tmp_path):
    A = np.array([[1e16, 1.0, -1e16, 1.0, 3.0, -3.0]] * 2)
    B = np.array([[1.0], [1.0], [1.0], [1.0], [1.0], [1.0]])
    want = reference_outputs(SPEC, "gemm", (A, B))
    assert want[0] != want[1]      # the arms' orders give different bits here
    (got,) = run_fresh([(compile_spec(SPEC, "numba"), "gemm", (A, B))], tmp_path)
    assert_fresh_bits(got, want, "gemm")


def test_an_arm_without_a_plan_before_arms_with_plans(tmp_path):
    """A gemv whose first arm (a part over lanes) runs without a plan and whose later arms
    record theirs through the one shared `_record_plan`: spec 445 of the random-spec soak's
    seed 501 (NameError _PLAN_ENTRY)."""
    from fpspec.spec.generate import random_spec

    spec = random_spec(np.random.default_rng([501, 445]))
    assert spec.header.op == "gemv"
    rng = np.random.default_rng(0)
    A, x = rng.standard_normal((5, 9)).astype(np.float32), rng.standard_normal(9).astype(np.float32)
    want = reference_outputs(spec, "gemv", (A, x))
    (got,) = run_fresh([(compile_spec(spec, "numba"), "gemv", (A, x))], tmp_path)
    assert_fresh_bits(got, want, "gemv")
