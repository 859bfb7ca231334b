"""Reveal CPU library orders on this machine and write them as lowered .fps specs.

    python examples/cpu/make_cpu_specs.py            # writes examples/*.fps (below)
    python examples/cpu/make_cpu_specs.py FILE.fps   # writes that one only

Each spec is lowered (fpspec.spec.lower) from trees revealed by fpspec.reveal,
with the arithmetic found by fpspec.arith.probe and checked bit for bit on
sample inputs at several n (per part of the tree where one arithmetic does
not fit: fpspec.spec.regions.probe_spec_arithmetic); where a spec states a
range of n, the script revealed EVERY n of that range and checked the spec
against each tree before writing it.  `regimes` are ranges of n a library
runs through different code: each is lowered on its own and a guard on n
joins them.
"""
from __future__ import annotations

import datetime
import platform
import sys
from pathlib import Path

from fpspec.arith.probe import probe_arithmetic
from fpspec.io import write_atomic
from fpspec.reveal.engine import reveal
from fpspec.reveal.targets import resolve_target
from fpspec.spec import ast as A
from fpspec.spec import check, expand, lower, make_header
from fpspec.spec.regions import probe_spec_arithmetic
from fpspec.tree import diff

HERE = Path(__file__).resolve().parent
COMMAND = "python examples/cpu/make_cpu_specs.py" + "".join(f" {a}" for a in sys.argv[1:])


def _tree(name, n, **kw):
    if n == 1:
        return 0        # one term: nothing to reveal
    return reveal(resolve_target(name, n=n, **kw), check=False).tree


def _header(name, op, lo, hi, note, **kw):
    import fpspec

    target = resolve_target(name, n=max(lo, 2), **kw)
    prov = {
        **{k: v for k, v in dict(target.versions).items()},
        "device": f"cpu ({platform.machine()})",
        "date": datetime.date.today().isoformat(),
        "fpspec": fpspec.__version__,
        "command": COMMAND,
        "checked": note,
    }
    if kw.get("m"):
        prov["shape"] = {"m": kw["m"], "ncols": kw.get("ncols") or 1}
    formats = {"input": target.fmt, "output": target.out_fmt}
    return make_header(name, op, (lo, hi), prov, formats=formats)


def _lowered(trees: dict, header):
    return lower(trees if len(trees) > 1 else next(iter(trees.values())), header, observed=True)


def _spread(ns, count):
    """The two least, the largest and evenly spaced ones between (count in all)."""
    ns = sorted(ns)
    if len(ns) <= count:
        return ns
    return sorted(set(ns[:2]) | {ns[-1]} | {ns[i] for i in range(2, len(ns) - 1, (len(ns) - 3) // (count - 3) + 1)})


def write(filename, name, op, ns, fit, regimes=None, **kw):
    """Lower the trees at `fit` (or each regime (lo, hi, fit) on its own, joined by a
    guard on n), then check the spec at every n in `ns`, and its arithmetic on
    sample inputs."""
    lo, hi = min(ns), max(ns)
    note = (f"revealed and compared at every n in {lo}..{hi}" if len(ns) == hi - lo + 1 and hi > lo
            else f"revealed and compared at n = {', '.join(map(str, ns))}")
    header = _header(name, op, lo, hi, note, **kw)
    regimes = regimes or [(lo, hi, fit)]
    trees = {n: _tree(name, n, **kw) for _, _, rfit in regimes for n in rfit}
    orders = [_lowered({n: trees[n] for n in rfit}, A.Header()).order for _, _, rfit in regimes]
    order = orders[-1]
    for (_, rhi, _), o in zip(reversed(regimes[:-1]), reversed(orders[:-1])):
        order = A.Guard((A.Case(A.Compare("<=", A.Var(), A.Num(rhi)), o),), order)
    spec = A.Spec(header, (), order)
    check(spec)
    for n in ns:
        got = trees.get(n)
        if got is None:
            got = trees[n] = _tree(name, n, **kw)
        d = diff(expand(spec, n), got)
        if d is not None:
            sys.exit(f"{filename}: the lowered spec differs from {name} at n = {n}:\n{d}")
    # the arithmetic: probed (fpspec.arith.probe) at the largest n fitted, checked on sample
    # inputs at a spread of n per regime, per part of the tree where one arithmetic does not fit
    n_probe = max(fit)
    report = probe_arithmetic(resolve_target(name, n=n_probe, **kw), trees[n_probe])
    check_ns = sorted({n for rlo, rhi, _ in regimes for n in _spread([x for x in ns if rlo <= x <= rhi and x > 1], 8)})
    probe_ns = sorted({n for rlo, rhi, _ in regimes for n in _spread([x for x in ns if rlo <= x <= rhi and x > 1], 4)})
    spec, lines = probe_spec_arithmetic(spec, {n: resolve_target(name, n=n, **kw) for n in check_ns},
                                        {n: trees[n] for n in check_ns}, report, probe_ns=probe_ns)
    for line in lines:
        print(f"{filename}: {line}")
    check(spec)
    write_atomic(HERE / filename, str(spec))
    print(f"wrote examples/{filename} ({len(str(spec))} bytes)")


JOBS = {
    "numpy_sum_float32_n65536.fps": lambda f: write(f, "numpy.sum", "sum", [65536], [65536]),
    "numpy_dot_float32.fps": lambda f: write(f, "numpy.dot", "dot", list(range(1, 1025)),
                                             [64, 96, 100, 129, 200, 1000],
                                             regimes=[(1, 31, [2, 31]), (32, 1024, [64, 96, 100, 129, 200, 1000])]),
    "torch_sum_float32_n1024.fps": lambda f: write(f, "torch.sum", "sum", [1024], [1024]),
    "torch_sum_float32_n100.fps": lambda f: write(f, "torch.sum", "sum", [100], [100]),
    "numpy_matmul_float32_k256.fps": lambda f: write(f, "numpy.matmul", "gemm", [256], [256], m=8, ncols=8),
}


if __name__ == "__main__":
    unknown = [a for a in sys.argv[1:] if a not in JOBS]
    if unknown:
        sys.exit(f"unknown spec {unknown[0]!r}; expected one of {', '.join(JOBS)}")
    for filename in sys.argv[1:] or JOBS:
        JOBS[filename](filename)
