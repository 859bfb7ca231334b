"""Binned replicas (fpspec.compile.binned): numpy = numba = the model, bit for bit, whatever the order,
the split or the thread count."""
from __future__ import annotations

import inspect

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from fpspec.arith.binned import Binned, binned_format, evaluate_binned, row_index
from fpspec.compile import compile_spec, load_replica
from fpspec.spec import parse

DTYPES = {"fp64": np.float64, "fp32": np.float32}


def spec_text(op: str, fmt: str, fold: int = 3) -> str:
    product = "none" if op == "sum" else "rounded"
    return (f'target "binned"\nop {op}\nn in 1..\n'
            f"arithmetic {{ input = {fmt} product = {product} accumulator = binned(fold = {fold}) output = {fmt} }}\n"
            "order seq\n")


_CACHE: dict = {}


def replica(op: str, fmt: str, target: str, fold: int = 3):
    key = (op, fmt, target, fold)
    if key not in _CACHE:
        if target == "numba":
            pytest.importorskip("numba")
        _CACHE[key] = load_replica(compile_spec(parse(spec_text(op, fmt, fold)), target), f"binned {key}")
    return _CACHE[key]


def bits(v) -> bytes:
    return np.asarray(v).tobytes()


def adversarial(rng, n: int, dtype) -> list:
    """Inputs that reach every path: wide ranges, cancellation, the top bin (index 0), subnormals,
    a block whose largest value comes late (the accumulator moves up), inf and nan."""
    big = np.finfo(dtype).max
    tiny = np.finfo(dtype).smallest_subnormal
    ramp = rng.standard_normal(n) * 2.0 ** np.linspace(-30, 30, n)
    wide = rng.standard_normal(n) * 2.0 ** rng.integers(-100, 100, n)
    cases = [rng.standard_normal(n), ramp, wide,
             np.concatenate([wide, -wide, [1.0]]),
             np.concatenate([np.full(3, big), np.full(2, -big), rng.standard_normal(n)]),
             rng.standard_normal(n) * tiny * 64,
             rng.standard_normal(n) * tiny * 2.0 ** 40,
             np.concatenate([rng.standard_normal(n), [np.inf]]),
             np.concatenate([rng.standard_normal(n), [np.inf, -np.inf]]),
             np.concatenate([[np.nan], rng.standard_normal(n)]),
             np.full(n, -0.0)]
    with np.errstate(over="ignore"):
        return [np.asarray(c, dtype=dtype) for c in cases]


@pytest.mark.parametrize("fmt", ["fp64", "fp32"])
@pytest.mark.parametrize("target", ["numpy", "numba"])
def test_sum_equals_the_model_on_adversarial_inputs(fmt, target):
    rep = replica("sum", fmt, target)
    rng = np.random.default_rng(1)
    for n in (1, 7, 5000):             # 5000: several blocks of the numba kernel
        for x in adversarial(rng, n, DTYPES[fmt]):
            want = Binned.empty(fmt).deposit(x).to_float()
            got = rep.sum(x)
            assert bits(got) == bits(want), (n, x[:4])
            assert bits(rep.sum(x[::-1].copy())) == bits(want)


@pytest.mark.parametrize("fmt", ["fp64", "fp32"])
def test_dot_gemv_gemm_numpy_equal_numba_equal_the_model(fmt):
    dt = DTYPES[fmt]
    rng = np.random.default_rng(2)
    A = (rng.standard_normal((5, 300)) * 2.0 ** rng.integers(-40, 40, (5, 300))).astype(dt)
    A[1, 3] = np.inf
    A[2, :] = -A[2, ::-1]
    B = rng.standard_normal((300, 4)).astype(dt)
    x = B[:, 0].copy()
    want_mv = evaluate_binned(A.T, x, fmt, 3)
    want_mm = np.stack([evaluate_binned(A.T, B[:, j], fmt, 3) for j in range(4)], axis=1)
    # every op on numpy; on numba the ops that reach its other kernels, one format each (compile time)
    numba_ops = {"fp64": ("dot", "gemm"), "fp32": ("gemv",)}[fmt]
    for target in ("numpy", "numba"):
        if target == "numpy" or "dot" in numba_ops:
            assert bits(replica("dot", fmt, target).dot(A[0], x)) == bits(dt(want_mv[0]))
        if target == "numpy" or "gemv" in numba_ops:
            assert bits(replica("gemv", fmt, target).gemv(A, x)) == bits(want_mv.astype(dt))
        if target == "numpy" or "gemm" in numba_ops:
            assert bits(replica("gemm", fmt, target).gemm(A, B)) == bits(want_mm.astype(dt))


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2 ** 32 - 1), n=st.integers(1, 6000), fmt=st.sampled_from(["fp64", "fp32"]),
       data=st.data())
def test_any_permutation_gives_the_same_bits(seed, n, fmt, data):
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(n) * 2.0 ** rng.integers(-50, 50, n)).astype(DTYPES[fmt])
    perm = np.array(data.draw(st.permutations(range(n)))) if n <= 300 else rng.permutation(n)
    rep = replica("sum", fmt, "numba")
    assert bits(rep.sum(x)) == bits(rep.sum(x[perm])) == bits(replica("sum", fmt, "numpy").sum(x[perm]))


def test_numba_thread_counts_and_splits_give_the_same_bits():
    numba = pytest.importorskip("numba")
    rep = replica("dot", "fp64", "numba")
    rng = np.random.default_rng(4)
    x = rng.standard_normal(20000) * 2.0 ** rng.integers(-300, 300, 20000)
    y = rng.standard_normal(20000)
    want = rep.dot(x, y)
    before = numba.get_num_threads()
    try:
        for threads in range(1, before + 1):
            numba.set_num_threads(threads)
            assert bits(rep.dot(x, y)) == bits(want)
    finally:
        numba.set_num_threads(before)
    # the kernel's own pieces, split anywhere, merged in any order
    states = np.zeros((3, rep._STATE), np.int64)
    cuts = [0, 1234, 15000, 20000]
    for p in range(3):
        rep._partial(x, y, cuts[p], cuts[p + 1], states[p])
    assert bits(np.float64(rep._merged(states[::-1].copy()))) == bits(want)
    # a piece of only non-finite terms keeps its flags through the merge
    x[:1234], y[:1234] = np.inf, 1.0
    rep._partial(x, y, 0, 1234, states[0])
    assert states[0, 0] == -1 and rep._merged(states) == np.inf == rep.dot(x, y)


def test_numba_first_dot_compiles_only_the_deposit_path_and_convert():
    """The first dot compiles _partial's path and convert, nothing for the merge (run in Python), and
    convert only for the replica's format (its test of `single` reads the constant _SINGLE)."""
    numba = pytest.importorskip("numba")
    rep = replica("dot", "fp32", "numba")
    x = (np.arange(6000) % 61 - 30).astype(np.float32) * np.float32(0.375)
    assert bits(rep.dot(x, x[::-1].copy())) == bits(replica("dot", "fp32", "numpy").dot(x, x[::-1].copy()))
    assert not isinstance(rep._merged, numba.core.dispatcher.Dispatcher)
    assert rep._merge_into.signatures == [] and rep._finish.signatures == []
    assert len(rep.convert.signatures) == 1 and len(rep._deposit.signatures) == 1
    assert "if _SINGLE:" in inspect.getsource(rep.convert.py_func)
    assert not any(hasattr(rep, name) for name in ("_deposit_at", "_block_flags", "_term"))


def test_fold_2_and_4():
    rng = np.random.default_rng(5)
    x = rng.standard_normal(3000) * 2.0 ** rng.integers(-60, 60, 3000)
    for fold in (2, 4):
        want = Binned.empty("fp64", fold).deposit(x).to_float()
        assert bits(replica("sum", "fp64", "numpy", fold).sum(x)) == bits(want)
    # the numba kernel's loops are written out per fold
    source = compile_spec(parse(spec_text("sum", "fp32", 4)), "numba")
    assert "k1_3 += _bits(s)" in source and "_4 " not in source


def test_replicas_refuse_other_dtypes():
    with pytest.raises(TypeError, match="float64"):
        replica("sum", "fp64", "numpy").sum(np.ones(3, np.float32))


@pytest.mark.parametrize("op,fmt", [("sum", "fp32"), ("dot", "fp64"), ("gemm", "fp32")])
def test_triton_interpreter_equals_the_model(op, fmt):
    torch = pytest.importorskip("torch")
    pytest.importorskip("triton")
    rep = replica(op, fmt, "triton")
    dt = DTYPES[fmt]
    rng = np.random.default_rng(6)
    if op == "gemm":
        A = (rng.standard_normal((2, 1500)) * 2.0 ** rng.integers(-60, 60, (2, 1500))).astype(dt)
        A[1, 7] = np.nan
        B = rng.standard_normal((1500, 2)).astype(dt)
        want = np.stack([evaluate_binned(A.T, B[:, j], fmt, 3) for j in range(2)], axis=1).astype(dt)
        assert bits(rep.gemm(torch.from_numpy(A), torch.from_numpy(B)).numpy()) == bits(want)
        return
    for x in adversarial(rng, 2500, dt)[1:6]:
        y = np.ones_like(x) if op == "sum" else rng.standard_normal(x.size).astype(dt)
        want = dt(evaluate_binned(x, None if op == "sum" else y, fmt, 3))
        args = (torch.from_numpy(x),) if op == "sum" else (torch.from_numpy(x), torch.from_numpy(y))
        assert bits(getattr(rep, op)(*args).numpy()) == bits(want)


def test_verify_says_equivalent_and_order_independent():
    from fpspec.verify import verify_spec

    report = verify_spec(parse(spec_text("dot", "fp32")), backend="numpy", n_values=[2, 9, 300], samples=60)
    assert report.equivalent, report.text()
    assert any("order-independent" in note for note in report.notes)
    assert {c.side for c in report.trees} == {"replica (numpy)", "replica (numpy), terms permuted and split"}
    assert "permuted terms split by zeros" in report.text()


def test_verify_catches_a_replica_that_has_an_order():
    from fpspec.verify import verify_spec

    def plain(x):
        out = 0.0
        for v in x:
            out += float(v)
        return np.float64(out)

    report = verify_spec(parse(spec_text("sum", "fp64")), replica_fn=plain, n_values=[6], samples=20)
    assert not report.equivalent
    assert "depends on the order" in report.text()


def test_numba_gemm_hint_far_above_the_products():
    # max|A[i, :]| * max|B[:, j]| = 2^60 bounds products of at most 3: the hint's index is far
    # too low, the deposit passes again at the true one; the bound is inf or nan in other cells
    A = np.array([[2.0 ** 60, 1.0, 3.0], [1e300, 1.0, -1.0], [np.nan, 1.0, 2.0]])
    B = np.array([[2.0 ** -60, 1e300], [1.0, 2.0], [1.0, 0.5]])
    got = replica("gemm", "fp64", "numba").gemm(A, B)
    want = np.stack([evaluate_binned(A.T, B[:, j], "fp64", 3) for j in range(2)], axis=1)
    assert bits(got) == bits(want)


@pytest.mark.parametrize("scale", [1.0, 2.0 ** 1000])     # 2^1000: the top bin (index 0)
def test_numba_streams_at_every_remainder(scale):
    # a block deposit walks pieces side by side (DEPOSIT): lengths that leave every remainder of the
    # pieces and of the blocks give the model's bits, in dot and in gemm's rows
    rep = replica("dot", "fp64", "numba")
    rng = np.random.default_rng(7)
    block = rep._BLOCK
    for n in (0, 1, 7, 8, 9, block - 1, block + 1, 2 * block + 3, 3 * block + 5):
        x = rng.standard_normal(n) * 2.0 ** rng.integers(-60, 20, n)
        x[-1:] *= scale                   # the largest term last: the accumulator moves up
        y = rng.standard_normal(n)
        want = evaluate_binned(x[:, None], y, "fp64", 3)[0]
        assert bits(rep.dot(x, y)) == bits(np.float64(want)), n
    gemm = replica("gemm", "fp64", "numba")
    for m, k, n in ((2, 0, 3), (3, 1, 2), (2, 9, 3), (2, 7, 5), (1, block + 1, 2)):
        A = rng.standard_normal((m, k)) * 2.0 ** rng.integers(-40, 40, (m, k))
        B = rng.standard_normal((k, n))
        if k:
            A[0, -1] = scale
        want = np.stack([evaluate_binned(A.T, B[:, j], "fp64", 3) for j in range(n)], axis=1).reshape(m, n)
        assert bits(gemm.gemm(A, B)) == bits(want), (m, k, n)


@pytest.mark.parametrize("fmt", ["fp64", "fp32"])
def test_triton_lanes_first_pass_and_its_fallback(fmt):
    # many tiles a program: the first tile's index holds (first pass kept), a larger term comes
    # late (the lanes' maximum sends the program to the tile-by-tile pass), an inf or a nan late,
    # a first tile of zeros; every case the model's bits
    torch = pytest.importorskip("torch")
    pytest.importorskip("triton")
    rep = replica("dot", fmt, "triton")
    r = rep.REPLICA
    saved = r.BLOCK, r.MAX_PROGRAMS
    dt = DTYPES[fmt]
    rng = np.random.default_rng(8)
    n = 320
    base = rng.standard_normal(n)
    late_big, late_inf, late_nan, zeros_first = base.copy(), base.copy(), base.copy(), base.copy()
    late_big[-3] = 2.0 ** 50
    late_inf[-20] = np.inf
    late_nan[200] = np.nan
    zeros_first[:40] = 0.0
    y = rng.standard_normal(n).astype(dt)
    try:
        r.BLOCK, r.MAX_PROGRAMS = 16, 2
        for x in (base, late_big, late_inf, late_nan, zeros_first, base * 2.0 ** 60):
            x = x.astype(dt)
            want = dt(evaluate_binned(x, y, fmt, 3))
            with np.errstate(invalid="ignore", over="ignore"):     # the first pass, dropped
                got = rep.dot(torch.from_numpy(x), torch.from_numpy(y)).numpy()
            assert bits(got) == bits(want)
    finally:
        r.BLOCK, r.MAX_PROGRAMS = saved


@pytest.mark.parametrize("fmt", ["fp64"])         # fp32's numba gemm: benchmarks/bench_binned.py --bits
def test_numba_gemm_lanes_and_their_fallback(fmt):
    # columns side by side over two tiles (the second partial), K past the format's endurance (the
    # primaries counted and reset) and not a multiple of the k steps a pass; rows whose outputs
    # go as lanes (index known from the bound and a known product), rows with bounds in two bins,
    # in the top bin, with a nan, all zeros, lanes in bins 1-4 (converted scaled, then plain):
    # every output the model's bits
    dt = DTYPES[fmt]
    rep = replica("gemm", fmt, "numba")
    rng = np.random.default_rng(9)
    K = rep._ENDURANCE + 7
    N = rep._GEMM_TILE + 3
    A = rng.standard_normal((10, K))
    A[6:] *= 2.0 ** np.array([950, 920, 880, 860])[:, None]
    A[1] *= 2.0 ** rng.integers(-30, 30, K)
    A[2, 5] = 2.0 ** 100
    A[3, 9] = 2.0 ** (127 if fmt == "fp32" else 1023)
    A[4, 2] = np.nan
    A[5] = 0.0
    B = rng.standard_normal((K, N))
    B[:, 1] *= 2.0 ** -60
    A, B = A.astype(dt), B.astype(dt)
    want = np.stack([evaluate_binned(A.T, B[:, j], fmt, 3) for j in range(N)], axis=1).astype(dt)
    bound = np.abs(A[6:]).max(axis=1) * np.abs(B[:, 2]).max()
    assert list(row_index(bound, binned_format(fmt))) == [1, 2, 3, 4]
    assert bits(rep.gemm(A, B)) == bits(want)


@pytest.mark.parametrize("fmt", ["fp64", "fp32"])
def test_numba_register_deposit_and_its_fallback(fmt):
    # the deposit in vector registers (binned_numba._deposit_regs) in a later block: a term in a
    # higher bin (the largest pattern sends the block back), the format's largest value (a primary
    # overflows: the block goes through the loop again), an inf, both infinities, a nan; lengths
    # past the format's endurance a lane, whole groups and a rest; every case the model's bits
    dt = DTYPES[fmt]
    op = "dot" if fmt == "fp64" else "gemv"     # gemv's rows: the same deposit, no other compilation
    rep = replica(op, fmt, "numba")
    fi = np.finfo(dt)
    rng = np.random.default_rng(11)
    n = 2 * rep._BLOCK + 37
    at = rep._BLOCK + 101               # inside the second block's whole groups of lanes
    base = rng.standard_normal(n) * 2.0 ** rng.integers(-8, 8, n)
    rows = []
    for scale, value in ((1.0, 2.0 ** 60), (2.0 ** (fi.maxexp - 2 * (40 if fmt == "fp64" else 13) + 8), fi.max),
                         (1.0, np.inf), (1.0, np.nan), (1.0, 1.0)):
        row = base * scale
        row[at] = value
        rows.append(row)
    rows.append(np.where(np.arange(n) == at + 7, -np.inf, rows[2]))
    with np.errstate(over="ignore"):
        A = np.array(rows).astype(dt)
    y = np.where(np.arange(n) % 3 == 0, 1.0, rng.standard_normal(n)).astype(dt)
    want = evaluate_binned(A.T, y, fmt, 3).astype(dt)
    if op == "gemv":
        got = rep.gemv(A, y)
    else:                               # one piece (a thread's), whatever the thread count
        states = np.zeros((len(A), 1, rep._STATE), np.int64)
        for a, state in zip(A, states):
            rep._partial(a, y, 0, n, state[0])
        got = np.array([rep._merged(state) for state in states])
    assert bits(got) == bits(want)


def test_numba_dot_and_gemm_files_imported_fresh(tmp_path):
    # the deposit's vector width is picked when the module is imported: the written file, in a
    # fresh interpreter, must give the model's bits
    pytest.importorskip("numba")
    from fresh_replicas import run_fresh

    rng = np.random.default_rng(5)
    A = rng.standard_normal((3, 700)) * 2.0 ** rng.integers(-40, 40, (3, 700))
    A[1, 5] = np.inf
    B = rng.standard_normal((700, 9))
    x = B[:, 0].copy()
    dot_got, gemm_got = run_fresh([(compile_spec(parse(spec_text("dot", "fp64")), "numba"), "dot", (A[2], x)),
                                   (compile_spec(parse(spec_text("gemm", "fp64")), "numba"), "gemm", (A, B))],
                                  tmp_path)
    want_mm = np.stack([evaluate_binned(A.T, B[:, j], "fp64", 3) for j in range(9)], axis=1)
    assert bits(dot_got) == bits(np.float64(evaluate_binned(A[2:3].T, x, "fp64", 3)[0]))
    assert bits(gemm_got) == bits(want_mm.ravel())
