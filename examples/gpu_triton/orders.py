"""Kernel IR for the orders this example replicates (until spec lowering builds them).

- `matmul_kernel(tree, fmt)`: the IR of a revealed cuBLAS tree: fused chains
  over contiguous K ranges (split-K parts) combined by a binary tree; checked
  by expanding it back (fpspec.compile.trees.tree_of) to the revealed tree.
- `numpy_sum_kernel()`: numpy.sum's pairwise order for float32 (any n).
"""
from fpspec.arith import Arithmetic, get_params
from fpspec.compile.ir import (BinOp, Call, Case, Compare, Const, Fold, FusedChain, Guard, Kernel, Lanes,
                               Pairwise, Part, Segments)
from fpspec.compile.trees import table_of, tree_of
from fpspec.tree import Node, leaves, size

m = __import__("fpspec.compile.ir", fromlist=["Var"]).Var("m")


def _chain_width(t):
    """w if t is a FusedChain(w) over contiguous leaves (tree_of's semantics), else None."""
    if isinstance(t, int) or not t.fused:
        return None
    node = t
    while True:   # down to the first node of the chain
        inner = [c for c in node.children if not isinstance(c, int)]
        if not inner:
            break
        if len(inner) != 1 or not inner[0].fused:
            return None
        node = inner[0]
    w = len(node.children)
    lv = sorted(leaves(t))
    if lv != list(range(lv[0], lv[0] + len(lv))):
        return None
    probe = Kernel("gemm", Arithmetic(), FusedChain(Const(w)))
    expected = tree_of(probe, len(lv))
    shifted = _shift(expected, lv[0])
    return w if shifted == t else None


def _shift(t, k):
    if isinstance(t, int):
        return t + k
    return Node(tuple(_shift(c, k) for c in t.children), t.fused)


def matmul_kernel(tree, fmt: str, output: str | None = None) -> Kernel:
    """IR for a revealed torch.matmul tree; raises ValueError if it is not chains under binary nodes."""
    n = size(tree)
    parts, outer_leaves = [], []

    def walk(t):
        w = _chain_width(t)
        if isinstance(t, int) or w is not None:
            lo = t if isinstance(t, int) else min(leaves(t))
            length = 1 if isinstance(t, int) else size(t)
            parts.append((lo, length, w))
            return len(parts) - 1
        if t.fused:
            raise ValueError("a fused node outside a chain")
        return Node((walk(t.children[0]), walk(t.children[1])))

    skeleton = walk(tree)
    order = sorted(range(len(parts)), key=lambda i: parts[i][0])
    rank = {old: new for new, old in enumerate(order)}
    skeleton = _relabel(skeleton, rank)
    parts = [parts[i] for i in order]
    ar = Arithmetic(input=fmt, product="exact", accumulator="fp32", init="none", output=output or fmt,
                    fused=get_params(f"h100-{fmt}"))
    if len(parts) == 1:
        root = FusedChain(Const(parts[0][2]))
    else:
        root = Segments(tuple(Part(Const(length), None if w is None else FusedChain(Const(w)))
                              for _, length, w in parts), table_of(skeleton))
    kernel = Kernel("gemm", ar, root, n_min=n, n_max=n if len(parts) > 1 else None,
                    source=f"# torch.matmul {fmt}, revealed at K = {n}", name=f"torch.matmul.{fmt}.K{n}")
    if tree_of(kernel, n) != tree:
        raise ValueError("the IR does not expand back to the revealed tree")
    return kernel


def _relabel(t, rank):
    if isinstance(t, int):
        return rank[t]
    return Node(tuple(_relabel(c, rank) for c in t.children), t.fused)


def numpy_sum_kernel() -> Kernel:
    c = Const
    half = BinOp("-", BinOp("//", m, c(2)), BinOp("%", BinOp("//", m, c(2)), c(8)))
    block = Segments((Part(BinOp("-", m, BinOp("%", m, c(8))), Lanes(c(8), Fold(), Pairwise())),
                      Part(BinOp("%", m, c(8)), None)), Fold())
    split = Segments((Part(half, Call("pw")), Part(BinOp("-", m, half), Call("pw"))), Fold())
    pw = Guard((Case(Compare("<", m, c(8)), Fold()), Case(Compare("<=", m, c(128)), block)), split)
    return Kernel("sum", Arithmetic(input="fp32", product="none", accumulator="fp32", output="fp32"),
                  Call("pw"), orders=(("pw", pw),), source="# numpy.sum float32, pairwise", name="numpy.sum")
