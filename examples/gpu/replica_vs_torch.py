"""The Triton replica of a gemm spec against torch.matmul on the GPU, on both paths.

    TRITON_INTERPRET=0 PYTHONPATH=. python3 examples/gpu/replica_vs_torch.py SPEC K [M N [INPUTS]]

Compiles SPEC for triton, then for INPUTS inputs of every kind fpspec.inputs makes
(random, wide exponents, subnormals, signed zeros, inf/nan, ...), M x K @ K x N in
the spec's input format, compares the replica's output bits with torch.matmul's on
the emulated and on the native path (NaNs equal whatever their payload).  Prints,
per path, how many outputs differ and which path ran, or why native cannot.
"""
import os
import sys

import numpy as np
import torch

os.environ.setdefault("TRITON_INTERPRET", "0")
from fpspec.compile import compile_spec, load_replica  # noqa: E402
from fpspec.inputs import generate  # noqa: E402
from fpspec.spec import load  # noqa: E402

DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16}


def main(argv):
    spec_path, K = argv[0], int(argv[1])
    m, ncols = (int(argv[2]), int(argv[3])) if len(argv) > 3 else (16, 16)
    inputs = int(argv[4]) if len(argv) > 4 else 300
    spec = load(spec_path)
    fmt = dict((e.key, e.value.name) for e in spec.header.arithmetic.entries if e.key == "input")["input"]
    rep = load_replica(compile_spec(spec, "triton"), "replica")
    for path in ("emulated", "native"):
        bad = total = 0
        for idx in range(inputs):
            a, b = generate("gemm", K, fmt, seed=5, index=idx, m=m, ncols=ncols).args[:2]
            A = torch.tensor(np.asarray(a, np.float64)).to(DTYPES[fmt]).cuda()
            B = torch.tensor(np.asarray(b, np.float64)).to(DTYPES[fmt]).cuda()
            want = torch.matmul(A, B)
            try:
                got = rep.gemm(A, B, path=path)
            except ValueError as e:
                print(f"{spec_path} {path}: not run: {e}")
                break
            same = (want.view(torch.int16) == got.view(torch.int16)) | (torch.isnan(want) & torch.isnan(got))
            bad += int((~same).sum())
            total += same.numel()
        else:
            print(f"{spec_path} {path}: {bad} of {total} outputs differ (ran {rep.REPLICA.last_path})")


if __name__ == "__main__":
    main(sys.argv[1:])
