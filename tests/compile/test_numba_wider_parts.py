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


def spec(op: str, n, order: str, shape: str = ""):
    """fp32 products summed in fp64 (an FMA per leaf), a part adding in fp32 (part0) and an fp32
    FMA part (part1)."""
    return parse(f'target "test.parts"\nop {op}\nn in {n}\n{shape}\narithmetic {{\n    input = fp32\n'
                 "    product = fma\n    accumulator = fp64\n    init = none\n    output = fp64\n}\n\n"
                 "arithmetic part0 {\n    accumulator = fp32\n    product = rounded\n}\n\n"
                 f"arithmetic part1 {{\n    accumulator = fp32\n    product = fma\n}}\n\norder {order}\n")


# one case per n (one replica)
DOT = spec("dot", "4..7", """
    if n == 4: blocks(2, seq, pad(3, tail(2, seq, using(part0, seq))))
    elif n == 5: blocks(2, seq, using(part0, lanes(2, seq, seq)))
    elif n == 6: blocks(3, seq, lanes(2, using(part0, seq), seq))
    else: tail(4, seq, using(part1, seq))""")
# the FMA case through the recorded rows of a gemv (note [schedules])
GEMV = spec("gemv", 5, "tail(4, seq, using(part1, seq))", "provenance {\n    shape {\n        m = 2\n    }\n}\n")
FMA_TERMS = [2.0 ** 10, 2.0 ** -2, 0, 0, 2.0 ** -24, 0, 0]   # x = y: the terms 2**20, 2**-4, 0, 0, 2**-48

CASES = {
    # a node of the part over a phantom (fpspec.compile.loops note [phantoms]) vanishes in the model:
    # the fp64 sum beside it passes whole (seed 502 spec 1775 of the random-spec soak)
    "a phantom beside a wider sum in a part": (DOT, [2.0 ** 20, 2.0 ** -4, 0, 0], None, TIE),
    # `_vals_wide`: lane 1 of the part is one block sum, kept whole in the part's list; `_add_exact`:
    # the part's last node rounds the exact sum of lane 0 and that fp64 sum once
    "lone wider sum in a part's list": (DOT, [2.0 ** -48, 0, 2.0 ** 20, 2.0 ** -4, 0], None, ABOVE_TIE),
    # lanes folded in a part over partial sums: the lane results are the enclosing code's values
    # (they were stored in the part's fp32 list: seed 501 spec 1101 of the random-spec soak)
    "lanes of a part over wider sums": (DOT, [2.0 ** 20, 2.0 ** -4, 0, 2.0 ** -48, 0, 0], None, TIE),
    # `_fma_into`: a lone leaf fused by the fp32 FMA part into the fp64 sum of the leaves before it
    # (numba refused to type it: seed 502 spec 377 and others of the random-spec soak)
    "fma over a wider sum": (DOT, FMA_TERMS, FMA_TERMS, ABOVE_TIE),
    "fma over a wider sum, gemv": (GEMV, FMA_TERMS[:5], FMA_TERMS[:5], ABOVE_TIE),
}


def _args(s, x, y):
    """(x, y) of a dot (y: ones by default), (A, y) of a gemv whose row 0 is x."""
    x = np.asarray(x, np.float32)
    y = np.ones_like(x) if y is None else np.asarray(y, np.float32)
    if s.header.op == "gemv":
        return (np.stack([x, np.random.default_rng(0).uniform(-1, 1, x.size).astype(np.float32)]), y)
    return (x, y)


def _wider_sums():
    """(what, replica source, function, args, want) of the cases above, for numpy and numba."""
    rng = np.random.default_rng(7)
    for target in ("numpy", "numba"):
        sources = {}
        for name, (s, x, y, want0) in CASES.items():
            source = sources[id(s)] = sources.get(id(s)) or compile_spec(s, target)
            if target == "numba" and s.header.op == "gemv":
                assert "_SCHEDULED = True" in source       # the recorded rows, not the compiled order
            args = _args(s, x, y)
            want = reference_outputs(s, s.header.op, args)
            assert want[0] == want0, name                 # the spec's bits are the single rounding
            yield f"{target}: {name}", source, s.header.op, args, want
            # and inputs with nothing special about them
            args = tuple((rng.uniform(-1, 1, a.shape) * 2.0 ** rng.integers(-12, 12, a.shape)).astype(a.dtype)
                         for a in args)
            yield f"{target}: {name}, random inputs", source, s.header.op, args, reference_outputs(s, s.header.op, args)


# an order that calls itself inside tail: a recorded plan (numba backend note [plans]) whose row
# for g (fp64 FMA nodes over a tagged list) calls the compiled function for every carrier a list
# may have, part0's fp32 lists included
RECORDED_FMA = parse("op dot\nn in 3\narithmetic { input = fp32 product = fma accumulator = fp64 init = none "
                     "output = fp64 }\narithmetic part0 { accumulator = fp32 product = rounded }\n"
                     "let g = seq\nlet f = if n <= 2: using(part0, seq) else: tail(2, f, g)\norder f\n")


def _recorded_fma():
    source = compile_spec(RECORDED_FMA, "numba")
    assert "_record_plan(n, _PLAN_ENTRY" in source and "buf = _vals__part0(" in source   # g on an fp32 list
    # ((0 1) 2): part0's fp32 sum 1 + 2**-23, then fma(3, 2**-40, it) in fp64
    args = (np.array([1 + 2.0 ** -23, 0, 3], np.float32), np.array([1, 0, 2.0 ** -40], np.float32))
    want = reference_outputs(RECORDED_FMA, "dot", args)
    assert want.tolist() == [1 + 2.0 ** -23 + 3 * 2.0 ** -40]
    yield "numba", source, "dot", args, want


# pad's block ends with two phantoms (fpspec.compile.loops note [phantoms]) beside an fp64 block sum,
# folded by the fp32 part: at n = 4 the sum meets one phantom, then the other; at n = 6 the two
# phantoms meet first (rev), then the sum.  The model has no node there: the sum passes whole.
TWO_PHANTOMS = spec("dot", "4..6", """
    if n == 4: blocks(2, seq, pad(4, split(1, seq, using(part0, seq))))
    elif n == 6: blocks(2, seq, pad(5, split(1, seq, using(part0, rev))))
    else: seq""")


def _two_phantoms():
    wide = 2.0 ** -4 + 2.0 ** -48          # an fp64 block sum (fp32 would give 2**-4)
    cases = {4: ([0, 0, 2.0 ** -4, 2.0 ** -48], wide),
             6: ([0, 0, 2.0 ** 20, 2.0 ** -4, 2.0 ** -48, 0], ABOVE_TIE)}   # part0's node: one rounding
    for target in ("numpy", "numba"):
        source = compile_spec(TWO_PHANTOMS, target)
        for n, (x, want0) in cases.items():
            args = _args(TWO_PHANTOMS, x, None)
            want = reference_outputs(TWO_PHANTOMS, "dot", args)
            assert want[0] == want0, n
            yield f"{target}, n = {n}", source, "dot", args, want


GROUPS = {"wider sums": _wider_sums, "recorded fma": _recorded_fma, "two phantoms": _two_phantoms}


@pytest.fixture(scope="module")
def fresh(tmp_path_factory):
    """group -> [(what, the replica's outputs in one fresh interpreter for the file, the reference)]."""
    cases = [(group, what, source, function, args, want)
             for group, make in GROUPS.items() for what, source, function, args, want in make()]
    outputs = run_fresh([(source, function, args) for _, _, source, function, args, _ in cases],
                        tmp_path_factory.mktemp("wider"))
    got = {group: [] for group in GROUPS}
    for (group, what, *_, want), out in zip(cases, outputs):
        got[group].append((what, out, want))
    return got


def _assert_group(fresh, group: str, count: int) -> None:
    assert len(fresh[group]) == count
    for what, got, want in fresh[group]:
        assert_fresh_bits(got, want, what)


def test_a_wider_partial_sum_enters_the_parts_node_exactly(fresh):
    _assert_group(fresh, "wider sums", 4 * len(CASES))


def test_an_fp64_fma_node_widens_a_narrower_sum_exactly(fresh):
    """The other way round: code of an fp64 FMA typed for an fp32 list widens the fp32 sum
    exactly (numba refused to type it, and the replica file failed at its first call: seed 502
    spec 2439 of the random-spec soak)."""
    _assert_group(fresh, "recorded fma", 1)


def test_two_phantoms_in_a_row_leave_a_wider_sum_whole(fresh):
    _assert_group(fresh, "two phantoms", 4)
