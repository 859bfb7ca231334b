"""Run generated replicas as a user does: a fresh interpreter imports each file by
path (no sys.modules entry, no warm-up call, no cache folder), calls its public
functions and compares the bits with the spec's reference values.

    python replica_worker.py MANIFEST.json

The manifest (written by tests/fuzz/fuzz_replicas.py) lists jobs: the replica file,
its backend and op, an .npz of inputs and expected outputs per call, and
optionally a tree to reveal.  One JSON line per job goes to stdout, preceded by
a `START id` line, so that the parent knows which job a crash (a segfault takes
the whole process) belongs to.
"""
from __future__ import annotations

import importlib.util
import json
import os
import sys
import time
import traceback

import numpy as np

# tf32 values travel in float32 arrays and tensors (the replicas read their top 19 bits)
_TORCH = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16", "fp64": "float64", "tf32": "float32"}
_NUMPY = {"fp64": np.float64, "fp32": np.float32, "fp16": np.float16, "bf16": np.float32, "tf32": np.float32}


def load(path: str, name: str):
    """The module at `path`, executed fresh; never registered in sys.modules."""
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def to_float64(out) -> np.ndarray:
    if hasattr(out, "detach"):          # a torch tensor
        return out.detach().cpu().to(dtype=__import__("torch").float64).numpy()
    return np.asarray(out, dtype=np.float64)


def same_bits(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    both_nan = np.isnan(got) & np.isnan(want)
    return both_nan | ((got == want) & (np.signbit(got) == np.signbit(want)))


def arguments(job: dict, arrays: list):
    """The call's arrays in the form the backend takes (Triton: torch tensors, on the CPU
    under TRITON_INTERPRET=1, else on $FPSPEC_FUZZ_DEVICE)."""
    fmt = job["fmt"]
    if job["backend"] == "triton":
        import torch

        dtype = getattr(torch, _TORCH[fmt])
        device = os.environ.get("FPSPEC_FUZZ_DEVICE", "cpu")
        return [torch.from_numpy(np.ascontiguousarray(a, dtype=np.float64)).to(device=device, dtype=dtype)
                for a in arrays]
    return [np.ascontiguousarray(a, dtype=_NUMPY[fmt]) for a in arrays]


def run_job(job: dict) -> dict:
    t0 = time.perf_counter()
    module = load(job["file"], f"replica_{job['id']}")
    data = np.load(job["data"])
    checked = 0
    for call in job["calls"]:
        fn = getattr(module, call["function"], None)
        if fn is None:
            return {"status": "failed", "error": f"the replica has no public function {call['function']}()"}
        args = arguments(job, [data[key] for key in call["args"]])
        got = to_float64(fn(*args))
        want = data[call["want"]]
        if got.shape != want.shape:
            return {"status": "failed", "error": f"{call['function']}() at n = {call['n']} returned shape "
                                                 f"{got.shape}, expected {want.shape}"}
        ok = same_bits(got, want)
        if not ok.all():
            k = int(np.flatnonzero(~ok.reshape(-1))[0])
            return {"status": "failed",
                    "error": f"{call['function']}() at n = {call['n']} ({call['what']}): {int((~ok).sum())} of "
                             f"{ok.size} outputs differ, e.g. output {k}: got {got.reshape(-1)[k]!r}, "
                             f"want {want.reshape(-1)[k]!r}"}
        checked += ok.size
    result = {"status": "ok", "outputs": checked}
    tree = job.get("tree")
    if tree is not None:
        result["tree"] = reveal_tree(module, job, tree)
    result["seconds"] = round(time.perf_counter() - t0, 3)
    return result


def reveal_tree(module, job: dict, tree: dict) -> str:
    """'ok', 'refused: ...' (the revelation engine declined) or 'differs: ...'."""
    from fpspec.errors import RevealRefused
    from fpspec.reveal.engine import reveal
    from fpspec.reveal.positions import moved
    from fpspec.reveal.targets import from_callable
    from fpspec.tree import diff, observable, parse_tree

    op, fmt = job["op"], job["fmt"]
    fn = getattr(module, op)
    if job["backend"] == "triton":
        replica_fn = fn
        fn = lambda *a: to_float64(replica_fn(*arguments(job, a)))  # noqa: E731
    rows = None
    if op == "sum" and job["backend"] != "triton" and hasattr(module, "sums"):
        sums = module.sums
        rows = lambda X: sums(np.ascontiguousarray(np.asarray(X).T))  # noqa: E731
    target = from_callable(fn, op=op, n=tree["n"], dtype=fmt, m=job.get("m") or 1, ncols=job.get("ncols") or 1,
                           name="replica", call_rows=rows)
    i, j = tree.get("pos", (0, 0))
    try:
        got = reveal(moved(target, i, j) if (i, j) != (0, 0) else target).tree
    except RevealRefused as e:
        return f"refused: {e}"
    except Exception as e:   # noqa: BLE001
        frames = traceback.extract_tb(e.__traceback__)
        if any(fr.filename == job["file"] for fr in frames):
            raise                           # the replica failed: a finding about the replica
        # the revelation engine itself failed on this target: not the replica's fault, reported apart
        where = f"{frames[-1].filename.rsplit('/', 1)[-1]}:{frames[-1].lineno}" if frames else ""
        return f"error: {type(e).__name__}: {(str(e).splitlines() or [''])[0][:200]} ({where})"
    want = parse_tree(tree["want"])
    d = diff(observable(got), want)
    return "ok" if d is None else f"differs at n = {tree['n']}, output {(i, j)}: {d}"


def run_safely(job: dict) -> dict:
    """run_job's result, any exception of the replica turned into a failed result naming its line."""
    try:
        result = run_job(job)
    except BaseException as e:   # noqa: BLE001  (any failure of the replica is a result)
        if isinstance(e, KeyboardInterrupt):
            raise
        frames = traceback.extract_tb(e.__traceback__)
        where = next((f"{fr.filename.rsplit('/', 1)[-1]}:{fr.lineno}" for fr in reversed(frames)
                      if fr.filename == job["file"]), "")
        first = (str(e).strip().splitlines() or [""])[0][:300]
        result = {"status": "failed", "error": f"{type(e).__name__}: {first}" + (f" ({where})" if where else "")}
    result["id"] = job["id"]
    return result


def main(manifest_path: str) -> int:
    with open(manifest_path) as f:
        jobs = json.load(f)
    for job in jobs:
        print(f"START {job['id']}", flush=True)
        print(json.dumps(run_safely(job)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
