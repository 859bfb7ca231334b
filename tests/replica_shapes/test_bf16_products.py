"""bf16 (and tf32) products fit fp32's significand but not its range (2^127 * 2^127), so
exact products and products rounded to fp32 differ where they overflow: the probes tell them
apart, and a revealed bf16 gemm is written in the arithmetic its target has, which every
backend compiles (an exact product past fp32's range is a numpy-only construct), and its
replica gives the target's bits, inf and nan included."""
from __future__ import annotations

import textwrap

import numpy as np
import pytest

from fresh_replicas import assert_fresh_bits, run_fresh

from fpspec.arith.probe import products_fit
from fpspec.formats import get_format

torch = pytest.importorskip("torch")

MODULE = "fpspec_test_bf16_products"
SOURCE = textwrap.dedent("""
    import torch

    def fp32_products(A, B):
        # each product rounded to fp32 (a multiply), then added in turn: C's loop
        a, b = A.float(), B.float()
        acc = torch.zeros((a.shape[0], b.shape[1]))
        for k in range(a.shape[1]):
            acc = acc + a[:, k:k + 1] * b[k:k + 1, :]
        return acc.bfloat16()
""")


def test_products_fit_says_where_exact_is_an_fp32_multiply():
    fp32 = get_format("fp32")
    assert products_fit(get_format("fp16"), fp32)          # 22 bits, 2^-48 .. 2^32
    assert not products_fit(get_format("bf16"), fp32)      # 16 bits, but 2^254 and 2^-266
    assert not products_fit(get_format("tf32"), fp32)
    assert products_fit(get_format("bf16"), get_format("fp64"))


def test_revealed_bf16_gemm_compiles_for_numba_and_its_replica_gives_the_targets_bits(tmp_path, monkeypatch):
    from fpspec.arith.probe import probe_arithmetic
    from fpspec.cli.reveal import provenance, revealed_spec
    from fpspec.compile import compile_spec
    from fpspec.reveal.engine import reveal
    from fpspec.reveal.targets import resolve_target

    (tmp_path / f"{MODULE}.py").write_text(SOURCE)
    monkeypatch.syspath_prepend(str(tmp_path))
    target = resolve_target(f"{MODULE}:fp32_products", op="gemm", n=8, dtype="bfloat16", m=2, ncols=2)
    tree = reveal(target).tree
    report = probe_arithmetic(target, tree)
    assert (report.arithmetic.product, report.arithmetic.accumulator) == ("rounded", "fp32")
    spec = revealed_spec(tree, provenance(target), report=report, target=target)
    compile_spec(spec, "numba")               # product = exact was refused here
    source = compile_spec(spec, "numpy")      # the reference replica (numba's bits are tested against it)
    big = 2.0 ** 100
    A = np.array([[big, big, 1, 2, 3, 4, 5, 6], [1.5, -2, 0.25, 8, 1, 1, 1, 1]], np.float32)
    B = np.ones((8, 2), np.float32)
    B[0, 0], B[1, 0] = big, -big                # big * big overflows fp32: inf, then inf + -inf
    B[0, 1] = 3.0
    want = fp32_products_reference(A, B)
    assert np.isnan(want[0, 0])                 # (exact products would give 2^200 - 2^200 + 1 + ... = 21)
    assert_fresh_bits(run_fresh([(source, "gemm", (A, B))], tmp_path)[0], want.ravel(), "bf16 gemm")


def fp32_products_reference(A, B):
    import importlib

    fn = importlib.import_module(MODULE).fp32_products
    return fn(torch.from_numpy(A).bfloat16(), torch.from_numpy(B).bfloat16()).float().numpy().astype(np.float64)
