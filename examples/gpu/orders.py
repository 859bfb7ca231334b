"""Kernel IR for the orders this example replicates.

- `matmul_kernel(tree, fmt)`: the IR of a revealed cuBLAS tree, through
  spec lowering (fpspec.spec.lower) and fpspec.compile.build; checked by
  expanding it back (fpspec.compile.trees.tree_of) to the revealed tree.
- `numpy_sum_kernel()`: numpy.sum's pairwise order for float32 (any n).
"""
from fpspec.arith import Arithmetic, get_params
from fpspec.compile.ir import BinOp, Call, Case, Compare, Const, Fold, Guard, Kernel, Lanes, Pairwise, Part, Segments
from fpspec.compile.trees import tree_of
from fpspec.tree import size

m = __import__("fpspec.compile.ir", fromlist=["Var"]).Var("m")


def matmul_kernel(tree, fmt: str, output: str | None = None) -> Kernel:
    """IR for a revealed torch.matmul tree, through the real pipeline: the tree
    lowered to a spec (chain(w[, at]), split-K blocks, literal where nothing
    fits; a fused pair that revealed as binary stays fused), with the H100
    arithmetic, built to a kernel.  Raises ValueError if it does not expand
    back to the revealed tree (as revelation sees it)."""
    from fpspec.compile.build import build_kernel
    from fpspec.spec import ast as A
    from fpspec.spec.lower import lower
    from fpspec.tree import observable

    n = size(tree)
    ar = Arithmetic(input=fmt, product="exact", accumulator="fp32", init="none", output=output or fmt,
                    fused=get_params(f"h100-{fmt}"))
    lowered = lower(tree, observed=True)
    header = A.Header(target=f"torch.matmul ({fmt}, cuda)", op="gemm", n=A.Range(n, n),
                      sections=(A.Block("arithmetic", ar.to_entries()),))
    spec = A.Spec(header, lowered.lets, lowered.order)
    kernel = build_kernel(spec, name=f"torch.matmul.{fmt}.K{n}", source=f"# torch.matmul {fmt}, revealed at K = {n}")
    if observable(tree_of(kernel, n)) != observable(tree):
        raise ValueError("the IR does not expand back to the revealed tree")
    return kernel


def numpy_sum_kernel() -> Kernel:
    c = Const
    half = BinOp("-", BinOp("//", m, c(2)), BinOp("%", BinOp("//", m, c(2)), c(8)))
    block = Segments((Part(BinOp("-", m, BinOp("%", m, c(8))), Lanes(c(8), Fold(), Pairwise())),
                      Part(BinOp("%", m, c(8)), None)), Fold())
    split = Segments((Part(half, Call("pw")), Part(BinOp("-", m, half), Call("pw"))), Fold())
    pw = Guard((Case(Compare("<", m, c(8)), Fold()), Case(Compare("<=", m, c(128)), block)), split)
    return Kernel("sum", Arithmetic(input="fp32", product="none", accumulator="fp32", output="fp32"),
                  Call("pw"), orders=(("pw", pw),), source="# numpy.sum float32, pairwise", name="numpy.sum")
