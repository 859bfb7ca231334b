"""An emulated output format rounds by the float64's bits in the numba replica
(fpspec.compile.backends.numba note [output rounding by the bits]): the same
bits as `_round_dir`, the rounding it replaces, on ties, the overflow
threshold, subnormals of the format, float64 subnormals, zeros, infinities
and NaN."""
from __future__ import annotations

import numpy as np
import pytest

from conftest import assert_same_bits, load_replica
from fpspec.compile import compile_spec
from fpspec.spec import parse

SPEC = """target "t"
op sum
n in 1..

arithmetic {{
    input = fp32
    accumulator = fp32
    output = {fmt}
}}

order seq
"""

# (precision, emin, emax) of each output format checked
FORMATS = {"fp16": (11, -14, 15), "bf16": (8, -126, 127)}


def _values(precision: int, emin: int, emax: int) -> np.ndarray:
    rng = np.random.default_rng(7)
    e = rng.integers(emin - precision - 3, emax + 2, 3000)
    random = rng.choice([-1.0, 1.0], 3000) * np.ldexp(1.0 + rng.random(3000), e)
    # exact ties and their neighbours at every binade, normal and subnormal
    q = np.maximum(e, emin) - (precision - 1)
    kept = rng.integers(1 << (precision - 1), 1 << precision, 3000)
    tie = np.ldexp(kept + 0.5, q)
    near = np.concatenate([tie, np.nextafter(tie, 0), np.nextafter(tie, np.inf)])
    top = (2.0 - 2.0 ** (1 - precision)) * 2.0 ** emax
    edges = np.array([top, np.nextafter(top, np.inf), top + 2.0 ** (emax - precision),
                      np.nextafter(top + 2.0 ** (emax - precision), 0), 2.0 ** emin, 2.0 ** (emin - precision),
                      np.nextafter(2.0 ** (emin - precision), np.inf), 5e-324, 2.2e-308, 0.0, np.inf, np.nan, 1.0])
    v = np.concatenate([random, near, edges])
    return np.concatenate([v, -v])


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_output_rounding_by_bits_matches_round_dir(fmt):
    source = compile_spec(parse(SPEC.format(fmt=fmt)), "numba")
    assert "return _round_bits(np.float64(v), _OUT_P, _OUT_EMIN, _OUT_OVER, False, True, 0.0)" in source
    m = load_replica(source, f"out_{fmt}")
    precision, emin, emax = FORMATS[fmt]
    values = _values(precision, emin, emax)
    got = np.array([m._round_out(float(v)) for v in values])
    want = np.array([m._round_dir(float(v), precision, emin, emax, False, True) for v in values])
    assert_same_bits(got, want, fmt)


@pytest.mark.parametrize("rz", [False, True])
@pytest.mark.parametrize("subnormals", [False, True])
def test_round_bits_matches_round_dir(rz, subnormals):
    """`_round_bits`, the one rounding by the bits of the output format and of fused nodes'
    results: toward zero or to nearest even, with or without subnormals, as `_round_dir`."""
    m = load_replica(compile_spec(parse(SPEC.format(fmt="fp16")), "numba"), "round_bits")
    precision, emin, emax = FORMATS["fp16"]
    over = 2.0 ** (emax + 1) if rz else (2.0 - 2.0 ** (1 - precision)) * 2.0 ** emax
    values = _values(precision, emin, emax)
    got = np.array([m._round_bits(float(v), precision, emin, over, rz, subnormals, 2.0 ** emin) for v in values])
    want = np.array([m._round_dir(float(v), precision, emin, emax, rz, subnormals) for v in values])
    assert_same_bits(got, want, f"rz={rz} subnormals={subnormals}")
