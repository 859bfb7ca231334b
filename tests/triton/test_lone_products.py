"""Triton replicas where a lone product (a segment of one leaf) meets a partial sum or
another leaf in a combine step: the node takes the leaf's exact product and rounds once
(fpspec.arith.evaluate), as the NumPy replica does (triton_kernels Note [lone products]).
Each case has inputs where rounding the product first gives other bits."""
import importlib.util

import numpy as np
import pytest

from fpspec.arith import evaluate
from fpspec.compile import compile_spec
from fpspec.spec import check, parse
from fpspec.spec.expand import expand_arith

SPEC = """op dot
n in {n}
arithmetic {{ input = {input} product = {product} accumulator = fp32 init = none output = fp32 }}
order {order}
"""
U = 2.0 ** -23


def replica(text, tmp_path, target):
    path = tmp_path / f"r_{target}.py"
    path.write_text(compile_spec(parse(text), target=target))
    loader = importlib.util.spec_from_file_location("r", path)
    module = importlib.util.module_from_spec(loader)
    loader.loader.exec_module(module)
    return module


def reference(text, x, y):
    spec = parse(text)
    check(spec)
    tree, main, regions = expand_arith(spec, len(x))
    with np.errstate(all="ignore"):
        return float(evaluate(tree, np.asarray(x, np.float64), np.asarray(y, np.float64), main, regions))


@pytest.mark.parametrize("input, product, order, x, y, want", [
    # (0 (1 2)): 2^-150 (exact) + 3 * 2^-149 is 3.5 subnormal steps, a tie: to 4 (the product rounded
    # first is 0, a tie to even, and the root 3 steps)
    ("bf16", "exact", "pairwise(1)", [2.0 ** -75, 3 * 2.0 ** -75, 0.0], [2.0 ** -75, 2.0 ** -74, 1.0],
     4 * 2.0 ** -149),
    # -2^160 (beyond fp32) + inf is inf (rounded first: -inf + inf = nan)
    ("bf16", "exact", "pairwise(1)", [2.0 ** 100, 2.0 ** 127, 2.0 ** 127], [-2.0 ** 60, 2.0 ** 127, 1.0], np.inf),
    # fma: (1 + 2^-23)^2 - (1 + 2^-22) = 2^-46 in one rounding (the product rounded first: 0)
    ("fp32", "fma", "pairwise(1)", [1 + U, -(1 + 2 * U), 0.0], [1 + U, 1.0, 1.0], 2.0 ** -46),
    # two lone leaves under fma: the later is fused, the earlier rounded first, both ways round
    ("fp32", "fma", "lanes(2, seq, pairwise)", [1 + U, -(1 + 2 * U)], [1 + U, 1.0], 0.0),
    ("fp32", "fma", "lanes(2, seq, pairwise)", [-(1 + 2 * U), 1 + U], [1.0, 1 + U], 2.0 ** -46),
])
def test_a_lone_product_joins_its_node_exactly(tmp_path, monkeypatch, input, product, order, x, y, want):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    text = SPEC.format(n=len(x), input=input, product=product, order=order)
    assert reference(text, x, y) == want
    x, y = np.array(x, np.float32), np.array(y, np.float32)
    got = [float(replica(text, tmp_path, target).dot(x, y)) for target in ("numpy", "triton")]
    assert got == [want, want]
