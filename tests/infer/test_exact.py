"""Black boxes whose additions are all exact (fpspec.infer.exact note [exact sums]):
no order can be seen, so the spec is the exact sum's arithmetic, or a refusal saying why not."""
from __future__ import annotations

import functools
import math
import operator

import numpy as np
import pytest

from fpspec.errors import RevealRefused
from fpspec.infer import infer_spec
from fpspec.infer.exact import exact_span, order_free
from fpspec.reveal.targets import from_callable


def _box(fn, dtype):
    return lambda n: from_callable(fn, op="sum", n=n, dtype=dtype, name="exact.sum")


def _entries(spec) -> dict:
    block = next(b for b in spec.header.sections if b.name == "arithmetic")
    return {e.key: str(getattr(e.value, "name", e.value)) for e in block.entries}


def test_fp16_terms_summed_in_fp64_give_their_arithmetic_in_any_order():
    # reversed, in fp64, rounded once to fp16: no pair of masks ever rounds
    box = _box(lambda x: np.float16(functools.reduce(operator.add, x[::-1].astype(np.float64))), "fp16")
    r = infer_spec(box, (1, 300), progress=False, replica=None, holdout=4, fit_work=50_000)
    assert str(r.spec.order) == "seq" and not r.fallback
    assert _entries(r.spec) == {"input": "fp16", "product": "none", "accumulator": "fp64", "init": "none",
                                "output": "fp16"}
    assert r.spec.header.n.lo == 1 and r.spec.header.n.hi == 300


def test_an_init_of_plus_zero_is_read_from_the_all_negative_zero_sum():
    box = _box(lambda x: np.float16(0.0 + math.fsum(x.astype(np.float64))), "fp16")
    r = infer_spec(box, (2, 40), progress=False, replica=None, holdout=2, fit_work=50_000)
    assert _entries(r.spec)["init"] == "+0.0"


def test_an_exact_sum_of_fp32_terms_is_refused_naming_why():
    # math.fsum is exact for fp32 terms too, but no fp64 accumulation is: nothing is claimed
    box = _box(lambda x: np.float32(math.fsum(x.astype(np.float64))), "fp32")
    with pytest.raises(RevealRefused, match="fp32 terms do not add exactly in fp64 up to n = 50"):
        infer_spec(box, (1, 50), progress=False, replica=None, holdout=2, fit_work=50_000)


def test_exactness_is_decided_by_the_span_of_the_format_and_n():
    assert exact_span("fp16", 8192) and not exact_span("fp16", 8193)
    assert not exact_span("bf16", 2) and not exact_span("fp32", 2)
    from fpspec.arith import Arithmetic

    fp64 = Arithmetic(input="fp16", product="none", accumulator="fp64", output="fp16")
    fp32 = Arithmetic(input="fp16", product="none", accumulator="fp32", output="fp16")
    assert order_free("sum", fp64, {}, 64)
    assert not order_free("sum", fp64, {(0, 4): fp32}, 64)      # one part rounds: its order shows
    assert not order_free("dot", fp64, {}, 64)
