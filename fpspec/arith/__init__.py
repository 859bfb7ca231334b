"""The arithmetic model: everything besides the order that fixes the bits.

    Arithmetic                     the spec's arithmetic section (model.py)
    FusedParams, fused_sum         the exact model of a fused node (fused.py)
    PARAMS, get_params             published parameter sets (params.py)
    evaluate(tree, x, y, arith)    the reference value of a whole tree (evaluate.py)
    probe_arithmetic               probes that find the arithmetic of a target (probe.py)
"""
from fpspec.arith.evaluate import evaluate
from fpspec.arith.fused import FusedParams, fused_chain, fused_node, fused_sum
from fpspec.arith.model import INITS, PRODUCTS, Arithmetic
from fpspec.arith.params import PARAMS, get_params

__all__ = ["Arithmetic", "FusedParams", "PARAMS", "PRODUCTS", "INITS", "evaluate", "fused_chain",
           "fused_node", "fused_sum", "get_params", "probe_arithmetic"]


def __getattr__(name):
    # probes import the reveal stage's Target lazily; keep `import fpspec.arith` light
    if name == "probe_arithmetic":
        from fpspec.arith.probe import probe_arithmetic

        return probe_arithmetic
    raise AttributeError(name)
