"""FTTN's simple matrix-multiplication test (seed 004, Section V), through the exact model.

D = C - A B with 2^13 x 2^13 matrices: C = 2^20 everywhere; row i of A is
2^10, then -2^-2 at odd k and -2^-3 at even k > 0; column j of B is 2^10,
then 2^-3.  So every D_ij = 2^20 - (2^20 - 2^12 * 2^-5 - (2^12 - 1) * 2^-6)
= 2^7 + 2^6 - 2^-6 = 191.984375 exactly (the paper prints 191.99218 for
the same expression, a slip).

A B runs on the Tensor Cores as a chain of fused nodes from 0 (each node's
result is the next node's c); then D = C - A B is one fp32 subtraction.  Every
D_ij is the same, so one row of A and one column of B give the whole answer:
8192 products, not 8192^3.  The paper measured 0 on V100 and A100 and 191.875
on H100; the published parameters give exactly that:

    $ python examples/gpu/fttn_simple_test.py
    exact: D = 191.984375
    v100-fp16  w= 4 extra bits 0   A B = 1048576.0        D = 0.0
    a100-fp16  w= 8 extra bits 1   A B = 1048576.0        D = 0.0
    ada-fp16   w= 8 extra bits 1   A B = 1048576.0        D = 0.0
    h100-fp16  w=16 extra bits 2   A B = 1048384.125      D = 191.875
    b200-fp16  w=16 extra bits 2   A B = 1048384.125      D = 191.875

Why: the first node holds 2^20 and 15 small products.  Without extra bits
(V100) or with one (A100, grid 2^-4), -2^-5 and -2^-6 are truncated away,
the partial sum stays 2^20 and every later node truncates its small products
the same way: A B = 2^20.  With two extra bits (H100, grid 2^-5) the eight
-2^-5 survive and the seven -2^-6 of the first node do not: the partial sum
drops to 2^20 - 1/4, below 2^20, where the grid is fine enough for every later
product.  So D = 191.984375 - 7 * 2^-6 = 191.875.
"""
from __future__ import annotations

import numpy as np

from fpspec.arith import PARAMS, fused_chain

K = 2 ** 13


def fttn_row_and_column():
    """One row of A and one column of B (all rows and columns are the same)."""
    a = np.empty(K)
    a[0] = 2.0 ** 10
    a[1::2] = -(2.0 ** -2)
    a[2::2] = -(2.0 ** -3)
    b = np.full(K, 2.0 ** -3)
    b[0] = 2.0 ** 10
    return a, b


def fttn_d(params: str) -> tuple[float, float]:
    """(D_ij, (A B)_ij) under a named parameter set: A B on the Tensor Cores, then C - A B in fp32."""
    a, b = fttn_row_and_column()
    ab = fused_chain(a[None, :], b[None, :], np.zeros(1), params)[0]
    return float(np.float32(2.0 ** 20) - np.float32(ab)), float(ab)


def main() -> None:
    a, b = fttn_row_and_column()
    print(f"exact: D = {2.0 ** 20 - float(np.dot(a, b))}")
    for name in ("v100-fp16", "a100-fp16", "ada-fp16", "h100-fp16", "b200-fp16"):
        p = PARAMS[name]
        d, ab = fttn_d(name)
        print(f"{name:10s} w={p.w:2d} extra bits {p.extra_bits}   A B = {ab!r:<16} D = {d!r}")


if __name__ == "__main__":
    main()
