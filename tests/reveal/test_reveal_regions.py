"""A black box with two arithmetics in one tree, revealed and probed exactly.

The box computes a known spec with fpspec.arith.evaluate: its first 16 products
go through an fp32 FMA kernel of 4 lanes, the other 8 are rounded to fp32 and
added in fp64, as are the two parts (OpenBLAS sdot in small).  Revelation
gives the tree; the probes must give back the spec, arithmetic sections
included, word for word; a box outside the model's space is refused.
"""
from __future__ import annotations

import numpy as np
import pytest

from fpspec.arith.evaluate import evaluate
from fpspec.arith.probe import probe_arithmetic
from fpspec.errors import RevealRefused
from fpspec.formats import get_format, round_to
from fpspec.reveal.engine import reveal
from fpspec.reveal.targets import Target
from fpspec.spec import ast as A
from fpspec.spec import lower, parse
from fpspec.spec.expand import expand_arith
from fpspec.spec.regions import with_probed_arithmetic

N = 24
KNOWN = """op dot
n in 24

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

order split(16, using(fma_fp32, lanes(4, seq, pairwise)), seq)
"""


def _ident(x):
    return np.asarray(x, np.float64)


def model_box(text: str) -> Target:
    tree, main, regions = expand_arith(parse(text), N)
    return Target("synthetic.two_parts", "dot", N, "fp32", fn=lambda x, y: evaluate(tree, x, y, main, regions),
                  native=_ident, to_float64=_ident)


def test_two_parts_revealed_and_probed_exactly():
    target = model_box(KNOWN)
    tree = reveal(target).tree
    report = probe_arithmetic(target, tree)
    assert not report.consistent          # one arithmetic for the whole tree does not fit
    spec = lower(tree, A.Header(op="dot"))
    got, lines = with_probed_arithmetic(spec, N, tree, target, report)
    assert str(got) == KNOWN
    assert lines[-1].startswith("probed per part at n = 24; sample check of the spec: 288 random")


def _round_toward_zero(v: float) -> float:
    r = float(np.float32(v))
    return float(np.nextafter(np.float32(r), np.float32(0))) if abs(r) > abs(v) else r


def test_a_box_outside_the_model_is_refused():
    """Products rounded to fp32, summed exactly, the result rounded toward zero: no
    arithmetic of the model (all round to nearest) and no parts to try apart."""
    fmt = get_format("fp32")

    def box(x, y):
        p = round_to(fmt, np.asarray(x, np.float64) * np.asarray(y, np.float64))
        return _round_toward_zero(float(np.sum(p.astype(np.longdouble))))

    target = Target("synthetic.rz", "dot", 6, "fp32", fn=box, native=_ident, to_float64=_ident)
    tree = reveal(target).tree
    report = probe_arithmetic(target, tree)
    spec = lower(tree, A.Header(op="dot"))
    with pytest.raises(RevealRefused) as e:
        with_probed_arithmetic(spec, 6, tree, target, report)
    assert "\n" not in str(e.value)
    assert str(e.value).startswith("synthetic.rz: no arithmetic reproduces it (")
