#!/usr/bin/env python3
"""numpy.matmul along K (OpenBLAS, float32): one spec for every K, side by side
with revealing the largest K once.

    OPENBLAS_NUM_THREADS=1 python benchmarks/bench_infer_matmul.py [--quick]

Rows (each inference in a child process, so that its peak RSS is its own):
  gemm 8x8 1..1024     python -m fpspec.infer numpy.matmul --op gemm --m 8 --ncols 8 -n 1..1024 --full-limit 1024
  gemm 8x8 1..65536    ... -n 1..65536 --check 65536 (full revelation up to 8192, sampled checks above)
  gemv m=8 1..1024     python -m fpspec.infer numpy.matmul --op gemv --m 8 -n 1..1024 --full-limit 1024
  gemv m=8 1..16384    ... -n 1..16384 (blocks of 4096 above; sampled checks above 8192)
  dgemv m=4 1..3000    ... --op gemv --m 4 -n 1..3000 --dtype float64 (product = fma_first)
The reference column reveals the largest fully revealed K once (fpspec.reveal).
The gemv rows probe the arithmetic per part (pad's FMA lanes, rounded joins).
Before chunks/pad (recorded earlier, not rerun here): the
gemm 1..1024 run took 17.5 min and was refused ("more than 16 guarded cases").
"""
from __future__ import annotations

import os
import resource
import subprocess
import sys
import time

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, ROOT)  # run from a checkout

QUICK = "--quick" in sys.argv
ROWS = [
    ("gemm 8x8 1..1024", ["--op", "gemm", "--m", "8", "--ncols", "8", "-n", "1..1024", "--full-limit", "1024"],
     dict(op="gemm", m=8, ncols=8), 1024),
    ("gemv m=8 1..1024", ["--op", "gemv", "--m", "8", "-n", "1..1024", "--full-limit", "1024"],
     dict(op="gemv", m=8), 1024),
]
if not QUICK:
    ROWS.insert(1, ("gemm 8x8 1..65536 + check 65536",
                    ["--op", "gemm", "--m", "8", "--ncols", "8", "-n", "1..65536", "--check", "65536"],
                    dict(op="gemm", m=8, ncols=8), 8192))
    ROWS += [("gemv m=8 1..16384", ["--op", "gemv", "--m", "8", "-n", "1..16384"], dict(op="gemv", m=8), 8192),
             ("dgemv m=4 1..3000", ["--op", "gemv", "--m", "4", "-n", "1..3000", "--dtype", "float64"],
              dict(op="gemv", m=4, dtype="float64"), 3000)]


def infer(args):
    """(seconds, peak RSS in MB, the spec's order line) of one inference in a child process."""
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", PYTHONPATH=ROOT)
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "fpspec.infer", "numpy.matmul", *args, "--quiet"], env=env,
                         capture_output=True, text=True, cwd=ROOT)
    seconds = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    if out.returncode:
        return seconds, peak / 1024, "FAILED: " + out.stderr.strip().splitlines()[-1]
    order = [x for x in out.stdout.split("\n\n") if x.startswith(("order", "let"))]
    # (ru_maxrss of children is the largest child so far: a smaller later child shows the earlier peak)
    return seconds, max(peak, before) / 1024, " ".join(" ".join(order).split())


def reveal_once(kw, n):
    from fpspec.reveal.engine import reveal
    from fpspec.reveal.targets import resolve_target

    t0 = time.perf_counter()
    reveal(resolve_target("numpy.matmul", n=n, **kw), seed=0)
    return time.perf_counter() - t0


def main():
    os.environ["OPENBLAS_NUM_THREADS"] = "1"
    print(f"  {'row':<34}{'reveal max K once':>18}{'infer every K':>15}{'ratio':>8}{'peak RSS':>10}")
    for label, args, kw, n in ROWS:
        ref = reveal_once(kw, n)
        s, rss, order = infer(args)
        print(f"  {label:<34}{ref:>16.2f} s{s:>13.2f} s{s / ref:>7.0f}x{rss:>7.0f} MB")
        print(f"      {order}")


if __name__ == "__main__":
    main()
