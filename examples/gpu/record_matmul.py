"""Record torch.matmul products on the GPU, to replay them elsewhere with a replica.

    python examples/gpu/record_matmul.py --m 64 --ncols 64 -n 4096 --count 8 --dtype float16 -o h100_matmul_fp16.npz

Saves A (count x m x n), B (count x n x ncols) and C = torch.matmul(A, B) as
raw bit patterns (uint16 for fp16/bf16, uint32 for fp32) with the device name
and torch version; inputs are random with spread exponents and some specials.
"""
from __future__ import annotations

import argparse

import numpy as np
import torch

BITS = {"float16": (torch.float16, np.uint16), "bfloat16": (torch.bfloat16, np.uint16),
        "float32": (torch.float32, np.uint32)}


def draw(rng, shape, dtype):
    x = rng.standard_normal(shape) * 2.0 ** rng.integers(-6, 6, shape)
    x[rng.random(shape) < 0.02] = 0.0
    return torch.tensor(x, dtype=torch.float32).to(dtype)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--m", type=int, default=64)
    ap.add_argument("--ncols", type=int, default=64)
    ap.add_argument("-n", type=int, default=4096)
    ap.add_argument("--count", type=int, default=8)
    ap.add_argument("--dtype", default="float16", choices=sorted(BITS))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("-o", required=True)
    args = ap.parse_args()
    dtype, raw = BITS[args.dtype]
    rng = np.random.default_rng(args.seed)
    As, Bs, Cs = [], [], []
    for _ in range(args.count):
        a = draw(rng, (args.m, args.n), dtype).cuda()
        b = draw(rng, (args.n, args.ncols), dtype).cuda()
        c = torch.matmul(a, b)
        for store, t in ((As, a), (Bs, b), (Cs, c)):
            store.append(t.cpu().contiguous().view(torch.int16 if raw is np.uint16 else torch.int32)
                         .numpy().view(raw))
    np.savez(args.o, A=np.stack(As), B=np.stack(Bs), C=np.stack(Cs), dtype=args.dtype,
             device=torch.cuda.get_device_name(), torch=torch.__version__)
    print(f"wrote {args.o}: {args.count} products {args.m}x{args.n} @ {args.n}x{args.ncols} ({args.dtype}) "
          f"on {torch.cuda.get_device_name()}")


if __name__ == "__main__":
    main()
