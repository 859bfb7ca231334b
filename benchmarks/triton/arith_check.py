"""On an H100/H200: the emulated chain kernel's ARITH forms against the Tensor Cores, bit for bit.

    PYTHONPATH=. python benchmarks/triton/arith_check.py [--arith 0,1,3,4,5,7]

For fp16 and bf16 inputs, fp32 and (fp16 inputs) fp16 outputs, several shapes
and input kinds (plain, exponents spread over the whole format, a third zeros,
an inf and a nan, rows of subnormals), runs the replica's native path (tl.dot:
the GPU's own fused nodes) and the emulated path in each form (setup()), and
prints one line per case: the number of outputs whose bits differ (nan = nan).
"""
import argparse
import sys
import tempfile
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from bench_triton import load  # noqa: E402

from fpspec.arith import Arithmetic, get_params
from fpspec.compile.ir import Blocks, Const, Fold, FusedChain, Kernel


def inputs(kind, shape, dt, g, a_side):
    x = torch.randn(shape, device="cuda", generator=g)
    if kind == "spread":   # exponents over the whole format (fp16: subnormals to near overflow)
        lo, hi = (-26, 13) if dt == torch.float16 else (-120, 120)
        x = x * torch.exp2(torch.randint(lo, hi, shape, device="cuda", generator=g).float())
    elif kind == "zeros":
        x = x * 8 * (torch.rand(shape, device="cuda", generator=g) > 0.33)
    elif kind == "tiny":   # every product far below 2^-25 of its row's and column's bound
        x = x * torch.exp2(torch.randint(-24, -14, shape, device="cuda", generator=g).float())
        x[::2] *= 2.0 ** 12
    elif kind == "apart":   # node 0: a row's largest exponent and a column's at different k
        big, small = (2.0 ** 15, 2.0 ** -14) if dt == torch.float16 else (2.0 ** 120, 2.0 ** -120)
        sign = torch.sign(x)
        if a_side:   # A: small but column 0; B: big but row 0
            x = sign * small
            x[:, 0] = sign[:, 0] * big
        else:
            x = sign * big
            x[0, :] = sign[0, :] * small
    elif kind == "disjoint":   # every product of a node 0 though rows and columns are not
        x = x * 8
        if a_side:
            x[:, ::2] = 0
        else:
            x[1::2, :] = 0
    else:
        x = x * 8
    return x.to(dt)


def setup(replica, arith):
    """0: the replica's defaults; 1..5: the tile form with that ARITH (16 x 32, 4 warps, no
    register limit); 7: ARITH 1 + GPU_NODE.  (6, the micro-tile form, was removed after
    commit a3c4e4a.)"""
    if not hasattr(replica, "check_defaults"):
        replica.check_defaults = (dict(replica.emulated_config), replica.emulated_maxnreg)
    replica.emulated_kernel, replica.emulated_arith = "auto", "auto"
    replica.emulated_config, replica.emulated_maxnreg = dict(replica.check_defaults[0]), replica.check_defaults[1]
    if arith == 0:
        return
    replica.emulated_maxnreg = None
    replica.emulated_kernel = "tile"
    replica.emulated_arith = arith if arith < 6 else 1
    replica.emulated_config = dict(BM=16, BN=32, num_warps=4, GPU_NODE=arith == 7)


def differ(a, b):
    it = torch.int16 if a.element_size() == 2 else torch.int32
    ai, bi = a.view(it), b.view(it)
    nan = torch.isnan(a.float()) & torch.isnan(b.float())
    return int(((ai != bi) & ~nan).sum())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--arith", default="0,1,3,4,5,7", help="forms, see setup()")
    args = ap.parse_args()
    ariths = [int(v) for v in args.arith.split(",")]
    print(f"device: {torch.cuda.get_device_name()}")
    bad = 0
    with tempfile.TemporaryDirectory() as tmp:
        for fmt, out in [("fp16", "fp32"), ("fp16", "fp16"), ("bf16", "fp32")]:
            dt = torch.float16 if fmt == "fp16" else torch.bfloat16
            ar = Arithmetic(input=fmt, product="exact", accumulator="fp32", init="none", output=out,
                            fused=get_params(f"h100-{fmt}"))
            for root, rtag in [(FusedChain(Const(16)), "chain"), (Blocks(Const(256), FusedChain(Const(16)), Fold()),
                                                                  "splitK")]:
                rep = load(Kernel("gemm", ar, root), tmp)
                g = torch.Generator(device="cuda").manual_seed(7)
                for M, N, K in [(64, 64, 16), (200, 130, 1000), (128, 96, 4096), (97, 33, 77)]:
                    for kind in ("plain", "spread", "zeros", "tiny", "apart", "disjoint", "specials"):
                        A = inputs(kind, (M, K), dt, g, True)
                        B = inputs(kind, (K, N), dt, g, False)
                        if kind == "specials":
                            A[1, 3], A[2, 5], B[7 % K, 2] = float("inf"), float("-inf"), float("nan")
                        want = rep.gemm(A, B, path="native")
                        line = []
                        for arith in ariths:
                            if arith in (1, 7) and fmt != "fp16":
                                continue
                            setup(rep.REPLICA, arith)
                            try:
                                got = rep.gemm(A, B, path="emulated")
                                n = differ(got, want)
                            except Exception as e:   # report, go on
                                n = f"ERROR {type(e).__name__}: {str(e)[:200]}"
                            bad += n != 0
                            line.append(f"arith {arith}: {n}")
                        print(f"{fmt}->{out} {rtag} {M}x{N}x{K} {kind}: " + ", ".join(line), flush=True)
    print("ALL EQUAL" if bad == 0 else f"{bad} cases differ")


if __name__ == "__main__":
    main()
