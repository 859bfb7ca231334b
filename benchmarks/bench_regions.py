#!/usr/bin/env python3
"""Replicas of a spec with arithmetic per part vs numpy.dot, side by side in one run.

    python benchmarks/bench_regions.py [--quick]

Rows: n; numpy.dot float32 itself; the Numba and NumPy replicas of
examples/cpu/numpy_dot_float32.fps (OpenBLAS sdot: fp32 FMA lanes, fp32 lane sums,
fp64 loop; its range opened past 1024); and, for the cost of the parts, the
Numba replica of the same order in the main arithmetic alone (fp64 with
fp32 products everywhere: wrong bits; one FMA arithmetic for the whole tree
cannot be compiled at all, its leftovers meet a split).  Best of a few runs
after a warm-up call that compiles; ratio = replica / numpy.dot.  Each row
also says whether the regional replicas gave numpy.dot's bits on the input.
"""
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # run from a checkout

import numpy as np  # noqa: E402

QUICK = "--quick" in sys.argv
HERE = os.path.dirname(os.path.abspath(__file__))


def load(source: str, tag: str):
    from fpspec.compile import load_replica

    return load_replica(source, tag)


def best(fn, *args, runs=5):
    fn(*args)
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn(*args)
        times.append(time.perf_counter() - t0)
    return min(times)


def main():
    from fpspec.compile import compile_spec
    from fpspec.spec import parse

    text = open(os.path.join(HERE, "..", "examples", "cpu", "numpy_dot_float32.fps")).read()
    text = text.replace("\nn in 1..1024\n", "\nn in 1..\n")
    regional = parse(text)
    # the same order in the main arithmetic only (no parts)
    single = parse(text.replace("using(fma_fp32, seq)", "seq").replace("using(rounded_fp32, pairwise)", "pairwise"))
    numba_r = load(compile_spec(regional, "numba"), "regions_numba")
    numpy_r = load(compile_spec(regional, "numpy"), "regions_numpy")
    numba_1 = load(compile_spec(single, "numba"), "single_numba")
    rng = np.random.default_rng(0)
    sizes = [1000, 100_000] if QUICK else [1000, 100_000, 1_000_000]
    print(f"{'n':>9} {'numpy.dot':>11} {'numba (parts)':>14} {'ratio':>7} {'numpy (parts)':>14} {'ratio':>7} "
          f"{'numba (one)':>12} {'ratio':>7}  bits")
    for n in sizes:
        x, y = rng.uniform(-1, 1, (2, n)).astype(np.float32)
        t_lib = best(np.dot, x, y)
        t_nb = best(numba_r.dot, x, y)
        # the NumPy replica vectorizes across outputs, not along one dot: scalar Python here
        t_np = best(numpy_r.dot, x, y, runs=1) if n <= 100_000 else float("nan")
        t_one = best(numba_1.dot, x, y)
        same = all(r.dot(x, y).tobytes() == np.dot(x, y).tobytes() for r in (numba_r, numpy_r)[:1 + (n <= 100_000)])
        print(f"{n:>9} {t_lib * 1e6:>9.1f}us {t_nb * 1e6:>12.1f}us {t_nb / t_lib:>7.1f} {t_np * 1e6:>12.1f}us "
              f"{t_np / t_lib:>7.1f} {t_one * 1e6:>10.1f}us {t_one / t_lib:>7.1f}  {'equal' if same else 'DIFFER'}")


if __name__ == "__main__":
    main()
