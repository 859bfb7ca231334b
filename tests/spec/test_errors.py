"""Every malformed or inconsistent spec: SpecError `FILE:LINE:COL: message`,
and through the CLI one line on stderr with exit code 2."""
import pytest

from fpspec.cli import main
from fpspec.errors import SpecError
from fpspec.spec import check, expand, parse

CASES = {
    "syntax": ('n in 1..8\norder lanes(8, seq\n', "x.fps:2:19: unexpected end of file; expected ','"),
    "unknown_name": ('n in 1..8\norder lanes(8, seq, pairwis)\n', "x.fps:2:21: unknown order 'pairwis'; expected one of seq, rev, pairwise, gpu_tree, fused, chain, lanes, blocks, chunks, pad, split, tail, using, vlanes"),
    "unknown_function": ('n in 1..8\norder chain(log(n))\n', "x.fps:2:13: unknown function 'log'; expected one of min, max"),
    "non_integer": ('n in 1..8\norder chain(n / 2)\n', "x.fps:2:15: unexpected '/'; expected '//' (floor division: sizes are integers)"),
    "negative_size": ('n in 1..100\norder lanes(n - 10, seq, seq)\n', 'x.fps:2:13: lanes count n - 10 = -8 at n = 2; expected an integer >= 1'),
    "fused_one_child": ('n in 3\norder split(2, (0 1), [0])\n', 'x.fps:2:23: a fused node [...] of 1 child; expected at least 2 children'),
    "binary_three": ('n in 3\norder (0 1 2)\n', 'x.fps:2:7: a binary node (...) has 2 children, got 3; expected (a b), or [a b c ...] for a fused node'),
    "no_termination": ('n in 1..64\nlet f =\n    if n < 4: seq\n    else: tail(1, f, seq)\norder f\n', "x.fps:4:19: order 'f' calls itself on all 4 of its operands: the recursion does not terminate; expected a sub-range"),
    "split_outside": ('n in 1..9\norder split(n // 2 - n // 2 % 8, seq, seq)\n', 'x.fps:2:13: split point n // 2 - n // 2 % 8 = 0 at n = 2; expected 1 <= split <= 1'),
    "literal_size": ('n in 1..4\norder ((0 1) 2)\n', 'x.fps:2:7: literal tree of 3 leaves applied to 2 operands; expected a tree of 2 leaves'),
    "literal_leaves": ('n in 3\norder ((0 1) 3)\n', "x.fps:2:7: literal leaf 3 is outside the tree's positions 0..2; expected each of 0..2 once"),
    "literal_repeated": ('n in 3\norder ((0 1) 1)\n', 'x.fps:2:7: literal tree leaves must be 0..2 once each; repeated: [1]; missing: [2]'),
    "divide_by_zero": ('n in 1..4\norder chain(n // (n - 2))\n', 'x.fps:2:13: n // (n - 2) divides by zero at n = 2; expected a non-zero divisor'),
    "duplicate_let": ('n in 1..4\nlet a = seq\nlet a = rev\norder a\n', "x.fps:3:1: order 'a' defined twice; expected one definition"),
    "builtin_name": ('n in 1..4\nlet seq = rev\norder seq\n', "x.fps:2:1: 'seq' is a builtin order; expected another name"),
    "empty_range": ('n in 9..3\norder seq\n', 'x.fps:1:1: empty range of n 9..3; expected LO <= HI'),
    "no_range": ('order seq\n', 'x.fps:1:1: the spec states no range of n; expected a line like `n in 1..4096`'),
    "unknown_op": ('n in 1..4\nop sums\norder seq\n', "x.fps:2:4: unknown op 'sums'; expected one of sum, dot, gemv, gemm"),
    "bad_value": ('arithmetic {\n    init = \n}\norder seq\n', "x.fps:3:1: unexpected '}'; expected a name, a number, a string, an integer"),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_error_message(name):
    text, message = CASES[name]
    with pytest.raises(SpecError) as e:
        check(parse(text, "x.fps"))
    assert str(e.value) == message
    assert e.value.location is not None and str(e.value.location) == message.split(": ")[0]


def test_n_outside_the_stated_range():
    spec = parse("n in 1..128\norder lanes(8, seq, seq)\n", "x.fps")
    with pytest.raises(SpecError, match=r"^x.fps:1:1: n = 200 is outside the stated range 1..128; expected n in that range$"):
        expand(spec, 200)


def test_runtime_errors_name_their_location_in_expand_too():
    spec = parse("n in 1..100\norder lanes(n - 10, seq, seq)\n", "x.fps")
    with pytest.raises(SpecError, match=r"^x.fps:2:13: lanes count n - 10 = -5 at n = 5; expected an integer >= 1$"):
        expand(spec, 5)
    spec = parse("n in 1..64\nlet f =\n    if n < 4: seq\n    else: tail(1, f, seq)\norder f\n", "x.fps")
    with pytest.raises(SpecError, match="x.fps:4:19: order 'f' calls itself"):
        expand(spec, 9)


@pytest.mark.parametrize("name", ["syntax", "no_termination", "fused_one_child", "unknown_name"])
def test_cli_prints_one_line_and_exits_2(name, tmp_path, capsys):
    text, message = CASES[name]
    path = tmp_path / "x.fps"
    path.write_text(text)
    assert main(["check", str(path)]) == 2
    err = capsys.readouterr().err
    assert err == f"fpspec: error: {str(path)}{message[len('x.fps'):]}\n"


def test_linear_recursion_is_refused_not_crashed():
    spec = parse("n in 1..\nlet f = if n < 2: seq else: split(1, seq, f)\norder f\n", "x.fps")
    assert expand(spec, 3000).size == 3000           # deep but fine
    with pytest.raises(SpecError, match=r"^x.fps:3:7: orders nest too deeply"):
        expand(spec, 21000)               # each level copies its list: keep n small
    with pytest.raises(SpecError, match=r"^x.fps:3:7: orders nest too deeply at n = "):
        check(spec)


def test_load_names_a_directory_a_binary_or_an_empty_file(tmp_path):
    from fpspec.errors import FpspecError, SpecError
    from fpspec.spec import load

    (tmp_path / "empty.fps").write_text("  \n")
    (tmp_path / "bin.fps").write_bytes(b"op sum\n\x00\x01")
    with pytest.raises(FpspecError, match="is a directory, expected a .fps spec"):
        load(tmp_path)
    with pytest.raises(FpspecError, match="the file is empty, expected a .fps spec"):
        load(tmp_path / "empty.fps")
    with pytest.raises(SpecError, match=r"bin.fps:2:1: binary data \(byte 0x00\)"):
        load(tmp_path / "bin.fps")
