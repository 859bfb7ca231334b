"""On a CUDA GPU: the replica's API on CUDA tensors (strided views, stride-0 expands, results on
the input's device; NumPy in -> NumPy out through the GPU)."""
import importlib.util
import os

import numpy as np
import pytest
import torch

from fpspec.compile import compile_kernel
from fpspec.compile.build import build_kernel
from fpspec.spec import parse
from test_api import GEMV as SPEC_GEMV, SUM as SPEC_SUM

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(os.environ.get("TRITON_INTERPRET") == "1",
                                 reason="GPU kernels: run with TRITON_INTERPRET=0 on a CUDA machine"),
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]

# the specs of the interpreter tests, at lengths that take more than one program on a GPU
SUM = SPEC_SUM.replace("n in 1..100", "n in 1..5000")
GEMV = SPEC_GEMV.replace("n in 1..100", "n in 1..5000")


def load(text, tmp_path, name):
    file = tmp_path / f"{name}.py"
    file.write_text(compile_kernel(build_kernel(parse(text)), "triton"))
    spec = importlib.util.spec_from_file_location(name, file)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_strided_cuda_tensors(tmp_path):
    r = load(SUM, tmp_path, "sum_replica")
    out = r.sum(torch.arange(20., device="cuda")[::2])
    assert out.device.type == "cuda" and out.item() == 90.0
    X = torch.randn(3001, 7, device="cuda")
    assert torch.equal(r.sum(X[:, 3]).view(torch.int32), r.sum(X[:, 3].contiguous()).view(torch.int32))
    assert r.sum(torch.tensor([0.5], device="cuda").expand(4096)).item() == 2048.0
    sums = r.sums(X)
    assert sums.device.type == "cuda"
    assert torch.equal(sums.view(torch.int32), torch.stack([r.sum(X[:, j]) for j in range(7)]).view(torch.int32))
    x = np.random.default_rng(1).standard_normal(1000).astype(np.float32)
    on_gpu = r.sum(torch.from_numpy(x).cuda())
    got = r.sum(x)                               # NumPy in: computed on the GPU, NumPy out
    assert isinstance(got, np.float32) and got.view(np.int32) == on_gpu.view(torch.int32).item()
    on_cpu = r.sum(torch.from_numpy(x))          # a CPU tensor: computed on the GPU, back on the CPU
    assert on_cpu.device.type == "cpu" and on_cpu.view(torch.int32).item() == on_gpu.view(torch.int32).item()


def test_strided_cuda_matrices(tmp_path):
    g = load(GEMV, tmp_path, "gemv_replica")
    A = torch.randn(300, 37, device="cuda").T
    Y = torch.randn(300, 4, device="cuda")
    want = g.gemv(A.contiguous(), Y[:, 2].contiguous())
    got = g.gemv(A, Y[:, 2])
    assert got.device.type == "cuda" and torch.equal(got.view(torch.int32), want.view(torch.int32))
    ones = g.gemv(torch.ones(1, 1, device="cuda").expand(5, 300), torch.tensor([2.0], device="cuda").expand(300))
    assert ones.tolist() == [600.0] * 5
    with pytest.raises(ValueError, match="are on different devices"):
        g.gemv(torch.ones(5, 300, device="cuda"), torch.ones(300))
