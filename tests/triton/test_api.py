"""The Triton replica's public API (docs/replicas.md): strides honoured, torch in ->
torch out, NumPy in -> NumPy out, one ValueError / TypeError naming the argument,
the same refusals as the NumPy replica (lists, scalars, masked arrays); plan
refusals at compile time."""
import numpy as np
import pytest
import torch

from fpspec.compile import CompileError, compile_kernel
from fpspec.compile.build import build_kernel
from fpspec.spec import parse

SUM = """op sum
n in 1..100
arithmetic { input = fp32 product = none accumulator = fp32 init = +0.0 output = fp32 }
order lanes(4, tail(8, pairwise, seq), pairwise)
"""
GEMV = """op gemv
n in 1..100
arithmetic { input = fp32 product = rounded accumulator = fp32 init = +0.0 output = fp32 }
order lanes(4, seq, pairwise)
"""
DOT_BF16 = """op dot
n in 1..64
arithmetic { input = bf16 product = exact accumulator = fp32 init = none output = bf16 }
order seq
"""


def kernel(text):
    return build_kernel(parse(text))


@pytest.fixture(scope="module")
def replicas(tmp_path_factory):
    """Each spec's triton replica, imported from its file (once for the module: rendering is slow)."""
    import importlib.util

    out = {}
    folder = tmp_path_factory.mktemp("api")
    for name, text in (("sum", SUM), ("gemv", GEMV), ("dot", DOT_BF16)):
        file = folder / f"replica_{name}.py"
        file.write_text(compile_kernel(kernel(text), "triton"))
        spec = importlib.util.spec_from_file_location(file.stem, file)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        out[name] = mod
    return out


def bits(t):
    return t.view(torch.int32) if t.dtype == torch.float32 else t.view(torch.int16)


def test_strided_sum_reads_the_view(replicas):
    r = replicas["sum"]
    assert r.sum(torch.arange(20.)[::2]).item() == 90.0
    x = torch.randn(3 * 37, generator=torch.Generator().manual_seed(1)) * 1e3
    assert torch.equal(bits(r.sum(x[1::3])), bits(r.sum(x[1::3].contiguous())))
    X = torch.randn(41, 5, generator=torch.Generator().manual_seed(2))
    assert torch.equal(bits(r.sum(X[:, 1])), bits(r.sum(X[:, 1].contiguous())))


def test_stride_zero_expand_reads_no_further(replicas):
    r = replicas["sum"]
    assert r.sum(torch.tensor([0.5]).expand(20)).item() == 10.0
    assert r.sum(torch.full((1,), 3.0).expand(64)).item() == 192.0


def test_strided_matrix_operands(replicas):
    g = replicas["gemv"]
    gen = torch.Generator().manual_seed(3)
    A = torch.randn(40, 5, generator=gen).T          # a transposed view
    Y = torch.randn(40, 3, generator=gen)
    want = g.gemv(A.contiguous(), Y[:, 1].contiguous())
    assert torch.equal(bits(g.gemv(A, Y[:, 1])), bits(want))
    ones = g.gemv(torch.ones(1, 1).expand(5, 40), torch.tensor([2.0]).expand(40))
    assert ones.tolist() == [80.0] * 5


def test_numpy_in_numpy_out(replicas):
    r, g = replicas["sum"], replicas["gemv"]
    x = np.random.default_rng(4).standard_normal(37).astype(np.float32)
    got = r.sum(x)
    assert isinstance(got, np.float32)
    assert got.view(np.int32) == r.sum(torch.from_numpy(x)).view(torch.int32).item()
    X = np.random.default_rng(5).standard_normal((30, 4)).astype(np.float32)
    sums = r.sums(X)
    assert isinstance(sums, np.ndarray) and sums.dtype == np.float32 and sums.shape == (4,)
    assert [s.view(np.int32) for s in sums] == [r.sum(X[:, j]).view(np.int32) for j in range(4)]
    A = np.random.default_rng(6).standard_normal((3, 20)).astype(np.float32)
    out = g.gemv(A, x[:20])
    assert isinstance(out, np.ndarray) and out.shape == (3,)
    assert np.array_equal(out.view(np.int32), g.gemv(torch.from_numpy(A), torch.from_numpy(x[:20])).numpy()
                          .view(np.int32))
    # a strided NumPy view is read as the values it shows
    assert r.sum(np.arange(20, dtype=np.float32)[::2]) == np.float32(90.0)


def test_torch_in_torch_out_on_the_device(replicas):
    out = replicas["sum"].sum(torch.ones(5))
    assert isinstance(out, torch.Tensor) and out.device.type == "cpu" and out.dtype == torch.float32


def test_bf16_through_numpy_float32(replicas):
    d = replicas["dot"]
    x = torch.randn(24, generator=torch.Generator().manual_seed(7)).to(torch.bfloat16)
    y = torch.randn(24, generator=torch.Generator().manual_seed(8)).to(torch.bfloat16)
    want = d.dot(x, y)
    got = d.dot(x.float().numpy(), y.float().numpy())
    assert isinstance(got, np.float32) and got == want.float().item()
    with pytest.raises(ValueError, match="x holds values that are not bf16 values"):
        d.dot(np.full(24, 1.0 + 2.0 ** -12, np.float32), y.float().numpy())


@pytest.mark.parametrize("call,error,message", [
    (lambda r: r["sum"].sum(torch.ones(4, 5)), ValueError, "x must have 1 dimension(s), got shape (4, 5)"),
    (lambda r: r["sum"].sum(np.ones((4, 5), np.float32)), ValueError, "x must have 1 dimension"),
    (lambda r: r["sum"].sum(np.float32(3.0)), TypeError, "x is a NumPy float32 scalar, but this replica of spec takes"),
    (lambda r: r["sum"].sum(np.ones((), np.float32)), ValueError, "x must have 1 dimension(s), got shape ()"),
    (lambda r: r["sum"].sums(torch.ones(5)), ValueError, "X must have 2 dimension(s)"),
    (lambda r: r["sum"].sum([1.0, 2.0]), TypeError, "x is a list, but this replica of spec takes"),
    (lambda r: r["sum"].sum(np.ones(3, np.float64)), TypeError, "x has dtype float64"),
    (lambda r: r["sum"].sum(torch.ones(3, dtype=torch.float64)), TypeError, "x has dtype torch.float64"),
    (lambda r: r["sum"].sum(torch.ones(0)), ValueError, "x has length 0, outside the range n in 1..100"),
    (lambda r: r["sum"].sum(torch.ones(101)), ValueError, "x has length 101, outside"),
    (lambda r: r["sum"].sums(torch.ones(101, 2)), ValueError, "every column of X has length 101, outside"),
    (lambda r: r["sum"].sum(np.ma.masked_array(np.ones(3, np.float32), [0, 1, 0])), TypeError,
     "x is a masked array"),
    (lambda r: r["gemv"].gemv(torch.ones(3, 8), torch.ones(9)), ValueError, "gemv: A is 3x8 but x has 9 elements"),
    (lambda r: r["gemv"].gemv(torch.ones(3, 8), torch.ones(8, 1)), ValueError, "x must have 1 dimension"),
    (lambda r: r["gemv"].gemv(torch.ones(3, 8), np.ones(8, np.float32)), TypeError,
     "A and x mix torch tensors and NumPy arrays"),
    (lambda r: r["dot"].dot(torch.ones(8, dtype=torch.bfloat16), torch.ones(9, dtype=torch.bfloat16)), ValueError,
     "dot: x has 8 elements, y has 9"),
])
def test_bad_arguments_one_error_naming_the_argument(replicas, call, error, message):
    with pytest.raises(error) as e:
        call(replicas)
    assert message in str(e.value)


def test_other_byte_order_is_a_float32(replicas):
    """'>f4' is a float32 in the other byte order, as the NumPy replica takes it."""
    out = replicas["sum"].sum(np.array([1.5, 2.0], ">f4"))
    assert isinstance(out, np.float32) and out == 3.5


def test_same_refusals_as_the_numpy_replica(replicas, tmp_path):
    import importlib.util

    file = tmp_path / "numpy_replica.py"
    file.write_text(compile_kernel(kernel(SUM), "numpy"))
    spec = importlib.util.spec_from_file_location(file.stem, file)
    ref = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ref)
    bad = [[1.0, 2.0], [np.float32(1.0)], np.ones((4, 5), np.float32), np.float32(3.0), np.ones((), np.float32),
           np.ones(3, np.float64), np.ones(0, np.float32), np.ones(101, np.float32),
           np.ma.masked_array(np.ones(3, np.float32), [0, 1, 0])]
    for x in bad:
        kinds = []
        for mod in (ref, replicas["sum"]):
            try:
                mod.sum(x)
                kinds.append(None)
            except (TypeError, ValueError) as e:
                kinds.append(type(e))
        assert kinds[0] is not None and kinds[0] == kinds[1], (x, kinds)


def test_plan_refusals_come_at_compile_time():
    fused_sum = """op sum
n in 1..40
arithmetic { input = fp16 product = none accumulator = fp32 init = none output = fp32
             fused { w = 16 extra_bits = 2 aligned = truncate result = rz c_aligned = true exponent_floor = -133 } }
order if n <= 16: seq else: chain(16)
"""
    with pytest.raises(CompileError, match=r"triton: fused nodes in a sum are not supported .*\(at n = 17\)"):
        compile_kernel(kernel(fused_sum), "triton")
