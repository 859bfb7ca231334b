"""`fpspec reveal` and `fpspec.draw` through the real entry point."""
import json

import pytest

from fpspec import draw
from fpspec.cli import main
from fpspec.errors import FpspecError
from fpspec.tree import parse_tree


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_prints_the_tree(capsys):
    code, out, err = run(capsys, "reveal", "numpy.sum", "-n", "8", "--dtype", "float32", "--no-probe")
    assert code == 0
    assert out.splitlines()[0] == "(((0 1) (2 3)) ((4 5) (6 7)))"
    assert "queries" in err


def test_probes_print_their_lines(capsys):
    pytest.importorskip("fpspec.arith.probe")
    code, out, _ = run(capsys, "reveal", "numpy.sum", "-n", "9")
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == "((((0 1) (2 3)) ((4 5) (6 7))) 8)"
    assert any("accumulator" in line for line in lines[1:])


def test_writes_the_tree_with_provenance(tmp_path, capsys):
    path = tmp_path / "order.txt"
    code, _, _ = run(capsys, "reveal", "numpy.sum", "-n", "9", "--no-probe", "--format", "tree", "-o", str(path))
    assert code == 0
    text = path.read_text()
    header = [line for line in text.splitlines() if line.startswith("#")]
    body = [line for line in text.splitlines() if not line.startswith("#")]
    keys = {line[2:].split(":", 1)[0] for line in header}
    assert {"target", "op", "n", "input_format", "device", "versions", "fpspec", "date", "command"} <= keys
    assert "# command: fpspec reveal numpy.sum -n 9 --dtype float32 -o " in text
    assert parse_tree(body[0]) == parse_tree("((((0 1) (2 3)) ((4 5) (6 7))) 8)")


def test_writes_a_lowered_spec_with_provenance_and_arithmetic(tmp_path, capsys):
    from fpspec.spec import expand, load

    path = tmp_path / "order.fps"
    code, _, _ = run(capsys, "reveal", "numpy.sum", "-n", "129", "-o", str(path))
    assert code == 0
    text = path.read_text()
    spec = load(str(path))
    assert spec.header.target == "numpy.sum" and spec.header.op == "sum"
    assert 'command = "fpspec reveal numpy.sum -n 129 --dtype float32 -o ' in text
    assert "accumulator = fp32" in text and "init = +0.0" in text
    revealed = parse_tree(run(capsys, "reveal", "numpy.sum", "-n", "129", "--no-probe")[1].splitlines()[0])
    assert expand(spec, 129) == revealed
    assert len(text.split("order ", 1)[1]) < 200   # lowered to combinators, not a literal tree


def test_unwritable_output_is_one_line(tmp_path, capsys):
    code, _, err = run(capsys, "reveal", "numpy.sum", "-n", "8", "--no-probe", "-o", str(tmp_path / "no" / "t.txt"))
    assert code == 2 and "cannot write" in err and len(err.strip().splitlines()) == 1


def test_json_summary(capsys):
    code, out, _ = run(capsys, "reveal", "numpy.matmul", "-n", "16", "--m", "4", "--ncols", "3",
                       "--no-probe", "--json")
    assert code == 0
    summary = json.loads(out)
    assert summary["n"] == 16 and summary["queries"] > 0 and summary["calls"] > 0
    assert summary["differing_outputs"] == 0 and summary["checked_outputs"] == 12
    assert summary["provenance"]["op"] == "gemm"


def test_algorithms_agree(capsys):
    outs = set()
    for algorithm in ("basic", "fprev", "modified", "auto"):
        code, out, _ = run(capsys, "reveal", "numpy.sum", "-n", "20", "--no-probe", "--algorithm", algorithm)
        assert code == 0
        outs.add(out.splitlines()[0])
    assert len(outs) == 1


def test_refusal_exits_3_with_one_line(capsys):
    code, out, err = run(capsys, "reveal", "math:fsum", "--op", "sum", "-n", "16", "--dtype", "float64",
                         "--no-probe")
    assert code == 3 and out == ""
    assert err.strip().startswith("fpspec: error: order-independent") and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("argv,fragment", [
    (["reveal", "nosuch.module:f", "--op", "sum", "-n", "8"], "cannot import"),
    (["reveal", "numpy.sum", "-n", "eight"], "-n must be an integer"),
    (["reveal", "numpy.sum", "-n", "1"], "n must be an integer >= 2"),
    (["reveal", "numpy:sum", "-n", "8"], "give its op kind"),
    (["reveal", "numpy.sum", "-n", "8", "--dtype", "float13"], "unknown format"),
    (["reveal", "numpy.sum", "-n", "8", "--algorithm", "magic", "--no-probe"], "unknown algorithm"),
    (["reveal", "numpy.sum", "-n", "8", "--op", "gemm"], "computes sum"),
])
def test_bad_input_exits_2(capsys, argv, fragment):
    code, _, err = run(capsys, *argv)
    assert code == 2
    assert fragment in err


def test_range_of_n_hands_over_to_inference(capsys):
    code, out, err = run(capsys, "reveal", "numpy.sum", "-n", "1..64", "--no-probe")
    try:
        import fpspec.infer as infer  # noqa: F401
        has_infer = hasattr(infer, "infer_spec")
    except ImportError:
        has_infer = False
    if not has_infer:
        assert code == 2 and "parametric revelation needs fpspec.infer" in err
    else:
        assert code == 0 and out


# ---------------------------------------------------------------- pictures

def test_dot_source_has_every_node():
    tree = parse_tree("((0 1) [2 3 4])")
    src = draw.to_dot(tree, title="numpy.sum n=5")
    assert src.count('label="#') == 5
    assert 'label="+"' in src and 'label="Σ3"' in src
    tree_edges = [line for line in src.splitlines() if "->" in line and "invis" not in line]
    assert len(tree_edges) == 2 + 3 + 2
    assert "{ rank=same; l0 -> l1 -> l2 -> l3 -> l4 [style=invis]; }" in src   # leaves in index order


def test_missing_dot_is_one_clear_line(monkeypatch, tmp_path):
    monkeypatch.setattr(draw.shutil, "which", lambda name: None)
    with pytest.raises(FpspecError, match="needs the Graphviz 'dot' program"):
        draw.render(parse_tree("(0 1)"), tmp_path / "t.svg")
    assert not (tmp_path / "t.svg").exists()


def test_unknown_picture_format():
    with pytest.raises(FpspecError, match="svg, png"):
        draw.render(parse_tree("(0 1)"), "t.gif", fmt="gif")


@pytest.mark.skipif(draw.shutil.which("dot") is None, reason="graphviz 'dot' not installed")
@pytest.mark.parametrize("fmt,magic", [("svg", b"<svg"), ("png", b"\x89PNG")])
def test_render_writes_a_picture(tmp_path, fmt, magic):
    path = tmp_path / f"t.{fmt}"
    draw.render(parse_tree("(((0 1) 2) [3 4 5])"), path, fmt=fmt)
    assert magic in path.read_bytes()[:400]


def test_a_range_of_n_writes_one_parametric_spec(tmp_path, capsys):
    from fpspec.spec import expand, load

    path = tmp_path / "numpy_sum.fps"
    code, out, err = run(capsys, "reveal", "numpy.sum", "-n", "1..200", "--no-probe", "-o", str(path))
    assert code == 0 and "held out" in err and "all agree" in err
    spec = load(str(path))
    assert "split(n // 2 - n // 2 % 8" in path.read_text()
    assert expand(spec, 1) == 0
    for n in (2, 7, 8, 9, 129, 200):
        revealed = run(capsys, "reveal", "numpy.sum", "-n", str(n), "--no-probe")[1].splitlines()[0]
        assert expand(spec, n) == parse_tree(revealed)
