"""One emulated fp16 GEMM (the replica's default tile kernel), for a profiler (GPU).

    ncu -k regex:mm_chain_emulated -c 1 --section WarpStateStats ... \
        python benchmarks/triton/profile_emulated.py [SIZE] [BMxBNxWARPS] [auto]

auto: the inf/nan pass only where the inputs have inf or nan (SPECIALS=False here).
"""
import sys
import tempfile

import torch

sys.path.insert(0, __file__.rsplit("/", 1)[0] + "/../../benchmarks")
from bench_triton import load  # noqa: E402

from fpspec.arith import Arithmetic, get_params  # noqa: E402
from fpspec.compile.ir import Const, FusedChain, Kernel  # noqa: E402

S = int(sys.argv[1]) if len(sys.argv) > 1 else 1024
with tempfile.TemporaryDirectory() as tmp:
    ar = Arithmetic(input="fp16", product="exact", accumulator="fp32", init="none", output="fp16",
                    fused=get_params("h100-fp16"))
    gemm = load(Kernel("gemm", ar, FusedChain(Const(16)), name="h100 chain"), tmp)
    if len(sys.argv) > 2:
        BM, BN, w = (int(v) for v in sys.argv[2].split("x"))
        gemm.REPLICA.emulated_config = dict(gemm.REPLICA.emulated_config, BM=BM, BN=BN, num_warps=w)
    if "auto" in sys.argv[3:]:
        gemm.REPLICA.emulated_specials = "auto"
    A = torch.randn((S, S), device="cuda").half()
    B = torch.randn((S, S), device="cuda").half()
    gemm.gemm(A, B, path="emulated")   # compile
    torch.cuda.synchronize()
    gemm.gemm(A, B, path="emulated")
    torch.cuda.synchronize()
