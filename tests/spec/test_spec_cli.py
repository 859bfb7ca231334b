"""fpspec show / check / fmt."""
from fpspec.cli import main

SPEC = "n in 1..64\norder lanes( 8, seq,pairwise )\n"
CANONICAL = "n in 1..64\n\norder lanes(8, seq, pairwise)\n"


def test_show_spec(tmp_path, capsys):
    p = tmp_path / "a.fps"
    p.write_text(SPEC)
    assert main(["show", str(p), "-n", "9"]) == 0
    out = capsys.readouterr().out
    assert out == CANONICAL + "\n# tree at n = 9: 9 leaves, 8 nodes (0 fused), height 4, max fan-in 2\n" \
        "((((0 8) 1) (2 3)) ((4 5) (6 7)))\n"


def test_show_needs_n_for_a_range(tmp_path, capsys):
    p = tmp_path / "a.fps"
    p.write_text(SPEC)
    assert main(["show", str(p)]) == 2
    assert "give the n to expand with -n N" in capsys.readouterr().err


def test_show_tree_file_lowers_it(tmp_path, capsys):
    p = tmp_path / "t.tree"
    p.write_text("# target: numpy.sum\n# versions: {\"numpy\": \"2.4.6\"}\n((((0 1) (2 3)) ((4 5) (6 7))) 8)\n")
    assert main(["show", str(p)]) == 0
    out = capsys.readouterr().out
    assert out.startswith('target "numpy.sum"\nn in 9\n\nprovenance {')
    assert "\norder tail(8, pairwise, seq)\n" in out
    assert 'provenance {\n    versions {\n        numpy = "2.4.6"' in out   # the '#' header becomes provenance
    assert out.endswith("((((0 1) (2 3)) ((4 5) (6 7))) 8)\n")


def test_check(tmp_path, capsys):
    p = tmp_path / "a.fps"
    p.write_text(SPEC)
    assert main(["check", str(p)]) == 0
    assert capsys.readouterr().out == f"{p}: ok (n in 1..64; 0 named orders; 64 values of n checked, 1..64)\n"


def test_fmt_prints_checks_and_rewrites(tmp_path, capsys):
    p = tmp_path / "a.fps"
    p.write_text(SPEC)
    assert main(["fmt", str(p)]) == 0
    assert capsys.readouterr().out == CANONICAL
    assert main(["fmt", "--check", str(p)]) == 1
    assert "not in canonical form" in capsys.readouterr().err
    assert main(["fmt", "-i", str(p)]) == 0
    assert p.read_text() == CANONICAL
    assert main(["fmt", "--check", str(p)]) == 0


def test_missing_file_is_one_line(tmp_path, capsys):
    assert main(["check", str(tmp_path / "nope.fps")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("fpspec: error: ") and err.count("\n") == 1


def test_show_draws_svg(tmp_path, capsys):
    import shutil

    import pytest

    if shutil.which("dot") is None:
        pytest.skip("Graphviz 'dot' is not on PATH")
    p, svg = tmp_path / "a.fps", tmp_path / "a.svg"
    p.write_text(SPEC)
    assert main(["show", str(p), "-n", "9", "--svg", str(svg)]) == 0
    assert capsys.readouterr().out.endswith(f"wrote {svg}\n")
    assert svg.read_text().lstrip().startswith(("<?xml", "<svg"))
