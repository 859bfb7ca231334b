"""`fpspec verify` checks the file a user ships: a private copy imported in a
fresh process, every public function compared, nothing on disk trusted, the
range of n covered or the verdict saying what was not."""
from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fpspec.compile import compile_spec
from fpspec.spec import parse

ROOT = Path(__file__).resolve().parents[2]
ARITH = """
arithmetic {
    input = fp32
    product = none
    accumulator = fp32
    init = +0.0
    output = fp32
}
"""
SPEC = "op sum\nn in 1..64\n" + ARITH + "order lanes(4, seq, pairwise)\n"
NS = ["-n", "9", "-n", "64"]
# sums() of every column, edited by hand into a sequential loop
SEQUENTIAL_SUMS = '''

def sums(X):
    X = np.asarray(X, np.float32)
    acc = X[0].copy()
    for row in X[1:]:
        acc = (acc + row).astype(np.float32)
    return acc
'''


def fpspec(*argv, env=None, cwd=ROOT):
    done = subprocess.run([sys.executable, "-m", "fpspec.cli", *map(str, argv)], capture_output=True, text=True,
                          cwd=cwd, env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}, timeout=600)
    return done.returncode, done.stdout, done.stderr


@pytest.fixture
def spec_file(tmp_path):
    path = tmp_path / "lanes.fps"
    path.write_text(SPEC)
    return path


def test_the_report_names_the_file_its_hash_and_the_process(spec_file, tmp_path):
    replica = tmp_path / "shipped.py"
    replica.write_text(compile_spec(parse(SPEC), target="numpy"))
    digest = hashlib.sha256(replica.read_bytes()).hexdigest()
    code, out, err = fpspec("verify", spec_file, "--replica", replica, *NS, "--samples", "40")
    assert code == 0, out + err
    assert f"replica file: {replica} (a private copy), sha256 {digest}, fresh process (pid " in out
    assert "checked: sum(), sums()" in out
    assert out.rstrip().endswith("EQUIVALENT")


@pytest.mark.parametrize("edit, evidence", [
    (SEQUENTIAL_SUMS, "sums()"),                                              # sum() still right
    (SEQUENTIAL_SUMS.replace("def sums(X)", "def sum(x)").replace("X[", "x[").replace(
        "X = np.asarray(X", "X = x = np.asarray(x").replace("(acc + row)", "np.float32(acc + row)"),
     "first difference"),
])
def test_a_replica_edited_by_hand_is_not_equivalent(spec_file, tmp_path, edit, evidence):
    replica = tmp_path / "edited.py"
    replica.write_text(compile_spec(parse(SPEC), target="numpy") + edit)
    code, out, err = fpspec("verify", spec_file, "--replica", replica, *NS, "--samples", "40")
    assert code == 1, out + err
    assert evidence in out
    assert out.rstrip().endswith("NOT EQUIVALENT")


def test_an_import_error_names_the_users_file(spec_file, tmp_path):
    replica = tmp_path / "broken.py"
    replica.write_text("import numpy as np\nraise ImportError('no such thing')\n")
    code, out, err = fpspec("verify", spec_file, "--replica", replica, *NS)
    assert (code, out) == (2, "")
    assert err.strip() == f"fpspec: error: replica {replica} does not import: ImportError: no such thing"


def test_a_file_planted_where_replicas_used_to_go_never_runs(spec_file, tmp_path):
    source = compile_spec(parse(SPEC), target="numpy")
    shared = tmp_path / "shared-tmp"
    (shared / "fpspec-replicas").mkdir(parents=True)
    marker = tmp_path / "planted-ran"
    digest = hashlib.sha256(source.encode()).hexdigest()[:16]
    (shared / "fpspec-replicas" / f"replica_{digest}.py").write_text(
        f"open({str(marker)!r}, 'w').close()\n" + source)
    code, out, err = fpspec("verify", spec_file, *NS, "--samples", "20", env={"TMPDIR": str(shared)})
    assert code == 0, out + err
    assert not marker.exists()
    # the private folder is removed; only the planted one is left
    assert sorted(p.name for p in shared.iterdir()) == ["fpspec-replicas"]


@pytest.mark.parametrize("argv, message", [
    (["--replica", "r.py", "--target", "numba"], "--replica r.py and --target numba contradict each other"),
])
def test_contradictory_options_are_refused(spec_file, argv, message):
    code, out, err = fpspec("verify", spec_file, *argv)
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1


def test_a_spec_without_arithmetic_is_refused_in_one_line(tmp_path):
    spec = tmp_path / "bare.fps"
    spec.write_text("op sum\nn in 1..64\norder seq\n")
    code, out, err = fpspec("verify", spec)
    assert (code, out) == (2, "")
    assert err.strip() == (f"fpspec: error: {spec} has no arithmetic section: nothing defines the bits a replica "
                           "must give (fpspec probe TARGET writes one)")


def test_a_replica_broken_above_the_revealed_range_is_not_equivalent(tmp_path):
    """Trees are revealed up to --max-n; guard boundaries and n above it are
    checked by samples, and what no check reached is named in the verdict."""
    spec = tmp_path / "open.fps"
    spec.write_text("op sum\nn in 1..\n" + ARITH + "order if n <= 40: seq else: lanes(2, seq, seq)\n")
    good = tmp_path / "good.py"
    good.write_text(compile_spec(parse(spec.read_text()), target="numpy"))
    code, out, err = fpspec("verify", spec, "--replica", good, "--max-n", "64", "--samples", "60")
    assert code == 0, out + err
    assert "n sampled:  65 79 80 81 82 129 32768 " in out     # the guard's 40 doubled: a recursion's split
    assert out.rstrip().endswith("EQUIVALENT (not checked: n > 32768)")
    bad = tmp_path / "bad.py"
    bad.write_text(good.read_text() + "\n_sum = sum\n\ndef sum(x):\n    assert len(x) < 100, 'broken'\n"
                   "    return _sum(x)\n")
    code, out, err = fpspec("verify", spec, "--replica", bad, "--max-n", "64", "--samples", "60")
    assert code == 1, out + err
    assert "at n=129: bad.py raised AssertionError: broken" in out


BF16_TORCH_SUM = """target "torch.sum"
op sum
n in 1..64

arithmetic {
    input = bf16
    product = none
    accumulator = fp32
    init = +0.0
    output = bf16
}

order
    if n <= 15: lanes(4, seq, seq, seq)
    else: lanes(8, blocks(2, seq, seq), seq, split(1, seq, seq), 16)
"""


def test_an_arithmetic_indistinguishable_at_small_n_is_not_a_difference(tmp_path):
    """`fpspec reveal torch.sum -n 1..64 --dtype bfloat16` writes this spec; at n = 2
    the probe cannot tell an fp32 accumulator rounded to bf16 from a bf16 one (one
    addition of two bf16 values): the outputs decide."""
    pytest.importorskip("torch")
    spec = tmp_path / "b.fps"
    spec.write_text(BF16_TORCH_SUM)
    code, out, err = fpspec("verify", spec, "--against", "torch.sum", "-n", "2", "-n", "17", "--samples", "60")
    assert code == 0, out + err
    assert "arithmetic: 4 compared, all equal (input=bf16 product=none accumulator=fp32" in out


VDOT_FP32 = """\
target "numpy.vdot"
op dot
n in 1..300

arithmetic {
    input = fp32
    product = rounded
    product_format = fp32
    accumulator = fp64
    init = +0.0
    output = fp32
}

arithmetic fma_fp32 {
    product = fma
    accumulator = fp32
}

arithmetic rounded_fp32 {
    accumulator = fp32
}

order
    if n <= 31: seq
    else: tail(32, lanes(32, using(fma_fp32, seq), using(rounded_fp32, lanes(4, pairwise, pairwise))), split(1, seq, seq))
"""


def test_a_product_format_indistinguishable_at_n_2_is_not_a_difference(tmp_path):
    """`fpspec reveal numpy.vdot --op dot -n 1..300 --dtype float32` writes this spec; at n = 2 two
    fp32 products added in fp64 and rounded to fp32 are one fp32 addition, and the probe says so."""
    spec = tmp_path / "v.fps"
    spec.write_text(VDOT_FP32)
    code, out, err = fpspec("verify", spec, "--against", "numpy.vdot", "-n", "2", "--samples", "60")
    assert code == 0, out + err
    assert ("arithmetic: 2 compared, all equal (input=fp32 product=rounded accumulator=fp64 init=+0.0 output=fp32 "
            "product_format=fp32 bias=none)") in out
