"""fpspec.arith.evaluate with arithmetic per node (note [regions])."""
import numpy as np

from fpspec.arith.evaluate import evaluate
from fpspec.arith.model import Arithmetic
from fpspec.formats import fma, get_format, round_to
from fpspec.tree import parse_tree

FP32, FP64 = get_format("fp32"), get_format("fp64")
LOOP = Arithmetic("fp32", "rounded", "fp64", "none", "fp32", product_format="fp32")
FMA32 = Arithmetic("fp32", "fma", "fp32", "none", "fp32")


def test_a_node_forms_its_leaves_in_its_own_arithmetic():
    """((0 1) 2): the inner node is an fp32 FMA, the root adds in fp64 a product rounded to fp32."""
    rng = np.random.default_rng(0)
    x, y = (rng.uniform(-1, 1, (2, 3, 500)).astype(np.float32)).astype(np.float64)
    tree = parse_tree("((0 1) 2)")
    inner = fma(FP32, x[1], y[1], round_to(FP32, x[0] * y[0]))
    want = round_to(FP32, inner + round_to(FP32, x[2] * y[2]))
    got = evaluate(tree, x, y, LOOP, {(0, 2): FMA32})
    assert np.array_equal(got, want)
    # in one arithmetic for the whole tree the bits differ on some inputs: the regions matter here
    assert (evaluate(tree, x, y, LOOP) != want).sum() > 5
    assert (evaluate(tree, x, y, FMA32) != want).sum() > 5


def test_a_node_narrower_than_its_child_rounds_the_exact_sum_once():
    """(0 (1 2)) with the inner node in fp64 and the root in fp32: 1 + (2^-24 + 2^-60)
    rounds up to 1 + 2^-23; rounding to fp64 first would give a tie, and 1.0."""
    sums = Arithmetic("fp32", "none", "fp32", "none", "fp32")
    wide = Arithmetic("fp32", "none", "fp64", "none", "fp32")
    x = np.array([1.0, 2.0 ** -24, 2.0 ** -60])
    tree = parse_tree("(0 (1 2))")
    assert evaluate(tree, x, None, sums, {(1, 2): wide}) == 1 + 2.0 ** -23
    assert float(np.float32(np.float64(1.0) + (2.0 ** -24 + 2.0 ** -60))) == 1.0


def test_init_and_output_belong_to_the_whole_accumulation():
    main = Arithmetic("fp32", "rounded", "fp64", "+0.0", "fp32", product_format="fp32")
    part = Arithmetic("fp32", "fma", "fp32", "+0.0", "fp32")
    x = np.array([-0.0, -0.0, -0.0])
    y = np.ones(3)
    got = evaluate(parse_tree("((0 1) 2)"), x, y, main, {(0, 2): part})
    assert got == 0.0 and not np.signbit(got)
