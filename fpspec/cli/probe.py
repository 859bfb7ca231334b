"""`fpspec probe TARGET -n N`: the arithmetic of a target (accumulator, products, fused-node parameters).

The probes go inside the nodes of the target's tree: given with --tree (text
form or a file holding it), or revealed first.  Exit codes: 0 the arithmetic
found reproduces every probe and random check, 1 it does not, 2 bad input.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from fpspec.cli import app
from fpspec.cli.common import at_least, check_device, check_dtype, check_output, write_output
from fpspec.io import read_text
from fpspec.errors import FpspecError


class NotReproduced(FpspecError):
    """A verdict, not bad input: no arithmetic in the model's space reproduces the target."""

    exit_code = 1


def _tree_from(text: str):
    from fpspec.tree import TreeSyntaxError, parse_tree

    where = "--tree"
    if not text.strip():
        raise FpspecError("--tree: empty; expected a tree like ((0 1) 2) or a file holding one")
    if not text.lstrip().startswith(("(", "[")) and not text.strip().isdigit():
        # not a tree, so a file holding one: a missing file is named as such,
        # not parsed as a tree whose first character is wrong
        if not Path(text).exists():
            raise FpspecError(f"--tree {text}: no such file (and not a tree like ((0 1) 2))")
        lines = [ln for ln in read_text(text, "tree").splitlines()
                 if ln.strip() and not ln.lstrip().startswith("#")]
        text, where = " ".join(lines), f"--tree {text}"
    try:
        return parse_tree(text)
    except (TreeSyntaxError, ValueError) as e:    # ValueError: leaves not 0..n-1 once each
        raise FpspecError(f"{where}: {e}") from None


def section_text(arithmetic) -> str:
    """The spec's `arithmetic { ... }` section for `arithmetic`."""
    from fpspec.spec.ast import Block

    return str(Block("arithmetic", arithmetic.to_entries()))


@app.command()
def probe(
    target: str = typer.Argument(..., metavar="TARGET", help="numpy.sum, torch.matmul, pkg.mod:func, ..."),
    n: int = typer.Option(..., "-n", help="reduction length (K for matrix products)"),
    dtype: str = typer.Option("float32", "--dtype", help="input format: float64, float32, float16, bfloat16, ..."),
    op: Optional[str] = typer.Option(None, "--op", help="sum | dot | gemv | gemm (required for user callables)"),
    m: Optional[int] = typer.Option(None, "--m", help="rows of the output (gemv, gemm)"),
    ncols: Optional[int] = typer.Option(None, "--ncols", help="columns of the output (gemm)"),
    device: str = typer.Option("cpu", "--device", help="cpu or cuda"),
    tree: Optional[str] = typer.Option(None, "--tree", help="the target's tree (text form, or a file); default: reveal it"),
    seed: int = typer.Option(0, "--seed", help="seed of the random probes"),
    rows: int = typer.Option(300, "--rows", help="random probe inputs per stage"),
    as_json: bool = typer.Option(False, "--json", help="print a JSON report"),
    output: Optional[str] = typer.Option(None, "-o", "--output", help="write the arithmetic section here"),
) -> None:
    """Find the arithmetic of TARGET with FTTN-style probes placed inside its tree."""
    from fpspec.arith.probe import probe_arithmetic
    from fpspec.reveal.targets import resolve_target

    if rows < 1:
        raise FpspecError(f"--rows {rows}: expected a count >= 1")
    at_least(n, 2, "-n")
    at_least(m, 1, "--m")
    at_least(ncols, 1, "--ncols")
    check_dtype(dtype)
    check_device(device)
    check_output(output, "-o")
    tgt = resolve_target(target, op=op, n=n, dtype=dtype, m=m, ncols=ncols, device=device)
    if tree is not None:
        t = _tree_from(tree)
    else:
        try:
            from fpspec.reveal.engine import reveal as run_reveal
        except ImportError:
            raise FpspecError("the revelation engine is not available here; pass the tree with --tree") from None
        t = run_reveal(tgt).tree
    report = probe_arithmetic(tgt, t, seed=seed, rows=rows)
    section = section_text(report.arithmetic)
    if as_json:
        typer.echo(json.dumps({"target": tgt.describe(), "consistent": report.consistent,
                               "lines": list(report.lines), "arithmetic": section,
                               "probes": report.probes, "checked": report.checked,
                               "mismatches": report.mismatches, "undetermined": list(report.undetermined)},
                              indent=2))
    else:
        typer.echo("\n".join(report.lines))
        typer.echo(section)
    if not report.consistent:
        # a section that does not reproduce the target must not replace one the user had
        kept = f"; {output} not written" if output else ""
        raise NotReproduced(f"the probed arithmetic does not reproduce {target} (see the report above){kept}")
    if output:
        write_output(output, section + "\n", "-o")
