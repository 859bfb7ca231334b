"""What the command line prints: a summary instead of a big tree when the
answer went to a file, JSON that a target's prints cannot corrupt (an error as
JSON too), the version, show's refusals before anything is printed, and a
progress bar only where someone watches."""
from __future__ import annotations

import io
import json
import textwrap

import pytest

from fpspec.cli import main
from fpspec.cli.progress_bar import RichSink, wants_bars
from fpspec.progress import phase, reporting

MODULE = "fpspec_test_cli_output_targets"
SOURCE = textwrap.dedent("""
    import numpy as np
    def chatty(x):
        print("hello from the target")
        return np.sum(x)
""")


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_version(capsys):
    from importlib.metadata import version

    assert run(capsys, "--version") == (0, f"fpspec {version('fpspec')}\n", "")


def test_reveal_to_a_file_prints_a_summary_not_the_tree(tmp_path, capsys):
    out_file = tmp_path / "order.fps"
    code, out, err = run(capsys, "reveal", "numpy.sum", "-n", "256", "--no-probe", "-o", str(out_file))
    assert code == 0
    assert out == (f"wrote {out_file}: numpy.sum (sum, n=256, fp32, cpu)\n"
                   "order blocks(128, lanes(8, seq, pairwise), seq)\n"
                   "# tree: 256 leaves, 255 nodes (0 fused), height 19, max fan-in 2 (--tree prints it)\n")
    code, out, _ = run(capsys, "reveal", "numpy.sum", "-n", "256", "--no-probe", "-o", str(out_file), "--tree")
    assert code == 0 and out.splitlines()[2].startswith("(((((((((((((((((((0 8) 16)")
    # a small tree is shown anyway, and without -o the tree is the answer
    assert run(capsys, "reveal", "numpy.sum", "-n", "9", "--no-probe", "-o", str(out_file))[1].splitlines()[-1] \
        == "((((0 1) (2 3)) ((4 5) (6 7))) 8)"
    assert run(capsys, "reveal", "numpy.sum", "-n", "256", "--no-probe")[1].startswith("(((((((((((((((((((0 8) 16)")


def test_json_embeds_the_tree_only_when_asked(tmp_path, capsys):
    argv = ["reveal", "numpy.sum", "-n", "256", "--no-probe", "--json"]
    summary = json.loads(run(capsys, *argv, "-o", str(tmp_path / "o.fps"))[1])
    assert "tree" not in summary and summary["tree_stats"].startswith("256 leaves")
    assert summary["spec_order"] == "order blocks(128, lanes(8, seq, pairwise), seq)"
    assert json.loads(run(capsys, *argv, "--tree")[1])["tree"].startswith("(((((((((((((((((((0 8) 16)")


def test_json_error_is_json(capsys):
    code, out, err = run(capsys, "reveal", "numpy.sum", "-n", "1", "--json")
    assert code == 2 and json.loads(out) == {"error": "-n 1: n must be an integer >= 2 (or a range LO..HI)",
                                             "exit_code": 2}
    assert err == "fpspec: error: -n 1: n must be an integer >= 2 (or a range LO..HI)\n"


def test_a_target_printing_does_not_corrupt_json(tmp_path, capsys, monkeypatch):
    (tmp_path / f"{MODULE}.py").write_text(SOURCE)
    monkeypatch.syspath_prepend(str(tmp_path))
    code, out, err = run(capsys, "reveal", f"{MODULE}:chatty", "--op", "sum", "-n", "8", "--no-probe", "--json")
    assert code == 0 and json.loads(out)["tree"] == "(((0 1) (2 3)) ((4 5) (6 7)))"
    assert "hello from the target" in err


def test_show_refuses_before_printing(tmp_path, capsys, monkeypatch):
    spec = tmp_path / "s.fps"
    spec.write_text("op sum\nn in 100000000\norder seq\n")
    monkeypatch.setattr("shutil.which", lambda name: None)
    assert run(capsys, "show", str(spec), "--png", str(tmp_path / "t.png")) == (
        2, "", "fpspec: error: drawing needs the Graphviz 'dot' program on PATH (e.g. apt install graphviz)\n")
    assert run(capsys, "show", str(spec), "--at", "1,2") == (
        2, "", "fpspec: error: --at 1,2: a sum has one output; --at picks an output element of a gemv or gemm "
               "spec\n")


def test_show_does_not_build_a_huge_tree(tmp_path, capsys):
    spec = tmp_path / "s.fps"
    spec.write_text("op sum\nn in 100000000\norder seq\n")
    code, out, _ = run(capsys, "show", str(spec))
    assert code == 0 and out.endswith("# tree at n = 100000000: 100000000 leaves, not built (more than "
                                      "--max-leaves 1048576; pass a larger --max-leaves to print it)\n")
    assert run(capsys, "show", str(spec), "-n", "5") [0] == 2    # outside the range: still checked
    spec.write_text("op sum\nn in 1..\norder seq\n")
    assert run(capsys, "show", str(spec), "-n", "3", "--max-leaves", "3")[1].endswith("((0 1) 2)\n")


def test_check_warns_about_a_missing_arithmetic(tmp_path, capsys):
    spec = tmp_path / "s.fps"
    spec.write_text("op sum\nn in 8\norder seq\n")
    code, out, err = run(capsys, "check", str(spec))
    assert code == 0 and out == f"{spec}: ok (n in 8; 0 named orders; 1 values of n checked, 8..8)\n"
    assert err.startswith(f"{spec}: warning: no arithmetic section: the spec fixes the order only; fpspec verify "
                          "needs `arithmetic {")


@pytest.mark.parametrize("dtype,message", [
    (">f4", "--dtype >f4: a float32 with a byte order: fpspec names formats, not byte orders; "
            "expected --dtype float32"),
    ("int32", "--dtype int32: numpy's int32 is not a floating-point format; expected one of float64, float32, "
              "float16, bfloat16, tf32, fp8e4m3, fp8e5m2"),
    ("[1, 2]", "--dtype [1, 2]: a list is not a format; expected one format name (float64, float32, float16, "
               "bfloat16, tf32, fp8e4m3, fp8e5m2)"),
])
def test_dtype_messages(capsys, dtype, message):
    assert run(capsys, "reveal", "numpy.sum", "-n", "8", "--dtype", dtype) == (2, "", f"fpspec: error: {message}\n")


def test_progress_bars_only_on_a_terminal():
    class Tty(io.StringIO):
        def isatty(self):
            return True

    assert not wants_bars(io.StringIO())
    stream = Tty()
    sink = RichSink(stream)
    with reporting(sink):
        with phase("reveal n=8", 8) as advance:
            advance(3)
            task = sink.progress.tasks[0]
            assert (task.description, task.completed, task.total) == ("reveal n=8", 3, 8)
    assert not sink.running and sink.progress.tasks == []
