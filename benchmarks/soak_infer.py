"""Soak of the closed loop: random parametric specs -> compiled replica -> range inference -> compared.

    python benchmarks/soak_infer.py --count 1000 --seed 0 -n 1..200 --box numba --minutes 30 -j 4
    python benchmarks/soak_infer.py --seed 1 -n 1..64 --case 91 --show --shrink 0   # one case again

Each case draws a spec (fpspec.spec.generate.random_spec: every combinator,
guards on n, residues, recursive lets, `using` sections), compiles it into
a replica (the black box), runs range inference over -n LO..HI with a fixed
fit budget (deterministic), and compares the inferred spec with the
generating one at held-out n, trees and arithmetic (fpspec.infer.roundtrip).
Prints one line per case, a tally by verdict and by depth, and each failure
as a minimal generating spec (fpspec.spec.generate.shrink, --shrink tries).
"""
from __future__ import annotations

import argparse
import collections
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fpspec.infer.roundtrip import recover  # noqa: E402
from fpspec.spec.generate import random_spec, shrink  # noqa: E402


def depth(spec) -> int:
    """Combinators nested in the deepest path of the order (guards and usings not counted)."""
    from fpspec.spec import ast as A
    from fpspec.spec.check import order_children

    def d(o, seen):
        if isinstance(o, A.Ref):
            if o.name in seen:
                return 0
            let = next((x for x in spec.lets if x.name == o.name), None)
            return 0 if let is None else d(let.order, seen | {o.name})
        kids = list(order_children(o))
        here = 0 if isinstance(o, (A.Guard, A.Using)) else 1
        return here + max((d(k, seen) for k in kids), default=0)
    return d(spec.order, frozenset())


def _case(job):
    """One closed loop: (i, depth or None, verdict, line, detail); run in a worker with -j."""
    i, args, lo, hi, start = job
    if args.minutes is not None and time.time() - start > args.minutes * 60:
        return i, None, "late", "", ""
    spec = _draw(args, i, lo, hi)
    try:
        rec = recover(spec, (lo, hi), box=args.box, seed=i, fit_work=args.fit_work)
    except Exception as e:     # the replica could not be built or run: the compiler's, not inference's
        return i, None, "skipped", (f"case {i}: skipped (the {args.box} replica failed: {type(e).__name__}: "
                                    f"{str(e).splitlines()[0][:120] if str(e) else ''})"), ""
    k = depth(spec)
    return i, k, rec.verdict, f"case {i}: depth {k}, {rec.text()}, {rec.calls} calls", rec.detail


def _draw(args, i: int, lo: int, hi: int):
    rng = np.random.default_rng([args.seed, i])
    return random_spec(rng, op=None if args.op == "any" else args.op, max_depth=args.max_depth, n_range=(lo, hi))


def _cases(text: str | None, count: int) -> list[int]:
    if not text:
        return list(range(count))
    out = []
    for part in text.split(","):
        a, _, b = part.partition("..")
        out.extend(range(int(a), int(b) + 1) if b else [int(a)])
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--count", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--case", default=None, help="only these case numbers of the seed, e.g. 91 or 0,8,15 or 60..70")
    ap.add_argument("-n", default="1..200", help="range LO..HI of every spec and of inference")
    ap.add_argument("--op", default="sum", help="sum | dot | any")
    ap.add_argument("--box", default="numba", help="replica backend: numba | numpy")
    ap.add_argument("--max-depth", type=int, default=4)
    ap.add_argument("--fit-work", type=int, default=1_000_000, help="leaves the fit search may spend per case")
    ap.add_argument("--minutes", type=float, default=None,
                    help="stop drawing new cases, and shrinking failures, after this long")
    ap.add_argument("--shrink", type=int, default=12, help="shrink tries per failure (each is one closed loop)")
    ap.add_argument("-j", "--jobs", type=int, default=1, help="cases run at once, one process each")
    ap.add_argument("--show", action="store_true", help="print each case's generating spec before its line")
    args = ap.parse_args(argv)
    lo, hi = (int(x) for x in args.n.split(".."))
    start = time.time()
    tally: collections.Counter = collections.Counter()
    by_depth: dict = collections.defaultdict(collections.Counter)
    failures = []
    jobs = [(i, args, lo, hi, start) for i in _cases(args.case, args.count)]
    if args.jobs > 1:
        import multiprocessing

        pool = multiprocessing.get_context("fork").Pool(args.jobs, maxtasksperchild=8)
        results = pool.imap(_case, jobs)   # in case order: the same printout as one process gives
    else:
        pool, results = None, map(_case, jobs)
    for i, k, verdict, line, detail in results:
        if verdict == "late":
            continue
        if args.show:
            print(f"--- case {i}\n{_draw(args, i, lo, hi)}")
        print(line, flush=True)
        tally[verdict] += 1
        if k is None:
            continue
        by_depth[k][verdict] += 1
        if verdict != "recovered":
            failures.append((i, verdict, detail))
    if pool is not None:
        pool.close()
        pool.join()
    print(f"\n{sum(tally.values())} cases in {time.time() - start:.0f} s: "
          + ", ".join(f"{v} {tally[v]}" for v in ("recovered", "refused", "wrong", "skipped")))
    for k in sorted(by_depth):
        c = by_depth[k]
        total = sum(c.values())
        print(f"  depth {k}: {total} cases, recovered {c['recovered']} ({100 * c['recovered'] / total:.0f}%), "
              f"refused {c['refused']}, wrong {c['wrong']}")
    small = [c for k in by_depth if k <= 4 for c in [by_depth[k]]]
    n_small = sum(sum(c.values()) for c in small)
    if n_small:
        print(f"  depth <= 4: recovered {sum(c['recovered'] for c in small)} of {n_small} "
              f"({100 * sum(c['recovered'] for c in small) / n_small:.0f}%)")
    for i, verdict, detail in failures:
        spec = _draw(args, i, lo, hi)
        if args.minutes is not None and time.time() - start > args.minutes * 60:
            print(f"\n--- case {i}: {verdict}: {detail}\n(as drawn: --minutes ran out before shrinking)\n{spec}")
            continue

        def still_fails(s, verdict=verdict, i=i):
            try:
                return recover(s, (lo, hi), box=args.box, seed=i, fit_work=args.fit_work).verdict == verdict
            except Exception:
                return False
        small_spec = shrink(spec, still_fails, max_tries=args.shrink) if args.shrink else spec
        print(f"\n--- case {i}: {verdict}: {detail}\n{small_spec}")
    return 1 if tally["wrong"] else 0


if __name__ == "__main__":
    sys.exit(main())
