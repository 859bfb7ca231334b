"""fpspec.testing: assert_order, its fixture and its marker pin a library's order."""
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from fpspec.testing import assert_order

DATA = Path(__file__).parent / "data"
ROOT = Path(__file__).resolve().parents[2]


def test_numpy_sum_follows_its_spec():
    report = assert_order(np.sum, DATA / "numpy_sum.fps", n=[8, 9, 129])
    assert report.equivalent and report.n_values == (8, 9, 129)
    assert report.sides == ("numpy.sum",)        # found through numpy's own adapter
    assert report.samples_run == 200             # the spec has an arithmetic section


def test_a_wrong_order_fails_with_the_differing_subtree(tmp_path):
    seq = tmp_path / "seq.fps"
    seq.write_text("op sum\nn in 2..\norder seq\n")
    with pytest.raises(AssertionError) as info:
        assert_order(np.sum, seq, n=9)
    text = str(info.value)
    assert "numpy.sum does not follow" in text
    assert "(((0 1) (2 3)) ((4 5) (6 7)))" in text and "(((((((0 1) 2) 3) 4) 5) 6) 7)" in text


def test_a_plain_callable_with_a_different_arithmetic_fails():
    def sum_without_initial_zero(x):          # numpy's order, but -0.0 stays -0.0
        x = np.asarray(x, np.float32)
        return np.float32(-0.0) if np.all((x == 0) & np.signbit(x)) else np.sum(x)

    with pytest.raises(AssertionError) as info:
        assert_order(sum_without_initial_zero, DATA / "numpy_sum.fps", n=[9, 33])
    assert "init: " in str(info.value) or "0x80000000" in str(info.value)


def test_a_relative_spec_path_is_found_beside_the_calling_file():
    assert assert_order("numpy.sum", "data/numpy_sum.fps", n=9, samples=0).equivalent


PLUGIN_TESTS = '''
import numpy as np
import pytest

def test_fixture_pass(assert_order):
    assert_order(np.sum, "numpy_sum.fps", n=[9, 33])

def test_fixture_fail(assert_order):
    assert_order(np.sum, "seq.fps", n=[9])

@pytest.mark.fpspec_order(np.sum, "numpy_sum.fps", n=[9])
def test_marker_pass():
    pass

@pytest.mark.fpspec_order(np.sum, "seq.fps", n=[9])
def test_marker_fail():
    pass
'''


def test_the_plugin_fixture_and_marker_in_a_project(tmp_path):
    (tmp_path / "numpy_sum.fps").write_text((DATA / "numpy_sum.fps").read_text())
    (tmp_path / "seq.fps").write_text("op sum\nn in 2..\norder seq\n")
    (tmp_path / "test_pinned.py").write_text(PLUGIN_TESTS)
    env = dict(os.environ, PYTHONPATH=str(ROOT), PYTEST_DISABLE_PLUGIN_AUTOLOAD="1")
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "fpspec.testing", "-q", "-p", "no:cacheprovider",
                           "--rootdir", str(tmp_path), str(tmp_path)],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    out = proc.stdout + proc.stderr
    assert "2 failed, 2 passed" in out, out
    assert "FAILED test_pinned.py::test_fixture_fail" in out and "FAILED test_pinned.py::test_marker_fail" in out
    assert "first difference at child 0 (leaves 0..7)" in out
