"""A 200-job CPU survey: in-process (local worker processes) and on a local
Ray cluster of two worker nodes, side by side in one run.

    python benchmarks/bench_survey.py [--jobs 200] [--skip-ray]

Prints the wall time of each, the jobs per second and the ratio.  The plan:
numpy/torch sum, dot, gemv, gemm x float64/float32/float16 x several n.
"""
from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from fpspec.survey import Store, parse_plan_text, run_survey

PLAN = '''
[survey]
name = "bench"

[[jobs]]
targets = ["numpy.sum", "torch.sum"]
dtypes = ["float64", "float32", "float16"]
n = [{ns}]

[[jobs]]
targets = ["numpy.dot", "torch.dot"]
dtypes = ["float64", "float32"]
n = [{ns}]

[[jobs]]
target = "numpy.matmul"
op = "gemv"
dtypes = ["float64", "float32"]
n = [{ns}]
shapes = [{{ m = 4 }}, {{ m = 8 }}]

[[jobs]]
target = "numpy.matmul"
op = "gemm"
dtypes = ["float64", "float32"]
n = [{small}]
shapes = [{{ m = 4, ncols = 4 }}]
'''


def plan_of(count: int):
    # 6 + 4 + 4 sum/dot/gemv rows per n, gemm at half the n: grow n until the plan has `count` jobs
    k = 1
    while True:
        ns = [8 * (i + 1) for i in range(k)]
        text = PLAN.format(ns=", ".join(map(str, ns)), small=", ".join(map(str, ns[: max(1, k // 2)])))
        plan = parse_plan_text(text)
        if len(plan.jobs) >= count:
            return plan
        k += 1


def timed(plan, **kw):
    with tempfile.TemporaryDirectory() as d, Store(Path(d) / "s.db") as store:
        started = time.perf_counter()
        summary = run_survey(plan, store, **kw)
        seconds = time.perf_counter() - started
        ok = sum(r.status == "ok" for r in store.results())
    return seconds, summary, ok


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=200)
    ap.add_argument("--skip-ray", action="store_true")
    args = ap.parse_args()
    plan = plan_of(args.jobs)
    print(f"plan: {len(plan.jobs)} jobs")
    rows = []
    seconds, summary, ok = timed(plan, parallel=2)
    rows.append(("in-process, 2 worker processes", seconds, summary, ok))
    if not args.skip_ray:
        import ray
        from ray.cluster_utils import Cluster

        cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0, "include_dashboard": False})
        for _ in range(2):
            cluster.add_node(num_cpus=1)
        cluster.wait_for_nodes()
        try:
            seconds, summary, ok = timed(plan, cluster=cluster.address)
        finally:
            ray.shutdown()
            cluster.shutdown()
        rows.append(("Ray, local cluster of 2 worker nodes", seconds, summary, ok))
    base = rows[0][1]
    print(f"{'how':40s} {'seconds':>8s} {'jobs/s':>7s} {'ok':>4s} {'failed':>6s} {'vs in-process':>13s}")
    for how, s, summary, ok in rows:
        print(f"{how:40s} {s:8.1f} {summary.ran / s:7.2f} {ok:4d} {summary.failed:6d} {s / base:13.2f}")


if __name__ == "__main__":
    main()
