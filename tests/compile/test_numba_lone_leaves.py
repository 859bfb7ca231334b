"""Lone product leaves on the numba target (fpspec.compile.backends.numpy note
[lone leaves at compile time]): a bounded range that meets one is refused by
compiling, as the numpy target refuses it; an unbounded range compiles and its
replica raises a plain ValueError at such an n, never a SystemError."""
from __future__ import annotations

import numpy as np
import pytest
from conftest import load_replica

from fpspec.compile import compile_spec
from fpspec.compile.ir import CompileError
from fpspec.spec import parse


def spec(n_range: str):
    return parse(f'target "test.gemv"\nop gemv\nn in {n_range}\n\narithmetic {{\n    input = fp32\n'
                 "    product = fma\n    accumulator = fp32\n    init = none\n    output = fp32\n}\n\n"
                 "order lanes(4, seq, pairwise)\n")


def test_bounded_range_is_refused_at_compile_time_like_numpy():
    with pytest.raises(CompileError) as numpy_refusal:
        compile_spec(spec("2..12"), "numpy")
    with pytest.raises(CompileError) as numba_refusal:
        compile_spec(spec("2..12"), "numba")
    assert str(numba_refusal.value) == str(numpy_refusal.value)
    assert str(numba_refusal.value).startswith("at n = 5 this order puts a lone product leaf")


def test_unbounded_range_raises_a_plain_value_error_at_the_lone_n():
    nb = load_replica(compile_spec(spec("1.."), "numba"), "lone_gemv_unbounded")
    A, x = np.ones((3, 5), np.float32), np.ones(5, np.float32)
    with pytest.raises(ValueError, match="lone product leaf"):
        nb.gemv(A, x)
    A, x = np.ones((3, 8), np.float32), np.ones(8, np.float32)
    assert nb.gemv(A, x).tolist() == [8.0, 8.0, 8.0]
