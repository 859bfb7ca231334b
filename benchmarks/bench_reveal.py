#!/usr/bin/env python3
"""fpspec reveal vs the published FPRev (peichenxie/FPRev), side by side in one run.

    FPREV_PATH=/path/to/FPRev python benchmarks/bench_reveal.py [--quick]

FPRev is never vendored: point FPREV_PATH at a checkout (its fprev.py and
experiments/accumimpls).  Without it only fpspec's columns are printed.
Rows:
  numpy.sum fp32 n=4096           wall time, library calls, queries
  numpy GEMM fp32 n=512 (1 thread) the same, FPRev one query per call
  synthetic trees of 4096 leaves  queries only (answers straight from the tree)
  reversed sum n=2^20             fpspec alone (FPRev recurses once per leaf)
"""
import os

for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(var, "1")   # one BLAS thread, before numpy loads

import statistics  # noqa: E402
import sys  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # run from a checkout
import time  # noqa: E402

import numpy as np  # noqa: E402

from fpspec.reveal import synthetic as S  # noqa: E402
from fpspec.reveal.engine import build_tree, reveal  # noqa: E402
from fpspec.reveal.targets import resolve_target  # noqa: E402
from fpspec.tree import pairwise, random_tree, sequential  # noqa: E402

QUICK = "--quick" in sys.argv


def load_fprev():
    path = os.environ.get("FPREV_PATH")
    if not path or not os.path.exists(os.path.join(path, "fprev.py")):
        return None
    sys.path[:0] = [path, os.path.join(path, "experiments")]
    try:
        import fprev
        from accumimpls import numpy as fnp
    except ImportError as e:
        print(f"FPRev at {path} does not import ({e}); fpspec columns only")
        return None
    return fprev, fnp


def timed(fn, repeat):
    times, out = [], None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times), out


def counting(cls):
    """Wrap an FPRev AccumImpl so its calls are counted (one get_l is one library call)."""
    class Counting(cls):
        calls = 0

        def get_l(self):
            type(self).calls += 1
            return super().get_l()
    return Counting


def row(label, fp, fs, key):
    a, b = fp.get(key), fs.get(key)
    ratio = f"{a / b:8.1f}x" if isinstance(a, (int, float)) and isinstance(b, (int, float)) and b else "       -"
    fa = f"{a:12.4f}" if isinstance(a, float) else f"{a!s:>12}"
    fb = f"{b:12.4f}" if isinstance(b, float) else f"{b!s:>12}"
    print(f"  {label:<34}{key:<9}{fa}{fb}  {ratio}")


def bench_library(fpr, label, make_fprev, make_target, repeat):
    fp = {}
    if fpr is not None:
        fprev, _ = fpr
        impl = make_fprev()
        type(impl).calls = 0
        fprev.fprev(impl)                                  # warm-up, as FPRev's rq scripts do
        type(impl).calls = 0
        sec, _ = timed(lambda: fprev.fprev(impl), repeat)
        fp = {"seconds": sec, "calls": type(impl).calls // repeat, "queries": type(impl).calls // repeat}
    target = make_target()
    reveal(target)
    sec, rev = timed(lambda: reveal(target), repeat)
    fs = {"seconds": sec, "calls": rev.calls, "queries": rev.queries}
    for key in ("seconds", "calls", "queries"):
        row(label, fp, fs, key)
    return rev


def fprev_queries_on_tree(fpr, tree, n):
    """FPRev's own algorithm answering from the tree: its query count (or the error it dies with)."""
    fprev, _ = fpr
    oracle = S.TreeOracle(tree)

    class TreeImpl(fprev.AccumImpl):
        def __init__(self):
            self.n_summands = n
            self.pos = -1
            self.neg = -1
            self.calls = 0

        def set_mask(self, k, negative=False):
            if negative:
                self.neg = k
            else:
                self.pos = k

        def reset_mask(self, k):
            pass

        def get_l(self):
            self.calls += 1
            if self.calls > 30 * n:
                raise TimeoutError
            return int(oracle.l_many([[self.pos, self.neg]])[0])

    impl = TreeImpl()
    try:
        fprev.fprev(impl)
    except RecursionError:
        return f"RecErr@{impl.calls}"
    except TimeoutError:
        return ">30n"
    return impl.calls


def main():
    fpr = load_fprev()
    print(f"FPRev: {os.environ.get('FPREV_PATH') if fpr else 'not found (set FPREV_PATH)'}")
    print(f"numpy {np.__version__}, one BLAS thread; medians of {1 if QUICK else 3} runs\n")
    print(f"  {'case':<34}{'':<9}{'FPRev':>12}{'fpspec':>12}  {'FPRev/fpspec':>9}")
    repeat = 1 if QUICK else 3
    n = 4096
    bench_library(fpr, "numpy.sum fp32 n=4096",
                  lambda: counting(fpr[1].NumpySum)(n), lambda: resolve_target("numpy.sum", n=n), repeat)
    k = 128 if QUICK else 512
    bench_library(fpr, f"numpy GEMM fp32 n={k}",
                  lambda: counting(fpr[1].NumpyGEMM)(k),
                  lambda: resolve_target("numpy.matmul", n=k, m=k, ncols=k), 1)
    print()
    rng = np.random.default_rng(0)
    trees = {
        "sequential": sequential(range(n)),
        "reversed": S.reversed_tree(n),
        "pairwise": pairwise(range(n)),
        "random binary": random_tree(n, rng),
        "random caterpillar": S.caterpillar(n, rng),
        "8 lanes + pairwise": S.strided_lanes(n, 8),
        "fused chain w=16": S.fused_chain(n, 16),
    }
    print(f"  {'tree of 4096 leaves (queries)':<34}{'':<9}{'FPRev':>12}{'fpspec':>12}  {'ratio':>9}  fpspec/n")
    for name, tree in trees.items():
        fp = {"queries": fprev_queries_on_tree(fpr, tree, n)} if fpr else {}
        oracle = S.TreeOracle(tree)
        assert build_tree(oracle, n) == tree
        fs = {"queries": oracle.queries}
        a, b = fp.get("queries"), fs["queries"]
        ratio = f"{a / b:8.1f}x" if isinstance(a, int) else "       -"
        print(f"  {name:<34}{'':<9}{a!s:>12}{b:>12}  {ratio}  {b / n:6.2f}")
    big = 1 << (16 if QUICK else 20)
    tree = S.reversed_tree(big)
    oracle = S.TreeOracle(tree)
    t = time.perf_counter()
    ok = build_tree(oracle, big) == tree
    print(f"\n  reversed sum n=2^{big.bit_length() - 1}: fpspec {oracle.queries} queries "
          f"({oracle.queries / big:.2f} n), {time.perf_counter() - t:.1f} s, tree exact: {ok}; "
          "FPRev: RecursionError from n = 1024")


if __name__ == "__main__":
    main()
