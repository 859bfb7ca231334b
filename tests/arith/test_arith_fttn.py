"""FTTN's simple test (seed 004, Section V): 0 on V100 and A100, 191.875 on H100."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "gpu" / "fttn_simple_test.py"


def _example():
    spec = importlib.util.spec_from_file_location("fttn_simple_test", EXAMPLE)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("params,expected", [("v100-fp16", 0.0), ("a100-fp16", 0.0), ("h100-fp16", 191.875)])
def test_fttn_simple_test(params, expected):
    d, ab = _example().fttn_d(params)
    assert d == expected
    assert ab == 2.0 ** 20 - expected


def test_exact_answer_differs():
    import numpy as np

    a, b = _example().fttn_row_and_column()
    assert 2.0 ** 20 - float(np.dot(a, b)) == 191.984375
