"""verify with a spec that gives parts of its tree their own arithmetic (using(NAME, ...))."""
from pathlib import Path

from fpspec.cli import main

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "cpu" / "numpy_dot_float32.fps"


def test_the_sdot_spec_verifies_against_numpy_dot_by_bits(capsys):
    argv = ["verify", str(EXAMPLE), "--target", "numpy", "--against", "numpy.dot", "--samples", "300"]
    for n in (40, 100, 20):
        argv += ["-n", str(n)]
    code = main(argv)
    out = capsys.readouterr().out
    assert code == 0, out
    assert "n values (3): 20 40 100" in out
    assert "trees:      6 compared (replica (numpy) 3, numpy.dot 3), all equal" in out
    # n = 20 has one arithmetic (the first shown); at 40 and 100 each side's bits are held to
    # the spec's per-node model (note [regional arithmetic check])
    assert "arithmetic: 6 compared, all equal (input=fp32 product=rounded accumulator=fp64" in out
    assert "samples:    300 inputs, 600 comparisons" in out and "all bits equal" in out
    assert out.rstrip().endswith("EQUIVALENT")


def test_a_wrong_part_fails(capsys, tmp_path):
    """The same spec with the kernel's FMA lanes said to round their products: verify fails."""
    text = EXAMPLE.read_text().replace("arithmetic fma_fp32 {\n    product = fma\n",
                                       "arithmetic fma_fp32 {\n    product = rounded\n")
    assert text != EXAMPLE.read_text()
    path = tmp_path / "wrong.fps"
    path.write_text(text)
    code = main(["verify", str(path), "--target", "numpy", "--against", "numpy.dot", "--samples", "200",
                 "-n", "100"])
    out = capsys.readouterr().out
    assert code == 1, out
    assert "arithmetic: 2 compared, 1 differ" in out          # the replica follows the spec; numpy.dot does not
    assert "outputs on sample inputs" in out
