"""Orders the replica soak (benchmarks/soak_replicas.py, seed 505) found compiled wrong, each
with inputs that show it and exact bits: the replicas are written to files and run in one fresh
interpreter for the whole file (tests/fresh_replicas.py), as a user runs them."""
import numpy as np
import pytest
from fresh_replicas import assert_fresh_bits, reference_outputs, run_fresh

from fpspec.compile import compile_spec
from fpspec.spec.expand import expand_arith
from fpspec.tree import format_tree
from test_exact_leaves import spec_of

# seed 505 spec 1526: chain(4, 0) at n = 5 puts the short group (one operand) first; the tree shows it
# inside the next node, [0 1 2 3 4]: one node of 5 products, which the hardware's w = 16 holds
# (every backend computes it)
CHAIN_FIRST_ONE = """op gemm
n in 5
arithmetic {
    input = fp16 product = fma accumulator = fp32 init = none output = fp32
    fused { w = 16 extra_bits = 2 aligned = truncate result = rz c_aligned = true exponent_floor = -133 }
}
order chain(4, n % 32 // 16)
"""
# seed 505 spec 2439: the lanes' outer node is in part0: their fp32 sums meet in a bf16 accumulator
LANES_OUTER_PART = """op dot
n in 7
arithmetic { input = fp16 product = exact accumulator = fp32 init = none output = fp32 }
arithmetic part0 { accumulator = bf16 product = rounded }
let r0 = using(part0, seq)
let h1 = r0
order lanes(2, seq, h1)
"""

# 1.5 * 1.5 = 2.25 aligns with its product exponent 0 (fpspec.arith.fused note [unnormalised
# product]): -2^-25 stays on the node's grid (2^-25) and rz gives 2.25 - 2^-22; taken as the c
# of a node of its own, 2.25 has exponent 1 and truncates -2^-25 away: 2.25
A_CHAIN = np.array([[1.5, 2.0 ** -24, 0, 0, 0]], np.float16)
B_CHAIN = np.array([[1.5], [-0.5], [0], [0], [0]], np.float16)
# lanes 1.0 and 2^-10: their fp32 sum is not a bf16, which rounds it to 1.0
X_LANES = np.array([1, 2.0 ** -10, 0, 0, 0, 0, 0], np.float16)
Y_LANES = np.ones(7, np.float16)

CALLS = {(text, target): args for text, args, targets in (
    (CHAIN_FIRST_ONE, ("gemm", (A_CHAIN, B_CHAIN)), ("numpy", "numba", "triton")),
    (LANES_OUTER_PART, ("dot", (X_LANES, Y_LANES)), ("numpy", "numba"))) for target in targets}


@pytest.fixture(scope="module")
def fresh(tmp_path_factory):
    """(spec text, target) -> the replica's outputs in a fresh interpreter."""
    calls = [(compile_spec(spec_of(text), target=target), function, args, "float16" if target == "triton" else None)
             for (text, target), (function, args) in CALLS.items()]
    return dict(zip(CALLS, run_fresh(calls, tmp_path_factory.mktemp("found_orders"))))


@pytest.mark.parametrize("target", ["numpy", "numba", "triton"])
def test_a_chains_first_group_of_one_joins_the_next_node_within_w(fresh, target):
    spec = spec_of(CHAIN_FIRST_ONE)
    assert format_tree(expand_arith(spec, 5)[0]) == "[0 1 2 3 4]"
    want = reference_outputs(spec, "gemm", (A_CHAIN, B_CHAIN))
    assert want.tolist() == [2.25 - 2.0 ** -22]
    assert_fresh_bits(fresh[CHAIN_FIRST_ONE, target], want, target)


@pytest.mark.parametrize("target", ["numpy", "numba"])
def test_unrolled_lanes_keep_an_outer_order_in_its_part(fresh, target):
    spec = spec_of(LANES_OUTER_PART)
    want = reference_outputs(spec, "dot", (X_LANES, Y_LANES))
    assert want.tolist() == [1.0]
    assert_fresh_bits(fresh[LANES_OUTER_PART, target], want, target)


# seed 510 spec 1628: at n = 2 the padded list is [0 1 P P P P]; tail's outer node in part0 has the
# body's fp32 sum and a phantom as children, so it is no node (docs/fps.md: a node loses its phantom
# children): the body's 2^-124 reaches the bf16 output, where an fp16 node would flush it to 0
PHANTOM_OUTER_PART = """op gemv
n in 2
arithmetic { input = bf16 product = rounded accumulator = fp32 init = none output = bf16 }
arithmetic part0 { accumulator = fp16 product = fma }
order pad(6, tail(5, seq, using(part0, seq)))
"""
A_PHANTOM = np.array([[1.0, 1.0], [2.0 ** -62, 2.0 ** -62]], np.float32)
X_PHANTOM = np.array([2.0 ** -62, 0.0], np.float32)
# at n = 2 block 1 of [0 1 P P P P P P] holds phantoms only: no node, so part0 has one child left
PHANTOM_BLOCK_PART = """op sum
n in 2
arithmetic { input = fp16 accumulator = fp32 init = none output = fp32 }
arithmetic part0 { accumulator = fp16 }
order pad(8, blocks(4, seq, using(part0, seq)))
"""
X_BLOCK = np.array([1.0, 2.0 ** -20], np.float16)
# a wider part (fp64, FMA) after a narrower one: the fp16 body's value meets only phantoms in it
PHANTOM_WIDE_PART = """op dot
n in 2
arithmetic { input = fp16 product = rounded accumulator = fp64 init = none output = fp64 }
arithmetic narrow { accumulator = fp16 product = rounded }
arithmetic wide { accumulator = fp64 product = fma }
order pad(6, tail(5, using(narrow, seq), using(wide, seq)))
"""
X_WIDE = np.array([1.0 + 2.0 ** -9, 2.0 ** -12], np.float16)
Y_WIDE = np.array([1.0 + 2.0 ** -9, 1.0], np.float16)
PHANTOM_CALLS = {(text, target): args for text, args in (
    (PHANTOM_OUTER_PART, ("gemv", (A_PHANTOM, X_PHANTOM))), (PHANTOM_BLOCK_PART, ("sum", (X_BLOCK,))),
    (PHANTOM_WIDE_PART, ("dot", (X_WIDE, Y_WIDE)))) for target in ("numpy", "numba")}


@pytest.fixture(scope="module")
def fresh_phantoms(tmp_path_factory):
    calls = [(compile_spec(spec_of(text), target=target), function, args)
             for (text, target), (function, args) in PHANTOM_CALLS.items()]
    return dict(zip(PHANTOM_CALLS, run_fresh(calls, tmp_path_factory.mktemp("phantom_parts"))))


@pytest.mark.parametrize("target", ["numpy", "numba"])
@pytest.mark.parametrize("text, tree, want", [
    (PHANTOM_OUTER_PART, "(0 1)", [2.0 ** -62, 2.0 ** -124]),
    (PHANTOM_BLOCK_PART, "(0 1)", [1.0 + 2.0 ** -20]),
    # the fp16 body rounds (1 + 2^-9)^2 + 2^-12 to 1 + 2^-8; the wide part adds nothing to it
    (PHANTOM_WIDE_PART, "(0 1)", [1.0 + 2.0 ** -8])], ids=["outer_part_fp16", "block_of_phantoms", "wide_part"])
def test_a_value_meeting_only_phantoms_keeps_its_value_in_a_part(fresh_phantoms, target, text, tree, want):
    spec = spec_of(text)
    assert format_tree(expand_arith(spec, 2)[0]) == tree
    function, args = PHANTOM_CALLS[text, target]
    got = reference_outputs(spec, function, args)
    assert got.tolist() == want
    assert_fresh_bits(fresh_phantoms[text, target], got, target)


# seed 512 spec 254: exact bf16 products folded into fp32 (each addition one rounding of product + sum):
# the numpy replica called a rounding function it did not embed, and failed at its first call
EXACT_BF16_DOT = """op dot
n in 3
arithmetic { input = bf16 product = exact accumulator = fp32 init = none output = fp32 }
order seq
"""
# (1 + 2^-7)^2 = 1 + 2^-6 + 2^-14 is exact in fp32; plus 2^-30 it rounds once, to 1 + 2^-6 + 2^-14
X_EXACT = np.array([1 + 2.0 ** -7, 2.0 ** -15, 2.0 ** -15], np.float32)
Y_EXACT = np.array([1 + 2.0 ** -7, 2.0 ** -15, 2.0 ** -15], np.float32)


@pytest.mark.parametrize("target", ["numpy"])    # numba refuses exact products that can overflow fp32
def test_exact_products_into_a_wider_sum_run_in_a_fresh_interpreter(tmp_path, target):
    spec = spec_of(EXACT_BF16_DOT)
    want = reference_outputs(spec, "dot", (X_EXACT, Y_EXACT))
    assert want.tolist() == [1 + 2.0 ** -6 + 2.0 ** -14]
    got, = run_fresh([(compile_spec(spec, target=target), "dot", (X_EXACT, Y_EXACT))], tmp_path)
    assert_fresh_bits(got, want, target)


# seed 513 spec 2434: at n = 5 the inner pad of `split(1, seq, r0)` gets only the outer pad's phantom:
# it must stay a phantom (as the expansion keeps it), not a missing child; compile raised TypeError
NESTED_PADS = """op dot
n in 5
arithmetic { input = bf16 product = exact accumulator = fp32 init = none output = bf16 }
let r0 = pad(2, seq)
order lanes(1, seq, pad(2, split(1, seq, r0)))
"""
X_PADS = np.array([1.0, 2.0 ** -9, 2.0 ** -9, 2.0 ** -9, 2.0 ** -9], np.float32)


def test_a_pad_given_only_an_outer_pads_phantoms_stays_a_phantom(tmp_path):
    from fpspec.compile.build import build_kernel
    from fpspec.compile.trees import tree_of

    spec = spec_of(NESTED_PADS)
    assert format_tree(tree_of(build_kernel(spec), 5)) == format_tree(expand_arith(spec, 5)[0]) == "((((0 1) 2) 3) 4)"
    ones = np.ones(5, np.float32)
    want = reference_outputs(spec, "dot", (X_PADS, ones))
    assert want.tolist() == [1.0 + 2.0 ** -7]     # the bf16 output of 1 + 4 * 2^-9
    got, = run_fresh([(compile_spec(spec, target="numpy"), "dot", (X_PADS, ones))], tmp_path)
    assert_fresh_bits(got, want, "numpy")
