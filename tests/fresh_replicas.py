"""Replicas run as a user runs them, for tests of every area: written to a file, imported
by path in a fresh interpreter (never registered in sys.modules, no warm-up call, no numba
cache), compared bit for bit with the spec's reference evaluation.

    outputs = run_fresh([(source, "gemv", (A, x)), ...], tmp_path)   # one interpreter for all
    assert_fresh_bits(outputs[0], reference_outputs(spec, "gemv", (A, x)))

Importable from any test module (tests/ is on sys.path beside its conftest.py).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

from fpspec.io import write_atomic

# Imports each replica by path (never registered in sys.modules, no warm-up) and calls one of
# its public functions; prints per call ["ok", outputs as float64] or ["raised", the error].
# Triton replicas get torch tensors (on the CPU under TRITON_INTERPRET=1, set by tests/conftest.py).
FRESH_RUNNER = """
import importlib.util, json, sys
import numpy as np

out, modules = [], {}
for path, function, arrays, tensors, options in json.loads(sys.argv[1]):
    if path not in modules:      # each file imported once, by its first call
        spec = importlib.util.spec_from_file_location("replica_under_test", path)
        modules[path] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(modules[path])
    module = modules[path]
    with np.load(arrays) as data:
        args = [data[f"arg{i}"] for i in range(len(data.files))]
    if tensors:                  # a Triton replica: torch tensors of that dtype (or one per argument) in
        import torch

        dtypes = tensors if isinstance(tensors, list) else [tensors] * len(args)
        args = [torch.from_numpy(a).to(getattr(torch, t)) for a, t in zip(args, dtypes)]
    try:
        got = getattr(module, function)(*args, **options)
        dtype = str(getattr(got, "dtype", type(got).__name__)).removeprefix("torch.")
        got = got.double().cpu().numpy() if hasattr(got, "detach") else got
        out.append(["ok", np.asarray(got, np.float64).ravel().tolist(), dtype])
    except Exception as e:
        out.append(["raised", f"{type(e).__name__}: {e}", None])
print(json.dumps(out))
"""


def run_fresh(calls, folder: Path, dtypes: bool = False) -> list:
    """Replicas as a user runs them: each call (replica source, public function, argument
    arrays[, torch dtype name or one per argument: the arrays passed as tensors of it, for
    Triton[, keyword arguments]]) has its
    replica written to a file under `folder` and imported by path in one fresh interpreter
    for all the calls.  Per call: its outputs as a flat float64 array (exact: every output
    format widens exactly), or the text of the error it raised; with `dtypes`, a pair of that
    and the name of the dtype the call returned (None where it raised)."""
    jobs, written = [], {}
    for c, (source, function, args, *rest) in enumerate(calls):
        tensors, options = (list(rest) + [None, None])[:2]
        if source not in written:
            written[source] = folder / f"replica_{len(written)}.py"
            write_atomic(written[source], source)
        data = folder / f"args_{c}.npz"
        np.savez(data, **{f"arg{i}": a for i, a in enumerate(args)})
        jobs.append([str(written[source]), function, str(data), tensors, options or {}])
    env = dict(os.environ)
    env.pop("NUMBA_CACHE_DIR", None)
    done = subprocess.run([sys.executable, "-c", FRESH_RUNNER, json.dumps(jobs)], capture_output=True, text=True,
                          cwd=folder, env=env, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    results = [(np.array(v, np.float64) if status == "ok" else v, dtype)
               for status, v, dtype in json.loads(done.stdout.splitlines()[-1])]
    return results if dtypes else [v for v, _ in results]


def reference_outputs(spec, function: str, args) -> np.ndarray:
    """The spec's bits (fpspec.arith.evaluate on expand_arith's tree, per output position
    where the order depends on it) for the public call `function(*args)`, flat, float64."""
    from fpspec.arith.evaluate import evaluate
    from fpspec.spec.expand import expand_arith

    a = [np.asarray(x, np.float64) for x in args]
    n = a[0].shape[0] if function in ("sum", "sums", "dot") else a[0].shape[1]

    def value(pos, x, y=None):
        tree, main, regions = expand_arith(spec, n, pos)
        return evaluate(tree, x, y, main, regions)
    with np.errstate(all="ignore"):
        if function in ("sum", "sums"):
            return np.ravel(value((0, 0), a[0]))
        if function == "dot":
            return np.ravel(value((0, 0), a[0], a[1]))
        B = a[1][:, None] if function == "gemv" else a[1]
        return np.array([value((i, j), a[0][i], B[:, j]) for i in range(a[0].shape[0])
                         for j in range(B.shape[1])], np.float64)


def assert_fresh_bits(got, want, what: str = "") -> None:
    """`got` from run_fresh (an array, or the error the call raised) has the bits of `want`
    (float64 values of the output format; NaN payloads are not specified)."""
    assert not isinstance(got, str), f"{what}: the replica raised {got}"
    want = np.asarray(want, np.float64).ravel()
    ok = (got.view(np.uint64) == want.view(np.uint64)) | (np.isnan(got) & np.isnan(want))
    bad = np.flatnonzero(~ok)[:3]
    assert ok.all(), f"{what}: {int(np.sum(~ok))} outputs differ, e.g. at {bad.tolist()}: got {got[bad]}, want {want[bad]}"
