"""Numba replicas: each case of an order on n is compiled on its own, and a call
compiles only the case of its length (fpspec.compile.backends.numba note
[length cases])."""
import numpy as np
import pytest

from fpspec.compile import compile_spec
from fpspec.spec import parse

SPEC = ("op sum\nn in 1..16\narithmetic {\n    input = fp32\n    accumulator = fp32\n}\norder\n"
        "    if n <= 4: pairwise\n    elif n <= 8: lanes(2, seq, seq)\n    else: rev\n")


def load(source: str) -> dict:
    scope: dict = {"__name__": "replica"}
    exec(compile(source, "replica", "exec"), scope)
    return scope


def test_a_call_compiles_only_the_case_of_its_length_and_keeps_the_bits():
    spec = parse(SPEC)
    replica = load(compile_spec(spec, target="numba"))
    reference = load(compile_spec(spec, target="numpy"))
    assert [replica["_plan"](n) for n in (1, 4, 5, 8, 9, 16)] == [
        replica["_reduce_c0"]] * 2 + [replica["_reduce_c1"]] * 2 + [replica["_reduce_c2"]] * 2
    x = (np.random.default_rng(5).standard_normal(16) * 2.0 ** np.arange(-8, 8)).astype(np.float32)
    assert replica["sum"](x[:6]).tobytes() == reference["sum"](x[:6]).tobytes()
    compiled = [len(replica[f"_reduce_c{c}"].signatures) for c in range(3)]
    assert compiled == [0, 1, 0]
    for n in (3, 7, 13):
        assert replica["sum"](x[:n]).tobytes() == reference["sum"](x[:n]).tobytes()
    assert [len(replica[f"_reduce_c{c}"].signatures) for c in range(3)] == [1, 1, 1]


def test_an_order_without_cases_stays_one_compiled_reduce():
    replica = load(compile_spec(parse(SPEC.split("order")[0] + "order pairwise\n"), target="numba"))
    assert "_reduce_c0" not in replica and replica["_plan"](5) is replica["_NO_PLAN"]
    x = np.arange(1, 6, dtype=np.float32)
    assert replica["sum"](x) == np.float32(15.0) and len(replica["_reduce"].signatures) == 1


def test_code_for_lengths_a_case_never_has_is_dropped():
    from fpspec.compile.backends.numba import short_lengths_dropped

    lines = ("if (n < 8):", "    r2 = _x(a, b, n)", "else:", "    r2 = _y(a, b, n)", "r1 = r2")
    assert short_lengths_dropped(lines, 8) == ("r2 = _y(a, b, n)", "r1 = r2")
    assert short_lengths_dropped(lines, 7) == lines
    spec = parse(SPEC.split("order")[0].replace("1..16", "1..40")
                 + "order\n    if n <= 7: seq\n    else: tail(8, lanes(2, seq, pairwise), split(1, seq, seq))\n")
    source = compile_spec(spec, target="numba")
    case = source[source.index("def _reduce_c1("):source.index("def _plan(")]
    assert "(n < 8)" not in case and "(n < 8)" in compile_spec(spec, target="numpy")
    replica, reference = load(source), load(compile_spec(spec, target="numpy"))
    x = (np.random.default_rng(7).standard_normal(40) * 2.0 ** np.arange(-20, 20)).astype(np.float32)
    assert ([replica["sum"](x[:n]).tobytes() for n in range(1, 41)]
            == [reference["sum"](x[:n]).tobytes() for n in range(1, 41)])
