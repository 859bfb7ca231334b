"""Sums shaped like a GPU reduction (torch.sum on CUDA): fp16 / bf16 inputs summed in fp32, a
batched call that sums its rows in another order, rows of packed queries that overflow, and
torch.mean read back as its sum."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fpspec.errors import FpspecError
from fpspec.formats import get_format, round_to
from fpspec.reveal import synthetic as S
from fpspec.reveal.engine import reveal
from fpspec.reveal.masks import plan_masks
from fpspec.reveal.oracle import LcaOracle
from fpspec.reveal.targets import Target
from fpspec.tree import Node, sequential


def cuda_block_tree(n: int, vec: int = 4, threads: int | None = None):
    """One CUDA block's sum: thread t loads vectors of `vec` at t, t + threads, ... into `vec`
    accumulators (combined in order), then a shared-memory halving down to 32 threads and a
    warp's shuffles at offsets 1, 2, 4, ... (torch's reduce kernel for one output row)."""
    threads = threads or n // vec
    acc = {}
    for t in range(threads):
        lanes = [sequential([vec * (t + threads * s) + a for s in range(n // (vec * threads))])
                 for a in range(vec)]
        node = lanes[0]
        for lane in lanes[1:]:
            node = Node((node, lane))
        acc[t] = node
    off = threads // 2
    while off >= 32:
        for t in range(off):
            acc[t] = Node((acc[t], acc[t + off]))
        off //= 2
    lanes = [acc[t] for t in range(min(32, threads))]
    step = 1
    while step < len(lanes):
        for t in range(0, len(lanes), 2 * step):
            lanes[t] = Node((lanes[t], lanes[t + step]))
        step *= 2
    return lanes[0]


def gpu_sum_target(tree, fmt: str, rows_tree=None) -> Target:
    """Inputs in `fmt`, partial sums in fp32, the result rounded to `fmt` (torch's CUDA sum of
    fp16 / bf16); `rows_tree`: the order a batched call sums each of its rows in."""
    prog, rows = S.TreeProgram(tree, "fp32"), S.TreeProgram(rows_tree or tree, "fp32")
    f = get_format(fmt)
    ident = lambda x: np.asarray(x, dtype=np.float64)  # noqa: E731
    return Target("gpu.sum", "sum", prog.n, f.name, fn=lambda x: round_to(f, prog(x)), native=ident,
                  to_float64=ident, call_rows=lambda X: round_to(f, rows(X)))


@pytest.mark.parametrize("fmt", ["fp16", "bf16", "fp32"])
def test_a_cuda_block_sum_is_revealed(fmt):
    tree = cuda_block_tree(512)
    assert reveal(gpu_sum_target(tree, fmt)).tree == tree


def test_a_bf16_sum_wider_than_its_counts_is_revealed_in_windows():
    # bf16 counts 255 units exactly: 1024 leaves take windows (the modified algorithm)
    tree = cuda_block_tree(1024, threads=64)
    rev = reveal(gpu_sum_target(tree, "bf16"))
    assert rev.tree == tree and rev.algorithm == "modified" and "window 255" in rev.plan


def test_a_batched_call_in_another_order_is_not_trusted():
    # one row: 128 threads of one vector each; many rows: 32 threads per row, 4 vectors each
    one, many = cuda_block_tree(512), cuda_block_tree(512, threads=32)
    assert one != many
    assert reveal(gpu_sum_target(one, "fp32", rows_tree=many)).tree == one


def test_fp32_masks_leave_room_for_packed_rows():
    plan = plan_masks(S.sum_target(sequential(range(1024)), "fp32"))
    assert plan.stack == 128 and plan.M * plan.stack <= get_format("fp32").largest
    assert plan.window == 2 ** 24 - 1 and plan.u == 1.0


def test_a_packed_row_that_overflows_is_asked_again_alone():
    # +M at 0 and at 2 meet first: 2 * 2^127 overflows fp32, the row reads nan
    tree = Node((Node((0, 2)), Node((1, 3))))
    target = S.sum_target(tree, "fp32")
    plan = plan_masks(target)
    big = dataclasses.replace(plan, M=2.0 ** 127, a_mask=2.0 ** 127, u=1.0, a_unit=1.0)
    oracle = LcaOracle(target, big)
    got = oracle.l_frames([0, 2], [np.array([1]), np.array([3])], [np.array([0, 1]), np.array([2, 3])])
    # each pair's lca is the root, which holds both leaves of its unit set
    assert [g.tolist() for g in got] == [[2], [2]]


def test_torch_mean_reads_back_its_sum():
    from fpspec.reveal.targets import resolve_target

    pytest.importorskip("torch")
    for n in (1000, 64):
        mean = reveal(resolve_target("torch.mean", n=n, dtype="float32"))
        assert mean.tree == reveal(resolve_target("torch.sum", n=n, dtype="float32")).tree
    with pytest.raises(FpspecError, match="power of two"):
        resolve_target("torch.mean", n=1000, dtype="float16")


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_torch_sum_on_cuda_is_revealed_and_replayed(dtype):
    """torch.sum on CUDA: its tree, and the tree's evaluation in its arithmetic equals the GPU."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    from fpspec.arith import Arithmetic, evaluate
    from fpspec.reveal.targets import resolve_target

    target = resolve_target("torch.sum", n=1000, dtype=dtype, device="cuda")
    tree = reveal(target).tree
    fmt = target.fmt
    rng = np.random.default_rng(5)
    X = round_to(get_format(fmt), rng.standard_normal((64, 1000)))
    got = np.array([target.run_sum(x) for x in X])
    ar = Arithmetic(input=fmt, product="none", accumulator="fp32", init="+0.0", output=fmt)
    want = evaluate(tree, X.T, None, ar)
    assert np.array_equal(got, want)


@pytest.mark.gpu
def test_scaled_mm_e5m2_is_refused_in_one_line():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    from fpspec.reveal.targets import resolve_target

    with pytest.raises(FpspecError, match="e4m3 only"):
        resolve_target("torch._scaled_mm", n=64, dtype="float8_e5m2", device="cuda", m=16, ncols=16)


# ---------------------------------------------------------------- every n: the kernel's configuration

def reduce_kernel_tree(n: int, vec: int, sms: int = 132):
    """torch.sum of one contiguous (n,) tensor as PyTorch's CUDA reduce kernel runs it, built
    thread by thread from the kernel's loops (aten/src/ATen/native/cuda/Reduce.cuh), not from
    the spec's orders: the launch configuration, each thread's accumulators, the tail, the
    block's halving tree and the last block's pass over the block results."""
    def last_pow2(x):
        return 1 << (max(1, x).bit_length() - 1)

    def halving(vals):        # shared memory down to a warp, then shuffles: pairs i, i + half
        vals = list(vals)
        while len(vals) > 1:
            half = len(vals) // 2
            vals = [v if w is None else (w if v is None else Node((v, w)))
                    for v, w in zip(vals[:half], vals[half:])]
        return vals[0]

    def fold(xs):
        acc = None
        for x in xs:
            acc = x if acc is None else Node((acc, x))
        return acc

    if n < 128:   # no vector loads: four accumulators, at most two used
        threads = last_pow2(n)
        return halving([fold([t, t + threads] if t + threads < n else [t]) for t in range(threads)])
    nv, tail = n // vec, n % vec
    width = min(last_pow2(nv), 512)
    vpt = -(-n // width)
    ctas = 1
    if width == 512 and vpt >= 256:
        ctas = max(min(4 * sms, -(-vpt // 16)), -(-vpt // 256))
    stride = width * ctas
    values = []
    for g in range(stride):
        accs = [[] for _ in range(vec)]
        for v in range(g, nv, stride):
            for a in range(vec):
                accs[a].append(vec * v + a)
        if g < tail:                     # block 0, threads 0 .. tail - 1
            accs[0].append(nv * vec + g)
        values.append(fold([fold(acc) for acc in accs if acc]))
    blocks = [halving(values[c * width:(c + 1) * width]) for c in range(ctas)]
    if ctas == 1:
        return blocks[0]
    slots = [fold(blocks[f::512]) if f < ctas else None for f in range(512)]
    return halving(slots)


@pytest.mark.parametrize("dtype,vec", [("float32", 4), ("float16", 8)])
def test_the_cuda_sum_spec_is_the_kernel_at_every_switch(dtype, vec):
    from pathlib import Path

    from fpspec.spec import expand, parse

    spec = parse((Path(__file__).parents[2] / "examples" / "gpu" / f"torch_sum_cuda_{dtype}_h200.fps").read_text())
    for n in (1, 2, 3, 5, 7, 63, 100, 127, 128, 129, 131, 255, 1000, 1027, 2047, 4099, 4101, 8 * 4096 + 3):
        assert expand(spec, n) == reduce_kernel_tree(n, vec), n


def test_the_cuda_sum_spec_holds_past_one_block():
    """n = 130561: 16 blocks of 512 threads, the tail of one element in thread 0; and (at
    n = 4103: vectors dealt to 512 threads, a tail of three) the NumPy replica of the spec
    adds in the expanded tree's order."""
    from pathlib import Path

    from fpspec.arith import Arithmetic, evaluate
    from fpspec.compile import compile_spec, load_replica
    from fpspec.spec import expand, parse

    path = Path(__file__).parents[2] / "examples" / "gpu" / "torch_sum_cuda_float32_h200.fps"
    spec = parse(path.read_text())
    assert expand(spec, 130561) == reduce_kernel_tree(130561, 4)
    n = 4103
    tree = expand(spec, n)
    rng = np.random.default_rng(3)
    X = (rng.standard_normal((2, n)) * np.exp2(rng.integers(-12, 13, (2, n)))).astype(np.float32)
    rep = load_replica(compile_spec(spec, "numpy"), path.name)
    ar = Arithmetic(input="fp32", product="none", accumulator="fp32", init="+0.0", output="fp32")
    want = evaluate(tree, X.T.astype(np.float64), None, ar)
    got = np.array([rep.sum(x) for x in X], np.float64)
    assert np.array_equal(got, want)


def test_vlanes_deals_vectors_and_the_tail():
    from fpspec.spec import expand, parse
    from fpspec.tree import format_tree

    spec = parse("n in 1..\norder vlanes(4, 2, lanes(4, seq, seq, seq), seq)")
    # vectors 0..3 -> lane 0, 4..7 -> lane 1; leftovers 8, 9, 10 -> lanes 0, 1, 0
    assert format_tree(expand(spec, 11)) == "((((((0 8) 10) 1) 2) 3) ((((4 9) 5) 6) 7))"
    assert format_tree(expand(spec, 3)) == "((0 2) 1)"


def test_vlanes_with_fma_compiles_for_the_triton_backend():
    """(its replica's bits: tests/triton/test_vlanes.py)"""
    pytest.importorskip("triton")
    from fpspec.compile import compile_spec
    from fpspec.spec import parse

    spec = parse("op dot\nn in 1..\narithmetic { input = fp32 product = fma accumulator = fp32 init = +0.0 "
                 "output = fp32 }\norder vlanes(4, 8, seq, gpu_tree)")
    assert "VLanes(lambda m, n: 4, lambda m, n: 8, Fold(reverse=False)" in compile_spec(spec, "triton")


@settings(max_examples=40, deadline=None)
@given(v=st.integers(1, 5), k=st.integers(1, 6), n=st.integers(1, 60),
       inner=st.sampled_from(["seq", "rev", "lanes(2, seq, seq, seq)", "gpu_tree"]),
       outer=st.sampled_from(["seq", "gpu_tree", "pairwise"]))
def test_vlanes_means_the_same_in_the_spec_and_the_compiled_ir(v, k, n, inner, outer):
    from fpspec.compile.build import build_kernel
    from fpspec.compile.trees import tree_of
    from fpspec.spec import expand, parse
    from fpspec.tree import leaves

    spec = parse(f"op sum\nn in 1..\narithmetic {{ input = fp32 product = none accumulator = fp32 init = +0.0 "
                 f"output = fp32 }}\norder vlanes({v}, {k}, {inner}, {outer})")
    tree = expand(spec, n)
    assert sorted(leaves(tree)) == list(range(n))
    assert tree_of(build_kernel(spec), n) == tree
