"""Reveal CPU library orders on this machine and write them as lowered .fps specs.

    python examples/make_cpu_specs.py            # writes examples/*.fps (below)

Each spec is lowered (fpspec.spec.lower) from trees revealed by fpspec.reveal,
with the arithmetic found by fpspec.arith.probe;
where a spec states a range of n, the script revealed EVERY n of that range and
checked the spec against each tree before writing it.
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
from fpspec.spec import Block, Header, check, expand, lower, make_header
from fpspec.tree import diff

HERE = Path(__file__).resolve().parent
COMMAND = "python examples/make_cpu_specs.py"


def _tree(name, n, **kw):
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


def write(filename, name, op, ns, fit, **kw):
    """Lower the trees at `fit`, then check the spec at every n in `ns`."""
    trees = {n: _tree(name, n, **kw) for n in fit}
    lo, hi = min(ns), max(ns)
    note = (f"revealed and compared at every n in {lo}..{hi}" if len(ns) == hi - lo + 1 and hi > lo
            else f"revealed and compared at n = {', '.join(map(str, ns))}")
    header = _header(name, op, lo, hi, note, **kw)
    # the arithmetic, probed (fpspec.arith.probe) at the largest n fitted
    n_probe = max(fit)
    report = probe_arithmetic(resolve_target(name, n=n_probe, **kw), trees[n_probe])
    if not report.consistent:
        sys.exit(f"{filename}: the arithmetic probes found no consistent model:\n{report}")
    header = Header(header.target, header.op, header.n,
                    header.sections + (Block("arithmetic", report.arithmetic.to_entries()),))
    spec = lower(trees if len(trees) > 1 else next(iter(trees.values())), header)
    check(spec)
    for n in ns:
        got = trees.get(n)
        if got is None:
            got = _tree(name, n, **kw)
        d = diff(expand(spec, n), got)
        if d is not None:
            sys.exit(f"{filename}: the lowered spec differs from {name} at n = {n}:\n{d}")
    write_atomic(HERE / filename, str(spec))
    print(f"wrote examples/{filename} ({len(str(spec))} bytes)")


if __name__ == "__main__":
    write("numpy_sum_float32_n65536.fps", "numpy.sum", "sum", [65536], [65536])
    write("numpy_dot_float32.fps", "numpy.dot", "dot", list(range(32, 1025)), [64, 96, 100, 129, 200, 1000])
    write("torch_sum_float32_n1024.fps", "torch.sum", "sum", [1024], [1024])
    write("torch_sum_float32_n100.fps", "torch.sum", "sum", [100], [100])
    write("numpy_matmul_float32_k256.fps", "numpy.matmul", "gemm", [256], [256], m=8, ncols=8)
