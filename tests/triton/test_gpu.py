"""On a CUDA GPU: the compiled replica equals the GPU's own fused arithmetic (H100/H200)."""
import numpy as np
import pytest
import torch

from fpspec.arith import Arithmetic, get_params
from fpspec.compile.ir import Blocks, Call, Const, Fold, FusedChain, Kernel

import os

# tests/conftest.py sets TRITON_INTERPRET=1 unless it is set: the interpreter cannot launch on
# GPU tensors, so these run only when the caller asks for compiled kernels (TRITON_INTERPRET=0)
pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(os.environ.get("TRITON_INTERPRET") == "1",
                                 reason="GPU kernels: run with TRITON_INTERPRET=0 on a CUDA machine")]

HOPPER = torch.cuda.is_available() and torch.cuda.get_device_capability() == (9, 0)


@pytest.mark.skipif(not HOPPER, reason="needs an H100/H200")
@pytest.mark.parametrize("fmt", ["fp16", "bf16"])
@pytest.mark.parametrize("root", [FusedChain(Const(16)), Blocks(Const(256), FusedChain(Const(16)), Fold())],
                         ids=["chain", "split-K"])
def test_native_equals_emulated_and_tensor_cores(load_replica, fmt, root):
    """The Tensor Core path and the integer emulation give the same bits (fp32 output)."""
    ar = Arithmetic(input=fmt, product="exact", accumulator="fp32", output="fp32", fused=get_params(f"h100-{fmt}"))
    rep = load_replica(Kernel("gemm", ar, root))
    dt = torch.float16 if fmt == "fp16" else torch.bfloat16
    g = torch.Generator(device="cuda").manual_seed(1)
    for M, N, K in [(64, 64, 16), (200, 130, 1000), (128, 96, 4096)]:
        A = (torch.randn((M, K), device="cuda", generator=g) * 8).to(dt)
        B = (torch.randn((K, N), device="cuda", generator=g) * 8).to(dt)
        native = rep.gemm(A, B, path="native")
        assert rep.last_path() == "native"
        emulated = rep.gemm(A, B, path="emulated")
        assert torch.equal(native.view(torch.int32), emulated.view(torch.int32)), (M, N, K)
    np.testing.assert_equal(rep.last_path(), "emulated")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("n", [7, 1000, 4099, 100003, 10 ** 7 + 5])
def test_numpy_sum_order_on_the_gpu(load_replica, numpy_pairwise, n):
    """numpy.sum's order (leaf blocks, perfect levels or step tables) on the GPU equals numpy.sum on the CPU."""
    ar = Arithmetic(input="fp32", product="none", accumulator="fp32", output="fp32")
    rep = load_replica(Kernel("sum", ar, Call("pw"), orders=(("pw", numpy_pairwise),)))
    rng = np.random.default_rng(n)
    x = (rng.standard_normal(n) * np.exp2(rng.integers(-10, 11, n))).astype(np.float32)
    got = rep.sum(torch.from_numpy(x).cuda()).cpu().numpy()
    assert got.view(np.uint32) == np.sum(x).view(np.uint32)


STORED_BF16 = """op gemm
n in 1..
arithmetic {
    input = bf16
    product = exact
    accumulator = fp32
    init = none
    output = bf16
    fused { w = 8  extra_bits = 2  aligned = truncate  result = rz  c_aligned = true  exponent_floor = -133 }
}
arithmetic partials { accumulator = bf16 }
order blocks(8, using(partials, fused), seq)
"""
H100_CHAIN = """op gemm
n in 1..
arithmetic {{
    input = {fmt}
    product = exact
    accumulator = fp32
    init = none
    output = {fmt}
    fused {{ w = 16  extra_bits = 2  aligned = truncate  result = rz  c_aligned = true  exponent_floor = -133 }}
}}
order chain(16)
"""


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("text", [H100_CHAIN.format(fmt="fp16"), H100_CHAIN.format(fmt="bf16"), STORED_BF16],
                         ids=["fp16-chain", "bf16-chain", "bf16-stored-partials"])
def test_emulated_equals_numpy_replica_on_tiny_inputs(text):
    """Subnormal and signed-zero inputs (node results near and below fp32's normal range): the GPU's
    emulated kernels give the NumPy replica's bits (the GPU node conversion flushed bf16's once)."""
    from fpspec.compile import compile_spec, load_replica
    from fpspec.inputs import generate
    from fpspec.spec import parse

    spec = parse(text)
    ref = load_replica(compile_spec(spec, "numpy"), "tiny_ref")
    tri = load_replica(compile_spec(spec, "triton"), "tiny_tri")
    dt = torch.float16 if "input = fp16" in text else torch.bfloat16
    for idx in range(40):
        kind = ("subnormals", "signed_zeros", "wide_exponent", None)[idx % 4]
        s = generate("gemm", 50, "fp16" if dt == torch.float16 else "bf16", seed=3, index=idx, m=16, ncols=16,
                     **({"kind": kind} if kind else {}))
        a, b = (torch.tensor(np.asarray(v, np.float64)).to(dt) for v in s.args[:2])
        host = (lambda t: t.numpy()) if dt == torch.float16 else (lambda t: t.float().numpy())   # replica dtypes
        want = torch.tensor(np.asarray(ref.gemm(host(a), host(b)), np.float32)).to(dt)
        got = tri.gemm(a.cuda(), b.cuda(), path="emulated").cpu()
        same = (want.view(torch.int16) == got.view(torch.int16)) | (torch.isnan(want) & torch.isnan(got))
        assert bool(same.all()), (idx, kind, int((~same).sum()))
