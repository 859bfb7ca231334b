#!/usr/bin/env python3
"""fpspec reveal vs the published FPRev (peichenxie/FPRev), side by side in one run.

    FPREV_PATH=/path/to/FPRev python benchmarks/bench_reveal.py [--quick] [--only sum,gemm,trees,big]
                                       [--repeat R] [--before DIR]

--before DIR adds a column: the same library cases run by the fpspec package in
DIR (e.g. `git archive <rev> fpspec | tar -x -C DIR`), in a subprocess of this
run, so an optimization is measured before and after on the same loaded machine.

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

# run from a checkout; FPSPEC_ROOT points the --before worker at another copy of the package
sys.path.insert(0, os.environ.get("FPSPEC_ROOT") or os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import json  # noqa: E402
import subprocess  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

from fpspec.reveal import synthetic as S  # noqa: E402
from fpspec.reveal.engine import build_tree, reveal  # noqa: E402
from fpspec.reveal.targets import resolve_target  # noqa: E402
from fpspec.tree import pairwise, random_tree, sequential  # noqa: E402
from fprev_ref import load_fprev  # benchmarks/ is on sys.path when run as a script

QUICK = "--quick" in sys.argv


def _option(name, default):
    return sys.argv[sys.argv.index(name) + 1] if name in sys.argv else default


ONLY = set(_option("--only", "sum,gemm,trees,big").split(","))
REPEAT = int(_option("--repeat", 1 if QUICK else 3))
BEFORE = _option("--before", None)
GEMM_K = 128 if QUICK else 512


def library_targets():
    n = 4096
    return {
        "sum": ("numpy.sum fp32 n=4096", lambda: resolve_target("numpy.sum", n=n)),
        "gemm": (f"numpy GEMM fp32 n={GEMM_K}",
                 lambda: resolve_target("numpy.matmul", n=GEMM_K, m=GEMM_K, ncols=GEMM_K)),
    }


def fpspec_library(case, repeat):
    """Median seconds, calls and queries of fpspec on one library case (after one warm-up)."""
    target = library_targets()[case][1]()
    reveal(target)
    sec, rev = timed(lambda: reveal(target), repeat)
    return {"seconds": sec, "calls": rev.calls, "queries": rev.queries,
            "tree": str(rev.tree), "differing": rev.differing_count}


def before_library(case, repeat):
    """The same case run by the package in BEFORE (a subprocess: two fpspecs cannot share one process)."""
    env = dict(os.environ, FPSPEC_ROOT=os.path.abspath(BEFORE))
    out = subprocess.run([sys.executable, os.path.abspath(__file__), "--worker", case, "--repeat", str(repeat)]
                         + (["--quick"] if QUICK else []), env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


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


def _cell(x):
    return f"{x:12.4f}" if isinstance(x, float) else f"{x!s:>12}"


def _ratio(a, b):
    return f"{a / b:8.1f}x" if isinstance(a, (int, float)) and isinstance(b, (int, float)) and b else "       -"


def row(label, fp, fs, key, old=None):
    a, b = fp.get(key), fs.get(key)
    extra = f"{_cell(old.get(key))}  {_ratio(a, old.get(key))}" if old is not None else ""
    print(f"  {label:<34}{key:<9}{_cell(a)}{_cell(b)}  {_ratio(a, b)}{extra}")


def bench_library(fpr, case, make_fprev, repeat):
    label = library_targets()[case][0]
    fp = {}
    if fpr is not None:
        fprev, _ = fpr
        impl = make_fprev()
        type(impl).calls = 0
        fprev.fprev(impl)                                  # warm-up, as FPRev's rq scripts do
        type(impl).calls = 0
        fp_repeat = 1 if case == "gemm" else repeat          # FPRev's GEMM takes seconds per run
        sec, _ = timed(lambda: fprev.fprev(impl), fp_repeat)
        fp = {"seconds": sec, "calls": type(impl).calls // fp_repeat, "queries": type(impl).calls // fp_repeat}
    old = before_library(case, repeat) if BEFORE else None
    fs = fpspec_library(case, repeat)
    for key in ("seconds", "calls", "queries"):
        row(label, fp, fs, key, old)
    if old is not None:
        same = old["tree"] == fs["tree"] and old["differing"] == fs["differing"]
        print(f"  {'':<34}{'result':<9}{'':>12}{'same tree and differing outputs as before' if same else 'DIFFERS FROM BEFORE'}")
    return fs


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
    if "--worker" in sys.argv:
        print(json.dumps(fpspec_library(_option("--worker", "sum"), REPEAT)))
        return
    fpr = load_fprev()
    print(f"FPRev: {os.environ.get('FPREV_PATH') if fpr else 'not found (set FPREV_PATH)'}")
    print(f"numpy {np.__version__}, one BLAS thread; medians of {REPEAT} runs (FPRev GEMM: 1 run)\n")
    head = f"  {'case':<34}{'':<9}{'FPRev':>12}{'fpspec':>12}  {'FPRev/fpspec':>9}"
    print(head + (f"{'before':>12}  {'FPRev/before':>9}" if BEFORE else ""))
    n = 4096
    if "sum" in ONLY:
        bench_library(fpr, "sum", lambda: counting(fpr[1].NumpySum)(n), REPEAT)
    if "gemm" in ONLY:
        bench_library(fpr, "gemm", lambda: counting(fpr[1].NumpyGEMM)(GEMM_K), REPEAT)
    if "trees" in ONLY:
        bench_trees(fpr, n)
    if "big" in ONLY:
        bench_big()


def bench_trees(fpr, n):
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


def bench_big():
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
