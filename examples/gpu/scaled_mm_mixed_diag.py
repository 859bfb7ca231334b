"""torch._scaled_mm with two fp8 formats (e4m3 x e5m2 and e5m2 x e4m3, scales 1, fp32 output) against
fpspec's fused model: the order and node of the e4m3 spec, B read in its own format (fused input_b).

    PYTHONPATH=. python3 examples/gpu/scaled_mm_mixed_diag.py

Prints, for each pair, how many of 300 x 256 outputs (16x16x64 blocks) differ from the model.
"""
import dataclasses

import numpy as np
import torch

from fpspec import inputs as fpinputs
from fpspec.arith.evaluate import evaluate
from fpspec.spec.expand import expand
from fpspec.verify import load_spec, spec_arithmetic

DTYPES = {"fp8e4m3": torch.float8_e4m3fn, "fp8e5m2": torch.float8_e5m2}


def main():
    spec = load_spec("examples/gpu/torch_scaled_mm_e4m3_16x16x64_h200.fps")
    base = spec_arithmetic(spec)
    tree = expand(spec, 64)
    one = torch.ones((), device="cuda")
    for fa, fb in (("fp8e4m3", "fp8e5m2"), ("fp8e5m2", "fp8e4m3")):
        arith = dataclasses.replace(base, input=fa, fused=dataclasses.replace(base.fused, input=fa, input_b=fb))
        bad = total = 0
        for index in range(300):
            A = fpinputs.generate("gemm", 64, fa, seed=1, index=index, m=16, ncols=16).args[0]
            B = fpinputs.generate("gemm", 64, fb, seed=2, index=index, m=16, ncols=16).args[1]
            out = torch._scaled_mm(torch.from_numpy(A).cuda().to(DTYPES[fa]),
                                   torch.from_numpy(B).cuda().to(DTYPES[fb]).t().contiguous().t(),
                                   scale_a=one, scale_b=one, out_dtype=torch.float32).cpu().double().numpy()
            x, y = np.repeat(A.T, 16, axis=1), np.tile(B, (1, 16))   # output (i, j): row i of A, column j of B
            want = np.asarray(evaluate(tree, x, y, arith), np.float64).reshape(16, 16)
            same = (want.view(np.uint64) == out.view(np.uint64)) | (np.isnan(want) & np.isnan(out))
            bad += int((~same).sum())
            total += same.size
        print(f"{fa} x {fb}: {bad} of {total} outputs differ from the model (chain(32), w = 32, extra_bits = -10, "
              f"B as {fb})", flush=True)


if __name__ == "__main__":
    main()
