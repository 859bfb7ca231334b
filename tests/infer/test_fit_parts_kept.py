"""The fit takes each observation apart once per combinator and parameter
(fpspec.infer.fit.Fitter._part): the searches of a guard's runs and of every
sample reuse the parts (each take is charged to the budget all the same)."""
from __future__ import annotations

import collections

import numpy as np

import fpspec.infer.fit as fit
from fpspec.infer.engine import _fit, first_design

from orders import numpy_pairwise


def test_numpy_pairwise_fit_cuts_each_observation_once_per_block_size(monkeypatch):
    calls = collections.Counter()
    for name in ("block_parts", "chunk_parts", "split_parts"):
        real = getattr(fit, name)

        def counted(o, *args, real=real, name=name):
            calls[(name, o.key, args)] += 1
            return real(o, *args)
        monkeypatch.setattr(fit, name, counted)
    ns = first_design(1, 300, np.random.default_rng(1))
    spec, _ = _fit({n: numpy_pairwise(n) for n in ns}, "order", 1, 5000)
    assert str(spec.lets[0].order) == ("if n <= 128: tail(8, lanes(8, seq, pairwise), seq) "
                                       "else: split(n // 2 - n // 2 % 8, order, order)")
    assert {name for name, _, _ in calls} == {"block_parts", "chunk_parts", "split_parts"}
    assert max(calls.values()) == 1
