#!/usr/bin/env python3
"""Revealing a collective's order: `fpspec reveal torch.distributed.all_reduce` at several
buffer sizes, timed from the command's start to its end (process start-up included),
with the collective's own time in the same run beside it.

    python benchmarks/bench_collective.py --backend nccl --world 4 [--numel 1024,...] [--dtype float32]
    python benchmarks/bench_collective.py --backend gloo --world 8 [-o 'ar_{numel}.fps']

Per size: the orders found, the collective calls and FPRev queries (one per element and
pair of ranks), the seconds spent inside the collective's calls (the reference: the
library's own work on those inputs, transfers to and from the ranks included) and the
whole reveal of that size (queries, grouping, trees, bit checks), and their ratio.  The
last lines: the start-up of the W ranks and the wall time of the whole command against
the 60 s budget for five sizes.
"""
import argparse
import json
import os
import subprocess
import sys
import time

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
SIZES = (1024, 16384, 262144, 1048576, 4194304)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--backend", default="gloo")
    ap.add_argument("--world", type=int, default=4)
    ap.add_argument("--numel", default=",".join(map(str, SIZES)))
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--op", default="all_reduce")
    ap.add_argument("-o", dest="output", default=None, help="also write the specs (a path with {numel})")
    args = ap.parse_args()
    sizes = [int(x) for x in args.numel.split(",")]
    cmd = [sys.executable, "-m", "fpspec.cli", "reveal", f"torch.distributed.{args.op}", "--world", str(args.world),
           "--backend", args.backend, "--dtype", args.dtype, "--json"]
    for L in sizes:
        cmd += ["--numel", str(L)]
    if args.output:
        cmd += ["-o", args.output]
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    t0 = time.perf_counter()
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if done.returncode != 0:
        print(done.stderr.strip(), file=sys.stderr)
        return done.returncode
    result = json.loads(done.stdout)
    print(f"fpspec reveal torch.distributed.{args.op}: {args.world} {args.backend} ranks, {args.dtype}")
    print(f"{'numel':>9} {'orders':>6} {'calls':>5} {'queries':>10} {'collective s':>12} {'reveal s':>9} "
          f"{'ratio':>6}")
    for row in result["sizes"]:
        ratio = row["seconds"] / row["call_seconds"] if row["call_seconds"] else float("nan")
        print(f"{row['numel']:>9} {len(row['orders']):>6} {row['calls']:>5} {row['queries']:>10} "
              f"{row['call_seconds']:>12.3f} {row['seconds']:>9.3f} {ratio:>6.2f}")
    calls = sum(r["calls"] for r in result["sizes"])
    queries = sum(r["queries"] for r in result["sizes"])
    inside = sum(r["call_seconds"] for r in result["sizes"])
    print(f"{'all':>9} {'':>6} {calls:>5} {queries:>10} {inside:>12.3f} "
          f"{sum(r['seconds'] for r in result['sizes']):>9.3f}")
    print(f"start-up of {args.world} ranks: {result['start_seconds']:.1f} s; whole command "
          f"(python, imports, start-up, {len(sizes)} sizes, exit): {wall:.1f} s "
          f"({'within' if wall < 60 else 'over'} the 60 s budget)")
    for row in result["sizes"]:
        print(f"  numel {row['numel']}: " + "; ".join(f"{o['tree']} x {o['elements']} (from {o['first']})"
                                                    for o in row["orders"][:8])
              + (f"; ... ({len(row['orders'])} orders)" if len(row["orders"]) > 8 else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
