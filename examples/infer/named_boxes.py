"""Black boxes whose orders range inference was tried on (examples/infer/make_named.sh).

Each is a user callable for `fpspec reveal named_boxes:NAME --op OP -n LO..HI`
(run with examples/infer on PYTHONPATH).  They take and return NumPy arrays.
"""
from __future__ import annotations

import numpy as np


def einsum_sum(x):
    """np.einsum("i->", x): the einsum sum-of-products kernel, not np.add.reduce."""
    return np.einsum("i->", x)


def einsum_dot(x, y):
    """np.einsum("i,i->", x, y): einsum's two-operand contiguous kernel."""
    return np.einsum("i,i->", x, y)


def add_reduce_where(x):
    """np.add.reduce with where= and out=: the masked reduction loop."""
    out = np.zeros((), dtype=x.dtype)
    return np.add.reduce(x, where=np.ones(x.shape, dtype=bool), out=out)


def torch_sum_strided(x):
    """torch.sum over a non-contiguous view (every other element of a buffer twice as long)."""
    import torch

    buf = torch.zeros(2 * x.shape[0], dtype=torch.from_numpy(x[:1]).dtype)
    buf[::2] = torch.from_numpy(x)
    return torch.sum(buf[::2]).numpy()


def compensated_pairwise(x):
    """Pairwise sum whose every addition is error-free (TwoSum) with the errors
    summed apart and added at the end: no Kahan loop, but compensated."""
    vals = [np.float64(v) for v in np.asarray(x, dtype=np.float64)]
    errs = []

    def two_sum(a, b):
        s = a + b
        bb = s - a
        errs.append((a - (s - bb)) + (b - bb))
        return s

    def rec(lo, hi):
        if hi - lo == 1:
            return vals[lo]
        mid = (lo + hi) // 2
        return two_sum(rec(lo, mid), rec(mid, hi))

    s = rec(0, len(vals))
    return np.asarray(s + sum(errs), dtype=x.dtype)
