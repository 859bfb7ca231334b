"""Replicas compute exactly the spec's arithmetic: against fpspec.arith.evaluate.

Formats (fp16/bf16 accumulators, fp16 inputs summed in fp32), products
(rounded, rounded to a product_format, fma, exact), init +0.0 and signed
zeros, output casts, and orders with every kind of reducer.  NumPy runs all
of them; Numba (slow to compile here) a representative few.
"""
from __future__ import annotations

import numpy as np
import pytest

from conftest import assert_same_bits, load_replica
from fpspec.arith.evaluate import evaluate
from fpspec.arith.model import Arithmetic
from fpspec.compile import compile_spec
from fpspec.compile.build import build_kernel
from fpspec.inputs import samples
from fpspec.spec import expand, parse

ORDER = "if n < 6: rev else: tail(4, lanes(4, seq, pairwise), seq)"
ORDER_2 = "blocks(5, pairwise, gpu_tree)"
LITERAL = "((0 (1 2)) ((3 4) 5))"

# (name, op, arithmetic entries, order, n values)
CASES = [
    ("fp32-sum-init", "sum", "input = fp32\nproduct = none\naccumulator = fp32\ninit = +0.0\noutput = fp32", ORDER, (1, 5, 9, 23)),
    ("fp16-in-fp32-acc", "sum", "input = fp16\nproduct = none\naccumulator = fp32\ninit = none\noutput = fp16", ORDER, (3, 17, 40)),
    ("fp16-acc", "sum", "input = fp16\nproduct = none\naccumulator = fp16\ninit = none\noutput = fp16", ORDER_2, (7, 26)),
    ("bf16-acc-fp32-out", "sum", "input = bf16\nproduct = none\naccumulator = bf16\ninit = +0.0\noutput = fp32", ORDER, (6, 33)),
    ("fp32-in-fp64-acc", "sum", "input = fp32\nproduct = none\naccumulator = fp64\ninit = none\noutput = fp32", ORDER_2, (11, 30)),
    ("dot-fma", "dot", "input = fp32\nproduct = fma\naccumulator = fp32\ninit = +0.0\noutput = fp32", ORDER, (2, 5, 6, 19)),
    ("dot-fma-rev", "dot", "input = fp32\nproduct = fma\naccumulator = fp32\ninit = none\noutput = fp32", "rev", (2, 9)),
    ("dot-rounded", "dot", "input = fp32\nproduct = rounded\naccumulator = fp32\ninit = none\noutput = fp32", ORDER_2, (4, 21)),
    ("dot-product-format", "dot", "input = fp32\nproduct = rounded\nproduct_format = fp32\naccumulator = fp64\ninit = none\noutput = fp32", ORDER, (8, 27)),
    ("dot-fp16-exact", "dot", "input = fp16\nproduct = exact\naccumulator = fp32\ninit = none\noutput = fp32", ORDER, (7, 20)),
    ("dot-fp64-fma", "dot", "input = fp64\nproduct = fma\naccumulator = fp64\ninit = none\noutput = fp64", ORDER, (9,)),
    ("literal-fma", "dot", "input = fp32\nproduct = fma\naccumulator = fp32\ninit = none\noutput = fp32", LITERAL, (6,)),
    ("gemv-fp16-acc", "gemv", "input = fp16\nproduct = rounded\naccumulator = fp16\ninit = none\noutput = fp16", ORDER_2, (12,)),
]
FINITE_KINDS = ("cancellation", "subnormals")   # see test: formats.fma fp64 loses -0.0 and overflow
NUMBA_CASES = ("fp16-acc", "dot-fma", "dot-fp64-fma", "literal-fma")


def spec_text(op, entries, order, lo=1):
    body = "\n".join("    " + line for line in entries.splitlines())
    return f"op {op}\nn in {lo}..\n\narithmetic {{\n{body}\n}}\n\norder {order}\n"


def reference(spec, n, op, args, arithmetic):
    tree = expand(spec, n)
    if op == "sum":
        return evaluate(tree, args[0], None, arithmetic)
    if op == "dot":
        return evaluate(tree, args[0], args[1], arithmetic)
    A, x = args
    return evaluate(tree, np.asarray(A, np.float64).T, np.repeat(np.asarray(x, np.float64)[:, None], A.shape[0], 1),
                    arithmetic)


def check_case(case, target):
    name, op, entries, order, ns = case
    lo = 6 if order == LITERAL else 1
    spec = parse(spec_text(op, entries, order, lo))
    if order == LITERAL:
        spec = parse(spec_text(op, entries, order, 6).replace("n in 6..", "n in 6"))
    kernel = build_kernel(spec)
    mod = load_replica(compile_spec(spec, target), f"arith_{name}_{target}")
    fn = getattr(mod, op)
    a = kernel.arithmetic
    for n in ns:
        # fpspec.formats.fma (the reference) at fp64 returns +0.0 for an exact zero and turns an overflowing product
        # plus an infinite c into nan; a true FMA gives the infinity: kinds without overflow
        kinds = FINITE_KINDS if a.input == "fp64" and a.product == "fma" else None
        for s in samples(op, n, a.input, 14, seed=n, m=3 if op == "gemv" else None, kinds=kinds):
            got = fn(*s.args)
            want = reference(spec, n, op, s.args, a)
            assert_same_bits(got, np.asarray(want).astype(np.asarray(got).dtype), f"{name} n={n} {s.describe()}")


@pytest.mark.parametrize("case", [c for c in CASES if c[0] != "dot-fp64-fma"], ids=lambda c: c[0])
def test_numpy_replica_matches_the_reference_arithmetic(case):
    check_case(case, "numpy")


@pytest.mark.parametrize("case", [c for c in CASES if c[0] in NUMBA_CASES], ids=lambda c: c[0])
def test_numba_replica_matches_the_reference_arithmetic(case):
    check_case(case, "numba")


def test_output_dtype_follows_the_output_format():
    spec = parse(spec_text("sum", CASES[1][2], "seq"))
    mod = load_replica(compile_spec(spec, "numpy"), "dtype")
    assert mod.sum(np.ones(3, np.float16)).dtype == np.float16
    assert mod.sum(np.ones(3, np.float16)) == 3.0
