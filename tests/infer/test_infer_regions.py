"""Inference across n of a black box whose tree has parts in their own arithmetic."""
from __future__ import annotations

import math
import struct

import numpy as np

from fpspec.arith.evaluate import evaluate
from fpspec.arith.probe import same_bits
from fpspec.infer import infer_spec
from fpspec.reveal.targets import Target
from fpspec.spec import parse
from fpspec.spec.expand import expand_arith

# OpenBLAS sdot in small: below 8 one fp64 loop of products rounded to fp32; from 8 on an
# fp32 FMA kernel of 4 lanes over the first n & -8 products, the rest and the join in fp64
KNOWN = parse("""op dot
n in 1..
arithmetic {
    input = fp32
    product = rounded
    product_format = fp32
    accumulator = fp64
    init = +0.0
    output = fp32
}
arithmetic fma_fp32 {
    product = fma
    accumulator = fp32
}
order if n <= 7: seq else: tail(8, using(fma_fp32, lanes(4, seq, pairwise)), split(1, seq, seq))
""")


def _ident(x):
    return np.asarray(x, np.float64)


def _r32(v: float) -> float:
    return float(np.float32(v))


def _fma32(x: float, y: float, c: float) -> float:
    """round_fp32(x*y + c) once: the product is exact in float64, the sum rounded to odd."""
    p = x * y
    s = p + c
    bb = s - p
    err = (p - (s - bb)) + (c - bb)
    if err != 0 and math.isfinite(s) and struct.unpack("<q", struct.pack("<d", s))[0] & 1 == 0:
        s = math.nextafter(s, math.inf if err > 0 else -math.inf)
    return _r32(s)


def sdot(x, y) -> float:
    """KNOWN as a loop (as the library would run it): scalar Python, fast enough to probe."""
    x, y = [float(v) for v in x], [float(v) for v in y]
    n = len(x)
    body = n - n % 8 if n >= 8 else 0
    total, rest = 0.0, range(body, n)
    if body:
        lanes = []
        for j in range(4):
            acc = _r32(x[j] * y[j])
            for k in range(j + 4, body, 4):
                acc = _fma32(x[k], y[k], acc)
            lanes.append(acc)
        kernel = _r32(_r32(lanes[0] + lanes[1]) + _r32(lanes[2] + lanes[3]))
        tail = None
        for k in rest:
            tail = _r32(x[k] * y[k]) if tail is None else tail + _r32(x[k] * y[k])
        total = kernel if tail is None else kernel + tail
    else:
        total = _r32(x[0] * y[0])
        for k in range(1, n):
            total += _r32(x[k] * y[k])
    return _r32(total + 0.0)


def box(n: int) -> Target:
    return Target("synthetic.sdot", "dot", n, "fp32", fn=sdot, native=_ident, to_float64=_ident)


def test_the_box_is_the_known_spec():
    rng = np.random.default_rng(1)
    for n in (1, 5, 8, 13, 16, 40):
        tree, main, regions = expand_arith(KNOWN, n)
        x, y = rng.uniform(-1, 1, (2, n, 32)).astype(np.float32).astype(np.float64)
        want = evaluate(tree, x, y, main, regions)
        got = np.array([sdot(x[:, i], y[:, i]) for i in range(32)])
        assert same_bits(got, want).all(), f"n = {n}"


def test_inferred_spec_has_the_parts_and_the_bits_of_the_box():
    r = infer_spec(box, (1, 40), progress=False, holdout=4, replica=None)
    spec = r.spec
    assert r.ok
    assert [a.name for a in spec.header.arithmetics] == ["fma_fp32"]
    assert "using(fma_fp32, " in str(spec.order)
    rng = np.random.default_rng(0)
    for n in range(1, 41):
        tree, main, regions = expand_arith(spec, n)
        want_tree, want_main, want_regions = expand_arith(KNOWN, n)
        assert tree == want_tree
        x, y = rng.uniform(-1, 1, (2, n, 64)).astype(np.float32).astype(np.float64)
        got = evaluate(tree, x, y, main, regions)
        want = evaluate(want_tree, x, y, want_main, want_regions)
        assert same_bits(got, want).all(), f"n = {n}"
