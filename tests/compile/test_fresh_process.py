"""Replicas as a user runs them: written to a file, imported in a fresh
interpreter (importlib without sys.modules, runpy, another module name), called
with no warm-up, then run again in a second process: the same bits as the
spec's reference evaluation, no cache directory left behind.
"""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from fpspec.arith.evaluate import evaluate
from fpspec.compile import compile_spec
from fpspec.compile.build import arithmetic_of
from fpspec.spec import expand, parse

ARITH = """
arithmetic {
    input = fp32
    product = none
    accumulator = fp32
    init = +0.0
    output = fp32
}
"""

# (name, spec text, n): np.einsum("i->")'s order, plain pairwise (recursive at run time),
# and two orders that call each other
SPECS = [
    ("einsum", 'op sum\nn in 37\n' + ARITH + "order lanes(4, tail(8, pairwise, seq), pairwise)\n", 37),
    ("pairwise", 'op sum\nn in 1..\n' + ARITH + "order pairwise\n", 167),
    ("mutual", 'op sum\nn in 1..\n' + ARITH
     + "let f = if n <= 8: seq else: split(n // 2, g, g)\n"
     + "let g = if n <= 8: rev else: split(n // 2 + 1, f, f)\n"
     + "order f\n", 167),
]

# every replica imported a different way; each prints the bits of sum(x) and sums(X)
RUNNER = textwrap.dedent("""
    import importlib.util, json, runpy, sys
    import numpy as np

    def by_importlib(path, name):       # not registered in sys.modules
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module.sum, module.sums

    def by_runpy(path, name):
        g = runpy.run_path(path)
        return g["sum"], g["sums"]

    def by_import(path, name):          # a plain import under a name of the user's choosing
        sys.path.insert(0, str(__import__("pathlib").Path(path).parent))
        module = importlib.import_module(name)
        return module.sum, module.sums

    out = {}
    for path, name, how, n in json.loads(sys.argv[1]):
        x = np.arange(1, n + 1, dtype=np.float32) ** 3 / np.float32(7)
        x[::3] *= -1
        X = np.stack([x, x[::-1], np.roll(x, 5)], axis=1)
        one, many = globals()["by_" + how](path, name)
        total, totals = one(x), many(X)
        out[name] = [np.asarray(total).view(np.uint32).item(), np.asarray(totals).view(np.uint32).tolist()]
    print(json.dumps(out))
""")


def _inputs(n: int):
    x = np.arange(1, n + 1, dtype=np.float32) ** 3 / np.float32(7)
    x[::3] *= -1
    return x, np.stack([x, x[::-1], np.roll(x, 5)], axis=1)


def _reference(text: str, n: int):
    spec = parse(text)
    x, X = _inputs(n)
    tree, arith = expand(spec, n), arithmetic_of(spec)
    one = np.float32(evaluate(tree, x.astype(np.float64), None, arith)).view(np.uint32).item()
    many = np.float32(evaluate(tree, X.astype(np.float64), None, arith)).view(np.uint32).tolist()
    return [one, many]


def _run(jobs) -> dict:
    done = subprocess.run([sys.executable, "-c", RUNNER, json.dumps(jobs)], capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)


@pytest.mark.parametrize("target", ["numpy", "numba"])
def test_replicas_run_in_fresh_processes(tmp_path, target):
    hows = ["importlib", "runpy", "import"]
    jobs, want = [], {}
    for (name, text, n), how in zip(SPECS, hows):
        module = f"user_{name}_{target}"
        path = tmp_path / f"{module}.py"
        path.write_text(compile_spec(parse(text), target=target))
        jobs.append([str(path), module, how, n])
        want[module] = _reference(text, n)
    assert _run(jobs) == want
    # a second process finds nothing left by the first to depend on (numba's cache
    # reloads recursive functions wrongly); the one with mutual recursion again
    again = [[path, module, "importlib", n] for path, module, _, n in jobs if "mutual" in module]
    assert _run(again) == {module: want[module] for _, module, _, _ in again}
    leftovers = [p.name for p in tmp_path.rglob("*") if p.suffix in (".nbi", ".nbc")]
    assert leftovers == []


# (name, spec text, n, shape of the call): recursive orders behind dot, gemv and gemm, one
# through a plan (fpspec.compile.backends.numba note [plans]), imported as a user would
PRODUCTS = """
arithmetic {
    input = fp32
    product = %s
    accumulator = fp32
    init = none
    output = fp32
}
"""
OPS = [
    ("dot", "op dot\nn in 1..\n" + PRODUCTS % "rounded"
     + "let f = if n <= 5: seq else: tail(3, lanes(2, f, f), pairwise)\norder f\n", 83, ()),
    ("gemv", "op gemv\nn in 1..\n" + PRODUCTS % "fma" + "order pairwise(n // 3 + 1)\n", 167, (5,)),
    ("gemm", "op gemm\nn in 4..16\n" + PRODUCTS % "fma_first" + "order pairwise\n", 13, (4, 3)),
]

OP_RUNNER = textwrap.dedent("""
    import importlib.util, json, runpy, sys
    import numpy as np

    def by_importlib(path, name):       # not registered in sys.modules
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return vars(module)

    def by_runpy(path, name):
        return runpy.run_path(path)

    def by_import(path, name):          # a plain import under a name of the user's choosing
        sys.path.insert(0, str(__import__("pathlib").Path(path).parent))
        return vars(importlib.import_module(name))

    out = {}
    for path, name, how, op, args in json.loads(sys.argv[1]):
        fn = globals()["by_" + how](path, name)[op]
        got = fn(*[np.array(a, np.float32) for a in args])
        out[name] = np.asarray(got, np.float32).view(np.uint32).ravel().tolist()
    print(json.dumps(out))
""")


def _op_inputs(op: str, n: int, shape: tuple) -> list:
    rng = np.random.default_rng(n)
    x = (rng.standard_normal(n) * 2.0 ** rng.integers(-8, 8, n)).astype(np.float32)
    y = rng.standard_normal(n).astype(np.float32)
    if op == "dot":
        return [x, y]
    A = (rng.standard_normal((shape[0], n)) * 2.0 ** rng.integers(-8, 8, (shape[0], n))).astype(np.float32)
    return [A, y] if op == "gemv" else [A, rng.standard_normal((n, shape[1])).astype(np.float32)]


def _op_reference(text: str, op: str, args: list, n: int) -> list:
    from fpspec.spec.expand import expand_arith

    tree, main, regions = expand_arith(parse(text), n)
    a = [np.asarray(v, np.float64) for v in args]
    if op == "dot":
        want = evaluate(tree, a[0], a[1], main, regions)
    else:
        B = a[1][:, None] if op == "gemv" else a[1]
        X = np.repeat(a[0].T[:, :, None], B.shape[1], axis=2).reshape(n, -1)
        Y = np.repeat(B[:, None, :], a[0].shape[0], axis=1).reshape(n, -1)
        want = evaluate(tree, X, Y, main, regions)
    return np.asarray(want, np.float32).view(np.uint32).ravel().tolist()


def test_numba_replicas_of_recursive_orders_run_in_fresh_processes(tmp_path):
    jobs, want = [], {}
    for (op, text, n, shape), how in zip(OPS, ["importlib", "runpy", "import"]):
        module = f"user_{op}_numba"
        path = tmp_path / f"{module}.py"
        path.write_text(compile_spec(parse(text), target="numba"))
        args = _op_inputs(op, n, shape)
        jobs.append([str(path), module, how, op, [a.tolist() for a in args]])
        want[module] = _op_reference(text, op, args, n)
    done = subprocess.run([sys.executable, "-c", OP_RUNNER, json.dumps(jobs)], capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout) == want
