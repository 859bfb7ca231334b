"""CPU check of direction 1: truncating an fp16 product p onto the node's grid
U = 2^(e_max - 25) with ONE fp32 add rounding toward zero, S = rz(|p| + M), M = 2^23 U.

    python benchmarks/triton/magic_add_check.py [N]

For N random fp16 pairs over the whole format (subnormals included) and every e_max from
the product's exponent sum up to 40 above it, checks (numpy, exactly: the sum in fp64,
rz to fp32 by truncating the significand):
  1. S - M == floor(|p| / U) * U      (the truncation itself: exact for every product);
  2. bits(S) - bits(M) == floor(|p| / U)   (the integer without a conversion: only
     while |p| < 2^23 U, i.e. products at least 3 binades below e_max).
Prints the counts; the largest product of a node lies in [2^25 U, 2^27 U), so 2. fails for
it in every node (benchmarks/results/triton_replica_h100_h200_2026-11-26/README.md).
"""
import sys

import numpy as np


def rz_f32(x):
    """fp64 values (exact sums) rounded toward zero to fp32 (normal range)."""
    x = np.asarray(x, np.float64)
    m, e = np.frexp(np.abs(x))                    # |x| = m 2^e, m in [0.5, 1)
    m = np.floor(m * 2.0 ** 24) / 2.0 ** 24       # 24 significant bits, truncated
    return (np.sign(x) * np.ldexp(m, e)).astype(np.float32)


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 200000
    rng = np.random.default_rng(7)
    bits = rng.integers(0, 0x7C00, (2, n)).astype(np.uint16)   # finite, nonnegative fp16
    a, b = bits.view(np.float16).astype(np.float64)
    live = (a != 0) & (b != 0)
    a, b, bits = a[live], b[live], bits[:, live]
    ea = np.maximum(bits[0] >> 10, 1).astype(np.int64) - 15
    eb = np.maximum(bits[1] >> 10, 1).astype(np.int64) - 15
    p = a * b                                                   # exact (22 bits)
    trunc_ok = bits_ok = small = small_bits_ok = total = 0
    for d in range(0, 41):                                      # e_max = ea + eb + d
        e_max = ea + eb + d
        U = np.ldexp(1.0, e_max - 25)
        M = np.ldexp(1.0, e_max - 2)
        S = rz_f32(p + M)
        t = np.floor(p / U)
        trunc_ok += int(np.sum(S.astype(np.float64) - M == t * U))
        got = S.view(np.int32).astype(np.int64) - M.astype(np.float32).view(np.int32).astype(np.int64)
        bits_ok += int(np.sum(got == t))
        below = p < 2.0 ** 23 * U
        small += int(below.sum())
        small_bits_ok += int(np.sum((got == t) & below))
        total += p.size
    print(f"{p.size} products x 41 e_max: {total} cases")
    print(f"1. rz(|p| + M) - M == trunc(|p| / U) U: {trunc_ok} of {total}")
    print(f"2. bits(S) - bits(M) == trunc(|p| / U): {bits_ok} of {total}; "
          f"of those with |p| < 2^23 U: {small_bits_ok} of {small}")


if __name__ == "__main__":
    main()
