"""An fp8 GEMM's replica is revealed with inputs its format holds (its tree, then verify's verdict)."""
from __future__ import annotations

from pathlib import Path

from fpspec import verify as V
from fpspec.spec import parse

SPEC = Path(__file__).parents[2] / "examples" / "gpu" / "torch_scaled_mm_e4m3_16x16x64_h200.fps"


def test_the_fp8_scaled_mm_spec_and_its_replica_are_equivalent():
    # the replica refuses values that are not fp8e4m3 (as torch would round them): every input
    # the revelation engine sends must be one, and the replica keeps the spec's fp32 output
    report = V.verify_spec(parse(SPEC.read_text()), spec_name=SPEC.name, backend="numpy", samples=20, m=16,
                           ncols=16)
    assert report.equivalent, report.text()
    assert [t.equal for t in report.trees] == [True]
