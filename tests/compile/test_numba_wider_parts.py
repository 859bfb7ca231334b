"""Parts (`using`) narrower than the code around them, meeting its partial sums: the sum enters
the part's node exactly and the node rounds once (fpspec.arith.evaluate note [regions];
fpspec.compile.runtime.numba_rt note [wider partial sums]).  Each replica is written to a file
and run in a fresh interpreter; the inputs put the exact sum just above a midpoint of fp32 that
a float64 sum, or a partial sum rounded to fp32 first, turns into a tie (2**20 + 2**-4 + 2**-48:
fp32 gives 2**20 + 2**-3, either shortcut 2**20)."""
from __future__ import annotations

import numpy as np
import pytest
from fresh_replicas import assert_fresh_bits, reference_outputs, run_fresh

from fpspec.compile import compile_spec
from fpspec.spec import parse

ABOVE_TIE = 2.0 ** 20 + 2.0 ** -3     # fp32 of 2**20 + 2**-4 + 2**-48
TIE = 2.0 ** 20 + 2.0 ** -4          # a float64 partial sum that is an fp32 midpoint


def spec(op: str, n: int, main: str, part: str, order: str, output: str = "fp32", shape: str = ""):
    return parse(f'target "test.parts"\nop {op}\nn in {n}\n{shape}\narithmetic {{\n    {main}\n    init = none\n'
                 f"    output = {output}\n}}\n\narithmetic part0 {{\n    {part}\n}}\n\norder {order}\n")


# a lone fp16 leaf fused by an fp32 FMA part into the fp64 sum of the leaves before it
FMA_MAIN = "input = fp16\n    product = fma\n    accumulator = fp64"
FMA_PART = "accumulator = fp32\n    product = fma"
FMA_ORDER = "tail(4, seq, using(part0, seq))"
# fp32 products summed in fp64, parts adding those sums in fp32
ROUNDED_MAIN = "input = fp32\n    product = rounded\n    accumulator = fp64"
ROUNDED_PART = "accumulator = fp32\n    product = rounded"

CASES = {
    # _fma_into: the part's FMA over a float64 partial sum (numba refused to type it)
    "fma over a wider sum": (spec("dot", 5, FMA_MAIN, FMA_PART, FMA_ORDER),
                             [2.0 ** 10, 2.0 ** -2, 0, 0, 2.0 ** -24], ABOVE_TIE),
    # the same through the recorded rows of a gemv (note [schedules])
    "fma over a wider sum, gemv": (spec("gemv", 5, FMA_MAIN, FMA_PART, FMA_ORDER,
                                        shape="provenance {\n    shape {\n        m = 2\n    }\n}\n"),
                                   [2.0 ** 10, 2.0 ** -2, 0, 0, 2.0 ** -24], ABOVE_TIE),
    # _add_exact: a part's node over two float64 block sums rounds their exact sum once
    "sum of wider sums": (spec("dot", 4, ROUNDED_MAIN, ROUNDED_PART, "blocks(2, seq, using(part0, seq))"),
                          [2.0 ** 20, 2.0 ** -4, 2.0 ** -48, 0], ABOVE_TIE),
    # _vals_wide: lane 1 of the part is one block sum, kept whole in the part's list
    "lone wider sum in a part's list": (spec("dot", 6, ROUNDED_MAIN, ROUNDED_PART,
                                             "blocks(2, seq, using(part0, lanes(2, seq, seq)))"),
                                        [2.0 ** -48, 0, 2.0 ** 20, 2.0 ** -4, 0, 0], ABOVE_TIE),
    # lanes folded in a part over partial sums: the lane results are the enclosing code's values
    # (they were stored in the part's fp32 list: seed 501 spec 1101 of the random-spec soak)
    "lanes of a part over wider sums": (spec("dot", 4, ROUNDED_MAIN, ROUNDED_PART,
                                             "blocks(2, seq, lanes(2, using(part0, seq), seq))", output="fp64"),
                                        [2.0 ** 20, 2.0 ** -4, 2.0 ** -48, 0], TIE),
    # a node of the part over a phantom (fpspec.compile.loops note [phantoms]) vanishes in the model:
    # the fp64 sum beside it passes whole (seed 502 spec 1775 of the random-spec soak)
    "a phantom beside a wider sum in a part": (spec("dot", 4, ROUNDED_MAIN, ROUNDED_PART,
                                                    "blocks(2, seq, pad(3, tail(2, seq, using(part0, seq))))",
                                                    output="fp64"),
                                               [2.0 ** 20, 2.0 ** -4, 0, 0], TIE),
}


def _args(s, x):
    """(x, y) of a dot, (A, y) of a gemv whose row 0 is x: an fp16 x times itself (its squares are
    the terms), an fp32 x times ones."""
    x = np.asarray(x, np.float16 if "fp16" in str(s) else np.float32)
    y = x.copy() if x.dtype == np.float16 else np.ones_like(x)
    if s.header.op == "gemv":
        rng = np.random.default_rng(0)
        return (np.stack([x, rng.uniform(-1, 1, x.size).astype(x.dtype)]), y)
    return (x, y)


@pytest.mark.parametrize("target", ["numpy", "numba"])
def test_a_wider_partial_sum_enters_the_parts_node_exactly(tmp_path, target):
    calls, wants = [], []
    rng = np.random.default_rng(7)
    for name, (s, x, want0) in CASES.items():
        source = compile_spec(s, target)
        if target == "numba" and s.header.op == "gemv":
            assert "_SCHEDULED = True" in source       # the recorded rows, not the compiled order
        args = _args(s, x)
        want = reference_outputs(s, s.header.op, args)
        assert want[0] == want0, name                 # the spec's bits are the single rounding
        calls.append((source, s.header.op, args))
        wants.append((f"{target}: {name}", want))
        # and inputs with nothing special about them
        args = tuple((rng.uniform(-1, 1, a.shape) * 2.0 ** rng.integers(-12, 12, a.shape)).astype(a.dtype)
                     for a in args)
        calls.append((source, s.header.op, args))
        wants.append((f"{target}: {name}, random inputs", reference_outputs(s, s.header.op, args)))
    for got, (what, want) in zip(run_fresh(calls, tmp_path), wants):
        assert_fresh_bits(got, want, what)
