"""Specs whose order depends on the output position: one spec per order found
(fpspec.reveal.positions), merged under an outermost `if` on the output row
`i` and column `j`.

The conditions are written from the label map of the output (which order each
element uses): rows with the same pattern of labels form groups, a label's
columns within a group are a set of columns, and each set of rows or columns
is written as the shortest of a union of intervals and a periodic pattern
(`i % 12 < 6`: OpenBLAS's micro-tiles) with intervals for what the period
leaves.  Each arm keeps its own arithmetic: the first order's is the spec's,
another one becomes an `arithmetic NAME { ... }` section and a `using`.
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from fpspec.spec import ast as A
from fpspec.spec.check import map_children
from fpspec.spec.regions import arithmetics, main_arithmetic, override_entries, section_for, using_names

_I, _J = A.Var("i"), A.Var("j")


def uses_position(c) -> bool:
    """Whether a condition or expression mentions the output row i or column j."""
    if isinstance(c, A.Var):
        return c.name in ("i", "j")
    if isinstance(c, (A.Compare, A.BoolOp, A.BinOp)):
        return uses_position(c.left) or uses_position(c.right)
    if isinstance(c, A.Call):
        return any(uses_position(x) for x in c.args)
    if isinstance(c, A.IfExpr):
        return uses_position(c.cond) or uses_position(c.then) or uses_position(c.otherwise)
    return False


def position_guard(spec: A.Spec):
    """The spec's root `if` when one of its conditions tests the output position, else None."""
    o = spec.order
    return o if isinstance(o, A.Guard) and any(uses_position(c.cond) for c in o.cases) else None


def arm_labels(spec: A.Spec, shape: tuple, n: int) -> np.ndarray:
    """The arm of the root `if` (len(cases) for `else`) each output of `shape`
    ((m,) or (m, ncols)) takes at length n; all zeros for a spec without one."""
    from fpspec.spec.expand import eval_cond

    rows, cols = shape[0], (shape[1] if len(shape) > 1 else 1)
    guard = position_guard(spec)
    out = np.zeros((rows, cols), np.int64)
    if guard is None:
        return out
    for i in range(rows):
        for j in range(cols):
            out[i, j] = next((k for k, c in enumerate(guard.cases) if eval_cond(c.cond, n, (i, j))),
                             len(guard.cases))
    return out


# ---------------------------------------------------------------- sets of rows or columns
# Conditions are built in disjunctive form, a list of conjunctions (lists of
# comparisons): the language has no parentheses in conditions (`and` binds
# tighter than `or`).  [[]] holds everywhere, [] nowhere.

def _interval(var, lo: int, hi: int, size: int) -> list:
    """lo <= var < hi within 0..size-1, as one conjunction."""
    if hi - lo == 1:
        return [A.Compare("==", var, A.Num(lo))]
    return ([A.Compare(">=", var, A.Num(lo))] if lo > 0 else []) + \
        ([A.Compare("<", var, A.Num(hi))] if hi < size else [])


def _runs(members: np.ndarray) -> list[tuple[int, int]]:
    idx = np.flatnonzero(members)
    if len(idx) == 0:
        return []
    cuts = np.flatnonzero(np.diff(idx) > 1)
    starts = np.concatenate([[idx[0]], idx[cuts + 1]])
    ends = np.concatenate([idx[cuts], [idx[-1]]]) + 1
    return list(zip(starts.tolist(), ends.tolist()))


def _intervals(var, members: np.ndarray, offset: int = 0, size: int | None = None) -> list:
    size = offset + len(members) if size is None else size
    return [_interval(var, offset + a, offset + b, size) for a, b in _runs(members)]


def _length(dnf: list) -> int:
    return sum(len(c) + 1 for c in dnf)


def index_set(var, members: np.ndarray) -> list:
    """A condition on `var` (i or j), in disjunctive form, true exactly at the
    indices where `members` (bool, over 0..size-1) is set."""
    size = len(members)
    if members.all():
        return [[]]
    best = _intervals(var, members)
    idx = np.arange(size)
    for period in _periods(members):
        # a window [a, b) of residues, exact below `end`; intervals above
        for a, b in _runs(members[:period]):
            if a == 0 and b == period:
                continue
            pattern = ((idx % period) >= a) & ((idx % period) < b)
            wrong = np.flatnonzero(pattern != members)
            end = int(wrong[0]) if len(wrong) else size
            end -= end % period
            if end < 2 * period:
                continue
            mod = A.BinOp("%", var, A.Num(period))
            head = ([A.Compare("<", var, A.Num(end))] if end < size else []) + \
                ([A.Compare(">=", mod, A.Num(a))] if a > 0 else []) + \
                ([A.Compare("<", mod, A.Num(b))] if b < period else [])
            cand = [head] + (_intervals(var, members[end:], end, size) if end < size else [])
            if _length(cand) < _length(best):
                best = cand
    return best


PERIOD_SCAN = 4096      # sets up to this size try every period; larger ones (a collective's
                        # elements) only distances between the starts of their runs


def _periods(members: np.ndarray):
    size = len(members)
    if size <= PERIOD_SCAN:
        return range(2, size // 2 + 1)
    starts = [a for a, _ in _runs(members)][:64]
    return sorted({s - starts[0] for s in starts[1:] if 2 <= s - starts[0] <= size // 2})


def _both(rows: list, cols: list) -> list:
    return [r + c for r in rows for c in cols]


def _condition(dnf: list):
    terms = []
    for conj in dnf:
        t = conj[0]
        for c in conj[1:]:
            t = A.BoolOp("and", t, c)
        terms.append(t)
    out = terms[0]
    for t in terms[1:]:
        out = A.BoolOp("or", out, t)
    return out


# ---------------------------------------------------------------- label maps

def conditions(labels: np.ndarray) -> tuple[list[tuple[int, object]], int]:
    """([(label, condition on i, j)], label of the `else` arm) describing a label
    map of the output (gemv: shape (m,), gemm: (m, ncols)), labels 0..L-1."""
    lab = labels.reshape(labels.shape[0], -1)
    count = int(lab.max()) + 1
    if lab.shape[1] == 1:       # one column (a gemv, a collective's elements): a plain sort is faster
        patterns, group_of = np.unique(lab[:, 0], return_inverse=True)
        patterns = patterns[:, None]
    else:
        patterns, group_of = np.unique(lab, axis=0, return_inverse=True)
    group_of = np.asarray(group_of).reshape(-1)
    dnfs = {}
    for k in range(count):
        dnf = []
        # rows whose label-k columns are the same set are one term
        colsets: dict = {}
        for g, pat in enumerate(patterns):
            cols = pat == k
            if cols.any():
                colsets.setdefault(cols.tobytes(), [cols, np.zeros(len(lab), bool)])[1] |= group_of == g
        for cols, rows in colsets.values():
            dnf += _both(index_set(_I, rows), index_set(_J, cols) if lab.shape[1] > 1 else [[]])
        dnfs[k] = dnf
    other = max(range(count), key=lambda k: (_length(dnfs[k]), k))
    return [(k, _condition(dnfs[k])) for k in range(count) if k != other], other


def merge(specs: list[A.Spec], labels: np.ndarray) -> A.Spec:
    """One spec from the spec of each order (specs[k] for label k): the first
    one's header, an outermost `if` on i, j, and per-arm arithmetic."""
    if len(specs) == 1:
        return specs[0]
    base = specs[0]
    main = main_arithmetic(base)
    sections: dict = {}                 # name -> Arithmetic, every arm's
    lets: dict = {}
    orders = []
    for k, spec in enumerate(specs):
        mapping = {}
        for name, a in arithmetics(spec).items():
            if name is None:
                continue
            mapping[name] = section_for(a, sections)
        for d in spec.lets:
            if d.name in lets and lets[d.name] != d.order:
                raise ValueError(f"orders at two output positions define {d.name!r} differently")
            lets[d.name] = d.order
        order = _rename_using(spec.order, mapping)
        own = main_arithmetic(spec)
        if own != main:
            order = A.Using(section_for(own, sections), order)
        orders.append(order)
    # orders found apart that came out the same (an arithmetic difference the probes
    # could not pin down) are one arm
    first = {}
    same = np.array([first.setdefault(str(o), k) for k, o in enumerate(orders)])
    kept = sorted(set(same.tolist()))
    labels = np.searchsorted(kept, same[labels])
    orders = [orders[k] for k in kept]
    if len(orders) == 1:
        return replace(base, order=orders[0])
    arms, other = conditions(labels)
    root = A.Guard(tuple(A.Case(c, orders[k]) for k, c in arms), orders[other])
    used = using_names(root, *lets.values())
    header = replace(base.header, arithmetics=tuple(
        A.NamedArithmetic(name, override_entries(main, a)) for name, a in sections.items() if name in used))
    return A.Spec(header, tuple(A.Let(name, o) for name, o in lets.items()), root)


def _rename_using(o, mapping: dict):
    """o with every `using(NAME, ...)` renamed through mapping."""
    if not mapping:
        return o
    o = map_children(o, lambda x: _rename_using(x, mapping))
    return replace(o, name=mapping.get(o.name, o.name)) if isinstance(o, A.Using) else o
