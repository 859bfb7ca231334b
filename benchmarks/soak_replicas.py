"""Soak the compilers: thousands of random specs, each compiled for every backend,
run in a fresh interpreter and compared bit for bit with the spec's reference
evaluation (and, for small n, the replica's revealed tree with the spec's).

    python benchmarks/soak_replicas.py COUNT [--seed S] [--backends numpy,numba,triton]
                                       [--batch 25] [--first 0] [--shrink 3] [--trees numpy,numba]

Every failure is printed as a minimal spec (fpspec.spec.generate.shrink, at
most --shrink failures per backend and error kind; the others are listed by
index: spec I of seed S is `random_spec(default_rng([S, I]))`); the last line
is the count: specs, per backend ok / refused / failed.  Exit code 1 when
anything failed.  Triton runs under TRITON_INTERPRET=1 unless a GPU is asked
for (TRITON_INTERPRET=0).
"""
from __future__ import annotations

import argparse
import collections
import re
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "fuzz"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import replicas as R  # noqa: E402


def signature(o) -> str:
    """An error's kind: its text without numbers and quoted names."""
    text = re.sub(r"'[^']*'|\"[^\"]*\"", "'…'", o.detail)
    return f"{o.backend}: " + re.sub(r"-?\d+(\.\d+)?(e-?\d+)?", "#", text)[:120]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("count", type=int)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--first", type=int, default=0, help="index of the first spec (to resume a run)")
    ap.add_argument("--backends", default=",".join(R.BACKENDS))
    ap.add_argument("--trees", default="numpy,numba", help="backends whose replicas also have their tree revealed")
    ap.add_argument("--batch", type=int, default=25, help="specs per fresh interpreter")
    ap.add_argument("--shrink", type=int, default=3, help="failures shrunk per backend and error kind")
    ap.add_argument("--ns", type=int, default=2, help="n values per spec (both ends of the range first)")
    args = ap.parse_args(argv)
    backends = tuple(b for b in args.backends.split(",") if b)
    trees = tuple(b for b in args.trees.split(",") if b)
    counts = {b: collections.Counter() for b in backends}
    failures = []
    t0 = time.time()
    options = dict(ns_count=args.ns, tree_backends=trees, seed=args.seed)
    with tempfile.TemporaryDirectory(prefix="fpspec-soak-") as tmp:
        for start in range(args.first, args.first + args.count, args.batch):
            stop = min(start + args.batch, args.first + args.count)
            specs = [(i, R.spec_at(args.seed, i)) for i in range(start, stop)]
            folder = Path(tmp) / f"batch{start}"
            for o in R.fuzz(specs, backends, folder, **options):
                counts[o.backend][o.status] += 1
                if o.status == "failed":
                    failures.append(o)
                    print(f"FAILED spec {o.index} ({o.backend}): {o.detail}", flush=True)
            done = stop - args.first
            line = "  ".join(f"{b} {c['ok']}/{c['refused']}/{c['failed']}" for b, c in counts.items())
            print(f"[{done}/{args.count} specs, {time.time() - t0:.0f} s] ok/refused/failed: {line}", flush=True)
        shrunk = collections.Counter()
        for o in failures:
            sig = signature(o)
            if shrunk[sig] >= args.shrink:
                continue
            shrunk[sig] += 1
            spec = R.spec_at(args.seed, o.index)
            from fpspec.spec.generate import shrink

            small = shrink(spec, R.still_fails(o.backend, **options), max_tries=60)
            (last,) = R.fuzz([(o.index, small)], (o.backend,), **options)
            print(f"\n=== minimal failing spec (spec {o.index} of seed {args.seed}, {o.backend}): "
                  f"{last.detail or o.detail}\n{small}", flush=True)
    print()
    line = "  ".join(f"{b}: {c['ok']} ok, {c['refused']} refused, {c['failed']} failed" for b, c in counts.items())
    print(f"{args.count} random specs (seed {args.seed}, first {args.first}), {time.time() - t0:.0f} s; {line}; "
          f"{len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
