"""Real libraries on this CPU: numpy and torch, trees exact or reproducing the library bit for bit."""
import numpy as np
import pytest

from fpspec.reveal.engine import reveal
from fpspec.reveal.targets import resolve_target
from fpspec.tree import Node, evaluate, parse_tree, sequential


def numpy_pairwise(idx):
    """NumPy's pairwise_sum: < 8 in order; <= 128 in 8 lanes (+ tail in order); else halves at a multiple of 8."""
    idx = list(idx)
    n = len(idx)
    if n < 8:
        return sequential(idx)
    if n <= 128:
        lanes = [sequential(idx[r:n - n % 8:8]) for r in range(8)]
        acc = Node((Node((Node((lanes[0], lanes[1])), Node((lanes[2], lanes[3])))),
                    Node((Node((lanes[4], lanes[5])), Node((lanes[6], lanes[7]))))))
        for i in idx[n - n % 8:]:
            acc = Node((acc, i))
        return acc
    n2 = n // 2
    n2 -= n2 % 8
    return Node((numpy_pairwise(idx[:n2]), numpy_pairwise(idx[n2:])))


def test_numpy_sum_8_and_9_as_in_the_design():
    assert reveal(resolve_target("numpy.sum", n=8)).tree == parse_tree("(((0 1) (2 3)) ((4 5) (6 7)))")
    assert reveal(resolve_target("numpy.sum", n=9)).tree == parse_tree("((((0 1) (2 3)) ((4 5) (6 7))) 8)")


@pytest.mark.parametrize("n", [8, 9, 32, 129])
def test_numpy_sum_is_numpys_pairwise(n):
    assert reveal(resolve_target("numpy.sum", n=n, dtype="float32")).tree == numpy_pairwise(range(n))


def test_numpy_sum_32_lanes():
    text = format(reveal(resolve_target("numpy.sum", n=32)).tree)
    assert text.startswith("((((((0 8) 16) 24) (((1 9) 17) 25))")


def _reproduces(tree, target, rng, rows=6):
    """The tree, summed in fp32, gives the library's bits on random inputs (B = ones for products)."""
    n = target.n
    for _ in range(rows):
        x = (rng.standard_normal(n) * 2.0 ** rng.integers(-12, 12, n)).astype(np.float32).astype(np.float64)
        if target.op == "sum":
            got = target.run(x)
        elif target.op == "dot":
            got = target.run(x, np.ones(n))
        elif target.op == "gemv":
            got = target.run(np.tile(x, (target.m, 1)), np.ones(n))[0]
        else:
            got = target.run(np.tile(x, (target.m, 1)), np.ones((n, target.ncols)))[0, 0]
        want = evaluate(tree, x, "fp32")
        assert np.float64(got).tobytes() == np.float64(want).tobytes()


@pytest.mark.parametrize("name,kw", [
    ("numpy.sum", dict(n=100)),
    ("numpy.dot", dict(n=32)),
    ("numpy.dot", dict(n=100)),
    ("numpy.matmul", dict(n=40, op="gemv", m=5)),
    ("numpy.matmul", dict(n=48, m=6, ncols=3)),
])
def test_numpy_trees_reproduce_numpy(name, kw):
    target = resolve_target(name, **kw)
    rev = reveal(target)
    assert rev.differing == ()
    _reproduces(rev.tree, target, np.random.default_rng(0))


torch = pytest.importorskip("torch")


@pytest.mark.parametrize("name,kw", [
    ("torch.sum", dict(n=32)),
    ("torch.sum", dict(n=100)),
    ("torch.dot", dict(n=32)),
    ("torch.mv", dict(n=40, m=4)),
    ("torch.matmul", dict(n=48, m=4, ncols=4)),
])
def test_torch_cpu_trees_reproduce_torch(name, kw):
    torch.set_num_threads(1)
    target = resolve_target(name, **kw)
    rev = reveal(target)
    _reproduces(rev.tree, target, np.random.default_rng(1))


def test_torch_sum_32_folds_lanes_in_sequence():
    tree = reveal(resolve_target("torch.sum", n=32)).tree
    lanes = [sequential(range(r, 32, 8)) for r in range(8)]
    acc = Node((lanes[0], lanes[1]))
    for lane in lanes[2:]:
        acc = Node((acc, lane))
    assert tree == acc


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_torch_narrow_sums_accumulate_in_fp32_along_the_tree(dtype):
    from fpspec.formats import get_format, round_to

    target = resolve_target("torch.sum", n=64, dtype=dtype)
    tree = reveal(target).tree
    fmt = get_format(dtype)
    rng = np.random.default_rng(2)
    for _ in range(6):
        x = round_to(fmt, rng.standard_normal(64) * 2.0 ** rng.integers(-6, 6, 64))
        want = round_to(fmt, evaluate(tree, x, "fp32"))
        assert target.run(x).tobytes() == np.float64(want).tobytes()
