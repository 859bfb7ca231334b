"""Arithmetic: spec entries round trip, errors naming the key, and the evaluation of whole trees."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fpspec.arith import PARAMS, Arithmetic, FusedParams, evaluate
from fpspec.errors import SpecError
from fpspec.tree import Node, parse_tree, random_tree, sequential

FORMATS = ("fp64", "fp32", "fp16", "bf16")

fused_params = st.builds(
    FusedParams,
    w=st.integers(1, 64), extra_bits=st.integers(-23, 30),
    aligned=st.sampled_from(("truncate", "floor", "rne")), result=st.sampled_from(("rz", "rne")),
    c_aligned=st.booleans(), exponent_floor=st.one_of(st.none(), st.integers(-200, 0)),
    subnormal_inputs=st.booleans(), subnormal_outputs=st.booleans(),
    input=st.sampled_from(("fp16", "bf16", "tf32")), output=st.just("fp32"))


@st.composite
def arithmetics(draw):
    product = draw(st.sampled_from(("exact", "rounded", "fma", "none")))
    fused = draw(st.one_of(st.none(), fused_params))
    inp = fused.input if fused else draw(st.sampled_from(FORMATS))
    pf = draw(st.sampled_from((None, "fp32", "fp16"))) if product == "rounded" else None
    return Arithmetic(inp, product, "fp32", draw(st.sampled_from(("none", "+0.0"))),
                      draw(st.sampled_from(FORMATS)), fused, pf)


@settings(max_examples=150, deadline=None)
@given(arithmetics())
def test_entries_round_trip(ar):
    assert Arithmetic.from_entries(ar.to_entries()) == ar
    # as plain (key, value) pairs too
    pairs = [(e.key, e.value) for e in ar.to_entries()]
    assert Arithmetic.from_entries(pairs) == ar


def test_entries_through_the_spec_text():
    from fpspec.spec.ast import Block

    ar = Arithmetic("fp16", "exact", "fp32", "+0.0", "fp16", PARAMS["h100-fp16"])
    text = str(Block("arithmetic", ar.to_entries()))
    assert "fused {" in text and "extra_bits = 2" in text and "init = +0.0" in text
    assert text.splitlines()[1].strip() == "input = fp16"


@pytest.mark.parametrize("entries,message", [
    ([("input", "fp99")], "input = fp99: unknown format"),
    ([("product", "fused")], "product = fused"),
    ([("init", "-0.0")], "init = -0.0"),
    ([("precision", "fp32")], "unknown key 'precision'"),
    ([("input", "fp16"), ("input", "fp32")], "input given twice"),
    ([("fused", [("w", 16)])], "extra_bits is required"),
    ([("fused", [("w", 16), ("extra_bits", 2), ("result", "ru")])], "result = 'ru'"),
    ([("fused", [("w", "sixteen"), ("extra_bits", 2)])], "w = 'sixteen': expected an integer"),
    ([("fused", [("w", 16), ("extra_bits", 2), ("sticky", True)])], "unknown key 'sticky'"),
    ([("product", "exact"), ("product_format", "fp16")], "product_format needs product = rounded"),
])
def test_bad_entries_name_the_key(entries, message):
    with pytest.raises(SpecError, match=message.replace("(", r"\(")):
        Arithmetic.from_entries(entries)


# ---------------------------------------------------------------- evaluation

def test_fma_versus_rounded_products():
    """(1 + 2^-12)^2 = 1 + 2^-11 + 2^-24: the fp32 rounding drops 2^-24, an FMA keeps it."""
    x = np.array([1.0 + 2.0 ** -12, -(1.0 + 2.0 ** -11)])
    y = np.array([1.0 + 2.0 ** -12, 1.0])
    t = Node((0, 1))
    rounded = Arithmetic("fp32", "rounded", "fp32")
    fma = Arithmetic("fp32", "fma", "fp32")
    exact = Arithmetic("fp32", "exact", "fp32")
    assert evaluate(t, x, y, rounded) == 0.0
    # note [which child is fused]: leaf 1 (the later) is fused, leaf 0 rounded first
    assert evaluate(t, x, y, fma) == 0.0
    assert evaluate(t, x[::-1], y[::-1], fma) == 2.0 ** -24
    assert evaluate(t, x, y, exact) == 2.0 ** -24 and evaluate(t, x[::-1], y[::-1], exact) == 2.0 ** -24
    # a product against a subtree: fma and exact both fuse it
    t3 = parse_tree("(0 (1 2))")
    x3 = np.array([1.0 + 2.0 ** -12, -(1.0 + 2.0 ** -11), 0.0])
    y3 = np.array([1.0 + 2.0 ** -12, 1.0, 1.0])
    assert evaluate(t3, x3, y3, fma) == 2.0 ** -24 and evaluate(t3, x3, y3, rounded) == 0.0
    # products rounded to fp32, added in fp64 (OpenBLAS sdot): the 2^-24 is gone before the add
    pf = Arithmetic("fp32", "rounded", "fp64", output="fp32", product_format="fp32")
    assert evaluate(t, x[::-1], y[::-1], pf) == 0.0
    assert evaluate(t, x[::-1], y[::-1], Arithmetic("fp32", "rounded", "fp64", output="fp32")) == 2.0 ** -24


def test_accumulator_and_output():
    t = sequential(range(3))
    x = np.array([1.0, 2.0 ** -12, -1.0])
    assert evaluate(t, x, None, Arithmetic("fp16", "none", "fp16", output="fp16")) == 0.0
    assert evaluate(t, x, None, Arithmetic("fp16", "none", "fp32", output="fp16")) == 2.0 ** -12
    # the final cast rounds to nearest even
    x = np.array([1.0, 2.0 ** -11, 2.0 ** -20])
    assert evaluate(t, x, None, Arithmetic("fp16", "none", "fp32", output="fp16")) == 1.0 + 2.0 ** -10


def test_signed_zeros_and_init():
    t = sequential(range(4))
    neg = -np.zeros(4)
    assert np.signbit(evaluate(t, neg, None, Arithmetic()))
    assert not np.signbit(evaluate(t, neg, None, Arithmetic(init="+0.0")))
    mixed = np.array([-0.0, 0.0, -0.0, -0.0])
    assert not np.signbit(evaluate(t, mixed, None, Arithmetic()))


@settings(max_examples=60, deadline=None)
@given(st.integers(2, 12), st.integers(0, 2 ** 32 - 1), st.data())
def test_init_anywhere_is_init_at_the_end(n, seed, data):
    """Note [init +0.0]: a +0.0 leaf anywhere in the tree == init = +0.0 (round to nearest)."""
    rng = np.random.default_rng(seed)
    t = random_tree(n, rng)
    where = data.draw(st.integers(0, n - 1))
    # the tree with one more leaf n (the +0.0) joined to leaf `where`
    from fpspec.tree import relabel

    t_init = relabel(t, {**{i: i for i in range(n)}, where: Node((where, n))})
    x = rng.choice([-0.0, 0.0, -1.0, 1.0, 2.0 ** -30, np.inf, -np.inf, np.nan], size=(n, 32))
    x[:, 0] = -0.0
    with np.errstate(invalid="ignore"):
        a = evaluate(t, x, None, Arithmetic(init="+0.0"))
        b = evaluate(t_init, np.vstack([x, np.zeros((1, 32))]), None, Arithmetic())
    assert np.array_equal(a, b, equal_nan=True) and np.array_equal(np.signbit(a), np.signbit(b))


def test_subnormals_and_specials_in_binary_nodes():
    t = Node((0, 1))
    tiny = 2.0 ** -149
    assert evaluate(t, np.array([3 * tiny, -tiny]), None, Arithmetic()) == 2 * tiny
    with np.errstate(invalid="ignore"):
        assert np.isnan(evaluate(t, np.array([np.inf, -np.inf]), None, Arithmetic()))
    assert evaluate(t, np.array([np.inf, 1.0]), None, Arithmetic()) == np.inf
    assert evaluate(t, np.array([2.0 ** 127, 2.0 ** 127]), None, Arithmetic()) == np.inf


def test_fused_tree_equals_the_chain():
    from arith_trees import chain

    from fpspec.arith import fused_chain

    rng = np.random.default_rng(3)
    x = rng.standard_normal((64, 20)).astype(np.float16).astype(np.float64)
    y = rng.standard_normal((64, 20)).astype(np.float16).astype(np.float64)
    ar = Arithmetic("fp16", "exact", "fp32", output="fp32", fused=PARAMS["h100-fp16"])
    got = evaluate(chain(64, 16), x, y, ar)
    assert np.array_equal(got, fused_chain(x.T, y.T, np.zeros(20), "h100-fp16"))
    with pytest.raises(Exception, match="no fused parameters"):
        evaluate(chain(64, 16), x, y, Arithmetic("fp16", "exact"))
