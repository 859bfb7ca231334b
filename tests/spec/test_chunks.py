"""chunks(SIZE, INNER, OUTER), lanes(K, INNER, OUTER, LEFT, U) and (if ...)
expressions: OpenBLAS sgemm's order along K (numpy.matmul, float32)."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fpspec.errors import SpecError
from fpspec.spec import ast as A
from fpspec.spec import check, expand, lower, parse
from fpspec.tree import Node, format_tree, observable, sequential

SGEMM = "chunks((if n >= 640: 320 elif n > 320: (n // 2 + 7) // 8 * 8 else: n), lanes(2, seq, seq, seq, 8), seq)"
TEXT = f"n in 1..\n\norder {SGEMM}\n"


def sgemm_k(n: int, q: int = 320, unroll: int = 8):
    """The order written out as OpenBLAS's C loops (independent of the language)."""
    acc, start, left = None, 0, n
    while left:
        s = q if left >= 2 * q else ((left // 2 + unroll - 1) // unroll) * unroll if left > q else left
        p = s - s % unroll
        if p == 0:
            c = sequential(range(start, start + s))
        else:
            a0, a1 = sequential(range(start, start + p, 2)), sequential(range(start + 1, start + p, 2))
            for i in range(start + p, start + s):
                a0 = Node((a0, i))
            c = Node((a0, a1))
        acc = c if acc is None else Node((acc, c))
        start, left = start + s, left - s
    return acc


def test_canonical_text_round_trips():
    spec = parse(TEXT)
    assert str(spec) == TEXT
    assert parse(str(spec)) == spec
    size = spec.order.size
    assert isinstance(size, A.IfExpr) and isinstance(size.otherwise, A.IfExpr)   # elif nests in else
    assert spec.order.inner == A.Lanes(A.Num(2), A.Seq(), A.Seq(), A.Seq(), A.Num(8))


def test_exact_trees():
    spec = parse(TEXT)
    assert format_tree(expand(spec, 15)) == "(((((((((((0 2) 4) 6) 8) 9) 10) 11) 12) 13) 14) (((1 3) 5) 7))"
    assert format_tree(expand(spec, 7)) == "((((((0 1) 2) 3) 4) 5) 6)"
    # 384 = 192 + 192; 1000 = 320 + 320 + 184 + 176, added one after the other
    t = expand(spec, 1000)
    assert [x.size for x in (t.children[0].children[0].children[0], t.children[0].children[0].children[1],
                             t.children[0].children[1], t.children[1])] == [320, 320, 184, 176]
    for n in [*range(1, 40), 255, 256, 320, 321, 384, 500, 511, 513, 639, 640, 641, 700, 1000, 1300]:
        assert expand(spec, n) == sgemm_k(n), n


def test_if_expression_inside_arithmetic_keeps_its_parentheses():
    text = "n in 1..64\n\norder blocks((if n > 32: 16 else: 4) * 2, seq, seq)\n"
    spec = parse(text)
    assert str(spec) == text
    assert expand(spec, 40) == expand(parse("n in 1..64\norder blocks(32, seq, seq)\n"), 40)
    assert expand(spec, 20) == expand(parse("n in 1..64\norder blocks(8, seq, seq)\n"), 20)


def test_pad_puts_phantoms_after_the_partial_vector():
    spec = parse("n in 1..\n\norder pad(8, lanes(8, seq, lanes(4, seq, pairwise)))\n")
    assert str(spec) == "n in 1..\n\norder pad(8, lanes(8, seq, lanes(4, seq, pairwise)))\n"
    # 12 = 4 + 8: terms 0..3 in lanes 0..3 first, phantoms in lanes 4..7, then 4..11 in all 8
    assert format_tree(expand(spec, 12)) == "((((0 4) 8) ((1 5) 9)) (((2 6) 10) ((3 7) 11)))"
    assert format_tree(expand(spec, 4)) == "((0 1) (2 3))"
    assert expand(spec, 16) == expand(parse("n in 1..\norder lanes(8, seq, lanes(4, seq, pairwise))\n"), 16)


@pytest.mark.parametrize("text, message", [
    ("n in 1..64\norder lanes(2, seq, seq, seq, 3)\n",
     "x.fps:2:31: lanes unroll 3 = 3 at n = 2 is not a multiple of the lane count 2; expected a multiple of K"),
    ("n in 1..64\norder chunks(n + 1, seq, seq)\n",
     "x.fps:2:14: chunk size n + 1 = 3 with 2 operands left; expected 1 <= size <= 2"),
    ("n in 1..64\norder chunks((if n > 8: 8 else: 0), seq, seq)\n",
     "x.fps:2:15: chunk size (if n > 8: 8 else: 0) = 0 with 2 operands left; expected 1 <= size <= 2"),
    ("n in 1..64\norder pad(n - 2, seq)\n",
     "x.fps:2:11: pad multiple n - 2 = 0 at n = 2; expected an integer >= 1"),
])
def test_errors(text, message):
    with pytest.raises(SpecError) as e:
        check(parse(text, "x.fps"))
    assert str(e.value) == message


def test_lowering_finds_the_unrolled_lanes_and_the_chunks():
    assert str(lower(sgemm_k(15)).order) == "lanes(2, seq, seq, seq, 8)"
    assert str(lower(sgemm_k(100)).order) == "lanes(2, seq, seq, seq, 8)"
    from fpspec.spec.lower import _Lowerer

    [c] = _Lowerer()._chunks(sgemm_k(1300), 1300)   # one tree: the rule read off its 5 chunks
    assert str(c.order) == SGEMM


# ---------------------------------------------------------------- properties

@st.composite
def sgemm_like(draw):
    q = draw(st.sampled_from([8, 16, 24, 40]))
    unit = draw(st.sampled_from([1, 2, 4, 8]))
    k = draw(st.sampled_from([1, 2, 4]))
    u = k * draw(st.sampled_from([1, 2, 4]))
    half = A.BinOp("*", A.BinOp("//", A.BinOp("+", A.BinOp("//", A.Var(), A.Num(2)), A.Num(unit - 1)),
                                A.Num(unit)), A.Num(unit))
    size = A.IfExpr(A.Compare(">=", A.Var(), A.Num(2 * q)), A.Num(q),
                    A.IfExpr(A.Compare(">", A.Var(), A.Num(q)), half, A.Var()))
    inner = A.Lanes(A.Num(k), A.Seq(), A.Seq(), A.Seq(), A.Num(u)) if k > 1 else A.Seq()
    if draw(st.booleans()):   # a partial vector first (OpenBLAS sgemv_t)
        inner = A.Pad(A.Num(draw(st.sampled_from([2, 4, 8]))), inner)
    return A.Spec(A.Header(n=A.Range(1, None)), (), A.Chunks(size, inner, A.Seq()))


@settings(max_examples=30, deadline=None)
@given(sgemm_like(), st.integers(1, 200))
def test_text_ast_text_and_tree_spec_tree(spec, n):
    text = str(spec)
    assert parse(text) == spec and str(parse(text)) == text
    tree = expand(spec, n)
    assert expand(lower(tree), n) == tree
    assert expand(lower(observable(tree), observed=True), n) == observable(tree)
