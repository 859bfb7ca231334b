"""Does numpy.matmul's order (OpenBLAS sgemm/sgemv, one thread) change with the output shape?

    OPENBLAS_NUM_THREADS=1 python examples/cpu/numpy_matmul_shapes.py [K ...]

For each output shape: the orders across the outputs (fpspec.reveal.positions),
each lowered to a spec order, and how many outputs use it.  The record of a run
is benchmarks/results/numpy_matmul_shapes_x86-64_2026-11-26.txt.
"""
import sys
import time

import numpy as np

from fpspec.reveal.positions import reveal_positions
from fpspec.reveal.targets import resolve_target
from fpspec.spec import lower

SHAPES = [(1, 1), (4, 1), (5, 1), (7, 1), (8, 1), (13, 1), (2, 2), (4, 4), (8, 8), (6, 16), (12, 16), (13, 24),
          (16, 16), (24, 24), (32, 32), (64, 64), (100, 100)]


def main(ks):
    print(f"numpy {np.__version__}; one line per order: outputs using it, first output, order")
    for K in ks:
        for m, ncols in SHAPES:
            op = "gemv" if ncols == 1 else "gemm"
            t = resolve_target("numpy.matmul", op=op, n=K, dtype="float32", m=m, ncols=ncols)
            start = time.perf_counter()
            orders = reveal_positions(t)
            took = time.perf_counter() - start
            print(f"K={K} {op} {m}x{ncols}: {len(orders)} order(s), {took:.2f} s")
            for p in orders:
                text = str(lower(p.revelation.tree).order).replace("\n", " ")
                print(f"    {int(p.mask.sum()):5d} outputs from {p.at}: {text[:150]}")


if __name__ == "__main__":
    main([int(k) for k in sys.argv[1:]] or [16, 64, 100])
