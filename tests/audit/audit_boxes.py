"""Synthetic black boxes whose accumulation order switches at known batch sizes.

Each takes numpy arrays like numpy.matmul / numpy.sum and sums in float32, in
an order chosen from the batch M (rows of A) through thresholds, as a library
choosing a kernel from the shape does.
"""
import numpy as np

THRESHOLDS = (37, 1000)


def _fold(P):
    acc = P[..., 0]
    for k in range(1, P.shape[-1]):
        acc = acc + P[..., k]
    return acc


def _reduce(P, M):
    """Sum the last axis of float32 terms P in the order batch M picks."""
    K = P.shape[-1]
    if M < THRESHOLDS[0]:
        return _fold(P)                                           # one chain
    if M < THRESHOLDS[1]:
        return _fold(np.stack([_fold(P[..., b:b + 4]) for b in range(0, K, 4)], -1))   # blocks of 4
    return _fold(np.stack([_fold(P[..., i::4]) for i in range(4)], -1))              # 4 strided lanes


def switching_gemm(A, B):
    A = np.asarray(A, np.float32)
    B = np.asarray(B, np.float32)
    P = A[:, None, :] * B.T[None, :, :]        # (M, N, K) float32 products (rounded)
    return _reduce(P, A.shape[0])


def switching_sum_rows(X):
    """Row sums of an [M, n] array, the order picked by M."""
    X = np.asarray(X, np.float32)
    return _reduce(X, X.shape[0])


def returning_gemm(A, B):
    """One chain below M = 37 and from M = 1000 on, blocks of 4 between (a class that comes back)."""
    A = np.asarray(A, np.float32)
    B = np.asarray(B, np.float32)
    P = A[:, None, :] * B.T[None, :, :]
    M = A.shape[0]
    return _reduce(P, 1 if M >= THRESHOLDS[1] else M)


def widening_gemm(A, B):
    """One chain of float32 products at every M, added in float32 below M = 37 and in
    float64 (rounded to float32 once, at the end) from M = 37 on."""
    A = np.asarray(A, np.float32)
    B = np.asarray(B, np.float32)
    P = A[:, None, :] * B.T[None, :, :]
    if A.shape[0] < THRESHOLDS[0]:
        return _fold(P)
    return _fold(P.astype(np.float64)).astype(np.float32)


def invariant_gemm(A, B):
    A = np.asarray(A, np.float32)
    B = np.asarray(B, np.float32)
    return _fold(A[:, None, :] * B.T[None, :, :])


def tail_rows_gemm(A, B):
    """Rows past the last full group of 4 sum in reverse (a GEMV's leftover rows)."""
    A = np.asarray(A, np.float32)
    B = np.asarray(B, np.float32)
    P = A[:, None, :] * B.T[None, :, :]
    out = _fold(P)
    full = A.shape[0] - A.shape[0] % 4
    if full < A.shape[0]:
        out[full:] = _fold(P[full:, :, ::-1])
    return out


def length_switch_gemm(A, B):
    """K <= 20: one chain; longer: 4 strided lanes (a kernel picked from the reduction length)."""
    A = np.asarray(A, np.float32)
    B = np.asarray(B, np.float32)
    P = A[:, None, :] * B.T[None, :, :]
    if P.shape[-1] <= 20:
        return _fold(P)
    return _fold(np.stack([_fold(P[..., i::4]) for i in range(4)], -1))


def width_switch_gemm(A, B):
    """Output width N >= 24: blocks of 4 (a kernel picked from N)."""
    A = np.asarray(A, np.float32)
    B = np.asarray(B, np.float32)
    P = A[:, None, :] * B.T[None, :, :]
    return _reduce(P, 40 if B.shape[1] >= 24 else 1)
