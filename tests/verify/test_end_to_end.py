"""Reveal -> spec -> compile -> verify, from the command line, on real libraries.

Each spec is revealed on the machine that runs the test (orders of BLAS
kernels depend on the CPU), lowered to .fps, compiled for a CPU backend by
`fpspec verify --target`, and verified against the original with --against.
"""
from pathlib import Path

import pytest

from fpspec.arith import probe_arithmetic
from fpspec.cli import main
from fpspec.reveal.engine import reveal
from fpspec.reveal.targets import resolve_target
from fpspec.spec import ast as A
from fpspec.spec.header import make_header
from fpspec.spec.lower import lower

DATA = Path(__file__).parent / "data"


def revealed_spec(path, name, op, ns, m=None, ncols=None):
    """The spec of `name` at the n in `ns`: trees revealed, arithmetic probed at ns[0]."""
    trees, arith = {}, None
    for n in ns:
        t = resolve_target(name, op=op, n=n, dtype="float32", m=m, ncols=ncols)
        trees[n] = reveal(t).tree
        if arith is None:
            arith = probe_arithmetic(t, trees[n]).arithmetic
    header = make_header(target=name, op=op, arithmetic=A.Block("arithmetic", arith.to_entries()))
    path.write_text(str(lower(trees, header)))
    return path


def verify(capsys, spec, backend, against, ns, samples=300, shape=()):
    argv = ["verify", str(spec), "--target", backend, "--against", against, "--samples", str(samples), *shape]
    for n in ns:
        argv += ["-n", str(n)]
    code = main(argv)
    return code, capsys.readouterr().out


CASES = [
    # name, op, n values, output shape, backend
    ("numpy.dot", "dot", (64,), (), "numpy"),   # n >= 64: one kernel, FMA (n = 40: see below)
    ("numpy.dot", "dot", (64,), (), "numba"),
    ("numpy.matmul", "gemm", (16, 33), (3, 5), "numba"),
    ("numpy.matmul", "gemv", (24,), (4,), "numpy"),
    ("torch.sum", "sum", (32, 33, 64), (), "numpy"),
    ("torch.dot", "dot", (32, 40), (), "numpy"),
    ("torch.matmul", "gemm", (33,), (3, 5), "numpy"),
]


@pytest.mark.parametrize("name, op, ns, shape, backend", CASES, ids=[f"{c[0]}-{c[1]}-{c[4]}" for c in CASES])
def test_a_compiled_replica_of_a_revealed_spec_verifies_against_the_library(capsys, tmp_path, name, op, ns,
                                                                              shape, backend):
    if name.startswith("torch"):
        pytest.importorskip("torch")
    m, ncols = (list(shape) + [None, None])[:2]
    spec = revealed_spec(tmp_path / "order.fps", name, op, ns, m, ncols)
    opts = (["-m", str(m)] if m else []) + (["--ncols", str(ncols)] if ncols else [])
    code, out = verify(capsys, spec, backend, name, ns, shape=opts)
    assert code == 0, spec.read_text() + out
    assert f"n values ({len(ns)}): {' '.join(map(str, ns))}" in out
    assert f"trees:      {2 * len(ns)} compared (replica ({backend}) {len(ns)}, {name} {len(ns)}), all equal" in out
    assert f"arithmetic: {2 * len(ns)} compared, all equal" in out
    # a sum replica's sums() is compared too (900: original, spec and sums() against the replica)
    assert f"samples:    300 inputs, {900 if op == 'sum' else 600} comparisons" in out and "all bits equal" in out


@pytest.mark.parametrize("backend", ["numpy", "numba"])
def test_numpy_sum_spec_compiled_for_each_cpu_backend_is_equivalent_to_numpy_sum(capsys, backend):
    code, out = verify(capsys, DATA / "numpy_sum.fps", backend, "numpy.sum", (7, 9, 129, 300))
    assert code == 0, out
    assert f"trees:      8 compared (replica ({backend}) 4, numpy.sum 4), all equal" in out
    assert "samples:    300 inputs, 900 comparisons (" in out and f"numpy.sum vs replica ({backend})" in out
    assert f"vs replica ({backend}) sums()" in out


def test_numpy_dot_has_no_single_arithmetic_where_kernel_and_tail_meet(capsys, tmp_path):
    # x86-64 OpenBLAS at n = 40: a 32-wide kernel and a scalar tail with another
    # arithmetic; no one arithmetic section describes it, and verify says so
    spec = revealed_spec(tmp_path / "dot40.fps", "numpy.dot", "dot", (40,))
    code, out = verify(capsys, spec, "numpy", "numpy.dot", (40,), samples=300)
    if code == 0:
        pytest.skip("this machine's numpy.dot has one arithmetic at n = 40")
    assert "single arithmetic: " in out and "numpy.dot shows no" in out


def test_diff_of_two_live_targets_with_the_default_n_values(capsys):
    assert main(["diff", "numpy.sum", "numpy.sum"]) == 0
    out = capsys.readouterr().out
    assert "n values (9): 7 8 9 16 32 33 128 129 1000" in out and out.rstrip().endswith("SAME")


def test_a_spec_with_the_wrong_arithmetic_fails_against_the_library(capsys, tmp_path):
    # numpy.matmul fuses its products (FMA); a spec that says they are rounded must
    # fail against the library even though its replica follows the spec exactly
    spec = revealed_spec(tmp_path / "gemm.fps", "numpy.matmul", "gemm", (16,), 3, 5)
    text = spec.read_text()
    assert "product = fma" in text
    spec.write_text(text.replace("product = fma", "product = rounded"))
    code, out = verify(capsys, spec, "numpy", "numpy.matmul", (16,), shape=["-m", "3", "--ncols", "5"])
    assert code == 1
    assert "product: " in out and "says rounded, numpy.matmul shows fma" in out
    assert "differ: numpy.matmul vs replica (numpy) at n=16" in out
