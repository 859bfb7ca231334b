"""Replicas of real library ops: reveal, probe, lower, compile, compare bits.

Each case reveals the library op's tree on this machine (never assumed),
probes its arithmetic, lowers the tree to a spec, compiles it, and checks the
replica against the library on random and adversarial inputs (fpspec.inputs:
uniform bits, wide exponents, cancellation, signed zeros, subnormals, inf and
nan).  Sample counts are modest here; benchmarks/bench_compile.py --verify
runs many more.
"""
from __future__ import annotations

import numpy as np
import pytest

from conftest import assert_same_bits, load_replica, same_bits
from fpspec.arith.evaluate import evaluate
from fpspec.arith.probe import probe_arithmetic
from fpspec.compile import compile_spec
from fpspec.compile import compile_kernel
from fpspec.inputs import samples
from fpspec.reveal.engine import reveal
from fpspec.reveal.targets import resolve_target
from fpspec.spec import ast as A
from fpspec.spec import expand, lower, parse
from fpspec.spec.expand import expand_arith
from fpspec.spec.regions import with_probed_arithmetic
from test_ir import NUMPY_SUM

SAMPLES = 7          # one per input family


def revealed_spec(name, n, dtype="float32", **shape):
    """Reveal, lower, probe: the arithmetic checked on sample inputs, per part of
    the tree where one arithmetic does not fit (OpenBLAS sdot)."""
    target = resolve_target(name, n=n, dtype=dtype, **shape)
    tree = reveal(target).tree
    report = probe_arithmetic(target, tree)
    spec = lower(tree, A.Header(target=name, op=target.op))
    spec, _ = with_probed_arithmetic(spec, n, tree, target, report)
    return target, tree, spec


@pytest.fixture(scope="module", params=["float32", "float64"])
def numpy_sum_spec(request):
    """numpy.sum for every n: the recursive spec, checked against revelation at
    lengths that cross each branch, with the probed arithmetic."""
    dtype = request.param
    target = None
    for n in (2, 7, 8, 9, 100, 128, 129, 300):
        target = resolve_target("numpy.sum", n=n, dtype=dtype)
        tree = reveal(target).tree
        assert expand(parse(NUMPY_SUM), n) == tree, f"numpy.sum {dtype} n={n} is not the pairwise spec"
    arithmetic = probe_arithmetic(target, tree).arithmetic
    body = parse(NUMPY_SUM)
    header = A.Header(target="numpy.sum", op="sum", n=A.Range(1, None),
                      sections=(A.Block("arithmetic", arithmetic.to_entries()),))
    return dtype, str(A.Spec(header, body.lets, body.order))


@pytest.mark.parametrize("target", ["numpy", "numba"])
def test_numpy_sum_every_n_to_300_and_large(numpy_sum_spec, target):
    dtype, text = numpy_sum_spec
    if target == "numba" and dtype == "float64":
        pytest.skip("same loops as float32; a recursive numba replica is not cached and compiles for 20 s here "
                    "(benchmarks/bench_compile.py --verify runs it)")
    spec = parse(text)
    mod = load_replica(compile_spec(spec, target), f"npsum_{dtype}_{target}")
    for n in list(range(1, 301)) + [1000, 4099, 100_003]:
        args = [s.args[0] for s in samples("sum", n, "fp32" if dtype == "float32" else "fp64",
                                            SAMPLES if n <= 4099 else 2, seed=n)]
        X = np.stack(args, axis=1)
        want = np.array([np.sum(x) for x in args])
        assert_same_bits(mod.sums(X), want, f"numpy.sum {dtype} n={n}")
        assert_same_bits(mod.sum(args[0]), want[0], f"numpy.sum {dtype} n={n} (sum)")


CASES = [
    ("numpy.dot", 100, {}),                         # sdot: fp32 FMA kernel on 96 terms, the rest in fp64
    ("numpy.dot", 37, {}),                          # sdot: the kernel's 32 terms in fp32, without FMA
    ("numpy.matmul", 64, {"m": 8}),                 # gemv (rows in blocks of 4: test_numpy_gemv_leftover_rows)
    ("numpy.matmul", 48, {"m": 4, "ncols": 3}),     # gemm
    ("torch.sum", 100, {}),
    ("torch.dot", 50, {}),
    ("torch.matmul", 40, {"m": 4, "ncols": 3}),
]


def reference(spec, n, op, args):
    """fpspec.arith.evaluate of the spec (tree and per-node arithmetic) for every output element of op(*args)."""
    tree, arithmetic, regions = expand_arith(spec, n)
    if op == "sum":
        return evaluate(tree, args[0], None, arithmetic, regions)
    if op == "dot":
        return evaluate(tree, args[0], args[1], arithmetic, regions)
    if op == "gemv":
        A, x = args
        return evaluate(tree, A.T, np.repeat(x[:, None], A.shape[0], axis=1), arithmetic, regions)
    A, B = args
    m, p = A.shape[0], B.shape[1]
    X = np.repeat(A.T, p, axis=1)                 # column i*p + j holds A[i, :]
    Y = np.tile(B, (1, m))                        # column i*p + j holds B[:, j]
    return evaluate(tree, X, Y, arithmetic, regions).reshape(m, p)


@pytest.mark.parametrize("name,n,shape", CASES, ids=[f"{c[0]}-{c[1]}-{len(c[2])}" for c in CASES])
def test_library_op_replica_numpy_backend(name, n, shape, request):
    if name.startswith("torch"):
        pytest.importorskip("torch")
    target, tree, spec = revealed_spec(name, n, **shape)
    mod = load_replica(compile_spec(spec, "numpy"), "lib")
    call = getattr(mod, target.op)
    mismatches = []
    for s in samples(target.op, n, "fp32", 2 * SAMPLES, seed=1, m=target.m, ncols=target.ncols):
        got = call(*s.args)
        # the compiler's duty: exactly the spec (tree + arithmetic)
        assert_same_bits(got, reference(spec, n, target.op, s.args).astype(np.float32),
                         f"{name} vs its spec, {s.describe()}")
        want = np.asarray(target.to_float64(target.fn(*(target.native(a) for a in s.args)))).astype(np.float32)
        if not np.all(same_bits(got, want.reshape(np.shape(got)))):
            mismatches.append(s.describe())
    assert not mismatches, f"{name}: replica differs from the library on {mismatches}"


def test_numpy_gemm_replica_numba_backend():
    target, tree, spec = revealed_spec("numpy.matmul", 48, m=4, ncols=3)
    mod = load_replica(compile_spec(spec, "numba"), "lib_numba")
    for s in samples("gemm", 48, "fp32", 2 * SAMPLES, seed=2, m=4, ncols=3):
        assert_same_bits(mod.gemm(*s.args), np.matmul(*s.args), f"numpy.matmul {s.describe()}")


def test_numpy_gemv_leftover_rows():
    """OpenBLAS sgemv_t runs rows in blocks of 4; the m % 4 leftover rows go
    through another kernel, whose bits differ from a block row's.  A spec is one
    order per output element, so the gemv spec is valid for m % 4 == 0 (and for
    the block rows otherwise): the leftover row of m = 5 differs from the same
    row computed inside a block of 4 on most random inputs."""
    rng = np.random.default_rng(0)
    differ = 0
    for _ in range(20):
        A = rng.uniform(-1, 1, (5, 64)).astype(np.float32)
        x = rng.uniform(-1, 1, 64).astype(np.float32)
        in_block = np.matmul(np.repeat(A[4:], 4, axis=0), x)[0]
        differ += int(not same_bits(np.matmul(A, x)[4], in_block))
        assert same_bits(np.matmul(A, x)[:4], np.matmul(A[:4], x)).all()
    assert differ >= 5
