"""The fused-node model against measured Tensor Core outputs: every row, bit for bit."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from fpspec.arith import PARAMS, fused_sum
from fpspec.arith.probe import same_bits

from arith_vectors import CASES, PARAM_FORMATS, VECTORS, load

pytestmark = pytest.mark.skipif(not VECTORS.is_dir(), reason="tensor-core vectors not present")


@pytest.mark.parametrize("gpu,fmt,out", CASES)
def test_every_row_matches(gpu, fmt, out):
    a, b, c, d = load(gpu, fmt, out)
    got = fused_sum(a, b, c, f"{gpu.lower()}-{PARAM_FORMATS.get(fmt, fmt)}", out_format=out)
    bad = np.flatnonzero(~same_bits(got, d))
    assert bad.size == 0, f"{bad.size} of {len(d)} rows differ, first row {bad[:1]}"


@pytest.mark.parametrize("change", [dict(extra_bits=1), dict(extra_bits=3), dict(aligned="floor"),
                                    dict(result="rne"), dict(c_aligned=False)])
def test_other_parameters_do_not_match(change):
    """The vectors pin the parameters down: each single change breaks some rows."""
    a, b, c, d = load("H100", "fp16", "fp32")
    params = dataclasses.replace(PARAMS["h100-fp16"], **change)
    got = fused_sum(a, b, c, params)
    assert (~same_bits(got, d)).sum() > 0


def test_a100_parameters_do_not_reproduce_h100():
    a, b, c, d = load("H100", "bf16", "fp32")
    got = fused_sum(a, b, c, dataclasses.replace(PARAMS["a100-bf16"], w=16))
    assert (~same_bits(got, d)).sum() > 0


@pytest.mark.parametrize("fmt", ["E4M3", "E5M2"])
def test_fp8_fp32_rows_do_not_contain_the_recorded_c(fmt):
    """Note [fp8 rows without c] (arith_vectors.py): with the recorded c no row fits."""
    a, b, c, d = load("H100", fmt, "fp32", recorded_c=True)
    got = fused_sum(a, b, c, f"h100-{PARAM_FORMATS[fmt]}")
    assert (~same_bits(got, d)).sum() == len(d)


@pytest.mark.parametrize("fmt", ["E4M3", "E5M2"])
def test_fp8_rows_with_fp16_output_match_the_mma_unit(fmt):
    """fpspec.arith.units note [fp8 mma with fp16 output]: two fp16 k16 steps over the k in alternate
    pairs from +0.0, c added last: every row; one node of all 32 products (MMA-Sim's Hopper form) does not."""
    from fpspec.arith.units import UNITS, mmasim_conventions, unit_dot

    a, b, c, d = load("H100", fmt, "fp16")
    unit = UNITS[f"h100-{PARAM_FORMATS[fmt]}-mma-to-fp16"]
    bad = np.flatnonzero(~same_bits(unit_dot(unit, a, b, c), d))
    assert bad.size == 0, f"{bad.size} of {len(d)} rows differ, first row {bad[:1]}"
    # the order of the steps and the place of c matter: halves in order, or c as the first step's c, miss rows
    halves = dataclasses.replace(unit, pairs=False)
    assert (~same_bits(unit_dot(halves, a, b, c), d)).sum() > 100
    c_first = dataclasses.replace(unit, c_last=False)
    assert (~same_bits(unit_dot(c_first, a, b, c), d)).sum() > 100
    one_node = mmasim_conventions(dataclasses.replace(unit, pairs=False, c_last=False,
                                                      node=dataclasses.replace(unit.node, w=32)))
    assert (~same_bits(unit_dot(one_node, a, b, c), d)).sum() > 1000
