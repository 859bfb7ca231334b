"""Every backend's replica checks its arguments with the same code
(fpspec/compile/runtime/inputs_rt.py): imported by path in a fresh interpreter,
the NumPy, Numba and Triton replicas of one spec refuse the same bad arguments
with the same exception and the same message, and give NumPy results for NumPy
arguments (Triton: torch results for torch arguments, on their device)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from fpspec.compile import compile_kernel
from fpspec.compile.build import build_kernel
from fpspec.spec import parse

ROOT = Path(__file__).resolve().parents[2]
SUM = """op sum
n in 2..100
arithmetic { input = fp32 product = none accumulator = fp32 init = +0.0 output = fp32 }
order lanes(4, tail(8, pairwise, seq), pairwise)
"""
DOT_BF16 = """op dot
n in 1..64
arithmetic { input = bf16 product = exact accumulator = fp32 init = none output = bf16 }
order seq
"""

# run in the fresh interpreter: every replica file by path (never registered in sys.modules)
SCRIPT = textwrap.dedent("""
    import importlib.util, json, sys
    import numpy as np

    def load(path):
        spec = importlib.util.spec_from_file_location("replica", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module

    f32 = np.float32
    bad_sum = {
        "list": lambda m: m.sum([1.0, 2.0, 3.0]),
        "list of float32": lambda m: m.sum([f32(1.0), f32(2.0)]),
        "scalar": lambda m: m.sum(f32(3.0)),
        "0-d": lambda m: m.sum(np.ones((), f32)),
        "2-d": lambda m: m.sum(np.ones((4, 5), f32)),
        "sums 1-d": lambda m: m.sums(np.ones(5, f32)),
        "float64": lambda m: m.sum(np.ones(3, np.float64)),
        "int": lambda m: m.sum(np.arange(3)),
        "too short": lambda m: m.sum(np.ones(1, f32)),
        "too long": lambda m: m.sum(np.ones(101, f32)),
        "masked": lambda m: m.sum(np.ma.masked_array(np.ones(3, f32), [0, 1, 0])),
    }
    bad_dot = {
        "off the bf16 grid": lambda m: m.dot(np.full(4, 1.0 + 2.0 ** -12, f32), np.ones(4, f32)),
        "float16": lambda m: m.dot(np.ones(4, np.float16), np.ones(4, np.float16)),
        "y a list": lambda m: m.dot(np.ones(4, f32), [1.0, 1.0, 1.0, 1.0]),
    }
    report = {}
    for backend, path in json.loads(sys.argv[1]).items():
        module = load(path)
        errors = {}
        for what, call in (bad_dot if "dot" in backend else bad_sum).items():
            try:
                call(module)
                errors[what] = "accepted"
            except (TypeError, ValueError) as e:
                errors[what] = f"{type(e).__name__}: {e}"
        report[backend] = {"errors": errors}
        if backend in ("numpy sum", "triton sum"):
            x = np.arange(1, 38, dtype=f32)
            report[backend]["sum"] = [type(module.sum(x)).__name__, float(module.sum(x))]
            report[backend]["sums"] = type(module.sums(np.ones((37, 3), f32))).__name__
        if backend == "triton sum":
            import torch
            out = module.sum(torch.arange(1, 38, dtype=torch.float32))
            report[backend]["torch"] = [type(out).__name__, str(out.device), out.item()]
        if backend == "triton dot":
            out = module.dot(np.full(4, 1.5, np.float64), np.full(4, 2.0, f32))
            report[backend]["bf16 in float64 and float32"] = [type(out).__name__, float(out)]
    print(json.dumps(report))
""")


def test_one_argument_check_for_every_backend(tmp_path):
    paths = {}
    for name, text, backends in (("sum", SUM, ("numpy", "numba", "triton")), ("dot", DOT_BF16, ("numpy", "triton"))):
        kernel = build_kernel(parse(text))
        for backend in backends:
            path = tmp_path / f"{backend}_{name}.py"
            path.write_text(compile_kernel(kernel, backend))
            paths[f"{backend} {name}"] = str(path)
    env = dict(os.environ, PYTHONPATH=str(ROOT), TRITON_INTERPRET="1")
    proc = subprocess.run([sys.executable, "-c", SCRIPT, json.dumps(paths)], capture_output=True, text=True,
                          cwd=tmp_path, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    report = json.loads(proc.stdout.splitlines()[-1])
    sums = [report[f"{b} sum"]["errors"] for b in ("numpy", "numba", "triton")]
    assert sums[0] == sums[1] == sums[2]
    assert sums[0]["list"] == ("TypeError: x is a list, but this replica of spec takes NumPy arrays of dtype float32 "
                               "(input format fp32): convert it with np.asarray(x, np.float32) if rounding it is "
                               "what you mean")
    assert sums[0]["2-d"] == "ValueError: x must have 1 dimension(s), got shape (4, 5)"
    assert sums[0]["sums 1-d"] == "ValueError: X must have 2 dimension(s), got shape (5,)"
    assert sums[0]["float64"] == ("TypeError: x has dtype float64, but this replica of spec takes float32 arrays "
                                  "(input format fp32)")
    assert sums[0]["too short"] == ("ValueError: x has length 1, outside the range n in 2..100 this replica of spec "
                                    "is valid for")
    assert sums[0]["masked"].startswith("TypeError: x is a masked array")
    assert all(v.split(":")[0] in ("TypeError", "ValueError") for v in sums[0].values())
    dots = [report[f"{b} dot"]["errors"] for b in ("numpy", "triton")]
    assert dots[0] == dots[1]
    assert dots[0]["off the bf16 grid"] == "ValueError: x holds values that are not bf16 values"
    assert dots[0]["y a list"].startswith("TypeError: y is a list")
    # NumPy in -> NumPy out, the same bits; torch in -> torch out on its device
    assert report["numpy sum"]["sum"] == report["triton sum"]["sum"] == ["float32", 703.0]
    assert report["numpy sum"]["sums"] == report["triton sum"]["sums"] == "ndarray"
    assert report["triton sum"]["torch"] == ["Tensor", "cpu", 703.0]
    assert report["triton dot"]["bf16 in float64 and float32"] == ["float32", 12.0]
