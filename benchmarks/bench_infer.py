#!/usr/bin/env python3
"""One spec for every n (fpspec.infer) vs revealing one n, side by side in one run.

    FPREV_PATH=/path/to/FPRev python benchmarks/bench_infer.py [--quick] [--rows infer,big,replica]
        [--spec-out examples/cpu/numpy_sum.fps]

Rows:
  table    range inference on numpy.sum, torch.sum, np.einsum, OpenBLAS sdot
           (numpy.dot float32), OpenBLAS sgemv (numpy.matmul, m = 8) and 5
           random generated specs (their numba replicas): range, seconds,
           target calls, peak RSS, spec size, held-out agreement; beside each,
           the reference: revealing the largest n once (FPRev-style: no range
           inference exists there).  Each run in a child process (its own peak
           RSS), under the command line's default time limit (the limit s column).
           (python benchmarks/bench_infer.py --rows table [--quick] [--only 0,3,5]
           [--time-limit SECONDS: each range run's bound, default the command line's])
  bounded  black boxes of a few microseconds a call over -n 1..4096, each
           the command line a user types (`fpspec reveal NAME -n 1..4096
           --dtype float32 -o F --json`, in a child process): the time limit
           used (the default, derived from the cost of a call, unless
           --time-limit is given), wall seconds, target calls, the machine's
           load, when each progress phase began, and the answer (a spec or a
           fallback)
           (python benchmarks/bench_infer.py --rows bounded [--time-limit SECONDS] [--only 0,2]
           [--spec-dir DIR: each spec or fallback written to DIR/NAME_4096.fps])
  infer    numpy.sum float32 over n = 1..65536: fpspec infers one spec (full
           revelation at designed and held-out n up to 8192, sampled checks
           above), against the published FPRev revealing n = 65536 once
           (FPREV_PATH; its code is never copied here) and fpspec revealing
           n = 65536 once.
  big      numpy.sum float32 at n = 2^24: the inferred spec checked by
           SAMPLING (targeted l(i,j) queries + a Numba replica on random
           inputs), in a child process so that its peak RSS is its own;
           against one numpy.sum call at that n.
  replica  the inferred spec compiled by the Numba backend against numpy.sum,
           bit for bit, at 1,000 random n in 1..10^6 (--quick: 100).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # run from a checkout

import numpy as np  # noqa: E402
from fprev_ref import load_fprev  # noqa: E402  (benchmarks/ is on sys.path when run as a script)

QUICK = "--quick" in sys.argv
N_HI = 65536
BIG = 1 << 24


def _arg(name, default):
    if name in sys.argv:
        return sys.argv[sys.argv.index(name) + 1]
    return default


def line(label, what, ref, ours, unit="s"):
    ratio = f"{ref / ours:8.1f}x" if isinstance(ref, (int, float)) and isinstance(ours, (int, float)) and ours else \
        "       -"
    fr = f"{ref:12.3f}" if isinstance(ref, float) else f"{ref!s:>12}"
    fo = f"{ours:12.3f}" if isinstance(ours, float) else f"{ours!s:>12}"
    print(f"  {label:<40}{what:<22}{fr}{fo}  {ratio}")


def numpy_target(n):
    from fpspec.reveal.targets import resolve_target

    return resolve_target("numpy.sum", n=n, dtype="float32")


def row_infer():
    from fpspec.infer import infer_spec
    from fpspec.io import write_atomic
    from fpspec.reveal.engine import reveal

    out = _arg("--spec-out", None)
    cmd = "python benchmarks/bench_infer.py --rows infer" + (f" --spec-out {out}" if out else "")
    t0 = time.perf_counter()
    r = infer_spec(numpy_target, (1, N_HI), progress=sys.stderr.isatty(), command=cmd)
    ours = time.perf_counter() - t0
    if out:
        write_atomic(out, str(r.spec))
    print(r.report())
    fpr = load_fprev()
    ref = ref_q = "not run"
    if fpr is not None and not QUICK:
        fprev, fnp = fpr
        NumpySum = fnp.NumpySum
        impl = NumpySum(N_HI)
        calls = [0]
        get_l = impl.get_l

        def counted():
            calls[0] += 1
            return get_l()

        impl.get_l = counted
        t0 = time.perf_counter()
        fprev.fprev(impl)
        ref, ref_q = time.perf_counter() - t0, calls[0]
    t0 = time.perf_counter()
    one = reveal(numpy_target(N_HI))
    one_s = time.perf_counter() - t0
    held_ok = not any(c.stage == "held-out" and not c.resolved for c in r.counterexamples)
    sampled_ok = all(s.ok for s in r.sampled)
    print(f"\nnumpy.sum float32, n = 1..{N_HI}: one spec ({r.fit.order})")
    print(f"  {'':<40}{'':<22}{'reference':>12}{'fpspec':>12}  ratio")
    line("FPRev n=65536 once vs infer 1..65536", "wall seconds", ref, ours)
    line("FPRev n=65536 once vs infer 1..65536", "queries", ref_q,
         sum(t.queries for t in r.timings))
    line("fpspec reveal n=65536 once vs infer", "wall seconds", one_s, ours)
    line("", "n revealed in full", "1", str(len(r.revealed) + len(r.held_out)))
    line("", "held-out n (full)", "-", f"{len(r.held_out)} {'agree' if held_ok else 'DIFFER'}")
    line("", "sampled n", "-", f"{len(r.sampled)} {'agree' if sampled_ok else 'DIFFER'}")
    return r


def widened(spec_text):
    """The spec inferred on 1..65536, its range opened to every n: the checks
    at 2^24 and 10^6 test exactly whether it extrapolates."""
    import dataclasses

    from fpspec.spec import ast as A
    from fpspec.spec import parse

    spec = parse(spec_text)
    return str(dataclasses.replace(spec, header=dataclasses.replace(spec.header, n=A.Range(1, None))))


def row_big(spec_text):
    """In a child process: the sampled check at 2^24 and its own peak RSS."""
    code = r"""
import json, resource, sys, time
import numpy as np
from fpspec.spec import parse
from fpspec.infer.check import Replica, sampled_check
from fpspec.reveal.targets import resolve_target
spec = parse(sys.stdin.read())
n = int(sys.argv[1])
t0 = time.perf_counter()
rep = Replica(spec, "numba")
c = sampled_check(spec, resolve_target("numpy.sum", n=n, dtype="float32"), replica=rep)
sec = time.perf_counter() - t0
x = np.ones(n, np.float32)
t1 = time.perf_counter(); x.sum(); one = time.perf_counter() - t1
print(json.dumps({"seconds": sec, "check": c.to_json(), "text": c.text(), "numpy_call": one,
                  "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""
    env = dict(os.environ, PYTHONPATH=os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    p = subprocess.run([sys.executable, "-c", code, str(BIG)], input=spec_text, capture_output=True, text=True,
                       env=env)
    if p.returncode:
        print(p.stderr[-2000:])
        return
    d = json.loads(p.stdout.strip().splitlines()[-1])
    print(f"\nnumpy.sum float32 at n = 2^24: {d['text']}")
    print(f"  {'':<40}{'':<22}{'reference':>12}{'fpspec':>12}  ratio")
    line("numpy.sum one call vs sampled check", "wall seconds", d["numpy_call"], d["seconds"])
    line("", "peak RSS (MB)", "-", round(d["peak_rss_mb"], 1))
    line("", "l(i,j) queries", "-", d["check"]["pairs"])


def row_replica(spec_text, count):
    from fpspec.infer.check import Replica
    from fpspec.spec import parse

    rep = Replica(parse(spec_text), "numba")
    fn = rep.module["sum"]
    rng = np.random.default_rng(2024)
    ns = rng.integers(1, 10 ** 6 + 1, count)
    fn(np.ones(3, np.float32))  # compile outside the timing
    same = 0
    t_rep = t_np = 0.0
    first_bad = None
    for n in ns.tolist():
        x = (rng.standard_normal(n) * np.exp2(rng.integers(-12, 13, n))).astype(np.float32)
        t0 = time.perf_counter()
        a = fn(x)
        t1 = time.perf_counter()
        b = np.sum(x)
        t_np += time.perf_counter() - t1
        t_rep += t1 - t0
        if np.float32(a).tobytes() == np.float32(b).tobytes():
            same += 1
        elif first_bad is None:
            first_bad = n
    print(f"\nNumba replica of the inferred spec vs numpy.sum, {count} random n in 1..10^6, random float32 inputs")
    print(f"  {'':<40}{'':<22}{'numpy.sum':>12}{'replica':>12}  ratio")
    line("", "bitwise equal", "-", f"{same}/{count}")
    line("", "wall seconds (sums)", t_np, t_rep)
    if first_bad is not None:
        print(f"  first difference at n = {first_bad}")


TABLE = (   # (label, target, options, lo, hi)
    ("numpy.sum", "numpy.sum", {}, 1, 4096),
    ("torch.sum", "torch.sum", {}, 1, 4096),
    ("np.einsum('i->')", "named_boxes:einsum_sum", {"op": "sum"}, 1, 4096),
    ("OpenBLAS sdot (numpy.dot)", "numpy.dot", {}, 1, 4096),
    ("OpenBLAS sgemv m=8 (numpy.matmul)", "numpy.matmul", {"op": "gemv", "m": 8}, 1, 1024),
) + tuple((f"random spec seed {s}", f"random:{s}", {}, 1, 200) for s in range(5))

_CHILD = r"""
import json, resource, sys, time
sys.path[:0] = sys.argv[1].split(":")
import numpy as np
label, name, opts, lo, hi, mode, limit = json.loads(sys.argv[2])
calls = [0]
if name.startswith("random:"):
    from fpspec.infer.roundtrip import replica_target
    from fpspec.spec.generate import random_spec
    spec = random_spec(np.random.default_rng([11, int(name[7:])]), op="sum", max_depth=4, n_range=(lo, hi))
    base = replica_target(spec, "numba")
    t2 = base(2)
    t2.fn(t2.native(np.ones(2)))  # the JIT outside the timing
else:
    from fpspec.reveal.targets import resolve_target
    spec = None
    base = lambda n: resolve_target(name, n=n, dtype="float32", **opts)
def make(n):
    import dataclasses
    t = base(n)
    fn, rows = t.fn, t.call_rows
    def call(*a):
        calls[0] += 1
        return fn(*a)
    def call_rows(X):
        calls[0] += 1
        return rows(X)
    return dataclasses.replace(t, fn=call, call_rows=None if rows is None else call_rows)
t0 = time.perf_counter()
out = {"label": label}
if mode == "once":
    from fpspec.reveal.engine import reveal
    r = reveal(make(hi))
    out.update(seconds=time.perf_counter() - t0, size=r.tree.size if hasattr(r.tree, "size") else 1)
else:
    from fpspec.infer import AUTO
    from fpspec.infer.fit import order_cost
    if opts.get("op") in ("gemv", "gemm"):
        from fpspec.infer.positions import infer_positions as infer
    else:
        from fpspec.infer import infer_spec as infer
    r = infer(make, (lo, hi), progress=False, time_limit=limit or AUTO)
    sp = r.spec
    order = sp.lets[0].order if sp.lets else sp.order
    fb = getattr(r, "fallback", "")
    held = getattr(r, "held_out", ())
    agree = f"fallback {sp.header.n.lo}..{sp.header.n.hi}" if fb else f"{len(held)} {'agree' if r.ok else 'DIFFER'}"
    if spec is not None and not fb:
        from fpspec.infer.roundtrip import _first_difference
        wrong = _first_difference(spec, sp, sorted(set(np.random.default_rng(3).integers(lo, hi + 1, 12).tolist())), True)
        agree += "; = generating spec" if not wrong else f"; WRONG vs generating spec: {wrong}"
    first = r.groups[0][2] if hasattr(r, "groups") else r     # gemv with several orders: one limit for all
    out.update(limit=first.time_limit)
    out.update(seconds=time.perf_counter() - t0, size=order_cost(sp.order) + sum(order_cost(d.order) for d in sp.lets),
               chars=len(str(order)), agree=agree, order=str(order)[:160], fallback=fb)
out.update(calls=calls[0], rss_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
           cpu=resource.getrusage(resource.RUSAGE_SELF).ru_utime + resource.getrusage(resource.RUSAGE_SELF).ru_stime)
print(json.dumps(out))
"""


def _child(row, mode):
    here = os.path.dirname(os.path.abspath(__file__))
    paths = ":".join([os.path.join(here, ".."), os.path.join(here, "..", "examples", "infer")])
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    p = subprocess.run([sys.executable, "-c", _CHILD, paths, json.dumps([*row[:3], row[3], row[4], mode, float(_arg("--time-limit", 0))])],
                       capture_output=True, text=True, env=env)
    if p.returncode:
        return {"label": row[0], "error": p.stderr.strip().splitlines()[-1][:200] if p.stderr.strip() else "?"}
    return json.loads(p.stdout.strip().splitlines()[-1])


def _seconds(x) -> str:
    return "-" if x is None else f"{x:g}"


def row_table():
    rows = TABLE[:3] if QUICK else TABLE
    only = _arg("--only", None)      # row numbers, e.g. 0,1,5 (to run the table in several processes)
    if only is not None:
        rows = [TABLE[int(i)] for i in only.split(",")]
    print(f"{'target':<36}{'range':>10}  {'limit s':>8}{'ref s':>8}{'infer s':>9}{'cpu s':>7}{'ratio':>7}  {'ref calls':>10}"
          f"{'calls':>9}  {'ref RSS':>8}{'RSS MB':>8}  {'size':>5}  held-out / spec")
    for row in rows:
        ref, ours = _child(row, "once"), _child(row, "infer")
        if "error" in ours or "error" in ref:
            print(f"{row[0]:<36}  error: {ours.get('error') or ref.get('error')}")
            continue
        print(f"{row[0]:<36}{f'{row[3]}..{row[4]}':>10}  {_seconds(ours['limit']):>8}{ref['seconds']:8.2f}{ours['seconds']:9.2f}"
              f"{ours['cpu']:7.1f}{ours['seconds'] / ref['seconds']:6.1f}x  {ref['calls']:>10}{ours['calls']:>9}"
              f"  {ref['rss_mb']:8.0f}{ours['rss_mb']:8.0f}  {ours['size']:>5}  {ours['agree']}", flush=True)
        print(f"{'':<36}  order: {ours['order']}" + (f"\n{'':<36}  fallback: {ours['fallback'][:200]}"
                                                      if ours["fallback"] else ""), flush=True)


BOUNDED = (   # (label, target, options): black boxes of a few microseconds a call, over 1..4096
    ("numpy.sum", "numpy.sum", {}),
    ("torch.sum", "torch.sum", {}),
    ("torch.dot", "torch.dot", {"op": "dot"}),
    ("np.einsum('i->')", "named_boxes:einsum_sum", {"op": "sum"}),
    ("np.einsum('i,i->')", "named_boxes:einsum_dot", {"op": "dot"}),
    ("OpenBLAS sdot (numpy.dot)", "numpy.dot", {}),
    ("torch.mv m=8", "torch.mv", {"op": "gemv", "m": 8}),
)


def row_bounded(limit: float | None):
    """Each black box over -n 1..4096 as a user runs it: the command line in a child process
    (interpreter start and imports included), under --time-limit LIMIT, or without the option
    (the default, derived from the measured cost of a call).  Wall seconds of the command, the
    limit it used and why, target calls, the load average (1 min) before and after, when each
    progress phase began, and the answer: a spec, or a fallback naming what was left unresolved."""
    import tempfile

    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.join(here, "..")
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1",
               PYTHONPATH=os.pathsep.join([root, os.path.join(root, "examples", "infer")]))
    rows = BOUNDED
    only = _arg("--only", None)
    if only is not None:
        rows = [BOUNDED[int(i)] for i in only.split(",")]
    spec_dir = _arg("--spec-dir", None) or tempfile.mkdtemp()   # each row's spec (or fallback) written there
    print(f"{'target':<28}{'limit s':>8}{'wall s':>8}{'calls':>8}{'load':>11}  answer")
    for label, name, opts in rows:
        out = os.path.join(spec_dir, name.split(":")[-1].replace(".", "_") + "_4096.fps")
        args = ["reveal", name, *[x for k, v in opts.items() for x in (f"--{k}", str(v))], "-n", "1..4096",
                "--dtype", "float32", "-o", out, "--json"]
        if limit is not None:
            args += ["--time-limit", f"{limit:g}"]
        load = os.getloadavg()[0]
        t0 = time.perf_counter()
        p = subprocess.run([sys.executable, "-m", "fpspec.cli", *args], capture_output=True, text=True, env=env,
                           cwd=root)
        wall = time.perf_counter() - t0
        after = os.getloadavg()[0]
        try:
            d = json.loads(p.stdout)
        except ValueError:
            print(f"{label:<28}  error (exit {p.returncode}): "
                  f"{p.stderr.strip().splitlines()[-1][:200] if p.stderr.strip() else '?'}")
            continue
        first = d["groups"][0] if "groups" in d else d      # gemv: the first group of outputs
        answer = (f"fallback 1..{spec_hi(d['spec'])}: {first['fallback'][:200]}" if first.get("fallback")
                  else f"spec ({'held-out n agree' if d['ok'] else 'DISAGREES'}): {first['fit']['order'][:120]}")
        used = first.get("time_limit")
        print(f"{label:<28}{_seconds(used):>8}{wall:8.1f}{first.get('calls', 0):>8}"
              f"{load:5.1f} ->{after:4.1f}  {answer}", flush=True)
        print(f"{'':<28}  fpspec {' '.join(args)}")
        print(f"{'':<28}  limit: {first.get('limit_note') or '-'}; phases: "
              + ", ".join(f"{at:.1f} s {ph}" for ph, at in first.get("phases", [])), flush=True)


def spec_hi(text: str) -> str:
    """The HI of a spec's `n in LO..HI` header line."""
    for x in text.splitlines():
        if x.strip().startswith("n in "):
            return x.strip().split("..")[-1]
    return "?"


def main():
    rows = _arg("--rows", "infer,big,replica").split(",")
    if rows == ["table"]:
        row_table()
        return
    if rows == ["bounded"]:
        given = _arg("--time-limit", None)
        row_bounded(None if given is None else float(given))
        return
    spec_text = None
    if "infer" in rows:
        spec_text = str(row_infer().spec)
    if spec_text is None:
        path = _arg("--spec", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples", "cpu",
                                           "numpy_sum.fps"))
        spec_text = open(path).read()
    spec_text = widened(spec_text)
    print("\n(the spec inferred on 1..65536 is checked below at larger n: its range is opened to n in 1..)")
    if "big" in rows:
        row_big(spec_text)
    if "replica" in rows:
        row_replica(spec_text, 100 if QUICK else 1000)


if __name__ == "__main__":
    main()
