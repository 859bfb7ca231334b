"""Where the tile form of the emulated chain differs from cuBLAS (a config that measured DIFFERS).

    PYTHONPATH=. python benchmarks/triton/diag_tile.py BMxBNxWARPS ...
"""
import sys
import tempfile
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from benchmarks.bench_triton import load  # noqa: E402
from fpspec.arith import Arithmetic, get_params  # noqa: E402
from fpspec.compile.ir import Const, FusedChain, Kernel  # noqa: E402

ar = Arithmetic(input="fp16", product="exact", accumulator="fp32", init="none", output="fp16",
                fused=get_params("h100-fp16"))
with tempfile.TemporaryDirectory() as tmp:
    rep = load(Kernel("gemm", ar, FusedChain(Const(16)), name="chain"), tmp)
    g = torch.Generator(device="cuda").manual_seed(0)
    for S in (256, 4096):
        A = torch.randn((S, S), device="cuda", generator=g).half()
        B = torch.randn((S, S), device="cuda", generator=g).half()
        ref = torch.matmul(A, B).view(torch.int16)
        for arg in sys.argv[1:]:
            BM, BN, w = map(int, arg.split("x"))
            rep.REPLICA.emulated_kernel = "tile"
            rep.REPLICA.emulated_config = dict(BM=BM, BN=BN, num_warps=w)
            got = rep.gemm(A, B, path="emulated").view(torch.int16)
            bad = (got != ref)
            idx = bad.nonzero()
            print(f"S={S} tile {arg}: {int(bad.sum())} of {S * S} differ; rows {idx[:, 0].unique()[:8].tolist()} "
                  f"cols {idx[:, 1].unique()[:8].tolist()}; max |bits diff| "
                  f"{int((got.int() - ref.int()).abs().max()) if idx.numel() else 0}", flush=True)
