"""A node over a tagged value list (fpspec.compile.loops note [lone leaves]): one source that
the NumPy and the Numba replicas both embed.  It calls the backend's own `_add`, `_add_leaf`
and `_add_leaves` (a part's copies inside a `using` part: fpspec.compile.numerics.in_region),
and reads `_PHANTOM`, which a replica that joins tagged lists defines
(fpspec.compile.loops.tag_settings)."""
from __future__ import annotations

from fpspec.compile.loops import PHANTOM as _PHANTOM  # noqa: F401 (the replica defines its own)


def _join(a, b, u, tu, v, tv):
    """One node over two operands of a tagged value list (fpspec.compile.loops note
    [lone leaves]): a tag >= 0 is the leaf the operand stands for, which the node forms;
    _PHANTOM a phantom (note [phantoms]): no node, the other operand as it is (a leaf rounded alone)."""
    if tu == _PHANTOM and tv < 0:
        return v
    if tv == _PHANTOM and tu < 0:
        return u
    if tu < 0 and tv < 0:
        return _add(u, v)
    if tu < 0:
        return _add_leaf(u, a, b, tv)
    if tv < 0:
        return _add_leaf(v, a, b, tu)
    return _add_leaves(a, b, min(tu, tv), max(tu, tv))
