"""Golden text and exact trees for every construct of the .fps language."""
import pytest

from fpspec.spec import check, expand, parse
from fpspec.tree import format_tree

# (order as written, n, tree it gives)
GOLDEN = [
    ("seq", 4, "(((0 1) 2) 3)"),
    ("rev", 4, "(0 (1 (2 3)))"),
    ("pairwise", 5, "((0 1) (2 (3 4)))"),
    ("pairwise(n - 1)", 4, "(((0 1) 2) 3)"),
    ("pairwise(n - n // 2)", 5, "(((0 1) 2) (3 4))"),
    ("gpu_tree", 8, "(((0 4) (2 6)) ((1 5) (3 7)))"),
    ("gpu_tree", 5, "(((0 3) 2) (1 4))"),
    ("fused", 4, "[0 1 2 3]"),
    ("chain(3)", 8, "[[[0 1 2] 3 4 5] 6 7]"),
    ("chain(16)", 10, "[0 1 2 3 4 5 6 7 8 9]"),
    ("chain(2)", 5, "[[[0 1] 2 3] 4]"),
    ("lanes(3, seq, seq)", 7, "((((0 3) 6) (1 4)) (2 5))"),
    ("lanes(8, seq, gpu_tree)", 16, "((((0 8) (4 12)) ((2 10) (6 14))) (((1 9) (5 13)) ((3 11) (7 15))))"),
    ("lanes(8, seq, pairwise)", 16, "((((0 8) (1 9)) ((2 10) (3 11))) (((4 12) (5 13)) ((6 14) (7 15))))"),
    ("lanes(4, seq, seq)", 3, "((0 1) 2)"),
    ("blocks(3, seq, rev)", 7, "(((0 1) 2) (((3 4) 5) 6))"),
    ("blocks(16, fused, seq)", 20, "([0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15] [16 17 18 19])"),
    ("blocks(max(2, n // 4), seq, seq)", 8, "((((0 1) (2 3)) (4 5)) (6 7))"),
    ("split(2, seq, fused)", 5, "((0 1) [2 3 4])"),
    ("split(min(n - 1, 3), rev, seq)", 3, "((0 1) 2)"),
    ("tail(4, pairwise, seq)", 6, "((((0 1) (2 3)) 4) 5)"),
    ("tail(4, pairwise, seq)", 3, "((0 1) 2)"),
    ("tail(4, pairwise, rev)", 7, "(((0 1) (2 3)) (4 (5 6)))"),
    ("((0 1) [2 3 4])", 5, "((0 1) [2 3 4])"),
    ("lanes(2, ((0 1) 2), seq)", 6, "(((0 2) 4) ((1 3) 5))"),
    ("if n < 3: rev else: seq", 4, "(((0 1) 2) 3)"),
    ("if n < 3: rev elif n == 4: pairwise else: seq", 4, "((0 1) (2 3))"),
    ("if n > 2 and n < 5 or n == 9: rev else: seq", 4, "(0 (1 (2 3)))"),
    ("seq", 1, "0"),
    ("chain(4)", 1, "0"),
]


@pytest.mark.parametrize("order, n, tree", GOLDEN)
def test_construct_gives_exact_tree(order, n, tree):
    spec = parse(f"n in {n}\norder {order}\n")
    check(spec)
    assert format_tree(expand(spec, n)) == tree


@pytest.mark.parametrize("order, n, tree", GOLDEN)
def test_construct_text_is_canonical(order, n, tree):
    text = f"n in {n}\n\norder {order}\n"
    if order.startswith("if "):  # a guard at the top gets one arm a line
        text = f"n in {n}\n\norder\n    " + order.replace(" elif", "\n    elif").replace(" else", "\n    else") + "\n"
    assert str(parse(text)) == text


NUMPY_SUM = '''target "numpy.sum"
op sum
n in 1..

provenance {
    numpy = "2.4.0"
    device = "x86-64"
}

arithmetic {
    input = fp32
    accumulator = fp32
    init = +0.0
    output = fp32
}

let pairwise_sum =
    if n < 8: seq
    elif n <= 128: tail(8, lanes(8, seq, pairwise), seq)
    else: split(n // 2 - n // 2 % 8, pairwise_sum, pairwise_sum)

order pairwise_sum
'''


def test_numpy_sum_spec_is_canonical_and_gives_design_trees():
    spec = parse(NUMPY_SUM)
    check(spec)
    assert str(spec) == NUMPY_SUM
    assert format_tree(expand(spec, 8)) == "(((0 1) (2 3)) ((4 5) (6 7)))"
    assert format_tree(expand(spec, 9)) == "((((0 1) (2 3)) ((4 5) (6 7))) 8)"
    assert format_tree(expand(spec, 32)).startswith("((((((0 8) 16) 24) (((1 9) 17) 25))")
    t129 = expand(spec, 129)
    assert t129.children[0] == expand(spec, 64)          # halves split at a multiple of 8
    assert t129.children[1].size == 65


def test_named_block_entries_are_exposed():
    text = '''arithmetic {
    input = fp16
    product = exact
    init = -0.0
    scale = 1.5e-08
    count = -133
    note = "a \\"quoted\\" word"
    on = true
    fused { w = 16  extra_bits = 2  aligned = truncate  c_aligned = false }
}
order seq
'''
    from fpspec.spec import Block, Entry, Float, Ident

    a = parse(text).header.arithmetic
    assert a.entries[0] == Entry("input", Ident("fp16"))
    assert a.get("init") == Float("-0.0") and a.get("init") != Float("+0.0")
    assert a.get("scale").value == 1.5e-08
    assert a.get("count") == -133
    assert a.get("note") == 'a "quoted" word'
    assert a.get("on") is True
    fused = a.get("fused")
    assert isinstance(fused, Block) and fused.get("w") == 16 and fused.get("c_aligned") is False
    assert fused.get("aligned") == Ident("truncate")
    spec = parse(text)
    assert parse(str(spec)) == spec


def test_header_round_trips():
    text = 'target "torch.matmul"\nop gemm\nn in 4096\n\norder chain(16)\n'
    spec = parse(text)
    assert (spec.header.target, spec.header.op, spec.header.n.lo, spec.header.n.hi) == ("torch.matmul", "gemm", 4096, 4096)
    assert str(spec) == text
    assert parse("n in 8..\norder seq").header.n.hi is None


def test_locations_do_not_affect_equality():
    a = parse("n in 1..8\norder lanes(8, seq, seq)\n")
    b = parse("n in 1..8\n\n\n   order   lanes( 8 ,seq,seq )")
    assert a == b
    assert a.order.loc.line == 2 and b.order.loc.line == 4


def test_spec_hash_and_diff_specs():
    from fpspec.spec import diff_specs, spec_hash

    a = parse("n in 1..64\norder lanes(8, seq, pairwise)")
    b = parse("n in 1..64\norder lanes(8, seq, gpu_tree)")
    assert spec_hash(a) == spec_hash(parse(str(a))) and spec_hash(a) != spec_hash(b)
    assert diff_specs(a, b, 2) is None          # 2 lanes of one: pairwise == gpu_tree
    d = diff_specs(a, b, 16)
    assert d is not None and d.path == ()


def test_chain_with_the_short_group_inside_expands_exactly():
    from fpspec.spec import expand, parse
    from fpspec.tree import format_tree

    spec = parse("op sum\norder chain(4, n % 8 // 4)")
    assert format_tree(expand(spec, 10)) == "[[[0 1] 2 3 4 5] 6 7 8 9]"      # 10 % 8 // 4 = 0: first
    assert format_tree(expand(spec, 13)) == "[[[[0 1 2 3] 4] 5 6 7 8] 9 10 11 12]"  # 13 % 8 // 4 = 1
    assert format_tree(expand(spec, 9)) == "[[0 1 2 3 4] 5 6 7 8]"          # a first group of one
    assert str(parse(str(spec))) == str(spec) and "chain(4, n % 8 // 4)" in str(spec)


def test_chain_short_group_index_must_not_be_negative():
    from fpspec.errors import SpecError
    from fpspec.spec import check, parse

    with pytest.raises(SpecError, match=r"chain short-group index .* = -1 at n = 10"):
        check(parse("op sum\nn in 10..10\norder chain(4, n - 11)"))
