"""Lone product leaves on the numba target (fpspec.compile.loops note [lone leaves]): a
bounded range whose lengths put a lane of one product among partial sums compiles, and its
replica, run in a fresh interpreter, gives the reference bits at every n of the range, as
the numpy replica does."""
from __future__ import annotations

import numpy as np
from fresh_replicas import assert_fresh_bits, reference_outputs, run_fresh

from fpspec.compile import compile_spec
from fpspec.spec import parse


def spec(n_range: str):
    return parse(f'target "test.gemv"\nop gemv\nn in {n_range}\n\narithmetic {{\n    input = fp32\n'
                 "    product = fma\n    accumulator = fp32\n    init = none\n    output = fp32\n}\n\n"
                 "order lanes(4, seq, pairwise)\n")


def test_every_n_of_a_bounded_range_with_lone_lanes_runs_like_the_reference(tmp_path):
    s = spec("2..12")
    rng = np.random.default_rng(3)
    calls, wants = [], []
    for target in ("numpy", "numba"):
        source = compile_spec(s, target)
        for n in range(2, 13):
            # products that an FMA keeps and a rounding loses, with cancellation between lanes
            A = (rng.standard_normal((3, n)) * 2.0 ** rng.integers(-8, 8, (3, n))).astype(np.float32)
            x = (1 + rng.standard_normal(n) * 2.0 ** -10).astype(np.float32)
            calls.append((source, "gemv", (A, x)))
            wants.append((f"{target} n = {n}", reference_outputs(s, "gemv", (A, x))))
    for got, (what, want) in zip(run_fresh(calls, tmp_path), wants):
        assert_fresh_bits(got, want, what)
