"""The orders of torch.dot and torch.mv (float32, CPU) over a range of n, checked
against the revealed trees; neither can be written in .fps today, and this
says what each one lacks.

    python benchmarks/torch_cpu_orders.py -n 2..200

torch.dot: 16 lanes (4 vector accumulators of 4 lanes), the first n - n % 16
terms 16 at a time; then, of the n % 16 leftovers, a vector of 8 to lanes
0..7 when at least 8 are left, a vector of 4 to lanes 0..3 when at least 4
are left, and the last n % 4 one by one on lane 0; lane j's sums are added
in sequence within lane j % 4 (accumulators 0, 1, 2, 3), and those four
combined as gpu_tree.  For n % 16 in {0, 4, 8} this is
lanes(4, lanes(4, seq, seq), gpu_tree); for the others the leftovers go by
narrowing vector widths, which no lanes, vlanes, tail or pad form gives
(lanes gives the first n % K lanes one more operand each; LEFT takes the
leftovers after lane 0's whole result, not inside its chain).

torch.mv (m = 4, any row): the first p = (n - 1) % 4 + 1 terms added in
sequence into lane 0, then 4 lanes over the other n - p terms (a multiple
of 4), each added in sequence, the lanes combined as gpu_tree.  With a
`peel(P, FIRST, ORDER)` -- ORDER over [FIRST(o[0..P-1]), o[P], ..., o[n-1]] --
it would be peel((n - 1) % 4 + 1, seq, pad(4, lanes(4, seq, gpu_tree))):
chunks cannot give a first chunk of p and single operands after it (its
size is read at the operands left, and those take every residue mod 4).
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fpspec.reveal.engine import reveal  # noqa: E402
from fpspec.reveal.targets import resolve_target  # noqa: E402
from fpspec.spec import parse  # noqa: E402
from fpspec.spec.expand import apply_order  # noqa: E402
from fpspec.tree import observable, sequential  # noqa: E402


def _gpu_tree(parts: list):
    return apply_order(parse("n in 1..\norder gpu_tree\n").order, parts)


def dot_model(n: int):
    """torch.dot's tree at n (module docstring)."""
    lanes: list[list[int]] = [[] for _ in range(16)]
    i = 0
    while i + 16 <= n:
        for j in range(16):
            lanes[j].append(i + j)
        i += 16
    for width in (8, 4):
        if i + width <= n:
            for j in range(width):
                lanes[j].append(i + j)
            i += width
    lanes[0].extend(range(i, n))
    groups = []
    for r in range(4):
        sums = [sequential(lanes[4 * v + r]) for v in range(4) if lanes[4 * v + r]]
        if sums:
            groups.append(sequential(sums))
    return _gpu_tree(groups)


def mv_model(n: int):
    """torch.mv's tree at n for every row (module docstring)."""
    p = (n - 1) % 4 + 1
    lanes = [list(range(p))] + [[] for _ in range(3)]
    for i in range(p, n):
        lanes[(i - p) % 4].append(i)
    return _gpu_tree([sequential(lane) for lane in lanes if lane])


def peel_check(n: int, tree) -> bool:
    """Does peel((n - 1) % 4 + 1, seq, pad(4, lanes(4, seq, gpu_tree))), built from the orders
    the language has, give the tree?"""
    p = (n - 1) % 4 + 1
    order = parse("n in 1..\norder pad(4, lanes(4, seq, gpu_tree))\n").order
    return observable(apply_order(order, [sequential(range(p))] + list(range(p, n)))) == tree


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", default="2..200", help="range LO..HI of n checked")
    args = ap.parse_args(argv)
    lo, hi = (int(x) for x in args.n.split(".."))
    ns = range(max(lo, 2), hi + 1)
    print(f"{'target':<10} {'n':>9} {'agree':>7} {'seconds':>8}  model")
    for name, op, kw, model, extra in (("torch.dot", "dot", {}, dot_model, None),
                                       ("torch.mv", "gemv", {"m": 4}, mv_model, peel_check)):
        start = time.perf_counter()
        agree, bad, peeled = 0, [], 0
        for n in ns:
            tree = observable(reveal(resolve_target(name, n=n, op=op, dtype="float32", **kw), seed=0).tree)
            if observable(model(n)) == tree:
                agree += 1
            else:
                bad.append(n)
            peeled += bool(extra and extra(n, tree))
        line = f"{name:<10} {f'{ns.start}..{ns.stop - 1}':>9} {agree:>3}/{len(ns):<3} {time.perf_counter() - start:8.1f}"
        print(line + (f"  differs at {bad[:10]}" if bad else "  the model gives every revealed tree"))
        if extra:
            print(f"{'':<10} {'':>9} {peeled:>3}/{len(ns):<3} {'':>8}  as peel((n - 1) % 4 + 1, seq, "
                  "pad(4, lanes(4, seq, gpu_tree)))")
    return 0


if __name__ == "__main__":
    sys.exit(main())
