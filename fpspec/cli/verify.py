"""`fpspec verify` and `fpspec diff`: the evidence that two orders are the same.

Exit codes: 0 equivalent (verify) / same (diff), 1 not, 2 bad input (raised as
FpspecError and printed as one line by fpspec.cli.main), 3 a refusal.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import List, Optional

import typer

from fpspec.cli import app
from fpspec.cli.common import at_least, check_backend, check_device, check_dtype
from fpspec.cli.spec import read_spec_text
from fpspec.errors import FpspecError, RevealRefused
from fpspec.io import read_text


def _load_spec(path: str):
    """fpspec.verify.load_spec, reading the file through read_text (a directory,
    a binary or an empty file is named in one line)."""
    from fpspec.spec.check import check
    from fpspec.spec.parse import parse

    if not Path(path).exists():
        raise FpspecError(f"{path}: no such spec file")
    spec = parse(read_spec_text(path), str(path))
    check(spec)
    return spec


def _is_spec(arg: str) -> bool:
    # anything on disk is meant as a spec (a directory too: read_text says what is wrong)
    return arg.endswith(".fps") or Path(arg).exists()


class NotEquivalent(FpspecError):
    """The verdict, not an error in the input: exit code 1."""

    exit_code = 1


class Nondeterministic(RevealRefused):
    """A side gave two answers for one input: no order to compare, exit code 3."""


def _emit(report, as_json: bool) -> None:
    if as_json:
        typer.echo(json.dumps(report.to_json(), indent=2))
    else:
        typer.echo(report.text())
    if as_json and (report.nondeterministic or not report.equivalent):
        # the report is the answer: one JSON document, its verdict in it, the exit code alone
        raise typer.Exit(Nondeterministic.exit_code if report.nondeterministic else NotEquivalent.exit_code)
    if report.nondeterministic:
        who = sorted({p.side for p in report.problems if p.nondeterministic})
        raise Nondeterministic(f"{', '.join(who)}: nondeterministic (one input gave two answers); "
                               "an order cannot be verified")
    if not report.equivalent:
        # an exception, not typer.Exit: fpspec.cli.main returns the exit code of
        # FpspecError subclasses, while click swallows Exit's code in library mode
        what = "not equivalent" if report.command == "verify" else "different"
        raise NotEquivalent(f"{what} (see the report above)")


def _positive(values, what: str):
    for v in values or ():
        if v < 2:
            raise FpspecError(f"{what} {v}: expected an integer >= 2")
    return list(values or ())


@app.command()
def verify(
    spec_path: str = typer.Argument(..., metavar="SPEC", help="the .fps spec to verify against"),
    target: Optional[str] = typer.Option(None, "--target", "-t", help="backend to compile the replica for: numpy (default), numba, triton"),
    replica: Optional[Path] = typer.Option(None, "--replica", help="verify this replica source instead of compiling one"),
    against: Optional[str] = typer.Option(None, "--against", help="the original library function (e.g. numpy.sum)"),
    n: Optional[List[int]] = typer.Option(None, "-n", "--n", help="reduction length to check (repeatable); default: every branch of the spec"),
    samples: int = typer.Option(10000, "--samples", help="random and adversarial inputs, spread over the n values"),
    seed: int = typer.Option(0, "--seed", help="seed of the inputs and of the random n"),
    max_n: int = typer.Option(4096, "--max-n", help="largest n chosen when -n is not given"),
    m: Optional[int] = typer.Option(None, "-m", help="output rows for gemv/gemm (default 4)"),
    ncols: Optional[int] = typer.Option(None, "--ncols", help="output columns for gemm (default 4)"),
    device: str = typer.Option("cpu", "--device", help="device of the --against target"),
    bias: bool = typer.Option(False, "--bias", help="call --against with a bias vector (the spec's `bias = after | inside` says where it enters)"),
    as_json: bool = typer.Option(False, "--json", help="print the report as JSON"),
) -> None:
    """Prove a replica equivalent to its spec (and to the original): trees, arithmetic, bits."""
    from fpspec.verify import verify_spec

    if samples < 0:
        raise FpspecError(f"--samples {samples}: expected a count >= 0")
    if replica is not None and target is not None:
        raise FpspecError(f"--replica {replica} and --target {target} contradict each other: --replica verifies "
                          "that file as it is, --target compiles a new one")
    target = target or "numpy"
    check_backend(target)
    check_device(device)
    at_least(max_n, 2, "--max-n")
    at_least(m, 1, "-m")
    at_least(ncols, 1, "--ncols")
    spec = _load_spec(spec_path)
    from fpspec.collective import is_collective

    if is_collective(spec):     # per element, against the ranks launched again (fpspec.collective)
        from fpspec.collective import verify_collective

        _emit(verify_collective(spec, spec_name=spec_path, backend=target, against=against, samples=samples,
                                seed=seed), as_json)
        return
    from fpspec.verify import spec_arithmetic

    spec_bias = getattr(spec_arithmetic(spec), "bias", "none")
    if bias and spec_bias == "none":
        raise FpspecError(f"--bias: {spec_path} adds no bias; say where it enters (arithmetic {{ bias = after }} "
                          "or bias = inside)")
    if against is not None and spec_bias != "none" and not bias:
        raise FpspecError(f"{spec_path} adds a bias (bias = {spec_bias}): pass --bias to call {against} with one")
    if against is not None:
        from fpspec.verify import make_target_side, spec_format

        # resolved (a user callable tried once) before the replica is compiled
        fused = getattr(spec_arithmetic(spec), "fused", None)
        make_target_side(against, spec.header.op or "sum", spec_format(spec)[0], device=device, m=m, ncols=ncols,
                         bias=spec_bias, fmt_b=getattr(fused, "input_b", None) or "")
    source = label = None
    if replica is not None:
        if not replica.exists():
            raise FpspecError(f"{replica}: no such replica file")
        source, label = read_text(replica, "replica (Python source)"), replica.name
    report = verify_spec(spec, spec_name=spec_path, backend=target, replica_source=source,
                         replica_label=label, replica_path=None if replica is None else str(replica), against=against, n_values=_positive(n, "-n"),
                         samples=samples, seed=seed, max_n=max_n, m=m, ncols=ncols, device=device)
    _emit(report, as_json)


@app.command()
def diff(
    a: str = typer.Argument(..., metavar="A", help="a .fps spec or a live target (numpy.sum, torch.sum@cuda, pkg.mod:fn)"),
    b: str = typer.Argument(..., metavar="B", help="the same, to compare with A"),
    n: Optional[List[int]] = typer.Option(None, "-n", "--n", help="reduction length to compare (repeatable)"),
    op: Optional[str] = typer.Option(None, "--op", help="op kind of live targets: sum, dot, gemv, gemm"),
    dtype: Optional[str] = typer.Option(None, "--dtype", help="input format of live targets (default: the spec's, else float32)"),
    m: Optional[int] = typer.Option(None, "-m", help="output rows for gemv/gemm"),
    ncols: Optional[int] = typer.Option(None, "--ncols", help="output columns for gemm"),
    device: str = typer.Option("cpu", "--device", help="device of live targets without an @device suffix"),
    samples: int = typer.Option(0, "--samples", help="also compare outputs on this many inputs"),
    seed: int = typer.Option(0, "--seed"),
    max_n: int = typer.Option(4096, "--max-n", help="largest n chosen from a spec when -n is not given"),
    as_json: bool = typer.Option(False, "--json", help="print the report as JSON"),
) -> None:
    """Compare two orders: spec vs spec, spec vs target, or target vs target."""
    from fpspec import verify as V

    check_dtype(dtype)
    check_device(device)
    at_least(samples, 0, "--samples")
    at_least(max_n, 2, "--max-n")
    at_least(m, 1, "-m")
    at_least(ncols, 1, "--ncols")
    specs = {arg: _load_spec(arg) for arg in (a, b) if _is_spec(arg)}
    from fpspec.collective import diff_collective, is_collective

    if any(is_collective(s) for s in specs.values()):
        _emit(diff_collective(a, b, specs), as_json)
        return
    first_spec = next(iter(specs.values()), None)
    if first_spec is not None:
        op = op or first_spec.header.op or "sum"
        fmt = dtype or V.spec_format(first_spec)[0]
    else:
        fmt = dtype or "fp32"

    def side(arg: str):
        if arg in specs:
            return V.make_spec_side(specs[arg], arg, m=m, ncols=ncols)
        return V.make_target_side(arg, op, fmt, role="target", m=m, ncols=ncols, device=device)

    left, right = side(a), side(b)
    notes = []
    ns = _positive(n, "-n")
    sampled, uncovered = [], ""
    if ns:
        from fpspec.spec.expand import check_n

        for s in specs.values():   # an n a spec does not cover is a mistake in the command
            for k in ns:
                check_n(s, k)
    elif specs:
        for s in specs.values():
            ns.extend(V.spec_n_values(s, max_n=max_n, seed=seed))
            more, missed = V.spec_sampled_n(s, max_n=max_n)
            sampled.extend(more)
            uncovered = uncovered or missed
        for s in specs.values():   # only n that every spec covers
            ns = [k for k in ns if s.header.n is None or k in s.header.n]
            sampled = [k for k in sampled if s.header.n is None or k in s.header.n]
        if not ns:
            raise FpspecError("the specs' ranges of n do not overlap: nothing to compare")
        notes.append(f"n values chosen from the spec's guards and range (at most {max_n})")
        if a in specs and b in specs:     # two expansions: trees at large n cost no revelation
            ns, sampled = ns + sampled, []
        elif not samples:
            uncovered = f"n > {max_n} (--samples N compares outputs up to {V.SAMPLED_MAX_N})"
            sampled = []
    else:
        ns = list(V.DEFAULT_TARGET_N)
        notes.append("n values: a default set (give -n to choose)")
    _emit(V.diff_sides(left, right, ns, samples=samples, seed=seed, notes=notes, sampled_n=sampled,
                       not_covered=uncovered), as_json)
