"""Run survey jobs in this process: each job is the command line's own
`fpspec reveal ... -o FILE`, and its spec is reduced to an equivalence class.

As a program (`python -m fpspec.survey.worker`, started by fpspec.survey.run
in the environment of a variant): reads JSON lines on stdin - first
{"gpu": bool, "variant_env": {...}}, then one job each - and writes JSON lines on stdout: the
environment's fingerprint first, then one result per job, flushed as each
ends, so a survey interrupted part-way keeps every finished job.
"""
from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import io
import json
import os
import sys
import tempfile
import time

from fpspec.survey.environment import fingerprint, fingerprint_hash
from fpspec.survey.plan import Job

# trees larger than this are not expanded to hash them (the spec text stands for them)
HASH_LEAVES = 1 << 16
SAMPLE_NS = 12


def run_job(job: Job) -> dict:
    """The job's result row (without its environment): status, spec, class, trees, timing."""
    from fpspec import __version__ as fpspec_version

    with tempfile.TemporaryDirectory(prefix="fpspec-survey-") as tmp:
        out = os.path.join(tmp, "order.fps")
        started = time.perf_counter()
        code, message = _run_cli(job.reveal_args() + ["-o", out])
        if job.tf32:
            _tf32_off()
        seconds = time.perf_counter() - started
        row = {"job_key": job.key, "job": job.to_json(), "seconds": round(seconds, 4),
               "fpspec_version": fpspec_version, "spec": None, "spec_hash": None, "class_hash": None,
               "trees": {}, "arithmetic": None}
        if code == 0 and os.path.exists(out):
            with open(out, encoding="utf-8") as f:
                text = f.read()
            row.update(classify(text, job), status="ok", message=message)
        else:
            row.update(status="refused" if code == 3 else "error", message=message or f"exit code {code}")
        return row


def classify(text: str, job: Job) -> dict:
    """Spec text -> its class: bit-identical order and arithmetic give the same class hash.

    The class hashes the arithmetic sections and the trees the spec expands to
    at sample n (the first and last output position for gemv/gemm), so two
    spec texts that say the same thing fall in one class.
    """
    from fpspec.spec import expand, parse
    from fpspec.tree import format_tree

    spec = parse(text)
    header = spec.header
    arithmetic = "\n".join(str(b) for b in (header.arithmetic, *header.arithmetics) if b is not None)
    trees: dict[str, str] = {}
    positions = [(0, 0)]
    if job.m is not None and (job.m > 1 or (job.ncols or 1) > 1):
        positions.append((job.m - 1, (job.ncols or 1) - 1))
    for n in sample_ns(job.n):
        if n > HASH_LEAVES:
            continue
        for pos in positions:
            tree = expand(spec, n, pos)
            trees[f"{n}@{pos[0]},{pos[1]}"] = hashlib.sha256(format_tree(tree).encode()).hexdigest()[:16]
    bare = dataclasses.replace(spec, header=dataclasses.replace(
        header, target=None, sections=tuple(b for b in header.sections if b.name != "provenance")))
    basis = json.dumps([arithmetic, sorted(trees.items())]) if trees else str(bare)
    return {"spec": text, "spec_hash": hashlib.sha256(str(bare).encode()).hexdigest()[:16],
            "class_hash": hashlib.sha256(basis.encode()).hexdigest()[:12], "trees": trees,
            "arithmetic": arithmetic}


def sample_ns(n: str) -> list[int]:
    """The n a job's trees are hashed at: the one n, or a range's ends and points spread between them."""
    if ".." not in n:
        return [int(n)]
    lo, hi = (int(x) for x in n.split(".."))
    points = {lo, hi}
    if hi > lo:
        ratio = (hi / lo) ** (1 / (SAMPLE_NS - 1))
        points |= {min(hi, int(round(lo * ratio ** k))) for k in range(SAMPLE_NS)}
        points |= {min(hi, lo + k) for k in range(1, 4)}
    return sorted(points)


def _run_cli(args: list[str]) -> tuple[int, str]:
    from fpspec.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(args)
        except SystemExit as e:   # a target that exits: its code, never the worker's
            code = e.code if isinstance(e.code, int) else 1
    lines = [line for line in err.getvalue().splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("fpspec:")]
    return code, (errors or lines or [""])[-1][:500]


def _tf32_off() -> None:
    try:
        import torch
    except ImportError:
        return
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False


def serve(stdin=sys.stdin, stdout=sys.stdout) -> None:
    first = stdin.readline()
    options = json.loads(first) if first.strip() else {}
    info = fingerprint(with_gpu=bool(options.get("gpu")))
    # what the plan's variant set is part of the environment, whatever its name
    info["env"].update(options.get("variant_env", {}))
    info["env"] = dict(sorted(info["env"].items()))
    info["variant_env"] = sorted(options.get("variant_env", {}))
    stdout.write(json.dumps({"fingerprint": info, "hash": fingerprint_hash(info)}) + "\n")
    stdout.flush()
    for line in stdin:
        if not line.strip():
            continue
        job = Job.from_json(json.loads(line))
        try:
            row = run_job(job)
        except Exception as e:   # a bug in one job must not lose the others
            row = {"job_key": job.key, "job": job.to_json(), "status": "error",
                   "message": f"internal error: {type(e).__name__}: {e}"[:500], "seconds": 0.0}
        stdout.write(json.dumps(row) + "\n")
        stdout.flush()


if __name__ == "__main__":
    serve()
