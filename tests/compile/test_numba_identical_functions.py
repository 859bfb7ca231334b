"""Numba replicas: generated functions that are the same up to their numbered locals are
compiled once (fpspec.compile.backends.numba note [identical functions])."""
import numpy as np

from fpspec.compile.backends.numba import merge_identical
from fpspec.compile.loops import Function, LoopProgram


def fn(name, body, params=("vals", "off", "step", "m")):
    return Function(name, params, tuple(body), f"{name}: reduce")


PAIR = ["r{0} = _add(vals[off], vals[off + step])", "for i{1} in range(2, m):",
        "    r{0} = _add(r{0}, vals[off + i{1} * step])", "return r{0}"]


def test_repeats_are_dropped_and_their_calls_go_to_the_first():
    program = LoopProgram(functions=(
        fn("_seq1_V", [line.format(3, 4) for line in PAIR]),
        fn("_seq2_V", [line.format(7, 9) for line in PAIR]),              # the same, other locals
        fn("_seq3_V", [line.format(7, 9).replace("_add(r", "_add__fma(r") for line in PAIR]),   # not the same
        fn("_seq4_V__fma", [line.format(3, 4) for line in PAIR]),          # the same text, another arithmetic
        fn("_reduce", ["v1 = _seq1_V(a, 0, 1, n)", "v2 = _seq2_V(a, 0, 1, n) + _seq3_V(a, 0, 1, n)",
                       "v3 = _seq4_V__fma(a, 0, 1, n)", "return _seq2_V2(v1, v2)"], ("a", "b", "n")),
    ), constants=(), uses_fused=False, uses_tables=False)
    merged = merge_identical(program)
    assert [f.name for f in merged.functions] == ["_seq1_V", "_seq3_V", "_seq4_V__fma", "_reduce"]
    assert merged.functions[-1].body == ("v1 = _seq1_V(a, 0, 1, n)", "v2 = _seq1_V(a, 0, 1, n) + _seq3_V(a, 0, 1, n)",
                                         "v3 = _seq4_V__fma(a, 0, 1, n)", "return _seq2_V2(v1, v2)")


def test_functions_that_differ_in_a_literal_stay_apart():
    program = LoopProgram(functions=(
        fn("_a1_V", ["r1 = vals[off] + 1.0", "return r1"]),
        fn("_a2_V", ["r2 = vals[off] + 2.0", "return r2"]),
        fn("_reduce", ["return _a1_V(a, 0, 1, n) + _a2_V(a, 0, 1, n)"], ("a", "b", "n")),
    ), constants=(), uses_fused=False, uses_tables=False)
    assert merge_identical(program) == program


def test_a_many_case_order_compiles_each_walk_once_and_keeps_its_bits():
    from fpspec.compile import compile_spec
    from fpspec.spec import parse

    cases = "\n".join(f"    elif n <= {n}: lanes(4, seq, pairwise)" for n in range(9, 11))
    spec = parse(f"op sum\nn in 1..12\narithmetic {{\n    input = fp32\n    accumulator = fp32\n}}\norder\n"
                 f"    if n <= 8: pairwise\n{cases}\n    else: rev\n")
    source = compile_spec(spec, target="numba")
    walks = [line for line in source.splitlines() if line.startswith("def _pairwise")]
    assert len(walks) == 2, walks
    scope: dict = {"__name__": "replica"}
    exec(compile(compile_spec(spec, target="numpy"), "numpy_replica", "exec"), scope)
    x = (np.random.default_rng(3).standard_normal(12) * 2.0 ** np.arange(-6, 6)).astype(np.float32)
    want = [scope["sum"](x[:n]).tobytes() for n in range(1, 13)]
    numba_scope: dict = {"__name__": "replica"}
    exec(compile(source, "numba_replica", "exec"), numba_scope)
    assert [numba_scope["sum"](x[:n]).tobytes() for n in range(1, 13)] == want


def test_a_step_one_walk_that_repeats_a_walk_at_any_step_calls_it():
    from fpspec.compile.backends.numba import step_one_walks

    walk = ["r{0} = _term(a, b, lo)", "for i{1} in range(1, m):", "    r{0} = _add_leaf(r{0}, a, b, lo + i{1} * step)",
            "return r{0}"]
    program = LoopProgram(functions=(
        fn("_w1_L", [line.format(3, 4) for line in walk], ("a", "b", "lo", "step", "m")),
        fn("_w2_L1", ["step = 1"] + [line.format(5, 6) for line in walk], ("a", "b", "lo", "m")),
        fn("_w3_L1", ["step = 1"] + [line.format(5, 6).replace("_add_leaf(", "_add_leaf__p(") for line in walk],
           ("a", "b", "lo", "m")),
        fn("_reduce", ["return _w2_L1(a, b, 0, n) + _w3_L1(a, b, 0, n)"], ("a", "b", "n")),
    ), constants=(), uses_fused=False, uses_tables=False)
    walks = step_one_walks(program).functions
    assert walks[1].body == ("return _w1_L(a, b, lo, np.int64(1), m)",)
    assert walks[0] == program.functions[0] and walks[2:] == program.functions[2:]
