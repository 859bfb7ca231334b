"""H100/H200: the emulated path on inputs with inf/nan, per inf/nan mode (bench_triton's matrices).

    PYTHONPATH=. python benchmarks/triton/bench_specials.py [SIZE] [EVERY]

An inf in every EVERY-th row of A (default 64: every 16-row tile of A meets one, so every
tile takes the inf/nan code) and a nan in one column of B; times the replica's emulated
path with emulated_specials True (a test every node) and "tile" (the flags, then a test
every node only in flagged tiles), and compares its bits with torch.matmul (nan = nan).
"""
import sys
import tempfile
from pathlib import Path

import torch
from triton.testing import do_bench

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from bench_triton import load  # noqa: E402

from fpspec.arith import Arithmetic, get_params  # noqa: E402
from fpspec.compile.ir import Const, FusedChain, Kernel  # noqa: E402

S = int(sys.argv[1]) if len(sys.argv) > 1 else 4096
EVERY = int(sys.argv[2]) if len(sys.argv) > 2 else 64
with tempfile.TemporaryDirectory() as tmp:
    ar = Arithmetic(input="fp16", product="exact", accumulator="fp32", init="none", output="fp16",
                    fused=get_params("h100-fp16"))
    gemm = load(Kernel("gemm", ar, FusedChain(Const(16))), tmp)
    g = torch.Generator(device="cuda").manual_seed(0)
    A = torch.randn((S, S), device="cuda", generator=g).half()
    B = torch.randn((S, S), device="cuda", generator=g).half()
    A[::EVERY, 5] = float("inf")
    B[:, 7] = float("nan")
    ref = torch.matmul(A, B)
    print(f"device: {torch.cuda.get_device_name()}; fp16 {S}^3, inf in every {EVERY}th row of A, a nan column in B")
    for mode in (True, "tile"):
        gemm.REPLICA.emulated_specials = mode
        got = gemm.gemm(A, B, path="emulated")
        nan = torch.isnan(got) & torch.isnan(ref)
        same = bool(((got.view(torch.int16) == ref.view(torch.int16)) | nan).all())
        t = do_bench(lambda: gemm.gemm(A, B, path="emulated"), warmup=1, rep=3, return_mode="median")
        print(f"emulated_specials={mode!r:7s} {t:9.3f} ms {2.0 * S ** 3 / t / 1e9:6.2f} TFLOP/s "
              f"{'bit-identical' if same else 'DIFFERS'}", flush=True)
