"""NumPy runtime of binned replicas (embedded): the public functions over fpspec.arith.binned's
`sum_rows`, which the replica embeds too.  Globals: _DT, _FOLD, _FMT (a BinnedFormat), _NAME."""
import numpy as np

_DT = np.float64
_FOLD = 3
_FMT = None
_NAME = "spec"


def _checked(x, what, ndim):
    """x as an array of the replica's format (no silent conversion), of `ndim` dimensions."""
    x = np.asarray(x)
    if x.dtype != _DT:
        raise TypeError(f"{what} has dtype {x.dtype}, but this replica of {_NAME} takes "
                        f"{np.dtype(_DT).name} arrays")
    if x.ndim != ndim:
        raise ValueError(f"{what} must have {ndim} dimension(s), got shape {x.shape}")
    return x


def api_sum(x):
    """The binned sum of the 1-D array x (every order and split: the same bits)."""
    x = _checked(x, "x", 1)
    return sum_rows(x[None, :], _FOLD, _FMT)[0]


def api_sums(X):
    """The binned sum of every column of X."""
    X = _checked(X, "X", 2)
    return sum_rows(X.T, _FOLD, _FMT)


def api_dot(x, y):
    """The binned sum of the products x[k] * y[k], each rounded to the format."""
    x, y = _checked(x, "x", 1), _checked(y, "y", 1)
    if x.shape != y.shape:
        raise ValueError(f"dot: x has {x.shape[0]} elements, y has {y.shape[0]}")
    with np.errstate(all="ignore"):
        return sum_rows((x * y)[None, :], _FOLD, _FMT)[0]


def api_gemv(A, x):
    """A @ x, every output element a binned dot product."""
    A, x = _checked(A, "A", 2), _checked(x, "x", 1)
    if A.shape[1] != x.shape[0]:
        raise ValueError(f"gemv: A is {A.shape[0]}x{A.shape[1]} but x has {x.shape[0]} elements")
    with np.errstate(all="ignore"):
        return sum_rows(A * x[None, :], _FOLD, _FMT)


def api_gemm(A, B):
    """A @ B, every output element a binned dot product."""
    A, B = _checked(A, "A", 2), _checked(B, "B", 2)
    if A.shape[1] != B.shape[0]:
        raise ValueError(f"gemm: A is {A.shape[0]}x{A.shape[1]} but B is {B.shape[0]}x{B.shape[1]}")
    out = np.empty((A.shape[0], B.shape[1]), _DT)
    with np.errstate(all="ignore"):
        for i in range(A.shape[0]):
            out[i] = sum_rows(A[i][None, :] * B.T, _FOLD, _FMT)
    return out
