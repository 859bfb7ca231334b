"""The closed loop: a known spec -> its replica as a black box -> range inference -> compared.

    rec = recover(spec, (1, 200), backend="numpy", seed=0)
    rec.verdict      # recovered | refused | wrong
    rec.detail       # for refused: the reason inference gave; for wrong: the first difference

The replica (fpspec.compile) computes exactly the generating spec's order and
arithmetic, so inference run on it must give back a spec with the same trees
and the same arithmetic at every n -- checked at held-out n never revealed,
through fpspec.spec.expand_arith and fpspec.tree.observable (a different but
equivalent spec text is fine).  A fallback or a refusal is a clear "no",
never counted as recovered; a spec that differs anywhere is "wrong", the one
outcome inference must never produce.  tests/infer runs a fixed-seed sample,
benchmarks/soak_infer.py thousands of random specs (fpspec.spec.generate).
"""
from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field

import numpy as np

from fpspec.errors import FpspecError
from fpspec.spec import ast as A

VERDICTS = ("recovered", "refused", "wrong")


@dataclass(frozen=True)
class Recovery:
    spec: A.Spec                   # the generating spec
    n_range: tuple
    verdict: str                   # one of VERDICTS
    detail: str                    # refused: why; wrong: the first difference; recovered: ""
    inferred: A.Spec | None = None
    compared: tuple = ()           # n where the inferred spec was compared with the generating one
    held_out: int = 0              # ... of them never revealed to inference
    seconds: float = 0.0
    calls: int = 0
    fallback: bool = False         # refused with a fallback spec for part of the range
    timings: dict = field(default_factory=dict, compare=False)

    def text(self) -> str:
        head = f"{self.verdict}: {self.detail}" if self.detail else self.verdict
        return head + f" ({self.seconds:.1f} s)"


BOXES = ("numba", "numpy")


def replica_target(spec: A.Spec, box: str = "numba", m: int = 3, ncols: int = 2):
    """n -> fpspec.reveal Target running the spec's compiled replica (fpspec.compile):
    numba (a JIT per spec, then microseconds a call) or numpy (no JIT, about a
    millisecond a call at n = 100: its scalar loops)."""
    from fpspec.compile import compile_spec, load_replica
    from fpspec.reveal.targets import from_callable

    if box not in BOXES:
        raise FpspecError(f"unknown replica backend {box!r}; expected one of {', '.join(BOXES)}")
    op = spec.header.op or "sum"
    fmt = _entry(spec.header.arithmetic, "input") or "fp64"
    shape = {"gemv": {"m": m}, "gemm": {"m": m, "ncols": ncols}}.get(op, {})
    fn = vars(load_replica(compile_spec(spec, box), f"{box} replica"))[op]
    return lambda n: from_callable(fn, op=op, n=n, dtype=fmt, name=f"replica.{op}", **shape)


def recover(spec: A.Spec, n_range: tuple, *, box: str = "numba", seed: int = 0, held_out: int = 8,
            fit_work: int | None = 2_000_000, time_limit: float | None = None, probe: bool = True,
            holdout: int = 16) -> Recovery:
    """Infer the spec back from its replica over n_range and compare at held-out n (holdout:
    inference's own held-out n, the command line's default; held_out: fresh ones compared here)."""
    from fpspec.infer.engine import infer_spec

    start = time.perf_counter()
    lo, hi = n_range
    make = replica_target(spec, box)
    calls = [0]

    def counted(n):
        t = make(n)
        fn = t.fn

        def call(*a):
            calls[0] += 1
            return fn(*a)
        return dataclasses.replace(t, fn=call)

    try:
        r = infer_spec(counted, (lo, hi), seed=seed, progress=False, holdout=holdout, replica=None, probe=probe,
                       fit_work=fit_work, time_limit=time_limit)
    except FpspecError as e:
        return Recovery(spec, (lo, hi), "refused", str(e), None, (), 0, time.perf_counter() - start, calls[0])
    inferred = r.spec
    rng = np.random.default_rng([seed, 17])
    if r.fallback:
        # the fallback must hold wherever it says it does
        got = inferred.header.n
        ns = range(got.lo, got.hi + 1)
        # a fallback written without an arithmetic section claims its trees only
        wrong = _first_difference(spec, inferred, ns, probe and inferred.header.arithmetic is not None)
        verdict, detail = ("wrong", wrong) if wrong else ("refused", f"fallback for n in {got.lo}..{got.hi}: "
                                                                      f"{r.fallback}")
        return Recovery(spec, (lo, hi), verdict, detail, inferred, tuple(ns), 0, time.perf_counter() - start,
                        calls[0], True)
    if not r.ok:
        return Recovery(spec, (lo, hi), "refused", "held-out counterexample left unresolved: "
                        + "; ".join(c.detail for c in r.counterexamples if not c.resolved)[:300], inferred, (), 0,
                        time.perf_counter() - start, calls[0])
    seen = set(r.revealed) | set(r.held_out)
    pool = [n for n in range(max(lo, 2), hi + 1) if n not in seen]
    fresh = sorted(int(x) for x in rng.choice(pool, min(held_out, len(pool)), replace=False)) if pool else []
    # a range small enough to be revealed in full is compared at every n
    ns = sorted(set(fresh) | {hi} | (set(range(lo, hi + 1)) if hi - lo < 64 else set()))
    wrong = _first_difference(spec, inferred, ns, probe)
    return Recovery(spec, (lo, hi), "wrong" if wrong else "recovered", wrong, inferred, tuple(ns), len(fresh),
                    time.perf_counter() - start, calls[0])


def _first_difference(want: A.Spec, got: A.Spec, ns, arithmetic: bool, inputs: int = 48) -> str:
    """'' when both specs give the same observable tree (and, with arithmetic,
    the same bits on random inputs: note [same arithmetic]) at every n, else
    the first difference."""
    from fpspec.infer.exact import order_free
    from fpspec.spec.expand import expand_arith
    from fpspec.tree import diff, observable

    op = want.header.op or "sum"
    for n in ns:
        try:
            ta, main_a, reg_a = expand_arith(want, n)
        except FpspecError:
            continue      # the generating spec says nothing here: nothing to compare
        try:
            tb, main_b, reg_b = expand_arith(got, n)
        except FpspecError as e:
            return f"n = {n}: the inferred spec does not apply: {e}"
        # note [exact sums] (fpspec.infer.exact): where no addition rounds the tree is not observable
        free = order_free(op, main_a, reg_a, n) and order_free(op, main_b, reg_b, n)
        d = None if free else diff(observable(ta), observable(tb))
        if d is not None:
            return f"n = {n}: " + " ".join(x.strip() for x in str(d).splitlines()[:3])
        if (arithmetic or free) and n >= 2:
            bad = _bits_differ(ta, (main_a, reg_a), tb, (main_b, reg_b), n, inputs, op)
            if bad:
                return f"n = {n}: {bad}"
    return ""


# Note [same arithmetic]: two arithmetic sections can be written differently
# and compute the same bits (two fp16 terms added in fp32 and rounded to fp16
# are the fp16 sum; init +0.0 is invisible where no result is -0.0), so the
# arithmetic is compared by what it computes: fpspec.arith.evaluate on the
# same tree with random inputs (wide exponents, cancellations) and special
# ones, bit for bit.
def _bits_differ(ta, arith_a, tb, arith_b, n: int, count: int, op: str) -> str:
    from fpspec.arith import evaluate
    from fpspec.infer.check import _random_values

    main = arith_a[0]
    rng = np.random.default_rng([n, 5])
    x = _random_values(main.input, (count, n), rng).T   # a scale per term: partial sums round apart
    x[:, 0] = -0.0                      # an all -0.0 sum: init and the output's sign of zero
    x[:, 1] = 0.0
    y = None if op == "sum" else _random_values(main.input, (count, n), rng).T
    with np.errstate(all="ignore"):
        a = evaluate(ta, x, y, *arith_a)
        b = evaluate(tb, x, y, *arith_b)
    same = (a.view(np.uint64) == b.view(np.uint64)) | (np.isnan(a) & np.isnan(b))
    if same.all():
        return ""
    k = int(np.flatnonzero(~same)[0])
    return f"the arithmetic differs: input column {k} gives {b[k]!r}, the generating spec {a[k]!r}"


def node_arithmetic(tree, main, regions) -> dict:
    """(smallest leaf, number of leaves) -> Arithmetic, for every node of the tree."""
    from fpspec.tree import Node, postorder

    out = {}
    for s in postorder(tree):
        if isinstance(s, Node):
            key = (s.first, s.size)
            out[key] = regions.get(key, main)
    return out


def _entry(block, key):
    if block is None:
        return None
    for e in block.entries:
        if e.key == key:
            return getattr(e.value, "name", e.value)
    return None
