"""A plain reveal of a binned replica: one node of all leaves under the engine's masks, which the
engine then proves order-independent (as math.fsum); a fused node of a few extra bits stays a node."""
from __future__ import annotations

import numpy as np
import pytest

from fpspec.compile import compile_spec, load_replica
from fpspec.errors import RevealRefused
from fpspec.reveal.engine import reveal
from fpspec.reveal.synthetic import sum_target
from fpspec.reveal.targets import Target
from fpspec.spec import parse
from fpspec.tree import Node

DTYPES = {"fp64": np.float64, "fp32": np.float32}


def replica_target(op: str, fmt: str, fold: int, n: int) -> Target:
    product = "none" if op == "sum" else "rounded"
    spec = parse(f'target "binned"\nop {op}\nn in 1..\narithmetic {{ input = {fmt} product = {product} '
                 f"accumulator = binned(fold = {fold}) output = {fmt} }}\norder seq\n")
    rep = load_replica(compile_spec(spec, "numpy"), f"binned {op} {fmt} {fold}")
    dt = DTYPES[fmt]
    return Target(f"binned.{op}", op, n, fmt, fn=getattr(rep, op), native=lambda x: np.asarray(x, dtype=dt),
                  to_float64=lambda out: np.asarray(out, dtype=np.float64))


@pytest.mark.parametrize("op,fmt,fold", [("sum", "fp64", 3), ("dot", "fp32", 3), ("sum", "fp64", 2)])
def test_reveal_of_a_binned_replica_says_order_independent(op, fmt, fold):
    with pytest.raises(RevealRefused, match=r"^order-independent: .*binned sum.*exact at masks \+-2\^(63|36)"):
        reveal(replica_target(op, fmt, fold, 8))


def test_a_fused_node_of_every_leaf_is_still_revealed():
    # seed 000's fused node (p + 3 bits) swamps units at masks 2^36: it is no exact sum
    rev = reveal(sum_target(Node(tuple(range(8)), fused=True), "fp32"))
    assert rev.tree == Node(tuple(range(8)), fused=True)
