"""A literal tree applied to one operand returns it (docs/fps.md: an order applied to one
operand returns it).  The outer order of a tail whose body took every operand holds only the
body's result: range inference writes such specs (`tail(16, LITERAL, if n <= 8: LITERAL ...)`
for an einsum GEMV), which `check` and `show` accepted while the replicas raised
"a literal tree over 4 operands met a different count"."""
from __future__ import annotations

import numpy as np
import pytest
from fresh_replicas import assert_fresh_bits, reference_outputs, run_fresh

from fpspec.compile import compile_spec
from fpspec.spec import check, parse

SPEC = """\
op sum
n in 4
arithmetic { input = fp32 product = none accumulator = fp32 init = none output = fp32 }
order tail(4, (((0 1) 2) 3), (((0 1) 2) 3))
"""


@pytest.mark.parametrize("target", ["numpy", "numba"])
def test_a_literal_over_the_body_result_alone_returns_it(target, tmp_path):
    spec = parse(SPEC)
    check(spec)
    x = np.array([1e8, 1.0, -1e8, 1.0], np.float32)          # (((1e8 1) -1e8) 1) = 1 in fp32
    want = reference_outputs(spec, "sum", (x,))
    assert want.tolist() == [1.0]
    (got,) = run_fresh([(compile_spec(spec, target=target), "sum", (x,))], tmp_path)
    assert_fresh_bits(got, want, target)
