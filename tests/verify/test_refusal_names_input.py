"""A revelation refused because no arithmetic reproduces the target says, in its one line,
which input differed and how: numpy.nansum skips nan, which no summation model does."""
from __future__ import annotations

import numpy as np

from fpspec.arith.probe import _values_in_words
from fpspec.cli import main


def _refusal(capsys, *argv) -> str:
    capsys.readouterr()
    assert main(["reveal", "numpy:nansum", "--op", "sum", "--dtype", "float32", *argv]) == 3
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    return err.strip()


def test_range_refusal_names_the_input_and_both_results(capsys, tmp_path):
    line = _refusal(capsys, "-n", "2..6", "-o", str(tmp_path / "s.fps"))
    assert line == ("fpspec: error: numpy:nansum: no arithmetic reproduces it (1 of 288 sample inputs differ at n = 2; "
                    "e.g. at n = 2, x = [nan, -inf]: numpy:nansum gives -inf, the model nan) and its order has no "
                    "parts to probe apart")
    assert not (tmp_path / "s.fps").exists()


def test_per_part_refusal_names_where_the_nan_was(capsys, tmp_path):
    line = _refusal(capsys, "-n", "16", "-o", str(tmp_path / "s.fps"))
    assert line.startswith("fpspec: error: numpy:nansum at n = 16: the per-part arithmetic differs on 2 of 288 "
                           "sample inputs (e.g. at n = 16, x (16 values: nan at 12): numpy:nansum gives ")
    assert line.endswith(", the model nan)")


def test_long_inputs_in_words():
    v = np.zeros(20)
    v[[3, 9]] = np.nan
    v[4] = -np.inf
    v[5] = -0.0
    v[6] = 1e-40
    assert _values_in_words(v) == "(20 values: nan at 3, 9; -inf at 4; -0.0 at 5; subnormal at 6)"
    assert _values_in_words(np.arange(1.0, 11.0)) == "(10 finite values, first 1.0, 2.0, 3.0 ...)"
    assert _values_in_words(np.array([0.5, -0.0])) == "= [0.5, -0.0]"
