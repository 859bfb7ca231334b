"""Numba gemm in register tiles (note [gemm tiles] in fpspec.compile.backends.numba):
the tiled kernel gives the bits of the per-output kernel, of the NumPy
replica and of numpy.matmul, for every order and arithmetic it is chosen for,
at lengths that cross the blocks, the lanes and the lone leaves, and
at shapes with whole tiles, rows left over and columns left over."""
from __future__ import annotations

import re
import warnings

import numpy as np
import pytest
from conftest import assert_same_bits, load_replica, spec_from_trees

from fpspec.compile import compile_spec
from fpspec.inputs import samples
from fpspec.spec import parse

ARITH = {
    "fma": "input = fp32\n    product = fma\n    accumulator = fp32\n    init = +0.0\n    output = fp32",
    "rounded": "input = fp32\n    product = rounded\n    accumulator = fp32\n    init = none\n    output = fp32",
    "fp64": "input = fp64\n    product = rounded\n    accumulator = fp64\n    init = none\n    output = fp64",
    "fp16-exact": "input = fp16\n    product = exact\n    accumulator = fp32\n    init = none\n    output = fp16",
}
FMT = {"fma": "fp32", "rounded": "fp32", "fp64": "fp64", "fp16-exact": "fp16"}


def spec(order: str, arith: str):
    return parse(f'target "test.gemm"\nop gemm\nn in 1..\n\narithmetic {{\n    {ARITH[arith]}\n}}\n\n'
                 f"order {order}\n")


def outcome(fn, *args):
    """fn(*args), or "refused" for the lone-leaf refusal (a ValueError; numba's
    per-output kernel raises it inside prange, which numba reports as a
    SystemError: as on main, see the report)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return fn(*args)
        except (ValueError, SystemError) as e:
            assert isinstance(e, ValueError) or "exception set" in str(e), e
            return "refused"


# (order, arithmetic, (rows, columns, block, lanes) of a tile); numba compiles are slow here
CASES = [
    ("blocks(6, lanes(2, seq, seq), seq)", "fma", (3, 16, 6, 2)),     # numpy.matmul's order at 512^3
    ("blocks(5, seq, seq)", "rounded", (6, 16, 5, 1)),
    ("lanes(3, seq, pairwise)", "fp64", (2, 8, 0, 3)),
    ("seq", "fma", (6, 16, 0, 1)),
]


@pytest.mark.parametrize("order,arith,tile", CASES)
def test_tiles_match_per_output_kernel_and_numpy_replica(order, arith, tile):
    nb = load_replica(compile_spec(spec(order, arith), "numba"), f"tiles_{re.sub(r'[^a-z0-9]', '', order)}_{arith}")
    ref = load_replica(compile_spec(spec(order, arith), "numpy"), f"tiles_np_{re.sub(r'[^a-z0-9]', '', order)}_{arith}")
    assert nb._GEMM_TILE == tile
    rows, columns = tile[:2]
    shapes = [(rows, columns), (2 * rows + 1, 2 * columns + 5)]       # whole tiles; rows and columns left over
    for n in (1, 2, 3, 4, 5, 6, 7, 11, 12, 13, 29, 30):
        for m, p in shapes:
            for s in samples("gemm", n, FMT[arith], 3, seed=n + m, m=m, ncols=p):
                A, B = s.args
                got = outcome(nb.gemm, A, B)
                want = outcome(ref.gemm, A, B)
                what = f"{order} {arith} n={n} {m}x{p} {s.describe()}"
                if isinstance(want, str):
                    assert got == want, what
                    continue
                assert_same_bits(got, want, what + " vs numpy replica")
                a, b = nb._carried(nb._input(A, "A")), nb._carried(nb._input(B, "B"))
                each = np.empty((m, p), nb._OUT_CARRY)
                nb._gemm_kernel(a, np.ascontiguousarray(b.T), each, nb._plan(a.shape[1]))
                assert_same_bits(got, each.astype(nb._OUT_DTYPE), what + " vs per-output kernel")


def test_tiles_only_where_a_leaf_is_one_operation_of_the_carrier():
    for order, arith in [("seq", "fp16-exact"), ("blocks(4, lanes(2, seq, pairwise), pairwise)", "fma"),
                         ("lanes(8, seq, seq)", "fma"), ("blocks(3, lanes(2, seq, seq), seq)", "rounded")]:
        source = compile_spec(spec(order, arith), "numba")
        assert "_GEMM_TILE = None" in source and "_gemm_tile(" not in source, (order, arith)


def test_tiles_use_vector_fma_and_no_fast_math(tmp_path):
    from test_numba_fast_sum import fresh_module

    nb = fresh_module(compile_spec(spec("blocks(6, lanes(2, seq, seq), seq)", "fma"), "numba"), tmp_path)
    rng = np.random.default_rng(3)
    A, B = rng.standard_normal((6, 12)).astype(np.float32), rng.standard_normal((12, 32)).astype(np.float32)
    nb.gemm(A, B)
    ir = "\n".join(nb._gemm_tiles_kernel.inspect_llvm().values())
    assert "@llvm.fma.v8f32" in ir
    assert not re.search(r"\b(fadd|fmul)\s+(fast|reassoc|contract|nnan|ninf|nsz|arcp|afn)\b", ir)
    assert not re.search(r"@llvm\.fma\.f32|@llvm\.fmuladd", ir), "a scalar FMA outside the tiles"
    asm = "\n".join(nb._gemm_tiles_kernel.inspect_asm().values())
    assert re.search(r"vfmadd\w*\s[^\n]*ymm", asm), "the tiles do not run as ymm FMAs"


def test_numpy_matmul_bits_at_512_with_whole_tiles():
    """numpy.matmul's revealed order at n = 512 for an 8 x 32 output, replayed in tiles."""
    from fpspec.arith.probe import probe_arithmetic
    from fpspec.reveal.engine import reveal
    from fpspec.reveal.targets import resolve_target

    target = resolve_target("numpy.matmul", n=512, m=8, ncols=32)
    tree = reveal(target).tree
    nb = load_replica(compile_spec(spec_from_trees(tree, "gemm", probe_arithmetic(target, tree).arithmetic,
                                                   target="numpy.matmul"), "numba"), "tiles_numpy_matmul_512")
    assert nb._GEMM_TILE == (3, 16, 256, 2)
    for s in samples("gemm", 512, "fp32", 7, seed=512, m=8, ncols=32):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            assert_same_bits(nb.gemm(*s.args), np.matmul(*s.args), f"numpy.matmul 512 {s.describe()}")
