"""Fused nodes outside the FTTN form in the numba replica: MMA-Sim's zero and c
conventions (fpspec.arith.fused note [zero exponent]) and AMD CDNA3's combine
(note [amd combine]), node by node against the numpy replica and the model."""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from conftest import assert_same_bits, load_replica
from fpspec.arith.fused import _FORMATS, fused_node, round_value
from fpspec.arith.model import Arithmetic
from fpspec.arith.params import PARAMS
from fpspec.arith.units import get_unit, mmasim_conventions
from fpspec.compile import compile_spec
from fpspec.spec import ast as A
from fpspec.spec import parse

ROWS = 160


def _spec(params) -> A.Spec:
    arithmetic = Arithmetic(input=params.input, product="exact", accumulator=params.output,
                            output=params.output, fused=params)
    header = A.Header(target=f"torch.matmul ({params.input})", op="gemm", n=A.Range(1, None),
                      sections=(A.Block("arithmetic", arithmetic.to_entries()),))
    return parse(str(A.Spec(header, (), A.Chain(A.Num(params.w)))))


def _values(rng, fmt: str, shape, spread: int):
    """Values of `fmt` with exponents over `spread` binades around 1, zeros and subnormals."""
    precision, emin, emax = _FORMATS[fmt]
    e = rng.integers(max(emin - precision, -spread), min(emax, spread) + 1, shape)
    v = rng.choice([-1.0, 1.0], shape) * np.ldexp(1.0 + rng.random(shape), e)
    v = round_value(v, precision, emin, emax, "rne")
    v[rng.random(shape) < 0.15] = 0.0
    return v


def _rows(params, seed: int):
    """Rows of one node: random ones, cancelling pairs, tiny rows (with a zero against b's
    largest binade and a subnormal c: where MMA-Sim's conventions differ) and specials."""
    rng = np.random.default_rng(seed)
    fa, fb = params.input, params.input_b or params.input
    a = _values(rng, fa, (ROWS, params.w), 40)
    b = _values(rng, fb, (ROWS, params.w), 40)
    a[: ROWS // 4, 1::2] = -a[: ROWS // 4, 0::2]           # exact cancellations
    b[: ROWS // 4, 1::2] = b[: ROWS // 4, 0::2]
    tiny = slice(ROWS // 4, ROWS // 2)
    for v, fmt in ((a, fa), (b, fb)):
        precision, emin, emax = _FORMATS[fmt]
        v[tiny] = round_value(np.ldexp(v[tiny], -min(40, emax)), precision, emin, emax, "rne")
    a[tiny, 0] = 0.0
    b[tiny, 0] = np.ldexp(1.5, _FORMATS[fb][2])
    c = _values(rng, params.output, ROWS, 40)
    c[tiny] = np.ldexp(1.0, _FORMATS[params.output][1] - 3)
    if params.output == "fp16":
        # c = 2^-17 and products 2^-25 (a tie of fp16's subnormal grid) and 2^-40: the grid
        # below c's exponent keeps 2^-40 (rounding up) only if c is not clamped at 2^-14
        a[ROWS // 2], b[ROWS // 2], c[ROWS // 2] = 0.0, 0.0, 2.0 ** -17
        a[ROWS // 2, :2], b[ROWS // 2, :2] = (2.0 ** -12, 2.0 ** -20), (2.0 ** -13, 2.0 ** -20)
    a[-4, 2], a[-3, 2], b[-3, 3] = np.inf, np.inf, -np.inf
    a[-2, 0], b[-2, 0] = np.inf, 0.0
    c[-1] = np.nan
    return a, b, c


CASES = [
    ("t4-fp16-to-fp16", PARAMS["t4-fp16-to-fp16"]),        # an fp16 c clamped at fp16's emin
    ("h100-bf16-mmasim", mmasim_conventions(get_unit("h100-bf16")).node),
    # AMD's combine with even / odd sub-blocks (its fp8 path) over e4m3 inputs, which the
    # replicas read (the fnuz formats they do not)
    ("amd-fp8e4m3", replace(PARAMS["mi300a-fp8e4m3fnuz"], input="fp8e4m3")),
]


@pytest.mark.parametrize("label,params", CASES, ids=[c[0] for c in CASES])
def test_numba_node_equals_numpy_node_equals_model(label, params):
    assert not params.conventional
    a, b, c = _rows(params, params.w + len(label))
    want = fused_node(a, b, c, params)
    fttn = replace(params, zero_exponent=None, c_emin=None, combine="aligned", interleave=1)
    assert not np.array_equal(fused_node(a, b, c, fttn), want, equal_nan=True)   # the rows tell them apart
    spec = _spec(params)
    mod_np = load_replica(compile_spec(spec, "numpy"), f"{label}_nodes_numpy")
    mod_nb = load_replica(compile_spec(spec, "numba"), f"{label}_nodes_numba")
    got_np = np.asarray(mod_np._fused_range(a.T, b.T, 0, 1, params.w, c), np.float64)
    assert_same_bits(got_np, want, f"{label} (numpy replica)")
    a32, b32 = a.astype(np.float32), b.astype(np.float32)
    got_nb = np.array([mod_nb._fused_range(a32[i], b32[i], 0, 1, params.w, c[i]) for i in range(ROWS)],
                      np.float64)
    assert_same_bits(got_nb, got_np, f"{label} (numba replica)")
