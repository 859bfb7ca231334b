"""The argument checks of every replica's public functions, NumPy, Numba and
Triton alike (embedded like the rest of fpspec.compile.runtime; a Triton
replica checks a torch tensor's dtype itself and passes anything else here).

Globals the template defines: _NAME (the spec's name), N_MIN, N_MAX (its
range of n), _IN_DTYPE and _IN_NAME (the input dtype and format), _IN_GRID
((precision, emin, emax) of an input format without a NumPy dtype, else
None; the replica embeds `round_value` then), _ROWS and _COLS (the output
shapes a gemv / gemm replica takes).
"""
import numpy as np

from fpspec.arith.fused import round_value

_NAME = "spec"
N_MIN, N_MAX = 1, None
_IN_DTYPE = np.float32
_IN_NAME = "fp32"
_IN_GRID = None
_IN_B = None   # (format, grid) of b where fused nodes take two input formats (FusedParams.input_b)
# output rows and columns a gemv / gemm replica takes: (lo, hi) intervals (hi None: no bound), None: any
# (fpspec.spec.shapes: the spec's `shapes` section, else the shape it was revealed at)
_ROWS = None
_COLS = None


def _input(x, what, b=False):
    """x as an array of the spec's input dtype (no silent conversion); b: the second operand."""
    in_name, in_grid = _IN_B if b and _IN_B is not None else (_IN_NAME, _IN_GRID)
    if isinstance(x, np.ma.MaskedArray):     # its mask would be ignored: every element counts here
        raise TypeError(f"{what} is a masked array; this replica of {_NAME} adds every element "
                        f"(pass {what}.filled(0) or {what}.compressed() to say which)")
    if isinstance(x, np.generic):            # np.float32(3): a scalar is not a vector of one
        raise TypeError(f"{what} is a NumPy {type(x).__name__} scalar, but this replica of {_NAME} takes arrays "
                        f"of dtype {np.dtype(_IN_DTYPE).name}: pass np.atleast_1d({what}) for one element")
    if not isinstance(x, np.ndarray):
        raise TypeError(f"{what} is a {type(x).__name__}, but this replica of {_NAME} takes NumPy arrays of "
                        f"dtype {np.dtype(_IN_DTYPE).name} (input format {_IN_NAME}): convert it with "
                        f"np.asarray({what}, np.{np.dtype(_IN_DTYPE).name}) if rounding it is what you mean")
    if not x.dtype.isnative:                 # '>f4' is a float32 in the other byte order
        x = x.astype(x.dtype.newbyteorder("="))
    # formats without a numpy dtype (bf16, tf32, fp8) travel in float32 or float64
    if x.dtype != _IN_DTYPE and not (_IN_GRID is not None and x.dtype == np.float64):
        raise TypeError(f"{what} has dtype {x.dtype}, but this replica of {_NAME} takes "
                        f"{np.dtype(_IN_DTYPE).name} arrays (input format {_IN_NAME})")
    if in_grid is not None:
        finite = x[np.isfinite(x)].astype(np.float64)
        if not np.array_equal(round_value(finite, *in_grid, "rne"), finite):
            raise ValueError(f"{what} holds values that are not {in_name} values")
    return x


def _length(n, what):
    if n < N_MIN or (N_MAX is not None and n > N_MAX):
        raise ValueError(f"{what} has length {n}, outside the range n in {N_MIN}..{'' if N_MAX is None else N_MAX} "
                         f"this replica of {_NAME} is valid for")
    return n


def _shape(what, arr, ndim):
    if arr.ndim != ndim:
        raise ValueError(f"{what} must have {ndim} dimension(s), got shape {arr.shape}")



def _fits(size, sizes):
    """Whether `size` is one of `sizes` ((lo, hi) intervals, hi None: no bound; None: any)."""
    return sizes is None or any(lo <= size and (hi is None or size <= hi) for lo, hi in sizes)


def _said(sizes):
    """'4', '4, 8 or 16..64', 'any'."""
    if sizes is None:
        return "any"
    parts = [str(lo) if lo == hi else f"{lo}..{'' if hi is None else hi}" for lo, hi in sizes]
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " or " + parts[-1]


def _outputs(rows, cols=None):
    """ValueError unless a gemv's rows (a gemm's rows x cols) are an output shape the spec
    covers: a library may compute other shapes with other kernels, in other orders."""
    covered = (f"{_said(_ROWS)} rows only" if cols is None else
               f"{_said(_ROWS)} x {_said(_COLS)} outputs only (A with {_said(_ROWS)} rows, B with {_said(_COLS)} "
               "columns)")
    how = ("other shapes may take other orders: reveal the target at this shape, or where the order is known to "
           "hold, say so in the spec's `shapes { m = ... }` (docs/fps.md)")
    if not _fits(rows, _ROWS):
        raise ValueError(f"A has {rows} rows, but this replica of {_NAME} covers {covered}; {how}")
    if cols is not None and not _fits(cols, _COLS):
        raise ValueError(f"B has {cols} columns, but this replica of {_NAME} covers {covered}; {how}")


def _operands(op, a, b):
    """The reduction length n of dot(x, y), gemv(A, x) or gemm(A, B), after a ValueError where
    the operands do not fit each other, the spec's range of n or its output shapes."""
    if op == "dot":
        if a.shape != b.shape:
            raise ValueError(f"dot: x has {a.shape[0]} elements, y has {b.shape[0]}")
        return _length(a.shape[0], "x")
    if a.shape[1] != b.shape[0]:
        other = f"x has {b.shape[0]} elements" if op == "gemv" else f"B is {b.shape[0]}x{b.shape[1]}"
        raise ValueError(f"{op}: A is {a.shape[0]}x{a.shape[1]} but {other}")
    if op == "gemv":
        _outputs(a.shape[0])
        return _length(b.shape[0], "x")
    _outputs(a.shape[0], b.shape[1])
    return _length(a.shape[1], "A")
