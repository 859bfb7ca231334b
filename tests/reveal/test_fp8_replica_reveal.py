"""An fp8 GEMM's replica is revealed with inputs its format holds."""
from __future__ import annotations

from pathlib import Path

from fpspec.compile import compile_spec, load_replica
from fpspec.reveal.engine import reveal
from fpspec.reveal.targets import from_callable
from fpspec.spec import expand, parse

SPEC = Path(__file__).parents[2] / "examples" / "gpu" / "torch_scaled_mm_e4m3_16x16x64_h200.fps"


def test_the_fp8_scaled_mm_replica_reveals_the_spec_tree():
    # the replica refuses values that are not fp8e4m3 (torch would round them): every input the
    # revelation engine sends must be one (`fpspec verify SPEC --against torch._scaled_mm` reveals it)
    spec = parse(SPEC.read_text())
    rep = load_replica(compile_spec(spec, "numpy"), SPEC.name)
    target = from_callable(rep.gemm, op="gemm", n=64, dtype="fp8e4m3", m=16, ncols=16, out_fmt="fp32")
    assert reveal(target).tree == expand(spec, 64)
