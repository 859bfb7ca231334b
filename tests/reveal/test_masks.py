"""Mask value M and unit u per format: derived, representable, swamping, exact counts."""
import dataclasses

import numpy as np
import pytest

from fpspec.errors import RevealRefused
from fpspec.formats import add, get_format, round_to
from fpspec.reveal import synthetic as S
from fpspec.reveal.masks import plan_masks
from fpspec.tree import sequential


@pytest.mark.parametrize("fmt", ["fp64", "fp32", "fp16", "bf16"])
@pytest.mark.parametrize("op", ["sum", "dot"])
@pytest.mark.parametrize("n", [8, 1000, 3000])
def test_plan_is_sound(fmt, op, n):
    target = (S.sum_target if op == "sum" else S.dot_target)(sequential(range(n)), fmt)
    p = plan_masks(target)
    f, acc, out = get_format(fmt), get_format(p.acc), get_format(p.out)
    for v in (p.a_mask, p.b_mask, p.a_unit, p.b_unit):
        assert round_to(f, v) == v                       # operands exist in the input format
    assert p.M == p.a_mask * p.b_mask and p.u == p.a_unit * p.b_unit
    assert add(acc, p.M, p.window * p.u) == p.M          # every partial sum of units is swamped
    assert round_to(out, p.window * p.u) == p.window * p.u   # the largest count is exact
    assert p.window >= min(n - 2, 2 ** out.precision - 1) or fmt in ("fp16", "bf16")


def test_fp16_products_split_the_mask_across_operands():
    # split: sqrt(M) in each operand, so the unit product is made of normal fp16 numbers
    target = S.dot_target(sequential(range(3000)), "fp16")
    split, whole = plan_masks(target, split=True), plan_masks(target, split=False)
    assert split.split and not whole.split
    assert split.M == 2.0**30 and whole.M == 2.0**15
    assert min(split.a_unit, split.b_unit) >= 2.0**-14 > whole.a_unit
    assert split.window == whole.window == 2047        # fp16 output counts to 2047


def test_fp8_products_need_the_split():
    # fp8 inputs, fp32 output (as fp8 matrix products give): only sqrt(M) * sqrt(M) has room
    target = dataclasses.replace(S.dot_target(sequential(range(8)), "fp8e4m3"), out_fmt="fp32")
    p = plan_masks(target)
    assert p.split and p.M == 2.0**16 and p.window >= 6


def test_fp8_sum_has_no_room():
    with pytest.raises(RevealRefused, match="too large for the format"):
        plan_masks(S.sum_target(sequential(range(8)), "fp8e4m3"))


def test_split_masks_keep_the_product_finite_in_fp32():
    """fp32 and bf16 inputs: each mask at most 2^63, so the product of the two fits fp32 (a kernel
    that multiplies in fp32 made 2^127 * 2^127 = inf, and inf * 0 nan: numpy.dot -n 8 --masks split)."""
    for fmt in ("fp32", "bf16"):
        p = plan_masks(S.dot_target(sequential(range(8)), fmt), split=True)
        assert p.a_mask * p.b_mask <= 2.0**126, fmt
    from fpspec.reveal.engine import reveal
    from fpspec.reveal.targets import resolve_target

    t = resolve_target("numpy.dot", n=12)
    assert reveal(t, split=True).tree == reveal(t, split=False).tree


def test_masks_that_overflow_a_narrower_part_are_asked_again_within_it():
    """An fp32 part of an fp64 sum turns 2^1023 masks into inf: the reveal asks again with
    masks fp32 holds and gets the tree."""
    from fpspec.infer.roundtrip import replica_target
    from fpspec.reveal.engine import reveal
    from fpspec.reveal.masks import plan_masks
    from fpspec.spec import parse
    from fpspec.spec.expand import expand_arith
    from fpspec.tree import observable

    spec = parse("op sum\nn in 2..\narithmetic { input = fp64 product = none accumulator = fp64 init = none "
                 "output = fp64 }\narithmetic part0 { accumulator = fp32 }\n"
                 "order split(3, using(part0, rev), pairwise)\n")
    target = replica_target(spec, box="numpy")(9)
    assert plan_masks(target).M > 2.0 ** 128   # the fp64 plan's masks are beyond fp32
    assert plan_masks(target, within="fp32").M == 2.0 ** 126
    got = reveal(target)
    assert got.tree == observable(expand_arith(spec, 9)[0])
    assert got.plan.startswith("M = 2^126")


def _two_format_gemm(n, fmt_a, fmt_b, tree):
    """A gemm (4x4) whose B is read in its own format: fn refuses a B value that format does not
    hold (as a replica of fused input_b does; torch._scaled_mm turns it into nan), else the
    fused model of the H100's two-format fp8 unit in `tree`."""
    from fpspec.arith.evaluate import evaluate
    from fpspec.arith.model import Arithmetic
    from fpspec.arith.params import PARAMS
    from fpspec.reveal.targets import from_callable

    params = dataclasses.replace(PARAMS[f"h100-{fmt_a}x{fmt_b}"], exponent_floor=None)
    arith = Arithmetic(input=fmt_a, product="exact", accumulator="fp32", init="none", output="fp32", fused=params)
    fb = get_format(fmt_b)

    def gemm(A, B):
        assert (round_to(fb, B) == B).all(), "B holds values that are not fp8e4m3 values"
        X, Y = np.repeat(A.T, B.shape[1], axis=1), np.tile(B, (1, A.shape[0]))
        return np.asarray(evaluate(tree, X, Y, arith)).reshape(A.shape[0], B.shape[1])

    target = from_callable(gemm, op="gemm", n=n, dtype=fmt_a, m=4, ncols=4, out_fmt="fp32")
    return dataclasses.replace(target, fmt_b=fmt_b)


@pytest.mark.parametrize("fmt_a,fmt_b", [("fp8e5m2", "fp8e4m3"), ("fp8e4m3", "fp8e5m2")])
def test_split_masks_hold_in_each_operands_format(fmt_a, fmt_b):
    # torch._scaled_mm e5m2 x e4m3: an e5m2 mask 2^15 in B is nan as e4m3
    p = plan_masks(_two_format_gemm(64, fmt_a, fmt_b, sequential(range(64))))
    fa, fb = get_format(fmt_a), get_format(fmt_b)
    assert p.split
    for v, f in ((p.a_mask, fa), (p.a_unit, fa), (p.b_mask, fb), (p.b_unit, fb)):
        assert round_to(f, v) == v and v >= f.smallest_subnormal
    assert (p.M, p.u, p.window) == (2.0**16, 2.0**-18, 64)


def test_a_two_format_gemm_reveals_its_chain():
    from fpspec.reveal.engine import reveal
    from fpspec.spec import parse
    from fpspec.spec.expand import expand

    chain = expand(parse('target "t"\nop gemm\nn in 64\n\norder chain(32)\n'), 64)
    assert reveal(_two_format_gemm(64, "fp8e5m2", "fp8e4m3", chain)).tree == chain
