"""`python -m fpspec.infer TARGET -n LO..HI`: one parametric spec for a range of n.

The same loop `fpspec reveal TARGET -n LO..HI` runs (once the reveal command
hands ranges to fpspec.infer.infer_spec); this entry point exists so that the
inference can be run and its JSON kept on its own:

    python -m fpspec.infer numpy.sum -n 1..65536 --dtype float32 -o numpy_sum.fps --json fit.json
    python -m fpspec.infer numpy.sum -n 1..16777216 --check 1048576 --check 16777216
"""
from __future__ import annotations

import json
import shlex
import sys
from typing import List, Optional

import typer

from fpspec.errors import FpspecError
from fpspec.infer import AUTO, TIME_LIMIT_HELP

app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)


@app.command()
def main(
    target: str = typer.Argument(..., help="numpy.sum, numpy.dot, torch.sum, torch.matmul, or package.module:function"),
    n: str = typer.Option(..., "-n", help="range of n, LO..HI"),
    dtype: str = typer.Option("float32", "--dtype"),
    op: Optional[str] = typer.Option(None, "--op", help="sum | dot | gemv | gemm"),
    m: Optional[int] = typer.Option(None, "--m", help="rows of the output (gemv, gemm)"),
    ncols: Optional[int] = typer.Option(None, "--ncols", help="columns of the output (gemm)"),
    device: str = typer.Option("cpu", "--device"),
    output: Optional[str] = typer.Option(None, "-o", "--output", help="write the spec here"),
    json_out: Optional[str] = typer.Option(None, "--json", help="write per-n timings and the fit here ('-' prints)"),
    exact: bool = typer.Option(False, "--exact", help="reveal every checked n in full (no sampled checks)"),
    check: List[int] = typer.Option([], "--check", help="also check at this n (sampled above --full-limit)"),
    holdout: int = typer.Option(16, "--holdout", help="fresh random n compared after fitting"),
    full_limit: int = typer.Option(8192, "--full-limit", help="largest n revealed in full"),
    replica: str = typer.Option("numba", "--replica", help="backend of the replica in sampled checks, or 'none'"),
    no_probe: bool = typer.Option(False, "--no-probe", help="skip the arithmetic probes"),
    seed: int = typer.Option(0, "--seed"),
    trace: Optional[str] = typer.Option(None, "--trace", help="append one JSON line per revealed n to this file"),
    quiet: bool = typer.Option(False, "--quiet", help="no progress bar"),
    arithmetic: Optional[str] = typer.Option(None, "--arithmetic",
                                             help="a .fps file whose arithmetic section to use instead of probing"),
    positions: bool = typer.Option(True, "--positions/--no-positions",
                                   help="gemv/gemm: one spec per group of outputs sharing an order, merged "
                                        "under an `if` on the output row i, column j"),
    time_limit: Optional[float] = typer.Option(None, "--time-limit", metavar="SECONDS", help=TIME_LIMIT_HELP),
) -> None:
    """Infer one spec for every n in LO..HI and say how it was checked."""
    from fpspec.infer.engine import infer_spec, process_start

    started = process_start()      # --time-limit counts from the command's start
    from fpspec.io import write_atomic

    try:
        lo_s, hi_s = n.split("..", 1)
        lo, hi = int(lo_s), int(hi_s)
    except ValueError:
        raise FpspecError(f"-n must be a range like 1..65536, got {n!r}") from None
    command = "python -m fpspec.infer " + " ".join(shlex.quote(a) for a in sys.argv[1:])
    infer = infer_spec
    if positions and op in ("gemv", "gemm"):
        from fpspec.infer.positions import infer_positions as infer
    known = arithmetic_section(arithmetic) if arithmetic else None
    result = infer(target, (lo, hi), seed=seed, arithmetic=known, exact=exact, progress=not quiet and sys.stderr.isatty(),
                        holdout=holdout, full_limit=full_limit, checks=tuple(check),
                        replica=None if replica == "none" else replica, probe=not no_probe,
                        command=command, trace=trace, dtype=dtype, op=op, m=m, ncols=ncols, device=device,
                        time_limit=AUTO if time_limit is None else time_limit, started=started)
    if output:
        write_atomic(output, str(result.spec))
    else:
        typer.echo(str(result.spec))
    typer.echo(result.report(), err=True)
    if json_out == "-":
        typer.echo(json.dumps(result.to_json(), indent=2))
    elif json_out:
        write_atomic(json_out, json.dumps(result.to_json(), indent=2) + "\n")
    if not result.ok:
        raise typer.Exit(1)


def arithmetic_section(path: str):
    """The `arithmetic { ... }` section of a .fps file, for --arithmetic."""
    from fpspec.io import read_text
    from fpspec.spec import parse

    text = read_text(path, ".fps spec with an arithmetic section")
    block = parse(text, str(path)).header.arithmetic
    if block is None:
        raise FpspecError(f"{path} has no arithmetic section; expected `arithmetic {{ ... }}` in its header")
    return block


def run(argv=None) -> int:
    try:
        app(args=argv, standalone_mode=False)
    except FpspecError as e:
        print(f"fpspec: error: {e}", file=sys.stderr)
        return e.exit_code
    except typer.Exit as e:
        return e.exit_code
    return 0


if __name__ == "__main__":
    sys.exit(run())
