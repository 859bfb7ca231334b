"""`fpspec audit TARGET --m 1..4096 -n K`: is the op's order the same at every batch size?"""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Optional

import typer

from fpspec.cli import app
from fpspec.cli.common import check_device, check_dtype, write_output
from fpspec.errors import FpspecError


class NotInvariant(FpspecError):
    """The audit found more than one class: a verdict, exit code 1."""

    exit_code = 1


def _size(text: str | None, option: str) -> int | tuple[int, int] | None:
    """'64' -> 64; '1..4096' -> (1, 4096)."""
    if text is None:
        return None
    lo, dots, hi = text.partition("..")
    try:
        value = (int(lo), int(hi)) if dots else int(lo)
    except ValueError:
        raise FpspecError(f"{option} must be an integer or a range LO..HI, got {text!r}") from None
    if min(value if dots else (value,)) < 1:
        raise FpspecError(f"{option} {text}: sizes are integers >= 1")
    return value


@app.command()
def audit(
    target: str = typer.Argument(..., metavar="TARGET",
                                 help="torch.matmul, torch.nn.functional.linear, torch.bmm, torch.sum, torch.mean, "
                                      "numpy.matmul, or package.module:function"),
    op: Optional[str] = typer.Option(None, "--op", help="gemm | gemv | sum | dot"),
    m: Optional[str] = typer.Option(None, "--m", help="batch M (rows of A; torch.bmm: the leading dim): a range "
                                                      "LO..HI to audit, or one size with --vary n|N"),
    n: str = typer.Option(..., "-n", help="reduction length K (a range LO..HI with --vary n)"),
    ncols: Optional[str] = typer.Option(None, "--ncols", help="output width N of a gemm (a range with --vary N)"),
    dtype: str = typer.Option("float32", "--dtype", help="input format: float32, float16, bfloat16, ..."),
    device: str = typer.Option("cpu", "--device", help="cpu or cuda"),
    rows: str = typer.Option("0", "--rows", help="0: the order of output row 0; all: of every output element"),
    vary: str = typer.Option("m", "--vary", help="the size that varies: m (batch), n (reduction length), N (width)"),
    bias: bool = typer.Option(False, "--bias", help="torch.nn.functional.linear with a (zero) bias"),
    no_probe: bool = typer.Option(False, "--no-probe", help="compare orders only (skip the arithmetic probes)"),
    as_json: bool = typer.Option(False, "--json", help="print the audit as JSON"),
    output: Optional[Path] = typer.Option(None, "-o", "--output", help="a directory: each class's spec is written "
                                                                       "there as class<K>.fps"),
    seed: int = typer.Option(0, "--seed", help="seed of the revelations' random pivots"),
) -> None:
    """Reveal the order of a fixed output row at every batch size and group the sizes into
    classes of identical order + arithmetic (exit 0: batch-invariant, 1: not)."""
    from fpspec.audit import audit as run_audit
    from fpspec.audit import audit_subject
    from fpspec.progress import reporting

    check_dtype(dtype)
    check_device(device)
    if output is not None and not output.is_dir():
        raise FpspecError(f"-o {output}: not a directory (the audit writes one spec per class into it)")
    sizes = {"m": _size(m, "--m"), "n": _size(n, "-n"), "N": _size(ncols, "--ncols")}
    if vary == "m" and sizes["m"] is None:
        raise FpspecError("give the batch sizes to audit: --m LO..HI")
    subject = audit_subject(target, op=op, vary=vary, m=sizes["m"] or 1, n=sizes["n"], ncols=sizes["N"],
                            dtype=dtype, device=device, bias=bias, rows=rows)
    with reporting(_Bar() if sys.stderr.isatty() else None):
        result = run_audit(subject, probe=not no_probe, seed=seed)
    if output is not None:
        for c in result.classes:
            for k, o in enumerate(c.sample.orders):
                name = f"class{c.index}.fps" if len(c.sample.orders) == 1 else f"class{c.index}_order{k}.fps"
                ranges = ", ".join(f"{lo}..{hi}" for lo, hi in c.ranges)
                text = f"# {result.subject.describe()}: {result._dim()} in {ranges}\n{o.spec}"
                write_output(output / name, text if text.endswith("\n") else text + "\n", "-o")
    if as_json:
        typer.echo(json.dumps(result.to_json(), indent=2))
    else:
        typer.echo(result.report())
    if not result.invariant:
        raise typer.Exit(1)


class _Bar:
    """Phases on stderr, one line each (a terminal only)."""

    def start(self, name, total):
        self.name, self.total, self.done = name, total, 0

    def advance(self, name, steps):
        self.done += steps
        of = f"/{self.total}" if self.total else ""
        print(f"\r{name}: {self.done}{of}", end="", file=sys.stderr, flush=True)

    def finish(self, name):
        print(file=sys.stderr)
