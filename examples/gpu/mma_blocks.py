"""One Tensor Core instruction on the GPU at hand against fpspec's matrix-unit model.

    PYTHONPATH=. python3 examples/gpu/mma_blocks.py OUTDIR [--launches 64] [--gpu h100]

Each launch of a Triton kernel computes D = C + A B for one 64 x 32 tile with a
single tl.dot of K = the instruction's k (wgmma on Hopper: 16 fp16/bf16, 32
fp8; tf32: K = 16, two k = 8 instructions chained), so every element is one
fused node with c (tf32: a chain of two).  A's rows and
B's columns come from the blocks benchmarks/validate_mmasim.py draws (random
bit patterns, cancellations, spread exponents, subnormals, zeros against large
operands, inf/nan), C from the same draw.  The script compares every element
with the named unit of fpspec.arith.units (FTTN's conventions on Hopper:
exponent floor, zeros never aligned) and with its MMA-Sim form (zeros aligned
at -126; fpspec.arith.units note [two conventions]), prints the counts
and writes OUTDIR/mma_blocks_<fmt>.npz (a, b, c, d of the rows where the two
conventions disagree, and of 512 other rows) for tests/arith/.
"""
import argparse
import os
import sys
from pathlib import Path

import numpy as np
import torch
import triton
import triton.language as tl

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from validate_mmasim import Family, blocks  # noqa: E402

from fpspec.arith.units import get_unit, mmasim_conventions, unit_dot  # noqa: E402

BM, BN = 64, 32
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"   # cpu: TRITON_INTERPRET=1 dry run
# input format: (torch dtype, k of one wgmma, tl.dot input precision)
CASES = {
    "fp16": (torch.float16, 16, None),
    "bf16": (torch.bfloat16, 16, None),
    "tf32": (torch.float32, 16, "tf32"),     # Triton's smallest dot: two k = 8 wgmma, chained
    "fp8e4m3": (torch.float8_e4m3fn, 32, None),
    "fp8e5m2": (torch.float8_e5m2, 32, None),
}


@triton.jit
def _one_mma(a_ptr, b_ptr, c_ptr, d_ptr, K: tl.constexpr, TF32: tl.constexpr):
    pid = tl.program_id(0)
    rm = tl.arange(0, 64)
    rn = tl.arange(0, 32)
    rk = tl.arange(0, K)
    a = tl.load(a_ptr + pid * 64 * K + rm[:, None] * K + rk[None, :])
    b = tl.load(b_ptr + pid * K * 32 + rk[:, None] * 32 + rn[None, :])
    c = tl.load(c_ptr + pid * 64 * 32 + rm[:, None] * 32 + rn[None, :])
    if TF32:
        d = tl.dot(a, b, acc=c, input_precision="tf32")
    else:
        d = tl.dot(a, b, acc=c)
    tl.store(d_ptr + pid * 64 * 32 + rm[:, None] * 32 + rn[None, :], d)


def run_case(fmt: str, launches: int, gpu: str, seed: int):
    dt, k, prec = CASES[fmt]
    fam = Family("gpu", "tl.dot", fmt, fmt, fmt, "fp32", "fp32", k)
    # row i < 32 of a tile's A with column i of its B (and c[i, i]) is one block of the
    # validation draw, so the diagonal keeps a block's structure; every other element
    # mixes two blocks
    a_p, b_p, c_p, _, _ = blocks(fam, launches * BN, seed)
    a_x, _, c_x, _, _ = blocks(fam, launches * (BM - BN), seed + 1)
    _, _, c_y, _, _ = blocks(fam, launches * BM * BN, seed + 2)
    a = np.concatenate([a_p.reshape(launches, BN, k), a_x.reshape(launches, BM - BN, k)], axis=1)
    b = b_p.reshape(launches, BN, k)
    c = c_y.reshape(launches, BM, BN).copy()
    diag = np.arange(BN)
    c[:, diag, diag] = c_p.reshape(launches, BN)
    if fmt == "tf32":   # exact tf32 values: the low 13 bits clear
        a = (a.astype(np.float32).view(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32).astype(np.float64)
        b = (b.astype(np.float32).view(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32).astype(np.float64)
    A = torch.tensor(a).to(dt).to(DEVICE)
    Bt = torch.tensor(b).to(dt)
    B = Bt.transpose(1, 2).contiguous().to(DEVICE)
    C = torch.tensor(c, dtype=torch.float32).to(DEVICE)
    D = torch.empty_like(C)
    kernel = _one_mma[(launches,)](A, B, C, D, K=k, TF32=prec is not None, num_warps=4)
    asm = getattr(kernel, "asm", {}).get("ptx", "") if DEVICE == "cuda" else ""
    instr = "wgmma" if "wgmma" in asm else ("mma.sync" if "mma.sync" in asm else "?")
    if DEVICE == "cuda":
        torch.cuda.synchronize()
    d = D.cpu().double().numpy()
    # every element (t, i, j): a row (t, i), b column (t, j), c[t, i, j]
    aa = A.cpu().double().numpy()[:, :, None, :].repeat(BN, 2).reshape(-1, k)
    bb = Bt.double().numpy()[:, None, :, :].repeat(BM, 1).reshape(-1, k)
    cc = c.reshape(-1)
    dd = d.reshape(-1)
    unit = get_unit(f"{gpu}-{fmt}")
    fttn = unit_dot(unit, aa, bb, cc)                        # the named set: FTTN's conventions
    mmasim = unit_dot(mmasim_conventions(unit), aa, bb, cc)

    def same(x, y):
        return (np.isnan(x) & np.isnan(y)) | ((x == y) & (np.signbit(x) == np.signbit(y)))

    ok_m, ok_f = same(mmasim, dd), same(fttn, dd)
    print(f"{fmt:8s} {instr:8s} elements {dd.size:7d}  MMA-Sim conventions: {int((~ok_m).sum()):6d} differ  "
          f"FTTN conventions: {int((~ok_f).sum()):6d} differ  (conventions disagree on "
          f"{int((~same(mmasim, fttn)).sum())})", flush=True)
    keep = np.flatnonzero(~same(mmasim, fttn) | ~ok_m | ~ok_f)
    keep = np.union1d(keep, np.arange(min(512, dd.size)))
    return dict(a=aa[keep], b=bb[keep], c=cc[keep], d=dd[keep]), instr


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("outdir")
    ap.add_argument("--launches", type=int, default=64)
    ap.add_argument("--gpu", default="h100", help="the fpspec names to compare with (h100, h200: same sets)")
    ap.add_argument("--only", default="")
    args = ap.parse_args()
    os.makedirs(args.outdir, exist_ok=True)
    np.seterr(all="ignore")
    name = torch.cuda.get_device_name() if DEVICE == "cuda" else "cpu (Triton interpreter)"
    print(f"device: {name}; torch {torch.__version__}; triton {triton.__version__}")
    for i, fmt in enumerate(CASES):
        if args.only and fmt not in args.only.split(","):
            continue
        data, instr = run_case(fmt, args.launches, args.gpu, 100 + i)
        np.savez_compressed(os.path.join(args.outdir, f"mma_blocks_{fmt}.npz"), instr=instr,
                            device=name, **data)


if __name__ == "__main__":
    main()
