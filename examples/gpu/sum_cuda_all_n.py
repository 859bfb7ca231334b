#!/usr/bin/env python3
"""torch.sum / torch.mean on CUDA for every n up to 10^8: one spec per format, checked bit for bit.

    PYTHONPATH=. python3 examples/gpu/sum_cuda_all_n.py OUT [DTYPE ...]

The specs examples/gpu/torch_sum_cuda_{float32,float16,bfloat16}_h200.fps are written from
PyTorch's CUDA reduce kernel (aten/src/ATen/native/cuda/Reduce.cuh) for one 1-D contiguous
input on a GPU of 132 SMs:
- n < 128: no vector loads; last_pow2(n) threads, thread t adds t and t + threads, then the
  block's halving tree (shared memory down to a warp, then shuffles at offsets 16, 8, .., 1);
- 128 <= n <= 130560: one block of last_pow2(n // V) threads (at most 512), each loading vectors of V
  (4 for fp32, 8 for fp16 / bf16) into V accumulators, the n % V tail one element each to
  threads 0, 1, ...; accumulators combined in order; the halving tree;
- above: ctas = max(min(528, ceil(vpt / 16)), ceil(vpt / 256)) blocks (vpt = ceil(n / 512)),
  512 threads each, vectors dealt across all of them; each block's halving tree; the last
  block adds the block results f, f + 512, ... in thread f and runs the halving tree again.

Per format this
1. runs `fpspec verify SPEC --target numba --against torch.sum --device cuda -n ...`: trees
   revealed on the GPU and compared with the spec's at n <= 4096, outputs sampled up to 65536;
2. compiles the spec's Numba replica and compares it bit for bit with torch.sum on the GPU at
   n around the kernel's switches and at 10^6, 10^7 and 10^8 (trees that large are never
   revealed: inputs are compared), on inputs of four kinds; torch.mean is compared with the
   replica's fp32 sum times fl32(1/n), rounded to the format;
3. prints one line per check and a count of inputs where the float64 sum rounded to the
   format differs from torch (the inputs do tell orders apart).
Exit status 1 when anything differs.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
DEVICE = os.environ.get("FPSPEC_DEVICE", "cuda")      # cpu: a dry run of the steps
LARGE_N = [int(v) for v in os.environ.get("FPSPEC_LARGE_N", "").split(",") if v] or None
TREE_N = {"float32": [2, 3, 5, 100, 120, 127, 128, 129, 130, 257, 1000, 1025, 2049, 4093, 8191, 32768],
          "float16": [2, 7, 127, 128, 129, 255, 1000, 2049, 4095, 32768],
          "bfloat16": [2, 7, 127, 128, 129, 1000, 2049, 4095, 32768]}
LARGE_N = LARGE_N or [130559, 130560, 130561, 262147, 1_000_000, 1_000_003, 10_000_000, 10_000_001, 100_000_000]


def spec_path(dtype: str) -> Path:
    return HERE / f"torch_sum_cuda_{dtype}_h200.fps"


def verify(dtype: str, timeout: int) -> subprocess.Popen:
    ns = [a for n in TREE_N[dtype] for a in ("-n", str(n))]
    return subprocess.Popen([sys.executable, "-m", "fpspec.cli", "verify", str(spec_path(dtype)), "--target", "numba",
                             "--against", "torch.sum", "--device", DEVICE, *ns, "--samples", "400"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def inputs(n: int, kind: int, rng) -> np.ndarray:
    if kind == 0:
        return rng.standard_normal(n)
    if kind == 1:          # exponents spread over 2^-12 .. 2^12
        return rng.standard_normal(n) * np.exp2(rng.integers(-12, 13, n))
    if kind == 2:          # all positive: every partial sum grows, low bits fall off in order
        return rng.random(n) + 0.5
    x = rng.standard_normal(n)   # cancellation: pairs of opposite large terms
    x[: n // 2] *= 1024.0
    return x


def large_n(dtype: str, kinds=(0, 1, 2, 3)) -> int:
    import torch

    from fpspec.compile import compile_spec, load_replica
    from fpspec.spec import parse

    text = spec_path(dtype).read_text()
    t0 = time.time()
    rep = load_replica(compile_spec(parse(text), "numba"), spec_path(dtype).name)
    text32 = re.sub(r"(\n\s*output = )\w+", r"\1fp32", text)        # the accumulator before its last rounding
    rep32 = load_replica(compile_spec(parse(text32), "numba"), spec_path(dtype).name + " (fp32 output)")
    tdt = getattr(torch, dtype)
    native = {"float32": np.float32, "float16": np.float16}.get(dtype, np.float64)   # bf16: float64-held
    itype = torch.int32 if dtype == "float32" else torch.int16
    print(f"{dtype}: numba replicas compiled in {time.time() - t0:.1f} s", flush=True)
    rng = np.random.default_rng(7)
    bad = 0
    for n in LARGE_N:
        sums = means = naive = 0
        t0 = time.time()
        for kind in kinds:
            xt = torch.from_numpy(inputs(n, kind, rng)).to(tdt)
            xq = xt.double().numpy()
            want = torch.tensor([float(rep.sum(xq.astype(native)))], dtype=torch.float64).to(tdt)
            got = torch.sum(xt.to(DEVICE)).cpu().reshape(1)
            sums += int((want.view(itype) != got.view(itype)).sum())
            s32 = np.float32(rep32.sum(xq.astype(native)))
            mwant = torch.tensor([float(s32 * (np.float32(1.0) / np.float32(n)))], dtype=torch.float32).to(tdt)
            mgot = torch.mean(xt.to(DEVICE)).cpu().reshape(1)
            means += int((mwant.view(itype) != mgot.view(itype)).sum())
            exact = torch.tensor([float(np.sum(xq, dtype=np.float64))], dtype=torch.float64).to(tdt)
            naive += int((exact.view(itype) != got.view(itype)).sum())
        print(f"{dtype} n={n}: torch.sum vs replica {sums} of {len(kinds)} differ; torch.mean vs replica x fl32(1/n) "
              f"{means} of {len(kinds)} differ; (float64 sum rounded differs from torch at {naive} of {len(kinds)}) "
              f"{time.time() - t0:.1f} s", flush=True)
        bad += sums + means
    return bad


def main(argv) -> int:
    out = Path(argv[0])
    out.mkdir(parents=True, exist_ok=True)
    dtypes = argv[1:] or ["float32", "float16", "bfloat16"]
    procs = {d: verify(d, 240) for d in dtypes}    # the CLI runs side by side with the large-n checks
    bad = sum(large_n(d) for d in dtypes)
    for d, p in procs.items():
        try:
            text, _ = p.communicate(timeout=400)
        except subprocess.TimeoutExpired:
            p.kill()
            text = p.communicate()[0] + "\n(cut by the time limit)"
        (out / f"verify_{d}.txt").write_text(text)
        tail = " | ".join(text.strip().splitlines()[-4:])
        print(f"fpspec verify {spec_path(d).name} --against torch.sum --device cuda: rc {p.returncode}: {tail}",
              flush=True)
        bad += p.returncode != 0
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
