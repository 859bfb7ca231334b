"""Specs the replica soak (benchmarks/soak_replicas.py) found where NumPy and Numba replicas
formed a leaf in the wrong arithmetic or rounded a value no node rounds: exact bf16 products
in an arithmetic with fused nodes, `vlanes` over leaves that nodes form, phantoms and lone
values in a narrower part.  Every replica is written to a file and run in one fresh
interpreter (tests/fresh_replicas.py), as a user runs it; each call's bits are compared with
the spec's reference evaluation and with the value worked out by hand."""
import numpy as np
import pytest
from fresh_replicas import assert_fresh_bits, reference_outputs, run_fresh

from fpspec.compile import compile_spec
from fpspec.compile.ir import CompileError
from fpspec.spec.parse import parse

F32 = np.float32

FUSED_BF16_EXACT = """op {op}
n in 1..16
arithmetic {{ input = bf16 product = exact accumulator = fp32 init = none output = fp32
  fused {{ w = 4 extra_bits = 2 aligned = truncate result = rz c_aligned = true exponent_floor = -133 }} }}
order {order}
"""
FP32_FMA = """op dot
n in 1..16
arithmetic {{ input = fp32 product = fma accumulator = fp32 init = none output = fp32 }}
order {order}
"""
BF16_FMA_PART = """op dot
n in 1..16
arithmetic {{ input = bf16 product = fma accumulator = fp32 init = none output = fp32 }}
arithmetic part0 {{ accumulator = bf16 product = fma }}
order {order}
"""
FP64_PARTS = """op dot
n in 1..16
arithmetic { input = fp32 product = fma accumulator = fp64 init = none output = fp32 }
arithmetic part0 { accumulator = fp32 product = rounded }
arithmetic part1 { accumulator = fp32 product = rounded }
order blocks(3, seq, using(part1, lanes(2, using(part0, seq), seq)))
"""

# products 2^160 and -2^160 (beyond fp32), then 1: the first node's exact sum is 0
BEYOND = (np.array([2.0 ** 100, 2.0 ** 100, 1.0], F32), np.array([2.0 ** 60, -2.0 ** 60, 1.0], F32))
# (0 1) = -1 + 0, then the leaf 1 + 2^-11 + 2^-24 (a tie in fp32: rounded alone, 1 + 2^-11)
FMA_LEAF = (np.array([-1.0, 0.0, 1 + 2.0 ** -12], F32), np.array([1.0, 0.0, 1 + 2.0 ** -12], F32))
# body ((0 1) 2) = 1 + 2^-8 + 2^-20 (fp32); the part adds (3 4) = -2^-19: 1 + 2^-8 - 2^-20, which
# is 1 in bf16 (the body rounded to bf16 first is 1 + 2^-7, and so is the sum)
PHANTOM = (np.array([1.0, 2.0 ** -8, 2.0 ** -10, -2.0 ** -10, 0.0], F32),
           np.array([1.0, 1.0, 2.0 ** -10, 2.0 ** -9, 0.0], F32))
# blocks b0 = 0, b1 = 1 + 2^-24 + 2^-40 (fp64), b2 = leaf 6 = -0.5; ((b0 6) b1) in fp32 parts
LONE_WIDE = (np.array([0.0, 0.0, 0.0, 1.0, 2.0 ** -12, 2.0 ** -20, -0.5], F32),
             np.array([0.0, 0.0, 0.0, 1.0, 2.0 ** -12, 2.0 ** -20, 1.0], F32))
# 10 terms on bf16's grid: products beyond fp32's range that cancel in pairs, each pair in one
# lane and one fused node (a replica rounding them to fp32 first gets inf - inf = nan)
RNG = np.random.default_rng(7)
WIDE = ((np.repeat(np.ldexp(1.0, RNG.integers(70, 120, 5)), 2) * np.array([1.0, -1.0] * 5)).astype(F32),
        np.repeat(np.ldexp(1.0, RNG.integers(40, 100, 5)), 2).astype(F32))
# 11 terms on bf16's grid of mixed magnitudes (an FMA into a bf16 part rounds other bits than fp32)
MIXED = ((RNG.integers(-128, 128, 11) * np.ldexp(1.0, RNG.integers(-12, 12, 11))).astype(F32),
         (RNG.integers(-128, 128, 11) * np.ldexp(1.0, RNG.integers(-12, 12, 11))).astype(F32))

# name -> (spec text, target, public function, arguments, the bits worked out by hand or None)
CALLS = {
    "fused_exact_seq_gemm": (FUSED_BF16_EXACT.format(op="gemm", order="seq"), "numpy", "gemm",
                             (BEYOND[0][None, :], BEYOND[1][:, None]), 1.0),
    "fused_exact_pairwise": (FUSED_BF16_EXACT.format(op="dot", order="pairwise(n - 1)"), "numpy", "dot",
                             BEYOND, 1.0),
    "vlanes_tagged_values": (FP32_FMA.format(order="tail(2, seq, vlanes(1, 1, seq, seq))"), "numpy", "dot",
                             FMA_LEAF, 2.0 ** -11 + 2.0 ** -24),
    "vlanes_tagged_values_numba": (FP32_FMA.format(order="tail(2, seq, vlanes(1, 1, seq, seq))"), "numba",
                                   "dot", FMA_LEAF, 2.0 ** -11 + 2.0 ** -24),
    "vlanes_fma_leaves": (FP32_FMA.format(order="vlanes(1, 3, seq, seq)"), "numpy", "dot", FMA_LEAF,
                          2.0 ** -11 + 2.0 ** -24),
    "vlanes_fused_leaves": (FUSED_BF16_EXACT.format(op="dot", order="vlanes(2, 2, chain(4), seq)"), "numpy",
                            "dot", WIDE, 0.0),
    "vlanes_part_leaves": (BF16_FMA_PART.format(order="vlanes(2, 3, using(part0, seq), pairwise)"), "numpy",
                           "dot", MIXED, None),
    "phantom_in_part": (BF16_FMA_PART.format(order="tail(3, seq, pad(2, using(part0, pairwise)))"), "numpy",
                        "dot", PHANTOM, 1.0),
    "lone_wide_value_in_part": (FP64_PARTS, "numpy", "dot", LONE_WIDE, 0.5 + 2.0 ** -24),
}


@pytest.fixture(scope="module")
def fresh(tmp_path_factory):
    """name -> (the replica's outputs in a fresh interpreter, the reference, the hand value)."""
    specs = {name: parse(text) for name, (text, *_) in CALLS.items()}
    calls = [(compile_spec(specs[name], target=target), function, args)
             for name, (_, target, function, args, _) in CALLS.items()]
    outputs = run_fresh(calls, tmp_path_factory.mktemp("found_leaves"))
    return {name: (got, reference_outputs(specs[name], function, args), hand)
            for (name, (_, _, function, args, hand)), got in zip(CALLS.items(), outputs)}


@pytest.mark.parametrize("name", list(CALLS))
def test_replica_bits_equal_the_reference(fresh, name):
    got, want, hand = fresh[name]
    if hand is not None:
        assert want.tolist() == [hand]
    else:
        assert np.isfinite(want).all() and want.tolist() != [0.0]
    assert_fresh_bits(got, want, name)


def test_numba_refuses_exact_products_beyond_fp32_in_one_line():
    # the numba runtime has no node that rounds an exact sum of bf16 products once
    with pytest.raises(CompileError, match="use --target numpy"):
        compile_spec(parse(FUSED_BF16_EXACT.format(op="dot", order="seq")), target="numba")


@pytest.mark.parametrize("order,n,exact", [
    ("chain(4)", "1..16", False),                       # every leaf goes to a fused node (or alone to the result)
    ("if n <= 4: fused else: chain(4)", "1..16", False),
    ("blocks(4, chain(4), seq)", "8", False),           # at n = 8 no block is one leaf
    ("blocks(4, chain(4), seq)", "9", True),            # at n = 9 the last block is one leaf: a binary node takes it
    ("seq", "1..16", True),
])
def test_exact_products_take_the_exact_path_only_where_a_binary_node_takes_a_leaf(order, n, exact):
    from fpspec.compile.build import build_kernel
    from fpspec.compile.numerics import plan

    spec = parse(FUSED_BF16_EXACT.format(op="dot", order=order).replace("n in 1..16", f"n in {n}"))
    assert plan(build_kernel(spec)).exact_products is exact
    if exact:
        with pytest.raises(CompileError, match="use --target numpy"):
            compile_spec(spec, target="numba")
    else:
        assert "def dot(" in compile_spec(spec, target="numba")
