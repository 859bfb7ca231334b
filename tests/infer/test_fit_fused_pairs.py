"""An order whose part makes only fused nodes of two children (fpspec.spec.regions note
[fused pairs]): revealed as binary nodes, fitted as such, and written fused once no binary
arithmetic fits the part."""
from __future__ import annotations

import dataclasses

from fpspec.arith.probe import ProbeReport
from fpspec.infer.roundtrip import _first_difference, replica_target
from fpspec.spec import parse
from fpspec.spec.expand import expand
from fpspec.spec.regions import main_arithmetic, probe_spec_arithmetic
from fpspec.tree import observable

NS = (3, 4, 6)
GENERATING = ("op sum\nn in 1..6\narithmetic { input = fp16 product = none accumulator = fp32 init = +0.0 "
              "output = fp16 fused { w = 16 extra_bits = 2 aligned = truncate result = rz c_aligned = true "
              "exponent_floor = -133 } }\norder blocks(2, if n <= 16: fused else: chain(16), seq)\n")


def test_blocks_of_fused_pairs_fitted_as_binary_nodes_are_written_fused():
    spec = parse(GENERATING)
    make = replica_target(spec, box="numpy")
    fitted = parse("target \"replica.sum\"\nop sum\nn in 1..6\norder blocks(2, seq, seq)\n")
    trees = {n: observable(expand(spec, n)) for n in NS}
    assert all(trees[n] == expand(fitted, n) for n in NS)   # what revelation and the fit see
    # the probes at n = 4 find no fused node and no binary arithmetic that holds
    report = ProbeReport(dataclasses.replace(main_arithmetic(spec), fused=None), consistent=False)
    out, lines = probe_spec_arithmetic(fitted, {n: make(n) for n in NS}, trees, report, checks=32)
    assert str(out.order) == "blocks(2, fused, seq)" and out.header.arithmetics == ()
    fused = main_arithmetic(out).fused
    assert (fused.extra_bits, fused.aligned, fused.result) == (2, "truncate", "rz")
    assert any("fused pairs" in line for line in lines)
    assert _first_difference(spec, out, range(1, 7), arithmetic=True) == ""
