"""A chain whose first group is one operand: in a chain narrower than the fused nodes that
operand joins the next node, one node of width + 1 products (fpspec.arith.evaluate note [fused
nodes]; triton_host Note [first node of one more]).  The Triton replicas compute it, at every n
that gives the shape: run as a user runs them (tests/fresh_replicas.py), exact bits against
the reference evaluation."""
import numpy as np
import pytest
from fresh_replicas import assert_fresh_bits, reference_outputs, run_fresh

from fpspec.compile import compile_spec
from fpspec.compile.backends.triton import plan_lengths
from fpspec.spec import check, parse
from fpspec.spec.expand import expand_arith
from fpspec.tree import format_tree

pytest.importorskip("triton")
torch = pytest.importorskip("torch")

ARITH = """arithmetic {{
    input = fp16 product = fma accumulator = fp32 init = none output = fp32
    fused {{ w = {w} extra_bits = 2 aligned = truncate result = rz c_aligned = true exponent_floor = -133 }}
}}
"""
# the short group sits first where n % 32 < 16: at n = 5 and n = 97 it is one operand
FIRST_OF_FIVE = "op OP\nn in 5..1100\n" + ARITH.format(w=16) + "order chain(4, n % 32 // 16)\n"
# the shape at multiples of 97 only (at = n % 97 is 0 there; below 97 the short group is last):
# no n the compiler plans shows it
ONLY_AT_97 = "op OP\nn in 1..4096\n" + ARITH.format(w=16) + "order chain(4, n % 97)\n"
# the chain as wide as the fused nodes: the one operand is a node alone, its result the next's c
AS_WIDE = "op OP\nn in 5\n" + ARITH.format(w=4) + "order chain(4, 0)\n"


def spec_of(text, op):
    s = parse(text.replace("OP", op))
    check(s)
    return s


def inputs(n, rows=3, cols=2):
    """fp16 A (rows x n), B (n x cols).  A[0] . B[:, 0] is 1.5 * 1.5 + 2^-24 * -0.5 and zeros:
    2.25 aligns at its product exponent 0 (fpspec.arith.fused note [unnormalised product]), so
    in one node with the other -2^-25 stays on the node's grid and rz gives 2.25 - 2^-22; as
    the c of a node of its own, 2.25 has exponent 1 and the -2^-25 truncates away: 2.25."""
    rng = np.random.default_rng(n)
    A = rng.uniform(-2, 2, (rows, n)).astype(np.float16)
    B = rng.uniform(-2, 2, (n, cols)).astype(np.float16)
    A[0] = 0
    B[:, 0] = 0
    A[0, :2] = [1.5, 2.0 ** -24]
    B[:2, 0] = [1.5, -0.5]
    return A, B


CASES = [(FIRST_OF_FIVE, 5), (FIRST_OF_FIVE, 97), (ONLY_AT_97, 97), (AS_WIDE, 5)]


@pytest.fixture(scope="module")
def fresh(tmp_path_factory):
    """(spec text, n, op) -> (the Triton replica's outputs in a fresh interpreter, the reference)."""
    calls, keys, want = [], [], []
    for text, n in CASES:
        A, B = inputs(n)
        for op, args in (("gemm", (A, B)), ("dot", (A[0], B[:, 0]))):
            spec = spec_of(text, op)
            calls.append((compile_spec(spec, target="triton"), op, args, "float16"))
            keys.append((text, n, op))
            want.append(reference_outputs(spec, op, args))
    got = run_fresh(calls, tmp_path_factory.mktemp("chain_first_node"))
    return dict(zip(keys, zip(got, want)))


@pytest.mark.parametrize("op", ["gemm", "dot"])
@pytest.mark.parametrize("n", [5, 97])
def test_a_first_node_of_width_plus_one_is_computed(fresh, op, n):
    spec = spec_of(FIRST_OF_FIVE, op)
    tree = format_tree(expand_arith(spec, n)[0])
    assert tree == "[0 1 2 3 4]" if n == 5 else tree.startswith("[" * 24 + "0 1 2 3 4] 5 6 7 8] 9 ")
    got, want = fresh[FIRST_OF_FIVE, n, op]
    assert want[0] == 2.25 - 2.0 ** -22       # one node of the first five products
    assert_fresh_bits(got, want, f"{op} at n = {n}")


def test_the_first_nodes_of_a_long_chain_hold_five_then_four():
    tree = format_tree(expand_arith(spec_of(FIRST_OF_FIVE, "dot"), 13)[0])
    assert tree == "[[[0 1 2 3 4] 5 6 7 8] 9 10 11 12]"


@pytest.mark.parametrize("op", ["gemm", "dot"])
def test_the_shape_at_an_n_the_compiler_does_not_plan(fresh, op):
    assert 97 not in plan_lengths(1, 4096)
    assert format_tree(expand_arith(spec_of(ONLY_AT_97, op), 97)[0]).startswith("[" * 24 + "0 1 2 3 4] 5 ")
    got, want = fresh[ONLY_AT_97, 97, op]
    assert want[0] == 2.25 - 2.0 ** -22
    assert_fresh_bits(got, want, f"{op} at n = 97")


@pytest.mark.parametrize("op", ["gemm", "dot"])
def test_a_chain_as_wide_as_the_nodes_takes_the_one_operand_alone(fresh, op):
    assert format_tree(expand_arith(spec_of(AS_WIDE, op), 5)[0]) == "[0 1 2 3 4]"
    got, want = fresh[AS_WIDE, 5, op]
    assert want[0] == 2.25                     # 2.25 alone, then the c of the next node
    assert_fresh_bits(got, want, op)


@pytest.mark.parametrize("fmt,arith", [("fp16", 1), ("bf16", 2)])
def test_the_gpu_form_makes_the_first_node_of_width_plus_one(load_replica, fmt, arith):
    """The chain kernel a GPU runs (its tile form), forced onto the interpreter: the first node's
    five products in a block of 8 lanes.  fp16 with ARITH 1 and no inf or nan takes the finite
    chain (Note [finite fp16 node]); an inf in A sends its tile (rows 16..) through the general
    loop.  Rows 0 and 16 against column 0 are the products of `inputs`, one per tile."""
    from test_replica import bits_equal, reference_matmul, values

    from fpspec.arith import Arithmetic, get_params
    from fpspec.compile.ir import Const, FusedChain, Kernel
    from fpspec.compile.trees import tree_of

    ar = Arithmetic(input=fmt, product="exact", accumulator="fp32", init="none", output="fp32",
                    fused=get_params(f"h100-{fmt}"))
    kernel = Kernel("gemm", ar, FusedChain(Const(4), Const(0)))
    assert format_tree(tree_of(kernel, 13)) == "[[[0 1 2 3 4] 5 6 7 8] 9 10 11 12]"
    rep = load_replica(kernel)
    rep.REPLICA.emulated_kernel, rep.REPLICA.emulated_arith = "tile", arith
    rep.REPLICA.emulated_specials = "tile"
    rng = np.random.default_rng(5)
    A, B = values(rng, fmt, (18, 21), 10), values(rng, fmt, (21, 3), 10)
    A[[0, 16]] = 0
    B[:, 0] = 0
    A[0, :2] = A[16, :2] = torch.tensor([1.5, 2.0 ** -24])
    B[:2, 0] = torch.tensor([1.5, -0.5])
    want = reference_matmul(kernel, A, B)
    assert want[0, 0] == want[16, 0] == 2.25 - 2.0 ** -22
    assert bits_equal(rep.gemm(A, B), want)
    A[17, 2] = float("inf")
    assert bits_equal(rep.gemm(A, B), reference_matmul(kernel, A, B))
