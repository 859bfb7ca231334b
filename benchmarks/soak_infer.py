"""Soak of the closed loop: random parametric specs -> compiled replica -> range inference -> compared.

    python benchmarks/soak_infer.py --count 1000 --seed 0 -n 1..200 --box numba --minutes 30

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


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--count", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("-n", default="1..200", help="range LO..HI of every spec and of inference")
    ap.add_argument("--op", default="sum", help="sum | dot | any")
    ap.add_argument("--box", default="numba", help="replica backend: numba | numpy")
    ap.add_argument("--max-depth", type=int, default=4)
    ap.add_argument("--fit-work", type=int, default=1_000_000, help="leaves the fit search may spend per case")
    ap.add_argument("--minutes", type=float, default=None, help="stop drawing new cases after this long")
    ap.add_argument("--shrink", type=int, default=12, help="shrink tries per failure (each is one closed loop)")
    args = ap.parse_args(argv)
    lo, hi = (int(x) for x in args.n.split(".."))
    start = time.time()
    tally: collections.Counter = collections.Counter()
    by_depth: dict = collections.defaultdict(collections.Counter)
    failures = []
    for i in range(args.count):
        if args.minutes is not None and time.time() - start > args.minutes * 60:
            break
        rng = np.random.default_rng([args.seed, i])
        op = None if args.op == "any" else args.op
        spec = random_spec(rng, op=op, max_depth=args.max_depth, n_range=(lo, hi))
        try:
            rec = recover(spec, (lo, hi), box=args.box, seed=i, fit_work=args.fit_work)
        except Exception as e:     # the replica could not be built or run: the compiler's, not inference's
            print(f"case {i}: skipped (the {args.box} replica failed: {type(e).__name__}: "
                  f"{str(e).splitlines()[0][:120] if str(e) else ''})", flush=True)
            tally["skipped"] += 1
            continue
        k = depth(spec)
        tally[rec.verdict] += 1
        by_depth[k][rec.verdict] += 1
        print(f"case {i}: depth {k}, {rec.text()}, {rec.calls} calls", flush=True)
        if rec.verdict != "recovered":
            failures.append((i, spec, rec))
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
    for i, spec, rec in failures:
        verdict = rec.verdict

        def still_fails(s, verdict=verdict, i=i):
            try:
                return recover(s, (lo, hi), box=args.box, seed=i, fit_work=args.fit_work).verdict == verdict
            except Exception:
                return False
        small_spec = shrink(spec, still_fails, max_tries=args.shrink) if args.shrink else spec
        print(f"\n--- case {i}: {verdict}: {rec.detail}\n{small_spec}")
    return 1 if tally["wrong"] else 0


if __name__ == "__main__":
    sys.exit(main())
