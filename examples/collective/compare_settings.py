#!/usr/bin/env python3
"""Which NCCL settings give a fixed order, and is it the same across buffer sizes?

    python examples/collective/compare_settings.py examples/collective/nccl [--backend nccl]

Reads the specs <backend>_<setting>_<numel>.fps of a folder (run_nccl.sh writes them) and
prints, per buffer size, the orders of each setting and the element-by-element diff of
every pair of settings; then, per setting, each size against the smallest one (over the
elements both cover: does an element keep its order when the buffer grows?).
"""
import argparse
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from fpspec.collective import diff_collective, spec_orders  # noqa: E402
from fpspec.spec import load  # noqa: E402
from fpspec.tree import format_tree  # noqa: E402


def orders_text(spec) -> str:
    trees, labels = spec_orders(spec)
    counts = [int((labels == k).sum()) for k in range(len(trees))]
    shown = "; ".join(f"{format_tree(t)} x {c}" for t, c in list(zip(trees, counts))[:4])
    return f"{len(trees)} order(s): {shown}" + ("; ..." if len(trees) > 4 else "")


def differing(report) -> str:
    note = next(x for x in report.notes if "elements take another order" in x)
    count, total = re.match(r"(\d+) of (\d+)", note).groups()
    return "same order at every element" if count == "0" else f"{count} of {total} elements differ"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("folder")
    ap.add_argument("--backend", default="nccl")
    args = ap.parse_args()
    found: dict = {}
    for p in sorted(Path(args.folder).glob(f"{args.backend}_*_*.fps")):
        m = re.fullmatch(rf"{args.backend}_([a-z]+)_(\d+)\.fps", p.name)
        if m:
            found.setdefault(m.group(1), {})[int(m.group(2))] = load(p)
    settings = [s for s in ("default", "deterministic", "ring") if s in found] + \
        sorted(set(found) - {"default", "deterministic", "ring"})
    sizes = sorted({L for s in found.values() for L in s})
    for L in sizes:
        print(f"numel {L}")
        for s in settings:
            if L in found[s]:
                print(f"  {s:<14} {orders_text(found[s][L])}")
        for k, a in enumerate(settings):
            for b in settings[k + 1:]:
                if L in found[a] and L in found[b]:
                    r = diff_collective(a, b, {a: found[a][L], b: found[b][L]})
                    print(f"  {a} vs {b}: {differing(r)}")
    print("across sizes (each against the smallest, on the elements both cover)")
    for s in settings:
        ls = sorted(found[s])
        for L in ls[1:]:
            r = diff_collective(str(ls[0]), str(L), {str(ls[0]): found[s][ls[0]], str(L): found[s][L]})
            print(f"  {s:<14} {ls[0]} vs {L}: {differing(r)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
