"""The replica fuzz: random specs compiled for every backend, run in a fresh
interpreter, compared bit for bit with the spec's reference evaluation and,
where asked, their revealed tree with the spec's expansion.

Used by tests/fuzz/test_replica_fuzz.py (a fixed-seed sample) and
benchmarks/soak_replicas.py (thousands, failures shrunk to minimal specs).

    outcomes = fuzz(specs, backends, folder)   # one Outcome per (spec, backend)

A replica is compiled exactly as `fpspec compile` does (build_kernel, then the
backend's render), written to a file, and run by replica_worker.py in a
subprocess that imports it by path.  Outcomes:

    ok       every call gave the reference bits (and the tree matched)
    refused  the compiler refused the spec for that backend in one line
             (a CompileError or SpecError of one line): allowed, counted
    invalid  `check` accepted the spec but its reference evaluation refuses it
             (a spec without meaning: the generator should not draw it)
    failed   anything else: a crash at compile time, a replica that raises,
             segfaults, returns other bits or another tree, or imports fpspec
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
WORKER = Path(__file__).with_name("replica_worker.py")
BACKENDS = ("numpy", "numba", "triton")
KINDS_PER_SUM = 7          # columns of the sums() call: one per input family of fpspec.inputs
TREE_MAX_N = 48            # trees are revealed at n up to this (revelation costs ~n log n calls)


@dataclass
class Outcome:
    index: int             # the spec's index in the run
    backend: str
    status: str            # ok | refused | failed
    detail: str = ""
    tree: str = ""         # ok | refused: ... | differs: ... | error: ... (the engine failed) | "" (none)
    seconds: float = 0.0


@dataclass
class Case:
    index: int
    spec: object
    ns: tuple
    jobs: list = field(default_factory=list)


def spec_at(seed: int, index: int, **options):
    """Spec `index` of the run `seed` (each drawn from its own generator: rebuildable alone)."""
    from fpspec.spec.generate import random_spec

    return random_spec(np.random.default_rng([seed, index]), **options)


# ---------------------------------------------------------------- reference values


def _shape(spec) -> tuple:
    prov = spec.header.provenance
    shape = prov.get("shape") if prov is not None else None
    op = spec.header.op
    m = shape.get("m", 3) if shape is not None else 3
    ncols = shape.get("ncols", 2) if shape is not None else 2
    return (m if op in ("gemv", "gemm") else None), (ncols if op == "gemm" else None)


def _reference(spec, n: int, args: list, op: str, m, ncols) -> np.ndarray:
    """The spec's bits for one call (fpspec.arith.evaluate on expand_arith's tree at every output)."""
    from fpspec.arith import evaluate
    from fpspec.spec.expand import expand_arith
    from fpspec.spec.positions import position_guard

    a = [np.asarray(x, np.float64) for x in args]
    positional = position_guard(spec) is not None
    with np.errstate(all="ignore"):
        if op == "sum":
            tree, main, regions = expand_arith(spec, n)
            return evaluate(tree, a[0], None, main, regions)
        if op == "dot":
            tree, main, regions = expand_arith(spec, n)
            return evaluate(tree, a[0], a[1], main, regions)
        A = a[0]
        B = a[1][:, None] if op == "gemv" else a[1]
        out = np.empty((A.shape[0], B.shape[1]))
        if not positional:
            tree, main, regions = expand_arith(spec, n)
            X = np.repeat(A.T[:, :, None], B.shape[1], axis=2).reshape(n, -1)
            Y = np.repeat(B[:, None, :], A.shape[0], axis=1).reshape(n, -1)
            out = evaluate(tree, X, Y, main, regions).reshape(out.shape)
        else:
            for i in range(out.shape[0]):
                for j in range(out.shape[1]):
                    tree, main, regions = expand_arith(spec, n, (i, j))
                    out[i, j] = evaluate(tree, A[i], B[:, j], main, regions)
        return out[:, 0] if op == "gemv" else out


def _choose_ns(spec, rng, count: int) -> tuple:
    """`count` n of the range: one of (upper end, lower end, random) for one, else both ends first."""
    r = spec.header.n
    hi = r.hi if r.hi is not None else r.lo + 200
    pool = [hi, r.lo, int(rng.integers(r.lo, hi + 1))]
    if count == 1:
        return (pool[int(rng.integers(0, 3))],)
    pool += [int(rng.integers(r.lo, hi + 1)) for _ in range(count)]
    return tuple(dict.fromkeys(pool))[:count]


def _write_data(spec, index: int, ns: tuple, folder: Path, calls_per_n: int, seed: int) -> tuple[Path, list]:
    """Inputs and reference outputs of every call, in one .npz; the calls' descriptions."""
    from fpspec.inputs import KINDS, generate
    from fpspec.spec.regions import main_arithmetic

    op = spec.header.op
    fmt = main_arithmetic(spec).input
    m, ncols = _shape(spec)
    arrays, calls = {}, []
    for n in ns:
        for c in range(calls_per_n):
            k = (index + c) % len(KINDS)
            sample = generate(op, n, fmt, seed=seed, index=k, kind=KINDS[k], m=m, ncols=ncols)
            keys = [f"n{n}_c{c}_a{i}" for i in range(len(sample.args))]
            for key, arr in zip(keys, sample.args):
                arrays[key] = np.asarray(arr, np.float64)
            arrays[f"n{n}_c{c}_want"] = _reference(spec, n, sample.args, op, m, ncols)
            calls.append({"function": op, "args": keys, "want": f"n{n}_c{c}_want", "n": n, "what": KINDS[k]})
        if op == "sum":
            X = np.stack([np.asarray(generate(op, n, fmt, seed=seed, index=k, kind=KINDS[k]).args[0], np.float64)
                          for k in range(KINDS_PER_SUM)], axis=1)
            arrays[f"n{n}_X"] = X
            arrays[f"n{n}_Xwant"] = _reference(spec, n, [X], op, m, ncols)
            calls.append({"function": "sums", "args": [f"n{n}_X"], "want": f"n{n}_Xwant", "n": n,
                          "what": f"{KINDS_PER_SUM} columns, one per input family"})
    path = folder / f"data{index}.npz"
    np.savez(path, **arrays)
    return path, calls


def _trees(spec, ns: tuple) -> list:
    """The trees to reveal: at the smallest chosen n (if cheap), output (0, 0) and, for an
    order per output position, the last output."""
    from fpspec.spec.expand import expand
    from fpspec.spec.positions import position_guard
    from fpspec.tree import format_tree, observable

    n = min(ns)
    if n > TREE_MAX_N or n < 2:
        return []
    m, ncols = _shape(spec)
    positions = [(0, 0)]
    if position_guard(spec) is not None:
        positions.append(((m or 1) - 1, (ncols or 1) - 1))
    return [{"n": n, "pos": list(p), "want": format_tree(observable(expand(spec, n, p)))} for p in positions]


# ---------------------------------------------------------------- compile and run

_ONE_LINE_ERRORS = None


def _user_errors():
    global _ONE_LINE_ERRORS
    if _ONE_LINE_ERRORS is None:
        from fpspec.compile.ir import CompileError
        from fpspec.errors import FpspecError

        _ONE_LINE_ERRORS = (CompileError, FpspecError)
    return _ONE_LINE_ERRORS


_IMPORTS_FPSPEC = re.compile(r"^\s*(from|import)\s+fpspec\b", re.M)


def prepare(index: int, spec, backends, folder: Path, *, ns_count: int = 1, calls_per_n: int = 2,
            tree_backends=("numpy", "numba"), seed: int = 0) -> tuple[list, list]:
    """(jobs for the worker, outcomes decided already: refusals and compile failures)."""
    from fpspec.compile import compile_kernel
    from fpspec.compile.build import build_kernel

    folder.mkdir(parents=True, exist_ok=True)
    text = str(spec)
    outcomes, jobs = [], []
    try:
        kernel = build_kernel(spec, name=f"fuzz{index}.fps", source=text)
    except _user_errors() as e:
        return [], [_refusal(index, b, e) for b in backends]
    except Exception as e:   # noqa: BLE001  (an internal error is a finding)
        return [], [Outcome(index, b, "failed", f"compile: {type(e).__name__}: {_first_line(e)}") for b in backends]
    rng = np.random.default_rng([seed, index, 1])
    ns = _choose_ns(spec, rng, ns_count)
    data = calls = trees = None
    from fpspec.spec.regions import main_arithmetic

    fmt = main_arithmetic(spec).input
    m, ncols = _shape(spec)
    for backend in backends:
        try:
            source = compile_kernel(kernel, backend)
        except _user_errors() as e:
            outcomes.append(_refusal(index, backend, e))
            continue
        except Exception as e:   # noqa: BLE001
            outcomes.append(Outcome(index, backend, "failed", f"compile: {type(e).__name__}: {_first_line(e)}"))
            continue
        if _IMPORTS_FPSPEC.search(source):
            outcomes.append(Outcome(index, backend, "failed", "the replica imports fpspec (not self-contained)"))
            continue
        if data is None:
            try:
                data, calls = _write_data(spec, index, ns, folder, calls_per_n, seed)
                trees = _trees(spec, ns)
            except _user_errors() as e:
                # `check` accepted a spec whose reference evaluation refuses it: the spec has no meaning
                return [], [Outcome(index, b, "invalid", f"reference: {_first_line(e)}") for b in backends]
            except Exception as e:   # noqa: BLE001  (the expansion or the model crashed: a finding)
                return [], [Outcome(index, b, "failed", f"reference: {type(e).__name__}: {_first_line(e)}")
                            for b in backends]
        path = folder / f"replica{index}_{backend}.py"
        path.write_text(source)
        for t_i, tree in enumerate((trees if backend in tree_backends else []) or [None]):
            # the first job of a replica carries the calls; a second tree reuses a fresh import
            jobs.append({"id": f"{index}:{backend}:{t_i}", "index": index, "backend": backend, "file": str(path),
                         "data": str(data), "op": spec.header.op, "fmt": fmt, "m": m, "ncols": ncols,
                         "calls": calls if t_i == 0 else [], "tree": tree})
    return jobs, outcomes


def _refusal(index: int, backend: str, e: BaseException) -> Outcome:
    """A compiler's refusal: counted as such only when it is one line (what `fpspec compile` prints)."""
    text = str(e).strip()
    if not text or "\n" in text:
        return Outcome(index, backend, "failed", f"refusal not in one line: {type(e).__name__}: {text[:300]!r}")
    return Outcome(index, backend, "refused", _first_line(e))


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return (text.splitlines() or [type(e).__name__])[0][:300]


def run_jobs(jobs: list, folder: Path, timeout: float | None = None) -> dict:
    """id -> result dict; a crash or a hang fails the job in flight and the rest run in a new process.
    timeout: for one process (default 300 s a job: generous, a loaded machine is slow)."""
    results: dict = {}
    todo = list(jobs)
    env = dict(os.environ, PYTHONPATH=str(ROOT), TRITON_INTERPRET=os.environ.get("TRITON_INTERPRET", "1"))
    env.pop("NUMBA_CACHE_DIR", None)
    while todo:
        limit = timeout if timeout is not None else 300 * len(todo)
        manifest = folder / f"manifest_{len(results)}.json"
        manifest.write_text(json.dumps(todo))
        try:
            proc = subprocess.run([sys.executable, str(WORKER), str(manifest)], capture_output=True, text=True,
                                  cwd=str(folder), env=env, timeout=limit)
            out, err, rc = proc.stdout, proc.stderr, proc.returncode
        except subprocess.TimeoutExpired as e:
            out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
            err, rc = f"timed out after {limit} s", None
        started = None
        for line in out.splitlines():
            if line.startswith("START "):
                started = line[6:]
            elif line.startswith("{"):
                r = json.loads(line)
                results[r["id"]] = r
                started = None
        if started is None and not any(j["id"] not in results for j in todo):
            break
        if started is None:   # died before its first job: every remaining job fails alike
            for j in todo:
                results.setdefault(j["id"], {"status": "failed", "error": f"worker exited {rc}: {err[-300:]}"})
            break
        tail = err.strip().splitlines()[-1:] if err.strip() else []
        why = "timed out" if rc is None else f"the process died (exit code {rc})"
        results[started] = {"status": "failed", "error": f"{why}" + (f": {tail[0][:300]}" if tail else "")}
        todo = [j for j in todo if j["id"] not in results]
    return results


def run_here(jobs: list) -> dict:
    """run_jobs in this process (each replica still imported fresh from its file, never
    registered): fast enough to shrink with, but a segfault ends the caller."""
    import replica_worker

    return {j["id"]: replica_worker.run_safely(j) for j in jobs}


def fuzz(specs, backends=BACKENDS, folder: Path | None = None, *, in_process: bool = False, **options) -> list:
    """Outcomes of every (spec, backend): specs is a list of (index, spec)."""
    import tempfile

    own = folder is None
    folder = Path(tempfile.mkdtemp(prefix="fpspec-fuzz-")) if own else Path(folder)
    outcomes, jobs = [], []
    for index, spec in specs:
        j, o = prepare(index, spec, backends, folder, **options)
        jobs += j
        outcomes += o
    results = (run_here(jobs) if in_process else run_jobs(jobs, folder)) if jobs else {}
    merged: dict = {}
    for job in jobs:
        r = results[job["id"]]
        key = (job["index"], job["backend"])
        prev = merged.get(key)
        status = r["status"]
        tree = r.get("tree", "")
        if prev is None:
            merged[key] = Outcome(job["index"], job["backend"], status, r.get("error", ""), tree,
                                  r.get("seconds", 0.0))
        else:
            if status == "failed" and prev.status == "ok":
                prev.status, prev.detail = "failed", r.get("error", "")
            if tree and (not prev.tree or prev.tree == "ok"):
                prev.tree = tree
    for o in merged.values():
        if o.status == "ok" and o.tree.startswith("differs"):
            o.status, o.detail = "failed", o.tree
    outcomes += merged.values()
    outcomes.sort(key=lambda o: (o.index, BACKENDS.index(o.backend) if o.backend in BACKENDS else 9))
    if own:
        import shutil

        shutil.rmtree(folder, ignore_errors=True)
    return outcomes


def still_fails(backend: str, detail: str | None = None, **options):
    """A predicate for fpspec.spec.generate.shrink: the spec fails on `backend` (with an
    error of the same kind as `detail`, when given: its text up to the first digit or quote)."""
    kind = None if detail is None else re.split(r"[0-9'\"(]", detail, maxsplit=1)[0]

    def fails(spec) -> bool:
        (o,) = fuzz([(0, spec)], (backend,), **options)
        return o.status == "failed" and (kind is None or o.detail.startswith(kind))

    return fails
