"""Specs the replica soak (benchmarks/soak_replicas.py) found where the reference evaluation
or a replica's numerics were wrong, each with the inputs that showed it and exact bits."""
import numpy as np

from fpspec.spec.expand import expand_arith
from fpspec.tree import format_tree
from test_exact_leaves import reference, replica, same_bits, spec_of


def test_a_pad_over_only_the_outer_pads_phantoms_expands(tmp_path):
    # the inner pad gets [phantom x 3]: it is a phantom, which the outer pad drops
    spec = spec_of("""op dot
n in 3
arithmetic { input = fp64 product = rounded accumulator = fp64 init = none output = fp64 }
order pad(7, split(4, seq, pad(2, seq)))
""")
    assert format_tree(expand_arith(spec, 3)[0]) == "((0 1) 2)"
    x, y = [1e16, 1.0, -1e16], [1.0, 1.0, 1.0]
    assert reference(spec, x, y) == 0.0
    assert same_bits(replica(spec, tmp_path).dot(np.array(x), np.array(y)), 0.0)


def test_a_part_over_one_leaf_leaves_the_leaf_to_the_main_arithmetic(tmp_path):
    # at n = 1 the part makes no node: the fp16 product is exact in fp32, not rounded to bf16
    spec = spec_of("""op dot
n in 1..3
arithmetic { input = fp16 product = fma accumulator = fp32 init = none output = fp32 }
arithmetic part0 { accumulator = bf16 product = fma }
order using(part0, seq)
""")
    x = np.array([0.0341796875, 1.0, 1.0], np.float16)
    want = 0.0341796875 ** 2    # 0.0011682510375976562, exact
    assert reference(spec, x[:1], x[:1]) == want
    r = replica(spec, tmp_path)
    assert same_bits(r.dot(x[:1], x[:1]), want)
    assert same_bits(r.dot(x, x), reference(spec, x, x))


FP32_IN_FP64 = """op dot
n in 2..4
arithmetic {{ input = fp32 product = {product} accumulator = fp64 init = none output = fp64 }}
order {order}
"""


def test_an_fp64_accumulator_fuses_fp32_products_with_one_rounding(tmp_path):
    # 1 + 2^-54 is a tie below 1 + 2^-52: one float64 rounding gives 1.0 (rounding to odd gave 1 + 2^-52)
    spec = spec_of(FP32_IN_FP64.format(product="fma", order="seq"))
    x, y = np.array([1.0, 2.0 ** -54], np.float32), np.array([1.0, 1.0], np.float32)
    assert reference(spec, x, y) == 1.0
    assert same_bits(replica(spec, tmp_path).dot(x, y), 1.0)


def test_an_fp64_accumulator_keeps_inf_minus_inf_a_nan(tmp_path):
    # ((0 1) 2) 3): inf + -3e38 = inf, then inf + -inf (fused) = nan (rounding inf to odd gave the largest fp64)
    spec = spec_of(FP32_IN_FP64.format(product="fma_first", order="pairwise(min(3, n - 1))"))
    x = np.array([np.inf, -3e38, np.inf, 0.0], np.float32)
    y = np.array([1.0, 1.0, -np.inf, 2.0], np.float32)
    assert np.isnan(reference(spec, x, y))
    assert np.isnan(replica(spec, tmp_path).dot(x, y))


BF16_EXACT_DOT = """op dot
n in 2..8
arithmetic { input = bf16 product = exact accumulator = fp32 init = none output = fp32 }
order {order}
"""


def test_triton_folds_bf16_exact_products_beyond_fp32(tmp_path, monkeypatch):
    # 2^160 - 2^160 + 1: the first node's exact sum is 0 (rounding 2^160 first gave inf, and inf)
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    spec = spec_of(BF16_EXACT_DOT.replace("{order}", "seq"))
    x = np.array([2.0 ** 100, 2.0 ** 100, 1.0], np.float32)
    y = np.array([2.0 ** 60, -2.0 ** 60, 1.0], np.float32)
    assert reference(spec, x, y) == 1.0
    assert same_bits(replica(spec, tmp_path, "triton").dot(x, y), 1.0)


def test_triton_adds_a_lone_bf16_exact_product_to_a_partial_sum_once(tmp_path, monkeypatch):
    # (0 (1 2)): -2^160 (beyond fp32) + inf is inf; the product rounded to fp32 first gave nan
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    spec = spec_of(BF16_EXACT_DOT.replace("{order}", "pairwise(1)"))
    x = np.array([2.0 ** 100, 2.0 ** 127, 2.0 ** 127], np.float32)
    y = np.array([-2.0 ** 60, 2.0 ** 127, 1.0], np.float32)
    assert reference(spec, x, y) == np.inf
    assert same_bits(replica(spec, tmp_path, "triton").dot(x, y), np.inf)
