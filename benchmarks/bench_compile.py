#!/usr/bin/env python3
"""Replicas vs the library op, side by side in one run (fpspec compile).

    python benchmarks/bench_compile.py [--quick] [--verify N] [--first-call | --only-first-call]
                                       [--rows sum,dot,matmul,h100] [--specs GLOB[,GLOB...]] [--numba-only]
                                       [--shard K/N] [--call-timeout S] [--compiled] [--help]

Each row: the library op, the Numba replica and the NumPy replica of the
op's revealed spec on the same inputs (best of a few runs, after a warm-up
call that compiles), with the ratio replica / library.  The specs are
revealed here, on this machine (numpy.sum's recursive spec is checked
against revelation at the sizes that cross its branches).  Rows:
  numpy.sum fp32, n = 10^7           (goal: numba replica <= 1.5x numpy.sum)
  numpy.dot fp32, n = 2*10^5
  numpy.matmul fp32, 512^3           GFLOP/s (goal: numba replica >= 25% of np.matmul)
  H100 fp16 torch.matmul spec, 256^3 (CPU emulation of its fused nodes; goal: numba replica
                                     >= 1 GFLOP/s on 2 cores)
--rows: only the rows named (default: all).
--first-call: for every spec under examples/, `fpspec compile` for numba and
numpy, then a fresh interpreter that imports the file and makes its first call
(Numba compiles then: no cache), timed against a fresh interpreter that only
imports numpy and numba (goal: < 5 s each); the slowest is named last.
--specs GLOB[,GLOB...]: only the specs under examples/ that match one of them;
--numba-only: no numpy replicas there; --shard K/N: only every N-th of those specs,
from the K-th (0-based; N machines or core pairs share the list).  The first call
takes the output shape of the spec's provenance where the order depends on the
output position (the replica refuses any other); elsewhere at most 64 x 64
outputs (the compiled code does not depend on the shape; the first call's time
is then compiling and one small call, not a large emulated product).  A fresh
interpreter that runs past --call-timeout S seconds (default 120) is stopped
and shown as such.
--compiled: under each spec, the functions its first call compiled (numba's compile events), the
outermost first, each with its seconds including the functions it called (where the time goes).
--verify N: also compare replicas and library bit for bit on N random and
adversarial inputs per size (numpy.sum at n = 1..300 and a few large n).
numpy.matmul's spec is revealed at the benchmarked shape (its order depends
on the shape); it holds for OpenBLAS's whole tiles, not for every output of
a 512 x 512 result, hence "(bits differ)" there.  On a shared machine the
two-thread numbers swing with load: OPENBLAS_NUM_THREADS=1
NUMBA_NUM_THREADS=1 compares one core with one core.
"""
import os
import resource
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # run from a checkout

import numpy as np  # noqa: E402

QUICK = "--quick" in sys.argv
FIRST_CALL = "--first-call" in sys.argv or "--only-first-call" in sys.argv
ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
VERIFY = int(sys.argv[sys.argv.index("--verify") + 1]) if "--verify" in sys.argv else 0
ROWS = (sys.argv[sys.argv.index("--rows") + 1].split(",") if "--rows" in sys.argv
        else ["sum", "dot", "matmul", "h100"])
SPECS = sys.argv[sys.argv.index("--specs") + 1] if "--specs" in sys.argv else "**/*.fps"
SHARD = tuple(int(x) for x in sys.argv[sys.argv.index("--shard") + 1].split("/")) if "--shard" in sys.argv else (0, 1)
COMPILED = "--compiled" in sys.argv
CALL_TIMEOUT = float(sys.argv[sys.argv.index("--call-timeout") + 1]) if "--call-timeout" in sys.argv else 120.0
# outputs of a first call where the order does not depend on the output position
FIRST_CALL_OUTPUTS = 64


def load(source: str, tag: str):
    from fpspec.compile import load_replica

    return load_replica(source, tag)


def best(fn, repeat=5):
    # the thread pools of the step before (OpenBLAS, numba's OpenMP) spin for a
    # while after their last call and take the cores from this one: let them sleep
    time.sleep(0.5)
    fn()                              # warm-up: compiles
    time.sleep(0.5)
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def spec_with(tree_or_spec, op, arithmetic, target, lets=None):
    from fpspec.spec import ast as A
    from fpspec.spec import lower

    header = A.Header(target=target, op=op, sections=(A.Block("arithmetic", arithmetic.to_entries()),))
    if lets is not None:                      # a hand-checked parametric body
        body = tree_or_spec
        return A.Spec(A.Header(target=target, op=op, n=A.Range(1, None), sections=header.sections),
                      body.lets, body.order)
    return lower(tree_or_spec, header)


def revealed(name, n, dtype="float32", **shape):
    from fpspec.arith.probe import probe_arithmetic
    from fpspec.reveal.engine import reveal
    from fpspec.reveal.targets import resolve_target

    target = resolve_target(name, n=n, dtype=dtype, **shape)
    tree = reveal(target).tree
    return target, tree, probe_arithmetic(target, tree).arithmetic


NUMPY_SUM = """op sum
n in 1..
let pairwise_sum =
    if n < 8: seq
    elif n <= 128: tail(8, lanes(8, seq, pairwise), seq)
    else: split(n // 2 - n // 2 % 8, pairwise_sum, pairwise_sum)
order pairwise_sum
"""


def row(label, lib_t, rep, unit="s", flops=None):
    cells = [f"{label:<34}", f"{lib_t:10.4f}"]
    for t in rep:
        cells.append(f"{t:10.4f} {t / lib_t:7.2f}x" if t is not None else f"{'-':>10} {'':>8}")
    if flops:
        cells.append("  GFLOP/s " + " / ".join(f"{flops / t / 1e9:.2f}" if t else "-" for t in (lib_t, *rep)))
    print("  ".join(cells))


def main():
    print(f"replicas vs library (best of 5, sum at 1e7 and matmul of 20, seconds; ratio = replica / library); numpy {np.__version__}")
    print(f"{'case':<34}  {'library':>10}  {'numba replica':>19}  {'numpy replica':>19}")

    rng = np.random.default_rng(2)
    if "sum" in ROWS:
        sum_row()
    if "dot" in ROWS:
        dot_row()
    if "matmul" in ROWS:
        matmul_row(rng)
    if "h100" in ROWS:
        h100_row(rng)
    if VERIFY:
        verify(VERIFY)


def sum_row():
    from fpspec.compile import compile_spec
    from fpspec.spec import expand, parse

    target, tree, arith = revealed("numpy.sum", 300)
    body = parse(NUMPY_SUM)
    for n in (2, 7, 9, 128, 129, 300):
        assert expand(body, n) == revealed("numpy.sum", n)[1], f"numpy.sum n={n} is not the pairwise spec"
    spec = spec_with(body, "sum", arith, "numpy.sum", lets=True)
    nb = load(compile_spec(spec, "numba"), "sum_nb")
    npr = load(compile_spec(spec, "numpy"), "sum_np")
    n = 10**6 if QUICK else 10**7
    x = np.random.default_rng(0).standard_normal(n).astype(np.float32)
    assert nb.sum(x).tobytes() == np.sum(x).tobytes()
    small = x[:10**5]
    row(f"numpy.sum fp32 n={n:.0e}", best(lambda: np.sum(x), 20), [best(lambda: nb.sum(x), 20), None])
    row("numpy.sum fp32 n=1e5", best(lambda: np.sum(small)),
        [best(lambda: nb.sum(small)), best(lambda: npr.sum(small), 2)])


def dot_row():
    from fpspec.compile import compile_spec

    n = 10**5 if QUICK else 2 * 10**5       # revelation of larger dots takes minutes here
    t, tree, arith = revealed("numpy.dot", n)
    spec = spec_with(tree, "dot", arith, "numpy.dot")
    nb = load(compile_spec(spec, "numba"), "dot_nb")
    y = np.random.default_rng(1).standard_normal(n).astype(np.float32)
    xx = np.random.default_rng(0).standard_normal(n).astype(np.float32)
    same = nb.dot(xx, y).tobytes() == np.dot(xx, y).tobytes()
    row(f"numpy.dot fp32 n={n:.0e}{'' if same else ' (bits differ)'}", best(lambda: np.dot(xx, y)),
        [best(lambda: nb.dot(xx, y)), None])


def matmul_row(rng):
    from fpspec.compile import compile_spec

    k = 256 if QUICK else 512
    t, tree, arith = revealed("numpy.matmul", k, m=k, ncols=k)   # the order depends on the shape
    spec = spec_with(tree, "gemm", arith, "numpy.matmul")
    nb = load(compile_spec(spec, "numba"), "gemm_nb")
    npr = load(compile_spec(spec, "numpy"), "gemm_np")
    A = rng.standard_normal((k, k)).astype(np.float32)
    B = rng.standard_normal((k, k)).astype(np.float32)
    same = np.array_equal(nb.gemm(A, B).view(np.uint32), np.matmul(A, B).view(np.uint32))
    # best of 20: a few ms each, and on a shared machine a two-thread run needs both cores free
    row(f"numpy.matmul fp32 {k}^3{'' if same else ' (bits differ)'}", best(lambda: np.matmul(A, B), 20),
        [best(lambda: nb.gemm(A, B), 20), best(lambda: npr.gemm(A, B), 1)], flops=2.0 * k**3)


def h100_row(rng):
    """The H100 fp16 spec (chain(16) of fused nodes), 256^3: note [schedules] of the numba runtime."""
    from fpspec.compile import compile_spec
    from fpspec.arith.model import Arithmetic
    from fpspec.arith.params import PARAMS
    from fpspec.spec import ast as Ast

    k = 128 if QUICK else 256
    arith = Arithmetic(input="fp16", product="exact", accumulator="fp32", output="fp32", fused=PARAMS["h100-fp16"])
    spec = Ast.Spec(Ast.Header(target="torch.matmul fp16 H100", op="gemm", n=Ast.Range(1, None),
                               sections=(Ast.Block("arithmetic", arith.to_entries()),)), (), Ast.Chain(Ast.Num(16)))
    nb = load(compile_spec(spec, "numba"), "h100_nb")
    npr = load(compile_spec(spec, "numpy"), "h100_np")
    A = rng.standard_normal((k, k)).astype(np.float16)
    B = rng.standard_normal((k, k)).astype(np.float16)
    assert np.array_equal(nb.gemm(A, B).view(np.uint32), npr.gemm(A, B).view(np.uint32))
    row(f"H100 fp16 matmul {k}^3 (vs fp32 np)", best(lambda: np.matmul(A.astype(np.float32), B.astype(np.float32))),
        [best(lambda: nb.gemm(A, B), 5), best(lambda: npr.gemm(A, B), 2)], flops=2.0 * k**3)


def verify(count):
    """Replicas vs numpy.sum bit for bit on `count` inputs per n, fp32 and fp64."""
    from fpspec.compile import compile_spec
    from fpspec.inputs import samples
    from fpspec.spec import parse

    for dtype, fmt, width in (("float32", "fp32", np.uint32), ("float64", "fp64", np.uint64)):
        target, tree, arith = revealed("numpy.sum", 300, dtype=dtype)
        spec = spec_with(parse(NUMPY_SUM), "sum", arith, "numpy.sum", lets=True)
        for backend in ("numba", "numpy"):
            t = time.perf_counter()
            mod = load(compile_spec(spec, backend), f"verify_{backend}")
            checked = 0
            for n in list(range(1, 301)) + [1000, 4099, 65537]:
                args = [s.args[0] for s in samples("sum", n, fmt, count, seed=n)]
                X = np.stack(args, axis=1)
                want = np.array([np.sum(a) for a in args])
                got = mod.sums(X)
                bad = ~((got.view(width) == want.view(width)) | (np.isnan(got) & np.isnan(want)))
                if bad.any():
                    raise SystemExit(f"{backend}: numpy.sum {dtype} n={n}: {int(bad.sum())} of {count} inputs differ")
                checked += count
            print(f"verify {backend}: numpy.sum {dtype}, {checked} inputs over n = 1..300 and 3 large n: "
                  f"all bits equal ({time.perf_counter() - t:.1f} s)")


# a fresh interpreter: import the replica by path (no sys.modules entry), call its op once
FIRST_CALL_SCRIPT = """
import importlib.util, sys, time
import numpy as np
if sys.argv[8] == "1":      # --compiled: seconds of each function numba compiles, callees included
    from numba.core import event
    class Compiled(event.Listener):
        started, rows = [], []
        def on_start(self, ev):
            self.started.append(time.perf_counter())
        def on_end(self, ev):
            f = getattr(ev.data.get("dispatcher"), "py_func", None)
            self.rows.append((len(self.started) - 1, getattr(f, "__name__", "?"), time.perf_counter() - self.started.pop()))
    compiled = Compiled()
    event.register("numba:compile", compiled)
t = time.perf_counter()
spec = importlib.util.spec_from_file_location("replica", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
op, n, m, p, dtype = sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), sys.argv[6]
rng = np.random.default_rng(0)
def arr(*shape):
    x = rng.standard_normal(shape).astype(dtype)
    if sys.argv[7] in ("bf16", "tf32"):    # held in float32: its upper 16 (bf16) or 19 (tf32) bits
        x = (x.view(np.uint32) & np.uint32(0xFFFF0000 if sys.argv[7] == "bf16" else 0xFFFFE000)).view(np.float32)
    if sys.argv[7].startswith("fp8"):       # held in float32: the integers -8..8 are values of both fp8 formats
        x = rng.integers(-8, 9, shape).astype(dtype)
    return x
args = {"sum": lambda: (arr(n),), "dot": lambda: (arr(n), arr(n)), "gemv": lambda: (arr(m, n), arr(n)),
        "gemm": lambda: (arr(m, n), arr(n, p))}[op]()
getattr(module, op)(*args)
if sys.argv[8] == "1":
    print(" ".join(f"{'.' * depth}{name} {s:.2f}" for depth, name, s in compiled.rows[::-1] if depth < 3))
"""


def first_calls():
    """Compile + first call in a fresh process for every spec in examples/ (numba and numpy)."""
    import glob
    import subprocess
    import tempfile

    from fpspec.compile import CompileError, compile_spec
    from fpspec.compile.build import provenance_shape
    from fpspec.spec.positions import position_guard
    from fpspec.spec.shapes import covering_any
    from fpspec.verify import load_spec, spec_format

    def fresh(argv):
        # wall seconds and the child's CPU seconds (user + system): on a loaded machine the wall
        # time counts other jobs too; numba compiles on one thread, so the CPU time is what a quiet
        # machine's wall time would be
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t = time.perf_counter()
        try:
            done = subprocess.run([sys.executable, *argv], capture_output=True, text=True, timeout=CALL_TIMEOUT)
        except subprocess.TimeoutExpired:
            done = subprocess.CompletedProcess(argv, 124, "", f"stopped after {CALL_TIMEOUT:.0f} s")
        wall = time.perf_counter() - t
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        fresh.cpu = cpu
        return wall, done

    base, _ = fresh(["-c", "import numpy, numba"])
    # the backends' modules (jinja2, the embedded runtime's source) load once per process: about
    # half a second that the first spec's compile would carry alone (`fpspec compile` of any spec
    # takes milliseconds once they are loaded), so a small spec compiles first, untimed
    from fpspec.spec import parse
    warm = parse('target "t"\nop sum\nn in 1..\n\narithmetic {\n    input = fp32\n    accumulator = fp32\n'
                 '    output = fp16\n}\n\norder seq\n')
    for target in ("numba", "numpy"):
        compile_spec(warm, target=target)
    print(f"\ncompile + first call in a fresh process (seconds, wall / CPU; reference: a fresh interpreter "
          f"importing numpy and numba, {base:.2f} / {fresh.cpu:.2f} s; load average {os.getloadavg()[0]:.1f})")
    print(f"{'spec':<58}  {'compile':>8}  {'numba call (CPU)':>17}  {'ratio':>6}  {'numpy call':>10}")
    dtypes = {"fp64": "float64", "fp32": "float32", "fp16": "float16", "bf16": "float32", "tf32": "float32",
              "fp8e4m3": "float32", "fp8e5m2": "float32"}
    slowest = {"numba": (0.0, ""), "numpy": (0.0, "")}
    with tempfile.TemporaryDirectory() as folder:
        paths = {p for pattern in SPECS.split(",")
                 for p in glob.glob(os.path.join(ROOT, "examples", pattern), recursive=True)}
        for path in sorted(paths)[SHARD[0]::SHARD[1]]:
            name = os.path.relpath(path, ROOT)
            try:
                spec = load_spec(path)
            except Exception as e:   # a spec the checker refuses is not a replica
                print(f"{name:<58}  refused by check: {str(e).splitlines()[0][:60]}")
                continue
            op = spec.header.op or "sum"
            rng_ = spec.header.n
            n = max(rng_.lo if rng_ is not None else 1, 2)
            if rng_ is not None and rng_.hi is not None:
                n = min(max(n, 64), rng_.hi)
            m, p = provenance_shape(spec)
            if spec_format(spec)[0] not in dtypes:
                print(f"{name:<58}  no inputs for format {spec_format(spec)[0]}")
                continue
            dtype = dtypes[spec_format(spec)[0]]
            cells = []
            for target in ("numba",) if "--numba-only" in sys.argv else ("numba", "numpy"):
                t = time.perf_counter()
                try:
                    # one order for every output: the replica is timed at a smaller shape, which it
                    # takes once the spec says it covers any (fpspec.spec.shapes)
                    source = compile_spec(spec if position_guard(spec) else covering_any(spec), target=target)
                except CompileError as e:
                    cells.append(("refused", str(e)[:40]))
                    continue
                compile_s = time.perf_counter() - t
                if "\n_CONDITIONS = (" not in source:     # one order for every output: any shape
                    m, p = (min(x, FIRST_CALL_OUTPUTS) if x else x for x in (m, p))
                file = os.path.join(folder, f"r_{target}.py")
                with open(file, "w") as f:
                    f.write(source)
                call_s, done = fresh(["-c", FIRST_CALL_SCRIPT, file, op, str(n), str(m or 4), str(p or 4), dtype,
                                      spec_format(spec)[0], "1" if COMPILED else "0"])
                if done.returncode != 0:
                    cells.append(("failed", done.stderr.strip().splitlines()[-1][:60]))
                    continue
                cells.append((compile_s, call_s, fresh.cpu))
                if COMPILED:
                    listing = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""
                    print(f"  {target} first call compiled (wall s, callees included; a dot per call depth): {listing}")
                if compile_s + fresh.cpu > slowest[target][0]:
                    slowest[target] = (compile_s + fresh.cpu, name)
            nb, npy = cells if len(cells) == 2 else (cells[0], ("-", ""))
            if isinstance(nb[0], str):
                print(f"{name:<58}  numba {nb[0]}: {nb[1]}")
                continue
            numpy_cell = f"{npy[1]:10.2f}" if not isinstance(npy[0], str) else f"{npy[0]:>10}"
            print(f"{name:<58}  {nb[0]:8.2f}  {nb[1]:8.2f} ({nb[2]:5.2f})  {(nb[0] + nb[1]) / base:5.1f}x  "
                  f"{numpy_cell}")
    for target, (seconds, name) in slowest.items():
        if name:
            print(f"slowest {target} compile + first call (compile + CPU of the call): {name} ({seconds:.2f} s)")
    print(f"load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    if "--help" in sys.argv or "-h" in sys.argv:
        print(__doc__)
        raise SystemExit(0)
    if "--only-first-call" not in sys.argv:
        main()
    if FIRST_CALL:
        first_calls()
