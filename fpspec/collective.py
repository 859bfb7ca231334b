"""Collective specs: an all-reduce's orders over ranks written as a .fps spec,
its replica, `verify` against a live collective and `diff` between settings.

A collective over W ranks and L elements is the sum op at n = W with one
output per element: the spec's root is an `if` on the element index `i`
(fpspec.spec.positions.merge writes it from the label map), each arm the tree
over ranks of its elements, and the replica's `sums(X)` sums every column of
the [W, L] stack X in its element's order (docs/collectives.md).  The header
holds a `collective` section: the collective, W, L and what chose the order
(backend, NCCL version and settings, devices, topology).

    rv = reveal_columns(c.run, world=4, numel=4096)        # fpspec.reveal.collective
    spec = collective_spec(rv, c, target=..., command=...)
    verify_collective(spec, backend="numba", live=True)    # replica and live collective vs the spec
    diff_collective(spec_a, spec_b)                        # element by element
"""
from __future__ import annotations

import datetime
import time
from dataclasses import replace

import numpy as np

from fpspec.errors import FpspecError
from fpspec.reveal.collective import (COLLECTIVES, NCCL_CHOICES, Collective, ColumnRevelation, collective_name,
                                      evaluate_columns, reveal_columns)
from fpspec.tree import diff as tree_diff
from fpspec.tree import format_tree, observable

SECTION = "collective"


# ================================================================ spec <-> revelation

def collective_spec(rv: ColumnRevelation, session: Collective, *, target: str, command: str,
                    device: str | None = None):
    """The spec of a revealed collective: one arm per order, an `if` on the element index i."""
    import fpspec
    from fpspec.arith import Arithmetic
    from fpspec.spec import ast as A
    from fpspec.spec import check, expand, lower, make_header
    from fpspec.spec.header import block
    from fpspec.spec.positions import merge

    env = dict(session.environment)
    fmt = session.fmt
    prov = {
        "torch": env.pop("torch", None),
        "device": device or env.get("devices"),
        "fpspec": fpspec.__version__,
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "command": command,
        # the outputs the `if` on i was written for: the replica takes [W, numel] stacks only
        "shape": {"m": rv.numel},
        "revealed": (f"{rv.queries} queries, {rv.calls} calls, {rv.seconds:.3f} s "
                     f"(+ {session.start_seconds:.1f} s to start {session.world} ranks)"),
    }
    arith = Arithmetic(input=fmt, product="none", accumulator=fmt, init="none", output=fmt)
    header = make_header(target=target, op="sum", n=(rv.world, rv.world), provenance=prov,
                         formats={"input": fmt, "output": fmt},
                         arithmetic=A.Block("arithmetic", arith.to_entries()))
    section = {"op": session.op, "world": rv.world, "numel": rv.numel, "backend": session.backend}
    section.update({k: v for k, v in env.items() if k not in ("backend", "world")})
    header = replace(header, sections=header.sections[:-1] + (block(SECTION, section),) + header.sections[-1:])
    spec = merge([lower(t, header, observed=True) for t in rv.trees], rv.labels)
    check(spec)
    # written only if it gives every element its revealed tree back
    labels = element_labels(spec, rv.numel)
    for k, t in enumerate(rv.trees):
        where = np.flatnonzero(rv.labels == k)
        arms = np.unique(labels[where])
        d = tree_diff(observable(expand(spec, rv.world, (int(where[0]), 0))), observable(t))
        if len(arms) != 1 or d is not None:
            raise FpspecError(f"internal error: the spec does not give element {int(where[0])} its order")
    return spec


def is_collective(spec) -> bool:
    return spec.header.target is not None and collective_name(spec.header.target) is not None


def section(spec) -> dict:
    """The spec's `collective` section as a dict (nested blocks as dicts)."""
    def value(v):
        if hasattr(v, "entries"):
            return {e.key: value(e.value) for e in v.entries}
        return getattr(v, "value", getattr(v, "name", v))
    for b in spec.header.sections:
        if b.name == SECTION:
            return value(b)
    raise FpspecError(f"the spec of {spec.header.target} has no `{SECTION}` section (world, numel, backend)")


def element_labels(spec, numel: int) -> np.ndarray:
    """The arm of the root `if` every element 0..numel-1 takes (0 for a spec without one)."""
    from fpspec.compile.backends import py_cond
    from fpspec.compile.build import build_cond
    from fpspec.spec.positions import position_guard

    guard = position_guard(spec)
    labels = np.zeros(numel, np.int64)
    if guard is None:
        return labels
    i = np.arange(numel)
    n = spec.header.n.lo
    labels[:] = len(guard.cases)
    todo = np.ones(numel, bool)
    for k, c in enumerate(guard.cases):
        # the condition as the compiled replica's dispatcher evaluates it (compile.positions),
        # over every element at once
        cond = eval(f"lambda i, j, n: {py_cond(build_cond(c.cond, True), m='n', vector=True)}")
        hit = todo & np.broadcast_to(cond(i, 0, n), (numel,))
        labels[hit] = k
        todo &= ~hit
    return labels


def spec_orders(spec, numel: int | None = None):
    """(trees, labels) of a collective spec: the tree of every arm used and the arm of each element."""
    from fpspec.spec import expand

    L = int(numel or section(spec)["numel"])
    arms = element_labels(spec, L)
    # orders numbered by their first element, as fpspec.reveal.collective numbers them
    _, firsts, inverse = np.unique(arms, return_index=True, return_inverse=True)
    order = np.argsort(firsts, kind="stable")
    renumber = np.empty_like(order)
    renumber[order] = np.arange(len(order))
    labels = renumber[np.asarray(inverse).reshape(-1)]
    firsts = firsts[order].tolist()
    W = spec.header.n.lo
    return tuple(expand(spec, W, (e, 0)) for e in firsts), labels


# ================================================================ reveal (the CLI's driver)

def reveal_specs(target: str, *, world: int, backend: str, numels, fmt: str, command: str,
                 seed: int = 0, env: dict | None = None, log=None):
    """Start the ranks once, reveal at every buffer size; [(numel, revelation, spec)] and the session's
    start-up seconds.  `log(line)` hears a line per size."""
    op = collective_name(target)
    if op is None:
        raise FpspecError(f"{target} is not a collective fpspec launches; expected one of {', '.join(COLLECTIVES)}")
    out = []
    with Collective(op, world=world, backend=backend, fmt=fmt, env=env) as session:
        for L in numels:
            L_in = int(L)
            rv = reveal_columns(session.run, world=world, numel=L_in, fmt=fmt, seed=seed)
            spec = collective_spec(rv, session, target=target, command=command)
            out.append((L_in, rv, spec))
            if log is not None:
                log(summary_line(rv))
        start = session.start_seconds
    return out, start


def summary_line(rv: ColumnRevelation) -> str:
    orders = "; ".join(f"{format_tree(t)} x {c}" for t, c in zip(rv.trees, rv.counts()))
    return (f"numel {rv.numel}: {len(rv.trees)} order(s): {orders}  "
            f"[{rv.queries} queries, {rv.calls} calls, {rv.seconds:.3f} s]")


# ================================================================ verify and diff

def replica_columns(spec, backend: str, fmt: str):
    """The compiled replica's sums(X) as a [W, L] float64 -> [L] float64 function."""
    from fpspec.compile import compile_spec, load_replica

    module = load_replica(compile_spec(spec, target=backend), f"replica ({backend})")
    sums = module.sums
    if getattr(module, "torch", None) is not None:
        import torch

        dtype = getattr(torch, {"fp64": "float64", "fp32": "float32", "fp16": "float16", "bf16": "bfloat16"}[fmt])
        device = "cuda" if torch.cuda.is_available() else "cpu"

        def run(X):
            out = sums(torch.from_numpy(np.asarray(X, np.float64)).to(device=device, dtype=dtype))
            return out.detach().to("cpu", torch.float64).numpy()
        return run
    dtype = {"fp64": np.float64, "fp32": np.float32, "fp16": np.float16}.get(fmt)
    if dtype is None:
        raise FpspecError(f"the {backend} replica takes no {fmt} arrays (numpy has no such dtype); "
                          "compile for triton")
    return lambda X: np.asarray(sums(np.asarray(X, np.float64).astype(dtype)), np.float64)


def sample_stack(world: int, numel: int, fmt: str, count: int, seed: int) -> np.ndarray:
    """A [W, L] stack whose columns cycle through `count` random and adversarial inputs
    (fpspec.inputs: wide exponents, cancellation, signed zeros, subnormals, inf, nan)."""
    from fpspec import inputs as fpinputs

    cols = np.stack([np.asarray(s.args[0], np.float64)
                     for s in fpinputs.samples("sum", world, fmt, max(1, min(count, numel)), seed=seed)], 1)
    return cols[:, np.arange(numel) % cols.shape[1]]


def _tree_checks(name: str, ref, got, W: int, start: float):
    """TreeChecks of one side against the reference, one per pair of orders that meet at some element."""
    from fpspec.verify import TreeCheck

    (rt, rl), (gt, gl) = ref, got
    checks = []
    width = int(gl.max()) + 1
    codes, first = np.unique(rl * width + gl, return_index=True)
    for code, e in sorted(zip(codes.tolist(), first.tolist()), key=lambda x: x[1]):
        a, b = divmod(code, width)
        d = tree_diff(observable(rt[a]), observable(gt[b]))
        count = int(np.sum((rl == a) & (gl == b)))
        text = None if d is None else (f"at element {e} ({count} elements like it): "
                                       f"{d}")
        checks.append(TreeCheck(W, name, d is None, text, time.perf_counter() - start))
    return checks


def _mismatch(X, left: str, right: str, lo: np.ndarray, ro: np.ndarray, fmt: str):
    from fpspec.verify import Mismatch, same_bits

    bad = np.flatnonzero(~same_bits(lo, ro))
    if not len(bad):
        return None
    e = int(bad[0])
    hexed = lambda v: f"{np.float64(v).view(np.uint64):#018x} ({v!r})"   # noqa: E731
    return Mismatch(X.shape[0], f"element {e} of the sample stack ({len(bad)} elements differ)",
                    "fpspec.collective.sample_stack(W, L, fmt, count, seed)", (e,), left, right,
                    hexed(lo[e]), hexed(ro[e]), tuple(f"rank {r}: {hexed(X[r, e])}" for r in range(X.shape[0])))


def verify_collective(spec, *, spec_name: str = "spec", backend: str = "numpy", against: str | None = None,
                      samples: int = 4096, seed: int = 0, env: dict | None = None,
                      session: Collective | None = None):
    """fpspec verify for a collective spec: the replica (and with `against`, the collective
    launched again with the spec's backend, world size and buffer size, in this process's
    environment, or run by the ranks of `session`) revealed element by element and compared
    with the spec's orders, then run on a stack of random and adversarial inputs, bit for bit."""
    from fpspec.verify import Problem, Report, SampleCheck

    start = time.perf_counter()
    sec = section(spec)
    if against is not None and collective_name(against) != sec["op"]:
        raise FpspecError(f"--against {against}: the spec is of torch.distributed.{sec['op']}")
    live = against is not None
    W, L = spec.header.n.lo, int(sec["numel"])
    fmt = _spec_fmt(spec)
    ref = spec_orders(spec, L)
    sides = [(f"replica ({backend})", replica_columns(spec, backend, fmt))]
    own = None
    notes = [f"{W} ranks, {L} elements, {len(ref[0])} order(s) in the spec"]
    problems, trees, checks = [], [], []
    try:
        if live:
            if session is None:
                session = own = Collective(sec["op"], world=W, backend=str(sec["backend"]), fmt=fmt, env=env)
                own.start()
            sides.append((f"{spec.header.target} ({session.backend}, live)",
                          lambda X: session.run(X, sec["op"])))
            notes.append(f"live: {_describe_env(session.environment)}")
        X = sample_stack(W, L, fmt, samples, seed)
        model = evaluate_columns(*ref, X, fmt)
        for name, fn in sides:
            t0 = time.perf_counter()
            try:
                rv = reveal_columns(fn, world=W, numel=L, fmt=fmt, seed=seed)
                trees += _tree_checks(name, ref, (rv.trees, rv.labels), W, t0)
                out = np.asarray(fn(X), np.float64)
                checks.append(SampleCheck(spec_name, name, W, min(samples, L),
                                          _mismatch(X, spec_name, name, model, out, fmt)))
            except FpspecError as e:
                problems.append(Problem("tree", name, W, str(e)))
    finally:
        if own is not None:
            own.close()
    return Report(command="verify", reference=spec_name, sides=tuple(n for n, _ in sides), op="sum", fmt=fmt,
                  n_values=(W,), trees=tuple(trees), samples=tuple(checks), problems=tuple(problems),
                  seed=seed, seconds=time.perf_counter() - start, inputs=min(samples, L), notes=tuple(notes))


def diff_collective(name_a: str, name_b: str, specs: dict):
    """fpspec diff of two collective specs (specs: name -> spec), element by element over the
    elements both cover."""
    from fpspec.verify import Problem, Report

    if name_a not in specs or name_b not in specs:
        raise FpspecError("a collective spec is compared with another spec (fpspec verify --against "
                          "runs the live collective)")
    a, b, names = specs[name_a], specs[name_b], (name_a, name_b)
    if not (is_collective(a) and is_collective(b)):
        raise FpspecError(f"{name_a if not is_collective(a) else name_b} is not a collective's spec")
    start = time.perf_counter()
    sa, sb = section(a), section(b)
    W = a.header.n.lo
    problems, notes = [], []
    if b.header.n.lo != W:
        problems.append(Problem("tree", names[1], W, f"{b.header.n.lo} ranks, against {W}"))
    La, Lb = int(sa["numel"]), int(sb["numel"])
    L = min(La, Lb)
    if La != Lb:
        notes.append(f"buffers of {La} and {Lb} elements: compared at elements 0..{L - 1}")
    for what, s in ((names[0], sa), (names[1], sb)):
        notes.append(f"{what}: {_describe_env(s)}")
    ta, la = spec_orders(a, La)
    tb, lb = spec_orders(b, Lb)
    trees = [] if problems else _tree_checks(names[1], (ta, la[:L]), (tb, lb[:L]), W, start)
    diffs = int(sum(np.sum((la[:L] == x) & (lb[:L] == y)) for x in range(len(ta)) for y in range(len(tb))
                    if tree_diff(observable(ta[x]), observable(tb[y])) is not None))
    notes.append(f"{diffs} of {L} elements take another order in {names[1]}")
    return Report(command="diff", reference=names[0], sides=(names[1],), op="sum", fmt=_spec_fmt(a),
                  n_values=(W,), trees=tuple(trees), problems=tuple(problems),
                  seconds=time.perf_counter() - start, notes=tuple(notes))


def _spec_fmt(spec) -> str:
    from fpspec.verify import spec_format

    return spec_format(spec)[0]


def _describe_env(env: dict) -> str:
    parts = [f"{env.get('backend', '?')}"]
    if env.get("nccl"):
        parts.append(f"NCCL {env['nccl']}")
    settings = env.get("settings") or {}
    parts += [f"{k}={v}" for k, v in settings.items() if k in NCCL_CHOICES]
    if env.get("devices"):
        parts.append(str(env["devices"]))
    return ", ".join(parts)
