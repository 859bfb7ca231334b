"""A spec without an arithmetic section (what `fpspec reveal --no-probe` writes) still names its
formats: its replicas take the input format it names, add in the wider of fp32 and the input,
and return its output format (fpspec.spec.regions `_order_only`)."""
from __future__ import annotations

import numpy as np
import pytest
from fresh_replicas import assert_fresh_bits, reference_outputs, run_fresh

from fpspec.compile import compile_spec
from fpspec.spec import check, parse
from fpspec.spec.regions import main_arithmetic

SPEC = """target "torch.mean"
op sum
n in 64
formats {{ input = {fin}  output = {fout} }}
order blocks(8, seq, gpu_tree)
"""


@pytest.mark.parametrize("fin, fout, acc", [("fp16", "fp16", "fp32"), ("fp64", "fp64", "fp64")])
def test_order_only_arithmetic_follows_formats(fin, fout, acc):
    a = main_arithmetic(parse(SPEC.format(fin=fin, fout=fout)))
    assert (a.input, a.accumulator, a.output) == (fin, acc, fout)


@pytest.mark.parametrize("target", ["numpy", "numba"])
def test_order_only_fp16_replica_takes_fp16(target, tmp_path):
    spec = parse(SPEC.format(fin="fp16", fout="fp16"))
    check(spec)
    # 2048 + 1 + 1 + ...: fp32 partial sums keep the ones an fp16 sum would lose
    x = np.ones(64, np.float16)
    x[0] = 2048
    (got,) = run_fresh([(compile_spec(spec, target=target), "sum", (x,))], tmp_path)
    want = reference_outputs(spec, "sum", (x,))
    assert float(np.asarray(want).ravel()[0]) == 2112.0
    assert_fresh_bits(got, want)


def test_spec_format_of_an_order_only_spec_is_its_replicas_format():
    from fpspec.verify import spec_format

    both = parse(SPEC.format(fin="fp16", fout="fp32"))
    only_input = parse(SPEC.replace("  output = {fout}", "").format(fin="bf16"))
    assert spec_format(both) == (main_arithmetic(both).input, main_arithmetic(both).output) == ("fp16", "fp32")
    assert spec_format(only_input) == ("bf16", "bf16")
    assert main_arithmetic(only_input).accumulator == "fp32"
