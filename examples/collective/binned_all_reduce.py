#!/usr/bin/env python3
"""An all-reduce whose bits depend neither on the number of ranks nor on the order
NCCL picks: reduce binned accumulators, convert once.

Each rank deposits its terms (say, the gradients of its micro-batches) into one binned
accumulator per element (fpspec.arith.binned: ReproBLAS's indexed type, an exact sum of
slices in fixed bins), the ranks exchange the accumulators (2 K floats per element:
`Binned.to_array`, an all_gather), and every rank merges the W accumulators, in any
order, and converts once.  Merging is exact, so the result is the same bits for every
split of the terms over ranks, every merge order and every element position.

    python examples/collective/binned_all_reduce.py [--numel 1024] [--fold 3]

It prints, for float32 terms with a wide exponent range: the plain float32 all-reduce
in NCCL's orders on 4 H200s (the replicas of examples/collective/nccl_h200/: default
and deterministic settings) and over 2, 4 and 8 ranks (the terms split differently),
how many elements change bits between them; then the binned recipe over 1, 2, 4 and 8
ranks, merged in rank order, in reverse and as a tree, against the binned sum of all
terms in one process: no element differs.

With torch.distributed the exchange is one all_gather of the [L, 2 K] fields:

    fields = torch.from_numpy(np.stack([a.to_array() for a in mine]))
    gathered = [torch.empty_like(fields) for _ in range(world)]
    dist.all_gather(gathered, fields)
    accs = [[Binned.from_array(f, "fp32", fold) for f in g.numpy()] for g in gathered]
"""
import argparse
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))

from fpspec.arith.binned import Binned  # noqa: E402
from fpspec.compile import compile_spec, load_replica  # noqa: E402
from fpspec.reveal.collective import ring_all_reduce  # noqa: E402
from fpspec.spec import load  # noqa: E402


def rank_accumulators(terms, fold):
    """One rank's accumulators: terms is [t, L] (its t contributions to each of L elements)."""
    return [Binned.empty("fp32", fold).deposit(terms[:, e]) for e in range(terms.shape[1])]


def merge(accs_by_rank, order):
    """Element by element, the ranks' accumulators merged in `order` (a list of ranks), converted once."""
    out = np.empty(len(accs_by_rank[0]), np.float32)
    for e in range(len(out)):
        acc = accs_by_rank[order[0]][e]
        for r in order[1:]:
            acc = acc + accs_by_rank[r][e]
        out[e] = acc.to_float()
    return out


def tree_merge(accs_by_rank):
    """Pairwise: (r0 + r1) + (r2 + r3) ..., element by element."""
    level = list(accs_by_rank)
    while len(level) > 1:
        level = [[a + b for a, b in zip(level[k], level[k + 1])] if k + 1 < len(level) else level[k]
                 for k in range(0, len(level), 2)]
    return np.array([a.to_float() for a in level[0]], np.float32)


def over_the_wire(accs):
    """What all_gather carries and what a receiving rank rebuilds (ReproBLAS's float_binned layout)."""
    fields = np.stack([a.to_array() for a in accs])            # [L, 2 K] float32
    fold = accs[0].fold
    return [Binned.from_array(f, "fp32", fold) for f in fields]


def differing(a, b) -> int:
    return int(np.sum(np.asarray(a, np.float32).view(np.uint32) != np.asarray(b, np.float32).view(np.uint32)))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--numel", type=int, default=1024, help="elements (the NCCL specs of 1024 elements are used)")
    ap.add_argument("--fold", type=int, default=3)
    ap.add_argument("--terms", type=int, default=8, help="contributions per element (micro-batches)")
    args = ap.parse_args()
    L, P = args.numel, args.terms
    rng = np.random.default_rng(0)
    # gradients of P micro-batches: signs mixed, magnitudes over 2^-20 .. 2^20
    terms = (rng.standard_normal((P, L)) * 2.0 ** rng.integers(-20, 21, (P, L))).astype(np.float32)

    print(f"{P} float32 terms per element, {L} elements")
    print("plain float32 all-reduce (each rank first sums its own terms in order):")
    results = {}
    for W in (2, 4, 8):
        per_rank = terms.reshape(W, P // W, L).sum(axis=1, dtype=np.float32)
        results[f"ring over {W} ranks"] = ring_all_reduce(W, L)(per_rank)
        if W == 4 and L == 1024:
            for setting in ("default", "deterministic"):
                spec = load(HERE / "nccl_h200" / f"nccl_{setting}_1024.fps")
                replica = load_replica(compile_spec(spec, target="numpy"), f"nccl {setting}")
                results[f"NCCL {setting} (4 H200s)"] = replica.sums(per_rank)
    names = list(results)
    for k, a in enumerate(names):
        for b in names[k + 1:]:
            print(f"  {a} vs {b}: {differing(results[a], results[b])} of {L} elements differ")

    print(f"binned (fold {args.fold}): deposit, exchange (to_array / from_array), merge, convert once:")
    reference = np.array([Binned.empty("fp32", args.fold).deposit(terms[:, e]).to_float() for e in range(L)],
                         np.float32)
    worst = 0
    for W in (1, 2, 4, 8):
        mine = [rank_accumulators(part, args.fold) for part in np.split(terms, W)]
        received = [over_the_wire(accs) for accs in mine]
        for how, out in ((f"ranks in order 0..{W - 1}", merge(received, list(range(W)))),
                         ("ranks in reverse", merge(received, list(range(W))[::-1])),
                         ("as a tree", tree_merge(received))):
            d = differing(out, reference)
            worst = max(worst, d)
            print(f"  {W} rank(s), merged {how:<22}: {d} of {L} elements differ from the one-process binned sum")
    print("same bits everywhere" if worst == 0 else "DIFFERENT BITS")
    return 0 if worst == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
