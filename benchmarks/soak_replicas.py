"""Soak the compilers: thousands of random specs, each compiled for every backend,
run in a fresh interpreter and compared bit for bit with the spec's reference
evaluation (and, for small n, the replica's revealed tree with the spec's).

    python benchmarks/soak_replicas.py COUNT [--seed S] [--backends numpy,numba,triton]
                                       [--batch 25] [--first 0] [--shrink 3] [--trees numpy,numba] [-j 1]

Every failure is printed as a minimal spec (fpspec.spec.generate.shrink, at
most --shrink failures per backend and error kind; the others are listed by
index: spec I of seed S is `random_spec(default_rng([S, I]))`); the last line
is the count: specs, per backend ok / refused / failed.  Exit code 1 when
anything failed.  Triton runs under TRITON_INTERPRET=1 unless a GPU is asked
for (TRITON_INTERPRET=0: its replicas then take CUDA tensors).

-j N runs N batches at once, each in a worker process of its own (which
compiles the batch's specs and runs their replicas in one more fresh
interpreter, as with -j 1): the counts do not depend on N.  Two runs cover
disjoint specs with --first (or --seed): spec I of seed S is the same spec
in every run.  --deadline SECONDS stops waiting for batches after that
long (the last line says how many specs ran); --shrink-seconds bounds the
shrinking that follows.  A refusal counts as one only when the compiler
refused in one line; the last line gives the refused fraction.

With TRITON_INTERPRET=0 worker k runs its Triton replicas on GPU k mod G (G the
visible GPUs: CUDA_VISIBLE_DEVICES narrowed to one device per worker), and the
failures are shrunk by the workers too, one failure each.  The end of the
output is a per-backend summary: counts, and each kind of failure with the
indices of its specs.
"""
from __future__ import annotations

import argparse
import collections
import concurrent.futures
import multiprocessing
import os
import re
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "fuzz"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import fuzz_replicas as R  # noqa: E402


def signature(o) -> str:
    """An error's kind: its text without numbers and quoted names."""
    text = re.sub(r"'[^']*'|\"[^\"]*\"", "'…'", o.detail)
    return f"{o.backend}: " + re.sub(r"-?\d+(\.\d+)?(e-?\d+)?", "#", text)[:120]


def run_batch(seed: int, indices: list, backends: tuple, folder: str, options: dict) -> list:
    """The outcomes of one batch (in a worker process: compiling is CPU work)."""
    specs = [(i, R.spec_at(seed, i)) for i in indices]
    return R.fuzz(specs, backends, Path(folder), **options)


def visible_gpus() -> list:
    """The GPUs this run may use, as CUDA_VISIBLE_DEVICES entries ([] without CUDA)."""
    listed = os.environ.get("CUDA_VISIBLE_DEVICES")
    if listed is not None:
        return [d for d in listed.split(",") if d.strip()]
    try:
        import torch

        return [str(k) for k in range(torch.cuda.device_count())]
    except Exception:   # noqa: BLE001  (no torch, no driver: no GPU)
        return []


def _start_worker(counter, gpus: list) -> None:
    """Pool initializer: worker k sees GPU k mod len(gpus) alone (its replica processes inherit
    it), so that the workers spread over every GPU and a replica's tensors and launches are on
    one device."""
    with counter.get_lock():
        k = counter.value
        counter.value += 1
    os.setpgrp()    # the worker and the replica processes it starts end together (stop_pool)
    # one thread a worker: -j N workers already use N cores, and a replica's own thread pool
    # (numba's parallel loops, torch's CPU ops) beside 60 others only oversubscribes them
    for name in ("NUMBA_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ.setdefault(name, "1")
    if gpus:
        os.environ["CUDA_VISIBLE_DEVICES"] = gpu_of(k, gpus)


def gpu_of(worker: int, gpus: list) -> str:
    """The CUDA_VISIBLE_DEVICES entry worker number `worker` runs its replicas on."""
    return gpus[worker % len(gpus)]


def make_pool(jobs: int, gpus: list):
    """`jobs` fresh workers (spawn: nothing of this process, a CUDA context or numba state, is
    inherited), spread over `gpus`."""
    ctx = multiprocessing.get_context("spawn")
    return concurrent.futures.ProcessPoolExecutor(jobs, mp_context=ctx, initializer=_start_worker,
                                                  initargs=(ctx.Value("i", 0), gpus))


def stop_pool(pool) -> None:
    """End every worker of the pool now, with the replica processes it is waiting for."""
    import signal

    for proc in list(getattr(pool, "_processes", {}).values()):   # the workers this run started
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            proc.terminate()
    pool.shutdown(wait=False, cancel_futures=True)


def shrink_failure(seed: int, index: int, backend: str, detail: str, tries: int, options: dict) -> tuple:
    """(minimal spec text, its error): one failure shrunk (in a worker process)."""
    from fpspec.spec.generate import shrink

    spec = R.spec_at(seed, index)
    # candidates run in this process (fast); a crash (segfault) shrinks in subprocesses
    here = not detail.startswith(("the process died", "timed out"))
    small = shrink(spec, R.still_fails(backend, detail, in_process=here, **options), max_tries=tries)
    (last,) = R.fuzz([(index, small)], (backend,), **options)
    return str(small), last.detail or detail


def summary(counts: dict, failures: list, tree_errors: list = ()) -> list:
    """Per backend: its counts, then each kind of failure (signature) with its spec indices, and
    each kind of revelation-engine error (the replica was right, the engine failed on it)."""
    lines = ["per backend (ok / refused / failed / invalid):"]
    for b, c in counts.items():
        lines.append(f"  {b}: {c['ok']} / {c['refused']} / {c['failed']} / {c['invalid']}")
        for what, found, text in (("", failures, lambda o: o.detail), ("tree error: ", tree_errors, lambda o: o.tree)):
            kinds = collections.defaultdict(list)
            for o in found:
                if o.backend == b:
                    kinds[signature(R.Outcome(o.index, b, "", text(o)))].append(o.index)
            for sig, idx in sorted(kinds.items(), key=lambda kv: -len(kv[1])):
                shown = ", ".join(map(str, idx[:12])) + (f", ... ({len(idx)} in all)" if len(idx) > 12 else "")
                lines.append(f"    {len(idx)} x {what}{sig.split(': ', 1)[1]}  [specs {shown}]")
    return lines


def _completed(pending: list, batches: list, backends: tuple, deadline: float | None):
    """Each finished batch's outcomes, until all are done or the deadline passes (a batch
    whose worker raised is every spec of it failed on every backend, with the error)."""
    which = {id(f): b for f, b in zip(pending, batches)}
    try:
        for f in concurrent.futures.as_completed(pending, None if deadline is None else deadline - time.time()):
            try:
                yield f.result()
            except Exception as e:   # noqa: BLE001  (a finding, and the other batches go on)
                why = f"the batch's worker raised {type(e).__name__}: {str(e)[:200]}"
                yield [R.Outcome(i, b, "failed", why) for i in which[id(f)] for b in backends]
    except concurrent.futures.TimeoutError:
        return


def _until_interrupted(results, pool):
    """The batches' outcomes; on Ctrl-C the workers end too (they are process groups of their
    own, which the terminal's interrupt does not reach)."""
    try:
        yield from results
    except KeyboardInterrupt:
        if pool is not None:
            stop_pool(pool)
        raise


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("count", type=int)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--first", type=int, default=0, help="index of the first spec (to resume a run)")
    ap.add_argument("--indices", default="", help="only these spec indices (comma-separated), e.g. to shrink "
                    "the failures of an earlier run")
    ap.add_argument("--backends", default=",".join(R.BACKENDS))
    ap.add_argument("--trees", default="numpy,numba", help="backends whose replicas also have their tree revealed")
    ap.add_argument("--batch", type=int, default=25, help="specs per fresh interpreter")
    ap.add_argument("--shrink", type=int, default=3, help="failures shrunk per backend and error kind")
    ap.add_argument("--shrink-tries", type=int, default=150, help="candidates tried per shrink")
    ap.add_argument("--shrink-seconds", type=float, default=600.0, help="time given to shrinking, in all")
    ap.add_argument("--ns", type=int, default=2, help="n values per spec (both ends of the range first)")
    ap.add_argument("-j", "--jobs", type=int, default=1, help="batches run at once, each in its own process")
    ap.add_argument("--deadline", type=float, default=None,
                    help="seconds after which no more batches are waited for (the count says how many ran)")
    args = ap.parse_args(argv)
    backends = tuple(b for b in args.backends.split(",") if b)
    trees = tuple(b for b in args.trees.split(",") if b)
    counts = {b: collections.Counter() for b in backends}
    tree_counts = collections.Counter()
    tree_errors = []
    failures = []
    t0 = time.time()
    options = dict(ns_count=args.ns, tree_backends=trees, seed=args.seed)
    with tempfile.TemporaryDirectory(prefix="fpspec-soak-") as tmp:
        indices = ([int(i) for i in args.indices.split(",") if i] if args.indices
                   else list(range(args.first, args.first + args.count)))
        batches = [indices[start:start + args.batch] for start in range(0, len(indices), args.batch)]
        if args.jobs > 1:
            gpus = []
            if os.environ.get("TRITON_INTERPRET", "1") == "0":
                os.environ.setdefault("FPSPEC_FUZZ_DEVICE", "cuda")
                gpus = visible_gpus()
                print(f"{args.jobs} workers over {len(gpus)} GPU(s): worker k on GPU k mod {len(gpus)}", flush=True)
            pool = make_pool(args.jobs, gpus)
            pending = [pool.submit(run_batch, args.seed, b, backends, str(Path(tmp) / f"batch{b[0]}"), options)
                       for b in batches]
            results = _completed(pending, batches, backends, None if args.deadline is None else t0 + args.deadline)
        else:
            pool = None
            results = (run_batch(args.seed, b, backends, str(Path(tmp) / f"batch{b[0]}"), options) for b in batches)
        done = 0
        for outcomes in _until_interrupted(results, pool):
            for o in outcomes:
                counts[o.backend][o.status] += 1
                if o.tree:
                    tree_counts[o.tree.split(":")[0]] += 1
                    if o.tree.startswith("error"):
                        tree_errors.append(o)
                        print(f"TREE ERROR spec {o.index} ({o.backend}): {o.tree}", flush=True)
                if o.status == "invalid":
                    print(f"INVALID spec {o.index}: {o.detail}", flush=True)
                if o.status == "failed":
                    failures.append(o)
                    print(f"FAILED spec {o.index} ({o.backend}): {o.detail}", flush=True)
            done += len({o.index for o in outcomes})
            line = "  ".join(f"{b} {c['ok']}/{c['refused']}/{c['failed']}/{c['invalid']}" for b, c in counts.items())
            print(f"[{done}/{len(indices)} specs, {time.time() - t0:.0f} s] ok/refused/failed/invalid: {line}",
                  flush=True)
            if pool is None and args.deadline is not None and time.time() - t0 > args.deadline:
                print(f"deadline: {len(indices) - done} specs not run", flush=True)
                break
        if pool is not None:
            late = [f for f in pending if not f.done()]
            if late:
                print(f"deadline: {sum(len(b) for b, f in zip(batches, pending) if not f.done())} specs not run",
                      flush=True)
                stop_pool(pool)
                pool = make_pool(args.jobs, gpus)     # fresh workers for the shrinking
        ran = done
        failures.sort(key=lambda o: (o.index, o.backend))
        chosen, shrunk = [], collections.Counter()
        for o in failures:
            sig = signature(o)
            if shrunk[sig] < args.shrink:
                shrunk[sig] += 1
                chosen.append(o)
        shrink_until = time.time() + args.shrink_seconds
        jobs = [(args.seed, o.index, o.backend, o.detail, args.shrink_tries, options) for o in chosen]
        if pool is not None and jobs:
            # every failure shrinks in a worker of its own, all at once
            futures = [pool.submit(shrink_failure, *j) for j in jobs]
            try:
                for f in concurrent.futures.as_completed(futures, max(0.0, shrink_until - time.time())):
                    o = chosen[futures.index(f)]
                    try:
                        text, detail = f.result()
                    except Exception as e:   # noqa: BLE001
                        print(f"\n(spec {o.index} of seed {args.seed}, {o.backend}: shrinking raised "
                              f"{type(e).__name__}: {str(e)[:200]})", flush=True)
                        continue
                    print(f"\n=== minimal failing spec (spec {o.index} of seed {args.seed}, {o.backend}): "
                          f"{detail}\n{text}", flush=True)
            except concurrent.futures.TimeoutError:
                print(f"(shrinking stopped after --shrink-seconds {args.shrink_seconds:g}: the other failures are "
                      "listed by index above)", flush=True)
            stop_pool(pool)
        else:
            if pool is not None:
                pool.shutdown(wait=True)
            for j, o in zip(jobs, chosen):
                if time.time() > shrink_until:
                    print(f"(shrinking stopped after --shrink-seconds {args.shrink_seconds:g}: the other failures "
                          "are listed by index above)", flush=True)
                    break
                text, detail = shrink_failure(*j)
                print(f"\n=== minimal failing spec (spec {o.index} of seed {args.seed}, {o.backend}): "
                      f"{detail}\n{text}", flush=True)
    print()
    print("\n".join(summary(counts, failures, tree_errors)))
    line = "  ".join(f"{b}: {c['ok']} ok, {c['refused']} refused, {c['failed']} failed, {c['invalid']} invalid"
                     for b, c in counts.items())
    trees = ", ".join(f"{v} {k}" for k, v in sorted(tree_counts.items())) or "none"
    what = f"indices {args.indices}" if args.indices else f"first {args.first}"
    total = sum(sum(c.values()) for c in counts.values())
    refused = sum(c["refused"] for c in counts.values())
    print(f"{ran} of {len(indices)} random specs run (seed {args.seed}, {what}, -j {args.jobs}), "
          f"{time.time() - t0:.0f} s; {line}; refused up front: {refused} of {total} "
          f"({100 * refused / max(total, 1):.0f}%); trees revealed: {trees}; {len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
