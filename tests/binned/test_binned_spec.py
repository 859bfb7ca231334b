"""The binned arithmetic in the spec language: parse, print, check, `fpspec show`."""
from __future__ import annotations

import math
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import pytest

from fpspec.arith.binned import error_bound
from fpspec.arith.model import Arithmetic
from fpspec.errors import SpecError
from fpspec.spec import check, parse
from fpspec.spec.ast import Apply, Entry

ROOT = Path(__file__).resolve().parents[2]
SPEC = """target "binned"
op sum
n in 1..

arithmetic {
    input = fp64
    product = none
    accumulator = binned(fold = 3)
    output = fp64
}

order seq
"""


def test_round_trip_and_the_arithmetic():
    spec = parse(SPEC)
    assert str(spec) == SPEC and parse(str(spec)) == spec
    assert spec.header.arithmetic.get("accumulator") == Apply("binned", (Entry("fold", 3),))
    a = Arithmetic.from_entries(spec.header.arithmetic.entries)
    assert (a.binned, a.accumulator, a.input) == (3, "fp64", "fp64")
    assert Arithmetic.from_entries(a.to_entries()) == a
    check(spec)


@pytest.mark.parametrize("change,message", [
    ("binned(fold = 3)", None),
    ("binned(fold = 53)", "expected an integer fold in 2..52"),
    ("binned(fold = 1)", "expected an integer fold in 2..52"),
    ("binned(width = 3)", "expected a format or binned(fold = K)"),
    ("stacked(fold = 3)", "expected a format or binned(fold = K)"),
])
def test_check_names_what_is_wrong(change, message):
    spec = parse(SPEC.replace("binned(fold = 3)", change))
    if message is None:
        check(spec)
        return
    with pytest.raises(SpecError, match=message.replace("(", r"\(").replace(")", r"\)")):
        check(spec)


def test_check_refuses_other_formats_and_named_sections():
    with pytest.raises(SpecError, match="input = fp64 or fp32"):
        check(parse(SPEC.replace("input = fp64", "input = fp16").replace("output = fp64", "output = fp16")))
    with pytest.raises(SpecError, match="expected output = fp64"):
        check(parse(SPEC.replace("output = fp64", "output = fp32")))
    named = SPEC.replace("order seq", "arithmetic b { accumulator = binned(fold = 2) }\n\norder using(b, seq)")
    with pytest.raises(SpecError, match="whole accumulation"):
        check(parse(named))


def test_show_says_the_tree_does_not_matter_and_prints_the_bound(tmp_path):
    f = tmp_path / "b.fps"
    f.write_text(SPEC)
    out = subprocess.run([sys.executable, "-m", "fpspec.cli", "show", str(f), "-n", "1000000", "--max-abs", "1e10"],
                         capture_output=True, text=True, cwd=ROOT, env={"PYTHONPATH": str(ROOT), "PATH": ""})
    assert out.returncode == 0, out.stderr
    assert "the tree does not matter" in out.stdout
    assert "((" not in out.stdout             # no tree printed
    printed = float(out.stdout.strip().splitlines()[-1].split("= ")[-1])
    exact = error_bound(1000000, 1e10, "fp64", 3)
    # the bound rounded up to a float: not below the exact bound, at most one ulp above
    assert Fraction(printed) >= exact and Fraction(math.nextafter(printed, 0)) < exact
