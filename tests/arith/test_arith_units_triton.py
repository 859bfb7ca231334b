"""The Triton replica's emulated path for tf32 and fp8 units, bit for bit against the model (interpreter)."""
from __future__ import annotations

import importlib.util

import numpy as np
import pytest

pytest.importorskip("triton")
torch = pytest.importorskip("torch")

from fpspec.arith import Arithmetic, evaluate  # noqa: E402
from fpspec.arith.params import PARAMS  # noqa: E402
from fpspec.arith.units import truncate_to_tf32  # noqa: E402
from fpspec.compile.backends.triton import BACKEND  # noqa: E402
from fpspec.compile.ir import CompileError, Const, FusedChain, Kernel  # noqa: E402
from fpspec.tree import Node, fused  # noqa: E402


def _load(source, tmp_path):
    path = tmp_path / "replica_tf32.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_tf32_chain_reads_the_top_19_bits(tmp_path):
    """h100-tf32 chains of 8 on fp32 inputs whose low bits are set: the replica cuts them, as the unit does."""
    ar = Arithmetic("tf32", "exact", "fp32", output="fp32", fused=PARAMS["h100-tf32"])
    mod = _load(BACKEND.render(Kernel("gemm", ar, FusedChain(Const(8)), name="tf32 chain")), tmp_path)
    rng = np.random.default_rng(3)
    K = 20
    A = (rng.standard_normal((6, K)) * 2.0 ** rng.integers(-30, 30, (6, K))).astype(np.float32)
    B = (rng.standard_normal((K, 4)) * 2.0 ** rng.integers(-30, 30, (K, 4))).astype(np.float32)
    A[0, :3] = [np.inf, 1.0, -0.0]
    B[5:8, 1] = -B[5:8, 1]
    got = mod.gemm(torch.from_numpy(A), torch.from_numpy(B), path="emulated").numpy().astype(np.float64)
    tree = fused(*range(8))
    for s in range(8, K, 8):
        tree = Node((tree, *range(s, min(s + 8, K))), fused=True)
    At, Bt = truncate_to_tf32(A.astype(np.float64)), truncate_to_tf32(B.astype(np.float64))
    want = np.stack([evaluate(tree, At.T, np.repeat(Bt[:, j:j + 1], 6, 1), ar) for j in range(4)], axis=1)
    same = (got == want) | (np.isnan(got) & np.isnan(want))
    assert same.all(), np.argwhere(~same)
    # the low bits matter: an untruncated model differs somewhere
    wrong = np.stack([evaluate(tree, A.astype(np.float64).T, np.repeat(B[:, j:j + 1].astype(np.float64), 6, 1),
                               Arithmetic("fp32", "exact", "fp32", output="fp32",
                                          fused=PARAMS["h100-tf32"].__class__(**{
                                              **PARAMS["h100-tf32"].__dict__, "input": "fp32"})))
                      for j in range(4)], axis=1)
    assert not np.array_equal(got[1:], wrong[1:])


@pytest.mark.parametrize("fmt,dtype", [("fp8e4m3", "float8_e4m3fn"), ("fp8e5m2", "float8_e5m2")])
def test_fp8_chain_on_every_bit_pattern(fmt, dtype, tmp_path):
    """h100-fp8 chains (32 products, 13 fraction bits kept by every node) on random bit patterns:
    nan, inf (e5m2), subnormals, the top binade of e4m3 (finite but for its all-ones pattern)."""
    tdt = getattr(torch, dtype)
    ar = Arithmetic(fmt, "exact", "fp32", output="fp32", fused=PARAMS[f"h100-{fmt}"])
    mod = _load(BACKEND.render(Kernel("gemm", ar, FusedChain(Const(32)), name="fp8 chain")), tmp_path)
    rng = np.random.default_rng(11)
    K = 40
    A = torch.from_numpy(rng.integers(0, 256, (4, K), dtype=np.uint8)).view(tdt)
    B = torch.from_numpy(rng.integers(0, 256, (K, 3), dtype=np.uint8)).view(tdt)
    finite = torch.isfinite(A.float())
    A = torch.where(finite | (torch.arange(4)[:, None] == 0), A.float(), torch.zeros(())).to(tdt)  # row 0: specials
    got = mod.gemm(A, B, path="emulated").numpy().astype(np.float64)
    tree = Node((fused(*range(32)), *range(32, K)), fused=True)
    Ad, Bd = A.double().numpy(), B.double().numpy()
    want = np.stack([evaluate(tree, Ad.T, np.repeat(Bd[:, j:j + 1], 4, 1), ar) for j in range(3)], axis=1)
    same = (got == want) & (np.signbit(got) == np.signbit(want)) | (np.isnan(got) & np.isnan(want))
    assert same.all(), np.argwhere(~same)
    assert np.isfinite(want[1:]).any() and not np.isfinite(want[0]).all()


def test_triton_takes_amd_nodes_and_refuses_fp8_outside_fused_chains():
    p = PARAMS["mi300x-fp16"]      # emulated by fp_amd_node (tests/triton/test_replica.py)
    assert BACKEND.check(Kernel("gemm", Arithmetic("fp16", "exact", "fp32", output="fp32", fused=p),
                                FusedChain(Const(8)))) is None
    from fpspec.compile.ir import Fold

    p = PARAMS["h100-fp8e4m3"]
    with pytest.raises(CompileError, match="fp8 inputs"):
        BACKEND.check(Kernel("gemm", Arithmetic("fp8e4m3", "exact", "fp32", output="fp32", fused=p), Fold()))


@pytest.mark.parametrize("unit,dta,dtb,width", [
    ("mi300x-fp8e4m3fnuz", "float8_e4m3fnuz", "float8_e4m3fnuz", 16),
    ("mi300x-fp8e5m2fnuz", "float8_e5m2fnuz", "float8_e5m2fnuz", 16),
    ("mi300x-fp8e4m3fnuzxfp8e5m2fnuz", "float8_e4m3fnuz", "float8_e5m2fnuz", 16),
    ("h100-fp8e4m3xfp8e5m2", "float8_e4m3fn", "float8_e5m2", 32),
])
def test_amd_and_mixed_fp8_chains_on_every_bit_pattern(unit, dta, dtb, width, tmp_path):
    """AMD CDNA3 fp8 (fnuz formats, even and odd products aligned apart) and units of two fp8
    formats (B in the second): chains on random bit patterns, bit for bit against the model."""
    p = PARAMS[unit]
    ar = Arithmetic(p.input, "exact", "fp32", output="fp32", fused=p)
    mod = _load(BACKEND.render(Kernel("gemm", ar, FusedChain(Const(width)), name="fp8 chain")), tmp_path)
    rng = np.random.default_rng(5)
    K = width + 9
    A = torch.from_numpy(rng.integers(0, 256, (4, K), dtype=np.uint8)).view(getattr(torch, dta))
    B = torch.from_numpy(rng.integers(0, 256, (K, 3), dtype=np.uint8)).view(getattr(torch, dtb))
    A = torch.where(torch.isfinite(A.float()) | (torch.arange(4)[:, None] == 0), A.float(),
                    torch.zeros(())).to(A.dtype)   # row 0 keeps its nan patterns, and gets one
    A[0, 3] = float("nan")
    B = torch.where(torch.isfinite(B.float()) | (torch.arange(3)[None, :] == 0), B.float(),
                    torch.zeros(())).to(B.dtype)
    got = mod.gemm(A, B, path="emulated").numpy().astype(np.float64)
    tree = Node((fused(*range(width)), *range(width, K)), fused=True)
    Ad, Bd = A.double().numpy(), B.double().numpy()
    want = np.stack([evaluate(tree, Ad.T, np.repeat(Bd[:, j:j + 1], 4, 1), ar) for j in range(3)], axis=1)
    same = (got == want) & (np.signbit(got) == np.signbit(want)) | (np.isnan(got) & np.isnan(want))
    assert same.all(), np.argwhere(~same)
    assert np.isfinite(want[1:, 1:]).all() and np.isnan(want[0]).any()
    if p.interleave == 2:   # the sub-blocks matter: one block of 16 gives other bits
        import dataclasses

        one = Arithmetic(p.input, "exact", "fp32", output="fp32", fused=dataclasses.replace(p, interleave=1))
        wrong = np.stack([evaluate(tree, Ad.T, np.repeat(Bd[:, j:j + 1], 4, 1), one) for j in range(3)], axis=1)
        assert not np.array_equal(got[1:, 1:], wrong[1:, 1:])
