"""`fpspec verify` and `fpspec diff` from the command line: return codes and output.

The replicas here are hand-written (tests/verify/data), independent of the
compiler; each planted copy differs from the good one in one named place.
"""
import json
from pathlib import Path

import pytest

from fpspec.cli import main

DATA = Path(__file__).parent / "data"
SUM_SPEC = str(DATA / "numpy_sum.fps")
SUM_NS = ["-n", "5", "-n", "8", "-n", "9", "-n", "33", "-n", "129"]


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    out = capsys.readouterr()
    return code, out.out, out.err


def planted(tmp_path, name, plant):
    """A copy of DATA/name with PLANT set (a different file, so a different module)."""
    src = (DATA / name).read_text()
    assert 'PLANT = ""' in src
    path = tmp_path / f"{'bad' if plant else 'good'}_{name}"
    path.write_text(src.replace('PLANT = ""', f'PLANT = "{plant}"', 1))
    return path


def test_a_good_replica_and_numpy_sum_verify_equivalent(capsys, tmp_path):
    code, out, _ = run(capsys, "verify", SUM_SPEC, "--replica", planted(tmp_path, "pairwise_replica.py", ""),
                       "--against", "numpy.sum", *SUM_NS, "--samples", "1200")
    assert code == 0, out
    assert "n values (5): 5 8 9 33 129" in out
    assert "trees:      10 compared (good_pairwise_replica.py 5, numpy.sum 5), all equal" in out
    assert "samples:    1200 inputs, 2400 comparisons" in out and "all bits equal" in out
    assert out.rstrip().endswith("EQUIVALENT")


@pytest.mark.parametrize("plant, expected", [
    ("tree", "first difference"),
    ("init", "0x80000000"),
    ("raise", "raised RuntimeError: replica exploded"),
    ("shape", "returned shape (2,), expected ()"),
])
def test_each_planted_defect_fails_verify_with_its_evidence(capsys, tmp_path, plant, expected):
    code, out, err = run(capsys, "verify", SUM_SPEC, "--replica", planted(tmp_path, "pairwise_replica.py", plant),
                         *SUM_NS, "--samples", "600")
    assert code == 1, out + err
    assert expected in out
    assert out.rstrip().endswith("NOT EQUIVALENT")


def test_a_nondeterministic_replica_is_a_refusal(capsys, tmp_path):
    code, out, err = run(capsys, "verify", SUM_SPEC, "--replica", planted(tmp_path, "pairwise_replica.py", "flaky"),
                         *SUM_NS, "--samples", "600")
    assert code == 3, out + err
    assert "nondeterministic" in out
    assert err.strip() == ("fpspec: error: bad_pairwise_replica.py: nondeterministic (one input gave two answers); "
                           "an order cannot be verified")


def test_the_tree_difference_names_the_planted_node(capsys, tmp_path):
    code, out, _ = run(capsys, "verify", SUM_SPEC, "--replica", planted(tmp_path, "pairwise_replica.py", "tree"),
                       "-n", "5", "--samples", "0")
    assert code == 1
    assert "first difference at child 0 (leaves 0..2)" in out or "(0 (1 2))" in out, out


def test_fma_where_the_spec_rounds_products_fails(capsys, tmp_path):
    spec = DATA / "seq_dot.fps"
    good = planted(tmp_path, "fma_dot_replica.py", "")
    bad = planted(tmp_path, "fma_dot_replica.py", "fma")
    code, out, _ = run(capsys, "verify", spec, "--replica", good, "-n", "6", "-n", "11", "--samples", "200")
    assert code == 0, out
    code, out, _ = run(capsys, "verify", spec, "--replica", bad, "-n", "6", "-n", "11", "--samples", "200")
    assert code == 1
    assert "product: " + str(spec) + " says rounded, bad_fma_dot_replica.py shows fma" in out  # the probe
    assert "first differing input" in out                                                   # the samples


def test_json_report(capsys, tmp_path):
    code, out, _ = run(capsys, "verify", SUM_SPEC, "--replica", planted(tmp_path, "pairwise_replica.py", "init"),
                       "-n", "9", "--samples", "100", "--json")
    assert code == 1
    report = json.loads(out)
    assert report["equivalent"] is False and report["verdict"] == "NOT EQUIVALENT"
    assert report["n_values"] == [9] and report["samples_run"] == 100
    assert report["samples"][0]["mismatch"]["left_value"].startswith("0x")


def test_diff_spec_against_live_numpy_sum_is_same(capsys):
    code, out, _ = run(capsys, "diff", SUM_SPEC, "numpy.sum", "-n", "8", "-n", "9", "-n", "129")
    assert code == 0, out
    assert out.rstrip().endswith("SAME")


def test_diff_numpy_sum_against_torch_sum_shows_the_first_differing_subtree(capsys):
    pytest.importorskip("torch")
    code, out, _ = run(capsys, "diff", "numpy.sum", "torch.sum", "-n", "32")
    assert code == 1, out
    assert "first difference" in out and out.rstrip().endswith("DIFFERENT")


def test_diff_two_specs(capsys, tmp_path):
    seq = tmp_path / "seq.fps"
    seq.write_text('op sum\nn in 1..\norder seq\n')
    code, out, _ = run(capsys, "diff", SUM_SPEC, seq, "-n", "7", "-n", "9")
    assert code == 1
    assert "trees:      2 compared (" in out and "), 1 differ" in out   # n = 7 is seq in both
    code, out, _ = run(capsys, "diff", seq, seq, "-n", "7", "-n", "9")
    assert code == 0


@pytest.mark.parametrize("argv, message", [
    (["verify", "/no/such.fps"], "no such spec file"),
    (["verify", SUM_SPEC, "-n", "1"], "expected an integer >= 2"),
    (["verify", SUM_SPEC, "--samples", "-1"], "expected a count >= 0"),
    (["verify", SUM_SPEC, "--replica", "/no/such.py"], "no such replica file"),
    (["diff", "numpy.sum", "numpy.nosuch", "-n", "8"], "numpy"),
])
def test_bad_input_exits_2_with_one_line(capsys, argv, message):
    code, out, err = run(capsys, *argv)
    assert code == 2
    assert message in err and len(err.strip().splitlines()) == 1


def test_a_replica_without_the_op_function_is_bad_input(capsys, tmp_path):
    rep = tmp_path / "empty_replica.py"
    rep.write_text("def dot(x, y):\n    return 0.0\n")
    code, out, err = run(capsys, "verify", SUM_SPEC, "--replica", rep, "-n", "8")
    message = "has no function sum()"
    assert code == 2
    assert message in err and len(err.strip().splitlines()) == 1


def test_without_n_the_spec_chooses_n_that_cross_each_guard(capsys):
    from fpspec.verify import load_spec, spec_n_values, spec_sampled_n

    ns = spec_n_values(load_spec(SUM_SPEC), max_n=1000, seed=0)
    # n < 8: seq | n <= 128: lanes | else: split, recursing into halves (> 128 twice at 257)
    assert {7, 8, 9, 127, 128, 129, 256, 257, 258, 1000}.issubset(ns) and max(ns) == 1000
    # above --max-n: two specs are expanded (no revelation) at a few n up to 32768
    assert spec_sampled_n(load_spec(SUM_SPEC), max_n=1000) == ((1001, 2001, 32768), "n > 32768")
    code, out, _ = run(capsys, "diff", SUM_SPEC, SUM_SPEC, "--max-n", "1000")
    assert code == 0
    ns += (1001, 2001, 32768)
    assert f"n values ({len(ns)}): {' '.join(map(str, ns))}" in out
    assert out.rstrip().endswith("SAME (not checked: n > 32768)")
    assert "note:       n values chosen from the spec's guards and range (at most 1000)" in out
