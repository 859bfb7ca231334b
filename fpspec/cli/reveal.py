"""`fpspec reveal TARGET -n N`: print (or write) the summation tree of a library function."""
from __future__ import annotations

import datetime
import json
import platform
import shlex
import sys
from typing import Optional

import typer

from fpspec.cli import app
from fpspec.errors import FpspecError


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
    return str(spec)


def _parse_n(text: str) -> tuple[int, int | None]:
    """'32' -> (32, None); '1..65536' -> (1, 65536)."""
    try:
        if ".." in text:
            lo, hi = text.split("..", 1)
            lo_i, hi_i = int(lo), int(hi)
            if lo_i < 1 or hi_i < lo_i:
                raise ValueError
            return lo_i, hi_i
        return int(text), None
    except ValueError:
        raise FpspecError(f"-n must be an integer or a range like 1..65536, got {text!r}") from None


def _reveal_range(target, lo, hi, *, dtype, op, m, ncols, device, seed, no_probe, output, as_json, argv):
    """-n LO..HI: reveal at a designed set of n and infer one parametric spec (fpspec.infer)."""
    from fpspec.infer import infer_spec

    command = "fpspec " + " ".join(shlex.quote(a) for a in argv) if argv else None
    result = infer_spec(target, (lo, hi), seed=seed, probe=not no_probe, progress=sys.stderr.isatty(),
                        command=command, dtype=dtype, op=op, m=m, ncols=ncols, device=device)
    if output:
        from fpspec.io import write_atomic

        try:
            write_atomic(output, str(result.spec))
        except OSError as e:
            raise FpspecError(f"cannot write {output}: {e.strerror or e}") from None
    if as_json:
        typer.echo(json.dumps(result.to_json(), indent=2))
    else:
        typer.echo(str(result.spec))
    typer.echo(result.report(), err=True)
    if not result.ok:
        raise typer.Exit(1)


@app.command()
def reveal(
    target: str = typer.Argument(..., help="numpy.sum, torch.matmul, jax.numpy.dot, or package.module:function"),
    n: str = typer.Option(..., "-n", help="reduction length (K for matrix products), or a range LO..HI"),
    dtype: str = typer.Option("float32", "--dtype", help="input format: float64, float32, float16, bfloat16, ..."),
    op: Optional[str] = typer.Option(None, "--op", help="sum | dot | gemv | gemm (required for user callables)"),
    m: Optional[int] = typer.Option(None, "--m", help="rows of the output (gemv, gemm)"),
    ncols: Optional[int] = typer.Option(None, "--ncols", help="columns of the output (gemm)"),
    device: str = typer.Option("cpu", "--device", help="cpu or cuda"),
    output: Optional[str] = typer.Option(None, "-o", "--output", help="write the order here: a .fps spec (lowered, with provenance and the probed arithmetic)"),
    file_format: str = typer.Option("fps", "--format", help="what -o writes: fps (a spec) or tree (the bracket tree with a # header)"),
    as_json: bool = typer.Option(False, "--json", help="print a JSON summary instead of the tree"),
    no_probe: bool = typer.Option(False, "--no-probe", help="skip the arithmetic probes"),
    algorithm: str = typer.Option("auto", "--algorithm", help="basic | fprev | modified | auto"),
    seed: int = typer.Option(0, "--seed", help="seed for the random pivots"),
    tf32: bool = typer.Option(False, "--tf32", help="torch on cuda: allow TF32 for fp32 matmul"),
    masks: str = typer.Option("auto", "--masks", help="products: auto | split (sqrt(M) in each operand) | unsplit"),
) -> None:
    """Reveal the accumulation order of TARGET at length n and print it as a tree."""
    from fpspec.reveal.engine import reveal as run_reveal
    from fpspec.reveal.targets import resolve_target
    from fpspec.tree import format_tree

    lo, hi = _parse_n(n)
    splits = {"auto": None, "split": True, "unsplit": False}
    if masks not in splits:
        raise FpspecError(f"--masks must be auto, split or unsplit, got {masks!r}")
    if hi is not None:
        _reveal_range(target, lo, hi, dtype=dtype, op=op, m=m, ncols=ncols, device=device, seed=seed,
                      no_probe=no_probe, output=output, as_json=as_json,
                      argv=["reveal", *sys.argv[2:]] if sys.argv[1:2] == ["reveal"] else None)
        return
    if tf32:
        import torch

        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    tgt = resolve_target(target, op=op, n=lo, dtype=dtype, m=m, ncols=ncols, device=device)
    rev = run_reveal(tgt, algorithm=algorithm, seed=seed, progress=sys.stderr.isatty(), split=splits[masks])
    if file_format not in ("fps", "tree"):
        raise FpspecError(f"--format must be fps or tree, got {file_format!r}")
    lines: list[str] = []
    report = None
    if not no_probe:
        from fpspec.arith.probe import probe_arithmetic

        report = probe_arithmetic(tgt, rev.tree)
        lines = list(report.lines)
    argv = ["reveal", target, "-n", n, "--dtype", dtype]
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
    argv += [flag for flag, on in (("--tf32", tf32), ("--no-probe", no_probe), ("--json", as_json)) if on]
    prov = provenance(tgt, argv)
    if tf32:
        prov["tf32"] = True
    if output:
        from fpspec.io import write_atomic

        try:
            text = (spec_file_text(rev.tree, prov, rev, report, tgt, lines) if file_format == "fps"
                    else tree_file_text(rev.tree, prov, rev, lines))
            write_atomic(output, text)
        except OSError as e:
            raise FpspecError(f"cannot write {output}: {e.strerror or e}") from None
    if as_json:
        summary = rev.summary()
        summary["provenance"] = prov
        summary["tree"] = format_tree(rev.tree)
        if lines:
            summary["arithmetic"] = lines
        typer.echo(json.dumps(summary, indent=2))
        return
    typer.echo(format_tree(rev.tree))
    for note in rev.notes:
        typer.echo(f"note: {note}", err=True)
    for line in lines:
        typer.echo(line)
    typer.echo(f"{rev.queries} queries, {rev.calls} calls, {rev.seconds:.3f} s ({rev.algorithm})", err=True)
