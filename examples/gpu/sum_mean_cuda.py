#!/usr/bin/env python3
"""torch.sum and torch.mean on CUDA: reveal, compile, replay bit for bit.

    PYTHONPATH=. python3 examples/gpu/sum_mean_cuda.py OUT [DTYPE:N ...]

For each DTYPE:N (default: float32, float16, bfloat16 at n = 1000, 1024, 4096):
1. `fpspec reveal torch.sum --device cuda` writes OUT/torch_sum_cuda_DTYPE_N.fps;
2. `fpspec verify` compiles its NumPy replica and compares it with torch.sum on the GPU;
3. torch.mean is revealed too where its output reads the sum back (fp32, or n a power of
   two) and its order compared with torch.sum's;
4. torch.mean replayed: torch's CUDA mean is the same reduction followed by one fp32
   multiply by fl32(1/n) and the rounding to the output format, so the replica of the sum
   spec with an fp32 output (the accumulator before its last rounding) gives
   fl_out(fl32(S * fl32(1/n))), compared with torch.mean on random inputs.
One line per step on stdout; the specs land in OUT.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

DEVICE = os.environ.get("FPSPEC_DEVICE", "cuda")      # cpu: a dry run of the steps (the CPU mean divides)
TORCH_DT = {"float32": "float32", "float16": "float16", "bfloat16": "bfloat16"}


def cli(*args, timeout=300) -> tuple[int, str]:
    t0 = time.time()
    p = subprocess.run([sys.executable, "-m", "fpspec.cli", *args], capture_output=True, text=True,
                       timeout=timeout)
    out = (p.stdout + p.stderr).strip()
    return p.returncode, f"{time.time() - t0:.1f} s: " + " | ".join(out.splitlines()[-3:])


def order_line(path: Path) -> str:
    return next((line for line in path.read_text().splitlines() if line.startswith("order")), "")


def replay_mean(spec_path: Path, dtype: str, n: int, rows: int = 256) -> int:
    """Rows where the replayed mean differs from torch.mean on the GPU (bits)."""
    import torch

    from fpspec.compile import compile_spec, load_replica
    from fpspec.spec import parse

    text = spec_path.read_text()
    # the accumulator's value before the last rounding: the same spec with an fp32 output
    text32 = re.sub(r"(\n\s*output = )\w+", r"\1fp32", text)
    mod = load_replica(compile_spec(parse(text32), "numpy"), f"{spec_path.name} (fp32 output)")
    tdt = getattr(torch, TORCH_DT[dtype])
    rng = np.random.default_rng(n)
    X = rng.standard_normal((rows, n)) * np.exp2(rng.integers(-4, 5, size=(rows, 1)))
    Xt = torch.from_numpy(X).to(tdt)
    Xq = Xt.double().numpy()
    native = {"float32": np.float32, "float16": np.float16}.get(dtype, np.float64)   # bf16: float64-held
    S = np.array([mod.sum(Xq[r].astype(native)) for r in range(rows)], np.float32)
    inv = np.float32(1.0) / np.float32(n)
    want = torch.from_numpy((S * inv).astype(np.float32)).to(tdt)
    got = torch.stack([torch.mean(Xt[r].to(DEVICE)) for r in range(rows)]).cpu()
    return int((want.view(torch.int16 if tdt != torch.float32 else torch.int32)
                != got.view(torch.int16 if tdt != torch.float32 else torch.int32)).sum())


def main(argv) -> int:
    out = Path(argv[0])
    out.mkdir(parents=True, exist_ok=True)
    cases = [a.split(":") for a in argv[1:]] or [(d, n) for d in TORCH_DT for n in ("1000", "1024", "4096")]
    failed = 0
    for dtype, n in cases:
        n = int(n)
        spec = out / f"torch_sum_cuda_{dtype}_{n}.fps"
        rc, msg = cli("reveal", "torch.sum", "-n", str(n), "--dtype", dtype, "--device", DEVICE, "-o", str(spec))
        print(f"reveal torch.sum {dtype} n={n}: rc {rc} {msg}", flush=True)
        if rc:
            failed += 1
            continue
        rc, msg = cli("verify", str(spec), "--against", "torch.sum", "--device", DEVICE, "-n", str(n),
                      "--samples", "300")
        print(f"verify numpy replica vs torch.sum {dtype} n={n}: rc {rc} {msg}", flush=True)
        failed += rc != 0
        if dtype == "float32" or n & (n - 1) == 0:
            mspec = out / f"torch_mean_cuda_{dtype}_{n}.fps"
            # the order only: the arithmetic probes read arbitrary sums, which a mean rounds away
            rc, msg = cli("reveal", "torch.mean", "-n", str(n), "--dtype", dtype, "--device", DEVICE, "--no-probe",
                          "-o", str(mspec))
            same = rc == 0 and order_line(mspec) == order_line(spec)
            print(f"reveal torch.mean {dtype} n={n}: rc {rc}, same order as torch.sum: {same} {msg}", flush=True)
            failed += not same
        bad = replay_mean(spec, dtype, n)
        print(f"replay torch.mean {dtype} n={n}: {bad} of 256 rows differ", flush=True)
        failed += bad != 0
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
