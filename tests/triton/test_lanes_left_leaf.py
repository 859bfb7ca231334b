"""A lanes order with LEFT (and an unroll U) over a block of contiguous terms is not a leaf
block: the lanes take the first m - m % U terms only and LEFT joins the rest to lane 0.  The
sum kernels once read `lanes(2, seq, pairwise, rev, 8)` over 12 terms as 2 lanes of 6 (the
soak's seed 502 spec 3099: one ulp off at n = 38 on subnormal inputs).  The replica runs as a
user runs it: written to a file, imported in a fresh interpreter (tests/fresh_replicas.py)."""
from __future__ import annotations

import numpy as np
from fresh_replicas import assert_fresh_bits, reference_outputs, run_fresh

from fpspec.compile import compile_spec
from fpspec.spec import check, parse

SPEC = ("op sum\nn in 1..38\n"
        "arithmetic { input = fp32 product = none accumulator = fp32 init = none output = fp32 }\n"
        "order blocks(13, lanes(2, seq, pairwise, rev, 8), seq)\n")

# three terms of the lanes' leftovers (8..11 of a block of 12): (8 (9 (10 11))) in the spec,
# 10 + (9 + 11) in two lanes of 6: the sums differ in the last bit
LEFTOVERS = {9: -7.613815076062461e-41, 10: -4.121756321670202e-38, 11: -1.0628560184420087e-38}


def _terms(n: int, offset: int = 0) -> np.ndarray:
    x = np.zeros(n, np.float32)
    for k, v in LEFTOVERS.items():
        x[offset + k] = v
    return x


def test_lanes_with_left_in_a_block_sum_like_the_spec(tmp_path):
    spec = parse(SPEC)
    check(spec)
    source = compile_spec(spec, target="triton")
    cases = [(12, 0), (38, 26)]   # the first block alone; the last of three blocks
    got = run_fresh([(source, "sum", (_terms(n, offset),), "float32") for n, offset in cases], tmp_path)
    for (n, offset), out in zip(cases, got):
        assert_fresh_bits(out, reference_outputs(spec, "sum", (_terms(n, offset),)), f"triton sum at n = {n}")
    # the two readings differ on these terms (the old leaf block fails this test)
    x = _terms(12)
    assert np.float32(reference_outputs(spec, "sum", (x,))[0]) != np.float32(x[10] + np.float32(x[9] + x[11]))
