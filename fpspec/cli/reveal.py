"""`fpspec reveal TARGET -n N`: print (or write) the summation tree of a library function."""
from __future__ import annotations

import datetime
import json
import platform
import shlex
import sys
import time
from typing import List, Optional

import numpy as np
import typer

from fpspec.cli import app
from fpspec.cli.common import (at_least, check_device, check_dtype, check_output, target_prints_to_stderr,
                               write_output)
from fpspec.infer import AUTO, TIME_LIMIT_HELP
from fpspec.io import read_text
from fpspec.formats import get_format
from fpspec.errors import FpspecError, RevealRefused


def provenance(target, argv: list[str] | None = None) -> dict:
    """Where a revealed tree came from: the header of any file written from it."""
    import fpspec

    device = target.device
    if device.startswith("cuda"):
        try:
            import torch

            device = f"{device} ({torch.cuda.get_device_name(0)})"
        except Exception:
            pass
    else:
        device = f"{device} ({platform.machine()} {platform.processor() or platform.system()})"
    return {
        "target": target.name,
        "op": target.op,
        "n": target.n,
        "shape": {"m": target.m, "ncols": target.ncols} if target.op in ("gemv", "gemm") else None,
        "input_format": target.fmt,
        "output_format": target.out_fmt,
        "device": device,
        "versions": dict(target.versions),
        "fpspec": fpspec.__version__,
        "python": platform.python_version(),
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "command": "fpspec " + " ".join(shlex.quote(a) for a in (argv if argv is not None else sys.argv[1:])),
    }


def tree_file_text(tree, prov: dict, revelation=None, arithmetic_lines=()) -> str:
    """Nested-bracket tree with a '#' provenance header (until the .fps writer takes over)."""
    from fpspec.tree import format_tree

    head = [f"# {k}: {json.dumps(v) if isinstance(v, (dict, list)) else v}" for k, v in prov.items() if v is not None]
    if revelation is not None:
        head.append(f"# revealed: {revelation.queries} queries, {revelation.calls} calls, "
                    f"{revelation.seconds:.3f} s, algorithm {revelation.algorithm}")
        head += [f"# note: {x}" for x in revelation.notes]
    head += [f"# arithmetic: {x}" for x in arithmetic_lines]
    return "\n".join(head) + "\n" + format_tree(tree) + "\n"


def spec_file_text(tree, prov: dict, revelation=None, report=None, target=None, notes=None) -> str:
    """The revealed tree lowered to a .fps spec, with provenance and the probed arithmetic
    (with `target`: checked on sample inputs, per part of the tree where one
    arithmetic does not fit: fpspec.spec.regions.with_probed_arithmetic)."""
    return str(revealed_spec(tree, prov, revelation, report, target, notes))


def revealed_spec(tree, prov: dict, revelation=None, report=None, target=None, notes=None):
    """spec_file_text's spec."""
    from fpspec.spec import Block, Header, check, expand, lower, make_header
    from fpspec.tree import diff, observable

    prov = dict(prov)
    if revelation is not None:
        prov["revealed"] = (f"{revelation.queries} queries, {revelation.calls} calls, "
                            f"{revelation.seconds:.3f} s, algorithm {revelation.algorithm}")
    formats = {"input": prov.pop("input_format"), "output": prov.pop("output_format")}
    header = make_header(provenance=prov, formats=formats)
    if report is not None and target is None and getattr(report, "consistent", True):
        header = Header(header.target, header.op, header.n,
                        header.sections + (Block("arithmetic", report.arithmetic.to_entries()),))
    spec = lower(tree, header, observed=True)
    if report is not None and target is not None:
        from fpspec.spec.regions import with_probed_arithmetic

        spec, lines = with_probed_arithmetic(spec, prov["n"], tree, target, report)
        if notes is not None:
            notes += lines
    check(spec)
    # lowering is exact by construction; a spec that does not give the tree back is never written
    d = diff(observable(expand(spec, prov["n"])), observable(tree))   # fused pairs reveal as binary
    if d is not None:
        raise FpspecError(f"internal error: the lowered spec does not expand to the revealed tree: {d}")
    return spec


def positional_spec(orders, prov: dict, reports, target, notes=None):
    """One spec for a gemv/gemm whose outputs use several orders (fpspec.reveal.positions):
    each order lowered with its own probed arithmetic, merged under an `if` on i, j."""
    from fpspec.reveal.positions import labels
    from fpspec.spec import check, expand
    from fpspec.spec.positions import arm_labels, merge
    from fpspec.tree import diff, observable

    n = prov["n"]
    lab = labels(orders, target.output_shape)
    specs = [revealed_spec(p.revelation.tree, prov, p.revelation, r,
                           None if r is None else order_target(target, p.mask, p.at), notes)
             for p, r in zip(orders, reports)]
    spec = merge(specs, lab)
    check(spec)
    # each order's arm expands to its tree, and every output takes its order's arm
    for p in orders:
        d = diff(observable(expand(spec, n, p.at)), observable(p.revelation.tree))
        if d is not None:
            raise FpspecError(f"internal error: the merged spec does not expand to the order at {p.at}: {d}")
    grid = lab.reshape(lab.shape[0], -1)
    arms = arm_labels(spec, grid.shape, n)
    for k, p in enumerate(orders):
        wrong = np.argwhere((grid == k) & (arms != arms[p.at[0], p.at[1]]))
        if len(wrong):
            raise FpspecError(f"internal error: the merged spec sends output {tuple(wrong[0].tolist())} to "
                              "another order than the one revealed there")
    return spec


def order_target(target, mask, at):
    """The target read only at the outputs computing in the order of output `at`
    (all of them when mask is None): what probes and sample checks may batch over."""
    if mask is None or target.op not in ("gemv", "gemm"):
        return target
    from fpspec.reveal.positions import restricted

    return restricted(target, mask, at)


def _parse_n(text: str) -> tuple[int, int | None]:
    """'32' -> (32, None); '1..65536' -> (1, 65536)."""
    lo, dots, hi = text.partition("..")
    try:
        lo_i, hi_i = int(lo), int(hi) if dots else None
    except ValueError:
        raise FpspecError(f"-n must be an integer or a range like 1..65536, got {text!r}") from None
    if hi_i is None:
        if lo_i < 2:
            raise FpspecError(f"-n {text}: n must be an integer >= 2 (or a range LO..HI)")
        at_least(lo_i, 2, "-n")
        return lo_i, None
    if lo_i < 1 or hi_i < lo_i:
        raise FpspecError(f"-n {text}: a range LO..HI needs 1 <= LO <= HI")
    if hi_i < 2:
        # every n of it sums one term: no order, and no arithmetic the spec could be checked by
        raise FpspecError(f"-n {text}: a sum of one term reveals nothing; a range LO..HI needs HI >= 2")
    at_least(hi_i, 1, "-n")
    return lo_i, hi_i


def _reveal_range(target, lo, hi, *, dtype, op, m, ncols, device, seed, no_probe, output, as_json, argv,
                  arithmetic=None, time_limit=None, started=None, first=None):
    """-n LO..HI: reveal at a designed set of n and infer one parametric spec (fpspec.infer)."""
    from fpspec.infer import infer_spec
    from fpspec.infer.positions import infer_positions

    command = "fpspec " + " ".join(shlex.quote(a) for a in argv) if argv else None
    infer = infer_positions if op in ("gemv", "gemm") else infer_spec
    from fpspec.infer.__main__ import arithmetic_section

    known = arithmetic_section(arithmetic) if arithmetic else None
    with target_prints_to_stderr():
        result = infer(target if first is None else first, (lo, hi), seed=seed, probe=not no_probe, arithmetic=known,
                       progress=sys.stderr.isatty(), command=command, dtype=dtype, op=op, m=m, ncols=ncols,
                       device=device, time_limit=AUTO if time_limit is None else time_limit, started=started)
    if output and result.ok:
        write_output(output, str(result.spec), "-o")
    if as_json:
        typer.echo(json.dumps(result.to_json(), indent=2))
    else:
        typer.echo(str(result.spec))
    typer.echo(result.report(), err=True)
    if not result.ok:
        # a spec that disagrees with the target somewhere must not replace the user's file
        kept = f"; {output} not written" if output else ""
        raise NotInferred(f"the inferred spec disagrees with {target} (see the report above){kept}")


# with -o (or --json) a tree this small is still printed; a larger one only with --tree
SMALL_TREE = 64


# Note [cost of a revelation]: FPRev asks about 1.06 n queries (measured: numpy.sum at
# n = 65536 and 262144), each a call of the target on n terms plus O(n) work to
# build the masks and read the answer, and holds a few n-term buffers per
# batched row.  So the time grows as n^2: numpy.sum at n = 5 * 10^6 is about a day.
# Estimated before the work starts; beyond REACH_SECONDS or the free memory the
# answer is a spec inferred from smaller n and checked at this n by sampling.
REACH_SECONDS = 2 * 3600
TIMED_N = 1 << 16
_SECONDS_PER_TERM = 4e-9        # mask building and reading, per term of a query (this kind of CPU)
_BYTES_PER_TERM = 300           # the engine's arrays per leaf (5 * 10^6 leaves: 1.3 GB)


def estimate_cost(tgt) -> tuple[float, float]:
    """(seconds, bytes) a full revelation of `tgt` at its n is expected to take: the
    target timed on all-ones operands, at most TIMED_N terms long (scaled up linearly)."""
    import dataclasses

    n = tgt.n
    size = sum(int(np.prod(shape)) for shape in tgt.operand_shapes)
    needed = 100e6 + _BYTES_PER_TERM * n + 32.0 * size
    small = dataclasses.replace(tgt, n=min(n, TIMED_N))
    operands = [small.native(np.ones(shape)) for shape in small.operand_shapes]
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        small.call(*operands)
        best = min(best, time.perf_counter() - t0)
    call = best * n / small.n
    return 1.06 * n * (call + size * _SECONDS_PER_TERM), needed


def _available_memory() -> float | None:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return float(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def check_reachable(tgt) -> None:
    """Refuse a revelation that cannot finish (note [cost of a revelation]); say how long a long one takes."""
    seconds, needed = estimate_cost(tgt)
    free = _available_memory()
    route = (f"infer a spec from smaller n and check it at n = {tgt.n} by sampling: fpspec reveal {tgt.name} "
             f"-n 1..65536 -o spec.fps, then python -m fpspec.infer {tgt.name} -n 1..65536 --check {tgt.n}")
    if free is not None and needed > 0.8 * free:
        raise RevealOutOfReach(f"a full revelation of {tgt.name} at n = {tgt.n} needs about {_bytes(needed)} of "
                               f"memory ({_bytes(free)} available); {route}")
    if seconds > REACH_SECONDS:
        raise RevealOutOfReach(f"a full revelation of {tgt.name} at n = {tgt.n} takes about {_duration(seconds)} "
                               f"(about {int(1.06 * tgt.n)} queries of {tgt.n} terms); {route}")
    if seconds > 30:
        typer.echo(f"note: revealing {tgt.name} at n = {tgt.n}: about {_duration(seconds)} and "
                   f"{_bytes(needed)} estimated", err=True)


def _bytes(x: float) -> str:
    for unit, size in (("GB", 1e9), ("MB", 1e6)):
        if x >= size:
            return f"{x / size:.1f} {unit}"
    return f"{x / 1e3:.0f} kB"


def _duration(seconds: float) -> str:
    if seconds >= 7200:
        return f"{seconds / 3600:.0f} hours"
    if seconds >= 120:
        return f"{seconds / 60:.0f} minutes"
    return f"{seconds:.0f} s"


class RevealOutOfReach(RevealRefused):
    """A full revelation would not finish here: a refusal (exit code 3) naming the sampled route."""


def _order_text(spec) -> str:
    """The part of a spec a person reads first: its named orders and its order (no header)."""
    from fpspec.spec import Header, Spec

    text = str(Spec(Header(None, None, None, ()), spec.lets, spec.order))
    return text.strip()


class NotInferred(FpspecError):
    """-n LO..HI found no spec that agrees with every check: a verdict, exit code 1."""

    exit_code = 1


@app.command()
def reveal(
    target: str = typer.Argument(..., metavar="TARGET", help="numpy.sum, torch.matmul, jax.numpy.dot, or package.module:function"),
    n: Optional[str] = typer.Option(None, "-n", help="reduction length (K for matrix products), or a range "
                                    "LO..HI; for a collective, the world size"),
    dtype: str = typer.Option("float32", "--dtype", help="input format: float64, float32, float16, bfloat16, ..."),
    dtype_b: Optional[str] = typer.Option(None, "--dtype-b", help="torch._scaled_mm: B's format where it is not "
                                          "A's (float8_e5m2 with --dtype float8_e4m3fn)"),
    op: Optional[str] = typer.Option(None, "--op", help="sum | dot | gemv | gemm (required for user callables)"),
    m: Optional[int] = typer.Option(None, "--m", help="rows of the output (gemv, gemm)"),
    ncols: Optional[int] = typer.Option(None, "--ncols", help="columns of the output (gemm)"),
    device: str = typer.Option("cpu", "--device", help="cpu or cuda"),
    output: Optional[str] = typer.Option(None, "-o", "--output", help="write the order here: a .fps spec (lowered, with provenance and the probed arithmetic)"),
    file_format: str = typer.Option("fps", "--format", help="what -o writes: fps (a spec) or tree (the bracket tree with a # header)"),
    as_json: bool = typer.Option(False, "--json", help="print a JSON summary instead of the tree"),
    show_tree: bool = typer.Option(False, "--tree", help="with -o or --json: print the whole tree too (by default "
                                   f"only trees of at most {SMALL_TREE} leaves are printed there)"),
    no_probe: bool = typer.Option(False, "--no-probe", help="skip the arithmetic probes"),
    algorithm: str = typer.Option("auto", "--algorithm", help="basic | fprev | modified | auto"),
    seed: int = typer.Option(0, "--seed", help="seed for the random pivots"),
    tf32: bool = typer.Option(False, "--tf32", help="torch on cuda: allow TF32 for fp32 matmul"),
    masks: str = typer.Option("auto", "--masks", help="products: auto | split (sqrt(M) in each operand) | unsplit"),
    arithmetic: Optional[str] = typer.Option(None, "--arithmetic", help="with -n LO..HI: a .fps file whose "
                                             "arithmetic section to use instead of probing"),
    positions: bool = typer.Option(True, "--positions/--no-positions",
                                   help="gemv/gemm: reveal the order of every output element that does not share "
                                        "element (0, 0)'s (the spec then has an `if` on the output row i, column j)"),
    time_limit: Optional[float] = typer.Option(None, "--time-limit", metavar="SECONDS", help=TIME_LIMIT_HELP),
    world: Optional[int] = typer.Option(None, "--world", help="collectives: the number of ranks fpspec launches"),
    backend: Optional[str] = typer.Option(None, "--backend", help="collectives: gloo (CPU processes) or nccl (GPUs)"),
    numel: Optional[List[int]] = typer.Option(None, "--numel", help="collectives: the buffer size (repeatable)"),
) -> None:
    """Reveal the accumulation order of TARGET at length n and print it as a tree."""
    from fpspec.infer.engine import process_start

    started = process_start()      # a range run's --time-limit counts from the command's start
    from fpspec.reveal.engine import reveal as run_reveal
    from fpspec.reveal.targets import resolve_target
    from fpspec.tree import format_tree, stats

    from fpspec.reveal.collective import collective_name

    if collective_name(target) is not None:     # torch.distributed.*: fpspec.cli.collective
        from fpspec.cli.collective import reveal_collective

        return reveal_collective(target, n=n, world=world, backend=backend, numel=numel, dtype=dtype,
                                 output=output, seed=seed, as_json=as_json)
    if world is not None or backend is not None or numel:
        raise FpspecError(f"--world, --backend and --numel are for collectives (torch.distributed.all_reduce), "
                          f"not {target}")
    if n is None:
        raise FpspecError("reveal: missing option '-n' (the reduction length, K for matrix products); "
                          "see fpspec reveal --help")
    lo, hi = _parse_n(n)
    splits = {"auto": None, "split": True, "unsplit": False}
    if masks not in splits:
        raise FpspecError(f"--masks must be auto, split or unsplit, got {masks!r}")
    if file_format not in ("fps", "tree"):
        raise FpspecError(f"--format must be fps or tree, got {file_format!r}")
    at_least(m, 1, "--m")
    at_least(ncols, 1, "--ncols")
    check_output(output, "-o")
    if arithmetic is not None:
        if hi is None:
            raise FpspecError("--arithmetic applies to a range -n LO..HI (at one n the arithmetic is probed)")
        read_text(arithmetic, ".fps spec with an arithmetic section")
    check_dtype(dtype)
    check_dtype(dtype_b, "--dtype-b")
    check_device(device)
    two = {} if dtype_b is None else {"dtype_b": dtype_b}
    if two and hi is not None:
        raise FpspecError("--dtype-b reveals one n (-n K), not a range")
    if hi is not None:
        # resolve_target tries a user callable once: before the work starts, at the range's first n
        with target_prints_to_stderr():
            first = resolve_target(target, op=op, n=max(lo, 2), dtype=dtype, m=m, ncols=ncols, device=device)
        _reveal_range(target, lo, hi, dtype=dtype, op=op, m=m, ncols=ncols, device=device, seed=seed,
                      no_probe=no_probe, output=output, as_json=as_json, arithmetic=arithmetic,
                      time_limit=time_limit, started=started, first=first, argv=["reveal", *sys.argv[2:]] if sys.argv[1:2] == ["reveal"] else None)
        return
    if tf32:
        import torch

        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
        if get_format(dtype).name == "fp32":   # the units read tf32 values: reveal and probe those
            dtype = "tf32"
    with target_prints_to_stderr():
        tgt = resolve_target(target, op=op, n=lo, dtype=dtype, m=m, ncols=ncols, device=device, **two)
        check_reachable(tgt)
        rev = run_reveal(tgt, algorithm=algorithm, seed=seed, progress=True, split=splits[masks])
        orders = None
        if positions and rev.shared is not None and rev.shared.size > 1:
            from fpspec.reveal.positions import reveal_positions

            orders = reveal_positions(tgt, first=rev, algorithm=algorithm, seed=seed, split=splits[masks])
            if file_format == "tree" and output and len(orders) > 1:
                raise FpspecError(f"--format tree holds one tree, and {target} uses {len(orders)} orders across its "
                                  "outputs; write a spec (--format fps) or pass --no-positions")
        lines: list[str] = []
        report = None
        reports = [None] * (len(orders) if orders else 1)
        if not no_probe:
            from fpspec.arith.probe import probe_arithmetic

            reports = [probe_arithmetic(order_target(tgt, p.mask, p.at), p.revelation.tree) for p in orders] \
                if orders else [probe_arithmetic(order_target(tgt, rev.shared, (0, 0)), rev.tree)]
            report = reports[0]
            lines = list(report.lines)
    argv = ["reveal", target, "-n", n, "--dtype", dtype] + (["--dtype-b", dtype_b] if dtype_b else [])
    for flag, value in (("--op", op), ("--m", m), ("--ncols", ncols), ("-o", output),
                        ("--format", None if file_format == "fps" else file_format)):
        if value is not None:
            argv += [flag, str(value)]
    if device != "cpu":
        argv += ["--device", device]
    if algorithm != "auto":
        argv += ["--algorithm", algorithm]
    if seed:
        argv += ["--seed", str(seed)]
    if masks != "auto":
        argv += ["--masks", masks]
    argv += [flag for flag, on in (("--tf32", tf32), ("--no-probe", no_probe), ("--json", as_json),
                                   ("--no-positions", not positions)) if on]
    prov = provenance(tgt, argv)
    if tf32:
        prov["tf32"] = True
    spec = None
    if output:
        with target_prints_to_stderr():
            if orders is not None and len(orders) > 1:
                spec = positional_spec(orders, prov, reports, tgt, lines)
                text = str(spec)
            elif file_format == "fps":
                spec = revealed_spec(rev.tree, prov, rev, report, order_target(tgt, rev.shared, (0, 0)), lines)
                text = str(spec)
            if spec is not None and tgt.fmt_b:   # B in its own format: the fused nodes read it so
                from fpspec.verify import with_input_b

                spec = with_input_b(spec, tgt.fmt_b)
                text = str(spec)
            if spec is not None and tgt.takes_bias:   # F.linear: where its bias enters (fpspec.verify.reveal_bias)
                from fpspec.verify import reveal_bias

                spec, found = reveal_bias(spec, tgt, seed=seed)
                lines += found
                text = str(spec)
            elif spec is None:
                text = tree_file_text(rev.tree, prov, rev, lines)
        write_output(output, text, "-o")
    many = orders is not None and len(orders) > 1
    trees = [p.revelation.tree for p in orders] if many else [rev.tree]
    # the tree is the answer without -o; with -o the file is, and a big tree only floods the terminal
    shown = show_tree or max(stats(t).leaves for t in trees) <= SMALL_TREE or (not output and not as_json)
    if as_json:
        summary = rev.summary()
        summary["provenance"] = prov
        if shown:
            summary["tree"] = format_tree(rev.tree)
        if output:
            summary["output"] = output
            if spec is not None:
                summary["spec_order"] = _order_text(spec)
        if lines:
            summary["arithmetic"] = lines
        if many:
            summary["positions"] = [
                {"at": list(p.at), "outputs": int(p.mask.sum()), "tree_stats": str(stats(p.revelation.tree)),
                 **({"tree": format_tree(p.revelation.tree)} if shown else {}),
                 "queries": p.revelation.queries, "calls": p.revelation.calls,
                 "arithmetic": list(r.lines) if r is not None else []}
                for p, r in zip(orders, reports)]
        typer.echo(json.dumps(summary, indent=2))
        return
    if output:
        typer.echo(f"wrote {output}: {tgt.describe()}")
        if spec is not None:
            typer.echo(_order_text(spec))
    if not many:
        if shown:
            typer.echo(format_tree(rev.tree))
        else:
            typer.echo(f"# tree: {stats(rev.tree)} (--tree prints it)")
        for note in rev.notes:
            typer.echo(f"note: {note}", err=True)
        for line in lines:
            typer.echo(line)
        typer.echo(f"{rev.queries} queries, {rev.calls} calls, {rev.seconds:.3f} s ({rev.algorithm})", err=True)
        return
    total = sum(p.revelation.calls for p in orders)
    typer.echo(f"note: {len(orders)} orders across the {tgt.m} x {tgt.ncols if tgt.op == 'gemm' else 1} outputs",
               err=True)
    for k, (p, r) in enumerate(zip(orders, reports)):
        typer.echo(f"order {k}: {int(p.mask.sum())} outputs, revealed at row {p.at[0]}, column {p.at[1]}")
        typer.echo(format_tree(p.revelation.tree) if shown
                   else f"# tree: {stats(p.revelation.tree)} (--tree prints it)")
        for line in (r.lines if r is not None else ()):
            typer.echo(line)
    typer.echo(f"{sum(p.revelation.queries for p in orders)} queries, {total} calls, "
               f"{sum(p.revelation.seconds for p in orders):.3f} s ({rev.algorithm})", err=True)
