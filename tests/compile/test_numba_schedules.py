"""Numba gemm replicas with fused nodes run by note [schedules] (the order
recorded once per n, one compiled loop over tiles of outputs, fused nodes on
decoded integers): in a fresh interpreter, imported by path, against the numpy
replica of the same spec, bit for bit, with zeros, subnormals, cancellations and
values across many binades.  (Inputs with an infinity take the compiled order:
tests/compile/test_fused.py's samples have them.)"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np

from fpspec.arith.fused import _FORMATS, round_value
from fpspec.arith.model import Arithmetic
from fpspec.arith.params import PARAMS
from fpspec.arith.units import get_unit, mmasim_conventions
from fpspec.compile import compile_spec
from fpspec.spec import ast as A
from fpspec.spec import parse

ROOT = Path(__file__).resolve().parents[2]

# (label, node parameters, order, k): the H100 chain of 16-product nodes with a last node of 8
# products, MMA-Sim's conventions for zeros and c (bf16) over pairs of nodes folded by an
# add in the nodes' format, a T4 node whose fp16 result is rounded at fp16's emin (c clamped there)
# (bf16 products can leave fp32's range: over every n, a block of one leaf would meet a binary
# node, which numba refuses (exact products); at n = 37 every block has a fused node)
CASES = [
    ("h100-fp16", PARAMS["h100-fp16"], "chain(16)", 40),
    ("h100-bf16-mmasim", mmasim_conventions(get_unit("h100-bf16")).node, "blocks(16, chain(8), seq)", 37),
    ("t4-fp16-to-fp16", PARAMS["t4-fp16-to-fp16"], "chain(8)", 29),
]

RUNNER = r"""
import importlib.util, json, sys
import numpy as np
def load(path):
    spec = importlib.util.spec_from_file_location("replica", path)   # no sys.modules entry
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
report = {}
for label, numba_path, numpy_path, data in json.loads(sys.argv[1]):
    nb, ref = load(numba_path), load(numpy_path)
    A, B = np.load(data + "_A.npy"), np.load(data + "_B.npy")
    got, want = nb.gemm(A, B), ref.gemm(A, B)
    scheduled = [key[1] for key, rows in nb._SCHEDULES.items() if rows is not None]
    width = {2: np.uint16, 4: np.uint32}[got.dtype.itemsize]
    differ = lambda x, y: int(np.sum((x.view(width) != y.view(width)) & ~(np.isnan(x) & np.isnan(y))))
    report[label] = {"scheduled": scheduled, "differ": differ(got, want), 
                     "outputs": int(got.size), "nonzero": int(np.count_nonzero(got)), "dtype": str(got.dtype)}
print(json.dumps(report))
"""


def _spec(params, order: str, k: int):
    arithmetic = Arithmetic(input=params.input, product="exact", accumulator=params.output,
                            output=params.output, fused=params)
    header = A.Header(target=f"torch.matmul ({params.input})", op="gemm",
                      n=A.Range(k, k) if params.input == "bf16" else A.Range(1, None),
                      sections=(A.Block("arithmetic", arithmetic.to_entries()),))
    return parse(f"{header}\norder {order}\n")


def _operands(fmt: str, shape, rng):
    """Values of `fmt` over 24 binades around 1 (its subnormals included), 15 % zeros."""
    precision, emin, emax = _FORMATS[fmt]
    e = rng.integers(max(emin - precision + 1, -12), min(emax, 12) + 1, shape)
    v = rng.choice([-1.0, 1.0], shape) * np.ldexp(1.0 + rng.random(shape), e)
    v = round_value(v, precision, emin, emax, "rne")
    v[rng.random(shape) < 0.15] = 0.0
    return v


def test_fused_gemm_schedule_equals_numpy_replica_in_a_fresh_process(tmp_path):
    jobs = []
    for label, params, order, k in CASES:
        spec = _spec(params, order, k)
        paths = []
        for target in ("numba", "numpy"):
            path = tmp_path / f"{label}_{target}.py"
            path.write_text(compile_spec(spec, target))
            paths.append(str(path))
        rng = np.random.default_rng(k)
        a = _operands(params.input, (9, k), rng)
        b = _operands(params.input_b or params.input, (k, 11), rng)
        a[:, 1] = -a[:, 0]                      # exact cancellations in every output's first node
        b[1] = b[0]
        a[2] = np.ldexp(a[2], -10)              # a row of tiny products: c far above them
        dtype = np.float16 if params.input == "fp16" else np.float32
        np.save(tmp_path / f"{label}_A.npy", a.astype(dtype))
        np.save(tmp_path / f"{label}_B.npy", b.astype(dtype))
        jobs.append((label, *paths, str(tmp_path / label)))
    done = subprocess.run([sys.executable, "-c", RUNNER, json.dumps(jobs)], capture_output=True, text=True,
                          cwd=tmp_path, timeout=600)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    for label, params, order, k in CASES:
        r = report[label]
        assert r["scheduled"] == [k], (label, r)          # the recorded schedule ran, at n = k
        assert r["nonzero"] > r["outputs"] // 2, (label, r)
        assert r["differ"] == 0, (label, r)
