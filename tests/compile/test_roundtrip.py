"""Replicas of random trees, revealed again, give the same tree."""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import load_replica, spec_from_trees
from fpspec.arith.model import Arithmetic
from fpspec.compile import compile_spec
from fpspec.reveal.engine import reveal
from fpspec.reveal.targets import from_callable
from fpspec.tree import random_tree


def revealed_again(tree, n, target="numpy", dtype="float32"):
    fmt = "fp32" if dtype == "float32" else "fp64"
    spec = spec_from_trees(tree, "sum", Arithmetic(input=fmt, accumulator=fmt, output=fmt), "random")
    mod = load_replica(compile_spec(spec, target), f"roundtrip_{target}")
    return reveal(from_callable(mod.sum, op="sum", n=n, dtype=dtype, name="replica")).tree


@settings(max_examples=25, deadline=None)
@given(st.integers(2, 48), st.integers(0, 2**32 - 1), st.sampled_from(["float32", "float64"]))
def test_numpy_replica_of_a_random_tree_reveals_that_tree(n, seed, dtype):
    tree = random_tree(n, np.random.default_rng(seed))
    assert revealed_again(tree, n, "numpy", dtype) == tree


def test_numba_replica_of_a_random_tree_reveals_that_tree():
    tree = random_tree(40, np.random.default_rng(7))
    assert revealed_again(tree, 40, "numba") == tree
