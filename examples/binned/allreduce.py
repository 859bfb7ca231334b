"""An order-independent all-reduce: every worker sums its own piece into a binned accumulator, the
pieces travel as ReproBLAS's double_binned arrays (2 * fold doubles), and the merge gives the same
bits however the data was split, in whatever order the pieces arrive.

    python examples/binned/allreduce.py

With MPI the same three calls do the work: `acc.to_array()` on each rank, an allgather (or a
reduction with a user operation that merges), `Binned.from_array(...)` and `+` on the receiver.
"""
from concurrent.futures import ProcessPoolExecutor

import numpy as np

from fpspec.arith.binned import Binned


def partial(piece: np.ndarray) -> np.ndarray:
    """One worker: its piece deposited, sent as 2 * fold doubles."""
    return Binned.empty("fp64", fold=3).deposit(piece).to_array()


def allreduce(pieces) -> np.float64:
    with ProcessPoolExecutor(max_workers=4) as pool:
        arrays = list(pool.map(partial, pieces))
    total = Binned.empty("fp64", fold=3)
    for a in arrays:
        total = total + Binned.from_array(a, "fp64", 3)
    return total.to_float()


if __name__ == "__main__":
    rng = np.random.default_rng(0)
    x = rng.standard_normal(1_000_000) * 2.0 ** rng.integers(-40, 40, 1_000_000)
    results = set()
    for workers in (1, 3, 7, 16):
        perm = rng.permutation(x.size)                   # a different order every time
        cuts = np.sort(rng.choice(x.size, workers - 1, replace=False))
        value = allreduce(np.split(x[perm], cuts))
        results.add(value.tobytes())
        print(f"{workers:>2} pieces: {value!r}  (math.fsum: {__import__('math').fsum(x)!r}, "
              f"np.sum of the permuted data: {np.sum(x[perm])!r})")
    print("the same bits every time" if len(results) == 1 else "DIFFERENT BITS")
