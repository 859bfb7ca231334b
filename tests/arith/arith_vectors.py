"""Load the measured Tensor Core vectors (data/tensor-core-vectors)."""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np

VECTORS = Path(os.environ["FPSPEC_TC_VECTORS"])   # located by tests/conftest.py

# (gpu, input, output): file stem pieces
CASES = [
    ("H100", "fp16", "fp32"), ("H100", "fp16", "fp16"), ("H100", "bf16", "fp32"), ("H100", "tf32", "fp32"),
    ("A100", "fp16", "fp32"), ("A100", "fp16", "fp16"), ("A100", "bf16", "fp32"), ("A100", "tf32", "fp32"),
    ("H100", "E4M3", "fp32"), ("H100", "E5M2", "fp32"),
]
# the fused parameter set of each measured input format
PARAM_FORMATS = {"E4M3": "fp8e4m3", "E5M2": "fp8e5m2"}


def _hex(path: Path) -> np.ndarray:
    rows = [line.split() for line in path.read_text().splitlines() if line.strip()]
    return np.array([[int(v, 16) for v in r] for r in rows], dtype=np.uint32).view(np.float32).astype(np.float64)


def _binary(path: Path) -> np.ndarray:
    rows = [line.strip() for line in path.read_text().splitlines() if line.strip()]
    return np.array([int(r, 2) for r in rows], dtype=np.uint32).view(np.float32).astype(np.float64)


def load(gpu: str, fmt: str, out: str, recorded_c: bool = False):
    """a, b (rows, K), c (rows,), d (rows,) as float64 values."""
    stem = f"{gpu}__{fmt}__"
    a = _hex(VECTORS / f"{stem}a_{gpu}_{fmt}.txt")
    b = _hex(VECTORS / f"{stem}b_{gpu}_{fmt}.txt")
    c = _binary(VECTORS / f"{stem}c_{gpu}_fp32.txt")
    d = _binary(VECTORS / f"{stem}d_{gpu}_{out}.txt")
    if out == "fp16":   # for fp16 output c was first rounded to fp16
        c = c.astype(np.float16).astype(np.float64)
    if fmt in PARAM_FORMATS and out == "fp32" and not recorded_c:
        # Note [fp8 rows without c]: the recorded fp32 outputs of the fp8 programs do
        # not contain the recorded c: every row is c = +0.0 plus one 32-product node
        # (13 fraction bits), bit for bit, and no model that adds c fits any row
        # (d - c is off by c itself).
        c = np.zeros_like(c)
    return a, b, c, d
