"""Specs the replica soak (benchmarks/soak_replicas.py) found where the reference evaluation
or a replica's numerics were wrong, each with the inputs that showed it and exact bits.  The
replicas are written to files and run in one fresh interpreter for the whole file
(tests/fresh_replicas.py), as a user runs them."""
import numpy as np
import pytest
from fresh_replicas import run_fresh

from fpspec.compile import compile_spec
from fpspec.spec.expand import expand_arith
from fpspec.tree import format_tree
from test_exact_leaves import reference, same_bits, spec_of


PAD_OVER_PHANTOMS = """op dot
n in 3
arithmetic { input = fp64 product = rounded accumulator = fp64 init = none output = fp64 }
order pad(7, split(4, seq, pad(2, seq)))
"""
PART_OVER_ONE_LEAF = """op dot
n in 1..3
arithmetic { input = fp16 product = fma accumulator = fp32 init = none output = fp32 }
arithmetic part0 { accumulator = bf16 product = fma }
order using(part0, seq)
"""


FP32_IN_FP64 = """op dot
n in 2..4
arithmetic {{ input = fp32 product = {product} accumulator = fp64 init = none output = fp64 }}
order {order}
"""


BF16_EXACT_DOT = """op dot
n in 2..8
arithmetic { input = bf16 product = exact accumulator = fp32 init = none output = fp32 }
order {order}
"""


F32 = np.float32
# name -> (spec, target, x, y): every replica call of this file
CALLS = {
    "pad_over_phantoms": (PAD_OVER_PHANTOMS, "numpy", np.array([1e16, 1.0, -1e16]), np.ones(3)),
    "part_one_leaf": (PART_OVER_ONE_LEAF, "numpy", np.array([0.0341796875], np.float16),
                      np.array([0.0341796875], np.float16)),
    "part_three_leaves": (PART_OVER_ONE_LEAF, "numpy", np.array([0.0341796875, 1.0, 1.0], np.float16),
                          np.array([0.0341796875, 1.0, 1.0], np.float16)),
    "fp64_fma_tie": (FP32_IN_FP64.format(product="fma", order="seq"), "numpy", np.array([1.0, 2.0 ** -54], F32),
                     np.ones(2, F32)),
    "fp64_inf_minus_inf": (FP32_IN_FP64.format(product="fma_first", order="pairwise(min(3, n - 1))"), "numpy",
                           np.array([np.inf, -3e38, np.inf, 0.0], F32), np.array([1.0, 1.0, -np.inf, 2.0], F32)),
    "triton_bf16_exact": (BF16_EXACT_DOT.replace("{order}", "seq"), "triton",
                          np.array([2.0 ** 100, 2.0 ** 100, 1.0], F32), np.array([2.0 ** 60, -2.0 ** 60, 1.0], F32)),
    "triton_lone_bf16_exact": (BF16_EXACT_DOT.replace("{order}", "pairwise(1)"), "triton",
                               np.array([2.0 ** 100, 2.0 ** 127, 2.0 ** 127], F32),
                               np.array([-2.0 ** 60, 2.0 ** 127, 1.0], F32)),
}


@pytest.fixture(scope="module")
def fresh(tmp_path_factory):
    """name -> (spec, the replica's dot in a fresh interpreter, the reference)."""
    specs = {name: spec_of(text) for name, (text, *_) in CALLS.items()}
    calls = [(compile_spec(specs[name], target=target), "dot", (x, y)) + (("bfloat16",) if target == "triton" else ())
             for name, (_, target, x, y) in CALLS.items()]
    outputs = run_fresh(calls, tmp_path_factory.mktemp("found"))
    return {name: (specs[name], got, reference(specs[name], x, y))
            for (name, (_, _, x, y)), got in zip(CALLS.items(), outputs)}


def result(fresh, name: str):
    spec, got, want = fresh[name]
    assert not isinstance(got, str), f"{name}: {got}"
    return spec, got[0], want


def test_a_pad_over_only_the_outer_pads_phantoms_expands(fresh):
    # the inner pad gets [phantom x 3]: it is a phantom, which the outer pad drops
    spec, got, want = result(fresh, "pad_over_phantoms")
    assert format_tree(expand_arith(spec, 3)[0]) == "((0 1) 2)"
    assert want == 0.0
    assert same_bits(got, 0.0)


def test_a_part_over_one_leaf_leaves_the_leaf_to_the_main_arithmetic(fresh):
    # at n = 1 the part makes no node: the fp16 product is exact in fp32, not rounded to bf16
    _, got, want = result(fresh, "part_one_leaf")
    assert want == 0.0341796875 ** 2    # 0.0011682510375976562, exact
    assert same_bits(got, want)
    _, got, want = result(fresh, "part_three_leaves")
    assert same_bits(got, want)


def test_an_fp64_accumulator_fuses_fp32_products_with_one_rounding(fresh):
    # 1 + 2^-54 is a tie below 1 + 2^-52: one float64 rounding gives 1.0 (rounding to odd gave 1 + 2^-52)
    _, got, want = result(fresh, "fp64_fma_tie")
    assert want == 1.0
    assert same_bits(got, 1.0)


def test_an_fp64_accumulator_keeps_inf_minus_inf_a_nan(fresh):
    # ((0 1) 2) 3): inf + -3e38 = inf, then inf + -inf (fused) = nan (rounding inf to odd gave the largest fp64)
    _, got, want = result(fresh, "fp64_inf_minus_inf")
    assert np.isnan(want)
    assert np.isnan(got)


def test_triton_folds_bf16_exact_products_beyond_fp32(fresh):
    # 2^160 - 2^160 + 1: the first node's exact sum is 0 (rounding 2^160 first gave inf, and inf)
    _, got, want = result(fresh, "triton_bf16_exact")
    assert want == 1.0
    assert same_bits(got, 1.0)


def test_triton_adds_a_lone_bf16_exact_product_to_a_partial_sum_once(fresh):
    # (0 (1 2)): -2^160 (beyond fp32) + inf is inf; the product rounded to fp32 first gave nan
    _, got, want = result(fresh, "triton_lone_bf16_exact")
    assert want == np.inf
    assert same_bits(got, np.inf)
