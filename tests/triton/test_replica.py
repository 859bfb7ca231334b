"""Rendered Triton replicas against the reference (fpspec.arith.evaluate on the
tree the IR denotes, fpspec.compile.trees.tree_of), bit for bit, on the interpreter."""
import numpy as np
import pytest
import torch

from fpspec.arith import Arithmetic, evaluate, get_params
from fpspec.compile.ir import (BinOp, Blocks, Call, CompileError, Const, Fold, FusedChain,
                               Kernel, Lanes, Pairwise, Part, Segments, TreeReduce, Var)
from fpspec.compile.trees import table_of, tree_of
from fpspec.tree import parse_tree

m, n = Var("m"), Var("n")
TORCH = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}


def c(v):
    return Const(v)


def values(rng, fmt, shape, span=6):
    x = rng.standard_normal(shape) * np.exp2(rng.integers(-span, span + 1, shape))
    return torch.from_numpy(x.astype(np.float32)).to(TORCH[fmt])


def as_f64(t):
    return t.float().numpy().astype(np.float64)


def bits_equal(got, want):
    g = got.float().numpy().astype(np.float64)
    return np.array_equal(g, want, equal_nan=True) and np.array_equal(np.signbit(g), np.signbit(want))


def reference_matmul(kernel, A, B):
    """evaluate() on the kernel's tree for every output element at once."""
    M, K = A.shape
    N = B.shape[1]
    X = np.repeat(as_f64(A).T[:, :, None], N, axis=2).reshape(K, M * N)
    Y = np.repeat(as_f64(B)[:, None, :], M, axis=1).reshape(K, M * N)
    with np.errstate(all="ignore"):
        return evaluate(tree_of(kernel, K), X, Y, kernel.arithmetic).reshape(M, N)


H100_FP16 = Arithmetic(input="fp16", product="exact", accumulator="fp32", init="+0.0", output="fp16",
                       fused=get_params("h100-fp16"))
H100_BF16 = Arithmetic(input="bf16", product="exact", accumulator="fp32", init="+0.0", output="bf16",
                       fused=get_params("h100-bf16"))
A100_FP16 = Arithmetic(input="fp16", product="exact", accumulator="fp32", init="none", output="fp32",
                       fused=get_params("a100-fp16"))
FP32_FMA = Arithmetic(input="fp32", product="fma", accumulator="fp32", output="fp32")
FP32_ROUNDED = Arithmetic(input="fp32", product="rounded", accumulator="fp32", output="fp32")
CHAIN16 = FusedChain(c(16))

MATRIX_CASES = [
    # (label, arithmetic, root, shapes (M, N, K))
    ("h100 fp16 chain", H100_FP16, CHAIN16, [(5, 7, 37), (16, 16, 16), (3, 2, 1), (17, 33, 48)]),
    ("h100 bf16 chain", H100_BF16, CHAIN16, [(9, 4, 50)]),
    ("split-K blocks of 32, pairwise", H100_FP16, Blocks(c(32), CHAIN16, Pairwise()), [(4, 6, 100), (3, 3, 32)]),
    ("split-K halves, tree", H100_FP16,
     Segments((Part(BinOp("//", m, c(2)), CHAIN16), Part(BinOp("-", m, BinOp("//", m, c(2))), CHAIN16)), Fold()),
     [(6, 5, 70)]),
    ("chain then a fold tail", H100_FP16,
     Segments((Part(BinOp("-", m, BinOp("%", m, c(16))), CHAIN16), Part(BinOp("%", m, c(16)), None)), Fold()),
     [(4, 3, 53)]),
    ("a100 fp16 chain of 8", A100_FP16, FusedChain(c(8)), [(5, 6, 29)]),
    ("fp32 fma fold", FP32_FMA, Fold(), [(3, 9, 21)]),
    ("fp32 fma reverse fold", FP32_FMA, Fold(reverse=True), [(3, 4, 11)]),
    ("fp32 4 lanes, tree", FP32_ROUNDED, Lanes(c(4), Fold(), TreeReduce()), [(5, 3, 30)]),
    ("fp32 8 lanes fma, pairwise", FP32_FMA, Lanes(c(8), Fold(), Pairwise()), [(2, 2, 67)]),
    ("fp32 pairwise", FP32_ROUNDED, Pairwise(split=BinOp("-", m, c(1))), [(3, 3, 9)]),
    # cuBLAS: the K loop starts with the partial tile of 64, so the short node is first or inside
    ("h100 fp16 chain, short node at m % 64 // 16", H100_FP16,
     FusedChain(c(16), BinOp("//", BinOp("%", m, c(64)), c(16))), [(3, 4, 50), (2, 3, 65), (4, 2, 77), (2, 2, 81)]),
    ("h100 bf16 chain, short node first", H100_BF16, FusedChain(c(16), c(0)), [(3, 3, 34)]),
]


@pytest.mark.parametrize("label,ar,root,shapes", MATRIX_CASES, ids=[c[0] for c in MATRIX_CASES])
def test_gemm_matches_reference(load_replica, label, ar, root, shapes):
    # the lengths it is called at (the compiler plans every n of the range: an 8-lane FMA order
    # is not runnable at K = 2, where a lone product meets a partial sum)
    ks = [k for _, _, k in shapes]
    kernel = Kernel("gemm", ar, root, source=f"# {label}", name=label, n_min=min(ks), n_max=max(ks))
    rep = load_replica(kernel)
    rng = np.random.default_rng(len(label))
    for M, N, K in shapes:
        A, B = values(rng, ar.input, (M, K)), values(rng, ar.input, (K, N))
        got = rep.gemm(A, B)
        assert rep.last_path() == "emulated"
        assert got.dtype == TORCH[ar.output]
        assert bits_equal(got, reference_matmul(kernel, A, B)), (label, M, N, K)


def test_literal_tree_table(load_replica):
    tree = parse_tree("(((0 1) (2 3)) ((4 (5 6)) 7))")
    kernel = Kernel("dot", FP32_ROUNDED, table_of(tree), n_min=8, n_max=8)
    rep = load_replica(kernel)
    rng = np.random.default_rng(5)
    x, y = values(rng, "fp32", 8, 20), values(rng, "fp32", 8, 20)
    want = evaluate(tree, as_f64(x), as_f64(y), FP32_ROUNDED)
    assert bits_equal(rep.dot(x, y).reshape(1), np.asarray([want]))
    with pytest.raises(ValueError, match="the inner dimension of x and y has length 7, outside the range n in 8..8"):
        rep.dot(x[:7], y[:7])


def test_gemv_and_dot_share_the_order(load_replica):
    kernel = Kernel("gemv", H100_FP16, Blocks(c(64), CHAIN16, Fold()))
    rep = load_replica(kernel)
    rng = np.random.default_rng(9)
    A, x = values(rng, "fp16", (7, 150)), values(rng, "fp16", 150)
    got = rep.gemv(A, x)
    assert got.shape == (7,)
    assert bits_equal(got, reference_matmul(kernel, A, x.reshape(-1, 1)).reshape(-1))
    dot = load_replica(Kernel("dot", H100_FP16, Blocks(c(64), CHAIN16, Fold())))
    assert bits_equal(dot.dot(A[3], x).reshape(1), reference_matmul(kernel, A[3:4], x.reshape(-1, 1)).reshape(-1))


def test_signed_zeros_and_specials(load_replica):
    kernel = Kernel("gemm", Arithmetic(input="fp16", product="exact", accumulator="fp32", init="none",
                                       output="fp32", fused=get_params("h100-fp16")), CHAIN16)
    rep = load_replica(kernel)
    A = torch.tensor([[-0.0] * 20, [65504.0] * 20, [float("inf")] + [1.0] * 19, [float("nan")] + [0.0] * 19],
                     dtype=torch.float16)
    B = torch.tensor([[0.0, 65504.0, -1.0]] * 20, dtype=torch.float16)
    B[0, 2] = 0.0   # inf * 0
    assert bits_equal(rep.gemm(A, B), reference_matmul(kernel, A, B))


@pytest.mark.parametrize("count", [1, 5, 8, 9, 32, 129, 1000, 4099])
def test_numpy_sum_order(load_replica, count, numpy_pairwise):
    kernel = Kernel("sum", Arithmetic(input="fp32", product="none", accumulator="fp32", output="fp32"),
                    Call("pw"), orders=(("pw", numpy_pairwise),))
    rep = load_replica(kernel)
    rng = np.random.default_rng(count)
    x = values(rng, "fp32", count, 12)
    got = rep.sum(x)
    assert got.numpy().view(np.uint32) == np.sum(x.numpy()).view(np.uint32)
    assert bits_equal(got.reshape(1), np.asarray([evaluate(tree_of(kernel, count), as_f64(x),
                                                           arithmetic=kernel.arithmetic)]))


@pytest.mark.parametrize("small_level", [0, 8])
def test_levels_launched_one_by_one_or_merged(load_replica, small_level, numpy_pairwise):
    """The combine levels give the same bits whether each has its own launch or they share one."""
    kernel = Kernel("sum", Arithmetic(input="fp32", product="none", accumulator="fp32", output="fp32"),
                    Call("pw"), orders=(("pw", numpy_pairwise),))
    rep = load_replica(kernel)
    rep.REPLICA.SMALL_LEVEL = small_level
    x = values(np.random.default_rng(4), "fp32", 3001, 12)
    assert rep.sum(x).numpy().view(np.uint32) == np.sum(x.numpy()).view(np.uint32)


def test_sum_of_half_inputs(load_replica):
    ar = Arithmetic(input="fp16", product="none", accumulator="fp32", init="+0.0", output="fp16")
    kernel = Kernel("sum", ar, Lanes(c(4), Fold(), TreeReduce()))
    rep = load_replica(kernel)
    x = values(np.random.default_rng(2), "fp16", 301)
    want = evaluate(tree_of(kernel, 301), as_f64(x), arithmetic=ar)
    assert bits_equal(rep.sum(x).reshape(1), np.asarray([want]))


def test_native_path_refused_off_gpu(load_replica):
    rep = load_replica(Kernel("gemm", H100_FP16, CHAIN16), path="native")
    A = torch.ones((2, 16), dtype=torch.float16)
    with pytest.raises(ValueError, match="native path cannot run this spec here: not on a CUDA device"):
        rep.gemm(A, A.T.contiguous())
    assert rep.gemm(A, A.T.contiguous(), path="emulated").float().sum().item() == 64.0


def test_unsupported_specs_raise_one_line():
    from fpspec.compile.backends.triton import BACKEND

    with pytest.raises(CompileError, match="fp64 inputs are supported with an fp64 accumulator only"):
        BACKEND.render(Kernel("sum", Arithmetic(input="fp64", accumulator="fp32", output="fp32"), Fold()))
    with pytest.raises(CompileError, match="no fused section"):
        BACKEND.render(Kernel("gemm", FP32_FMA, CHAIN16))
    with pytest.raises(CompileError, match="path must be one of"):
        BACKEND.render(Kernel("gemm", H100_FP16, CHAIN16), path="fast")


# the GPU's emulated chain kernel's ways of forming aligned products (ARITH): integers,
# fp32 (fp16 only), fp64; 3 (fp64 with libdevice.fma_rz) runs only on a GPU (test_gpu.py)
TILE_ARITH = {"fp16": [0, 1, 2], "bf16": [0, 2]}


@pytest.mark.parametrize("label,ar,root,shape,arith", [
    (label, ar, root, shape, arith) for label, ar, root, shape in [
        ("h100 fp16 chain", H100_FP16, CHAIN16, (5, 7, 37)),
        ("h100 bf16 split-K", H100_BF16, Blocks(c(32), CHAIN16, Pairwise()), (3, 4, 70)),
        ("a100 fp16 chain of 8", A100_FP16, FusedChain(c(8)), (4, 3, 21)),
    ] for arith in TILE_ARITH[ar.input]])
def test_gpu_form_of_the_chain_kernel(load_replica, label, ar, root, shape, arith):
    """The kernel a GPU runs, forced onto the interpreter."""
    kernel = Kernel("gemm", ar, root)
    rep = load_replica(kernel)
    rep.REPLICA.emulated_kernel = "tile"
    rep.REPLICA.emulated_arith = arith
    rng = np.random.default_rng(11)
    M, N, K = shape
    A, B = values(rng, ar.input, (M, K), 12), values(rng, ar.input, (K, N), 12)
    A[0, 3] = float("inf")   # the row with a special input takes the exact fallback
    want = reference_matmul(kernel, A, B)
    assert bits_equal(rep.gemm(A, B), want), label
    A[0, 3] = 1.0   # and a block with none takes no fallback
    assert bits_equal(rep.gemm(A, B), reference_matmul(kernel, A, B)), label


@pytest.mark.parametrize("label,ar,root,shape,arith", [
    (label, ar, root, shape, arith) for label, ar, root, shape in [
        ("h100 fp16 chain, short node first", H100_FP16, FusedChain(c(16), BinOp("//", BinOp("%", m, c(32)), c(16))),
         (4, 6, 50)),
        ("h100 bf16 chain", H100_BF16, CHAIN16, (3, 5, 40)),
    ] for arith in TILE_ARITH[ar.input]])
def test_tile_form_with_zeros_and_nan(load_replica, label, ar, root, shape, arith):
    """Zero rows (nodes of zero products keep c), negative zeros, then a nan input; the inf/nan
    pass only where the host finds inf or nan (emulated_specials="auto")."""
    kernel = Kernel("gemm", ar, root)
    rep = load_replica(kernel)
    rep.REPLICA.emulated_kernel = "tile"
    rep.REPLICA.emulated_arith = arith
    rep.REPLICA.emulated_specials = "auto"
    rng = np.random.default_rng(12)
    M, N, K = shape
    A, B = values(rng, ar.input, (M, K), 12), values(rng, ar.input, (K, N), 12)
    A[1, :] = 0.0
    B[2, :] = -B[2, :] * 0
    assert bits_equal(rep.gemm(A, B), reference_matmul(kernel, A, B)), label
    B[5, 1] = float("nan")
    assert bits_equal(rep.gemm(A, B), reference_matmul(kernel, A, B)), label


@pytest.mark.parametrize("fmt,first,step,arith", [("fp16", -22, 5, a) for a in TILE_ARITH["fp16"]]
                         + [("bf16", -125, 34, a) for a in TILE_ARITH["bf16"]])
def test_tile_form_at_the_format_extremes(load_replica, fmt, first, step, arith):
    """The GPU's emulated kernel (fp64 rounding of each node) where rounding is hard: row i of A
    scaled by 2^(first + step * i), column j of B by 2^(step // 3 * j - 10): fp16 subnormal
    inputs; bf16 results below fp32's normals and above its range; fp32 output (no final rounding)."""
    ar = Arithmetic(input=fmt, product="exact", accumulator="fp32", init="none", output="fp32",
                    fused=get_params(f"h100-{fmt}"))
    kernel = Kernel("gemm", ar, CHAIN16)
    rep = load_replica(kernel)
    rep.REPLICA.emulated_kernel = "tile"
    rep.REPLICA.emulated_arith = arith
    rng = np.random.default_rng(step)
    M, N, K = 8, 8, 40
    scale = np.exp2(first + step * np.arange(M, dtype=np.float64))[:, None]
    A = torch.from_numpy((rng.standard_normal((M, K)) * scale).astype(np.float32)).to(TORCH[fmt])
    cols = np.exp2(step // 3 * np.arange(N, dtype=np.float64) - 10)[None, :]
    B = torch.from_numpy((rng.standard_normal((K, N)) * cols).astype(np.float32)).to(TORCH[fmt])
    B[:, 1] = -B[:, 0] * 2   # and a column cancelling against another
    want = reference_matmul(kernel, A, B)
    assert bits_equal(rep.gemm(A, B), want)
    if fmt == "bf16":   # the rows did reach both ends
        assert np.isinf(want).any() and (np.abs(want[np.isfinite(want) & (want != 0)]) < 2.0 ** -126).any()


def test_rendering_is_deterministic_and_self_contained(numpy_pairwise):
    from fpspec.compile.backends.triton import BACKEND

    kernel = Kernel("sum", Arithmetic(input="fp32", product="none", accumulator="fp32", output="fp32"),
                    Call("pw"), orders=(("pw", numpy_pairwise),), source="order pw", name="np.fps")
    text = BACKEND.render(kernel)
    assert text == BACKEND.render(kernel)
    assert text.startswith(f"# @generated by fpspec from np.fps (sha256 {kernel.sha256})")
    imports = sorted({line for line in text.splitlines() if line.startswith(("import ", "from "))})
    assert imports == ["import contextlib", "import numpy as np", "import torch", "import triton",
                       "import triton.language as tl", "import types"]


# ---------------------------------------------------------------- the sum kernels' fast forms
# (leaf blocks and perfect levels: triton_host.py, notes [leaf blocks] and [perfect levels])

FP32 = Arithmetic(input="fp32", product="none", accumulator="fp32", output="fp32")
FP16_SUM = Arithmetic(input="fp16", product="none", accumulator="fp32", init="+0.0", output="fp16")
LANES_PAIRWISE, LANES_TREE, LANES_FOLD = 2, 3, 4   # triton_host's leaf kinds


def leaf(k, tree):
    """k lanes folded, `tree` over them, the rest (m mod k terms) folded in: numpy's block."""
    return Segments((Part(BinOp("-", m, BinOp("%", m, c(k))), Lanes(c(k), Fold(), tree)),
                     Part(BinOp("%", m, c(k)), None)), Fold())


def check_sum(rep, kernel, x):
    want = evaluate(tree_of(kernel, x.numel()), as_f64(x), arithmetic=kernel.arithmetic)
    assert bits_equal(rep.sum(x).reshape(1), np.asarray([want]))


def facts(rep, n):
    """(perfect height, [(kind, k, blocks)], fold segments, upper slots) of the plan at n."""
    p = rep.REPLICA.plan(n)
    return (p.height, [(g.kind, g.k, g.ids.numel()) for g in p.leaf_groups], p.fold_ids.numel(),
            p.upper.num_slots)


@pytest.mark.parametrize("n,expected", [
    (5, (0, [(LANES_PAIRWISE, 1, 1)], 0, 1)),          # below 8: one fold, the k = 1 leaf
    (129, (1, [(LANES_PAIRWISE, 8, 2)], 0, 1)),        # 64 + 65: two blocks, one pair
    (4099, (0, [(LANES_PAIRWISE, 8, 33)], 0, 65)),     # blocks at two depths: the step tables
    (100003, (10, [(LANES_PAIRWISE, 8, 1024)], 0, 1)),  # a perfect tree: leaf kernel + one pairs launch
])
def test_numpy_order_plans_and_bits(load_replica, n, expected, numpy_pairwise):
    kernel = Kernel("sum", FP32, Call("pw"), orders=(("pw", numpy_pairwise),))
    rep = load_replica(kernel)
    assert facts(rep, n) == expected
    x = values(np.random.default_rng(n), "fp32", n, 12)
    got = rep.sum(x)
    assert got.numpy().view(np.uint32) == np.sum(x.numpy()).view(np.uint32)


def test_numpy_order_at_1e8_is_a_perfect_tree(load_replica, numpy_pairwise):
    """The benchmark's n: 2^20 blocks of 8 lanes, all 20 levels above them perfect (plan only)."""
    kernel = Kernel("sum", FP32, Call("pw"), orders=(("pw", numpy_pairwise),))
    assert facts(load_replica(kernel), 10 ** 8) == (20, [(LANES_PAIRWISE, 8, 2 ** 20)], 0, 1)


@pytest.mark.parametrize("label,ar,root,n,expected", [
    ("tree_reduce lanes, tail", FP32, Blocks(c(70), leaf(8, TreeReduce()), Fold()), 213,
     (0, [(LANES_PAIRWISE, 1, 1), (LANES_TREE, 8, 3)], 0, 7)),   # the last block of 3 is a plain fold
    ("folded lanes, tail", FP32, Blocks(c(45), leaf(4, Fold()), Pairwise()), 180,
     (2, [(LANES_FOLD, 4, 4)], 0, 1)),
    ("16 lanes, fp16 in and out", FP16_SUM, Blocks(c(64), leaf(16, Pairwise()), Pairwise()), 512,
     (3, [(LANES_PAIRWISE, 16, 8)], 0, 1)),
    ("perfect bottom, a fold above", FP32, Blocks(c(256), Blocks(c(64), Lanes(c(8), Fold(), Pairwise()), Pairwise()),
                                                  Fold()), 768,
     (2, [(LANES_PAIRWISE, 8, 12)], 0, 5)),
    ("an odd block out", FP32, Blocks(c(256), Blocks(c(64), Lanes(c(8), Fold(), Pairwise()), Pairwise()), Fold()),
     832, (0, [(LANES_PAIRWISE, 8, 13)], 0, 25)),
    ("leaf blocks beside reverse folds", FP32,
     Segments((Part(c(64), leaf(8, Pairwise())), Part(BinOp("-", m, c(64)), Fold(reverse=True))), Pairwise()), 100,
     (0, [(LANES_PAIRWISE, 8, 1)], 1, 3)),
])
def test_leaf_forms(load_replica, label, ar, root, n, expected):
    kernel = Kernel("sum", ar, root, name=label)
    rep = load_replica(kernel)
    assert facts(rep, n) == expected, label
    x = values(np.random.default_rng(n), ar.input, n, 12)
    x[3] = -0.0
    check_sum(rep, kernel, x)


def test_sum_signed_zeros_and_specials(load_replica):
    """-0.0 sums stay -0.0 through lanes, trees and tails (no +0.0 start); inf and nan propagate."""
    kernel = Kernel("sum", FP32, Blocks(c(13), leaf(4, Fold()), Pairwise()))
    rep = load_replica(kernel)
    check_sum(rep, kernel, torch.full((52,), -0.0))
    x = torch.ones(52)
    x[7], x[40] = float("inf"), float("-inf")
    check_sum(rep, kernel, x)


@pytest.mark.parametrize("count", [3, 7, 9, 33, 100, 127, 300])
def test_lanes_whose_leftovers_join_lane_0(load_replica, count):
    """torch.sum's order: lanes(8, lanes(4, seq, seq, seq), seq, split(1, seq, seq))."""
    inner = Lanes(c(4), Fold(), Fold(), Fold())
    left = Segments((Part(c(1), Fold()), Part(BinOp("-", m, c(1)), Fold())), Fold())
    kernel = Kernel("sum", Arithmetic(input="fp32", product="none", accumulator="fp32", init="+0.0", output="fp32"),
                    Lanes(c(8), inner, Fold(), left))
    rep = load_replica(kernel)
    x = values(np.random.default_rng(count), "fp32", count, 12)
    want = evaluate(tree_of(kernel, count), as_f64(x), arithmetic=kernel.arithmetic)
    assert bits_equal(rep.sum(x).reshape(1), np.asarray([want]))


def _mmasim(name, output):
    from fpspec.arith.units import get_unit, mmasim_conventions

    node = mmasim_conventions(get_unit(name)).node
    return Arithmetic(input=node.input, product="exact", accumulator="fp32", init="+0.0", output=output, fused=node)


@pytest.mark.parametrize("name,output,width", [("h100-bf16", "fp32", 16), ("a100-bf16", "fp32", 8)])
def test_mmasim_conventions_chain(load_replica, name, output, width):
    """MMA-Sim's zero convention (zeros align at 2^-126; fpspec.arith.fused note [zero exponent]):
    the wide form matches the model, also where zeros against large bf16 operands (fp16 ones
    reach 2^15 only) make it differ from FTTN's."""
    ar = _mmasim(name, output)
    kernel = Kernel("gemm", ar, FusedChain(c(width)), source=f"# {name} mmasim", name=name, n_min=40, n_max=40)
    rep = load_replica(kernel)
    rng = np.random.default_rng(width)
    # products near 2^-40, and zeros of A against entries of B near 2^100: MMA-Sim aligns
    # those zero products at 2^(100 - 126), which truncates the others (FTTN ignores them)
    A = torch.from_numpy((rng.standard_normal((6, 40)) * 2.0 ** -20).astype(np.float32)).to(TORCH[ar.input])
    B = torch.from_numpy((rng.standard_normal((40, 5)) * 2.0 ** -20).astype(np.float32)).to(TORCH[ar.input])
    A[:, ::5] = 0
    B[::5, :] = torch.from_numpy((rng.standard_normal((8, 5)) * 2.0 ** 100).astype(np.float32)).to(B.dtype)
    got = rep.gemm(A, B)
    want = reference_matmul(kernel, A, B)
    assert rep.last_path() == "emulated" and bits_equal(got, want)
    fttn = Kernel("gemm", Arithmetic(input=ar.input, product="exact", accumulator="fp32", init="+0.0",
                                     output=output, fused=get_params(name)), FusedChain(c(width)), n_min=40, n_max=40)
    assert not np.array_equal(reference_matmul(fttn, A, B), want, equal_nan=True)   # the inputs tell them apart


@pytest.mark.parametrize("name", ["mi300x-fp16", "mi300x-bf16"])
def test_amd_combine_chain(load_replica, name):
    """AMD CDNA3's fused nodes (fpspec.arith.fused note [amd combine]) chained along K: the
    wide form against the model, random values with cancellations and zeros."""
    node = get_params(name)
    ar = Arithmetic(input=node.input, product="exact", accumulator="fp32", init="+0.0", output="fp32", fused=node)
    kernel = Kernel("gemm", ar, FusedChain(c(node.w)), source=f"# {name}", name=name, n_min=29, n_max=29)
    rep = load_replica(kernel)
    rng = np.random.default_rng(node.w + len(name))
    A, B = values(rng, ar.input, (7, 29), 8), values(rng, ar.input, (29, 6), 8)
    A[:, 3::5] = -A[:, 2::5][:, :A[:, 3::5].shape[1]]
    A[torch.from_numpy(rng.random((7, 29)) < 0.15)] = 0
    got = rep.gemm(A, B)
    assert rep.last_path() == "emulated" and bits_equal(got, reference_matmul(kernel, A, B))
