"""Orders per output position: revealed class by class, written as an `if` on
i, j, compiled to one replica per arm, equal to the black box bit for bit."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fpspec.cli import main
from fpspec.cli.reveal import positional_spec, provenance
from fpspec.compile import CompileError, compile_spec, load_replica
from fpspec.reveal.positions import labels, moved, reveal_positions, restricted
from fpspec.reveal.synthetic import gemm_target
from fpspec.spec import expand, parse
from fpspec.spec.expand import eval_cond
from fpspec.spec.positions import conditions
from fpspec.tree import format_tree, pairwise, reversed_sequential, sequential

K, M, NCOLS = 12, 6, 5
SEQ, PAIR, REV = sequential(range(K)), pairwise(range(K)), reversed_sequential(range(K))


def _target():
    # rows 0-3 sequential, rows 4-5 pairwise, column 4 reversed in every row
    return gemm_target([SEQ] * 4 + [PAIR] * 2, "fp32", ncols=NCOLS, col_trees={4: REV})


def _expected(i, j):
    return REV if j == 4 else SEQ if i < 4 else PAIR


def test_every_order_and_where_it_is_used():
    t = _target()
    orders = reveal_positions(t)
    assert [p.at for p in orders] == [(0, 0), (0, 4), (4, 0)]
    assert [p.revelation.tree for p in orders] == [SEQ, REV, PAIR]
    want = np.array([[0 if i < 4 else 2 for _ in range(4)] + [1] for i in range(M)])
    assert np.array_equal(labels(orders, t.output_shape), want)


def test_moved_and_restricted_views_read_one_position():
    t = _target()
    x = np.arange(1.0, M * K + 1).reshape(M, K)
    B = np.arange(1.0, K * NCOLS + 1).reshape(K, NCOLS)
    full = t.fn(x, B)
    assert np.array_equal(moved(t, 4, 4).fn(x[[4, 1, 2, 3, 0, 5]], B[:, [4, 1, 2, 3, 0]])[0, 0], full[4, 4])
    mask = np.zeros((M, NCOLS), bool)
    mask[4:, :4] = True
    view = restricted(t, mask, (4, 0))
    assert (view.m, view.ncols) == (2, 1)
    assert np.array_equal(view.fn(x[4:], B[:, :1]), full[4:, :1])


def _spec(t, orders):
    from fpspec.arith.probe import probe_arithmetic

    prov = provenance(t, ["reveal", "synthetic"])
    reports = [probe_arithmetic(restricted(t, p.mask, p.at), p.revelation.tree) for p in orders]
    return positional_spec(orders, prov, reports, t)


@pytest.fixture(scope="module")
def spec():
    t = _target()
    return _spec(t, reveal_positions(t))


def test_the_spec_gives_each_position_its_tree(spec):
    assert str(spec.order).startswith("if ")
    for i in range(M):
        for j in range(NCOLS):
            assert expand(spec, K, (i, j)) == _expected(i, j), (i, j)
    assert parse(str(spec)) == spec


@pytest.mark.parametrize("backend", ["numpy", "numba"])
def test_replicas_equal_the_black_box(spec, backend):
    t = _target()
    replica = load_replica(compile_spec(spec, target=backend), f"positions-{backend}")
    rng = np.random.default_rng(1)
    for _ in range(20):
        A = (rng.standard_normal((M, K)) * 2.0 ** rng.integers(-30, 30, (M, K))).astype(np.float32)
        B = (rng.standard_normal((K, NCOLS)) * 2.0 ** rng.integers(-30, 30, (K, NCOLS))).astype(np.float32)
        want = t.fn(A.astype(np.float64), B.astype(np.float64)).astype(np.float32)
        got = replica.gemm(A, B)
        assert np.array_equal(got.view(np.uint32), want.view(np.uint32))
    # another output shape may take other orders at the same positions: refused
    with pytest.raises(ValueError, match=f"A has 3 rows, but this replica's orders depend on the output position "
                                         f"and its spec covers {M} x {NCOLS} outputs only"):
        replica.gemm(A[:3], B)


def test_triton_replica_equals_the_black_box(spec):
    torch = pytest.importorskip("torch")
    pytest.importorskip("triton")
    t = _target()
    replica = load_replica(compile_spec(spec, target="triton"), "positions-triton")
    rng = np.random.default_rng(2)
    A = (rng.standard_normal((M, K)) * 2.0 ** rng.integers(-20, 20, (M, K))).astype(np.float32)
    B = (rng.standard_normal((K, NCOLS)) * 2.0 ** rng.integers(-20, 20, (K, NCOLS))).astype(np.float32)
    want = t.fn(A.astype(np.float64), B.astype(np.float64)).astype(np.float32)
    got = replica.gemm(torch.from_numpy(A), torch.from_numpy(B)).numpy()
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32))


def test_replica_modules_share_their_runtime(spec):
    src = compile_spec(spec, target="numba")
    assert src.count("def _shape(") == 1 and src.count("def _length(") == 1     # identical functions once
    assert "def gemm_o0(" in src and "def gemm_o2(" in src and src.count("\ndef gemm(") == 1


def test_positions_only_in_the_outermost_if():
    text = "op gemm\narithmetic {\n    input = fp32\n}\norder lanes(2, if i < 2: seq else: rev, seq)"
    with pytest.raises(CompileError, match="output position i"):
        compile_spec(parse(text), target="numpy")


def test_language_binds_i_and_j():
    s = parse("op gemm\norder\n    if j % 4 >= 2 and i < 3: seq\n    else: rev")
    assert str(parse(str(s))) == str(s)
    assert expand(s, 4, (0, 2)) == sequential(range(4))
    assert expand(s, 4, (3, 2)) == reversed_sequential(range(4))
    assert expand(s, 4) == reversed_sequential(range(4))          # a sum's only output is (0, 0)


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 9), st.integers(1, 9), st.integers(1, 3), st.data())
def test_conditions_describe_any_label_map(rows, cols, count, data):
    lab = np.array(data.draw(st.lists(st.integers(0, count - 1), min_size=rows * cols, max_size=rows * cols)))
    lab = np.unique(lab, return_inverse=True)[1].reshape(rows, cols)
    arms, other = conditions(lab)
    for i in range(rows):
        for j in range(cols):
            got = next((k for k, c in arms if eval_cond(c, 1, (i, j))), other)
            assert got == lab[i, j]


def test_periodic_rows_are_written_as_a_modulus():
    lab = np.zeros((64, 64), np.int64)
    lab[:, 8:56] = 1
    lab[np.arange(64) % 12 >= 6] = 1
    lab[60:] = 0
    arms, other = conditions(lab)
    assert len(arms) == 1
    assert str(arms[0][1]) == ("i < 60 and i % 12 < 6 and j >= 8 and j < 56 or i < 60 and i % 12 >= 6")


def test_numpy_matmul_edge_tiles_end_to_end(tmp_path, capsys):
    """OpenBLAS sgemm at 13 x 24 runs other kernels on some tiles: the spec holds each
    order where it is used and the Numba replica equals numpy.matmul bit for bit."""
    path = tmp_path / "mm.fps"
    code = main(["reveal", "numpy.matmul", "--op", "gemm", "--m", "13", "--ncols", "24", "-n", "16",
                 "-o", str(path)])
    out, err = capsys.readouterr()
    assert code == 0, err
    spec = parse(path.read_text())
    if "if " not in str(spec.order):
        pytest.skip("this BLAS computes every output of a 13 x 24 sgemm in one order")
    code = main(["verify", str(path), "--target", "numba", "--against", "numpy.matmul", "--samples", "400"])
    out, err = capsys.readouterr()
    assert code == 0, out + err
    assert "EQUIVALENT" in out


def test_numpy_gemv_leftover_rows_end_to_end(tmp_path, capsys):
    """OpenBLAS sgemv's m % 4 leftover rows share the FMA kernel's tree but round their
    products: found by bits on random inputs, probed apart, written as a `using` arm."""
    path = tmp_path / "gv.fps"
    code = main(["reveal", "numpy.matmul", "--op", "gemv", "--m", "5", "-n", "200", "-o", str(path)])
    out, err = capsys.readouterr()
    assert code == 0, err
    spec = parse(path.read_text())
    if "if " not in str(spec.order):
        pytest.skip("this BLAS computes every row of a 5-row sgemv alike")
    assert "using(" in str(spec.order)
    code = main(["verify", str(path), "--target", "numpy", "--against", "numpy.matmul", "--samples", "1000"])
    out, err = capsys.readouterr()
    assert code == 0, out + err
    assert "EQUIVALENT" in out


def test_outputs_of_one_tree_split_by_arithmetic():
    """A black box whose row 2 rounds its products apart from the others' (same tree)."""
    from fpspec.reveal.targets import from_callable

    def gemv(A, x):
        A, x = np.asarray(A, np.float32), np.asarray(x, np.float32)
        out = np.empty(A.shape[0], np.float32)
        for r in range(A.shape[0]):
            acc = np.float32(0)
            for k in range(A.shape[1]):
                if r == 2:
                    acc = np.float32(acc + np.float32(A[r, k] * x[k]))
                else:      # exact product, one rounding: an FMA
                    acc = np.float32(np.float64(acc) + np.float64(A[r, k]) * np.float64(x[k]))
            out[r] = acc
        return out

    t = from_callable(gemv, op="gemv", n=6, dtype="float32", m=4)
    orders = reveal_positions(t)
    assert [p.at for p in orders] == [(0, 0), (2, 0)]
    assert orders[0].revelation.tree == orders[1].revelation.tree == sequential(range(6))
    assert orders[1].mask.tolist() == [False, False, True, False]


def test_show_expands_at_an_output(tmp_path, capsys, spec):
    path = tmp_path / "pos.fps"
    path.write_text(str(spec))
    assert main(["show", str(path), "--at", "4,0"]) == 0
    assert capsys.readouterr().out.rstrip().splitlines()[-1] == format_tree(PAIR)
    assert main(["show", str(path), "--at", "4,x"]) == 2
    assert "--at takes a row and column" in capsys.readouterr().err


USING_ARM = """op gemv
n in 3
provenance {
    shape {
        m = 3
    }
}
arithmetic {
    input = fp32
    product = fma
    accumulator = fp32
    init = +0.0
    output = fp32
}
arithmetic r {
    product = rounded
}
order
    if i == 1: using(r, ((0 2) 1))
    else: ((0 2) 1)
"""


@pytest.mark.parametrize("backend", ["numpy", "numba"])
def test_an_arm_in_its_own_arithmetic_compiles(backend):
    """`using` around a whole arm is that arm's kernel arithmetic (literal trees included)."""
    replica = load_replica(compile_spec(parse(USING_ARM), target=backend), f"using-arm-{backend}")
    rng = np.random.default_rng(3)
    for _ in range(200):
        A = (rng.standard_normal((3, 3)) * 2.0 ** rng.integers(-30, 30, (3, 3))).astype(np.float32)
        x = rng.standard_normal(3).astype(np.float32)
        got = replica.gemv(A, x)
        p = (A.astype(np.float64) * x).astype(np.float32)
        rounded = np.float32(np.float32(p[1, 0] + p[1, 2]) + p[1, 1])
        fma = np.float32(np.float64(np.float32(p[0, 0] + A[0, 2].astype(np.float64) * x[2])) +
                         A[0, 1].astype(np.float64) * x[1])
        assert got[1].view(np.uint32) == rounded.view(np.uint32)
        assert got[0].view(np.uint32) == fma.view(np.uint32) or not np.isfinite(fma)
