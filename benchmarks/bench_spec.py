#!/usr/bin/env python3
"""The .fps language: parse + expand to 10^6 leaves, check, lower; side by side
with the bare cost of building the same number of tree nodes.

    python benchmarks/bench_spec.py [--quick]

Rows (wall time of one call each, best of --repeat, the GC pause of
`tree.building()` included: it is part of what a caller waits for):
  parse        the numpy.sum spec (text -> AST)
  expand       numpy.sum / chain(16) / seq / lanes specs to n = 10^6 leaves,
               next to `tree.sequential(range(10^6))` (10^6 - 1 Node constructions
               and nothing else, the floor for any builder of such a tree)
  check        the numpy.sum spec over its unbounded range (4144 values of n)
  lower        numpy.sum trees at n = 4096 and 65536 -> spec (bytes of text)
Target: parse + expand of a 10^6-leaf tree under 2 s.
"""
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # run from a checkout

from fpspec.spec import check, expand, lower, parse  # noqa: E402
from fpspec.tree import sequential  # noqa: E402

QUICK = "--quick" in sys.argv
N = 10**5 if QUICK else 10**6
REPEAT = 1 if QUICK else 3
ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
NUMPY_SUM = open(os.path.join(ROOT, "examples", "cpu", "numpy_sum_float32.fps")).read()


def best(fn, repeat=REPEAT):
    times, out = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
        out = None if not isinstance(out, (str, int)) else out
    return min(times), out


def main():
    rows = []
    t_cold, _ = best(lambda: parse(NUMPY_SUM), 1)
    rows.append(("parse numpy.sum spec (cold: builds the parser)", t_cold, None))
    floor, _ = best(lambda: sequential(range(N)))
    t_parse, _ = best(lambda: parse(NUMPY_SUM))
    rows.append(("parse numpy.sum spec", t_parse, None))
    for name, text in (("numpy.sum", NUMPY_SUM), ("chain(16)", "n in 1..\norder chain(16)"),
                       ("seq", "n in 1..\norder seq"), ("lanes(8, seq, gpu_tree)", "n in 1..\norder lanes(8, seq, gpu_tree)")):
        spec = parse(text)
        t, _ = best(lambda: expand(spec, N))
        tp, _ = best(lambda: expand(parse(text), N))
        rows.append((f"expand {name} n={N}", t, floor))
        rows.append((f"parse + expand {name} n={N}", tp, floor))
    spec = parse(NUMPY_SUM)
    t, _ = best(lambda: check(spec), 1)
    rows.append(("check numpy.sum (4144 n)", t, None))
    for n in ((4096,) if QUICK else (4096, 65536)):
        tree = expand(spec, n)
        t, size = best(lambda: len(str(lower(tree))), 1)
        rows.append((f"lower numpy.sum n={n} -> {size} bytes", t, None))

    print(f"{'work':<48} {'fpspec s':>10} {'bare Node build s':>18} {'ratio':>7}")
    for what, t, ref in rows:
        print(f"{what:<48} {t:>10.3f} {'' if ref is None else f'{ref:18.3f}':>18} "
              f"{'' if ref is None else f'{t / ref:7.2f}':>7}")
    print(f"(bare Node build: fpspec.tree.sequential(range({N})), {N - 1} Node constructions)")


if __name__ == "__main__":
    main()
