"""`check` refuses what no replica can run: orders without a base case, sizes
past int64, arithmetic sections that do not fit the op or the order, nesting
deeper than the compilers follow; and the parser reads what users write."""
from __future__ import annotations

import pytest

from fpspec.errors import SpecError
from fpspec.spec import check, expand, parse
from fpspec.tree import format_tree

ARITH = "arithmetic {{ input = {i}  product = {p}  accumulator = {a}  init = +0.0  output = {o}{f} }}\n"
FUSED = "  fused { w = 4  extra_bits = 2  aligned = truncate  result = rz }"

CASES = {
    # no base case (the one-operand rule alone ended the recursion)
    "halves": ("n in 1..64\nlet f = split(n // 2, f, f)\norder f\n",
               "x.fps:2:9: order 'f' has no base case: its recursion reaches one operand, where "
               "split(n // 2, f, f) has nothing to split; expected an arm for n == 1, such as "
               "`if n <= 1: seq else: ...`"),
    "peel": ("n in 1..64\nlet f = split(1, seq, f)\norder f\n",
             "x.fps:2:9: order 'f' has no base case: its recursion reaches one operand, where "
             "split(1, seq, f) has nothing to split; expected an arm for n == 1, such as `if n <= 1: seq else: ...`"),
    "lanes_self": ("n in 1..64\nlet g = lanes(2, g, seq)\norder g\n",
                   "x.fps:2:18: order 'g' has no base case: on one operand it calls itself again; expected an arm "
                   "for n == 1, such as `if n <= 1: seq else: ...`"),
    "mutual": ("n in 4..64\nlet f = split(n // 2, g, g)\nlet g = split(n // 2, f, f)\norder f\n",
               "x.fps:2:9: order 'f' has no base case: its recursion reaches one operand, where "
               "split(n // 2, g, g) has nothing to split; expected an arm for n == 1, such as "
               "`if n <= 1: seq else: ...`"),
    # numbers past int64
    "huge_lanes": ("n in 8\norder lanes(1000000000000000000000000000000, seq, seq)\n",
                   "x.fps:2:13: integer 1000000000000000000000000000000 is too large; expected at most 2^63 - 1"),
    "huge_size": ("n in 8\norder lanes(4611686018427387904 * 4, seq, seq)\n",
                  "x.fps:2:13: lanes count 4611686018427387904 * 4 = 18446744073709551616 at n = 8 is too large; "
                  "expected at most 2^63 - 1"),
    "huge_n": ("n in 1000000000000000000000000000000\norder seq\n",
               "x.fps:1:1: n in 1000000000000000000000000000000: 1000000000000000000000000000000 is too large; "
               "expected n <= 2^63 - 1"),
    "huge_leaf": ("n in 2\norder (0 99999999999999999999999)\n",
                  "x.fps:2:7: literal leaf 99999999999999999999999 is outside the tree's positions 0..1; "
                  "expected each of 0..1 once"),
    # arithmetic sections
    "unknown_format": ("op sum\nn in 8\n" + ARITH.format(i="fp32", p="none", a="fp7", o="fp32", f="") + "order seq\n",
                       "x.fps:3:44: arithmetic: accumulator = fp7: unknown format; expected one of "),
    "duplicate_key": ("op sum\nn in 8\narithmetic { input = fp32  product = none  product = none }\norder seq\n",
                      "x.fps:3:44: arithmetic: product given twice"),
    "unknown_key": ("op sum\nn in 8\narithmetic { input = fp32  colour = red }\norder seq\n",
                    "x.fps:3:28: arithmetic: unknown key 'colour'; expected one of input, product, product_format, "
                    "accumulator, init, output, fused, bias"),
    "init": ("op sum\nn in 8\narithmetic { input = fp32  init = 1.0 }\norder seq\n",
             "x.fps:3:28: arithmetic: init = 1.0: expected none or +0.0"),
    "aligned": ("op sum\nn in 8\n" + ARITH.format(i="fp16", p="none", a="fp32", o="fp32",
                                                   f=FUSED.replace("truncate", "sideways")) + "order chain(4)\n",
                "x.fps:3:123: arithmetic.fused: aligned = 'sideways': expected truncate | floor | rne"),
    "dot_without_products": ("op dot\nn in 8\n" + ARITH.format(i="fp32", p="none", a="fp32", o="fp32", f="")
                             + "order seq\n",
                             "x.fps:3:28: arithmetic: product = none in op dot; expected how products enter the sum "
                             "(exact, rounded, fma or fma_first)"),
    "sum_with_products": ("op sum\nn in 8\n" + ARITH.format(i="fp32", p="exact", a="fp32", o="fp32", f="")
                          + "order seq\n",
                          "x.fps:3:28: arithmetic: product = exact in a sum; expected product = none (op sum adds "
                          "its inputs: there are no products)"),
    "fp64_exact": ("op dot\nn in 8\n" + ARITH.format(i="fp64", p="exact", a="fp64", o="fp64", f="") + "order seq\n",
                   "x.fps:3:28: arithmetic: product = exact of fp64 inputs in a fp64 accumulator: the product is "
                   "wider than any replica's carrier; expected product = fma, fma_first or rounded to the input "
                   "format"),
    "fused_without_block": ("op sum\nn in 8\n" + ARITH.format(i="fp16", p="none", a="fp32", o="fp32", f="")
                            + "order chain(4)\n",
                            "x.fps:4:7: chain(4) makes fused nodes, but the arithmetic has no `fused { ... }` block; "
                            "expected one (w, extra_bits, aligned, result, ...: docs/fps.md)"),
    "fused_literal_without_block": ("op sum\nn in 3\n" + ARITH.format(i="fp16", p="none", a="fp32", o="fp32", f="")
                                    + "order [0 1 2]\n",
                                    "x.fps:4:7: [0 1 2] makes fused nodes, but the arithmetic has no "
                                    "`fused { ... }` block; expected one (w, extra_bits, aligned, result, ...: "
                                    "docs/fps.md)"),
    # nesting and syntax
    "nesting": ("n in 1..64\norder " + "tail(2, " * 40 + "seq" + ", seq)" * 40 + "\n",
                "x.fps:2:"),
    "loop_nesting": ("n in 1..64\norder " + "lanes(2, " * 17 + "seq" + ", seq)" * 17 + "\n",
                     "x.fps:2:151: lanes, blocks and chunks nest more than 16 deep (each a loop in the replica); "
                     "expected at most 16"),
    "unknown_order": ("n in 8\norder lanes(2, seq,\n   foo (3, seq))\n",
                      "x.fps:3:4: unknown order 'foo'; expected one of seq, rev, pairwise, gpu_tree, fused, chain, "
                      "lanes, blocks, chunks, pad, split, tail, using, vlanes (or a named order, without arguments)"),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_check_refuses_in_one_line(name):
    text, message = CASES[name]
    with pytest.raises(SpecError) as e:
        check(parse(text, "x.fps"))
    assert str(e.value).startswith(message) and "\n" not in str(e.value)
    if name == "nesting":
        assert str(e.value).endswith(": orders nest more than 32 levels deep; expected at most 32")
    elif not message.endswith(" "):
        assert str(e.value) == message


def test_a_base_case_at_one_operand_is_accepted():
    spec = parse("n in 1..64\nlet f = if n <= 1: seq else: split(n // 2, f, f)\norder f\n")
    check(spec)
    assert format_tree(expand(spec, 5)) == "((0 1) (2 (3 4)))"
    # a non-recursive split on one operand keeps the documented rule (numpy.dot's tail)
    check(parse("n in 1..64\norder tail(4, seq, split(1, seq, seq))\n"))


def test_cr_line_ends_end_comments():
    spec = parse("# a comment\rop sum\rn in 3\rorder seq\r", "x.fps")
    assert spec.header.op == "sum" and format_tree(expand(spec, 3)) == "((0 1) 2)"


def test_a_deep_literal_parses_checks_and_prints():
    d = 3000
    tree = "(0 1)"
    for leaf in range(2, d + 1):
        tree = f"({tree} {leaf})"
    spec = parse(f"n in {d + 1}\norder {tree}\n")
    check(spec)
    assert expand(spec, d + 1) == expand(parse(f"n in {d + 1}\norder seq\n"), d + 1)
    assert parse(str(spec)) == spec


def test_too_deep_brackets_are_one_line():
    with pytest.raises(SpecError, match=r"^x\.fps:2:\d+: brackets nest 20001 levels deep; expected at most 20000"):
        parse("n in 8\norder " + "(" * 20001 + "0 1" + ")" * 20001 + "\n", "x.fps")
