"""Named arithmetic sections and using(NAME, order): text, checks, expansion."""
import pytest

from fpspec.arith.model import Arithmetic
from fpspec.errors import SpecError
from fpspec.spec import ast as A
from fpspec.spec import check, expand, parse
from fpspec.spec.expand import expand_arith
from fpspec.spec.regions import arithmetics, override_entries
from fpspec.tree import parse_tree

MAIN = "arithmetic {\n    input = fp32\n    product = rounded\n    product_format = fp32\n    accumulator = fp64\n" \
       "    init = +0.0\n    output = fp32\n}\n"
SDOT = ("target \"numpy.dot\"\nop dot\nn in 1..\n\n" + MAIN +
        "\narithmetic fma_fp32 {\n    product = fma\n    accumulator = fp32\n}\n"
        "\narithmetic rounded_fp32 {\n    accumulator = fp32\n}\n\n"
        "order\n    if n <= 31: seq\n    else: tail(32, lanes(32, using(fma_fp32, seq), using(rounded_fp32, "
        "lanes(4, pairwise, pairwise))), split(1, seq, seq))\n")

FP32 = Arithmetic("fp32", "rounded", "fp32", "+0.0", "fp32")
FMA32 = Arithmetic("fp32", "fma", "fp32", "+0.0", "fp32")
LOOP = Arithmetic("fp32", "rounded", "fp64", "+0.0", "fp32", product_format="fp32")


def test_canonical_text_round_trips():
    spec = parse(SDOT)
    assert str(spec) == SDOT
    assert parse(str(spec)) == spec
    assert [a.name for a in spec.header.arithmetics] == ["fma_fp32", "rounded_fp32"]


def test_sections_override_the_main_one_and_inherit_the_rest():
    got = arithmetics(parse(SDOT))
    assert got == {None: LOOP, "fma_fp32": FMA32, "rounded_fp32": FP32}


def test_override_entries_are_the_fewest_that_give_the_arithmetic():
    assert [str(e) for e in override_entries(LOOP, FMA32)] == ["product = fma", "accumulator = fp32"]
    assert [str(e) for e in override_entries(LOOP, FP32)] == ["accumulator = fp32"]
    # products rounded to fp64 (not fp32): the product entry stops product_format being inherited
    to64 = Arithmetic("fp32", "rounded", "fp64", "+0.0", "fp32")
    assert [str(e) for e in override_entries(LOOP, to64)] == ["product = rounded"]


def test_using_does_not_change_the_tree():
    spec = parse(SDOT)
    plain = parse(SDOT.replace("using(fma_fp32, seq)", "seq").replace(
        "using(rounded_fp32, lanes(4, pairwise, pairwise))", "lanes(4, pairwise, pairwise)"))
    for n in (1, 5, 31, 32, 33, 64, 100):
        assert expand(spec, n) == expand(plain, n)


def test_expand_arith_names_every_node_made_inside_a_using():
    tree, main, regions = expand_arith(parse(SDOT), 66)
    assert main == LOOP
    # lanes of 2 (0 32), (1 33), ... in FMA; their 32 sums in fp32; leaves 64, 65 and the join in fp64
    assert regions[(0, 2)] == FMA32 and regions[(31, 2)] == FMA32
    fp32_nodes = [k for k, a in regions.items() if a == FP32]
    assert len(fp32_nodes) == 31 and (0, 64) in fp32_nodes
    assert len(regions) == 32 + 31
    assert tree.size == 66 and (0, 66) not in regions and (64, 2) not in regions


def test_innermost_using_decides_and_operands_keep_their_arithmetic():
    text = (MAIN + "arithmetic a {\n    accumulator = fp32\n}\narithmetic b {\n    product = fma\n"
            "    accumulator = fp32\n}\nn in 8\norder using(a, lanes(2, using(b, seq), seq))\n")
    tree, _, regions = expand_arith(parse(text), 8)
    assert tree == parse_tree("((((0 2) 4) 6) (((1 3) 5) 7))")
    lanes = {(0, 4), (1, 4)}          # the lane folds: keys (first leaf, size) of ((0 2) 4) 6) ...
    lane_nodes = {k for k, a in regions.items() if a.product == "fma"}
    assert lane_nodes == {(0, 2), (0, 3), (0, 4), (1, 2), (1, 3), (1, 4)} and lanes <= lane_nodes
    assert {k for k, a in regions.items() if a.product == "rounded"} == {(0, 8)}


def test_using_inside_a_let_and_a_guard_arm():
    text = (MAIN + "arithmetic k {\n    accumulator = fp32\n}\nn in 1..64\n"
            "let body = using(k, pairwise)\norder if n <= 8: seq else: split(8, body, seq)\n")
    spec = parse(text)
    check(spec)
    _, _, small = expand_arith(spec, 8)
    assert small == {}
    _, _, big = expand_arith(spec, 12)
    assert set(big) == {(0, 8), (0, 4), (4, 4), (0, 2), (2, 2), (4, 2), (6, 2)}


ERRORS = {
    "unknown_using": ("n in 1..8\norder using(kernel, seq)\n",
                      "x.fps:2:7: unknown arithmetic 'kernel' in using(kernel, ...); expected one of none: "
                      "add `arithmetic NAME { ... }` to the header"),
    "unknown_of_several": ("arithmetic a {\n}\nn in 1..8\norder using(b, seq)\n",
                           "x.fps:4:7: unknown arithmetic 'b' in using(b, ...); expected one of a"),
    "input_differs": (MAIN + "arithmetic k {\n    input = fp16\n}\nn in 1..8\norder using(k, seq)\n",
                      "x.fps:10:5: arithmetic k: input = fp16 differs from the main arithmetic's fp32; "
                      "expected the same input, output, init in every section"),
    "init_differs": (MAIN + "arithmetic k {\n    init = none\n}\nn in 1..8\norder using(k, seq)\n",
                     "x.fps:10:5: arithmetic k: init = none differs from the main arithmetic's +0.0; "
                     "expected the same input, output, init in every section"),
    "sum_stays_sum": ("arithmetic {\n    product = none\n}\narithmetic k {\n    product = fma\n}\n"
                      "n in 1..8\norder using(k, seq)\n",
                      "x.fps:5:5: arithmetic k: product = fma where the main arithmetic has product = none; "
                      "expected a sum to stay a sum (product = none everywhere)"),
    "bad_value": (MAIN + "arithmetic k {\n    accumulator = fp7\n}\nn in 1..8\norder using(k, seq)\n",
                  "x.fps:10:5: arithmetic k: accumulator = fp7: unknown format; expected one of "),
    "repeated_key": (MAIN + "arithmetic k {\n    accumulator = fp32\n    accumulator = fp64\n}\n"
                     "n in 1..8\norder using(k, seq)\n",
                     "x.fps:11:5: arithmetic k: accumulator given twice; expected it at most once"),
    "twice": ("arithmetic k {\n}\narithmetic k {\n}\nn in 1..8\norder seq\n",
              "x.fps:3:1: arithmetic 'k' given twice; expected it at most once"),
    "named_other_section": ("formats kernel {\n}\nn in 1..8\norder seq\n",
                            "x.fps:1:1: section 'formats' has a name ('kernel'); expected a name only on "
                            "arithmetic sections (`arithmetic kernel { ... }`)"),
}


@pytest.mark.parametrize("name", sorted(ERRORS))
def test_error_names_the_place(name):
    text, message = ERRORS[name]
    with pytest.raises(SpecError) as e:
        check(parse(text, "x.fps"))
    assert str(e.value).startswith(message), str(e.value)
    assert "\n" not in str(e.value)
