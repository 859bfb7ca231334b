"""The tree a kernel denotes at one n, and literal trees as schedule tables.

`tree_of` is the executable definition of the reducers' order semantics: the
backends must compute exactly this tree, and the AST -> IR builder must
produce IR whose `tree_of` equals the spec's `expand`.
"""
from __future__ import annotations

from fpspec.compile.ir import (VLanes, Blocks, Call, Chunks, CompileError, chunk_bounds, FusedChain, Fold, Guard, Kernel, Lanes,
                               Pad, Pairwise, Reducer, Segments, Table, TreeReduce, WithArithmetic, cond_value,
                               int_value)
from fpspec.tree import Node, Tree, fused_chain, postorder, size


def tree_of(kernel: Kernel, n: int) -> Tree:
    """The summation tree of `kernel` at reduction length n."""
    if n < kernel.n_min or (kernel.n_max is not None and n > kernel.n_max):
        raise CompileError(f"n = {n} is outside the spec's range {kernel.n_min}..{kernel.n_max or ''}")
    return reduce_list(kernel, kernel.root, list(range(n)), n)


def reduce_list(kernel: Kernel, r: Reducer, ops: list, n: int) -> Tree:
    m = len(ops)
    if m == 0:
        raise CompileError("a reducer was applied to an empty operand list")
    if isinstance(r, Call):
        return reduce_list(kernel, kernel.order(r.name), ops, n)
    if isinstance(r, WithArithmetic):     # the same tree; only the arithmetic of its nodes differs
        return reduce_list(kernel, r.reducer, ops, n)
    if isinstance(r, Guard):
        for case in r.cases:
            if cond_value(case.cond, m, n):
                return reduce_list(kernel, case.reducer, ops, n)
        if r.otherwise is None:
            raise CompileError(f"no case of a guard applies at m = {m}, n = {n}")
        return reduce_list(kernel, r.otherwise, ops, n)
    if isinstance(r, Pad):
        p = _positive(int_value(r.m, m, n), "pad multiple")
        rest, c = m % p, (p - m % p) % p
        if c == 0:
            return reduce_list(kernel, r.inner, ops, n)
        from fpspec.spec.expand import drop_phantoms   # phantoms are negative leaves, as in expand

        t = drop_phantoms(reduce_list(kernel, r.inner, list(ops[:rest]) + list(range(-c, 0)) + list(ops[rest:]), n))
        # a pad inside an outer pad can get only the outer's phantoms: it stays a phantom (as in expand)
        return ops[0] if t is None else t
    if m == 1:
        return ops[0]
    if isinstance(r, Fold):
        seq = ops[::-1] if r.reverse else ops
        acc = seq[0]
        for o in seq[1:]:
            acc = Node((acc, o))
        return acc
    if isinstance(r, Pairwise):
        h = m // 2 if r.split is None else int_value(r.split, m, n)
        if not 1 <= h <= m - 1:
            raise CompileError(f"pairwise split {h} is outside 1..{m - 1}")
        return Node((reduce_list(kernel, r, ops[:h], n), reduce_list(kernel, r, ops[h:], n)))
    if isinstance(r, TreeReduce):
        vals = list(ops)
        while len(vals) > 1:
            h = (len(vals) + 1) // 2
            vals = [Node((vals[i], vals[i + h])) if i + h < len(vals) else vals[i] for i in range(h)]
        return vals[0]
    if isinstance(r, FusedChain):
        w = int_value(r.width, m, n)
        if w < 2:
            raise CompileError(f"fused chain width must be >= 2, got {w}")
        at = None if r.at is None else int_value(r.at, m, n)
        if at is not None and at < 0:
            raise CompileError(f"fused chain short-group index must be >= 0, got {at}")
        return fused_chain(ops, w, at)
    if isinstance(r, Table):
        if r.size != m:
            raise CompileError(f"a literal tree over {r.size} operands was applied to {m}")
        slots = list(ops)
        for s, f in enumerate(r.fused):
            kids = tuple(slots[c] for c in r.children[r.offsets[s]:r.offsets[s + 1]])
            slots.append(Node(kids, fused=f))
        return slots[-1]
    if isinstance(r, Lanes):
        k = _positive(int_value(r.k, m, n), "lane count")
        if r.left is not None:
            u = k if r.unroll is None else _unroll(int_value(r.unroll, m, n), k)
            if m < u:
                return reduce_list(kernel, r.left, ops, n)
            p = m - m % u
            lanes = [reduce_list(kernel, r.inner, ops[j:p:k], n) for j in range(k)]
            if p < m:
                lanes[0] = reduce_list(kernel, r.left, [lanes[0]] + list(ops[p:]), n)
            return reduce_list(kernel, r.outer, lanes, n)
        lanes = [ops[j::k] for j in range(min(k, m))]
        return reduce_list(kernel, r.outer, [reduce_list(kernel, r.inner, lane, n) for lane in lanes], n)
    if isinstance(r, VLanes):
        from fpspec.spec.expand import vector_lanes

        v, k = _positive(int_value(r.v, m, n), "vector width"), _positive(int_value(r.k, m, n), "lane count")
        return reduce_list(kernel, r.outer, [reduce_list(kernel, r.inner, lane, n)
                                             for lane in vector_lanes(list(ops), v, k)], n)
    if isinstance(r, Blocks):
        b = _positive(int_value(r.b, m, n), "block size")
        blocks = [ops[s:s + b] for s in range(0, m, b)]
        return reduce_list(kernel, r.outer, [reduce_list(kernel, r.inner, blk, n) for blk in blocks], n)
    if isinstance(r, Chunks):
        parts = [reduce_list(kernel, r.inner, ops[a:b], n) for a, b in chunk_bounds(r.size, m, n)]
        return reduce_list(kernel, r.outer, parts, n)
    if isinstance(r, Segments):
        out, start = [], 0
        for i, part in enumerate(r.parts):
            length = int_value(part.length, m, n)
            if length < 0 or start + length > m or (i == len(r.parts) - 1 and start + length != m):
                raise CompileError(f"segment lengths do not add up to m = {m} (part {i}: {length})")
            chunk = ops[start:start + length]
            start += length
            if not chunk:
                continue
            out.extend(chunk if part.reducer is None else [reduce_list(kernel, part.reducer, chunk, n)])
        return reduce_list(kernel, r.outer, out, n)
    raise CompileError(f"unknown reducer {type(r).__name__}")


def _unroll(u: int, k: int) -> int:
    if u < 1 or u % k:
        raise CompileError(f"lanes unroll must be a positive multiple of the lane count {k}, got {u}")
    return u


def _positive(v: int, what: str) -> int:
    if v < 1:
        raise CompileError(f"{what} must be >= 1, got {v}")
    return v


def table_of(tree: Tree) -> Table:
    """A literal tree (leaves 0..size-1) as a schedule table (post-order steps)."""
    m = size(tree)
    if isinstance(tree, int):
        return Table(1, (), (0,), ())
    slot_of: dict[int, int] = {}
    children: list[int] = []
    offsets = [0]
    fused: list[bool] = []
    stack: list = []
    for s in postorder(tree):
        if isinstance(s, int):
            stack.append(s)
            continue
        k = len(s.children)
        kids = stack[-k:]
        del stack[-k:]
        children.extend(kids)
        offsets.append(len(children))
        fused.append(s.fused)
        stack.append(m + len(fused) - 1)
    del slot_of
    return Table(m, tuple(children), tuple(offsets), tuple(fused))
