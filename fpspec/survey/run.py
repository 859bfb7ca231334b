"""Fan survey jobs out to workers and store what comes back.

Locally, each environment variant runs in its own worker processes (the
variant's variables set before anything is imported); with a Ray cluster, each
chunk of jobs is a task placed on a node that has the variant's resources, and
runs the same worker there.  Either way a worker first reports its
environment's fingerprint, gets only the jobs that environment has not
answered yet (re-running a plan resumes it), and streams one row per job.
"""
from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path

from fpspec.errors import FpspecError
from fpspec.progress import phase
from fpspec.survey.environment import label
from fpspec.survey.plan import Job, Plan
from fpspec.survey.store import Store

# multi-GPU hosts share their GPUs: NVLink multicast stays off in every worker
SAFE_ENV = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}
CHUNK = 4


@dataclass
class Summary:
    ran: int = 0
    skipped: int = 0
    failed: int = 0
    environments: set = field(default_factory=set)
    keys: dict = field(default_factory=dict)     # job key -> env id it ran (or was found) in


def worker_env(job_env) -> dict:
    env = dict(os.environ)
    env.update(SAFE_ENV)
    env.update(dict(job_env))
    root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def run_survey(plan: Plan, store: Store, *, cluster: str | None = None, parallel: int | None = None) -> Summary:
    if cluster:
        return _run_ray(plan, store, cluster)
    parallel = max(1, parallel or min(len(plan.jobs), os.cpu_count() or 1))
    by_variant: dict = {}
    for job in plan.jobs:
        by_variant.setdefault(job.variant, []).append(job)
    chunks = []
    for variant, jobs in by_variant.items():
        k = max(1, min(len(jobs), round(parallel * len(jobs) / len(plan.jobs))))
        chunks += [(variant, jobs[i::k]) for i in range(k)]
    rows: queue.Queue = queue.Queue()
    summary = Summary()
    done_by_hash = _done(store)
    pending = list(chunks)
    running: list[threading.Thread] = []
    with phase("survey jobs", total=len(plan.jobs)) as advance:
        while pending or running or not rows.empty():
            while pending and len(running) < parallel:
                variant, jobs = pending.pop(0)
                t = threading.Thread(target=_drive_worker, args=(variant.env, jobs, done_by_hash, rows), daemon=True)
                t.start()
                running.append(t)
            try:
                item = rows.get(timeout=0.2)
            except queue.Empty:
                running = [t for t in running if t.is_alive()]
                continue
            _take(item, store, summary, advance)
    return summary


def _done(store: Store) -> dict:
    return {e.hash: sorted(store.done(e.id)) for e in store.environments()}


def _take(item, store: Store, summary: Summary, advance) -> None:
    kind, payload = item
    if kind == "fingerprint":
        return
    if kind == "failure":
        raise FpspecError(payload)
    fp, row, key = payload
    env_id = store.environment(fp["hash"], label(fp["fingerprint"]), fp["fingerprint"])
    summary.environments.add(env_id)
    if row is None:         # answered before, in this environment
        summary.skipped += 1
    else:
        store.add(env_id, row)
        summary.ran += 1
        summary.failed += row["status"] == "error"
    summary.keys[key] = env_id
    advance()


def run_worker(env, jobs: list[Job], done_by_hash: dict, on_row, extra: dict | None = None) -> None:
    """Start a worker in `env`, give it the jobs its environment has not answered, pass each row on.

    `extra`: variables for the worker that are not part of the variant (the Ray node it runs on)."""
    gpu = any(j.device == "cuda" for j in jobs)
    proc = subprocess.Popen([sys.executable, "-m", "fpspec.survey.worker"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**worker_env(env), **(extra or {})})
    try:
        proc.stdin.write(json.dumps({"gpu": gpu, "variant_env": dict(env)}) + "\n")
        proc.stdin.flush()
        first = proc.stdout.readline()
        if not first:
            raise FpspecError(f"a survey worker did not start: {proc.stderr.read().strip()[-500:]}")
        fp = json.loads(first)
        done = set(done_by_hash.get(fp["hash"], ()))
        todo = [j for j in jobs if j.key not in done]
        for j in jobs:
            if j.key in done:
                on_row(fp, None, j.key)
        for j in todo:
            proc.stdin.write(json.dumps(j.to_json()) + "\n")
        proc.stdin.close()
        answered = set()
        for line in proc.stdout:
            row = json.loads(line)
            answered.add(row["job_key"])
            on_row(fp, row, row["job_key"])
        code = proc.wait()
        for j in todo:      # a worker that died (a crashing target) loses only its own job
            if j.key not in answered:
                on_row(fp, {"job_key": j.key, "job": j.to_json(), "status": "error", "seconds": 0.0,
                            "message": f"the worker stopped (exit code {code}) before this job ended"}, j.key)
                break
        rest = [j for j in todo if j.key not in answered][1:]
        if rest:
            run_worker(env, rest, done_by_hash, on_row, extra)
    finally:
        if proc.poll() is None:
            proc.kill()


def _drive_worker(env, jobs, done_by_hash, rows: queue.Queue) -> None:
    try:
        run_worker(env, jobs, done_by_hash, lambda fp, row, key: rows.put(("row", (fp, row, key))))
    except Exception as e:  # reaches the main thread as one error
        rows.put(("failure", f"survey worker failed: {e}"))


def _run_ray(plan: Plan, store: Store, cluster: str) -> Summary:
    try:
        import ray
    except ImportError:
        raise FpspecError("--cluster needs Ray (pip install 'fpspec[fleet]')") from None
    try:
        ray.init(address=cluster, ignore_reinit_error=True, log_to_driver=False)
    except Exception as e:
        raise FpspecError(f"cannot reach the Ray cluster at {cluster}: {e}") from None
    done_by_hash = _done(store)

    @ray.remote
    def survey_chunk(env, jobs_json, done):
        got = []
        node = {"FPSPEC_SURVEY_NODE": ray.get_runtime_context().get_node_id()}
        run_worker(env, [Job.from_json(j) for j in jobs_json], done, lambda fp, row, key: got.append((fp, row, key)),
                   extra=node)
        return got

    refs = []
    for variant in dict.fromkeys(j.variant for j in plan.jobs):
        jobs = [j for j in plan.jobs if j.variant == variant]
        for i in range(0, len(jobs), CHUNK):
            chunk = jobs[i:i + CHUNK]
            gpus = 1 if any(j.device == "cuda" for j in chunk) else 0
            refs.append(survey_chunk.options(num_cpus=1, num_gpus=gpus, resources=dict(variant.resources))
                        .remote(variant.env, [j.to_json() for j in chunk], done_by_hash))
    summary = Summary()
    with phase("survey jobs", total=len(plan.jobs)) as advance:
        while refs:
            ready, refs = ray.wait(refs, num_returns=1)
            for item in ray.get(ready[0]):
                _take(("row", item), store, summary, advance)
    return summary


@dataclass(frozen=True)
class Change:
    row: str
    environment: str
    before: str | None
    after: str | None

    def __str__(self) -> str:
        return f"{self.row} [{self.environment}]: class {self.before or '-'} -> {self.after or '-'}"


def compare(store: Store, baseline: Store, keys: dict) -> tuple[list[Change], list[str]]:
    """Jobs of this run (job key -> env id) whose class differs from the baseline's; and those it lacks."""
    envs = {e.id: e.label for e in store.environments()}
    now = {(r.job_key, r.env_id): r for r in store.results()}
    before: dict = {}
    for r in baseline.results():
        before[r.job_key] = r        # the latest row of the job wins (results are in id order)
    changes, missing = [], []
    for key, env_id in keys.items():
        r = now.get((key, env_id))
        if r is None:
            continue
        b = before.get(key)
        if b is None:
            missing.append(f"{r.row} [{envs[env_id]}]")
        elif (b.class_hash, b.status) != (r.class_hash, r.status):
            changes.append(Change(r.row, envs[env_id], b.class_hash or b.status, r.class_hash or r.status))
    return changes, missing
