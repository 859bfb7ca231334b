"""Numba fast paths for sums: vector lanes and iterative splits (notes
[vector lanes] and [iterative splits] in fpspec.compile.loops) give the bits
of the NumPy replica and of numpy.sum, on every input family of fpspec.inputs,
at lengths that cross every branch of the specs."""
from __future__ import annotations

import re

import numpy as np
import pytest
from conftest import assert_same_bits, load_replica

from fpspec.compile import compile_spec
from fpspec.inputs import samples
from fpspec.spec import parse

ARITH = "arithmetic {{\n    input = {f}\n    accumulator = {f}\n    init = {init}\n    output = {f}\n}}\n"
# numpy.sum's order (examples/cpu/numpy_sum.fps), valid for every n
NUMPY_SUM = ("let numpy_sum =\n    if n <= 128: tail(8, lanes(8, seq, pairwise), seq)\n"
             "    else: split(n // 2 - n // 2 % 8, numpy_sum, numpy_sum)\norder numpy_sum\n")
# deeper than the driver's stacks (SPLIT_STACK = 64): walked by a call every 64 levels;
# the recursive branch is `otherwise`, after a case that is not recursive
DEEP = "let deep =\n    if n <= 2: seq\n    else: split(n - 2, deep, deep)\norder deep\n"
# the split branch first, two branches after it that do not recurse
FIRST = ("let first =\n    if n > 20: split(n // 3, first, first)\n    elif n > 9: lanes(4, seq, seq)\n"
         "    else: seq\norder first\n")
# strided leaves: each lane walks its own split tree (kind "L", a step)
STRIDED = "let half =\n    if n <= 4: seq\n    else: split(n // 2, half, half)\norder lanes(3, half, seq)\n"
SIZES = sorted(set(range(1, 301)) | {(128 << k) + d for k in range(1, 6) for d in (-1, 0, 1)}
               | {100_003})
FORMATS = {"float32": "fp32", "float64": "fp64"}


def spec(order: str, fmt: str = "fp32", init: str = "none"):
    return parse(f'target "test.sum"\nop sum\nn in 1..\n\n{ARITH.format(f=fmt, init=init)}\n{order}')


def check(nb, ref, n, fmt, count, library=True):
    args = [s.args[0] for s in samples("sum", n, fmt, count, seed=n)]
    X = np.stack(args, axis=1)
    want = ref.sums(X)
    assert_same_bits(nb.sums(X), want, f"n={n} (sums vs numpy replica)")
    assert_same_bits(nb.sum(args[0]), want[0], f"n={n} (sum vs numpy replica)")
    if library:
        assert_same_bits(want, np.array([np.sum(x) for x in args]), f"n={n} (numpy replica vs numpy.sum)")


def test_numpy_sum_order_fp32_every_branch():
    source = compile_spec(spec(NUMPY_SUM, init="+0.0"), "numba")
    assert "_lane_folds(a, lo, rows" in source and "_order_numpy_sum_leaf_L1(a, b, lo, m)" in source
    nb = load_replica(source, "fast_npsum")
    ref = load_replica(compile_spec(spec(NUMPY_SUM, init="+0.0"), "numpy"), "fast_npsum_np")
    for n in SIZES:
        check(nb, ref, n, "fp32", 7 if n <= 300 else 2)


@pytest.mark.parametrize("order,sizes", [(DEEP, (1, 2, 3, 4, 5, 129, 130, 131, 257, 300)),  # 300: 149 levels
                                         (FIRST, (1, 9, 10, 20, 21, 22, 61, 62, 63, 64, 300, 1001)),
                                         (STRIDED, (1, 2, 3, 4, 12, 13, 15, 16, 50, 301))],
                         ids=["deep", "split-first", "strided"])
def test_split_orders_of_other_shapes(order, sizes):
    name = order.split()[1]
    source = compile_spec(spec(order), "numba")
    assert re.search(rf"_order_{name}_leaf_L1?\(a, b, lo, (step, )?m\)", source)
    nb = load_replica(source, f"fast_{name}")
    ref = load_replica(compile_spec(spec(order), "numpy"), f"fast_{name}_np")
    for n in sizes:
        check(nb, ref, n, "fp32", 7, library=False)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("k", [3, 8, 16])
def test_vector_lanes_each_width_and_dtype(dtype, k):
    order = f"order tail({k}, lanes({k}, seq, seq), seq)\n"
    fmt = FORMATS[dtype]
    nb = load_replica(compile_spec(spec(order, fmt), "numba"), f"fast_lanes{k}_{dtype}")
    ref = load_replica(compile_spec(spec(order, fmt), "numpy"), f"fast_lanes{k}_{dtype}_np")
    for n in sorted({1, k - 1, k, k + 1, 2 * k, 3 * k + 1, 37, 100, 129}):
        if n >= 1:
            check(nb, ref, n, fmt, 7, library=False)


def fresh_module(source: str, folder):
    """Import `source` from a new file in `folder`: a kernel that numba loads
    from its disk cache has no IR to inspect."""
    import importlib.util
    import sys

    path = folder / "fresh_replica.py"
    path.write_text(source)
    loader = importlib.util.spec_from_file_location(f"fresh_replica_{folder.name}", path)
    module = importlib.util.module_from_spec(loader)
    sys.modules[loader.name] = module
    loader.loader.exec_module(module)
    return module


def test_vector_lanes_are_vector_adds_without_fast_math(tmp_path):
    nb = fresh_module(compile_spec(spec("order lanes(8, seq, seq)\n"), "numba"), tmp_path)
    nb.sum(np.arange(1, 40, dtype=np.float32))
    ir = "\n".join(nb._one_kernel.inspect_llvm().values())
    assert re.search(r"fadd <8 x float>", ir), "no 8-wide vector add in the kernel"
    assert not re.search(r"\bfadd\s+(fast|reassoc|contract|nnan|ninf|nsz|arcp|afn)\b", ir)
    assert "fma" not in ir.lower()
    asm = "\n".join(nb._one_kernel.inspect_asm().values())
    assert re.search(r"vaddps\s[^\n]*ymm", asm), "the lanes do not run as ymm adds"


def test_vector_lanes_only_where_a_leaf_is_its_input():
    """A dot's leaves are products and a bf16 accumulator rounds: scalar lanes stay."""
    dot = parse('target "t"\nop dot\nn in 1..\n\narithmetic {\n    input = fp32\n    product = rounded\n'
                '    accumulator = fp32\n    init = none\n    output = fp32\n}\n\norder lanes(8, seq, seq)\n')
    assert "_lane_folds" not in compile_spec(dot, "numba")
    narrow = parse('target "t"\nop sum\nn in 1..\n\narithmetic {\n    input = bf16\n    accumulator = bf16\n'
                   '    init = none\n    output = bf16\n}\n\norder lanes(8, seq, seq)\n')
    assert "_lane_folds" not in compile_spec(narrow, "numba")
