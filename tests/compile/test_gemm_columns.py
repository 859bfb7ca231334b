"""Numba gemm by columns (note [gemm by columns] in fpspec.compile.backends.numba):
the column-blocked kernel gives the bits of the per-output kernel and of the
NumPy replica, for every order and arithmetic it is chosen for."""
from __future__ import annotations

import numpy as np
import pytest
from conftest import assert_same_bits, load_replica

from fpspec.compile import compile_spec
from fpspec.inputs import samples
from fpspec.spec import parse

ARITH = {
    "fma": "input = fp32\n    product = fma\n    accumulator = fp32\n    init = +0.0\n    output = fp32",
    "rounded": "input = fp32\n    product = rounded\n    accumulator = fp32\n    init = none\n    output = fp32",
    "fp16-exact": "input = fp16\n    product = exact\n    accumulator = fp32\n    init = none\n    output = fp16",
    "bf16-fma": "input = bf16\n    product = fma\n    accumulator = bf16\n    init = none\n    output = bf16",
}
ORDERS = {"seq": (1, "seq"), "blocks5": (1, "blocks(5, seq, seq)"), "lanes2": (4, "lanes(2, seq, seq)"), "lanes3": (6, "lanes(3, seq, pairwise)")}


def spec(order: str, arith: str):
    return parse(f'target "test.gemm"\nop gemm\nn in 1..\n\narithmetic {{\n    {ARITH[arith]}\n}}\n\n'
                 f"order {ORDERS[order][1]}\n")


# each order and each arithmetic at least once (numba compiles are slow here)
@pytest.mark.parametrize("order,arith", [("seq", "rounded"), ("lanes2", "fma"), ("lanes3", "fp16-exact"),
                                         ("lanes2", "bf16-fma"), ("blocks5", "fma"),
                                         ("blocks5", "rounded")])
def test_columns_kernel_matches_per_output_kernel(order, arith):
    nb = load_replica(compile_spec(spec(order, arith), "numba"), f"cols_{order}_{arith}")
    ref = load_replica(compile_spec(spec(order, arith), "numpy"), f"cols_np_{order}_{arith}")
    assert nb._GEMM_COLUMNS_MIN == ORDERS[order][0]
    fmt = {"fp16-exact": "fp16", "bf16-fma": "bf16"}.get(arith, "fp32")
    for n in sorted({ORDERS[order][0], 7, 13, 29, 30}):   # 29, 30: whole unrolled passes and a remainder
        for s in samples("gemm", n, fmt, 6, seed=n, m=3, ncols=5):
            A, B = s.args
            A, B = nb._carried(nb._input(A, "A")), nb._carried(nb._input(B, "B"))
            cols = np.empty((A.shape[0], B.shape[1]), nb._OUT_CARRY)
            nb._gemm_columns_kernel(A, B, cols)
            each = np.empty_like(cols)
            nb._gemm_kernel(A, np.ascontiguousarray(B.T), each, nb._plan(A.shape[1]))
            assert_same_bits(cols, each, f"{order} {arith} n={n} {s.describe()}")
            assert_same_bits(nb.gemm(*s.args), ref.gemm(*s.args), f"{order} {arith} n={n} {s.describe()} vs numpy")


def test_wide_gemm_crosses_column_tiles():
    """More columns than one tile, and a ragged last tile."""
    nb = load_replica(compile_spec(spec("lanes2", "fma"), "numba"), "cols_lanes2_fma")
    rng = np.random.default_rng(5)
    A = rng.standard_normal((3, 9)).astype(np.float32)
    B = rng.standard_normal((9, 300)).astype(np.float32)
    each = np.empty((3, 300), np.float32)
    nb._gemm_kernel(A, np.ascontiguousarray(B.T), each, nb._plan(A.shape[1]))
    assert_same_bits(nb.gemm(A, B), each, "300 columns")


def test_blocks_with_a_lone_leaf_run_by_the_per_output_kernel():
    # n = 11: the last block of 5 is one leaf, which the fold fuses (fpspec.compile.loops note
    # [lone leaves]); the columns form would add it rounded, so such n go one output at a time
    nb = load_replica(compile_spec(spec("blocks5", "fma"), "numba"), "cols_blocks5_fma")
    assert nb._GEMM_LONE == 5
    A = np.zeros((2, 11), np.float32)
    A[:, 0], A[:, 10] = -(1 + 2.0 ** -11), 1 + 2.0 ** -12
    B = np.zeros((11, 3), np.float32)
    B[0], B[10] = 1, 1 + 2.0 ** -12
    assert nb.gemm(A, B).tolist() == [[2.0 ** -24] * 3] * 2


def test_orders_without_columns_form_keep_per_output_kernel():
    text = 'target "t"\nop gemm\nn in 1..\n\narithmetic {\n    ' + ARITH["fma"] + "\n}\n\norder pairwise\n"
    nb = load_replica(compile_spec(parse(text), "numba"), "cols_pairwise")
    assert nb._GEMM_COLUMNS_MIN is None
