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
    assert "_round_out_bits(np.float64(v))" in source
    m = load_replica(source, f"out_{fmt}")
    precision, emin, emax = FORMATS[fmt]
    values = _values(precision, emin, emax)
    got = np.array([m._round_out_bits(float(v)) for v in values])
    want = np.array([m._round_dir(float(v), precision, emin, emax, False, True) for v in values])
    assert_same_bits(got, want, fmt)
